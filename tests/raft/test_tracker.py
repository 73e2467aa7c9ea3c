"""etcd-io/raft v3.7.0 tracker/inflights_test.go and tracker/progress_test.go."""

from __future__ import annotations

import pytest

from natsd.raft.tracker import (
    Inflights,
    Progress,
    ProgressTracker,
    StateProbe,
    StateReplicate,
    StateSnapshot,
    StateType,
)


def _inflights(
    start: int, count: int, nbytes: int, size: int, indices: list[int], sizes: list[int]
) -> Inflights:
    """A literal Inflights, like the Go tests' struct literals."""
    assert len(indices) == len(sizes)
    ins = Inflights(size, 0)
    ins._start = start
    ins._count = count
    ins._bytes = nbytes
    ins._buffer = list(zip(indices, sizes, strict=True))
    return ins


def test_inflights_add() -> None:
    # no rotating case
    ins = _inflights(0, 0, 0, 10, [0] * 10, [0] * 10)
    for i in range(5):
        ins.add(i, 100 + i)
    assert ins == _inflights(
        0, 5, 510, 10, [0, 1, 2, 3, 4, 0, 0, 0, 0, 0], [100, 101, 102, 103, 104, 0, 0, 0, 0, 0]
    )
    for i in range(5, 10):
        ins.add(i, 100 + i)
    assert ins == _inflights(0, 10, 1045, 10, list(range(10)), list(range(100, 110)))

    # rotating case
    in2 = _inflights(5, 0, 0, 10, [0] * 10, [0] * 10)
    for i in range(5):
        in2.add(i, 100 + i)
    assert in2 == _inflights(
        5, 5, 510, 10, [0, 0, 0, 0, 0, 0, 1, 2, 3, 4], [0, 0, 0, 0, 0, 100, 101, 102, 103, 104]
    )
    for i in range(5, 10):
        in2.add(i, 100 + i)
    assert in2 == _inflights(
        5,
        10,
        1045,
        10,
        [5, 6, 7, 8, 9, 0, 1, 2, 3, 4],
        [105, 106, 107, 108, 109, 100, 101, 102, 103, 104],
    )


def test_inflights_free_to() -> None:
    # no rotating case
    ins = Inflights(10, 0)
    for i in range(10):
        ins.add(i, 100 + i)
    full = (list(range(10)), list(range(100, 110)))
    ins.free_le(0)
    assert ins == _inflights(1, 9, 945, 10, *full)
    ins.free_le(4)
    assert ins == _inflights(5, 5, 535, 10, *full)
    ins.free_le(8)
    assert ins == _inflights(9, 1, 109, 10, *full)

    # rotating case
    for i in range(10, 15):
        ins.add(i, 100 + i)
    ins.free_le(12)
    rotated = (
        [10, 11, 12, 13, 14, 5, 6, 7, 8, 9],
        [110, 111, 112, 113, 114, 105, 106, 107, 108, 109],
    )
    assert ins == _inflights(3, 2, 227, 10, *rotated)
    ins.free_le(14)
    assert ins == _inflights(0, 0, 0, 10, *rotated)


@pytest.mark.parametrize(
    ("size", "max_bytes", "full_at", "free_le", "again_at"),
    [
        pytest.param(0, 0, 0, 0, 0, id="always-full"),
        pytest.param(1, 0, 1, 1, 2, id="single-entry"),
        pytest.param(1, 10, 1, 1, 2, id="single-entry-overflow"),
        pytest.param(15, 0, 15, 6, 22, id="multi-entry"),
        pytest.param(8, 400, 4, 2, 7, id="slight-overflow"),
        pytest.param(8, 406, 4, 3, 8, id="exact-max-bytes"),
        pytest.param(15, 408, 5, 1, 6, id="larger-overflow"),
    ],
)
def test_inflights_full(
    size: int, max_bytes: int, full_at: int, free_le: int, again_at: int
) -> None:
    ins = Inflights(size, max_bytes)

    def add_until_full(begin: int, end: int) -> None:
        for i in range(begin, end):
            assert not ins.full(), f"full at {i}, want {end}"
            ins.add(i, 100 + i)
        assert ins.full(), f"not full at {end}"

    add_until_full(0, full_at)
    ins.free_le(free_le)
    add_until_full(full_at, again_at)
    with pytest.raises(RuntimeError, match="cannot add into a Full inflights"):
        ins.add(100, 1024)


def test_inflights_reset() -> None:
    ins = Inflights(10, 1000)
    # Imitate a semi-realistic flow during which the inflight tracker is periodically reset
    # to empty. Byte usage must not "leak" across resets.
    index = 0
    for _ in range(100):
        ins.reset()
        # Add 5 messages. They should not max out the limit yet.
        for _ in range(5):
            assert not ins.full()
            index += 1
            ins.add(index, 16)
        # Ack all but last 2 indices.
        ins.free_le(index - 2)
        assert not ins.full()
        assert ins.count() == 2
    ins.free_le(index)
    assert ins.count() == 0


def test_inflights_clone_shares_nothing() -> None:
    ins = Inflights(4, 0)
    ins.add(1, 10)
    c = ins.clone()
    assert c == ins
    c.add(2, 10)
    assert ins.count() == 1 and c.count() == 2


def test_progress_string() -> None:
    ins = Inflights(1, 0)
    ins.add(123, 1)
    pr = Progress(
        match=1,
        next=2,
        state=StateSnapshot,
        pending_snapshot=123,
        recent_active=False,
        msg_app_flow_paused=True,
        is_learner=True,
        inflights=ins,
    )
    exp = "StateSnapshot match=1 next=2 learner paused pendingSnap=123 inactive inflight=1[full]"
    assert str(pr) == exp


@pytest.mark.parametrize(
    ("state", "paused", "w"),
    [
        (StateProbe, False, False),
        (StateProbe, True, True),
        (StateReplicate, False, False),
        (StateReplicate, True, True),
        (StateSnapshot, False, True),
        (StateSnapshot, True, True),
    ],
)
def test_progress_is_paused(state: StateType, paused: bool, w: bool) -> None:
    p = Progress(state=state, msg_app_flow_paused=paused, inflights=Inflights(256, 0))
    assert p.is_paused() == w


def test_progress_resume() -> None:
    """maybe_update and maybe_decr_to reset msg_app_flow_paused."""
    p = Progress(next=2, msg_app_flow_paused=True)
    p.maybe_decr_to(1, 1)
    assert not p.msg_app_flow_paused
    p.msg_app_flow_paused = True
    p.maybe_update(2)
    assert not p.msg_app_flow_paused


@pytest.mark.parametrize(
    ("p", "wnext"),
    [
        (Progress(state=StateReplicate, match=1, next=5, inflights=Inflights(256, 0)), 2),
        # snapshot finish
        (
            Progress(
                state=StateSnapshot,
                match=1,
                next=5,
                pending_snapshot=10,
                inflights=Inflights(256, 0),
            ),
            11,
        ),
        # snapshot failure
        (
            Progress(
                state=StateSnapshot,
                match=1,
                next=5,
                pending_snapshot=0,
                inflights=Inflights(256, 0),
            ),
            2,
        ),
    ],
)
def test_progress_become_probe(p: Progress, wnext: int) -> None:
    p.become_probe()
    assert p.state == StateProbe
    assert p.match == 1
    assert p.next == wnext


def test_progress_become_replicate() -> None:
    p = Progress(state=StateProbe, match=1, next=5, inflights=Inflights(256, 0))
    p.become_replicate()
    assert p.state == StateReplicate
    assert p.match == 1
    assert p.next == p.match + 1


def test_progress_become_snapshot() -> None:
    p = Progress(state=StateProbe, match=1, next=5, inflights=Inflights(256, 0))
    p.become_snapshot(10)
    assert p.state == StateSnapshot
    assert p.match == 1
    assert p.pending_snapshot == 10


@pytest.mark.parametrize(
    ("update", "wm", "wn", "wok"),
    [
        (2, 3, 5, False),  # do not decrease match, next
        (3, 3, 5, False),  # do not decrease next
        (4, 4, 5, True),  # increase match, do not decrease next
        (5, 5, 6, True),  # increase match, next
    ],
)
def test_progress_update(update: int, wm: int, wn: int, wok: bool) -> None:
    p = Progress(match=3, next=5)
    assert p.maybe_update(update) == wok
    assert p.match == wm
    assert p.next == wn


@pytest.mark.parametrize(
    ("state", "m", "n", "rejected", "last", "w", "wn"),
    [
        # state replicate and rejected is not greater than match
        (StateReplicate, 5, 10, 5, 5, False, 10),
        # state replicate and rejected is not greater than match
        (StateReplicate, 5, 10, 4, 4, False, 10),
        # state replicate and rejected is greater than match: directly decrease to match+1
        (StateReplicate, 5, 10, 9, 9, True, 6),
        # next-1 != rejected is always false
        (StateProbe, 0, 0, 0, 0, False, 0),
        # next-1 != rejected is always false
        (StateProbe, 0, 10, 5, 5, False, 10),
        # next>1 = decremented by 1
        (StateProbe, 0, 10, 9, 9, True, 9),
        # next>1 = decremented by 1
        (StateProbe, 0, 2, 1, 1, True, 1),
        # next<=1 = reset to 1
        (StateProbe, 0, 1, 0, 0, True, 1),
        # decrease to min(rejected, last+1)
        (StateProbe, 0, 10, 9, 2, True, 3),
        # rejected < 1, reset to 1
        (StateProbe, 0, 10, 9, 0, True, 1),
    ],
)
def test_progress_maybe_decr(
    state: StateType, m: int, n: int, rejected: int, last: int, w: bool, wn: int
) -> None:
    p = Progress(state=state, match=m, next=n)
    assert p.maybe_decr_to(rejected, last) == w
    assert p.match == m
    assert p.next == wn


def test_sent_entries_and_commit() -> None:
    p = Progress(match=4, next=5, state=StateReplicate, inflights=Inflights(2, 0))
    p.sent_entries(3, 30)
    assert (p.next, p.inflights.count(), p.msg_app_flow_paused) == (8, 1, False)
    p.sent_entries(1, 10)
    assert (p.next, p.inflights.count(), p.msg_app_flow_paused) == (9, 2, True)
    assert p.can_bump_commit(6)
    p.sent_commit(8)
    assert not p.can_bump_commit(9)  # already sent a commit reaching Next-1
    p.become_probe()
    assert p.next == 5 and p.inflights.count() == 0
    # sentCommit regressed to Next-1 = 4, which is as far as a commit index can bump it.
    assert p._sent_commit == 4
    assert not p.can_bump_commit(5)
    p.sent_entries(1, 10)
    assert p.msg_app_flow_paused and p.next == 5  # a probe does not move Next
    p.become_snapshot(20)
    with pytest.raises(RuntimeError, match="sending append in unhandled state StateSnapshot"):
        p.sent_entries(1, 10)


def test_tracker_votes_and_quorum() -> None:
    trk = ProgressTracker(10, 0)
    for i in (1, 2, 3):
        trk.config.voters.incoming.add(i)
        trk.progress[i] = Progress(match=i * 10, next=i * 10 + 1, inflights=Inflights(10, 0))
    trk.config.learners = {4}
    trk.progress[4] = Progress(match=100, next=101, is_learner=True)
    assert trk.committed() == 20
    assert trk.voter_nodes() == [1, 2, 3]
    assert trk.learner_nodes() == [4]
    assert not trk.is_singleton()
    trk.record_vote(1, True)
    trk.record_vote(1, False)  # the first vote counts
    trk.record_vote(4, True)  # a learner's vote is not tallied
    assert trk.tally_votes()[:2] == (1, 0)
    trk.record_vote(2, False)
    trk.record_vote(3, True)
    granted, rejected, result = trk.tally_votes()
    assert (granted, rejected, str(result)) == (2, 1, "VoteWon")
    trk.progress[1].recent_active = True
    assert not trk.quorum_active()
    trk.progress[3].recent_active = True
    assert trk.quorum_active()
    seen: list[int] = []
    trk.visit(lambda i, pr: seen.append(i))
    assert seen == [1, 2, 3, 4]
    cs = trk.conf_state()
    assert (cs.voters, cs.learners, cs.voters_outgoing, cs.learners_next) == (
        [1, 2, 3],
        [4],
        [],
        [],
    )
