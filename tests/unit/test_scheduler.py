"""natsd.core.scheduler: the virtual clock and scheduler tests drive time with, and the
real pair the server passes (the time module and the running asyncio loop)."""

from __future__ import annotations

import asyncio
import time

import pytest

from natsd.core.scheduler import (
    SYSTEM_CLOCK,
    Scheduler,
    VirtualClock,
    VirtualScheduler,
)


def test_system_clock_is_the_time_module_itself() -> None:
    # Cached bound methods are the builtins: no Python frame on the per-message path.
    assert SYSTEM_CLOCK.time_ns is time.time_ns
    assert SYSTEM_CLOCK.monotonic is time.monotonic
    assert abs(SYSTEM_CLOCK.time_ns() - time.time_ns()) < 1_000_000_000


def test_virtual_clock_moves_only_when_advanced() -> None:
    clock = VirtualClock(wall_start_ns=1_000)
    sched = VirtualScheduler(clock)
    assert (clock.time_ns(), clock.monotonic()) == (1_000, 0.0)
    sched.advance(2.5)
    assert (clock.time_ns(), clock.monotonic()) == (2_500_001_000, 2.5)
    with pytest.raises(ValueError):
        sched.advance_to_ns(1)


def test_timers_run_in_due_order_at_their_due_time() -> None:
    sched = VirtualScheduler()
    seen: list[tuple[str, float]] = []

    def mark(name: str) -> None:
        seen.append((name, sched.clock.monotonic()))

    sched.call_later(3.0, mark, "c")
    sched.call_later(1.0, mark, "a")
    sched.call_later(1.0, mark, "a2")  # same instant: scheduling order
    sched.call_later(2.0, mark, "b")
    sched.advance(1.5)
    assert seen == [("a", 1.0), ("a2", 1.0)]
    sched.advance(10)
    assert seen[2:] == [("b", 2.0), ("c", 3.0)]
    assert sched.clock.monotonic() == 11.5


def test_call_soon_runs_fifo_and_before_later_timers() -> None:
    sched = VirtualScheduler()
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        sched.call_soon(seen.append, "chained")
        sched.call_later(0, seen.append, "timer-now")

    sched.call_soon(first)
    sched.call_soon(seen.append, "second")
    assert seen == []  # nothing runs until the test says so
    assert sched.run_ready() == 3
    assert seen == ["first", "second", "chained"]
    sched.advance(0)
    assert seen[-1] == "timer-now"


def test_callbacks_scheduled_by_timers_within_the_window_run_too() -> None:
    sched = VirtualScheduler()
    ticks: list[float] = []

    def tick() -> None:
        ticks.append(sched.clock.monotonic())
        sched.call_later(0.25, tick)

    sched.call_later(0.25, tick)
    sched.advance(1.0)
    assert ticks == [0.25, 0.5, 0.75, 1.0]
    assert sched.next_due_ns() == 1_250_000_000


def test_cancelled_callbacks_do_not_run() -> None:
    sched = VirtualScheduler()
    seen: list[str] = []
    h = sched.call_later(1.0, seen.append, "timer")
    s = sched.call_soon(seen.append, "soon")
    keep = sched.call_later(2.0, seen.append, "kept")
    h.cancel()
    s.cancel()
    assert sched.pending() == [keep]
    sched.advance(5)
    assert seen == ["kept"]
    assert sched.next_due_ns() is None


def test_a_positive_delay_always_moves_time() -> None:
    # Code re-arming "the rest of the wait" in float seconds would otherwise spin at one
    # instant; a real loop's clock would have moved on.
    sched = VirtualScheduler()
    when: list[int] = []
    sched.call_later(1e-12, lambda: when.append(sched.clock.elapsed_ns))
    sched.advance(1)
    assert when == [1]


def test_a_livelock_fails_instead_of_hanging() -> None:
    sched = VirtualScheduler()

    def again() -> None:
        sched.call_soon(again)

    sched.call_soon(again)
    with pytest.raises(RuntimeError):
        sched.run_ready()


def test_callback_errors_reach_the_test() -> None:
    sched = VirtualScheduler()

    def boom() -> None:
        raise KeyError("x")

    sched.call_later(1, boom)
    with pytest.raises(KeyError):
        sched.advance(2)


def test_the_asyncio_loop_is_a_scheduler() -> None:
    async def main() -> list[str]:
        loop: Scheduler = asyncio.get_running_loop()
        seen: list[str] = []
        loop.call_later(0.001, seen.append, "later")
        loop.call_soon(seen.append, "soon")
        loop.call_later(0.001, seen.append, "cancelled").cancel()
        await asyncio.sleep(0.01)
        return seen

    assert asyncio.run(main()) == ["soon", "later"]
