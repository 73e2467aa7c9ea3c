"""RouteConnection over real sockets: against nats-server in both directions, against itself,
against bad input on the route port, and with a peer that stops reading.

The host here (``RecHost``) records what the connection reports; the server's host (interest
table, mesh) comes later. nats-server runs with ``-cluster`` on loopback; a nats-py client on
it subscribes and publishes, so interest and messages cross the route both ways. Bad input is
sent to nats-server's route port and to ours alike: the -ERR texts must be the same.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from differential.harness import HOST, ServerProcess, start_server, write_config
from ports import free_port

from natsd.connection.flusher import Flusher
from natsd.connection.route import RouteCloseReason, RouteConnection, RouteSettings
from natsd.core.scheduler import Scheduler
from natsd.protocol.route_encode import (
    ROUTE_PING,
    encode_route_connect,
    encode_route_hmsg,
    encode_route_info,
    encode_route_rmsg,
)
from natsd.protocol.route_parser import R_INFO, R_PEER_ERR, R_PONG, R_RMSG, R_SUB, RouteParser
from natsd.router.account import Account
from natsd.router.subscription import Subscription

pytestmark = pytest.mark.timeout(60)

CLUSTER = "wire"
ACC = b"$G"
HEADERS = b"NATS/1.0\r\nX-Key: v1\r\n\r\n"
_ids = itertools.count(1)


def _settings(server_id: str, **kw: Any) -> RouteSettings:
    kw.setdefault("cluster", CLUSTER)
    return RouteSettings(server_id=server_id, server_name=server_id.lower(), **kw)


class RecHost:
    """A RouteHost that records every report; timers on the running loop."""

    def __init__(self, settings: RouteSettings, port: int = 0) -> None:
        self.settings = settings
        self.flusher = Flusher()
        self.trace = True
        self.port = port
        self.accept = True
        self.ups: list[tuple[RouteConnection, dict[str, Any]]] = []
        self.infos: list[dict[str, Any]] = []
        self.subs: list[tuple[Any, ...]] = []
        self.unsubs: list[tuple[Any, ...]] = []
        # What the connection delivers into the account routes name ACC: a catch-all
        # subscription and one member of each queue group the tests route to, all recording
        # (queue, subject, reply, headers, payload).
        self.msgs: list[tuple[Any, ...]] = []
        account = Account("$G")
        self.wire_accounts = {ACC: account}
        for queue in (None, b"g1", b"g2", b"workers"):
            account.sublist.insert(Subscription(b">", queue, b"1", callback=self._delivered))
        self.closed: list[tuple[RouteConnection, str]] = []
        self.to_self: list[int] = []
        self.errors: list[str] = []
        self.traces: list[str] = []

    @property
    def scheduler(self) -> Scheduler:
        return asyncio.get_running_loop()

    def route_info_fields(self, route: RouteConnection) -> dict[str, Any]:
        return {"version": "2.15.1", "proto": 1, "host": HOST, "port": self.port,
                "max_payload": 1048576}  # fmt: skip

    def route_up(self, route: RouteConnection, info: dict[str, Any]) -> bool:
        self.ups.append((route, info))
        return self.accept

    def route_info(self, route: RouteConnection, info: dict[str, Any]) -> None:
        self.infos.append(info)

    def route_to_self(self, route: RouteConnection) -> None:
        self.to_self.append(route.rid)

    def route_sub(self, route: RouteConnection, *args: Any) -> None:
        self.subs.append(args)

    def route_unsub(self, route: RouteConnection, *args: Any) -> None:
        self.unsubs.append(args)

    def _delivered(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        self.msgs.append((sub.queue, subject, reply, hdr, data))

    def route_closed(self, route: RouteConnection, reason: str) -> None:
        self.closed.append((route, reason))

    def account_stats(self) -> tuple[int, int, int, int]:
        a = self.wire_accounts[ACC]
        return a.msgs_in, a.bytes_in, a.msgs_out, a.bytes_out

    def log_debug(self, msg: str) -> None:
        pass

    def log_error(self, msg: str) -> None:
        self.errors.append(msg)

    def log_trace(self, msg: str) -> None:
        self.traces.append(msg)


async def until(cond: Callable[[], object], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.01)


async def dial(host: RecHost, port: int, **kw: Any) -> RouteConnection:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(
        lambda: RouteConnection(host, next(_ids), solicited=True, **kw), HOST, port
    )
    return proto


async def listen(host: RecHost, **kw: Any) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(
        lambda: RouteConnection(host, next(_ids), solicited=False, **kw), HOST, 0
    )
    host.port = srv.sockets[0].getsockname()[1]
    return srv


def _errors_in(proc: ServerProcess) -> list[str]:
    return [ln for ln in proc.log().splitlines() if "[ERR]" in ln]


async def _cross_traffic(host: RecHost, route: RouteConnection, client_port: int) -> None:
    """Interest and messages both ways between our route and a client on nats-server."""
    nc = await nats.connect(f"nats://{HOST}:{client_port}", allow_reconnect=False)
    try:
        sub = await nc.subscribe("rc.in")
        await nc.flush()
        await until(lambda: (ACC, b"rc.in", None, 1) in host.subs)
        assert route.send_msg(encode_route_rmsg(ACC, b"rc.in", b"_INBOX.r", None, b"hello"))
        assert route.send_msg(encode_route_hmsg(ACC, b"rc.in", None, None, HEADERS, b"hdr"))
        m1 = await asyncio.wait_for(sub.next_msg(), 5)
        m2 = await asyncio.wait_for(sub.next_msg(), 5)
        assert (m1.data, m1.reply, m1.headers) == (b"hello", "_INBOX.r", None)
        assert (m2.data, m2.headers) == (b"hdr", {"X-Key": "v1"})
        # Our interest reaches nats-server, which then forwards a client's publish to us.
        route.send_sub(ACC, b"rc.out", None, 1)
        route.send_sub(ACC, b"rc.outq", b"workers", 1)
        await asyncio.sleep(0.2)
        await nc.publish("rc.out", b"one", reply="_INBOX.x")
        await nc.publish("rc.outq", b"two")
        await nc.flush()
        # nats-server names the queue group in its RMSG: the plain subscription and one
        # member of that group get it, the other groups do not.
        await until(lambda: len(host.msgs) >= 3)
        assert sorted(host.msgs, key=repr) == sorted(
            [
                (None, b"rc.out", b"_INBOX.x", None, b"one"),
                (None, b"rc.outq", None, None, b"two"),
                (b"workers", b"rc.outq", None, None, b"two"),
            ],
            key=repr,
        )
        await sub.unsubscribe()
        await nc.flush()
        await until(lambda: (ACC, b"rc.in", None) in host.unsubs)
    finally:
        await nc.close()


# ---------------------------------------------------------------- (1) we dial nats-server


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    """nats-server with a cluster port and a short route ping interval (250 ms, ping_max 2),
    so several PINGs cross the route within the test."""
    require_nats_server()
    cport = free_port()
    conf = write_config(
        f"cluster {{ name: {CLUSTER}, listen: {HOST}:{cport}, ping_interval: 250ms }}\n",
        tmp_path,
    )
    srv = start_server("nats-server", config_path=conf, log_dir=tmp_path)
    yield srv, cport
    srv.stop()


async def test_dial_nats_server(nats_server: tuple[ServerProcess, int]) -> None:
    proc, cport = nats_server
    host = RecHost(
        _settings("NATSDROUTECONNTESTDIALER0000000000000000000000000000000", ping_interval=0.25)
    )
    route = await dial(host, cport)
    await until(lambda: host.ups)
    assert host.ups[0][0] is route and route.up
    info = host.ups[0][1]
    assert info["cluster"] == CLUSTER and info["headers"] is True and route.headers
    assert route.remote_id == info["server_id"]
    await _cross_traffic(host, route, proc.port)
    # Both keepalives run every 250 ms: at ping_max 2 a missed answer on either side would
    # close the route within 750 ms; it stays up across many PINGs each way.
    await until(lambda: _count(host, "<<-", b"PING") >= 6 and _count(host, "<<-", b"PONG") >= 6)
    assert not route.closed and not host.closed and not host.errors, host.errors
    assert route.rtt > 0 and route.pings_out <= 1
    assert not _errors_in(proc), proc.log()
    route.close()


def _count(host: RecHost, direction: str, verb: bytes) -> int:
    return sum(t.count(repr(verb)[2:-1]) for t in host.traces if direction in t)


# ---------------------------------------------------------------- (2) nats-server dials us


async def test_nats_server_dials_us(tmp_path: Path) -> None:
    require_nats_server()
    host = RecHost(_settings("NATSDROUTECONNTESTLISTENER00000000000000000000000000000"))
    listener = await listen(host)
    proc = start_server(
        "nats-server",
        ["-cluster", f"nats://{HOST}:{free_port()}", "-cluster_name", CLUSTER,
         "-routes", f"nats://{HOST}:{host.port}"],
        log_dir=tmp_path,
    )  # fmt: skip
    try:
        await until(lambda: host.ups, timeout=10)
        route = host.ups[0][0]
        assert not route.solicited and route.up and route.connect_received
        assert host.ups[0][1]["cluster"] == CLUSTER
        await until(lambda: route.rtt > 0, timeout=4)
        await _cross_traffic(host, route, proc.port)
        assert not route.closed
        # nats-server also dials a route dedicated to $SYS (route_account); a server that
        # announces no pool cannot take it, and both sides say so once, in nats-server's
        # words. It does not retry (setNoReconnect); the main route is unaffected.
        sys_route = 'dedicated route for account "$SYS" between those servers'
        assert all(sys_route in e for e in host.errors), host.errors
        assert all(sys_route in e for e in _errors_in(proc)), proc.log()
        assert len([c for c, _ in host.closed if c is not route]) == len(host.closed) <= 1
    finally:
        proc.stop()
        listener.close()
    await until(lambda: route.closed)
    assert route.close_reason == RouteCloseReason.CLIENT_CLOSED


# ---------------------------------------------------------------- (3) two of ours


async def test_two_route_connections_in_process() -> None:
    a = RecHost(_settings("NATSDA"))
    b = RecHost(_settings("NATSDB"))
    listener = await listen(a)
    try:
        rb = await dial(b, a.port)
        await until(lambda: a.ups and b.ups)
        ra = a.ups[0][0]
        assert (ra.remote_id, rb.remote_id) == ("NATSDB", "NATSDA")
        assert b.ups[0][1]["server_name"] == "natsda"
        rb.send_sub(ACC, b"x.>", None, 1)
        rb.send_sub(ACC, b"q", b"grp", 3)
        rb.send_unsub(ACC, b"q", b"grp")
        await until(lambda: a.unsubs)
        assert a.subs == [(ACC, b"x.>", None, 1), (ACC, b"q", b"grp", 3)]
        assert a.unsubs == [(ACC, b"q", b"grp")]
        ra.send_msg(encode_route_rmsg(ACC, b"x.y", None, [b"g1", b"g2"], b"p"))
        ra.send_msg(encode_route_hmsg(ACC, b"x.z", b"r", None, HEADERS, b"h"))
        await until(lambda: len(b.msgs) == 4)
        assert b.msgs == [
            (None, b"x.y", None, None, b"p"),
            (b"g1", b"x.y", None, None, b"p"),
            (b"g2", b"x.y", None, None, b"p"),
            (None, b"x.z", b"r", HEADERS, b"h"),
        ]
        assert b.account_stats() == (2, 1 + len(HEADERS) + 1, 4, 3 + len(HEADERS) + 1)
        # A later INFO (gossip) goes to route_info.
        ra.send(encode_route_info({"server_id": "NATSDC", "cluster": CLUSTER}))
        await until(lambda: b.infos)
        assert b.infos[0]["server_id"] == "NATSDC"
        rb.close()
        await until(lambda: a.closed and b.closed)
        assert not a.errors and not b.errors
    finally:
        listener.close()


async def test_route_to_self_is_dropped_silently() -> None:
    a = RecHost(_settings("NATSDSELF"))
    listener = await listen(a)
    try:
        await dial(a, a.port)
        await until(lambda: len(a.closed) == 2)
        assert {r for _, r in a.closed} == {RouteCloseReason.DUPLICATE_ROUTE}
        assert not a.ups and not a.errors
        assert not any("-ERR" in t for t in a.traces if "->>" in t)
    finally:
        listener.close()


async def test_duplicate_refused_by_host() -> None:
    a = RecHost(_settings("NATSDA"))
    b = RecHost(_settings("NATSDB"))
    b.accept = False
    listener = await listen(a)
    try:
        rb = await dial(b, a.port)
        await until(lambda: b.closed and a.closed)
        assert rb.close_reason == RouteCloseReason.DUPLICATE_ROUTE
    finally:
        listener.close()


async def test_cluster_name_mismatch() -> None:
    a = RecHost(_settings("NATSDA"))
    b = RecHost(_settings("NATSDB", cluster="other"))
    listener = await listen(a)
    try:
        await dial(b, a.port)
        await until(lambda: a.closed and b.closed)
        text = 'Rejecting connection, cluster name "other" does not match "wire"'
        assert a.closed[0][1] == RouteCloseReason.CLUSTER_NAME_CONFLICT
        assert any(text in e for e in a.errors)
        assert not a.ups and not b.ups
    finally:
        listener.close()


async def test_route_authorization() -> None:
    a = RecHost(_settings("NATSDA", user="ruser", password="rpass"))
    listener = await listen(a)
    try:
        good = RecHost(_settings("NATSDB"))
        await dial(good, a.port, credentials=("ruser", "rpass"))
        await until(lambda: a.ups and good.ups)
        assert good.ups[0][1]["auth_required"] is True
        bad = RecHost(_settings("NATSDC"))
        await dial(bad, a.port, credentials=("ruser", "nope"))
        await until(lambda: bad.closed)
        assert any("Authorization Violation" in e for e in bad.errors), bad.errors
        assert len(a.ups) == 1
    finally:
        listener.close()


# ---------------------------------------------------------------- (4) bad input


class RawPeer:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def all_until_closed(self, timeout: float = 5.0) -> bytes:
        """Everything the server writes until it closes the connection."""
        out = b""
        async with asyncio.timeout(timeout):
            while data := await self.reader.read(65536):
                out += data
        self.writer.close()
        return out


@pytest.fixture(params=["natsd", "nats-server"])
async def route_port(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, int, RecHost | None]]:
    """A route port requiring user/password: ours, or nats-server's for the same input."""
    if request.param == "natsd":
        host = RecHost(_settings("NATSDBAD", user="ruser", password="rpass", max_payload=1024))
        listener = await listen(host)
        yield "natsd", host.port, host
        listener.close()
    else:
        require_nats_server()
        cport = free_port()
        conf = write_config(
            f"cluster {{ name: {CLUSTER}, listen: {HOST}:{cport}, "
            "authorization { user: ruser, password: rpass } }\n",
            tmp_path,
        )
        proc = start_server("nats-server", config_path=conf, log_dir=tmp_path)
        yield "nats-server", cport, None
        proc.stop()


GOOD_CONNECT = {
    "echo": True,
    "verbose": False,
    "pedantic": False,
    "headers": True,
    "name": "NATSDPEER",
    "cluster": CLUSTER,
    "user": "ruser",
    "pass": "rpass",
}


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (b"GARBAGE\r\n", b"-ERR 'Authorization Violation'\r\n"),
        (b"PING\r\n", b"-ERR 'Authorization Violation'\r\n"),
        (
            encode_route_connect({**GOOD_CONNECT, "pass": "wrong"}),
            b"-ERR 'Authorization Violation'\r\n",
        ),
        (
            encode_route_connect({"lang": "python", "version": "2.7", "verbose": False}),
            b"-ERR 'Authorization Violation'\r\n",
        ),
        (
            encode_route_connect({**GOOD_CONNECT, "lang": "python"}),
            b"-ERR 'attempted to connect to route port'\r\n",
        ),
        (
            encode_route_connect({**GOOD_CONNECT, "cluster": "other"}),
            b'-ERR \'Rejecting connection, cluster name "other" does not match "wire"\'\r\n',
        ),
    ],
    ids=["garbage", "ping-first", "wrong-password", "client-connect", "client-lang", "cluster"],
)
async def test_bad_first_input(
    route_port: tuple[str, int, RecHost | None], first: bytes, expected: bytes
) -> None:
    """The same -ERR from nats-server and from us, then the connection is closed."""
    kind, port, host = route_port
    peer = RawPeer(*await asyncio.open_connection(HOST, port))
    peer.writer.write(first)
    out = await peer.all_until_closed()
    lines = out.split(b"\r\n")
    assert lines[0].startswith(b"INFO {"), (kind, out)
    errs = [ln + b"\r\n" for ln in lines if ln.startswith(b"-ERR")]
    assert errs == [expected], (kind, out)
    if host is not None:
        await _listener_still_serves(host, port)


async def test_dial_with_credentials(route_port: tuple[str, int, RecHost | None]) -> None:
    """Our CONNECT's user/pass are what nats-server's route authorization reads; wrong ones
    get its -ERR, which closes our side. The dialer cannot know earlier: the accepting side's
    INFO comes before its verdict, so route_up may precede route_closed (as in nats-server,
    whose dialing side adds the route on INFO)."""
    kind, port, _ = route_port
    good = RecHost(_settings("NATSDCREDS1"))
    route = await dial(good, port, credentials=("ruser", "rpass"))
    await until(lambda: good.ups)
    assert good.ups[0][1]["auth_required"] is True, kind
    bad = RecHost(_settings("NATSDCREDS2"))
    await dial(bad, port, credentials=("ruser", "wrong"))
    await until(lambda: bad.closed)
    assert bad.closed[0][1] == RouteCloseReason.PARSE_ERROR
    assert any("'Authorization Violation'" in e for e in bad.errors), (kind, bad.errors)
    await asyncio.sleep(0.3)
    assert route.up and not good.closed, kind
    route.close()


async def _listener_still_serves(host: RecHost, port: int) -> None:
    ups = len(host.ups)
    good = RecHost(_settings(f"NATSDGOOD{ups}"))
    r = await dial(good, port, credentials=("ruser", "rpass"))
    await until(lambda: good.ups and len(host.ups) == ups + 1)
    r.close()


async def _handshaken(port: int) -> tuple[RawPeer, RouteParser]:
    peer = RawPeer(*await asyncio.open_connection(HOST, port))
    peer.writer.write(encode_route_connect(GOOD_CONNECT))
    peer.writer.write(encode_route_info({"server_id": "NATSDPEER", "cluster": CLUSTER}))
    peer.writer.write(ROUTE_PING)
    parser = RouteParser()
    evs: list[Any] = []
    async with asyncio.timeout(5):
        while not any(e[0] == R_PONG for e in evs):
            evs += parser.feed(await peer.reader.read(65536))
    assert evs[0][0] == R_INFO
    return peer, parser


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b"RMSG $G big 2000\r\n" + b"x" * 2000 + b"\r\n", b"-ERR 'maximum payload exceeded'"),
        (b"RS+ $G " + b"s" * 70000 + b"\r\n", b"-ERR 'maximum control line exceeded'"),
        (b"RMSG $G s 3\r\nabcXX", b"-ERR 'message payload not followed by CRLF'"),
        (b"BOGUS\r\n", b"-ERR 'Unknown Protocol Operation'"),
        (b"LS+ $G foo\r\n", b"-ERR 'LS+ is not supported (no lnoc)'"),
    ],
    ids=["oversize-payload", "oversize-line", "bad-crlf", "unknown", "lnoc"],
)
async def test_bad_frame_after_handshake(frame: bytes, expected: bytes) -> None:
    host = RecHost(_settings("NATSDBAD", user="ruser", password="rpass", max_payload=1024))
    listener = await listen(host)
    try:
        peer, _ = await _handshaken(host.port)
        assert host.ups
        peer.writer.write(frame)
        out = await peer.all_until_closed()
        assert out == expected + b"\r\n"
        assert host.closed[0][1] == RouteCloseReason.PARSE_ERROR
        assert not host.msgs and not host.subs
        await _listener_still_serves(host, host.port)
    finally:
        listener.close()


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (
            {"route_account": "A"},
            'Not possible to have a dedicated route for account "A" between those servers',
        ),
        (
            {"route_pool_size": 3, "route_pool_idx": 2},
            "Invalid route pool index: 2 - pool size is 0",
        ),
    ],
    ids=["pinned-account", "pool-index"],
)
async def test_unsupported_route_shapes_refused(info: dict[str, Any], expected: str) -> None:
    host = RecHost(_settings("NATSDBAD"))
    listener = await listen(host)
    try:
        peer = RawPeer(*await asyncio.open_connection(HOST, host.port))
        connect = {k: v for k, v in GOOD_CONNECT.items() if k not in ("user", "pass")}
        peer.writer.write(encode_route_connect(connect))
        peer.writer.write(encode_route_info({"server_id": "NATSDPEER", "cluster": CLUSTER, **info}))
        out = await peer.all_until_closed()
        evs = RouteParser().feed(out)
        assert evs[0][0] == R_INFO and (R_PEER_ERR, expected) in evs, evs
        assert not host.ups and host.closed[0][1] == RouteCloseReason.PROTOCOL
    finally:
        listener.close()


# ---------------------------------------------------------------- (5) a peer that stops reading


async def test_outbound_cap_holds_against_a_peer_that_does_not_read() -> None:
    """Message frames past max_pending are dropped and counted; the route stays up; interest
    frames still go out; once the peer reads, it gets exactly the frames that were kept."""
    accepted: list[RawPeer] = []

    async def on_peer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(encode_route_info({"server_id": "NATSDSTUCK", "cluster": CLUSTER}))
        accepted.append(RawPeer(r, w))

    server = await asyncio.start_server(on_peer, HOST, 0, limit=65536)
    port = server.sockets[0].getsockname()[1]
    host = RecHost(_settings("NATSDSENDER"))
    host.trace = False
    cap = 1 << 20
    route = await dial(host, port, max_pending=cap)
    try:
        await until(lambda: host.ups and accepted)
        frame = encode_route_rmsg(ACC, b"bulk", None, None, b"z" * 65536)
        sent = 0
        for _ in range(2000):  # 128 MiB offered: far beyond socket buffers and the cap
            sent += route.send_msg(frame)
            if _ % 16 == 0:
                await asyncio.sleep(0)
                assert route.pending_bytes <= cap, route.pending_bytes
        await asyncio.sleep(0.05)
        assert route.dropped_msgs > 0 and route.dropped_msgs + sent == 2000
        assert route.dropped_bytes == route.dropped_msgs * len(frame)
        assert route.msgs_out == sent and route.pending_bytes <= cap
        route.send_sub(ACC, b"after.cap", None, 1)  # interest is never dropped
        assert not route.closed
        # The peer reads now: every frame that was kept arrives, then the RS+.
        peer = accepted[0]
        parser = RouteParser()
        rmsgs = 0
        got_sub = False
        async with asyncio.timeout(20):
            while not got_sub:
                for ev in parser.feed(await peer.reader.read(1 << 20)):
                    rmsgs += ev[0] == R_RMSG
                    got_sub = got_sub or (ev[0] == R_SUB and ev[2] == b"after.cap")
        assert rmsgs == sent
    finally:
        route.close()
        server.close()


def test_info_json_shape() -> None:
    """Our INFO, as nats-server parses it: the fields the connection sets itself."""
    host = RecHost(_settings("NATSDX", user="u", password="p", pool_size=1))
    route = RouteConnection(host, 1, solicited=False)
    info = route._our_info()
    assert json.loads(json.dumps(info)) == {
        "version": "2.15.1", "proto": 1, "host": HOST, "port": 0, "max_payload": 1048576,
        "server_id": "NATSDX", "server_name": "natsdx", "cluster": CLUSTER, "headers": True,
        "auth_required": True, "route_pool_size": 1,
    }  # fmt: skip
