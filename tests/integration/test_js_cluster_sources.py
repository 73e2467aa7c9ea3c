"""Mirrors and sources on a three-server natsd cluster, in process, driven by nats-py: the
copy runs on the copying stream's leader (an R1 stream's server, or a replicated stream's
group leader) and reaches origins on other servers through the routes; an R3 mirror
proposes each message at its origin's sequence and time, an R3 sourcing stream as a
publish of its own; after the copying stream's leader is stopped, the new leader goes on
from its store, with nothing lost and nothing copied twice."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, store_messages, until
from embedded_cluster import api_request as _req
from embedded_cluster import publish_acked as _publish
from embedded_cluster import replica_leader as _leader
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

pytestmark = pytest.mark.timeout(120)


def _copied(
    trio: EmbeddedJsCluster, name: str, stream: str
) -> list[tuple[int, str, bytes, int, bytes]]:
    js = trio.servers[name].jetstream
    s = js.accounts["$G"].streams.get(stream) if js is not None and "$G" in js.accounts else None
    return store_messages(s.store) if s is not None else []


async def _messages(nc: Any, stream: str) -> list[dict[str, Any]]:
    info = await _req(nc, f"$JS.API.STREAM.INFO.{stream}")
    out = []
    for seq in range(info["state"]["first_seq"], info["state"]["last_seq"] + 1):
        got = await _req(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in got:
            m = got["message"]
            m["data"] = base64.b64decode(m.get("data", "")).decode()
            out.append(m)
    return out


async def _until_messages(nc: Any, stream: str, n: int, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    info: dict[str, Any] = {}
    while True:
        try:
            info = await _req(nc, f"$JS.API.STREAM.INFO.{stream}", timeout=1.0)
        except (NoRespondersError, NatsTimeoutError):
            pass  # (no leader yet)
        if info.get("state", {}).get("messages", 0) >= n:
            return
        if loop.time() - t0 > timeout:
            raise AssertionError(f"{stream}: {info}")
        await asyncio.sleep(0.1)


async def _stop_leader(trio: EmbeddedJsCluster, stream: str) -> tuple[str, list[str]]:
    """Stop ``stream``'s leader: its name, and the servers left."""
    leader = _leader(trio, stream)
    assert leader
    await trio.stop(leader)
    return leader, [n for n in trio.names if n != leader]


async def test_r3_mirror_and_sources_across_a_leader_stop(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n1"))
    try:
        for name in ("A", "B"):
            cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": 3}
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
        for i in range(10):  # (the origins have their leaders)
            assert "error" not in await _publish(nc, "a.x", b"a%d" % i)
            assert "error" not in await _publish(nc, "b.x", b"b%d" % i)
        m = {"name": "M", "mirror": {"name": "A"}, "num_replicas": 3}
        out = await _req(nc, "$JS.API.STREAM.CREATE.M", m)
        assert "error" not in out, out
        s = {"name": "S", "sources": [{"name": "A"}, {"name": "B"}], "num_replicas": 3}
        out = await _req(nc, "$JS.API.STREAM.CREATE.S", s)
        assert "error" not in out, out
        r1 = {"name": "S1", "sources": [{"name": "A"}], "num_replicas": 1}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S1", r1)
        for i in range(10, 20):
            assert "error" not in await _publish(nc, "a.x", b"a%d" % i)
            assert "error" not in await _publish(nc, "b.x", b"b%d" % i)
        await _until_messages(nc, "M", 20)
        await _until_messages(nc, "S", 40)
        await _until_messages(nc, "S1", 20)
    finally:
        await nc.close()
    # the mirror and the sourcing stream lose their leaders
    stopped = set()
    for stream in ("M", "S"):
        leader = _leader(trio, stream)
        assert leader
        if leader not in stopped and len(stopped) < 1:
            await trio.stop(leader)
            stopped.add(leader)
    left = [n for n in trio.names if n not in stopped]
    nc = await nats.connect(trio.url(left[0]))
    try:
        for i in range(20, 30):
            assert "error" not in await _publish(nc, "a.x", b"a%d" % i, within=15)
            assert "error" not in await _publish(nc, "b.x", b"b%d" % i, within=15)
        await _until_messages(nc, "M", 30)
        await _until_messages(nc, "S", 60)
        await asyncio.sleep(1.0)  # (anything copied twice would show by now)
        origin = await _messages(nc, "A")
        mirror = await _messages(nc, "M")
        assert [(m["seq"], m["subject"], m["data"], m["time"]) for m in mirror] == [
            (m["seq"], m["subject"], m["data"], m["time"]) for m in origin
        ]
        sourced = await _messages(nc, "S")
        assert len(sourced) == 60
        assert sorted(m["data"] for m in sourced) == sorted(
            [f"a{i}" for i in range(30)] + [f"b{i}" for i in range(30)]
        )
        info = await _req(nc, "$JS.API.STREAM.INFO.S")
        assert sorted(b["name"] for b in info["sources"]) == ["A", "B"]
        assert "mirror" in await _req(nc, "$JS.API.STREAM.INFO.M")
    finally:
        await nc.close()
    # the stopped server comes back and its replicas catch up to the same contents
    for name in stopped:
        await trio.start(name)
        await until(lambda n=name: len(_copied(trio, n, "S")) == 60, timeout=30)
        await until(lambda n=name: len(_copied(trio, n, "M")) == 30, timeout=30)
    for stream in ("M", "S"):
        contents = [_copied(trio, n, stream) for n in trio.names]
        assert contents[0] == contents[1] == contents[2], stream


async def test_r3_counter_aggregates_r3_counters(trio: EmbeddedJsCluster) -> None:
    """An R3 counter stream sourcing two R3 counter streams: its leader adds what each
    origin subject's value moved by; after its leader is stopped the new one goes on from
    the Nats-Counter-Sources it holds."""
    nc = await nats.connect(trio.url("n1"))
    try:
        for name in ("C1", "C2"):
            cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "allow_msg_counter": True,
                   "num_replicas": 3}  # fmt: skip
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            ack = await _publish(nc, f"{name.lower()}.n", b"", {"Nats-Incr": "1"})
            assert "error" not in ack, ack
        agg = {"name": "AGG", "allow_msg_counter": True, "num_replicas": 3, "sources": [
            {"name": "C1", "subject_transforms": [{"src": "c1.>", "dest": "agg.>"}]},
            {"name": "C2", "subject_transforms": [{"src": "c2.>", "dest": "agg.>"}]},
        ]}  # fmt: skip
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.AGG", agg)
        for _ in range(10):
            await _publish(nc, "c1.n", b"", {"Nats-Incr": "3"})
            await _publish(nc, "c2.n", b"", {"Nats-Incr": "-1"})
        await _until_messages(nc, "AGG", 22)
    finally:
        await nc.close()
    leader = _leader(trio, "AGG")
    await trio.stop(leader)
    left = [n for n in trio.names if n != leader]
    nc = await nats.connect(trio.url(left[0]))
    try:
        for _ in range(5):
            await _publish(nc, "c1.n", b"", {"Nats-Incr": "10"}, within=15)
        await _until_messages(nc, "AGG", 27)
        await asyncio.sleep(1.0)
        last = await _req(nc, "$JS.API.STREAM.MSG.GET.AGG", {"last_by_subj": "agg.n"})
        value = base64.b64decode(last["message"]["data"])
        # 1 + 30 + 50 from C1, 1 - 10 from C2
        assert value == b'{"val":"72"}', value
        info = await _req(nc, "$JS.API.STREAM.INFO.AGG")
        assert info["state"]["messages"] == 27
    finally:
        await nc.close()


async def test_r3_mirror_keeps_the_origins_gaps(trio: EmbeddedJsCluster) -> None:
    """Origin messages deleted before an R3 mirror copies them are deleted sequences of the
    mirror on every replica (the next mirrored entry's sequence leaves the gap), and a
    mirror of an origin whose first messages are gone starts at the origin's first."""
    nc = await nats.connect(trio.url("n2"))
    try:
        cfg = {"name": "O", "subjects": ["o.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.O", cfg)
        for i in range(6):
            assert "error" not in await _publish(nc, "o.x", b"%d" % i)
        for seq in (1, 2, 4):
            out = await _req(nc, "$JS.API.STREAM.MSG.DELETE.O", {"seq": seq, "no_erase": True})
            assert out.get("success") is True, out
        m = {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.M", m)
        await _until_messages(nc, "M", 3)
        assert "error" not in await _publish(nc, "o.x", b"6")
        await _until_messages(nc, "M", 4)
        info = await _req(nc, "$JS.API.STREAM.INFO.M", {"deleted_details": True})
        st = info["state"]
        assert (st["messages"], st["first_seq"], st["last_seq"]) == (4, 3, 7), st
        assert st.get("deleted") == [4], st
    finally:
        await nc.close()
    await until(lambda: all(len(_copied(trio, n, "M")) == 4 for n in trio.names), timeout=15)
    contents = [_copied(trio, n, "M") for n in trio.names]
    assert contents[0] == contents[1] == contents[2]
    assert [c[0] for c in contents[0]] == [3, 5, 6, 7]


async def test_r3_updates_while_copying(trio: EmbeddedJsCluster) -> None:
    """Updates of R3 copies on their leader: a sourcing stream given another subject while
    it copies copies nothing twice; a mirror promoted by an update without ``mirror``
    takes publishes on its own subject."""
    nc = await nats.connect(trio.url("n3"))
    try:
        cfg = {"name": "O", "subjects": ["o.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.O", cfg)
        assert "error" not in await _publish(nc, "o.x", b"first")
        s = {"name": "S", "subjects": ["s.a"], "sources": [{"name": "O"}], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S", s)
        m = {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.M", m)
        await _until_messages(nc, "S", 1)
        await _until_messages(nc, "M", 1)

        async def load() -> None:
            for i in range(200):
                await _publish(nc, "o.x", b"%d" % i)

        task = asyncio.create_task(load())
        await asyncio.sleep(0.2)
        out = await _req(nc, "$JS.API.STREAM.UPDATE.S", {**s, "subjects": ["s.a", "s.b"]})
        assert "error" not in out, out
        await task
        await _until_messages(nc, "S", 201)
        await asyncio.sleep(1.0)  # (anything copied twice would show by now)
        sourced = await _messages(nc, "S")
        assert len(sourced) == 201 and len({m["data"] for m in sourced}) == 201
        await _until_messages(nc, "M", 201)
        info = await _req(nc, "$JS.API.STREAM.INFO.M")
        promoted = {**info["config"], "subjects": ["m.own"]}
        del promoted["mirror"]
        out = await _req(nc, "$JS.API.STREAM.UPDATE.M", promoted)
        assert "error" not in out and "mirror" not in out["config"], out
        ack = await _publish(nc, "m.own", b"mine")
        assert ack.get("stream") == "M" and ack.get("seq") == 202, ack
    finally:
        await nc.close()


async def test_r3_durable_source_of_an_r3_workqueue(trio: EmbeddedJsCluster) -> None:
    """ADR-60 on replicated streams: an R3 workqueue origin with a durable flow-control
    consumer (replicated too), an R3 stream sourcing through it; its leader stops, the new
    one resets the consumer and goes on; every origin message once, the origin drained."""
    nc = await nats.connect(trio.url("n1"))
    try:
        w = {"name": "W", "subjects": ["w.>"], "retention": "workqueue", "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.W", w)
        c = {"durable_name": "C", "name": "C", "deliver_subject": "dlv.c", "num_replicas": 3,
             "ack_policy": "flow_control", "flow_control": True, "idle_heartbeat": 1_000_000_000}
        assert "error" not in await _publish(nc, "w.x", b"w0")  # (W has its leader)
        out = await _req(nc, "$JS.API.CONSUMER.CREATE.W.C", {"stream_name": "W", "config": c})
        assert "error" not in out, out
        s = {"name": "S", "num_replicas": 3,
             "sources": [{"name": "W", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}]}
        out = await _req(nc, "$JS.API.STREAM.CREATE.S", s)
        assert "error" not in out, out
        for i in range(1, 20):
            assert "error" not in await _publish(nc, "w.x", b"w%d" % i)
        await _until_messages(nc, "S", 20)
    finally:
        await nc.close()
    _leader_gone, left = await _stop_leader(trio, "S")
    nc = await nats.connect(trio.url(left[0]))
    try:
        for i in range(20, 30):
            assert "error" not in await _publish(nc, "w.x", b"w%d" % i, within=15)
        await _until_messages(nc, "S", 30)

        left_in_w = -1
        for _ in range(200):
            info = await _req(nc, "$JS.API.STREAM.INFO.W", timeout=1.0)
            left_in_w = info.get("state", {}).get("messages", -1)
            if left_in_w == 0:
                break
            await asyncio.sleep(0.1)
        assert left_in_w == 0
        await asyncio.sleep(1.0)  # (anything copied twice would show by now)
        sourced = await _messages(nc, "S")
        assert sorted(m["data"] for m in sourced) == sorted(f"w{i}" for i in range(30))
    finally:
        await nc.close()


async def _until_consumers(nc: Any, stream: str, n: int, timeout: float = 20.0) -> None:
    """Wait until ``stream`` has ``n`` consumers."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        try:
            names = (await _req(nc, f"$JS.API.CONSUMER.NAMES.{stream}", timeout=1.0)).get(
                "consumers"
            ) or []
        except (NoRespondersError, NatsTimeoutError):
            names = []
        if len(names) >= n:
            return
        assert loop.time() < end, f"{stream}: {names}"
        await asyncio.sleep(0.1)


async def test_r3_copies_of_an_r3_workqueue_keep_everything(trio: EmbeddedJsCluster) -> None:
    """ADR-60's automatic upgrade on replicated streams: an R3 mirror and an R3 sourcing
    stream of an R3 workqueue each get a durable flow-control consumer (``JS_MIRROR_`` /
    ``JS_SRC_``) the origin's group keeps; the copies' leaders stop, the new ones go on from
    those consumers; each copy holds every message once and the origin drains."""
    nc = await nats.connect(trio.url("n1"))
    try:
        w = {"name": "W", "subjects": ["w.>"], "retention": "workqueue", "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.W", w)
        s = {"name": "S", "num_replicas": 3, "sources": [{"name": "W"}]}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S", s)
        m = {"name": "M", "num_replicas": 3, "mirror": {"name": "W"}}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.M", m)
        # both copies' consumers first: a workqueue gives a message away once one consumer
        # acknowledges it, so a copy whose consumer came later would never see it
        await _until_consumers(nc, "W", 2)
        for i in range(10):
            assert "error" not in await _publish(nc, "w.x", b"w%d" % i)
        await _until_messages(nc, "S", 10)
        await _until_messages(nc, "M", 10)
        names = (await _req(nc, "$JS.API.CONSUMER.NAMES.W"))["consumers"]
        assert sorted(n.split("_")[1] for n in names) == ["MIRROR", "SRC"], names
    finally:
        await nc.close()
    stopped = _leader(trio, "S")
    assert stopped
    await trio.stop(stopped)
    nc = await nats.connect(trio.url(next(n for n in trio.names if n != stopped)))
    try:
        for i in range(10, 20):
            assert "error" not in await _publish(nc, "w.x", b"w%d" % i, within=15)
        await _until_messages(nc, "S", 20)
        await _until_messages(nc, "M", 20)
        await asyncio.sleep(1.0)  # (anything copied twice would show by now)
        want = sorted(f"w{i}" for i in range(20))
        assert sorted(m["data"] for m in await _messages(nc, "S")) == want
        assert sorted(m["data"] for m in await _messages(nc, "M")) == want
        left = -1
        for _ in range(100):
            left = (await _req(nc, "$JS.API.STREAM.INFO.W"))["state"]["messages"]
            if left == 0:
                break
            await asyncio.sleep(0.1)
        assert left == 0
    finally:
        await nc.close()


async def test_r3_source_positions_survive_a_purge_and_a_leader_stop(
    trio: EmbeddedJsCluster,
) -> None:
    """Every replica's store keeps where the source is (nats-server 2.15's SourcesState):
    the sourcing stream purged, its leader stopped, the new leader goes on after what was
    copied (not from a time, not from the origin's start), and every replica, the stopped
    one after its restart too, holds the same positions."""
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "A", "subjects": ["a.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.A", cfg)
        for i in range(10):
            assert "error" not in await _publish(nc, "a.x", b"a%d" % i)
        s = {"name": "S", "sources": [{"name": "A"}], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S", s)
        await _until_messages(nc, "S", 10)
        assert (await _req(nc, "$JS.API.STREAM.PURGE.S"))["success"]
    finally:
        await nc.close()
    leader, left = await _stop_leader(trio, "S")
    nc = await nats.connect(trio.url(left[0]))
    try:
        for i in range(10, 15):
            assert "error" not in await _publish(nc, "a.x", b"a%d" % i, within=15)
        await _until_messages(nc, "S", 5)
        await asyncio.sleep(1.0)  # (anything copied twice would show by now)
        assert [m["data"] for m in await _messages(nc, "S")] == [f"a{i}" for i in range(10, 15)]
    finally:
        await nc.close()
    await trio.start(leader)

    def positions(name: str) -> dict[str, tuple[int, str]]:
        js = trio.servers[name].jetstream
        st = js.accounts["$G"].streams.get("S") if js is not None else None
        return st.store.sources_state() if st is not None else {}

    await until(lambda: len(_copied(trio, leader, "S")) == 5, timeout=30)
    want = positions(left[0])
    assert [p[0] for p in want.values()] == [15]
    assert all(positions(n) == want for n in trio.names)
