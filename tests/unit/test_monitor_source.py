"""The monitoring endpoints served from a stub ``MonitorSource``: no server, no engine.

What the endpoints compute from the figures they read (sums, sorting, the per-stream detail
built only when asked); the field-by-field comparison with nats-server is in
tests/differential/test_limits_monitor.py and tests/integration/test_monitor.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from natsd.config.options import ServerOptions
from natsd.monitor.http import MonitorServer
from natsd.monitor.source import AccountUsage, StreamUsage
from natsd.router.account import GLOBAL_ACCOUNT, Account
from natsd.router.subscription import Subscription


@dataclass
class StubClient:
    cid: int
    account: Account
    subs: dict[bytes, Subscription] = field(default_factory=dict)
    ip: str = "127.0.0.1"
    port: int = 50000
    start: float = 1_700_000_000.0
    last_activity: float = 1_700_000_001.0
    rtt: float = 0.0
    pending_bytes: int = 0
    msgs_in: int = 0
    msgs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    name: str = ""
    lang: str = ""
    version: str = ""
    user: str = ""
    tls: dict[str, Any] = field(default_factory=dict)

    def tls_report(self, peer_certs: bool) -> dict[str, Any]:
        return (
            dict(self.tls)
            if peer_certs
            else {k: v for k, v in self.tls.items() if k != "tls_peer_certs"}
        )


@dataclass
class StubSource:
    """A ``MonitorSource`` with fixed figures; records each ``jetstream_usage`` request."""

    usage: list[AccountUsage] | None
    server_id: str = "NSTUB"
    server_name: str = "stub"
    options: ServerOptions = field(default_factory=lambda: ServerOptions(jetstream=True))
    port: int = 4222
    monitor_port: int = 8222
    start_time: float = 1_700_000_000.0
    config_time: float = 1_700_000_000.0
    total_connections: int = 3
    slow_consumers: int = 1
    stale_connections: int = 2
    auth_required: bool = False
    jetstream_enabled: bool = True
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    clients: dict[int, StubClient] = field(default_factory=dict)
    accounts: dict[str, Account] = field(default_factory=dict)
    asked: list[bool] = field(default_factory=list)
    system_account_name: str = "$SYS"
    # a standalone server: no meta group, nothing keeping /healthz from "ok"
    meta: dict[str, Any] | None = None
    health: str = ""
    # /raftz: account -> group -> row (None: no Raft group, a standalone server)
    groups: dict[str, dict[str, dict[str, Any]]] | None = None

    def raftz(self) -> dict[str, dict[str, dict[str, Any]]] | None:
        return self.groups

    def jetstream_meta(self) -> dict[str, Any] | None:
        return self.meta

    def jetstream_health(self) -> str:
        return self.health

    def uptime(self) -> float:
        return 7.0

    def num_subscriptions(self) -> int:
        return 0

    def totals(self) -> tuple[int, int, int, int]:
        return 11, 22, 33, 44

    def cluster_usage(self, *, subs: bool) -> None:
        return None

    def jetstream_usage(self, *, streams: bool) -> list[AccountUsage] | None:
        self.asked.append(streams)
        if self.usage is None:
            return None
        return [
            AccountUsage(**{**_fields(a), "streams": a.streams if streams else []})
            for a in self.usage
        ]


def _fields(a: AccountUsage) -> dict[str, Any]:
    return {k: getattr(a, k) for k in AccountUsage.__slots__}


def _stream_fields(st: StreamUsage) -> dict[str, Any]:
    return {k: getattr(st, k) for k in StreamUsage.__slots__}


def _stream(name: str, msgs: int, built: list[str]) -> StreamUsage:
    def state_json() -> dict[str, Any]:
        built.append(name)
        return {"messages": msgs}

    return StreamUsage(
        name=name,
        created_ns=1_700_000_000_000_000_000,
        messages=msgs,
        bytes=msgs * 100,
        first_seq=1,
        last_seq=msgs,
        consumers=2,
        state_json=state_json,
    )


@pytest.fixture
def built() -> list[str]:
    return []


@pytest.fixture
def source(built: list[str]) -> StubSource:
    # Given in the engine's order (B before A; S2 before S1): /jsz sorts, /metrics does not.
    usage = [
        AccountUsage("B", 5, 50, 0, 500, 3, 1, 1, [_stream("T1", 4, built)]),
        AccountUsage(
            "A", 10, 100, 1000, 0, 7, 2, 2, [_stream("S2", 20, built), _stream("S1", 10, built)]
        ),
    ]
    acct = Account(GLOBAL_ACCOUNT)
    src = StubSource(usage=usage, accounts={GLOBAL_ACCOUNT: acct, "A": Account("A")})
    src.clients[5] = StubClient(cid=5, account=acct, name="worker", msgs_in=9, user="")
    return src


@pytest.fixture
async def client(source: StubSource) -> AsyncIterator[TestClient[Any, Any]]:
    mon = MonitorServer(source)
    async with TestClient(TestServer(mon.app)) as c:
        yield c


def test_varz_totals_and_jetstream_sums(source: StubSource) -> None:
    v = MonitorServer(source).varz_data()
    assert (v["in_msgs"], v["in_bytes"], v["out_msgs"], v["out_bytes"]) == (11, 22, 33, 44)
    assert (v["connections"], v["total_connections"], v["slow_consumers"]) == (1, 3, 1)
    stats = v["jetstream"]["stats"]
    assert stats["memory"] == 15 and stats["storage"] == 150
    assert stats["reserved_memory"] == 1000 and stats["reserved_storage"] == 500
    assert stats["accounts"] == 2
    assert stats["api"]["total"] == 10 and stats["api"]["errors"] == 3
    assert source.asked == [False]  # /varz never asks for the per-stream figures


async def test_jsz_sorts_accounts_and_builds_stream_state_only_when_asked(
    client: TestClient[Any, Any], built: list[str]
) -> None:
    plain = await (await client.get("/jsz?accounts=1")).json()
    assert plain["streams"] == 3 and plain["consumers"] == 6
    assert plain["messages"] == 34 and plain["bytes"] == 3400
    assert [d["name"] for d in plain["account_details"]] == ["A", "B"]
    assert "stream_detail" not in plain["account_details"][0]
    assert built == []

    detail = await (await client.get("/jsz?accounts=1&streams=1")).json()
    a = detail["account_details"][0]
    assert [s["name"] for s in a["stream_detail"]] == ["S1", "S2"]
    assert a["stream_detail"][0]["state"] == {"messages": 10}
    assert a["stream_detail"][0]["created"].startswith("2023-11-14T22:13:20")
    assert sorted(built) == ["S1", "S2", "T1"]


async def test_jsz_pages_accounts_and_targets_one_as_nats_server(
    client: TestClient[Any, Any],
) -> None:
    async def names(query: str) -> list[str] | None:
        doc = await (await client.get(f"/jsz?{query}")).json()
        assert doc["total"] == 2
        if "account_details" not in doc:
            return None
        return [d["name"] for d in doc["account_details"]]

    assert await names("accounts=1&offset=1&limit=1") == ["B"]
    assert await names("accounts=1&limit=1") == ["A"]
    assert await names("accounts=1&offset=2") is None
    assert await names("accounts=1&offset=-3") == ["A", "B"]
    assert await names("") is None
    assert await names("streams=1&limit=1") == ["A"]  # (streams imply accounts)
    assert await names("acc=B&streams=1") == ["B"]
    assert await names("acc=B") == ["B"]
    # an account that is not there: nothing, or every account when accounts are asked for
    assert await names("acc=NOPE&streams=1") is None
    assert await names("acc=NOPE&accounts=true") == ["A", "B"]


async def test_jsz_raft_and_stream_leader_only(source: StubSource, built: list[str]) -> None:
    def led_by(leader: str, group: str) -> Any:
        return lambda: {"name": "C", "raft_group": group, "leader": leader}

    _, a = source.usage or []
    s2, s1 = a.streams
    a.streams[:] = [
        StreamUsage(**{**_stream_fields(s2), "cluster": led_by("other", "S-R3F-two")}),
        StreamUsage(**{**_stream_fields(s1), "cluster": led_by("stub", "S-R3F-one")}),
    ]
    async with TestClient(TestServer(MonitorServer(source).app)) as c:
        doc = await (await c.get("/jsz?streams=1&raft=1")).json()
        # S1 (led here) and T1 (no group: a single server's) with 2 consumers each
        assert (doc["streams_leader"], doc["consumers_leader"]) == (2, 4)
        detail = {sd["name"]: sd for d in doc["account_details"] for sd in d["stream_detail"]}
        assert detail["S1"]["stream_raft_group"] == "S-R3F-one"
        assert detail["S2"]["stream_raft_group"] == "S-R3F-two"
        assert "stream_raft_group" not in detail["T1"]
        plain = await (await c.get("/jsz?streams=1")).json()
        assert "streams_leader" not in plain
        assert all(
            "stream_raft_group" not in sd for sd in plain["account_details"][0]["stream_detail"]
        )
        mine = await (await c.get("/jsz?streams=1&stream-leader-only=true")).json()
        kept = {
            d["name"]: [sd["name"] for sd in d.get("stream_detail", [])]
            for d in mine["account_details"]
        }
        assert kept == {"A": ["S1"], "B": ["T1"]}


BOOL = "Error decoding boolean for '{}': strconv.ParseBool: parsing \"{}\": invalid syntax"
INT = "Error decoding int for '{}': strconv.Atoi: parsing \"{}\": invalid syntax"


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/jsz?accounts=yes", BOOL.format("accounts", "yes")),
        ("/jsz?offset=1.5", INT.format("offset", "1.5")),
        ("/connz?limit=ten", INT.format("limit", "ten")),
        ("/routez?subs=maybe", BOOL.format("subs", "maybe")),
    ],
)
async def test_bad_query_values_are_refused_with_nats_servers_text(
    client: TestClient[Any, Any], path: str, text: str
) -> None:
    r = await client.get(path)
    assert (r.status, await r.text()) == (400, text)


async def test_accstatz_lists_the_accounts_with_connections(source: StubSource) -> None:
    g = source.accounts[GLOBAL_ACCOUNT]
    g.clients[5] = source.clients[5]  # type: ignore[assignment]
    g.msgs_in, g.bytes_in, g.msgs_out, g.bytes_out, g.slow_consumers = 4, 40, 6, 60, 1
    async with TestClient(TestServer(MonitorServer(source).app)) as c:
        doc = await (await c.get("/accstatz")).json()
        assert set(doc) == {"server_id", "now", "account_statz"}
        assert doc["account_statz"] == [
            {
                "acc": "$G",
                "name": "$G",
                "conns": 1,
                "leafnodes": 0,
                "total_conns": 1,
                "num_subscriptions": 0,
                "sent": {"msgs": 6, "bytes": 60},
                "received": {"msgs": 4, "bytes": 40},
                "slow_consumers": 1,
            }
        ]
        unused = await (await c.get("/accstatz?unused=true")).json()
        assert [a["acc"] for a in unused["account_statz"]] == ["$G", "A"]
        assert unused["account_statz"][1]["conns"] == 0


async def test_jsz_disabled_without_jetstream(source: StubSource) -> None:
    source.usage = None
    async with TestClient(TestServer(MonitorServer(source).app)) as c:
        doc = await (await c.get("/jsz")).json()
    assert doc["disabled"] is True and doc["server_id"] == "NSTUB"


async def test_accountz_jetstream_enabled_by_name(client: TestClient[Any, Any]) -> None:
    a = await (await client.get("/accountz?acc=A")).json()
    assert a["account_detail"]["jetstream_enabled"] is True
    g = await (await client.get(f"/accountz?acc={GLOBAL_ACCOUNT}")).json()
    assert g["account_detail"]["jetstream_enabled"] is False
    assert g["account_detail"]["client_connections"] == 0
    missing = await client.get("/accountz?acc=NOPE")
    assert missing.status == 400


async def test_connz_reports_client_fields(client: TestClient[Any, Any]) -> None:
    doc = await (await client.get("/connz")).json()
    (conn,) = doc["connections"]
    assert (conn["cid"], conn["name"], conn["in_msgs"], conn["port"]) == (5, "worker", 9, 50000)
    assert "account" not in conn  # the global account without a user is not named


async def test_healthz_follows_ready(client: TestClient[Any, Any], source: StubSource) -> None:
    assert (await client.get("/healthz")).status == 503
    source.ready.set()
    r = await client.get("/healthz")
    assert r.status == 200 and (await r.json()) == {"status": "ok"}


async def test_healthz_and_jsz_of_a_jetstream_cluster_member(
    client: TestClient[Any, Any], source: StubSource
) -> None:
    source.ready.set()
    source.health = "JetStream has not established contact with a meta leader"
    r = await client.get("/healthz")
    assert r.status == 503 and (await r.json()) == {"status": "unavailable", "error": source.health}
    # js-enabled-only asks only whether JetStream is on, as nats-server
    r = await client.get("/healthz?js-enabled-only=true")
    assert r.status == 200 and (await r.json()) == {"status": "ok"}
    source.health = ""
    source.meta = {"name": "c", "leader": "other", "cluster_size": 3}
    assert (await (await client.get("/jsz")).json())["meta_cluster"] == source.meta
    r = await client.get("/jsz?leader-only=true")
    assert r.status == 400 and await r.text() == "filtered response: not leader"
    source.meta = {"name": "c", "leader": source.server_name, "cluster_size": 3}
    assert (await client.get("/jsz?leader-only=true")).status == 200


async def test_metrics_per_stream_in_engine_order(client: TestClient[Any, Any]) -> None:
    text = await (await client.get("/metrics")).text()
    lines = [ln for ln in text.splitlines() if ln.startswith("jetstream_stream_messages{")]
    assert [ln.split('stream="')[1].split('"')[0] for ln in lines] == ["T1", "S2", "S1"]
    assert 'jetstream_stream_messages{account="A",server_id="NSTUB",stream="S1"} 10.0' in lines
    assert 'gnatsd_varz_in_msgs_total{server_id="NSTUB"} 11.0' in text
    assert 'gnatsd_varz_uptime_seconds{server_id="NSTUB"} 7.0' in text


async def test_raftz_filters_by_account_and_group(
    source: StubSource, client: TestClient[Any, Any]
) -> None:
    async def get(q: str) -> tuple[int, Any]:
        r = await client.get("/raftz" + q)
        return r.status, (await r.json() if r.status == 200 else await r.text())

    assert await get("") == (404, "No Raft nodes registered")
    meta, s1, s2 = {"state": "LEADER"}, {"state": "FOLLOWER"}, {"state": "CANDIDATE"}
    source.groups = {"$SYS": {"_meta_": meta}, "A": {"S-R3F-1": s1, "S-R3F-2": s2}}
    assert await get("") == (200, {"$SYS": {"_meta_": meta}})
    assert await get("?acc=A") == (200, {"A": {"S-R3F-1": s1, "S-R3F-2": s2}})
    assert await get("?acc=A&group=S-R3F-2") == (200, {"A": {"S-R3F-2": s2}})
    # as nats-server: a filter that matches nothing is an empty object, not an error
    assert await get("?acc=A&group=_meta_") == (200, {})
    assert await get("?acc=B") == (200, {})
