"""Server-enforced limits: slow consumers, stale connections, auth timeout, max connections."""

from __future__ import annotations

import asyncio
import time

from .conftest import RawClient, get_json, wait_for


async def test_slow_consumer_is_cut_off(make_server, connect, raw) -> None:
    # nats-server insists on max_payload <= max_pending.
    srv = await make_server(max_pending=256 * 1024, max_payload=65536)
    # A subscriber that never reads (until it was cut off).
    slow = await raw(srv.port)
    await slow.connect()
    await slow.send("SUB firehose 1\r\nPING\r\n")
    await slow.expect(b"PONG\r\n")

    healthy = await connect(srv.client_url, name="healthy")
    healthy_sub = await healthy.subscribe("other")
    await healthy.flush()
    pub = await connect(srv.client_url, name="publisher")

    chunk = b"x" * 65536
    sent = 0
    detected = False
    # Kernel buffers on loopback can absorb several MB; publish until the server gives up.
    while sent < 96 * 1024 * 1024:
        for _ in range(32):
            await pub.publish("firehose", chunk)
        sent += 32 * len(chunk)
        await pub.flush(timeout=10)
        varz = await get_json(srv.monitor_url + "/varz")
        if varz["slow_consumers"] >= 1:
            detected = True
            break
    assert detected, f"no slow consumer after publishing {sent} bytes"

    # The slow subscriber's connection is gone: reading drains what was buffered, then EOF.
    await slow.read_until_closed(timeout=10, keep=4096)
    assert slow.total_read < sent

    # Everyone else carries on.
    assert pub.is_connected and healthy.is_connected
    await pub.publish("other", b"still here")
    await pub.flush()
    assert (await healthy_sub.next_msg(timeout=2)).data == b"still here"
    connz = await get_json(srv.monitor_url + "/connz")
    names = sorted(c.get("name", "") for c in connz["connections"])
    assert names == ["healthy", "publisher"]


async def test_stale_connection(make_server, raw) -> None:
    srv = await make_server(ping_interval=0.2, ping_max=2)
    c = await raw(srv.port)
    await c.connect()
    t0 = time.monotonic()
    data = await c.read_until_closed(timeout=5)
    elapsed = time.monotonic() - t0
    assert data.endswith(b"-ERR 'Stale Connection'\r\n"), data
    assert data.count(b"PING\r\n") == 2, data
    # interval * (max + 1) = 0.6 s.
    assert 0.35 <= elapsed <= 2.0, elapsed
    varz = await get_json(srv.monitor_url + "/varz")
    assert varz["stale_connections"] >= 1


async def test_client_answering_pings_stays_connected(make_server, connect, raw) -> None:
    srv = await make_server(ping_interval=0.2, ping_max=2)
    nc = await connect(srv.client_url)
    c = await raw(srv.port)
    await c.connect()
    deadline = time.monotonic() + 1.2
    pings = 0
    while time.monotonic() < deadline:
        try:
            await c.expect(b"PING\r\n", timeout=0.5)
        except TimeoutError:
            continue
        pings += 1
        await c.send("PONG\r\n")
    assert pings >= 3
    await c.ping()
    assert nc.is_connected
    sub = await nc.subscribe("alive")
    await nc.publish("alive", b"1")
    assert (await sub.next_msg(timeout=2)).data == b"1"


async def test_auth_timeout(make_server, raw) -> None:
    srv = await make_server(users=[{"user": "u", "password": "p"}], auth_timeout=0.5)
    c = await raw(srv.port)
    t0 = time.monotonic()
    data = await c.read_until_closed(timeout=5)
    elapsed = time.monotonic() - t0
    assert data == b"-ERR 'Authentication Timeout'\r\n"
    assert 0.3 <= elapsed <= 2.5, elapsed


async def test_auth_timeout_not_hit_after_connect(make_server, raw) -> None:
    srv = await make_server(users=[{"user": "u", "password": "p"}], auth_timeout=0.3)
    c = await raw(srv.port)
    await c.connect(user="u", **{"pass": "p"})
    await asyncio.sleep(0.6)
    await c.ping()


async def test_max_connections(make_server, raw, connect) -> None:
    srv = await make_server(max_connections=2)
    c1 = await raw(srv.port)
    c2 = await raw(srv.port)
    await c1.connect()
    await c2.connect()
    c3 = await raw(srv.port, read_info=False)
    data = await c3.read_until_closed(timeout=5)
    assert data.endswith(b"-ERR 'maximum connections exceeded'\r\n"), data
    # Existing connections are unaffected, and a freed slot can be reused.
    await c1.ping()
    c2.close()

    async def third_ok() -> bool:
        c = await RawClient.open(srv.port, read_info=False)
        try:
            line = await c.readline()
            if not line.startswith(b"INFO"):
                return False
            await c.connect()
            return True
        except (ConnectionError, TimeoutError):
            return False
        finally:
            c.close()

    await wait_for(third_ok, timeout=5, what="a connection slot to free up")
    varz = await get_json(srv.monitor_url + "/varz")
    assert varz["max_connections"] == 2
