"""Fixtures for the Spark data source tests.

One Spark session per module (``local[2]``, UI off, 2 shuffle partitions), stopped when the
module ends; servers run as subprocesses (natsd via ``python -m natsd``, and the reference
nats-server) on free ports with their own store directories.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from components import require_java, require_module, require_nats_server
from nats.aio.client import Client
from ports import free_port

# Here, not in each test module: this conftest is imported before any module of tests/spark.
require_module("pyspark")
require_module("pyarrow")

from pyspark.sql import SparkSession  # noqa: E402 - after the component check

from natsd_spark import JetStreamDataSource  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class ServerProc:
    """A JetStream server subprocess on a free port (``kind``: natsd or nats-server)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"spark-{kind}-")
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "natsd"] if kind == "natsd" else [require_nats_server()]
        cmd += ["-js", "-sd", self.dir, "-p", str(self.port), "-a", "127.0.0.1"]
        self.log = open(os.path.join(self.dir, "server.log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{kind} exited: {Path(self.log.name).read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{kind} did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_js(url: str, fn: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``fn(nc)`` with a fresh nats-py connection (the test's own client)."""

    async def main() -> T:
        nc = await nats.connect(url)
        try:
            return await fn(nc)
        finally:
            await nc.close()

    return asyncio.run(main())


def make_stream(url: str, name: str, subjects: list[str], **cfg: Any) -> None:
    async def go(nc: Client) -> None:
        js = nc.jetstream()
        try:
            await js.delete_stream(name)
        except Exception:
            pass
        await js.add_stream(
            name=name, subjects=subjects, allow_direct=cfg.pop("allow_direct", True), **cfg
        )

    run_js(url, go)


def publish(url: str, msgs: list[tuple[str, bytes, dict[str, str] | None]]) -> list[int]:
    """Publish with JetStream acks; returns the sequences."""

    async def go(nc: Client) -> list[int]:
        js = nc.jetstream()
        futs = [await js.publish_async(s, d, headers=h) for s, d, h in msgs]
        return [(await f).seq for f in futs]

    return run_js(url, go)


def fetch_all(url: str, stream: str) -> list[tuple[int, str, bytes, dict[str, str] | None]]:
    """Every message of ``stream`` via STREAM.MSG.GET (independent of the data source)."""

    async def go(nc: Client) -> list[tuple[int, str, bytes, dict[str, str] | None]]:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                m = await js.get_msg(stream, seq)
            except nats.js.errors.NotFoundError:
                continue
            assert m.seq is not None and m.subject is not None
            out.append((m.seq, m.subject, m.data or b"", m.headers))
        return out

    return run_js(url, go)


@pytest.fixture(scope="module")
def natsd_server() -> Iterator[ServerProc]:
    srv = ServerProc("natsd")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def go_server() -> Iterator[ServerProc]:
    require_nats_server()
    srv = ServerProc("nats-server")
    yield srv
    srv.stop()


# The same tests against the reference server are marked slow (``-m "not slow"`` skips them).
@pytest.fixture(
    scope="module", params=["natsd", pytest.param("nats-server", marks=pytest.mark.slow)]
)
def server(request: pytest.FixtureRequest) -> ServerProc:
    name = "natsd_server" if request.param == "natsd" else "go_server"
    srv: ServerProc = request.getfixturevalue(name)
    return srv


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    require_java()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        # local[2, 2]: two cores, and a failed task is retried once (exactly-once tests).
        SparkSession.builder.master("local[2,2]")
        .appName("natsd-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(JetStreamDataSource)
    yield session
    session.stop()
