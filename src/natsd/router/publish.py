"""Server-originated publishes: replies, advisories and other messages the engine sends.

The engine never touches connections; it publishes into an account's Sublist exactly as a
client would, and ``deliver`` queues the frames on the subscribers' connections.
"""

from __future__ import annotations

from natsd.router.deliver import deliver
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = ["publish", "publish_as"]


def publish(
    sublist: Sublist[Subscription],
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    payload: bytes,
) -> int:
    """Deliver one message to every matching subscription; returns deliveries made."""
    return publish_as(sublist, subject, subject, reply, hdr, payload)


def publish_as(
    sublist: Sublist[Subscription],
    to: bytes,
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    payload: bytes,
) -> int:
    """Deliver to the subscribers of ``to`` a message that carries ``subject``: what a
    JetStream consumer does (its messages keep their stream subject on the inbox)."""
    psubs, qsubs = sublist.match(to)
    if not psubs and not qsubs:
        return 0
    if hdr:
        hlen = len(hdr)
        size = hlen + len(payload)
        tail = b" %d %d\r\n%s%s\r\n" % (hlen, size, hdr, payload)
    else:
        hlen = 0
        size = len(payload)
        tail = b" %d\r\n%s\r\n" % (size, payload)
    return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)
