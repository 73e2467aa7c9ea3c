"""A stream's backup and its restore (``js-backup``): the pre-filled file stream (the consumer
scenarios' fixture, ``--js-consume-msgs`` messages) is backed up with ``nats stream
backup``'s client code (the server's chunked, acknowledged transfer, chunks of 128 KiB) into
a temporary directory, then restored under another name by ``nats stream restore``'s
(64 KiB chunks, each acknowledged, then the server builds the stream), and deleted. Two
rows: the backup's rate (messages per second of transfer) and the restore's (from the
restore request until the stream create response)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import nats

from natscli.backup import restore_from_directory, snapshot_to_directory
from natscli.conn import ConnOptions, JsApi

from ..config import Config
from ..fixtures import Fixtures
from ..harness import RunResult, exc_text
from ..jsload import js_api
from ..loadgen import BenchError
from ..scenario import Row, Scenario
from ..servers import REF_AND_IMPL, Server
from .consumers import filled_stream


class BackupRestore(Scenario):
    name = "js-backup"
    aliases = ("backup",)
    groups = ("js",)
    family = "consumer"
    servers = REF_AND_IMPL
    fixture = "stream:file"
    setup_what = "pre-filling the stream"
    opt_in = True  # (by name, --only js-backup or js)

    def rows(self, cfg: Config) -> list[Row]:
        return [
            Row("js backup file", self.name, "backup_rate", "tput"),
            Row("js restore file", self.name, "restore_rate", "tput"),
        ]

    def setup(self, server: Server, cfg: Config, fixtures: Fixtures) -> tuple[str, str]:
        return fixtures.get("stream:file", server, lambda: filled_stream(server, cfg, "file"))

    def run(
        self, server: Server, cfg: Config, warmup: bool, prepared: tuple[str, str]
    ) -> RunResult:
        origin, _subject = prepared
        tmp = Path(tempfile.mkdtemp(prefix="natsbench-backup-"))
        copy = f"RESTORED_{uuid.uuid4().hex[:10]}"
        cpu0 = server.cpu_seconds()
        try:
            metrics = asyncio.run(_round(server.port, origin, copy, tmp, cfg))
            metrics["server_cpu"] = (server.cpu_seconds() - cpu0) / max(1e-9, metrics["wall_s"])
            return RunResult(True, metrics)
        except Exception as exc:  # (the client's and the CLI's errors: a failed run)
            return RunResult(False, error=exc_text(exc))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                js_api(server.port, f"$JS.API.STREAM.DELETE.{copy}", None, cfg.setup_timeout)
            except (BenchError, OSError):
                pass

    def report(self, m: dict[str, float]) -> str:
        return (f"backup {m['backup_rate']:,.0f} msg/s ({m['archive_mb']:.1f} MB archive), "
                f"restore {m['restore_rate']:,.0f} msg/s ({m['count']:,.0f} msgs)  "
                f"cpu: server {m['server_cpu']:.0%}")  # fmt: skip


async def _round(port: int, origin: str, copy: str, tmp: Path, cfg: Config) -> dict[str, float]:
    url = f"nats://127.0.0.1:{port}"
    nc = await nats.connect(url)
    try:
        api = JsApi(nc, ConnOptions(servers=[url], timeout=cfg.setup_timeout))
        t0 = time.monotonic()
        summary = await snapshot_to_directory(nc, api, origin, tmp / "b", consumers=False)
        t1 = time.monotonic()
        n = int(summary["state"].get("messages", 0))
        meta = tmp / "b" / "backup.json"
        doc: dict[str, Any] = json.loads(meta.read_text())
        # restored beside the original: another name, no subjects of its own
        doc["config"] = {**doc["config"], "name": copy, "subjects": []}
        meta.write_text(json.dumps(doc))
        made = await restore_from_directory(nc, api, tmp / "b")
        t2 = time.monotonic()
        if int(made.get("state", {}).get("messages", -1)) != n:
            raise BenchError(f"restored {made.get('state')} of {n} messages")
        return {
            "count": float(n),
            "backup_rate": n / max(1e-9, t1 - t0),
            "restore_rate": n / max(1e-9, t2 - t1),
            "archive_mb": summary["bytes"] / 1e6,
            "wall_s": t2 - t0,
        }
    finally:
        await nc.close()
