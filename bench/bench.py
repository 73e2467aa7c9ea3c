"""Benchmark natsd against the reference nats-server on loopback.

Starts both servers, runs identical raw-socket load against each (publisher,
subscribers, responder and requester each in their own OS process), and prints
msgs/s for both plus the ratio natsd/nats-server.  JetStream file scenarios also
run nats-server with ``sync_interval: always`` (nats-server-sync, compared with
natsd's fsync-before-ack default) and natsd with nats-server's lazy default
``sync_interval: "2m"`` (natsd-lazy, compared with nats-server).  The consumer scenarios
(pull fetch + ack, push, publish -> consume latency) read pre-filled streams on
nats-server and natsd.  The KV / Object Store scenarios (kvload.py) put on all four
servers and get on nats-server and natsd.  See bench/README.md.

    .venv/bin/python bench/bench.py --quick
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from consumerload import e2e_main, prefill, pull_main, push_main
from jsload import api_error, fsync_rate, js_api, js_async_main, js_sync_main
from kvload import (
    MB,
    kv_fill,
    kv_get_main,
    kv_put_main,
    kv_stream_config,
    obj_data,
    obj_get_main,
    obj_put,
    obj_put_main,
    obj_stream_config,
)
from loadgen import (
    BenchError,
    Counters,
    FlowConfig,
    Report,
    publisher_main,
    requester_main,
    responder_main,
    subscriber_main,
)
from servers import Server, ServerStartError

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
REF = "nats-server"
REF_SYNC = "nats-server-sync"  # nats-server with jetstream { sync_interval: always }
IMPL = "natsd"
IMPL_LAZY = "natsd-lazy"  # natsd with jetstream { sync_interval: "2m" } (nats-server's default)
LAZY_INTERVAL = "2m"
ALL_SERVERS = (REF, REF_SYNC, IMPL, IMPL_LAZY)
FILE_ONLY = (REF_SYNC, IMPL_LAZY)  # variants that differ only in how file streams are synced
# ratio columns (numerator, denominator), shown when both servers run
RATIOS = ((IMPL, REF), (IMPL, REF_SYNC), (IMPL_LAZY, REF))
MAX_WIDTH = 130  # wider tables get two-line ratio headings

CORE_SCENARIOS = ("pub", "pubsub", "fanout", "reqrep")
JS_PUB_SCENARIOS = ("js-async-file", "js-async-mem", "js-sync-file", "js-sync-mem")
E2E = "js-e2e-latency"
CONSUMER_SCENARIOS = ("js-pull-ack", "js-pull-ack-file", "js-pull-none", "js-push", E2E)
KV_PUT = ("kv-put-sync", "kv-put-pipe")
KV_GET = ("kv-get-sync", "kv-get-pipe")
KV_SCENARIOS = (*KV_PUT, *KV_GET, "obj-put", "obj-get")
#: read-only scenarios: sync_interval does not matter, nats-server and natsd only
KV_READS = (*KV_GET, "obj-get")
JS_SCENARIOS = JS_PUB_SCENARIOS + CONSUMER_SCENARIOS + KV_SCENARIOS
SCENARIOS = CORE_SCENARIOS + JS_SCENARIOS
#: run without --only: everything but the file variant of pull + ack and the KV / Object
#: Store scenarios (they add ~55 s to `make bench`'s ~3.4 min); --only js / kv / consumers
#: / js-pull-ack-file and --js-only select them
OPT_IN = ("js-pull-ack-file", *KV_SCENARIOS)
DEFAULT_SCENARIOS = tuple(s for s in SCENARIOS if s not in OPT_IN)
GROUPS = {
    "core": CORE_SCENARIOS,
    "js": JS_SCENARIOS,
    "kv": KV_SCENARIOS,
    "kv-put": KV_PUT,
    "kv-get": KV_GET,
    "obj": ("obj-put", "obj-get"),
    "js-pub": JS_PUB_SCENARIOS,
    "consumers": CONSUMER_SCENARIOS,
    "consumer": CONSUMER_SCENARIOS,
}
#: storage of the stream each consumer scenario reads
CONSUMER_STORAGE = {
    "js-pull-ack": "memory",
    "js-pull-ack-file": "file",
    "js-pull-none": "memory",
    "js-push": "memory",
    "js-e2e-latency": "memory",
}
ALIASES = {
    **{s: s for s in JS_SCENARIOS},
    "obj-put": "obj-put",
    "obj-get": "obj-get",
    "pull-ack": "js-pull-ack",
    "pull-ack-file": "js-pull-ack-file",
    "pull-none": "js-pull-none",
    "push": "js-push",
    "e2e": "js-e2e-latency",
    "js-e2e": "js-e2e-latency",
    "e2e-latency": "js-e2e-latency",
    "pub": "pub",
    "publish": "pub",
    "publish-only": "pub",
    "pub-only": "pub",
    "pubsub": "pubsub",
    "pub-sub": "pubsub",
    "pub->sub": "pubsub",
    "fanout": "fanout",
    "fan-out": "fanout",
    "reqrep": "reqrep",
    "req-rep": "reqrep",
    "req/rep": "reqrep",
    "latency": "reqrep",
}


@dataclass
class Config:
    msgs: int
    size: int
    fanout: int
    requests: int
    warm_requests: int
    warm_msgs: int
    repeat: int
    agg: str
    timeout: float
    idle_timeout: float
    setup_timeout: float
    flow: FlowConfig
    js_msgs: int = 1_000_000
    js_sync_msgs: int = 50_000
    js_time: float = 5.0
    js_warm_time: float = 1.0
    js_window: int = 4000
    js_sync_warmup: int = 100
    js_consume_msgs: int = 50_000
    js_e2e_time: float = 1.0
    js_pull_batch: int = 100
    js_push_max_ack_pending: int = 500
    kv_time: float = 1.0
    kv_keys: int = 10_000
    kv_window: int = 256
    kv_sync_ops: int = 50_000
    kv_pipe_ops: int = 1_000_000
    obj_bytes: int = 50 * MB
    obj_window: int = 1


@dataclass
class RunResult:
    ok: bool
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


@dataclass
class Row:
    label: str
    scenario: str
    metric: str
    kind: str  # "tput" (higher is better) or "lat" (lower is better)
    unit: str = "msg/s"
    decimals: int = 0


def table_rows(cfg: Config) -> list[Row]:
    f = cfg.fanout
    return [
        Row("publish-only", "pub", "rate", "tput"),
        Row("pub->sub", "pubsub", "rate", "tput"),
        Row(f"fan-out 1->{f} delivered", "fanout", "delivered", "tput"),
        Row(f"fan-out 1->{f} per-msg", "fanout", "rate", "tput"),
        Row("req/rep p50 (us)", "reqrep", "p50_us", "lat"),
        Row("req/rep p99 (us)", "reqrep", "p99_us", "lat"),
        Row("js async file (acks)", "js-async-file", "rate", "tput"),
        Row("js async mem (acks)", "js-async-mem", "rate", "tput"),
        Row("js sync file p50 (us)", "js-sync-file", "p50_us", "lat"),
        Row("js sync file p99 (us)", "js-sync-file", "p99_us", "lat"),
        Row("js sync file", "js-sync-file", "rate", "tput"),
        Row("js sync mem p50 (us)", "js-sync-mem", "p50_us", "lat"),
        Row("js sync mem p99 (us)", "js-sync-mem", "p99_us", "lat"),
        Row("js sync mem", "js-sync-mem", "rate", "tput"),
        Row(f"js pull ack mem (batch {cfg.js_pull_batch})", "js-pull-ack", "rate", "tput"),
        Row(f"js pull ack file (batch {cfg.js_pull_batch})", "js-pull-ack-file", "rate", "tput"),
        Row(f"js pull none mem (batch {cfg.js_pull_batch})", "js-pull-none", "rate", "tput"),
        Row("js push ack mem", "js-push", "rate", "tput"),
        Row("js pub->pull p50 (us)", "js-e2e-latency", "p50_us", "lat"),
        Row("js pub->pull p99 (us)", "js-e2e-latency", "p99_us", "lat"),
        Row("kv put sync (1 outstanding)", "kv-put-sync", "rate", "tput", "ops/s"),
        Row("kv put sync p50 (us)", "kv-put-sync", "p50_us", "lat"),
        Row(f"kv put pipelined ({cfg.kv_window})", "kv-put-pipe", "rate", "tput", "ops/s"),
        Row("kv get sync (1 outstanding)", "kv-get-sync", "rate", "tput", "ops/s"),
        Row("kv get sync p50 (us)", "kv-get-sync", "p50_us", "lat"),
        Row(f"kv get pipelined ({cfg.kv_window})", "kv-get-pipe", "rate", "tput", "ops/s"),
        Row(f"obj put {obj_label(cfg)}", "obj-put", "rate", "tput", "MiB/s", 1),
        Row(f"obj get {obj_label(cfg)}", "obj-get", "rate", "tput", "MiB/s", 1),
    ]


def obj_label(cfg: Config) -> str:
    size = f"{cfg.obj_bytes / MB:g} MiB"
    return size if cfg.obj_window <= 1 else f"{size} (window {cfg.obj_window})"


def applies(scen: str, server: str) -> bool:
    """Which server columns run which scenario (sync_interval only matters for file storage)."""
    if scen in CORE_SCENARIOS or scen in CONSUMER_SCENARIOS or scen in KV_READS:
        return server in (REF, IMPL)
    return server not in FILE_ONLY or scen.endswith("-file") or scen in KV_SCENARIOS


# --------------------------------------------------------------------------- running


class Run:
    """One scenario execution: worker processes + result queue, always cleaned up."""

    def __init__(self, deadline: float, setup_timeout: float) -> None:
        self.ctx = mp.get_context("fork")
        self.q: Any = self.ctx.Queue()
        self.procs: dict[tuple[str, int], mp.process.BaseProcess] = {}
        self.reports: dict[tuple[str, int], Report] = {}
        self.deadline = deadline
        self.setup_timeout = setup_timeout

    def spawn(self, role: str, idx: int, target: Callable[..., None], *args: Any) -> None:
        p = self.ctx.Process(target=target, args=args, daemon=True, name=f"bench-{role}{idx}")
        p.start()
        self.procs[(role, idx)] = p

    def wait(self, keys: Sequence[tuple[str, int]], event: str, server: Server) -> None:
        """Wait until every worker in ``keys`` reported ``event``; raise on error/timeout."""
        limit = self.setup_timeout if event == "ready" else 0.0
        deadline = time.monotonic() + limit if limit else self.deadline + 5.0
        missing = {k for k in keys if self.reports.get(k, {}).get("event") != event}
        if event == "ready":
            missing = {k for k in missing if self.reports.get(k, {}).get("event") != "done"}
        exited_at: dict[tuple[str, int], float] = {}
        while missing:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise RuntimeError(f"timed out waiting for {sorted(missing)} to be {event}")
            try:
                rep: Report = self.q.get(timeout=min(0.2, left))
            except queue.Empty:
                rep = {}
            if rep:
                key = (rep["role"], rep["idx"])
                if rep["event"] == "error":
                    raise RuntimeError(f"{rep['role']}{rep['idx']}: {rep['error']}")
                self.reports[key] = rep
                if rep["event"] == event or rep["event"] == "done":
                    missing.discard(key)
                continue
            for k in missing:
                p = self.procs[k]
                # an exited worker's last report may still be in flight: allow 1 s
                if p.exitcode is not None and now - exited_at.setdefault(k, now) > 1.0:
                    raise RuntimeError(f"worker {k[0]}{k[1]} died (exit code {p.exitcode})")
            if not server.alive():
                raise RuntimeError(f"{server.name} exited during the run")

    def go(
        self,
        go: Any,
        ready: Sequence[tuple[str, int]],
        done: Sequence[tuple[str, int]],
        server: Server,
    ) -> float:
        """Wait for ``ready``, set ``go``, wait for ``done``; the server CPU seconds in between."""
        self.wait(ready, "ready", server)
        cpu0 = server.cpu_seconds()
        go.set()
        self.wait(done, "done", server)
        return server.cpu_seconds() - cpu0

    def close(self) -> None:
        for p in self.procs.values():
            if p.is_alive():
                p.terminate()
        for p in self.procs.values():
            p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)
        self.q.cancel_join_thread()
        self.q.close()


def run_pubsub(server: Server, cfg: Config, n: int, n_subs: int) -> RunResult:
    """1 publisher -> ``n_subs`` subscribers (0 = publish-only)."""
    t_start = time.monotonic()
    deadline = t_start + cfg.timeout
    run = Run(deadline, cfg.setup_timeout)
    progress: Counters = run.ctx.Array("q", max(1, n_subs), lock=False)
    go = run.ctx.Event()
    subject = f"bench.{uuid.uuid4().hex[:12]}"
    try:
        subs = [("sub", i) for i in range(n_subs)]
        for i in range(n_subs):
            run.spawn(
                "sub",
                i,
                subscriber_main,
                server.port,
                subject,
                1,
                cfg.size,
                n,
                i,
                progress,
                run.q,
                deadline,
                cfg.idle_timeout,
            )
        run.wait(subs, "ready", server)
        run.spawn(
            "pub",
            0,
            publisher_main,
            server.port,
            subject,
            cfg.size,
            n,
            run.q,
            go,
            progress,
            n_subs,
            cfg.flow,
            deadline,
            cfg.idle_timeout,
        )
        server_cpu = run.go(go, [("pub", 0)], [("pub", 0), *subs], server)
    except RuntimeError as exc:
        counts = [progress[i] for i in range(n_subs)]
        extra = f" (subscriber counts: {counts} of {n})" if n_subs else ""
        return RunResult(False, error=f"{exc}{extra}")
    finally:
        run.close()
    pub = run.reports[("pub", 0)]
    pub_wall = max(1e-9, pub["last"] - pub["first"])
    metrics = {
        "pub_rate": n / pub_wall,
        "pub_cpu": pub["cpu"] / pub_wall,
        "server_cpu": server_cpu / pub_wall,
    }
    if n_subs == 0:
        metrics["rate"] = metrics["pub_rate"]
        return RunResult(True, metrics)
    reps = [run.reports[k] for k in subs]
    span = max(1e-9, max(r["last"] for r in reps) - min(r["first"] for r in reps))
    metrics["rate"] = n / span
    metrics["delivered"] = n * n_subs / span
    walls = [max(1e-9, r["last"] - r["first"]) for r in reps]
    metrics["slowest_sub_rate"] = n / max(walls)
    metrics["sub_cpu_max"] = max(r["cpu"] / w for r, w in zip(reps, walls, strict=True))
    return RunResult(True, metrics)


def run_reqrep(server: Server, cfg: Config, n_req: int, n_warm: int) -> RunResult:
    deadline = time.monotonic() + cfg.timeout
    run = Run(deadline, cfg.setup_timeout)
    subject = f"bench.rpc.{uuid.uuid4().hex[:12]}"
    try:
        run.spawn("rep", 0, responder_main, server.port, subject, run.q, deadline)
        run.wait([("rep", 0)], "ready", server)
        run.spawn(
            "req",
            0,
            requester_main,
            server.port,
            subject,
            cfg.size,
            n_req,
            n_warm,
            run.q,
            deadline,
            cfg.idle_timeout,
        )
        run.wait([("req", 0)], "done", server)
    except RuntimeError as exc:
        return RunResult(False, error=str(exc))
    finally:
        run.close()
    rep = run.reports[("req", 0)]
    keys = ("p50_us", "p90_us", "p99_us", "p999_us", "min_us", "max_us", "mean_us", "req_per_s")
    return RunResult(True, {k: float(rep[k]) for k in keys})


def run_js(scen: str, server: Server, cfg: Config, warmup: bool) -> RunResult:
    """One JetStream publish run on a fresh stream (created and deleted over the network)."""
    _, mode, store = scen.split("-")
    storage = {"file": "file", "mem": "memory"}[store]
    deadline = time.monotonic() + cfg.timeout
    tag = uuid.uuid4().hex[:10]
    stream, subject = f"BENCH_{tag}", f"bench.js.{tag}"
    t_api = cfg.setup_timeout
    body = {"name": stream, "subjects": [subject], "storage": storage}
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{stream}", body, t_api)
    except (BenchError, OSError) as exc:
        return RunResult(False, error=f"stream create failed: {_exc_text(exc)}")
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
        err = _exc_text(exc)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"stream delete failed: {err}")
    return result


def _exc_text(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out (server not answering)"
    return f"{type(exc).__name__}: {exc}"


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
    if mode == "async":
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
        return RunResult(False, metrics, f"stream info failed: {_exc_text(exc)}")
    if (err := api_error(info)) is not None:
        return RunResult(False, metrics, f"stream info failed: {err}")
    stored = info.get("state", {}).get("messages")
    if stored != count:
        return RunResult(False, metrics, f"{count} acks but the stream holds {stored} messages")
    return RunResult(True, metrics)


# --------------------------------------------------------------------------- consumers


class StreamCache:
    """Pre-filled streams for the consumer scenarios, one per (server start, storage).

    Filling is not timed and done once: every consumer run (warm-up included) reads the
    same stream from the start with a new durable consumer, which is deleted afterwards.
    A restarted server (new ``starts``) gets a new stream.
    """

    def __init__(self) -> None:
        self.streams: dict[tuple[str, int, str], tuple[str, str]] = {}

    def get(self, server: Server, cfg: Config, storage: str) -> tuple[str, str]:
        key = (server.name, server.starts, storage)
        if key in self.streams:
            return self.streams[key]
        tag = uuid.uuid4().hex[:10]
        stream, subject = f"CONS_{tag}", f"bench.cons.{tag}"
        body = {"name": stream, "subjects": [subject], "storage": storage}
        doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{stream}", body, cfg.setup_timeout)
        if (err := api_error(doc)) is not None:
            raise BenchError(f"stream create failed: {err}")
        n = cfg.js_consume_msgs
        deadline = time.monotonic() + cfg.timeout
        try:
            st = prefill(
                server.port, subject, cfg.size, n, cfg.js_window, deadline, cfg.idle_timeout
            )
            info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, cfg.setup_timeout)
            if (err := api_error(info)) is not None:
                raise BenchError(f"stream info failed: {err}")
            stored = info.get("state", {}).get("messages")
            if stored != n:
                raise BenchError(f"prefill: {n} acks but the stream holds {stored} messages")
        except BaseException:
            self._delete(server, cfg, stream)
            raise
        print(
            f"  {'prefill':13} {server.name:16} {storage:10} {n:,} msgs in {st['seconds']:.1f}s"
            f" ({st['rate']:,.0f} msg/s)",
            file=sys.stderr,
            flush=True,
        )
        self.streams[key] = (stream, subject)
        return stream, subject

    def release(self, servers: list[Server], cfg: Config, keep: set[str]) -> None:
        """Delete the cached streams whose storage no remaining scenario needs."""
        by_name = {s.name: s for s in servers}
        for key in list(self.streams):
            name, starts, storage = key
            if storage in keep:
                continue
            stream, _ = self.streams.pop(key)
            srv = by_name.get(name)
            if srv is not None and srv.starts == starts and srv.alive():
                self._delete(srv, cfg, stream)

    @staticmethod
    def _delete(server: Server, cfg: Config, stream: str) -> None:
        try:
            js_api(server.port, f"$JS.API.STREAM.DELETE.{stream}", None, cfg.setup_timeout)
        except (BenchError, OSError) as exc:
            print(f"    (deleting {stream} failed: {_exc_text(exc)})", file=sys.stderr)


def _consumer_info(
    server: Server, cfg: Config, stream: str, durable: str, want: Callable[[dict[str, Any]], bool]
) -> tuple[dict[str, Any], str | None]:
    """Poll ``CONSUMER.INFO`` (bounded) until ``want(info)``; return the last info and an error."""
    deadline = time.monotonic() + cfg.setup_timeout
    subject = f"$JS.API.CONSUMER.INFO.{stream}.{durable}"
    while True:
        try:
            info = js_api(server.port, subject, None, cfg.setup_timeout)
        except (BenchError, OSError) as exc:
            return {}, f"consumer info failed: {_exc_text(exc)}"
        if (err := api_error(info)) is not None:
            return info, f"consumer info failed: {err}"
        if want(info) or time.monotonic() > deadline:
            return info, None
        time.sleep(0.02)


def _check_consumed(
    server: Server, cfg: Config, stream: str, durable: str, n: int, acked: bool, exact: bool
) -> str | None:
    """After a run: the consumer delivered ``n`` messages once each (and all are acked)."""

    def state(info: dict[str, Any]) -> tuple[int, int, int, int]:
        return (
            int(info.get("delivered", {}).get("stream_seq", -1)),
            int(info.get("ack_floor", {}).get("stream_seq", -1)),
            int(info.get("num_ack_pending", -1)),
            int(info.get("num_redelivered", -1)),
        )

    def done(info: dict[str, Any]) -> bool:
        delivered, floor, pending, redelivered = state(info)
        if not exact:
            return delivered >= n and redelivered == 0
        return delivered == n and redelivered == 0 and (not acked or (floor == n and pending == 0))

    info, err = _consumer_info(server, cfg, stream, durable, done)
    if err is not None:
        return err
    if not done(info):
        delivered, floor, pending, redelivered = state(info)
        return (
            f"consumer state after {n} messages: delivered stream seq {delivered}, ack floor"
            f" {floor}, {pending} acks pending, {redelivered} redelivered"
        )
    return None


def run_consumer(
    scen: str, server: Server, cfg: Config, warmup: bool, cache: StreamCache
) -> RunResult:
    """One consumer run: a new durable consumer on the cached pre-filled stream."""
    if scen == E2E:
        return run_e2e(server, cfg, warmup)
    storage = CONSUMER_STORAGE[scen]
    try:
        stream, subject = cache.get(server, cfg, storage)
    except (BenchError, OSError) as exc:
        return RunResult(False, error=f"pre-filling the stream: {_exc_text(exc)}")
    total = cfg.js_consume_msgs
    n = max(1, total // 10) if warmup else total
    durable = f"C_{uuid.uuid4().hex[:10]}"
    deadline = time.monotonic() + cfg.timeout
    run = Run(deadline, cfg.setup_timeout)
    go = run.ctx.Event()
    key = ("cons", 0)
    acked = scen != "js-pull-none"
    exact = not (warmup and scen == "js-push")  # a push consumer sends ahead of the reader
    ccfg: dict[str, Any] = {
        "deliver_policy": "all",
        "replay_policy": "instant",
        "ack_policy": "explicit" if acked else "none",
    }
    result: RunResult | None = None
    created = False
    try:
        if scen == "js-push":
            ccfg["max_ack_pending"] = cfg.js_push_max_ack_pending
            target: Callable[..., None] = push_main
            args: tuple[Any, ...] = (ccfg, exact)
            created = True  # the worker creates it; delete it whatever happens
        else:
            if acked:  # like nats bench: max_ack_pending = batch x clients
                ccfg["max_ack_pending"] = cfg.js_pull_batch
            body = {"stream_name": stream, "config": {**ccfg, "durable_name": durable}}
            subj = f"$JS.API.CONSUMER.CREATE.{stream}.{durable}"
            try:
                doc = js_api(server.port, subj, body, cfg.setup_timeout)
            except (BenchError, OSError) as exc:
                return RunResult(False, error=f"consumer create failed: {_exc_text(exc)}")
            if (err := api_error(doc)) is not None:
                return RunResult(False, error=f"consumer create failed: {err}")
            created = True
            target = pull_main
            args = (cfg.js_pull_batch, acked)
        common = (server.port, stream, durable, subject, cfg.size, n, *args)
        run.spawn("cons", 0, target, *common, run.q, go, deadline, cfg.idle_timeout)
        server_cpu = run.go(go, [key], [key], server)
    except RuntimeError as exc:
        result = RunResult(False, error=str(exc))
    finally:
        run.close()
    if result is None:
        rep = run.reports[key]
        count = int(rep["count"])
        wall = max(1e-9, rep["last"] - rep["first"])
        metrics = {
            "count": float(count),
            "wall_s": wall,
            "rate": count / wall,
            "cons_cpu": rep["cpu"] / wall,
            "server_cpu": server_cpu / wall,
            "slow_chunks": float(rep["slow_chunks"]),
        }
        if "fetches" in rep:
            metrics["fetches"] = float(rep["fetches"])
        err = _check_consumed(server, cfg, stream, durable, n, acked, exact)
        result = RunResult(err is None, metrics, err or "")
    if created and server.alive():
        try:
            doc = js_api(
                server.port, f"$JS.API.CONSUMER.DELETE.{stream}.{durable}", None, cfg.setup_timeout
            )
            err = api_error(doc)
        except (BenchError, OSError) as exc:
            err = _exc_text(exc)
        if err is not None and result.ok:
            result = RunResult(False, result.metrics, f"consumer delete failed: {err}")
    return result


def run_e2e(server: Server, cfg: Config, warmup: bool) -> RunResult:
    """Publish -> pull consumer latency on a fresh memory stream (deleted afterwards)."""
    deadline = time.monotonic() + cfg.timeout
    tag = uuid.uuid4().hex[:10]
    stream, subject, durable = f"E2E_{tag}", f"bench.e2e.{tag}", "LAT"
    t_api = cfg.setup_timeout
    body: dict[str, Any] = {"name": stream, "subjects": [subject], "storage": "memory"}
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{stream}", body, t_api)
        err = api_error(doc)
        if err is None:
            ccfg = {"durable_name": durable, "ack_policy": "explicit", "deliver_policy": "all"}
            body = {"stream_name": stream, "config": ccfg}
            doc = js_api(server.port, f"$JS.API.CONSUMER.CREATE.{stream}.{durable}", body, t_api)
            err = api_error(doc)
    except (BenchError, OSError) as exc:
        err = _exc_text(exc)
    result: RunResult | None = None
    if err is not None:
        result = RunResult(False, error=f"stream/consumer create failed: {err}")
    else:
        run = Run(deadline, cfg.setup_timeout)
        go = run.ctx.Event()
        key = ("cons", 0)
        n = max(1, cfg.js_sync_msgs // 10) if warmup else cfg.js_sync_msgs
        max_time = max(0.25, cfg.js_e2e_time / 4) if warmup else cfg.js_e2e_time
        n_warm = 0 if warmup else cfg.js_sync_warmup
        args = (n, n_warm, max_time, cfg.js_pull_batch)
        try:
            common = (server.port, stream, durable, subject, cfg.size, *args)
            run.spawn("cons", 0, e2e_main, *common, run.q, go, deadline, cfg.idle_timeout)
            server_cpu = run.go(go, [key], [key], server)
        except RuntimeError as exc:
            result = RunResult(False, error=str(exc))
        finally:
            run.close()
        if result is None:
            rep = run.reports[key]
            count = int(rep["count"])
            wall = max(1e-9, rep["last"] - rep["first"])
            metrics: dict[str, float] = {
                "count": float(count),
                "wall_s": wall,
                "cons_cpu": rep["cpu"] / wall,
                "server_cpu": server_cpu / wall,
                "slow_chunks": float(rep["slow_chunks"]),
            }
            for k in ("p50_us", "p90_us", "p99_us", "p999_us", "min_us", "max_us", "mean_us"):
                metrics[k] = float(rep[k])
            metrics["rate"] = float(rep["rate"])
            err = _check_consumed(server, cfg, stream, durable, count, True, True)
            if err is None:
                try:
                    info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, t_api)
                    err = api_error(info)
                    stored = info.get("state", {}).get("messages")
                    if err is None and stored != count:
                        err = f"{count} delivered but the stream holds {stored} messages"
                except (BenchError, OSError) as exc:
                    err = f"stream info failed: {_exc_text(exc)}"
            result = RunResult(err is None, metrics, err or "")
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.DELETE.{stream}", None, t_api)
        err = api_error(doc)
    except (BenchError, OSError) as exc:
        err = _exc_text(exc)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"stream delete failed: {err}")
    return result


# --------------------------------------------------------------------------- KV / Object Store


def _api_ok(server: Server, cfg: Config, subject: str, body: dict[str, Any] | None) -> str | None:
    """One JetStream API request; the error text or None."""
    try:
        return api_error(js_api(server.port, subject, body, cfg.setup_timeout))
    except (BenchError, OSError) as exc:
        return _exc_text(exc)


def _stream_state(server: Server, cfg: Config, stream: str) -> tuple[dict[str, Any], str | None]:
    try:
        info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, cfg.setup_timeout)
    except (BenchError, OSError) as exc:
        return {}, f"stream info failed: {_exc_text(exc)}"
    if (err := api_error(info)) is not None:
        return {}, f"stream info failed: {err}"
    state = info.get("state", {})
    return state if isinstance(state, dict) else {}, None


class KvCache:
    """Filled KV buckets / objects for the read scenarios, one per server start."""

    def __init__(self) -> None:
        self.kv: dict[tuple[str, int], str] = {}
        self.obj: dict[tuple[str, int], tuple[str, str, dict[str, Any]]] = {}

    def kv_bucket(self, server: Server, cfg: Config) -> str:
        key = (server.name, server.starts)
        if key in self.kv:
            return self.kv[key]
        bucket = f"GET{uuid.uuid4().hex[:10]}"
        err = _api_ok(
            server, cfg, f"$JS.API.STREAM.CREATE.KV_{bucket}", kv_stream_config(bucket)
        )
        if err is not None:
            raise BenchError(f"kv bucket create failed: {err}")
        deadline = time.monotonic() + cfg.timeout
        try:
            rep = kv_fill(server.port, bucket, cfg.kv_keys, cfg.size, deadline, cfg.idle_timeout)
            state, err = _stream_state(server, cfg, f"KV_{bucket}")
            if err is None and state.get("messages") != cfg.kv_keys:
                err = f"kv fill: the bucket holds {state.get('messages')} of {cfg.kv_keys} keys"
            if err is not None:
                raise BenchError(err)
        except BaseException:
            _api_ok(server, cfg, f"$JS.API.STREAM.DELETE.KV_{bucket}", None)
            raise
        wall = rep["last"] - rep["first"]
        print(
            f"  {'prefill':13} {server.name:16} {'kv':10} {cfg.kv_keys:,} keys in {wall:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        self.kv[key] = bucket
        return bucket

    def object(self, server: Server, cfg: Config) -> tuple[str, str, dict[str, Any]]:
        key = (server.name, server.starts)
        if key in self.obj:
            return self.obj[key]
        bucket, name = f"GET{uuid.uuid4().hex[:10]}", "bench-object.bin"
        err = _api_ok(
            server, cfg, f"$JS.API.STREAM.CREATE.OBJ_{bucket}", obj_stream_config(bucket)
        )
        if err is not None:
            raise BenchError(f"object store create failed: {err}")
        deadline = time.monotonic() + cfg.timeout
        try:
            rep = obj_put(
                server.port,
                bucket,
                name,
                obj_data(cfg.obj_bytes),
                cfg.obj_window,
                deadline,
                cfg.idle_timeout,
            )
        except BaseException:
            _api_ok(server, cfg, f"$JS.API.STREAM.DELETE.OBJ_{bucket}", None)
            raise
        print(
            f"  {'prefill':13} {server.name:16} {'object':10} {cfg.obj_bytes / MB:g} MiB in"
            f" {rep['last'] - rep['first']:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        self.obj[key] = (bucket, name, rep)
        return self.obj[key]

    def release(self, servers: list[Server], cfg: Config, kv: bool, obj: bool) -> None:
        by_name = {s.name: s for s in servers}
        for cache, prefix, drop in ((self.kv, "KV_", kv), (self.obj, "OBJ_", obj)):
            if not drop:
                continue
            for (name, starts), val in list(cache.items()):
                del cache[(name, starts)]
                srv = by_name.get(name)
                bucket = val if isinstance(val, str) else val[0]
                if srv is not None and srv.starts == starts and srv.alive():
                    _api_ok(srv, cfg, f"$JS.API.STREAM.DELETE.{prefix}{bucket}", None)


def _worker_run(
    server: Server, cfg: Config, target: Callable[..., None], args: tuple[Any, ...]
) -> tuple[Report | None, float, str]:
    """Spawn one worker (role "kv"/"obj" by target), go, wait: (report, server cpu s, error)."""
    deadline = time.monotonic() + cfg.timeout
    run = Run(deadline, cfg.setup_timeout)
    go = run.ctx.Event()
    role = "obj" if target in (obj_put_main, obj_get_main) else "kv"
    key = (role, 0)
    try:
        run.spawn(role, 0, target, *args, run.q, go, deadline, cfg.idle_timeout)
        server_cpu = run.go(go, [key], [key], server)
        return run.reports[key], server_cpu, ""
    except RuntimeError as exc:
        return None, 0.0, str(exc)
    finally:
        run.close()


def _kv_metrics(rep: Report, server_cpu: float) -> dict[str, float]:
    wall = max(1e-9, rep["last"] - rep["first"])
    m = {
        "count": float(rep["count"]),
        "wall_s": wall,
        "client_cpu": rep["cpu"] / wall,
        "server_cpu": server_cpu / wall,
        "rate": float(rep["rate"]),
    }
    for k in ("p50_us", "p90_us", "p99_us", "p999_us", "min_us", "max_us", "mean_us"):
        if k in rep:
            m[k] = float(rep[k])
    return m


def run_kv(scen: str, server: Server, cfg: Config, warmup: bool, cache: KvCache) -> RunResult:
    sync = scen.endswith("-sync")
    window = 1 if sync else cfg.kv_window
    cap = cfg.kv_sync_ops if sync else cfg.kv_pipe_ops
    n = max(1, cap // 10) if warmup else cap
    n_warm = 0 if warmup or not sync else cfg.js_sync_warmup
    max_time = max(0.25, cfg.kv_time / 4) if warmup else cfg.kv_time
    if scen in KV_GET:
        try:
            bucket = cache.kv_bucket(server, cfg)
        except (BenchError, OSError) as exc:
            return RunResult(False, error=f"filling the bucket: {_exc_text(exc)}")
        args = (server.port, bucket, cfg.kv_keys, cfg.size, n, n_warm, max_time, window)
        rep, cpu, err = _worker_run(server, cfg, kv_get_main, args)
        if rep is None:
            return RunResult(False, error=err)
        return RunResult(True, _kv_metrics(rep, cpu))
    bucket = f"PUT{uuid.uuid4().hex[:10]}"
    stream = f"KV_{bucket}"
    err = _api_ok(server, cfg, f"$JS.API.STREAM.CREATE.{stream}", kv_stream_config(bucket))
    if err is not None:
        return RunResult(False, error=f"kv bucket create failed: {err}")
    args = (server.port, bucket, cfg.kv_keys, cfg.size, n, n_warm, max_time, window)
    rep, cpu, err = _worker_run(server, cfg, kv_put_main, args)
    result = RunResult(False, error=err)
    if rep is not None:
        metrics = _kv_metrics(rep, cpu)
        count = int(rep["count"])
        state, err = _stream_state(server, cfg, stream)
        if err is None and rep["max_seq"] != count:
            err = f"{count} PubAcks but the highest acked seq is {rep['max_seq']}"
        if err is None and (
            state.get("messages") != min(count, cfg.kv_keys) or state.get("last_seq") != count
        ):
            err = (
                f"{count} puts of {cfg.kv_keys} keys but the bucket holds"
                f" {state.get('messages')} messages, last seq {state.get('last_seq')}"
            )
        result = RunResult(err is None, metrics, err or "")
    err = _api_ok(server, cfg, f"$JS.API.STREAM.DELETE.{stream}", None)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"bucket delete failed: {err}")
    return result


def run_obj(scen: str, server: Server, cfg: Config, warmup: bool, cache: KvCache) -> RunResult:
    if scen == "obj-get":
        try:
            bucket, name, put = cache.object(server, cfg)
        except (BenchError, OSError) as exc:
            return RunResult(False, error=f"storing the object: {_exc_text(exc)}")
        rep, cpu, err = _worker_run(server, cfg, obj_get_main, (server.port, bucket, name))
        if rep is None:
            return RunResult(False, error=err)
        metrics = _kv_metrics(rep, cpu)
        if rep["digest"] != put["digest"] or rep["count"] != cfg.obj_bytes:
            err = f"read {rep['count']} bytes {rep['digest']}, stored {put['digest']}"
        # the ordered consumer is ephemeral: delete it now rather than after its inactivity
        # threshold (already gone = fine)
        subj = f"$JS.API.CONSUMER.DELETE.OBJ_{bucket}.{rep['consumer']}"
        derr = _api_ok(server, cfg, subj, None)
        if derr is not None and "not found" not in derr.lower():
            err = err or f"consumer delete failed: {derr}"
        return RunResult(not err, metrics, err)
    bucket = f"PUT{uuid.uuid4().hex[:10]}"
    stream = f"OBJ_{bucket}"
    err = _api_ok(server, cfg, f"$JS.API.STREAM.CREATE.{stream}", obj_stream_config(bucket))
    if err is not None:
        return RunResult(False, error=f"object store create failed: {err}")
    size = max(MB, cfg.obj_bytes // 10) if warmup else cfg.obj_bytes
    args = (server.port, bucket, "bench-object.bin", size, cfg.obj_window)
    rep, cpu, err = _worker_run(server, cfg, obj_put_main, args)
    result = RunResult(False, error=err)
    if rep is not None:
        metrics = _kv_metrics(rep, cpu)
        state, err = _stream_state(server, cfg, stream)
        want = int(rep["chunks"]) + 1
        if err is None and state.get("messages") != want:
            err = f"{want - 1} chunks + meta stored but the stream holds {state.get('messages')}"
        result = RunResult(err is None, metrics, err or "")
    err = _api_ok(server, cfg, f"$JS.API.STREAM.DELETE.{stream}", None)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"object store delete failed: {err}")
    return result


def run_scenario(
    name: str,
    server: Server,
    cfg: Config,
    warmup: bool,
    cache: StreamCache | None = None,
    kv_cache: KvCache | None = None,
) -> RunResult:
    if name in KV_SCENARIOS:
        kc = kv_cache if kv_cache is not None else KvCache()
        if name.startswith("obj-"):
            return run_obj(name, server, cfg, warmup, kc)
        return run_kv(name, server, cfg, warmup, kc)
    if name in CONSUMER_SCENARIOS:
        return run_consumer(
            name, server, cfg, warmup, cache if cache is not None else StreamCache()
        )
    if name in JS_SCENARIOS:
        return run_js(name, server, cfg, warmup)
    n = cfg.warm_msgs if warmup else cfg.msgs
    if name == "pub":
        return run_pubsub(server, cfg, n, 0)
    if name == "pubsub":
        return run_pubsub(server, cfg, n, 1)
    if name == "fanout":
        return run_pubsub(server, cfg, n, cfg.fanout)
    if name == "reqrep":
        if warmup:
            return run_reqrep(server, cfg, max(100, cfg.warm_requests // 2), 0)
        return run_reqrep(server, cfg, cfg.requests, cfg.warm_requests)
    raise ValueError(name)


# --------------------------------------------------------------------------- reporting


def fmt_num(v: float | None, kind: str, decimals: int = 0) -> str:
    if v is None:
        return "FAIL"
    if kind == "lat":
        return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,.{decimals}f}"


def aggregate(values: list[float], kind: str, how: str) -> float | None:
    if not values:
        return None
    if how == "best":
        return max(values) if kind == "tput" else min(values)
    return float(statistics.median(values))


def summary_line(name: str, res: RunResult) -> str:
    if not res.ok:
        return f"FAILED: {res.error.splitlines()[0] if res.error else '?'}"
    m = res.metrics
    if name in KV_SCENARIOS:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['client_cpu']:.0%}"
        if name.startswith("obj-"):
            return f"{m['rate']:,.1f} MiB/s ({m['count'] / MB:g} MiB)  {cpu}"
        lat = f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  " if "p50_us" in m else ""
        return f"{lat}{m['rate']:,.0f} ops/s ({m['count']:,.0f} ops)  {cpu}"
    if name in CONSUMER_SCENARIOS:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['cons_cpu']:.0%}"
        if name == E2E:
            return (
                f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  ({m['count']:,.0f} msgs)"
                f"  {cpu}"
            )
        extra = f", {m['fetches']:,.0f} fetches" if "fetches" in m else ""
        return f"{m['rate']:,.0f} msg/s ({m['count']:,.0f} msgs{extra})  {cpu}"
    if name in JS_SCENARIOS:
        cpu = f"cpu: server {m['server_cpu']:.0%} pub {m['pub_cpu']:.0%}"
        if name.startswith("js-async"):
            return f"{m['rate']:,.0f} acks/s ({m['count']:,.0f} msgs)  {cpu}"
        return (
            f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  {m['rate']:,.0f} msg/s"
            f" ({m['count']:,.0f} msgs)  {cpu}"
        )
    if name == "reqrep":
        return f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  ({m['req_per_s']:,.0f} req/s)"
    cpu = f"cpu: server {m['server_cpu']:.0%} pub {m['pub_cpu']:.0%}"
    if "sub_cpu_max" in m:
        cpu += f" sub(max) {m['sub_cpu_max']:.0%}"
    if name == "fanout":
        return f"{m['delivered']:,.0f} deliveries/s ({m['rate']:,.0f} msg/s)  {cpu}"
    if name == "pubsub":
        return f"{m['rate']:,.0f} msg/s at sub (pub {m['pub_rate']:,.0f} msg/s)  {cpu}"
    return f"{m['rate']:,.0f} msg/s  {cpu}"


def machine_info() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_impl": platform.python_implementation(),
    }


def print_header(
    cfg: Config,
    minfo: dict[str, Any],
    core: bool,
    js: bool,
    consumers: bool = False,
    kv: bool = False,
) -> None:
    print(
        f"machine: {minfo['nproc']} CPUs (usable {minfo['usable_cpus']}), {minfo['cpu_model']}, "
        f"{minfo['platform']}"
    )
    impl = f"{minfo['python_impl']} {minfo['python']}"
    print(f"load generator: {impl}, raw sockets, one OS process per client")
    if core:
        print(
            f"core load: {cfg.msgs:,} msgs x {cfg.size} B payload (warm-up {cfg.warm_msgs:,}), "
            f"fan-out {cfg.fanout} subs, {cfg.requests:,} requests "
            f"(+{cfg.warm_requests:,} warm-up); repeat {cfg.repeat} ({cfg.agg})"
        )
    if js:
        print(
            f"js load: {cfg.size} B payload, {cfg.js_time:g} s per run (warm-up run "
            f"{cfg.js_warm_time:g} s) or at most {cfg.js_msgs:,} async / {cfg.js_sync_msgs:,} "
            f"sync msgs; async window {cfg.js_window:,} acks; repeat {cfg.repeat} ({cfg.agg})"
        )
    if consumers:
        print(
            f"consumer load: {cfg.js_consume_msgs:,} pre-filled msgs per run (warm-up "
            f"{max(1, cfg.js_consume_msgs // 10):,}), pull batch {cfg.js_pull_batch}, push "
            f"max_ack_pending {cfg.js_push_max_ack_pending}; pub->pull latency {cfg.js_e2e_time:g}"
            f" s or {cfg.js_sync_msgs:,} msgs"
        )
    if kv:
        print(
            f"kv load: file buckets, {cfg.kv_keys:,} keys x {cfg.size} B values, {cfg.kv_time:g} s"
            f" per run (at most {cfg.kv_sync_ops:,} sync / {cfg.kv_pipe_ops:,} pipelined ops),"
            f" pipeline window {cfg.kv_window}; object {cfg.obj_bytes / MB:g} MiB in"
            f" 128 KiB chunks, put window {cfg.obj_window}"
        )
    sys.stdout.flush()


def print_servers(servers: list[Server]) -> None:
    for s in servers:
        ver = s.version if s.alive() else "(not running)"
        print(f"{s.name:16} version {ver:14} cmd: {shlex.join(s.cmd)}")
    sys.stdout.flush()


def render_table(
    rows: list[Row],
    scenarios: list[str],
    agg: dict[str, dict[str, dict[str, float | None]]],
    names: list[str],
) -> tuple[str, list[dict[str, Any]]]:
    """Columns = ``names``, then one ratio column A/B for every pair of ``RATIOS`` present.

    Column widths follow the content; when the ratio headings would make the table wider
    than ``MAX_WIDTH`` they are split over two lines (``natsd/`` above ``nats-server``).
    """
    pairs = [(a, b) for a, b in RATIOS if a in names and b in names]
    body: list[tuple[str, list[str], list[str]]] = []
    json_rows: list[dict[str, Any]] = []
    for row in rows:
        if row.scenario not in scenarios:
            continue
        vals: dict[str, float | None] = {}
        cells: list[str] = []
        for n in names:
            if not applies(row.scenario, n):
                cells.append("-")
                continue
            v = vals[n] = agg[row.scenario][n].get(row.metric)
            unit = f" {row.unit}" if row.kind == "tput" else ""
            cells.append(fmt_num(v, row.kind, row.decimals) + (unit if v is not None else ""))
        ratios: dict[str, float | None] = {}
        rcells: list[str] = []
        for a, b in pairs:
            va, vb = vals.get(a), vals.get(b)
            ratio = va / vb if va is not None and vb else None
            ratios[f"{a}/{b}"] = ratio
            rcells.append("-" if ratio is None else f"{ratio:.2f}" + "x" * (row.kind == "lat"))
        body.append((row.label, cells, rcells))
        doc: dict[str, Any] = {
            "row": row.label,
            "unit": row.unit if row.kind == "tput" else "us",
            **vals,
        }
        if f"{IMPL}/{REF}" in ratios:
            doc["ratio"] = ratios[f"{IMPL}/{REF}"]
        for k, v in ratios.items():
            doc[f"ratio_{k}"] = v
        json_rows.append(doc)

    w0 = max([len("scenario"), *(len(b[0]) for b in body)]) + 2
    widths = [max([len(n), *(len(b[1][i]) for b in body)]) + 2 for i, n in enumerate(names)]
    left = w0 + sum(widths)
    rw1 = [max([len(f"{a}/{b}"), *(len(r[2][i]) for r in body)]) for i, (a, b) in enumerate(pairs)]
    one_line = len("    ratio ") + sum(rw1) + 2 * max(0, len(pairs) - 1)
    two_lines = bool(pairs) and left + one_line > MAX_WIDTH
    # (line 1, line 2) of each ratio heading: "A/" above "B", or all of "A/B" on line 2;
    # the first one starts with "ratio "
    heads = [(f"{a}/", b) if two_lines else ("", f"{a}/{b}") for a, b in pairs]
    tops, bottoms = [t for t, _ in heads], [h for _, h in heads]
    if heads:
        labelled = tops if two_lines else bottoms
        labelled[0] = "ratio " + labelled[0]
    rws = [
        max([len(t), len(h), *(len(r[2][i]) for r in body)])
        for i, (t, h) in enumerate(zip(tops, bottoms, strict=True))
    ]

    def ratio_part(cells: list[str]) -> str:
        if not cells:
            return ""
        lead = "  " if two_lines else "    "  # (the two-line first heading is wide anyway)
        return lead + "  ".join(f"{c:>{w}}" for c, w in zip(cells, rws, strict=True))

    head = f"{'scenario':{w0}}" + "".join(f"{n:>{w}}" for n, w in zip(names, widths, strict=True))
    out = [(" " * left + ratio_part(tops)).rstrip()] if two_lines else []
    out.append(head + ratio_part(bottoms))
    for label, cells, rcells in body:
        line = f"{label:{w0}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        out.append((line + ratio_part(rcells)).rstrip())
    return "\n".join(out), json_rows


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark natsd against nats-server on loopback (same load, same run).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--msgs",
        type=int,
        default=None,
        help="messages per throughput run (default 1,000,000; 200,000 with --quick)",
    )
    p.add_argument("--size", type=int, default=128, help="payload bytes")
    p.add_argument("--fanout", type=int, default=5, help="subscribers in the fan-out scenario")
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="measured request/reply round trips (default 20,000; 5,000 with --quick)",
    )
    p.add_argument(
        "--warmup-requests",
        type=int,
        default=None,
        help="unmeasured round trips before measuring (default 2,000; 500 --quick)",
    )
    p.add_argument(
        "--warmup-msgs",
        type=int,
        default=None,
        help="messages in the warm-up run before each scenario (default msgs/10)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 200k msgs, 5k requests, 1 s JetStream runs, 20k consumer msgs",
    )
    p.add_argument("--repeat", type=int, default=1, help="measured runs per scenario and server")
    p.add_argument(
        "--agg", choices=("median", "best"), default="median", help="how to combine --repeat runs"
    )
    p.add_argument(
        "--only",
        default="",
        help="comma-separated subset of scenarios: "
        + ", ".join(SCENARIOS)
        + " (aliases: publish-only, pub->sub, fan-out, req/rep, pull-ack, pull-none, push,"
        " e2e, kv-put, kv-get, obj; groups: core, js, js-pub, consumers, kv); default: all"
        " but js-pull-ack-file and the kv group",
    )
    p.add_argument(
        "--no-js", action="store_true", help="skip the JetStream scenarios (core NATS only)"
    )
    p.add_argument("--js-only", action="store_true", help="run only the JetStream scenarios")
    p.add_argument(
        "--js-time",
        type=float,
        default=None,
        help="seconds of publishing per measured JetStream run (default 3; 1 with --quick);"
        " the warm-up run publishes for max(0.5, this/5) s",
    )
    p.add_argument(
        "--js-msgs",
        type=int,
        default=None,
        help="cap on messages per async JetStream run (default 1,000,000; 200,000 --quick)",
    )
    p.add_argument(
        "--js-sync-msgs",
        type=int,
        default=None,
        help="cap on messages per sync JetStream run (default 50,000; 10,000 --quick)",
    )
    p.add_argument(
        "--js-window",
        type=int,
        default=4000,
        help="async publish: max outstanding (unacknowledged) publishes",
    )
    p.add_argument(
        "--js-consume-msgs",
        type=int,
        default=None,
        help="messages pre-filled into the consumer scenarios' streams and consumed per"
        " measured run (default 50,000; 20,000 with --quick; warm-up runs read a tenth)",
    )
    p.add_argument(
        "--js-e2e-time",
        type=float,
        default=None,
        help="seconds of one-at-a-time publishing per measured publish -> pull-consumer"
        " latency run (default 1; 0.5 with --quick; capped by --js-sync-msgs)",
    )
    p.add_argument(
        "--js-pull-batch",
        type=int,
        default=100,
        help="pull scenarios: messages per fetch (also the pull consumer's max_ack_pending,"
        " as nats bench sets it, and the pull batch of the latency scenario)",
    )
    p.add_argument(
        "--js-push-max-ack-pending",
        type=int,
        default=500,
        help="push scenario: the consumer's max_ack_pending (nats bench's default)",
    )
    p.add_argument(
        "--kv-time",
        type=float,
        default=None,
        help="KV put/get: seconds per measured run (default 1; 0.5 with --quick); the"
        " warm-up run takes max(0.25, this/4) s",
    )
    p.add_argument("--kv-keys", type=int, default=10_000, help="KV: size of the key pool")
    p.add_argument(
        "--kv-window",
        type=int,
        default=256,
        help="KV pipelined put/get: max outstanding (unanswered) operations",
    )
    p.add_argument(
        "--kv-sync-ops",
        type=int,
        default=None,
        help="cap on ops per sync KV run (default 50,000; 10,000 with --quick)",
    )
    p.add_argument(
        "--obj-size",
        type=float,
        default=None,
        help="Object Store: object size in MiB (default 50; 10 with --quick)",
    )
    p.add_argument(
        "--obj-window",
        type=int,
        default=1,
        help="Object Store put: max unacknowledged chunks (1 = one at a time, like nats-py;"
        " more = pipelined like nats.go's PublishAsync)",
    )
    p.add_argument(
        "--store-dir",
        default=None,
        help="parent directory for the JetStream store directories (default: system temp)",
    )
    p.add_argument(
        "--servers",
        default=",".join(ALL_SERVERS),
        help=f"which servers to run (comma-separated subset of {','.join(ALL_SERVERS)};"
        f" {REF_SYNC} = nats-server with sync_interval: always, {IMPL_LAZY} = natsd with"
        f" sync_interval: {LAZY_INTERVAL} (started with -c CONF, not --natsd-js-args);"
        " both JetStream file scenarios only)",
    )
    p.add_argument(
        "--natsd-cmd",
        default=None,
        help="command to start natsd, shell-split; '-a 127.0.0.1 -p PORT' is appended"
        f" (default: '{sys.executable} -m natsd' with PYTHONPATH={REPO / 'src'})",
    )
    p.add_argument(
        "--nats-server-cmd",
        default=None,
        help=f"command to start the reference server (default {VENV_BIN}/nats-server)",
    )
    p.add_argument(
        "--natsd-js-args",
        default="-js -sd {store}",
        help="arguments appended to --natsd-cmd for the JetStream scenarios, shell-split;"
        " {store} = a fresh store directory",
    )
    p.add_argument(
        "--timeout", type=float, default=180.0, help="hard limit (s) for one measured run"
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        help="fail a run when no progress is made for this many seconds",
    )
    p.add_argument(
        "--start-timeout",
        type=float,
        default=30.0,
        help="limit (s) for a server to start answering with INFO",
    )
    p.add_argument(
        "--ping-every",
        type=int,
        default=65536,
        help="publisher flow control: PING every N messages (max 2 outstanding)",
    )
    p.add_argument(
        "--sub-window",
        type=int,
        default=131072,
        help="publisher may run at most N messages ahead of the slowest subscriber",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="write all numbers to FILE")
    p.add_argument("--keep-logs", action="store_true", help="keep server logs (path printed)")
    return p.parse_args(argv)


def build_config(a: argparse.Namespace) -> Config:
    msgs = a.msgs if a.msgs is not None else (200_000 if a.quick else 1_000_000)
    requests = a.requests if a.requests is not None else (5_000 if a.quick else 20_000)
    warm_req = a.warmup_requests
    if warm_req is None:
        warm_req = 500 if a.quick else 2_000
    warm_msgs = a.warmup_msgs if a.warmup_msgs is not None else max(1_000, msgs // 10)
    for name, v in (
        ("--msgs", msgs),
        ("--requests", requests),
        ("--fanout", a.fanout),
        ("--repeat", a.repeat),
        ("--warmup-msgs", warm_msgs),
    ):
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    if a.size < 0:
        raise SystemExit("--size must be >= 0")
    js_time = a.js_time if a.js_time is not None else (1.0 if a.quick else 3.0)
    js_msgs = a.js_msgs if a.js_msgs is not None else (200_000 if a.quick else 1_000_000)
    js_sync = a.js_sync_msgs
    if js_sync is None:
        js_sync = 10_000 if a.quick else 50_000
    consume = a.js_consume_msgs
    if consume is None:
        consume = 20_000 if a.quick else 50_000
    e2e_time = a.js_e2e_time if a.js_e2e_time is not None else (0.5 if a.quick else 1.0)
    if e2e_time <= 0:
        raise SystemExit("--js-e2e-time must be > 0")
    js_checks = (
        ("--js-msgs", js_msgs),
        ("--js-sync-msgs", js_sync),
        ("--js-window", a.js_window),
        ("--js-consume-msgs", consume),
        ("--js-pull-batch", a.js_pull_batch),
        ("--js-push-max-ack-pending", a.js_push_max_ack_pending),
    )
    for name, v in js_checks:
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    if js_time <= 0:
        raise SystemExit("--js-time must be > 0")
    kv_time = a.kv_time if a.kv_time is not None else (0.5 if a.quick else 1.0)
    kv_sync = a.kv_sync_ops if a.kv_sync_ops is not None else (10_000 if a.quick else 50_000)
    obj_mib = a.obj_size if a.obj_size is not None else (10.0 if a.quick else 50.0)
    if kv_time <= 0 or obj_mib <= 0:
        raise SystemExit("--kv-time and --obj-size must be > 0")
    for name, v in (
        ("--kv-keys", a.kv_keys),
        ("--kv-window", a.kv_window),
        ("--kv-sync-ops", kv_sync),
        ("--obj-window", a.obj_window),
    ):
        if v < 1:
            raise SystemExit(f"{name} must be >= 1")
    return Config(
        msgs=msgs,
        size=a.size,
        fanout=a.fanout,
        requests=requests,
        warm_requests=max(0, warm_req),
        warm_msgs=warm_msgs,
        repeat=a.repeat,
        agg=a.agg,
        timeout=a.timeout,
        idle_timeout=a.idle_timeout,
        setup_timeout=max(10.0, a.idle_timeout),
        flow=FlowConfig(ping_every=max(1, a.ping_every), sub_window=max(1, a.sub_window)),
        js_msgs=js_msgs,
        js_sync_msgs=js_sync,
        js_time=js_time,
        js_warm_time=max(0.5, js_time / 5),
        js_window=a.js_window,
        js_sync_warmup=100,
        js_consume_msgs=consume,
        js_e2e_time=e2e_time,
        js_pull_batch=a.js_pull_batch,
        js_push_max_ack_pending=a.js_push_max_ack_pending,
        kv_time=kv_time,
        kv_keys=a.kv_keys,
        kv_window=a.kv_window,
        kv_sync_ops=kv_sync,
        kv_pipe_ops=js_msgs,
        obj_bytes=int(obj_mib * MB),
        obj_window=a.obj_window,
    )


def select_scenarios(only: str, no_js: bool = False, js_only: bool = False) -> list[str]:
    if sum((bool(only), no_js, js_only)) > 1:
        raise SystemExit("--only, --no-js and --js-only are exclusive")
    if js_only:
        return list(JS_SCENARIOS)
    if no_js:
        return list(CORE_SCENARIOS)
    if not only:
        return list(DEFAULT_SCENARIOS)
    chosen: list[str] = []
    for tok in only.split(","):
        tok = tok.strip().lower()
        if not tok:
            continue
        if tok in GROUPS:
            chosen.extend(GROUPS[tok])
            continue
        if tok not in ALIASES:
            raise SystemExit(
                f"unknown scenario {tok!r}; choose from {', '.join(SCENARIOS)}, {', '.join(GROUPS)}"
            )
        chosen.append(ALIASES[tok])
    return [s for s in SCENARIOS if s in chosen]


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise SystemExit(128 + signum)


def make_js_servers(
    names: list[str],
    ref_cmd: list[str],
    impl_cmd: list[str],
    impl_env: dict[str, str],
    natsd_js_args: str,
    log_dir: Path,
    store_root: Path,
) -> list[Server]:
    """JetStream-enabled servers, each with its own (wiped on start) store directory."""
    out: list[Server] = []
    for n in names:
        d = store_root / n
        if n == REF:
            cmd = [*ref_cmd, "-js", "-sd", str(d)]
            out.append(Server(REF, cmd, log_dir, store_dir=d, log_stem=f"{REF}-js"))
        elif n == REF_SYNC:
            conf = store_root / f"{REF_SYNC}.conf"
            sd = json.dumps(str(d))
            conf.write_text(f"jetstream {{ store_dir: {sd}, sync_interval: always }}\n")
            out.append(Server(REF_SYNC, [*ref_cmd, "-c", str(conf)], log_dir, store_dir=d))
        elif n == IMPL:
            extra = [x.replace("{store}", str(d)) for x in shlex.split(natsd_js_args)]
            cmd = [*impl_cmd, *extra]
            out.append(Server(IMPL, cmd, log_dir, impl_env, store_dir=d, log_stem=f"{IMPL}-js"))
        elif n == IMPL_LAZY:
            # like REF_SYNC: a nats-server config file (natsd reads them), not --natsd-js-args
            conf = store_root / f"{IMPL_LAZY}.conf"
            sd, every = json.dumps(str(d)), json.dumps(LAZY_INTERVAL)
            conf.write_text(f"jetstream {{ store_dir: {sd}, sync_interval: {every} }}\n")
            cmd = [*impl_cmd, "-c", str(conf)]
            out.append(Server(IMPL_LAZY, cmd, log_dir, impl_env, store_dir=d))
        else:
            raise ValueError(n)
    return out


def run_phase(
    scenarios: list[str],
    servers: list[Server],
    cfg: Config,
    start_timeout: float,
    results: dict[str, dict[str, list[RunResult]]],
) -> dict[str, str]:
    """Start ``servers``, run every scenario on each (interleaved), stop them.

    Returns the servers that could not be (re)started, with the reason.
    """
    dead: dict[str, str] = {}
    try:
        for s in servers:
            try:
                s.start(start_timeout)
            except ServerStartError as exc:
                dead[s.name] = str(exc)
                print(f"!! {exc}", file=sys.stderr)
        print_servers(servers)
        if any(sc in JS_SCENARIOS for sc in scenarios):
            for s in servers:
                if s.alive() and not s.info.get("jetstream"):
                    print(f"!! {s.name}: INFO does not announce JetStream", file=sys.stderr)
        print(file=sys.stderr)
        cache = StreamCache()
        kv_cache = KvCache()
        for i_scen, scen in enumerate(scenarios):
            for rep in range(-1, cfg.repeat):  # -1 = warm-up
                for s in servers:
                    if not applies(scen, s.name):
                        continue
                    tag = "warm-up" if rep < 0 else f"run {rep + 1}/{cfg.repeat}"
                    if s.name in dead:
                        if rep >= 0:
                            results[scen][s.name].append(RunResult(False, error=dead[s.name]))
                        continue
                    t0 = time.monotonic()
                    res = run_scenario(scen, s, cfg, rep < 0, cache, kv_cache)
                    took = time.monotonic() - t0
                    print(
                        f"  {scen:13} {s.name:16} {tag:10} {summary_line(scen, res)}"
                        f"  [{took:.1f}s]",
                        file=sys.stderr,
                        flush=True,
                    )
                    if rep >= 0:
                        results[scen][s.name].append(res)
                    if not res.ok or not s.alive():
                        why = "server exited" if not s.alive() else "run failed"
                        print(
                            f"    ({why}; restarting {s.name}; log tail:)\n{s.log_tail(8)}",
                            file=sys.stderr,
                        )
                        try:
                            s.restart(start_timeout)
                        except ServerStartError as exc:
                            dead[s.name] = str(exc)
                            print(f"!! {exc}", file=sys.stderr)
            # drop the pre-filled streams no later scenario reads
            later = scenarios[i_scen + 1 :]
            cache.release(
                servers,
                cfg,
                {CONSUMER_STORAGE[sc] for sc in later if sc in CONSUMER_STORAGE and sc != E2E},
            )
            kv_cache.release(
                servers, cfg, not any(sc in KV_GET for sc in later), "obj-get" not in later
            )
    finally:
        for s in servers:
            s.stop()
    return dead


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    cfg = build_config(a)
    scenarios = select_scenarios(a.only, a.no_js, a.js_only)
    names = [n.strip() for n in a.servers.split(",") if n.strip()]
    if not names or any(n not in ALL_SERVERS for n in names):
        raise SystemExit(f"--servers must be a subset of {','.join(ALL_SERVERS)}")
    names = [n for n in ALL_SERVERS if n in names]
    core_scen = [sc for sc in scenarios if sc in CORE_SCENARIOS]
    js_scen = [sc for sc in scenarios if sc in JS_SCENARIOS and any(applies(sc, n) for n in names)]
    core_names = [n for n in names if any(applies(sc, n) for sc in CORE_SCENARIOS)]
    if core_scen and not core_names:
        core_scen = []
    if not core_scen and not js_scen:
        raise SystemExit("nothing to run (no scenario applies to the chosen --servers)")
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    log_dir = Path(tempfile.mkdtemp(prefix="natsd-bench-"))
    ref_cmd = shlex.split(a.nats_server_cmd) if a.nats_server_cmd else [str(VENV_BIN / REF)]
    env = dict(os.environ)
    if a.natsd_cmd:
        impl_cmd = shlex.split(a.natsd_cmd)
    else:
        impl_cmd = [sys.executable, "-m", "natsd"]
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p
        )
    core_all = {REF: Server(REF, ref_cmd, log_dir), IMPL: Server(IMPL, impl_cmd, log_dir, env)}
    core_servers = [core_all[n] for n in core_names] if core_scen else []
    js_servers: list[Server] = []
    store_root: Path | None = None
    disk: dict[str, float] = {}
    dead: dict[str, str] = {}
    results: dict[str, dict[str, list[RunResult]]] = {
        sc: {n: [] for n in names if applies(sc, n)} for sc in core_scen + js_scen
    }
    minfo = machine_info()
    has_cons = any(sc in CONSUMER_SCENARIOS for sc in js_scen)
    has_kv = any(sc in KV_SCENARIOS for sc in js_scen)
    print_header(cfg, minfo, bool(core_scen), bool(js_scen), has_cons, has_kv)
    try:
        if js_scen:
            store_root = Path(tempfile.mkdtemp(prefix="natsd-bench-js-", dir=a.store_dir))
            disk = fsync_rate(store_root)
            print(
                f"disk: 4 KiB append + fsync in {store_root}: {disk['rate']:,.0f} fsync/s "
                f"(p50 {disk['p50_us']:.0f} us, p99 {disk['p99_us']:.0f} us)"
            )
            js_names = [n for n in names if any(applies(sc, n) for sc in js_scen)]
            js_servers = make_js_servers(
                js_names, ref_cmd, impl_cmd, env, a.natsd_js_args, log_dir, store_root
            )
        if core_scen:
            dead.update(run_phase(core_scen, core_servers, cfg, a.start_timeout, results))
        if js_scen:
            dead.update(run_phase(js_scen, js_servers, cfg, a.start_timeout, results))
            assert store_root is not None
            disk_end = fsync_rate(store_root)
            disk.update({f"end_{k}": v for k, v in disk_end.items()})
            print(
                f"disk after the JetStream runs: {disk_end['rate']:,.0f} fsync/s "
                f"(p50 {disk_end['p50_us']:.0f} us, p99 {disk_end['p99_us']:.0f} us)"
            )
    except (KeyboardInterrupt, SystemExit) as exc:
        print(f"\ninterrupted ({type(exc).__name__}); stopping servers", file=sys.stderr)
        return 130
    finally:
        for s in core_servers + js_servers:
            s.stop()
        if store_root is not None:
            shutil.rmtree(store_root, ignore_errors=True)
        if a.keep_logs or dead:
            print(f"server logs: {log_dir}", file=sys.stderr)
        else:
            shutil.rmtree(log_dir, ignore_errors=True)

    rows = table_rows(cfg)
    agg: dict[str, dict[str, dict[str, float | None]]] = {}
    for scen, per_server in results.items():
        agg[scen] = {}
        for n, runs in per_server.items():
            good = [r for r in runs if r.ok]
            keys = sorted({k for r in good for k in r.metrics})
            agg[scen][n] = {}
            for k in keys:
                kind = "lat" if k.endswith("_us") else "tput"
                agg[scen][n][k] = aggregate([r.metrics[k] for r in good], kind, cfg.agg)
    json_rows: list[dict[str, Any]] = []
    for phase_scen, phase_names in (
        (core_scen, core_names),
        (js_scen, [n for n in names if any(applies(sc, n) for sc in js_scen)]),
    ):
        if not phase_scen:
            continue
        table, jrows = render_table(rows, phase_scen, agg, phase_names)
        json_rows += jrows
        print()
        print(table)
    file_rows = [sc for sc in js_scen if sc in (*JS_PUB_SCENARIOS, *KV_PUT, "obj-put")]
    if any(sc.endswith("-file") or sc in KV_SCENARIOS for sc in file_rows):
        if REF_SYNC in names:
            print(
                f"({REF_SYNC} = {REF} with jetstream {{ sync_interval: always }}: fsync before"
                " every ack; file streams only)"
            )
        if IMPL_LAZY in names:
            print(
                f'({IMPL_LAZY} = {IMPL} with jetstream {{ sync_interval: "{LAZY_INTERVAL}" }},'
                f" {REF}'s default: ack before fsync; file streams only)"
            )
    failures = [
        (scen, n, i + 1, r.error)
        for scen, per_server in results.items()
        for n, runs in per_server.items()
        for i, r in enumerate(runs)
        if not r.ok
    ]
    if failures:
        print("\nfailures:")
        seen: set[str] = set()
        for scen, n, i, err in failures:
            shown = err if err not in seen else err.splitlines()[0] + " (details above)"
            seen.add(err)
            print(f"  {scen} on {n} (run {i}): {shown}")

    if a.json:
        doc = {
            "machine": minfo,
            "disk_fsync": disk,
            "servers": {
                f"{s.name}{'-js' if s in js_servers else ''}": {
                    "cmd": s.cmd,
                    "version": s.version,
                    "info": s.info,
                }
                for s in core_servers + js_servers
            },
            "config": asdict(cfg),
            "scenarios": core_scen + js_scen,
            "table": json_rows,
            "aggregate": agg,
            "runs": {
                scen: {n: [asdict(r) for r in runs] for n, runs in per_server.items()}
                for scen, per_server in results.items()
            },
        }
        Path(a.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"\nwrote {a.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
