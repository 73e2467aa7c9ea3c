"""A copy's catch-up: a new mirror (``js-mirror``) or a new stream sourcing it
(``js-source``) of the pre-filled file stream (the consumer scenarios' fixture,
``--js-consume-msgs`` messages), timed from the first message it holds until it holds the
last (both servers wait 100-200 ms before asking the origin), then deleted. What it
measures is the whole copy path of each server: the origin's direct push consumer with
flow control, then the mirror storing at the origin's sequences, or the sourcing stream
publishing each message into itself with its Nats-Stream-Source header."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from ..config import Config
from ..consumerload import prefill
from ..fixtures import Fixtures
from ..harness import RunResult, exc_text
from ..jsload import api_error, js_api
from ..loadgen import BenchError
from ..scenario import Row, Scenario
from ..servers import REF_AND_IMPL, Server
from .consumers import filled_stream


class MirrorCatchUp(Scenario):
    name = "js-mirror"
    aliases = ("mirror",)
    groups = ("js", "mirror")
    kind = "mirror"
    family = "consumer"
    servers = REF_AND_IMPL
    fixture = "stream:file"
    setup_what = "pre-filling the stream"

    def rows(self, cfg: Config) -> list[Row]:
        return [Row(f"js {self.kind} catch-up file", self.name, "rate", "tput")]

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> tuple[str, str]:
        return fixtures.get("stream:file", server, lambda: filled_stream(server, cfg, "file"))

    def run(
        self, server: Server, cfg: Config, warmup: bool, prepared: tuple[str, str]
    ) -> RunResult:
        origin, _subject = prepared
        n = cfg.js_consume_msgs
        mirror = f"{self.kind.upper()}_{uuid.uuid4().hex[:10]}"
        deadline = time.monotonic() + cfg.timeout
        body: dict[str, Any] = {"name": mirror, "storage": "file"}
        if self.kind == "mirror":
            body["mirror"] = {"name": origin}
        else:
            body["sources"] = [{"name": origin}]
        cpu0 = server.cpu_seconds()
        t0 = time.monotonic()
        try:
            doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{mirror}", body, cfg.setup_timeout)
            if (err := api_error(doc)) is not None:
                return RunResult(False, error=f"{self.kind} create failed: {err}")
            state: dict[str, Any] = {}
            first: tuple[float, int] | None = None  # (when, last_seq) the copy was first seen
            while True:
                info = js_api(server.port, f"$JS.API.STREAM.INFO.{mirror}", None,
                              cfg.setup_timeout)  # fmt: skip
                if (err := api_error(info)) is not None:
                    return RunResult(False, error=f"mirror info failed: {err}")
                state = info.get("state", {})
                last = int(state.get("last_seq", 0))
                if first is None and last > 0:
                    first = (time.monotonic(), last)
                if int(state.get("messages", 0)) >= n:
                    break
                if time.monotonic() > deadline:
                    return RunResult(False, error=f"mirror stopped at {state}")
                time.sleep(0.005)
            end = time.monotonic()
            cpu = server.cpu_seconds() - cpu0
            if state.get("messages") != n:
                return RunResult(False, error=f"mirror holds {state.get('messages')} of {n}")
            assert first is not None
            # the rate of the copy itself, from the first message seen (both servers wait
            # 100-200 ms before they ask the origin for a consumer)
            copy = max(1e-9, end - first[0])
            metrics = {"count": float(n), "wall_s": end - t0, "rate": (n - first[1]) / copy,
                       "server_cpu": cpu / max(1e-9, end - t0)}  # fmt: skip
            return RunResult(True, metrics)
        except (BenchError, OSError) as exc:
            return RunResult(False, error=exc_text(exc))
        finally:
            try:
                js_api(server.port, f"$JS.API.STREAM.DELETE.{mirror}", None, cfg.setup_timeout)
            except (BenchError, OSError):
                pass

    def report(self, m: dict[str, float]) -> str:
        return (f"{m['rate']:,.0f} msg/s ({m['count']:,.0f} msgs, {m['wall_s']:.2f}s in all)  "
                f"cpu: server {m['server_cpu']:.0%}")  # fmt: skip


class SourceCatchUp(MirrorCatchUp):
    name = "js-source"
    aliases = ("source",)
    groups = ("js", "mirror")
    kind = "source"


class SourceSteady(Scenario):
    """A sourcing stream's steady-state copy rate: a new origin file stream and a stream
    sourcing it, then ``--js-consume-msgs`` messages published into the origin (PubAck
    window ``--js-window``) while the copy runs; timed from the first publish until the
    sourcing stream holds them all. The rate is the whole pipeline's, publish and copy
    (the origin's own publish rate is in the progress line)."""

    name = "js-source-live"
    aliases = ("source-live",)
    groups = ("js", "mirror")
    family = "consumer"
    servers = REF_AND_IMPL

    def rows(self, cfg: Config) -> list[Row]:
        return [Row("js source steady file", self.name, "rate", "tput")]

    def run(self, server: Server, cfg: Config, warmup: bool, prepared: Any) -> RunResult:
        tag = uuid.uuid4().hex[:10]
        origin, copy, subject = f"LIVE_{tag}", f"LIVECOPY_{tag}", f"bench.live.{tag}"
        n = cfg.js_consume_msgs
        deadline = time.monotonic() + cfg.timeout
        made: list[str] = []
        cpu0 = server.cpu_seconds()
        try:
            bodies: list[dict[str, Any]] = [
                {"name": origin, "subjects": [subject], "storage": "file"},
                {"name": copy, "storage": "file", "sources": [{"name": origin}]},
            ]
            for body in bodies:
                doc = js_api(server.port, f"$JS.API.STREAM.CREATE.{body['name']}", body,
                             cfg.setup_timeout)  # fmt: skip
                if (err := api_error(doc)) is not None:
                    return RunResult(False, error=f"create failed: {err}")
                made.append(str(body["name"]))
            if not _copying(server, cfg, copy, deadline):
                return RunResult(False, error="the sourcing stream never asked for a consumer")
            done: list[float] = []
            watcher = threading.Thread(target=_watch, args=(server, cfg, copy, n, deadline, done))
            t0 = time.monotonic()
            watcher.start()
            pub = prefill(server.port, subject, cfg.size, n, cfg.js_window, deadline,
                          cfg.idle_timeout)  # fmt: skip
            watcher.join()
            if not done:
                return RunResult(False, error=f"the copy did not reach {n} messages in time")
            wall = done[0] - t0
            cpu = server.cpu_seconds() - cpu0
            metrics = {"count": float(n), "wall_s": wall, "rate": n / max(1e-9, wall),
                       "pub_rate": pub["rate"], "server_cpu": cpu / max(1e-9, wall)}  # fmt: skip
            return RunResult(True, metrics)
        except (BenchError, OSError) as exc:
            return RunResult(False, error=exc_text(exc))
        finally:
            for name in reversed(made):
                try:
                    js_api(server.port, f"$JS.API.STREAM.DELETE.{name}", None, cfg.setup_timeout)
                except (BenchError, OSError):
                    pass

    def report(self, m: dict[str, float]) -> str:
        return (f"{m['rate']:,.0f} msg/s copied ({m['count']:,.0f} msgs in {m['wall_s']:.2f}s; "
                f"origin publishes {m['pub_rate']:,.0f} msg/s)  cpu: server "
                f"{m['server_cpu']:.0%}")  # fmt: skip


def _copying(server: Server, cfg: Config, copy: str, deadline: float) -> bool:
    """Wait until the sourcing stream's source is active (its consumer is set up)."""
    while time.monotonic() < deadline:
        info = js_api(server.port, f"$JS.API.STREAM.INFO.{copy}", None, cfg.setup_timeout)
        sources = info.get("sources") or []
        if sources and int(sources[0].get("active", -1)) >= 0:
            return True
        time.sleep(0.01)
    return False


def _watch(
    server: Server, cfg: Config, copy: str, n: int, deadline: float, done: list[float]
) -> None:
    """Poll the copy's message count; note when it reaches ``n``."""
    while time.monotonic() < deadline:
        try:
            info = js_api(server.port, f"$JS.API.STREAM.INFO.{copy}", None, cfg.setup_timeout)
        except (BenchError, OSError):
            return
        if int(info.get("state", {}).get("messages", 0)) >= n:
            done.append(time.monotonic())
            return
        time.sleep(0.005)
