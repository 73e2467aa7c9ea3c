"""Prometheus exposition of server statistics via prometheus_client.

A custom collector reads the live numbers at scrape time, so the hot path never touches a
metrics object.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from natsd.monitor.source import MonitorSource

__all__ = ["MAX_CONSUMER_SERIES", "render_metrics"]

# The most consumers a scrape reports one by one (each is a label value of every consumer
# gauge): a server with more reports the first this many (by account, stream, consumer)
# and counts the rest in ``jetstream_consumer_series_omitted``, so a scrape's size has a
# bound whatever the number of consumers.
MAX_CONSUMER_SERIES = 2000

_CONSUMER_GAUGES = {
    "num_pending": "Messages the consumer has yet to deliver (its filter's)",
    "num_ack_pending": "Messages delivered and not yet acknowledged",
    "num_redelivered": "Messages delivered more than once, not yet acknowledged",
    "num_waiting": "Pull requests waiting",
    "delivered_stream_seq": "The last stream sequence delivered",
    "ack_floor_stream_seq": "The stream sequence below which everything is acknowledged",
}

_GAUGES = {
    "connections": "Current client connections",
    "subscriptions": "Current subscriptions",
    "routes": "Current route connections",
    "mem": "Resident memory in bytes",
    "cores": "CPU cores",
}
_COUNTERS = {
    "total_connections": "Connections accepted since start",
    "in_msgs": "Messages received from clients",
    "out_msgs": "Messages delivered to clients",
    "in_bytes": "Payload bytes received from clients",
    "out_bytes": "Payload bytes delivered to clients",
    "slow_consumers": "Clients cut off as slow consumers",
    "stale_connections": "Connections closed for missing PONGs",
}


class _VarzCollector:
    def __init__(self, server: MonitorSource, varz: dict[str, Any]) -> None:
        self.server = server
        self.varz = varz

    def collect(self) -> Iterator[Metric]:
        labels = ["server_id"]
        sid = [self.server.server_id]
        for key, doc in _GAUGES.items():
            g = GaugeMetricFamily(f"gnatsd_varz_{key}", doc, labels=labels)
            g.add_metric(sid, float(self.varz.get(key, 0)))
            yield g
        for key, doc in _COUNTERS.items():
            c = CounterMetricFamily(f"gnatsd_varz_{key}", doc, labels=labels)
            c.add_metric(sid, float(self.varz.get(key, 0)))
            yield c
        up = GaugeMetricFamily("gnatsd_varz_uptime_seconds", "Seconds since start", labels=labels)
        up.add_metric(sid, self.server.uptime())
        yield up
        acct = GaugeMetricFamily(
            "gnatsd_account_conns", "Connections per account", labels=["server_id", "account"]
        )
        for name, a in self.server.accounts.items():
            acct.add_metric([self.server.server_id, name], float(len(a.clients)))
        yield acct
        usage = self.server.jetstream_usage(streams=True)
        if usage is None:
            return
        labels3 = ["server_id", "account", "stream"]
        msgs = GaugeMetricFamily(
            "jetstream_stream_messages", "Messages in a stream", labels=labels3
        )
        nbytes = GaugeMetricFamily("jetstream_stream_bytes", "Bytes in a stream", labels=labels3)
        first = GaugeMetricFamily("jetstream_stream_first_seq", "First sequence", labels=labels3)
        last = GaugeMetricFamily("jetstream_stream_last_seq", "Last sequence", labels=labels3)
        api_total = CounterMetricFamily(
            "jetstream_api_requests", "JetStream API requests", labels=["server_id", "account"]
        )
        api_err = CounterMetricFamily(
            "jetstream_api_errors", "JetStream API errors", labels=["server_id", "account"]
        )
        labels4 = [*labels3, "origin"]
        lag = GaugeMetricFamily(
            "jetstream_stream_source_lag",
            "Origin messages a mirror or a source has yet to copy (as its origin last said)",
            labels=labels4,
        )
        active = GaugeMetricFamily(
            "jetstream_stream_source_active_seconds",
            "Seconds since a mirror or a source last heard from its origin (-1: never)",
            labels=labels4,
        )
        server_id = self.server.server_id
        labels5 = [*labels3, "consumer"]
        cgauges = {
            key: GaugeMetricFamily(f"jetstream_consumer_{key}", doc, labels=labels5)
            for key, doc in _CONSUMER_GAUGES.items()
        }
        idle = GaugeMetricFamily(
            "jetstream_consumer_last_active_seconds",
            "Seconds since the consumer last delivered a message (-1: never)",
            labels=labels5,
        )
        omitted = GaugeMetricFamily(
            "jetstream_consumer_series_omitted",
            f"Consumers not reported one by one (more than {MAX_CONSUMER_SERIES})",
            labels=["server_id"],
        )
        rlabels = [*labels3, "replica"]
        rlag = GaugeMetricFamily(
            "jetstream_stream_replica_lag",
            "Log entries a replica of a replicated stream is behind its leader",
            labels=rlabels,
        )
        rcurrent = GaugeMetricFamily(
            "jetstream_stream_replica_current",
            "1 when a replica of a replicated stream is current with its leader",
            labels=rlabels,
        )
        reported = dropped = 0
        now = time.time()
        for ja in usage:
            api_total.add_metric([server_id, ja.name], float(ja.api_total))
            api_err.add_metric([server_id, ja.name], float(ja.api_errors))
            for stream in ja.streams:
                skey = [server_id, ja.name, stream.name]
                msgs.add_metric(skey, float(stream.messages))
                nbytes.add_metric(skey, float(stream.bytes))
                first.add_metric(skey, float(stream.first_seq))
                last.add_metric(skey, float(stream.last_seq))
                # (one series per configured mirror or source: bounded by the streams' config)
                for block in ([stream.mirror] if stream.mirror else []) + (stream.sources or []):
                    okey = [*skey, str(block["name"])]
                    lag.add_metric(okey, float(block["lag"]))
                    ns = block["active"]
                    active.add_metric(okey, ns / 1e9 if ns >= 0 else -1.0)
                if stream.replicas is not None:
                    for r in stream.replicas():
                        rkey = [*skey, str(r.get("name", ""))]
                        rlag.add_metric(rkey, float(r.get("lag", 0)))
                        rcurrent.add_metric(rkey, 1.0 if r.get("current") else 0.0)
                infos = stream.consumer_infos() if stream.consumer_infos is not None else []
                for ci in sorted(infos, key=lambda ci: str(ci.get("name", ""))):
                    if reported >= MAX_CONSUMER_SERIES:
                        dropped += 1
                        continue
                    reported += 1
                    ckey = [*skey, str(ci.get("name", ""))]
                    figures = {
                        "num_pending": ci.get("num_pending", 0),
                        "num_ack_pending": ci.get("num_ack_pending", 0),
                        "num_redelivered": ci.get("num_redelivered", 0),
                        "num_waiting": ci.get("num_waiting", 0),
                        "delivered_stream_seq": ci.get("delivered", {}).get("stream_seq", 0),
                        "ack_floor_stream_seq": ci.get("ack_floor", {}).get("stream_seq", 0),
                    }
                    for key, g in cgauges.items():
                        g.add_metric(ckey, float(figures[key]))
                    since = _since(ci.get("delivered", {}).get("last_active"), now)
                    idle.add_metric(ckey, since)
        omitted.add_metric([server_id], float(dropped))
        yield from (msgs, nbytes, first, last, lag, active, api_total, api_err)
        yield from cgauges.values()
        yield from (idle, omitted, rlag, rcurrent)


def _since(ts: Any, now: float) -> float:
    """Seconds from an RFC 3339 time (nats-server's, nanoseconds) to ``now``; -1 without."""
    if not isinstance(ts, str) or not ts:
        return -1.0
    try:
        head, _, frac = ts.rstrip("Z").partition(".")
        t = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return -1.0
    t += float("0." + frac) if frac.isdigit() else 0.0
    return max(0.0, now - t)


def render_metrics(server: MonitorSource, varz: dict[str, Any]) -> tuple[bytes, str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_VarzCollector(server, varz))
    return generate_latest(registry), CONTENT_TYPE_LATEST
