"""What a consumer's parts share: the cursor and the doorbell of the delivery loop.

Rules kept here:

* :class:`Cursor` is written by the :class:`~natsd.jetstream.consumer.consumer.Consumer`
  only (its delivery loop, start, reset and purge); the parts read it (ack floors are
  measured against it, heartbeats and priority checks report it).
* :class:`Doorbell` is how a part asks for the delivery loop to run: ``ring()`` schedules
  one run per loop turn however often it is rung, and nothing after ``stop()``. Only the
  consumer's ``_run`` calls ``answered()``.

Both are plain native classes (compiled with the consumer, see ``setup.py``), so
a part reading ``cursor.sseq`` or ringing the bell costs a struct read or a direct call,
not a Python attribute lookup. Everything runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from natsd.core.scheduler import Scheduler

__all__ = ["Cursor", "Doorbell"]


class Cursor:
    """Where delivery stands (nats-server's ``o.sseq``, ``o.dseq``, ``o.npc``)."""

    def __init__(self) -> None:
        self.sseq = 1  # the next stream sequence to look at
        self.dseq = 1  # the next delivery (consumer) sequence
        self.npc = 0  # messages pending: matching, at or after sseq


class Doorbell:
    """Wakes the delivery loop (nats-server's ``signalNewMessages``)."""

    def __init__(self, sched: Scheduler, run: Callable[[], None]) -> None:
        self._sched = sched
        self._run = run
        self._scheduled = False
        self._stopped = False

    def ring(self) -> None:
        if not self._scheduled and not self._stopped:
            self._scheduled = True
            self._sched.call_soon(self._run)

    def answered(self) -> None:
        """The loop runs now: the next ring schedules another run."""
        self._scheduled = False

    def stop(self) -> None:
        self._stopped = True
