"""Core publish/subscribe through nats-py: delivery, wildcards, unsubscribe, echo."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import wait_for


async def collect(nc, subject: str, **kw):
    """Subscribe and return (sub, list that receives the messages)."""
    got: list = []

    async def cb(msg) -> None:
        got.append(msg)

    sub = await nc.subscribe(subject, cb=cb, **kw)
    return sub, got


async def test_publish_subscribe_roundtrip(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    sub = await sub_nc.subscribe("greet.hello")
    await sub_nc.flush()
    for i in range(5):
        await pub_nc.publish("greet.hello", f"msg-{i}".encode())
    await pub_nc.flush()
    received = [await sub.next_msg(timeout=2) for _ in range(5)]
    assert [m.data for m in received] == [f"msg-{i}".encode() for i in range(5)]
    assert all(m.subject == "greet.hello" for m in received)
    assert all(m.reply == "" for m in received)


async def test_empty_payload_and_binary_payload(server, connect) -> None:
    nc = await connect(server.client_url)
    sub = await nc.subscribe("bin")
    await nc.flush()
    blob = bytes(range(256)) + b"\r\nPUB x 1\r\n\x00"
    await nc.publish("bin", b"")
    await nc.publish("bin", blob)
    assert (await sub.next_msg(timeout=2)).data == b""
    assert (await sub.next_msg(timeout=2)).data == blob


async def test_reply_subject_is_forwarded(server, connect) -> None:
    nc = await connect(server.client_url)
    sub = await nc.subscribe("svc")
    await nc.flush()
    await nc.publish("svc", b"x", reply="my.reply.inbox")
    msg = await sub.next_msg(timeout=2)
    assert msg.reply == "my.reply.inbox"


@pytest.mark.parametrize(
    ("pattern", "matching", "non_matching"),
    [
        ("foo.*", ["foo.bar", "foo.baz"], ["foo", "foo.bar.baz", "bar.foo", "foox.bar"]),
        ("foo.*.baz", ["foo.bar.baz", "foo.x.baz"], ["foo.bar", "foo.bar.qux", "foo.bar.baz.x"]),
        ("foo.>", ["foo.bar", "foo.bar.baz", "foo.a.b.c.d"], ["foo", "bar.foo", "foox.bar"]),
        ("*.>", ["a.b", "x.y.z"], ["a"]),
        (">", ["a", "a.b", "a.b.c"], []),
        ("*", ["a", "foo"], ["a.b"]),
        ("a.*.c.>", ["a.b.c.d", "a.x.c.d.e"], ["a.b.c", "a.b.d.e", "x.b.c.d"]),
    ],
)
async def test_wildcards(server, connect, pattern, matching, non_matching) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    _, got = await collect(sub_nc, pattern)
    await sub_nc.flush()
    for subj in non_matching + matching:
        await pub_nc.publish(subj, subj.encode())
    # A sentinel published last on a subject the pattern matches proves ordering is done.
    await pub_nc.flush()
    await wait_for(lambda: len(got) >= len(matching), what=lambda: f"{matching} got {[m.subject for m in got]} errs={sub_nc.test_errors} {pub_nc.test_errors} stats={sub_nc.stats} {pub_nc.stats} {sub_nc.is_connected}")
    await asyncio.sleep(0.1)
    assert sorted(m.subject for m in got) == sorted(matching)
    assert all(m.data == m.subject.encode() for m in got)


async def test_overlapping_subscriptions_each_get_a_copy(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    _, exact = await collect(sub_nc, "a.b.c")
    _, star = await collect(sub_nc, "a.*.c")
    _, gt = await collect(sub_nc, "a.>")
    await sub_nc.flush()
    await pub_nc.publish("a.b.c", b"1")
    await pub_nc.flush()
    await wait_for(lambda: len(exact) == len(star) == len(gt) == 1, what="3 copies")


async def test_unsubscribe_stops_delivery(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    sub, got = await collect(sub_nc, "u.test")
    _, control = await collect(sub_nc, "u.test")
    await sub_nc.flush()
    await pub_nc.publish("u.test", b"before")
    await pub_nc.flush()
    await wait_for(lambda: len(got) == 1 and len(control) == 1)
    await sub.unsubscribe()
    await sub_nc.flush()
    await pub_nc.publish("u.test", b"after")
    await pub_nc.flush()
    await wait_for(lambda: len(control) == 2, what="control sub to get 2nd message")
    await asyncio.sleep(0.05)
    assert [m.data for m in got] == [b"before"]


async def test_auto_unsubscribe_after_max_msgs(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    sub, got = await collect(sub_nc, "auto")
    await sub.unsubscribe(limit=3)
    await sub_nc.flush()
    for i in range(10):
        await pub_nc.publish("auto", str(i).encode())
    await pub_nc.flush()
    await wait_for(lambda: len(got) >= 3)
    await asyncio.sleep(0.2)
    assert [m.data for m in got] == [b"0", b"1", b"2"]
    # The server forgot the subscription once it reached its limit.
    await sub_nc.flush()
    assert sub_nc.stats["in_msgs"] == 3


async def test_auto_unsubscribe_counts_already_delivered(server, raw) -> None:
    """UNSUB sid N after N messages were delivered removes the subscription at once."""
    c = await raw(server.port)
    await c.connect()
    await c.send("SUB cnt 1\r\n")
    for i in range(2):
        await c.send(f"PUB cnt 1\r\n{i}\r\n")
    await c.ping()
    await c.send("UNSUB 1 2\r\nPUB cnt 1\r\nX\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    assert b"X" not in data
    await c.send("UNSUB 1 5\r\nPUB cnt 1\r\nY\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    assert b"MSG" not in data


async def test_no_echo(server, connect) -> None:
    noecho = await connect(server.client_url, no_echo=True)
    echo = await connect(server.client_url)
    _, own = await collect(noecho, "echo.test")
    _, echo_own = await collect(echo, "echo.test")
    await noecho.flush()
    await echo.flush()
    await noecho.publish("echo.test", b"from-noecho")
    await noecho.flush()
    await echo.publish("echo.test", b"from-echo")
    await echo.flush()
    # The echo client sees both; the no_echo client sees only the other client's message.
    await wait_for(lambda: len(echo_own) == 2 and len(own) == 1)
    await asyncio.sleep(0.05)
    assert [m.data for m in own] == [b"from-echo"]
    assert sorted(m.data for m in echo_own) == [b"from-echo", b"from-noecho"]


async def test_many_subjects(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    n = 500
    subs = {}
    for i in range(n):
        subs[i] = await sub_nc.subscribe(f"many.{i}")
    await sub_nc.flush()
    for i in range(n):
        await pub_nc.publish(f"many.{i}", str(i).encode())
    await pub_nc.flush()
    for i in range(n):
        msg = await subs[i].next_msg(timeout=2)
        assert msg.subject == f"many.{i}"
        assert msg.data == str(i).encode()
    for s in subs.values():
        assert s.pending_msgs == 0


async def test_ordering_from_one_publisher(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    _, got = await collect(sub_nc, "ord")
    await sub_nc.flush()
    n = 5000
    for i in range(n):
        await pub_nc.publish("ord", i.to_bytes(4, "big"))
    await pub_nc.flush()
    await wait_for(lambda: len(got) == n, timeout=10, what=f"{n} messages")
    assert [int.from_bytes(m.data, "big") for m in got] == list(range(n))


async def test_raw_protocol_msg_format(server, raw) -> None:
    """The MSG frame layout seen on the wire: MSG <subject> <sid> [reply] <size>."""
    c = await raw(server.port)
    await c.connect()
    await c.send("SUB raw.* 7\r\nPUB raw.x 5\r\nhello\r\nPUB raw.y r.inbox 2\r\nhi\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    assert data == b"MSG raw.x 7 5\r\nhello\r\nMSG raw.y 7 r.inbox 2\r\nhi\r\nPONG\r\n"
