"""Every start-up ordering of a natsd cluster ends in one full mesh (issue 33).

The real ``Mesh``, ``RouteDialer`` and ``RouteConnection`` run on a network driven by
hand (tests/route_sim.py): each server lists every server's route URL, itself included,
and the explorer follows every ordering of starts, refused dials, accepts, reads (CONNECT
and INFO exchanges), duplicate resolutions, writes and redials, to its end. Each end must
be a full mesh: every pair of servers joined by one route, the same connection at both
ends; every server knows which URL is its own (JetStream's meta group counts the servers
from that); nothing left open unused; and no ordering may come back to a state it passed
(it could go round for ever).

The planted bugs at the end show the explorer catches what it exists to catch.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from route_sim import Failure, World, explore, random_run

from natsd.cluster.dialer import DialState, RouteDialer
from natsd.cluster.mesh import Mesh
from natsd.connection.route import RouteConnection

pytestmark = pytest.mark.timeout(300)


def test_every_ordering_of_three_servers_ends_in_one_mesh() -> None:
    # Each server's writes go out with the step that queued them (a server's own loop
    # turn is explored separately in the two-server test below).
    stats = explore(lambda: World(3, eager_turns=True, early=0))
    assert stats.runs >= 50 and stats.states >= 2_000, stats


def test_every_ordering_of_two_servers_with_turns_early_timers_and_a_cut() -> None:
    # Here a server's loop turn (its writes) is a step of its own, so it may read before
    # it writes: the race that hid a route to itself from a server. The network may cut
    # the route once, and a redial may fire before what would settle it arrives.
    stats = explore(lambda: World(2, cuts=True, early=0))
    assert stats.runs >= 5, stats
    stats = explore(lambda: World(2, early=1))
    assert stats.runs >= 5, stats


@pytest.mark.parametrize("seed", range(0, 200, 20))
def test_five_servers_sampled(seed: int) -> None:
    for s in range(seed, seed + 20):
        w = random_run(lambda: World(5, cuts=True), s)
        assert len(w.trace) > 100


def test_every_close_is_logged_at_both_ends(caplog: pytest.LogCaptureFixture) -> None:
    closed = 0
    caplog.set_level(logging.INFO, logger="natsd")
    for seed in range(40):
        caplog.clear()
        w = random_run(lambda: World(3), seed)
        ends = [e for c in w.conns for e in c.ends if e is not None and e.closed]
        lines = [r.getMessage() for r in caplog.records if "connection closed" in r.getMessage()]
        assert len(lines) == len(ends)
        dup = [e for e in ends if e.close_reason == "Duplicate Route"]
        assert sum("Router connection closed: Duplicate Route" in x for x in lines) == len(dup)
        closed += len(dup)
    assert closed > 0  # duplicates were resolved in these orderings


# ------------------------------------------------------------------ planted bugs
def _fails(make: Any, monkeypatch: pytest.MonkeyPatch, where: Any, name: str, bug: Any) -> str:
    monkeypatch.setattr(where, name, bug)
    with pytest.raises(Failure) as e:
        explore(make)
    return str(e.value)


def test_catches_a_dialer_that_redials_a_peer_it_already_reaches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ended = RouteDialer.route_ended

    def bug(self: RouteDialer, route: RouteConnection) -> None:
        ended(self, route)
        if self.state is DialState.HELD:  # "lost a duplicate: dial again"
            self.state = DialState.CONNECTED
            self.peer_gone(self.held_by)
            self.held_by, self.state = "", DialState.BACKING_OFF
            self._back_off()

    monkeypatch.setattr(Mesh, "reached", lambda self, key: "")  # and dials without looking
    make = lambda: World(3, eager_turns=True, early=0)  # noqa: E731
    msg = _fails(make, monkeypatch, RouteDialer, "route_ended", bug)
    assert "no end" in msg or "round for ever" in msg


def test_catches_a_lost_route_that_is_not_redialed(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = Mesh.route_closed

    def bug(self: Mesh, route: RouteConnection, reason: str) -> None:
        if self.routes.get(route.rid) is route:
            self._dialer_of.pop(route.rid, None)  # the dialer never hears a route went
        closed(self, route, reason)

    msg = _fails(lambda: World(2, cuts=True, early=0), monkeypatch, Mesh, "route_closed", bug)
    assert "is connected" in msg  # its dialer holds a connection long gone


def test_catches_a_server_that_never_learns_its_own_url(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = _fails(lambda: World(2, early=0), monkeypatch, RouteDialer, "to_self", lambda self: None)
    assert "expects 3 servers" in msg


def test_catches_ends_that_keep_different_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    # each end keeps the connection it dialed itself: both close the other's (and a
    # dialer redials without looking whether the peer came to it meanwhile, which would
    # otherwise settle it)
    def bug(self: Mesh, old: RouteConnection, new: RouteConnection) -> bool:
        return new.solicited

    monkeypatch.setattr(Mesh, "reached", lambda self, key: "")

    msg = _fails(lambda: World(2, early=0), monkeypatch, Mesh, "_keeps_new", bug)
    assert "no end" in msg or "round for ever" in msg
