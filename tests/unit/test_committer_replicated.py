"""The Committer's replicated-store path: a replicated stream's applied entries are written
out with the loop turn but fsynced on a timer, off the path of the next publish (the node
log already holds them durably on a majority)."""

from __future__ import annotations

import asyncio
import logging
from typing import cast

import pytest

from natsd.core.scheduler import VirtualScheduler
from natsd.jetstream.stream.commit import REPLICA_SYNC, Committer
from natsd.storage.store import ErrStoreIO, StreamStore


class CountingStore:
    def __init__(self, fail_sync: bool = False) -> None:
        self.flushes = 0
        self.syncs = 0
        self.fail_sync = fail_sync

    def flush(self) -> int:
        self.flushes += 1
        return 0

    def sync(self) -> None:
        if self.fail_sync:
            raise ErrStoreIO("fsync failed (test)")
        self.syncs += 1


async def settle(sched: VirtualScheduler) -> None:
    """Let the worker thread's sync finish and its callback run."""
    for _ in range(200):
        await asyncio.sleep(0.005)
        sched.run_ready()


async def test_applied_entries_are_flushed_at_once_and_synced_on_the_timer() -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    fake = CountingStore()
    store = cast(StreamStore, fake)
    try:
        for _ in range(3):
            c.add_replicated(store)
        sched.run_ready()
        assert (fake.flushes, fake.syncs) == (1, 0)  # one write-out per turn, no fsync
        c.add_replicated(store)
        sched.run_ready()
        assert (fake.flushes, fake.syncs) == (2, 0)
        sched.advance(REPLICA_SYNC * 0.9)
        await settle(sched)
        assert fake.syncs == 0
        sched.advance(REPLICA_SYNC * 0.2)
        await settle(sched)
        assert fake.syncs == 1  # both turns' writes, one fsync
        sched.advance(REPLICA_SYNC * 3)
        await settle(sched)
        assert fake.syncs == 1  # nothing written since: no timer, no fsync
    finally:
        c.close()


async def test_drain_syncs_what_waits_for_the_timer() -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    fake = CountingStore()
    try:
        c.add_replicated(cast(StreamStore, fake))
        await c.drain()  # shutdown: flushed and synced before the stores close
        assert (fake.flushes, fake.syncs) == (1, 1)
    finally:
        c.close()


async def test_a_failed_timer_sync_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    fake = CountingStore(fail_sync=True)
    try:
        with caplog.at_level(logging.ERROR, logger="natsd"):
            c.add_replicated(cast(StreamStore, fake))
            sched.run_ready()
            sched.advance(REPLICA_SYNC)
            await settle(sched)
        assert "JetStream store sync failed: fsync failed (test)" in caplog.text
    finally:
        c.close()
