"""RouteConnection over a fake transport on a virtual scheduler: keepalive timing, the auth
timeout, the outbound cap's exact accounting, and the handshake's refusals. No sockets.
"""

from __future__ import annotations

from typing import Any

import pytest

from natsd.connection.flusher import Flusher
from natsd.connection.route import (
    RouteCloseReason,
    RouteConnection,
    RouteSettings,
)
from natsd.core.scheduler import VirtualScheduler
from natsd.protocol.route_encode import (
    encode_route_connect,
    encode_route_info,
    encode_route_rmsg,
)

PEER_INFO = encode_route_info({"server_id": "PEER", "cluster": "c", "headers": True})
CONNECT = encode_route_connect({"name": "PEER", "cluster": "c", "user": "u", "pass": "p"})


class MockTransport:
    def __init__(self) -> None:
        self.buffer = b""
        self.events: list[str] = []
        self.closing = False
        self.write_buffer_size = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.9", 6222) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return self.write_buffer_size

    def write(self, data: bytes) -> None:
        assert not self.closing, "write after close"
        self.buffer += data

    def take(self) -> bytes:
        out, self.buffer = self.buffer, b""
        return out

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.events.append("close")
        self.closing = True

    def abort(self) -> None:
        self.events.append("abort")
        self.closing = True


class FakeHost:
    def __init__(self, **settings: Any) -> None:
        self.scheduler = VirtualScheduler()
        self.flusher = Flusher(self.scheduler)
        self.settings = RouteSettings(server_id="ME", cluster="c", **settings)
        self.trace = False
        self.wire_accounts: dict[bytes, Any] = {}
        self.ups: list[dict[str, Any]] = []
        self.subs: list[tuple[Any, ...]] = []
        self.closed: list[str] = []
        self.to_self: list[int] = []
        self.errors: list[str] = []
        self.adopted: list[tuple[str, bool]] = []

    def adopt_cluster_name(self, route: RouteConnection, name: str, final: bool) -> None:
        # What the mesh does first: the shared settings carry the new name.
        self.adopted.append((name, final))
        self.settings.cluster = name
        if final:
            self.settings.cluster_dynamic = False

    def route_info_fields(self, route: RouteConnection) -> dict[str, Any]:
        return {"port": 6222}

    def route_up(self, route: RouteConnection, info: dict[str, Any]) -> bool:
        self.ups.append(info)
        return True

    def route_info(self, route: RouteConnection, info: dict[str, Any]) -> None:
        pass

    def route_to_self(self, route: RouteConnection) -> None:
        self.to_self.append(route.rid)

    def route_sub(self, route: RouteConnection, *args: Any) -> None:
        self.subs.append(args)

    def route_unsub(self, route: RouteConnection, *args: Any) -> None:
        pass

    def route_rmsg(self, route: RouteConnection, *args: Any) -> None:
        pass

    def route_hmsg(self, route: RouteConnection, *args: Any) -> None:
        pass

    def route_closed(self, route: RouteConnection, reason: str) -> None:
        self.closed.append(reason)

    def log_debug(self, msg: str) -> None:
        pass

    def log_error(self, msg: str) -> None:
        self.errors.append(msg)

    def log_trace(self, msg: str) -> None:
        raise AssertionError("tracing is off")


def make(
    host: FakeHost, solicited: bool = True, **kw: Any
) -> tuple[RouteConnection, MockTransport]:
    r = RouteConnection(host, 1, solicited=solicited, **kw)
    t = MockTransport()
    r.connection_made(t)
    host.scheduler.run_ready()
    return r, t


def up(host: FakeHost, **kw: Any) -> tuple[RouteConnection, MockTransport]:
    r, t = make(host, **kw)
    r.data_received(PEER_INFO)
    host.scheduler.run_ready()
    assert r.up and host.ups
    t.take()
    return r, t


def test_dialer_sends_connect_then_info() -> None:
    host = FakeHost()
    _, t = make(host, credentials=("u", "p"))
    connect, info, rest = t.take().split(b"\r\n")
    assert connect.startswith(b"CONNECT {") and b'"user":"u","pass":"p"' in connect
    assert b'"name":"ME"' in connect and b'"cluster":"c"' in connect and b"lang" not in connect
    assert info.startswith(b"INFO {") and info.endswith(b"} ") and rest == b""


def test_acceptor_sends_info_only() -> None:
    _, t = make(FakeHost(), solicited=False)
    assert t.take().startswith(b"INFO {")


def test_ping_schedule_and_stale() -> None:
    """First PING after 1 s, then every min(ping_interval, 30 s); the third unanswered
    PING is not sent: -ERR 'Stale Connection' and close (ping_max 2)."""
    host = FakeHost()
    r, t = up(host)
    sched = host.scheduler
    sched.advance(0.99)
    assert t.take() == b""
    sched.advance(0.01)
    assert t.take() == b"PING\r\n"
    r.data_received(b"PONG\r\n")
    assert r.pings_out == 0
    sched.advance(29.9)
    assert t.take() == b""
    sched.advance(0.1)
    assert t.take() == b"PING\r\n"  # pings_out 1
    sched.advance(30)
    assert t.take() == b"PING\r\n"  # pings_out 2
    sched.advance(30)
    assert t.take() == b"-ERR 'Stale Connection'\r\n"
    assert r.closed and host.closed == [RouteCloseReason.STALE]


def test_ping_interval_below_the_cap() -> None:
    host = FakeHost(ping_interval=5.0)
    _, t = up(host)
    host.scheduler.advance(1.0)
    assert t.take() == b"PING\r\n"
    host.scheduler.advance(5.0)
    assert t.take() == b"PING\r\n"


def test_ping_answered_with_pong() -> None:
    host = FakeHost()
    r, t = up(host)
    r.data_received(b"PING\r\n")
    host.scheduler.run_ready()
    assert t.take() == b"PONG\r\n"


def test_auth_timeout() -> None:
    host = FakeHost(user="u", password="p", auth_timeout=0.5)
    _, t = make(host, solicited=False)
    assert b'"auth_required":true' in t.take()
    host.scheduler.advance(0.5)
    assert t.take() == b"-ERR 'Authentication Timeout'\r\n"
    assert host.closed == [RouteCloseReason.AUTH_TIMEOUT] and "close" in t.events


def test_no_auth_timeout_when_connect_arrives() -> None:
    host = FakeHost(user="u", password="p", auth_timeout=0.5)
    r, _ = make(host, solicited=False)
    r.data_received(CONNECT + PEER_INFO)
    host.scheduler.advance(0.6)
    assert r.up and not r.closed


def test_interest_before_info_is_refused() -> None:
    host = FakeHost()
    r, t = make(host)
    t.take()
    r.data_received(b"RS+ $G foo\r\n")
    host.scheduler.run_ready()
    assert t.take() == b"-ERR 'Unknown Protocol Operation'\r\n"
    assert not host.subs and host.closed == [RouteCloseReason.PROTOCOL]


def test_peer_err_closes() -> None:
    host = FakeHost()
    r, t = up(host)
    r.data_received(b"-ERR 'something broke'\r\n")
    assert host.closed == [RouteCloseReason.PARSE_ERROR]
    assert any("something broke" in e for e in host.errors)
    assert t.take() == b""  # no -ERR back


def test_pool_mismatch_refused_when_we_announce_a_pool() -> None:
    host = FakeHost(pool_size=1)
    r, t = make(host)
    t.take()
    r.data_received(encode_route_info({"server_id": "PEER", "cluster": "c", "route_pool_size": 3}))
    assert t.take().startswith(b"-ERR 'Mismatch route pool size: 3 vs 1")
    assert not host.ups and host.closed == [RouteCloseReason.PROTOCOL]


def test_any_peer_pool_accepted_when_we_announce_none() -> None:
    host = FakeHost()
    r, _ = make(host)
    r.data_received(encode_route_info({"server_id": "PEER", "cluster": "c", "route_pool_size": 3}))
    assert r.up


def test_unsupported_pool_size_setting() -> None:
    with pytest.raises(ValueError, match="pool_size 3"):
        RouteSettings(server_id="X", cluster="c", pool_size=3)


def test_message_cap_exact_accounting() -> None:
    """Queued bytes (ours plus the transport's) never pass max_pending; what does not fit is
    dropped and counted, and the route stays up."""
    host = FakeHost()
    r, t = up(host, max_pending=1000)
    frame = encode_route_rmsg(b"$G", b"s", None, None, b"x" * 90)  # 108 bytes
    n = len(frame)
    kept = sum(r.send_msg(frame) for _ in range(20))
    assert kept == 1000 // n and r.dropped_msgs == 20 - kept
    assert r.dropped_bytes == r.dropped_msgs * n and r.out_size == kept * n
    # The kernel takes none of it: the transport holds it all after the write.
    t.write_buffer_size = kept * n
    host.scheduler.run_ready()
    assert t.take() == frame * kept
    assert not r.send_msg(frame)
    # The transport drains: frames fit again.
    t.write_buffer_size = 0
    r.resume_writing()
    assert r.send_msg(frame)
    assert not r.closed and host.closed == []


def test_interest_is_never_dropped_but_bounded() -> None:
    host = FakeHost()
    r, t = up(host, max_pending=1000)
    frame = encode_route_rmsg(b"$G", b"s", None, None, b"x" * 900)
    assert r.send_msg(frame)
    assert not r.send_msg(frame)
    r.send_sub(b"$G", b"after", None, 1)  # past the message cap: still queued
    host.scheduler.run_ready()
    assert t.take() == frame + b"RS+ $G after\r\n"
    # A peer that reads nothing while interest piles up to 4 x max_pending is cut off.
    t.write_buffer_size = 3500
    r.send_sub(b"$G", b"more", None, 1)
    host.scheduler.run_ready()
    assert not r.closed
    for i in range(100):
        r.send_sub(b"$G", b"subject.%d" % i, None, 1)
        if r.closed:
            break
    assert r.closed and host.closed == [RouteCloseReason.SLOW_CONSUMER_PENDING]
    assert "abort" in t.events


def test_route_closed_reported_once() -> None:
    host = FakeHost()
    r, t = up(host)
    r.close()
    r.connection_lost(None)
    assert host.closed == [RouteCloseReason.SERVER_SHUTDOWN]
    host.scheduler.advance(2.0)
    assert t.events == ["close", "abort"]


def test_generated_name_is_announced_and_yields_to_a_configured_one() -> None:
    host = FakeHost(cluster_dynamic=True)
    host.settings.cluster = "mmm"
    _, t = make(host, solicited=False)
    assert b'"cluster":"mmm","cluster_dynamic":true' in t.take()
    r, t = make(host, solicited=False)
    # The peer's name is configured ("aaa" sorts first, it still wins): ours for good.
    r.data_received(encode_route_connect({"name": "PEER", "cluster": "aaa"}))
    r.data_received(encode_route_info({"server_id": "PEER", "cluster": "aaa"}))
    host.scheduler.run_ready()
    assert host.adopted == [("aaa", True)] and r.up and not host.errors
    assert not host.settings.cluster_dynamic


def test_generated_names_converge_on_the_greater() -> None:
    # A dialer with a generated name meets a peer whose generated name sorts after it.
    host = FakeHost(cluster_dynamic=True)
    host.settings.cluster = "bbb"
    r, t = make(host)
    assert b'"cluster":"bbb","cluster_dynamic":true' in t.take()
    r.data_received(
        encode_route_info({"server_id": "PEER", "cluster": "ccc", "cluster_dynamic": True})
    )
    host.scheduler.run_ready()
    assert host.adopted == [("ccc", False)] and r.up and host.settings.cluster_dynamic
    # A smaller generated name does not win: that peer adopts ours instead, so we keep it
    # and refuse its connection as nats-server does (its next dial carries our name).
    r2, _ = make(host, solicited=False)
    r2.data_received(
        encode_route_connect({"name": "P2", "cluster": "aaa", "cluster_dynamic": True})
    )
    host.scheduler.run_ready()
    assert host.adopted == [("ccc", False)] and r2.closed
    assert host.closed == [RouteCloseReason.CLUSTER_NAME_CONFLICT]


def test_configured_name_never_yields() -> None:
    host = FakeHost()
    r, _ = make(host)
    r.data_received(encode_route_info({"server_id": "PEER", "cluster": "zzz"}))
    host.scheduler.run_ready()
    assert not host.adopted and r.closed
    assert host.closed == [RouteCloseReason.CLUSTER_NAME_CONFLICT]
