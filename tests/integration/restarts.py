"""Run one restart scenario against natsd and nats-server, each as a real process.

A restart needs a process: the server is stopped with a signal (SIGTERM for a clean stop,
SIGKILL for a crash) and started again on the same port and store directory, while the
client stays connected and reconnects by itself. ``both(scenario)`` runs ``scenario(srv)``
against the two servers at once and returns ``{"natsd": ..., "nats-server": ...}`` so a test
can assert the expected values and that both servers gave the same.

Without the reference binary the test skips, except under CI (``CI=true``) where it fails:
a missing reference must not turn a differential test green.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from components import require_nats_server
from nats.aio.client import Client as NATS
from ports import free_port

KINDS = ("natsd", "nats-server")


class Restartable:
    """A server process on a fixed port and store directory that can be stopped and
    started again. Its log (both runs) is kept for failure messages."""

    def __init__(self, kind: str, workdir: str, *extra: str) -> None:
        self.kind = kind
        natsd_argv = [sys.executable, "-m", "natsd"]
        self.argv = [require_nats_server()] if kind == "nats-server" else natsd_argv
        self.port = free_port()
        self.store = os.path.join(workdir, kind, "store")
        self.log_path = os.path.join(workdir, f"{kind}.log")
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        os.makedirs(self.store, exist_ok=True)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    async def start(self, timeout: float = 20.0) -> None:
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen(
                [
                    *self.argv,
                    "-js",
                    "-sd",
                    self.store,
                    "-a",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    *self.extra,
                ],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                if b"Server is ready" in f.read():
                    return
            if self.proc.poll() is not None:
                code = self.proc.returncode
                raise AssertionError(f"{self.kind} exited with {code}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind} not ready after {timeout}s:\n{self.log()}")
            await asyncio.sleep(0.02)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        p = self.proc
        assert p is not None
        p.send_signal(sig)
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            if time.monotonic() > deadline:
                p.kill()
                raise AssertionError(f"{self.kind} did not exit on {sig}:\n{self.log()}")
            await asyncio.sleep(0.02)

    async def restart(self, sig: int = signal.SIGTERM) -> None:
        await self.stop(sig)
        await self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


async def connect(srv: Restartable, **kw: Any) -> NATS:
    """A client that reconnects on its own across the restart, errors collected on
    ``nc.errors`` rather than logged."""
    errors: list[Exception] = []

    async def on_error(e: Exception) -> None:
        errors.append(e)

    kw.setdefault("max_reconnect_attempts", -1)
    kw.setdefault("reconnect_time_wait", 0.1)
    nc = await nats.connect(srv.url, error_cb=on_error, **kw)
    nc.errors = errors  # type: ignore[attr-defined]
    return nc


async def wait_reconnected(nc: NATS, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not nc.is_connected:
        if time.monotonic() > deadline:
            raise AssertionError(f"client not reconnected after {timeout}s")
        await asyncio.sleep(0.02)


Scenario = Callable[[Restartable], Awaitable[Any]]


async def both(scenario: Scenario, *extra: str) -> dict[str, Any]:
    """``scenario`` against natsd and nats-server, concurrently, each on its own
    Restartable (already started); returns each one's result by kind."""
    require_nats_server()
    with tempfile.TemporaryDirectory(prefix="natsd-restart-") as tmp:
        servers = [Restartable(kind, tmp, *extra) for kind in KINDS]
        try:
            await asyncio.gather(*(s.start() for s in servers))
            results = await asyncio.gather(*(scenario(s) for s in servers))
        finally:
            for s in servers:
                s.kill()
    return dict(zip(KINDS, results, strict=True))
