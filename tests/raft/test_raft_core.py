"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), first part: progress and flow
control, uncommitted size limit, learners, leader cycles, voting from any state, log
replication, commit rules, dueling candidates, proposals (also by proxy), election
timeouts and the handling of MsgApp / heartbeats."""

from __future__ import annotations

import math

import pytest
from entry_helpers import terms
from raft_harness import (
    NOP_STEPPER,
    BlackHole,
    Network,
    advance_messages_after_append,
    ents_with_config,
    ltoa,
    new_network,
    new_network_with_config,
    new_test_config,
    new_test_memory_storage,
    new_test_raft,
    next_ents,
    pre_vote_config,
    raft_of,
    read_messages,
    set_randomized_election_timeout,
    voted_with_config,
    with_learners,
    with_peers,
)

from natsd.raft.core import (
    NONE,
    Raft,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
    StateType,
    new_raft,
)
from natsd.raft.describe import vote_resp_msg_type
from natsd.raft.log import new_log, payload_size, payloads_size
from natsd.raft.logger import DiscardLogger
from natsd.raft.state import ErrProposalDropped
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddNode,
    Entry,
    HardState,
    Message,
    MessageType,
)

MsgApp = MessageType.MsgApp
MsgAppResp = MessageType.MsgAppResp
MsgBeat = MessageType.MsgBeat
MsgHeartbeat = MessageType.MsgHeartbeat
MsgHeartbeatResp = MessageType.MsgHeartbeatResp
MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp
MsgVote = MessageType.MsgVote
MsgPreVote = MessageType.MsgPreVote


def hup(id: int) -> Message:
    return Message(from_=id, to=id, type=MsgHup)


def prop(id: int, data: bytes = b"somedata", to: int | None = None) -> Message:
    return Message(from_=id, to=id if to is None else to, type=MsgProp, entries=[Entry(data=data)])


def beat(id: int) -> Message:
    return Message(from_=id, to=id, type=MsgBeat)


def test_progress_leader() -> None:
    s = new_test_memory_storage(with_peers(1, 2))
    r = new_test_raft(1, 5, 1, s)
    r.become_candidate()
    r.become_leader()
    r.trk.progress[2].become_replicate()
    # Send proposals to r1. The first 5 entries should be queued in the unstable log.
    prop_msg = prop(1, b"foo")
    for _ in range(5):
        r.step(prop_msg)
    assert r.trk.progress[1].match == 0
    ents = r.raft_log.next_unstable_ents()
    assert len(ents) == 6
    assert ents[0].data == b""
    assert ents[5].data == b"foo"
    advance_messages_after_append(r)
    assert r.trk.progress[1].match == 6
    assert r.trk.progress[1].next == 7


def test_progress_resume_by_heartbeat_resp() -> None:
    """raft.heartbeat resets progress.paused by heartbeat response."""
    r = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2)))
    r.become_candidate()
    r.become_leader()
    r.trk.progress[2].msg_app_flow_paused = True
    r.step(beat(1))
    assert r.trk.progress[2].msg_app_flow_paused
    r.trk.progress[2].become_replicate()
    assert not r.trk.progress[2].msg_app_flow_paused
    r.trk.progress[2].msg_app_flow_paused = True
    r.step(Message(from_=2, to=1, type=MsgHeartbeatResp))
    assert not r.trk.progress[2].msg_app_flow_paused


def test_progress_paused() -> None:
    r = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2)))
    r.become_candidate()
    r.become_leader()
    for _ in range(3):
        r.step(prop(1))
    assert len(read_messages(r)) == 1


def test_progress_flow_control() -> None:
    cfg = new_test_config(1, 5, 1, new_test_memory_storage(with_peers(1, 2)))
    cfg.max_inflight_msgs = 3
    cfg.max_size_per_msg = 2048
    cfg.max_inflight_bytes = 9000  # A little over MaxInflightMsgs * MaxSizePerMsg.
    r = new_raft(cfg)
    r.become_candidate()
    r.become_leader()
    # Throw away all the messages relating to the initial election.
    read_messages(r)
    # While node 2 is in probe state, propose a bunch of entries.
    r.trk.progress[2].become_probe()
    blob = b"a" * 1000
    large = b"b" * 5000
    for i in range(22):
        r.step(prop(1, large if 10 <= i < 16 else blob))  # temporarily large messages
    ms = read_messages(r)
    # First append has two entries: the empty entry to confirm the election, and the first
    # proposal (only one proposal gets sent because we're in probe state).
    assert len(ms) == 1
    assert ms[0].type == MsgApp
    assert len(ms[0].entries) == 2
    assert ms[0].entries[0].data == b""
    assert len(ms[0].entries[1].data) == 1000

    def ack_and_verify(index: int, *exp_entries: int) -> int:
        r.step(Message(from_=2, to=1, type=MsgAppResp, index=index))
        ms = read_messages(r)
        assert len(ms) == len(exp_entries)
        for i, m in enumerate(ms):
            assert m.type == MsgApp, f"#{i}"
            assert len(m.entries) == exp_entries[i], f"#{i}"
        last = ms[-1].entries
        if not last:
            return index
        return last[-1].index

    # When this append is acked, we change to replicate state and can send multiple
    # messages at once.
    index = ack_and_verify(ms[0].entries[1].index, 2, 2, 2)
    # Ack all three of those messages together and get another 3 messages. The third
    # message contains a single large entry, in contrast to 2 before.
    index = ack_and_verify(index, 2, 1, 1)
    # All subsequent messages contain one large entry, and we cap at 2 messages because it
    # overflows MaxInflightBytes.
    index = ack_and_verify(index, 1, 1)
    index = ack_and_verify(index, 1, 1)
    # Start getting small messages again.
    index = ack_and_verify(index, 1, 2, 2)
    ack_and_verify(index, 2)


def test_uncommitted_entry_limit() -> None:
    # Use a relatively large number of entries here to prevent regression of a bug which
    # computed the size before it was fixed.
    max_entries = 1024
    test_entry = Entry(data=b"testdata")
    max_entry_size = max_entries * payload_size(test_entry)
    assert payload_size(Entry()) == 0
    cfg = new_test_config(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    cfg.max_uncommitted_entries_size = max_entry_size
    cfg.max_inflight_msgs = 2 * 1024  # avoid interference
    r = new_raft(cfg)
    r.become_candidate()
    r.become_leader()
    assert r.uncommitted_size == 0
    # Set the two followers to the replicate state. Commit to tail of log.
    num_followers = 2
    r.trk.progress[2].become_replicate()
    r.trk.progress[3].become_replicate()
    r.uncommitted_size = 0
    # Send proposals to r1. The first 5 entries should be appended to the log.
    prop_msg = Message(from_=1, to=1, type=MsgProp, entries=[test_entry])
    prop_ents = [test_entry] * max_entries
    for _ in range(max_entries):
        r.step(prop_msg)
    # Send one more proposal to r1. It should be rejected.
    with pytest.raises(ErrProposalDropped):
        r.step(prop_msg)
    # Read messages and reduce the uncommitted size as if we had committed these entries.
    ms = read_messages(r)
    assert len(ms) == max_entries * num_followers
    r.reduce_uncommitted_size(payloads_size(prop_ents))
    assert r.uncommitted_size == 0
    # Send a single large proposal to r1. Should be accepted even though it pushes us above
    # the limit because we were beneath it before the proposal.
    prop_ents = [test_entry] * (2 * max_entries)
    r.step(Message(from_=1, to=1, type=MsgProp, entries=list(prop_ents)))
    # Send one more proposal to r1. It should be rejected, again.
    with pytest.raises(ErrProposalDropped):
        r.step(prop_msg)
    # But we can always append an entry with no Data. This is used both for the leader's
    # first empty entry and for auto-transitioning out of joint config states.
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    # Read messages and reduce the uncommitted size as if we had committed these entries.
    ms = read_messages(r)
    assert len(ms) == 2 * num_followers
    r.reduce_uncommitted_size(payloads_size(prop_ents))
    assert r.uncommitted_size == 0


def _learner_pair() -> tuple[Raft, Raft]:
    n1 = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    n2 = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    n1.become_follower(1, NONE)
    n2.become_follower(1, NONE)
    return n1, n2


def test_learner_election_timeout() -> None:
    """A learner can't campaign when its election times out."""
    _, n2 = _learner_pair()
    set_randomized_election_timeout(n2, n2.election_timeout)
    for _ in range(n2.election_timeout):
        n2.tick()
    assert n2.state == StateFollower


def test_learner_promotion() -> None:
    """A learner can be promoted to a voter and then campaign and win."""
    n1, n2 = _learner_pair()
    nt = new_network(n1, n2)
    assert n1.state != StateLeader
    # n1 should become leader
    set_randomized_election_timeout(n1, n1.election_timeout)
    for _ in range(n1.election_timeout):
        n1.tick()
    advance_messages_after_append(n1)
    assert n1.state == StateLeader
    assert n2.state == StateFollower
    nt.send(beat(1))
    n1.apply_conf_change(ConfChange(node_id=2, type=ConfChangeAddNode).as_v2())
    n2.apply_conf_change(ConfChange(node_id=2, type=ConfChangeAddNode).as_v2())
    assert not n2.is_learner
    # n2 start election, should become leader
    set_randomized_election_timeout(n2, n2.election_timeout)
    for _ in range(n2.election_timeout):
        n2.tick()
    advance_messages_after_append(n2)
    nt.send(beat(2))
    assert n1.state == StateFollower
    assert n2.state == StateLeader


def test_learner_can_vote() -> None:
    """A learner can vote when it receives a valid Vote request (see the comment in step
    on MsgVote)."""
    n2 = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    n2.become_follower(1, NONE)
    n2.step(Message(from_=1, to=2, term=2, type=MsgVote, log_term=11, index=11))
    msgs = read_messages(n2)
    assert len(msgs) == 1
    assert msgs[0].type == MessageType.MsgVoteResp
    assert not msgs[0].reject, "expected learner to not reject vote"


@pytest.mark.parametrize("pre_vote", [False, True])
def test_leader_cycle(pre_vote: bool) -> None:
    """Each node can campaign and be elected in turn. This ensures that elections
    (including pre-vote) work when not starting from a clean slate (as they do in
    test_leader_election)."""
    n = new_network_with_config(pre_vote_config if pre_vote else None, None, None, None)
    for campaigner_id in range(1, 4):
        n.send(hup(campaigner_id))
        for id in n.peers:
            sm = raft_of(n, id)
            want = StateLeader if sm.id == campaigner_id else StateFollower
            assert sm.state == want, (
                f"preVote={pre_vote}: campaigning node {campaigner_id}, node {id}"
            )


@pytest.mark.parametrize("pre_vote", [False, True])
def test_leader_election_overwrite_newer_logs(pre_vote: bool) -> None:
    """A node that won the second election can be replaced by a node that won the first
    election, and the uncommitted entries of the newer one are overwritten."""
    cfg = pre_vote_config if pre_vote else None
    # This network represents the results of the following sequence of events:
    # - Node 1 won the election in term 1.
    # - Node 1 replicated a log entry to node 2 but died before sending it to other nodes.
    # - Node 3 won the second election in term 2.
    # - Node 3 wrote an entry to its logs but died without sending it to any other nodes.
    #
    # At this point, nodes 1, 2, and 3 all have uncommitted entries in their logs and could
    # win an election at term 3. The winner's log entry overwrites the losers'.
    # (TestLeaderSyncFollowerLog tests the case where older log entries are overwritten,
    # so this test focuses on the case where the newer entries are lost).
    n = new_network_with_config(
        cfg,
        ents_with_config(cfg, 1),  # Node 1: Won first election
        ents_with_config(cfg, 1),  # Node 2: Got logs from node 1
        ents_with_config(cfg, 2),  # Node 3: Won second election
        voted_with_config(cfg, 3, 2),  # Node 4: Voted but didn't get logs
        voted_with_config(cfg, 3, 2),  # Node 5: Voted but didn't get logs
    )
    # Node 1 campaigns. The election fails because a quorum of nodes know about the
    # election that already happened at term 2. Node 1's term is pushed ahead to 2.
    n.send(hup(1))
    sm1 = raft_of(n, 1)
    assert sm1.state == StateFollower
    assert sm1.term == 2
    # Node 1 campaigns again with a higher term. This time it succeeds.
    n.send(hup(1))
    assert sm1.state == StateLeader
    assert sm1.term == 3
    # Now all nodes agree on a log entry with term 1 at index 1 (and term 3 at index 2).
    for id in n.peers:
        entries = raft_of(n, id).raft_log.all_entries()
        assert len(entries) == 2
        assert entries[0].term == 1
        assert entries[1].term == 3


@pytest.mark.parametrize("vt", [MsgVote, MsgPreVote])
@pytest.mark.parametrize("st", list(StateType))
def test_vote_from_any_state(vt: MessageType, st: StateType) -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    r.term = 1
    if st == StateFollower:
        r.become_follower(r.term, 3)
    elif st == StatePreCandidate:
        r.become_pre_candidate()
    elif st == StateCandidate:
        r.become_candidate()
    else:
        r.become_candidate()
        r.become_leader()
    # Note that setting our state above may have advanced r.term past its initial value.
    orig_term = r.term
    new_term = r.term + 1
    r.step(Message(from_=2, to=1, type=vt, term=new_term, log_term=new_term, index=42))
    msgs = read_messages(r)
    assert len(msgs) == 1
    assert msgs[0].type == vote_resp_msg_type(vt)
    assert not msgs[0].reject
    if vt == MsgVote:
        # If this was a real vote, we reset our state and term.
        assert r.state == StateFollower
        assert r.term == new_term
        assert r.vote == 2
    else:
        # In a prevote, nothing changes.
        assert r.state == st
        assert r.term == orig_term
        # if st == StateFollower or StatePreCandidate, r hasn't voted yet. In
        # StateCandidate or StateLeader, it's voted for itself.
        assert r.vote in (NONE, 1)


@pytest.mark.parametrize(
    ("msgs", "wcommitted"),
    [
        ([prop(1)], 2),
        ([prop(1), Message(from_=1, to=2, type=MsgHup), prop(1, to=2)], 4),
    ],
)
def test_log_replication(msgs: list[Message], wcommitted: int) -> None:
    nw = new_network(None, None, None)
    nw.send(hup(1))
    props = [m for m in msgs if m.type == MsgProp]
    datas = [m.entries[0].data for m in props]
    for m in msgs:
        nw.send(m)
    for j in nw.peers:
        sm = raft_of(nw, j)
        assert sm.raft_log.committed == wcommitted, f"#{j}"
        ents = [e for e in next_ents(sm, nw.storage[j]) if e.data]
        assert [e.data for e in ents] == datas, f"#{j}"


def test_learner_log_replication() -> None:
    """A learner can receive entries from the leader."""
    n1, n2 = _learner_pair()
    nt = new_network(n1, n2)
    set_randomized_election_timeout(n1, n1.election_timeout)
    for _ in range(n1.election_timeout):
        n1.tick()
    advance_messages_after_append(n1)
    nt.send(beat(1))
    # n1 is leader and n2 is learner
    assert n1.state == StateLeader
    assert n2.is_learner
    next_committed = 2
    nt.send(prop(1))
    assert n1.raft_log.committed == next_committed
    assert n2.raft_log.committed == n1.raft_log.committed
    assert n1.trk.progress[2].match == n2.raft_log.committed


def test_single_node_commit() -> None:
    s = new_test_memory_storage(with_peers(1))
    r = new_raft(new_test_config(1, 10, 1, s))
    tt = new_network(r)
    tt.send(hup(1))
    tt.send(prop(1, b"some data"))
    tt.send(prop(1, b"some data"))
    assert raft_of(tt, 1).raft_log.committed == 3


def test_cannot_commit_without_new_term_entry() -> None:
    """Entries cannot be committed when leader changes, no new proposal comes in and
    ChangeTerm proposal is filtered."""
    tt = new_network(None, None, None, None, None)
    tt.send(hup(1))
    # 0 cannot reach 2,3,4
    tt.cut(1, 3)
    tt.cut(1, 4)
    tt.cut(1, 5)
    tt.send(prop(1, b"some data"))
    tt.send(prop(1, b"some data"))
    sm = raft_of(tt, 1)
    assert sm.raft_log.committed == 1
    # network recovery
    tt.recover()
    # avoid committing ChangeTerm proposal
    tt.ignore(MsgApp)
    # elect 2 as the new leader with term 2
    tt.send(hup(2))
    # no log entries from previous term should be committed
    sm = raft_of(tt, 2)
    assert sm.raft_log.committed == 1
    tt.recover()
    # send heartbeat; reset wait
    tt.send(beat(2))
    # append an entry at current term
    tt.send(prop(2, b"some data"))
    # expect the committed to be advanced
    assert sm.raft_log.committed == 5


def test_commit_without_new_term_entry() -> None:
    """Entries could be committed when leader changes, no new proposal comes in."""
    tt = new_network(None, None, None, None, None)
    tt.send(hup(1))
    # 0 cannot reach 3,4,5
    tt.cut(1, 3)
    tt.cut(1, 4)
    tt.cut(1, 5)
    tt.send(prop(1, b"some data"))
    tt.send(prop(1, b"some data"))
    sm = raft_of(tt, 1)
    assert sm.raft_log.committed == 1
    # network recovery
    tt.recover()
    # elect 2 as the new leader with term 2; after append a ChangeTerm entry from the
    # current term, all entries should be committed
    tt.send(hup(2))
    assert sm.raft_log.committed == 4


def _three(pre_vote: bool) -> tuple[Raft, Raft, Raft]:
    rs = []
    for id in (1, 2, 3):
        cfg = new_test_config(id, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
        cfg.pre_vote = pre_vote
        rs.append(new_raft(cfg))
    return rs[0], rs[1], rs[2]


def test_dueling_candidates() -> None:
    a, b, c = _three(False)
    nt = new_network(a, b, c)
    nt.cut(1, 3)
    nt.send(hup(1))
    nt.send(hup(3))
    # 1 becomes leader since it receives votes from 1 and 2
    assert a.state == StateLeader
    # 3 stays as candidate since it receives a vote from 3 and a rejection from 2
    assert c.state == StateCandidate
    nt.recover()
    # candidate 3 now increases its term and tries to vote again; we expect it to disrupt
    # the leader 1 since it has a higher term. 3 will be follower again since both 1 and 2
    # rejects its vote request since 3 does not have a long enough log
    nt.send(hup(3))
    assert c.state == StateFollower
    for sm, state, term, last_index in (
        (a, StateFollower, 2, 1),
        (b, StateFollower, 2, 1),
        (c, StateFollower, 2, 0),
    ):
        assert (sm.state, sm.term, sm.raft_log.last_index()) == (state, term, last_index)


def test_dueling_pre_candidates() -> None:
    a, b, c = _three(True)
    nt = new_network(a, b, c)
    nt.cut(1, 3)
    nt.send(hup(1))
    nt.send(hup(3))
    # 1 becomes leader since it receives votes from 1 and 2
    assert a.state == StateLeader
    # 3 campaigns then reverts to follower when its PreVote is rejected
    assert c.state == StateFollower
    nt.recover()
    # Candidate 3 now increases its term and tries to vote again. With PreVote, it does
    # not disrupt the leader.
    nt.send(hup(3))
    for sm, state, term, last_index in (
        (a, StateLeader, 1, 1),
        (b, StateFollower, 1, 1),
        (c, StateFollower, 1, 0),
    ):
        assert (sm.state, sm.term, sm.raft_log.last_index()) == (state, term, last_index)


def _want_log(*ents: Entry) -> tuple[int, int, int, list[Entry]]:
    return ltoa(new_log(MemoryStorage([Entry(), *ents]), DiscardLogger()))


def _check_logs(nw: Network, want: tuple[int, int, int, list[Entry]]) -> None:
    for id, p in nw.peers.items():
        if isinstance(p, BlackHole):
            continue
        assert ltoa(raft_of(nw, id).raft_log) == want, f"peer {id}"


def test_candidate_concede() -> None:
    tt = new_network(None, None, None)
    tt.isolate(1)
    tt.send(hup(1))
    tt.send(hup(3))
    # heal the partition
    tt.recover()
    # send heartbeat; reset wait
    tt.send(beat(3))
    data = b"force follower"
    # send a proposal to 3 to flush out a MsgApp to 1
    tt.send(prop(3, data))
    # send heartbeat; flush out commit
    tt.send(beat(3))
    a = raft_of(tt, 1)
    assert a.state == StateFollower
    assert a.term == 1
    _check_logs(tt, _want_log(Entry(term=1, index=1), Entry(term=1, index=2, data=data)))


@pytest.mark.parametrize("pre_vote", [False, True])
def test_single_node_candidate(pre_vote: bool) -> None:
    tt = new_network_with_config(pre_vote_config if pre_vote else None, None)
    tt.send(hup(1))
    assert raft_of(tt, 1).state == StateLeader


def test_old_messages() -> None:
    tt = new_network(None, None, None)
    # make 0 leader @ term 3
    tt.send(hup(1))
    tt.send(hup(2))
    tt.send(hup(1))
    # pretend we're an old leader trying to make progress; this entry is expected to be
    # ignored.
    tt.send(Message(from_=2, to=1, type=MsgApp, term=2, entries=terms(3, 2)))
    # commit a new entry
    tt.send(prop(1))
    ents = terms(0, 0, 1, 2, 3, 3)
    ents[4].data = b"somedata"
    _check_logs(tt, ltoa(new_log(MemoryStorage(ents), DiscardLogger())))


@pytest.mark.parametrize(
    ("peers", "success"),
    [
        ([None, None, None], True),
        ([None, None, NOP_STEPPER], True),
        ([None, NOP_STEPPER, NOP_STEPPER], False),
        ([None, NOP_STEPPER, NOP_STEPPER, None], False),
        ([None, NOP_STEPPER, NOP_STEPPER, None, None], True),
    ],
)
def test_proposal(peers: list[Raft | BlackHole | None], success: bool) -> None:
    tt = new_network(*peers)
    data = b"somedata"
    # promote 1 to become leader
    tt.send(hup(1))
    tt.send(prop(1, data))
    if success:
        want = _want_log(Entry(term=1, index=1), Entry(term=1, index=2, data=data))
    else:
        want = _want_log()
    _check_logs(tt, want)
    assert raft_of(tt, 1).term == 1


@pytest.mark.parametrize("third", [None, NOP_STEPPER])
def test_proposal_by_proxy(third: BlackHole | None) -> None:
    tt = new_network(None, None, third)
    data = b"somedata"
    # promote 1 the leader
    tt.send(hup(1))
    # propose via follower
    tt.send(prop(2, data))
    _check_logs(tt, _want_log(Entry(term=1, index=1), Entry(term=1, index=2, data=data)))
    assert raft_of(tt, 1).term == 1


@pytest.mark.parametrize(
    ("matches", "logs", "sm_term", "w"),
    [
        # single
        ([1], terms(1, 1), 1, 1),
        ([1], terms(1, 1), 2, 0),
        ([2], terms(1, 1, 2), 2, 2),
        ([1], terms(1, 2), 2, 1),
        # odd
        ([2, 1, 1], terms(1, 1, 2), 1, 1),
        ([2, 1, 1], terms(1, 1, 1), 2, 0),
        ([2, 1, 2], terms(1, 1, 2), 2, 2),
        ([2, 1, 2], terms(1, 1, 1), 2, 0),
        # even
        ([2, 1, 1, 1], terms(1, 1, 2), 1, 1),
        ([2, 1, 1, 1], terms(1, 1, 1), 2, 0),
        ([2, 1, 1, 2], terms(1, 1, 2), 1, 1),
        ([2, 1, 1, 2], terms(1, 1, 1), 2, 0),
        ([2, 1, 2, 2], terms(1, 1, 2), 2, 2),
        ([2, 1, 2, 2], terms(1, 1, 1), 2, 0),
    ],
)
def test_commit(matches: list[int], logs: list[Entry], sm_term: int, w: int) -> None:
    storage = new_test_memory_storage(with_peers(1))
    storage.append(logs)
    storage.hard_state = HardState(term=sm_term)
    sm = new_test_raft(1, 10, 2, storage)
    for j, m in enumerate(matches):
        id = j + 1
        if id > 1:
            sm.apply_conf_change(ConfChange(type=ConfChangeAddNode, node_id=id).as_v2())
        pr = sm.trk.progress[id]
        pr.match, pr.next = m, m + 1
    sm.maybe_commit()
    assert sm.raft_log.committed == w


@pytest.mark.parametrize(
    ("elapse", "wprobability", "round_"),
    [
        (5, 0.0, False),
        (10, 0.1, True),
        (13, 0.4, True),
        (15, 0.6, True),
        (18, 0.9, True),
        (20, 1.0, False),
    ],
)
def test_past_election_timeout(elapse: int, wprobability: float, round_: bool) -> None:
    """past_election_timeout is true with the probability (elapse - et) / et for elapse in
    [et, 2et)."""
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.election_elapsed = elapse
    c = 0
    for _ in range(10000):
        sm.reset_randomized_election_timeout()
        if sm.past_election_timeout():
            c += 1
    got = c / 10000.0
    if round_:
        got = math.floor(got * 10 + 0.5) / 10.0
    assert got == wprobability


def test_step_ignore_old_term_msg() -> None:
    """Step ignores the message from an old term and does not pass it to the actual step
    function."""
    called = []

    def fake_step(_r: Raft, _m: Message) -> None:
        called.append(True)

    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.step_func = fake_step
    sm.term = 2
    sm.step(Message(type=MsgApp, term=sm.term - 1))
    assert not called


def test_randomness_is_injectable() -> None:
    """Raft.rand (Go's globalRand.Intn) decides the randomized election timeout."""
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.rand = lambda n: n - 1
    sm.reset_randomized_election_timeout()
    assert sm.randomized_election_timeout == 19
    sm.rand = lambda n: 0
    sm.become_follower(2, NONE)
    assert sm.randomized_election_timeout == 10
