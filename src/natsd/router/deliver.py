"""Fan-out of one published message to the subscriptions that match it.

This is the hot path. Each MSG/HMSG frame is two byte concatenations: ``MSG <subject> `` is
built once per message, the parser already sliced `` <size>\r\n<payload>\r\n`` out of the
publisher's input, and only the ``sid`` differs per subscriber. Sizes are copied from the
publisher's control line instead of being formatted again.
"""

from __future__ import annotations

from random import randrange
from typing import Final

from natsd.protocol.parser import message_body
from natsd.router.subscription import Sink, Subscription

__all__ = ["deliver", "no_responders_frame"]

_CRLF: Final = b"\r\n"


def deliver(
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    subject: bytes,
    reply: bytes | None,
    tail: bytes,
    size: int,
    hlen: int,
    publisher: Sink | None,
) -> int:
    """Deliver to every plain subscription and one member of each queue group.

    ``tail`` is ``b" <sizes>\r\n<data>\r\n"`` from the parser, ``size`` the length of
    ``<data>`` and ``hlen`` the length of its header block (0 for PUB). Returns the number of
    deliveries made.
    """
    head = b"HMSG " + subject + b" " if hlen else b"MSG " + subject + b" "
    if reply:
        tail = b" " + reply + tail
    n = 0
    for sub in psubs:
        c = sub.client
        if c is None:
            _internal(sub, subject, reply, tail, size, hlen)
            n += 1
        elif _to_sink(sub, c, publisher, subject, reply, head, tail, size, hlen):
            n += 1
    for group in qsubs:
        # One member of the group, picked at random; skip members that cannot take it.
        gsize = len(group)
        start = randrange(gsize) if gsize > 1 else 0
        for k in range(gsize):
            sub = group[(start + k) % gsize]
            c = sub.client
            if c is None:
                _internal(sub, subject, reply, tail, size, hlen)
                n += 1
                break
            if _to_sink(sub, c, publisher, subject, reply, head, tail, size, hlen):
                n += 1
                break
    return n


def _to_sink(
    sub: Subscription,
    c: Sink,
    publisher: Sink | None,
    subject: bytes,
    reply: bytes | None,
    head: bytes,
    tail: bytes,
    size: int,
    hlen: int,
) -> bool:
    """Queue one frame for a client subscriber; False when this subscriber must skip it."""
    if c is publisher and not c.echo:
        return False
    if c.sub_deny is not None and c.sub_deny(subject):
        return False
    if hlen and not c.headers:
        frame = _strip_headers(subject, sub.sid, reply, message_body(tail, size)[hlen:])
    else:
        frame = head + sub.sid + tail
    c.out.append(frame)
    c.out_size += len(frame)
    c.msgs_out += 1
    c.bytes_out += size
    if reply and c.track_reply is not None:
        c.track_reply(reply)
    if not c.flush_pending:
        c.kick()
    sub.delivered += 1
    if sub.max and sub.delivered >= sub.max:
        c.sub_exhausted(sub)
    return True


def _internal(
    sub: Subscription, subject: bytes, reply: bytes | None, tail: bytes, size: int, hlen: int
) -> None:
    cb = sub.callback
    assert cb is not None
    data = message_body(tail, size)
    if hlen:
        cb(sub, subject, reply, data[:hlen], data[hlen:])
    else:
        cb(sub, subject, reply, None, data)


def _strip_headers(subject: bytes, sid: bytes, reply: bytes | None, body: bytes) -> bytes:
    # A client that did not negotiate headers gets the payload alone, as nats-server does.
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(body), body)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(body), body)


_NO_RESPONDERS_PREFIX: Final = b"NATS/1.0 503\r\nNats-Subject: "


def no_responders_frame(reply: bytes, sid: bytes, subject: bytes) -> bytes:
    """The ``503`` status message nats-server sends on a request nobody subscribes to."""
    hdr = _NO_RESPONDERS_PREFIX + subject + b"\r\n\r\n"
    n = len(hdr)
    return b"HMSG %s %s %d %d\r\n%s\r\n" % (reply, sid, n, n, hdr)
