"""Ports etcd-io/raft v3.7.0 raft_snap_test.go (Apache-2.0): the leader's snapshot
sending, pausing and the MsgSnapStatus / MsgAppResp that end it."""

from __future__ import annotations

from raft_harness import new_test_memory_storage, new_test_raft, read_messages, with_peers

from natsd.raft.core import Raft
from natsd.raft.types import ConfState, Entry, Message, MessageType, Snapshot, SnapshotMetadata


def make_testing_snap() -> Snapshot:
    return Snapshot(
        metadata=SnapshotMetadata(
            index=11, term=11, conf_state=ConfState(voters=[1, 2])
        )  # magic numbers
    )


def _leader(*peers: int) -> Raft:
    sm = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(*peers)))
    assert sm.restore(make_testing_snap())
    sm.become_candidate()
    sm.become_leader()
    return sm


def test_sending_snapshot_set_pending_snapshot() -> None:
    sm = _leader(1)
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
    assert sm.trk.progress[2].pending_snapshot == 11


def test_pending_snapshot_pause_replication() -> None:
    sm = _leader(1, 2)
    sm.trk.progress[2].become_snapshot(11)
    sm.step(Message(from_=1, to=1, type=MessageType.MsgProp, entries=[Entry(data=b"somedata")]))
    assert read_messages(sm) == []


def test_snapshot_failure() -> None:
    sm = _leader(1, 2)
    sm.trk.progress[2].next = 1
    sm.trk.progress[2].become_snapshot(11)
    sm.step(Message(from_=2, to=1, type=MessageType.MsgSnapStatus, reject=True))
    assert sm.trk.progress[2].pending_snapshot == 0
    assert sm.trk.progress[2].next == 1
    assert sm.trk.progress[2].msg_app_flow_paused


def test_snapshot_succeed() -> None:
    sm = _leader(1, 2)
    sm.trk.progress[2].next = 1
    sm.trk.progress[2].become_snapshot(11)
    sm.step(Message(from_=2, to=1, type=MessageType.MsgSnapStatus, reject=False))
    assert sm.trk.progress[2].pending_snapshot == 0
    assert sm.trk.progress[2].next == 12
    assert sm.trk.progress[2].msg_app_flow_paused


def test_snapshot_abort() -> None:
    sm = _leader(1, 2)
    sm.trk.progress[2].next = 1
    sm.trk.progress[2].become_snapshot(11)
    # A successful MsgAppResp that has a higher/equal index than the pending snapshot
    # should abort the pending snapshot.
    sm.step(Message(from_=2, to=1, type=MessageType.MsgAppResp, index=11))
    assert sm.trk.progress[2].pending_snapshot == 0
    # The follower entered StateReplicate and the leader send an append and optimistically
    # updated the progress (so we see 13 instead of 12). There is something to append
    # because the leader appended an empty entry to the log at index 12 when it assumed
    # leadership.
    assert sm.trk.progress[2].next == 13
    assert sm.trk.progress[2].inflights.count() == 1
