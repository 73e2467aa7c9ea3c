"""JetStream streams through nats-py's JetStream and JetStreamManager APIs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import APIError, BadRequestError, NotFoundError

import natsd

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def srv(tmp_path: Path) -> AsyncIterator[natsd.Server]:
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path), http_port=-1
    ) as s:
        yield s


@pytest.fixture
async def nc(srv: natsd.Server) -> AsyncIterator[Any]:
    c = await nats.connect(srv.client_url)
    yield c
    await c.close()


@pytest.mark.parametrize("storage", [StorageType.FILE, StorageType.MEMORY])
async def test_create_publish_info(nc: Any, storage: StorageType) -> None:
    js = nc.jetstream()
    info = await js.add_stream(name="ORDERS", subjects=["orders.>"], storage=storage)
    assert info.config.name == "ORDERS"
    assert info.config.storage == storage
    acks = [await js.publish("orders.new", b"order %d" % i) for i in range(5)]
    assert [a.seq for a in acks] == [1, 2, 3, 4, 5]
    assert all(a.stream == "ORDERS" for a in acks)
    si = await js.stream_info("ORDERS")
    assert si.state.messages == 5
    assert si.state.first_seq == 1 and si.state.last_seq == 5
    msg = await js.get_msg("ORDERS", 3)
    assert msg.data == b"order 2" and msg.subject == "orders.new"


async def test_byte_accounting_matches_nats_server(nc: Any) -> None:
    # Same two messages nats-server counts as 44+66 (file) and 32+50 (memory) bytes.
    js = nc.jetstream()
    for st, name, expected in (("file", "SZF", 110), ("memory", "SZM", 82)):
        subj = "sz.file.a" if st == "file" else "sz.memory.a"
        await js.add_stream(name=name, subjects=[subj], storage=st)
        await js.publish(subj, b"hello")
        await js.publish(subj, b"hello", headers={"X": "y"})
        assert (await js.stream_info(name)).state.bytes == expected


async def test_dedup_and_expectations(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="D", subjects=["d.*"])
    a1 = await js.publish("d.x", b"1", headers={"Nats-Msg-Id": "m1"})
    a2 = await js.publish("d.x", b"1", headers={"Nats-Msg-Id": "m1"})
    assert a1.seq == a2.seq == 1
    assert a2.duplicate is True and not a1.duplicate
    with pytest.raises(APIError) as e:
        await js.publish("d.x", b"2", headers={"Nats-Expected-Last-Sequence": "7"})
    assert e.value.err_code == 10071
    ok = await js.publish("d.x", b"2", headers={"Nats-Expected-Last-Sequence": "1"})
    assert ok.seq == 2
    with pytest.raises(APIError) as e:
        await js.publish("d.y", b"3", headers={"Nats-Expected-Stream": "OTHER"})
    assert e.value.err_code == 10060
    with pytest.raises(APIError) as e:
        await js.publish("d.x", b"3", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
    assert e.value.err_code == 10071
    ok = await js.publish("d.x", b"3", headers={"Nats-Expected-Last-Subject-Sequence": "2"})
    assert ok.seq == 3


async def test_purge_delete_list(nc: Any) -> None:
    js = nc.jetstream()
    jsm = nc.jsm() if hasattr(nc, "jsm") else js
    await js.add_stream(name="P", subjects=["p.>"])
    for i in range(10):
        await js.publish(f"p.{i % 2}", b"%d" % i)
    assert await js.delete_msg("P", 2)
    with pytest.raises(NotFoundError):
        await js.get_msg("P", 2)
    await js.purge_stream("P", subject="p.0")
    si = await js.stream_info("P")
    assert si.state.messages == 4  # five p.1 messages, one of them deleted
    await js.purge_stream("P")
    si = await js.stream_info("P")
    assert si.state.messages == 0 and si.state.first_seq == 11
    names = await js.streams_info()
    assert [s.config.name for s in names] == ["P"]
    assert await js.delete_stream("P")
    with pytest.raises(NotFoundError):
        await jsm.stream_info("P")


async def test_errors_have_nats_codes(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="A", subjects=["a.>"])
    with pytest.raises(BadRequestError) as e:
        await js.add_stream(name="B", subjects=["a.b"])
    assert e.value.err_code == 10065  # subjects overlap
    with pytest.raises(NotFoundError) as e2:
        await js.stream_info("NOPE")
    assert e2.value.err_code == 10059
    r = await nc.request("$JS.API.STREAM.CREATE.X", b"not json", timeout=2)
    assert b'"err_code":10025' in r.data


async def test_account_info(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(name="I", subjects=["i"], storage="memory")
    await js.publish("i", b"x")
    info = await js.account_info()
    assert info.streams == 1
    assert info.memory == 1 + 1 + 16


async def test_restart_keeps_acknowledged_messages(tmp_path: Path) -> None:
    payloads = [bytes([i % 256]) * (i * 7 % 300) for i in range(200)]
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path)) as s:
        nc = await nats.connect(s.client_url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r.*"])
        futs = [js.publish(f"r.{i % 3}", p, headers={"N": str(i)}) for i, p in enumerate(payloads)]
        acks = await asyncio.gather(*futs)
        assert sorted(a.seq for a in acks) == list(range(1, 201))
        await js.delete_msg("R", 5)
        await nc.close()
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path)) as s:
        nc = await nats.connect(s.client_url)
        js = nc.jetstream()
        si = await js.stream_info("R")
        assert si.state.messages == 199
        for seq in (1, 4, 6, 100, 200):
            m = await js.get_msg("R", seq)
            i = int(m.headers["N"])
            assert (m.data or b"") == payloads[i]
        with pytest.raises(NotFoundError):
            await js.get_msg("R", 5)
        ack = await js.publish("r.0", b"after")
        assert ack.seq == 201
        await nc.close()


async def test_direct_get(nc: Any) -> None:
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name="DG", subjects=["dg.>"], allow_direct=True))
    await js.publish("dg.a", b"one")
    await js.publish("dg.b", b"two")
    await js.publish("dg.a", b"three")
    m = await js.get_msg("DG", subject="dg.a", direct=True)
    assert m.data == b"three" and m.seq == 3
    m = await js.get_msg("DG", 2, direct=True)
    assert m.data == b"two" and m.subject == "dg.b"


async def test_jsz(srv: natsd.Server, nc: Any) -> None:
    import json
    import urllib.request

    js = nc.jetstream()
    await js.add_stream(name="J", subjects=["j"])
    await js.publish("j", b"x")

    def fetch() -> Any:
        with urllib.request.urlopen(srv.monitor_url + "/jsz?accounts=true") as r:
            return json.loads(r.read())

    data = await asyncio.get_running_loop().run_in_executor(None, fetch)
    assert data["streams"] == 1 and data["messages"] == 1
    assert data["account_details"][0]["name"] == "$G"
    assert (data["reserved_memory"], data["reserved_storage"]) == (0, 0)
    # Streams with max_bytes reserve it (nats-server: /jsz and account info alike).
    await js.add_stream(name="RF", subjects=["rf"], max_bytes=1_000_000)
    await js.add_stream(name="RM", subjects=["rm"], max_bytes=5000, storage="memory")
    data = await asyncio.get_running_loop().run_in_executor(None, fetch)
    assert (data["reserved_memory"], data["reserved_storage"]) == (5000, 1_000_000)
    info = json.loads((await nc.request("$JS.API.INFO", b"", timeout=2)).data)
    assert (info["reserved_memory"], info["reserved_storage"]) == (5000, 1_000_000)


async def test_jsz_and_metrics_show_copies(srv: natsd.Server, nc: Any) -> None:
    """/jsz?streams=true shows a mirror's ``mirror`` block and a sourcing stream's
    ``sources`` (nats-server's StreamDetail); /metrics has their lag and activity."""
    import json
    import urllib.request

    js = nc.jetstream()
    await js.add_stream(name="O", subjects=["o.>"])
    for i in range(3):
        await js.publish("o.x", b"%d" % i)
    mirror = {"name": "M", "mirror": {"name": "O"}}
    await nc.request("$JS.API.STREAM.CREATE.M", json.dumps(mirror).encode())
    body = {"name": "S", "sources": [{"name": "O", "filter_subject": "o.x"}]}
    await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(body).encode())

    def fetch(path: str) -> bytes:
        with urllib.request.urlopen(srv.monitor_url + path) as r:
            return bytes(r.read())

    loop = asyncio.get_running_loop()
    for _ in range(50):
        raw = await loop.run_in_executor(None, fetch, "/jsz?accounts=true&streams=true")
        data = json.loads(raw)
        detail = {d["name"]: d for d in data["account_details"][0]["stream_detail"]}
        if detail["M"]["state"]["messages"] == 3 and detail["S"]["state"]["messages"] == 3:
            break
        await asyncio.sleep(0.1)
    assert detail["M"]["mirror"]["name"] == "O" and detail["M"]["mirror"]["active"] >= 0
    assert [(x["name"], x["lag"], x["filter_subject"]) for x in detail["S"]["sources"]] == [
        ("O", 0, "o.x")
    ]
    assert "mirror" not in detail["O"] and "sources" not in detail["O"]
    text = (await loop.run_in_executor(None, fetch, "/metrics")).decode()
    lags = sorted(ln for ln in text.splitlines() if ln.startswith("jetstream_stream_source_lag{"))
    assert len(lags) == 2 and all('origin="O"' in ln and ln.endswith(" 0.0") for ln in lags)
    assert any('stream="M"' in ln for ln in lags) and any('stream="S"' in ln for ln in lags)
    assert "jetstream_stream_source_active_seconds{" in text


async def test_stream_advisories(nc: Any) -> None:
    sub = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.>")
    audit = await nc.subscribe("$JS.EVENT.ADVISORY.API")
    js = nc.jetstream()
    await js.add_stream(name="ADV", subjects=["adv"])
    await js.update_stream(StreamConfig(name="ADV", subjects=["adv", "adv2"]))
    await js.delete_stream("ADV")
    import json

    seen = []
    for _ in range(3):
        m = await sub.next_msg(timeout=2)
        doc = json.loads(m.data)
        assert doc["type"] == "io.nats.jetstream.advisory.v1.stream_action"
        seen.append((m.subject, doc["stream"], doc["action"]))
    assert seen == [
        ("$JS.EVENT.ADVISORY.STREAM.CREATED.ADV", "ADV", "create"),
        ("$JS.EVENT.ADVISORY.STREAM.UPDATED.ADV", "ADV", "update"),
        ("$JS.EVENT.ADVISORY.STREAM.DELETED.ADV", "ADV", "delete"),
    ]
    first = json.loads((await audit.next_msg(timeout=2)).data)
    assert first["type"] == "io.nats.jetstream.advisory.v1.api_audit"
    assert first["subject"] == "$JS.API.STREAM.CREATE.ADV"
    assert json.loads(first["response"])["type"].endswith("stream_create_response")


async def test_stream_metrics(srv: natsd.Server, nc: Any) -> None:
    import urllib.request

    js = nc.jetstream()
    await js.add_stream(name="MET", subjects=["met"])
    await js.publish("met", b"x")

    def fetch() -> str:
        with urllib.request.urlopen(srv.monitor_url + "/metrics") as r:
            return str(r.read().decode())

    text = await asyncio.get_running_loop().run_in_executor(None, fetch)
    line = next(x for x in text.splitlines() if x.startswith("jetstream_stream_messages{"))
    assert 'stream="MET"' in line and line.endswith(" 1.0")


async def test_consumer_lag_metrics(srv: natsd.Server, nc: Any) -> None:
    """/metrics has each consumer's lag: what it has yet to deliver, what waits for an ack,
    redeliveries, waiting pulls, how long since it delivered; at most MAX_CONSUMER_SERIES
    consumers one by one, the rest counted."""
    import urllib.request

    from natsd.monitor import metrics

    js = nc.jetstream()
    await js.add_stream(name="LAG", subjects=["lag.>"])
    for i in range(10):
        await js.publish("lag.x", b"%d" % i)
    await js.add_consumer("LAG", durable_name="SLOW", ack_policy="explicit")
    await js.add_consumer("LAG", durable_name="IDLE", ack_policy="explicit")
    sub = await js.pull_subscribe("lag.>", durable="SLOW", stream="LAG")
    msgs = await sub.fetch(4)
    await msgs[0].ack()
    await nc.flush()

    def fetch() -> dict[str, float]:
        with urllib.request.urlopen(srv.monitor_url + "/metrics") as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line.startswith("jetstream_consumer_"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    got = await asyncio.get_running_loop().run_in_executor(None, fetch)

    def g(name: str, consumer: str) -> float:
        return next(v for k, v in got.items()
                    if k.startswith(f"jetstream_consumer_{name}{{")
                    and f'consumer="{consumer}"' in k and 'stream="LAG"' in k)  # fmt: skip

    assert (g("num_pending", "SLOW"), g("num_ack_pending", "SLOW")) == (6.0, 3.0)
    assert (g("num_pending", "IDLE"), g("num_ack_pending", "IDLE")) == (10.0, 0.0)
    assert (g("delivered_stream_seq", "SLOW"), g("ack_floor_stream_seq", "SLOW")) == (4.0, 1.0)
    assert 0.0 <= g("last_active_seconds", "SLOW") < 60
    assert g("last_active_seconds", "IDLE") == -1
    omitted = f'jetstream_consumer_series_omitted{{server_id="{srv.server_id}"}}'
    assert got[omitted] == 0.0
    old = metrics.MAX_CONSUMER_SERIES
    metrics.MAX_CONSUMER_SERIES = 1
    try:
        got = await asyncio.get_running_loop().run_in_executor(None, fetch)
    finally:
        metrics.MAX_CONSUMER_SERIES = old
    assert sum(1 for k in got if k.startswith("jetstream_consumer_num_pending{")) == 1
    assert got[omitted] == 1.0


async def test_republish(nc: Any) -> None:
    from nats.js.api import RePublish

    js = nc.jetstream()
    sub = await nc.subscribe("repub.>")
    await js.add_stream(
        StreamConfig(
            name="RP", subjects=["orders.*"], republish=RePublish(src="orders.*", dest="repub.$1")
        )
    )
    await js.publish("orders.new", b"payload", headers={"X": "1"})
    m = await sub.next_msg(timeout=2)
    assert m.subject == "repub.new" and m.data == b"payload"
    assert m.headers["Nats-Stream"] == "RP" and m.headers["Nats-Sequence"] == "1"
    assert m.headers["Nats-Subject"] == "orders.new" and m.headers["X"] == "1"
    assert m.headers["Nats-Last-Sequence"] == "0"


async def test_api_request_on_a_closed_store_gets_an_error(srv: natsd.Server, nc: Any) -> None:
    # A store closed under a request (as during shutdown) is answered with an API error; the
    # requester's connection stays up.
    js = nc.jetstream()
    await js.add_stream(name="CLOSED", subjects=["closed.>"])
    engine = srv.jetstream
    stream = next(iter(engine.accounts.values())).streams["CLOSED"]
    stream.store.stop()
    with pytest.raises(APIError) as exc:
        await js.stream_info("CLOSED")
    assert exc.value.err_code == 10051
    assert exc.value.code == 500
    names = await nc.request("$JS.API.STREAM.NAMES", b"")
    assert b'"CLOSED"' in names.data
