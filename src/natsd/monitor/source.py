"""What the monitoring endpoints read: ``MonitorSource``, implemented by ``natsd.server.Server``.

The monitor only reads. It sees the server through this Protocol and JetStream through plain
figures (``AccountUsage``, ``StreamUsage``) that the server collects on request, so
``monitor/`` imports neither the server nor the JetStream engine, and a test can serve the
endpoints from a stub. Which endpoint reads what:

============  ==============================================================================
/varz         server_id, server_name, options (limits, hosts, ``js.store_dir``), port,
              monitor_port, start_time, config_time, clients (count), total_connections,
              slow_consumers, stale_connections, auth_required, num_subscriptions(), totals(),
              jetstream_enabled, jetstream_usage(streams=False) (summed),
              cluster_usage(subs=False) (the ``cluster`` block, ``routes``)
/routez       server_id, server_name, cluster_usage(subs=...)
/connz        server_id, clients (``MonitoredClient`` fields)
/subsz        server_id, accounts (their sublists)
/accountz     server_id, config_time, accounts, jetstream_usage(streams=False) (names)
/jsz          server_id, options.js, jetstream_usage(streams=True)
/healthz      ready
/raftz        raftz() (the Raft groups), system_account_name
/metrics      what /varz reads, uptime(), accounts (clients per account),
              jetstream_usage(streams=True)
============  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from natsd.config.options import ServerOptions
from natsd.router.account import Account
from natsd.router.subscription import Subscription

__all__ = ["AccountUsage", "MonitorSource", "MonitoredClient", "ReadyFlag", "StreamUsage"]


@dataclass(frozen=True, slots=True)
class StreamUsage:
    """One stream's figures at the moment of the request."""

    name: str
    created_ns: int
    messages: int
    bytes: int
    first_seq: int
    last_seq: int
    consumers: int
    # The stream info ``state`` object, built only when /jsz?streams=1 asks for it.
    state_json: Callable[[], dict[str, Any]]
    # A mirror's STREAM.INFO ``mirror`` block, a sourcing stream's ``sources`` blocks
    # (on the server running the copy: an R1 stream's, a replicated stream's leader)
    mirror: dict[str, Any] | None = None
    sources: list[dict[str, Any]] | None = None
    # The CONSUMER.INFO of each consumer this server runs (an R1 stream's, a replicated
    # stream's leader's), built only when /metrics asks for them.
    consumer_infos: Callable[[], list[dict[str, Any]]] | None = None
    # A replicated stream's STREAM.INFO ``cluster.replicas`` (on its leader: each follower's
    # ``lag``, ``current``, ``active``), None elsewhere.
    replicas: Callable[[], list[dict[str, Any]]] | None = None
    # The /jsz stream detail's ``cluster`` block (nats-server's ClusterInfo: a single
    # server's names itself as leader) and ``config`` (with ``config=true``).
    cluster: Callable[[], dict[str, Any]] | None = None
    config: Callable[[], dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class AccountUsage:
    """One JetStream-enabled account's figures (nats-server's ``JetStreamStats``)."""

    name: str
    memory: int
    storage: int
    reserved_memory: int
    reserved_storage: int
    api_total: int
    api_errors: int
    stream_count: int
    # Each stream's figures when asked for (``streams=True``), else empty.
    streams: list[StreamUsage]


@dataclass
class RouteUsage:
    """One route as /routez shows it (nats-server's RouteInfo)."""

    rid: int
    remote_id: str
    remote_name: str
    did_solicit: bool
    is_configured: bool
    ip: str
    port: int
    start: float
    last_activity: float
    rtt: float
    pending_size: int
    in_msgs: int
    out_msgs: int
    in_bytes: int
    out_bytes: int
    subscriptions: int
    subscriptions_list: list[str]


@dataclass
class ClusterUsage:
    """The /varz ``cluster`` block and the routes behind /routez."""

    name: str
    addr: str
    cluster_port: int
    auth_timeout: float
    urls: list[str]
    routes: list[RouteUsage]


class MonitoredClient(Protocol):
    """The fields of a client connection that /connz reports."""

    @property
    def cid(self) -> int: ...
    @property
    def account(self) -> Account: ...
    @property
    def subs(self) -> Mapping[bytes, Subscription]: ...
    @property
    def ip(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def start(self) -> float: ...
    @property
    def last_activity(self) -> float: ...
    @property
    def rtt(self) -> float: ...
    @property
    def pending_bytes(self) -> int: ...
    @property
    def msgs_in(self) -> int: ...
    @property
    def msgs_out(self) -> int: ...
    @property
    def bytes_in(self) -> int: ...
    @property
    def bytes_out(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def lang(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def user(self) -> str: ...
    def tls_report(self, peer_certs: bool) -> dict[str, Any]: ...


class ReadyFlag(Protocol):
    """Set once the server accepts clients (an ``asyncio.Event``); /healthz only tests it."""

    def is_set(self) -> bool: ...


class MonitorSource(Protocol):
    """The server as the monitoring endpoints read it (the table above says which reads what)."""

    @property
    def server_id(self) -> str: ...
    @property
    def server_name(self) -> str: ...
    @property
    def options(self) -> ServerOptions: ...
    @property
    def port(self) -> int: ...
    @property
    def monitor_port(self) -> int: ...
    @property
    def start_time(self) -> float: ...
    @property
    def config_time(self) -> float: ...
    @property
    def total_connections(self) -> int: ...
    @property
    def slow_consumers(self) -> int: ...
    @property
    def stale_connections(self) -> int: ...
    @property
    def auth_required(self) -> bool: ...
    @property
    def jetstream_enabled(self) -> bool: ...
    @property
    def ready(self) -> ReadyFlag: ...
    @property
    def clients(self) -> Mapping[int, MonitoredClient]: ...
    @property
    def accounts(self) -> Mapping[str, Account]: ...

    def uptime(self) -> float:
        """Seconds since the server started."""
        ...

    def num_subscriptions(self) -> int:
        """Subscriptions over all accounts."""
        ...

    def totals(self) -> tuple[int, int, int, int]:
        """Messages in, bytes in, messages out, bytes out, over all accounts."""
        ...

    def raftz(self) -> dict[str, dict[str, dict[str, Any]]] | None:
        """This server's Raft groups as /raftz shows them, by account and group name (None:
        the server runs no Raft group)."""
        ...

    def cluster_usage(self, *, subs: bool) -> ClusterUsage | None:
        """The cluster and its routes (each route's subscriptions when ``subs``); None
        without a cluster."""
        ...

    def jetstream_usage(self, *, streams: bool) -> list[AccountUsage] | None:
        """Each JetStream-enabled account's figures (with each stream's when ``streams``),
        in the engine's order; None when JetStream is off."""
        ...

    @property
    def system_account_name(self) -> str:
        """The system account: ``system_account`` when configured, else $SYS."""
        ...

    def jetstream_meta(self) -> dict[str, Any] | None:
        """The meta group as this server sees it (/jsz ``meta_cluster``); None unless
        JetStream runs on a cluster."""
        ...

    def jetstream_health(self) -> str:
        """Why JetStream is not current on this server ("" when it is, or is off)."""
        ...
