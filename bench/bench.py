"""Benchmark natsd against the reference nats-server on loopback.

Starts both servers, runs identical raw-socket load against each (publisher,
subscribers, responder and requester each in their own OS process), and prints
msgs/s for both plus the ratio natsd/nats-server.  See bench/README.md.

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

from loadgen import (
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
IMPL = "natsd"

SCENARIOS = ("pub", "pubsub", "fanout", "reqrep")
ALIASES = {
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


def table_rows(cfg: Config) -> list[Row]:
    f = cfg.fanout
    return [
        Row("publish-only", "pub", "rate", "tput"),
        Row("pub->sub", "pubsub", "rate", "tput"),
        Row(f"fan-out 1->{f} delivered", "fanout", "delivered", "tput"),
        Row(f"fan-out 1->{f} per-msg", "fanout", "rate", "tput"),
        Row("req/rep p50 (us)", "reqrep", "p50_us", "lat"),
        Row("req/rep p99 (us)", "reqrep", "p99_us", "lat"),
    ]


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
        run.wait([("pub", 0)], "ready", server)
        cpu0 = server.cpu_seconds()
        go.set()
        run.wait([("pub", 0), *subs], "done", server)
        server_cpu = server.cpu_seconds() - cpu0
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


def run_scenario(name: str, server: Server, cfg: Config, warmup: bool) -> RunResult:
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


def fmt_num(v: float | None, kind: str) -> str:
    if v is None:
        return "FAIL"
    if kind == "lat":
        return f"{v:,.1f}" if v < 100 else f"{v:,.0f}"
    return f"{v:,.0f}"


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


def print_header(servers: list[Server], cfg: Config, minfo: dict[str, Any]) -> None:
    print(
        f"machine: {minfo['nproc']} CPUs (usable {minfo['usable_cpus']}), {minfo['cpu_model']}, "
        f"{minfo['platform']}"
    )
    impl = f"{minfo['python_impl']} {minfo['python']}"
    print(f"load generator: {impl}, raw sockets, one OS process per client")
    for s in servers:
        ver = s.version if s.alive() else "(not running)"
        print(f"{s.name:12} version {ver:14} cmd: {shlex.join(s.cmd)}")
    print(
        f"load: {cfg.msgs:,} msgs x {cfg.size} B payload (warm-up {cfg.warm_msgs:,}), "
        f"fan-out {cfg.fanout} subs, {cfg.requests:,} requests (+{cfg.warm_requests:,} warm-up); "
        f"repeat {cfg.repeat} ({cfg.agg})"
    )
    sys.stdout.flush()


def render_table(
    rows: list[Row],
    scenarios: list[str],
    agg: dict[str, dict[str, dict[str, float | None]]],
    names: list[str],
) -> tuple[str, list[dict[str, Any]]]:
    w0, w = 28, 18
    out = [f"{'scenario':{w0}}" + "".join(f"{n:>{w}}" for n in names)]
    if REF in names and IMPL in names:
        out[0] += f"    ratio ({IMPL}/{REF})"
    json_rows: list[dict[str, Any]] = []
    for row in rows:
        if row.scenario not in scenarios:
            continue
        vals = {n: agg[row.scenario][n].get(row.metric) for n in names}
        unit = " msg/s" if row.kind == "tput" else ""
        cells = (fmt_num(v, row.kind) + (unit if v is not None else "") for v in vals.values())
        line = f"{row.label:{w0}}" + "".join(f"{c:>{w}}" for c in cells)
        ratio: float | None = None
        if REF in names and IMPL in names:
            a, b = vals[IMPL], vals[REF]
            if a is not None and b:
                ratio = a / b
                line += f"    {ratio:.2f}" + ("x" if row.kind == "lat" else "")
            else:
                line += "    -"
        out.append(line)
        json_rows.append(
            {
                "row": row.label,
                "unit": "msg/s" if row.kind == "tput" else "us",
                **vals,
                "ratio": ratio,
            }
        )
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
    p.add_argument("--quick", action="store_true", help="smoke run: 200k msgs, 5k requests")
    p.add_argument("--repeat", type=int, default=1, help="measured runs per scenario and server")
    p.add_argument(
        "--agg", choices=("median", "best"), default="median", help="how to combine --repeat runs"
    )
    p.add_argument(
        "--only",
        default="",
        help="comma-separated subset of scenarios: "
        + ", ".join(SCENARIOS)
        + " (aliases: publish-only, pub->sub, fan-out, req/rep)",
    )
    p.add_argument(
        "--servers",
        default=f"{REF},{IMPL}",
        help=f"which servers to run (comma-separated subset of {REF},{IMPL})",
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
    )


def select_scenarios(only: str) -> list[str]:
    if not only:
        return list(SCENARIOS)
    chosen: list[str] = []
    for tok in only.split(","):
        tok = tok.strip().lower()
        if not tok:
            continue
        if tok not in ALIASES:
            raise SystemExit(f"unknown scenario {tok!r}; choose from {', '.join(SCENARIOS)}")
        if ALIASES[tok] not in chosen:
            chosen.append(ALIASES[tok])
    return [s for s in SCENARIOS if s in chosen]


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    cfg = build_config(a)
    scenarios = select_scenarios(a.only)
    names = [n.strip() for n in a.servers.split(",") if n.strip()]
    if not names or any(n not in (REF, IMPL) for n in names):
        raise SystemExit(f"--servers must be a subset of {REF},{IMPL}")
    names = [n for n in (REF, IMPL) if n in names]
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
    all_servers = {REF: Server(REF, ref_cmd, log_dir), IMPL: Server(IMPL, impl_cmd, log_dir, env)}
    servers = [all_servers[n] for n in names]
    dead: dict[str, str] = {}
    results: dict[str, dict[str, list[RunResult]]] = {s: {n: [] for n in names} for s in scenarios}
    minfo = machine_info()
    try:
        for s in servers:
            try:
                s.start(a.start_timeout)
            except ServerStartError as exc:
                dead[s.name] = str(exc)
                print(f"!! {exc}", file=sys.stderr)
        print_header(servers, cfg, minfo)
        print(file=sys.stderr)
        for scen in scenarios:
            for rep in range(-1, cfg.repeat):  # -1 = warm-up
                for s in servers:
                    tag = "warm-up" if rep < 0 else f"run {rep + 1}/{cfg.repeat}"
                    if s.name in dead:
                        if rep >= 0:
                            results[scen][s.name].append(RunResult(False, error=dead[s.name]))
                        continue
                    t0 = time.monotonic()
                    res = run_scenario(scen, s, cfg, warmup=rep < 0)
                    took = time.monotonic() - t0
                    print(
                        f"  {scen:7} {s.name:12} {tag:10} {summary_line(scen, res)}  [{took:.1f}s]",
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
                            s.restart(a.start_timeout)
                        except ServerStartError as exc:
                            dead[s.name] = str(exc)
                            print(f"!! {exc}", file=sys.stderr)
    except (KeyboardInterrupt, SystemExit) as exc:
        print(f"\ninterrupted ({type(exc).__name__}); stopping servers", file=sys.stderr)
        return 130
    finally:
        for s in servers:
            s.stop()
        if a.keep_logs or dead:
            print(f"server logs: {log_dir}", file=sys.stderr)
        else:
            for f in log_dir.iterdir():
                f.unlink()
            log_dir.rmdir()

    rows = table_rows(cfg)
    agg: dict[str, dict[str, dict[str, float | None]]] = {}
    for scen in scenarios:
        agg[scen] = {}
        for n in names:
            runs = results[scen][n]
            good = [r for r in runs if r.ok]
            keys = sorted({k for r in good for k in r.metrics})
            agg[scen][n] = {}
            for k in keys:
                kind = "lat" if k.endswith("_us") else "tput"
                agg[scen][n][k] = aggregate([r.metrics[k] for r in good], kind, cfg.agg)
    table, json_rows = render_table(rows, scenarios, agg, names)
    print()
    print(table)
    failures = [
        (scen, n, i + 1, r.error)
        for scen in scenarios
        for n in names
        for i, r in enumerate(results[scen][n])
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
            "servers": {
                s.name: {"cmd": s.cmd, "version": s.version, "info": s.info} for s in servers
            },
            "config": asdict(cfg),
            "scenarios": scenarios,
            "table": json_rows,
            "aggregate": agg,
            "runs": {
                scen: {n: [asdict(r) for r in results[scen][n]] for n in names}
                for scen in scenarios
            },
        }
        Path(a.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"\nwrote {a.json}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
