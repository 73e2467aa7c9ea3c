"""Coalesces writes: each dirty connection is written once per event-loop turn.

Delivery appends frames to a connection's ``out`` list and registers the connection here;
one ``call_soon`` callback then joins each list and issues a single ``transport.write``.
The callback goes on the ``Scheduler`` given (a test's virtual one), else on the running loop.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from natsd.core.scheduler import Scheduler

__all__ = ["Flushable", "Flusher"]


class Flushable(Protocol):
    def flush(self) -> None: ...


class Flusher:
    __slots__ = ("_dirty", "_loop", "_scheduled")

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self._loop: Scheduler | None = scheduler
        self._dirty: list[Flushable] = []
        self._scheduled = False

    def add(self, conn: Flushable) -> None:
        self._dirty.append(conn)
        if not self._scheduled:
            self._scheduled = True
            loop = self._loop
            if loop is None:
                # Bound on first use: the flusher lives on the loop that runs the server.
                loop = self._loop = asyncio.get_running_loop()
            loop.call_soon(self.run)

    def run(self) -> None:
        self._scheduled = False
        while self._dirty:
            dirty = self._dirty
            self._dirty = []
            for c in dirty:
                c.flush()
