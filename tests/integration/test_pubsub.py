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
    sub = await sub_nc.subscribe(pattern)
    sentinel = "zz.sentinel.done"
    done = await sub_nc.subscribe(sentinel)
    await sub_nc.flush()
    for subj in non_matching + matching:
        await pub_nc.publish(subj, subj.encode())
    # Messages from one publisher reach one subscriber connection in order: once the
    # sentinel arrived, everything published before it is in the subscription's queue.
    await pub_nc.publish(sentinel, b"")
    await pub_nc.flush()
    await done.next_msg(timeout=5)
    got = []
    while sub.pending_msgs:
        got.append(await sub.next_msg(timeout=1))
    subjects = [m.subject for m in got if m.subject != sentinel]
    assert sorted(subjects) == sorted(matching)
    assert all(m.data == m.subject.encode() for m in got if m.subject != sentinel)


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
    """UNSUB sid N counts the messages the subscription already received (nats-server)."""
    c = await raw(server.port)
    await c.connect()
    await c.send("SUB cnt 1\r\nSUB cnt2 2\r\n")
    for i in range(2):
        await c.send(f"PUB cnt 1\r\n{i}\r\nPUB cnt2 1\r\n{i}\r\n")
    await c.ping()
    # sid 1 already had 2 messages: a limit of 3 leaves room for exactly one more.
    await c.send("UNSUB 1 3\r\nPUB cnt 1\r\nX\r\nPUB cnt 1\r\nY\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    assert data == b"MSG cnt 1 1\r\nX\r\nPONG\r\n"
    # sid 2 already had 2 messages: a limit of 2 removes it at once.
    await c.send("UNSUB 2 2\r\nPUB cnt2 1\r\nZ\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    assert data == b"PONG\r\n"


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


async def test_connect_info_follows_first_pong(server, raw) -> None:
    """nats-server 2.11+ confirms CONNECT with an INFO (connect_info=true) sent after the first
    PONG. Clients such as nats-py read exactly one line after CONNECT+PING and require it to
    be PONG, so nothing may be sent between CONNECT and that PONG."""
    c = await raw(server.port)
    c.skip_info = False
    await c.send('CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n')
    with pytest.raises(TimeoutError):
        await c.readline(timeout=0.3)
    assert c.buf == b""
    await c.send("PING\r\n")
    assert await c.readline() == b"PONG"


async def test_nats_py_with_handshake_split_across_reads(server, connect) -> None:
    """nats-py writes CONNECT and PING separately; a proxy that forwards the client's bytes
    one line at a time, with a pause between lines, makes the server read them separately,
    as happens on a busy host or a real network."""

    async def pipe(reader, writer, split: bool) -> None:
        try:
            while data := await reader.read(65536):
                if split:
                    for line in data.splitlines(keepends=True):
                        writer.write(line)
                        await writer.drain()
                        await asyncio.sleep(0.02)
                else:
                    writer.write(data)
                    await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    tasks: list[asyncio.Task] = []

    async def handle(cr, cw) -> None:
        sr, sw = await asyncio.open_connection("127.0.0.1", server.port)
        tasks.append(asyncio.create_task(pipe(cr, sw, True)))
        tasks.append(asyncio.create_task(pipe(sr, cw, False)))

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        port = proxy.sockets[0].getsockname()[1]
        nc = await connect(f"nats://127.0.0.1:{port}")
        sub = await nc.subscribe("split")
        await nc.publish("split", b"hello")
        await nc.flush()
        assert (await sub.next_msg(timeout=1)).data == b"hello"
        await nc.close()
    finally:
        proxy.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_drain_delivers_pending_then_closes(server, connect) -> None:
    sub_nc = await connect(server.client_url)
    pub_nc = await connect(server.client_url)
    got: list[bytes] = []

    async def slow_cb(msg) -> None:
        await asyncio.sleep(0.001)
        got.append(msg.data)

    await sub_nc.subscribe("drain.me", cb=slow_cb)
    await sub_nc.flush()
    for i in range(100):
        await pub_nc.publish("drain.me", str(i).encode())
    await pub_nc.flush()
    await sub_nc.flush()
    await sub_nc.drain()
    assert sub_nc.is_closed
    assert got == [str(i).encode() for i in range(100)]
    # The server dropped the drained client's interest.
    await pub_nc.publish("drain.me", b"late")
    await pub_nc.flush()
    assert len(got) == 100


async def test_verbose_mode_acks_every_command(server, raw) -> None:
    c = await raw(server.port)
    await c.send('CONNECT {"verbose":true,"pedantic":false}\r\n')
    assert await c.readline() == b"+OK"
    await c.send("SUB v 1\r\nPUB v 2\r\nhi\r\nUNSUB 1\r\nPING\r\n")
    data = await c.expect(b"PONG\r\n")
    # SUB, then PUB acknowledged before its own echo is delivered, then UNSUB.
    assert data == b"+OK\r\n+OK\r\nMSG v 1 2\r\nhi\r\n+OK\r\nPONG\r\n"
