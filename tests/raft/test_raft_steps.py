"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), second part: the handling of
MsgApp, heartbeats and their responses, read-only memory, MsgAppResp waits, receiving
votes, state transitions, stepping down on higher terms, and the self-vote / self-ack
delivered after a term change."""

from __future__ import annotations

import pytest
from entry_helpers import terms
from raft_harness import (
    advance_messages_after_append,
    new_network,
    new_test_memory_storage,
    new_test_raft,
    next_ents,
    read_messages,
    step_or_send,
    take_messages_after_append,
    with_peers,
)

from natsd.raft.core import (
    NONE,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
    StateType,
)
from natsd.raft.describe import vote_resp_msg_type
from natsd.raft.follower import (
    handle_append_entries,
    handle_heartbeat,
    step_candidate,
    step_follower,
)
from natsd.raft.leader import step_leader
from natsd.raft.log import new_log
from natsd.raft.logger import DiscardLogger, RaftPanic
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import Entry, Message, MessageType

MsgApp = MessageType.MsgApp
MsgAppResp = MessageType.MsgAppResp
MsgHeartbeat = MessageType.MsgHeartbeat
MsgHeartbeatResp = MessageType.MsgHeartbeatResp
MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp
MsgVote = MessageType.MsgVote
MsgPreVote = MessageType.MsgPreVote


def _app(
    term: int, log_term: int, index: int, commit: int, ents: list[Entry] | None = None
) -> Message:
    return Message(
        type=MsgApp, term=term, log_term=log_term, index=index, commit=commit, entries=ents
    )


@pytest.mark.parametrize(
    ("m", "w_index", "w_commit", "w_reject"),
    [
        # Ensure 1
        (_app(2, 3, 2, 3), 2, 0, True),  # previous log mismatch
        (_app(2, 3, 3, 3), 2, 0, True),  # previous log non-exist
        # Ensure 2
        (_app(2, 1, 1, 1), 2, 1, False),
        (_app(2, 0, 0, 1, [Entry(index=1, term=2)]), 1, 1, False),
        (_app(2, 2, 2, 3, [Entry(index=3, term=2), Entry(index=4, term=2)]), 4, 3, False),
        (_app(2, 2, 2, 4, [Entry(index=3, term=2)]), 3, 3, False),
        (_app(2, 1, 1, 4, [Entry(index=2, term=2)]), 2, 2, False),
        # Ensure 3
        (_app(1, 1, 1, 3), 2, 1, False),  # match entry 1, commit up to last new entry 1
        (_app(1, 1, 1, 3, [Entry(index=2, term=2)]), 2, 2, False),  # match 1, commit up to 2
        (_app(2, 2, 2, 3), 2, 2, False),  # match entry 2, commit up to last new entry 2
        (_app(2, 2, 2, 4), 2, 2, False),  # commit up to log.last()
    ],
)
def test_handle_msg_app(m: Message, w_index: int, w_commit: int, w_reject: bool) -> None:
    """Ensures: 1. Reply false if log doesn't contain an entry at prevLogIndex whose term
    matches prevLogTerm. 2. If an existing entry conflicts with a new one (same index but
    different terms), delete the existing entry and all that follow it; append any new
    entries not already in the log. 3. If leaderCommit > commitIndex, set commitIndex =
    min(leaderCommit, index of last new entry)."""
    storage = new_test_memory_storage(with_peers(1))
    storage.append(terms(1, 1, 2))
    sm = new_test_raft(1, 10, 1, storage)
    sm.become_follower(2, NONE)
    handle_append_entries(sm, m)
    assert sm.raft_log.last_index() == w_index
    assert sm.raft_log.committed == w_commit
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].reject == w_reject


@pytest.mark.parametrize(("commit_in", "w_commit"), [(3, 3), (1, 2)])  # do not decrease commit
def test_handle_heartbeat(commit_in: int, w_commit: int) -> None:
    """The follower commits to the commit in the message."""
    commit = 2
    storage = new_test_memory_storage(with_peers(1, 2))
    storage.append(terms(1, 1, 2, 3))
    sm = new_test_raft(1, 5, 1, storage)
    sm.become_follower(2, 2)
    sm.raft_log.commit_to(commit)
    handle_heartbeat(sm, Message(from_=2, to=1, type=MsgHeartbeat, term=2, commit=commit_in))
    assert sm.raft_log.committed == w_commit
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == MsgHeartbeatResp


def test_handle_heartbeat_resp() -> None:
    """The leader resends MsgApp after a heartbeat response while the follower lags."""
    storage = new_test_memory_storage(with_peers(1, 2))
    storage.append(terms(1, 1, 2, 3))
    sm = new_test_raft(1, 5, 1, storage)
    sm.become_candidate()
    sm.become_leader()
    sm.raft_log.commit_to(sm.raft_log.last_index())
    # A heartbeat response from a node that is behind; re-send MsgApp
    sm.step(Message(from_=2, type=MsgHeartbeatResp))
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == MsgApp
    # A second heartbeat response generates another MsgApp re-send
    sm.step(Message(from_=2, type=MsgHeartbeatResp))
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == MsgApp
    # Once we have an MsgAppResp, heartbeats no longer send MsgApp.
    sm.step(Message(from_=2, type=MsgAppResp, index=msgs[0].index + len(msgs[0].entries)))
    # Consume the message sent in response to MsgAppResp
    read_messages(sm)
    sm.step(Message(from_=2, type=MsgHeartbeatResp))
    assert read_messages(sm) == []


def test_raft_frees_read_only_mem() -> None:
    """raft's read-only memory is freed once the read request is confirmed."""
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2)))
    sm.become_candidate()
    sm.become_leader()
    sm.raft_log.commit_to(sm.raft_log.last_index())
    ctx = b"ctx"
    # leader starts linearizable read request. more info: raft dissertation 6.4, step 2.
    sm.step(Message(from_=2, type=MessageType.MsgReadIndex, entries=[Entry(data=ctx)]))
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == MsgHeartbeat
    assert len(sm.read_only.unconfirmed_reads) == 1
    # heartbeat responses from majority of followers (1 in this case) acknowledge the
    # authority of the leader. more info: raft dissertation 6.4, step 3.
    sm.step(Message(from_=2, type=MsgHeartbeatResp, context=msgs[0].context))
    assert sm.read_only.unconfirmed_reads == []


def test_msg_app_resp_wait_reset() -> None:
    """When a MsgAppResp arrives that moves the committed index, the leader sends MsgApp
    to the followers (each waiting only for its own ack)."""
    s = new_test_memory_storage(with_peers(1, 2, 3))
    sm = new_test_raft(1, 5, 1, s)
    sm.become_candidate()
    sm.become_leader()
    # Run n1 which includes sending a message like the below one to n2, but also appending
    # to its own log.
    next_ents(sm, s)
    # Node 2 acks the first entry, making it committed.
    sm.step(Message(from_=2, type=MsgAppResp, index=1))
    assert sm.raft_log.committed == 1
    # Also consume the MsgApp messages that update Commit on the followers.
    read_messages(sm)
    # A new command is now proposed on node 1.
    sm.step(Message(from_=1, type=MsgProp, entries=[Entry()]))
    # The command is broadcast to all nodes not in the wait state. Node 2 left the wait
    # state due to its MsgAppResp, but node 3 is still waiting.
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert (msgs[0].type, msgs[0].to, len(msgs[0].entries), msgs[0].entries[0].index) == (
        MsgApp,
        2,
        1,
        2,
    )
    # Now Node 3 acks the first entry. This releases the wait and entry 2 is sent.
    sm.step(Message(from_=3, type=MsgAppResp, index=1))
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert (msgs[0].type, msgs[0].to, len(msgs[0].entries), msgs[0].entries[0].index) == (
        MsgApp,
        3,
        1,
        2,
    )


_VOTE_CASES = [
    (StateFollower, 0, 0, NONE, True),
    (StateFollower, 0, 1, NONE, True),
    (StateFollower, 0, 2, NONE, True),
    (StateFollower, 0, 3, NONE, False),
    (StateFollower, 1, 0, NONE, True),
    (StateFollower, 1, 1, NONE, True),
    (StateFollower, 1, 2, NONE, True),
    (StateFollower, 1, 3, NONE, False),
    (StateFollower, 2, 0, NONE, True),
    (StateFollower, 2, 1, NONE, True),
    (StateFollower, 2, 2, NONE, False),
    (StateFollower, 2, 3, NONE, False),
    (StateFollower, 3, 0, NONE, True),
    (StateFollower, 3, 1, NONE, True),
    (StateFollower, 3, 2, NONE, False),
    (StateFollower, 3, 3, NONE, False),
    (StateFollower, 3, 2, 2, False),
    (StateFollower, 3, 2, 1, True),
    (StateLeader, 3, 3, 1, True),
    (StatePreCandidate, 3, 3, 1, True),
    (StateCandidate, 3, 3, 1, True),
]


@pytest.mark.parametrize("msg_type", [MsgVote, MsgPreVote])
@pytest.mark.parametrize(("state", "index", "log_term", "vote_for", "wreject"), _VOTE_CASES)
def test_recv_msg_vote(
    msg_type: MessageType, state: StateType, index: int, log_term: int, vote_for: int, wreject: bool
) -> None:
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.state = state
    if state == StateFollower:
        sm.step_func = step_follower
    elif state in (StateCandidate, StatePreCandidate):
        sm.step_func = step_candidate
    else:
        sm.step_func = step_leader
    sm.vote = vote_for
    sm.raft_log = new_log(MemoryStorage(terms(0, 0, 2, 2)), DiscardLogger())
    # raft.term is greater than or equal to raft.raft_log.last_term. In this test we're
    # only testing MsgVote responses when the campaigning node has a different raft log
    # compared to the recipient node. Additionally we're verifying behaviour when the
    # recipient node has already given out its vote for its current term. We're not
    # testing what the recipient node does when receiving a message with a different term
    # number, so we simply initialize both term numbers to be the same.
    term = max(sm.raft_log.last_entry_id().term, log_term)
    sm.term = term
    sm.step(Message(type=msg_type, term=term, from_=2, index=index, log_term=log_term))
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == vote_resp_msg_type(msg_type)
    assert msgs[0].reject == wreject


@pytest.mark.parametrize(
    ("from_", "to", "wallow", "wterm", "wlead"),
    [
        (StateFollower, StateFollower, True, 1, NONE),
        (StateFollower, StatePreCandidate, True, 0, NONE),
        (StateFollower, StateCandidate, True, 1, NONE),
        (StateFollower, StateLeader, False, 0, NONE),
        (StatePreCandidate, StateFollower, True, 0, NONE),
        (StatePreCandidate, StatePreCandidate, True, 0, NONE),
        (StatePreCandidate, StateCandidate, True, 1, NONE),
        (StatePreCandidate, StateLeader, True, 0, 1),
        (StateCandidate, StateFollower, True, 0, NONE),
        (StateCandidate, StatePreCandidate, True, 0, NONE),
        (StateCandidate, StateCandidate, True, 1, NONE),
        (StateCandidate, StateLeader, True, 0, 1),
        (StateLeader, StateFollower, True, 1, NONE),
        (StateLeader, StatePreCandidate, False, 0, NONE),
        (StateLeader, StateCandidate, False, 1, NONE),
        (StateLeader, StateLeader, True, 0, 1),
    ],
)
def test_state_transition(
    from_: StateType, to: StateType, wallow: bool, wterm: int, wlead: int
) -> None:
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.state = from_
    try:
        if to == StateFollower:
            sm.become_follower(wterm, wlead)
        elif to == StatePreCandidate:
            sm.become_pre_candidate()
        elif to == StateCandidate:
            sm.become_candidate()
        else:
            sm.become_leader()
    except RaftPanic:
        assert not wallow
        return
    assert wallow
    assert sm.term == wterm
    assert sm.lead == wlead


@pytest.mark.parametrize(
    ("state", "wstate", "wterm", "windex"),
    [
        (StateFollower, StateFollower, 3, 0),
        (StatePreCandidate, StateFollower, 3, 0),
        (StateCandidate, StateFollower, 3, 0),
        (StateLeader, StateFollower, 3, 1),
    ],
)
def test_all_server_stepdown(state: StateType, wstate: StateType, wterm: int, windex: int) -> None:
    tterm = 3
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    if state == StateFollower:
        sm.become_follower(1, NONE)
    elif state == StatePreCandidate:
        sm.become_pre_candidate()
    elif state == StateCandidate:
        sm.become_candidate()
    else:
        sm.become_candidate()
        sm.become_leader()
    for msg_type in (MsgVote, MsgApp):
        sm.step(Message(from_=2, type=msg_type, term=tterm, log_term=tterm))
        assert sm.state == wstate
        assert sm.term == wterm
        assert sm.raft_log.last_index() == windex
        assert len(sm.raft_log.all_entries()) == windex
        wlead = NONE if msg_type == MsgVote else 2
        assert sm.lead == wlead


@pytest.mark.parametrize("mt", [MsgHeartbeat, MsgApp])
def test_candidate_reset_term(mt: MessageType) -> None:
    """A candidate with a higher term that receives a MsgHeartbeat / MsgApp from the
    leader at a lower... equal term resets its term and becomes a follower."""
    a = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    b = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    c = new_test_raft(3, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    nt = new_network(a, b, c)
    nt.send(Message(from_=1, to=1, type=MsgHup))
    assert (a.state, b.state, c.state) == (StateLeader, StateFollower, StateFollower)
    # isolate 3 and increase term in rest
    nt.isolate(3)
    nt.send(Message(from_=2, to=2, type=MsgHup))
    nt.send(Message(from_=1, to=1, type=MsgHup))
    assert (a.state, b.state) == (StateLeader, StateFollower)
    # trigger campaign in isolated c
    c.reset_randomized_election_timeout()
    for _ in range(c.randomized_election_timeout):
        c.tick()
    advance_messages_after_append(c)
    assert c.state == StateCandidate
    nt.recover()
    # leader sends to isolated candidate and expects candidate to revert to follower
    nt.send(Message(from_=1, to=3, term=a.term, type=mt))
    assert c.state == StateFollower
    # follower c term is reset with leader's
    assert a.term == c.term


@pytest.mark.parametrize("pre_vote", [False, True])
def test_candidate_self_vote_after_lost_election(pre_vote: bool) -> None:
    """A candidate that lost the election before its self-vote was persisted does not
    count that vote later."""
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.pre_vote = pre_vote
    # n1 calls an election.
    sm.step(Message(from_=1, to=1, type=MsgHup))
    steps = take_messages_after_append(sm)
    # n1 hears that n2 already won the election before it has had a change to sync its
    # vote to disk and account for its self-vote. Becomes a follower.
    sm.step(Message(from_=2, to=1, term=sm.term, type=MsgHeartbeat))
    assert sm.state == StateFollower
    # n1 remains a follower even after its self-vote is delivered.
    step_or_send(sm, steps)
    assert sm.state == StateFollower
    # Its self-vote does not make its way to its ProgressTracker.
    granted, _, _ = sm.trk.tally_votes()
    assert granted == 0


def test_candidate_delivers_pre_candidate_self_vote_after_becoming_candidate() -> None:
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.pre_vote = True
    # n1 calls an election.
    sm.step(Message(from_=1, to=1, type=MsgHup))
    assert sm.state == StatePreCandidate
    steps = take_messages_after_append(sm)
    # n1 receives pre-candidate votes from both other peers before voting for itself. n1
    # becomes a candidate. NB: pre-vote messages carry the local term + 1.
    sm.step(Message(from_=2, to=1, term=sm.term + 1, type=MessageType.MsgPreVoteResp))
    sm.step(Message(from_=3, to=1, term=sm.term + 1, type=MessageType.MsgPreVoteResp))
    assert sm.state == StateCandidate
    # n1 remains a candidate even after its delayed pre-vote self-vote is delivered.
    step_or_send(sm, steps)
    assert sm.state == StateCandidate
    steps = take_messages_after_append(sm)
    # Its pre-vote self-vote does not make its way to its ProgressTracker.
    granted, _, _ = sm.trk.tally_votes()
    assert granted == 0
    # A single vote from n2 does not move n1 to the leader.
    sm.step(Message(from_=2, to=1, term=sm.term, type=MessageType.MsgVoteResp))
    assert sm.state == StateCandidate
    # n1 becomes the leader once its self-vote is received because now quorum is reached.
    step_or_send(sm, steps)
    assert sm.state == StateLeader


def test_leader_msg_app_self_ack_after_term_change() -> None:
    sm = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    sm.become_candidate()
    sm.become_leader()
    # n1 proposes a write.
    sm.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"somedata")]))
    steps = take_messages_after_append(sm)
    # n1 hears that n2 is the new leader.
    sm.step(Message(from_=2, to=1, term=sm.term + 1, type=MsgHeartbeat))
    assert sm.state == StateFollower
    # n1 advances, ignoring its earlier self-ack of its MsgApp. The corresponding
    # MsgAppResp is ignored because it carries an earlier term.
    step_or_send(sm, steps)
    assert sm.state == StateFollower
