"""JetStream consumers through nats-py's client API: pull_subscribe + fetch, push
subscriptions (durable, ephemeral, queue, ordered), msg.ack/nak/in_progress/term,
msg.metadata, consumer management, every deliver policy and ack policy.

Each test starts its own server with ``-js -sd <tmp>`` through the ``spawn`` fixture, so
``NATSD_IT_TARGET=nats-server`` runs the very same tests against the Go server (that is
how every expectation here was checked).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
)
from nats.js.errors import BadRequestError, NotFoundError

from .conftest import ServerProcess, wait_for

pytestmark = pytest.mark.timeout(60)

STREAM = "S"


@pytest.fixture
async def js_url(spawn: Callable[..., ServerProcess], tmp_dir: str) -> str:
    """URL of a fresh JetStream server (natsd or nats-server, see NATSD_IT_TARGET)."""
    store = os.path.join(tmp_dir, "jetstream")
    sp = await spawn("-js", "-sd", store, "-a", "127.0.0.1", "-p", "-1").wait_ready()
    return f"nats://127.0.0.1:{sp.port}"


@pytest.fixture
async def nc(connect: Callable[..., Awaitable[NATS]], js_url: str) -> NATS:
    return await connect(js_url)


@pytest.fixture
async def js(nc: NATS) -> Any:
    """A JetStream context with stream S on ``s.>`` (memory) and nothing published."""
    ctx = nc.jetstream(timeout=3)
    await ctx.add_stream(name=STREAM, subjects=["s.>"], storage=StorageType.MEMORY)
    return ctx


async def publish(js: Any, *subjects: str) -> list[int]:
    """Publish one message per subject (payload = "<subject>#<n>"); return the seqs."""
    seqs = []
    for i, subj in enumerate(subjects, 1):
        ack = await js.publish(subj, f"{subj}#{i}".encode())
        seqs.append(ack.seq)
    return seqs


def payloads(msgs: list[Any]) -> list[str]:
    return [m.data.decode() for m in msgs]


async def fetch_all(psub: Any, batch: int = 10, timeout: float = 0.5) -> list[Any]:
    """fetch() that returns [] instead of raising on timeout."""
    try:
        return list(await psub.fetch(batch, timeout=timeout))
    except TimeoutError:
        return []


# ====================================================================== pull consumers
async def test_pull_subscribe_fetch_ack_and_info(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe("s.a", durable="D")
    msgs = await psub.fetch(3, timeout=2)
    assert payloads(msgs) == ["s.a#1", "s.a#2", "s.a#3"]
    for m in msgs:
        await m.ack_sync()
    info = await psub.consumer_info()
    assert info.name == "D" and info.stream_name == STREAM
    assert info.config.durable_name == "D"
    assert info.config.ack_policy == AckPolicy.EXPLICIT
    assert info.config.filter_subject == "s.a"
    assert info.delivered.consumer_seq == 3 and info.delivered.stream_seq == 3
    assert info.ack_floor.consumer_seq == 3 and info.ack_floor.stream_seq == 3
    assert info.num_ack_pending == 0 and info.num_pending == 2
    assert info.num_redelivered == 0
    rest = await psub.fetch(5, timeout=1)
    assert payloads(rest) == ["s.a#4", "s.a#5"]


async def test_fetch_empty_times_out(js: Any) -> None:
    psub = await js.pull_subscribe("s.>", durable="D")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await psub.fetch(1, timeout=0.5)
    with pytest.raises(TimeoutError):
        await psub.fetch(5, timeout=0.5)
    assert time.monotonic() - t0 < 3
    info = await psub.consumer_info()
    assert info.delivered.consumer_seq == 0


async def test_fetch_with_heartbeat(js: Any) -> None:
    psub = await js.pull_subscribe("s.>", durable="D")
    with pytest.raises(TimeoutError):
        await psub.fetch(1, timeout=1, heartbeat=0.2)
    await publish(js, "s.x")
    msgs = await psub.fetch(1, timeout=1, heartbeat=0.2)
    assert payloads(msgs) == ["s.x#1"]


async def test_fetch_waits_for_messages_published_later(js: Any) -> None:
    psub = await js.pull_subscribe("s.>", durable="D")
    fetch = asyncio.create_task(psub.fetch(1, timeout=3))
    await asyncio.sleep(0.2)
    await publish(js, "s.later")
    msgs = await fetch
    assert payloads(msgs) == ["s.later#1"]


async def test_fetch_partial_batch(js: Any) -> None:
    await publish(js, "s.a", "s.b")
    psub = await js.pull_subscribe("s.>", durable="D")
    msgs = await psub.fetch(10, timeout=1)
    assert payloads(msgs) == ["s.a#1", "s.b#2"]


async def test_msg_metadata(js: Any) -> None:
    before = datetime.datetime.now(datetime.UTC)
    await publish(js, "s.a", "s.b", "s.c")
    psub = await js.pull_subscribe("s.>", durable="META")
    msgs = await psub.fetch(2, timeout=2)
    md = msgs[1].metadata
    assert md.stream == STREAM and md.consumer == "META"
    assert md.sequence.stream == 2 and md.sequence.consumer == 2
    assert md.num_delivered == 1
    assert md.num_pending == 1  # s.c still to come
    assert md.domain in (None, "")
    # The timestamp is the message's stream timestamp (same as a direct get).
    stored = await js.get_msg(STREAM, 2)
    assert before - datetime.timedelta(seconds=5) <= md.timestamp
    assert md.timestamp <= datetime.datetime.now(datetime.UTC)
    assert stored.seq == 2
    reply = msgs[1].reply
    tokens = reply.split(".")
    assert tokens[:4] == ["$JS", "ACK", STREAM, "META"] and len(tokens) == 9
    assert tokens[4:7] == ["1", "2", "2"] and tokens[8] == "1"


async def test_headers_are_delivered(js: Any) -> None:
    await js.publish("s.h", b"body", headers={"X-One": "1", "X-Two": "two"})
    psub = await js.pull_subscribe("s.h", durable="H")
    (msg,) = await psub.fetch(1, timeout=2)
    assert msg.data == b"body"
    assert msg.headers is not None
    assert msg.headers["X-One"] == "1" and msg.headers["X-Two"] == "two"


async def test_pull_multiple_filter_subjects(js: Any) -> None:
    await publish(js, "s.a", "s.b", "s.c", "s.a")
    await js.add_consumer(STREAM, ConsumerConfig(durable_name="MF", filter_subjects=["s.a", "s.c"]))
    psub = await js.pull_subscribe_bind("MF", STREAM)
    msgs = await psub.fetch(10, timeout=1)
    assert payloads(msgs) == ["s.a#1", "s.c#3", "s.a#4"]


async def test_pull_max_ack_pending_limits_fetch(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe("s.a", durable="MAP", config=ConsumerConfig(max_ack_pending=2))
    msgs = await psub.fetch(4, timeout=1)
    assert payloads(msgs) == ["s.a#1", "s.a#2"]
    await msgs[0].ack_sync()
    more = await psub.fetch(4, timeout=1)
    assert payloads(more) == ["s.a#3"]


async def test_two_pull_subscribers_share_a_durable(js: Any, nc: NATS) -> None:
    await publish(js, *["s.a"] * 6)
    p1 = await js.pull_subscribe("s.a", durable="SHARED")
    p2 = await js.pull_subscribe("s.a", durable="SHARED")
    got1 = await p1.fetch(3, timeout=1)
    got2 = await p2.fetch(3, timeout=1)
    assert sorted(payloads(got1) + payloads(got2)) == sorted(f"s.a#{i}" for i in range(1, 7))
    assert not set(payloads(got1)) & set(payloads(got2))


# ====================================================================== acks
async def test_ack_nak_term_in_progress(js: Any) -> None:
    await publish(js, "s.a", "s.b", "s.c", "s.d")
    psub = await js.pull_subscribe("s.>", durable="ACKS", config=ConsumerConfig(ack_wait=0.5))
    a, b, c, d = await psub.fetch(4, timeout=2)
    await a.ack()
    await b.nak()
    await c.term()
    await d.in_progress()
    assert a.is_acked and b.is_acked and c.is_acked
    # The nak'd message comes back at once, delivered a second time.
    (again,) = await psub.fetch(1, timeout=2)
    assert again.data == b"s.b#2" and again.metadata.num_delivered == 2
    await again.ack_sync()
    # d was only "in progress": redelivered after ack_wait; c (terminated) never.
    (late,) = await psub.fetch(1, timeout=3)
    assert late.data == b"s.d#4" and late.metadata.num_delivered == 2
    await late.ack_sync()
    assert await fetch_all(psub, timeout=0.8) == []
    info = await psub.consumer_info()
    assert info.num_ack_pending == 0 and info.num_redelivered == 0
    assert info.ack_floor.stream_seq == 4


async def test_double_ack_is_refused_by_the_client(js: Any) -> None:
    await publish(js, "s.a")
    psub = await js.pull_subscribe("s.a", durable="D")
    (msg,) = await psub.fetch(1, timeout=2)
    await msg.ack_sync()
    with pytest.raises(nats.errors.MsgAlreadyAckdError):
        await msg.ack()


async def test_nak_with_delay(js: Any) -> None:
    await publish(js, "s.a")
    psub = await js.pull_subscribe("s.a", durable="D")
    (msg,) = await psub.fetch(1, timeout=2)
    t0 = time.monotonic()
    await msg.nak(delay=0.4)
    (again,) = await psub.fetch(1, timeout=3)
    assert time.monotonic() - t0 >= 0.3
    assert again.metadata.num_delivered == 2


async def test_term_stops_redelivery(js: Any) -> None:
    await publish(js, "s.a", "s.b")
    psub = await js.pull_subscribe("s.>", durable="T", config=ConsumerConfig(ack_wait=0.3))
    m1, m2 = await psub.fetch(2, timeout=2)
    await m1.term()
    await m2.ack()
    assert await fetch_all(psub, timeout=0.8) == []
    info = await psub.consumer_info()
    assert info.num_ack_pending == 0 and info.ack_floor.stream_seq == 2


@pytest.mark.slow
async def test_in_progress_extends_the_ack_deadline(js: Any) -> None:
    await publish(js, "s.a")
    psub = await js.pull_subscribe("s.a", durable="W", config=ConsumerConfig(ack_wait=1.0))
    (msg,) = await psub.fetch(1, timeout=2)
    await asyncio.sleep(0.5)
    await msg.in_progress()
    # Without the +WPI the message would come back at ~1.0 s; now at ~1.5 s.
    assert await fetch_all(psub, batch=1, timeout=0.7) == []
    (again,) = await psub.fetch(1, timeout=3)
    assert again.metadata.num_delivered == 2


async def test_redelivery_after_ack_wait(js: Any) -> None:
    await publish(js, "s.a")
    psub = await js.pull_subscribe("s.a", durable="R", config=ConsumerConfig(ack_wait=0.4))
    (first,) = await psub.fetch(1, timeout=2)
    assert first.metadata.num_delivered == 1
    (again,) = await psub.fetch(1, timeout=3)
    assert again.data == first.data
    assert again.metadata.num_delivered == 2
    assert again.metadata.sequence.consumer == 2 and again.metadata.sequence.stream == 1
    info = await psub.consumer_info()
    assert info.num_redelivered == 1 and info.num_ack_pending == 1


async def test_max_deliver_stops_redelivery(js: Any, nc: NATS) -> None:
    adv = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>")
    await publish(js, "s.a")
    psub = await js.pull_subscribe(
        "s.a", durable="MD", config=ConsumerConfig(ack_wait=0.3, max_deliver=2)
    )
    (m1,) = await psub.fetch(1, timeout=2)
    (m2,) = await psub.fetch(1, timeout=3)
    assert (m1.metadata.num_delivered, m2.metadata.num_delivered) == (1, 2)
    assert await fetch_all(psub, batch=1, timeout=0.8) == []
    event = await adv.next_msg(timeout=2)
    assert event.subject == f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{STREAM}.MD"
    info = await psub.consumer_info()
    assert info.num_ack_pending == 0


async def test_backoff(js: Any) -> None:
    await publish(js, "s.a")
    psub = await js.pull_subscribe(
        "s.a", durable="BO", config=ConsumerConfig(backoff=[0.2, 0.5], max_deliver=3)
    )
    info = await psub.consumer_info()
    assert info.config.ack_wait == 0.2 and info.config.backoff == [0.2, 0.5]
    t0 = time.monotonic()
    deliveries = []
    for _ in range(3):
        (m,) = await psub.fetch(1, timeout=3)
        deliveries.append((m.metadata.num_delivered, time.monotonic() - t0))
    assert [n for n, _ in deliveries] == [1, 2, 3]
    # Second redelivery waits for the second backoff value (0.5 s).
    assert deliveries[2][1] - deliveries[1][1] >= 0.35


# ====================================================================== ack policies
async def test_ack_policy_none(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe(
        "s.a", durable="N", config=ConsumerConfig(ack_policy=AckPolicy.NONE)
    )
    msgs = await psub.fetch(3, timeout=2)
    assert len(msgs) == 3
    info = await psub.consumer_info()
    assert info.config.ack_policy == AckPolicy.NONE
    assert info.num_ack_pending == 0
    assert info.ack_floor.stream_seq == 3 and info.ack_floor.consumer_seq == 3


async def test_ack_policy_all(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe(
        "s.a", durable="A", config=ConsumerConfig(ack_policy=AckPolicy.ALL)
    )
    msgs = await psub.fetch(4, timeout=2)
    await msgs[2].ack_sync()  # acks 1..3
    info = await psub.consumer_info()
    assert info.config.ack_policy == AckPolicy.ALL
    assert info.ack_floor.stream_seq == 3 and info.num_ack_pending == 1


async def test_ack_policy_explicit(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe(
        "s.a", durable="E", config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
    )
    msgs = await psub.fetch(3, timeout=2)
    await msgs[2].ack_sync()  # only 3
    info = await psub.consumer_info()
    assert info.ack_floor.stream_seq == 0 and info.num_ack_pending == 2
    await msgs[0].ack_sync()
    info = await psub.consumer_info()
    assert info.ack_floor.stream_seq == 1 and info.num_ack_pending == 1


# ====================================================================== deliver policies
async def _deliver(js: Any, name: str, **cfg: Any) -> list[str]:
    await js.add_consumer(STREAM, ConsumerConfig(durable_name=name, **cfg))
    psub = await js.pull_subscribe_bind(name, STREAM)
    return payloads(await fetch_all(psub, timeout=0.7))


async def test_deliver_policies(js: Any) -> None:
    await publish(js, "s.a", "s.b", "s.a", "s.c", "s.b")
    all_ = await _deliver(js, "ALL", deliver_policy=DeliverPolicy.ALL)
    assert all_ == ["s.a#1", "s.b#2", "s.a#3", "s.c#4", "s.b#5"]
    assert await _deliver(js, "LAST", deliver_policy=DeliverPolicy.LAST) == ["s.b#5"]
    assert await _deliver(
        js, "LAST_A", deliver_policy=DeliverPolicy.LAST, filter_subject="s.a"
    ) == ["s.a#3"]
    assert await _deliver(js, "NEW", deliver_policy=DeliverPolicy.NEW) == []
    assert await _deliver(
        js, "SEQ", deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=4
    ) == ["s.c#4", "s.b#5"]
    assert await _deliver(
        js, "LPS", deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, filter_subject="s.*"
    ) == ["s.a#3", "s.c#4", "s.b#5"]
    # NEW sees only what is published after it was created.
    await publish(js, "s.z")
    psub = await js.pull_subscribe_bind("NEW", STREAM)
    assert payloads(await fetch_all(psub)) == ["s.z#1"]


async def test_deliver_by_start_time(js: Any) -> None:
    await publish(js, "s.a", "s.b")
    await asyncio.sleep(0.05)
    await publish(js, "s.c", "s.d")
    stored = await js.get_msg(STREAM, 3)
    assert stored.time is not None
    start = stored.time if isinstance(stored.time, str) else stored.time.isoformat()
    got = await _deliver(
        js, "TIME", deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start
    )
    assert got == ["s.c#1", "s.d#2"]
    past = await _deliver(
        js,
        "PAST",
        deliver_policy=DeliverPolicy.BY_START_TIME,
        opt_start_time="2000-01-01T00:00:00Z",
    )
    assert len(past) == 4
    future = await _deliver(
        js,
        "FUTURE",
        deliver_policy=DeliverPolicy.BY_START_TIME,
        opt_start_time="2099-01-01T00:00:00Z",
    )
    assert future == []


async def test_invalid_deliver_policy_combinations(js: Any) -> None:
    with pytest.raises(BadRequestError) as e:
        await js.add_consumer(
            STREAM, ConsumerConfig(durable_name="X", deliver_policy=DeliverPolicy.BY_START_SEQUENCE)
        )
    assert e.value.err_code == 10094
    with pytest.raises(BadRequestError) as e:
        await js.add_consumer(
            STREAM, ConsumerConfig(durable_name="X", deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
        )
    assert e.value.err_code == 10094


# ====================================================================== push consumers
async def test_push_durable_subscription(js: Any) -> None:
    await publish(js, "s.a", "s.b")
    sub = await js.subscribe("s.>", durable="PUSH", manual_ack=True)
    got = [await sub.next_msg(timeout=2) for _ in range(2)]
    assert payloads(got) == ["s.a#1", "s.b#2"]
    for m in got:
        await m.ack_sync()
    info = await sub.consumer_info()
    assert info.name == "PUSH" and info.push_bound is True
    assert info.config.deliver_subject
    assert info.num_ack_pending == 0
    await publish(js, "s.c")
    live = await sub.next_msg(timeout=2)
    assert live.data == b"s.c#1" and live.metadata.sequence.consumer == 3
    await live.ack()


async def test_push_callback_auto_ack(js: Any) -> None:
    received: list[str] = []

    async def cb(msg: Any) -> None:
        received.append(msg.data.decode())

    sub = await js.subscribe("s.>", durable="CB", cb=cb)
    await publish(js, "s.a", "s.b", "s.c")
    await wait_for(lambda: len(received) == 3, timeout=5, what="3 callback deliveries")

    async def all_acked() -> bool:
        info = await sub.consumer_info()
        return info.num_ack_pending == 0 and info.ack_floor.stream_seq == 3

    await wait_for(all_acked, timeout=5, what="auto-acks")
    assert received == ["s.a#1", "s.b#2", "s.c#3"]


async def test_push_ephemeral_subscription(js: Any) -> None:
    await publish(js, "s.a")
    sub = await js.subscribe("s.a", inactive_threshold=0.5)
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"s.a#1"
    info = await sub.consumer_info()
    assert info.config.durable_name is None
    assert info.config.inactive_threshold == 0.5
    names = [c.name for c in await js.consumers_info(STREAM)]
    assert names == [info.name]
    await sub.unsubscribe()

    async def gone() -> bool:
        return [c.name for c in await js.consumers_info(STREAM)] == []

    # Without interest the ephemeral goes away after its inactive threshold.
    await wait_for(gone, timeout=5, what="ephemeral consumer deleted after unsubscribe")


async def test_push_queue_subscription(js: Any) -> None:
    s1 = await js.subscribe("s.>", queue="workers")
    s2 = await js.subscribe("s.>", queue="workers")
    await publish(js, *[f"s.{i}" for i in range(10)])
    got: list[str] = []

    async def drain(sub: Any) -> None:
        while True:
            try:
                msg = await sub.next_msg(timeout=0.5)
            except TimeoutError:
                return
            got.append(msg.data.decode())
            await msg.ack()

    await asyncio.gather(drain(s1), drain(s2))
    assert sorted(got) == sorted(f"s.{i}#{i + 1}" for i in range(10))
    info = await js.consumer_info(STREAM, "workers")
    assert info.config.deliver_group == "workers"
    assert info.delivered.stream_seq == 10


async def test_push_headers_only(js: Any) -> None:
    await js.publish("s.h", b"12345", headers={"X-A": "1"})
    sub = await js.subscribe("s.h", headers_only=True)
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b""
    assert msg.headers is not None
    assert msg.headers["Nats-Msg-Size"] == "5" and msg.headers["X-A"] == "1"


async def test_push_deliver_policy_option(js: Any) -> None:
    await publish(js, "s.a", "s.b", "s.c")
    sub = await js.subscribe("s.>", deliver_policy=DeliverPolicy.LAST)
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"s.c#3"
    with pytest.raises(TimeoutError):
        await sub.next_msg(timeout=0.3)


async def test_push_idle_heartbeat_and_flow_control(js: Any) -> None:
    sub = await js.subscribe(
        "s.>", durable="HB", idle_heartbeat=0.2, flow_control=True, manual_ack=True
    )
    info = await sub.consumer_info()
    assert info.config.idle_heartbeat == 0.2 and info.config.flow_control is True
    await publish(js, "s.a")
    # nats-py swallows heartbeats; the message must still come through.
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"s.a#1"
    await msg.ack()


async def test_ordered_consumer(js: Any) -> None:
    await publish(js, *[f"s.{i}" for i in range(5)])
    sub = await js.subscribe("s.>", ordered_consumer=True)
    got = [await sub.next_msg(timeout=2) for _ in range(5)]
    assert payloads(got) == [f"s.{i}#{i + 1}" for i in range(5)]
    assert [m.metadata.sequence.stream for m in got] == [1, 2, 3, 4, 5]
    info = await sub.consumer_info()
    assert info.config.ack_policy == AckPolicy.NONE
    assert info.config.flow_control is True
    assert info.config.mem_storage is True
    assert info.config.max_deliver == 1
    await publish(js, "s.more")
    assert (await sub.next_msg(timeout=2)).data == b"s.more#1"


# ====================================================================== retention
async def test_workqueue_stream_removes_acked(nc: NATS) -> None:
    js = nc.jetstream(timeout=3)
    await js.add_stream(
        name="WQ", subjects=["wq.>"], retention=RetentionPolicy.WORK_QUEUE, storage="memory"
    )
    for i in range(3):
        await js.publish("wq.job", f"job{i}".encode())
    psub = await js.pull_subscribe("wq.job", durable="WORKER")
    msgs = await psub.fetch(3, timeout=2)
    await msgs[0].ack_sync()
    await msgs[1].term()
    await msgs[2].nak()

    async def remaining() -> bool:
        return (await js.stream_info("WQ")).state.messages == 1

    await wait_for(remaining, timeout=5, what="work queue keeps only the nak'd message")
    with pytest.raises(BadRequestError) as e:
        await js.pull_subscribe("wq.job", durable="SECOND")
    assert e.value.err_code == 10100


async def test_interest_stream_removes_when_all_acked(nc: NATS) -> None:
    js = nc.jetstream(timeout=3)
    await js.add_stream(
        name="IN", subjects=["in.>"], retention=RetentionPolicy.INTEREST, storage="memory"
    )
    p1 = await js.pull_subscribe("in.x", durable="ONE")
    p2 = await js.pull_subscribe("in.x", durable="TWO")
    await js.publish("in.x", b"1")
    (m1,) = await p1.fetch(1, timeout=2)
    await m1.ack_sync()
    assert (await js.stream_info("IN")).state.messages == 1
    (m2,) = await p2.fetch(1, timeout=2)
    await m2.ack_sync()

    async def emptied() -> bool:
        return (await js.stream_info("IN")).state.messages == 0

    await wait_for(emptied, timeout=5, what="interest stream emptied")


# ====================================================================== management
async def test_consumer_management(js: Any) -> None:
    cfg = ConsumerConfig(durable_name="MGMT", description="first", ack_wait=10.0)
    info = await js.add_consumer(STREAM, cfg)
    assert info.config.description == "first" and info.config.ack_wait == 10.0
    assert info.config.max_ack_pending == 1000 and info.config.max_waiting == 512
    # Create again with an allowed change: an update.
    info = await js.add_consumer(
        STREAM, ConsumerConfig(durable_name="MGMT", description="second", ack_wait=10.0)
    )
    assert info.config.description == "second"
    # A change nats-server refuses.
    with pytest.raises(nats.js.errors.ServerError):
        await js.add_consumer(
            STREAM,
            ConsumerConfig(durable_name="MGMT", deliver_policy=DeliverPolicy.NEW, ack_wait=10.0),
        )
    await js.add_consumer(STREAM, ConsumerConfig(durable_name="OTHER"))
    names = sorted(c.name for c in await js.consumers_info(STREAM))
    assert names == ["MGMT", "OTHER"]
    assert (await js.stream_info(STREAM)).state.consumer_count == 2
    assert await js.delete_consumer(STREAM, "OTHER") is True
    with pytest.raises(NotFoundError) as e:
        await js.consumer_info(STREAM, "OTHER")
    assert e.value.err_code == 10014
    with pytest.raises(NotFoundError):
        await js.delete_consumer(STREAM, "OTHER")
    with pytest.raises(NotFoundError) as e:
        await js.consumer_info("NOPE", "MGMT")
    assert e.value.err_code == 10059


async def test_pause_and_resume(js: Any) -> None:
    await publish(js, "s.a")
    await js.add_consumer(STREAM, ConsumerConfig(durable_name="P"))
    resp = await js.pause_consumer(STREAM, "P", "2099-01-01T00:00:00Z")
    assert resp.paused is True
    info = await js.consumer_info(STREAM, "P")
    assert info.paused is True
    psub = await js.pull_subscribe_bind("P", STREAM)
    assert await fetch_all(psub, batch=1, timeout=0.5) == []
    resp = await js.resume_consumer(STREAM, "P")
    assert resp.paused is False
    assert payloads(await psub.fetch(1, timeout=2)) == ["s.a#1"]


async def test_reset_consumer(js: Any) -> None:
    await publish(js, "s.a", "s.a", "s.a", "s.a")
    psub = await js.pull_subscribe("s.a", durable="RS")
    msgs = await psub.fetch(3, timeout=2)
    await msgs[0].ack_sync()
    await js.reset_consumer(STREAM, "RS")
    again = await psub.fetch(5, timeout=1)
    assert payloads(again) == ["s.a#2", "s.a#3", "s.a#4"]
    assert [m.metadata.sequence.consumer for m in again] == [1, 2, 3]


async def test_ephemeral_pull_consumer_inactive_threshold(js: Any) -> None:
    info = await js.add_consumer(STREAM, ConsumerConfig(inactive_threshold=0.5))
    assert info.config.durable_name is None and info.name
    assert info.config.inactive_threshold == 0.5

    async def deleted() -> bool:
        try:
            await js.consumer_info(STREAM, info.name)
        except NotFoundError:
            return True
        return False

    await wait_for(deleted, timeout=5, what="inactive ephemeral deleted")
