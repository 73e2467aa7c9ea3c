"""The composition root: builds accounts, auth, listeners and monitoring from ServerOptions.

Embedding::

    async with natsd.Server(port=0, jetstream=True, store_dir=path) as srv:
        nc = await nats.connect(srv.client_url)

Ownership: everything here runs on one asyncio event loop. The server owns the listener,
the set of live connections, the accounts and the Flusher that coalesces writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import orjson

from natsd.connection.client import ClientConnection, CloseReason
from natsd.connection.fairness import ReadBudget
from natsd.connection.flusher import Flusher
from natsd.connection.limits import ConnectionLimits
from natsd.core.ids import new_server_id
from natsd.options import ServerOptions
from natsd.router.account import GLOBAL_ACCOUNT, SYSTEM_ACCOUNT, Account
from natsd.security.auth import Authenticator
from natsd.security.permissions import Permissions
from natsd.version import API_LEVEL, PROTO, SERVER_VERSION, __version__

__all__ = ["Server"]

log = logging.getLogger("natsd")

# Keyword shortcuts accepted by Server(...) that live in nested option objects.
_JS_KW = {"store_dir", "max_memory", "max_file", "domain", "sync_interval", "sync_always"}


class Server:
    def __init__(self, options: ServerOptions | None = None, **kw: Any) -> None:
        opts = options or ServerOptions()
        js_kw = {k: kw.pop(k) for k in list(kw) if k in _JS_KW}
        if kw:
            opts = replace(opts, **kw)
        if js_kw:
            opts = replace(opts, js=replace(opts.js, **js_kw))
        if opts.max_payload > opts.max_pending:
            raise ValueError(
                f"max_payload ({opts.max_payload}) cannot be higher than "
                f"max_pending ({opts.max_pending})"
            )
        self.options = opts
        self.server_id = new_server_id()
        self.server_name = opts.server_name or self.server_id
        self.limits = ConnectionLimits(
            max_payload=opts.max_payload,
            max_control_line=opts.max_control_line,
            max_pending=opts.max_pending,
            max_subs=opts.max_subs,
            ping_interval=opts.ping_interval,
            ping_max=opts.ping_max,
            auth_timeout=opts.auth_timeout,
            write_deadline=opts.write_deadline,
        )
        self.auth = Authenticator(opts.users, opts.token, opts.no_auth_user)
        self.auth_required = self.auth.required
        self.accounts: dict[str, Account] = {
            GLOBAL_ACCOUNT: Account(GLOBAL_ACCOUNT),
            SYSTEM_ACCOUNT: Account(SYSTEM_ACCOUNT),
        }
        for name, acfg in opts.accounts.items():
            self.accounts[name] = Account(name, jetstream_limits=acfg.jetstream)
        for u in opts.users:
            if u.account not in self.accounts:
                self.accounts[u.account] = Account(u.account)
        self.clients: dict[int, ClientConnection] = {}
        self.start_time = time.time()
        self.total_connections = 0
        self.slow_consumers = 0
        self.stale_connections = 0
        self._cid = 0
        self._tcp: asyncio.Server | None = None
        self._monitor: Any = None
        self.flusher = Flusher()
        self.reads = ReadBudget()
        self.port = 0
        self.monitor_port = 0
        self.ready = asyncio.Event()
        self._stopped = asyncio.Event()
        self._info_base: dict[str, Any] = {}
        self.jetstream_enabled = False
        self.jetstream: Any = None
        # Protocol tracing (-V): one log line per read and per write, never per message.
        self.trace = opts.trace

    # ------------------------------------------------------------------ ClientHost
    def default_account(self) -> Account:
        return self.accounts[GLOBAL_ACCOUNT]

    def info_for(self, client: ClientConnection, connect_info: bool = False) -> bytes:
        info = dict(self._info_base)
        info["client_id"] = client.cid
        info["client_ip"] = client.ip
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = client.account.name
        return b"INFO " + orjson.dumps(info) + b" \r\n"

    def authenticate(
        self, client: ClientConnection, opts: dict[str, Any]
    ) -> tuple[Account, Permissions | None, str] | None:
        res = self.auth.check(opts)
        if res is None:
            return None
        acct = self.accounts.get(res.account)
        if acct is None:
            acct = self.accounts[res.account] = Account(res.account)
        return acct, res.permissions, res.username

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

    def release(self, client: ClientConnection, reason: str) -> None:
        self.clients.pop(client.cid, None)
        client.account.clients.pop(client.cid, None)
        if reason in (CloseReason.SLOW_CONSUMER_PENDING, CloseReason.SLOW_CONSUMER_DEADLINE):
            self.slow_consumers += 1
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

    def log_trace(self, msg: str) -> None:
        log.log(5, "%s", msg)

    # ------------------------------------------------------------------ lifecycle
    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"nats://{host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        host = self.options.http_host
        if host in ("0.0.0.0", "", "::"):
            host = "127.0.0.1"
        return f"http://{host}:{self.monitor_port}"

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
        if opts.http_port:
            await self._start_monitor()
        if opts.jetstream:
            self._prepare_jetstream()
        port = opts.port if opts.port > 0 else 0
        self._tcp = await loop.create_server(
            # ClientConnection implements asyncio.Protocol by duck typing (see its docstring).
            cast("Callable[[], asyncio.Protocol]", self._new_client),
            host=opts.host or None,
            port=port,
            reuse_address=True,
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
        if opts.js.domain and self.jetstream_enabled:
            self._info_base["domain"] = opts.js.domain
        # nats-server always sends its JetStream API level (ADR-44).
        self._info_base["api_lvl"] = API_LEVEL
        log.info("Listening for client connections on %s:%d", opts.host, self.port)
        log.info("Server is ready")
        self.ready.set()

    def _prepare_jetstream(self) -> None:
        # Concrete storage classes are chosen here and only here.
        from natsd.jetstream.engine import JetStream
        from natsd.storage.disk_catalog import DiskCatalog

        js = self.options.js
        if not js.store_dir:
            js.store_dir = os.path.join(os.path.abspath("."), "data")
        os.makedirs(js.store_dir, exist_ok=True)
        log.info("Starting JetStream")
        log.info("  Store Directory: %r", js.store_dir)
        sync = "always" if js.sync_always else (
            f"every {js.sync_interval}s (lazy)" if js.sync_interval else "before every ack"
        )
        log.info("  Sync:            %s", sync)
        engine = JetStream(
            DiskCatalog(js.store_dir),
            domain=js.domain,
            max_memory=js.max_memory,
            max_store=js.max_file,
            sync_interval=js.sync_interval,
            sync_always=js.sync_always,
        )
        configured = {n: a for n, a in self.options.accounts.items()}
        if not configured:
            engine.enable_account(self.accounts[GLOBAL_ACCOUNT])
        for name, acfg in configured.items():
            if acfg.jetstream is not None:
                engine.enable_account(self.accounts[name], acfg.jetstream)
        engine.restore(self.accounts)
        engine.start()
        self.jetstream = engine
        self.jetstream_enabled = True

    async def _start_monitor(self) -> None:
        from natsd.monitor.http import MonitorServer

        opts = self.options
        mon = MonitorServer(self)
        port = opts.http_port if opts.http_port > 0 else 0
        self.monitor_port = await mon.start(opts.http_host, port)
        self._monitor = mon
        log.info("Starting http monitor on %s:%d", opts.http_host, self.monitor_port)

    def _new_client(self) -> ClientConnection:
        self._cid += 1
        return ClientConnection(self, self._cid)

    async def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        log.info("Initiating Shutdown...")
        if self._tcp is not None:
            self._tcp.close()
        for c in list(self.clients.values()):
            c.close(CloseReason.SERVER_SHUTDOWN)
        if self._tcp is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp.wait_closed(), 2.0)
        if self.jetstream is not None:
            await self.jetstream.shutdown()
        if self._monitor is not None:
            await self._monitor.stop()
        if self.options.pid_file:
            with contextlib.suppress(OSError):
                os.unlink(self.options.pid_file)
        log.info("Server Exiting..")

    async def lame_duck(self, duration: float) -> None:
        """Stop accepting, then close clients spread over ``duration`` seconds."""
        if self._tcp is not None:
            self._tcp.close()
        clients = list(self.clients.values())
        if clients and duration > 0:
            step = duration / len(clients)
            for c in clients:
                c.close(CloseReason.SERVER_SHUTDOWN)
                await asyncio.sleep(step)
        await self.shutdown()

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
