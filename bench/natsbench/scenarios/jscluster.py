"""The ``jscluster`` group (issue 18): async JetStream publish to an R1 file stream on a
three-server JetStream cluster vs on a standalone server, per server column.

* ``jscl-standalone``: the column's standalone server;
* ``jscl-owner``: the cluster; the publisher connects to the member that owns the stream
  (STREAM.INFO ``cluster.leader``; each server places the stream itself);
* ``jscl-other``: the cluster; the publisher connects to a member that does not own it, so
  every publish and every PubAck crosses a route.

Each run creates a fresh stream (through the standalone server, or through member ``c1`` of
the cluster), publishes one probe message through the publisher's server until it is acked
(the route has carried the owner's interest; see ``jscluster.wait_interest``), then runs
the same pipelined publisher as ``js-async-file`` and checks every ack and the stored count.
``ratio_summary`` prints cluster / standalone for (a) and (b) against the issue's targets.
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

#: (scenario, label, target ratio to the standalone run)
TARGETS = (("jscl-owner", "(a) pub on the owner", 0.9), ("jscl-other", "(b) pub on another", 0.5))
STANDALONE_SCEN = "jscl-standalone"


class JsClusterPublish(Scenario):
    groups = ("jscluster",)
    family = "jscluster"
    servers = REF_AND_IMPL
    opt_in = True

    def __init__(self, where: str) -> None:
        self.where = where  # "standalone", "owner" or "other"
        self.name = f"jscl-{where}"

    def rows(self, cfg: Config) -> list[Row]:
        label = {
            "standalone": f"js async {cfg.jscl_storage}: standalone (acks)",
            "owner": "3-server R1: pub on owner (acks)",
            "other": "3-server R1: pub on other (acks)",
        }[self.where]
        return [Row(label, self.name, "rate", "tput")]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        assert isinstance(server, JsClusterColumn)
        try:
            return self._run(server, cfg, warmup)
        except (BenchError, OSError) as exc:
            return RunResult(False, error=exc_text(exc))

    def _run(self, col: JsClusterColumn, cfg: Config, warmup: bool) -> RunResult:
        deadline = time.monotonic() + cfg.timeout
        tag = uuid.uuid4().hex[:10]
        stream, subject = f"BENCH_{tag}", f"bench.jscl.{tag}"
        t_api = cfg.setup_timeout
        if self.where == "standalone":
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
            if self.where == "standalone":
                watched: Server = col.standalone  # type: ignore[assignment]
                pub_port = col.standalone.port  # type: ignore[union-attr]
            else:
                owner, _ = col.owner(stream, t_api)
                pub_on = owner if self.where == "owner" else col.other(owner)
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
        cpu = f"cpu: server(s) {m['server_cpu']:.0%} pub {m['pub_cpu']:.0%}"
        meta = ""
        if "owner_is_meta_leader" in m:
            meta = "  owner is meta leader" if m["owner_is_meta_leader"] else ""
        return f"{m['rate']:,.0f} acks/s ({m['count']:,.0f} msgs)  {cpu}{meta}"


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
    """cluster / standalone publish rate per server column, with the issue's targets."""
    cols = [n for n in (IMPL, REF) if n in names]
    lines = [
        "\ncluster / standalone async publish rate (natsd: against the issue's target):",
        f"  {'':24}" + "".join(f"{n:>14}" for n in cols) + f"{'target':>10}",
    ]
    out: list[dict[str, Any]] = []
    for scen, label, target in TARGETS:
        cells, doc = [], {"row": label, "target": target}
        for n in cols:
            base = agg.get(STANDALONE_SCEN, {}).get(n, {}).get("rate")
            val = agg.get(scen, {}).get(n, {}).get("rate")
            ratio = val / base if val is not None and base else None
            doc[n] = ratio
            mark = "" if ratio is None or n != IMPL else (" ok" if ratio >= target else " MISS")
            cells.append("-" if ratio is None else f"{ratio:.2f}x{mark}")
        lines.append(f"  {label:24}" + "".join(f"{c:>14}" for c in cells) + f"{target:>9.2f}x")
        out.append(doc)
    return "\n".join(lines), out
