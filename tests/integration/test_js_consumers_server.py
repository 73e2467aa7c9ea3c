"""Consumer behaviour that needs a server's timers and bookkeeping: inactivity cleanup of
ephemeral push consumers, stalled flow control, consumer counts in account info and
``/jsz``, stream purge and delete with active consumers, interest retention with several
consumers. nats-py over real sockets against an embedded natsd (monitoring on)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, ReplayPolicy, RetentionPolicy, StorageType
from nats.js.errors import NotFoundError

import natsd
from natsd.jetstream.consumer import push as consumer_push

from .conftest import get_json, only_natsd, wait_for

pytestmark = [pytest.mark.timeout(60), only_natsd]


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[natsd.Server]:
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path), http_port=-1
    ) as s:
        yield s


@pytest.fixture
async def nc(srv: natsd.Server) -> AsyncIterator[Any]:
    c = await nats.connect(srv.client_url, allow_reconnect=False)
    yield c
    await c.close()


async def test_ephemeral_push_consumer_goes_when_its_subscriber_leaves(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage=StorageType.MEMORY)
    await js.publish("s.a", b"1")
    sub = await js.subscribe("s.a", config=ConsumerConfig(inactive_threshold=0.3))
    assert (await sub.next_msg(2)).data == b"1"
    name = sub._consumer
    info = await js.consumer_info("S", name)
    assert info.push_bound
    await sub.unsubscribe()

    async def gone() -> bool:
        try:
            await js.consumer_info("S", name)
        except NotFoundError:
            return True
        return False

    await wait_for(gone, timeout=5, what="the ephemeral push consumer to be deleted")


async def test_durable_push_consumer_stays_unbound(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage=StorageType.MEMORY)
    sub = await js.subscribe("s.a", durable="DUR")
    await sub.unsubscribe()
    await asyncio.sleep(0.3)
    info = await js.consumer_info("S", "DUR")
    assert not info.push_bound
    # Re-binding picks up where it was.
    await js.publish("s.a", b"later")
    sub = await js.subscribe("s.a", durable="DUR")
    assert (await sub.next_msg(2)).data == b"later"


async def test_flow_control_stalls_without_replies(
    nc: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 16 KB limit gives a 1 KB window: the second 700-byte message asks for flow
    # control, the third one stalls the consumer until the request is answered.
    monkeypatch.setattr(consumer_push, "FLOW_CONTROL_MAX_PENDING", 16 * 1024)
    js = nc.jetstream()
    await js.add_stream(name="F", subjects=["f.>"], storage=StorageType.MEMORY)
    for i in range(6):
        await js.publish("f.a", bytes([65 + i]) * 700)
    frames: list[Any] = []
    inbox = nc.new_inbox()

    async def collect(m: Any) -> None:
        frames.append(m)

    await nc.subscribe(inbox, cb=collect)
    await js.add_consumer(
        "F",
        ConsumerConfig(
            durable_name="FC",
            deliver_subject=inbox,
            flow_control=True,
            idle_heartbeat=0.2,
            ack_policy=AckPolicy.NONE,
        ),
    )
    await wait_for(
        lambda: any(_status(m) == "100" and m.reply for m in frames),
        timeout=5,
        what=lambda: (
            f"a flow control request in {[(m.subject, m.reply, m.headers) for m in frames]}"
        ),
    )
    await asyncio.sleep(0.6)
    data = [m for m in frames if not _status(m)]
    assert len(data) < 6, "a stalled consumer must stop delivering"
    fc = next(m for m in frames if _status(m) == "100" and m.reply)
    assert fc.reply.startswith("$JS.FC.F.FC.")
    stalled = [m for m in frames if m.headers and m.headers.get("Nats-Consumer-Stalled")]
    assert stalled, "idle heartbeats say the consumer is stalled"
    assert stalled[-1].headers["Nats-Consumer-Stalled"] == fc.reply
    # Answering every flow control request (as clients do) lets everything through.
    answered: set[str] = set()

    async def all_delivered() -> bool:
        for m in list(frames):
            if _status(m) == "100" and m.reply and m.reply not in answered:
                answered.add(m.reply)
                await nc.publish(m.reply, b"")
        return len([m for m in frames if not _status(m)]) == 6

    await wait_for(all_delivered, timeout=5, what="all messages after flow control replies")
    assert [m.data[:1] for m in frames if not _status(m)] == [b"A", b"B", b"C", b"D", b"E", b"F"]


def _status(m: Any) -> str:
    return (m.headers or {}).get("Status", "") if m.headers else ""


async def test_consumer_counts(srv: natsd.Server, nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a.>"], storage=StorageType.MEMORY)
    await js.add_stream(name="B", subjects=["b.>"], storage=StorageType.MEMORY)
    for stream, name in (("A", "X"), ("A", "Y"), ("B", "Z")):
        await js.add_consumer(stream, ConsumerConfig(durable_name=name))
    assert (await js.account_info()).consumers == 3
    assert (await js.stream_info("A")).state.consumer_count == 2
    jsz = await get_json(f"{srv.monitor_url}/jsz")
    assert jsz["consumers"] == 3
    await js.delete_stream("A")
    assert (await js.account_info()).consumers == 1
    jsz = await get_json(f"{srv.monitor_url}/jsz")
    assert jsz["consumers"] == 1


async def test_purge_and_delete_with_waiting_pull(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"], storage=StorageType.MEMORY)
    for i in range(5):
        await js.publish("s.a", b"%d" % i)
    psub = await js.pull_subscribe("s.a", "D")
    msgs = await psub.fetch(2, timeout=1)
    assert [m.data for m in msgs] == [b"0", b"1"]
    await js.purge_stream("S")
    info = await js.consumer_info("S", "D")
    assert info.num_ack_pending == 0 and info.num_pending == 0
    assert info.ack_floor.stream_seq == 5
    await js.publish("s.a", b"after")
    assert [m.data for m in await psub.fetch(5, timeout=1)] == [b"after"]
    # A pull waiting when the stream goes is told so.
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    req = json.dumps({"batch": 1, "expires": 5_000_000_000}).encode()
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.S.D", req, reply=inbox)
    await nc.flush()
    await asyncio.sleep(0.05)
    await js.delete_stream("S")
    m = await sub.next_msg(2)
    assert m.headers["Status"] == "409"
    assert m.headers["Description"] == "Consumer Deleted"


async def test_interest_retention_keeps_until_every_consumer_acks(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(
        name="I", subjects=["i.>"], retention=RetentionPolicy.INTEREST, storage=StorageType.MEMORY
    )
    a = await js.pull_subscribe("i.>", "A")
    b = await js.pull_subscribe("i.>", "B")
    for i in range(3):
        await js.publish("i.x", b"%d" % i)
    for m in await a.fetch(3, timeout=1):
        await m.ack_sync()
    assert (await js.stream_info("I")).state.messages == 3
    bm = await b.fetch(3, timeout=1)
    await bm[0].ack_sync()
    await bm[1].term()
    await asyncio.sleep(0.05)
    assert (await js.stream_info("I")).state.messages == 1
    await js.delete_consumer("I", "B")
    assert (await js.stream_info("I")).state.messages == 0


async def test_replay_original_keeps_the_gaps(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="R", subjects=["r.>"], storage=StorageType.MEMORY)
    for i in range(3):
        await js.publish("r.a", b"%d" % i)
        await asyncio.sleep(0.25)
    sub = await js.subscribe("r.a", config=ConsumerConfig(replay_policy=ReplayPolicy.ORIGINAL))
    times = []
    for _ in range(3):
        await sub.next_msg(3)
        times.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g > 0.15 for g in gaps), gaps


async def test_rate_limit(nc: Any) -> None:
    js = nc.jetstream()
    # The burst is the stream's max message size: after the first 500-byte message the
    # next one waits for the 1000 B/s budget (8000 bits per second).
    await js.add_stream(name="RL", subjects=["rl.>"], storage=StorageType.MEMORY, max_msg_size=600)
    for _ in range(3):
        await js.publish("rl.a", b"x" * 500)
    start = time.monotonic()
    sub = await js.subscribe("rl.a", config=ConsumerConfig(rate_limit_bps=8000))
    for _ in range(3):
        await sub.next_msg(5)
    assert time.monotonic() - start > 0.7


async def test_pinned_client_loses_the_pin_after_priority_timeout(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="PG", subjects=["pg.>"], storage=StorageType.MEMORY)
    for i in range(4):
        await js.publish("pg.a", b"%d" % i)
    # nats-py's ConsumerConfig has no priority fields: plain API request.
    cfg = {
        "durable_name": "PIN",
        "ack_policy": "explicit",
        "priority_policy": "pinned_client",
        "priority_groups": ["G"],
        "priority_timeout": 300_000_000,
    }
    resp = await nc.request(
        "$JS.API.CONSUMER.CREATE.PG.PIN", json.dumps({"stream_name": "PG", "config": cfg}).encode()
    )
    assert "error" not in json.loads(resp.data)
    adv = await nc.subscribe("$JS.EVENT.ADVISORY.CONSUMER.*.PG.PIN")

    async def pull(body: dict[str, Any]) -> Any:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.PG.PIN", json.dumps(body).encode(), reply=inbox)
        m = await sub.next_msg(2)
        await sub.unsubscribe()
        return m

    first = await pull({"batch": 1, "group": "G", "expires": 500_000_000})
    pin = first.headers["Nats-Pin-Id"]
    pinned = json.loads((await adv.next_msg(1)).data)
    assert (pinned["type"], pinned["pinned_id"], pinned["group"]) == (
        "io.nats.jetstream.advisory.v1.consumer_group_pinned",
        pin,
        "G",
    )
    other = await pull({"batch": 1, "group": "G", "no_wait": True})
    assert other.headers["Status"] == "404"
    again = await pull({"batch": 1, "group": "G", "no_wait": True, "id": pin})
    assert again.headers["Nats-Pin-Id"] == pin
    # Nobody asks with the pin for longer than priority_timeout: the pin goes.
    unpinned = json.loads((await adv.next_msg(2)).data)
    assert (unpinned["type"], unpinned["reason"]) == (
        "io.nats.jetstream.advisory.v1.consumer_group_unpinned",
        "timeout",
    )
    info = await nc.request("$JS.API.CONSUMER.INFO.PG.PIN", b"")
    assert "pinned_client_id" not in json.loads(info.data)["priority_groups"][0]
    newcomer = await pull({"batch": 1, "group": "G", "no_wait": True})
    assert newcomer.headers["Nats-Pin-Id"] not in ("", pin)
