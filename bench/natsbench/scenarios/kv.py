"""Key-Value and Object Store scenarios: KV put and get (one at a time and pipelined) on a
file bucket, and put / get of one large object, through the clients' own subjects.

Reads use fixtures: "kv" (a bucket holding every key of the pool) and "obj" (one stored
object), filled once per server start. Writes make and delete a fresh bucket per run.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..fixtures import Fixtures
from ..harness import RunResult, api_ok, stream_state, worker_run
from ..kvload import (
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
from ..loadgen import BenchError, Report
from ..scenario import Row, Scenario
from ..servers import ALL_SERVERS, REF_AND_IMPL, Server


def filled_bucket(server: Server, cfg: Config) -> tuple[str, Callable[[], None]]:
    """A new KV bucket holding all ``cfg.kv_keys`` keys: (bucket, delete)."""
    bucket = f"GET{uuid.uuid4().hex[:10]}"
    err = api_ok(server, cfg, f"$JS.API.STREAM.CREATE.KV_{bucket}", kv_stream_config(bucket))
    if err is not None:
        raise BenchError(f"kv bucket create failed: {err}")
    deadline = time.monotonic() + cfg.timeout
    try:
        rep = kv_fill(server.port, bucket, cfg.kv_keys, cfg.size, deadline, cfg.idle_timeout)
        state, err = stream_state(server, cfg, f"KV_{bucket}")
        if err is None and state.get("messages") != cfg.kv_keys:
            err = f"kv fill: the bucket holds {state.get('messages')} of {cfg.kv_keys} keys"
        if err is not None:
            raise BenchError(err)
    except BaseException:
        api_ok(server, cfg, f"$JS.API.STREAM.DELETE.KV_{bucket}", None)
        raise
    wall = rep["last"] - rep["first"]
    print(
        f"  {'prefill':13} {server.name:16} {'kv':10} {cfg.kv_keys:,} keys in {wall:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    return bucket, lambda: _delete(server, cfg, f"KV_{bucket}")


def stored_object(
    server: Server, cfg: Config
) -> tuple[tuple[str, str, Report], Callable[[], None]]:
    """A new object store holding one ``cfg.obj_bytes`` object: ((bucket, name, put), delete)."""
    bucket, name = f"GET{uuid.uuid4().hex[:10]}", "bench-object.bin"
    err = api_ok(server, cfg, f"$JS.API.STREAM.CREATE.OBJ_{bucket}", obj_stream_config(bucket))
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
        api_ok(server, cfg, f"$JS.API.STREAM.DELETE.OBJ_{bucket}", None)
        raise
    print(
        f"  {'prefill':13} {server.name:16} {'object':10} {cfg.obj_bytes / MB:g} MiB in"
        f" {rep['last'] - rep['first']:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    return (bucket, name, rep), lambda: _delete(server, cfg, f"OBJ_{bucket}")


def _delete(server: Server, cfg: Config, stream: str) -> None:
    api_ok(server, cfg, f"$JS.API.STREAM.DELETE.{stream}", None)


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


def obj_label(cfg: Config) -> str:
    size = f"{cfg.obj_bytes / MB:g} MiB"
    return size if cfg.obj_window <= 1 else f"{size} (window {cfg.obj_window})"


class _Kv(Scenario):
    family = "kv"
    opt_in = True  # ~55 s more for `make bench`: --only kv (or --js-only) selects them

    def report(self, m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['client_cpu']:.0%}"
        lat = f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  " if "p50_us" in m else ""
        return f"{lat}{m['rate']:,.0f} ops/s ({m['count']:,.0f} ops)  {cpu}"


class _KvOps(_Kv):
    """``kv.put`` / ``kv.get`` one at a time (sync) or pipelined, keys from a pool."""

    def __init__(self, op: str, sync: bool) -> None:
        self.op = op
        self.sync = sync
        self.name = f"kv-{op}-{'sync' if sync else 'pipe'}"
        self.groups = ("js", "kv", f"kv-{op}")

    def rows(self, cfg: Config) -> list[Row]:
        if self.sync:
            return [
                Row(f"kv {self.op} sync (1 outstanding)", self.name, "rate", "tput", "ops/s"),
                Row(f"kv {self.op} sync p50 (us)", self.name, "p50_us", "lat"),
            ]
        label = f"kv {self.op} pipelined ({cfg.kv_window})"
        return [Row(label, self.name, "rate", "tput", "ops/s")]

    def load(self, cfg: Config, warmup: bool) -> tuple[int, int, float, int]:
        """(ops, unmeasured warm-up ops, seconds, window) of one run."""
        window = 1 if self.sync else cfg.kv_window
        cap = cfg.kv_sync_ops if self.sync else cfg.kv_pipe_ops
        n = max(1, cap // 10) if warmup else cap
        n_warm = 0 if warmup or not self.sync else cfg.js_sync_warmup
        max_time = max(0.25, cfg.kv_time / 4) if warmup else cfg.kv_time
        return n, n_warm, max_time, window


class KvPut(_KvOps):
    """Puts into a fresh bucket (all four servers: a put is a file-stream publish)."""

    servers = ALL_SERVERS

    def __init__(self, sync: bool) -> None:
        super().__init__("put", sync)

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        n, n_warm, max_time, window = self.load(cfg, warmup)
        bucket = f"PUT{uuid.uuid4().hex[:10]}"
        stream = f"KV_{bucket}"
        err = api_ok(server, cfg, f"$JS.API.STREAM.CREATE.{stream}", kv_stream_config(bucket))
        if err is not None:
            return RunResult(False, error=f"kv bucket create failed: {err}")
        args = (server.port, bucket, cfg.kv_keys, cfg.size, n, n_warm, max_time, window)
        rep, cpu, err = worker_run(server, cfg, kv_put_main, args)
        result = RunResult(False, error=err)
        if rep is not None:
            metrics = _kv_metrics(rep, cpu)
            count = int(rep["count"])
            state, err = stream_state(server, cfg, stream)
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
        err = api_ok(server, cfg, f"$JS.API.STREAM.DELETE.{stream}", None)
        if err is not None and result.ok:
            result = RunResult(False, result.metrics, f"bucket delete failed: {err}")
        return result


class KvGet(_KvOps):
    """Direct gets from the "kv" fixture bucket, keys in a shuffled order."""

    servers = REF_AND_IMPL
    fixture = "kv"
    setup_what = "filling the bucket"

    def __init__(self, sync: bool) -> None:
        super().__init__("get", sync)

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> str:
        return fixtures.get("kv", server, lambda: filled_bucket(server, cfg))

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: str) -> RunResult:
        n, n_warm, max_time, window = self.load(cfg, warmup)
        args = (server.port, prepared, cfg.kv_keys, cfg.size, n, n_warm, max_time, window)
        rep, cpu, err = worker_run(server, cfg, kv_get_main, args)
        if rep is None:
            return RunResult(False, error=err)
        return RunResult(True, _kv_metrics(rep, cpu))


class _Obj(_Kv):
    groups = ("js", "kv", "obj")

    def report(self, m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['client_cpu']:.0%}"
        return f"{m['rate']:,.1f} MiB/s ({m['count'] / MB:g} MiB)  {cpu}"


class ObjPut(_Obj):
    """``ObjectStore.put`` of one object into a fresh store, chunks checked after."""

    name = "obj-put"
    servers = ALL_SERVERS

    def rows(self, cfg: Config) -> list[Row]:
        return [Row(f"obj put {obj_label(cfg)}", self.name, "rate", "tput", "MiB/s", 1)]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        bucket = f"PUT{uuid.uuid4().hex[:10]}"
        stream = f"OBJ_{bucket}"
        err = api_ok(server, cfg, f"$JS.API.STREAM.CREATE.{stream}", obj_stream_config(bucket))
        if err is not None:
            return RunResult(False, error=f"object store create failed: {err}")
        size = max(MB, cfg.obj_bytes // 10) if warmup else cfg.obj_bytes
        args = (server.port, bucket, "bench-object.bin", size, cfg.obj_window)
        rep, cpu, err = worker_run(server, cfg, obj_put_main, args)
        result = RunResult(False, error=err)
        if rep is not None:
            metrics = _kv_metrics(rep, cpu)
            state, err = stream_state(server, cfg, stream)
            want = int(rep["chunks"]) + 1
            if err is None and state.get("messages") != want:
                held = state.get("messages")
                err = f"{want - 1} chunks + meta stored but the stream holds {held}"
            result = RunResult(err is None, metrics, err or "")
        err = api_ok(server, cfg, f"$JS.API.STREAM.DELETE.{stream}", None)
        if err is not None and result.ok:
            result = RunResult(False, result.metrics, f"object store delete failed: {err}")
        return result


class ObjGet(_Obj):
    """``ObjectStore.get`` of the "obj" fixture object, SHA-256 checked."""

    name = "obj-get"
    servers = REF_AND_IMPL
    fixture = "obj"
    setup_what = "storing the object"

    def rows(self, cfg: Config) -> list[Row]:
        return [Row(f"obj get {obj_label(cfg)}", self.name, "rate", "tput", "MiB/s", 1)]

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> tuple[str, str, Report]:
        return fixtures.get("obj", server, lambda: stored_object(server, cfg))

    def run(
        self, server: Server, cfg: Config, warmup: bool, prepared: tuple[str, str, Report]
    ) -> RunResult:
        bucket, name, put = prepared
        rep, cpu, err = worker_run(server, cfg, obj_get_main, (server.port, bucket, name))
        if rep is None:
            return RunResult(False, error=err)
        metrics = _kv_metrics(rep, cpu)
        if rep["digest"] != put["digest"] or rep["count"] != cfg.obj_bytes:
            err = f"read {rep['count']} bytes {rep['digest']}, stored {put['digest']}"
        # the ordered consumer is ephemeral: delete it now rather than after its inactivity
        # threshold (already gone = fine)
        subj = f"$JS.API.CONSUMER.DELETE.OBJ_{bucket}.{rep['consumer']}"
        derr = api_ok(server, cfg, subj, None)
        if derr is not None and "not found" not in derr.lower():
            err = err or f"consumer delete failed: {derr}"
        return RunResult(not err, metrics, err)
