"""Fan-out of one published message to the subscriptions that match it.

This is the hot path. It builds each MSG/HMSG frame with two byte concatenations: the part
that depends only on the message (subject, reply, sizes, payload) is built once, and only the
``sid`` differs per subscriber. Sizes are copied from the publisher's control line instead of
being formatted again.
"""

from __future__ import annotations

from random import randrange

from natsd.router.subscription import Sink, Subscription

__all__ = ["deliver", "no_responders_frame"]

_CRLF = b"\r\n"


def deliver(
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    subject: bytes,
    reply: bytes | None,
    sizeb: bytes,
    payload: bytes,
    hlen: int,
    publisher: Sink | None,
) -> int:
    """Deliver to every plain subscription and one member of each queue group.

    ``hlen`` is the header length (0 for PUB; then ``sizeb`` is the payload size, otherwise
    ``b"<hdr> <total>"`` and ``payload`` holds headers and body). Returns deliveries made.
    """
    if hlen:
        head = b"HMSG " + subject + b" "
    else:
        head = b"MSG " + subject + b" "
    if reply:
        tail = b" " + reply + b" " + sizeb + _CRLF + payload + _CRLF
    else:
        tail = b" " + sizeb + _CRLF + payload + _CRLF
    n = 0
    for sub in psubs:
        c = sub.client
        if c is None:
            _internal(sub, subject, reply, payload, hlen)
            n += 1
            continue
        if c is publisher and not c.echo:
            continue
        if c.sub_deny is not None and c.sub_deny(subject):
            continue
        if hlen and not c.headers:
            frame = _strip_headers(subject, sub.sid, reply, payload[hlen:])
        else:
            frame = head + sub.sid + tail
        c.out.append(frame)
        c.out_size += len(frame)
        c.msgs_out += 1
        c.bytes_out += len(payload)
        if not c.flush_pending:
            c.kick()
        n += 1
        if sub.max:
            sub.delivered += 1
            if sub.delivered >= sub.max:
                c.sub_exhausted(sub)
    for group in qsubs:
        # One member of the group, picked at random; skip members that cannot take it.
        size = len(group)
        start = randrange(size) if size > 1 else 0
        for k in range(size):
            sub = group[(start + k) % size]
            c = sub.client
            if c is None:
                _internal(sub, subject, reply, payload, hlen)
                n += 1
                break
            if c is publisher and not c.echo:
                continue
            if hlen and not c.headers:
                frame = _strip_headers(subject, sub.sid, reply, payload[hlen:])
            else:
                frame = head + sub.sid + tail
            c.out.append(frame)
            c.out_size += len(frame)
            c.msgs_out += 1
            c.bytes_out += len(payload)
            if not c.flush_pending:
                c.kick()
            n += 1
            if sub.max:
                sub.delivered += 1
                if sub.delivered >= sub.max:
                    c.sub_exhausted(sub)
            break
    return n


def _internal(sub: Subscription, subject: bytes, reply: bytes | None, data: bytes, hlen: int) -> None:
    cb = sub.callback
    assert cb is not None
    if hlen:
        cb(sub, subject, reply, data[:hlen], data[hlen:])
    else:
        cb(sub, subject, reply, None, data)


def _strip_headers(subject: bytes, sid: bytes, reply: bytes | None, body: bytes) -> bytes:
    # A client that did not negotiate headers gets the payload alone, as nats-server does.
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(body), body)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(body), body)


_NO_RESPONDERS_PREFIX = b"NATS/1.0 503\r\nNats-Subject: "


def no_responders_frame(reply: bytes, sid: bytes, subject: bytes) -> bytes:
    """The ``503`` status message nats-server sends on a request nobody subscribes to."""
    hdr = _NO_RESPONDERS_PREFIX + subject + b"\r\n\r\n"
    n = len(hdr)
    return b"HMSG %s %s %d %d\r\n%s\r\n" % (reply, sid, n, n, hdr)
