"""Consumers resume after the server is stopped (SIGTERM) and started again on the same
port and store, with the client connected throughout: nats-py's ordered consumer iterating
``sub.messages``, a durable push consumer, a durable pull consumer in a fetch loop, and a KV
watcher. Each scenario runs against natsd and nats-server (real processes) and must give the
same messages on both.

How each one comes back (the same on both servers):

- the ordered consumer is an ephemeral in-memory consumer, gone after the restart; nats-py
  notices the missing idle heartbeats (two intervals of the default 5 s) and re-creates it
  from the next stream sequence (``deliver_policy: by_start_sequence``) on a new inbox;
- a KV watcher is an ordered consumer too (``kv.watch``), same path;
- durable push and pull consumers of a file stream are restored with their state; the push
  consumer delivers to the inbox nats-py subscribes again on reconnect, the pull consumer
  answers the client's next fetch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats.errors
import pytest
from nats.js.api import ConsumerConfig

from .restarts import Restartable, both, connect, wait_reconnected

pytestmark = pytest.mark.timeout(150)

#: nats-py re-creates an ordered consumer after two missed idle heartbeats (default 5 s),
#: checked every two intervals: up to 20 s after the restart. Margin for a loaded machine.
RESUME_TIMEOUT = 45.0


async def _drain(source: AsyncIterator[bytes], q: asyncio.Queue[bytes]) -> None:
    async for data in source:
        await q.put(data)


async def _take(q: asyncio.Queue[bytes], n: int, timeout: float) -> list[bytes]:
    return [await asyncio.wait_for(q.get(), timeout) for _ in range(n)]


Setup = Callable[
    [Any, Any], Awaitable[tuple[AsyncIterator[bytes], Callable[[int], Awaitable[None]]]]
]


async def _resume(srv: Restartable, setup: Setup) -> list[list[bytes]]:
    """Three messages, a restart, three more: what the consumer got before and after."""
    nc = await connect(srv)
    q: asyncio.Queue[bytes] = asyncio.Queue()
    task: asyncio.Task[None] | None = None
    try:
        js = nc.jetstream(timeout=5)
        source, publish = await setup(nc, js)
        task = asyncio.create_task(_drain(source, q))
        for i in range(3):
            await publish(i)
        before = await _take(q, 3, 10)
        await srv.restart()
        await wait_reconnected(nc)
        for i in range(3, 6):
            await publish(i)
        try:
            after = await _take(q, 3, RESUME_TIMEOUT)
        except TimeoutError:
            raise AssertionError(f"{srv.kind}: consumer did not resume after the restart") from None
        return [before, after]
    finally:
        if task is not None:
            task.cancel()
        await nc.close()


def _stream_publisher(js: Any) -> Callable[[int], Awaitable[None]]:
    async def publish(i: int) -> None:
        await js.publish("s.a", b"%d" % i)

    return publish


async def _ordered(nc: Any, js: Any) -> tuple[AsyncIterator[bytes], Any]:
    await js.add_stream(name="S", subjects=["s.>"])
    sub = await js.subscribe("s.>", ordered_consumer=True)

    async def source() -> AsyncIterator[bytes]:
        async for m in sub.messages:
            yield m.data

    return source(), _stream_publisher(js)


async def _durable_push(nc: Any, js: Any) -> tuple[AsyncIterator[bytes], Any]:
    await js.add_stream(name="S", subjects=["s.>"])
    sub = await js.subscribe("s.>", durable="PUSH", manual_ack=True)

    async def source() -> AsyncIterator[bytes]:
        async for m in sub.messages:
            # Acknowledged (and on disk) before it counts, so the restart redelivers nothing.
            await m.ack_sync()
            yield m.data

    return source(), _stream_publisher(js)


async def _durable_pull(nc: Any, js: Any) -> tuple[AsyncIterator[bytes], Any]:
    await js.add_stream(name="S", subjects=["s.>"])
    psub = await js.pull_subscribe("s.>", "PULL", config=ConsumerConfig(ack_wait=30))
    errors: list[Exception] = []

    async def source() -> AsyncIterator[bytes]:
        while True:
            try:
                msgs = await psub.fetch(10, timeout=1)
            except nats.errors.TimeoutError:
                continue
            except nats.errors.Error as e:
                # While the client reconnects a fetch fails at once: try again shortly, as
                # a fetch loop does.
                errors.append(e)
                await asyncio.sleep(0.1)
                continue
            for m in msgs:
                await m.ack_sync()
                yield m.data

    return source(), _stream_publisher(js)


async def _kv_watch(nc: Any, js: Any) -> tuple[AsyncIterator[bytes], Any]:
    kv = await js.create_key_value(bucket="B")
    watcher = await kv.watch(">")

    async def source() -> AsyncIterator[bytes]:
        async for entry in watcher:
            if entry is not None:  # None marks the end of the initial values
                yield entry.value

    async def publish(i: int) -> None:
        await kv.put(f"k{i}", b"%d" % i)

    return source(), publish


EXPECTED = [[b"0", b"1", b"2"], [b"3", b"4", b"5"]]


@pytest.mark.parametrize(
    "setup",
    [_ordered, _durable_push, _durable_pull, _kv_watch],
    ids=["ordered-messages", "durable-push", "durable-pull-fetch", "kv-watch"],
)
async def test_consumer_resumes_after_sigterm_restart(setup: Setup) -> None:
    got = await both(lambda srv: _resume(srv, setup))
    assert got["nats-server"] == EXPECTED
    assert got["natsd"] == EXPECTED
