"""The composition root: builds accounts, auth, listeners and monitoring from ServerOptions.

Embedding::

    async with natsd.Server(port=0, jetstream=True, store_dir=path) as srv:
        nc = await nats.connect(srv.client_url)

Ownership: everything here runs on one asyncio event loop. The server owns the listener,
the set of live connections, the accounts and the Flusher that coalesces writes.

Run-time control (nats-server's signal.go, reload.go, lameDuckMode): ``reload`` applies a new
configuration after ``config.reload.plan_reload`` has accepted all of it (nothing changes when any
part is refused); ``lame_duck`` stops accepting, tells clients (``"ldm": true`` INFO), waits
the grace period and closes clients spread over the lame duck duration, then shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import orjson

from natsd.cluster.handoff import HANDOFF_ENV, Handoff
from natsd.cluster.mesh import Mesh, route_settings
from natsd.cluster.urls import cluster_configured, own_client_urls
from natsd.config import load_config
from natsd.config.cluster import validate_cluster
from natsd.config.links import export_for
from natsd.config.options import ServerOptions
from natsd.config.reload import ReloadError, ReloadPlan, plan_reload
from natsd.connection.client import ClientConnection, CloseReason
from natsd.connection.fairness import ReadBudget
from natsd.connection.flusher import Flusher
from natsd.connection.limits import ConnectionLimits
from natsd.connection.route_net import RouteNet
from natsd.connection.tls import ClientTls
from natsd.core.clock import format_duration
from natsd.core.ids import new_server_id
from natsd.core.scheduler import SYSTEM_CLOCK, Clock, Scheduler
from natsd.core.subjects import subset_match
from natsd.logs import install_handler, open_handler
from natsd.monitor.source import AccountUsage, ClusterUsage
from natsd.monitor.sys_services import SysServices
from natsd.protocol.encode import encode_err
from natsd.router.account import GLOBAL_ACCOUNT, SYSTEM_ACCOUNT, Account
from natsd.router.imports import AccountLinks
from natsd.router.msgtrace import TRACE_PROTO, rfc3339_nano
from natsd.security.auth import Authenticator
from natsd.security.nkeys import new_nonce
from natsd.security.permissions import Permissions
from natsd.security.tls import server_context
from natsd.server_usage import engine_usage, mesh_usage
from natsd.storage.fileio import DEFAULT_IO, FileIO
from natsd.version import API_LEVEL, PROTO, SERVER_VERSION, __version__

__all__ = ["Server"]

log = logging.getLogger("natsd")

# Keyword shortcuts accepted by Server(...) that live in nested option objects.
_JS_KW = {"store_dir", "max_memory", "max_file", "domain", "sync_interval", "sync_always"}

# nats-server DEFAULT_LAME_DUCK_DURATION / DEFAULT_LAME_DUCK_GRACE_PERIOD.
LAME_DUCK_DURATION = 120.0
LAME_DUCK_GRACE_PERIOD = 10.0
# lameDuckMode never waits longer than this between two client closes.
_LDM_MAX_INTERVAL = 1.0
_LDM_MIN_INTERVAL = 0.001


def _baseline(opts: ServerOptions) -> None:
    """Defaults nats-server fills in for zero values (setBaselineOptions)."""
    if opts.lame_duck_duration == 0:
        opts.lame_duck_duration = LAME_DUCK_DURATION
    if opts.lame_duck_grace_period == 0:
        opts.lame_duck_grace_period = LAME_DUCK_GRACE_PERIOD
    if opts.tls is not None and not opts.auth_timeout_set:
        # getDefaultAuthTimeout: the handshake's time on top of the usual second.
        opts.auth_timeout = opts.tls.timeout + 1.0


def _validate(opts: ServerOptions) -> None:
    """nats-server's validateOptions, at start-up and on every reload."""
    if opts.lame_duck_duration > 0 and opts.lame_duck_grace_period >= opts.lame_duck_duration:
        raise ValueError(
            f"lame duck grace period ({format_duration(opts.lame_duck_grace_period)}) should be"
            f" strictly lower than lame duck duration ({format_duration(opts.lame_duck_duration)})"
        )
    # The same cluster checks as a configuration file gets (embedders build ClusterOptions
    # directly): nats-server's, and natsd's refusals of what it does not do.
    validate_cluster(opts)
    if opts.http_port and opts.https_port:
        raise ValueError(
            f"can't specify both HTTP ({opts.http_port}) and HTTPs ({opts.https_port}) ports"
        )
    if opts.https_port and opts.tls is None:
        raise ValueError("TLS cert and key required for HTTPS")
    if opts.max_payload > opts.max_pending:
        raise ValueError(
            f"max_payload ({opts.max_payload}) cannot be higher than "
            f"max_pending ({opts.max_pending})"
        )


def _client_tls(opts: ServerOptions) -> ClientTls | None:
    """The client port's TLS, its context made once (again on reload)."""
    t = opts.tls
    if t is None:
        return None
    return ClientTls(
        context=server_context(t),
        timeout=t.timeout,
        handshake_first=t.handshake_first,
        fallback_delay=t.fallback_delay,
        allow_non_tls=opts.allow_non_tls,
        verify=t.verify,
        map_users=t.map_users,
        pinned_certs=t.pinned_certs,
    )


def _limits(opts: ServerOptions) -> ConnectionLimits:
    return ConnectionLimits(
        max_payload=opts.max_payload,
        max_control_line=opts.max_control_line,
        max_pending=opts.max_pending,
        max_subs=opts.max_subs,
        ping_interval=opts.ping_interval,
        ping_max=opts.ping_max,
        auth_timeout=opts.auth_timeout,
        write_deadline=opts.write_deadline,
    )


def _default_store_dir() -> str:
    return os.path.join(os.path.abspath("."), "data")


class Server:
    def __init__(
        self,
        options: ServerOptions | None = None,
        *,
        file_io: FileIO = DEFAULT_IO,
        clock: Clock = SYSTEM_CLOCK,
        scheduler: Scheduler | None = None,
        route_net: RouteNet | None = None,
        rng: random.Random | None = None,
        **kw: Any,
    ) -> None:
        opts = options or ServerOptions()
        # The system calls of JetStream's file storage; tests inject a fault-injecting
        # FileIO (power loss, ENOSPC) to check the server's durability promises end to end.
        self.file_io = file_io
        # JetStream's time and timers (the running loop when no scheduler is given): a test
        # passes natsd.testing.TestClock as both, and moves time forward
        self.js_clock = clock
        self.js_scheduler = scheduler
        # Where routes come from (TCP unless a simulation passes its network) and the
        # randomness of route back-offs and Raft election timeouts (seeded in a simulation).
        self.route_net = route_net
        self.rng = rng if rng is not None else random.Random()
        js_kw = {k: kw.pop(k) for k in list(kw) if k in _JS_KW}
        if kw:
            opts = replace(opts, **kw)
        if js_kw:
            opts = replace(opts, js=replace(opts.js, **js_kw))
        _baseline(opts)
        _validate(opts)
        self.options = opts
        self.server_id = new_server_id()
        self._sys_seq = 0  # system events sent (message traces)
        self.server_name = opts.server_name or self.server_id
        self.limits = _limits(opts)
        self.tls = _client_tls(opts)
        self.auth = Authenticator(opts.users, opts.token, opts.no_auth_user)
        self.auth_required = self.auth.required
        self.accounts: dict[str, Account] = {
            GLOBAL_ACCOUNT: Account(GLOBAL_ACCOUNT),
            SYSTEM_ACCOUNT: Account(SYSTEM_ACCOUNT),
        }
        for name, acfg in opts.accounts.items():
            self.accounts[name] = Account(name, jetstream_limits=acfg.jetstream)
        # The account of the server's own traffic (Raft, usage reports, META.LEADER.STEPDOWN,
        # domain advisories): ``system_account`` when configured, else natsd's $SYS.
        self.system_account_name = opts.system_account or SYSTEM_ACCOUNT
        if self.system_account_name not in self.accounts:
            raise ValueError("error resolving system account: account missing")
        for u in opts.users:
            if u.account not in self.accounts:
                self.accounts[u.account] = Account(u.account)
        self.clients: dict[int, ClientConnection] = {}
        self.flusher = Flusher()
        # The route mesh, only when a cluster is configured: without one no Sublist has a
        # change listener and no account a forwarder, so a lone server pays nothing.
        self.mesh: Mesh | None = None
        if cluster_configured(opts.cluster):
            self.mesh = Mesh(
                opts.cluster,
                route_settings(opts.cluster, self.server_id, self.server_name),
                self.flusher,
                self.accounts,
                self._route_info_fields,
                self._cluster_urls_changed,
                trace=opts.trace,
                net=route_net,
                rng=self.rng,
            )
            self.mesh.trace_server_of = self.trace_server
            for acct in self.accounts.values():
                self.mesh.attach(acct)
        self._client_urls: list[str] = []
        self.start_time = time.time()
        self.total_connections = 0
        self.slow_consumers = 0
        self.stale_connections = 0
        self._cid = 0
        self._tcp: asyncio.Server | None = None
        self._monitor: Any = None
        self.sys_services: SysServices | None = None
        self.reads = ReadBudget()
        self.port = 0
        self.monitor_port = 0
        self.ready = asyncio.Event()
        self._stopped = asyncio.Event()
        self._info_base: dict[str, Any] = {}
        self.jetstream_enabled = False
        self.jetstream: Any = None
        self.js_cluster: Any = None  # JsCluster on a cluster
        self.js_router: Any = None  # ApiRouter: which server answers which API request
        self._jetstream_stopped = False
        # Protocol tracing (-V): one log line per read and per write, never per message.
        self.trace = opts.trace
        self.config_time = self.start_time
        # Reads the configuration again for ``reload_config`` (the CLI puts its flags on top).
        self.options_loader: Callable[[], tuple[ServerOptions, list[str]]] | None = None
        self.ldm = False
        self.handoff: Handoff | None = None
        # Accounts' imports and exports, installed when the server starts (start_links).
        self.links: AccountLinks | None = None
        # The client whose read is being processed (ClientHost.publisher).
        self.publisher: ClientConnection | None = None

    # ------------------------------------------------------------------ ClientHost
    @property
    def scheduler(self) -> Scheduler:
        """Connection timers run on the loop the server runs on."""
        return asyncio.get_running_loop()

    def default_account(self) -> Account:
        return self.accounts[GLOBAL_ACCOUNT]

    def info_for(
        self, client: ClientConnection, connect_info: bool = False, ldm: bool = False
    ) -> bytes:
        info = dict(self._info_base)
        info["client_id"] = client.cid
        info["client_ip"] = client.ip
        if client.info_tls_required is not None:
            # a handshake_first fallback: what the port says without handshake_first
            if client.info_tls_required:
                info["tls_required"] = True
            else:
                info.pop("tls_required", None)
        if ldm:
            info["ldm"] = True
        elif not connect_info and not client.nonce and self.auth.nonce_required:
            # The challenge an nkey user signs in CONNECT (one per connection).
            client.nonce = new_nonce().encode()
        if client.nonce and not connect_info and not ldm:
            info["nonce"] = client.nonce.decode()
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = client.account.name
        return b"INFO " + orjson.dumps(info) + b" \r\n"

    def authenticate(
        self, client: ClientConnection, opts: dict[str, Any]
    ) -> tuple[Account, Permissions | None, str] | None:
        cert_names: list[str] | None = None
        cfg = client.tls_cfg
        if cfg is not None and cfg.map_users:
            # Every client of the port is named by its certificate, as in nats-server: a
            # plain one (allow_non_tls) has none, and is refused.
            peer = client.tls_peer if client.tls is not None else None
            cert_names = peer.identities() if peer is not None else []
        res = self.auth.check(opts, client.nonce, cert_names)
        if res is None:
            return None
        acct = self.accounts.get(res.account)
        if acct is None:
            acct = self._add_account(res.account)
        return acct, res.permissions, res.username

    def _start_links(self, loop: asyncio.AbstractEventLoop) -> None:
        """Accounts' imports (the config reader checked them against the exports): before
        JetStream and the listener, so every subscription, internal ones included, is
        shadowed from its first day."""
        links: AccountLinks | None = None
        accounts = self.options.accounts
        for name, acfg in accounts.items():
            for im in acfg.imports:
                if links is None:
                    links = AccountLinks(self.js_scheduler or loop, self.js_clock, self.rng)
                importer = self.accounts[name]
                exporter = self.accounts[im.account]
                if im.kind == "stream":
                    links.add_stream_import(importer, exporter, im.subject, im.local_subject)
                    continue
                export = export_for(accounts[im.account].exports, "service", im.subject)
                links.add_service_import(
                    importer,
                    exporter,
                    im.to,
                    im.subject,
                    export.response_type if export is not None else "Singleton",
                    export.response_threshold if export is not None else 0.0,
                )
        if links is not None:
            links.start()
        self.links = links

    def _add_account(self, name: str, jetstream: bool = False) -> Account:
        """A new account; ``jetstream``: its JetStream is about to be enabled."""
        acct = self.accounts[name] = Account(name)
        if self.mesh is not None:
            self.mesh.attach(acct)
        if self.sys_services is not None:
            self.sys_services.account_added(acct)
        if self.jetstream is not None and not jetstream:
            self._answer_not_enabled(self.jetstream, acct)
        return acct

    def admit(self, client: ClientConnection) -> str | None:
        if len(self.clients) >= self.options.max_connections:
            return "maximum connections exceeded"
        self.clients[client.cid] = client
        client.account.clients[client.cid] = client
        self.total_connections += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s:%d - cid:%d - Client connection created", client.ip, client.port, client.cid
            )
        return None

    def connected(self, client: ClientConnection) -> None:
        if self.sys_services is not None:
            self.sys_services.client_connected(client)

    def release(self, client: ClientConnection, reason: str) -> None:
        if self.sys_services is not None and client.connected:
            self.sys_services.client_disconnected(client, reason)
        self.clients.pop(client.cid, None)
        client.account.clients.pop(client.cid, None)
        if reason in (CloseReason.SLOW_CONSUMER_PENDING, CloseReason.SLOW_CONSUMER_DEADLINE):
            self.slow_consumers += 1
            client.account.slow_consumers += 1
            log.info("%s:%d - cid:%d - Slow Consumer Detected", client.ip, client.port, client.cid)
        elif reason == CloseReason.STALE:
            self.stale_connections += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s:%d - cid:%d - Client connection closed: %s",
                client.ip,
                client.port,
                client.cid,
                reason,
            )

    def log_debug(self, msg: str) -> None:
        log.debug("%s", msg)

    def log_tls_error(self, client: ClientConnection, msg: str) -> None:
        log.error("%s:%d - cid:%d - %s", client.ip, client.port, client.cid, msg)

    # ------------------------------------------------------------------ cluster
    def _route_info_fields(self) -> dict[str, Any]:
        """Our route INFO besides what the mesh and the connection set."""
        info: dict[str, Any] = {
            "version": SERVER_VERSION,
            "go": f"natsd {__version__}",
            # (nats-server's route protocol: 3 takes part in message traces)
            "proto": TRACE_PROTO,
            "max_payload": self.options.max_payload,
            "jetstream": self.jetstream_enabled,
        }
        if not self.options.cluster.no_advertise and self._client_urls:
            info["connect_urls"] = list(self._client_urls)
        return info

    def _set_connect_urls(self) -> bool:
        """Recompute the client INFO's connect_urls; True if they changed."""
        mesh = self.mesh
        if mesh is None or self.options.cluster.no_advertise:
            return False
        urls = list(dict.fromkeys([*self._client_urls, *mesh.peer_client_urls()]))
        if urls == self._info_base.get("connect_urls"):
            return False
        self._info_base["connect_urls"] = urls
        return True

    @property
    def cluster_name(self) -> str:
        """The cluster's name: configured, or generated until a peer's is adopted."""
        return self.mesh.settings.cluster if self.mesh is not None else ""

    def _cluster_urls_changed(self) -> None:
        """A peer joined, left or changed its URLs (or the cluster its name): an async INFO
        to clients that take one when the URLs changed, as nats-server."""
        if not self._info_base:
            return
        self._info_base["cluster"] = self.cluster_name
        if not self._set_connect_urls():
            return
        for c in self.clients.values():
            if c.async_info and not c.closed:
                c.send(self.info_for(c))

    def log_trace(self, msg: str) -> None:
        log.log(5, "%s", msg)

    def trace_server(self) -> dict[str, Any]:
        """The ``server`` block of a message trace event: nats-server's ServerInfo with its
        field order (``flags``: 1 JetStream, 2 binary stream snapshots, 4 account NRG, all
        set when JetStream is on; ``seq`` counts this server's system events)."""
        self._sys_seq += 1
        out: dict[str, Any] = {
            "name": self.server_name,
            "host": self.options.host,
            "id": self.server_id,
        }
        if self.mesh is not None:
            out["cluster"] = self.cluster_name
        if self.options.js.domain and self.jetstream_enabled:
            out["domain"] = self.options.js.domain
        out["ver"] = SERVER_VERSION
        out["jetstream"] = self.jetstream_enabled
        out["flags"] = 7 if self.jetstream_enabled else 0
        out["seq"] = self._sys_seq
        out["time"] = rfc3339_nano(time.time_ns(), utc=True)
        return out

    # ------------------------------------------------------------------ lifecycle
    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"nats://{host}:{self.port}"

    @property
    def route_url(self) -> str:
        """The URL other servers put in their ``routes`` to join this one (its advertised
        route address); empty without a cluster or before start."""
        return self.mesh.route_url if self.mesh is not None else ""

    @property
    def monitor_url(self) -> str:
        host = self.options.http_host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        scheme = "https" if self.options.https_port else "http"
        return f"{scheme}://{host}:{self.monitor_port}"

    def _tls_info(self) -> dict[str, Any]:
        """INFO's TLS fields (nats-server's: handshake_first says required even when plain
        clients are allowed; they see INFO only after the fallback delay, which says again)."""
        t = self.tls
        if t is None:
            return {}
        info: dict[str, Any] = {}
        if not t.allow_non_tls or t.handshake_first:
            info["tls_required"] = True
        if t.allow_non_tls:
            info["tls_available"] = True
        if t.verify:
            info["tls_verify"] = True
        return info

    async def start(self) -> None:
        opts = self.options
        loop = asyncio.get_running_loop()
        log.info("Starting natsd")
        log.info("  Version:  %s (nats-server protocol %s)", __version__, SERVER_VERSION)
        log.info("  Name:     %s", self.server_name)
        log.info("  ID:       %s", self.server_id)
        if opts.config_file:
            log.info("Using configuration file: %s", opts.config_file)
        if opts.pid_file:
            with open(opts.pid_file, "w") as f:
                f.write(str(os.getpid()))
        if opts.http_port or opts.https_port:
            await self._start_monitor()
        self._start_links(loop)
        if opts.jetstream:
            self._prepare_jetstream()
        port = opts.port if opts.port > 0 else 0
        self._tcp = await loop.create_server(
            # ClientConnection implements asyncio.Protocol by duck typing (see its docstring).
            cast("Callable[[], asyncio.Protocol]", self._new_client),
            host=opts.host or None,
            port=port,
            reuse_address=True,
            # --workers: every worker listens on the one client port; the kernel spreads
            # the connections (natsd/workers.py).
            reuse_port=opts.reuse_port or None,
            backlog=4096,
        )
        sock = self._tcp.sockets[0]
        self.port = int(sock.getsockname()[1])
        self._info_base = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": SERVER_VERSION,
            "proto": PROTO,
            "go": f"natsd {__version__}",
            "host": opts.host,
            "port": self.port,
            "headers": True,
            "max_payload": opts.max_payload,
            "jetstream": self.jetstream_enabled,
        }
        if self.auth_required:
            self._info_base["auth_required"] = True
        self._info_base.update(self._tls_info())
        if opts.js.domain and self.jetstream_enabled:
            self._info_base["domain"] = opts.js.domain
        # nats-server always sends its JetStream API level (ADR-44).
        self._info_base["api_lvl"] = API_LEVEL
        # the system account's $SYS.REQ services (before the routes start: their interest
        # goes out with the rest)
        self.sys_services = SysServices(
            self, self.accounts[self.system_account_name], lambda: self.publisher
        )
        self.sys_services.start()
        if self.mesh is not None:
            self._client_urls = own_client_urls(opts.host, self.port)
            self._info_base["cluster"] = self.cluster_name
            self._set_connect_urls()
            await self.mesh.start()
            handoff_dir = os.environ.get(HANDOFF_ENV, "")
            if handoff_dir and opts.reuse_port:
                # A worker of natsd --workers 2: connections move to the worker they
                # publish to (cluster/handoff.py).
                system = self.accounts[self.system_account_name]
                self.handoff = Handoff(self, self.mesh, system, handoff_dir)
                self.handoff.start()
        log.info("Listening for client connections on %s:%d", opts.host, self.port)
        log.info("Server is ready")
        self.ready.set()

    def _prepare_jetstream(self) -> None:
        # Concrete storage classes are chosen here and only here, and so is the API that
        # answers $JS.API (the engine never imports it).
        from natsd.jetstream.api import subscribe_api
        from natsd.jetstream.api.dispatch import make_direct_callback
        from natsd.jetstream.engine import JetStream
        from natsd.storage.disk_catalog import DiskCatalog

        js = self.options.js
        if not js.store_dir:
            js.store_dir = _default_store_dir()
        os.makedirs(js.store_dir, exist_ok=True)
        log.info("Starting JetStream")
        log.info("  Store Directory: %r", js.store_dir)
        sync = (
            "always"
            if js.sync_always
            else (f"every {js.sync_interval}s (lazy)" if js.sync_interval else "before every ack")
        )
        log.info("  Sync:            %s", sync)
        # On a cluster the API is routed by the meta group's replica (JsCluster); the
        # engine asks for the subscriptions of each account as it enables it.
        api: Any = subscribe_api
        if self.mesh is not None:

            def api(ja: Any) -> Any:  # the router is built right after the engine
                return self.js_router.subscribe_api(ja)

        engine = JetStream(
            DiskCatalog(js.store_dir, io=self.file_io, now_ns=self.js_clock.time_ns),
            domain=js.domain,
            max_memory=js.max_memory,
            max_store=js.max_file,
            sync_interval=js.sync_interval,
            sync_always=js.sync_always,
            clock=self.js_clock,
            scheduler=self.js_scheduler or asyncio.get_running_loop(),
            api=api,
            direct=make_direct_callback,
            max_payload=self.options.max_payload,
            system=self.accounts[self.system_account_name],
        )
        if self.mesh is not None:
            from natsd.jetstream.api.routing import ApiRouter

            self.js_cluster = self._js_cluster(engine, js.store_dir)
            self.js_router = ApiRouter(self.js_cluster)
        configured = {n: a for n, a in self.options.accounts.items()}
        if not configured:
            engine.enable_account(self.accounts[GLOBAL_ACCOUNT])
        for name, acfg in configured.items():
            if acfg.jetstream is not None:
                engine.enable_account(self.accounts[name], acfg.jetstream)
        for acct in self.accounts.values():
            self._answer_not_enabled(engine, acct)
        engine.restore(self.accounts)
        _release_free_heap()
        engine.start()
        if self.js_cluster is not None:
            self.js_cluster.start()
        self.jetstream = engine
        self.jetstream_enabled = True

    def _answer_not_enabled(self, engine: Any, acct: Account) -> None:
        """An account without JetStream on a server with it: its API requests are answered
        10039, unless it imports a service that takes them (nats-server's
        ``enableJetStreamInfoServiceImportOnly``). Not the system account."""
        from natsd.jetstream.api.dispatch import not_enabled_subscription

        if acct.name in engine.accounts:
            return
        if acct.name == self.system_account_name:
            return
        acfg = self.options.accounts.get(acct.name)
        for im in acfg.imports if acfg is not None else ():
            if im.kind == "service" and subset_match(b"$JS.API.INFO", im.to.encode()):
                return
        sub = not_enabled_subscription(acct.sublist, self.mesh is not None)
        acct.sublist.insert(sub, quiet=True)

    def _js_cluster(self, engine: Any, store_dir: str) -> Any:
        """This server's part of clustered JetStream: the node WAL, the Raft service over
        the routes, and the meta group's replica (design-clustering §4.3-4.4)."""
        from natsd.cluster.raft_service import RaftService
        from natsd.jetstream.cluster.driver import JsCluster
        from natsd.storage.wal import Wal

        mesh = self.mesh
        assert mesh is not None
        wal = Wal.open(os.path.join(store_dir, "jetstream", "_cluster", "wal"), io=self.file_io)
        system = self.accounts[self.system_account_name]
        raft = RaftService.open(
            self.server_name,
            wal,
            system,
            # the loop's clock and timers, not JetStream's: a test that moves JetStream's
            # time (natsd.testing.TestClock) must not move the lease or start elections
            scheduler=asyncio.get_running_loop(),
            clock=asyncio.get_running_loop().time,
            rand=self.rng.randrange,
            flush_out=self.flusher.run,
        )
        return JsCluster(
            engine,
            raft,
            system,
            self.server_name,
            lambda: self.cluster_name,
            lambda: mesh.peer_names(jetstream=True),
            mesh.expected_size,
            list(self.options.server_tags),
            mesh.interested_servers,
        )

    async def _start_monitor(self) -> None:
        from natsd.monitor.http import MonitorServer

        opts = self.options
        mon = MonitorServer(self)
        # https: the client port's certificates (and its client verification), as nats-server
        secure = bool(opts.https_port) and self.tls is not None
        want = opts.https_port if secure else opts.http_port
        port = want if want > 0 else 0
        ctx = self.tls.context if secure and self.tls is not None else None
        self.monitor_port = await mon.start(opts.http_host, port, ctx)
        self._monitor = mon
        log.info(
            "Starting %s monitor on %s:%d",
            "https" if secure else "http",
            opts.http_host,
            self.monitor_port,
        )

    def _new_client(self) -> ClientConnection:
        self._cid += 1
        return ClientConnection(self, self._cid)

    def new_client(self) -> ClientConnection:
        """A client connection with the next id (one moving in from another worker)."""
        return self._new_client()

    async def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info("Initiating Shutdown...")
        if (
            self.jetstream is not None
            and not self._jetstream_stopped
            and self.jetstream.signal_pull_consumers()
        ):
            # as nats-server: a moment for the 409s to leave before the clients are closed
            await asyncio.sleep(0.05)
        if self._tcp is not None:
            self._tcp.close()
        if self.sys_services is not None:
            self.sys_services.server_event("SHUTDOWN")
            self.sys_services.stop()
        if self.handoff is not None:
            self.handoff.stop()
        await self._transfer_leaders()
        if self.mesh is not None:
            await self.mesh.stop()
        for c in list(self.clients.values()):
            c.close(CloseReason.SERVER_SHUTDOWN)
        if self._tcp is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp.wait_closed(), 2.0)
        try:
            await self._stop_jetstream()
        finally:
            # JetStream's stop can fail (its disk gone); the monitor's listener goes anyway
            if self._monitor is not None:
                await self._monitor.stop()
        # The pid file stays, as nats-server leaves it (scripts read it after exit too).
        log.info("Server Exiting..")

    async def _transfer_leaders(self) -> None:
        """Before lame duck or shutdown stops JetStream, as nats-server's lameDuckMode: the
        Raft groups led here move to other servers (their clients see a gap of milliseconds
        instead of an election timeout); given at most a second."""
        jc = self.js_cluster
        if jc is None or self._jetstream_stopped or not jc.transfer_leaders():
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while jc.leads_any() and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if jc.leads_any():
            log.warning("JetStream cluster: leadership not transferred within a second")

    async def _stop_jetstream(self) -> None:
        if self.jetstream is None or self._jetstream_stopped:
            return
        await self._transfer_leaders()
        self._jetstream_stopped = True
        try:
            if self.js_cluster is not None:
                self.js_cluster.stop()
        finally:
            try:
                await self.jetstream.shutdown()
            finally:
                # Lame duck mode keeps clients for a while: as nats-server once JetStream
                # is shut down, their API requests go unanswered instead of reaching
                # closed stores.
                self.jetstream.stop_answering()

    async def lame_duck(self) -> None:
        """nats-server's lameDuckMode: stop accepting clients and stop JetStream, send
        ``"ldm": true`` INFO, wait ``lame_duck_grace_period``, then close the clients spread
        over the rest of ``lame_duck_duration`` (at most a second apart) and shut down."""
        if self._stopped.is_set() or self.ldm or self._tcp is None:
            return
        log.info("Entering lame duck mode, stop accepting new clients")
        self.ldm = True
        if self.sys_services is not None:
            self.sys_services.server_event("LAMEDUCK")
        self._tcp.close()
        if self.mesh is not None:
            self.mesh.lame_duck()
        opts = self.options
        grace = abs(opts.lame_duck_grace_period)
        await self._stop_jetstream()
        clients = [c for c in self.clients.values() if not c.closed]
        if self._stopped.is_set() or not clients:
            await self.shutdown()
            return
        spread = opts.lame_duck_duration - grace
        if spread <= 0:
            spread = 1.0
        interval = min(spread / len(clients), _LDM_MAX_INTERVAL)
        batch = 1
        if interval < _LDM_MIN_INTERVAL:
            # Many clients in a short duration: close them in batches between short sleeps.
            batch = max(1, int(len(clients) * _LDM_MIN_INTERVAL / spread))
            interval = _LDM_MIN_INTERVAL
        for c in clients:
            if c.async_info and not c.closed:
                c.send(self.info_for(c, ldm=True))
        if not await self._sleep_unless_stopped(grace):
            return
        log.info("Closing existing clients")
        for i, c in enumerate(clients):
            c.close(CloseReason.SERVER_SHUTDOWN)
            if i == len(clients) - 1:
                break
            if batch == 1 or i % batch == 0:
                pause = max(random.uniform(0, interval), interval / 2)
                if not await self._sleep_unless_stopped(pause):
                    return
        await self.shutdown()

    async def _sleep_unless_stopped(self, seconds: float) -> bool:
        """Sleep; False (early) if the server was shut down meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopped.wait(), seconds)
        return not self._stopped.is_set()

    def reopen_log_file(self) -> None:
        """SIGUSR1 (nats-server ReOpenLogFile): open the log file again by name, so a file
        logrotate moved away is replaced by a new one."""
        opts = self.options
        if not opts.log_file:
            log.info("File log re-open ignored, not a file logger")
            return
        try:
            handler = open_handler(opts.log_file)
        except OSError as e:
            log.error("Failed to re-open log file %s: %s", opts.log_file, e)
            return
        install_handler(handler, opts.debug, opts.trace)
        log.info("File log re-opened")

    # ------------------------------------------------------------------ reload
    def reload_config(self) -> None:
        """Read the configuration file again and apply it (SIGHUP). Raises (ReloadError,
        ValueError, OSError) and changes nothing if the file does not load or asks for a
        change that cannot be made at run time."""
        if self.options_loader is not None:
            new, warnings = self.options_loader()
        elif self.options.config_file:
            new, warnings = load_config(self.options.config_file)
        else:
            raise ReloadError("can only reload config when a file is provided using -c or --config")
        for w in warnings:
            log.warning("%s", w)
        self.reload(new)

    def reload(self, new: ServerOptions) -> None:
        """Apply ``new`` options to the running server, entirely or not at all."""
        _baseline(new)
        _validate(new)
        # Validation before the comparison, as nats-server (validateOptions, then diffOptions).
        auth = Authenticator(new.users, new.token, new.no_auth_user)
        plan = plan_reload(
            self.options,
            new,
            jetstream_enabled=self.jetstream_enabled,
            default_store_dir=_default_store_dir(),
        )
        handler = open_handler(new.log_file) if plan.logging else None
        # Certificates are read again whatever changed: a renewed one keeps its path. New
        # connections get the new context; existing ones keep theirs (nats-server's way).
        tls = _client_tls(new)
        # Everything that can fail has been done: from here on the reload is applied whole.
        self.options = new
        self.tls = tls
        for key in ("tls_required", "tls_available", "tls_verify"):
            self._info_base.pop(key, None)
        if self._info_base:
            self._info_base.update(self._tls_info())
        for line in plan.notices:
            log.info("%s", line)
        if handler is not None:
            install_handler(handler, new.debug, new.trace)
        self.trace = new.trace
        self._apply_limits(plan)
        self._apply_accounts(plan)
        self.auth = auth
        self.auth_required = auth.required
        if auth.required:
            self._info_base["auth_required"] = True
        else:
            self._info_base.pop("auth_required", None)
        self._recheck_clients()
        self._drop_removed_accounts()
        self.config_time = time.time()
        log.info("Reloaded server configuration")

    def _apply_limits(self, plan: ReloadPlan) -> None:
        opts = plan.options
        if plan.limits:
            self.limits = _limits(opts)
            for c in self.clients.values():
                c.apply_limits(self.limits)
        if self._info_base:
            self._info_base["max_payload"] = opts.max_payload
        if self.jetstream is not None:
            self.jetstream.max_payload = opts.max_payload
        if plan.max_connections and len(self.clients) > max(0, opts.max_connections):
            over = list(self.clients.values())
            random.shuffle(over)
            over = over[: len(over) - max(0, opts.max_connections)]
            for c in over:
                c.send(encode_err("maximum connections exceeded"))
                c.close(CloseReason.MAX_CONNECTIONS)
            log.info("Closed %d connections to fall within max_connections", len(over))
        if plan.pid_file:
            try:
                with open(opts.pid_file, "w") as f:
                    f.write(str(os.getpid()))
            except OSError as e:
                log.error("Failed to write pidfile: %s", e)
        if self.jetstream is not None:
            if plan.js_max_memory is not None:
                self.jetstream.max_memory = plan.js_max_memory
            if plan.js_max_store is not None:
                self.jetstream.max_store = plan.js_max_store

    def _apply_accounts(self, plan: ReloadPlan) -> None:
        for acfg in plan.new_accounts:
            acct = self.accounts.get(acfg.name)
            if acct is None:
                acct = self._add_account(acfg.name, acfg.jetstream is not None)
            acct.jetstream_limits = acfg.jetstream
            if self.jetstream is not None and acfg.jetstream is not None:
                self.jetstream.enable_account(acct, acfg.jetstream)
        for u in plan.options.users:
            if u.account not in self.accounts:
                self._add_account(u.account)

    def _recheck_clients(self) -> None:
        """nats-server's reloadAuthorization for client connections: a client whose user is
        gone or now belongs to another account is closed (it reconnects to the right one),
        one whose credentials no longer authenticate gets "Authorization Violation", the
        others get their user's new permissions."""
        users = self.auth.users
        for c in list(self.clients.values()):
            if c.closed or not c.connected:
                continue
            if c.user:
                u = users.get(c.user) or self.auth.nkeys.get(c.user)
                if u is None or u.account != c.account.name:
                    c.close(CloseReason.CLIENT_CLOSED)
                    continue
            if not self.auth_required:
                c.update_permissions(None)
                continue
            res = self.authenticate(c, c.credentials)
            if res is None:
                log.error(
                    "%s:%d - cid:%d - authentication error - User %r",
                    c.ip,
                    c.port,
                    c.cid,
                    c.user,
                )
                c.auth_violation()
            elif res[0] is not c.account:
                c.close(CloseReason.CLIENT_CLOSED)
            else:
                c.update_permissions(res[1])

    def _drop_removed_accounts(self) -> None:
        keep = {GLOBAL_ACCOUNT, SYSTEM_ACCOUNT, *self.options.accounts}
        keep.update(u.account for u in self.options.users)
        if self.jetstream is not None:
            keep.update(self.jetstream.accounts)
        for name in [n for n in self.accounts if n not in keep]:
            acct = self.accounts[name]
            if not acct.clients:
                del self.accounts[name]
                if self.sys_services is not None:
                    self.sys_services.account_removed(acct)
                if self.mesh is not None:
                    self.mesh.detach(name)
                log.info("Reloaded: deleting account %r", name)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ stats
    def uptime(self) -> float:
        return time.time() - self.start_time

    def num_subscriptions(self) -> int:
        return sum(len(a.sublist) for a in self.accounts.values())

    def totals(self) -> tuple[int, int, int, int]:
        mi = bi = mo = bo = 0
        for a in self.accounts.values():
            mi += a.msgs_in
            bi += a.bytes_in
            mo += a.msgs_out
            bo += a.bytes_out
        return mi, bi, mo, bo

    def cluster_usage(self, *, subs: bool) -> ClusterUsage | None:
        """The mesh as the monitor shows it (``monitor.source.MonitorSource``)."""
        if self.mesh is None:
            return None
        return mesh_usage(self.mesh, self.options.cluster, self.cluster_name, subs=subs)

    def jetstream_meta(self) -> dict[str, Any] | None:
        return self.js_cluster.meta_info() if self.js_cluster is not None else None

    def raftz(self) -> dict[str, dict[str, dict[str, Any]]] | None:
        """/raftz: this server's Raft groups by account and name (None: not clustered)."""
        return self.js_cluster.raftz() if self.js_cluster is not None else None

    def jetstream_health(self) -> str:
        if self.js_cluster is None or self._jetstream_stopped:
            return ""
        return str(self.js_cluster.health())

    def jetstream_usage(self, *, streams: bool) -> list[AccountUsage] | None:
        """The JetStream figures the monitor reports (``monitor.source.MonitorSource``)."""
        if self.jetstream is None:
            return None
        return engine_usage(self.jetstream, streams=streams, server_name=self.server_name)


def tune_gc() -> None:
    """Make the cyclic garbage collector cheap for a server that keeps many objects alive.

    Stored messages, index entries and match-cache results survive, so with CPython's
    default thresholds (700 allocations) young collections ran constantly and promoted
    everything into older generations that were traversed again and again: 27% of the
    JetStream publish path in a py-spy profile (bench/micro_js.py). The objects created at
    start-up are frozen out of collection and young collections run every 50k allocations;
    full collections still follow CPython's 25%-growth rule, so their cost stays linear.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def tune_allocator() -> None:
    """Keep large read buffers in the heap instead of returning them to the OS per read.

    glibc serves allocations over 128 KB with mmap and unmaps them on free; asyncio reads
    up to 256 KB at a time, so every read paid a mmap/munmap pair. Raising the thresholds
    made the relay ~40% faster in measurements. No-op off glibc.
    """
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        libc.mallopt(m_mmap_threshold, 16 * 1024 * 1024)
        libc.mallopt(m_trim_threshold, 64 * 1024 * 1024)


def _release_free_heap() -> None:
    """Hand the C heap's free pages back to the system after the stores were read.

    Opening a store parses its blocks in large transient buffers; glibc keeps what they
    freed in the process (its mmap threshold grows with the first large free), so a
    restarted server would look as big as its start-up peak. ``malloc_trim`` returns it.
    Elsewhere than glibc this does nothing."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
