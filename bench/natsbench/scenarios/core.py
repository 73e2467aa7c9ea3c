"""Core NATS scenarios: publish-only, 1->1 pub/sub, 1->N fan-out, request/reply latency.

Raw-socket workers from ``loadgen``: one publisher, ``n`` subscribers, a responder and a
requester, each in its own process.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..config import Config
from ..harness import Run, RunResult
from ..loadgen import (
    BenchError,
    Counters,
    await_route_interest,
    publisher_main,
    requester_main,
    responder_main,
    subscriber_main,
)
from ..scenario import Row, Scenario
from ..servers import REF_AND_IMPL, ClusterServer, Server


def run_pubsub(
    server: Server, cfg: Config, n: int, n_subs: int, sub_port: int = 0
) -> RunResult:
    """1 publisher -> ``n_subs`` subscribers (0 = publish-only); the subscribers on
    ``sub_port`` when given (another server of the publisher's cluster)."""
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
                sub_port or server.port,
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
        if sub_port:
            await_route_interest(server.port, sub_port, cfg.setup_timeout)
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
    except (RuntimeError, BenchError, OSError) as exc:
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


class _PubSub(Scenario):
    """1 publisher -> ``subscribers(cfg)`` subscribers on one subject."""

    groups = ("core",)
    servers = REF_AND_IMPL

    def subscribers(self, cfg: Config) -> int:
        raise NotImplementedError

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        n = cfg.warm_msgs if warmup else cfg.msgs
        return run_pubsub(server, cfg, n, self.subscribers(cfg))

    @staticmethod
    def _cpu(m: dict[str, float]) -> str:
        cpu = f"cpu: server {m['server_cpu']:.0%} pub {m['pub_cpu']:.0%}"
        if "sub_cpu_max" in m:
            cpu += f" sub(max) {m['sub_cpu_max']:.0%}"
        return cpu


class Publish(_PubSub):
    name = "pub"
    aliases = ("publish", "publish-only", "pub-only")

    def subscribers(self, cfg: Config) -> int:
        return 0

    def rows(self, cfg: Config) -> list[Row]:
        return [Row("publish-only", self.name, "rate", "tput")]

    def report(self, m: dict[str, float]) -> str:
        return f"{m['rate']:,.0f} msg/s  {self._cpu(m)}"


class PubSub(_PubSub):
    name = "pubsub"
    aliases = ("pub-sub", "pub->sub")

    def subscribers(self, cfg: Config) -> int:
        return 1

    def rows(self, cfg: Config) -> list[Row]:
        return [Row("pub->sub", self.name, "rate", "tput")]

    def report(self, m: dict[str, float]) -> str:
        return f"{m['rate']:,.0f} msg/s at sub (pub {m['pub_rate']:,.0f} msg/s)  {self._cpu(m)}"


class FanOut(_PubSub):
    name = "fanout"
    aliases = ("fan-out",)

    def subscribers(self, cfg: Config) -> int:
        return cfg.fanout

    def rows(self, cfg: Config) -> list[Row]:
        f = cfg.fanout
        return [
            Row(f"fan-out 1->{f} delivered", self.name, "delivered", "tput"),
            Row(f"fan-out 1->{f} per-msg", self.name, "rate", "tput"),
        ]

    def report(self, m: dict[str, float]) -> str:
        return f"{m['delivered']:,.0f} deliveries/s ({m['rate']:,.0f} msg/s)  {self._cpu(m)}"


class ReqRep(Scenario):
    name = "reqrep"
    aliases = ("req-rep", "req/rep", "latency")
    groups = ("core",)
    servers = REF_AND_IMPL

    def rows(self, cfg: Config) -> list[Row]:
        return [
            Row("req/rep p50 (us)", self.name, "p50_us", "lat"),
            Row("req/rep p99 (us)", self.name, "p99_us", "lat"),
        ]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        if warmup:
            return run_reqrep(server, cfg, max(100, cfg.warm_requests // 2), 0)
        return run_reqrep(server, cfg, cfg.requests, cfg.warm_requests)

    def report(self, m: dict[str, float]) -> str:
        return f"p50 {m['p50_us']:.1f} us  p99 {m['p99_us']:.1f} us  ({m['req_per_s']:,.0f} req/s)"


class _CrossServer(_PubSub):
    """The publisher on one server of a two-server cluster, the subscribers on the other:
    every message crosses the route (natsd cluster against nats-server cluster)."""

    family = "cluster"
    groups = ("core", "cluster")

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        assert isinstance(server, ClusterServer)
        n = cfg.warm_msgs if warmup else cfg.msgs
        return run_pubsub(server, cfg, n, self.subscribers(cfg), server.peer_port)


class CrossPubSub(_CrossServer):
    name = "xpubsub"
    aliases = ("cross-pubsub", "cluster-pubsub")

    def subscribers(self, cfg: Config) -> int:
        return 1

    def rows(self, cfg: Config) -> list[Row]:
        return [Row("cluster: pub A -> sub B", self.name, "rate", "tput")]

    def report(self, m: dict[str, float]) -> str:
        return f"{m['rate']:,.0f} msg/s at sub (pub {m['pub_rate']:,.0f} msg/s)  {self._cpu(m)}"


class CrossFanOut(_CrossServer):
    name = "xfanout"
    aliases = ("cross-fanout", "cluster-fanout")

    def subscribers(self, cfg: Config) -> int:
        return cfg.fanout

    def rows(self, cfg: Config) -> list[Row]:
        f = cfg.fanout
        return [Row(f"cluster: fan-out A -> 1x{f} B delivered", self.name, "delivered", "tput")]

    def report(self, m: dict[str, float]) -> str:
        return f"{m['delivered']:,.0f} deliveries/s ({m['rate']:,.0f} msg/s)  {self._cpu(m)}"
