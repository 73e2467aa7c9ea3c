"""HTTP monitoring endpoints while real clients are connected."""

from __future__ import annotations

import asyncio
import json

from .conftest import get_json, http_get, only_natsd, wait_for


async def test_varz(server, connect) -> None:
    before = await get_json(server.monitor_url + "/varz")
    assert before["port"] == server.port
    assert before["max_payload"] == 1024 * 1024
    assert before["connections"] == 0
    assert before["server_id"]

    a = await connect(server.client_url)
    b = await connect(server.client_url)
    sub = await b.subscribe("v.x")
    await b.flush()
    for _ in range(10):
        await a.publish("v.x", b"12345")
    await a.flush()
    for _ in range(10):
        await sub.next_msg(timeout=2)

    after = await get_json(server.monitor_url + "/varz")
    assert after["connections"] == 2
    assert after["total_connections"] >= before["total_connections"] + 2
    assert after["in_msgs"] - before["in_msgs"] >= 10
    assert after["out_msgs"] - before["out_msgs"] >= 10
    assert after["in_bytes"] - before["in_bytes"] >= 50
    assert after["out_bytes"] - before["out_bytes"] >= 50
    assert after["subscriptions"] >= before["subscriptions"] + 1
    assert after["slow_consumers"] == 0


async def test_connz_named_connection_and_subscriptions(server, connect) -> None:
    nc = await connect(server.client_url, name="inventory-service")
    await connect(server.client_url, name="other")
    for s in ("inv.a", "inv.b", "inv.>"):
        await nc.subscribe(s)
    await nc.flush()

    connz = await get_json(server.monitor_url + "/connz")
    assert connz["num_connections"] == 2
    mine = [c for c in connz["connections"] if c.get("name") == "inventory-service"]
    assert len(mine) == 1
    c = mine[0]
    assert c["subscriptions"] == 3
    assert c["lang"] == "python3"
    assert c["ip"] == "127.0.0.1"
    assert isinstance(c["cid"], int)

    detailed = await get_json(server.monitor_url + "/connz?subs=1")
    mine = [c for c in detailed["connections"] if c.get("name") == "inventory-service"]
    assert sorted(mine[0]["subscriptions_list"]) == ["inv.>", "inv.a", "inv.b"]

    # Closed connections leave /connz.
    await nc.close()

    async def gone() -> bool:
        cz = await get_json(server.monitor_url + "/connz")
        return [c.get("name") for c in cz["connections"]] == ["other"]

    await wait_for(gone, what="closed connection to leave /connz")


async def test_connz_paging(server, connect) -> None:
    for i in range(5):
        await connect(server.client_url, name=f"c{i}")
    page = await get_json(server.monitor_url + "/connz?limit=2&offset=1")
    assert page["total"] == 5
    assert page["limit"] == 2
    assert page["offset"] == 1
    assert page["num_connections"] == 2
    assert len(page["connections"]) == 2


async def test_subsz(server, connect) -> None:
    before = await get_json(server.monitor_url + "/subsz")
    nc = await connect(server.client_url)
    subs = [await nc.subscribe(f"subsz.{i}") for i in range(4)]
    await nc.subscribe("subsz.q", queue="g")
    await nc.flush()
    after = await get_json(server.monitor_url + "/subsz")
    assert after["num_subscriptions"] == before["num_subscriptions"] + 5
    await subs[0].unsubscribe()
    await nc.flush()
    later = await get_json(server.monitor_url + "/subsz")
    assert later["num_subscriptions"] == before["num_subscriptions"] + 4

    detail = await get_json(server.monitor_url + "/subsz?subs=1&test=subsz.q")
    entries = [s for s in detail["subscriptions_list"] if s["subject"].startswith("subsz.")]
    assert [(s["subject"], s.get("qgroup")) for s in entries] == [("subsz.q", "g")]


async def test_healthz(server) -> None:
    status, ctype, body = await asyncio.to_thread(http_get, server.monitor_url + "/healthz")
    assert status == 200
    assert "application/json" in ctype
    assert json.loads(body) == {"status": "ok"}


@only_natsd
async def test_metrics_prometheus(server, connect) -> None:
    nc = await connect(server.client_url)
    await nc.subscribe("m.x")
    await nc.flush()
    status, ctype, body = await asyncio.to_thread(http_get, server.monitor_url + "/metrics")
    assert status == 200
    assert ctype.startswith("text/plain")
    text = body.decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            values[series.partition("{")[0]] = float(value)
    assert values.get("gnatsd_varz_connections") == 1.0, text[:500]
    # the client's one and the system account's services' (counted as nats-server counts
    # its own): what /varz says
    varz = await get_json(server.monitor_url + "/varz")
    assert values.get("gnatsd_varz_subscriptions") == float(varz["subscriptions"]), text[:500]
    subsz = await get_json(server.monitor_url + "/subsz?subs=1")
    assert "m.x" in [x["subject"] for x in subsz["subscriptions_list"]]
    assert "# TYPE gnatsd_varz_connections" in text


async def test_unknown_endpoint_is_404(server) -> None:
    status, _, _ = await asyncio.to_thread(http_get, server.monitor_url + "/nope")
    assert status == 404
