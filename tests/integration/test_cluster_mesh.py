"""Routes wired into the server: three embedded ``natsd.Server`` on one loop form a mesh and
carry core NATS between them (nats-py clients on different servers).

What nats-server does and these check: a seed config (every server lists only the first, or
every server lists all, itself included) becomes a full mesh; interest crosses one hop; a
queue group has one receiver per message cluster-wide; request/reply and no-responders work
across servers; unsubscribe, client close and a server leaving withdraw interest; clients'
INFO carries ``cluster`` and every server's ``connect_urls``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from ports import free_port

from natsd.config.cluster import parse_go_url
from natsd.config.options import ClusterOptions
from natsd.router.account import GLOBAL_ACCOUNT
from natsd.server import Server

pytestmark = pytest.mark.timeout(60)

CLUSTER = "mesh"


def _server(routes: tuple[str, ...] | list[str] = (), **cluster: Any) -> Server:
    c = ClusterOptions(
        name=CLUSTER,
        host="127.0.0.1",
        port=cluster.pop("port", -1),
        routes=[parse_go_url(u) for u in routes],
        **cluster,
    )
    return Server(host="127.0.0.1", port=0, cluster=c)


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def _meshed(servers: list[Server]) -> bool:
    n = len(servers) - 1
    return all(s.mesh is not None and len(s.mesh.routes) == n for s in servers)


def _route_url(s: Server) -> str:
    assert s.mesh is not None and s.route_url == f"nats-route://127.0.0.1:{s.mesh.port}/"
    return s.route_url


@pytest.fixture
async def trio() -> AsyncIterator[list[Server]]:
    """Three servers; the second and third know only the first (a seed config)."""
    s1 = _server()
    await s1.start()
    s2 = _server([_route_url(s1)])
    s3 = _server([_route_url(s1)])
    await s2.start()
    await s3.start()
    servers = [s1, s2, s3]
    try:
        await _until(lambda: _meshed(servers))
        yield servers
    finally:
        for s in servers:
            await s.shutdown()


@contextlib.asynccontextmanager
async def clients(servers: list[Server]) -> AsyncIterator[list[NATS]]:
    ncs = [await nats.connect(s.client_url) for s in servers]
    try:
        yield ncs
    finally:
        for nc in ncs:
            await nc.close()


def _collector(box: list[Any], tag: str) -> Callable[[Msg], Awaitable[None]]:
    async def cb(m: Msg) -> None:
        box.append((tag, m.subject, m.data))

    return cb


def _remote_count(s: Server) -> int:
    assert s.mesh is not None
    return len(s.mesh.remote)


async def _settle(servers: list[Server], ncs: list[NATS]) -> None:
    """Every client's subscriptions reached its server (flush) and every route (a PING
    round trip is not observable here, so wait for the tables to stop changing)."""
    for nc in ncs:
        await nc.flush()
    last = -1
    for _ in range(50):
        now = sum(_remote_count(s) for s in servers)
        if now == last:
            return
        last = now
        await asyncio.sleep(0.05)


async def test_seed_config_becomes_full_mesh(trio: list[Server]) -> None:
    ids = {s.server_id for s in trio}
    for s in trio:
        assert s.mesh is not None
        assert set(s.mesh.by_server) == ids - {s.server_id}


async def test_every_server_listing_all_routes_self_included() -> None:
    # Fixed ports so each config can list all three, itself included.
    ports = [free_port() for _ in range(3)]
    urls = [f"nats-route://127.0.0.1:{p}" for p in ports]
    servers = [_server(urls, port=p) for p in ports]
    for s in servers:
        await s.start()
    try:
        await _until(lambda: _meshed(servers))
        await asyncio.sleep(0.3)  # duplicates resolved, nothing flaps
        assert _meshed(servers)
        for s in servers:
            assert s.mesh is not None
            assert s.server_id not in s.mesh.by_server
    finally:
        for s in servers:
            await s.shutdown()


async def test_pub_sub_and_wildcards_across_servers(trio: list[Server]) -> None:
    got: list[Any] = []
    async with clients(trio) as (a, b, c):
        await b.subscribe("orders.*", cb=_collector(got, "b"))
        await c.subscribe("orders.>", cb=_collector(got, "c"))
        await c.subscribe("other", cb=_collector(got, "c-other"))
        await _settle(trio, [a, b, c])
        for i in range(5):
            await a.publish(f"orders.{i}", b"x%d" % i)
        await a.publish("orders.deep.x", b"deep")
        await a.flush()
        await _until(lambda: len(got) == 11)
        await asyncio.sleep(0.1)
    assert sorted(t for t in got if t[0] == "b") == [
        ("b", f"orders.{i}", b"x%d" % i) for i in range(5)
    ]
    assert sorted(t for t in got if t[0] == "c") == sorted(
        [("c", f"orders.{i}", b"x%d" % i) for i in range(5)] + [("c", "orders.deep.x", b"deep")]
    )


async def test_overlapping_subscriptions_on_one_server_get_one_copy_each(
    trio: list[Server],
) -> None:
    got: list[Any] = []
    async with clients(trio) as (a, b, _c):
        await b.subscribe("x.*", cb=_collector(got, "star"))
        await b.subscribe("x.>", cb=_collector(got, "gt"))
        await _settle(trio, [a, b])
        await a.publish("x.y", b"1")
        await a.flush()
        await _until(lambda: len(got) >= 2)
        await asyncio.sleep(0.2)
    # One RMSG crossed the route; each local subscription got it once.
    assert sorted(got) == [("gt", "x.y", b"1"), ("star", "x.y", b"1")]
    assert trio[0].mesh is not None
    assert sum(r.msgs_out for r in trio[0].mesh.routes.values()) == 1


async def test_queue_group_one_receiver_cluster_wide(trio: list[Server]) -> None:
    got: list[Any] = []
    async with clients(trio) as ncs:
        for i, nc in enumerate(ncs):
            await nc.subscribe("work", queue="g", cb=_collector(got, f"s{i}"))
        await _settle(trio, ncs)
        n = 300
        for i in range(n):
            await ncs[1].publish("work", b"%d" % i)
        await ncs[1].flush()
        await _until(lambda: len(got) >= n)
        await asyncio.sleep(0.2)
    assert sorted(int(t[2]) for t in got) == list(range(n))
    members = {t[0] for t in got}
    assert members == {"s0", "s1", "s2"}


async def test_queue_group_members_only_remote(trio: list[Server]) -> None:
    got: list[Any] = []
    async with clients(trio) as (a, b, c):
        await b.subscribe("jobs", queue="w", cb=_collector(got, "b"))
        await c.subscribe("jobs", queue="w", cb=_collector(got, "c"))
        await c.subscribe("jobs", cb=_collector(got, "plain"))
        await _settle(trio, [a, b, c])
        for i in range(100):
            await a.publish("jobs", b"%d" % i)
        await a.flush()
        await _until(lambda: len(got) >= 200)
        await asyncio.sleep(0.2)
    queued = [t for t in got if t[0] != "plain"]
    assert sorted(int(t[2]) for t in queued) == list(range(100))
    assert {t[0] for t in queued} == {"b", "c"}
    assert len([t for t in got if t[0] == "plain"]) == 100


async def test_request_reply_and_no_responders(trio: list[Server]) -> None:
    async with clients(trio) as (a, _b, c):

        async def echo(m: Msg) -> None:
            await m.respond(b"re:" + m.data)

        await c.subscribe("svc", cb=echo)
        await _settle(trio, [a, c])
        r = await a.request("svc", b"ping", timeout=2)
        assert r.data == b"re:ping"
        with pytest.raises(nats.errors.NoRespondersError):
            await a.request("nobody.home", b"x", timeout=2)


async def test_interest_withdrawn_on_unsubscribe_close_and_server_exit(
    trio: list[Server],
) -> None:
    s1, s2, s3 = trio
    async with clients(trio) as (a, b, c):
        sub = await b.subscribe("u.1")
        await c.subscribe("u.2")
        await c.subscribe("u.3", queue="q")
        await _settle(trio, [a, b, c])
        assert s1.mesh is not None
        before = s1.mesh.remote.snapshot()
        subjects = {e[2] for e in before}
        assert {b"u.1", b"u.2", b"u.3"} <= subjects
        await sub.unsubscribe()
        await _settle(trio, [b])
        assert b"u.1" not in {e[2] for e in s1.mesh.remote.snapshot()}
        await c.close()
        await _until(lambda: not {b"u.2", b"u.3"} & {e[2] for e in s1.mesh.remote.snapshot()})
    await s3.shutdown()
    await _until(lambda: s1.mesh is not None and len(s1.mesh.routes) == 1)
    assert s2.mesh is not None
    assert len(s2.mesh.routes) == 1


async def test_restarted_server_rejoins(trio: list[Server]) -> None:
    s1, s2, s3 = trio
    await s2.shutdown()
    await _until(lambda: s1.mesh is not None and len(s1.mesh.routes) == 1)
    s4 = _server([_route_url(s1)])
    await s4.start()
    try:
        await _until(lambda: _meshed([s1, s3, s4]))
        got: list[Any] = []
        async with clients([s1, s4]) as (a, d):
            await a.subscribe("back", cb=_collector(got, "a"))
            await _settle([s1, s3, s4], [a, d])
            await d.publish("back", b"hi")
            await d.flush()
            await _until(lambda: got == [("a", "back", b"hi")])
    finally:
        await s4.shutdown()


async def test_client_info_has_cluster_and_connect_urls(trio: list[Server]) -> None:
    async with clients(trio[:1]) as (a,):
        info = a._server_info
        assert info["cluster"] == CLUSTER
        want = {f"127.0.0.1:{s.port}" for s in trio}
        assert set(info["connect_urls"]) == want
        # nats-py adds them to its pool for reconnects.
        assert {f"{u.hostname}:{u.port}" for u in a.servers} >= want


async def test_async_info_when_a_server_joins(trio: list[Server]) -> None:
    async with clients(trio[:1]) as (a,):
        s4 = _server([_route_url(trio[0])])
        await s4.start()
        try:
            # nats-py adds the async INFO's connect_urls to its server pool.
            await _until(lambda: any(u.port == s4.port for u in a.servers))
        finally:
            await s4.shutdown()


async def test_no_cluster_costs_nothing() -> None:
    async with Server(host="127.0.0.1", port=0) as s:
        assert s.mesh is None
        nc = await nats.connect(s.client_url)
        try:
            await nc.subscribe("a")
            await nc.flush()
            acct = s.accounts[GLOBAL_ACCOUNT]
            assert acct.sublist.forward is None
            assert acct.sublist.on_change is None
            assert "cluster" not in nc._server_info
        finally:
            await nc.close()


async def test_cluster_alone_has_no_forwarder() -> None:
    s = _server()
    await s.start()
    try:
        acct = s.accounts[GLOBAL_ACCOUNT]
        assert acct.sublist.on_change is not None  # interest is tracked for future routes
        assert acct.sublist.forward is None  # but no route: the publish path stays local
    finally:
        await s.shutdown()


def _table(s: Server) -> list[tuple[bytes, bytes, bytes | None, int]]:
    """A server's remote interest in the clients' account without the route ids (they
    change on reconnect); the system account's services have interest of their own, in
    their account and, through the imports every account has, in the clients' too."""
    assert s.mesh is not None
    return sorted(
        e[1:]
        for e in s.mesh.remote.snapshot()
        if e[1] != b"$SYS" and not e[2].startswith(b"$SYS.REQ.")
    )


async def test_route_flapping_leaks_no_interest(trio: list[Server]) -> None:
    s1, s2, _s3 = trio
    assert s1.mesh is not None and s2.mesh is not None
    async with clients(trio) as (a, b, c):
        await b.subscribe("flap.a")
        await b.subscribe("flap.*", queue="q")
        await c.subscribe("flap.>")
        await _settle(trio, [a, b, c])
        before = _table(s1)
        assert len(before) == 3
        for _ in range(20):
            route = s1.mesh.by_server[s2.server_id]
            assert route.transport is not None
            route.transport.abort()
            await _until(lambda r=route: s1.mesh is not None and _reconnected(s1, s2, r))
            await _until(lambda: _table(s1) == before)
        # Nothing left behind: one connection per peer, interest as it was, traffic flows.
        assert len(s1.mesh.conns) == 2 and len(s1.mesh.routes) == 2
        got: list[Any] = []
        await b.subscribe("after", cb=_collector(got, "b"))
        await _settle(trio, [b])
        await a.publish("after", b"ok")
        await a.flush()
        await _until(lambda: got == [("b", "after", b"ok")])


def _reconnected(s1: Server, s2: Server, old: Any) -> bool:
    assert s1.mesh is not None
    r = s1.mesh.by_server.get(s2.server_id)
    return r is not None and r is not old


async def test_jetstream_cluster_without_routes_is_refused(tmp_path: Any) -> None:
    """natsd forms the meta group from the configured routes, so a JetStream cluster with
    a route port but no routes is refused at start rather than left without a meta group."""
    with pytest.raises(ValueError, match=r"needs a cluster port and `cluster\.routes`"):
        Server(
            host="127.0.0.1",
            port=0,
            server_name="js1",
            jetstream=True,
            store_dir=str(tmp_path),
            cluster=ClusterOptions(name=CLUSTER, host="127.0.0.1", port=-1),
        )


@pytest.mark.parametrize(
    ("data", "err"),
    [
        (b"GARBAGE\r\n", b"-ERR 'Authorization Violation'\r\n"),
        (
            b'CONNECT {"lang":"python","verbose":false}\r\n',
            b"-ERR 'attempted to connect to route port'\r\n",
        ),
        (
            b'CONNECT {"name":"X","cluster":"other"}\r\n',
            b'-ERR \'Rejecting connection, cluster name "other" does not match "mesh"\'\r\n',
        ),
    ],
    ids=["garbage", "client-connect", "other-cluster"],
)
async def test_bad_input_on_the_route_port(trio: list[Server], data: bytes, err: bytes) -> None:
    s1 = trio[0]
    assert s1.mesh is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", s1.mesh.port)
    try:
        info = await asyncio.wait_for(reader.readline(), 5)
        assert info.startswith(b"INFO ")
        writer.write(data)
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(), 5)  # until the server closes
        assert err in rest
    finally:
        writer.close()
    # The server and its mesh are unharmed.
    assert _meshed(trio)
    got: list[Any] = []
    async with clients(trio[1:]) as (b, c):
        await c.subscribe("still", cb=_collector(got, "c"))
        await _settle(trio, [b, c])
        await b.publish("still", b"ok")
        await b.flush()
        await _until(lambda: got == [("c", "still", b"ok")])


async def test_routez_and_varz_cluster() -> None:
    s1 = Server(
        host="127.0.0.1",
        port=0,
        http_host="127.0.0.1",
        http_port=-1,
        cluster=ClusterOptions(name=CLUSTER, host="127.0.0.1", port=-1),
    )
    await s1.start()
    s2 = _server([_route_url(s1)])
    await s2.start()
    try:
        await _until(lambda: _meshed([s1, s2]))
        async with clients([s2]) as (b,):
            await b.subscribe("watched.one")
            await b.subscribe("watched.two", queue="q")
            await _settle([s1, s2], [b])
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{s1.monitor_url}/routez?subs=1") as resp:
                    routez = await resp.json()
                async with http.get(f"{s1.monitor_url}/varz") as resp:
                    varz = await resp.json()
                async with http.get(f"{s1.monitor_url}/metrics") as resp:
                    metrics = await resp.text()
        assert routez["server_id"] == s1.server_id
        assert routez["num_routes"] == 1
        (r,) = routez["routes"]
        assert r["remote_id"] == s2.server_id
        assert r["did_solicit"] is False and r["is_configured"] is False
        # (beside the system account's services' subscriptions)
        mine = [x for x in r["subscriptions_list"] if not x.startswith("$SYS.")]
        assert sorted(mine) == ["watched.one", "watched.two"]
        assert r["subscriptions"] == len(r["subscriptions_list"])
        assert varz["routes"] == 1
        assert varz["cluster"]["name"] == CLUSTER
        assert varz["cluster"]["cluster_port"] == s1.mesh.port  # type: ignore[union-attr]
        assert f'gnatsd_varz_routes{{server_id="{s1.server_id}"}} 1.0' in metrics
    finally:
        await s2.shutdown()
        await s1.shutdown()


async def test_lame_duck_server_leaves_the_advertised_urls(trio: list[Server]) -> None:
    s1, s2, _s3 = trio
    s1.options.lame_duck_duration = 3.0
    s1.options.lame_duck_grace_period = 2.0
    mine = f"127.0.0.1:{s1.port}"
    assert mine in s2._info_base["connect_urls"]
    async with clients([s1]):  # a client keeps s1 in lame duck mode for the grace period
        ldm = asyncio.create_task(s1.lame_duck())
        try:
            await _until(lambda: mine not in s2._info_base["connect_urls"], timeout=1.5)
            assert not ldm.done()
        finally:
            await s1.shutdown()
            await ldm


async def test_unnamed_servers_agree_on_one_name_and_carry_messages() -> None:
    """No cluster name anywhere: each server generates one, and they converge on the
    greatest (nats-server's dynamic names), so a seed config still becomes one mesh."""
    servers = [Server(host="127.0.0.1", port=0, cluster=ClusterOptions(host="127.0.0.1", port=-1))]
    generated = [servers[0].cluster_name]
    await servers[0].start()
    for _ in range(2):
        c = ClusterOptions(host="127.0.0.1", port=-1, routes=[parse_go_url(_route_url(servers[0]))])
        servers.append(Server(host="127.0.0.1", port=0, cluster=c))
        generated.append(servers[-1].cluster_name)  # before its routes can change it
        await servers[-1].start()
    try:
        assert len(set(generated)) == 3 and all(len(n) == 22 for n in generated)
        await _until(lambda: _meshed(servers) and len({s.cluster_name for s in servers}) == 1)
        assert servers[0].cluster_name == max(generated)
        await _until(lambda: all(s.mesh is not None and len(s.mesh.routes) == 2 for s in servers))
        async with clients(servers) as ncs:
            assert all(nc._server_info["cluster"] == max(generated) for nc in ncs)
            box: list[Any] = []
            await ncs[2].subscribe("x", cb=_collector(box, "c"))
            await _settle(servers, ncs)
            await ncs[1].publish("x", b"1")
            await _until(lambda: len(box) == 1)
    finally:
        for s in servers:
            await s.shutdown()


async def test_unnamed_server_takes_the_configured_name() -> None:
    named = _server()
    await named.start()
    c = ClusterOptions(host="127.0.0.1", port=-1, routes=[parse_go_url(_route_url(named))])
    unnamed = Server(host="127.0.0.1", port=0, cluster=c)
    await unnamed.start()
    try:
        assert unnamed.mesh is not None and unnamed.mesh.settings.cluster_dynamic
        await _until(lambda: _meshed([named, unnamed]))
        assert unnamed.cluster_name == CLUSTER == named.cluster_name
        # Learned from the peer's INFO (we dialed): nats-server keeps such a name dynamic;
        # only a name that arrives in a CONNECT becomes its option.
        assert unnamed.mesh.settings.cluster_dynamic
    finally:
        await unnamed.shutdown()
        await named.shutdown()


async def test_a_route_that_reaches_a_client_port_is_refused(caplog: Any) -> None:
    """A route URL that names another server's client port: that port greets with a
    client's INFO (it carries a ``client_id``). No route comes up on it, and an unnamed
    server takes no cluster name from it (it would take a configured peer's)."""
    named = _server()  # cluster "mesh", configured
    await named.start()
    client_port = parse_go_url(f"nats-route://127.0.0.1:{named.port}")
    c = ClusterOptions(host="127.0.0.1", port=-1, routes=[client_port])
    dialer = Server(host="127.0.0.1", port=0, cluster=c)
    generated = dialer.cluster_name
    await dialer.start()
    try:
        await _until(lambda: "a client port answered" in caplog.text)
        await asyncio.sleep(0.3)
        assert dialer.mesh is not None and not dialer.mesh.routes
        assert dialer.cluster_name == generated != CLUSTER
    finally:
        await dialer.shutdown()
        await named.shutdown()
