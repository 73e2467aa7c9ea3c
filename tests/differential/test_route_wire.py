"""The route protocol's bytes, checked against the pinned nats-server.

One nats-server with a cluster port; this test dials that port and acts as a route peer with
nothing but ``protocol.route_parser`` and ``protocol.route_encode``: it reads nats-server's
INFO, sends our CONNECT and INFO, answers PINGs. Then a nats-py client on that nats-server
subscribes and publishes, and the test checks both directions: the RS+/RS-/RMSG/HMSG
nats-server sends decode to the right events and are byte for byte what our encoders write;
the RS+/RMSG/HMSG we send reach the client as nats-server's own routes' would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from ports import free_port

from natsd.protocol.route_encode import (
    ROUTE_PING,
    ROUTE_PONG,
    encode_route_connect,
    encode_route_hmsg,
    encode_route_info,
    encode_route_rmsg,
    encode_rs_minus,
    encode_rs_plus,
)
from natsd.protocol.route_parser import (
    R_CONNECT,
    R_ERR,
    R_HMSG,
    R_INFO,
    R_PEER_ERR,
    R_PING,
    R_PONG,
    R_RMSG,
    R_SUB,
    R_UNSUB,
    RouteEvent,
    RouteParser,
)

from .harness import HOST, ServerProcess, start_server, write_config

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

CLUSTER = "wire"
ACC = b"$G"
OUR_ID = "NATSDROUTEWIRETEST000000000000000000000000000000000000"
HEADERS = b"NATS/1.0\r\nX-Key: v1\r\n\r\n"


class RoutePeer:
    """A route connection driven by the pure layer: events go to a queue, PINGs are answered
    and every byte nats-server sent is kept for byte-exact comparisons."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = RouteParser()
        self.events: asyncio.Queue[RouteEvent] = asyncio.Queue()
        self.raw = bytearray()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            data = await self.reader.read(65536)
            if not data:
                return
            self.raw += data
            for ev in self.parser.feed(data):
                if ev[0] == R_PING:
                    self.writer.write(ROUTE_PONG)
                await self.events.put(ev)

    async def expect(self, match: Callable[[RouteEvent], bool], timeout: float = 5.0) -> RouteEvent:
        """The first event ``match`` accepts, skipping others (e.g. $SYS interest)."""
        async with asyncio.timeout(timeout):
            while True:
                ev = await self.events.get()
                assert ev[0] not in (R_ERR, R_PEER_ERR), ev
                if match(ev):
                    return ev

    async def sync(self) -> None:
        """PING and wait for the PONG: nats-server has processed all we sent before."""
        self.writer.write(ROUTE_PING)
        await self.writer.drain()
        await self.expect(lambda e: e[0] == R_PONG)

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()


@dataclasses.dataclass
class Reference:
    """nats-server with a cluster listen port."""

    proc: ServerProcess
    cluster_port: int
    pool_size: int  # 0: nats-server's default (3), and our INFO announces no pool

    @property
    def port(self) -> int:
        return self.proc.port


@pytest.fixture(params=[0, 1], ids=["no-pool", "pool_size-1"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Reference]:
    """nats-server as configured by default (pool_size 3; our INFO has no route_pool_size, so
    it takes us for a one-connection route), or with ``pool_size: 1`` on both sides. Either
    way the account is in every RS+/RS-/RMSG/HMSG."""
    require_nats_server()
    cport = free_port()
    pool = int(request.param)
    if pool:
        conf = write_config(
            f"cluster {{ name: {CLUSTER}, listen: {HOST}:{cport}, pool_size: {pool} }}\n",
            tmp_path,
        )
        srv = start_server("nats-server", config_path=conf, log_dir=tmp_path)
    else:
        srv = start_server(
            "nats-server",
            ["-cluster", f"nats://{HOST}:{cport}", "-cluster_name", CLUSTER],
            log_dir=tmp_path,
        )
    yield Reference(srv, cport, pool)
    srv.stop()


@pytest.fixture
async def peer(server: Reference) -> AsyncIterator[RoutePeer]:
    reader, writer = await asyncio.open_connection(HOST, server.cluster_port)
    p = RoutePeer(reader, writer)
    info_ev = await p.expect(lambda e: e[0] == R_INFO)
    info = json.loads(info_ev[1])
    assert info["cluster"] == CLUSTER and info["headers"] is True
    assert info["route_pool_size"] == (server.pool_size or 3)
    # What nats-server's processRouteConnect reads: no "lang" (that marks a client on the
    # wrong port), the cluster name (must match), our id as "name", headers.
    writer.write(
        encode_route_connect(
            {
                "echo": True,
                "verbose": False,
                "pedantic": False,
                "tls_required": False,
                "headers": True,
                "name": OUR_ID,
                "cluster": CLUSTER,
            }
        )
    )
    # processRouteInfo/addRoute: a different server_id (ours would close as a route to
    # itself), the same cluster, headers so HMSG flows, a server_name unlike the peer's, no
    # compression field (taken as an old server: no compression), no lnoc (so no LS+/LMSG).
    # Without route_pool_size nats-server treats us as a one-connection "no pool" route.
    our_info: dict[str, Any] = {
        "server_id": OUR_ID,
        "server_name": "natsd-wire",
        "version": "2.15.1",
        "proto": 1,
        "host": HOST,
        "port": free_port(),
        "headers": True,
        "max_payload": 1048576,
        "cluster": CLUSTER,
    }
    if server.pool_size:
        # Accepted side of a pooled route: route_pool_idx must be in range (0 is omitted).
        our_info["route_pool_size"] = server.pool_size
    writer.write(encode_route_info(our_info))
    await p.sync()
    yield p
    await p.sync()  # the route is still up: nothing we sent made nats-server close it
    await p.close()
    errors = [ln for ln in server.proc.log().splitlines() if "[ERR]" in ln]
    assert not errors, errors


async def _client(server: Reference) -> Any:
    return await nats.connect(f"nats://{HOST}:{server.port}", allow_reconnect=False)


async def test_nats_server_info_decodes(server: Reference) -> None:
    reader, writer = await asyncio.open_connection(HOST, server.cluster_port)
    parser = RouteParser()
    line = await reader.readuntil(b"\r\n")
    assert line.startswith(b"INFO {") and line.endswith(b"} \r\n")
    (ev,) = parser.feed(line)
    assert ev[0] == R_INFO
    info = json.loads(ev[1])
    assert info["server_id"] and info["cluster"] == CLUSTER
    writer.close()


async def test_rs_plus_and_minus_from_nats_server(peer: RoutePeer, server: Reference) -> None:
    nc = await _client(server)
    try:
        plain = await nc.subscribe("wire.plain")
        await nc.flush()
        ev = await peer.expect(lambda e: e[0] == R_SUB and e[2] == b"wire.plain")
        assert ev == (R_SUB, ACC, b"wire.plain", None, 1)
        q1 = await nc.subscribe("wire.q", queue="workers")
        await nc.flush()
        ev = await peer.expect(lambda e: e[0] == R_SUB and e[2] == b"wire.q")
        assert ev == (R_SUB, ACC, b"wire.q", b"workers", 1)
        # A second member raises the group's weight.
        q2 = await nc.subscribe("wire.q", queue="workers")
        await nc.flush()
        ev = await peer.expect(lambda e: e[0] == R_SUB and e[2] == b"wire.q")
        assert ev == (R_SUB, ACC, b"wire.q", b"workers", 2)
        await plain.unsubscribe()
        await nc.flush()
        ev = await peer.expect(lambda e: e[0] == R_UNSUB)
        assert ev == (R_UNSUB, ACC, b"wire.plain", None)
        await q2.unsubscribe()
        await q1.unsubscribe()
        await nc.flush()
        ev = await peer.expect(lambda e: e[0] == R_UNSUB)
        assert ev == (R_UNSUB, ACC, b"wire.q", b"workers")
        # Our encoders write exactly what nats-server wrote.
        for frame in (
            encode_rs_plus(ACC, b"wire.plain"),
            encode_rs_plus(ACC, b"wire.q", b"workers", 1),
            encode_rs_plus(ACC, b"wire.q", b"workers", 2),
            encode_rs_minus(ACC, b"wire.plain"),
            encode_rs_minus(ACC, b"wire.q", b"workers"),
        ):
            assert frame in peer.raw, frame
    finally:
        await nc.close()


async def test_our_rmsg_and_hmsg_reach_a_client(peer: RoutePeer, server: Reference) -> None:
    nc = await _client(server)
    try:
        sub = await nc.subscribe("wire.in")
        qsub = await nc.subscribe("wire.inq", queue="workers")
        await nc.flush()
        await peer.expect(lambda e: e[0] == R_SUB and e[2] == b"wire.inq")
        w = peer.writer
        w.write(encode_route_rmsg(ACC, b"wire.in", None, None, b"plain"))
        w.write(encode_route_rmsg(ACC, b"wire.in", b"_INBOX.r1", None, b"with reply"))
        w.write(encode_route_hmsg(ACC, b"wire.in", b"_INBOX.r2", None, HEADERS, b"with headers"))
        w.write(encode_route_rmsg(ACC, b"wire.in", None, None, b""))
        w.write(encode_route_rmsg(ACC, b"wire.inq", b"_INBOX.r3", [b"workers"], b"queued"))
        w.write(encode_route_hmsg(ACC, b"wire.inq", None, [b"other", b"workers"], HEADERS, b"hq"))
        await w.drain()
        got = [await asyncio.wait_for(sub.next_msg(), 5) for _ in range(4)]
        assert [(m.data, m.reply, m.headers) for m in got] == [
            (b"plain", "", None),
            (b"with reply", "_INBOX.r1", None),
            (b"with headers", "_INBOX.r2", {"X-Key": "v1"}),
            (b"", "", None),
        ]
        gq = [await asyncio.wait_for(qsub.next_msg(), 5) for _ in range(2)]
        assert [(m.data, m.reply, m.headers) for m in gq] == [
            (b"queued", "_INBOX.r3", None),
            (b"hq", "", {"X-Key": "v1"}),
        ]
        await peer.sync()  # nats-server did not close the route over any of it
    finally:
        await nc.close()


async def test_nats_server_forwards_rmsg_to_our_interest(
    peer: RoutePeer, server: Reference
) -> None:
    peer.writer.write(encode_rs_plus(ACC, b"wire.out"))
    peer.writer.write(encode_rs_plus(ACC, b"wire.outq", b"workers", 1))
    await peer.sync()
    nc = await _client(server)
    try:
        await nc.publish("wire.out", b"one")
        await nc.publish("wire.out", b"two", reply="_INBOX.x")
        await nc.publish("wire.out", b"three", headers={"X-Key": "v1"})
        await nc.publish("wire.outq", b"four", reply="_INBOX.y")
        await nc.publish("wire.outq", b"five")
        await nc.publish("wire.outq", b"six", reply="_INBOX.z", headers={"X-Key": "v1"})
        await nc.flush()
        evs = [
            await peer.expect(lambda e: e[0] in (R_RMSG, R_HMSG) and e[1] == ACC) for _ in range(6)
        ]
    finally:
        await nc.close()
    assert evs[0] == (R_RMSG, ACC, b"wire.out", None, None, 3, b" 3\r\none\r\n")
    assert evs[1] == (R_RMSG, ACC, b"wire.out", b"_INBOX.x", None, 3, b" 3\r\ntwo\r\n")
    kind, acc, subj, reply, queues, hlen, total, tail = evs[2]
    assert (kind, acc, subj, reply, queues) == (R_HMSG, ACC, b"wire.out", None, None)
    body = tail[len(tail) - total - 2 : -2]
    headers, payload = body[:hlen], body[hlen:]
    assert payload == b"three" and b"X-Key: v1\r\n" in headers
    assert evs[3][:5] == (R_RMSG, ACC, b"wire.outq", b"_INBOX.y", [b"workers"])
    assert evs[4][:5] == (R_RMSG, ACC, b"wire.outq", None, [b"workers"])
    assert evs[5][:7] == (R_HMSG, ACC, b"wire.outq", b"_INBOX.z", [b"workers"], hlen, total - 2)
    for frame in (
        encode_route_rmsg(ACC, b"wire.out", None, None, b"one"),
        encode_route_rmsg(ACC, b"wire.out", b"_INBOX.x", None, b"two"),
        encode_route_hmsg(ACC, b"wire.out", None, None, headers, b"three"),
        encode_route_rmsg(ACC, b"wire.outq", b"_INBOX.y", [b"workers"], b"four"),
        encode_route_rmsg(ACC, b"wire.outq", None, [b"workers"], b"five"),
        encode_route_hmsg(ACC, b"wire.outq", b"_INBOX.z", [b"workers"], headers, b"six"),
    ):
        assert frame in peer.raw, frame


async def test_nats_server_refuses_a_client_connect_on_the_route_port(
    server: Reference,
) -> None:
    """The other direction of the CONNECT check: "lang" marks a client; nats-server answers
    with an -ERR our parser surfaces as R_PEER_ERR."""
    reader, writer = await asyncio.open_connection(HOST, server.cluster_port)
    parser = RouteParser()
    events: list[RouteEvent] = []
    writer.write(encode_route_connect({"lang": "python", "cluster": CLUSTER, "name": "x"}))
    async with asyncio.timeout(5):
        while not any(e[0] == R_PEER_ERR for e in events):
            data = await reader.read(65536)
            if not data:
                break
            events += parser.feed(data)
    writer.close()
    errs = [e[1] for e in events if e[0] == R_PEER_ERR]
    assert errs and "route port" in errs[0], events
    assert not [e for e in events if e[0] in (R_ERR, R_CONNECT)]
