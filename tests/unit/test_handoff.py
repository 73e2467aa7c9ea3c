"""cluster/handoff.py's control messages come from a peer server: whatever arrives, nothing
raises into the route's read loop and nothing is created for a message that names no move."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from natsd.cluster.handoff import Handoff
from natsd.router.account import Account
from natsd.router.subscription import Subscription


class _Mesh:
    def __init__(self) -> None:
        self.by_server: dict[str, Any] = {}
        self.routes: dict[int, Any] = {}


class _Host:
    server_id = "NSELF"
    accounts: dict[str, Account] = {}
    auth_required = False

    def __init__(self) -> None:
        self.created = 0

    def new_client(self) -> Any:
        self.created += 1
        raise AssertionError("no client may be built for these messages")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"op": "ready"}',
        b'{"op": "ready", "id": "1"}',
        b'{"op": "ready", "id": 7}',
        b'{"op": "refuse", "id": 7, "why": 3}',
        b'{"op": "switched", "id": 7, "from": null}',
        b'{"op": "abort", "id": 7, "from": "NOBODY"}',
        b'{"op": "prepare", "id": 7, "from": "NOBODY"}',
        b'{"op": "prepare", "id": 7}',
        b'{"op": "what", "id": 7}',
        b'{"op": "prepare", "id": 1180591620717411303424}',
    ],
)
def test_bad_or_unknown_control_messages_are_dropped(data: bytes, caplog: Any) -> None:
    host = _Host()
    h = Handoff(host, _Mesh(), Account("$SYS"), "/nonexistent")  # type: ignore[arg-type]
    sub = Subscription(b"$NATSD.MOVE.NSELF", None, b"move", callback=None)
    with caplog.at_level(logging.WARNING, logger="natsd"):
        h._on_ctl(sub, b"$NATSD.MOVE.NSELF", None, None, data)
    assert host.created == 0
    assert not h._in and not h._out
