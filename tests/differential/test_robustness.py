"""Bad-input robustness of natsd alone (no reference comparison): random and
protocol-shaped garbage on a raw connection must never crash the server or
break other clients. After every bad connection a fresh, well-behaved nats-py
client must still complete a request/reply round trip."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .harness import ServerProcess, natsd_only, run_raw

pytestmark = pytest.mark.differential

MAX_PAYLOAD = 1024


@pytest.fixture(scope="module")
def natsd_server() -> Iterator[ServerProcess]:
    with natsd_only(config=f"max_payload: {MAX_PAYLOAD}\n") as server:
        yield server


FRAGMENTS = [
    b"CONNECT ",
    b"connect ",
    b'{"verbose":true,"pedantic":true,"headers":true,"no_responders":true}',
    b'{"verbose":',
    b"{",
    b"}",
    b"PUB ",
    b"pub ",
    b"HPUB ",
    b"SUB ",
    b"UNSUB ",
    b"PING",
    b"PONG",
    b"MSG ",
    b"INFO ",
    b"+OK",
    b"-ERR",
    b"NATS/1.0\r\n",
    b"foo",
    b"foo.bar",
    b"foo..",
    b">",
    b"*",
    b" ",
    b"\t",
    b"\r\n",
    b"\r",
    b"\n",
    b"0",
    b"1",
    b"12",
    b"-1",
    b"1025",
    b"99999999999999999999",
    b"\x00",
    b"\xff",
    b"a" * 5000,
]

garbage = st.one_of(
    st.binary(min_size=1, max_size=600),
    st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=25).map(b"".join),
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=20)), min_size=1, max_size=25
    ).map(b"".join),
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, prev = [], 0
    for p in [*points, len(data)]:
        if p > prev:
            pieces.append(data[prev:p])
            prev = p
    return pieces


async def healthy_request_reply(server: ServerProcess) -> bytes:
    nc = await nats.connect(
        server.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2
    )
    try:

        async def handler(msg: Any) -> None:
            await msg.respond(b"pong:" + msg.data)

        await nc.subscribe("health.check", cb=handler)
        reply = await nc.request("health.check", b"ping", timeout=2)
        return bytes(reply.data)
    finally:
        await nc.close()


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    data=garbage,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=3),
    connect_first=st.booleans(),
)
def test_garbage_never_breaks_server(
    natsd_server: ServerProcess, data: bytes, cuts: list[int], connect_first: bool
) -> None:
    chunks: list[Any] = split(data, cuts)
    if connect_first:
        chunks.insert(0, b'CONNECT {"verbose":false,"headers":true}\r\n')
    run_raw(natsd_server, chunks, quiet=0.01, max_time=2.0)
    assert natsd_server.alive(), natsd_server.log()[-2000:]
    assert asyncio.run(healthy_request_reply(natsd_server)) == b"pong:ping"


def test_many_abrupt_disconnects(natsd_server: ServerProcess) -> None:
    """Half-written frames followed by an abrupt close, many times."""
    partial = [
        b"PUB foo 100\r\nabc",
        b"HPUB foo 12 20\r\nNATS/1.0\r\n",
        b"CONNECT {",
        b"SUB foo",
        b"PUB foo 2000\r\n",
    ]
    for _ in range(5):
        for p in partial:
            run_raw(natsd_server, [p], quiet=0.0)
    assert natsd_server.alive()
    assert asyncio.run(healthy_request_reply(natsd_server)) == b"pong:ping"
