"""Time a test moves forward: real time plus an offset, and timers that follow it.

A ``TestClock`` is both the ``Clock`` and the ``Scheduler`` that the JetStream core takes
(``natsd.core.scheduler``). Until a test calls :meth:`TestClock.advance` it is the real
clock, so a server on it behaves as any other; ``advance(30)`` makes it 30 s later at once:
wall and monotonic time jump, and every timer that falls due in those 30 s runs, in due-time
order (ack waits and backoff redeliveries, message TTLs and ``max_age``, duplicate windows,
consumer inactive thresholds, pull request expiries). A test of a 30 s ack wait then takes
milliseconds.

Only JetStream runs on it; client connections (pings, auth timeouts) and the cluster's
Raft keep real time, so moving time never disconnects a client or starts an election.

Ownership: one event loop. ``call_later`` and ``advance`` run on the thread of the loop the
clock serves (``ThreadedServer.advance`` gets there for a test on another thread).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable
from typing import Any, TypeVarTuple, Unpack

__all__ = ["TestClock"]

_Ts = TypeVarTuple("_Ts")

# More timers than this in one advance is a timer rescheduling itself without delay.
MAX_RUNS = 1_000_000


class _Timer:
    __slots__ = ("args", "callback", "cancelled")

    def __init__(self, callback: Callable[..., object], args: tuple[object, ...]) -> None:
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TestClock:
    """Real time plus ``offset_ns``; a ``Scheduler`` whose delays are in that time."""

    __test__ = False  # not a test class, whatever pytest's collection thinks of its name

    def __init__(self) -> None:
        self.offset_ns = 0
        self._timers: list[tuple[float, int, _Timer]] = []
        self._seq = 0
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    # ---------------------------------------------------------------- Clock
    def time_ns(self) -> int:
        return time.time_ns() + self.offset_ns

    def monotonic(self) -> float:
        return time.monotonic() + self.offset_ns / 1e9

    # ---------------------------------------------------------------- Scheduler
    def call_soon(self, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts) -> Any:
        return asyncio.get_running_loop().call_soon(callback, *args)

    def call_later(
        self, delay: float, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts
    ) -> _Timer:
        t = _Timer(callback, args)
        self._seq += 1
        heapq.heappush(self._timers, (self.monotonic() + max(delay, 0.0), self._seq, t))
        self._arm()
        return t

    # ---------------------------------------------------------------- the test's side
    def advance(self, seconds: float) -> int:
        """Move time ``seconds`` forward, running every timer that falls due on the way at
        its due time, in due-time order: time steps to each in turn, so a timer set by a
        callback (a periodic check) that falls due before the end runs too. Returns how
        many ran. Call it on the clock's loop."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        target = self.monotonic() + seconds
        timers = self._timers
        ran = 0
        while True:
            while timers and timers[0][2].cancelled:
                heapq.heappop(timers)
            if not timers or timers[0][0] > target:
                break
            self._move_to(timers[0][0])
            ran += self._fire()
            if ran > MAX_RUNS:
                raise RuntimeError(f"more than {MAX_RUNS} timers in one advance: a livelock")
        self._move_to(target)
        return ran + self._fire()

    def pending(self) -> int:
        """Timers scheduled and not yet run or cancelled."""
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    # ---------------------------------------------------------------- inside
    def _move_to(self, when: float) -> None:
        """Make ``monotonic()`` read ``when``, unless it already reads later (time never
        goes back: real time moves on while the callbacks run)."""
        offset = int((when - time.monotonic()) * 1e9)
        if offset > self.offset_ns:
            self.offset_ns = offset

    def _arm(self) -> None:
        """One loop timer, for the earliest of ours (in real time: due minus offset)."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        if not timers:
            return
        due = timers[0][0]
        if self._armed is not None:
            if self._armed_at <= due:
                return  # fires first anyway, and re-arms
            self._armed.cancel()
        loop = asyncio.get_running_loop()
        self._armed_at = due
        self._armed = loop.call_at(loop.time() + (due - self.monotonic()), self._on_timer)

    def _on_timer(self) -> None:
        self._armed = None
        self._fire()

    def _fire(self) -> int:
        ran = 0
        timers = self._timers
        while timers and timers[0][0] <= self.monotonic():
            _, _, t = heapq.heappop(timers)
            if t.cancelled:
                continue
            t.cancelled = True  # ran: a late cancel() does nothing
            ran += 1
            try:
                t.callback(*t.args)
            except Exception as e:  # as the loop treats a callback's exception
                asyncio.get_running_loop().call_exception_handler(
                    {"message": "exception in a TestClock timer", "exception": e}
                )
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None
        self._arm()
        return ran
