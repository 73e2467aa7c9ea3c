"""Consumers with ``ack_policy: flow_control`` (nats-server 2.14), against nats-server.

Such a push consumer is acknowledged only through its flow control: the client answers a
``100 FlowControl Request`` with ``Nats-Last-Consumer`` / ``Nats-Last-Stream`` headers and
everything up to that stream sequence is acknowledged, as with ``ack_policy: all``. The
server asks when ``max_ack_pending`` messages are out, and at an idle heartbeat while
anything is pending. Acks sent to a message's ``$JS.ACK`` reply reach nobody. The config
takes nats-server's defaults (flow control on, a 1 s heartbeat, no ack wait) and its
errors; the stored config needs API level 4.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from proc_cluster import ProcCluster

from .consumer_scenarios import ConsumerRecorder, Frame, consumer_server_pair, entry
from .harness import ServerPair
from .r3_helpers import ask, on_three
from .test_consumers import SEC, check

pytestmark = [pytest.mark.differential, pytest.mark.timeout(90)]

FC = {"ack_policy": "flow_control", "deliver_subject": "dlv.fc", "max_ack_pending": 3}


@pytest.fixture(scope="module")
def cpair() -> Iterator[ServerPair]:
    require_nats_server()
    with consumer_server_pair() as pair:
        yield pair


async def _until_fc(
    c: ConsumerRecorder, sid: int, want: int, timeout: float = 5.0
) -> tuple[list[Frame], Frame]:
    """Take ``want`` messages and then the flow control request that follows them (idle
    heartbeats are passed over)."""
    msgs: list[Frame] = []
    fc: Frame | None = None
    for _ in range(50):
        for f in await c.conn.wait_frames(sid, 1, timeout):
            if not f.status:
                msgs.append(f)
            elif "FlowControl" in f.status:
                fc = f
        if len(msgs) >= want and fc is not None:
            break
    assert fc is not None, f"no flow control request after {[m.data for m in msgs]}"
    return msgs, fc


def _payloads(msgs: list[Frame]) -> list[str]:
    return [m.data.decode() for m in msgs]


async def test_acknowledged_through_flow_control(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 5)
        sid = c.sub("dlv.fc")
        await c.create("create", "S", {"durable_name": "C", **FC})
        # max_ack_pending messages, then the request
        got, fc = await _until_fc(c, sid, 3)
        c.note("first window", _payloads(got))
        await c.info("stalled", "S", "C")
        # an ack on the message's own reply subject reaches nobody
        await c.ack("plain ack", got[0], timeout=0.5)
        await c.info("after plain ack", "S", "C")
        # the answer acknowledges up to the stream sequence it names; two more go out and
        # max_ack_pending is reached again
        stale = fc.reply
        c.conn.pub(fc.reply, b"", headers={"Nats-Last-Consumer": "2", "Nats-Last-Stream": "2"})
        got, fc = await _until_fc(c, sid, 2)
        c.note("second window", _payloads(got))
        await c.info("answered 2", "S", "C")
        # an answer to a request that is not the latest is ignored
        c.conn.pub(stale, b"", headers={"Nats-Last-Consumer": "5", "Nats-Last-Stream": "5"})
        await c.conn.ping()
        await c.info("stale answer", "S", "C")
        c.conn.pub(fc.reply, b"", headers={"Nats-Last-Consumer": "5", "Nats-Last-Stream": "5"})
        await c.conn.ping()
        await c.await_info("S", "C", "num_ack_pending", 0)
        await c.info("answered 5", "S", "C")
        # fewer than max_ack_pending out: the request comes with the idle heartbeat; an
        # answer without the headers acknowledges nothing
        await c.pub("s.a", "m6")
        got, fc = await _until_fc(c, sid, 1)
        c.note("third window", _payloads(got))
        c.conn.pub(fc.reply, b"")
        await c.conn.ping()
        await c.info("answered without headers", "S", "C")

    log = await check(cpair, sc)
    assert entry(log, "first window") == ["m1", "m2", "m3"]
    assert entry(log, "stalled")["num_ack_pending"] == 3
    assert entry(log, "second window") == ["m4", "m5"]
    assert entry(log, "answered 2")["ack_floor"]["stream_seq"] == 2
    assert entry(log, "answered 5")["ack_floor"]["stream_seq"] == 5


async def test_config_defaults_errors_and_level(cpair: ServerPair) -> None:
    base = {"durable_name": "D", "deliver_subject": "dlv.d", "ack_policy": "flow_control"}

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.stream("W", retention="workqueue")
        keys = ("config",)
        await c.create("defaults", "S", base, keys=keys)
        await c.create("on a workqueue", "W", {**base, "durable_name": "W"}, keys=keys)
        for label, extra in (
            ("pull", {"deliver_subject": None}),
            ("ack wait", {"ack_wait": 5 * SEC}),
            ("backoff", {"backoff": [SEC]}),
            ("max deliver", {"max_deliver": 3}),
            ("max ack pending -1", {"max_ack_pending": -1}),
            ("heartbeat 2s", {"idle_heartbeat": 2 * SEC, "flow_control": True}),
        ):
            cfg = {k: v for k, v in {**base, "durable_name": "E", **extra}.items() if v is not None}
            await c.create(label, "S", cfg, keys=keys)
        pedantic = {"stream_name": "S", "config": {**base, "durable_name": "P"}, "pedantic": True}
        await c.req("pedantic without flow control", "CONSUMER.CREATE.S.P", pedantic)
        await c.create(
            "update to explicit", "S", {**base, "ack_policy": "explicit"}, keys=("error",)
        )

    log = await check(cpair, sc)
    cfg = entry(log, "defaults")["config"]
    assert cfg["flow_control"] is True and cfg["idle_heartbeat"] == SEC
    assert cfg["metadata"]["_nats.req.level"] == "4"


# ----------------------------------------------------------------------------- R3
async def _flow_controlled_r3(c: ProcCluster) -> dict[str, Any]:
    """An R3 stream and consumer: one window answered, the next left open while the
    consumer's leader steps down; the new leader asks again (nothing is delivered twice)
    and the answer acknowledges the rest."""
    nc = await nats.connect(c[0].url, allow_reconnect=False)
    cfg = {"name": "FCR", "subjects": ["fcr.>"], "num_replicas": 3}
    await ask(nc, "$JS.API.STREAM.CREATE.FCR", cfg)
    for i in range(1, 7):
        await ask(nc, "fcr.a", f"m{i}".encode())
    frames: asyncio.Queue[Any] = asyncio.Queue()

    async def on_msg(m: Any) -> None:
        await frames.put(m)

    await nc.subscribe("dlv.fcr", cb=on_msg)
    ccfg = {**FC, "durable_name": "C", "deliver_subject": "dlv.fcr"}
    await ask(nc, "$JS.API.CONSUMER.CREATE.FCR.C", {"stream_name": "FCR", "config": ccfg})
    seen: list[str] = []

    async def window(want: int) -> str:
        """Take ``want`` messages and then the next flow control request's reply."""
        got = 0
        while True:
            m = await asyncio.wait_for(frames.get(), 10)
            status = (m.headers or {}).get("Status", "")
            if not status:
                seen.append(m.data.decode())
                got += 1
            elif status == "100" and m.reply and got >= want:
                return str(m.reply)

    reply = await window(3)
    await nc.publish(reply, b"", headers={"Nats-Last-Consumer": "3", "Nats-Last-Stream": "3"})
    await window(3)  # left unanswered
    # natsd's consumer leader commits its state 100 ms after a change (cluster/consumers.py:
    # what a stepdown comes before is delivered again); nats-server proposes each ack
    await asyncio.sleep(0.5)
    await ask(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.FCR.C")
    reply = await window(0)  # the new leader asks for what is out
    await nc.publish(reply, b"", headers={"Nats-Last-Consumer": "6", "Nats-Last-Stream": "6"})
    info: dict[str, Any] = {}
    for _ in range(100):
        info = await ask(nc, "$JS.API.CONSUMER.INFO.FCR.C")
        # (nats-server reports the ack floor once its group has applied it, a little
        # after the pending count)
        if info.get("num_ack_pending") == 0 and info["ack_floor"]["stream_seq"] == 6:
            break
        await asyncio.sleep(0.1)
    await nc.close()
    return {
        "seen": seen,
        "state": {k: info.get(k) for k in ("ack_floor", "num_ack_pending", "num_pending")},
    }


def test_an_r3_consumer_across_a_leader_change(tmp_path: Path) -> None:
    require_nats_server()
    ref = on_three("nats-server", tmp_path, _flow_controlled_r3)
    got = on_three("natsd", tmp_path, _flow_controlled_r3)
    assert ref["seen"] == [f"m{i}" for i in range(1, 7)]
    assert ref["state"]["num_ack_pending"] == 0
    for s in (ref, got):
        s["state"]["ack_floor"].pop("last_active", None)
    assert got == ref
