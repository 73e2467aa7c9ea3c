"""The same nats-py coroutines run against nats-server and natsd; their
returned values (or captured errors) must be equal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .conftest import MAX_PAYLOAD
from .harness import ClientError, ServerPair, run_client, run_client_both

pytestmark = pytest.mark.differential


async def request_reply(nc: Any) -> Any:
    async def handler(msg: Any) -> None:
        await msg.respond(b"re:" + msg.data)

    await nc.subscribe("svc.echo", cb=handler)
    replies = [(await nc.request("svc.echo", b"%d" % i, timeout=2)).data for i in range(5)]
    return replies


async def headers_round_trip(nc: Any) -> Any:
    sub = await nc.subscribe("hdr")
    await nc.publish("hdr", b"body", headers={"X-One": "1", "X-Two": "two words"})
    msg = await sub.next_msg(timeout=2)
    return msg.subject, msg.data, dict(msg.headers or {})


async def no_responders(nc: Any) -> Any:
    try:
        await nc.request("nobody.home", b"x", timeout=2)
    except Exception as e:
        return type(e).__name__
    return "no error"


async def queue_group_total(nc: Any) -> Any:
    counts = [0, 0]

    def make(i: int) -> Any:
        async def cb(msg: Any) -> None:
            counts[i] += 1

        return cb

    await nc.subscribe("work", queue="q", cb=make(0))
    await nc.subscribe("work", queue="q", cb=make(1))
    await nc.flush()
    for _ in range(50):
        await nc.publish("work", b"job")
    await nc.flush()
    for _ in range(100):
        if sum(counts) == 50:
            break
        await asyncio.sleep(0.01)
    return sum(counts)


async def auto_unsubscribe(nc: Any) -> Any:
    got: list[bytes] = []

    async def cb(msg: Any) -> None:
        got.append(msg.data)

    sub = await nc.subscribe("limited", cb=cb)
    await sub.unsubscribe(limit=3)
    for i in range(6):
        await nc.publish("limited", b"%d" % i)
    await nc.flush()
    await asyncio.sleep(0.05)
    return got


async def wildcard_subjects(nc: Any) -> Any:
    got: dict[str, list[str]] = {"a.*.c": [], "a.>": []}

    def make(key: str) -> Any:
        async def cb(msg: Any) -> None:
            got[key].append(msg.subject)

        return cb

    for pattern in got:
        await nc.subscribe(pattern, cb=make(pattern))
    for s in ("a.b.c", "a.x.c", "a.b", "a.b.c.d", "b.b.c"):
        await nc.publish(s, s.encode())
    await nc.flush()
    await asyncio.sleep(0.05)
    return {k: sorted(v) for k, v in got.items()}


async def server_info_fields(nc: Any) -> Any:
    info = nc._server_info
    return {k: info.get(k) for k in ("proto", "headers", "max_payload", "auth_required")}


async def drain(nc: Any) -> Any:
    got: list[bytes] = []

    async def cb(msg: Any) -> None:
        got.append(msg.data)

    await nc.subscribe("drain.me", cb=cb)
    for i in range(10):
        await nc.publish("drain.me", b"%d" % i)
    await nc.drain()
    return got


async def test_request_reply(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, request_reply)
    assert ref == [b"re:%d" % i for i in range(5)]
    assert impl == ref


async def test_headers_round_trip(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, headers_round_trip)
    assert ref[1] == b"body"
    assert impl == ref


async def test_no_responders(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, no_responders)
    assert ref == "NoRespondersError"
    assert impl == ref


async def test_queue_group_delivers_once(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, queue_group_total)
    assert ref == 50
    assert impl == ref


async def test_auto_unsubscribe(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, auto_unsubscribe)
    assert ref == [b"0", b"1", b"2"]
    assert impl == ref


async def test_wildcards(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, wildcard_subjects)
    assert ref == {"a.*.c": ["a.b.c", "a.x.c"], "a.>": ["a.b", "a.b.c", "a.b.c.d", "a.x.c"]}
    assert impl == ref


async def test_server_info(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, server_info_fields)
    assert impl == ref


async def test_server_info_max_payload(small_payload_pair: ServerPair) -> None:
    ref, impl = await run_client_both(small_payload_pair, server_info_fields)
    assert ref["max_payload"] == MAX_PAYLOAD
    assert impl == ref


async def test_payload_too_big_client_side(small_payload_pair: ServerPair) -> None:
    async def big(nc: Any) -> Any:
        await nc.publish("x", b"y" * (MAX_PAYLOAD + 1))

    ref, impl = await run_client_both(small_payload_pair, big)
    assert isinstance(ref, ClientError)
    assert impl == ref


async def test_drain(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, drain)
    assert impl == ref


@pytest.mark.parametrize(
    ("opts", "ok"),
    [
        ({"user": "a", "password": "b"}, True),
        ({"user": "a", "password": "wrong"}, False),
        ({}, False),
    ],
    ids=["right", "wrong", "missing"],
)
async def test_user_pass_client(user_pass_pair: ServerPair, opts: dict[str, Any], ok: bool) -> None:
    async def ping(nc: Any) -> Any:
        await nc.flush(timeout=2)
        return "connected"

    ref, impl = await run_client_both(user_pass_pair, ping, **opts)
    assert (ref == "connected") is ok
    assert impl == ref


@pytest.mark.parametrize(("token", "ok"), [("s3cr3t", True), ("bad", False)])
async def test_token_client(token_pair: ServerPair, token: str, ok: bool) -> None:
    async def ping(nc: Any) -> Any:
        await nc.flush(timeout=2)
        return "connected"

    ref, impl = await run_client_both(token_pair, ping, token=token)
    assert (ref == "connected") is ok
    assert impl == ref


async def test_permission_violation_async_error(permissions_pair: ServerPair) -> None:
    """Publish to a denied subject: the client gets an async error and the
    connection stays usable."""

    async def scenario(nc: Any) -> Any:
        errors = nc._test_errors  # filled by error_cb below
        sub = await nc.subscribe("ok.x")
        await nc.publish("secret.x", b"x")
        await nc.publish("ok.x", b"fine")
        msg = await sub.next_msg(timeout=2)
        await nc.flush()
        await asyncio.sleep(0.05)
        return msg.data, [str(e) for e in errors], nc.is_connected

    results = []
    for server in permissions_pair:
        errors: list[Exception] = []

        async def error_cb(e: Exception, errors: list[Exception] = errors) -> None:
            errors.append(e)

        async def wrapped(nc: Any, errors: list[Exception] = errors) -> Any:
            nc._test_errors = errors
            return await scenario(nc)

        results.append(
            await run_client(server, wrapped, user="limited", password="pw", error_cb=error_cb)
        )
    ref, impl = results
    assert ref[0] == b"fine" and ref[2] is True
    assert impl == ref
