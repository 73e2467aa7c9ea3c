"""Helpers for the reliability suite: natsd (and nats-server) as real processes.

natsd runs as ``python -m natsd ...`` in its own session so it can be SIGKILLed; its log goes
to a file next to the store and is parsed for the port and "Server is ready". The helpers
read the process's RSS (``/proc/PID/status`` VmRSS) and open descriptors (``/proc/PID/fd``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
from nats.aio.client import Client as NATS

ROOT = Path(__file__).resolve().parents[2]
LISTEN_RE = re.compile(r"Listening for client connections on (\S+):(\d+)")


class ServerProc:
    """One server process (natsd by default, or nats-server with ``binary``)."""

    def __init__(
        self, workdir: Path, args: list[str], *, binary: str | None = None, name: str = "natsd"
    ) -> None:
        self.workdir = workdir
        self.args = args
        self.binary = binary
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.started_at = 0.0
        self._offset = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> ServerProc:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [self.binary] if self.binary else [sys.executable, "-m", "natsd"]
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as logf:
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(
                [*cmd, *self.args],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )
        return self

    def current_log(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    async def wait_ready(self, timeout: float = 30.0) -> ServerProc:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            text = self.current_log()
            if "Server is ready" in text:
                m = LISTEN_RE.search(text)
                assert m, text
                self.port = int(m.group(2))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{text[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not ready after {timeout}s:\n{text[-3000:]}")
            await asyncio.sleep(0.01)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                p.wait(10)

    def rss(self) -> int:
        """Resident set size in bytes."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def fd_count(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


async def connect(url: str, **kw: object) -> NATS:
    """A nats-py client with reconnects off and errors swallowed (tests check results)."""

    async def _err(e: Exception) -> None:
        pass

    kw.setdefault("allow_reconnect", False)
    kw.setdefault("connect_timeout", 5)
    kw.setdefault("error_cb", _err)
    return await nats.connect(url, **kw)


async def close_quietly(nc: NATS, timeout: float = 3.0) -> None:
    if not nc.is_closed:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout)
