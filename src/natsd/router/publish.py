"""Server-originated publishes: replies, advisories and other messages the engine sends.

The engine never touches connections; it publishes into an account's Sublist exactly as a
client would, and ``deliver`` queues the frames on the subscribers' connections.
"""

from __future__ import annotations

from natsd.router.deliver import deliver
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = ["publish"]


def publish(
    sublist: Sublist[Subscription],
    subject: bytes,
    reply: bytes | None,
    hdr: bytes | None,
    payload: bytes,
) -> int:
    """Deliver one message to every matching subscription; returns deliveries made."""
    psubs, qsubs = sublist.match(subject)
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
