"""End-to-end fixtures for the ``nats`` command line.

Each test runs the installed console command (``.venv/bin/nats``) as a subprocess against a real
server process: the Go ``nats-server`` (always) and natsd (``python -m natsd``). Servers are
started once per session on free ports with temporary store directories; ``server`` is
parametrised over both and deletes every stream before the test, so tests can use the seed
documents' names (ORDERS, order-processor) as written.

Without the reference nats-server its variant fails under CI and skips elsewhere
(``components.require_nats_server``); the natsd variant always runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from components import nats_server_binary, require_nats_server
from ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NATS = BIN / "nats"
READY = "Server is ready"
KINDS = ["nats-server", "natsd"]


@dataclass
class ServerProc:
    """A server process; ``extra`` are additional command-line flags (auth)."""

    kind: str
    root: Path
    extra: list[str] = field(default_factory=list)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / f"{self.kind}-{self.port}.log"

    def start(self) -> ServerProc:
        self.port = free_port()
        store = self.root / f"store-{self.kind}-{self.port}"
        natsd = [sys.executable, "-m", "natsd"]
        cmd = [require_nats_server()] if self.kind == "nats-server" else natsd
        cmd += ["-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(store), *self.extra]
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + 30
        while READY not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited at start:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} not ready after 30s:\n{self.log()}")
            time.sleep(0.02)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # ----------------------------------------------------------------- client helpers
    def api(self, suffix: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """One ``$JS.API`` request through nats-py (to check what the CLI did)."""

        async def go() -> dict[str, Any]:
            nc = await nats.connect(self.url, allow_reconnect=False)
            try:
                body = json.dumps(payload).encode() if payload is not None else b""
                m = await nc.request(f"$JS.API.{suffix}", body, timeout=5)
                return dict(json.loads(m.data))
            finally:
                await nc.close()

        return asyncio.run(go())

    def publish(self, *msgs: tuple[str, str], headers: dict[str, str] | None = None) -> None:
        """JetStream-publish (subject, body) pairs through nats-py (test set-up)."""

        async def go() -> None:
            nc = await nats.connect(self.url, allow_reconnect=False)
            try:
                js = nc.jetstream()
                for subject, body in msgs:
                    await js.publish(subject, body.encode(), headers=headers)
            finally:
                await nc.close()

        asyncio.run(go())

    def clean(self) -> None:
        """Delete every stream, so each test starts from an empty server."""
        names = self.api("STREAM.NAMES").get("streams") or []
        for n in names:
            self.api(f"STREAM.DELETE.{n}")


@dataclass
class Cli:
    """Runs ``nats`` against one server."""

    server: ServerProc
    cwd: Path
    env: dict[str, str]

    def run(
        self,
        *args: str,
        check: bool = True,
        input: bytes | None = None,
        timeout: float = 30,
        url: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(NATS), *args]
        if url:
            cmd += ["-s", self.server.url]
        r = subprocess.run(
            cmd,
            input=input.decode() if input is not None else None,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.cwd,
            env={**self.env, **(env or {})},
        )
        if check and r.returncode != 0:
            raise AssertionError(
                f"`nats {' '.join(args)}` exited {r.returncode}\n"
                f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
            )
        return r

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """``nats`` in the background (sub, reply, watch); stderr is a pipe to wait on."""
        return subprocess.Popen(
            [str(NATS), *args, "-s", self.server.url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.cwd,
            env=self.env,
        )


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float = 10) -> str:
    """Read the process's stderr until a line contains ``needle`` (e.g. "Subscribing on")."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen += line
        if needle in line:
            return line
    proc.kill()
    raise AssertionError(f"{needle!r} not seen on stderr; got:\n{seen}")


def finish(proc: subprocess.Popen[str], timeout: float = 15) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"background nats did not finish; stdout:\n{out}\nstderr:\n{err}"
        ) from None
    return proc.returncode, out, err


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def cli_root() -> Iterator[Path]:
    # natsd's own console script, not a reference component: missing means a broken install.
    assert NATS.exists(), f"{NATS} is not installed (pip install -e .)"
    d = Path(tempfile.mkdtemp(prefix="natscli-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def servers(cli_root: Path) -> Iterator[dict[str, ServerProc]]:
    started: dict[str, ServerProc] = {}
    try:
        for kind in KINDS:
            if kind == "nats-server" and nats_server_binary() is None:
                continue  # its tests call require_nats_server (fail under CI, else skip)
            started[kind] = ServerProc(kind, cli_root).start()
        yield started
    finally:
        for s in started.values():
            s.stop()


@pytest.fixture(params=KINDS)
def server(request: pytest.FixtureRequest, servers: dict[str, ServerProc]) -> ServerProc:
    if request.param == "nats-server":
        require_nats_server()
    srv = servers[request.param]
    srv.clean()
    return srv


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["XDG_CONFIG_HOME"] = str(home / "config")  # no context of the machine's user
    env["HOME"] = str(home)
    env["COLUMNS"] = "200"
    return env


@pytest.fixture
def cli(server: ServerProc, tmp_path: Path) -> Cli:
    return Cli(server, tmp_path, base_env(tmp_path))
