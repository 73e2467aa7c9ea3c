"""Group commit: a PubAck goes out only after the fsync that covers its message.

Publishers that arrive while an fsync is in flight are batched into the next one, so one
fsync (about 150 µs on the reference disk) acknowledges every message that arrived during
the previous one. The loop thread appends to stores and calls ``flush()`` (the write
syscall); a single worker thread runs ``sync()`` (fsync) so the event loop keeps accepting
publishes meanwhile.

Its own work is scheduled on the injected ``Scheduler`` (the loop in the server); only the
fsync hand-off to the worker thread uses the running loop directly: that is I/O, not time.

Modes (nats-server names): the default fsyncs before acknowledging; ``sync_interval`` (lazy)
acknowledges after the write and fsyncs on a timer; ``sync_always`` fsyncs each message on
its own, as nats-server does.

A replicated stream's store is the other kind (``add_replicated``): what it applies is
already durable in the node logs of a majority, so it is written out with the loop turn's
other writes and fsynced on a timer (``REPLICA_SYNC``), off the path of the next publish.
Its log keeps every entry since the store was last made durable: the log is compacted only
after an inline sync of the store (``jetstream/cluster/streams.py``), and a store that a crash
cut short or left with a hole is cut back and refilled from the log at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from natsd.core.scheduler import Cancellable, Scheduler
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError, StreamStore

__all__ = ["Ack", "Committer"]

log: Final = logging.getLogger("natsd")

# Batches with at most this many acks are fsynced on the loop thread (see Committer._start).
INLINE_MAX_ACKS: Final = 2
# Seconds between the fsyncs of replicated streams' stores (see the module docstring): it
# bounds what a compaction's inline sync and a restart after a power cut have to do.
REPLICA_SYNC: Final = 1.0

# (the publisher's account Sublist, reply subject, ack payload when durable, ack payload
# when the write failed): acks are published straight into the account that stored them.
Ack = tuple[Sublist[Subscription], bytes, bytes, bytes]


class Committer:
    def __init__(
        self,
        scheduler: Scheduler,
        sync_interval: float | None = None,
        sync_always: bool = False,
    ) -> None:
        self._sched = scheduler
        self.sync_interval = sync_interval
        self.sync_always = sync_always
        self._pending: dict[StreamStore, list[Ack]] = {}
        self._in_flight = False
        self._scheduled = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="natsd-fsync")
        self._timer: Cancellable | None = None
        self._dirty_lazy: set[StreamStore] = set()
        # replicated streams' stores written since the last turn: flushed, not synced
        self._replicated: set[StreamStore] = set()
        # Called after a failed write or sync of a store, before the error acks go out:
        # the stream forgets what it recorded about messages that were not stored.
        self.on_failure: dict[StreamStore, Callable[[], None]] = {}
        self.batches = 0
        self.synced_msgs = 0

    def add(self, store: StreamStore, ack: Ack | None) -> None:
        """A message was stored in ``store``; ``ack`` is sent once it is durable."""
        lst = self._pending.get(store)
        if lst is None:
            lst = self._pending[store] = []
        if ack is not None:
            lst.append(ack)
        if self.sync_always:
            self._commit_now()
            return
        if not self._in_flight and not self._scheduled:
            self._scheduled = True
            self._sched.call_soon(self._start)

    def add_replicated(self, store: StreamStore) -> None:
        """A replicated stream applied a committed entry to ``store`` (module docstring)."""
        self._replicated.add(store)
        if not self._in_flight and not self._scheduled:
            self._scheduled = True
            self._sched.call_soon(self._start)

    def _flush_replicated(self) -> None:
        stores = self._replicated
        self._replicated = set()
        for store in stores:
            try:
                store.flush()
            except (StoreError, OSError) as e:
                self._fail(store, [], e)
                continue
            self._dirty_lazy.add(store)
        if self._dirty_lazy and self._timer is None:
            interval = REPLICA_SYNC if self.sync_interval is None else self.sync_interval
            self._timer = self._sched.call_later(interval, self._lazy_sync)

    def _commit_now(self) -> None:
        batch = self._pending
        self._pending = {}
        for store, acks in batch.items():
            try:
                store.flush()
                store.sync()
            except (StoreError, OSError) as e:
                self._fail(store, acks, e)
                continue
            self._ack(acks)

    def _start(self) -> None:
        self._scheduled = False
        if self._in_flight:
            return
        if self._replicated:
            self._flush_replicated()
        if not self._pending:
            return
        batch = self._pending
        self._pending = {}
        ok: dict[StreamStore, list[Ack]] = {}
        for store, acks in batch.items():
            try:
                store.flush()
            except (StoreError, OSError) as e:
                self._fail(store, acks, e)
                continue
            ok[store] = acks
        if not ok:
            return
        if self.sync_interval is not None:
            # Lazy mode: acknowledged once written; the timer makes it durable later.
            for acks in ok.values():
                self._ack(acks)
            self._dirty_lazy.update(ok)
            self._arm_timer()
            return
        if 0 < sum(len(a) for a in ok.values()) <= INLINE_MAX_ACKS:
            # A lone publisher (request/reply style) waits for this fsync whatever we do;
            # running it here saves the two thread hand-offs (~100 us on a busy machine)
            # that the worker costs. Big batches still go to the worker so the loop keeps
            # reading publishes while the disk works, and so do batches nobody waits for
            # (publishes without a reply, a replicated stream's applied entries).
            self.batches += 1
            try:
                _sync_all(list(ok))
            except (StoreError, OSError) as e:
                for store, acks in ok.items():
                    self._fail(store, acks, e)
                return
            for acks in ok.values():
                self.synced_msgs += len(acks)
                self._ack(acks)
            return
        self._in_flight = True
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._executor, _sync_all, list(ok))
        fut.add_done_callback(lambda f: self._synced(ok, f))

    def _synced(self, batch: dict[StreamStore, list[Ack]], fut: asyncio.Future[None]) -> None:
        self._in_flight = False
        self.batches += 1
        exc = fut.exception()
        for store, acks in batch.items():
            if exc is not None:
                self._fail(store, acks, exc)
            else:
                self.synced_msgs += len(acks)
                self._ack(acks)
        if (self._pending or self._replicated) and not self._scheduled:
            self._scheduled = True
            self._sched.call_soon(self._start)

    def _ack(self, acks: list[Ack]) -> None:
        for sublist, reply, good, _bad in acks:
            publish(sublist, reply, None, None, good)

    def _fail(self, store: StreamStore, acks: list[Ack], exc: BaseException) -> None:
        log.error("JetStream store write failed: %s", exc)
        hook = self.on_failure.get(store)
        if hook is not None:
            hook()
        for sublist, reply, _good, bad in acks:
            publish(sublist, reply, None, None, bad)

    def _arm_timer(self) -> None:
        if self._timer is None and self.sync_interval is not None:
            self._timer = self._sched.call_later(self.sync_interval, self._lazy_sync)

    def _lazy_sync(self) -> None:
        self._timer = None
        stores = list(self._dirty_lazy)
        self._dirty_lazy.clear()
        if stores:
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(self._executor, _sync_all, stores)
            fut.add_done_callback(_log_failed_sync)

    async def drain(self) -> None:
        """Commit everything pending (used at shutdown)."""
        while self._pending or self._replicated or self._in_flight:
            if not self._in_flight:
                self._start()
            await asyncio.sleep(0.001)
        stores = list(self._dirty_lazy)
        self._dirty_lazy.clear()
        if stores:
            await asyncio.get_running_loop().run_in_executor(self._executor, _sync_all, stores)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._executor.shutdown(wait=True)


def _log_failed_sync(fut: asyncio.Future[None]) -> None:
    """A timer's sync failed: nothing waits on it, but the store stays poisoned (every
    later sync raises), so what depends on it (a replicated log's compaction) stops."""
    exc = fut.exception()
    if exc is not None:
        log.error("JetStream store sync failed: %s", exc)


def _sync_all(stores: list[StreamStore]) -> None:
    for s in stores:
        s.sync()
