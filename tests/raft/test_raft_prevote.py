"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), sixth part: PreVote (a node with
a smaller term completing an election, split votes, check quorum, migration to PreVote with
stuck pre-candidates), learners that cannot campaign, the check for unapplied conf changes
before campaigning, and log replication with reordered messages."""

from __future__ import annotations

import pytest
from raft_harness import (
    Network,
    expect_one_message,
    must_append_entry,
    new_network,
    new_test_memory_storage,
    new_test_raft,
    next_ents,
    raft_of,
    read_messages,
    with_peers,
)

from natsd.raft.codec import marshal_conf_change_v1, marshal_conf_change_v2
from natsd.raft.core import (
    NONE,
    Raft,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
)
from natsd.raft.tracker import StateProbe
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeRemoveNode,
    Entry,
    EntryType,
    Message,
    MessageType,
)

MsgHup = MessageType.MsgHup


def hup(id: int) -> Message:
    return Message(from_=id, to=id, type=MsgHup)


def _trio(pre_vote: bool = True, check_quorum: bool = False) -> tuple[Raft, Raft, Raft]:
    rs = [new_test_raft(i, 10, 1, new_test_memory_storage(with_peers(1, 2, 3))) for i in (1, 2, 3)]
    for r in rs:
        r.become_follower(1, NONE)
        r.pre_vote = pre_vote
        r.check_quorum = check_quorum
    return rs[0], rs[1], rs[2]


def test_node_with_smaller_term_can_complete_election() -> None:
    """A node that has a smaller term than the rest of the cluster can complete an election
    with PreVote (the "stuck pre-candidate" of etcd issue 8501)."""
    n1, n2, n3 = _trio()
    # cause a network partition to isolate node 3
    nt = new_network(n1, n2, n3)
    nt.cut(1, 3)
    nt.cut(2, 3)
    nt.send(hup(1))
    assert n1.state == StateLeader
    assert n2.state == StateFollower
    nt.send(hup(3))
    assert n3.state == StatePreCandidate
    nt.send(hup(2))
    # check whether the term values are expected
    assert (n1.term, n2.term, n3.term) == (3, 3, 1)
    # check state
    assert (n1.state, n2.state, n3.state) == (StateFollower, StateLeader, StatePreCandidate)
    # going to bring back peer 3 and kill peer 2
    nt.recover()
    nt.cut(2, 1)
    nt.cut(2, 3)
    # call for election
    nt.send(hup(3))
    nt.send(hup(1))
    # do we have a leader?
    assert n1.state == StateLeader or n3.state == StateLeader


def test_pre_vote_with_split_vote() -> None:
    """After a split vote, nodes with PreVote can still complete an election."""
    n1, n2, n3 = _trio()
    nt = new_network(n1, n2, n3)
    nt.send(hup(1))
    # simulate leader down. followers start split vote.
    nt.isolate(1)
    nt.send(hup(2), hup(3))
    # check whether the term values are expected
    assert (n2.term, n3.term) == (3, 3)
    # check state
    assert (n2.state, n3.state) == (StateCandidate, StateCandidate)
    # node 2 election timeout first
    nt.send(hup(2))
    # check whether the term values are expected
    assert (n2.term, n3.term) == (4, 4)
    # check state
    assert (n2.state, n3.state) == (StateLeader, StateFollower)


def test_pre_vote_with_check_quorum() -> None:
    """After the leader is isolated, a follower with PreVote and CheckQuorum can become
    leader."""
    n1, n2, n3 = _trio(check_quorum=True)
    nt = new_network(n1, n2, n3)
    nt.send(hup(1))
    # isolate node 1. node 2 and node 3 have leader info
    nt.isolate(1)
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StateFollower)
    # node 2 will ignore node 3's PreVote
    nt.send(hup(3))
    nt.send(hup(2))
    # Do we have a leader?
    assert n2.state == StateLeader or n3.state == StateFollower


def test_learner_campaign() -> None:
    """A learner won't start an election, not even on MsgTimeoutNow."""
    n1 = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    n1.apply_conf_change(ConfChange(node_id=2, type=ConfChangeAddLearnerNode).as_v2())
    n2 = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1)))
    n2.apply_conf_change(ConfChange(node_id=2, type=ConfChangeAddLearnerNode).as_v2())
    nt = new_network(n1, n2)
    nt.send(hup(2))
    assert n2.is_learner
    assert n2.state == StateFollower
    nt.send(hup(1))
    assert n1.state == StateLeader and n1.lead == 1
    # NB: TransferLeader already checks that the recipient is not a learner, but the check
    # could have happened by the time the recipient becomes a learner, in which case it
    # will receive MsgTimeoutNow as in this test case and we verify that it's ignored.
    nt.send(Message(from_=1, to=2, type=MessageType.MsgTimeoutNow))
    assert n2.state == StateFollower


def new_pre_vote_migration_cluster() -> Network:
    """A cluster of 3 nodes where n1 is leader with term 2, n2 a follower with term 2 and
    n3 a candidate with term 4 (partitioned and campaigning twice without PreVote); n3 then
    has PreVote enabled and the partition is healed."""
    n1, n2, n3 = _trio(pre_vote=False)
    n1.pre_vote = True
    n2.pre_vote = True
    # We intentionally do not enable PreVote for n3, this is done so in order to simulate
    # a rolling restart process where it's possible to have a mixed version cluster with
    # replicas with PreVote enabled, and replicas without.
    nt = new_network(n1, n2, n3)
    nt.send(hup(1))
    # Cause a network partition to isolate n3.
    nt.isolate(3)
    nt.send(Message(from_=1, to=1, type=MessageType.MsgProp, entries=[Entry(data=b"some data")]))
    nt.send(hup(3))
    nt.send(hup(3))
    # check state
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StateCandidate)
    # check term
    assert (n1.term, n2.term, n3.term) == (2, 2, 4)
    # Enable prevote on n3, then recover the network
    n3.pre_vote = True
    nt.recover()
    return nt


def test_pre_vote_migration_can_complete_election() -> None:
    nt = new_pre_vote_migration_cluster()
    # n1 is leader with term 2; n2 is follower with term 2; n3 is pre-candidate with term 4,
    # and has no log
    n2, n3 = raft_of(nt, 2), raft_of(nt, 3)
    # simulate leader down
    nt.isolate(1)
    # Call for elections from both n2 and n3.
    nt.send(hup(3))
    nt.send(hup(2))
    # check state
    assert n2.state == StateFollower
    assert n3.state == StatePreCandidate
    nt.send(hup(3))
    nt.send(hup(2))
    # Do we have a leader?
    assert n2.state == StateLeader or n3.state == StateFollower


def test_pre_vote_migration_with_free_stuck_pre_candidate() -> None:
    nt = new_pre_vote_migration_cluster()
    # n1 is leader with term 2; n2 is follower with term 2; n3 is pre-candidate with term 4,
    # and has no log
    n1, n2, n3 = raft_of(nt, 1), raft_of(nt, 2), raft_of(nt, 3)
    nt.send(hup(3))
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StatePreCandidate)
    # Pre-Vote again for safety
    nt.send(hup(3))
    assert (n1.state, n2.state, n3.state) == (StateLeader, StateFollower, StatePreCandidate)
    nt.send(Message(from_=1, to=3, type=MessageType.MsgHeartbeat, term=n1.term))
    # Disrupt the leader so that the stuck peer is freed
    assert n1.state == StateFollower
    assert n3.term == n1.term


@pytest.mark.parametrize("v2", [False, True])
def test_conf_change_check_before_campaign(v2: bool) -> None:
    """A node does not campaign (nor take a leader transfer) while it has an unapplied
    conf change in its committed log."""
    nt = new_network(None, None, None)
    n1, n2 = raft_of(nt, 1), raft_of(nt, 2)
    nt.send(hup(1))
    assert n1.state == StateLeader
    # Begin to remove the third node.
    cc = ConfChange(type=ConfChangeRemoveNode, node_id=2)
    if v2:
        cc_data, ty = marshal_conf_change_v2(cc.as_v2()), EntryType.EntryConfChangeV2
    else:
        cc_data, ty = marshal_conf_change_v1(cc), EntryType.EntryConfChange
    nt.send(
        Message(from_=1, to=1, type=MessageType.MsgProp, entries=[Entry(type=ty, data=cc_data)])
    )
    # Trigger campaign in node 2
    for _ in range(n2.randomized_election_timeout):
        n2.tick()
    # It's still follower because committed conf change is not applied.
    assert n2.state == StateFollower
    # Transfer leadership to peer 2.
    nt.send(Message(from_=2, to=1, type=MessageType.MsgTransferLeader))
    assert n1.state == StateLeader
    # It's still follower because committed conf change is not applied.
    assert n2.state == StateFollower
    # Abort transfer leader
    for _ in range(n1.election_timeout):
        n1.tick()
    # Advance apply
    next_ents(n2, nt.storage[2])
    # Transfer leadership to peer 2 again.
    nt.send(Message(from_=2, to=1, type=MessageType.MsgTransferLeader))
    assert n1.state == StateFollower
    assert n2.state == StateLeader
    next_ents(n1, nt.storage[1])
    # Trigger campaign in node 2
    for _ in range(n1.randomized_election_timeout):
        n1.tick()
    assert n1.state == StateCandidate


def test_log_replication_with_reordered_message() -> None:
    """A leader re-sends MsgApp from the match index when a delayed rejection arrives after
    the follower was already known to have matched."""
    r1 = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    r1.become_candidate()
    r1.become_leader()
    read_messages(r1)
    r1.trk.progress[2].become_replicate()
    r2 = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    # r1 sends 2 MsgApp messages to r2.
    must_append_entry(r1, Entry(data=b"somedata"))
    r1.send_append(2)
    req1 = expect_one_message(r1)
    must_append_entry(r1, Entry(data=b"somedata"))
    r1.send_append(2)
    req2 = expect_one_message(r1)
    # r2 receives the second MsgApp first due to reordering.
    r2.step(req2)
    resp2 = expect_one_message(r2)
    # r2 rejects req2
    assert resp2.reject
    assert resp2.reject_hint == 0
    assert resp2.index == 2
    # r2 handles the first MsgApp and responses to r1. And r1 updates match index
    # accordingly.
    r2.step(req1)
    m = expect_one_message(r2)
    assert not m.reject
    assert m.index == 2
    r1.step(m)
    expect_one_message(r1)
    assert r1.trk.progress[2].match == 2
    # r1 observes a transient network issue to r2, hence transits to probe state.
    r1.step(Message(from_=2, to=1, type=MessageType.MsgUnreachable))
    assert r1.trk.progress[2].state == StateProbe
    # now r1 receives the delayed resp2.
    r1.step(resp2)
    m = expect_one_message(r1)
    # r1 shall re-send MsgApp from match index even if resp2's reject hint is less than
    # matching index.
    assert m.index == r1.trk.progress[2].match
