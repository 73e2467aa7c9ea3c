"""ClientConnection over a fake transport and a fake host, on a virtual scheduler.

In the style of uvicorn's ``tests/protocols/test_http.py``: bytes go in through
``data_received``, frames come out of the transport's buffer, ``pause_reading`` /
``resume_reading`` / ``close`` / ``abort`` are recorded, and the connection's timers
(auth timeout, pings, write deadline, the close grace) run on a ``VirtualScheduler``, as do
the Flusher and the ReadBudget the host owns. No sockets, no event loop.
"""

from __future__ import annotations

from typing import Any

from natsd.connection.client import ClientConnection, CloseReason
from natsd.connection.fairness import ReadBudget
from natsd.connection.flusher import Flusher
from natsd.connection.limits import ConnectionLimits
from natsd.connection.tls import ClientTls
from natsd.core.scheduler import VirtualScheduler
from natsd.router.account import Account
from natsd.security.permissions import Permissions

INFO = b'INFO {"server_id":"FAKE"}\r\n'
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n'


class MockTransport:
    """The parts of ``asyncio.Transport`` a connection uses; writes go to ``buffer``."""

    def __init__(self) -> None:
        self.buffer = b""
        self.events: list[str] = []
        self.closing = False
        self.write_buffer_size = 0  # what the kernel-side buffer would hold
        self.high_water: int | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("10.0.0.7", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high_water = high

    def get_write_buffer_size(self) -> int:
        return self.write_buffer_size

    def write(self, data: bytes) -> None:
        assert not self.closing, "write after close"
        self.buffer += data

    def take(self) -> bytes:
        out, self.buffer = self.buffer, b""
        return out

    def pause_reading(self) -> None:
        self.events.append("pause_reading")

    def resume_reading(self) -> None:
        self.events.append("resume_reading")

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.events.append("close")
        self.closing = True

    def abort(self) -> None:
        self.events.append("abort")
        self.closing = True


class FakeHost:
    """A ``ClientHost``: one account, no auth unless asked, a virtual scheduler."""

    def __init__(self, limits: ConnectionLimits | None = None, auth_required: bool = False):
        self.scheduler = VirtualScheduler()
        self.flusher = Flusher(self.scheduler)
        self.reads = ReadBudget(self.scheduler)
        self.limits = limits or ConnectionLimits()
        self.auth_required = auth_required
        self.trace = False
        self.account = Account("$G")
        self.released: list[tuple[int, str]] = []
        self.debug: list[str] = []
        self.tls: ClientTls | None = None
        self.tls_errors: list[str] = []
        self.publisher: ClientConnection | None = None

    def info_for(self, client: ClientConnection, connect_info: bool = False) -> bytes:
        return INFO

    def authenticate(
        self, client: ClientConnection, opts: dict[str, Any]
    ) -> tuple[Account, Permissions | None, str] | None:
        if self.auth_required and opts.get("auth_token") != "s3cret":
            return None
        return (self.account, None, "") if self.auth_required else None

    def default_account(self) -> Account:
        return self.account

    def connected(self, client: ClientConnection) -> None:
        pass

    def admit(self, client: ClientConnection) -> str | None:
        return None

    def release(self, client: ClientConnection, reason: str) -> None:
        self.released.append((client.cid, reason))

    def log_debug(self, msg: str) -> None:
        self.debug.append(msg)

    def log_tls_error(self, client: ClientConnection, msg: str) -> None:
        self.tls_errors.append(msg)

    def log_trace(self, msg: str) -> None:
        raise AssertionError("tracing is off")


def connect(
    host: FakeHost, hello: bytes = CONNECT + b"PING\r\n"
) -> tuple[ClientConnection, MockTransport]:
    """A connection that made it through INFO / CONNECT / PING; the buffer is emptied."""
    client = ClientConnection(host, 1)
    t = MockTransport()
    client.connection_made(t)
    assert t.take() == INFO
    if hello:
        client.data_received(hello)
        host.scheduler.run_ready()
        # A protocol-1 CONNECT is confirmed by an INFO right after the first PONG.
        assert t.take() == b"PONG\r\n" + INFO
    return client, t


def test_connection_made_sends_info_and_asks_for_bounded_write_buffers() -> None:
    host = FakeHost()
    client = ClientConnection(host, 1)
    t = MockTransport()
    client.connection_made(t)
    assert t.buffer == INFO
    assert (client.ip, client.port) == ("10.0.0.7", 40000)
    # pause_writing fires past 256 KiB, which starts the write deadline.
    assert t.high_water == 256 * 1024


def test_frames_out_are_coalesced_into_one_write_per_turn() -> None:
    host = FakeHost()
    client, t = connect(host)
    client.data_received(b"SUB foo 1\r\nPUB foo 5\r\nhello\r\nPUB foo 2\r\nhi\r\n")
    # Nothing is written until the flusher's callback runs.
    assert t.buffer == b""
    host.scheduler.run_ready()
    assert t.take() == b"MSG foo 1 5\r\nhello\r\nMSG foo 1 2\r\nhi\r\n"
    assert (client.msgs_in, client.msgs_out) == (2, 2)


def test_input_split_at_every_byte_gives_the_same_frames() -> None:
    stream = b"SUB a.* q 7\r\nHPUB a.b r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"
    host = FakeHost()
    client, t = connect(host, CONNECT.replace(b"{", b'{"headers":true,', 1) + b"PING\r\n")
    for i in range(len(stream)):
        client.data_received(stream[i : i + 1])
    host.scheduler.run_ready()
    assert t.take() == b"HMSG a.b 7 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPONG\r\n"


def test_a_big_read_pauses_the_socket_until_its_backlog_is_processed() -> None:
    host = FakeHost()
    client, t = connect(host)
    frame = b"PUB bulk 10\r\n0123456789\r\n"
    data = b"SUB bulk 1\r\n" + frame * 20_000  # ~500 KB, far past one slice
    client.data_received(data)
    # Only the first slice was processed; the rest waits and the socket stops reading.
    assert t.events == ["pause_reading"]
    assert 0 < client.msgs_in < 20_000
    # A read already in flight joins the backlog instead of jumping it.
    client.data_received(frame)
    host.scheduler.run_ready()
    assert t.events == ["pause_reading", "resume_reading"]
    assert client.msgs_in == 20_001
    out = t.take()
    assert out.count(b"MSG bulk 1 10\r\n0123456789\r\n") == 20_001
    assert host.reads.deferrals >= 1


def test_ping_interval_and_stale_connection() -> None:
    host = FakeHost(ConnectionLimits(ping_interval=10.0, ping_max=2))
    client, t = connect(host)
    sched = host.scheduler
    sched.advance(9.999)
    assert t.buffer == b""
    sched.advance(0.001)
    assert t.take() == b"PING\r\n"
    # A PONG clears the outstanding count.
    client.data_received(b"PONG\r\n")
    sched.advance(10)
    assert t.take() == b"PING\r\n"
    sched.advance(10)
    assert t.take() == b"PING\r\n"
    assert not client.closed
    # Two PINGs unanswered: the third tick closes the connection as stale.
    sched.advance(10)
    assert t.take() == b"-ERR 'Stale Connection'\r\n"
    assert client.closed and client.close_reason == CloseReason.STALE
    assert host.released == [(1, CloseReason.STALE)]
    assert t.events == ["close"]


def test_auth_timeout() -> None:
    host = FakeHost(ConnectionLimits(auth_timeout=2.0), auth_required=True)
    client, t = connect(host, b"")
    host.scheduler.advance(1.999)
    assert not client.closed
    host.scheduler.advance(0.001)
    assert t.take() == b"-ERR 'Authentication Timeout'\r\n"
    assert client.close_reason == CloseReason.AUTH_TIMEOUT


def test_connect_in_time_cancels_the_auth_timer() -> None:
    host = FakeHost(ConnectionLimits(auth_timeout=2.0), auth_required=True)
    hello = CONNECT.replace(b"{", b'{"auth_token":"s3cret",', 1) + b"PING\r\n"
    client, t = connect(host, hello)
    host.scheduler.advance(60)
    assert not client.closed
    assert t.buffer == b""


def test_write_deadline_cuts_off_a_paused_transport() -> None:
    host = FakeHost(ConnectionLimits(write_deadline=5.0))
    client, t = connect(host)
    sched = host.scheduler
    # The transport's buffer passed its high-water mark, then drained in time.
    client.pause_writing()
    sched.advance(4.9)
    client.resume_writing()
    sched.advance(10)
    assert not client.closed
    # Paused again and not drained within write_deadline: a slow consumer.
    client.pause_writing()
    sched.advance(4.999)
    assert not client.closed
    sched.advance(0.001)
    assert client.close_reason == CloseReason.SLOW_CONSUMER_DEADLINE
    assert t.take() == b"-ERR 'Slow Consumer'\r\n"
    assert host.released == [(1, CloseReason.SLOW_CONSUMER_DEADLINE)]
    assert any("Slow Consumer Detected" in d for d in host.debug)
    # close() first; a peer that never reads is aborted after the 2 s grace.
    assert t.events == ["close"]
    sched.advance(1.999)
    assert t.events == ["close"]
    sched.advance(0.001)
    assert t.events == ["close", "abort"]


def test_max_pending_cuts_off_a_slow_consumer_without_queueing_more() -> None:
    host = FakeHost(ConnectionLimits(max_pending=1000))
    client, t = connect(host)
    client.data_received(b"SUB s 1\r\n")
    t.write_buffer_size = 900  # the peer is not reading
    client.data_received(b"PUB s 200\r\n" + b"x" * 200 + b"\r\n")
    host.scheduler.run_ready()
    # The frame would take the queue past max_pending: it is dropped, the client told.
    assert t.take() == b"-ERR 'Slow Consumer'\r\n"
    assert client.close_reason == CloseReason.SLOW_CONSUMER_PENDING
    assert host.released == [(1, CloseReason.SLOW_CONSUMER_PENDING)]
    assert client.out == [] and client.out_size == 0


def test_within_max_pending_is_written() -> None:
    host = FakeHost(ConnectionLimits(max_pending=1000))
    client, t = connect(host)
    client.data_received(b"SUB s 1\r\n")
    t.write_buffer_size = 700
    client.data_received(b"PUB s 200\r\n" + b"x" * 200 + b"\r\n")
    host.scheduler.run_ready()
    assert t.take() == b"MSG s 1 200\r\n" + b"x" * 200 + b"\r\n"
    assert not client.closed


def test_protocol_error_is_reported_and_closes() -> None:
    host = FakeHost()
    client, t = connect(host)
    client.data_received(b"BOGUS\r\n")
    assert client.closed and client.close_reason == CloseReason.PROTOCOL
    assert t.take().startswith(b"-ERR 'Unknown Protocol Operation'")
    assert t.events == ["close"]
    # Closing cancelled the ping timer: nothing more is written, whatever the time.
    host.scheduler.advance(600)
    assert t.buffer == b""
    assert host.scheduler.pending() == []


def test_connection_lost_releases_without_writing() -> None:
    host = FakeHost()
    client, t = connect(host)
    client.data_received(b"SUB s 1\r\n")
    client.connection_lost(None)
    assert client.close_reason == CloseReason.CLIENT_CLOSED
    assert host.released == [(1, CloseReason.CLIENT_CLOSED)]
    assert t.events == ["abort"]
    assert len(host.account.sublist) == 0
