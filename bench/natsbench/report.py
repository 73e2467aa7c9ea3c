"""What the benchmark prints: the progress line of each run, the header, and the result
table (one column per server, ratio columns for the pairs in ``servers.RATIOS``).
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from .config import Config
from .harness import RunResult
from .kvload import MB
from .scenario import Row
from .servers import IMPL, RATIOS, REF, Server
from .table import SCENARIOS, applies

MAX_WIDTH = 130  # wider tables get two-line ratio headings


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
    return SCENARIOS[name].report(res.metrics)


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
