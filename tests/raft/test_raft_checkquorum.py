"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), third part: CheckQuorum (stepping
down, superseding, stuck candidates, non-promotable voters), disruptive followers with and
without PreVote, read-only requests (safe, lease based, learners, new leaders, duplicates),
and the leader's replication bookkeeping (MsgAppResp, heartbeats, next, probe / replicate /
snapshot sending, unreachable peers)."""

from __future__ import annotations

import pytest
from entry_helpers import terms
from raft_harness import (
    Network,
    advance_messages_after_append,
    must_append_entry,
    new_network,
    new_test_config,
    new_test_memory_storage,
    new_test_raft,
    next_ents,
    raft_of,
    read_messages,
    set_randomized_election_timeout,
    with_learners,
    with_peers,
)

from natsd.raft.core import (
    NONE,
    Raft,
    ReadOnlyLeaseBased,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
    StateType,
    new_raft,
)
from natsd.raft.follower import step_candidate, step_follower
from natsd.raft.leader import step_leader
from natsd.raft.log import new_log
from natsd.raft.logger import DiscardLogger
from natsd.raft.storage import MemoryStorage
from natsd.raft.tracker import StateProbe, StateReplicate
from natsd.raft.tracker import StateType as ProgressStateType
from natsd.raft.types import (
    ConfChange,
    ConfChangeRemoveNode,
    ConfState,
    Entry,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)

MsgApp = MessageType.MsgApp
MsgAppResp = MessageType.MsgAppResp
MsgBeat = MessageType.MsgBeat
MsgHeartbeat = MessageType.MsgHeartbeat
MsgHeartbeatResp = MessageType.MsgHeartbeatResp
MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp
MsgReadIndex = MessageType.MsgReadIndex


def hup(id: int) -> Message:
    return Message(from_=id, to=id, type=MsgHup)


def _trio(check_quorum: bool = True) -> tuple[Raft, Raft, Raft]:
    rs = [new_test_raft(i, 10, 1, new_test_memory_storage(with_peers(1, 2, 3))) for i in (1, 2, 3)]
    for r in rs:
        r.check_quorum = check_quorum
    return rs[0], rs[1], rs[2]


def test_leader_stepdown_when_quorum_active() -> None:
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.check_quorum = True
    sm.become_candidate()
    sm.become_leader()
    for _ in range(sm.election_timeout + 1):
        sm.step(Message(from_=2, type=MsgHeartbeatResp, term=sm.term))
        sm.tick()
    assert sm.state == StateLeader


def test_leader_stepdown_when_quorum_lost() -> None:
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.check_quorum = True
    sm.become_candidate()
    sm.become_leader()
    for _ in range(sm.election_timeout + 1):
        sm.tick()
    assert sm.state == StateFollower


def test_leader_superseding_with_check_quorum() -> None:
    a, b, c = _trio()
    nt = new_network(a, b, c)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    assert a.state == StateLeader
    assert c.state == StateFollower
    nt.send(hup(3))
    # Peer b rejected c's vote since its electionElapsed had not reached to
    # electionTimeout
    assert c.state == StateCandidate
    # Letting b's electionElapsed reach to electionTimeout
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(3))
    assert c.state == StateLeader


def test_leader_election_with_check_quorum() -> None:
    a, b, c = _trio()
    nt = new_network(a, b, c)
    set_randomized_election_timeout(a, a.election_timeout + 1)
    set_randomized_election_timeout(b, b.election_timeout + 2)
    # Immediately after creation, votes are cast regardless of the election timeout.
    nt.send(hup(1))
    assert a.state == StateLeader
    assert c.state == StateFollower
    # need to reset randomizedElectionTimeout larger than electionTimeout again, because
    # the value might be reset to electionTimeout since the last state changes
    set_randomized_election_timeout(a, a.election_timeout + 1)
    set_randomized_election_timeout(b, b.election_timeout + 2)
    for _ in range(a.election_timeout):
        a.tick()
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(3))
    assert a.state == StateFollower
    assert c.state == StateLeader


def test_free_stuck_candidate_with_check_quorum() -> None:
    """The leader is superseded by a candidate with a higher term once CheckQuorum frees a
    stuck candidate (a higher-term heartbeat response steps the old leader down)."""
    a, b, c = _trio()
    nt = new_network(a, b, c)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    nt.isolate(1)
    nt.send(hup(3))
    assert b.state == StateFollower
    assert c.state == StateCandidate
    assert c.term == b.term + 1
    # Vote again for safety
    nt.send(hup(3))
    assert b.state == StateFollower
    assert c.state == StateCandidate
    assert c.term == b.term + 2
    nt.recover()
    nt.send(Message(from_=1, to=3, type=MsgHeartbeat, term=a.term))
    # Disrupt the leader so that the stuck peer is freed
    assert a.state == StateFollower
    assert c.term == a.term
    # Vote again, should become leader this time
    nt.send(hup(3))
    assert c.state == StateLeader


def test_non_promotable_voter_with_check_quorum() -> None:
    a = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    b = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1)))
    a.check_quorum = True
    b.check_quorum = True
    nt = new_network(a, b)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    # Need to remove 2 again to make it a non-promotable node since newNetwork overwritten
    # some internal states
    b.apply_conf_change(ConfChange(type=ConfChangeRemoveNode, node_id=2).as_v2())
    assert not b.promotable()
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    assert a.state == StateLeader
    assert b.state == StateFollower
    assert b.lead == 1


def test_disruptive_follower() -> None:
    """An isolated follower with check quorum whose election times out becomes a candidate
    with a higher term, and the leader's heartbeat to it gets a MsgAppResp of that higher
    term that steps the leader down."""
    n1, n2, n3 = _trio()
    for n in (n1, n2, n3):
        n.become_follower(1, NONE)
    nt = new_network(n1, n2, n3)
    nt.send(hup(1))
    # check state: n1.state == StateLeader, n2 and n3 followers
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StateFollower)
    # etcd server "advanceTicksForElection" on restart; this is to expedite campaign
    # trigger when given larger election timeouts (e.g. multi-datacenter deploy). Or leader
    # messages are being delayed while ticks elapse
    set_randomized_election_timeout(n3, n3.election_timeout + 2)
    for _ in range(n3.randomized_election_timeout - 1):
        n3.tick()
    # ideally, before last election tick elapses, the follower n3 receives "pb.MsgApp" or
    # "pb.MsgHeartbeat" from leader n1, and then resets its "electionElapsed"; however,
    # last tick may elapse before receiving any messages from leader n1
    n3.tick()
    # n3 is now a candidate with a higher term, its MsgVote to n1/n2 stays in its msgs
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StateCandidate)
    assert (n1.term, n2.term, n3.term) == (2, 2, 3)
    # while outgoing vote requests are still queued in n3, leader heartbeat finally
    # arrives at candidate n3; however, due to delayed network from leader, leader
    # heartbeat was sent with lower term than candidate's
    nt.send(Message(from_=1, to=3, term=n1.term, type=MsgHeartbeat))
    # then candidate n3 responds with "pb.MsgAppResp" of higher term and leader steps down
    # from a message with higher term; this is to disrupt the current leader, so that
    # candidate with higher term can be freed with following election
    assert (n1.state, n2.state, n3.state) == (StateFollower, StateFollower, StateCandidate)
    assert (n1.term, n2.term, n3.term) == (3, 2, 3)


def test_disruptive_follower_pre_vote() -> None:
    """With PreVote, the isolated follower becomes a pre-candidate without increasing its
    term, and does not disrupt the leader."""
    n1, n2, n3 = _trio()
    for n in (n1, n2, n3):
        n.become_follower(1, NONE)
    nt = new_network(n1, n2, n3)
    nt.send(hup(1))
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StateFollower)
    nt.isolate(3)
    for _ in range(3):
        nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"somedata")]))
    n1.pre_vote = True
    n2.pre_vote = True
    n3.pre_vote = True
    nt.recover()
    nt.send(hup(3))
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StatePreCandidate)
    assert (n1.term, n2.term, n3.term) == (2, 2, 2)
    # delayed leader heartbeat does not force current leader to step down
    nt.send(Message(from_=1, to=3, term=n1.term, type=MsgHeartbeat))
    assert n1.state == StateLeader


def _run_read_rounds(
    nt: Network,
    rounds: list[tuple[Raft, int, int, bytes]],
    leader_storage: MemoryStorage | None = None,
) -> None:
    leader = raft_of(nt, 1)
    for sm, proposals, wri, wctx in rounds:
        for _ in range(proposals):
            nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
            if leader_storage is not None:
                next_ents(leader, leader_storage)  # append the entries on the leader
        nt.send(Message(from_=sm.id, to=sm.id, type=MsgReadIndex, entries=[Entry(data=wctx)]))
        assert sm.read_states, f"node {sm.id} ctx {wctx!r}"
        rs = sm.read_states[0]
        assert rs.index == wri
        assert rs.request_ctx == wctx
        sm.read_states = []


def test_read_only_option_safe() -> None:
    a, b, c = _trio(False)
    nt = new_network(a, b, c)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    assert a.state == StateLeader
    _run_read_rounds(
        nt,
        [
            (a, 10, 11, b"ctx1"),
            (b, 10, 21, b"ctx2"),
            (c, 10, 31, b"ctx3"),
            (a, 10, 41, b"ctx4"),
            (b, 10, 51, b"ctx5"),
            (c, 10, 61, b"ctx6"),
        ],
    )


def test_read_only_with_learner() -> None:
    s = new_test_memory_storage(with_peers(1), with_learners(2))
    a = new_test_raft(1, 10, 1, s)
    b = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    nt = new_network(a, b)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    assert a.state == StateLeader
    _run_read_rounds(
        nt,
        [(a, 10, 11, b"ctx1"), (b, 10, 21, b"ctx2"), (a, 10, 31, b"ctx3"), (b, 10, 41, b"ctx4")],
        leader_storage=s,
    )


def test_read_only_option_lease() -> None:
    a, b, c = _trio()
    for r in (a, b, c):
        r.read_only.option = ReadOnlyLeaseBased
    nt = new_network(a, b, c)
    set_randomized_election_timeout(b, b.election_timeout + 1)
    for _ in range(b.election_timeout):
        b.tick()
    nt.send(hup(1))
    assert a.state == StateLeader
    _run_read_rounds(
        nt,
        [
            (a, 10, 11, b"ctx1"),
            (b, 10, 21, b"ctx2"),
            (c, 10, 31, b"ctx3"),
            (a, 10, 41, b"ctx4"),
            (b, 10, 51, b"ctx5"),
            (c, 10, 61, b"ctx6"),
        ],
    )


def test_read_only_for_new_leader() -> None:
    """The read index of a new leader is only answered once it committed an entry of its
    term (raft thesis 6.4)."""
    node_configs = [(1, 1, 1, 0), (2, 2, 2, 2), (3, 2, 2, 2)]  # id, committed, applied, compact
    peers: list[Raft | None] = []
    for id, committed, applied, compact_index in node_configs:
        storage = new_test_memory_storage(with_peers(1, 2, 3))
        storage.append(terms(1, 1, 1))
        storage.set_hard_state(HardState(term=1, commit=committed))
        if compact_index != 0:
            storage.compact(compact_index)
        cfg = new_test_config(id, 10, 1, storage)
        cfg.applied = applied
        peers.append(new_raft(cfg))
    nt = new_network(*peers)
    # Drop MsgApp to forbid peer a to commit any log entry at its term after it becomes
    # leader.
    nt.ignore(MsgApp)
    # Force peer a to become leader.
    nt.send(hup(1))
    sm = raft_of(nt, 1)
    assert sm.state == StateLeader
    # Ensure peer a drops read only request.
    windex = 4
    wctx = b"ctx"
    nt.send(Message(from_=1, to=1, type=MsgReadIndex, entries=[Entry(data=wctx)]))
    assert sm.read_states == []
    nt.recover()
    # Force peer a to commit a log entry at its term
    for _ in range(sm.heartbeat_timeout):
        sm.tick()
    nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    assert sm.raft_log.committed == 4
    assert sm.raft_log.zero_term_on_out_of_bounds(sm.raft_log.committed) == sm.term
    # Ensure peer a processed postponed read only request after it committed an entry at
    # its term.
    assert len(sm.read_states) == 1
    assert (sm.read_states[0].index, sm.read_states[0].request_ctx) == (windex, wctx)
    # Ensure peer a accepts read only request after it committed an entry at its term.
    nt.send(Message(from_=1, to=1, type=MsgReadIndex, entries=[Entry(data=wctx)]))
    assert len(sm.read_states) == 2
    assert (sm.read_states[1].index, sm.read_states[1].request_ctx) == (windex, wctx)


def test_read_only_duplicate_request() -> None:
    """A read index request is not answered by heartbeat acks sent before it was received
    (the acks are positional, not keyed by request context)."""
    r1, r2, r3 = _trio(False)
    net = new_network(r1, r2, r3)
    delayed: list[Message] = []

    def delay_heartbeat_resps(m: Message) -> bool:
        if m.type == MsgHeartbeatResp:
            delayed.append(m)
            return False
        return True

    net.send(hup(1))
    # Send a read index request from r2 ("A"), and delay the heartbeat responses of r2
    # and r3 that would confirm it.
    read_index_msg_a = Message(from_=2, to=1, type=MsgReadIndex, entries=[Entry(data=b"A")])
    read_index_minimum_a = r1.raft_log.committed
    delayed.append(read_index_msg_a)
    net.msg_hook = delay_heartbeat_resps
    net.send(read_index_msg_a)
    net.msg_hook = None  # stop delaying
    # r1 sends another round of heartbeats (no reads pending in the ctx any more after it
    # is delivered below).
    r1.tick()
    advance_messages_after_append(r1)
    msgs = r1.msgs
    r1.msgs = []
    net.send(*msgs)
    # r1 gets partitioned; r2 becomes leader and commits an op.
    net.isolate(r1.id)
    net.send(hup(2))
    net.send(Message(from_=2, to=2, type=MsgProp, entries=[Entry(data=b"someOp")]))
    # r1, still thinking it is leader, gets a new read request "B".
    read_index_msg_b = Message(from_=1, to=1, type=MsgReadIndex, entries=[Entry(data=b"B")])
    read_index_minimum_b = r2.raft_log.committed
    net.send(read_index_msg_b)
    net.recover()
    # The delayed responses arrive now: they must not confirm "B".
    net.send(*delayed)
    checked = 0
    for rd in [*r1.read_states, *r2.read_states, *r3.read_states]:
        if rd.request_ctx == b"A":
            assert rd.index >= read_index_minimum_a
            checked += 1
        elif rd.request_ctx == b"B":
            assert rd.index >= read_index_minimum_b
            checked += 1
    assert read_index_minimum_b > read_index_minimum_a
    # "A" is answered (by r1); "B" is not answered by the stale acks.
    assert checked >= 1


@pytest.mark.parametrize(
    ("index", "reject", "wmatch", "wnext", "wmsg_num", "windex", "wcommitted"),
    [
        (3, True, 0, 3, 0, 0, 0),  # stale resp; no replies
        (2, True, 0, 2, 1, 1, 0),  # denied resp; leader does not commit; decrease next, probe
        (2, False, 2, 4, 2, 2, 2),  # accept resp; leader commits; broadcast with commit index
        # Follower is StateProbing at 0, it sends MsgAppResp for 0 (which matches the
        # pr.Match) so it is moved to StateReplicate and as many entries as possible are
        # sent to it (1, 2, and 3). Correspondingly the Message.Index is 0.
        (0, False, 0, 4, 1, 0, 0),
    ],
)
def test_leader_app_resp(
    index: int, reject: bool, wmatch: int, wnext: int, wmsg_num: int, windex: int, wcommitted: int
) -> None:
    # Initial progress: match = 0; next = 3.
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.raft_log = new_log(MemoryStorage(terms(0, 0, 1, 1)), DiscardLogger())
    sm.become_candidate()
    sm.become_leader()
    read_messages(sm)
    sm.step(
        Message(
            from_=2, type=MsgAppResp, index=index, term=sm.term, reject=reject, reject_hint=index
        )
    )
    p = sm.trk.progress[2]
    assert (p.match, p.next) == (wmatch, wnext)
    msgs = read_messages(sm)
    assert len(msgs) == wmsg_num
    for msg in msgs:
        assert msg.index == windex
        assert msg.commit == wcommitted


def test_bcast_beat() -> None:
    """When the leader receives a heartbeat tick, it sends a MsgHeartbeat with m.index = 0,
    m.log_term = 0 and empty entries."""
    offset = 1000
    # make a state machine with log.offset = 1000
    s = Snapshot(
        metadata=SnapshotMetadata(index=offset, term=1, conf_state=ConfState(voters=[1, 2, 3]))
    )
    storage = MemoryStorage()
    storage.apply_snapshot(s)
    sm = new_test_raft(1, 10, 1, storage)
    sm.term = 1
    sm.become_candidate()
    sm.become_leader()
    for i in range(10):
        must_append_entry(sm, Entry(index=i + 1))
    advance_messages_after_append(sm)
    # slow follower
    sm.trk.progress[2].match, sm.trk.progress[2].next = 5, 6
    # normal follower
    last = sm.raft_log.last_index()
    sm.trk.progress[3].match, sm.trk.progress[3].next = last, last + 1
    sm.step(Message(type=MsgBeat))
    msgs = read_messages(sm)
    assert len(msgs) == 2
    want_commit = {
        2: min(sm.raft_log.committed, sm.trk.progress[2].match),
        3: min(sm.raft_log.committed, sm.trk.progress[3].match),
    }
    for m in msgs:
        assert m.type == MsgHeartbeat
        assert m.index == 0
        assert m.log_term == 0
        assert m.commit == want_commit.pop(m.to)
        assert m.entries == []
    assert want_commit == {}


@pytest.mark.parametrize(
    ("state", "wmsg"), [(StateLeader, 2), (StateCandidate, 0), (StateFollower, 0)]
)
def test_recv_msg_beat(state: StateType, wmsg: int) -> None:
    """Only the leader sends heartbeats on MsgBeat."""
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.raft_log = new_log(MemoryStorage(terms(0, 0, 1, 1)), DiscardLogger())
    sm.term = 1
    sm.state = state
    sm.step_func = {
        StateFollower: step_follower,
        StateCandidate: step_candidate,
        StateLeader: step_leader,
    }[state]
    sm.step(Message(from_=1, to=1, type=MsgBeat))
    msgs = read_messages(sm)
    assert len(msgs) == wmsg
    for m in msgs:
        assert m.type == MsgHeartbeat


@pytest.mark.parametrize(
    ("state", "next", "wnext"),
    [
        # state replicate, optimistically increase next; previous entries + noop entry +
        # propose + 1
        (StateReplicate, 2, 3 + 1 + 1 + 1),
        # state probe, not optimistically increase next
        (StateProbe, 2, 2),
    ],
)
def test_leader_increase_next(state: ProgressStateType, next: int, wnext: int) -> None:
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    sm.raft_log.append(terms(1, 1, 2, 3))
    sm.become_candidate()
    sm.become_leader()
    sm.trk.progress[2].state = state
    sm.trk.progress[2].next = next
    sm.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"somedata")]))
    assert sm.trk.progress[2].next == wnext


def _leader2() -> Raft:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    r.become_candidate()
    r.become_leader()
    read_messages(r)
    return r


def test_send_append_for_progress_probe() -> None:
    r = _leader2()
    r.trk.progress[2].become_probe()
    # each round is a heartbeat
    for i in range(3):
        if i == 0:
            # we expect that raft will only send out one msgAPP on the first loop. After
            # that, the follower is paused until a heartbeat response is received.
            must_append_entry(r, Entry(data=b"somedata"))
            r.send_append(2)
            msg = read_messages(r)
            assert len(msg) == 1
            assert msg[0].index == 0
        assert r.trk.progress[2].msg_app_flow_paused
        for _ in range(10):
            must_append_entry(r, Entry(data=b"somedata"))
            r.send_append(2)
            assert read_messages(r) == []
        # do a heartbeat
        for _ in range(r.heartbeat_timeout):
            r.step(Message(from_=1, to=1, type=MsgBeat))
        assert r.trk.progress[2].msg_app_flow_paused
        # consume the heartbeat
        msg = read_messages(r)
        assert len(msg) == 1
        assert msg[0].type == MsgHeartbeat
    # a heartbeat response will allow another message to be sent
    r.step(Message(from_=2, to=1, type=MsgHeartbeatResp))
    msg = read_messages(r)
    assert len(msg) == 1
    assert msg[0].index == 0
    assert r.trk.progress[2].msg_app_flow_paused


def test_send_append_for_progress_replicate() -> None:
    r = _leader2()
    r.trk.progress[2].become_replicate()
    for _ in range(10):
        must_append_entry(r, Entry(data=b"somedata"))
        r.send_append(2)
        assert len(read_messages(r)) == 1


def test_send_append_for_progress_snapshot() -> None:
    r = _leader2()
    r.trk.progress[2].become_snapshot(10)
    for _ in range(10):
        must_append_entry(r, Entry(data=b"somedata"))
        r.send_append(2)
        assert read_messages(r) == []


def test_recv_msg_unreachable() -> None:
    s = new_test_memory_storage(with_peers(1, 2))
    s.append(terms(1, 1, 2, 3))
    r = new_test_raft(1, 10, 1, s)
    r.become_candidate()
    r.become_leader()
    read_messages(r)
    # set node 2 to state replicate
    r.trk.progress[2].match = 3
    r.trk.progress[2].become_replicate()
    r.trk.progress[2].next = 6
    r.step(Message(from_=2, to=1, type=MessageType.MsgUnreachable))
    assert r.trk.progress[2].state == StateProbe
    assert r.trk.progress[2].next == r.trk.progress[2].match + 1
