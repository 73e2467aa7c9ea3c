"""The server as a process: restarts with reconnecting clients, signals."""

from __future__ import annotations

import asyncio
import signal

import pytest
from ports import free_port

from .conftest import RawClient, wait_for


async def test_client_reconnects_after_kill_and_restart(spawn, connect) -> None:
    port = free_port()
    args = ["-a", "127.0.0.1", "-p", str(port)]
    first = await spawn(*args).wait_ready()
    assert first.port == port

    events: list[str] = []

    async def disconnected() -> None:
        events.append("disconnected")

    async def reconnected() -> None:
        events.append("reconnected")

    url = f"nats://127.0.0.1:{port}"
    nc = await connect(
        url,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.1,
        disconnected_cb=disconnected,
        reconnected_cb=reconnected,
        name="survivor",
    )
    got: list[bytes] = []

    async def cb(msg) -> None:
        got.append(msg.data)

    await nc.subscribe("restart.>", cb=cb)
    q = await nc.subscribe("restart.q", queue="grp")
    await nc.flush()
    await nc.publish("restart.q", b"before")
    await nc.flush()
    await wait_for(lambda: got == [b"before"], what=lambda: f"got {got}")
    assert (await q.next_msg(timeout=2)).data == b"before"

    first.signal(signal.SIGKILL)
    assert await first.wait_exit() == -signal.SIGKILL
    # Restart at once on the same port; connections of the dead process may still be in
    # TIME_WAIT, so this only works when the listener sets SO_REUSEADDR.
    second = await spawn(*args).wait_ready()
    assert second.port == port

    await wait_for(lambda: "reconnected" in events, timeout=10, what="reconnected_cb")
    assert events[0] == "disconnected"
    assert nc.is_connected
    assert nc.stats["reconnects"] >= 1

    # Subscriptions were replayed to the new server: a new client's publish reaches them.
    other = await connect(url)
    await nc.flush()
    await other.publish("restart.b", b"after")
    await other.publish("restart.q", b"queued")
    await other.flush()
    await wait_for(
        lambda: b"after" in got and b"queued" in got,
        what=lambda: f"messages after restart; got {got}",
    )
    assert (await q.next_msg(timeout=2)).data == b"queued"
    # And the reconnected client can publish.
    await nc.publish("restart.c", b"mine")
    await nc.flush()
    await wait_for(lambda: b"mine" in got)


async def test_sigterm_exits_cleanly(spawn, connect) -> None:
    port = free_port()
    sp = await spawn("-a", "127.0.0.1", "-p", str(port)).wait_ready()
    closed = asyncio.Event()

    async def on_closed() -> None:
        closed.set()

    nc = await connect(f"nats://127.0.0.1:{port}", closed_cb=on_closed)
    await nc.flush()
    raw = await RawClient.open(port)
    await raw.connect()
    sp.signal(signal.SIGTERM)
    assert await sp.wait_exit(timeout=10) == 0
    # Clients see their connection end.
    await raw.read_until_closed(timeout=5)
    await asyncio.wait_for(closed.wait(), 5)
    # The port is free again.
    with pytest.raises(OSError):
        await RawClient.open(port)


async def test_sigint_exits_cleanly(spawn) -> None:
    sp = await spawn("-a", "127.0.0.1", "-p", "-1").wait_ready()
    sp.signal(signal.SIGINT)
    assert await sp.wait_exit(timeout=10) == 0


async def test_restart_without_clients_rebinds_immediately(spawn, connect) -> None:
    port = free_port()
    for _ in range(3):
        sp = await spawn("-a", "127.0.0.1", "-p", str(port)).wait_ready()
        nc = await connect(f"nats://127.0.0.1:{port}")
        sub = await nc.subscribe("x")
        await nc.publish("x", b"1")
        assert (await sub.next_msg(timeout=2)).data == b"1"
        await nc.close()
        sp.signal(signal.SIGKILL)
        await sp.wait_exit()
