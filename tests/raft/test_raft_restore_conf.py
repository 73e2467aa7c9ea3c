"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), fourth part: restoring snapshots
(voters, learners, joint configs, promotions and demotions, ignored and fast-forwarded
snapshots), providing snapshots to followers, slow nodes, and configuration changes
(pending conf index, adding and removing voters and learners, check quorum after adding a
node, committing after removing one)."""

from __future__ import annotations

import pytest
from entry_helpers import terms
from raft_harness import (
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

from natsd.raft.codec import marshal_conf_change_v1
from natsd.raft.core import NO_LIMIT, StateFollower, StateLeader, new_raft
from natsd.raft.logger import RaftPanic
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeRemoveNode,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)

MsgBeat = MessageType.MsgBeat
MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp


def _snap(cs: ConfState, index: int = 11, term: int = 11) -> Snapshot:  # magic numbers
    return Snapshot(metadata=SnapshotMetadata(index=index, term=term, conf_state=cs))


def _add(id: int, typ: object = ConfChangeAddNode) -> ConfChange:
    return ConfChange(node_id=id, type=typ)  # type: ignore[arg-type]


def test_restore() -> None:
    s = _snap(ConfState(voters=[1, 2, 3]))
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    assert sm.restore(s)
    assert sm.raft_log.last_index() == s.metadata.index
    assert sm.raft_log.term(s.metadata.index) == s.metadata.term
    assert sm.trk.voter_nodes() == s.metadata.conf_state.voters
    assert not sm.restore(s)
    # It should not campaign before actually applying data.
    for _ in range(sm.randomized_election_timeout):
        sm.tick()
    assert sm.state == StateFollower


def test_restore_with_learner() -> None:
    """Restore a snapshot which contains learners."""
    s = _snap(ConfState(voters=[1, 2], learners=[3]))
    sm = new_test_raft(3, 8, 2, new_test_memory_storage(with_peers(1, 2), with_learners(3)))
    assert sm.restore(s)
    assert sm.raft_log.last_index() == s.metadata.index
    assert sm.raft_log.term(s.metadata.index) == s.metadata.term
    assert len(sm.trk.voter_nodes()) == 2
    assert len(sm.trk.learner_nodes()) == 1
    for n in s.metadata.conf_state.voters:
        assert not sm.trk.progress[n].is_learner
    for n in s.metadata.conf_state.learners:
        assert sm.trk.progress[n].is_learner
    assert not sm.restore(s)


def test_restore_with_voters_outgoing() -> None:
    """Restore a snapshot with a joint config (non-empty outgoing voters)."""
    s = _snap(ConfState(voters=[2, 3, 4], voters_outgoing=[1, 2, 3]))
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    assert sm.restore(s)
    assert sm.raft_log.last_index() == s.metadata.index
    assert sm.raft_log.term(s.metadata.index) == s.metadata.term
    assert sm.trk.voter_nodes() == [1, 2, 3, 4]
    assert not sm.restore(s)
    # It should not campaign before actually applying data.
    for _ in range(sm.randomized_election_timeout):
        sm.tick()
    assert sm.state == StateFollower


def test_restore_voter_to_learner() -> None:
    """A voter can be depromoted by snapshot restore (it is not rejected as a voter can
    be learner in the config)."""
    s = _snap(ConfState(voters=[1, 2], learners=[3]))
    sm = new_test_raft(3, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    assert not sm.is_learner
    assert sm.restore(s)


def test_restore_learner_promotion() -> None:
    """A learner is promoted to a voter by a snapshot."""
    s = _snap(ConfState(voters=[1, 2, 3]))
    sm = new_test_raft(3, 10, 1, new_test_memory_storage(with_peers(1, 2), with_learners(3)))
    assert sm.is_learner
    assert sm.restore(s)
    assert not sm.is_learner


def test_learner_receive_snapshot() -> None:
    """A learner can receive a snapshot from the leader."""
    # restore the state machine from a snapshot so it has a compacted log and a snapshot
    s = _snap(ConfState(voters=[1], learners=[2]))
    store = new_test_memory_storage(with_peers(1), with_learners(2))
    n1 = new_test_raft(1, 10, 1, store)
    n2 = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    n1.restore(s)
    snap = n1.raft_log.next_unstable_snapshot()
    assert snap is not None
    store.apply_snapshot(snap)
    n1.applied_snap(snap)
    nt = new_network(n1, n2)
    set_randomized_election_timeout(n1, n1.election_timeout)
    for _ in range(n1.election_timeout):
        n1.tick()
    nt.send(Message(from_=1, to=1, type=MsgBeat))
    assert n2.raft_log.committed == n1.raft_log.committed
    # The snapshot (11) and the leader's empty entry of its term (12), committed alone.
    assert n2.raft_log.committed == 12


def test_restore_ignore_snapshot() -> None:
    commit = 1
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    sm.raft_log.append(terms(1, 1, 1, 1))
    sm.raft_log.commit_to(commit)
    s = _snap(ConfState(voters=[1, 2]), index=commit, term=1)
    # ignore snapshot
    assert not sm.restore(s)
    assert sm.raft_log.committed == commit
    # ignore snapshot and fast forward commit
    s.metadata.index = commit + 1
    assert not sm.restore(s)
    assert sm.raft_log.committed == commit + 1


def test_provide_snap() -> None:
    # restore the state machine from a snapshot so it has a compacted log and a snapshot
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.restore(_snap(ConfState(voters=[1, 2])))
    sm.become_candidate()
    sm.become_leader()
    # force set the next of node 2, so that node 2 needs a snapshot
    sm.trk.progress[2].next = sm.raft_log.first_index()
    sm.step(
        Message(
            from_=2,
            to=1,
            type=MessageType.MsgAppResp,
            index=sm.trk.progress[2].next - 1,
            reject=True,
        )
    )
    msgs = read_messages(sm)
    assert len(msgs) == 1
    assert msgs[0].type == MessageType.MsgSnap


def test_ignore_providing_snap() -> None:
    # restore the state machine from a snapshot so it has a compacted log and a snapshot
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    sm.restore(_snap(ConfState(voters=[1, 2])))
    sm.become_candidate()
    sm.become_leader()
    # force set the next of node 2, so that node 2 needs a snapshot; change node 2 to be
    # inactive, expect node 1 ignore sending snapshot to 2
    sm.trk.progress[2].next = sm.raft_log.first_index() - 1
    sm.trk.progress[2].recent_active = False
    sm.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"somedata")]))
    assert read_messages(sm) == []


def test_restore_from_snap_msg() -> None:
    s = _snap(ConfState(voters=[1, 2]))
    m = Message(type=MessageType.MsgSnap, from_=1, term=2, snapshot=s)
    sm = new_test_raft(2, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    sm.step(m)
    assert sm.lead == 1
    assert sm.raft_log.committed == 11


def test_slow_node_restore() -> None:
    nt = new_network(None, None, None)
    nt.send(Message(from_=1, to=1, type=MsgHup))
    nt.isolate(3)
    for _ in range(101):
        nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    lead = raft_of(nt, 1)
    next_ents(lead, nt.storage[1])
    nt.storage[1].create_snapshot(
        lead.raft_log.applied, ConfState(voters=lead.trk.voter_nodes()), b""
    )
    nt.storage[1].compact(lead.raft_log.applied)
    nt.recover()
    # send heartbeats so that the leader can learn everyone is active. node 3 will only be
    # considered as active when node 1 receives a reply from it.
    while True:
        nt.send(Message(from_=1, to=1, type=MsgBeat))
        if lead.trk.progress[3].recent_active:
            break
    # trigger a snapshot
    nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    follower = raft_of(nt, 3)
    # trigger a commit
    nt.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    assert follower.raft_log.committed == lead.raft_log.committed


def test_step_config() -> None:
    """When raft steps msgProp in EntryConfChange type, it appends the entry to log and
    sets pending_conf_index."""
    # a raft that cannot make progress
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    r.become_candidate()
    r.become_leader()
    index = r.raft_log.last_index()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(type=EntryType.EntryConfChange)]))
    assert r.raft_log.last_index() == index + 1
    assert r.pending_conf_index == index + 1


def test_step_ignore_config() -> None:
    """If raft steps msgProp in EntryConfChange type while a conf change is pending, it
    appends a blank entry instead and leaves pending_conf_index unchanged."""
    # a raft that cannot make progress
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    r.become_candidate()
    r.become_leader()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(type=EntryType.EntryConfChange)]))
    index = r.raft_log.last_index()
    pending_conf_index = r.pending_conf_index
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(type=EntryType.EntryConfChange)]))
    wents = [Entry(type=EntryType.EntryNormal, term=1, index=3)]
    assert r.raft_log.entries(index + 1, NO_LIMIT) == wents
    assert r.pending_conf_index == pending_conf_index


@pytest.mark.parametrize(("add_entry", "wpending_index"), [(False, 0), (True, 1)])
def test_new_leader_pending_config(add_entry: bool, wpending_index: int) -> None:
    """A new leader sets its pending_conf_index based on its uncommitted entries."""
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    if add_entry:
        must_append_entry(r, Entry(type=EntryType.EntryNormal))
    r.become_candidate()
    r.become_leader()
    assert r.pending_conf_index == wpending_index


def test_add_node() -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    r.apply_conf_change(_add(2).as_v2())
    assert r.trk.voter_nodes() == [1, 2]


def test_add_learner() -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    # Add new learner peer.
    r.apply_conf_change(_add(2, ConfChangeAddLearnerNode).as_v2())
    assert not r.is_learner
    assert r.trk.learner_nodes() == [2]
    assert r.trk.progress[2].is_learner
    # Promote peer to voter.
    r.apply_conf_change(_add(2).as_v2())
    assert not r.trk.progress[2].is_learner
    # Demote r.
    r.apply_conf_change(_add(1, ConfChangeAddLearnerNode).as_v2())
    assert r.trk.progress[1].is_learner
    assert r.is_learner
    # Promote r again.
    r.apply_conf_change(_add(1).as_v2())
    assert not r.trk.progress[1].is_learner
    assert not r.is_learner


def test_add_node_check_quorum() -> None:
    """Adding a node does not immediately trip the CheckQuorum of the leader, but the
    leader steps down after an election timeout without hearing from it."""
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1)))
    r.check_quorum = True
    r.become_candidate()
    r.become_leader()
    for _ in range(r.election_timeout - 1):
        r.tick()
    r.apply_conf_change(_add(2).as_v2())
    # This tick will reach electionTimeout, which triggers a quorum check.
    r.tick()
    # Node 2 just became active in the quorum, so the leader stays.
    assert r.state == StateLeader
    # After another electionTimeout with no heartbeat from 2, 1 steps down.
    for _ in range(r.election_timeout):
        r.tick()
    assert r.state == StateFollower


def test_remove_node() -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2)))
    r.apply_conf_change(_add(2, ConfChangeRemoveNode).as_v2())
    assert r.trk.voter_nodes() == [1]
    # Removing the remaining voter will panic.
    with pytest.raises(RaftPanic):
        r.apply_conf_change(_add(1, ConfChangeRemoveNode).as_v2())


def test_remove_learner() -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1), with_learners(2)))
    r.apply_conf_change(_add(2, ConfChangeRemoveNode).as_v2())
    assert r.trk.voter_nodes() == [1]
    assert r.trk.learner_nodes() == []
    # Removing the remaining voter will panic.
    with pytest.raises(RaftPanic):
        r.apply_conf_change(_add(1, ConfChangeRemoveNode).as_v2())


@pytest.mark.parametrize(
    ("peers", "wp"), [([1], True), ([1, 2, 3], True), ([], False), ([2, 3], False)]
)
def test_promotable(peers: list[int], wp: bool) -> None:
    r = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(*peers)))
    assert r.promotable() == wp


@pytest.mark.parametrize("ids", [[1, 2, 3], [3, 2, 1]])
def test_raft_nodes(ids: list[int]) -> None:
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(*ids)))
    assert r.trk.voter_nodes() == [1, 2, 3]


@pytest.mark.parametrize("pre_vote", [False, True])
def test_campaign_while_leader(pre_vote: bool) -> None:
    from raft_harness import advance_messages_after_append

    cfg = new_test_config(1, 5, 1, new_test_memory_storage(with_peers(1)))
    cfg.pre_vote = pre_vote
    r = new_raft(cfg)
    assert r.state == StateFollower
    # We don't call campaign() directly because it comes after the check for our current
    # state.
    r.step(Message(from_=1, to=1, type=MsgHup))
    advance_messages_after_append(r)
    assert r.state == StateLeader
    term = r.term
    r.step(Message(from_=1, to=1, type=MsgHup))
    advance_messages_after_append(r)
    assert r.state == StateLeader
    assert r.term == term


def test_commit_after_remove_node() -> None:
    """Pending commands can become committed when a config change reduces the quorum
    requirements."""
    # Create a cluster with two nodes.
    s = new_test_memory_storage(with_peers(1, 2))
    r = new_test_raft(1, 5, 1, s)
    r.become_candidate()
    r.become_leader()
    # Begin to remove the second node.
    cc = ConfChange(type=ConfChangeRemoveNode, node_id=2)
    r.step(
        Message(
            type=MsgProp,
            entries=[Entry(type=EntryType.EntryConfChange, data=marshal_conf_change_v1(cc))],
        )
    )
    # Stabilize the log and make sure nothing is committed yet.
    assert next_ents(r, s) == []
    cc_index = r.raft_log.last_index()
    # While the config change is pending, make another proposal.
    r.step(Message(type=MsgProp, entries=[Entry(type=EntryType.EntryNormal, data=b"hello")]))
    # Node 2 acknowledges the config change, committing it.
    r.step(Message(type=MessageType.MsgAppResp, from_=2, index=cc_index))
    ents = next_ents(r, s)
    assert len(ents) == 2
    assert (ents[0].type, ents[0].data) == (EntryType.EntryNormal, b"")
    assert ents[1].type == EntryType.EntryConfChange
    # Apply the config change. This reduces quorum requirements so the pending command can
    # now commit.
    r.apply_conf_change(cc.as_v2())
    ents = next_ents(r, s)
    assert len(ents) == 1
    assert (ents[0].type, ents[0].data) == (EntryType.EntryNormal, b"hello")
