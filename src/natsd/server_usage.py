"""What the server reports to the monitor about its routes and its JetStream accounts
(``monitor.source.MonitorSource``), built from the mesh and the engine here so the monitor
never imports either. Read on the event loop, on demand (``/routez``, ``/jsz``, ``/varz``,
the metrics endpoint)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from natsd.cluster.mesh import Mesh
from natsd.config.options import ClusterOptions
from natsd.monitor.source import AccountUsage, ClusterUsage, RouteUsage, StreamUsage
from natsd.version import API_LEVEL, SERVER_VERSION

__all__ = ["engine_usage", "mesh_usage"]


def mesh_usage(mesh: Mesh, c: ClusterOptions, name: str, *, subs: bool) -> ClusterUsage:
    """The mesh's routes; ``subs``: each route's subscriptions listed too."""
    routes = []
    for r in mesh.routes.values():
        listed = [s.subject.decode() for s in mesh.remote.iter_route(r.rid)] if subs else []
        routes.append(
            RouteUsage(
                rid=r.rid,
                remote_id=r.remote_id,
                remote_name=r.remote_name or r.remote_id,
                did_solicit=r.solicited,
                is_configured=r.rid in mesh.configured,
                ip=r.ip,
                port=r.port,
                start=r.start,
                last_activity=r.last_activity,
                rtt=r.rtt,
                pending_size=r.pending_bytes,
                in_msgs=r.msgs_in,
                out_msgs=r.msgs_out,
                in_bytes=r.bytes_in,
                out_bytes=r.bytes_out,
                subscriptions=mesh.remote.route_subs(r.rid),
                subscriptions_list=listed,
            )
        )
    return ClusterUsage(
        name=name,
        addr=c.host or "0.0.0.0",
        cluster_port=mesh.port,
        auth_timeout=c.auth_timeout or 2.0,
        urls=[u.raw for u in c.routes],
        routes=routes,
    )


def engine_usage(engine: Any, *, streams: bool, server_name: str) -> list[AccountUsage]:
    """Per JetStream account: usage, reservations, API counters; ``streams``: each stream's
    state too. ``engine`` is the server's ``JetStream`` (typed loosely, as the server
    holds it: it is built only when JetStream is enabled)."""
    out = []
    for name, ja in engine.accounts.items():
        mem, store = engine.usage(ja)
        rmem, rstore = engine.reserved(ja)
        per_stream = (
            [_stream_usage(engine, ja, st, server_name) for st in ja.streams.values()]
            if streams
            else []
        )
        out.append(
            AccountUsage(
                name=name,
                memory=mem,
                storage=store,
                reserved_memory=rmem,
                reserved_storage=rstore,
                api_total=ja.api.total,
                api_errors=ja.api.errors,
                stream_count=len(ja.streams),
                streams=per_stream,
            )
        )
    return out


def _running_consumer_infos(stream: Any) -> Callable[[], list[dict[str, Any]]]:
    def infos() -> list[dict[str, Any]]:
        # (a replicated stream's follower holds its consumers passive: their figures are
        # the leader's to report)
        return [
            c.info(versioned=False)
            for c in list(stream.consumers.values())
            if hasattr(c, "info") and not getattr(c, "passive", False) and not c.closed
        ]

    return infos


def _replicas(engine: Any, ja: Any, stream: Any) -> Callable[[], list[dict[str, Any]]] | None:
    rep = getattr(stream, "replica", None)
    if engine.cluster_info is None or rep is None or not rep.leading:
        return None

    def replicas() -> list[dict[str, Any]]:
        return list(engine.cluster_info(ja, stream.name).get("replicas") or [])

    return replicas


def _cluster_block(engine: Any, ja: Any, stream: Any, server_name: str) -> dict[str, Any]:
    if engine.cluster_info is None:
        return {"leader": server_name}  # (as a single nats-server's /jsz: itself)
    return dict(engine.cluster_info(ja, stream.name))


def _stream_usage(engine: Any, ja: Any, stream: Any, server_name: str) -> StreamUsage:
    state = stream.store.state()
    return StreamUsage(
        name=stream.name,
        created_ns=stream.created_ns,
        messages=state.msgs,
        bytes=state.bytes,
        first_seq=state.first_seq,
        last_seq=state.last_seq,
        consumers=stream.listed_consumers,
        state_json=stream.state_json,
        mirror=stream.mirror.info() if stream.mirror is not None else None,
        sources=[f.info() for f in stream.sources.values()] or None,
        consumer_infos=_running_consumer_infos(stream),
        replicas=_replicas(engine, ja, stream),
        cluster=lambda: _cluster_block(engine, ja, stream, server_name),
        config=lambda: stream.cfg.to_json(server_version=SERVER_VERSION, api_level=API_LEVEL),
    )
