"""The lean read path: ``$JS.API.DIRECT.GET`` batches parsed straight from the wire.

nats-py turns every delivered message into a ``Msg`` with a parsed header dict; for a
direct-get reply (seven headers) that parsing was most of the read cost. Here the replies
of our own requests skip it: :class:`RawReplies` hooks one nats-py connection so messages
for *our* subscriptions reach a plain callback as ``(subject, payload, raw header bytes)``,
and :class:`_Batch` takes ``Nats-Sequence``, ``Nats-Subject`` and ``Nats-Time-Stamp`` out of
the header block with ``bytes.rfind``/slices (the server appends its headers after the
stored ones, so searching from the end finds the server's even if a stored message has a
header of the same name). Values go into per-column Python lists; the caller builds Arrow
arrays from them once per batch. Everything else on the connection (API requests, pings)
still goes through nats-py unchanged.

Request pattern. Unfiltered reads split ``[lo, hi)`` into windows of ``batch`` sequences
and ask for each with ``{"seq": start, "batch": n, "max_bytes": M}``, keeping ``depth``
windows in flight, so the server prepares the next window while we parse this one. A
window is complete when a reply reaches its last sequence (deleted sequences make the
server step further; replies past the window are dropped), when the EOB says nothing is
pending, or on ``404``; otherwise (``max_bytes`` cut it short) a follow-up request asks for
the rest. Filtered reads (``next_by_subj``) cannot know where a batch ends, so they walk a
cursor one batch at a time.

Who owns what: one :class:`DirectRangeReader` per partition read, on the session's loop;
callbacks run on that loop only.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from typing import Any, cast

from nats.aio.client import Client
from nats.protocol.parser import AWAITING_CONTROL_LINE

from natsd_spark.client import JetStreamError

__all__ = ["Columns", "DirectRangeReader", "RawReplies", "parse_user_headers"]

#: Headers the server adds to a direct-get reply; not part of the stored message.
DIRECT_HEADER_NAMES = frozenset({
    "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
    "Nats-Last-Sequence", "Nats-UpTo-Sequence",
})
#: Bytes per direct-get request: bounds a window's memory for large messages.
MAX_BYTES = 8 * 1024 * 1024

_STREAM = b"\r\nNats-Stream:"
# The usual reply, matched by one regex call instead of a dozen find/split/slice calls:
# no reply subject, no stored headers, the server's headers in nats-server's order and
# nothing after them (a batch's two counters, then the blank line that ends the block, at
# the header size, as a well-formed block ends at its first blank line). Groups: sid,
# header size, total size, subject, sequence, time stamp.
# Anything else (stored headers, a status, another layout) takes the general path below,
# which finds the same. The end of the block matters: a stored message can carry these very
# headers (a republished or copied reply), and the server appends its own after them.
# ``\S`` rather than ``[^ \r\n]``: a category test is about 30% faster in ``re`` here, and
# subjects and time stamps hold no white space (a value that did would take the general
# path, which strips it the same way).
_USUAL = re.compile(
    rb"HMSG \S+ (\d+) (\d+) (\d+)\r\nNATS/1\.0\r\nNats-Stream: [^\r\n]*\r\n"
    rb"Nats-Subject: (\S+)\r\nNats-Sequence: (\d+)\r\nNats-Time-Stamp: (\S+)\r\n"
    rb"(?:Nats-Num-Pending: \d+\r\nNats-Last-Sequence: \d+\r\n)?\r\n"
)
_PENDING = b"\r\nNats-Num-Pending:"
_CRLF = b"\r\n"

class Columns:
    """Column lists of a run of messages (raw bytes; converted to Arrow by the caller)."""

    __slots__ = ("data", "headers", "seqs", "subjects", "times")

    def __init__(self, with_headers: bool) -> None:
        self.seqs: list[int] = []
        self.subjects: list[bytes] = []
        self.data: list[bytes] = []
        self.times: list[bytes] = []
        #: the raw header block of each message when headers are wanted, else None
        self.headers: list[bytes] | None = [] if with_headers else None

    def __len__(self) -> int:
        return len(self.seqs)

    def extend(self, other: Columns) -> None:
        self.seqs += other.seqs
        self.subjects += other.subjects
        self.data += other.data
        self.times += other.times
        if self.headers is not None and other.headers is not None:
            self.headers += other.headers


def parse_user_headers(raw: bytes) -> list[tuple[str, list[str]]] | None:
    """The stored headers of a direct-get reply (server-added ones removed), in order,
    values of a repeated name grouped; None when there are none."""
    end = raw.find(_STREAM)
    start = raw.find(_CRLF)
    if end < 0:
        end = len(raw)
    if start < 0 or start >= end:
        return None
    out: dict[str, list[str]] = {}
    for line in raw[start + 2:end].split(_CRLF):
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        key = name.strip().decode("utf-8", "replace")
        if not key or key in DIRECT_HEADER_NAMES:
            continue
        out.setdefault(key, []).append(value.strip().decode("utf-8", "replace"))
    return list(out.items()) or None


class RawReplies:
    """Route direct-get replies for chosen subscription ids of a nats-py client to
    :class:`_Batch` sinks, parsed here instead of by nats-py.

    Two hooks on one client instance (nats-py 2.x internals, both instance attributes):

    - ``Parser.parse``: before nats-py's regex parser runs, :func:`_take_raw` walks its
      buffer and takes every complete ``HMSG`` for one of our sids (``bytes.find``, one
      split of the control line, slices of one ``bytes`` copy of the buffer), leaving the
      rest, from the first other operation on, to nats-py. An incomplete trailing message
      stays in the buffer for the next read, so the fast loop keeps working across reads.
    - ``Client._process_msg``, which nats-py's parser calls for every message it parsed
      (and which parses headers first): wrapped so a reply of ours that nats-py's parser
      got after all still reaches its batch, through the same code.
    """

    def __init__(self, nc: Client) -> None:
        self.nc = nc
        self.batches: dict[int, _Batch] = {}
        batches = self.batches
        orig = nc._process_msg

        async def process(
            sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
        ) -> None:
            if sid not in batches:
                await orig(sid, subject, reply, data, cast(bytes, headers))  # None for MSG
                return
            hdr = headers or b""
            frame = bytearray(b"HMSG _ %d %d %d\r\n%s%s\r\n" % (
                sid, len(hdr), len(hdr) + len(data), hdr, data))
            _take_raw(frame, batches)

        setattr(nc, "_process_msg", process)  # noqa: B010 - mypy: no assigning to methods
        ps = nc._ps
        if isinstance(getattr(ps, "buf", None), bytearray) and hasattr(ps, "state"):
            orig_parse = ps.parse

            async def parse(data: bytes = b"") -> None:
                buf: bytearray = ps.buf
                buf.extend(data)
                if ps.state == AWAITING_CONTROL_LINE and buf.startswith(b"HMSG "):
                    stopped_at_other = _take_raw(buf, batches)
                    if not stopped_at_other:
                        return  # only an incomplete message left: wait for more bytes
                await orig_parse(b"")

            setattr(ps, "parse", parse)  # noqa: B010

    async def subscribe(self, subject: str, batch: _Batch) -> int:
        sub = await self.nc.subscribe(subject)
        self.batches[sub._id] = batch
        return int(sub._id)

    async def unsubscribe(self, sid: int) -> None:
        self.batches.pop(sid, None)
        sub = self.nc._subs.get(sid)
        if sub is not None and not self.nc.is_closed:
            await sub.unsubscribe()


def _take_raw(buf: bytearray, batches: dict[int, _Batch]) -> bool:
    """Parse the leading complete ``HMSG``s of our sids in ``buf`` into their batches and
    delete them from ``buf``. True if it stopped at something else (another operation,
    another sid), False if at the end or at an incomplete message.

    A reply's header block ends with the server's ``Nats-Stream``, ``Nats-Subject``,
    ``Nats-Sequence``, ``Nats-Time-Stamp`` (and, in a batch, ``Nats-Num-Pending``,
    ``Nats-Last-Sequence``) lines, after any stored headers: ``rfind`` the subject line,
    then expect sequence and time stamp right after it (falling back to ``rfind`` each if
    a server orders them differently). The usual reply skips all that: one ``_USUAL`` match
    gives every value. One loop, no Python call per message: this is the read path's
    per-message cost.
    """
    raw = bytes(buf)
    n = len(raw)
    pos = 0
    other = False
    find, rfind, startswith = raw.find, raw.rfind, raw.startswith
    usual = _USUAL.match
    cur_sid = b""  # the sid of ``b`` as the usual path last saw it
    b: _Batch | None = None
    while pos < n:
        m = usual(raw, pos)
        if m is not None:
            sid_b, hl, tot, subject, seq_b, ts = m.groups()
            if sid_b != cur_sid:
                b = batches.get(int(sid_b))
                if b is None:
                    other = True
                    break
                cur_sid = sid_b
            assert b is not None
            start = m.end(3) + 2
            end = start + int(tot)
            if end + 2 > n:
                break
            hend = start + int(hl)
            pos = end + 2
            seq = int(seq_b)
        else:
            if not startswith(b"HMSG ", pos):
                other = n - pos >= 5 or not b"HMSG ".startswith(raw[pos:])
                break
            eol = find(b"\r\n", pos)
            if eol < 0:
                break
            args = raw[pos + 5:eol].split()
            # HMSG <subject> <sid> [reply] <header size> <total size>
            b = batches.get(int(args[1])) if len(args) >= 4 else None
            cur_sid = b""
            if b is None:
                other = True
                break
            start = eol + 2
            end = start + int(args[-1])
            if end + 2 > n:
                break
            hend = start + int(args[-2])
            pos = end + 2
            if raw[start + 8] == 32:  # "NATS/1.0 204 EOB": a status line ends the batch
                b.on_status(raw[start:hend])
                continue
            i = rfind(b"\r\nNats-Subject:", start, hend)
            if i < 0:
                b.on_status(b"NATS/1.0 500 reply without Nats-Subject\r\n\r\n")
                continue
            j = find(b"\r\n", i + 15)
            subject = raw[i + 15:j].strip()
            if startswith(b"\r\nNats-Sequence:", j):
                k = find(b"\r\n", j + 16)
                seq = int(raw[j + 16:k])
            else:
                k = rfind(b"\r\nNats-Sequence:", start, hend)
                seq = int(raw[k + 16:find(b"\r\n", k + 16)])
                k = rfind(b"\r\nNats-Time-Stamp:", start, hend)
            if startswith(b"\r\nNats-Time-Stamp:", k):
                ts = raw[k + 18:find(b"\r\n", k + 18)].strip()
            else:
                k = rfind(b"\r\nNats-Time-Stamp:", start, hend)
                ts = raw[k + 18:find(b"\r\n", k + 18)].strip() if k >= 0 else b""
        b.count += 1
        b.last = seq
        if seq >= b.end:
            b.past_end = True
            continue
        cols = b.cols
        cols.seqs.append(seq)
        cols.subjects.append(subject)
        cols.times.append(ts)
        cols.data.append(raw[hend:end])
        if cols.headers is not None:
            cols.headers.append(raw[start:hend])
    if pos:
        del buf[:pos]
    return other


class _Batch:
    """One direct-get batch request (its own reply inbox) and the columns its replies
    filled in (by :func:`_take_raw`)."""

    __slots__ = ("asked", "cols", "count", "desc", "done", "end", "last", "past_end",
                 "pending", "sid", "start", "status")

    def __init__(self, start: int, end: int, asked: int, cols: Columns,
                 done: asyncio.Future[None]) -> None:
        self.start = start
        self.end = end
        self.asked = asked
        self.cols = cols
        self.done = done
        self.sid = 0
        self.count = 0  # replies received (in range or not)
        self.last = 0  # sequence of the last reply
        self.past_end = False  # a reply at or past ``end`` arrived
        self.status = b""
        self.desc = ""
        self.pending = -1  # Nats-Num-Pending of the EOB (-1: absent)

    def on_status(self, hdr: bytes) -> None:
        """``NATS/1.0 <code> <description>\r\n<headers>``: the batch is over."""
        if self.done.done():
            return
        line_end = hdr.find(_CRLF)
        status = hdr[9:12]
        if status == b"204":
            i = hdr.rfind(_PENDING)
            if i >= 0:
                self.pending = int(hdr[i + 19:hdr.find(_CRLF, i + 19)])
        self.status = status
        self.desc = hdr[12:line_end].strip().decode("utf-8", "replace")
        self.done.set_result(None)

    def complete(self) -> bool:
        """Whether every message of ``[start, end)`` has been seen (after the status)."""
        if self.status == b"404" or self.past_end or self.last >= self.end - 1:
            return True
        if self.pending == 0:
            return True  # nothing stored after the last reply
        return self.count == 0


class DirectRangeReader:
    """Messages with ``lo <= seq < hi`` of ``stream`` (optionally ``next_by_subj``-filtered)
    via direct-get batches; :meth:`next` returns their columns a batch at a time."""

    def __init__(
        self, nc: Client, raw: RawReplies, stream: str, lo: int, hi: int, filter_: str,
        batch: int, *, depth: int = 2, timeout: float = 10.0, with_headers: bool = False,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.nc = nc
        self.raw = raw
        self.stream = stream
        self.subject = f"$JS.API.DIRECT.GET.{stream}"
        self.next_start = max(lo, 1)
        self.hi = hi
        self.filter = filter_
        self.batch = max(1, batch)
        # A filtered batch's end is unknown until it arrives: one at a time.
        self.depth = max(1, depth) if not filter_ else 1
        self.timeout = timeout
        self.with_headers = with_headers
        self.max_bytes = max_bytes
        self.inflight: deque[_Batch] = deque()

    async def _send(self, start: int, end: int, front: bool = False) -> None:
        asked = self.batch if self.filter else end - start
        body: dict[str, Any] = {"seq": start, "batch": asked, "max_bytes": self.max_bytes}
        if self.filter:
            body["next_by_subj"] = self.filter
        b = _Batch(start, end, asked, Columns(self.with_headers),
                   asyncio.get_running_loop().create_future())
        if front:
            self.inflight.appendleft(b)
        else:
            self.inflight.append(b)
        inbox = self.nc.new_inbox()
        b.sid = await self.raw.subscribe(inbox, b)
        await self.nc.publish(self.subject, json.dumps(body).encode(), reply=inbox)

    async def _fill(self) -> None:
        while len(self.inflight) < self.depth and self.next_start < self.hi:
            start = self.next_start
            end = self.hi if self.filter else min(start + self.batch, self.hi)
            self.next_start = end
            await self._send(start, end)

    async def _wait(self, b: _Batch) -> None:
        seen = -1
        while not b.done.done():
            if b.count == seen:
                raise TimeoutError
            seen = b.count
            try:
                await asyncio.wait_for(asyncio.shield(b.done), timeout=self.timeout)
            except TimeoutError:
                continue  # no timeout while replies keep coming

    async def next(self) -> Columns | None:
        """The next batch's columns (possibly empty), or None when the range is done."""
        await self._fill()
        if not self.inflight:
            return None
        b = self.inflight.popleft()
        try:
            await self._wait(b)
        except TimeoutError:
            raise JetStreamError(
                f"jetstream: direct get on {self.stream} timed out at seq {b.start} "
                f"({b.count} replies, then nothing for {self.timeout}s)") from None
        finally:
            await self.raw.unsubscribe(b.sid)
        if b.status not in (b"204", b"404"):
            await self.close()
            if b.status == b"503":
                raise JetStreamError(
                    f"jetstream: no responders for direct get on {self.stream} "
                    "(allow_direct off?)")
            raise JetStreamError(
                f"jetstream: direct get on {self.stream}: status "
                f"{b.status.decode('ascii', 'replace')} {b.desc}".rstrip())
        if not b.complete():  # count > 0 here
            if self.filter:
                self.next_start = b.last + 1  # the cursor walks on
            else:  # cut short by max_bytes: ask for the rest of the window first
                await self._send(b.last + 1, b.end, front=True)
        return b.cols

    async def close(self) -> None:
        """Drop the batches still in flight (their late replies are ignored)."""
        while self.inflight:
            await self.raw.unsubscribe(self.inflight.popleft().sid)
