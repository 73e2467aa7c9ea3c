"""``$JS.API.DIRECT.GET.<stream>[.<subject>]``: messages straight from a stream's store.

nats-server answers a direct get with the stored message itself (its own headers, then
``Nats-Stream``/``Nats-Subject``/``Nats-Sequence``/``Nats-Time-Stamp``), or with a bare
status: ``404 Message Not Found``/``404 No Results``, ``408 Empty Request``/``Malformed
Request``/``Bad Request``, ``413 Too Many Results``. Batch and ``multi_last`` requests send
one reply per message, each also carrying ``Nats-Num-Pending`` (matching messages left after
this one) and ``Nats-Last-Sequence`` (the previous reply's sequence, 0 for the first), and
end with a ``204 EOB`` status carrying the same two headers (plus ``Nats-UpTo-Sequence`` for
``multi_last``). The rules, checked against nats-server 2.15.1:

- The request body is decoded like Go's ``encoding/json`` into ``JSApiMsgGetRequest``:
  unknown keys are ignored, keys match field names case-insensitively, a type mismatch
  (``"seq": -1``, ``"batch": 2.5``, a bad RFC 3339 time) makes the request malformed.
- ``seq`` alone reads exactly that sequence; in a batch, the first reply is the first
  message at or after it. ``start_time`` replaces ``seq`` with the first message at or
  after that time. ``batch`` < 0 sends just the EOB.
- ``multi_last``: the last message of every subject matching any filter, at or below
  ``up_to_seq`` (or the last sequence before ``up_to_time``), ascending; more than 1024 is
  413. ``seq`` skips results below it; ``batch`` and ``max_bytes`` stop early.
- ``max_bytes`` (default: the server's max_pending) stops after the reply that reaches it,
  counting subject, stored headers and payload.
- The subject form takes an optional body that may set nothing but ``max_bytes``.

Only the StreamStore interface is used; everything runs on the event loop, so a batch sees
one consistent store.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from natsd.core.clock import rfc3339
from natsd.jetstream.config.stream_types import StorageType
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.stream.queries import seq_from_time
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire.gojson import _GoJSONError
from natsd.jetstream.wire.gotyped import go_time_ns
from natsd.router.publish import ReplyStream
from natsd.storage.store import StoredMsg, StoreError, StreamStore, direct_size

__all__ = [
    "DIRECT_GET_PREFIX",
    "DirectRequest",
    "MalformedRequest",
    "direct_get",
    "on_direct_get",
    "parse_request",
]

#: nats-server falls back to the server's max_pending (64 MB by default) for max_bytes.
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
#: nats-server's ``maxAllowedResponses`` for multi_last.
MAX_MULTI_RESULTS: Final = 1024

_U64: Final = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

_EMPTY: Final = b"NATS/1.0 408 Empty Request\r\n\r\n"
_MALFORMED: Final = b"NATS/1.0 408 Malformed Request\r\n\r\n"
_BAD: Final = b"NATS/1.0 408 Bad Request\r\n\r\n"
_NOT_FOUND: Final = b"NATS/1.0 404 Message Not Found\r\n\r\n"
_NO_RESULTS: Final = b"NATS/1.0 404 No Results\r\n\r\n"
_TOO_MANY: Final = b"NATS/1.0 413 Too Many Results\r\n\r\n"
_HDR_LINE: Final = b"NATS/1.0\r\n"


class MalformedRequest(ValueError):
    """The body is not a JSONApiMsgGetRequest as Go's encoding/json would read it."""


@dataclass(slots=True)
class DirectRequest:
    """nats-server's ``JSApiMsgGetRequest``; times are nanoseconds since the epoch."""

    seq: int = 0
    last_by_subj: str = ""
    next_by_subj: str = ""
    batch: int = 0
    max_bytes: int = 0
    start_time: int | None = None
    multi_last: list[str] = field(default_factory=list)
    up_to_seq: int = 0
    up_to_time: int | None = None

    def is_empty(self) -> bool:
        return (
            self.seq == 0
            and not self.last_by_subj
            and not self.next_by_subj
            and not self.multi_last
            and self.start_time is None
        )

    def conflicts(self) -> bool:
        """The option combinations nats-server refuses with 408 Bad Request."""
        last, nxt, multi = self.last_by_subj, self.next_by_subj, self.multi_last
        start = self.start_time is not None
        return bool(
            (self.seq > 0 and last)
            or (self.seq > 0 and start)
            or (start and last)
            or (last and nxt)
            or (last and self.batch > 0)
            or (last and multi)
            or (nxt and multi)
            or (self.up_to_seq > 0 and self.up_to_time is not None)
        )

    def selects_anything(self) -> bool:
        """Any field but max_bytes: refused in the subject form's optional body."""
        return bool(
            self.seq
            or self.last_by_subj
            or self.next_by_subj
            or self.batch
            or self.start_time is not None
            or self.multi_last
            or self.up_to_seq
            or self.up_to_time is not None
        )


# ---------------------------------------------------------------------- decoding
def _uint(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _U64:
        raise MalformedRequest("expected an unsigned integer")
    return v


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not _I64_MIN <= v <= _I64_MAX:
        raise MalformedRequest("expected an integer")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise MalformedRequest("expected a string")
    return v


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list):
        raise MalformedRequest("expected an array of strings")
    out: list[str] = []
    for x in v:
        if x is None:
            out.append("")  # Go leaves the element at its zero value
        else:
            out.append(_str(x))
    return out


def parse_rfc3339(s: str) -> int:
    """A JSON ``time.Time`` as nats-server compares it with stored timestamps: Go's
    ``UnixNano()`` of what ``time.Parse(time.RFC3339, s)`` reads."""
    try:
        return go_time_ns(s)
    except _GoJSONError:
        raise MalformedRequest("bad time") from None


def _time(v: Any) -> int:
    if not isinstance(v, str):
        raise MalformedRequest("expected a time string")
    return parse_rfc3339(v)


_FIELDS: Final = (
    "seq",
    "last_by_subj",
    "next_by_subj",
    "batch",
    "max_bytes",
    "start_time",
    "multi_last",
    "up_to_seq",
    "up_to_time",
)
_FOLDED = {f.casefold(): f for f in _FIELDS}


def parse_request(data: bytes) -> DirectRequest:
    """Decode a request body the way Go's ``json.Unmarshal`` fills JSApiMsgGetRequest."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise MalformedRequest("invalid JSON") from None
    req = DirectRequest()
    if doc is None:
        return req
    if not isinstance(doc, dict):
        raise MalformedRequest("not an object")
    for key, v in doc.items():
        name = key if key in _FIELDS else _FOLDED.get(key.casefold())
        if name is None:
            continue
        if v is None:
            # null leaves a value field alone and clears a pointer / slice.
            if name in ("start_time", "up_to_time"):
                setattr(req, name, None)
            elif name == "multi_last":
                req.multi_last = []
            continue
        if name in ("seq", "up_to_seq"):
            setattr(req, name, _uint(v))
        elif name in ("batch", "max_bytes"):
            setattr(req, name, _int(v))
        elif name in ("last_by_subj", "next_by_subj"):
            setattr(req, name, _str(v))
        elif name == "multi_last":
            req.multi_last = _strs(v)
        else:
            setattr(req, name, _time(v))
    return req


# ---------------------------------------------------------------------- replies
def _msg_headers(name: bytes, m: StoredMsg, subject: bytes, extra: bytes) -> bytes:
    """The stored headers (minus the blank line), the direct-get headers, ``extra``."""
    hdr = m.hdr
    base = hdr[:-2] if hdr is not None and len(hdr) > 2 else _HDR_LINE
    return (
        b"%sNats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\n"
        b"Nats-Time-Stamp: %s\r\n%s\r\n"
        % (
            base,
            name,
            subject,
            m.seq,
            rfc3339(m.ts).encode(),
            extra,
        )
    )


def _pending(np: int, lseq: int) -> bytes:
    return b"Nats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n" % (np, lseq)


# ---------------------------------------------------------------------- handler
def _reply_to(ja: JsAccount, reply: bytes) -> ReplyStream:
    """Answers go straight into the account's Sublist (what ``engine.send`` does)."""
    return ReplyStream(ja.account.sublist, reply)


DIRECT_GET_PREFIX: Final = b"$JS.API.DIRECT.GET."


def _answering(ja: JsAccount, name: str) -> Stream | None:
    """The stream that answers a direct get for stream ``name``: the stream itself when it
    allows direct gets, or one of the mirrors answering for it (``mirror_direct``), chosen
    at random as nats-server's queue group of the stream and its mirrors chooses."""
    stream = ja.streams.get(name)
    if stream is not None and not stream.cfg.allow_direct:
        stream = None
    mirrors = ja.mirror_direct.get(name) if ja.mirror_direct else None
    if mirrors:
        pick = random.randrange(len(mirrors) + (stream is not None))
        if pick < len(mirrors):
            return mirrors[pick]
    return stream


def on_direct_get(
    ja: JsAccount, subject: bytes, reply: bytes | None, data: bytes, fixed: Stream | None = None
) -> None:
    """A request on ``$JS.API.DIRECT.GET.>``. The body-less subject form (every KV ``get``)
    is answered here without tokenising the subject; the rest goes to ``direct_get``.
    ``fixed``: the stream that answers (a mirror answering for its origin on a cluster),
    whatever the subject names."""
    if not reply:
        return
    subj = subject.decode(errors="replace")
    rest = subj[len(DIRECT_GET_PREFIX) :]
    dot = rest.find(".")
    if dot > 0 and not data and dot + 1 < len(rest):
        stream = fixed if fixed is not None else _answering(ja, rest[:dot])
        if stream is not None:
            _get_last(stream, rest[dot + 1 :], _reply_to(ja, reply))
            return
    direct_get(ja, subj.split(".")[2:], reply, data, fixed)


def direct_get(
    ja: JsAccount, toks: list[str], reply: bytes, data: bytes, fixed: Stream | None = None
) -> None:
    """``$JS.API.DIRECT.GET.<stream>[.<subject>]`` (``toks`` follow ``$JS.API``)."""
    if len(toks) < 3 or toks[1] != "GET":
        return
    send = _reply_to(ja, reply)
    stream = fixed if fixed is not None else _answering(ja, toks[2])
    if stream is None:
        # nats-server only listens on DIRECT.GET for streams that allow it, so the
        # requester gets the no-responders status; send the same thing.
        subj = ".".join(["$JS.API", *toks]).encode()
        send(b"NATS/1.0 503\r\nNats-Subject: " + subj + b"\r\n\r\n")
        return
    if len(toks) > 3:
        key = ".".join(toks[3:])
        if not data and key:
            _get_last(stream, key, send)
            return
        req = DirectRequest()
        if data:
            try:
                req = parse_request(data)
            except MalformedRequest:
                send(_MALFORMED)
                return
            if req.selects_anything():
                send(_BAD)
                return
        if not key:
            send(_BAD)
            return
        req.last_by_subj = key
    else:
        if not data:
            send(_EMPTY)
            return
        try:
            req = parse_request(data)
        except MalformedRequest:
            send(_MALFORMED)
            return
        if req.is_empty():
            send(_EMPTY)
            return
        if req.conflicts():
            send(_BAD)
            return
    if req.multi_last:
        _get_multi(stream, req, send)
    else:
        _get(stream, req, send)


def _get_last(stream: Stream, key: str, send: ReplyStream) -> None:
    """The subject form without a body (every KV ``get``): the key's last message."""
    m = stream.store.load_last_msg(key)
    if m is None:
        send(_NOT_FOUND)
    else:
        send(_msg_headers(stream.name.encode(), m, m.subject.encode(), b""), m.data)


def _max_bytes(req: DirectRequest) -> int:
    return req.max_bytes if req.max_bytes != 0 else DEFAULT_MAX_BYTES


def _get(stream: Stream, req: DirectRequest, send: ReplyStream) -> None:
    """By sequence, next/last by subject or start time; ``batch`` for several."""
    store, name = stream.store, stream.name.encode()
    seq = seq_from_time(store, req.start_time) if req.start_time is not None else req.seq
    nxt = req.next_by_subj
    is_batch = req.batch != 0
    batch = req.batch if is_batch else 1
    np = store.num_pending(seq, nxt, False) if is_batch else 0
    if is_batch and seq > 0 and not nxt:
        _get_batch(name, store, seq, req, np, send)
        return
    mb = _max_bytes(req)
    lseq = sent_bytes = 0
    for i in range(batch):
        m: StoredMsg | None
        if seq > 0 and not nxt:
            # A batch steps over deleted sequences from the start; a single get does not.
            # Most sequences of a batch are live: try the exact one before searching.
            m = store.load_msg(seq)
            if m is None and (i > 0 or is_batch):
                m = store.load_next_msg("", seq)
            if m is not None:
                seq = m.seq
            seq += 1
        elif nxt:
            m = store.load_next_msg(nxt, seq)
            if m is not None:
                seq = m.seq + 1
        else:
            m = store.load_last_msg(req.last_by_subj)
        if m is None:
            if i > 0:
                break  # a batch that runs out ends with the EOB below
            send(_NOT_FOUND)
            return
        subject = m.subject.encode()
        if is_batch:
            np = max(np - 1, 0)
            hdr = _msg_headers(name, m, subject, _pending(np, lseq))
        else:
            hdr = _msg_headers(name, m, subject, b"")
        lseq = m.seq
        send(hdr, m.data)
        sent_bytes += direct_size(m)
        if sent_bytes >= mb:
            break
    if is_batch:
        send(b"NATS/1.0 204 EOB\r\n" + _pending(np, lseq) + b"\r\n")


_NS: Final = 1_000_000_000
#: A batch is loaded and sent this many messages / bytes at a time (at least one message).
_CHUNK_MSGS: Final = 1024
_CHUNK_BYTES: Final = 1024 * 1024


def _frac_z(frac: int) -> bytes:
    """The end of an RFC 3339 time after the seconds: ``.<nanoseconds>Z``, trailing zeros
    trimmed, or ``Z`` on a whole second (Go's RFC3339Nano)."""
    if not frac:
        return b"Z"
    return b".%sZ" % (b"%d" % (_NS + frac))[1:].rstrip(b"0")


def _get_batch(
    name: bytes, store: StreamStore, seq: int, req: DirectRequest, np: int, send: ReplyStream
) -> None:
    """A batch from ``seq`` with no subject filter (the Spark reader's request): messages
    come from ``load_range`` and go out through ``ReplyStream.many``, a chunk at a time (so
    a large batch never holds more than a chunk of loaded messages besides its frames).
    Replies are what ``_msg_headers`` and ``_pending`` make, byte for byte."""
    mb = _max_bytes(req)
    lseq = 0
    # max_bytes < 0 stops after the first reply, as nats-server does.
    left = req.batch if mb > 0 else min(req.batch, 1)
    budget = mb if mb > 0 else 0  # bytes left before max_bytes (0: no limit)
    # Per subject: the Nats-Stream and Nats-Subject lines, the Nats-Sequence key, and the
    # subject's length in bytes (what max_bytes counts, with headers and payload).
    pres: dict[str, tuple[bytes, int]] = {}
    lsecs = -1
    stamp = b""  # lsecs as RFC 3339 up to the seconds
    while left > 0:
        want = min(left, _CHUNK_MSGS)
        cap = min(budget, _CHUNK_BYTES) if budget > 0 else _CHUNK_BYTES
        msgs = store.load_range(seq, want, cap)
        if not msgs:
            if not lseq:
                send(_NOT_FOUND)
                return
            break
        hdrs: list[bytes] = []
        payloads: list[bytes] = []
        used = 0
        for m in msgs:
            subj = m.subject
            known = pres.get(subj)
            if known is None:
                sb = subj.encode()
                known = (
                    b"Nats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: " % (name, sb),
                    len(sb),
                )
                pres[subj] = known
            pre, slen = known
            ts = m.ts
            secs = ts // _NS
            if secs != lsecs:
                lsecs = secs
                stamp = rfc3339(secs * _NS).encode()[:-1]
            frac = ts % _NS
            if np > 0:
                np -= 1
            hdr = m.hdr
            data = m.data
            if hdr is not None:
                used += len(hdr)
                base = hdr[:-2] if len(hdr) > 2 else _HDR_LINE
            else:
                base = _HDR_LINE
            used += slen + len(data)
            if frac % 10:
                # frac as 9 digits: "%09d" would take mypyc off its fast bytes formatting.
                digits = (b"%d" % (_NS + frac))[1:]
                h = (
                    b"%s%s%d\r\nNats-Time-Stamp: %s.%sZ\r\n"
                    b"Nats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
                    % (base, pre, m.seq, stamp, digits, np, lseq)
                )
            else:
                h = (
                    b"%s%s%d\r\nNats-Time-Stamp: %s%s\r\n"
                    b"Nats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
                    % (base, pre, m.seq, stamp, _frac_z(frac), np, lseq)
                )
            hdrs.append(h)
            payloads.append(data)
            lseq = m.seq
        send.many(hdrs, payloads)
        if budget > 0 and used >= budget:
            break  # the last message reached max_bytes
        if len(msgs) < want and used < cap:
            break  # the stream ran out
        left -= len(msgs)
        budget = budget - used if budget > 0 else 0
        seq = lseq + 1
    send(b"NATS/1.0 204 EOB\r\n" + _pending(np, lseq) + b"\r\n")


def _get_multi(stream: Stream, req: DirectRequest, send: ReplyStream) -> None:
    """The last message of every subject matching ``multi_last``."""
    store, name = stream.store, stream.name.encode()
    mb = _max_bytes(req)
    up_to = req.up_to_seq
    if req.up_to_time is not None:
        up_to = seq_from_time(store, req.up_to_time)
        # A ceiling at or below the first message would select messages after the time.
        if up_to <= store.state().first_seq:
            send(_NO_RESULTS)
            return
        up_to -= 1
    st = store.state()
    if up_to == 0:
        up_to = st.last_seq
    # An empty filter matches nothing in nats-server (the stores read "" as "all").
    filters = [f for f in req.multi_last if f]
    seqs: list[int] = []
    # nats-server's file store finds no block for a ceiling outside the stream.
    in_range = stream.cfg.storage == StorageType.MEMORY or st.first_seq <= up_to <= st.last_seq
    if filters and in_range:
        try:
            seqs = store.multi_last_seqs(filters, up_to, MAX_MULTI_RESULTS)
        except StoreError as e:
            if "too many" in str(e):
                send(_TOO_MANY)
            else:
                send(f"NATS/1.0 500 {e}\r\n\r\n".encode())
            return
    if not seqs:
        send(_NO_RESULTS)
        return
    np = len(seqs) - 1
    lseq = sent_bytes = sent = 0
    for s in seqs:
        if s < req.seq:
            np = max(np - 1, 0)
            continue
        m = store.load_msg(s)
        if m is None:
            send(_NOT_FOUND)
            return
        subject = m.subject.encode()
        send(_msg_headers(name, m, subject, _pending(np, lseq)), m.data)
        lseq = m.seq
        sent_bytes += direct_size(m)
        if sent_bytes >= mb:
            break
        sent += 1
        if req.batch > 0 and sent >= req.batch:
            break
        np = max(np - 1, 0)
    send(b"NATS/1.0 204 EOB\r\n" + _pending(np, lseq) + b"Nats-UpTo-Sequence: %d\r\n\r\n" % up_to)
