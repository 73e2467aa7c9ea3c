"""JetStream consumer scenarios: pull with and without acks, push with acks (each a new durable
consumer reading a pre-filled stream from the start), and publish -> pull-consumer latency.

The pre-filled streams are fixtures ("stream:memory", "stream:file"): filled once per server
start, read by every run, deleted when no later scenario reads them.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..consumerload import e2e_main, prefill, pull_main, push_main
from ..fixtures import Fixtures
from ..harness import Run, RunResult, exc_text
from ..jsload import api_error, js_api
from ..loadgen import BenchError
from ..scenario import Row, Scenario
from ..servers import REF_AND_IMPL, Server


def filled_stream(
    server: Server, cfg: Config, storage: str
) -> tuple[tuple[str, str], Callable[[], None]]:
    """A new stream holding ``cfg.js_consume_msgs`` messages: ((stream, subject), delete)."""
    tag = uuid.uuid4().hex[:10]
    stream, subject = f"CONS_{tag}", f"bench.cons.{tag}"
    body = {"name": stream, "subjects": [subject], "storage": storage}
    doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{stream}", body, cfg.setup_timeout)
    if (err := api_error(doc)) is not None:
        raise BenchError(f"stream create failed: {err}")
    n = cfg.js_consume_msgs
    deadline = time.monotonic() + cfg.timeout
    try:
        st = prefill(server.port, subject, cfg.size, n, cfg.js_window, deadline, cfg.idle_timeout)
        info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, cfg.setup_timeout)
        if (err := api_error(info)) is not None:
            raise BenchError(f"stream info failed: {err}")
        stored = info.get("state", {}).get("messages")
        if stored != n:
            raise BenchError(f"prefill: {n} acks but the stream holds {stored} messages")
    except BaseException:
        _delete_stream(server, cfg, stream)
        raise
    print(
        f"  {'prefill':13} {server.name:16} {storage:10} {n:,} msgs in {st['seconds']:.1f}s"
        f" ({st['rate']:,.0f} msg/s)",
        file=sys.stderr,
        flush=True,
    )
    return (stream, subject), lambda: _delete_stream(server, cfg, stream)


def _delete_stream(server: Server, cfg: Config, stream: str) -> None:
    try:
        js_api(server.port, f"$JS.API.STREAM.DELETE.{stream}", None, cfg.setup_timeout)
    except (BenchError, OSError) as exc:
        print(f"    (deleting {stream} failed: {exc_text(exc)})", file=sys.stderr)


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
            return {}, f"consumer info failed: {exc_text(exc)}"
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


class _Consume(Scenario):
    """One run: a new durable consumer on the fixture stream, read from the start, deleted."""

    groups = ("js", "consumers", "consumer")
    family = "consumer"
    servers = REF_AND_IMPL
    setup_what = "pre-filling the stream"
    acked = True

    def __init__(self, name: str, storage: str, aliases: tuple[str, ...], opt_in: bool) -> None:
        self.name = name
        self.storage = storage
        self.aliases = aliases
        self.opt_in = opt_in
        self.fixture = f"stream:{storage}"

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> tuple[str, str]:
        name = f"stream:{self.storage}"  # = self.fixture
        return fixtures.get(name, server, lambda: filled_stream(server, cfg, self.storage))

    def start(
        self,
        server: Server,
        cfg: Config,
        stream: str,
        durable: str,
        ccfg: dict[str, Any],
        exact: bool,
    ) -> tuple[Callable[..., None], tuple[Any, ...]] | str:
        """Prepare the consumer: the worker and its extra arguments, or an error text.
        ``exact``: the run checks that exactly the messages read were delivered."""
        raise NotImplementedError

    def is_exact(self, warmup: bool) -> bool:
        """Whether the consumer must have delivered exactly the messages read."""
        return True

    def run(
        self, server: Server, cfg: Config, warmup: bool, prepared: tuple[str, str]
    ) -> RunResult:
        stream, subject = prepared
        total = cfg.js_consume_msgs
        n = max(1, total // 10) if warmup else total
        durable = f"C_{uuid.uuid4().hex[:10]}"
        deadline = time.monotonic() + cfg.timeout
        run = Run(deadline, cfg.setup_timeout)
        go = run.ctx.Event()
        key = ("cons", 0)
        acked = self.acked
        exact = self.is_exact(warmup)
        ccfg: dict[str, Any] = {
            "deliver_policy": "all",
            "replay_policy": "instant",
            "ack_policy": "explicit" if acked else "none",
        }
        result: RunResult | None = None
        # From here the consumer may exist (a push worker creates its own): delete it after.
        created = False
        try:
            started = self.start(server, cfg, stream, durable, ccfg, exact)
            if isinstance(started, str):
                return RunResult(False, error=started)
            created = True
            target, args = started
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
            subj = f"$JS.API.CONSUMER.DELETE.{stream}.{durable}"
            try:
                doc = js_api(server.port, subj, None, cfg.setup_timeout)
                err = api_error(doc)
            except (BenchError, OSError) as exc:
                err = exc_text(exc)
            if err is not None and result.ok:
                result = RunResult(False, result.metrics, f"consumer delete failed: {err}")
        return result

    def report(self, m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['cons_cpu']:.0%}"
        extra = f", {m['fetches']:,.0f} fetches" if "fetches" in m else ""
        return f"{m['rate']:,.0f} msg/s ({m['count']:,.0f} msgs{extra})  {cpu}"


class Pull(_Consume):
    """Fetch ``--js-pull-batch`` messages, ack each (or not), fetch again."""

    def __init__(
        self, name: str, storage: str, acked: bool, aliases: tuple[str, ...], opt_in: bool = False
    ) -> None:
        super().__init__(name, storage, aliases, opt_in)
        self.acked = acked

    def rows(self, cfg: Config) -> list[Row]:
        what = "ack" if self.acked else "none"
        store = "mem" if self.storage == "memory" else self.storage
        label = f"js pull {what} {store} (batch {cfg.js_pull_batch})"
        return [Row(label, self.name, "rate", "tput")]

    def start(
        self,
        server: Server,
        cfg: Config,
        stream: str,
        durable: str,
        ccfg: dict[str, Any],
        exact: bool,
    ) -> tuple[Callable[..., None], tuple[Any, ...]] | str:
        if self.acked:  # like nats bench: max_ack_pending = batch x clients
            ccfg["max_ack_pending"] = cfg.js_pull_batch
        body = {"stream_name": stream, "config": {**ccfg, "durable_name": durable}}
        subj = f"$JS.API.CONSUMER.CREATE.{stream}.{durable}"
        try:
            doc = js_api(server.port, subj, body, cfg.setup_timeout)
        except (BenchError, OSError) as exc:
            return f"consumer create failed: {exc_text(exc)}"
        if (err := api_error(doc)) is not None:
            return f"consumer create failed: {err}"
        return pull_main, (cfg.js_pull_batch, self.acked)


class Push(_Consume):
    """A durable push consumer (the worker creates it) acking every message."""

    def __init__(
        self,
        name: str = "js-push",
        storage: str = "memory",
        aliases: tuple[str, ...] = ("push",),
        opt_in: bool = False,
    ) -> None:
        super().__init__(name, storage, aliases, opt_in=opt_in)

    def rows(self, cfg: Config) -> list[Row]:
        store = "mem" if self.storage == "memory" else self.storage
        return [Row(f"js push ack {store}", self.name, "rate", "tput")]

    def is_exact(self, warmup: bool) -> bool:
        return not warmup  # a push consumer sends ahead of the reader

    def start(
        self,
        server: Server,
        cfg: Config,
        stream: str,
        durable: str,
        ccfg: dict[str, Any],
        exact: bool,
    ) -> tuple[Callable[..., None], tuple[Any, ...]] | str:
        ccfg["max_ack_pending"] = cfg.js_push_max_ack_pending
        return push_main, (ccfg, exact)


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
        err = exc_text(exc)
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
                    err = f"stream info failed: {exc_text(exc)}"
            result = RunResult(err is None, metrics, err or "")
    try:
        doc = js_api(server.port, f"$JS.API.STREAM.DELETE.{stream}", None, t_api)
        err = api_error(doc)
    except (BenchError, OSError) as exc:
        err = exc_text(exc)
    if err is not None and result.ok:
        result = RunResult(False, result.metrics, f"stream delete failed: {err}")
    return result


class PubToPull(Scenario):
    """Publish one message at a time into a fresh memory stream; latency until the pull
    consumer (a waiting pull request, same process) receives it."""

    name = "js-e2e-latency"
    aliases = ("e2e", "js-e2e", "e2e-latency")
    groups = ("js", "consumers", "consumer")
    family = "consumer"
    servers = REF_AND_IMPL

    def rows(self, cfg: Config) -> list[Row]:
        return [
            Row("js pub->pull p50 (us)", self.name, "p50_us", "lat"),
            Row("js pub->pull p99 (us)", self.name, "p99_us", "lat"),
        ]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        return run_e2e(server, cfg, warmup)

    def report(self, m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} client {m['cons_cpu']:.0%}"
        return (
            f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  ({m['count']:,.0f} msgs)  {cpu}"
        )
