"""natsd.testing.TestClock: real time plus an offset, and timers that follow it."""

from __future__ import annotations

import asyncio
import time

from natsd.testing import TestClock


async def test_real_time_until_advanced() -> None:
    c = TestClock()
    assert abs(c.time_ns() - time.time_ns()) < 50_000_000
    assert abs(c.monotonic() - time.monotonic()) < 0.05
    c.advance(30)
    assert 29.9 < c.monotonic() - time.monotonic() < 30.1
    assert 29.9e9 < c.time_ns() - time.time_ns() < 30.1e9


async def test_advance_runs_what_falls_due_in_order() -> None:
    c = TestClock()
    ran: list[str] = []
    c.call_later(20, ran.append, "b")
    c.call_later(10, ran.append, "a")
    c.call_later(20, ran.append, "c")  # same due time: in the order scheduled
    late = c.call_later(40, ran.append, "late")
    gone = c.call_later(5, ran.append, "cancelled")
    gone.cancel()
    assert c.pending() == 4
    assert c.advance(25) == 3
    assert ran == ["a", "b", "c"]
    late.cancel()
    assert c.advance(100) == 0 and c.pending() == 0


async def test_a_timer_set_by_a_timer_runs_if_it_falls_due_too() -> None:
    """A periodic check (each run sets the next, 1 s on) runs once per second of advanced
    time, each at its own due time."""
    c = TestClock()
    ran: list[tuple[int, float]] = []
    start = c.monotonic()

    def tick(n: int) -> None:
        ran.append((n, c.monotonic() - start))
        if n < 5:
            c.call_later(1, tick, n + 1)

    c.call_later(1, tick, 0)
    assert c.advance(2.5) == 2
    assert [n for n, _ in ran] == [0, 1]
    assert 1.0 <= ran[0][1] < 1.05 and 2.0 <= ran[1][1] < 2.05  # each at its due time
    c.advance(10)
    assert [n for n, _ in ran] == [0, 1, 2, 3, 4, 5]
    assert c.monotonic() - start >= 12.5


async def test_timers_also_fire_in_real_time() -> None:
    c = TestClock()
    done = asyncio.get_running_loop().create_future()
    c.call_later(0.02, done.set_result, "real")
    assert await asyncio.wait_for(done, 2) == "real"


async def test_a_failing_timer_goes_to_the_loop_handler() -> None:
    loop = asyncio.get_running_loop()
    seen: list[object] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx.get("exception")))
    try:
        c = TestClock()
        ran: list[int] = []

        def boom() -> None:
            raise ValueError("boom")

        c.call_later(1, boom)
        c.call_later(2, ran.append, 1)
        assert c.advance(3) == 2
        assert ran == [1] and isinstance(seen[0], ValueError)
    finally:
        loop.set_exception_handler(None)
