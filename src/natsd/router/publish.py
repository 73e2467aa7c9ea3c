"""Server-originated publishes: replies, advisories and other messages the engine sends.

The engine never touches connections; it publishes into an account's Sublist exactly as a
client would, and ``deliver`` queues the frames on the subscribers' connections.
"""

from __future__ import annotations

from natsd.router.deliver import deliver
from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription

__all__ = ["ReplyStream", "publish", "publish_as"]


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
    forward = sublist.forward
    if not psubs and not qsubs and forward is None:
        return 0
    if hdr:
        hlen = len(hdr)
        size = hlen + len(payload)
        tail = b" %d %d\r\n%s%s\r\n" % (hlen, size, hdr, payload)
    else:
        hlen = 0
        size = len(payload)
        tail = b" %d\r\n%s\r\n" % (size, payload)
    if forward is not None:
        # Routes are up: peers with interest get it too (a message delivered under another
        # subject, a JetStream consumer's, carries that subject in its routed reply).
        if to == subject:
            k = forward(subject, reply, tail, size, hlen, psubs, qsubs, None)
        else:
            k = forward.deliver_as(to, subject, reply, tail, size, hlen, psubs, qsubs)
        # Sent only across routes still counts as delivered (no no-responders for it).
        return 1 if k == 0 else max(k, 0)
    if not psubs and not qsubs:
        return 0
    return deliver(psubs, qsubs, subject, reply, tail, size, hlen, None)


class ReplyStream:
    """Messages with headers sent one after another to one subject (a direct-get batch).

    The subject is matched once. In the usual case, a single plain subscription by a client
    that takes headers (the requester's inbox), each message then costs one frame format and
    a list append instead of a match, a ``deliver`` and a copy per step; anything else goes
    through ``publish`` per message. Counters and the flush are what ``deliver`` does.
    """

    __slots__ = ("_prefix", "_sink", "_sub", "subject", "sublist")

    def __init__(self, sublist: Sublist[Subscription], subject: bytes) -> None:
        self.sublist = sublist
        self.subject = subject
        self._sub: Subscription | None = None
        self._sink: Sink | None = None
        self._prefix = b""
        psubs, qsubs = sublist.match(subject)
        if len(psubs) == 1 and not qsubs:
            sub = psubs[0]
            c = sub.client
            if c is not None and c.headers and c.sub_deny is None and not sub.max:
                self._sub = sub
                self._sink = c
                self._prefix = b"HMSG " + subject + b" " + sub.sid + b" "

    def __call__(self, hdr: bytes, payload: bytes = b"") -> None:
        sub = self._sub
        c = self._sink
        if sub is None or c is None:
            publish(self.sublist, self.subject, None, hdr, payload)
            return
        hlen = len(hdr)
        size = hlen + len(payload)
        frame = b"%s%d %d\r\n%s%s\r\n" % (self._prefix, hlen, size, hdr, payload)
        c.out.append(frame)
        c.out_size += len(frame)
        c.msgs_out += 1
        c.bytes_out += size
        sub.delivered += 1
        if not c.flush_pending:
            c.kick()

    def many(self, hdrs: list[bytes], payloads: list[bytes]) -> None:
        """``self(hdrs[i], payloads[i])`` for every i, with the counters updated once."""
        sub = self._sub
        c = self._sink
        n = len(hdrs)
        if sub is None or c is None:
            for i in range(n):
                publish(self.sublist, self.subject, None, hdrs[i], payloads[i])
            return
        out = c.out
        prefix = self._prefix
        nbytes = 0
        nout = 0
        for i in range(n):
            hdr = hdrs[i]
            payload = payloads[i]
            hlen = len(hdr)
            size = hlen + len(payload)
            frame = b"%s%d %d\r\n%s%s\r\n" % (prefix, hlen, size, hdr, payload)
            out.append(frame)
            nout += len(frame)
            nbytes += size
        c.out_size += nout
        c.msgs_out += n
        c.bytes_out += nbytes
        sub.delivered += n
        if n and not c.flush_pending:
            c.kick()
