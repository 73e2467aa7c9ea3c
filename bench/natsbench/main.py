"""The benchmark's command line and its two phases (core NATS, then JetStream).

Each phase starts its servers, runs every chosen scenario on every server column it applies
to (a warm-up run, then ``--repeat`` measured runs, interleaved across servers), restarts a
server after a failed run, and stops them; ``main`` then prints one table per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from .config import Config, build_config
from .fixtures import Fixtures
from .harness import RunResult, exc_text
from .jscluster import JsClusterColumn
from .jsload import fsync_rate
from .loadgen import BenchError
from .report import aggregate, machine_info, print_header, print_servers, render_table, summary_line
from .scenario import Scenario
from .scenarios.jscluster import ratio_summary
from .servers import (
    ALL_SERVERS,
    IMPL,
    IMPL_LAZY,
    LAZY_INTERVAL,
    REF,
    REF_SYNC,
    ClusterServer,
    Server,
    ServerStartError,
    make_js_servers,
)
from .table import SCENARIOS, TABLE, applies, select_scenarios, table_rows

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


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
        "--jscl-storage",
        choices=("file", "memory"),
        default="file",
        help="jscluster: the stream's storage (memory takes the disk out of the comparison)",
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


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise SystemExit(128 + signum)


def run_scenario(
    scen: Scenario, server: Server, cfg: Config, warmup: bool, fixtures: Fixtures
) -> RunResult:
    """One run of ``scen`` on ``server``: its (untimed, shared) setup, then the run."""
    try:
        prepared = scen.setup(server, cfg, fixtures)
    except (BenchError, OSError) as exc:
        return RunResult(False, error=f"{scen.setup_what}: {exc_text(exc)}")
    return scen.run(server, cfg, warmup, prepared)


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
        if any(SCENARIOS[sc].uses_jetstream for sc in scenarios):
            for s in servers:
                if s.alive() and not s.info.get("jetstream"):
                    print(f"!! {s.name}: INFO does not announce JetStream", file=sys.stderr)
        print(file=sys.stderr)
        fixtures = Fixtures()
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
                    res = run_scenario(SCENARIOS[scen], s, cfg, rep < 0, fixtures)
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
            # drop the pre-filled data no later scenario reads
            later = [SCENARIOS[sc] for sc in scenarios[i_scen + 1 :]]
            fixtures.release(servers, {sc.fixture for sc in later if sc.fixture})
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
    core_scen = [
        sc for sc in scenarios if not SCENARIOS[sc].uses_jetstream and not SCENARIOS[sc].clustered
    ]
    cl_scen = [sc for sc in scenarios if SCENARIOS[sc].clustered]
    js_scen = [
        sc
        for sc in scenarios
        if SCENARIOS[sc].uses_jetstream
        and SCENARIOS[sc].family != "jscluster"
        and any(applies(sc, n) for n in names)
    ]
    # a standalone server and a 3-server JetStream cluster per column, in a phase of its own
    jc_scen = [
        sc
        for sc in scenarios
        if SCENARIOS[sc].family == "jscluster" and any(applies(sc, n) for n in names)
    ]
    jc_names = [n for n in names if any(applies(sc, n) for sc in jc_scen)]
    core_all = [s for s in TABLE if not s.uses_jetstream]
    core_names = [n for n in names if any(s.applies(n) for s in core_all)]
    if core_scen and not core_names:
        core_scen = []
    if cl_scen and not core_names:
        cl_scen = []
    if not core_scen and not js_scen and not cl_scen and not jc_scen:
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
    core_by_name = {
        REF: Server(REF, ref_cmd, log_dir),
        IMPL: Server(IMPL, impl_cmd, log_dir, env),
    }
    core_servers = [core_by_name[n] for n in core_names] if core_scen else []
    cl_by_name = {
        REF: ClusterServer(REF, ref_cmd, log_dir, log_stem=f"{REF}-cluster"),
        IMPL: ClusterServer(IMPL, impl_cmd, log_dir, env, log_stem=f"{IMPL}-cluster"),
    }
    cl_servers = [cl_by_name[n] for n in core_names] if cl_scen else []
    js_servers: list[Server] = []
    jc_servers: list[Server] = []
    store_root: Path | None = None
    disk: dict[str, float] = {}
    dead: dict[str, str] = {}
    results: dict[str, dict[str, list[RunResult]]] = {
        sc: {n: [] for n in names if applies(sc, n)}
        for sc in core_scen + cl_scen + js_scen + jc_scen
    }
    minfo = machine_info()
    has_cons = any(SCENARIOS[sc].family == "consumer" for sc in js_scen)
    has_kv = any(SCENARIOS[sc].family == "kv" for sc in js_scen)
    has_js = bool(js_scen or jc_scen)
    print_header(cfg, minfo, bool(core_scen or cl_scen), has_js, has_cons, has_kv)
    try:
        if js_scen or jc_scen:
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
            jc_servers = [
                JsClusterColumn(
                    n,
                    ref_cmd if n == REF else impl_cmd,
                    log_dir,
                    None if n == REF else env,
                    log_stem=f"{n}-jscl",
                    root=store_root / f"{n}-jscluster",
                )
                for n in jc_names
            ]
        if core_scen:
            dead.update(run_phase(core_scen, core_servers, cfg, a.start_timeout, results))
        if cl_scen:
            print("\ncluster scenarios: two servers joined by a route, per column", file=sys.stderr)
            dead.update(run_phase(cl_scen, cl_servers, cfg, a.start_timeout, results))
        if js_scen:
            dead.update(run_phase(js_scen, js_servers, cfg, a.start_timeout, results))
        if jc_scen:
            print(
                "\njscluster: per column a standalone JetStream server and a 3-server cluster"
                f" (R1 {a.jscl_storage} streams)",
                file=sys.stderr,
            )
            dead.update(run_phase(jc_scen, jc_servers, cfg, a.start_timeout, results))
        if js_scen or jc_scen:
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
        for s in core_servers + cl_servers + js_servers + jc_servers:
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
        (cl_scen, core_names),
        (js_scen, [n for n in names if any(applies(sc, n) for sc in js_scen)]),
        (jc_scen, jc_names),
    ):
        if not phase_scen:
            continue
        table, jrows = render_table(rows, phase_scen, agg, phase_names)
        json_rows += jrows
        print()
        print(table)
    if jc_scen:
        text, jc_rows = ratio_summary(agg, jc_names)
        json_rows += jc_rows
        print(text)
    if any(SCENARIOS[sc].syncs_files for sc in js_scen):
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
                f"{s.name}{_suffix(s, js_servers, cl_servers, jc_servers)}": {
                    "cmd": s.cmd,
                    "version": s.version,
                    "info": s.info,
                }
                for s in core_servers + cl_servers + js_servers + jc_servers
            },
            "config": asdict(cfg),
            "scenarios": core_scen + cl_scen + js_scen + jc_scen,
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


def _suffix(s: Server, js: list[Server], cl: list[Server], jc: list[Server]) -> str:
    """The --json name suffix of a server column: which phase ran it."""
    return "-js" if s in js else "-cluster" if s in cl else "-jscluster" if s in jc else ""
