"""A client connection: asyncio protocol, protocol state, outbound buffering and limits.

Ownership: the event loop thread owns every ClientConnection. Inbound bytes go through the
sans-I/O parser; published messages are matched in the account's Sublist and fanned out by
``router.deliver``, which appends frames to subscribers' ``out`` lists. The ``Flusher`` then
writes each dirty connection once per loop turn.

Flow control: outbound bytes queued for a client (our ``out`` list plus the transport's
buffer) are bounded by ``max_pending``; past it the client is a slow consumer and is cut off,
as is a client whose transport stays paused for longer than ``write_deadline``.

Timers (auth timeout, pings, write deadline, the close grace) go on the host's
``Scheduler``: the running loop in the server, a virtual one in tests.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

import orjson

from natsd.connection.fairness import INITIAL_COST, MIN_SLICE, ReadBudget, slice_for
from natsd.connection.tls import TLS_RECORD_HANDSHAKE, ClientTls, TlsSession, handshake_error
from natsd.connection.transport import end_transport, open_transport, write_buffered
from natsd.core.goquote import go_quote
from natsd.core.scheduler import Cancellable, Scheduler
from natsd.core.subjects import is_valid_literal_subject, is_valid_subject
from natsd.protocol.encode import OK, PING, PONG, encode_err
from natsd.protocol.parser import (
    OP_CONNECT,
    OP_ERR,
    OP_HPUB,
    OP_PING,
    OP_PONG,
    OP_PUB,
    OP_SUB,
    OP_UNSUB,
    Parser,
    message_body,
)
from natsd.router.account import SYSTEM_ACCOUNT, Account
from natsd.router.deliver import deliver, no_responders_frame
from natsd.router.msgtrace import (
    KIND_CLIENT,
    TRACE_DEST,
    TRACE_DEST_KEY,
    TRACE_ORIGIN_ACCOUNT,
    MsgTrace,
    deliver_traced,
    finish_trace,
    header_block,
    is_trace_only,
    run_internal,
    send_trace,
    trace_headers,
)
from natsd.router.subscription import Sink, Subscription

if TYPE_CHECKING:
    from natsd.connection.flusher import Flusher
    from natsd.connection.limits import ConnectionLimits
    from natsd.security.permissions import Permissions, ReplyTracker
    from natsd.security.tls import PeerCert

__all__ = ["ClientConnection", "ClientHost", "CloseReason"]

_FLUSH_NOW: Final = 65536
# Reply subjects only a server makes (nats-server's ``isReservedReply``): service import
# responses, JetStream acks, gateway replies. A client publishing with one is refused.
_RESERVED_REPLIES: Final = (b"_R_.", b"$JS.ACK.", b"_GR_.")
_RESERVED_SECOND: Final = b"RGJ"


class CloseReason:
    CLIENT_CLOSED: Final = "Client Closed"
    SLOW_CONSUMER_PENDING: Final = "Slow Consumer (Pending Bytes)"
    SLOW_CONSUMER_DEADLINE: Final = "Slow Consumer (Write Deadline)"
    STALE: Final = "Stale Connection"
    AUTH_VIOLATION: Final = "Authentication Failure"
    AUTH_TIMEOUT: Final = "Authentication Timeout"
    PROTOCOL: Final = "Protocol Violation"
    MAX_PAYLOAD: Final = "Maximum Payload Exceeded"
    MAX_CONNECTIONS: Final = "Maximum Connections Exceeded"
    SERVER_SHUTDOWN: Final = "Server Shutdown"
    READ_ERROR: Final = "Read Error"
    TLS_HANDSHAKE: Final = "TLS Handshake Failure"


# What a client waits in before its first protocol byte (ClientConnection.tls_wait).
_TLS_NONE: Final = 0  # plain, or TLS under way (self.tls)
_TLS_SNIFF: Final = 1  # allow_non_tls: the first byte says TLS (0x16) or plain
_TLS_FIRST: Final = 2  # handshake_first with a fallback: any byte starts the handshake


class ClientHost(Protocol):
    """What a connection needs from the server that owns it."""

    flusher: Flusher
    reads: ReadBudget
    limits: ConnectionLimits
    auth_required: bool
    # The client port's TLS (None: plain only).
    tls: ClientTls | None
    # The connection whose read is being processed now, None between reads: what a
    # server-side service answering inside the publish (``$SYS.REQ.USER.INFO``) asks
    # "who is asking" (nats-server passes the client along with the message).
    publisher: ClientConnection | None

    def info_for(self, client: ClientConnection, connect_info: bool = False) -> bytes: ...

    def authenticate(
        self, client: ClientConnection, opts: dict[str, Any]
    ) -> tuple[Account, Permissions | None, str] | None: ...

    def default_account(self) -> Account: ...

    def admit(self, client: ClientConnection) -> str | None:
        """Register a new connection; returns an -ERR text to refuse it."""

    def release(self, client: ClientConnection, reason: str) -> None: ...

    def connected(self, client: ClientConnection) -> None:
        """A client's first CONNECT was accepted (its account is known now)."""

    def log_debug(self, msg: str) -> None: ...

    def log_tls_error(self, client: ClientConnection, msg: str) -> None:
        """A failed handshake (nats-server logs it as an error with the client's address)."""

    trace: bool

    def log_trace(self, msg: str) -> None: ...

    def trace_server(self) -> dict[str, Any]:
        """The ``server`` block of a message trace event (nats-server's ServerInfo)."""

    @property
    def scheduler(self) -> Scheduler:
        """Where the connection's timers go (the event loop the server runs on)."""


class ClientConnection(Sink):
    """An asyncio protocol (duck-typed so mypyc can compile it as a native class)."""

    def __init__(self, host: ClientHost, cid: int) -> None:
        super().__init__(cid)
        self.host = host
        lim = host.limits
        self.limits = lim
        self.parser = Parser(lim.max_payload, lim.max_control_line)
        self.transport: asyncio.Transport | None = None
        self.account: Account = host.default_account()
        self.subs: dict[bytes, Subscription] = {}
        self.msgs_in = 0
        self.bytes_in = 0
        # CONNECT state
        # nats-server's defaults before (and beneath) CONNECT.
        self.verbose = True
        self.pedantic = True
        self.no_responders = False
        self.connected = False
        self.name = ""
        self.lang = ""
        self.version = ""
        self.user = ""
        self.protocol = 0
        # Credentials as sent in CONNECT, re-checked when the configuration is reloaded.
        self.credentials: dict[str, Any] = {}
        # Async INFO (lame duck mode, ...) goes only to protocol-1 clients past their first
        # PING after CONNECT, as in nats-server (firstPongSent).
        self.async_info = False
        self.permissions: Permissions | None = None
        self.replies: ReplyTracker | None = None
        # Publishes need the slow path when any per-message check applies.
        self._pub_checks = True
        # why _check_pub refused the last publish ("" when it did not, or not for its
        # permissions): a traced one still sends its trace, with the error
        self._denied = ""
        self.ip = ""
        self.port = 0
        self.start = time.time()
        self.last_activity = self.start
        self.rtt_start = 0.0
        self.rtt = 0.0
        self.pings_out = 0
        self.closed = False
        self.close_reason = ""
        self._connect_info_pending = False
        # Input read but not yet processed, from _backlog_off on (see connection/fairness.py);
        # the socket's reading is paused meanwhile.
        self._backlog: bytes | None = None
        self._backlog_off = 0
        self.read_cost = INITIAL_COST  # seconds per input byte, measured (fairness.py)
        self._auth_timer: Cancellable | None = None
        self._ping_timer: Cancellable | None = None
        self._deadline_timer: Cancellable | None = None
        # The CONNECT as sent: a worker this connection moves to authenticates it again.
        self.connect_opts: dict[str, Any] = {}
        # Moving to another worker (cluster/handoff.py): reading is paused and what still
        # arrives is kept for the worker that takes the socket (or for us, if the move fails).
        self.moving = False
        self.move_input = b""
        self.moved_at = 0.0
        # Created here for a connection moving in: connection_made attaches its socket.
        self.adopting = False
        # TLS (connection/tls.py): the session once a handshake starts, the settings it was
        # accepted under, the peer's certificate once it is done.
        self.tls: TlsSession | None = None
        self.tls_cfg: ClientTls | None = host.tls
        self.tls_wait = _TLS_NONE
        self.tls_peer: PeerCert | None = None
        self.tls_first = False  # the handshake came before INFO (/connz tls_first)
        self._tls_timer: Cancellable | None = None
        # The nkey challenge this connection's INFO carried (empty: none).
        self.nonce = b""
        # INFO's tls_required when it differs from the server's (a handshake_first fallback).
        self.info_tls_required: bool | None = None

    # ------------------------------------------------------------------ lifecycle
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self.ip, self.port = open_transport(transport)
        # Pause notifications start the write deadline; the byte bound is checked on flush.
        transport.set_write_buffer_limits(high=256 * 1024)
        if self.adopting:
            self._attach_moved()
            return
        refused = self.host.admit(self)
        if refused is not None:
            transport.write(encode_err(refused))
            self._close(CloseReason.MAX_CONNECTIONS, flush=True)
            return
        loop = self.host.scheduler
        cfg = self.tls_cfg
        if cfg is None:
            transport.write(self.host.info_for(self))
        elif cfg.handshake_first:
            # INFO goes out encrypted once the handshake is done; with a fallback delay a
            # client that has sent nothing by then gets INFO first (nats-server's order).
            if cfg.fallback_delay > 0:
                self.tls_wait = _TLS_FIRST
                self._tls_timer = loop.call_later(cfg.fallback_delay, self._tls_fallback)
            else:
                self._start_tls(cfg)
        else:
            transport.write(self.host.info_for(self))
            if cfg.allow_non_tls:
                self.tls_wait = _TLS_SNIFF
            else:
                self._start_tls(cfg)
        if self.host.auth_required:
            self._auth_timer = loop.call_later(self.limits.auth_timeout, self._auth_timeout)
        self._ping_timer = loop.call_later(self.limits.ping_interval, self._ping_tick)
        self.rtt_start = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._close(self.close_reason or CloseReason.CLIENT_CLOSED, flush=False)

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        if self._deadline_timer is None:
            self._deadline_timer = self.host.scheduler.call_later(
                self.limits.write_deadline, self._write_deadline_exceeded
            )

    def resume_writing(self) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None

    def _write_deadline_exceeded(self) -> None:
        self._deadline_timer = None
        self._slow_consumer(CloseReason.SLOW_CONSUMER_DEADLINE)

    # ------------------------------------------------------------------ inbound
    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        tls = self.tls
        if tls is not None or self.tls_wait:
            data = self._tls_in(data)
            if not data:
                return
            tls = self.tls
            if tls is not None and tls.closed_by_peer:
                # What came before the peer's close_notify is taken, then the close answered.
                self._receive(data)
                self._close(CloseReason.CLIENT_CLOSED, flush=True)
                return
        self._receive(data)

    def _receive(self, data: bytes) -> None:
        """Plaintext input: held while moving or behind a backlog, else processed within
        this connection's read budget (connection/fairness.py)."""
        if self.moving:
            self.move_input += data
            return
        if self._backlog is not None:
            # Reading is paused while a backlog waits; a read already in flight joins it.
            self._backlog = self._backlog[self._backlog_off :] + data
            self._backlog_off = 0
            return
        t0 = time.perf_counter()
        size = len(data)
        n = self.host.reads.grant(size, self.read_cost, t0)
        if n < size:
            self._backlog = data
            self._backlog_off = n
            t = self.transport
            if t is not None and not t.is_closing():
                t.pause_reading()
            self.host.reads.defer(self)
            data = data[:n]
        self._process_timed(data, t0)

    def continue_backlog(self, quantum: float) -> None:
        """Process about ``quantum`` seconds more of held input (called by ReadBudget)."""
        data = self._backlog
        if data is None or self.closed or self.moving:
            return  # (a move resumes it, or hands it to the next worker)
        t0 = time.perf_counter()
        off = self._backlog_off
        end = off + slice_for(quantum, self.read_cost)
        if end < len(data):
            self._backlog_off = end
            self.host.reads.defer(self)
            chunk = data[off:end]
        else:
            self._backlog = None
            end = len(data)
            t = self.transport
            if t is not None and not t.is_closing():
                t.resume_reading()
            chunk = data[off:] if off else data
        self._process_timed(chunk, t0)

    # ------------------------------------------------------------------ TLS
    def _start_tls(self, cfg: ClientTls) -> None:
        self.tls = TlsSession(cfg.context, server_side=True)
        self._tls_timer = self.host.scheduler.call_later(cfg.timeout, self._tls_timeout)

    def _tls_fallback(self) -> None:
        """handshake_first's delay passed with nothing read: INFO first, then TLS as the
        port otherwise does it."""
        self._tls_timer = None
        if self.closed or self.tls_wait != _TLS_FIRST:
            return
        self.tls_wait = _TLS_NONE
        cfg = self.tls_cfg
        assert cfg is not None
        self.info_tls_required = not cfg.allow_non_tls
        t = self.transport
        if t is not None:
            t.write(self.host.info_for(self))
        if cfg.allow_non_tls:
            self.tls_wait = _TLS_SNIFF
        else:
            self._start_tls(cfg)

    def _tls_timeout(self) -> None:
        self._tls_timer = None
        tls = self.tls
        if self.closed or tls is None or tls.established:
            return
        # nats-server's -ERR 'Secure Connection - TLS Required' goes into the unfinished
        # TLS session, so the client never sees it: the connection just closes.
        self.host.log_debug(f"{self.ip}:{self.port} - cid:{self.cid} - TLS handshake timeout")
        self._close(CloseReason.TLS_HANDSHAKE, flush=False)

    def _tls_in(self, data: bytes) -> bytes:
        """Bytes read -> the plaintext they carry; runs the handshake on the way."""
        wait = self.tls_wait
        if wait:
            self.tls_wait = _TLS_NONE
            cfg = self.tls_cfg
            assert cfg is not None
            if wait == _TLS_SNIFF and data[0] != TLS_RECORD_HANDSHAKE:
                return data  # a plain client on an allow_non_tls port
            if self._tls_timer is not None:
                self._tls_timer.cancel()
                self._tls_timer = None
            self._start_tls(cfg)
        tls = self.tls
        assert tls is not None
        was = tls.established
        probe = not tls.fed and data[0] != TLS_RECORD_HANDSHAKE
        try:
            plain = tls.feed(data)
        except ssl.SSLError as e:
            if probe:
                # A plain client or a port probe: nats-server logs it at debug level only.
                self.host.log_debug(
                    f"{self.ip}:{self.port} - cid:{self.cid} - TLS handshake error:"
                    " tls: first record does not look like a TLS handshake"
                )
                self._close(CloseReason.TLS_HANDSHAKE, flush=False)
            else:
                self._tls_failed(tls, handshake_error(e))
            return b""
        tls.send_pending(self.transport)
        if not was and tls.established and not self._tls_established(tls):
            return b""
        if tls.closed_by_peer and not plain:
            # Answer its close_notify (asyncio's SSL transports wait for it when closing).
            self._close(CloseReason.CLIENT_CLOSED, flush=True)
            return b""
        return plain

    def _tls_failed(self, tls: TlsSession, why: str) -> None:
        tls.send_pending(self.transport)  # the alert that says why
        self.host.log_tls_error(self, f"TLS handshake error: {why}")
        self._close(CloseReason.TLS_HANDSHAKE, flush=True)

    def _tls_established(self, tls: TlsSession) -> bool:
        if self._tls_timer is not None:
            self._tls_timer.cancel()
            self._tls_timer = None
        cfg = self.tls_cfg
        assert cfg is not None
        self.tls_peer = tls.peer()
        if cfg.pinned_certs:
            peer = self.tls_peer
            if peer is None or peer.spki_sha256 not in cfg.pinned_certs:
                self._tls_failed(tls, "certificate not pinned")
                return False
        if self.info_tls_required is None and cfg.handshake_first:
            # handshake_first: INFO now, over TLS.
            self.tls_first = True
            self.send(self.host.info_for(self))
        if self.out:
            self.flush()
        return True

    def _process_timed(self, data: bytes, t0: float) -> None:
        """``_process``, then fold its cost per byte into ``read_cost`` (which sizes this
        connection's slices, see fairness.py); ``t0`` is when the work began."""
        self._process(data)
        n = len(data)
        if n >= MIN_SLICE:
            # Tiny reads are mostly fixed overhead; they would overstate the cost per byte.
            self.read_cost = (self.read_cost + (time.perf_counter() - t0) / n) * 0.5

    def _process(self, data: bytes) -> None:
        host = self.host
        host.publisher = self
        try:
            self._process_read(data)
        finally:
            host.publisher = None

    def _process_read(self, data: bytes) -> None:
        self.last_activity = time.time()
        if self.host.trace:
            self.host.log_trace(f"cid:{self.cid} <<- {data[:512]!r}")
        events = self.parser.feed(data)
        acct = self.account
        sublist = acct.sublist
        forward = sublist.forward
        # Counters are summed in locals and stored once per read.
        nin = 0
        bin_ = 0
        nout = 0
        bout = 0
        hlen: int
        size: int
        tail: bytes
        subject: bytes
        reply: bytes | None
        for ev in events:
            # Typed locals: compiled, the tag and sizes are unboxed once, compared natively.
            op: int = ev[0]
            if op == OP_PUB or op == OP_HPUB:
                # (OP_PUB, subject, reply, size, tail) / (OP_HPUB, subject, reply, hlen, size, tail)
                if op == OP_PUB:
                    hlen = 0
                    size = ev[3]
                    tail = ev[4]
                else:
                    if not self.headers:
                        # nats-server drops a client that sends HPUB without headers support.
                        self._close(CloseReason.PROTOCOL, flush=True)
                        return
                    hlen = ev[3]
                    size = ev[4]
                    tail = ev[5]
                subject = ev[1]
                reply = ev[2]
                nin += 1
                bin_ += size
                if self._pub_checks and not self._check_pub(subject, reply):
                    if self.closed:
                        return
                    if self._denied:
                        # (a traced one is refused for its trace destination first, if at all)
                        if not hlen or tail.find(TRACE_DEST, 0, hlen + 32) < 0:
                            self.send(encode_err(self._denied))
                        else:
                            self._traced(subject, reply, tail, size, hlen, self._denied)
                    continue
                if reply is not None and len(reply) > 4 and reply[1] in _RESERVED_SECOND:
                    # ("_R", "_G" or "$J": perhaps a reply only a server may make; an
                    # _INBOX reply is turned away by its second byte)
                    if _reserved_reply(reply):
                        r = reply.decode(errors="replace")
                        self.send(
                            encode_err(
                                f"Permissions Violation for Publish with Reply of {go_quote(r)}"
                            )
                        )
                        continue
                if hlen and tail.find(TRACE_DEST, 0, hlen + 32) > 0:
                    # (a traced message: a header block that names a trace destination)
                    k = self._traced(subject, reply, tail, size, hlen)
                    if k >= 0:
                        nout += k
                        bout += k * size
                        continue
                psubs, qsubs = sublist.match(subject)
                if forward is not None:
                    # Routes are up: the cluster decides (local delivery included).
                    k = forward(subject, reply, tail, size, hlen, psubs, qsubs, self)
                    if k > 0:
                        nout += k
                        bout += k * size
                    elif k < 0 and reply and self.no_responders:
                        self._send_no_responders(subject, reply)
                elif psubs or qsubs:
                    k = deliver(psubs, qsubs, subject, reply, tail, size, hlen, self)
                    nout += k
                    bout += k * size
                elif reply and self.no_responders:
                    self._send_no_responders(subject, reply)
            elif op == OP_SUB:
                if not self._pre_connect_ok():
                    return
                self._process_sub(ev[1], ev[2], ev[3])
            elif op == OP_UNSUB:
                if not self._pre_connect_ok():
                    return
                self._process_unsub(ev[1], ev[2])
            elif op == OP_PING:
                if not self._pre_connect_ok():
                    return
                self.send(PONG)
                if self.connected and self.protocol >= 1:
                    self.async_info = True
                if self._connect_info_pending:
                    self._connect_info_pending = False
                    self.send(self.host.info_for(self, connect_info=True))
            elif op == OP_PONG:
                self.pings_out = 0
                if self.rtt_start:
                    self.rtt = time.monotonic() - self.rtt_start
                    self.rtt_start = 0.0
            elif op == OP_CONNECT:
                if not self._process_connect(ev[1]):
                    return
                acct = self.account
                sublist = acct.sublist
                forward = sublist.forward
            elif op == OP_ERR:
                msg = ev[1]
                if self.host.auth_required and not self.connected:
                    # Anything but CONNECT first is an auth error when auth is required.
                    self._auth_violation()
                    break
                if len(ev) > 2 and ev[3].find(TRACE_DEST) > 0:
                    # (an oversized HPUB whose headers came with it)
                    self._trace_oversized(ev[2], ev[3], ev[4])
                if msg is not None:
                    self.send(encode_err(msg))
                reason = CloseReason.PROTOCOL
                if msg == "Maximum Payload Violation":
                    reason = CloseReason.MAX_PAYLOAD
                self._close(reason, flush=True)
                break
        if nin:
            self.msgs_in += nin
            self.bytes_in += bin_
            acct.msgs_in += nin
            acct.bytes_in += bin_
            acct.msgs_out += nout
            acct.bytes_out += bout
        if len(data) >= _FLUSH_NOW:
            # Large reads carry many messages: start writing them before the next read.
            self.host.flusher.run()

    def _pre_connect_ok(self) -> bool:
        if self.connected or not self.host.auth_required:
            return True
        self._auth_violation()
        return False

    def _check_pub(self, subject: bytes, reply: bytes | None) -> bool:
        """Slow-path publish checks: auth state, pedantic subject rules, +OK, permissions.

        The order is nats-server's: a pedantic subject error is reported but the message
        still goes out; a permissions violation drops it with no +OK; otherwise +OK comes
        before any delivery.
        """
        self._denied = ""
        if not self._pre_connect_ok():
            return False
        if self.pedantic and not is_valid_literal_subject(subject):
            self.send(encode_err("Invalid Publish Subject"))
        perms = self.permissions
        if (
            perms is not None
            and perms.publish is not None
            and not perms.publish.allowed(subject)
            and (self.replies is None or not self.replies.allowed(subject))
        ):
            s = subject.decode(errors="replace")
            # the caller sends it (a traced publish may be refused for its destination)
            self._denied = f'Permissions Violation for Publish to "{s}"'
            return False
        if self.verbose:
            self.send(OK)
        return True

    def _traced(
        self,
        subject: bytes,
        reply: bytes | None,
        tail: bytes,
        size: int,
        hlen: int,
        refused: str = "",
    ) -> int:
        """A publish that asks for a trace (``router/msgtrace.py``): deliveries made, or -1
        when it goes the usual way untraced. ``refused``: the publish itself was refused
        with this error: the trace says so and nothing is delivered."""
        headers = trace_headers(header_block(tail, size, hlen))
        only = headers is not None and is_trace_only(headers)
        dest = "" if headers is None else headers[TRACE_DEST_KEY][0]
        if (
            headers is None
            # an old server's header: nats-server traces nothing, and drops a trace-only one
            # (a delivered one gets its destination disabled: not done here yet)
            or headers.get(TRACE_ORIGIN_ACCOUNT)
            or not is_valid_literal_subject(dest.encode())
        ):
            if refused:
                self.send(encode_err(refused))
                return 0
            return 0 if only else -1
        if not self._may_trace_to(dest):
            # the only error the publisher gets, even when its subject is refused too
            self.send(encode_err(f'Permissions Violation for Publish to "{dest}"'))
            return 0
        if refused:
            self.send(encode_err(refused))
        trace = MsgTrace(dest, only, headers, size, self.account.name)
        trace.ingress(KIND_CLIENT, self.cid, self.name, subject, refused)
        sublist = self.account.sublist
        if refused:
            send_trace(sublist, trace, self.host.trace_server())
            return 0
        psubs, qsubs = sublist.match(subject)
        forward = sublist.forward
        routed = 0
        route_events: list[dict[str, Any]] = []
        if forward is not None:
            # the routes are chosen first (a queue group's member may be remote), their
            # egress events go after the local ones, as nats-server lists them
            body = message_body(tail, size)
            mark = len(trace.events)
            routed, qsubs = forward.send_traced(
                trace, subject, reply, body[:hlen], body[hlen:], qsubs
            )
            route_events = trace.events[mark:]
            del trace.events[mark:]
        k = 0

        def plain(sub: Subscription) -> int:
            return deliver([sub], [], subject, reply, tail, size, hlen, self)

        if psubs or qsubs:
            k = deliver_traced(
                trace,
                psubs,
                qsubs,
                subject,
                self,
                plain,
                lambda sub: run_internal(trace, lambda: plain(sub)),
            )
        trace.events.extend(route_events)
        if k == 0 and routed == 0 and reply and self.no_responders:
            self._send_no_responders(subject, reply)
        finish_trace(sublist, trace, self.host.trace_server())
        return k

    def _trace_oversized(self, subject: bytes, hdr: bytes, size: int) -> None:
        """An HPUB over the maximum payload is traced before the connection closes, with
        that error on its ingress and the size it announced (nats-server's C17)."""
        headers = trace_headers(hdr)
        if headers is None or headers.get(TRACE_ORIGIN_ACCOUNT):
            return
        dest = headers[TRACE_DEST_KEY][0]
        if not is_valid_literal_subject(dest.encode()) or not self._may_trace_to(dest):
            return
        trace = MsgTrace(dest, is_trace_only(headers), headers, size, self.account.name)
        trace.ingress(KIND_CLIENT, self.cid, self.name, subject, "maximum payload exceeded")
        send_trace(self.account.sublist, trace, self.host.trace_server())

    def _may_trace_to(self, dest: str) -> bool:
        """``allowedToPublishOnMsgTraceDest``: the publisher may publish there."""
        if dest.startswith("_GR_.") or (
            dest.startswith("$NRG.") and self.account.name != SYSTEM_ACCOUNT
        ):
            return False
        perms = self.permissions
        return perms is None or perms.publish is None or perms.publish.allowed(dest.encode())

    def _update_pub_checks(self) -> None:
        perms = self.permissions
        self._pub_checks = (
            self.pedantic
            or self.verbose
            or (self.host.auth_required and not self.connected)
            or (perms is not None and perms.publish is not None)
        )

    def _send_no_responders(self, subject: bytes, reply: bytes) -> None:
        if not self.headers:
            return
        psubs, qsubs = self.account.sublist.match(reply)
        for sub in psubs:
            if sub.client is self:
                self.send(no_responders_frame(reply, sub.sid, subject))
                return
        for grp in qsubs:
            for sub in grp:
                if sub.client is self:
                    self.send(no_responders_frame(reply, sub.sid, subject))
                    return

    def _process_connect(self, raw: bytes) -> bool:
        opts = _decode_connect(raw)
        if opts is None:
            # nats-server closes without a reason when CONNECT does not unmarshal.
            self._close(CloseReason.PROTOCOL, flush=True)
            return False
        proto = opts.get("protocol", 0)
        if proto < 0 or proto > 1:
            self.send(encode_err("invalid client protocol"))
            self._close(CloseReason.PROTOCOL, flush=True)
            return False
        # nats-server overlays the JSON on the options in force (verbose/pedantic default on).
        self.verbose = opts.get("verbose", self.verbose)
        self.pedantic = opts.get("pedantic", self.pedantic)
        self.echo = opts.get("echo", self.echo)
        self.headers = opts.get("headers", self.headers)
        self.no_responders = opts.get("no_responders", self.no_responders)
        self.protocol = proto
        self.name = opts.get("name", self.name)
        self.lang = opts.get("lang", self.lang)
        self.version = opts.get("version", self.version)
        if self.no_responders and not self.headers:
            self.send(encode_err("no responders requires headers support"))
            self._close(CloseReason.PROTOCOL, flush=True)
            return False
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        # Every CONNECT is authenticated (a second CONNECT with bad credentials is refused).
        self.credentials = {k: opts[k] for k in _CREDENTIALS if k in opts}
        self.connect_opts = opts
        res = self.host.authenticate(self, opts)
        if res is not None:
            self._bind_account(*res)
        elif self.host.auth_required:
            self._auth_violation()
            return False
        first = not self.connected
        self.connected = True
        self._update_pub_checks()
        if first:
            self.host.connected(self)
        if self.verbose:
            self.send(OK)
        # nats-server confirms a protocol-1 CONNECT with an INFO right after the first PONG;
        # clients read that PONG as the end of their handshake, so it must come first.
        self._connect_info_pending = proto == 1
        return True

    def _bind_account(self, account: Account, perms: Permissions | None, user: str) -> None:
        if account is not self.account:
            # Subscriptions made before CONNECT move with the client.
            old = self.account
            old.clients.pop(self.cid, None)
            for sub in self.subs.values():
                old.sublist.remove(sub)
                account.sublist.insert(sub)
            self.account = account
            account.clients[self.cid] = self
        self.user = user
        self._set_permissions(perms)

    def _set_permissions(self, perms: Permissions | None) -> None:
        self.permissions = perms
        self.sub_deny = None
        if perms is not None and perms.subscribe is not None and perms.subscribe.deny:
            self.sub_deny = perms.subscribe.denied
        # As nats-server's setPermissions: new permissions start with no tracked replies.
        self.replies = perms.reply_tracker() if perms is not None else None
        self.track_reply = self.replies.delivered if self.replies is not None else None

    def update_permissions(self, perms: Permissions | None) -> None:
        """Apply a reloaded user's permissions: subscriptions they no longer allow are removed
        and reported, as nats-server's processSubsOnConfigReload does."""
        self._set_permissions(perms)
        self._update_pub_checks()
        if perms is None or perms.subscribe is None:
            return
        for sub in list(self.subs.values()):
            if perms.subscribe.sub_allowed(sub.subject, sub.queue):
                continue
            self._remove_sub(sub)
            s = sub.subject.decode(errors="replace")
            sid = sub.sid.decode(errors="replace")
            if sub.queue is not None:
                q = sub.queue.decode(errors="replace")
                text = f'Permissions Violation for Subscription to "{s}" using queue "{q}" '
            else:
                text = f'Permissions Violation for Subscription to "{s}" '
            self.send(encode_err(f'{text}(sid "{sid}")'))

    def apply_limits(self, limits: ConnectionLimits) -> None:
        """Reloaded limits: payload and control line sizes apply to the next frame, ping
        interval and write deadline when their timers are next armed (as nats-server)."""
        self.limits = limits
        self.parser.max_payload = limits.max_payload
        self.parser.max_control_line = limits.max_control_line

    def auth_violation(self) -> None:
        """Credentials that no longer authenticate (after a configuration reload)."""
        self._auth_violation()

    def _auth_violation(self) -> None:
        self.send(encode_err("Authorization Violation"))
        self._close(CloseReason.AUTH_VIOLATION, flush=True)

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.connected and not self.closed:
            self.send(encode_err("Authentication Timeout"))
            self._close(CloseReason.AUTH_TIMEOUT, flush=True)

    def _process_sub(self, subject: bytes, queue: bytes | None, sid: bytes) -> None:
        if not is_valid_subject(subject) or (queue is not None and not _valid_queue(queue)):
            self.send(encode_err("Invalid Subject"))
            return
        perms = self.permissions
        if perms is not None and perms.subscribe is not None:
            if not perms.subscribe.sub_allowed(subject, queue):
                s = subject.decode(errors="replace")
                if queue is not None:
                    q = queue.decode(errors="replace")
                    text = f'Permissions Violation for Subscription to "{s}" using queue "{q}"'
                else:
                    text = f'Permissions Violation for Subscription to "{s}"'
                self.send(encode_err(text))
                return
        if sid in self.subs:
            # nats-server keeps the existing subscription for a duplicate sid.
            if self.verbose:
                self.send(OK)
            return
        max_subs = self.limits.max_subs
        if max_subs and len(self.subs) >= max_subs:
            # nats-server's ErrTooManySubs text, lower case (server/errors.go).
            self.send(encode_err("maximum subscriptions exceeded"))
            return
        sub = Subscription(subject, queue, sid, client=self)
        self.subs[sid] = sub
        self.account.sublist.insert(sub)
        if self.verbose:
            self.send(OK)

    def _process_unsub(self, sid: bytes, max_msgs: int | None) -> None:
        sub = self.subs.get(sid)
        if sub is not None:
            if max_msgs is not None and max_msgs > 0 and sub.delivered < max_msgs:
                sub.max = max_msgs
            else:
                self._remove_sub(sub)
        if self.verbose:
            self.send(OK)

    def _remove_sub(self, sub: Subscription) -> None:
        if self.subs.get(sub.sid) is sub:
            del self.subs[sub.sid]
            self.account.sublist.remove(sub)

    def sub_exhausted(self, sub: Subscription) -> None:
        self._remove_sub(sub)

    # ------------------------------------------------------------------ outbound
    def send(self, frame: bytes) -> None:
        """Queue a control frame; it goes out with the next flush."""
        self.out.append(frame)
        self.out_size += len(frame)
        if not self.flush_pending:
            self.kick()

    def kick(self) -> None:
        self.flush_pending = True
        self.host.flusher.add(self)

    def flush(self) -> None:
        self.flush_pending = False
        out = self.out
        if not out:
            return
        t = self.transport
        if self.closed:
            self.out = []
            self.out_size = 0
            return
        if t is None:
            # Moving in from another worker: held until the socket arrives, within bounds.
            if self.out_size > self.limits.max_pending:
                self._slow_consumer(CloseReason.SLOW_CONSUMER_PENDING)
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        self.out = []
        self.out_size = 0
        if t.get_write_buffer_size() + len(data) > self.limits.max_pending:
            # Refuse to queue past max_pending: memory per client stays bounded.
            self._slow_consumer(CloseReason.SLOW_CONSUMER_PENDING)
            return
        if self.host.trace:
            self.host.log_trace(f"cid:{self.cid} ->> {data[:512]!r}")
        tls = self.tls
        if tls is not None:
            if not tls.established:
                # Nothing but the handshake goes out before it is done.
                self.out = [data]
                self.out_size = len(data)
                return
            data = tls.encrypt(data)
        t.write(data)

    def _slow_consumer(self, reason: str) -> None:
        if self.closed:
            return
        self.host.log_debug(f"Slow Consumer Detected: cid={self.cid} {reason}")
        # Drop what is not yet queued; the -ERR goes behind what the transport holds, so a
        # client that is merely slow still learns why it was cut off. _close bounds the wait.
        self.out = [encode_err("Slow Consumer")]
        self._close(reason, flush=True)

    # ------------------------------------------------------------------ timers
    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        if self.pings_out + 1 > self.limits.ping_max:
            self.send(encode_err("Stale Connection"))
            self._close(CloseReason.STALE, flush=True)
            return
        self.pings_out += 1
        self.rtt_start = time.monotonic()
        self.send(PING)
        self._ping_timer = self.host.scheduler.call_later(
            self.limits.ping_interval, self._ping_tick
        )

    # ------------------------------------------------------------------ moving (--workers)
    def unmovable(self) -> str | None:
        """Why this connection cannot move to another worker now (None: it can)."""
        if self.closed or not self.connected or self.moving or self.adopting:
            return "not connected"
        if self.tls is not None:
            return "tls"  # the session's state cannot cross processes
        t = self.transport
        if t is None or t.is_closing() or self.parser.dead:
            return "closing"
        if self.replies is not None:
            return "allow_responses"
        for sub in self.subs.values():
            if sub.queue is not None or sub.max:
                return "queue or auto-unsubscribe"
        return None

    def move_state(self) -> dict[str, Any]:
        """What the worker taking this connection needs before its socket arrives."""
        return {
            "cid": self.cid,
            "account": self.account.name,
            "connect": self.connect_opts,
            # latin-1: any byte of a subject or sid through JSON and back unchanged
            "subs": [
                [s.subject.decode("latin-1"), s.sid.decode("latin-1")] for s in self.subs.values()
            ],
            "ip": self.ip,
            "port": self.port,
            "start": self.start,
            "stats": [self.msgs_in, self.bytes_in, self.msgs_out, self.bytes_out],
            "rtt": self.rtt,
            "async_info": self.async_info,
            "nonce": self.nonce.decode("latin-1"),
        }

    def pause_for_move(self) -> None:
        """Stop taking input: what was read is processed, what arrives is kept."""
        self.moving = True
        t = self.transport
        if t is not None:
            t.pause_reading()

    def resume_after_failed_move(self) -> None:
        self.moving = False
        data, self.move_input = self.move_input, b""
        if self._backlog is not None:
            # The read budget dropped it while moving; data_received joins what came since.
            self.host.reads.defer(self)
            if data:
                self._backlog = self._backlog[self._backlog_off :] + data
                self._backlog_off = 0
            return
        t = self.transport
        if t is not None and not t.is_closing():
            t.resume_reading()
        if data:
            self.data_received(data)

    def drop_subs_for_move(self) -> None:
        """The taking worker holds the subscriptions now: ours leave the Sublist."""
        sl = self.account.sublist
        for sub in self.subs.values():
            sl.remove(sub)
        self.subs = {}

    def unread_input(self) -> bytes:
        """Input this side read and did not parse: the held frame start, the read budget's
        backlog, then what arrived since the move began."""
        backlog = self._backlog[self._backlog_off :] if self._backlog is not None else b""
        self._backlog = None
        return self.parser.held() + backlog + self.move_input

    def detach_moved(self) -> None:
        """The socket went to another worker: forget the connection without touching it."""
        if self.closed:
            return
        self.closed = True
        self.close_reason = "Moved"
        for timer in (self._auth_timer, self._ping_timer, self._deadline_timer):
            if timer is not None:
                timer.cancel()
        self._auth_timer = self._ping_timer = self._deadline_timer = None
        t = self.transport
        if t is not None:
            # Closes our descriptor only; the other worker's copy keeps the connection.
            t.abort()
        self.out = []
        self.out_size = 0
        self.host.release(self, "Moved")

    def adopt(self, state: dict[str, Any]) -> None:
        """Take over a moving connection's CONNECT state (subscriptions come separately);
        its output is held until the socket arrives."""
        opts = state["connect"]
        self.connect_opts = opts
        self.verbose = opts.get("verbose", True)
        self.pedantic = opts.get("pedantic", True)
        self.echo = opts.get("echo", True)
        self.headers = opts.get("headers", False)
        self.no_responders = opts.get("no_responders", False)
        self.protocol = opts.get("protocol", 0)
        self.name = opts.get("name", "")
        self.lang = opts.get("lang", "")
        self.version = opts.get("version", "")
        self.credentials = {k: opts[k] for k in _CREDENTIALS if k in opts}
        self.ip = state["ip"]
        self.port = state["port"]
        self.start = state["start"]
        self.msgs_in, self.bytes_in, self.msgs_out, self.bytes_out = state["stats"]
        self.rtt = state["rtt"]
        self.async_info = state["async_info"]
        self.nonce = str(state.get("nonce", "")).encode("latin-1")
        self.connected = True
        self.adopting = True
        self.moved_at = time.monotonic()

    def _attach_moved(self) -> None:
        self.adopting = False
        self._ping_timer = self.host.scheduler.call_later(
            self.limits.ping_interval, self._ping_tick
        )
        self._update_pub_checks()
        if self.out:
            self.flush()
        data, self.move_input = self.move_input, b""
        if data:
            self.data_received(data)

    # ------------------------------------------------------------------ teardown
    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN) -> None:
        self._close(reason, flush=True)

    def _close(self, reason: str, flush: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        for timer in (self._auth_timer, self._ping_timer, self._deadline_timer, self._tls_timer):
            if timer is not None:
                timer.cancel()
        self._auth_timer = self._ping_timer = self._deadline_timer = self._tls_timer = None
        sl = self.account.sublist
        for sub in self.subs.values():
            sl.remove(sub)
        t = self.transport
        if t is not None:
            tls = self.tls
            if flush and not t.is_closing():
                data = b"".join(self.out)
                if tls is not None:
                    data = tls.last_words(data)
                if data:
                    t.write(data)
            end_transport(t, flush, self.host.scheduler)
        self.out = []
        self.out_size = 0
        self._backlog = None
        self.host.release(self, reason)

    # ------------------------------------------------------------------ introspection
    def tls_report(self, peer_certs: bool) -> dict[str, Any]:
        """/connz's TLS fields (none before the handshake is done); ``peer_certs`` with
        ``auth=true``. Only the peer's own certificate is known here, not its chain."""
        tls = self.tls
        if tls is None or not tls.established:
            return {}
        out: dict[str, Any] = {"tls_version": tls.version, "tls_cipher_suite": tls.cipher}
        peer = self.tls_peer
        if peer_certs and peer is not None:
            out["tls_peer_certs"] = [
                {
                    "subject": peer.subject,
                    "spki_sha256": peer.spki_sha256,
                    "cert_sha256": peer.cert_sha256,
                }
            ]
        if self.tls_first:
            out["tls_first"] = True
        return out

    @property
    def pending_bytes(self) -> int:
        return self.out_size + write_buffered(self.transport)


# What a reload checks again (an nkey's signature is of this connection's nonce).
_CREDENTIALS: Final = ("user", "pass", "auth_token", "nkey", "sig")

_CONNECT_TYPES: dict[str, type | tuple[type, ...]] = {
    "verbose": bool,
    "pedantic": bool,
    "echo": bool,
    "headers": bool,
    "no_responders": bool,
    "tls_required": bool,
    "name": str,
    "lang": str,
    "version": str,
    "user": str,
    "pass": str,
    "auth_token": str,
    "jwt": str,
    "nkey": str,
    "sig": str,
    "protocol": int,
}


def _decode_connect(raw: bytes) -> dict[str, Any] | None:
    """CONNECT JSON with Go's unmarshal strictness on the fields natsd reads."""
    try:
        opts = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(opts, dict):
        return None
    for key, typ in _CONNECT_TYPES.items():
        v = opts.get(key)
        if v is None:
            opts.pop(key, None)
            continue
        if typ is int and isinstance(v, bool):
            return None
        if not isinstance(v, typ):
            return None
    return opts


def _reserved_reply(reply: bytes) -> bool:
    return any(reply.startswith(p) and len(reply) > len(p) for p in _RESERVED_REPLIES)


def _valid_queue(queue: bytes) -> bool:
    return bool(queue) and not any(c in queue for c in (b" ", b"\t", b"\r", b"\n"))
