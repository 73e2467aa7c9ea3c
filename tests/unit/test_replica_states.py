"""The states of a replicated stream's replica (jetstream/cluster/replica.py): the table
says where each state may go, and a move outside it is reported, never taken silently."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from natsd.jetstream.cluster.replica import _NEXT, LEADS, ReplicaState, StreamReplica

S = ReplicaState


def test_every_state_has_its_moves_written_down() -> None:
    assert set(_NEXT) == set(ReplicaState)
    assert _NEXT[S.STOPPED] == frozenset()
    for state, nxt in _NEXT.items():
        if state is not S.STOPPED:
            assert S.STOPPED in nxt, state  # any replica can leave its group
    # leading is reached only through readying (its log applied first)
    assert [s for s, nxt in _NEXT.items() if S.LEADING in nxt and s not in LEADS] == [
        S.READYING
    ]
    # a replica under repair never leads before it follows
    assert _NEXT[S.REPAIRING] == {S.FOLLOWING, S.STOPPED}


def test_every_state_is_reachable_from_a_new_replica() -> None:
    seen, todo = set(), [S.FOLLOWING, S.REPAIRING]
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo.extend(_NEXT[s])
    assert seen == set(ReplicaState)


def _bare(state: ReplicaState) -> StreamReplica:
    r = StreamReplica.__new__(StreamReplica)
    r.state = state
    r.ja = SimpleNamespace(account=SimpleNamespace(name="A"))  # type: ignore[assignment]
    r.stream = SimpleNamespace(name="S")  # type: ignore[assignment]
    return r


@pytest.mark.parametrize(("old", "new"), [(S.FOLLOWING, S.LEADING), (S.STOPPED, S.FOLLOWING)])
def test_a_move_outside_the_table_is_reported(
    caplog: pytest.LogCaptureFixture, old: ReplicaState, new: ReplicaState
) -> None:
    r = _bare(old)
    with caplog.at_level(logging.ERROR, logger="natsd"):
        r._enter(new)
    assert "is not a transition" in caplog.text
    assert r.state is new


def test_a_move_in_the_table_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    r = _bare(S.FOLLOWING)
    with caplog.at_level(logging.ERROR, logger="natsd"):
        r._enter(S.READYING)
        r._enter(S.LEADING)
        r._enter(S.OUT_OF_TOUCH)
        r._enter(S.LEADING)
        r._enter(S.HANDING_OVER)
        r._enter(S.FOLLOWING)
    assert caplog.text == ""
