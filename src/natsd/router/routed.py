"""Delivery of a message a peer routed to us (nats-server's ``processMsgResults`` for a
ROUTER): local plain subscribers, and one member of each queue group the peer named; never
other queue groups, never forwarded again (a message crosses one route at most).

The route connection calls ``deliver_routed`` straight from its read loop (compiled, like
the client's publish loop) and counts the account's statistics once per run of messages of
one account, as the client does once per read.
"""

from __future__ import annotations

from typing import Final

from natsd.router.deliver import deliver
from natsd.router.subscription import Subscription

__all__ = ["deliver_routed"]

_NO_QUEUES: Final[list[list[Subscription]]] = []


def deliver_routed(
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    subject: bytes,
    reply: bytes | None,
    queues: list[bytes] | None,
    tail: bytes,
    size: int,
    hlen: int,
) -> int:
    """Deliver a routed message to ``psubs`` and the named groups of ``qsubs``; returns the
    deliveries made."""
    if qsubs:
        qsubs = [g for g in qsubs if g[0].queue in queues] if queues else _NO_QUEUES
    if not psubs and not qsubs:
        return 0
    return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)
