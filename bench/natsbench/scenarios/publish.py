"""JetStream publish scenarios: pipelined (async) and one-at-a-time (sync) publishes to a
fresh file or memory stream, every PubAck checked, the stream's count checked after; the
opt-in ``js-async-file-s2`` publishes into a ``compression: s2`` file stream (the payload
pattern compresses well), and the opt-in ``js-fast-file`` as one fast-ingest batch into a
file stream with ``allow_batched`` (flow acks instead of PubAcks).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..harness import Run, RunResult, exc_text
from ..jsload import api_error, js_api, js_async_main, js_fast_main, js_sync_main
from ..loadgen import BenchError, Report
from ..scenario import Row, Scenario
from ..servers import ALL_SERVERS, REF_AND_IMPL, Server

# the most messages between flow acks the fast batch publisher asks for
FAST_FLOW = 500


def run_js(
    mode: str, storage: str, server: Server, cfg: Config, warmup: bool, s2: bool = False
) -> RunResult:
    """One JetStream publish run on a fresh stream (created and deleted over the network)."""
    deadline = time.monotonic() + cfg.timeout
    tag = uuid.uuid4().hex[:10]
    stream, subject = f"BENCH_{tag}", f"bench.js.{tag}"
    t_api = cfg.setup_timeout
    body = {"name": stream, "subjects": [subject], "storage": storage}
    if s2:
        body["compression"] = "s2"
    if mode == "fast":
        body["allow_batched"] = True
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{stream}", body, t_api)
    except (BenchError, OSError) as exc:
        return RunResult(False, error=f"stream create failed: {exc_text(exc)}")
    if (err := api_error(doc)) is not None:
        return RunResult(False, error=f"stream create failed: {err}")
    max_time = cfg.js_warm_time if warmup else cfg.js_time
    run = Run(deadline, cfg.setup_timeout)
    go = run.ctx.Event()
    key = ("jspub", 0)
    result: RunResult | None = None
    try:
        if mode == "async":
            n = max(1, cfg.js_msgs // 10) if warmup else cfg.js_msgs
            target: Callable[..., None] = js_async_main
            args: tuple[Any, ...] = (n, max_time, cfg.js_window)
        elif mode == "fast":
            n = max(1, cfg.js_msgs // 10) if warmup else cfg.js_msgs
            target = js_fast_main
            args = (n, max_time, FAST_FLOW)
        else:
            n = max(1, cfg.js_sync_msgs // 10) if warmup else cfg.js_sync_msgs
            target = js_sync_main
            args = (n, 0 if warmup else cfg.js_sync_warmup, max_time)
        common = (server.port, subject, cfg.size, *args, run.q, go, deadline, cfg.idle_timeout)
        run.spawn("jspub", 0, target, *common)
        server_cpu = run.go(go, [key], [key], server)
    except RuntimeError as exc:
        result = RunResult(False, error=str(exc))
    finally:
        run.close()
    if result is None:
        result = _js_result(server, cfg, mode, stream, run.reports[key], server_cpu)
    # delete the stream even after a failure; a failed delete fails an otherwise good run
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.DELETE.{stream}", None, t_api)
        err = api_error(doc)
    except (BenchError, OSError) as exc:
        err = exc_text(exc)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"stream delete failed: {err}")
    return result


def _js_result(
    server: Server, cfg: Config, mode: str, stream: str, rep: Report, server_cpu: float
) -> RunResult:
    count = int(rep["count"])
    wall = max(1e-9, rep["last"] - rep["first"])
    metrics: dict[str, float] = {
        "count": float(count),
        "wall_s": wall,
        "pub_cpu": rep["cpu"] / wall,
        "server_cpu": server_cpu / wall,
        "slow_chunks": float(rep["slow_chunks"]),
    }
    if mode in ("async", "fast"):
        metrics["rate"] = count / wall
    else:
        for k in ("p50_us", "p90_us", "p99_us", "p999_us", "min_us", "max_us", "mean_us"):
            metrics[k] = float(rep[k])
        metrics["rate"] = float(rep["rate"])
    if rep["max_seq"] != count:
        return RunResult(False, metrics, f"{count} acks but highest acked seq {rep['max_seq']}")
    try:
        info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, cfg.setup_timeout)
    except (BenchError, OSError) as exc:
        return RunResult(False, metrics, f"stream info failed: {exc_text(exc)}")
    if (err := api_error(info)) is not None:
        return RunResult(False, metrics, f"stream info failed: {err}")
    stored = info.get("state", {}).get("messages")
    if stored != count:
        return RunResult(False, metrics, f"{count} acks but the stream holds {stored} messages")
    return RunResult(True, metrics)


class JsPublish(Scenario):
    groups = ("js", "js-pub")
    family = "publish"

    def __init__(self, mode: str, store: str, s2: bool = False) -> None:
        self.mode = mode  # "async", "sync" or "fast" (one fast-ingest batch)
        self.store = store  # "file" or "mem"
        self.storage = {"file": "file", "mem": "memory"}[store]
        self.s2 = s2  # compression: s2
        self.name = f"js-{mode}-{store}" + ("-s2" if s2 else "")
        # nats-server-sync and natsd-lazy differ from their defaults only for file streams
        self.servers = ALL_SERVERS if store == "file" and not s2 else REF_AND_IMPL
        self.opt_in = s2 or mode == "fast"
        if mode == "fast":
            self.servers = REF_AND_IMPL

    def rows(self, cfg: Config) -> list[Row]:
        label = f"js {self.mode} {self.store}" + (" s2" if self.s2 else "")
        if self.mode == "async":
            return [Row(f"{label} (acks)", self.name, "rate", "tput")]
        if self.mode == "fast":
            return [Row(f"{label} (msgs)", self.name, "rate", "tput")]
        return [
            Row(f"{label} p50 (us)", self.name, "p50_us", "lat"),
            Row(f"{label} p99 (us)", self.name, "p99_us", "lat"),
            Row(label, self.name, "rate", "tput"),
        ]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        return run_js(self.mode, self.storage, server, cfg, warmup, self.s2)

    def report(self, m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} pub {m['pub_cpu']:.0%}"
        if self.mode == "async":
            return f"{m['rate']:,.0f} acks/s ({m['count']:,.0f} msgs)  {cpu}"
        if self.mode == "fast":
            return f"{m['rate']:,.0f} msgs/s ({m['count']:,.0f} msgs)  {cpu}"
        return (
            f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  {m['rate']:,.0f} msg/s"
            f" ({m['count']:,.0f} msgs)  {cpu}"
        )
