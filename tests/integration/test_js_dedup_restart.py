"""The Nats-Msg-Id duplicate window survives a restart, as in nats-server.

A publisher that retries a message after the server came back (it never saw the PubAck, or
it cannot tell) must be answered ``"duplicate": true`` with the first copy's sequence while
the retry is within the stream's ``duplicate_window``; exactly-once publishing (and the Spark
sink's exactly-once writes) rest on it. nats-server rebuilds the window on recovery from the
stored messages whose time is inside the window (``stream.go`` ``rebuildDedupe``), and so
does natsd. The scenarios run against natsd and nats-server, both as real processes stopped
cleanly (SIGTERM) or killed (SIGKILL) and restarted on the same port and store, and compare
the PubAcks.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StorageType
from nats.js.errors import NotFoundError

import natsd

from .restarts import Restartable, both, connect, wait_reconnected

pytestmark = pytest.mark.timeout(120)

#: The short window of the "older than the window" stream, in seconds.
SHORT = 1.0


async def _pub(nc: Any, subject: str, data: bytes, **headers: str) -> dict[str, Any]:
    msg = await nc.request(subject, data, timeout=5, headers=headers or None)
    return dict(json.loads(msg.data))


async def _dedup_scenario(srv: Restartable, sig: int) -> dict[str, Any]:
    nc = await connect(srv)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="S", subjects=["d.>"], duplicate_window=60)
        await js.add_stream(name="W", subjects=["w.>"], duplicate_window=SHORT)
        await js.add_stream(
            name="M", subjects=["m.>"], duplicate_window=60, storage=StorageType.MEMORY
        )
        before = [await _pub(nc, "w.x", b"old", **{"Nats-Msg-Id": "w1"})]
        w_acked = time.monotonic()
        before += [
            await _pub(nc, "m.x", b"mem", **{"Nats-Msg-Id": "m1"}),
            await _pub(nc, "d.a", b"a", **{"Nats-Msg-Id": "a"}),
            await _pub(nc, "d.b", b"b", **{"Nats-Msg-Id": "b"}),
            await _pub(nc, "d.a", b"a", **{"Nats-Msg-Id": "a"}),
        ]
        await srv.restart(sig)
        await wait_reconnected(nc)
        after = [
            # The id of the stream's last message is back too.
            await _pub(nc, "d.c", b"c", **{"Nats-Expected-Last-Msg-Id": "b"}),
            await _pub(nc, "d.a", b"a", **{"Nats-Msg-Id": "a"}),
            await _pub(nc, "d.b", b"b", **{"Nats-Msg-Id": "b"}),
            await _pub(nc, "d.d", b"d", **{"Nats-Msg-Id": "d"}),
        ]
        # Stored before the restart and now older than W's window: not a duplicate.
        await asyncio.sleep(max(0.0, w_acked + SHORT + 0.2 - time.monotonic()))
        after.append(await _pub(nc, "w.x", b"old", **{"Nats-Msg-Id": "w1"}))
        counts = {name: (await js.stream_info(name)).state.messages for name in ("S", "W")}
        # A memory stream is not kept across a restart at all (nats-server neither), so
        # there is no window to rebuild for it: the stream itself is gone.
        try:
            await js.stream_info("M")
            memory = "kept"
        except NotFoundError:
            memory = "gone"
        return {"before": before, "after": after, "counts": counts, "memory": memory}
    finally:
        await nc.close()


EXPECTED = {
    "before": [
        {"stream": "W", "seq": 1},
        {"stream": "M", "seq": 1},
        {"stream": "S", "seq": 1},
        {"stream": "S", "seq": 2},
        {"stream": "S", "seq": 1, "duplicate": True},
    ],
    "after": [
        {"stream": "S", "seq": 3},
        {"stream": "S", "seq": 1, "duplicate": True},
        {"stream": "S", "seq": 2, "duplicate": True},
        {"stream": "S", "seq": 4},
        {"stream": "W", "seq": 2},
    ],
    "counts": {"S": 4, "W": 2},
    "memory": "gone",
}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_duplicate_window_survives_restart(sig: int) -> None:
    got = await both(lambda srv: _dedup_scenario(srv, sig))
    assert got["nats-server"] == EXPECTED
    assert got["natsd"] == EXPECTED


async def test_rebuild_reads_only_the_window(tmp_path: Path) -> None:
    """natsd finds the window's first message by time instead of reading the stream, and
    the rebuilt entries carry the stored timestamps, so they expire when they would have."""
    store = str(tmp_path)
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=store) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s"], duplicate_window=120)
        for i in range(1500):
            await nc.publish("s", b"x", headers={"Nats-Msg-Id": f"old{i}"})
        for i in range(5):
            await js.publish("s", b"y", headers={"Nats-Msg-Id": f"new{i}"})
        await nc.close()
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=store) as srv:
        stream = srv.jetstream.accounts["$G"].streams["S"]
        # The restore rebuilt all 1505 ids (all within two minutes).
        assert len(stream._dedup) == 1505
        first_new = stream.store.load_msg(1501)
        assert first_new is not None
        window = stream.cfg.duplicate_window
        # A clock at which only the last five messages are within the window.
        now = first_new.ts + window - 1
        stream._dedup.clear()
        assert stream.rebuild_dedupe(now) == 5
        stored = {f"new{i}": stream.store.load_msg(1501 + i) for i in range(5)}
        assert dict(stream._dedup) == {k: (m.seq, m.ts) for k, m in stored.items() if m}
