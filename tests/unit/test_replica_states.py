"""The states of a replicated stream's replica (jetstream/cluster/replica.py): the table
says where each state may go, and a move outside it is reported, never taken silently."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from natsd.jetstream.cluster.catchup import StreamSnapshot, Transfer
from natsd.jetstream.cluster.replica import _NEXT, LEADS, ReplicaState, StreamReplica
from natsd.jetstream.cluster.streams import StreamGroups
from natsd.jetstream.stream.entries import encode_msg

S = ReplicaState


def test_every_state_has_its_moves_written_down() -> None:
    assert set(_NEXT) == set(ReplicaState)
    assert _NEXT[S.STOPPED] == frozenset()
    for state, nxt in _NEXT.items():
        if state is not S.STOPPED:
            assert S.STOPPED in nxt, state  # any replica can leave its group
    # leading is reached only through readying (its log applied first)
    assert [s for s, nxt in _NEXT.items() if S.LEADING in nxt and s not in LEADS] == [S.READYING]
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


def test_a_repair_overtaken_by_a_leaders_snapshot_ends_and_applies_what_waited() -> None:
    """A replica repairing its store (``CatchUp.repair``) gets a MsgSnap from the leader;
    the transfer aims for it (``CatchUp.offer``). When it is complete the replica must stop
    repairing: the entries committed after the snapshot, which waited, apply, and those it
    stands for do not. (Left repairing, the replica deferred every entry for ever: found
    by the five-server fault run, a replica stuck at 8,664 messages while its Raft group
    had applied every entry.)"""

    applied: list[int] = []
    installed: list[dict[str, tuple[bytes, bytes]]] = []
    stepped: list[bytes] = []
    r = _bare(S.REPAIRING)
    r.deferred = []
    r.consumers = SimpleNamespace(install=installed.append)  # type: ignore[assignment]
    seeded: list[dict[str, tuple[int, str]]] = []
    r.stream = SimpleNamespace(  # type: ignore[assignment]
        name="S",
        apply_entry=lambda e: applied.append(e.seq),
        rebuild_dedupe=lambda now: None,
        rebuild_schedules=lambda: None,
        store=SimpleNamespace(seed_sources=seeded.append),
    )
    r.group = SimpleNamespace(applied=40)  # type: ignore[assignment]
    for index, seq in ((10, 5), (20, 6), (30, 7), (40, 8)):  # committed while it repaired
        r.apply(index, encode_msg(1, seq, 0, 0, "s", None, None, "", "", b""))
    assert applied == [] and len(r.deferred) == 4
    owner = SimpleNamespace(
        members={b"G": r},
        clock=SimpleNamespace(time_ns=lambda: 0),
        raft=SimpleNamespace(
            host=SimpleNamespace(step_held=lambda g, m: stepped.append(g)), kick=lambda: None
        ),
    )
    snap = StreamSnapshot(1, 6, {"D": (b"{}", b"{}")}, {"A > >": (9, "ID")})
    held = SimpleNamespace(term=3)
    t = Transfer(b"G", None, held, 20, snap, 0x11, 1, 0)  # type: ignore[arg-type]
    StreamGroups._caught_up(owner, t)  # type: ignore[arg-type]
    assert r.state is S.FOLLOWING and not r.deferred
    assert stepped == [b"G"] and installed == [snap.consumers]
    assert seeded == [snap.sources]  # (the positions as the snapshot stands)
    assert applied == [7, 8]  # after the snapshot's index (20) only


class _Consumers:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def passivate(self) -> None:
        self.calls.append("passivate")

    def activate(self) -> None:
        self.calls.append("activate")


def test_back_in_touch_the_consumers_wait_for_the_log_applied_up_to_where_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader out of touch holds its consumers passive; back in touch it may still hold a
    consumer state it proposed before (with its ack-sync replies), which commits now: the
    consumers run again only once the log is applied up to where it was, so they start
    from that state and never deliver what those replies confirmed."""
    lease = [True]
    monkeypatch.setattr("natsd.jetstream.cluster.replica.has_lease", lambda g, now, t: lease[0])
    r = _bare(S.LEADING)
    node = SimpleNamespace(last_index=lambda: 10)
    r.group = SimpleNamespace(node=node, applied=8)  # type: ignore[assignment]
    r.consumers = _Consumers()  # type: ignore[assignment]
    r.resume_at = 0
    r._clock = lambda: 0.0  # type: ignore[method-assign]
    r._serve_reads = lambda g: None  # type: ignore[method-assign]

    r.keep_lease()
    assert (r.state, r.consumers.calls) == (S.LEADING, [])
    lease[0] = False
    r.keep_lease()
    assert (r.state, r.consumers.calls) == (S.OUT_OF_TOUCH, ["passivate"])
    lease[0] = True
    r.keep_lease()  # back in touch, entries 9 and 10 not applied yet
    assert (r.state, r.consumers.calls, r.resume_at) == (S.LEADING, ["passivate"], 10)
    r.group.applied = 9  # type: ignore[union-attr]
    r.keep_lease()
    assert r.consumers.calls == ["passivate"]
    r.group.applied = 10  # type: ignore[union-attr]
    r.keep_lease()
    assert (r.consumers.calls, r.resume_at) == (["passivate", "activate"], 0)
    r.keep_lease()
    assert r.consumers.calls == ["passivate", "activate"]

    # out of touch again before the log applied: nothing runs until the next time back
    lease[0] = False
    r.keep_lease()
    lease[0] = True
    r.group.applied = 10  # type: ignore[union-attr]
    node.last_index = lambda: 12
    r.keep_lease()
    lease[0] = False
    r.keep_lease()
    assert r.resume_at == 0
    r.group.applied = 12  # type: ignore[union-attr]
    r.keep_lease()
    assert r.consumers.calls == ["passivate", "activate", "passivate", "passivate"]
