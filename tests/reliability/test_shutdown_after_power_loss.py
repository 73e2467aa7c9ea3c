"""A server whose disk lost power still stops completely: its fsync worker thread ends, its
monitor's listener closes, and nothing keeps it alive. ``Server.shutdown`` used to stop at
the first step that failed (a store's flush raising), leaving the JetStream committer's
thread running and holding the engine, its stores and their disk model: an embedded test
that cut the power of a server 100 times (the R3 power-loss soak) kept 100 servers alive and
ran out of memory."""

from __future__ import annotations

import gc
import socket
import threading
import weakref
from pathlib import Path

import nats
import pytest

from natsd.server import Server
from reliability.faultfs import Crash, FaultFS


def _fsync_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("natsd-fsync")}


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_a_server_stops_whole_after_its_disk_lost_power(tmp_path: Path) -> None:
    before = _fsync_threads()
    fs = FaultFS(tmp_path)
    srv = Server(host="127.0.0.1", port=0, http_port=-1, jetstream=True,
                 store_dir=str(tmp_path), file_io=fs)  # fmt: skip
    await srv.start()
    monitor_port = srv.monitor_port
    nc = await nats.connect(srv.client_url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s"])
        await js.publish("s", b"first")
        # publishes nobody waits for are synced on the committer's worker thread
        for i in range(200):
            await nc.publish("s", b"m%d" % i)
        await nc.flush()
        await js.publish("s", b"last")
    finally:
        await nc.close()
    ours = _fsync_threads() - before
    assert ours, "the committer's worker thread never started: the test proves nothing"
    with fs.lock:
        fs.crashed = True  # every later write, sync or read raises Crash
    with pytest.raises(Crash):
        await srv.shutdown()  # the first failure is still reported
    for t in ours:
        t.join(5)
    assert not any(t.is_alive() for t in ours), "the fsync worker outlived its server"
    assert not _listening(monitor_port), "the monitor still listens"
    ref = weakref.ref(srv)
    del srv
    gc.collect()
    left = ref()
    assert left is None, f"the stopped server is still referenced: {gc.get_referrers(left)!r:.500}"
