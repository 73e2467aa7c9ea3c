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
from natsd.router.subscription import Sink, Subscription

__all__ = ["deliver_routed", "js_deliver_index"]

_NO_QUEUES: Final[list[list[Subscription]]] = []
_JS_ACK: Final = b"$JS.ACK."


def js_deliver_index(reply: bytes) -> int:
    """Where ``@<subject>`` starts in a JetStream ack reply that carries a consumer's
    delivery subject across a route (nats-server's jsAckDeliverIdx: the '@' after at least
    eight dots of a ``$JS.ACK.`` subject); -1 when there is none."""
    if not reply.startswith(_JS_ACK):
        return -1
    dots = 0
    for i in range(len(reply)):
        c = reply[i]
        if c == 46:  # '.'
            dots += 1
        elif c == 64 and dots >= 8:  # '@'
            return i
    return -1


def deliver_routed(
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    subject: bytes,
    reply: bytes | None,
    queues: list[bytes] | None,
    tail: bytes,
    size: int,
    hlen: int,
    skip: set[Sink] | None = None,
) -> int:
    """Deliver a routed message to ``psubs`` and the named groups of ``qsubs``; returns the
    deliveries made. A JetStream delivery (``<ack reply>@<subject>``) reaches the client
    under its stream subject with the plain ack reply, as nats-server delivers it.

    ``skip``: connections this route's messages must not reach yet (a connection moving in
    from the peer, which delivers them itself until it says it stopped: cluster/handoff.py).
    """
    if skip is not None:
        psubs = [s for s in psubs if s.client not in skip]
    if reply is not None and reply.startswith(_JS_ACK):
        i = js_deliver_index(reply)
        if 0 <= i < len(reply) - 1:
            subject, reply = reply[i + 1 :], reply[:i]
    if qsubs:
        qsubs = [g for g in qsubs if g[0].queue in queues] if queues else _NO_QUEUES
    if not psubs and not qsubs:
        return 0
    return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)
