"""Running workers: ``Run`` (worker processes and their result queue) and what every scenario
needs around it (``RunResult``, JetStream API calls that report an error text).

Ownership: the orchestrator process owns a ``Run``; each worker is a forked OS process that
only reports through the queue (``loadgen``'s ``{"role", "idx", "event", ...}`` dicts).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import Config
from .jsload import api_error, js_api
from .kvload import obj_get_main, obj_put_main
from .loadgen import BenchError, Report
from .servers import Server


@dataclass
class RunResult:
    ok: bool
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""


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


def exc_text(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out (server not answering)"
    return f"{type(exc).__name__}: {exc}"


def api_ok(server: Server, cfg: Config, subject: str, body: dict[str, Any] | None) -> str | None:
    """One JetStream API request; the error text or None."""
    try:
        return api_error(js_api(server.port, subject, body, cfg.setup_timeout))
    except (BenchError, OSError) as exc:
        return exc_text(exc)


def stream_state(server: Server, cfg: Config, stream: str) -> tuple[dict[str, Any], str | None]:
    try:
        info = js_api(server.port, f"$JS.API.STREAM.INFO.{stream}", None, cfg.setup_timeout)
    except (BenchError, OSError) as exc:
        return {}, f"stream info failed: {exc_text(exc)}"
    if (err := api_error(info)) is not None:
        return {}, f"stream info failed: {err}"
    state = info.get("state", {})
    return state if isinstance(state, dict) else {}, None


def worker_run(
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
