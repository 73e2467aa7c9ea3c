"""Consumer state survives restarts (file streams), through nats-py over real sockets.

The server keeps each consumer of a file stream in ``<stream>/obs/<consumer>/`` (config in
``meta.json``, delivered / ack floor / pending / redelivered in ``state.json``). These tests
stop and restart a server on the same store directory, cleanly and with SIGKILL, and check
that consumers come back with their config and where they left off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType
from nats.js.errors import NotFoundError

import natsd

from .conftest import REAL, ServerProcess, only_natsd, wait_for

pytestmark = [pytest.mark.timeout(60), only_natsd]


@contextlib.asynccontextmanager
async def server(store: Path) -> AsyncIterator[tuple[natsd.Server, Any, Any]]:
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(store), http_port=-1
    ) as srv:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        try:
            yield srv, nc, nc.jetstream()
        finally:
            await nc.close()


async def test_durable_pull_state_survives_restart(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, _nc, js):
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(10):
            await js.publish("s.a", b"m%d" % i)
        psub = await js.pull_subscribe("s.a", "D", config=ConsumerConfig(ack_wait=0.5))
        msgs = await psub.fetch(5, timeout=2)
        for m in msgs[:3]:
            await m.ack_sync()
        before = await js.consumer_info("S", "D")
        assert before.num_ack_pending == 2
    async with server(tmp_path) as (_srv, _nc, js):
        ci = await js.consumer_info("S", "D")
        assert ci.config.ack_wait == 0.5
        assert ci.config.filter_subject == "s.a"
        assert (ci.delivered.consumer_seq, ci.delivered.stream_seq) == (5, 5)
        assert (ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq) == (3, 3)
        assert ci.num_ack_pending == 2
        assert ci.num_pending == 5
        psub = await js.pull_subscribe_bind("D", "S")
        got: list[Any] = []
        while len(got) < 7:
            got += await psub.fetch(7 - len(got), timeout=3)
        # The two unacked messages come back (after ack_wait) and the rest continues.
        by_data = {m.data: m.metadata.num_delivered for m in got}
        assert by_data[b"m3"] == 2 and by_data[b"m4"] == 2
        assert sorted(by_data) == [b"m%d" % i for i in range(3, 10)]
        for m in got:
            await m.ack_sync()
        ci = await js.consumer_info("S", "D")
        assert ci.num_ack_pending == 0 and ci.num_pending == 0
        assert ci.ack_floor.stream_seq == 10


async def test_push_consumer_and_config_update_survive_restart(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, nc, js):
        await js.add_stream(name="P", subjects=["p.>"])
        for i in range(4):
            await js.publish("p.x", b"%d" % i)
        sub = await js.subscribe(
            "p.x", durable="PUSH", manual_ack=True, config=ConsumerConfig(ack_wait=0.5)
        )
        for _ in range(2):
            m = await sub.next_msg(2)
            await m.ack_sync()
        await sub.unsubscribe()
        info = await js.consumer_info("P", "PUSH")
        cfg = info.config
        cfg.description = "updated"
        await js.add_consumer("P", cfg)
        deliver = cfg.deliver_subject
    async with server(tmp_path) as (_srv, nc, js):
        ci = await js.consumer_info("P", "PUSH")
        assert ci.config.description == "updated"
        assert ci.config.deliver_subject == deliver
        assert ci.ack_floor.stream_seq == 2
        sub = await nc.subscribe(deliver)
        seen = []
        for _ in range(2):
            m = await sub.next_msg(3)
            seen.append((m.data, m.reply.split(".")[4]))
            await m.respond(b"+ACK")
        # Delivered but unacked before the restart: redelivered once ack_wait is over.
        assert seen == [(b"2", "2"), (b"3", "2")]


async def test_deleted_and_memory_consumers_do_not_come_back(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, _nc, js):
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_stream(name="M", subjects=["m.>"], storage=StorageType.MEMORY)
        await js.add_consumer("S", ConsumerConfig(durable_name="KEEP"))
        await js.add_consumer("S", ConsumerConfig(durable_name="GONE"))
        await js.add_consumer("S", ConsumerConfig(durable_name="MEM", mem_storage=True))
        await js.add_consumer("M", ConsumerConfig(durable_name="INMEM"))
        await js.delete_consumer("S", "GONE")
    async with server(tmp_path) as (_srv, _nc, js):
        names = [c.name for c in await js.consumers_info("S")]
        assert names == ["KEEP"]
        with pytest.raises(NotFoundError):
            await js.stream_info("M")
        info = await js.account_info()
        assert info.consumers == 1


async def test_restored_ephemeral_expires(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, _nc, js):
        await js.add_stream(name="S", subjects=["s.>"])
        await js.add_consumer(
            "S", ConsumerConfig(name="EPH", inactive_threshold=0.3, ack_policy=AckPolicy.EXPLICIT)
        )
        await js.add_consumer("S", ConsumerConfig(durable_name="DUR"))
    async with server(tmp_path) as (_srv, _nc, js):
        names = sorted(c.name for c in await js.consumers_info("S"))
        assert names == ["DUR", "EPH"]

        async def only_durable_left() -> bool:
            return [c.name for c in await js.consumers_info("S")] == ["DUR"]

        await wait_for(only_durable_left, timeout=5, what="the ephemeral consumer to expire")
    # Its files went with it.
    assert not (tmp_path / "jetstream" / "$G" / "streams" / "S" / "obs" / "EPH").exists()


async def test_deliver_new_start_is_remembered(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, _nc, js):
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(3):
            await js.publish("s.a", b"old%d" % i)
        await js.add_consumer(
            "S", ConsumerConfig(durable_name="NEW", deliver_policy=DeliverPolicy.NEW)
        )
    async with server(tmp_path) as (_srv, _nc, js):
        await js.publish("s.a", b"fresh")
        psub = await js.pull_subscribe_bind("NEW", "S")
        msgs = await psub.fetch(5, timeout=1)
        assert [m.data for m in msgs] == [b"fresh"]


# --------------------------------------------------------------------------- crash
async def _start(spawn: Callable[..., ServerProcess], store: str) -> ServerProcess:
    sp = spawn("-js", "-sd", store, "-a", "127.0.0.1", "-p", "-1")
    return await sp.wait_ready()


@pytest.mark.skipif(REAL, reason="natsd process")
async def test_acks_survive_sigkill(spawn: Callable[..., ServerProcess], tmp_dir: str) -> None:
    store = os.path.join(tmp_dir, "store")
    sp = await _start(spawn, store)
    nc = await nats.connect(f"nats://127.0.0.1:{sp.port}", allow_reconnect=False)
    js = nc.jetstream()
    await js.add_stream(name="K", subjects=["k.>"])
    for i in range(6):
        await js.publish("k.a", b"%d" % i)
    psub = await js.pull_subscribe("k.a", "D", config=ConsumerConfig(ack_wait=0.3))
    msgs = await psub.fetch(4, timeout=2)
    for m in msgs[:3]:
        # An ack-sync is answered only once the state recording it is on disk, so no
        # waiting for the periodic state write: the kill comes right after the replies.
        await m.ack_sync()
    await nc.close()
    assert sp.proc is not None
    sp.proc.send_signal(signal.SIGKILL)
    await sp.wait_exit()

    sp2 = await _start(spawn, store)
    nc = await nats.connect(f"nats://127.0.0.1:{sp2.port}", allow_reconnect=False)
    js = nc.jetstream()
    ci = await js.consumer_info("K", "D")
    assert ci.ack_floor.stream_seq == 3
    assert ci.delivered.stream_seq == 4
    assert ci.num_ack_pending == 1
    psub = await js.pull_subscribe_bind("D", "K")
    got: list[Any] = []
    while len(got) < 3:
        got += await psub.fetch(3 - len(got), timeout=3)
    assert sorted(m.data for m in got) == [b"3", b"4", b"5"]
    await nc.close()


async def test_catalog_layout(tmp_path: Path) -> None:
    async with server(tmp_path) as (_srv, _nc, js):
        await js.add_stream(name="S", subjects=["s.>"])
        await js.publish("s.a", b"x")
        psub = await js.pull_subscribe("s.a", "D")
        (await psub.fetch(1, timeout=1))[0]
        await asyncio.sleep(0.3)
        cdir = tmp_path / "jetstream" / "$G" / "streams" / "S" / "obs" / "D"
        assert (cdir / "meta.json").is_file()
        assert (cdir / "state.json").is_file()
