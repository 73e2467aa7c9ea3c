"""Which configuration keys natsd honours, ignores with a warning, or refuses.

natsd reads nats-server configuration files, and must never accept a key and then not do
what it says: a dropped ``tls {}`` means plaintext, a dropped ``cluster {}`` an isolated node,
a dropped ``jetstream { cipher }`` unencrypted data. So every map natsd reads has a
:class:`Level` with four tables, consulted in this order:

1. ``supported``: natsd does what the key says (the readers in ``apply.py``);
2. ``cosmetic``: nats-server knows the key, and it changes nothing a client or the stored data
   could observe (log formatting, tuning of nats-server internals natsd does not have): one
   warning line each, and the server starts;
3. ``checked``: natsd reads the key and makes nats-server's checks with nats-server's
   wording, and then refuses it, because the server cannot do it yet (``cluster`` was, until
   routes were wired: ``natsd.config.cluster.refuse_unwired`` behind ``ROUTES_WIRED``);
4. ``refused``: every other key nats-server knows (read from nats-server's ``opts.go``,
   ``processConfigFileLine`` and its sub-parsers): a start-up error naming the key; natsd
   does not support it yet. When natsd implements one, it moves to ``supported``.

A key in none of them is unknown to nats-server too, and an error as in nats-server
(``unknown field "foo"``). Keys are case-insensitive, and a key that another value refers to
as ``$name`` is a variable, not a setting (nats-server's ``IsUsedVariable``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from natsd.config.options import JS_ACCOUNT_LIMIT_KEYS
from natsd.config.parse import ConfMap

__all__ = ["LEVELS", "Checker", "ConfigError", "Level"]


class ConfigError(ValueError):
    """The configuration cannot be honoured; the message has one line per problem."""


@dataclass(frozen=True)
class Level:
    """The keys of one kind of map (the top level, ``authorization``, a user, ...)."""

    name: str
    supported: frozenset[str]
    cosmetic: frozenset[str] = frozenset()
    checked: frozenset[str] = frozenset()
    refused: frozenset[str] = frozenset()
    # Spellings natsd has always accepted that nats-server does not know; kept so existing
    # natsd configs keep working (nats-server rejects them as unknown fields).
    natsd_only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        tables = (self.supported, self.cosmetic, self.checked, self.refused, self.natsd_only)
        seen: set[str] = set()
        for t in tables:
            assert not (seen & t), f"{self.name}: {sorted(seen & t)} in two tables"
            seen |= t


def _keys(text: str) -> frozenset[str]:
    return frozenset(text.split())


TOP = Level(
    "top level",
    supported=_keys(
        """
        listen host net port server_name http http_port monitor_port
        max_payload max_control_line max_pending max_connections max_conn
        max_subscriptions max_subs ping_interval ping_max write_deadline
        lame_duck_duration lame_duck_grace_period
        authorization no_auth_user accounts jetstream store_dir storedir
        debug trace trace_verbose trace_headers log_file logfile pid_file pidfile
        cluster server_tags system_account system tls allow_non_tls https https_port
        """
    ),
    cosmetic=_keys(
        """
        logtime logtime_utc syslog remote_syslog log_size_limit logfile_size_limit
        log_max_num logfile_max_num max_traced_msg_len connect_error_reports
        reconnect_error_reports disable_sublist_cache no_sublist_cache prof_block_rate
        """
    ),
    refused=_keys(
        """
        ocsp ocsp_cache
        http_base_path
        gateway leaf leafnodes websocket ws mqtt client_advertise
        operator operators root roots root_operator root_operators
        resolver account_resolver accounts_resolver resolver_tls resolver_preload
        resolver_pinned_accounts trusted trusted_keys default_sentinel
        no_system_account no_system no_sys_acc
        mappings maps default_js_domain
        no_header_support max_sub_tokens max_subscription_tokens proxy_protocol proxies
        write_timeout no_fast_producer_stall max_closed_clients
        server_metadata feature_flags ports_file_dir prof_port
        """
    ),
    natsd_only=_keys("addr name http_host max_pings_outstanding workers"),
)

AUTHORIZATION = Level(
    "authorization",
    supported=_keys(
        "user username pass password token timeout users"
        " permissions default_permission default_permissions"
    ),
    refused=_keys("auth_callout auth_hook proxy_required"),
)

USER = Level(
    "user",
    supported=_keys(
        "user username pass password permission permissions authorization nkey"
        " allowed_connection_types connection_types clients"
    ),
    refused=_keys("proxy_required"),
)

PERMISSIONS = Level(
    "permissions",
    supported=_keys(
        "pub publish import sub subscribe export allow_responses publish_allow_responses"
    ),
)

# ``tls {}`` (nats-server ``parseTLS``), read by config/tls.py.
TLS = Level(
    "tls",
    supported=_keys(
        """
        cert_file key_file ca_file verify verify_and_map verify_cert_and_check_known_urls
        insecure timeout pinned_certs handshake_first first immediate min_version
        cipher_suites allow_insecure_cipher_suites
        """
    ),
    # Certificate stores are Windows'; OCSP, several certificates (SNI), rate limits and
    # curve preferences (Python's ssl sets one curve) are not done yet.
    refused=_keys(
        """
        cert_store cert_match_by cert_match cert_match_skip_invalid ca_certs_match
        ocsp_peer certs certificates connection_rate_limit curve_preferences
        """
    ),
)

SUBJECT_PERMISSION = Level("subject permissions", supported=_keys("allow deny"))

ALLOW_RESPONSES = Level(
    "allow_responses",
    supported=_keys("max max_msgs max_messages max_responses expires expiration ttl"),
)

ACCOUNT = Level(
    "account",
    supported=_keys("users jetstream default_permissions nkey imports exports"),
    refused=_keys("mappings maps limits msg_trace trace_dest"),
)

# One entry of an account's ``exports`` (nats-server ``parseExportStreamOrService``).
EXPORT = Level(
    "export",
    supported=_keys(
        "stream service accounts response response_type threshold response_threshold"
        " response_max_time response_time"
    ),
    # Latency samples are system-account events natsd does not publish yet; an account token
    # position names importers by their public keys (operator mode); traces across an
    # export are not followed yet.
    refused=_keys("latency account_token_position allow_trace"),
)

# One entry of an account's ``imports`` (nats-server ``parseImportStreamOrService``).
IMPORT = Level(
    "import",
    supported=_keys("stream service prefix to share"),
    refused=_keys("allow_trace"),
)

# ``{account: A, subject: S}`` inside an import.
IMPORT_ACCOUNT = Level("import account", supported=_keys("account subject"))

_NATS_ACCOUNT_JS = _keys(
    """
    max_memory max_mem mem memory max_store max_file max_disk store disk
    max_streams streams max_consumers consumers max_ack_pending
    max_bytes_required max_stream_bytes max_bytes
    memory_max_stream_bytes mem_max_stream_bytes store_max_stream_bytes disk_max_stream_bytes
    """
)

ACCOUNT_JETSTREAM = Level(
    "account jetstream",
    supported=_NATS_ACCOUNT_JS,
    # Only a cluster has Raft traffic to route.
    refused=_keys("cluster_traffic"),
    natsd_only=frozenset(JS_ACCOUNT_LIMIT_KEYS) - _NATS_ACCOUNT_JS,
)

JETSTREAM = Level(
    "jetstream",
    supported=_keys(
        """
        enable enabled store store_dir storedir sync sync_interval
        max_memory_store max_mem_store max_mem max_file_store max_file domain strict
        """
    ),
    # Tuning of nats-server internals (clustering catch-up, meta-layer compaction, ingest
    # buffers and request queues) that natsd does not have; no effect on what is stored.
    cosmetic=_keys(
        """
        extension_hint max_outstanding_catchup max_buffered_size max_buffered_msgs
        request_queue_limit info_queue_limit meta_compact meta_compact_size
        meta_compact_sync max_concurrent_io
        """
    ),
    refused=_keys(
        "key ek encryption_key prev_key prev_ek prev_encryption_key cipher tpm limits unique_tag"
    ),
    natsd_only=_keys("max_memory max_store"),
)

# ``cluster {}`` (nats-server ``parseCluster``). Read into ClusterOptions and checked as
# nats-server checks it (config/cluster.py); the mesh in cluster/ runs it.
CLUSTER = Level(
    "cluster",
    supported=_keys(
        """
        name listen port host net routes authorization advertise cluster_advertise
        no_advertise connect_retries pool_size compression tls
        """
    ),
    refused=_keys(
        "permissions accounts ping_interval ping_max write_deadline write_timeout"
        " connect_backoff"
    ),
)

# ``cluster { authorization {} }``: one user and a timeout. ``users`` and ``token`` are
# nats-server errors ("Cluster authorization does not allow multiple users", "... does not
# support tokens"), which natsd gives in the same words.
CLUSTER_AUTHORIZATION = Level(
    "cluster authorization",
    supported=_keys("user username pass password timeout users token"),
    refused=_keys(
        "permissions default_permission default_permissions auth_callout auth_hook proxy_required"
    ),
)

LEVELS: tuple[Level, ...] = (
    TOP,
    AUTHORIZATION,
    USER,
    PERMISSIONS,
    SUBJECT_PERMISSION,
    TLS,
    ALLOW_RESPONSES,
    ACCOUNT,
    EXPORT,
    IMPORT,
    IMPORT_ACCOUNT,
    ACCOUNT_JETSTREAM,
    JETSTREAM,
    CLUSTER,
    CLUSTER_AUTHORIZATION,
)


class Checker:
    """Sorts the keys of each map against its :class:`Level`, collecting every error and
    warning (nats-server reports all of them at once, not just the first)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    @staticmethod
    def where(m: Mapping[str, Any], key: str) -> str:
        """``file:line: `` of ``key`` when the map came from a file, else nothing."""
        pos = m.positions.get(key) if isinstance(m, ConfMap) else None
        return f"{pos[0]}:{pos[1]}: " if pos else ""

    def error(self, m: Mapping[str, Any], key: str, text: str) -> None:
        self.errors.append(self.where(m, key) + text)

    def refuse(self, m: Mapping[str, Any], key: str, path: str, why: str = "") -> None:
        text = f'config key "{path}" is not supported by natsd yet'
        self.error(m, key, text + (f" ({why})" if why else ""))

    def supported(
        self, level: Level, m: Mapping[str, Any], prefix: str
    ) -> Iterator[tuple[str, Any]]:
        """Yield ``(lower-case key, value)`` for the keys of ``m`` natsd honours; report the
        others. ``prefix`` is the path of ``m`` (``"accounts.A.jetstream."``)."""
        used = m.used if isinstance(m, ConfMap) else set()
        for raw, value in m.items():
            key = str(raw).lower()
            if key in level.supported or key in level.checked or key in level.natsd_only:
                yield key, value
            elif key in level.cosmetic:
                self.warnings.append(
                    self.where(m, raw) + f'config key "{prefix}{raw}" has no effect in natsd'
                    " and was ignored"
                )
            elif key in level.refused:
                self.refuse(m, raw, f"{prefix}{raw}")
            elif raw not in used:
                self.error(
                    m, raw, f'unknown field "{raw}"' + (f" in {prefix[:-1]}" if prefix else "")
                )
