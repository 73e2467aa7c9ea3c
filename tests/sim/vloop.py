"""An asyncio event loop on virtual time: whole natsd servers, unchanged, run in it.

``VirtualLoop`` is asyncio's selector loop with two changes:

* its clock (``loop.time()``) is virtual: when no callback is ready, instead of waiting for
  the next timer the loop *jumps* to it. Every ``call_later``, ``asyncio.sleep`` and
  ``wait_for`` is therefore exact and free: a 2 s election timeout takes microseconds of
  wall time;
* ``run_in_executor`` runs the function at once, on the loop's thread (its future is done
  when it returns, its callbacks run on the next turn as usual). A server's WAL and store
  fsyncs, which it hands to a worker thread, then happen at a definite point of the
  schedule instead of whenever a thread gets to them.

Nothing else in a simulation may use real I/O or threads: the servers' routes and clients go
over ``sim.net`` (in-memory transports whose deliveries are timers of this loop). A real
listening socket may exist (a server's client port) as long as nothing connects to it: the
selector is only ever polled, never waited on. With no callback ready and no timer left,
nothing can ever happen again: the loop raises ``Stalled`` rather than hang.

Same seed, same schedule: asyncio runs ready callbacks in FIFO order and timers by due time
(ties in heap order, itself a function of the pushes and pops), so a run that draws every
random choice from seeded generators repeats itself callback for callback.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

__all__ = ["Stalled", "VirtualLoop", "run_virtual"]

T = TypeVar("T")

# asyncio's own clock_resolution for this loop: due times within it of "now" are due.
_RESOLUTION = 1e-9


class Stalled(RuntimeError):
    """No callback is ready and none is scheduled: the awaited thing can never happen."""


class _PollingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Polls, never waits: a wait of ``timeout`` seconds moves the virtual clock instead."""

    def __init__(self, loop_now: Callable[[float], None]) -> None:
        super().__init__()
        self._advance = loop_now

    def select(self, timeout: float | None = None) -> list[Any]:
        events: list[Any] = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise Stalled("nothing is ready and no timer is due: nothing can happen any more")
        self._advance(timeout)
        return events


class VirtualLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
    def __init__(self) -> None:
        self._virtual_now = 0.0
        self.jumps = 0  # how many times the clock jumped to the next timer
        super().__init__(selector=_PollingSelector(self._jump))
        self._clock_resolution = _RESOLUTION

    def _jump(self, seconds: float) -> None:
        self.jumps += 1
        self._virtual_now += seconds

    def time(self) -> float:
        return self._virtual_now

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        fut: asyncio.Future[T] = self.create_future()
        try:
            fut.set_result(func(*args))
        except BaseException as e:  # the future carries it, as a thread's would
            fut.set_exception(e)
        return fut


def run_virtual(main: Callable[[], Any]) -> Any:
    """``asyncio.run`` on a fresh :class:`VirtualLoop`: ``main()`` is the coroutine."""
    loop = VirtualLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main())
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
