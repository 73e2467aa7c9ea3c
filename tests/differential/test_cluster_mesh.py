"""Three servers on loopback joined by routes, natsd against nats-server: the same scenario
(pub/sub with wildcards and headers, queue groups with members on several servers,
unsubscribe with max, a 512 KiB payload, request/reply, no-responders) runs against three
nats-server processes, three natsd processes and mixed clusters both ways (one natsd with two
nats-server, one nats-server with two natsd), and the clients must see the same thing. The
same four clusters take a kill -9 of the server a client was given, and the client must fail
over through the ``connect_urls`` it learned.

Every config lists all three routes, itself included (the usual deployment shape; the route
to itself is dropped). Interest travels asynchronously, so before publishing the scenario
waits until each subscribing server's interest reached the publisher's: the subscriber adds
a ``sync.<i>`` subscription after its real ones, and the publisher's server has the real
ones once a message on ``sync.<i>`` gets through (interest from one server arrives in order
over its route).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from proc_cluster import ProcCluster, ServerProc, running

pytestmark = pytest.mark.timeout(120)


KINDS = {
    "nats-server": ["nats-server"] * 3,
    "natsd": ["natsd"] * 3,
    # Mixed clusters, both ways: the publisher's server is the first.
    "natsd+2nats-server": ["natsd", "nats-server", "nats-server"],
    "nats-server+2natsd": ["nats-server", "natsd", "natsd"],
}


def _cluster(kinds: list[str], tmp: Path, name: str = "diff") -> Iterator[ProcCluster]:
    names = [f"{kind}-{i}" for i, kind in enumerate(kinds)]
    c = ProcCluster(tmp, 3, kinds=kinds, names=names, jetstream=[False] * 3, cluster_name=name)
    with running(c, wait="") as started:
        yield started


@pytest.fixture(params=list(KINDS))
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcCluster]:
    yield from _cluster(KINDS[request.param], tmp_path)


async def _sync(pub: NATS, sub: NATS, tag: str, timeout: float = 10.0) -> None:
    """Wait until ``sub``'s subscriptions so far are known on ``pub``'s server."""
    got = asyncio.Event()

    async def cb(_m: Msg) -> None:
        got.set()

    s = await sub.subscribe(f"sync.{tag}", cb=cb)
    await sub.flush()
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not got.is_set():
        if loop.time() > end:
            raise AssertionError(f"interest of {tag} never reached the publisher's server")
        await pub.publish(f"sync.{tag}", b"")
        await pub.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(got.wait(), 0.1)
    await s.unsubscribe()
    await sub.flush()


async def _meshed(s: ServerProc, n: int, timeout: float = 10.0) -> None:
    """Wait until ``s`` advertises ``n`` client URLs (its own and each peer's, learned as
    each route comes up). A server is ready for clients before its routes are: the last
    one started may not have reached the others when the scenario begins. nats-py keeps
    the INFO it connected with (later async INFOs only grow its pool), so the count the
    scenario compares is the one at connect time."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        nc = await nats.connect(s.url, allow_reconnect=False)
        got = len(nc._server_info.get("connect_urls") or [])
        await nc.close()
        if got >= n or asyncio.get_running_loop().time() > deadline:
            return
        await asyncio.sleep(0.05)


async def _scenario(servers: ProcCluster) -> dict[str, Any]:
    for s in servers:
        await _meshed(s, len(servers))
    a, b, c = [await nats.connect(s.url, allow_reconnect=False) for s in servers]
    out: dict[str, Any] = {}
    try:
        # Plain subscriptions and wildcards on two other servers.
        got: list[tuple[str, str, bytes]] = []

        def collect(tag: str) -> Any:
            async def cb(m: Msg) -> None:
                got.append((tag, m.subject, m.data))

            return cb

        await b.subscribe("orders.*", cb=collect("b*"))
        await c.subscribe("orders.>", cb=collect("c>"))
        await c.subscribe("orders.new", cb=collect("c-new"))
        await _sync(a, b, "b")
        await _sync(a, c, "c")
        for subj in ("orders.new", "orders.old", "orders.eu.new", "other"):
            await a.publish(subj, subj.encode())
        await a.publish("orders.new", b"with-headers", headers={"X-K": "v"})
        await a.flush()
        await asyncio.sleep(0.5)
        out["pubsub"] = sorted(got)

        # A queue group with members on all three servers: one receiver per message.
        q: list[tuple[str, bytes]] = []

        def qcollect(tag: str) -> Any:
            async def cb(m: Msg) -> None:
                q.append((tag, m.data))

            return cb

        for tag, nc in (("a", a), ("b", b), ("c", c)):
            await nc.subscribe("work", queue="workers", cb=qcollect(tag))
        await _sync(a, b, "qb")
        await _sync(a, c, "qc")
        n = 200
        for i in range(n):
            await a.publish("work", b"%d" % i)
        await a.flush()
        await asyncio.sleep(0.5)
        out["queue_each_once"] = sorted(int(d) for _, d in q) == list(range(n))

        # A group with members only on the other servers: both get a share.
        r: list[str] = []

        def rcollect(tag: str) -> Any:
            async def cb(_m: Msg) -> None:
                r.append(tag)

            return cb

        await b.subscribe("remote.work", queue="rw", cb=rcollect("b"))
        await c.subscribe("remote.work", queue="rw", cb=rcollect("c"))
        await _sync(a, b, "rb")
        await _sync(a, c, "rc")
        for _ in range(n):
            await a.publish("remote.work", b"")
        await a.flush()
        await asyncio.sleep(0.5)
        out["remote_queue"] = (len(r), sorted(set(r)))

        # Unsubscribe with max on another server, and a large payload across a route.
        limited: list[bytes] = []
        big: list[bytes] = []

        async def lim(m: Msg) -> None:
            limited.append(m.data)

        async def large(m: Msg) -> None:
            big.append(m.data)

        await b.subscribe("max.x", cb=lim, max_msgs=2)
        await c.subscribe("big", cb=large)
        await _sync(a, b, "max")
        await _sync(a, c, "big")
        for i in range(5):
            await a.publish("max.x", b"%d" % i)
        payload = bytes(range(256)) * 2048  # 512 KiB
        await a.publish("big", payload)
        await a.flush()
        await asyncio.sleep(0.5)
        out["unsub_max"] = limited
        out["large"] = (len(big), big[0] == payload if big else False)

        # A message with headers, across a route, to a client that did not announce header
        # support: nats-server strips the headers and delivers a plain MSG.
        reader, writer = await asyncio.open_connection(*servers[2].address)
        try:
            await reader.readline()
            writer.write(b'CONNECT {"verbose":false,"headers":false}\r\nSUB hdr.x 1\r\nPING\r\n')
            assert await asyncio.wait_for(reader.readline(), 5) == b"PONG\r\n"
            await _sync(a, c, "hdr")  # subscribed on the same server after the raw client
            await a.publish("hdr.x", b"body", headers={"X-K": "v"})
            await a.flush()
            out["no_header_client"] = await asyncio.wait_for(reader.readuntil(b"body\r\n"), 5)
        finally:
            writer.close()

        # Request/reply across servers, and no-responders.
        async def echo(m: Msg) -> None:
            await m.respond(b"re:" + m.data)

        await c.subscribe("svc.echo", cb=echo)
        await _sync(a, c, "svc")
        reply = await a.request("svc.echo", b"ping", timeout=5)
        out["request"] = reply.data
        try:
            await a.request("svc.none", b"x", timeout=5)
            out["no_responders"] = "answered"
        except nats.errors.NoRespondersError:
            out["no_responders"] = "503"
        out["info_cluster"] = a._server_info.get("cluster")
        out["connect_urls"] = len(a._server_info.get("connect_urls") or [])
    finally:
        for nc in (a, b, c):
            await nc.close()
    return out


EXPECTED = {
    "pubsub": sorted(
        [
            ("b*", "orders.new", b"orders.new"),
            ("b*", "orders.old", b"orders.old"),
            ("c>", "orders.new", b"orders.new"),
            ("c>", "orders.old", b"orders.old"),
            ("c>", "orders.eu.new", b"orders.eu.new"),
            ("c-new", "orders.new", b"orders.new"),
            ("b*", "orders.new", b"with-headers"),
            ("c>", "orders.new", b"with-headers"),
            ("c-new", "orders.new", b"with-headers"),
        ]
    ),
    "queue_each_once": True,
    "remote_queue": (200, ["b", "c"]),
    "unsub_max": [b"0", b"1"],
    "large": (1, True),
    "no_header_client": b"MSG hdr.x 1 4\r\nbody\r\n",
    "request": b"re:ping",
    "no_responders": "503",
    "info_cluster": "diff",
    "connect_urls": 3,
}


def test_three_server_cluster_matches_nats_server(cluster: ProcCluster) -> None:
    out = asyncio.run(_scenario(cluster))
    assert out == EXPECTED, "\n".join(s.log()[-3000:] for s in cluster)


async def _failover(servers: ProcCluster) -> dict[str, Any]:
    """A client given only the first server's URL; that server is killed with SIGKILL."""
    b = await nats.connect(servers[1].url)
    reconnected = asyncio.Event()

    async def on_reconnect() -> None:
        reconnected.set()

    x = await nats.connect(servers[0].url, reconnected_cb=on_reconnect, max_reconnect_attempts=-1)
    try:
        # The servers start together and nothing waits for their routes: the pool grows as
        # the first server's INFO updates arrive (seen short when a mixed mesh was slow).
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while len(x.servers) < 3 and loop.time() < end:
            await asyncio.sleep(0.05)
        learned = len(x.servers)
        got: list[bytes] = []

        async def cb(m: Msg) -> None:
            got.append(m.data)

        await b.subscribe("after.kill", cb=cb)
        await b.flush()
        servers[0].kill()
        t0 = loop.time()
        await asyncio.wait_for(reconnected.wait(), 10)
        took = loop.time() - t0
        await _sync(x, b, "kill")
        await x.publish("after.kill", b"still here")
        await x.flush()
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.05)
        return {
            "pool": learned,
            # nats-py retries the dead server first about half the time (its pool is
            # shuffled) and then sleeps reconnect_time_wait (2 s) before the next one:
            # nats-server and natsd both measure 0.0x s or 2.01 s here.
            "fast": took < 2.5 or took,
            "url": x.connected_url.port != servers[0].port if x.connected_url else None,
            "got": got,
        }
    finally:
        await x.close()
        await b.close()


def test_client_fails_over_through_connect_urls(cluster: ProcCluster) -> None:
    out = asyncio.run(_failover(cluster))
    assert out == {"pool": 3, "fast": True, "url": True, "got": [b"still here"]}


async def _info_cluster(s: ServerProc) -> str:
    reader, writer = await asyncio.open_connection(*s.address)
    try:
        line = await asyncio.wait_for(reader.readline(), 5)
    finally:
        writer.close()
    return str(json.loads(line[5:])["cluster"])


async def _unnamed(servers: ProcCluster) -> dict[str, Any]:
    """No server names its cluster: each generates a name, and they must settle on one."""
    loop = asyncio.get_running_loop()
    end = loop.time() + 15
    names = [await _info_cluster(s) for s in servers]
    while len(set(names)) > 1 and loop.time() < end:
        await asyncio.sleep(0.1)
        names = [await _info_cluster(s) for s in servers]
    a, c = [await nats.connect(s.url, allow_reconnect=False) for s in (servers[0], servers[2])]
    try:
        got: list[bytes] = []

        async def cb(m: Msg) -> None:
            got.append(m.data)

        await c.subscribe("unnamed", cb=cb)
        await _sync(a, c, "unnamed")
        await a.publish("unnamed", b"across")
        await a.flush()
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.05)
        return {"one_name": len(set(names)) == 1, "length": {len(n) for n in names}, "got": got}
    finally:
        await a.close()
        await c.close()


@pytest.mark.parametrize("kinds", list(KINDS))
def test_unnamed_cluster_settles_on_one_name(kinds: str, tmp_path: Path) -> None:
    servers = _cluster(KINDS[kinds], tmp_path, name="")
    cluster = next(servers)
    try:
        out = asyncio.run(_unnamed(cluster))
        logs = "\n".join(s.log()[-3000:] for s in cluster)
        assert out == {"one_name": True, "length": {22}, "got": [b"across"]}, logs
    finally:
        servers.close()


def _routez(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/routez?subs=1", timeout=5) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return doc


async def _route_view(url: str) -> tuple[int, list[str]]:
    """(routes, sorted subjects of the interest the peer sent) from /routez?subs=1 (in a
    thread: the relay runs on this loop)."""
    doc = await asyncio.to_thread(_routez, url)
    subs = sorted(
        str(x) for r in doc.get("routes") or [] for x in r.get("subscriptions_list") or []
    )
    return int(doc.get("num_routes", 0)), subs


async def _route_ids(url: str) -> list[int]:
    doc = await asyncio.to_thread(_routez, url)
    return [int(r["rid"]) for r in doc.get("routes") or []]


FLAPS = 100


async def _flapping(c: ProcCluster) -> dict[str, Any]:
    natsd, ref = c["natsd"], c["ref"]
    mon = {"natsd": natsd.monitor_url, "ref": ref.monitor_url}
    n = await nats.connect(natsd.url, allow_reconnect=False)
    r = await nats.connect(ref.url, allow_reconnect=False)
    try:
        for i in range(10):
            await n.subscribe(f"natsd.{i}")
            await r.subscribe(f"ref.{i}", queue="q" if i % 2 else None)
        await _sync(r, n, "n")
        await _sync(n, r, "r")
        before = {k: await _route_view(u) for k, u in mon.items()}
        loop = asyncio.get_running_loop()
        for _ in range(FLAPS):
            old = await _route_ids(mon["natsd"])
            for link in c.links.values():  # every connection through it aborted, then open
                link.cut()
                link.heal()
            end = loop.time() + 10
            while True:
                await asyncio.sleep(0.01)
                ids = await _route_ids(mon["natsd"])
                if len(ids) == 1 and ids != old and (await _route_view(mon["ref"]))[0] == 1:
                    break
                assert loop.time() < end, "the route did not come back"
        # Interest re-sent on every reconnect settles back to exactly the table before.
        end = loop.time() + 10
        after = {k: await _route_view(u) for k, u in mon.items()}
        while after != before and loop.time() < end:
            await asyncio.sleep(0.1)
            after = {k: await _route_view(u) for k, u in mon.items()}
        await _sync(r, n, "n2")
        await _sync(n, r, "r2")
        return {"before": before, "same_after": after == before}
    finally:
        await n.close()
        await r.close()


def test_route_flapping_against_nats_server_leaks_no_interest(tmp_path: Path) -> None:
    """natsd and a nats-server peer joined through proxies (each dials the other through
    one) that cut the route 100 times; each side's view of the other's interest
    (``/routez?subs=1``) is what it was before, and messages still cross both ways."""
    require_nats_server()
    c = ProcCluster(tmp_path, 2, kinds=["natsd", "nats-server"], names=["natsd", "ref"],
                    jetstream=[False, False], cluster_name="flap", proxied=True)  # fmt: skip

    async def main() -> dict[str, Any]:
        await c.start(wait="")
        try:
            await c.routed("natsd")
            return await _flapping(c)
        finally:
            await c.close()

    out = asyncio.run(main())
    assert out["same_after"], out
    # Each side knew the other's ten subscriptions (and its system account's services).
    before = out["before"]
    assert [x for x in before["ref"][1] if not x.startswith("$SYS.")] == [
        f"natsd.{i}" for i in range(10)
    ], out
    assert {f"ref.{i}" for i in range(10)} <= {x.split()[0] for x in before["natsd"][1]}, out


async def _kill_while_publishing(servers: ProcCluster) -> dict[str, Any]:
    """A publisher on the first server sends a numbered stream to a subscriber on the second;
    the first is killed with SIGKILL a third of the way in. The publisher fails over through
    ``connect_urls`` (nats-py keeps publishing into its pending buffer meanwhile)."""
    sub = await nats.connect(servers[1].url, allow_reconnect=False)
    pub = await nats.connect(servers[0].url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
    try:
        got: list[int] = []
        done = asyncio.Event()
        total = 3000

        async def cb(m: Msg) -> None:
            got.append(int(m.data))
            if got[-1] == total - 1:
                done.set()

        await sub.subscribe("stream.kill", cb=cb)
        await _sync(pub, sub, "kill9")
        for i in range(total):
            await pub.publish("stream.kill", b"%d" % i)
            if i % 50 == 49:
                await asyncio.sleep(0.002)
            if i == total // 3:
                servers[0].kill()
        await asyncio.wait_for(pub.flush(timeout=10), 15)
        await asyncio.wait_for(done.wait(), 10)
        lost = total - len(got)
        return {
            # each message at most once, in publish order
            "in_order_no_duplicates": got == sorted(set(got)),
            "tail_delivered": got[-1] == total - 1,
            # only what the dead server held in flight is lost
            "lost_bounded": 0 <= lost <= total // 3,
        }
    finally:
        await pub.close()
        await sub.close()


def test_kill_while_publishing_loses_little_and_duplicates_nothing(
    cluster: ProcCluster,
) -> None:
    out = asyncio.run(_kill_while_publishing(cluster))
    logs = "\n".join(s.log()[-2000:] for s in cluster)
    assert out == {"in_order_no_duplicates": True, "tail_delivered": True, "lost_bounded": True}, (
        logs
    )
