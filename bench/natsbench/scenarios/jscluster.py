"""The ``jscluster`` group (issue 18): async JetStream publish to an R1 stream on a
three-server JetStream cluster vs on a standalone server, per server column.

One run of ``jscl-pub`` publishes three times, back to back:

* ``standalone``: on the column's standalone server;
* ``owner`` (a): on the cluster, the publisher connected to the member that owns the stream
  (STREAM.INFO ``cluster.leader``; each server places the stream itself);
* ``other`` (b): on the cluster, the publisher connected to a member that does not own it,
  so every publish and every PubAck crosses a route;

and reports the three rates and the run's ratios owner / standalone and other / standalone.
Each publish creates a fresh stream (through the standalone server, or through member
``c1`` of the cluster), publishes one probe message through the publisher's server until it
is acked (the route has carried the owner's interest; see ``jscluster.wait_interest``),
then runs the same pipelined publisher as ``js-async-file`` and checks every ack and the
stored count. ``ratio_summary`` prints the aggregated ratios against the issue's targets.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ..config import Config
from ..harness import Run, RunResult, exc_text
from ..jscluster import JsClusterColumn, wait_interest
from ..jsload import api_error, js_api, js_async_main
from ..loadgen import BenchError, Report
from ..scenario import Row, Scenario
from ..servers import IMPL, REF, REF_AND_IMPL, Server

#: (where, label, target ratio to the standalone run)
TARGETS = (("owner", "(a) pub on the owner", 0.9), ("other", "(b) pub on another", 0.5))
SCEN = "jscl-pub"


WHERE = ("standalone", "owner", "other")


class JsClusterPublish(Scenario):
    """One run = the three publishes back to back (standalone, owner, other), so each
    cluster / standalone ratio compares runs made seconds apart: the disk and the other
    tenants of a shared VM change within a minute, which skewed ratios of separate runs."""

    name = "jscl-pub"
    aliases = ("jscl",)
    groups = ("jscluster",)
    family = "jscluster"
    servers = REF_AND_IMPL
    opt_in = True

    def rows(self, cfg: Config) -> list[Row]:
        st = cfg.jscl_storage
        return [
            Row(f"js async {st}: standalone (acks)", self.name, "standalone_rate", "tput"),
            Row(f"3-server R1 {st}: pub on owner", self.name, "owner_rate", "tput"),
            Row(f"3-server R1 {st}: pub on other", self.name, "other_rate", "tput"),
        ]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        assert isinstance(server, JsClusterColumn)
        metrics: dict[str, float] = {}
        for where in WHERE:
            try:
                res = self._run(server, cfg, warmup, where)
            except (BenchError, OSError) as exc:
                res = RunResult(False, error=exc_text(exc))
            if not res.ok:
                return RunResult(False, metrics, f"{where}: {res.error}")
            metrics.update({f"{where}_{k}": v for k, v in res.metrics.items()})
        for where in ("owner", "other"):
            metrics[f"{where}_ratio"] = metrics[f"{where}_rate"] / metrics["standalone_rate"]
        return RunResult(True, metrics)

    def _run(self, col: JsClusterColumn, cfg: Config, warmup: bool, where: str) -> RunResult:
        deadline = time.monotonic() + cfg.timeout
        tag = uuid.uuid4().hex[:10]
        stream, subject = f"BENCH_{tag}", f"bench.jscl.{tag}"
        t_api = cfg.setup_timeout
        if where == "standalone":
            assert col.standalone is not None
            api_port = col.standalone.port
        else:
            api_port = col.members["c1"].port
        storage = cfg.jscl_storage
        body = {"name": stream, "subjects": [subject], "storage": storage, "num_replicas": 1}
        doc = js_api(api_port, f"$JS.API.STREAM.CREATE.{stream}", body, t_api)
        if (err := api_error(doc)) is not None:
            return RunResult(False, error=f"stream create failed: {err}")
        try:
            owner = ""
            if where == "standalone":
                watched: Server = col.standalone  # type: ignore[assignment]
                pub_port = col.standalone.port  # type: ignore[union-attr]
            else:
                owner, _ = col.owner(stream, t_api)
                pub_on = owner if where == "owner" else col.other(owner)
                watched, pub_port = col.group(), col.members[pub_on].port
            probe_seq = wait_interest(pub_port, subject, time.monotonic() + t_api)
            if probe_seq != 1:
                return RunResult(False, error=f"probe publish got seq {probe_seq}, not 1")
            result = self._publish(cfg, warmup, deadline, pub_port, subject, watched)
            if result.ok:
                result = _check(result, api_port, stream, t_api)
            if owner:
                result.metrics["owner_is_meta_leader"] = float(owner == col.meta_leader)
            return result
        finally:
            # delete the stream even after a failure; a failed delete fails a good run
            try:
                err = api_error(js_api(api_port, f"$JS.API.STREAM.DELETE.{stream}", None, t_api))
            except (BenchError, OSError) as exc:
                err = exc_text(exc)
            if err is not None:
                raise BenchError(f"stream delete failed: {err}")

    def _publish(
        self,
        cfg: Config,
        warmup: bool,
        deadline: float,
        port: int,
        subject: str,
        watched: Server,
    ) -> RunResult:
        max_time = cfg.js_warm_time if warmup else cfg.js_time
        n = max(1, cfg.js_msgs // 10) if warmup else cfg.js_msgs
        run = Run(deadline, cfg.setup_timeout)
        go = run.ctx.Event()
        key = ("jspub", 0)
        try:
            run.spawn(
                "jspub", 0, js_async_main, port, subject, cfg.size, n, max_time, cfg.js_window,
                run.q, go, deadline, cfg.idle_timeout,
            )  # fmt: skip
            server_cpu = run.go(go, [key], [key], watched)
        except RuntimeError as exc:
            return RunResult(False, error=str(exc))
        finally:
            run.close()
        rep: Report = run.reports[key]
        count = int(rep["count"])
        wall = max(1e-9, rep["last"] - rep["first"])
        metrics = {
            "rate": count / wall,
            "count": float(count),
            "wall_s": wall,
            "pub_cpu": rep["cpu"] / wall,
            "server_cpu": server_cpu / wall,
            "slow_chunks": float(rep["slow_chunks"]),
        }
        # the probe message is seq 1
        if rep["max_seq"] != count + 1:
            return RunResult(False, metrics, f"{count} acks but highest acked seq {rep['max_seq']}")
        return RunResult(True, metrics)

    def report(self, m: dict[str, float]) -> str:
        parts = []
        for where in WHERE:
            meta = "*" if m.get(f"{where}_owner_is_meta_leader") else ""
            cpu = f"{m[f'{where}_server_cpu']:.0%}"
            parts.append(f"{where}{meta} {m[f'{where}_rate']:,.0f}/s (cpu {cpu})")
        ratios = f"owner {m['owner_ratio']:.2f}x other {m['other_ratio']:.2f}x"
        return "  ".join(parts) + f"  -> {ratios}"


def _check(result: RunResult, port: int, stream: str, timeout: float) -> RunResult:
    """The stream holds every acknowledged message and the probe."""
    doc = js_api(port, f"$JS.API.STREAM.INFO.{stream}", None, timeout)
    if (err := api_error(doc)) is not None:
        return RunResult(False, result.metrics, f"stream info failed: {err}")
    stored = doc.get("state", {}).get("messages")
    want = int(result.metrics["count"]) + 1
    if stored != want:
        return RunResult(False, result.metrics, f"{want - 1} acks + probe but {stored} stored")
    return result


def ratio_summary(
    agg: dict[str, dict[str, dict[str, float | None]]], names: list[str]
) -> tuple[str, list[dict[str, Any]]]:
    """cluster / standalone publish rate per server column (the aggregate of the per-run
    ratios), with the issue's targets."""
    cols = [n for n in (IMPL, REF) if n in names]
    lines = [
        "\ncluster / standalone async publish rate, per run (natsd: against the issue's target):",
        f"  {'':24}" + "".join(f"{n:>14}" for n in cols) + f"{'target':>10}",
    ]
    out: list[dict[str, Any]] = []
    for where, label, target in TARGETS:
        cells, doc = [], {"row": label, "target": target}
        for n in cols:
            ratio = agg.get(SCEN, {}).get(n, {}).get(f"{where}_ratio")
            doc[n] = ratio
            mark = "" if ratio is None or n != IMPL else (" ok" if ratio >= target else " MISS")
            cells.append("-" if ratio is None else f"{ratio:.2f}x{mark}")
        lines.append(f"  {label:24}" + "".join(f"{c:>14}" for c in cells) + f"{target:>9.2f}x")
        out.append(doc)
    return "\n".join(lines), out
