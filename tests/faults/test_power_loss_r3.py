"""Power loss under an R3 stream (issue 19's fault suite): three embedded servers, each on
its own fault-injecting file layer (``reliability/faultfs.py``), lose power one at a time or
all at once while publishers publish with ``Nats-Msg-Id`` (``faults/workload.py``).

A cut freezes the server's disk model at that instant (no later write or fsync counts), and
writes out what the power loss leaves: only what was fsynced, with directory entries never
fsynced reverted and, in half the cuts, a random prefix of the unsynced writes, the last one
possibly torn. The server is then dropped and started again from that image, with the same
name and ports.

Now and then every publisher is held idle and the stream is purged whole: everything acked
before is gone, everything acked after must stay. A purge replayed over later messages after
a restart (what the ``as_of`` of an API entry prevents) loses those; one not replayed, or
not durable, brings old messages back, which the checker reports as unexpected.

Pass: after every cut has healed, every message acknowledged since the last purge is on every
replica exactly once, in order, with the sequence its PubAck named, and the three stores are
identical (``faults/workload.check_stores``). A failure prints its seed;
``NATSD_FAULT_SEED`` replays the schedule.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster
from reliability.checker import History, Outcome
from reliability.faultfs import FaultFS

from faults.run import FIXED_SEED, fault_seed
from faults.workload import (
    STREAM,
    Publisher,
    api,
    check_stores,
    close_clients,
    create_stream,
    finish,
    quiet_error,
    wait_healthy,
)

NAMES = ("n1", "n2", "n3")
SYNC_TIME = 0.003  # an fsync on a worker thread takes this long, as on a real disk


class SlowSyncFS(FaultFS):
    """A disk whose fsync takes time when a worker thread makes it (the WAL's and the
    stores' group commits): the window in which a message sent before its sync completes
    could be acted on. Without it the model's instant fsync hides such a bug."""

    def _sync_fd(self, fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            time.sleep(SYNC_TIME)
        super()._sync_fd(fd)


class PowerCluster(EmbeddedJsCluster):
    """Three embedded servers on fixed ports, each on its own disk model; a server started
    after a cut runs from the image the cut left, in a directory of its own (a generation)."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(tmp, fixed_ports=True)
        self.gen = dict.fromkeys(NAMES, 0)
        self.fs: dict[str, SlowSyncFS] = {}
        self.cuts = 0

    def root(self, name: str) -> Path:
        return self.tmp / name / f"g{self.gen[name]}"

    def options(self, name: str) -> dict[str, Any]:
        root = self.root(name)
        root.mkdir(parents=True, exist_ok=True)
        self.fs[name] = SlowSyncFS(root)
        return {"jetstream": True, "store_dir": str(root), "file_io": self.fs[name]}

    async def cut(self, names: list[str], rng: random.Random) -> None:
        """Power loss on ``names`` at one instant; their disks become the images."""
        for name in names:
            fs = self.fs[name]
            self.gen[name] += 1
            with fs.lock:
                fs.crashed = True  # every later mutating operation raises Crash
                fs.materialize(self.root(name), rng, torn=rng.random() < 0.5)
        self.cuts += len(names)
        for name in names:
            srv = self.servers.pop(name)
            try:
                await asyncio.wait_for(srv.shutdown(), 10)
            except BaseException:  # Crash: its disk is gone, as intended
                pass

    async def states(self) -> list[dict[str, Any] | None]:
        out: list[dict[str, Any] | None] = []
        for name in NAMES:
            srv = self.servers.get(name)
            js = srv.jetstream if srv is not None else None
            ja = js.accounts.get("$G") if js is not None else None
            stream = ja.streams.get(STREAM) if ja is not None else None
            if stream is None:
                out.append(None)
                continue
            st = stream.store.state()
            out.append({"messages": st.msgs, "bytes": st.bytes, "first_seq": st.first_seq,
                        "last_seq": st.last_seq})  # fmt: skip
        return out

    def logs(self) -> str:
        return f"servers up: {sorted(self.servers)}, generations {self.gen}"


async def _run(tmp: Path, seed: int, cycles: int) -> list[str]:
    rng = random.Random(seed)
    notes: list[str] = []
    pc = PowerCluster(tmp)
    await asyncio.gather(*(pc.start(n) for n in NAMES))
    admin = await nats.connect(servers=pc.urls, max_reconnect_attempts=-1,
                               reconnect_time_wait=0.1, error_cb=quiet_error)  # fmt: skip
    gate = asyncio.Event()
    gate.set()
    history = History()
    acks: list[float] = []
    pubs: list[Publisher] = []
    tasks: list[asyncio.Task[None]] = []
    purges = 0
    try:
        await create_stream(admin, 3)
        for i in range(2):
            own = pc.urls[i]
            nc = await nats.connect(servers=[own, *[u for u in pc.urls if u != own]],
                                    max_reconnect_attempts=-1, reconnect_time_wait=0.1,
                                    dont_randomize=True, error_cb=quiet_error)  # fmt: skip
            pubs.append(Publisher(i, nc, history, acks, gate))
            tasks.append(asyncio.create_task(pubs[-1].run(random.Random(rng.random()))))
        for cycle in range(cycles):
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            if rng.random() < 0.3:
                gate.clear()
                deadline = time.monotonic() + 30
                while any(p.busy for p in pubs):
                    assert time.monotonic() < deadline, "publishers never idle"
                    await asyncio.sleep(0.01)
                await api(admin, f"$JS.API.STREAM.PURGE.{STREAM}", None, 30)
                history = History()  # what was acked before is gone
                for p in pubs:
                    p.history = history
                purges += 1
                gate.set()
                await asyncio.sleep(rng.uniform(0.1, 0.5))
            victims = list(NAMES) if rng.random() < 0.4 else [rng.choice(NAMES)]
            notes.append(f"cycle {cycle}: power loss on {victims}")
            await pc.cut(victims, rng)
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            await asyncio.gather(*(pc.start(n) for n in victims))
            before = sum(p.acked for p in pubs)
            await wait_healthy(admin, 3, pc.logs)
            deadline = time.monotonic() + 30
            while sum(p.acked for p in pubs) <= before:
                assert time.monotonic() < deadline, f"cycle {cycle}: no ack after the restart"
                await asyncio.sleep(0.05)
        await finish(pubs, tasks, admin, pc.states, pc.logs)
        notes.append(f"acked since the last purge {history.count(Outcome.ACKED)}, "
                     f"{purges} purges, {pc.cuts} servers cut")  # fmt: skip
    finally:
        await close_clients(pubs, tasks, admin)
        await pc.stop_all()
    n = check_stores(history, [(name, pc.root(name)) for name in NAMES])
    notes.append(f"replicas identical: {n} messages each")
    return notes


class _TextTracebacks(logging.Filter):
    """pytest keeps every log record of a test, and a record's ``exc_info`` (or an
    exception among its arguments) holds a traceback's frames: a cut server's failures
    (``Crash``) would keep its whole engine and disk model alive, gigabytes over a soak.
    The message and traceback are kept as text instead."""

    _fmt = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            record.exc_text = self._fmt.formatException(record.exc_info)
            record.exc_info = None
        if record.args:
            record.msg = record.getMessage()
            record.args = None
        return True


async def _checked(tmp: Path, cycles: int, seed: int | None = FIXED_SEED) -> None:
    seed = fault_seed(seed)
    loggers = [logging.getLogger(name) for name in ("natsd", "asyncio")]
    text = _TextTracebacks()
    for lg in loggers:
        lg.addFilter(text)
    try:
        notes = await _run(tmp, seed, cycles)
    except BaseException:
        print(f"POWER LOSS RUN FAILED: seed={seed} (replay: NATSD_FAULT_SEED={seed})")
        raise
    finally:
        for lg in loggers:
            lg.removeFilter(text)
    print("\n".join(notes))


@pytest.mark.timeout(300)
async def test_power_loss_r3(tmp_path: Path) -> None:
    await _checked(tmp_path, 12)


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
async def test_power_loss_r3_soak(tmp_path: Path) -> None:
    await _checked(tmp_path, int(os.environ.get("NATSD_FAULT_CYCLES", "500")), seed=None)
