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
* **Duplicates:** both sides may dial each other, and exactly one connection must survive,
  the same one at both ends. Between natsd servers (a peer whose route INFO says natsd) it
  is the one dialed by the server with the smaller server_id (then the smaller dialing
  port): both ends compute the same answer whatever order they see the connections in.
  With any other peer (nats-server) the route installed first stays and the newer one
  closes, nats-server's own rule; should the two ends have kept opposite connections,
  both close and both redial, as between two nats-servers. Every close is logged with its
  reason (``Duplicate Route``), at both ends.
* **Gossip:** a server that accepts a route forwards the new peer's INFO (with its route URL
  in ``ip``) to its other peers, which dial it: a seed config becomes a full mesh.
* **Reconnect:** one ``RouteDialer`` per URL (cluster/dialer.py): a configured route is
  redialed for ever with a capped back-off, one learned by gossip ``connect_retries`` times;
  a dialer whose connection lost a duplicate resolution waits until that peer is gone.
* **Clients:** every peer's ``connect_urls`` (its client URLs) are gathered for our clients'
  INFO; ``on_urls_changed`` tells the server to send an async INFO (unless no_advertise).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from natsd.cluster.dialer import RouteDialer
from natsd.cluster.forward import Forwarder, Mover
from natsd.config.cluster import GoURLError, parse_go_url
from natsd.config.options import ClusterOptions, RouteURL
from natsd.connection.flusher import Flusher
from natsd.connection.route import RouteCloseReason, RouteConnection, RouteSettings
from natsd.connection.route_net import AsyncioRouteNet, Listener, RouteNet
from natsd.connection.tls import RouteTls
from natsd.core.ids import Nuid
from natsd.core.scheduler import Scheduler
from natsd.protocol.route_encode import encode_route_err, encode_route_info
from natsd.router.account import Account
from natsd.router.interest import InterestRefused, LocalInterest, RemoteInterest
from natsd.security.tls import client_context, server_context

__all__ = ["Mesh", "route_settings"]

log = logging.getLogger("natsd")


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
        tls=_route_tls(c),
    )


def _route_tls(c: ClusterOptions) -> RouteTls | None:
    """cluster { tls {} }: the contexts of both ends, made once."""
    t = c.tls
    if t is None:
        return None
    return RouteTls(
        server_context=server_context(t),
        client_context=client_context(t),
        timeout=t.timeout,
        verify=t.verify,
        pinned_certs=t.pinned_certs,
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
        *,
        net: RouteNet | None = None,
        scheduler: Scheduler | None = None,
        rng: random.Random | None = None,
    ) -> None:
        # The network, timers and randomness: the event loop's unless a test drives them.
        self.net: RouteNet = net if net is not None else AsyncioRouteNet()
        self._scheduler = scheduler
        self.rng = rng if rng is not None else random.Random()
        self.options = options
        self.settings = settings
        self.flusher = flusher
        self.trace = trace
        # The server's account table (shared): routed messages are delivered into it.
        self.accounts = accounts
        self._info_fields = info_fields
        # the server's trace_server (message traces from peers' messages)
        self.trace_server_of: Callable[[], dict[str, Any]] = dict
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
        self._listener: Listener | None = None
        # One dialer per URL we dial (host:port), and the dialer of each of its connections.
        self.dialers: dict[str, RouteDialer] = {}
        self._dialer_of: dict[int, RouteDialer] = {}
        self.configured: set[int] = set()  # ids of connections to configured routes
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
        if self._scheduler is None:
            # bound on first use: the mesh lives on the loop that runs the server
            self._scheduler = asyncio.get_running_loop()
        return self._scheduler

    def route_info_fields(self, route: RouteConnection) -> dict[str, Any]:
        info = self._info_fields()
        info["host"], info["port"] = self._advertised
        info["ip"] = self.route_url
        return info

    def route_up(self, route: RouteConnection, info: dict[str, Any]) -> bool:
        sid = route.remote_id
        old = self.by_server.get(sid)
        if old is not None and old is not route:
            if not self._keeps_new(old, route):
                return False
            # The new connection is the one both ends keep: the old one goes, once the
            # new one is in (its dialer then sees the peer reached, and waits).
            self._uninstall(old)
        else:
            old = None
        self.routes[route.rid] = route
        self.by_server[sid] = route
        log.info(
            "%s:%d - rid:%d - Route connection created (%s)",
            route.ip,
            route.port,
            route.rid,
            route.remote_name or sid,
        )
        if old is not None:
            old.close(RouteCloseReason.DUPLICATE_ROUTE)
        # The whole interest table, then every later delta through _emit.
        for acct, subject, queue, weight in self.local.snapshot():
            route.send_sub(acct, subject, queue, weight)
        if not route.solicited:
            self._gossip(route, info)
        if len(self.routes) == 1:
            self._set_forwarders(True)
        self._on_urls_changed()
        return True

    def _keeps_new(self, old: RouteConnection, new: RouteConnection) -> bool:
        """Of two connections to one peer, is ``new`` the one to keep? Between natsd
        servers both ends compute the same answer (see ``_key``); a nats-server peer keeps
        the route it installed first, and so do we with it."""
        if not (_is_natsd(old) and _is_natsd(new)):
            return False
        our_id = self.settings.server_id
        return _key(new, our_id) < _key(old, our_id)

    def route_to_self(self, route: RouteConnection) -> None:
        """``route`` turned out to be a connection to this server. Its dialer (ours, at one
        end or the other) stops: when ``route`` is the accepted end, the dialing end is the
        connection of ours whose local port is its peer's port."""
        dialer = self._dialer_of.get(route.rid)
        if dialer is None and not route.solicited:
            for c in self.conns.values():
                if c.solicited and c.rid in self._dialer_of and c.local_port == route.port:
                    dialer = self._dialer_of[c.rid]
                    break
        if dialer is not None:
            dialer.to_self()

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
        # Every route connection's close is logged, installed or not, as nats-server's
        # markConnAsClosed does (a duplicate's too: both ends say why it went); a dial that
        # never connected is not a connection (uvloop makes its protocol beforehand).
        if route.transport is None:
            pass
        elif route.remote_name:
            log.info(
                "%s:%d - rid:%d - Router connection closed: %s - Remote: %s",
                route.ip,
                route.port,
                route.rid,
                reason,
                route.remote_name,
            )
        else:
            log.info(
                "%s:%d - rid:%d - Router connection closed: %s",
                route.ip,
                route.port,
                route.rid,
                reason,
            )
        gone = ""
        if self.routes.get(route.rid) is route:
            self._uninstall(route)
            if self.route_gone is not None:
                self.route_gone(route)
            self._on_urls_changed()
            if route.remote_id not in self.by_server:
                gone = route.remote_id
        dialer = self._dialer_of.pop(route.rid, None)
        if dialer is not None:
            dialer.route_ended(route)
        if gone:
            # dialers that lost to this route dial again
            for d in list(self.dialers.values()):
                d.peer_gone(gone)

    def _uninstall(self, route: RouteConnection) -> None:
        self.routes.pop(route.rid, None)
        if self.by_server.get(route.remote_id) is route:
            del self.by_server[route.remote_id]
        self.remote.remove_route(route.rid)
        if not self.routes:
            self._set_forwarders(False)

    def trace_server(self) -> dict[str, Any]:
        """The ``server`` block of a message trace event (the server sets the source)."""
        return self.trace_server_of()

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
        c = self.options
        port = c.port if c.port > 0 else 0
        self._listener, self.port = await self.net.listen(
            c.host, port, lambda: self._new_conn(solicited=False)
        )
        self.begin()

    def begin(self) -> None:
        """After the listener is up: our addresses, and a dialer for every configured
        route."""
        c = self.options
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
            self._dial(u, configured=True)

    def _new_conn(
        self,
        solicited: bool,
        credentials: tuple[str, str] | None = None,
        tls_hostname: str = "",
    ) -> RouteConnection:
        self._rid += 1
        r = RouteConnection(
            self,
            self._rid,
            solicited=solicited,
            credentials=credentials,
            tls_hostname=tls_hostname,
        )
        self.conns[r.rid] = r
        return r

    # ------------------------------------------------------------------ DialerHost
    def new_solicited(
        self, dialer: RouteDialer, credentials: tuple[str, str] | None
    ) -> RouteConnection:
        r = self._new_conn(True, credentials, dialer.url.host)
        self._dialer_of[r.rid] = dialer
        if dialer.configured:
            self.configured.add(r.rid)
        dialer.made(r)
        return r

    def dialer_done(self, dialer: RouteDialer) -> None:
        if dialer.is_self:
            self.self_urls.add(dialer.key)  # (expected_size counts it)
        if self.dialers.get(dialer.key) is dialer:
            del self.dialers[dialer.key]

    def reached(self, key: str) -> str:
        for r in self.routes.values():
            u = _parse_route_url(self._url_of_peer(r, r.peer_info))
            if u is not None and _url_of(u) == key:
                return r.remote_id
        return ""

    def dial_implicit(self, url: str) -> None:
        """A route learned by gossip."""
        if self.stopped:
            return
        with contextlib.suppress(GoURLError):
            u = _parse_route_url(url)
            if u is not None:
                self._dial(u, configured=False)

    def _dial(self, u: RouteURL, configured: bool) -> None:
        key = _url_of(u)
        if key in self.dialers or key in self.self_urls:
            return
        user = u.user if u.user is not None else self.options.username
        pwd = u.password if u.password is not None else self.options.password
        d = RouteDialer(
            self,
            u,
            configured=configured,
            retries=self.options.connect_retries,
            credentials=(user, pwd) if user else None,
        )
        self.dialers[key] = d
        d.start()

    async def stop(self) -> None:
        self.stopped = True
        if self._listener is not None:
            self._listener.close()
        for d in list(self.dialers.values()):
            d.stop()
        self.dialers.clear()
        for r in list(self.conns.values()):
            r.close(RouteCloseReason.SERVER_SHUTDOWN)
        self.local.detach_all()
        self._set_forwarders(False)
        await self.net.wait_closed(2.0)


def _is_natsd(route: RouteConnection) -> bool:
    """The peer is a natsd server (its route INFO's ``go`` says so): it resolves duplicates
    by ``_key`` too."""
    go = route.peer_info.get("go")
    return isinstance(go, str) and go.startswith("natsd")


def _key(route: RouteConnection, our_id: str) -> tuple[str, int]:
    """Which of two connections to one peer both ends keep: the smaller key wins."""
    if route.solicited:
        return (our_id, route.local_port)
    return (route.remote_id, route.port)


def _parse_route_url(url: str) -> RouteURL | None:
    u = parse_go_url(url)
    return u if u.host and u.port else None
