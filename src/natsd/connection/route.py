"""One route connection to a cluster peer: handshake, keepalive, bounded outbound buffering.

Ownership: the event loop thread owns every RouteConnection. Inbound bytes go through the
sans-I/O ``RouteParser``; decoded interest (RS+/RS-), messages (RMSG/HMSG) and the peer's
INFO go to the ``RouteHost`` (the server, later: the interest table and the mesh), which
owns what they mean. This module owns only the connection: the handshake and its checks,
PING/PONG, and the outbound queue, written once per loop turn by the host's ``Flusher``.

The handshake is nats-server's (``route.go``, ``createRoute``): both sides send INFO at once;
the side that dialed sends CONNECT before its INFO. The accepting side expects CONNECT
first: anything else, or bad credentials, is an ``Authorization Violation`` as in
nats-server's parser; a CONNECT carrying ``lang`` is a client on the route port; a CONNECT
or INFO for another cluster is refused; an INFO with our own server_id is the route to
ourselves that configs listing every server produce, closed silently. The route is up, and
the host hears of it through ``route_up``, when the peer's first INFO passes those checks
(and, on the accepting side, CONNECT came first). Interest and messages are refused before.

We announce no ``route_pool_size`` (or 1 when configured), no ``lnoc`` and no compression,
so nats-server makes one connection to us with the account in every protocol line: the
only shape ``RouteParser`` reads. A peer asking for more (a pinned account, a pool index, a
pool larger than the one we announced) is refused with nats-server's own wording.

Flow control: a route is never cut as a slow consumer. Message frames (``send_msg``) past
``max_pending`` bytes queued (our list plus the transport's buffer) are dropped and counted:
core NATS is at most once, and a dropped message costs one message. Interest frames
(``send_sub``/``send_unsub``) are never dropped: losing an RS- leaks interest on the peer
for the life of the route and losing an RS+ loses every later message on that subject, so
a gap would be a lasting wrong state, not a lost message. Their volume follows subscription
churn, not message rate; should they still pile up past ``4 * max_pending`` the peer is not
reading at all, and the route is closed (a reconnect resends the whole table, the only way
back to an exact state).
"""

from __future__ import annotations

import asyncio
import hmac
import ssl
import time
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast

import orjson

from natsd.connection.flusher import Flusher
from natsd.connection.tls import RouteTls, TlsSession, handshake_error
from natsd.connection.transport import end_transport, open_transport, write_buffered
from natsd.core.goquote import go_quote
from natsd.core.scheduler import Cancellable, Scheduler
from natsd.core.subjects import is_valid_literal_subject
from natsd.protocol.route_encode import (
    ROUTE_PING,
    ROUTE_PONG,
    encode_route_connect,
    encode_route_err,
    encode_route_info,
    encode_rs_minus,
    encode_rs_plus,
)
from natsd.protocol.route_parser import (
    DEFAULT_ROUTE_MAX_CONTROL_LINE,
    DEFAULT_ROUTE_MAX_PAYLOAD,
    R_CONNECT,
    R_ERR,
    R_HMSG,
    R_INFO,
    R_OK,
    R_PEER_ERR,
    R_PING,
    R_PONG,
    R_RMSG,
    R_SUB,
    R_UNSUB,
    RouteEvent,
    RouteParser,
)
from natsd.router.account import Account
from natsd.router.deliver import deliver
from natsd.router.msgtrace import (
    KIND_ROUTER,
    TRACE_DEST,
    TRACE_DEST_KEY,
    TRACE_ORIGIN_ACCOUNT,
    MsgTrace,
    deliver_traced,
    finish_trace,
    header_block,
    is_trace_only,
    run_internal,
    trace_headers,
)
from natsd.router.routed import deliver_routed, js_deliver_index
from natsd.router.subscription import Sink, Subscription

__all__ = [
    "DEFAULT_ROUTE_MAX_PENDING",
    "RouteCloseReason",
    "RouteConnection",
    "RouteHost",
    "RouteSettings",
]

# nats-server's MAX_PENDING_SIZE, the bound it puts on any connection's outbound buffer.
DEFAULT_ROUTE_MAX_PENDING: Final = 64 * 1024 * 1024
# nats-server: the first PING goes out after at most 1 s (firstPingInterval) to measure RTT;
# later ones every ping_interval, capped at 30 s for routes (routeMaxPingInterval).
FIRST_PING_INTERVAL: Final = 1.0
ROUTE_MAX_PING_INTERVAL: Final = 30.0
# Interest frames are never dropped; past this many times max_pending queued the peer is
# not reading and the route is closed.
_INTEREST_FACTOR: Final = 4
_FLUSH_NOW: Final = 65536

# nats-server's texts (errors.go, route.go, client.go).
ERR_ROUTE_PORT: Final = "attempted to connect to route port"
ERR_AUTH: Final = "Authorization Violation"
ERR_AUTH_TIMEOUT: Final = "Authentication Timeout"
ERR_STALE: Final = "Stale Connection"
ERR_UNKNOWN_OP: Final = "Unknown Protocol Operation"


class RouteCloseReason:
    """nats-server's ClosedState strings for what ends a route."""

    CLIENT_CLOSED: Final = "Client Closed"
    AUTH_VIOLATION: Final = "Authentication Failure"
    AUTH_TIMEOUT: Final = "Authentication Timeout"
    STALE: Final = "Stale Connection"
    PROTOCOL: Final = "Protocol Violation"
    PARSE_ERROR: Final = "Parse Error"
    DUPLICATE_ROUTE: Final = "Duplicate Route"
    WRONG_PORT: Final = "Incorrect Port"
    WRONG_GATEWAY: Final = "Wrong Gateway"
    CLUSTER_NAME_CONFLICT: Final = "Cluster Name Conflict"
    SLOW_CONSUMER_PENDING: Final = "Slow Consumer (Pending Bytes)"
    SERVER_SHUTDOWN: Final = "Server Shutdown"
    READ_ERROR: Final = "Read Error"
    TLS_HANDSHAKE: Final = "TLS Handshake Failure"


@dataclass
class RouteSettings:
    """This server's side of every route: identity, required credentials, timings, limits.

    Shared by every route of a server. Only ``cluster`` and ``cluster_dynamic`` ever change,
    and only through the host's ``adopt_cluster_name`` (a server with no configured name
    takes on its peers' one, as nats-server does)."""

    server_id: str
    cluster: str
    # True when no cluster name was configured: ``cluster`` is a generated one that yields
    # to a configured name, or to a greater generated one, on the first route (nats-server's
    # isClusterNameDynamic).
    cluster_dynamic: bool = False
    server_name: str = ""
    # Credentials a peer must present in its CONNECT (cluster { authorization {} }); no user
    # means none are required. nats-server refuses a token here ("Cluster authorization
    # does not support tokens"); so does the configuration layer.
    user: str = ""
    password: str = ""
    auth_timeout: float = 2.0
    ping_interval: float = 120.0
    ping_max: int = 2
    # 0: announce no pool (nats-server then makes one connection, account in every line);
    # 1: announce route_pool_size 1 (for peers configured with pool_size: 1).
    pool_size: int = 0
    max_payload: int = DEFAULT_ROUTE_MAX_PAYLOAD
    max_control_line: int = DEFAULT_ROUTE_MAX_CONTROL_LINE
    # cluster { tls {} }: None for plaintext routes
    tls: RouteTls | None = None

    def __post_init__(self) -> None:
        if self.pool_size not in (0, 1):
            raise ValueError(f"route pool_size {self.pool_size} is not supported (0 or 1)")


class RouteHost(Protocol):
    """What a route connection needs from the server that owns it, and what it reports."""

    def trace_server(self) -> dict[str, Any]:
        """The ``server`` block of a message trace event (nats-server's ServerInfo)."""

    flusher: Flusher
    settings: RouteSettings
    trace: bool
    # Accounts by the name routes carry (shared, owned by the host): a peer's messages are
    # delivered into them by the connection itself; a name not there is dropped.
    wire_accounts: dict[bytes, Account]

    @property
    def scheduler(self) -> Scheduler:
        """Where the connection's timers go (the event loop the server runs on)."""

    def route_info_fields(self, route: RouteConnection) -> dict[str, Any]:
        """Our INFO besides what the connection sets itself (server_id, server_name,
        cluster, headers, auth_required, route_pool_size): host, port, version, proto,
        max_payload, connect_urls, jetstream, ..."""

    def route_up(self, route: RouteConnection, info: dict[str, Any]) -> bool:
        """The handshake completed with the peer described by ``info``. False: a route to
        this peer exists already; the connection closes as a duplicate."""

    def route_info(self, route: RouteConnection, info: dict[str, Any]) -> None:
        """A later INFO: gossip of other servers, connect_urls, lame duck mode."""

    def route_to_self(self, route: RouteConnection) -> None:
        """``route``'s peer is this server (its INFO carries our server_id); it closes
        as a Duplicate Route right after."""

    def adopt_cluster_name(self, route: RouteConnection, name: str, final: bool) -> None:
        """Our generated cluster name yields to ``name``, the one ``route``'s peer carries
        (``final``: it was configured there, so it is ours for good). Every other route
        closes and redials under the new name, as nats-server's removeAllRoutesExcept."""

    def route_sub(
        self,
        route: RouteConnection,
        account: bytes,
        subject: bytes,
        queue: bytes | None,
        weight: int,
    ) -> None: ...

    def route_unsub(
        self, route: RouteConnection, account: bytes, subject: bytes, queue: bytes | None
    ) -> None: ...

    def route_closed(self, route: RouteConnection, reason: str) -> None:
        """Called once, when the connection ends for any reason."""

    def log_debug(self, msg: str) -> None: ...

    def log_error(self, msg: str) -> None: ...

    def log_trace(self, msg: str) -> None: ...


class RouteConnection:
    """An asyncio protocol for one route, either direction.

    ``solicited``: we dialed (we send CONNECT); else the peer dialed our cluster port.
    ``credentials``: (user, password) sent in our CONNECT when we dial (from the route URL).
    ``max_pending``: bytes of message frames queued before further ones are dropped.
    """

    def __init__(
        self,
        host: RouteHost,
        rid: int,
        *,
        solicited: bool,
        credentials: tuple[str, str] | None = None,
        max_pending: int = DEFAULT_ROUTE_MAX_PENDING,
        tls_hostname: str = "",
    ) -> None:
        self.host = host
        self.rid = rid
        self.settings = host.settings
        self.wire_accounts = host.wire_accounts
        self.solicited = solicited
        self.credentials = credentials
        self.max_pending = max_pending
        st = self.settings
        self.parser = RouteParser(st.max_payload, st.max_control_line)
        self.transport: asyncio.Transport | None = None
        self.ip = ""
        self.port = 0
        self.local_port = 0  # our end's port (of a dialed connection: its source port)
        # Handshake state. The accepting side needs CONNECT before anything else.
        self.connect_received = solicited
        self.up = False
        self.peer_info: dict[str, Any] = {}
        self.remote_id = ""
        self.remote_name = ""
        self.headers = False  # the peer takes HMSG
        # Outbound: frames queued until the next flush; _wbuf is the transport's buffer as
        # last seen (refreshed when a frame would not fit).
        self.out: list[bytes] = []
        self.out_size = 0
        self._wbuf = 0
        self.flush_pending = False
        # Counters.
        self.msgs_in = 0
        self.bytes_in = 0
        self.msgs_out = 0
        self.bytes_out = 0
        self.dropped_msgs = 0
        self.dropped_bytes = 0
        self.start = time.time()
        self.last_activity = self.start
        self.rtt_start = 0.0
        self.rtt = 0.0
        self.pings_out = 0
        self.closed = False
        self.close_reason = ""
        self._auth_timer: Cancellable | None = None
        self._ping_timer: Cancellable | None = None
        # Connections moving in from this peer that its messages must not reach yet
        # (cluster/handoff.py); None when there are none.
        self.skip: set[Sink] | None = None
        # TLS (cluster { tls {} }): the session, and the name a dialed peer's certificate
        # must carry (the route URL's host).
        self.tls: TlsSession | None = None
        self.tls_hostname = tls_hostname
        self._tls_timer: Cancellable | None = None

    # ------------------------------------------------------------------ lifecycle
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        self.ip, self.port = open_transport(transport)
        local = transport.get_extra_info("sockname")
        if isinstance(local, tuple) and len(local) >= 2:
            self.local_port = int(local[1])
        rt = self.settings.tls
        if rt is None:
            self._greet()
            return
        # TLS first, then CONNECT and INFO (nats-server's order on routes).
        if self.solicited:
            self.tls = TlsSession(rt.client_context, False, self.tls_hostname or self.ip)
            self.tls.begin()
            transport.write(self.tls.outgoing())
        else:
            self.tls = TlsSession(rt.server_context, True)
        self._tls_timer = self.host.scheduler.call_later(rt.timeout, self._tls_timeout)

    def _greet(self) -> None:
        """CONNECT (when we dialed) and INFO; the auth and keepalive timers."""
        st = self.settings
        if self.solicited:
            connect: dict[str, Any] = {
                "echo": True,
                "verbose": False,
                "pedantic": False,
                "tls_required": st.tls is not None,
                "headers": True,
                "name": st.server_id,
                "cluster": st.cluster,
            }
            if st.cluster_dynamic:
                connect["cluster_dynamic"] = True
            if self.credentials is not None:
                connect["user"], connect["pass"] = self.credentials
            self.send(encode_route_connect(connect))
        self.send(encode_route_info(self._our_info()))
        loop = self.host.scheduler
        if st.user and not self.solicited:
            self._auth_timer = loop.call_later(st.auth_timeout, self._auth_timeout)
        # As nats-server, the keepalive runs from the start: a peer that never completes
        # the handshake goes stale.
        first = min(FIRST_PING_INTERVAL, self._ping_interval())
        self._ping_timer = loop.call_later(first, self._ping_tick)

    def _our_info(self) -> dict[str, Any]:
        st = self.settings
        info = self.host.route_info_fields(self)
        info["server_id"] = st.server_id
        if st.server_name:
            info["server_name"] = st.server_name
        info["cluster"] = st.cluster
        if st.cluster_dynamic:
            info["cluster_dynamic"] = True
        info["headers"] = True
        if st.user:
            info["auth_required"] = True
        if st.pool_size:
            info["route_pool_size"] = st.pool_size
        if st.tls is not None:
            info["tls_required"] = True
            if st.tls.verify:
                info["tls_verify"] = True
        return info

    # ------------------------------------------------------------------ TLS
    def _tls_timeout(self) -> None:
        self._tls_timer = None
        tls = self.tls
        if self.closed or tls is None or tls.established:
            return
        self.host.log_error(f"rid:{self.rid} {self.ip}:{self.port} - TLS handshake timeout")
        self._close(RouteCloseReason.TLS_HANDSHAKE, flush=False)

    def _tls_in(self, tls: TlsSession, data: bytes) -> bytes:
        """Bytes read -> the plaintext they carry, running the handshake on the way."""
        was = tls.established
        try:
            plain = tls.feed(data)
        except ssl.SSLError as e:
            self._tls_failed(tls, handshake_error(e))
            return b""
        tls.send_pending(self.transport)
        if not was and tls.established:
            if self._tls_timer is not None:
                self._tls_timer.cancel()
                self._tls_timer = None
            rt = self.settings.tls
            if rt is not None and rt.pinned_certs:
                peer = tls.peer()
                if peer is None or peer.spki_sha256 not in rt.pinned_certs:
                    self._tls_failed(tls, "certificate not pinned")
                    return b""
            self._greet()
        if tls.closed_by_peer and not plain:
            self._close(RouteCloseReason.CLIENT_CLOSED, flush=True)
            return b""
        return plain

    def _tls_failed(self, tls: TlsSession, why: str) -> None:
        tls.send_pending(self.transport)
        # nats-server logs these as errors: a route port is not probed by load balancers.
        self.host.log_error(
            f"rid:{self.rid} {self.ip}:{self.port} - TLS route handshake error: {why}"
        )
        self._close(RouteCloseReason.TLS_HANDSHAKE, flush=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._close(self.close_reason or RouteCloseReason.CLIENT_CLOSED, flush=False)

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        t = self.transport
        if t is not None:
            self._wbuf = t.get_write_buffer_size()

    # ------------------------------------------------------------------ inbound
    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        tls = self.tls
        if tls is not None:
            data = self._tls_in(tls, data)
            if not data:
                return
            if tls.closed_by_peer:
                # What came before the peer's close_notify is taken, then the close answered.
                self._receive(data)
                self._close(RouteCloseReason.CLIENT_CLOSED, flush=True)
                return
        self._receive(data)

    def _receive(self, data: bytes) -> None:
        """Plaintext input: messages delivered, control lines handled."""
        self.last_activity = time.time()
        host = self.host
        if host.trace:
            host.log_trace(f"rid:{self.rid} <<- {data[:512]!r}")
        # Account statistics are added once per run of messages of one account.
        wire = self.wire_accounts
        acct: Account | None = None
        nin = bin_ = nout = bout = 0
        try:
            for ev in self.parser.feed(data):
                if self.closed:
                    return
                op = ev[0]
                if op == R_RMSG or op == R_HMSG:
                    if not self.up:
                        self._not_ready()
                        return
                    if op == R_RMSG:
                        hlen = 0
                        size = ev[5]
                        tail = ev[6]
                    else:
                        hlen = ev[5]
                        size = ev[6]
                        tail = ev[7]
                    self.msgs_in += 1
                    self.bytes_in += size
                    a = wire.get(ev[1])
                    if a is None:
                        continue
                    if a is not acct:
                        if acct is not None:
                            _count(acct, nin, bin_, nout, bout)
                            nin = bin_ = nout = bout = 0
                        acct = a
                    nin += 1
                    bin_ += size
                    subject = ev[2]
                    if hlen and tail.find(TRACE_DEST, 0, hlen + 32) > 0:
                        k = self._traced(a, subject, ev[3], ev[4], tail, size, hlen)
                        if k >= 0:
                            nout += k
                            bout += k * size
                            continue
                    psubs, qsubs = a.sublist.match(subject)
                    if psubs and a.sublist.quiet:
                        psubs = a.sublist.without_quiet(psubs)
                    if psubs or qsubs:
                        k = deliver_routed(
                            psubs, qsubs, subject, ev[3], ev[4], tail, size, hlen, self.skip
                        )
                        nout += k
                        bout += k * size
                else:
                    self._control(op, ev)
        finally:
            if acct is not None:
                _count(acct, nin, bin_, nout, bout)
        if len(data) >= _FLUSH_NOW:
            self.host.flusher.run()

    def _traced(
        self,
        account: Account,
        subject: bytes,
        reply: bytes | None,
        queues: list[bytes] | None,
        tail: bytes,
        size: int,
        hlen: int,
    ) -> int:
        """A peer's message that asks for a trace (``router/msgtrace.py``): delivered, or
        only traced, here, with this server's own trace event sent to the destination;
        -1 when it goes the usual way untraced."""
        headers = trace_headers(header_block(tail, size, hlen))
        if headers is None:
            return -1
        only = is_trace_only(headers)
        dest = headers[TRACE_DEST_KEY][0]
        if headers.get(TRACE_ORIGIN_ACCOUNT) or not is_valid_literal_subject(dest.encode()):
            return 0 if only else -1
        trace = MsgTrace(dest, only, headers, size, account.name, from_route=True)
        trace.ingress(KIND_ROUTER, self.rid, self.remote_name, subject)
        psubs, qsubs = account.sublist.match(subject)
        if psubs and account.sublist.quiet:
            psubs = account.sublist.without_quiet(psubs)
        if self.skip is not None:
            psubs = [s for s in psubs if s.client not in self.skip]
        qsubs = [g for g in qsubs if g[0].queue in queues] if queues and qsubs else []
        if reply is not None:
            i = js_deliver_index(reply)
            if 0 <= i < len(reply) - 1:
                subject, reply = reply[i + 1 :], reply[:i]
        to = subject
        rep = reply

        def plain(sub: Subscription) -> int:
            return deliver([sub], [], to, rep, tail, size, hlen, None)

        k = 0
        if psubs or qsubs:
            k = deliver_traced(
                trace,
                psubs,
                qsubs,
                subject,
                None,
                plain,
                lambda sub: run_internal(trace, lambda: plain(sub)),
            )
        finish_trace(account.sublist, trace, self.host.trace_server())
        return k

    def _control(self, op: int, ev: RouteEvent) -> None:
        """Everything on the route but messages (a refusal closes the connection; the read
        loop stops at the next event)."""
        host = self.host
        if op == R_SUB:
            if not self.up:
                self._not_ready()
                return
            host.route_sub(self, ev[1], ev[2], ev[3], ev[4])
        elif op == R_UNSUB:
            if not self.up:
                self._not_ready()
                return
            host.route_unsub(self, ev[1], ev[2], ev[3])
        elif op == R_CONNECT:
            self._process_connect(ev[1])
        elif not self.connect_received:
            # nats-server's parser: before CONNECT on an accepted route, anything but
            # CONNECT is an authorization error (garbage included).
            self._auth_violation()
            return
        elif op == R_PING:
            self.send(ROUTE_PONG)
        elif op == R_PONG:
            self.pings_out = 0
            if self.rtt_start:
                self.rtt = time.monotonic() - self.rtt_start
                self.rtt_start = 0.0
        elif op == R_INFO:
            self._process_info(ev[1])
        elif op == R_PEER_ERR:
            host.log_error(f"Route Error '{ev[1]}' from rid:{self.rid} {self._peer()}")
            self._close(RouteCloseReason.PARSE_ERROR, flush=True)
            return
        elif op == R_ERR:
            reason = ev[1]
            host.log_error(f"Route parser error from rid:{self.rid} {self._peer()}: {reason}")
            text = ERR_UNKNOWN_OP if reason == "unknown protocol operation" else reason
            self._send_err_and_close(text, RouteCloseReason.PARSE_ERROR)
            return
        elif op == R_OK:
            pass

    def _peer(self) -> str:
        return f"{self.ip}:{self.port} {self.remote_id}".rstrip()

    def _not_ready(self) -> None:
        if not self.connect_received:
            self._auth_violation()
        else:
            # Interest or messages before the peer's INFO: nats-server never sends them
            # then (it sends INFO first), and we cannot tell whose interest it would be.
            self._send_err_and_close(ERR_UNKNOWN_OP, RouteCloseReason.PROTOCOL)

    def _process_connect(self, raw: bytes) -> None:
        try:
            opts = orjson.loads(raw)
        except orjson.JSONDecodeError:
            opts = None
        if not isinstance(opts, dict):
            # nats-server closes without a word when CONNECT does not unmarshal.
            self._close(RouteCloseReason.PROTOCOL, flush=True)
            return
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        st = self.settings
        # nats-server's order (processConnect): credentials, then processRouteConnect's lang,
        # gateway and cluster name checks.
        if st.user and not (
            _same(opts.get("user"), st.user) and _same(opts.get("pass"), st.password)
        ):
            self._auth_violation()
            return
        if opts.get("lang"):
            self.host.log_error(f"rid:{self.rid} {self._peer()}: {ERR_ROUTE_PORT}")
            self._send_err_and_close(ERR_ROUTE_PORT, RouteCloseReason.WRONG_PORT)
            return
        gateway = opts.get("gateway")
        if gateway:
            text = f'Rejecting connection from gateway "{gateway}" on the Route port'
            self.host.log_error(text)
            self._send_err_and_close(text, RouteCloseReason.WRONG_GATEWAY)
            return
        cluster = opts.get("cluster", "")
        if cluster != st.cluster and _adopts(st, cluster, opts.get("cluster_dynamic")):
            # A configured name is final from here on (nats-server sets its option).
            self.host.adopt_cluster_name(self, cluster, final=not opts.get("cluster_dynamic"))
        elif cluster != st.cluster:
            text = _name_conflict(cluster, st.cluster)
            self.host.log_error(text)
            self._send_err_and_close(text, RouteCloseReason.CLUSTER_NAME_CONFLICT)
            return
        self.connect_received = True
        name = opts.get("name")
        if isinstance(name, str) and not self.remote_id:
            self.remote_id = name

    def _process_info(self, raw: bytes) -> None:
        try:
            info = orjson.loads(raw)
        except orjson.JSONDecodeError:
            info = None
        if not isinstance(info, dict):
            self._send_err_and_close("Invalid INFO", RouteCloseReason.PROTOCOL)
            return
        if self.up:
            self.host.route_info(self, info)
            return
        st = self.settings
        if "client_id" in info:
            # The URL names a client port: only a client's INFO carries the id of the
            # connection it greets. nats-server takes it for a route's and then fails on
            # every frame; nothing of it is used here (no cluster name, no route), and the
            # dialer keeps trying, as for a peer that is down.
            self.host.log_error(
                f"rid:{self.rid} {self._peer()}: a client port answered, not a route port"
            )
            self._close(RouteCloseReason.PROTOCOL, flush=False)
            return
        sid = info.get("server_id")
        if not isinstance(sid, str) or not sid:
            self._send_err_and_close("Route INFO without a server_id", RouteCloseReason.PROTOCOL)
            return
        if sid == st.server_id:
            # The route to ourselves (configs list every server, this one included):
            # nats-server closes it without a word. What we queued (our INFO, on the
            # accepting end) still goes out, so that the dialing end learns it too; the
            # host hears of it first, to stop the dialer whichever end this is.
            self.host.log_debug(f"rid:{self.rid} {self._peer()}: route to self, dropped")
            self.host.route_to_self(self)
            self._close(RouteCloseReason.DUPLICATE_ROUTE, flush=True)
            return
        cluster = info.get("cluster", "")
        if cluster and cluster != st.cluster and _adopts(st, cluster, info.get("cluster_dynamic")):
            self.host.adopt_cluster_name(self, cluster, final=False)
        elif cluster and cluster != st.cluster:
            # nats-server closes here without an -ERR; its accepting side sends this text.
            self.host.log_error(_name_conflict(cluster, st.cluster))
            self._close(RouteCloseReason.CLUSTER_NAME_CONFLICT, flush=False)
            return
        refusal = self._unsupported(info)
        if refusal is not None:
            self.host.log_error(f"rid:{self.rid} {self._peer()}: {refusal}")
            self._send_err_and_close(refusal, RouteCloseReason.PROTOCOL)
            return
        self.peer_info = info
        self.remote_id = sid
        name = info.get("server_name")
        self.remote_name = name if isinstance(name, str) else ""
        self.headers = info.get("headers") is True
        self.up = True
        if not self.host.route_up(self, info):
            self.up = False
            self.host.log_debug(f"rid:{self.rid} duplicate route to {sid}, closed")
            self._close(RouteCloseReason.DUPLICATE_ROUTE, flush=True)

    def _unsupported(self, info: dict[str, Any]) -> str | None:
        """Why a peer's route shape cannot be served, in nats-server's words where it has
        them, or None."""
        account = info.get("route_account")
        if account:
            return (
                f"Not possible to have a dedicated route for account {go_quote(str(account))} "
                "between those servers"
            )
        ours = self.settings.pool_size
        idx = info.get("route_pool_idx", 0)
        if idx:
            return f"Invalid route pool index: {idx} - pool size is {ours}"
        theirs = info.get("route_pool_size", 0)
        if ours and isinstance(theirs, int) and theirs > ours:
            # Announcing a pool makes nats-server open max(ours, theirs) connections, one
            # per pool index; we serve one. Announce none (pool_size 0) to take any peer.
            return (
                f"Mismatch route pool size: {theirs} vs {ours} "
                "(this server serves one connection per route: pool_size 1 on both sides)"
            )
        return None

    def _auth_violation(self) -> None:
        self._send_err_and_close(ERR_AUTH, RouteCloseReason.AUTH_VIOLATION)

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.connect_received and not self.closed:
            self._send_err_and_close(ERR_AUTH_TIMEOUT, RouteCloseReason.AUTH_TIMEOUT)

    def _send_err_and_close(self, text: str, reason: str) -> None:
        self.send(encode_route_err(text))
        self._close(reason, flush=True)

    # ------------------------------------------------------------------ outbound
    def send(self, frame: bytes) -> None:
        """Queue a control frame (never dropped); it goes out with the next flush."""
        self.out.append(frame)
        self.out_size += len(frame)
        if not self.flush_pending:
            self.kick()

    def send_sub(self, account: bytes, subject: bytes, queue: bytes | None, weight: int) -> None:
        self._send_interest(encode_rs_plus(account, subject, queue, weight))

    def send_unsub(self, account: bytes, subject: bytes, queue: bytes | None) -> None:
        self._send_interest(encode_rs_minus(account, subject, queue))

    def _send_interest(self, frame: bytes) -> None:
        if self.closed:
            return
        self.send(frame)
        if self.out_size + self._wbuf > _INTEREST_FACTOR * self.max_pending:
            self._refresh_wbuf()
            if self.out_size + self._wbuf > _INTEREST_FACTOR * self.max_pending:
                self.host.log_error(
                    f"rid:{self.rid} {self._peer()}: peer not reading, "
                    f"{self.out_size + self._wbuf} bytes of interest pending; closing the route"
                )
                self.out = []
                self.out_size = 0
                self._close(RouteCloseReason.SLOW_CONSUMER_PENDING, flush=False)

    def send_msg(self, frame: bytes) -> bool:
        """Queue an encoded RMSG/HMSG frame; False (and counted) when it was dropped because
        ``max_pending`` bytes are already queued. Never closes the route."""
        n = len(frame)
        if self.out_size + self._wbuf + n > self.max_pending:
            self._refresh_wbuf()
            if self.closed or self.out_size + self._wbuf + n > self.max_pending:
                self.dropped_msgs += 1
                self.dropped_bytes += n
                return False
        self.out.append(frame)
        self.out_size += n
        self.msgs_out += 1
        self.bytes_out += n
        if not self.flush_pending:
            self.kick()
        return True

    def _refresh_wbuf(self) -> None:
        self._wbuf = write_buffered(self.transport)

    def kick(self) -> None:
        self.flush_pending = True
        self.host.flusher.add(self)

    def flush(self) -> None:
        self.flush_pending = False
        out = self.out
        if not out:
            return
        t = self.transport
        self.out = []
        self.out_size = 0
        if self.closed or t is None or t.is_closing():
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        if self.host.trace:
            self.host.log_trace(f"rid:{self.rid} ->> {data[:512]!r}")
        tls = self.tls
        if tls is not None:
            if not tls.established:
                self.out = [data]  # nothing but the handshake before it is done
                self.out_size = len(data)
                return
            data = tls.encrypt(data)
        t.write(data)
        self._wbuf = t.get_write_buffer_size()

    # ------------------------------------------------------------------ timers
    def _ping_interval(self) -> float:
        return min(self.settings.ping_interval, ROUTE_MAX_PING_INTERVAL)

    def _ping_tick(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        # nats-server never delays a route's PING for recent traffic (processPingTimer).
        if self.pings_out + 1 > self.settings.ping_max:
            self.host.log_error(f"rid:{self.rid} {self._peer()}: stale route connection")
            self._send_err_and_close(ERR_STALE, RouteCloseReason.STALE)
            return
        self.pings_out += 1
        self.rtt_start = time.monotonic()
        self.send(ROUTE_PING)
        self._ping_timer = self.host.scheduler.call_later(self._ping_interval(), self._ping_tick)

    # ------------------------------------------------------------------ teardown
    def close(self, reason: str = RouteCloseReason.SERVER_SHUTDOWN) -> None:
        self._close(reason, flush=True)

    def _close(self, reason: str, flush: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.up = False
        self.close_reason = reason
        for timer in (self._auth_timer, self._ping_timer, self._tls_timer):
            if timer is not None:
                timer.cancel()
        self._auth_timer = self._ping_timer = self._tls_timer = None
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
        self.host.route_closed(self, reason)

    # ------------------------------------------------------------------ introspection
    @property
    def pending_bytes(self) -> int:
        return self.out_size + write_buffered(self.transport)


def _same(given: object, expected: str) -> bool:
    return isinstance(given, str) and hmac.compare_digest(given.encode(), expected.encode())


def _count(acct: Account, nin: int, bin_: int, nout: int, bout: int) -> None:
    acct.msgs_in += nin
    acct.bytes_in += bin_
    acct.msgs_out += nout
    acct.bytes_out += bout


def _adopts(st: RouteSettings, theirs: object, theirs_dynamic: object) -> bool:
    """nats-server's rule: a server with a generated name takes on a peer's name when that
    one is configured or sorts after its own (so a set of unnamed servers converges on the
    greatest generated name)."""
    return (
        st.cluster_dynamic
        and isinstance(theirs, str)
        and bool(theirs)
        and (not theirs_dynamic or st.cluster < theirs)
    )


def _name_conflict(theirs: object, ours: str) -> str:
    theirs_q, ours_q = go_quote(str(theirs)), go_quote(ours)
    return f"Rejecting connection, cluster name {theirs_q} does not match {ours_q}"
