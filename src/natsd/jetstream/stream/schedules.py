"""A stream's message schedules (ADR-51): which schedule fires when, and the message each
firing produces. nats-server keeps this in its stores (``MsgScheduling`` in
``server/scheduler.go``, fed by ``storeRawMsg`` in ``filestore.go``); natsd keeps it beside
the stream, fed by the same events (/work/notes/schedules-spec.md §4-§7):

- every stored message, on the leader and the followers alike and in log order
  (``stored``): a schedule arms its subject (replacing the schedule before it); a plain
  message on a schedule's subject ends that schedule; a message the schedule produced
  re-arms it from its ``Nats-Schedule-Next``, or, with ``Nats-Schedule-Next: purge``, has
  the stream purge the schedule's subject (an ``@at`` schedule, or a client's cancel);
- a timer at the earliest firing, never sooner than 250 ms from now (as nats-server, so
  schedules never crowd out ingest); only the leader produces (``ScheduleHost.produce``:
  stored on an R1 stream, proposed on a replicated one), every replica marks the firing in
  flight until the produced message comes back through ``stored``, and a leadership change
  clears what is in flight (``reset``): the new leader fires what is due, so a firing that
  was proposed when the leader died can be produced twice (nats-server's at-least-once);
- a schedule lives as long as its message: a deleted, purged, expired or limit-removed
  schedule message is found gone when its time comes (``load_msg``), and the table is swept
  of such entries when it doubles, so it stays the size of the live schedules.

On restart (``recover``), and after a replica caught up from another's store (``rebuild``:
the copied messages never went past ``stored``), the table is rebuilt from the last message
of every subject: a repeating schedule whose time passed fires at its next slot after now,
an ``@at`` one at once (what nats-server does after a crash; after a clean stop it restores
its saved times and fires each overdue schedule once at start-up).
"""

from __future__ import annotations

import heapq
from typing import Final, Protocol

from natsd.core.headers import slice_header
from natsd.core.scheduler import Cancellable, Clock, Scheduler
from natsd.jetstream.stream.headers import parse_ttl
from natsd.jetstream.stream.schedule_pattern import format_next, load_zone, next_fire, parse_at
from natsd.storage.store import StoredMsg, StreamStore

__all__ = ["MsgSchedules", "ScheduleHost", "produced_header"]

# nats-server never fires sooner than this after arming (``resetTimer``).
FLOOR_NS: Final = 250_000_000
# A tick counts what is due this close ahead as due: the event loop may run a timer a
# little before its time (its clock resolution), and a firing missed by that much would
# wait out another FLOOR_NS.
_EARLY_NS: Final = 5_000_000
# The table is swept of schedules whose message is gone once it holds this many, then
# whenever it doubles.
_SWEEP_MIN: Final = 64

_K_SCHEDULE: Final = b"Nats-Schedule"
_K_TARGET: Final = b"Nats-Schedule-Target"
_K_TTL: Final = b"Nats-Schedule-TTL"
_K_ZONE: Final = b"Nats-Schedule-Time-Zone"
_K_SOURCE: Final = b"Nats-Schedule-Source"
_K_ROLLUP: Final = b"Nats-Schedule-Rollup"
_K_NEXT: Final = b"Nats-Schedule-Next"
_K_SCHEDULER: Final = b"Nats-Scheduler"
_MARK: Final = b"Nats-Sched"  # in every header above: a message without it is plain
# Header lines a produced message does not carry over (``getScheduledMessages``): every
# Nats-Schedule* (Nats-Scheduler too) and Nats-Expected-* line, case-sensitive prefixes,
# and these names.
_DROP_PREFIXES: Final = (b"Nats-Schedule", b"Nats-Expected-", b"Nats-Msg-Id:", b"Nats-TTL:",
                         b"Nats-Rollup:")  # fmt: skip


class ScheduleHost(Protocol):
    """What the schedules use of their stream."""

    @property
    def store(self) -> StreamStore: ...

    def leads(self) -> bool:
        """Does this replica produce the firings (an R1 stream always)?"""
        ...

    def produce(self, subject: str, hdr: bytes, data: bytes, ttl: int, rollup: str) -> bool:
        """Store (or propose) a produced message as a sourced one: no publish header
        checks, the stream's limits, rollup, republish and retention as usual. False when
        nothing was stored or proposed."""
        ...


def produced_header(
    hdr: bytes | None, scheduler: str, nxt: str, ttl: bytes | None, rollup: bool
) -> bytes:
    """The header block of a produced message: ``hdr`` (the schedule's, or its source's
    last message's) without the scheduling, expectation, id, TTL and rollup headers, then
    ``Nats-Scheduler``, ``Nats-Schedule-Next``, ``Nats-TTL`` and ``Nats-Rollup: sub`` as
    nats-server appends them."""
    lines = [b"NATS/1.0"]
    if hdr:
        parts = hdr.split(b"\r\n")
        lines[0] = parts[0]
        lines.extend(ln for ln in parts[1:] if ln and not ln.startswith(_DROP_PREFIXES))
    lines.append(b"Nats-Scheduler: " + scheduler.encode())
    lines.append(b"Nats-Schedule-Next: " + nxt.encode())
    if ttl:
        lines.append(b"Nats-TTL: " + ttl)
    if rollup:
        lines.append(b"Nats-Rollup: sub")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _zone(hdr: bytes) -> tuple[bool, str | None]:
    """The schedule's time zone header: (valid, name or None for UTC)."""
    z = slice_header(hdr, _K_ZONE)
    if z is None:
        return True, None
    name = z.decode("utf-8", "replace")
    return load_zone(name) is not None, name


class MsgSchedules:
    """One stream's schedules: subject -> (sequence of its message, next firing in wall
    nanoseconds), the subjects whose firing is in flight, and the timer."""

    __slots__ = ("_clock", "_deadline", "_heap", "_host", "_sched", "_sweep_at", "_timer",
                 "entries", "inflight")  # fmt: skip

    def __init__(self, host: ScheduleHost, clock: Clock, scheduler: Scheduler) -> None:
        self._host = host
        self._clock = clock
        self._sched = scheduler
        self.entries: dict[str, tuple[int, int]] = {}
        self.inflight: set[str] = set()
        # (fire, seq, subject), possibly stale (the entry replaced or gone): checked
        # against ``entries`` when it comes up
        self._heap: list[tuple[int, int, str]] = []
        self._timer: Cancellable | None = None
        self._deadline = 0
        self._sweep_at = _SWEEP_MIN

    # ------------------------------------------------------------------ the table
    def _first_fire(self, hdr: bytes, ts: int) -> int | None:
        """``nextMessageSchedule``: when a schedule stored at ``ts`` first fires."""
        pattern = slice_header(hdr, _K_SCHEDULE)
        if not pattern:
            return None
        ok, zone = _zone(hdr)
        if not ok:
            return None
        got = next_fire(pattern.decode("utf-8", "replace"), zone, ts, self._clock.time_ns())
        return None if got is None else got[0]

    def _set(self, subject: str, seq: int, fire: int) -> None:
        self.entries[subject] = (seq, fire)
        self.inflight.discard(subject)
        heapq.heappush(self._heap, (fire, seq, subject))
        if len(self._heap) > 2 * len(self.entries) + _SWEEP_MIN:
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        self._heap = [(f, s, subj) for subj, (s, f) in self.entries.items()
                      if subj not in self.inflight]  # fmt: skip
        heapq.heapify(self._heap)

    def stored(self, seq: int, subject: str, hdr: bytes | None, ts: int) -> str:
        """The stream stored ``seq`` on ``subject`` at ``ts``. Returns the subject whose
        messages the stream now purges ("" for none): a schedule's, when the message says
        ``Nats-Schedule-Next: purge`` (a fired ``@at`` schedule, or a client's cancel)."""
        if hdr is None or _MARK not in hdr:
            if subject in self.entries:
                self._drop(subject)  # a plain message ends the schedule on its subject
            return ""
        fire = self._first_fire(hdr, ts)
        scheduler = slice_header(hdr, _K_SCHEDULER)
        if fire is not None:
            self._set(subject, seq, fire)
            if len(self.entries) >= self._sweep_at:
                self._sweep()
            self._arm()
        elif not scheduler and subject in self.entries:
            self._drop(subject)
        nxt = slice_header(hdr, _K_NEXT)
        if not nxt or not scheduler:
            return ""
        name = scheduler.decode("utf-8", "replace")
        if nxt == b"purge":
            self._drop(name)
            return name
        when = parse_at(nxt.decode("utf-8", "replace"))
        entry = self.entries.get(name)
        if when is not None and entry is not None:
            # a firing came back: the schedule is armed for its next time
            self._set(name, entry[0], when)
            self._arm()
        return ""

    def _drop(self, subject: str) -> None:
        self.entries.pop(subject, None)
        self.inflight.discard(subject)

    def _sweep(self) -> None:
        """Forget schedules whose message is gone (deleted, purged, expired, removed by a
        limit) before their time came."""
        store = self._host.store
        for subject, (seq, _fire) in list(self.entries.items()):
            if store.load_msg(seq) is None:
                self._drop(subject)
        self._rebuild_heap()
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self.entries))

    def recover(self) -> None:
        """Rebuild the table from the store (a restart, or schedules turned on by an
        update): the last message of each subject that is a schedule."""
        store = self._host.store
        for seq in store.multi_last_seqs([">"], 0, 0):
            m = store.load_msg(seq)
            if m is None or not m.hdr or _MARK not in m.hdr:
                continue
            fire = self._first_fire(m.hdr, m.ts)
            if fire is not None:
                self._set(m.subject, m.seq, fire)
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self.entries))
        self._arm()

    def rebuild(self) -> None:
        """The store changed under the table, not through ``stored`` (a replica caught up
        from another's store: messages copied in, others removed): read it again."""
        self.entries.clear()
        self.inflight.clear()
        self._heap = []
        self.recover()

    def reset(self) -> None:
        """Leadership changed: nothing is in flight any more (the new leader fires what is
        due, as nats-server's ``ResetState``)."""
        self.inflight.clear()
        self._rebuild_heap()
        self._arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._deadline = 0
        self.entries.clear()
        self.inflight.clear()
        self._heap = []

    # ------------------------------------------------------------------ firing
    def _next_due(self) -> int:
        """The earliest firing not in flight (0: none); stale heap items dropped."""
        heap = self._heap
        entries = self.entries
        while heap:
            fire, seq, subject = heap[0]
            if entries.get(subject) == (seq, fire) and subject not in self.inflight:
                return fire
            heapq.heappop(heap)
        return 0

    def _arm(self) -> None:
        due = self._next_due()
        if not due:
            return
        now = self._clock.time_ns()
        at = max(due, now + FLOOR_NS)
        if self._timer is not None:
            if self._deadline <= at:
                return  # an earlier (or the same) tick is set: it re-arms after itself
            self._timer.cancel()
        self._deadline = at
        self._timer = self._sched.call_later((at - now) / 1e9, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._deadline = 0
        now = self._clock.time_ns()
        heap = self._heap
        due: list[tuple[int, str, int]] = []
        while heap and heap[0][0] <= now + _EARLY_NS:
            fire, seq, subject = heapq.heappop(heap)
            if self.entries.get(subject) == (seq, fire) and subject not in self.inflight:
                due.append((seq, subject, fire))
        due.sort()
        host = self._host
        leads = host.leads()
        for seq, subject, fire in due:
            if self.entries.get(subject) != (seq, fire) or subject in self.inflight:
                continue  # an earlier firing of this turn changed it
            m = host.store.load_msg(seq)
            made = None if m is None or not m.hdr else self._firing(m, subject, fire, now)
            if made is None:
                self._drop(subject)  # its message is gone, or no longer a valid schedule
                continue
            self.inflight.add(subject)
            if leads and not host.produce(*made):
                # not stored or proposed (a limit refused it, or leadership is on its way
                # out): tried again after the floor, where nats-server would leave the
                # schedule in flight until the next leader change
                self.inflight.discard(subject)
                heapq.heappush(self._heap, (fire, seq, subject))
        self._arm()

    def _firing(
        self, m: StoredMsg, subject: str, fire: int, now: int
    ) -> tuple[str, bytes, bytes, int, str] | None:
        """The message a due schedule produces (target, header, data, TTL, rollup), or
        None when the schedule is no longer valid."""
        hdr = m.hdr
        assert hdr is not None
        pattern = slice_header(hdr, _K_SCHEDULE)
        ok, zone = _zone(hdr)
        if not pattern or not ok:
            return None
        got = next_fire(pattern.decode("utf-8", "replace"), zone, fire, now)
        if got is None:
            return None
        nxt, repeat = got
        ttl_raw = slice_header(hdr, _K_TTL)
        ttl = 0
        if ttl_raw:
            parsed = parse_ttl(ttl_raw.decode("utf-8", "replace"))
            if parsed is None:
                return None
            ttl = parsed
        target = slice_header(hdr, _K_TARGET)
        if not target:
            return None
        rollup = bool(slice_header(hdr, _K_ROLLUP))
        body_hdr: bytes | None = hdr
        data = m.data
        source = slice_header(hdr, _K_SOURCE)
        if source:
            sm = self._host.store.load_last_msg(source.decode("utf-8", "replace"))
            if sm is not None:
                body_hdr, data = sm.hdr, sm.data
        when = format_next(nxt, zone) if repeat else "purge"
        out = produced_header(body_hdr, subject, when, ttl_raw or None, rollup)
        return target.decode("utf-8", "replace"), out, data, ttl, "sub" if rollup else ""
