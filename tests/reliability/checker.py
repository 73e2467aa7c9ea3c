"""The reliability checker (issue 7): what was published versus what a stream holds.

Publishers send self-describing payloads, so anything read back can be verified without
remembering its bytes::

    payload = HEADER(publisher id, counter, hash) + body
    hash    = blake2b-8(publisher id, counter, body)

Each publish is recorded in a :class:`History` as *acked* (a PubAck came back, with its
sequence), *failed* (an error reply: the server said it did not store it) or *unknown* (a
timeout or a connection loss: it may or may not be stored). Every publish carries a
``Nats-Msg-Id`` of ``p<publisher>-c<counter>``.

After the fault, :func:`drain` reads the whole stream back with batched ``DIRECT.GET``
requests (independent of the consumer machinery) and :func:`check` compares:

* **lost**: acked but not read back; split per publisher into *prefix* (a run of losses at
  the start of that publisher's acked counters), *suffix* (a run at the end; a publisher that
  lost everything counts here) and *middle* (a hole: acked messages before and after it
  survived);
* **corrupt**: a stored payload whose hash does not match, that is too short to carry the
  header, or whose ``Nats-Msg-Id`` does not name the payload's (publisher, counter);
* **unexpected**: a well-formed message that was never published;
* **duplicated**: a ``Nats-Msg-Id`` stored more than once;
* **out of order**: per publisher, a counter lower than one stored before it (each publisher
  uses one connection, so its messages must be stored in send order);
* **seq mismatch**: an acked message read back at another sequence than its PubAck named.

Informational only (not failures): failed publishes that are nevertheless stored, and how
many unknown publishes were or were not stored.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import random
import struct
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

__all__ = [
    "HEADER",
    "MIN_SIZE",
    "History",
    "Outcome",
    "PublishRecord",
    "Report",
    "StoredMsg",
    "check",
    "decode_payload",
    "drain",
    "make_payload",
    "msg_id",
    "random_size",
]

#: publisher id (u16), counter (u32), hash (8 bytes).
HEADER = struct.Struct(">HI8s")
MIN_SIZE = 16
MAX_SIZE = 64 * 1024


def _digest(publisher: int, counter: int, body: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=8)
    h.update(struct.pack(">HI", publisher, counter))
    h.update(body)
    return h.digest()


def msg_id(publisher: int, counter: int) -> str:
    return f"p{publisher}-c{counter}"


def make_payload(publisher: int, counter: int, size: int, rng: random.Random) -> bytes:
    """A payload of exactly ``size`` bytes (>= MIN_SIZE) for (publisher, counter)."""
    if size < HEADER.size:
        raise ValueError(f"size {size} < {HEADER.size}")
    body = rng.randbytes(size - HEADER.size)
    return HEADER.pack(publisher, counter, _digest(publisher, counter, body)) + body


def decode_payload(data: bytes) -> tuple[int, int] | None:
    """(publisher, counter) if the payload is intact, else None."""
    if len(data) < HEADER.size:
        return None
    publisher, counter, digest = HEADER.unpack_from(data)
    if _digest(publisher, counter, data[HEADER.size :]) != digest:
        return None
    return publisher, counter


def random_size(rng: random.Random) -> int:
    """Mixed sizes, 16 B .. 64 KiB, log-uniform so small messages dominate."""
    return min(MAX_SIZE, max(MIN_SIZE, int(2 ** rng.uniform(4, 16))))


class Outcome(enum.Enum):
    ACKED = "acked"
    FAILED = "failed"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PublishRecord:
    publisher: int
    counter: int
    outcome: Outcome
    seq: int | None = None  # the PubAck's sequence, for acked publishes


@dataclass
class History:
    """Every publish attempt, by (publisher, counter)."""

    records: dict[tuple[int, int], PublishRecord] = field(default_factory=dict)

    def record(
        self, publisher: int, counter: int, outcome: Outcome, seq: int | None = None
    ) -> None:
        key = (publisher, counter)
        if key in self.records:
            raise ValueError(f"publish {key} recorded twice")
        self.records[key] = PublishRecord(publisher, counter, outcome, seq)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.records.values() if r.outcome is outcome)

    def merge(self, other: History) -> None:
        for key, rec in other.records.items():
            if key in self.records:
                raise ValueError(f"publish {key} recorded twice")
            self.records[key] = rec


@dataclass(frozen=True)
class StoredMsg:
    seq: int
    subject: str
    data: bytes
    msg_id: str | None


@dataclass
class Report:
    stored: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    lost_prefix: list[tuple[int, int]] = field(default_factory=list)
    lost_middle: list[tuple[int, int]] = field(default_factory=list)
    lost_suffix: list[tuple[int, int]] = field(default_factory=list)
    corrupt: list[int] = field(default_factory=list)  # stream sequences
    unexpected: list[int] = field(default_factory=list)  # stream sequences
    duplicated: dict[str, list[int]] = field(default_factory=dict)  # message key -> sequences
    out_of_order: list[int] = field(default_factory=list)  # stream sequences
    seq_mismatch: list[tuple[int, int, int]] = field(default_factory=list)  # pub, acked, read
    failed_but_stored: list[tuple[int, int]] = field(default_factory=list)
    unknown_stored: int = 0
    unknown_missing: int = 0

    @property
    def lost(self) -> list[tuple[int, int]]:
        return sorted(self.lost_prefix + self.lost_middle + self.lost_suffix)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.corrupt
            or self.unexpected
            or self.duplicated
            or self.out_of_order
            or self.seq_mismatch
        )

    def summary(self) -> str:
        def few(xs: Sequence[object]) -> str:
            head = ", ".join(str(x) for x in list(xs)[:8])
            return f"{len(xs)}" + (f" [{head}{', ...' if len(xs) > 8 else ''}]" if xs else "")

        lines = [
            f"{'OK' if self.ok else 'FAILED'}: {self.stored} stored; published "
            f"{self.acked} acked, {self.failed} failed, {self.unknown} unknown "
            f"({self.unknown_stored} stored, {self.unknown_missing} not)",
            f"  lost (acked, not read): {len(self.lost)} = prefix {few(self.lost_prefix)}, "
            f"middle {few(self.lost_middle)}, suffix {few(self.lost_suffix)}",
            f"  corrupt: {few(self.corrupt)}",
            f"  unexpected: {few(self.unexpected)}",
            f"  duplicated: {few(sorted(self.duplicated.items()))}",
            f"  out of order: {few(self.out_of_order)}",
            f"  seq mismatch (pub, acked seq, read seq): {few(self.seq_mismatch)}",
            f"  failed but stored: {few(self.failed_but_stored)}",
        ]
        return "\n".join(lines)

    __str__ = summary


def check(history: History, stored: Iterable[StoredMsg]) -> Report:
    """Compare a publish history with what was read back (in stream order)."""
    rep = Report(
        acked=history.count(Outcome.ACKED),
        failed=history.count(Outcome.FAILED),
        unknown=history.count(Outcome.UNKNOWN),
    )
    found: dict[tuple[int, int], int] = {}  # (publisher, counter) -> first seq read
    # every copy of each message by its key (the payload names it): a second copy is a
    # duplicate whether or not it carries its Nats-Msg-Id header
    by_key: dict[str, list[int]] = defaultdict(list)
    last_counter: dict[int, int] = {}
    for m in sorted(stored, key=lambda m: m.seq):
        rep.stored += 1
        key = decode_payload(m.data)
        if key is None or (m.msg_id is not None and m.msg_id != msg_id(*key)):
            rep.corrupt.append(m.seq)
            continue
        by_key[msg_id(*key)].append(m.seq)
        rec = history.records.get(key)
        if rec is None:
            rep.unexpected.append(m.seq)
            continue
        found.setdefault(key, m.seq)
        publisher, counter = key
        prev = last_counter.get(publisher)
        if prev is not None and counter < prev:
            rep.out_of_order.append(m.seq)
        else:
            last_counter[publisher] = counter
    rep.duplicated = {k: v for k, v in by_key.items() if len(v) > 1}

    acked: dict[int, list[int]] = defaultdict(list)
    for (publisher, counter), rec in history.records.items():
        seq = found.get((publisher, counter))
        if rec.outcome is Outcome.ACKED:
            acked[publisher].append(counter)
            if seq is not None and rec.seq is not None and rec.seq != seq:
                rep.seq_mismatch.append((publisher, rec.seq, seq))
        elif rec.outcome is Outcome.FAILED:
            if seq is not None:
                rep.failed_but_stored.append((publisher, counter))
        elif seq is None:
            rep.unknown_missing += 1
        else:
            rep.unknown_stored += 1
    for publisher, counters in sorted(acked.items()):
        counters.sort()
        present = [(publisher, c) in found for c in counters]
        if not any(present):
            rep.lost_suffix.extend((publisher, c) for c in counters)
            continue
        first = present.index(True)
        last = len(present) - 1 - present[::-1].index(True)
        for i, c in enumerate(counters):
            if present[i]:
                continue
            where = (
                rep.lost_prefix if i < first else rep.lost_suffix if i > last else rep.lost_middle
            )
            where.append((publisher, c))
    rep.seq_mismatch.sort()
    rep.failed_but_stored.sort()
    return rep


async def drain(
    nc: NATS, stream: str, batch: int = 128, timeout: float = 10.0, retries: int = 5
) -> list[StoredMsg]:
    """Every message of ``stream`` in sequence order, via batched DIRECT.GET requests.

    The stream must have ``allow_direct``. Each request asks for up to ``batch`` messages
    from ``seq``; the server answers with one message per stored sequence, then a
    ``204 EOB`` status. A request left unanswered for ``timeout`` is asked again from the
    sequence it had reached, up to ``retries`` times in all: a replicated stream's leader
    answers only while a majority of its group hears from it, and a loaded machine has it
    lose that for a moment (the (5,3) soak's final read of a 7.7 GB stream did). The
    ``STREAM.INFO`` that finds the last sequence is asked again the same way: a leader
    whose loop stalls reads a request before its followers' answers, finds its lease run
    out and leaves the request unanswered (the R3 fault run's final read did, once).
    """
    js = nc.jetstream(timeout=timeout)
    while True:
        try:
            info = await js.stream_info(stream)
            break
        except nats.errors.TimeoutError:
            if retries <= 0:
                raise
            retries -= 1
    last = info.state.last_seq
    out: list[StoredMsg] = []
    seq = max(1, info.state.first_seq)
    subject = f"$JS.API.DIRECT.GET.{stream}"
    while seq <= last:
        inbox = nc.new_inbox()
        queue: asyncio.Queue[Msg] = asyncio.Queue()

        async def on_msg(msg: Msg, q: asyncio.Queue[Msg] = queue) -> None:
            await q.put(msg)

        sub = await nc.subscribe(inbox, cb=on_msg)
        try:
            await nc.publish(subject, b'{"seq": %d, "batch": %d}' % (seq, batch), reply=inbox)
            got = 0
            while True:
                try:
                    msg = await asyncio.wait_for(queue.get(), timeout)
                except TimeoutError:
                    if retries <= 0:
                        raise
                    retries -= 1
                    got = -1  # ask again from seq
                    break
                hdrs = msg.headers or {}
                status = hdrs.get("Status")
                if status is not None:
                    if status not in ("204", "404"):
                        raise AssertionError(f"DIRECT.GET {seq}: status {status} {hdrs}")
                    break
                mseq = int(hdrs["Nats-Sequence"])
                out.append(
                    StoredMsg(mseq, hdrs.get("Nats-Subject", ""), msg.data, hdrs.get("Nats-Msg-Id"))
                )
                seq = mseq + 1
                got += 1
            if got == 0:
                break
        finally:
            await sub.unsubscribe()
    return out
