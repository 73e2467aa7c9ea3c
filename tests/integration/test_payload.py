"""Payload size limits: large messages up to max_payload, violations past it."""

from __future__ import annotations

import os

import nats.errors
import pytest

MB = 1024 * 1024


@pytest.mark.parametrize("size", [64 * 1024, MB - 1000, MB])
async def test_large_payload_round_trip(server, connect, size) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    assert pub_nc.max_payload == MB
    sub = await sub_nc.subscribe("big")
    await sub_nc.flush()
    data = os.urandom(size)
    await pub_nc.publish("big", data)
    await pub_nc.flush()
    msg = await sub.next_msg(timeout=5)
    assert len(msg.data) == size
    assert msg.data == data


async def test_several_large_messages_back_to_back(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    sub = await sub_nc.subscribe("big.many")
    await sub_nc.flush()
    blobs = [bytes([i]) * (MB - 100) for i in range(8)]
    for b in blobs:
        await pub_nc.publish("big.many", b)
    await pub_nc.flush()
    for b in blobs:
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b


async def test_client_refuses_payload_over_max(server, connect) -> None:
    nc = await connect(server.client_url)
    with pytest.raises(nats.errors.MaxPayloadError):
        await nc.publish("big", b"x" * (MB + 1))
    # Still connected and usable.
    await nc.flush()
    assert nc.is_connected


async def test_small_max_payload_in_info_and_enforced(make_server, connect, raw) -> None:
    srv = await make_server(max_payload=1024)
    nc = await connect(srv.client_url)
    assert nc.max_payload == 1024
    with pytest.raises(nats.errors.MaxPayloadError):
        await nc.publish("x", b"y" * 1025)

    sub = await nc.subscribe("limit")
    await nc.flush()

    ok = await raw(srv.port)
    assert ok.info["max_payload"] == 1024
    await ok.connect()
    await ok.send(b"PUB limit 1024\r\n" + b"a" * 1024 + b"\r\nPING\r\n")
    await ok.expect(b"PONG\r\n")
    assert len((await sub.next_msg(timeout=2)).data) == 1024

    bad = await raw(srv.port)
    await bad.connect()
    await bad.send(b"PUB limit 2000\r\n" + b"a" * 2000 + b"\r\n")
    data = await bad.read_until_closed(timeout=5)
    assert data.startswith(b"-ERR 'Maximum Payload Violation'\r\n")
    assert b"MSG" not in data

    # Nothing from the violator was delivered; other connections are unaffected.
    await ok.ping()
    await nc.publish("limit", b"after")
    await nc.flush()
    assert (await sub.next_msg(timeout=2)).data == b"after"


async def test_hpub_total_size_counts_against_max_payload(make_server, raw) -> None:
    srv = await make_server(max_payload=1024)
    c = await raw(srv.port)
    await c.connect()
    hdr = b"NATS/1.0\r\nK: " + b"v" * 600 + b"\r\n\r\n"
    body = b"b" * 600  # headers + body > 1024 although each alone fits
    total = len(hdr) + len(body)
    await c.send(b"HPUB h %d %d\r\n%s%s\r\n" % (len(hdr), total, hdr, body))
    data = await c.read_until_closed(timeout=5)
    assert data.startswith(b"-ERR 'Maximum Payload Violation'\r\n")


async def test_max_control_line_exceeded(server, raw) -> None:
    c = await raw(server.port)
    await c.connect()
    subject = "s." + "x" * 5000
    await c.send(f"SUB {subject} 1\r\n")
    data = await c.read_until_closed(timeout=5)
    assert data.startswith(b"-ERR 'maximum control line exceeded'\r\n")
