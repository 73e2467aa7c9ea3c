"""Ports etcd-io/raft v3.7.0 raft_test.go's TestFastLogRejection (Apache-2.0): a rejected
MsgAppResp carries a (index, term) hint with which the leader skips the follower's
conflicting tail in one round trip instead of probing entry by entry."""

from __future__ import annotations

import pytest
from entry_helpers import terms
from raft_harness import new_test_raft, read_messages

from natsd.raft.storage import MemoryStorage
from natsd.raft.types import ConfState, Entry, HardState, Message, MessageType

CASES = [
    # The leader can find the conflict index quickly. Firstly leader appends
    # (type=MsgApp,index=7,logTerm=4, entries=...); after rejected leader appends
    # (type=MsgApp,index=3,logTerm=2).
    (terms(1, 1, 2, 2, 4, 4, 4, 4), terms(1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), 0, 3, 7, 2, 3),
    # The leader can find the conflict index quickly. Firstly leader appends
    # (type=MsgApp,index=8,logTerm=5, entries=...); after rejected leader appends
    # (type=MsgApp,index=4,logTerm=3).
    (terms(1, 1, 2, 2, 3, 4, 4, 4, 5), terms(1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3), 0, 3, 8, 3, 4),
    # The follower can find the conflict index quickly. Firstly leader appends
    # (type=MsgApp,index=4,logTerm=1, entries=...); after rejected leader appends
    # (type=MsgApp,index=1,logTerm=1).
    (terms(1, 1, 1, 1, 1), terms(1, 1, 2, 2, 4), 0, 1, 1, 1, 1),
    # Similar to the previous case. However, this time, the leader has a longer
    # uncommitted log tail than the follower.
    (terms(1, 1, 1, 1, 1, 1, 1), terms(1, 1, 2, 2, 4), 0, 1, 1, 1, 1),
    # Similar to the previous case. However, this time, the follower has a longer
    # uncommitted log tail than the leader.
    (terms(1, 1, 1, 1, 1), terms(1, 1, 2, 2, 4, 4, 4), 0, 1, 1, 1, 1),
    # A normal case that there are no log conflicts. Firstly leader appends
    # (type=MsgApp,index=5,logTerm=5, entries=...); after rejected leader appends
    # (type=MsgApp,index=4,logTerm=4).
    (terms(1, 1, 1, 1, 4, 5), terms(1, 1, 1, 1, 4), 0, 4, 4, 4, 4),
    # Test case from example comment in stepLeader (on leader).
    (terms(1, 2, 5, 5, 5, 5, 5, 5, 5, 5), terms(1, 2, 4, 4, 4, 4, 4), 0, 4, 6, 2, 1),
    # Test case from example comment in handleAppendEntries (on follower).
    (terms(1, 2, 2, 2, 2, 2), terms(1, 2, 4, 4, 4, 4, 4, 4, 4), 0, 2, 1, 2, 1),
    # A case when a stale MsgApp from leader arrives after the corresponding log index got
    # compacted. A stale (type=MsgApp,index=3,logTerm=3,entries=[(term=3,index=4)]) is
    # delivered to a follower who has already compacted beyond log index 3. The MsgAppResp
    # rejection will return same index=3, with logTerm=0. The leader will rollback by one
    # entry, and send MsgApp with index=2,logTerm=1.
    (terms(1, 1, 1, 3), terms(1, 1, 1, 3, 3, 3), 5, 0, 3, 1, 2),
]


@pytest.mark.parametrize(
    (
        "leader_log",
        "follower_log",
        "follower_compact",
        "reject_hint_term",
        "reject_hint_index",
        "next_append_term",
        "next_append_index",
    ),
    CASES,
)
def test_fast_log_rejection(
    leader_log: list[Entry],
    follower_log: list[Entry],
    follower_compact: int,
    reject_hint_term: int,
    reject_hint_index: int,
    next_append_term: int,
    next_append_index: int,
) -> None:
    s1 = MemoryStorage()
    s1.snap.metadata.conf_state = ConfState(voters=[1, 2, 3])
    s1.append(leader_log)
    last = leader_log[-1]
    s1.set_hard_state(HardState(term=last.term - 1, commit=last.index))
    n1 = new_test_raft(1, 10, 1, s1)
    n1.become_candidate()  # bumps Term to last.term
    n1.become_leader()
    s2 = MemoryStorage()
    s2.snap.metadata.conf_state = ConfState(voters=[1, 2, 3])
    s2.append(follower_log)
    s2.set_hard_state(HardState(term=last.term, vote=1, commit=0))
    n2 = new_test_raft(2, 10, 1, s2)
    if follower_compact != 0:
        # NB: the state of n2 after this compaction isn't realistic because the commit
        # index is still at 0. We do this to exercise a "doesn't happen" edge case
        # behaviour, in case it still does happen in some other way.
        s2.compact(follower_compact)
    n2.step(Message(from_=1, to=2, type=MessageType.MsgHeartbeat))
    msgs = read_messages(n2)
    assert len(msgs) == 1, "can't read 1 message from peer 2"
    assert msgs[0].type == MessageType.MsgHeartbeatResp
    n1.step(msgs[0])
    msgs = read_messages(n1)
    assert len(msgs) == 1, "can't read 1 message from peer 1"
    assert msgs[0].type == MessageType.MsgApp
    n2.step(msgs[0])
    msgs = read_messages(n2)
    assert len(msgs) == 1, "can't read 1 message from peer 2"
    assert msgs[0].type == MessageType.MsgAppResp
    assert msgs[0].reject, "expected rejected append response from peer 2"
    assert msgs[0].log_term == reject_hint_term, "hint log term mismatch"
    assert msgs[0].reject_hint == reject_hint_index, "hint log index mismatch"
    n1.step(msgs[0])
    msgs = read_messages(n1)
    assert msgs[0].log_term == next_append_term
    assert msgs[0].index == next_append_index
