"""Request/reply, headers and no-responders through nats-py."""

from __future__ import annotations

import asyncio
import time

import nats.errors
import pytest

from .conftest import wait_for


async def test_request_reply(server, connect) -> None:
    svc = await connect(server.client_url)
    cli = await connect(server.client_url)

    async def handler(msg) -> None:
        await msg.respond(b"echo:" + msg.data)

    await svc.subscribe("svc.echo", cb=handler)
    await svc.flush()
    for i in range(20):
        resp = await cli.request("svc.echo", f"req-{i}".encode(), timeout=2)
        assert resp.data == f"echo:req-{i}".encode()


async def test_concurrent_requests_are_matched_to_their_replies(server, connect) -> None:
    svc = await connect(server.client_url)
    cli = await connect(server.client_url)

    tasks: list[asyncio.Task] = []

    async def reply_later(msg) -> None:
        n = int(msg.data)
        await asyncio.sleep((50 - n) * 0.002)
        await msg.respond(str(n * n).encode())

    async def handler(msg) -> None:
        # Reply out of order: later requests are answered first.
        tasks.append(asyncio.create_task(reply_later(msg)))

    await svc.subscribe("svc.square", cb=handler, pending_msgs_limit=1000)
    await svc.flush()
    resps = await asyncio.gather(
        *(cli.request("svc.square", str(i).encode(), timeout=5) for i in range(50))
    )
    assert [int(r.data) for r in resps] == [i * i for i in range(50)]


async def test_request_to_queue_group_gets_one_reply(server, connect) -> None:
    svcs = [await connect(server.client_url) for _ in range(3)]
    cli = await connect(server.client_url)
    answered: list[int] = []
    for i, nc in enumerate(svcs):

        async def handler(msg, i=i) -> None:
            answered.append(i)
            await msg.respond(str(i).encode())

        await nc.subscribe("svc.q", queue="workers", cb=handler)
        await nc.flush()
    for _ in range(10):
        resp = await cli.request("svc.q", b"?", timeout=2)
        assert int(resp.data) in (0, 1, 2)
    await asyncio.sleep(0.05)
    assert len(answered) == 10


async def test_headers_round_trip(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    sub = await sub_nc.subscribe("hdr.test")
    await sub_nc.flush()
    headers = {"X-Trace": "abc-123", "Content-Type": "application/json", "Empty-Ish": "-"}
    await pub_nc.publish("hdr.test", b'{"a":1}', headers=headers)
    await pub_nc.publish("hdr.test", b"", headers={"Only": "headers"})
    await pub_nc.flush()
    m1 = await sub.next_msg(timeout=2)
    m2 = await sub.next_msg(timeout=2)
    assert m1.data == b'{"a":1}'
    assert m1.headers == headers
    assert m2.data == b""
    assert m2.headers == {"Only": "headers"}


async def test_request_and_reply_with_headers(server, connect) -> None:
    svc = await connect(server.client_url)
    cli = await connect(server.client_url)

    async def handler(msg) -> None:
        await svc.publish(
            msg.reply,
            msg.data.upper(),
            headers={"Handled-By": "svc", "Echo": msg.headers["Req-Id"]},
        )

    await svc.subscribe("svc.hdr", cb=handler)
    await svc.flush()
    resp = await cli.request("svc.hdr", b"hello", timeout=2, headers={"Req-Id": "42"})
    assert resp.data == b"HELLO"
    assert resp.headers == {"Handled-By": "svc", "Echo": "42"}


async def test_multi_value_headers_relayed_verbatim(server, connect, raw) -> None:
    """A header block with a repeated key reaches subscribers byte for byte."""
    sub_nc = await connect(server.client_url)
    sub = await sub_nc.subscribe("hdr.multi")
    await sub_nc.flush()
    raw_sub = await raw(server.port)
    await raw_sub.connect()
    await raw_sub.send("SUB hdr.multi 9\r\nPING\r\n")
    await raw_sub.expect(b"PONG\r\n")

    hdr = b"NATS/1.0\r\nX-Multi: one\r\nX-Multi: two\r\nX-Other: v\r\n\r\n"
    payload = b"body"
    pub = await raw(server.port)
    await pub.connect()
    await pub.send(
        b"HPUB hdr.multi %d %d\r\n%s%s\r\nPING\r\n"
        % (len(hdr), len(hdr) + len(payload), hdr, payload)
    )
    await pub.expect(b"PONG\r\n")

    frame = await raw_sub.expect(payload + b"\r\n")
    assert frame == b"HMSG hdr.multi 9 %d %d\r\n%s%s\r\n" % (
        len(hdr),
        len(hdr) + len(payload),
        hdr,
        payload,
    )
    msg = await sub.next_msg(timeout=2)
    assert msg.data == payload
    # nats-py keeps one value per key in its dict; both keys arrive.
    assert msg.headers is not None
    assert msg.headers["X-Multi"] in ("one", "two")
    assert msg.headers["X-Other"] == "v"


async def test_headers_stripped_for_clients_without_headers(server, raw) -> None:
    """A subscriber that did not negotiate headers gets a plain MSG with the payload only."""
    old = await raw(server.port)
    await old.connect(headers=False, no_responders=False)
    await old.send("SUB h.old 1\r\nPING\r\n")
    await old.expect(b"PONG\r\n")
    pub = await raw(server.port)
    await pub.connect()
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    await pub.send(b"HPUB h.old %d %d\r\n%sdata\r\nPING\r\n" % (len(hdr), len(hdr) + 4, hdr))
    await pub.expect(b"PONG\r\n")
    assert await old.expect(b"data\r\n") == b"MSG h.old 1 4\r\ndata\r\n"


async def test_no_responders(server, connect) -> None:
    cli = await connect(server.client_url)
    t0 = time.monotonic()
    with pytest.raises(nats.errors.NoRespondersError):
        await cli.request("nobody.home", b"?", timeout=5)
    # Immediate, not the 5 s timeout (the margin is for a loaded machine).
    assert time.monotonic() - t0 < 2.5, "no-responders must be immediate, not a timeout"
    # The connection is fine afterwards.
    sub = await cli.subscribe("someone.home")
    await cli.flush()
    await cli.publish("someone.home", b"x")
    assert (await sub.next_msg(timeout=2)).data == b"x"


async def test_no_responders_raw_status_frame(server, raw) -> None:
    c = await raw(server.port)
    await c.connect()
    # The first request's reply subject has no subscription of this client: nothing comes back.
    await c.send(
        "SUB _INBOX.r1 5\r\nPUB nobody r1.x 0\r\n\r\nPUB nobody _INBOX.r1 0\r\n\r\nPING\r\n"
    )
    data = await c.expect(b"PONG\r\n")
    hdr = b"NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n"
    assert data == b"HMSG _INBOX.r1 5 %d %d\r\n%s\r\nPONG\r\n" % (len(hdr), len(hdr), hdr)


async def test_no_status_without_no_responders_option(server, raw) -> None:
    c = await raw(server.port)
    await c.connect(no_responders=False)
    await c.send("SUB _INBOX.r1 5\r\nPUB nobody _INBOX.r1 0\r\n\r\nPING\r\n")
    assert await c.expect(b"PONG\r\n") == b"PONG\r\n"


async def test_no_responders_requires_headers(server, raw) -> None:
    c = await raw(server.port)
    await c.send('CONNECT {"verbose":false,"headers":false,"no_responders":true}\r\nPING\r\n')
    data = await c.read_until_closed(timeout=1)
    assert data == b"-ERR 'no responders requires headers support'\r\n"


async def test_request_timeout_when_responder_is_silent(server, connect) -> None:
    svc = await connect(server.client_url)
    cli = await connect(server.client_url)
    seen: list[bytes] = []

    async def handler(msg) -> None:
        seen.append(msg.data)

    await svc.subscribe("svc.silent", cb=handler)
    await svc.flush()
    with pytest.raises(nats.errors.TimeoutError):
        await cli.request("svc.silent", b"anyone?", timeout=0.3)
    await wait_for(lambda: seen == [b"anyone?"])
