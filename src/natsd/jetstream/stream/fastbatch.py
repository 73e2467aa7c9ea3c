"""Fast-ingest batch publish (nats-server 2.14, level 4): on a stream with ``allow_batched``
a publisher streams messages without waiting for each PubAck; the reply subject says
everything: ``<prefix>.<batch id>.<flow>.<gap mode>.<batch seq>.<op>.$FI`` (op 0 start, 1
append, 2 commit storing this message, 3 commit without it, 4 ping). Each message is
checked and stored as a plain publish is; the stream answers with flow acks
``{"type":"ack","seq","msgs"}`` (persisted up to ``seq``, ack every ``msgs``), reports gaps
``{"type":"gap","last_seq","seq"}`` and errors ``{"type":"err","seq","error"}``, and ends the
batch with ``{"stream","seq","batch","count"}``. In ``fail`` mode a gap or an error ends the
batch; in ``ok`` mode it goes on. Nothing is atomic: what was stored stays.

This module owns the batches' state and nats-server's rules for it (``jetstream_batching.go``
``fastBatch``, ``stream.go`` ``processJetStreamFastBatchMsg`` and ``getFastBatch``); the
stream checks and stores each message (``Stream._fast``). On an R1 file stream every answer
leaves after the fsync that covers what it reports, as a PubAck does. On a replicated stream
each message is proposed as its own entry carrying the reply subject: the leader counts what
is in flight (``pending``) and answers as entries apply (``applied``), followers record each
batch from the entries they apply, and a new leader picks the batches up from there
(``lead``), as nats-server's ``fastBatchRegisterSequences`` and ``fastBatchReset`` do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import orjson

from natsd.core.scheduler import Cancellable, Clock, Scheduler

__all__ = [
    "FastBatch",
    "FastBatches",
    "FastLimits",
    "FastReplies",
    "FastReq",
    "parse_fast_reply",
]

OP_START: Final = 0
OP_APPEND: Final = 1
OP_COMMIT: Final = 2
OP_COMMIT_EOB: Final = 3
OP_PING: Final = 4
MAX_ID: Final = 64
_MAX_U64: Final = (1 << 64) - 1


@dataclass
class FastLimits:
    """The server's fast batch limits (nats-server's defaults)."""

    per_stream: int = 1000
    total: int = 50_000
    timeout: float = 10.0
    open: int = 0


class FastReq:
    """What one message's reply subject says. (A plain class: made for every message, and
    a compiled dataclass is built through the interpreted ``__init__`` it generates.)"""

    def __init__(self, id: str, flow: int, gap_ok: bool, seq: int, op: int) -> None:
        self.id = id
        self.flow = flow
        self.gap_ok = gap_ok
        self.seq = seq
        self.op = op

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FastReq):
            return NotImplemented
        return (self.id, self.flow, self.gap_ok, self.seq, self.op) == (
            other.id, other.flow, other.gap_ok, other.seq, other.op)  # fmt: skip

    def __repr__(self) -> str:
        return f"FastReq({self.id!r}, {self.flow}, {self.gap_ok}, {self.seq}, {self.op})"

    @property
    def commit(self) -> bool:
        return self.op in (OP_COMMIT, OP_COMMIT_EOB)


def _digits(buf: bytes, start: int, end: int, most: int) -> int:
    """The number ``buf[start:end]`` spells in ASCII digits (at most ``most`` of them);
    -1 when it is empty, longer or anything but digits. (Read in place: a reply subject
    is parsed for every message of a batch.)"""
    if end <= start or end - start > most:
        return -1
    n = 0
    for i in range(start, end):
        c = buf[i]
        if c < 48 or c > 57:
            return -1
        n = n * 10 + (c - 48)
    return n


def parse_fast_reply(reply: bytes) -> FastReq | None:
    """``getFastBatch``: the batch a ``....$FI`` reply subject describes; None when it is
    not a valid one ("batch publish pattern is invalid"). Its last five tokens are found
    from the end (the prefix may hold dots): ``<bid>.<flow>.<gap>.<seq>.<op>``."""
    end = len(reply) - 4  # (".$FI")
    d5 = reply.rfind(b".", 0, end)
    d4 = reply.rfind(b".", 0, d5) if d5 > 0 else -1
    d3 = reply.rfind(b".", 0, d4) if d4 > 0 else -1
    d2 = reply.rfind(b".", 0, d3) if d3 > 0 else -1
    d1 = reply.rfind(b".", 0, d2) if d2 > 0 else -1
    if d1 < 0:
        return None
    op = _digits(reply, d5 + 1, end, 18)
    seq = _digits(reply, d4 + 1, d5, 20)
    if not _seq_op(seq, op):
        return None
    gap = reply[d3 + 1 : d4]
    if gap != b"ok" and gap != b"fail":
        return None
    flow = _digits(reply, d2 + 1, d3, 18)
    flow = 10 if flow <= 0 else min(flow, 65535)
    return FastReq(reply[d1 + 1 : d2].decode(errors="replace"), flow, gap == b"ok", seq, op)


def _seq_op(seq: int, op: int) -> bool:
    """``parse_fast_reply``'s rules for a message's place in its batch and its op."""
    if op < OP_START or op > OP_PING or seq <= 0 or seq >= _MAX_U64:
        return False
    if (seq == 1 and op == OP_COMMIT_EOB) or (op == OP_START and seq != 1):
        return False
    return not (op == OP_APPEND and seq <= 1)


class FastReplies:
    """``parse_fast_reply`` for a stream's stream of batch messages: their reply subjects
    differ only in ``<seq>.<op>``, so the head before them (``<prefix>.<id>.<flow>.<gap>.``),
    once read, is remembered with what it says, and a reply starting with it has only its
    two numbers read (the same answers: tests/unit/test_fast_batches.py)."""

    def __init__(self) -> None:
        self._head = b""
        self._id = ""
        self._flow = 0
        self._gap_ok = False

    def parse(self, reply: bytes) -> FastReq | None:
        head = self._head
        n = len(head)
        end = len(reply) - 4  # (".$FI")
        if n and end > n and reply.startswith(head):
            dot = n
            while dot < end and 48 <= reply[dot] <= 57:
                dot += 1
            if n < dot < end and reply[dot] == 46:  # <digits>.
                seq = _digits(reply, n, dot, 20)
                op = _digits(reply, dot + 1, end, 18)
                if seq >= 0 and op >= 0:  # <digits>.<digits>: as the full parse reads it
                    if not _seq_op(seq, op):
                        return None
                    return FastReq(self._id, self._flow, self._gap_ok, seq, op)
        req = parse_fast_reply(reply)
        if req is not None:
            d4 = reply.rfind(b".", 0, reply.rfind(b".", 0, end))
            self._head = reply[: d4 + 1]
            self._id = req.id
            self._flow = req.flow
            self._gap_ok = req.gap_ok
        return req


@dataclass
class FastBatch:
    """One open fast batch: the highest batch sequence seen (``lseq``), persisted
    (``pseq``) and flow-acknowledged (``fseq``), the last stream sequence stored
    (``sseq``), the flow (ack every ``am``, at most ``max_am``), its gap mode."""

    id: str
    gap_ok: bool
    max_am: int
    am: int = 1
    lseq: int = 0
    pseq: int = 0
    fseq: int = 0
    sseq: int = 0
    timer: Cancellable | None = None
    last: float = 0.0  # monotonic time of its last message (the timer looks at it)
    expired: bool = False
    # a replicated stream's: its messages proposed and not yet applied, whether it ends
    # once they are, and the reply subject of the last one applied (where a new leader
    # sends its flow ack)
    pending: int = 0
    committing: bool = False
    reply: bytes = b""


class FastBatches:
    """A stream's open fast batches. ``send(reply, payload)`` answers the publisher (after
    the fsync that covers what was stored, on a file stream); ``final(seq, id, count)``
    makes a batch's PubAck."""

    def __init__(
        self,
        scheduler: Scheduler,
        clock: Clock,
        limits: FastLimits,
        send: Callable[[bytes, bytes], None],
        final: Callable[[int, str, int], bytes],
    ) -> None:
        self._scheduler = scheduler
        self._mono = clock.monotonic
        self._limits = limits
        self._send = send
        self._final = final
        self.open: dict[str, FastBatch] = {}

    def open_batch(self, req: FastReq) -> FastBatch | None:
        """A new batch (its first message): None when the limits are reached."""
        if len(self.open) + 1 > self._limits.per_stream:
            return None
        return self._start(req)

    def _start(self, req: FastReq) -> FastBatch | None:
        """A batch opened (by its leader) or learnt of (by a follower, from the log):
        counted in the server's limit; None past it."""
        limits = self._limits
        if limits.open + 1 > limits.total:
            return None
        b = FastBatch(req.id, req.gap_ok, req.flow)
        self.open[req.id] = b
        limits.open += 1
        self._initial_pace(b)
        self._arm(b)
        return b

    def _initial_pace(self, b: FastBatch) -> None:
        # alone, the publisher's flow (at most 500); beside others, one at a time at first
        b.am = min(500, b.max_am) if len(self.open) == 1 else 1

    def _arm(self, b: FastBatch) -> None:
        b.last = self._mono()
        b.timer = self._scheduler.call_later(self._limits.timeout, self._expire, b)

    def touch(self, b: FastBatch) -> bool:
        """A message of ``b``: its inactivity timeout starts again. False when it had
        already run out. (The timer is not moved: it looks at ``last`` when it fires, so a
        message costs a clock read rather than a timer cancelled and made.)"""
        if b.expired:
            return False
        b.last = self._mono()
        if b.timer is None:
            b.timer = self._scheduler.call_later(self._limits.timeout, self._expire, b)
        return True

    def _expire(self, b: FastBatch) -> None:
        b.timer = None
        idle = self._mono() - b.last
        if idle < self._limits.timeout:
            b.timer = self._scheduler.call_later(self._limits.timeout - idle, self._expire, b)
            return
        b.expired = True
        self.drop(b)  # (silently: the next message of it is told the id is unknown)

    def drop(self, b: FastBatch) -> None:
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None
        if self.open.get(b.id) is b:
            del self.open[b.id]
            self._limits.open -= 1

    def clear(self) -> None:
        for b in list(self.open.values()):
            self.drop(b)

    # ------------------------------------------------------------------ answers
    def flow(self, b: FastBatch, reply: bytes) -> None:
        self._send(reply, b'{"type":"ack","seq":%d,"msgs":%d}' % (b.fseq, b.am))

    def gap(self, reply: bytes, expected: int, got: int) -> None:
        self._send(reply, b'{"type":"gap","last_seq":%d,"seq":%d}' % (expected, got))

    def error(self, reply: bytes, seq: int, error: object) -> None:
        self._send(reply, b'{"type":"err","seq":%d,"error":%s}' % (seq, orjson.dumps(error)))

    def check_flow(self, b: FastBatch, reply: bytes) -> bool:
        """``checkFlowControl``: a flow ack when ``am`` more messages are persisted, its
        pace moved toward this stream's share of 500 (at most the publisher's flow)."""
        if b.pseq < b.fseq + b.am:
            return False
        b.fseq += (b.pseq - b.fseq) // b.am * b.am
        target = min(max(1, 500 // len(self.open)), b.max_am) if self.open else b.max_am
        if b.am < target:
            b.am = min(b.am * 2, target)
        elif b.am > target:
            b.am = max(b.am // 2, target)
        self.flow(b, reply)
        return True

    def commit(self, b: FastBatch, reply: bytes) -> None:
        """The batch ends (committed, or cut short by a gap or an error in fail mode): its
        PubAck leaves once everything up to ``lseq`` is stored, now or (a replicated
        stream's messages still in flight) when the last of them is applied."""
        if b.lseq != b.pseq:
            b.committing = True
            return
        self.drop(b)
        self._send(reply, self._final(b.sseq, b.id, b.lseq))

    def applied(self, req: FastReq, reply: bytes, sseq: int, leading: bool) -> None:
        """A replicated stream applied a message of batch ``req.id`` at stream sequence
        ``sseq`` (nats-server's ``fastBatchRegisterSequences``). The leader moves the
        persisted sequence on (to the highest sent when nothing is left in flight: what
        was skipped as a duplicate counts), sends the flow ack or, once the batch ends, its
        PubAck. A follower only records where the batch is, to go on from it if it comes
        to lead."""
        b = self.open.get(req.id)
        if b is None or not leading:
            if req.commit:
                if b is not None:
                    self.drop(b)
                return
            if b is None or not self.touch(b):
                b = self._start(req)
                if b is None:
                    return
            b.sseq = sseq
            b.pseq = b.lseq = req.seq
            b.reply = reply
            return
        b.reply = reply
        if b.pending > 0:
            b.pending -= 1
        b.sseq = sseq
        b.pseq = b.lseq if b.pending == 0 else req.seq
        if b.committing and b.lseq == b.pseq:
            self.drop(b)
            self._send(reply, self._final(b.sseq, b.id, b.lseq))
            return
        self.check_flow(b, reply)

    def lead(self) -> None:
        """This replica now leads the stream (``fastBatchReset``): each open batch goes
        on from what was applied, nothing in flight, and its publisher hears so (a flow
        ack to the last reply subject it used)."""
        for b in list(self.open.values()):
            if b.expired or b.timer is None:
                self.drop(b)
                continue
            self._initial_pace(b)
            self.touch(b)
            b.committing = False
            b.pending = 0
            b.fseq = b.lseq = b.pseq
            if b.reply:
                self.flow(b, b.reply)
