"""Fair sharing of the event loop between connections that have input to process.

One event loop serves every client. A read callback that parses its whole socket read
(uvloop hands over up to 256 KiB) holds the loop for as long as that takes, so 100
connections flooding small frames made one loop turn last seconds, and a well-behaved
client's request/reply waited as long (tests/reliability/test_protocol_abuse.py).

``ReadBudget`` bounds the time spent on input per loop turn. Input is processed in slices
sized in time, not bytes: the same 8 KiB costs 0.2 ms as bulk PUBs and 5 ms as a mix of
SUB/UNSUB/CONNECT frames, so each connection keeps an estimate of what a byte of its input
costs (``cost``, seconds per byte, measured on every slice) and a slice is ``QUANTUM`` of
that, within [``MIN_SLICE``, ``MAX_SLICE``] bytes.

* A read arriving while the turn is young (less than ``TURN_TIME`` used since the turn's
  first read) may process one quantum at once; later in the turn only ``MIN_SLICE`` bytes.
  A connection that was idle therefore has its request handled in the turn it arrives,
  ahead of the backlog of busy connections.
* What a connection may not process now stays with the connection, which stops reading its
  socket (so the kernel's buffer and TCP flow control hold the rest, not our memory) and
  joins a FIFO of deferred connections.
* Once per turn, ``_serve`` gives the FIFO's connections a quantum each, in order, until
  ``TURN_TIME`` is used; a connection with input left goes to the back. That is round robin
  by time, so two bulk publishers share the loop evenly and a flood of expensive frames
  cannot hold it for more than about ``TURN_TIME`` plus a quantum.

A single busy connection pays one ``pause_reading``/``resume_reading`` pair per socket read
and a deque append per slice, microseconds against the milliseconds each slice takes.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Final, Protocol

from natsd.core.scheduler import Scheduler

__all__ = [
    "INITIAL_COST",
    "MAX_SLICE",
    "MIN_SLICE",
    "QUANTUM",
    "TURN_TIME",
    "Backlogged",
    "ReadBudget",
    "slice_for",
]

MAX_SLICE: Final = 256 * 1024
MIN_SLICE: Final = 256
QUANTUM: Final = 0.001
TURN_TIME: Final = 0.002
# Seconds per byte assumed before a connection has been measured (a mix of small frames).
INITIAL_COST: Final = 2e-7


def slice_for(quantum: float, cost: float) -> int:
    """Bytes of input expected to take ``quantum`` seconds at ``cost`` seconds per byte."""
    n = int(quantum / cost) if cost > 0.0 else MAX_SLICE
    if n < MIN_SLICE:
        return MIN_SLICE
    if n > MAX_SLICE:
        return MAX_SLICE
    return n


class Backlogged(Protocol):
    def continue_backlog(self, quantum: float) -> None:
        """Process about ``quantum`` seconds of held input; ``defer`` again if some is left."""


class ReadBudget:
    __slots__ = ("_armed", "_loop", "_queue", "_scheduled", "_turn_start", "deferrals")

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        # The scheduler of the turn callbacks (a test's virtual one), else the running loop.
        self._loop: Scheduler | None = scheduler
        self._armed = False
        self._turn_start = 0.0
        self._queue: deque[Backlogged] = deque()
        self._scheduled = False
        self.deferrals = 0  # reads cut short, for monitoring and tests

    def _get_loop(self) -> Scheduler:
        loop = self._loop
        if loop is None:
            # Bound on first use: the budget lives on the loop that runs the server.
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def _new_turn(self) -> None:
        self._armed = False

    def grant(self, n: int, cost: float, now: float) -> int:
        """How many of ``n`` freshly read bytes, at ``cost`` s/byte, may be processed now
        (``now`` is ``time.perf_counter()``)."""
        if not self._armed:
            # The first read of a turn starts its clock; a callback on the next turn resets it.
            self._armed = True
            self._turn_start = now
            self._get_loop().call_soon(self._new_turn)
        young = now - self._turn_start < TURN_TIME
        limit = slice_for(QUANTUM, cost) if young else MIN_SLICE
        if n <= limit:
            return n
        self.deferrals += 1
        return limit

    def defer(self, conn: Backlogged) -> None:
        """Queue ``conn`` to continue its held input on a later turn."""
        self._queue.append(conn)
        if not self._scheduled:
            self._scheduled = True
            self._get_loop().call_soon(self._serve)

    def _serve(self) -> None:
        self._scheduled = False
        q = self._queue
        # Its own clock: reads in this turn's I/O phase have theirs (see grant).
        end = time.perf_counter() + TURN_TIME
        # Only the connections queued when this turn began; a re-queued one waits its turn.
        for _ in range(len(q)):
            q.popleft().continue_backlog(QUANTUM)
            if time.perf_counter() >= end:
                break
        if q and not self._scheduled:
            self._scheduled = True
            self._get_loop().call_soon(self._serve)
