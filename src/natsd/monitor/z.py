"""The monitoring data, as nats-server's ``Varz``, ``Connz``, ``Routez``, ``Subsz``,
``Accountz``, ``Jsz``, ``Raftz`` and ``Healthz`` give it: what the HTTP endpoints
(``http.py``) and the system account's ``$SYS.REQ`` services (``sys_services.py``) answer,
each with its options as keyword arguments. Everything reads through ``MonitorSource``.

A request these refuse raises :class:`ZError` with nats-server's HTTP status and text.
"""

from __future__ import annotations

import os
import time
from typing import Any

from natsd.config.options import ExportConfig, ImportConfig
from natsd.core.build import BUILD
from natsd.core.clock import format_duration, rfc3339
from natsd.core.subjects import subject_matches
from natsd.monitor.source import AccountUsage, ClusterUsage, MonitorSource, StreamUsage
from natsd.router.account import Account
from natsd.version import API_LEVEL, PROTO, SERVER_VERSION, __version__

__all__ = [
    "CONNZ_SORTS",
    "ZError",
    "accountz",
    "connz",
    "healthz",
    "jetstream_stats",
    "jsz",
    "raftz",
    "routez",
    "rss",
    "subsz",
    "varz",
]


class ZError(Exception):
    """A monitoring request refused: nats-server's HTTP status and text."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


# Connz ``sort`` options: each one's key (descending ones negated)
_CONNZ_KEYS: dict[str, Any] = {
    "cid": lambda c: c.cid,
    "start": lambda c: c.start,
    "subs": lambda c: -len(c.subs),
    "pending": lambda c: -c.pending_bytes,
    "msgs_to": lambda c: -c.msgs_out,
    "msgs_from": lambda c: -c.msgs_in,
    "bytes_to": lambda c: -c.bytes_out,
    "bytes_from": lambda c: -c.bytes_in,
    "last": lambda c: -c.last_activity,
    "idle": lambda c: c.last_activity,
    "uptime": lambda c: c.start,
}
CONNZ_SORTS = frozenset(_CONNZ_KEYS)


def _ts(t: float) -> str:
    return rfc3339(int(t * 1_000_000_000))


def _cluster_block(c: ClusterUsage) -> dict[str, Any]:
    """/varz ``cluster`` as nats-server writes it (ClusterOptsVarz)."""
    block: dict[str, Any] = {
        "name": c.name,
        "addr": c.addr,
        "cluster_port": c.cluster_port,
        "auth_timeout": c.auth_timeout,
    }
    if c.urls:
        block["urls"] = c.urls
    return block


def varz(s: MonitorSource) -> dict[str, Any]:
    """/varz, and the data of ``$SYS.REQ.SERVER.*.VARZ``."""
    o = s.options
    mi, bi, mo, bo = s.totals()
    now = time.time()
    data: dict[str, Any] = {
        "server_id": s.server_id,
        "server_name": s.server_name,
        "version": SERVER_VERSION,
        "proto": PROTO,
        "go": f"natsd {__version__}",
        # natsd's own: the compiled (mypyc) hot path or pure Python (natsd.core.build)
        "natsd_build": BUILD,
        "host": o.host,
        "port": s.port,
        "max_connections": o.max_connections,
        "ping_interval": int(o.ping_interval * 1e9),
        "ping_max": o.ping_max,
        "http_host": o.http_host,
        "http_port": s.monitor_port if not o.https_port else o.http_port,
        "https_port": s.monitor_port if o.https_port else 0,
        "tls_timeout": o.tls.timeout if o.tls is not None else 0,
        **_varz_tls(o),
        "auth_timeout": o.auth_timeout,
        "max_control_line": o.max_control_line,
        "max_payload": o.max_payload,
        "max_pending": o.max_pending,
        "write_deadline": int(o.write_deadline * 1e9),
        "start": _ts(s.start_time),
        "now": _ts(now),
        "uptime": format_duration(round(now - s.start_time)),
        "cores": os.cpu_count() or 1,
        "mem": rss(),
        "connections": len(s.clients),
        "total_connections": s.total_connections,
        "routes": 0,
        "remotes": 0,
        "leafnodes": 0,
        "in_msgs": mi,
        "out_msgs": mo,
        "in_bytes": bi,
        "out_bytes": bo,
        "slow_consumers": s.slow_consumers,
        "stale_connections": s.stale_connections,
        "subscriptions": s.num_subscriptions(),
        "config_load_time": _ts(s.config_time),
        "auth_required": s.auth_required or None,
        "system_account": s.system_account_name,
    }
    cluster = s.cluster_usage(subs=False)
    if cluster is not None:
        data["cluster"] = _cluster_block(cluster)
        data["routes"] = len(cluster.routes)
    if s.jetstream_enabled:
        data["jetstream"] = {
            "config": {"store_dir": o.js.store_dir},
            "stats": jetstream_stats(s.jetstream_usage(streams=False) or []),
        }
    return {k: v for k, v in data.items() if v is not None}


def routez(s: MonitorSource, *, subs: bool = False) -> dict[str, Any]:
    """nats-server's Routez: every route, with its subscriptions when ``subs``."""
    want_subs = subs
    cluster = s.cluster_usage(subs=want_subs)
    routes = cluster.routes if cluster is not None else []
    now = time.time()
    out = []
    for r in routes:
        info: dict[str, Any] = {
            "rid": r.rid,
            "remote_id": r.remote_id,
            "remote_name": r.remote_name,
            "did_solicit": r.did_solicit,
            "is_configured": r.is_configured,
            "ip": r.ip,
            "port": r.port,
            "start": _ts(r.start),
            "last_activity": _ts(r.last_activity),
            "rtt": format_duration(r.rtt),
            "uptime": format_duration(round(now - r.start)),
            "idle": format_duration(round(now - r.last_activity)),
            "pending_size": r.pending_size,
            "in_msgs": r.in_msgs,
            "out_msgs": r.out_msgs,
            "in_bytes": r.in_bytes,
            "out_bytes": r.out_bytes,
            "subscriptions": r.subscriptions,
        }
        if want_subs and r.subscriptions_list:
            info["subscriptions_list"] = r.subscriptions_list
        info["compression"] = "off"
        out.append(info)
    return {
        "server_id": s.server_id,
        "server_name": s.server_name,
        "now": _ts(now),
        "num_routes": len(out),
        "routes": out,
    }


def connz(
    s: MonitorSource,
    *,
    offset: int = 0,
    limit: int = 1024,
    subs: bool = False,
    auth: bool = False,
    sort: str = "cid",
    account: str = "",
) -> dict[str, Any]:
    """nats-server's Connz: the client connections (of ``account`` only, when given)."""
    want_subs, want_auth = subs, auth
    now = time.time()
    clients = [c for c in s.clients.values() if not account or c.account.name == account]
    clients.sort(key=_CONNZ_KEYS.get(sort, _CONNZ_KEYS["cid"]))
    page = clients[offset : offset + limit]
    conns = []
    for c in page:
        info: dict[str, Any] = {
            "cid": c.cid,
            "kind": "Client",
            "type": "nats",
            "ip": c.ip,
            "port": c.port,
            "start": _ts(c.start),
            "last_activity": _ts(c.last_activity),
            "rtt": format_duration(c.rtt),
            "uptime": format_duration(round(now - c.start)),
            "idle": format_duration(round(now - c.last_activity)),
            "pending_bytes": c.pending_bytes,
            "in_msgs": c.msgs_in,
            "out_msgs": c.msgs_out,
            "in_bytes": c.bytes_in,
            "out_bytes": c.bytes_out,
            "subscriptions": len(c.subs),
        }
        if c.name:
            info["name"] = c.name
        if c.lang:
            info["lang"] = c.lang
        if c.version:
            info["version"] = c.version
        if want_auth:  # (as nats-server: who a connection is, only when asked)
            if c.user:
                info["authorized_user"] = c.user
            if c.account.name != "$G":
                info["account"] = c.account.name
        if want_subs:
            info["subscriptions_list"] = [sub.subject.decode() for sub in c.subs.values()]
        info.update(c.tls_report(peer_certs=want_auth))
        conns.append(info)
    return {
        "server_id": s.server_id,
        "now": _ts(now),
        "num_connections": len(page),
        "total": len(clients),
        "offset": offset,
        "limit": limit,
        "connections": conns,
    }


def subsz(
    s: MonitorSource,
    *,
    subs: bool = False,
    offset: int = 0,
    limit: int = 1024,
    test: str | None = None,
    account: str = "",
) -> dict[str, Any]:
    """nats-server's Subsz: the subscription totals, each subscription with ``subs``."""
    accounts = [a for n, a in s.accounts.items() if not account or n == account]
    data: dict[str, Any] = {
        "server_id": s.server_id,
        "now": _ts(time.time()),
        **_sublist_stats(accounts),
    }
    if subs:
        found = []
        for a in accounts:
            for sub in a.sublist:
                if test is not None:
                    if not subject_matches(test.encode(), sub.subject):
                        continue
                d: dict[str, Any] = {
                    "account": a.name,
                    "subject": sub.subject.decode(),
                    "sid": sub.sid.decode(),
                    "msgs": sub.delivered,
                    "cid": sub.client.cid if sub.client is not None else 0,
                }
                if sub.queue:
                    d["qgroup"] = sub.queue.decode()
                if sub.max:
                    d["max"] = sub.max
                found.append(d)
        data["total"] = len(found)
        data["offset"] = offset
        data["limit"] = limit
        data["subscriptions_list"] = found[offset : offset + limit]
    return data


def account_stat(acct: Account, leaving: object = None) -> dict[str, Any]:
    """nats-server's AccountStat: the account's client connections on this server (but
    ``leaving``, one being closed), its subscriptions, the messages its clients published
    (``received``) and those delivered of what was published in it (``sent``), and its
    clients closed as slow consumers. (natsd has no leaf nodes or gateways, and does not
    split the figures by route: nats-server's ``routes``, ``gateways`` and ``leafs`` parts
    are left out.)"""
    conns = sum(1 for c in acct.clients.values() if c is not leaving)
    return {
        "acc": acct.name,
        "name": acct.name,
        "conns": conns,
        "leafnodes": 0,
        "total_conns": conns,
        "num_subscriptions": acct.num_subscriptions,
        "sent": {"msgs": acct.msgs_out, "bytes": acct.bytes_out},
        "received": {"msgs": acct.msgs_in, "bytes": acct.bytes_in},
        "slow_consumers": acct.slow_consumers,
    }


def accstatz(
    s: MonitorSource, *, accounts: list[str] | None = None, include_unused: bool = False
) -> dict[str, Any]:
    """nats-server's AccountStatz (/accstatz): each account's ``account_stat``, those named
    in ``accounts`` (all when none), only those with connections here unless
    ``include_unused``."""
    names = accounts if accounts else sorted(s.accounts)
    stats = []
    for name in names:
        acct = s.accounts.get(name)
        if acct is not None and (include_unused or acct.clients):
            stats.append(account_stat(acct))
    return {"server_id": s.server_id, "now": _ts(time.time()), "account_statz": stats}


def accountz(s: MonitorSource, *, acc: str = "") -> dict[str, Any]:
    """nats-server's Accountz: the account names, or one account's detail (``acc``)."""
    data: dict[str, Any] = {
        "server_id": s.server_id,
        "now": _ts(time.time()),
        "system_account": s.system_account_name,
    }
    name = acc
    if not name:
        data["accounts"] = sorted(s.accounts)
        return data
    acct = s.accounts.get(name)
    if acct is None:
        # nats-server answers 400 with the error text, not JSON.
        raise ZError(400, f"Account {name} does not exist")
    detail: dict[str, Any] = {
        "account_name": name,
        "update_time": _ts(s.config_time),
    }
    if name == s.system_account_name:
        detail["is_system"] = True
    js = s.jetstream_usage(streams=False)
    detail.update(
        {
            "expired": False,
            "complete": True,
            "jetstream_enabled": js is not None and any(ja.name == name for ja in js),
            "leafnode_connections": 0,
            "client_connections": len(acct.clients),
            "subscriptions": acct.num_subscriptions,
            "name_tag": name,
            "sublist_stats": _sublist_stats([acct]),
        }
    )
    acfg = s.options.accounts.get(name)
    if acfg is not None:
        # (nats-server's implicit service imports from $SYS do not exist here yet)
        if acfg.exports:
            detail["exports"] = [_export_json(e) for e in acfg.exports]
        if acfg.imports:
            detail["imports"] = [_import_json(i) for i in acfg.imports]
    data["account_detail"] = detail
    return data


def jsz(
    s: MonitorSource,
    *,
    accounts: bool = False,
    streams: bool = False,
    consumers: bool = False,
    config: bool = False,
    leader_only: bool = False,
    account: str = "",
    offset: int = 0,
    limit: int = 0,
    raft: bool = False,
    stream_leader_only: bool = False,
) -> dict[str, Any]:
    """nats-server's Jsz: JetStream's figures, and per account details (``account_details``)
    for the account named ``account`` when it has JetStream, else with ``accounts`` for
    every account by name from ``offset``, ``limit`` of them (0: 1,024). ``consumers``
    implies ``streams`` and ``streams`` implies ``accounts`` unless an account is named (as
    nats-server: a named account without JetStream then gives no details). Each stream's
    detail with ``streams`` (skipping those another server leads with
    ``stream_leader_only``), its consumers (``consumer_detail``: those this server runs)
    with ``consumers``, its ``config`` with ``config``. ``raft``: each detail's
    ``stream_raft_group`` and the counts of streams and consumers this server leads
    (``streams_leader``, ``consumers_leader``; a consumer runs on its stream's leader)."""
    offset = max(offset, 0)
    limit = limit or 1024
    if consumers:
        streams = True
    if streams and not account:
        accounts = True
    usage = s.jetstream_usage(streams=True)
    now = time.time()
    if usage is None:
        if leader_only:
            raise ZError(400, "filtered response: not leader")
        return {"server_id": s.server_id, "now": _ts(now), "disabled": True}
    meta = s.jetstream_meta()
    if leader_only and meta is not None and meta.get("leader") != s.server_name:
        # nats-server's errSkipZreq answer: plain text, not JSON
        raise ZError(400, "filtered response: not leader")
    o = s.options.js
    mem = store = n_streams = msgs = nbytes = total = errors = n_consumers = 0
    rmem = rstore = streams_leader = consumers_leader = 0
    for ja in usage:
        mem += ja.memory
        store += ja.storage
        rmem += ja.reserved_memory
        rstore += ja.reserved_storage
        n_streams += ja.stream_count
        total += ja.api_total
        errors += ja.api_errors
        for stream in ja.streams:
            n_consumers += stream.consumers
            msgs += stream.messages
            nbytes += stream.bytes
            if raft and _leads(s, stream):
                streams_leader += 1
                consumers_leader += stream.consumers
    chosen = [ja for ja in usage if account and ja.name == account]
    if not chosen and accounts:
        chosen = sorted(usage, key=lambda x: x.name)[offset : offset + limit]
    data: dict[str, Any] = {
        "server_id": s.server_id,
        "now": _ts(now),
        "config": {
            "max_memory": o.max_memory,
            "max_storage": o.max_file,
            "store_dir": o.store_dir,
            "sync_interval": int((o.sync_interval or 0) * 1e9),
            "sync_always": o.sync_always,
            "domain": o.domain or None,
        },
        "memory": mem,
        "storage": store,
        "reserved_memory": rmem,
        "reserved_storage": rstore,
        "accounts": len(usage),
        "ha_assets": 0,
        "api": {"level": API_LEVEL, "total": total, "errors": errors},
        "streams": n_streams,
        "consumers": n_consumers,
        "messages": msgs,
        "bytes": nbytes,
        "total": len(usage),
    }
    if streams_leader:
        data["streams_leader"] = streams_leader
    if consumers_leader:
        data["consumers_leader"] = consumers_leader
    if meta is not None:
        data["meta_cluster"] = meta
    if chosen:
        data["account_details"] = [
            _account_detail(s, ja, streams, consumers, config, raft, stream_leader_only)
            for ja in chosen
        ]
    return data


def _leads(s: MonitorSource, stream: StreamUsage) -> bool:
    """Does this server lead ``stream`` (a stream without a Raft group: always)?"""
    cl = stream.cluster() if stream.cluster is not None else {}
    return not cl.get("raft_group") or cl.get("leader") == s.server_name


def _account_detail(
    s: MonitorSource,
    ja: AccountUsage,
    streams: bool,
    consumers: bool,
    config: bool,
    raft: bool,
    stream_leader_only: bool,
) -> dict[str, Any]:
    # (nats-server's AccountDetail embeds JetStreamStats: its server-wide fields are 0)
    d: dict[str, Any] = {
        "name": ja.name,
        "id": ja.name,
        "memory": ja.memory,
        "storage": ja.storage,
        "reserved_memory": ja.reserved_memory,
        "reserved_storage": ja.reserved_storage,
        "accounts": 0,
        "ha_assets": 0,
        "api": {"level": 0, "total": ja.api_total, "errors": ja.api_errors},
    }
    if not streams:
        return d
    sd = []
    for stream in sorted(ja.streams, key=lambda x: x.name):
        cl = stream.cluster() if stream.cluster is not None else None
        if stream_leader_only and cl is not None and cl.get("leader") != s.server_name:
            continue
        detail: dict[str, Any] = {"name": stream.name, "created": _ts(stream.created_ns / 1e9)}
        if cl is not None:
            detail["cluster"] = cl
        if config and stream.config is not None:
            detail["config"] = stream.config()
        detail["state"] = stream.state_json()
        if consumers and stream.consumer_infos is not None:
            cd = stream.consumer_infos()
            if cd:
                # (as nats-server: a consumer's config only with ``config``)
                detail["consumer_detail"] = (
                    cd if config else [{k: v for k, v in c.items() if k != "config"} for c in cd]
                )
        if stream.mirror is not None:
            detail["mirror"] = stream.mirror
        if stream.sources:
            detail["sources"] = stream.sources
        if raft and cl is not None and cl.get("raft_group"):
            detail["stream_raft_group"] = cl["raft_group"]
        sd.append(detail)
    if sd:
        d["stream_detail"] = sd
    return d


def raftz(s: MonitorSource, *, acc: str = "", group: str = "") -> dict[str, Any]:
    """nats-server's /raftz: the Raft groups of one account (``acc``, default the system
    account's: the meta group), all or the one named ``group``."""
    groups = s.raftz()
    if groups is None:
        raise ZError(404, "No Raft nodes registered")
    acc = acc or s.system_account_name
    mine = groups.get(acc, {})
    want = group
    if want:
        mine = {want: mine[want]} if want in mine else {}
    # as nats-server: filters that match nothing give an empty object
    return {acc: mine} if mine else {}


def healthz(s: MonitorSource, *, js_only: bool = False) -> dict[str, Any]:
    """nats-server's Healthz: ``{"status": "ok"}``, else :class:`ZError` 503 with the reason."""
    if not s.ready.is_set():
        raise ZError(503, "server not ready")
    why = "" if js_only else s.jetstream_health()
    if why:
        raise ZError(503, why)
    return {"status": "ok"}


def rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def jetstream_stats(usage: list[AccountUsage]) -> dict[str, Any]:
    """``/varz`` ``jetstream.stats`` as nats-server reports it (totals over accounts)."""
    return {
        "memory": sum(ja.memory for ja in usage),
        "storage": sum(ja.storage for ja in usage),
        "reserved_memory": sum(ja.reserved_memory for ja in usage),
        "reserved_storage": sum(ja.reserved_storage for ja in usage),
        "accounts": len(usage),
        "ha_assets": 0,
        "api": {
            "level": API_LEVEL,
            "total": sum(ja.api_total for ja in usage),
            "errors": sum(ja.api_errors for ja in usage),
        },
    }


def _sublist_stats(accounts: list[Account]) -> dict[str, Any]:
    """nats-server's ``SublistStats`` summed over ``accounts`` (/subsz, /accountz?acc=)."""
    matches = sum(a.sublist.matches + a.sublist.cache_hits for a in accounts)
    hits = sum(a.sublist.cache_hits for a in accounts)
    return {
        "num_subscriptions": sum(a.num_subscriptions for a in accounts),
        "num_cache": sum(a.sublist.cache_size for a in accounts),
        "num_inserts": sum(a.sublist.inserts for a in accounts),
        "num_removes": sum(a.sublist.removes for a in accounts),
        "num_matches": matches,
        "cache_hit_rate": (hits / matches) if matches else 0,
        "max_fanout": 0,
        "avg_fanout": 0,
    }


def _varz_tls(o: Any) -> dict[str, Any]:
    """/varz's tls_required and tls_verify (omitted when false, as nats-server)."""
    out: dict[str, Any] = {}
    if o.tls is not None and not o.allow_non_tls:
        out["tls_required"] = True
    if o.tls is not None and o.tls.verify:
        out["tls_verify"] = True
    return out


def _export_json(e: ExportConfig) -> dict[str, Any]:
    """One ``exports`` entry of /accountz (nats-server's ExtExport)."""
    out: dict[str, Any] = {"subject": e.subject, "type": e.kind}
    if e.kind == "service":
        out["response_type"] = e.response_type
    if e.accounts:
        out["approved_accounts"] = list(e.accounts)
    return out


def _import_json(i: ImportConfig) -> dict[str, Any]:
    """One ``imports`` entry of /accountz (nats-server's ExtImport)."""
    out: dict[str, Any] = {"subject": i.subject, "account": i.account}
    if i.kind == "service":
        out["to"] = i.to  # (nats-server's deprecated duplicate of local_subject)
    out.update(
        {"local_subject": i.local_subject, "type": i.kind, "invalid": False, "share": i.share,
         "tracking": False}
    )  # fmt: skip
    return out
