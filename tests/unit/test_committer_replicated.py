"""The Committer's replicated-store path: a replicated stream's applied entries are written
out with the loop turn but fsynced on a timer, off the path of the next publish (the node
log already holds them durably on a majority). Driven on virtual time, over a real file
store whose system calls are counted."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from natsd.core.scheduler import VirtualScheduler
from natsd.jetstream.stream.commit import REPLICA_SYNC, Committer
from natsd.storage.fileio import FileIO
from natsd.storage.filestore import FileStore
from natsd.storage.store import StoreConfig


class CountingIO(FileIO):
    """Counts the bytes written and the fdatasyncs; can fail the fdatasyncs."""

    def __init__(self) -> None:
        self.written = 0
        self.syncs = 0
        self.fail_sync = False

    def write(self, fd: int, data: bytes) -> int:  # type: ignore[override]
        n = super().write(fd, data)
        self.written += n
        return n

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:  # type: ignore[override]
        n = super().pwrite(fd, data, offset)
        self.written += n
        return n

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        if self.fail_sync:
            raise OSError(5, "Input/output error (test)")
        self.syncs += 1
        super().fdatasync(fd)


def store_at(tmp_path: Path) -> tuple[FileStore, CountingIO]:
    io = CountingIO()
    store = FileStore(tmp_path / "s", StoreConfig(name="S", subjects=["s"]), io=io)
    store.flush()
    store.sync()
    io.written = io.syncs = 0
    return store, io


async def settle(sched: VirtualScheduler) -> None:
    """Let the worker thread's sync finish and its callback run."""
    for _ in range(100):
        await asyncio.sleep(0.005)
        sched.run_ready()


async def test_applied_entries_are_written_at_once_and_synced_on_the_timer(
    tmp_path: Path,
) -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    store, io = store_at(tmp_path)
    try:
        for seq in (1, 2, 3):
            store.store_raw("s", None, b"x" * 100, seq, seq)
            c.add_replicated(store)
        sched.run_ready()
        assert io.written >= 300 and io.syncs == 0  # one write-out per turn, no fsync
        before = io.written
        store.store_raw("s", None, b"y" * 100, 4, 4)
        c.add_replicated(store)
        sched.run_ready()
        assert io.written > before and io.syncs == 0
        sched.advance(REPLICA_SYNC * 0.9)
        await settle(sched)
        assert io.syncs == 0
        sched.advance(REPLICA_SYNC * 0.2)
        await settle(sched)
        assert io.syncs >= 1  # both turns' writes, fsynced together
        synced = io.syncs
        sched.advance(REPLICA_SYNC * 3)
        await settle(sched)
        assert io.syncs == synced  # nothing written since: no timer, no fsync
    finally:
        c.close()
        store.stop()


async def test_drain_syncs_what_waits_for_the_timer(tmp_path: Path) -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    store, io = store_at(tmp_path)
    try:
        store.store_raw("s", None, b"x", 1, 1)
        c.add_replicated(store)
        await c.drain()  # shutdown: written and synced before the stores close
        assert io.written > 0 and io.syncs >= 1
    finally:
        c.close()
        store.stop()


async def test_a_failed_timer_sync_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sched = VirtualScheduler()
    c = Committer(sched)
    store, io = store_at(tmp_path)
    io.fail_sync = True
    try:
        with caplog.at_level(logging.ERROR, logger="natsd"):
            store.store_raw("s", None, b"x", 1, 1)
            c.add_replicated(store)
            sched.run_ready()
            sched.advance(REPLICA_SYNC)
            await settle(sched)
        assert "JetStream store sync failed" in caplog.text
        assert "Input/output error (test)" in caplog.text
    finally:
        c.close()
