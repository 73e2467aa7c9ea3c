"""The route mesh: the cluster listener, the dialers, the set of live routes, and interest.

Ownership: the event loop owns the ``Mesh``; the server builds one when a cluster is
configured and gives it the accounts. The mesh is the ``RouteHost`` of every route
connection (connection/route.py owns each connection's wire and handshake): it decides which
connection to a peer is kept, redials, learns peers by gossip, feeds the peers' RS+/RS- into
``RemoteInterest``, sends ``LocalInterest``'s deltas to every peer, and delivers routed
messages locally (``router.routed.deliver_routed``, called by the route connection).

As nats-server (route.go):

* **Self:** configs list every server, this one included; the connection that turns out to
  be to ourselves (route.py closes it on our own server_id) is not redialed.
* **Duplicates:** both sides may dial each other. Both keep the same connection: the one
  dialed by the server with the smaller server_id (then the smaller dialing port), so the
  two ends never drop opposite connections.
* **Gossip:** a server that accepts a route forwards the new peer's INFO (with its route URL
  in ``ip``) to its other peers, which dial it: a seed config becomes a full mesh.
* **Reconnect:** a configured route is redialed for ever with a capped back-off; one learned
  by gossip ``connect_retries`` times.
* **Clients:** every peer's ``connect_urls`` (its client URLs) are gathered for our clients'
  INFO; ``on_urls_changed`` tells the server to send an async INFO (unless no_advertise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any, Final, cast

from natsd.cluster.forward import Forwarder, Mover
from natsd.config.cluster import GoURLError, parse_go_url
from natsd.config.options import ClusterOptions, RouteURL
from natsd.connection.flusher import Flusher
from natsd.connection.route import RouteCloseReason, RouteConnection, RouteSettings
from natsd.core.ids import Nuid
from natsd.core.scheduler import Scheduler
from natsd.protocol.route_encode import encode_route_err, encode_route_info
from natsd.router.account import Account
from natsd.router.interest import InterestRefused, LocalInterest, RemoteInterest

__all__ = ["Mesh", "route_settings"]

log = logging.getLogger("natsd")

# nats-server redials a route after DEFAULT_ROUTE_RECONNECT (1 s); we start lower and
# double up to it, so a restarted peer rejoins quickly without a dial storm.
_FIRST_DELAY: Final = 0.05
_MAX_DELAY: Final = 1.0
_DIAL_TIMEOUT: Final = 2.0


def route_settings(c: ClusterOptions, server_id: str, server_name: str) -> RouteSettings:
    """The route connections' settings from ``cluster {}``. A pool is never announced
    unless configured as 1 (we serve one connection per peer). With no name configured
    the cluster's is generated, and yields to a peer's (nats-server's dynamic name).

    The clients' ``max_payload`` does not bound what a peer sends (nats-server's routes
    have no limit: ``mpay: -1``): a Raft append catching a replica up carries up to a
    megabyte of entries per group and may carry one message of ``max_payload`` beside.
    Routes keep the parser's own bound (64 MB, the largest ``max_payload`` nats-server
    allows), since a peer is no more trusted than a client."""
    return RouteSettings(
        server_id=server_id,
        cluster=c.name or Nuid().next(),
        cluster_dynamic=not c.name,
        server_name=server_name,
        user=c.username,
        password=c.password,
        auth_timeout=c.auth_timeout or 2.0,
        pool_size=1 if c.pool_size == 1 else 0,
    )


def _url_of(u: RouteURL) -> str:
    return f"{u.host}:{u.port}"


class Mesh:
    """The RouteHost of every route connection of this server."""

    def __init__(
        self,
        options: ClusterOptions,
        settings: RouteSettings,
        flusher: Flusher,
        accounts: dict[str, Account],
        info_fields: Callable[[], dict[str, Any]],
        on_urls_changed: Callable[[], None],
        trace: bool = False,
    ) -> None:
        self.options = options
        self.settings = settings
        self.flusher = flusher
        self.trace = trace
        # The server's account table (shared): routed messages are delivered into it.
        self.accounts = accounts
        self._info_fields = info_fields
        self._on_urls_changed = on_urls_changed
        self.local = LocalInterest(self._emit)
        self.remote = RemoteInterest()
        # Installed routes: by id (for the forwarders) and by peer server_id.
        self.routes: dict[int, RouteConnection] = {}
        self.by_server: dict[str, RouteConnection] = {}
        # Every connection, installed or still in its handshake.
        self.conns: dict[int, RouteConnection] = {}
        self._rid = 0
        self._forwarders: dict[str, Forwarder] = {}
        self.mover: Mover | None = None
        # Told of every installed route that closes (cluster/handoff.py ends its moves).
        self.route_gone: Callable[[RouteConnection], None] | None = None
        # Accounts by the name routes carry (bytes), for routed messages.
        self.wire_accounts: dict[bytes, Account] = {}
        self._tcp: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._dialing: set[str] = set()  # host:port of routes being dialed
        self.configured: set[int] = set()  # ids of connections to configured routes
        self._closed_waiters: dict[int, asyncio.Future[None]] = {}
        self._changed = asyncio.Event()
        self.port = 0
        self.route_url = ""  # nats-route://host:port/ we gossip for ourselves
        # (host, port) of our route INFO: the listener's, or the advertised address.
        self._advertised: tuple[str, int] = ("0.0.0.0", 0)
        self.stopped = False
        # configured route URLs that turned out to be this server (expected_size)
        self.self_urls: set[str] = set()

    # ------------------------------------------------------------------ members
    def peer_names(self, jetstream: bool = False) -> list[str]:
        """The server names of the peers our installed routes reach (with ``jetstream``,
        only those whose route INFO says they run JetStream, as nats-server's)."""
        return [
            r.remote_name
            for r in self.routes.values()
            if r.remote_name and (not jetstream or r.peer_info.get("jetstream") is True)
        ]

    def interested_servers(self, account: str, subject: bytes) -> list[str]:
        """The names of the peers whose clients subscribe to ``subject`` (for a request's
        reply subject: the server the requester is on)."""
        plan = self.remote.match(account.encode(), subject)
        if plan is None:
            return []
        rids = list(plan.routes) + [r for g in plan.groups for r in g.routes]
        names = {self.routes[r].remote_name for r in rids if r in self.routes}
        return sorted(n for n in names if n)

    def expected_size(self) -> int:
        """How many servers the configured routes name, this one included: one per
        distinct URL, plus this server unless one of them turned out to be itself. Until
        that is known the count is one too high, never too low, so a server never forms
        a group with fewer servers than its configuration names."""
        urls = {_url_of(u) for u in self.options.routes}
        return len(urls) + (0 if urls & self.self_urls else 1)

    # ------------------------------------------------------------------ RouteHost
    @property
    def scheduler(self) -> Scheduler:
        return asyncio.get_running_loop()

    def route_info_fields(self, route: RouteConnection) -> dict[str, Any]:
        info = self._info_fields()
        info["host"], info["port"] = self._advertised
        info["ip"] = self.route_url
        return info

    def route_up(self, route: RouteConnection, info: dict[str, Any]) -> bool:
        sid = route.remote_id
        old = self.by_server.get(sid)
        if old is not None and old is not route:
            if _key(old, self.settings.server_id) <= _key(route, self.settings.server_id):
                return False
            # The new connection is the one both ends keep: the old one goes.
            self._uninstall(old)
            old.close(RouteCloseReason.DUPLICATE_ROUTE)
        self.routes[route.rid] = route
        self.by_server[sid] = route
        log.info(
            "%s:%d - rid:%d - Route connection created (%s)",
            route.ip,
            route.port,
            route.rid,
            route.remote_name or sid,
        )
        # The whole interest table, then every later delta through _emit.
        for acct, subject, queue, weight in self.local.snapshot():
            route.send_sub(acct, subject, queue, weight)
        if not route.solicited:
            self._gossip(route, info)
        if len(self.routes) == 1:
            self._set_forwarders(True)
        self._changed.set()
        self._on_urls_changed()
        return True

    def _url_of_peer(self, route: RouteConnection, info: dict[str, Any]) -> str:
        ip = info.get("ip")
        if isinstance(ip, str) and ip:
            return ip
        host = info.get("host")
        if not isinstance(host, str) or host in ("", "0.0.0.0", "::"):
            host = route.ip
        return f"nats-route://{host}:{info.get('port', 0)}/"

    def _gossip(self, route: RouteConnection, info: dict[str, Any]) -> None:
        """Tell our other peers about a server that dialed us (nats-server's
        forwardNewRouteInfoToKnownServers); they dial it."""
        news = {
            "server_id": route.remote_id,
            "server_name": route.remote_name,
            "cluster": self.settings.cluster,
            "ip": self._url_of_peer(route, info),
        }
        frame = encode_route_info(news)
        for other in self.routes.values():
            if other is not route:
                other.send(frame)

    def route_info(self, route: RouteConnection, info: dict[str, Any]) -> None:
        sid = info.get("server_id")
        if not isinstance(sid, str) or not sid:
            return
        if sid == route.remote_id:
            # The peer's own update: connect_urls, lame duck mode.
            route.peer_info.update(info)
            self._on_urls_changed()
            return
        if sid == self.settings.server_id or sid in self.by_server:
            return
        ip = info.get("ip")
        if isinstance(ip, str) and ip.startswith("nats-route://"):
            self.dial_implicit(ip)

    def adopt_cluster_name(self, route: RouteConnection, name: str, final: bool) -> None:
        st = self.settings
        st.cluster = name
        if final:
            st.cluster_dynamic = False
        log.info("Cluster name updated to %s", name)
        # nats-server's removeAllRoutesExcept: installed routes to other peers close; their
        # dial loops (ours or theirs) reconnect under the name we now carry.
        for other in list(self.routes.values()):
            if other.remote_id != route.remote_id:
                other.close(RouteCloseReason.CLUSTER_NAME_CONFLICT)
        self._on_urls_changed()

    def route_sub(
        self,
        route: RouteConnection,
        account: bytes,
        subject: bytes,
        queue: bytes | None,
        weight: int,
    ) -> None:
        try:
            self.remote.add(route.rid, account, subject, queue, weight)
        except InterestRefused as e:
            log.error("rid:%d - refused interest: %s", route.rid, e)
            route.send(encode_route_err(str(e)))
            route.close(RouteCloseReason.PROTOCOL)

    def route_unsub(
        self, route: RouteConnection, account: bytes, subject: bytes, queue: bytes | None
    ) -> None:
        self.remote.remove(route.rid, account, subject, queue)

    def route_closed(self, route: RouteConnection, reason: str) -> None:
        self.conns.pop(route.rid, None)
        self.configured.discard(route.rid)
        if self.routes.get(route.rid) is route:
            self._uninstall(route)
            if self.route_gone is not None:
                self.route_gone(route)
            log.info(
                "%s:%d - rid:%d - Route connection closed: %s",
                route.ip,
                route.port,
                route.rid,
                reason,
            )
            self._on_urls_changed()
        waiter = self._closed_waiters.pop(route.rid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _uninstall(self, route: RouteConnection) -> None:
        self.routes.pop(route.rid, None)
        if self.by_server.get(route.remote_id) is route:
            del self.by_server[route.remote_id]
        self.remote.remove_route(route.rid)
        if not self.routes:
            self._set_forwarders(False)
        self._changed.set()

    def log_debug(self, msg: str) -> None:
        log.debug("%s", msg)

    def log_error(self, msg: str) -> None:
        log.error("%s", msg)

    def log_trace(self, msg: str) -> None:
        log.log(5, "%s", msg)

    # ------------------------------------------------------------------ interest
    def attach(self, account: Account) -> None:
        """Follow an account's subscriptions (every account, as it is created)."""
        self.local.attach(account.name, account.sublist)
        self.wire_accounts[account.name.encode()] = account
        if self.routes:
            account.sublist.forward = self._forwarder(account)

    def detach(self, name: str) -> None:
        """An account is gone: its interest is withdrawn from the peers."""
        self.local.detach(name)
        self.wire_accounts.pop(name.encode(), None)
        self._forwarders.pop(name, None)

    def _forwarder(self, account: Account) -> Forwarder:
        f = self._forwarders.get(account.name)
        if f is None:
            f = Forwarder(account.name.encode(), self.remote, self.routes, self.mover)
            self._forwarders[account.name] = f
        return f

    def set_mover(self, mover: Mover | None) -> None:
        """Offer connections that publish only to one peer to ``mover`` (--workers)."""
        self.mover = mover
        for f in self._forwarders.values():
            f.mover = mover

    def _set_forwarders(self, on: bool) -> None:
        for acct in self.accounts.values():
            acct.sublist.forward = self._forwarder(acct) if on else None

    def _emit(self, account: bytes, subject: bytes, queue: bytes | None, weight: int) -> None:
        if weight:
            for r in self.routes.values():
                r.send_sub(account, subject, queue, weight)
        else:
            for r in self.routes.values():
                r.send_unsub(account, subject, queue)

    # ------------------------------------------------------------------ clients
    def peer_client_urls(self) -> list[str]:
        """The client URLs our peers advertise, in route order, without duplicates."""
        out: dict[str, None] = {}
        for r in self.routes.values():
            if r.peer_info.get("ldm"):
                continue  # in lame duck mode: clients must not move there
            urls = r.peer_info.get("connect_urls")
            if isinstance(urls, list):
                for u in urls:
                    if isinstance(u, str):
                        out[u] = None
        return list(out)

    def lame_duck(self) -> None:
        """Tell every peer we are in lame duck mode (nats-server's sendLDMToRoutes): they drop
        our client URLs from what they advertise."""
        frame = encode_route_info(
            {"server_id": self.settings.server_id, "cluster": self.settings.cluster, "ldm": True}
        )
        for r in self.routes.values():
            r.send(frame)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        c = self.options
        port = c.port if c.port > 0 else 0
        self._tcp = await loop.create_server(
            cast("Callable[[], asyncio.Protocol]", lambda: self._new_conn(solicited=False)),
            host=c.host or None,
            port=port,
            reuse_address=True,
        )
        self.port = int(self._tcp.sockets[0].getsockname()[1])
        adv = c.advertise
        self._advertised = (c.host or "0.0.0.0", self.port)
        if adv:
            self.route_url = adv if "://" in adv else f"nats-route://{adv}/"
            # nats-server puts the advertised address in the route INFO's host and port
            # too: a peer redials a route it accepted there, not at our listener.
            hp = _parse_route_url(self.route_url)
            if hp is not None and hp.host and hp.port:
                self._advertised = (hp.host, hp.port)
        else:
            host = c.host if c.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            self.route_url = f"nats-route://{host}:{self.port}/"
        log.info("Cluster name is %s", self.settings.cluster)
        if self.settings.cluster_dynamic:
            log.warning("Cluster name was dynamically generated, consider setting one")
        log.info("Listening for route connections on %s:%d", c.host or "0.0.0.0", self.port)
        for u in c.routes:
            if not u.host or not u.port:
                log.error("Route URL %s has no host or port, ignored", u.raw)
                continue
            self._spawn(self._dial_loop(u, configured=True))

    def _new_conn(
        self, solicited: bool, credentials: tuple[str, str] | None = None
    ) -> RouteConnection:
        self._rid += 1
        r = RouteConnection(self, self._rid, solicited=solicited, credentials=credentials)
        self.conns[r.rid] = r
        return r

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    def dial_implicit(self, url: str) -> None:
        """A route learned by gossip."""
        if self.stopped:
            return
        with contextlib.suppress(GoURLError):
            u = _parse_route_url(url)
            if u is not None and _url_of(u) not in self._dialing:
                self._spawn(self._dial_loop(u, configured=False))

    async def _dial_loop(self, u: RouteURL, configured: bool) -> None:
        """Dial ``u`` and keep it up: for ever if configured, else ``connect_retries``
        failed attempts in a row."""
        key = _url_of(u)
        port = u.port or 0
        self._dialing.add(key)
        loop = asyncio.get_running_loop()
        delay = _FIRST_DELAY
        failures = 0
        user = u.user if u.user is not None else self.options.username
        pwd = u.password if u.password is not None else self.options.password
        creds = (user, pwd) if user else None
        try:
            while not self.stopped:
                route: RouteConnection | None = None
                try:
                    # RouteConnection implements asyncio.Protocol by duck typing.
                    factory = cast(
                        "Callable[[], asyncio.Protocol]", lambda: self._new_conn(True, creds)
                    )
                    _, proto = await asyncio.wait_for(
                        loop.create_connection(factory, u.host, port), _DIAL_TIMEOUT
                    )
                    route = cast(RouteConnection, proto)
                    if configured:
                        self.configured.add(route.rid)
                except (OSError, TimeoutError) as e:
                    failures += 1
                    log.debug("Error trying to connect to route %s: %s", key, e)
                    if not configured and failures > self.options.connect_retries:
                        return
                    await asyncio.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, _MAX_DELAY)
                    continue
                assert route is not None
                waiter = loop.create_future()
                self._closed_waiters[route.rid] = waiter
                if route.closed:
                    self._closed_waiters.pop(route.rid, None)
                else:
                    await waiter
                if self.stopped:
                    return
                if route.close_reason == RouteCloseReason.DUPLICATE_ROUTE and not route.remote_id:
                    log.debug("Detected route to self, ignoring %s", key)
                    self.self_urls.add(key)
                    return
                was_up = bool(route.remote_id) and route.remote_id in self.by_server
                if was_up:
                    # Another connection to that server won; dial again only once it is gone.
                    sid = route.remote_id
                    while not self.stopped and sid in self.by_server:
                        self._changed.clear()
                        await self._changed.wait()
                    if not configured:
                        return
                if route.remote_id:
                    failures = 0
                    delay = _FIRST_DELAY
                else:
                    failures += 1
                    if not configured and failures > self.options.connect_retries:
                        return
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, _MAX_DELAY)
        finally:
            self._dialing.discard(key)

    async def stop(self) -> None:
        self.stopped = True
        self._changed.set()
        if self._tcp is not None:
            self._tcp.close()
        for t in list(self._tasks):
            t.cancel()
        for r in list(self.conns.values()):
            r.close(RouteCloseReason.SERVER_SHUTDOWN)
        self.local.detach_all()
        self._set_forwarders(False)
        if self._tcp is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp.wait_closed(), 2.0)


def _key(route: RouteConnection, our_id: str) -> tuple[str, int]:
    """Which of two connections to one peer both ends keep: the smaller key wins."""
    if route.solicited:
        t = route.transport
        sock = t.get_extra_info("sockname") if t is not None else None
        port = int(sock[1]) if isinstance(sock, tuple) else 0
        return (our_id, port)
    return (route.remote_id, route.port)


def _parse_route_url(url: str) -> RouteURL | None:
    u = parse_go_url(url)
    return u if u.host and u.port else None
