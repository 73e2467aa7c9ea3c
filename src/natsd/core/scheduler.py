"""Time and timers as injected dependencies: ``Clock``, ``Scheduler`` and a virtual pair.

The JetStream core and the client connection never call ``time.*`` or the event loop for
timers themselves; they are handed a :class:`Clock` (what time is it) and a
:class:`Scheduler` (run this soon / after a delay). The server passes :data:`SYSTEM_CLOCK`
and the running asyncio loop, which satisfies ``Scheduler`` as it is. A test (and later a
replication simulator) passes a :class:`VirtualClock` and a :class:`VirtualScheduler`:
time then only moves when the test calls :meth:`VirtualScheduler.advance`, which runs the
callbacks that fall due in time order, deterministically, in milliseconds of real time.

The two clocks a caller may need are kept apart as Go and nats-server keep them: wall time
in nanoseconds (stored message and delivery timestamps, advisories, ack-wait arithmetic)
and monotonic seconds (deadlines of pull requests, heartbeats, inactivity), the clock in
which ``call_later`` delays are measured.

Ownership: a scheduler and its clock belong to the one thread that runs the event loop (or
the test); nothing here is thread safe.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable
from typing import Final, Protocol, TypeVarTuple, Unpack

__all__ = [
    "SYSTEM_CLOCK",
    "Cancellable",
    "Clock",
    "Scheduler",
    "SystemClock",
    "VirtualClock",
    "VirtualHandle",
    "VirtualScheduler",
]

_Ts = TypeVarTuple("_Ts")


class Clock(Protocol):
    def time_ns(self) -> int:
        """Wall clock, nanoseconds since the Unix epoch (``time.time_ns``)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (``time.monotonic``): the clock of ``Scheduler`` delays."""
        ...


class Cancellable(Protocol):
    """A scheduled callback (``asyncio.Handle`` / ``TimerHandle`` satisfy it)."""

    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The ``call_soon`` / ``call_later`` subset of an asyncio event loop."""

    def call_soon(self, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts) -> Cancellable: ...

    def call_later(
        self, delay: float, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts
    ) -> Cancellable: ...


class SystemClock:
    """The real clocks. The methods are the ``time`` module's own functions (a
    ``staticmethod`` of a builtin), so a caller that caches ``clock.time_ns`` calls
    ``time.time_ns`` itself: no Python frame in between on the per-message path."""

    time_ns = staticmethod(time.time_ns)
    monotonic = staticmethod(time.monotonic)


SYSTEM_CLOCK: Final = SystemClock()

# 2026-01-01T00:00:00Z: where virtual wall time starts unless a test says otherwise.
_VIRTUAL_EPOCH_NS: Final = 1_767_225_600_000_000_000


class VirtualClock:
    """Time that only moves when its scheduler advances it. Kept as integer nanoseconds
    since the clock was made, so times compare exactly (no float drift): wall time is
    ``wall_start_ns`` plus that, monotonic time is that in seconds."""

    def __init__(self, wall_start_ns: int = _VIRTUAL_EPOCH_NS) -> None:
        self.wall_start_ns = wall_start_ns
        self.elapsed_ns = 0

    def time_ns(self) -> int:
        return self.wall_start_ns + self.elapsed_ns

    def monotonic(self) -> float:
        return self.elapsed_ns / 1e9


class VirtualHandle:
    """A callback queued on a :class:`VirtualScheduler`; ``when_ns`` is its due time in
    the clock's elapsed nanoseconds."""

    __slots__ = ("args", "callback", "cancelled", "when_ns")

    def __init__(
        self, when_ns: int, callback: Callable[..., object], args: tuple[object, ...]
    ) -> None:
        self.when_ns = when_ns
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualScheduler:
    """A deterministic ``Scheduler`` over a :class:`VirtualClock`.

    ``call_soon`` callbacks run in FIFO order; timers run in due-time order, and timers
    due at the same instant in the order they were scheduled. Nothing runs until the test
    calls :meth:`run_ready` or :meth:`advance`. A callback's exception propagates to the
    test (the asyncio loop would only log it): a failure inside a timer is a test failure.
    """

    # More callbacks than this within one instant is a livelock (a test failure).
    MAX_READY: Final = 1_000_000

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock if clock is not None else VirtualClock()
        self._ready: deque[VirtualHandle] = deque()
        self._timers: list[tuple[int, int, VirtualHandle]] = []
        self._seq = 0
        self.ran = 0  # callbacks run so far

    # ---------------------------------------------------------------- Scheduler
    def call_soon(self, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts) -> VirtualHandle:
        h = VirtualHandle(self.clock.elapsed_ns, callback, args)
        self._ready.append(h)
        return h

    def call_later(
        self, delay: float, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts
    ) -> VirtualHandle:
        # Delays round to the nearest nanosecond, so timers land on the exact times a test
        # expects. A positive delay below half a nanosecond still moves time by one: code
        # that re-arms "the rest of the wait" (computed in float seconds) would otherwise
        # spin at one instant, where a real loop's clock would have moved on. asyncio runs a
        # non-positive delay on the next iteration; here it is a timer due now.
        ns = round(delay * 1e9)
        if ns <= 0:
            ns = 1 if delay > 0 else 0
        when = self.clock.elapsed_ns + ns
        h = VirtualHandle(when, callback, args)
        self._seq += 1
        heapq.heappush(self._timers, (when, self._seq, h))
        return h

    # ---------------------------------------------------------------- driving time
    def run_ready(self) -> int:
        """Run the callbacks ready now, and those they make ready, without moving time.
        Returns how many ran."""
        n = 0
        ready = self._ready
        while ready:
            h = ready.popleft()
            if h.cancelled:
                continue
            n += 1
            if n > self.MAX_READY:
                raise RuntimeError("call_soon callbacks keep rescheduling themselves")
            h.callback(*h.args)
        self.ran += n
        return n

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, running every callback due on the way at its
        own due time, then the ready callbacks at the end."""
        self.advance_to_ns(self.clock.elapsed_ns + round(seconds * 1e9))

    def advance_to_ns(self, target_ns: int) -> None:
        """Move the clock to ``target_ns`` elapsed nanoseconds (see :meth:`advance`)."""
        if target_ns < self.clock.elapsed_ns:
            raise ValueError("virtual time does not go backwards")
        self.run_ready()
        timers = self._timers
        at_instant = 0
        while timers and timers[0][0] <= target_ns:
            when, _seq, h = heapq.heappop(timers)
            if h.cancelled:
                continue
            if when == self.clock.elapsed_ns:
                at_instant += 1
                if at_instant > self.MAX_READY:
                    raise RuntimeError("timers keep re-arming at the same instant")
            else:
                at_instant = 0
            self.clock.elapsed_ns = when
            self._ready.append(h)
            self.run_ready()
        self.clock.elapsed_ns = target_ns
        self.run_ready()

    def next_due_ns(self) -> int | None:
        """When the next live timer falls due (elapsed ns), or None."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    def pending(self) -> list[VirtualHandle]:
        """The live timers, in the order they will run (for assertions)."""
        live = sorted((t for t in self._timers if not t[2].cancelled), key=lambda t: t[:2])
        return [h for _w, _s, h in live]
