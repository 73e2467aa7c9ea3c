"""Server options: one flat dataclass filled from defaults, a config file and flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from natsd.security.auth import User
from natsd.security.tls import TlsOptions

__all__ = [
    "JS_ACCOUNT_LIMIT_KEYS",
    "AccountConfig",
    "ClusterOptions",
    "CompressionOptions",
    "ExportConfig",
    "ImportConfig",
    "JetStreamConfig",
    "RouteURL",
    "ServerOptions",
]

# The keys of an account's ``jetstream {}`` block (nats-server ``parseJetStreamForAccount``,
# plus the JSON names of ``JetStreamAccountLimits`` and three older natsd spellings) -> the
# JSON name account info reports. The config reader and the engine both use this one table.
JS_ACCOUNT_LIMIT_KEYS: dict[str, str] = {
    **dict.fromkeys(("max_memory", "max_mem", "mem", "memory", "max_memory_store"), "max_memory"),
    **dict.fromkeys(
        ("max_storage", "max_store", "max_file", "max_disk", "store", "disk", "max_file_store"),
        "max_storage",
    ),
    **dict.fromkeys(("max_streams", "streams"), "max_streams"),
    **dict.fromkeys(("max_consumers", "consumers"), "max_consumers"),
    "max_ack_pending": "max_ack_pending",
    **dict.fromkeys(("memory_max_stream_bytes", "mem_max_stream_bytes"), "memory_max_stream_bytes"),
    **dict.fromkeys(
        ("storage_max_stream_bytes", "store_max_stream_bytes", "disk_max_stream_bytes"),
        "storage_max_stream_bytes",
    ),
    **dict.fromkeys(("max_bytes_required", "max_stream_bytes", "max_bytes"), "max_bytes_required"),
}


@dataclass
class JetStreamConfig:
    store_dir: str = ""
    max_memory: int = -1
    max_file: int = -1
    domain: str = ""
    sync_interval: float | None = None  # seconds; None = fsync before every ack (default)
    sync_always: bool = False


@dataclass(frozen=True)
class ExportConfig:
    """One entry of an account's ``exports``: a stream or a service others may import."""

    kind: str  # "stream" | "service"
    subject: str
    # None: public; otherwise the accounts allowed to import it
    accounts: tuple[str, ...] | None = None
    # services: "Singleton" | "Streamed" | "Chunked" (nats-server's names)
    response_type: str = "Singleton"
    # services: seconds a response mapping lives without a response; 0 = nats-server's 2m
    response_threshold: float = 0.0


@dataclass(frozen=True)
class ImportConfig:
    """One entry of an account's ``imports``: ``subject`` of ``account``'s export, seen here
    as ``to`` (a service's local subject; a stream's mapped subject) or under ``prefix``."""

    kind: str  # "stream" | "service"
    account: str
    subject: str
    to: str = ""
    prefix: str = ""
    share: bool = False

    @property
    def local_subject(self) -> str:
        """The subject the importing account sees: ``to``, or ``<prefix>.<subject>``, or the
        export's own."""
        if self.prefix:
            return self.prefix.rstrip(".") + "." + self.subject
        return self.to or self.subject


@dataclass
class AccountConfig:
    name: str
    # None: no JetStream. Otherwise the account's limits by JS_ACCOUNT_LIMIT_KEYS key (the
    # config reader writes the JSON names); a missing key is unlimited.
    jetstream: dict[str, Any] | None = None
    # the account's public nkey ("A..."); nats-server only records it outside operator mode
    nkey: str = ""
    exports: list[ExportConfig] = field(default_factory=list)
    imports: list[ImportConfig] = field(default_factory=list)


@dataclass(frozen=True)
class RouteURL:
    """A route to solicit (``nats-route://user:pass@host:port``), split as Go's url.Parse
    splits it. ``raw`` is the text as written, for messages (never logged with the password)."""

    raw: str
    scheme: str = ""
    host: str = ""
    port: int | None = None
    user: str | None = None
    password: str | None = None


@dataclass
class CompressionOptions:
    """``cluster { compression }``: the mode as written until validation normalises it
    (nats-server's ``validateAndNormalizeCompressionOption``), RTT thresholds in seconds."""

    mode: str = ""
    rtt_thresholds: list[float] = field(default_factory=list)


@dataclass
class ClusterOptions:
    """``cluster {}`` and the ``--cluster``/``--routes`` flags (nats-server's ClusterOpts plus
    Options.Routes). ``origin`` says where the cluster was asked for: ``"file:line: "`` of the
    ``cluster`` key, ``"--cluster"`` or ``"--routes"``; empty means no cluster."""

    origin: str = ""
    name: str = ""
    host: str = ""
    port: int = 0  # 0: no route listener; -1: a random port
    advertise: str = ""
    no_advertise: bool = False
    connect_retries: int = 0
    routes: list[RouteURL] = field(default_factory=list)
    username: str = ""
    password: str = ""
    auth_timeout: float = 0.0  # seconds; 0 = nats-server's default for routes
    pool_size: int = 0  # 0 = nats-server's default (3); -1 = no pool
    compression: CompressionOptions = field(default_factory=CompressionOptions)
    # cluster { tls {} }: every route is TLS, both ways; None: plaintext routes
    tls: TlsOptions | None = None


@dataclass
class ServerOptions:
    host: str = "0.0.0.0"
    port: int = 4222
    server_name: str = ""
    # placement tags of a JetStream cluster member (``placement.tags`` match them)
    server_tags: list[str] = field(default_factory=list)
    system_account: str = ""  # "" = natsd's own $SYS
    http_host: str = "0.0.0.0"
    http_port: int = 0  # 0 = monitoring off; -1 = random port
    https_port: int = 0  # monitoring over TLS with the tls {} certificates instead
    max_payload: int = 1024 * 1024
    max_control_line: int = 4096
    max_pending: int = 64 * 1024 * 1024
    max_connections: int = 64 * 1024
    max_subs: int = 0
    ping_interval: float = 120.0
    ping_max: int = 2
    auth_timeout: float = 2.0
    # True once a config file or flag set auth_timeout (else TLS makes it tls timeout + 1)
    auth_timeout_set: bool = False
    # the client port's ``tls {}``; None: plaintext
    tls: TlsOptions | None = None
    allow_non_tls: bool = False
    write_deadline: float = 10.0
    # auth
    users: list[User] = field(default_factory=list)
    token: str | None = None
    no_auth_user: str | None = None
    accounts: dict[str, AccountConfig] = field(default_factory=dict)
    # jetstream
    jetstream: bool = False
    js: JetStreamConfig = field(default_factory=JetStreamConfig)
    # clustering (config/cluster.py reads and checks it; cluster/mesh.py runs it)
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    # logging
    debug: bool = False
    trace: bool = False
    log_file: str = ""
    pid_file: str = ""
    config_file: str = ""
    lame_duck_duration: float = 0.0
    lame_duck_grace_period: float = 10.0  # nats-server's default
    # multi-core (natsd only): ``workers`` > 1 runs a supervisor and that many server
    # processes (natsd/workers.py); ``reuse_port`` lets those processes share the client port.
    workers: int = 1
    reuse_port: bool = False
