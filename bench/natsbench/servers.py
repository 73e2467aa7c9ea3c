"""The servers under test: their names (the table's columns) and how each is started.

``Server`` starts and stops one process (natsd or the reference nats-server) on a free port;
``make_js_servers`` builds the four JetStream columns, each with its own store directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HOST = "127.0.0.1"

REF = "nats-server"
REF_SYNC = "nats-server-sync"  # nats-server with jetstream { sync_interval: always }
IMPL = "natsd"
IMPL_LAZY = "natsd-lazy"  # natsd with jetstream { sync_interval: "2m" } (nats-server's default)
LAZY_INTERVAL = "2m"
ALL_SERVERS = (REF, REF_SYNC, IMPL, IMPL_LAZY)
#: the columns of the scenarios that only nats-server and natsd run (nothing is synced)
REF_AND_IMPL = (REF, IMPL)
# ratio columns (numerator, denominator), shown when both servers run
RATIOS = ((IMPL, REF), (IMPL, REF_SYNC), (IMPL_LAZY, REF))


class ServerStartError(Exception):
    """The server did not become ready (exited, or no INFO within the time limit)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def read_info(port: int, timeout: float = 1.0) -> dict[str, Any] | None:
    """Connect once and return the parsed INFO JSON, or None if not (yet) possible."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as s:
            buf = b""
            deadline = time.monotonic() + timeout
            while b"\r\n" not in buf and len(buf) < 65536 and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    return None
                buf += chunk
    except OSError:
        return None
    line = buf.split(b"\r\n", 1)[0]
    if not line.startswith(b"INFO "):
        return None
    try:
        info = json.loads(line[5:])
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


@dataclass
class Server:
    """One server under test, started as ``cmd + ["-a", HOST, "-p", port]``."""

    name: str
    cmd: list[str]
    log_dir: Path
    env: dict[str, str] | None = None
    #: JetStream store directory: emptied (re-created) before every start
    store_dir: Path | None = None
    #: log file name (without .log); defaults to ``name``
    log_stem: str = ""
    port: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    _log: IO[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.log_stem or self.name}.log"

    @property
    def version(self) -> str:
        v = self.info.get("version")
        return str(v) if v else "?"

    def start(self, timeout: float = 20.0, attempts: int = 3) -> None:
        last: Exception | None = None
        for _ in range(attempts):
            try:
                self._start_once(timeout)
                return
            except ServerStartError as exc:  # e.g. lost the race for the port: retry
                last = exc
                self.stop()
        assert last is not None
        raise last

    def _start_once(self, timeout: float) -> None:
        self.port = free_port()
        self.starts += 1
        if self.store_dir is not None:
            shutil.rmtree(self.store_dir, ignore_errors=True)
            self.store_dir.mkdir(parents=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"\n=== start #{self.starts}: port {self.port}\n".encode())
        self._log.flush()
        argv = [*self.cmd, "-a", HOST, "-p", str(self.port)]
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,  # own process group: stop() kills the whole tree
            )
        except OSError as exc:
            raise ServerStartError(f"{self.name}: cannot run {argv!r}: {exc}") from exc
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerStartError(
                    f"{self.name} exited with code {rc} during startup; log tail:\n"
                    + self.log_tail()
                )
            info = read_info(self.port, timeout=0.5)
            if info is not None:
                self.info = info
                return
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{self.name} not ready (no INFO on port {self.port}) after {timeout:.0f}s;"
                    " log tail:\n" + self.log_tail()
                )
            time.sleep(0.02)

    def cpu_seconds(self) -> float:
        """User+system CPU time used so far by the server process (all threads); 0 if unknown."""
        if self.proc is None:
            return 0.0
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return 0.0
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the server's process group, SIGKILL after ``timeout``."""
        proc = self.proc
        if proc is not None:
            if proc.poll() is None:
                self._signal(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self._signal(proc, signal.SIGKILL)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout)
            # children that outlived the leader (if any)
            self._signal(proc, signal.SIGKILL)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, timeout: float = 20.0) -> None:
        self.stop()
        self.start(timeout)

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join("    " + ln for ln in text.splitlines()[-lines:])


def make_js_servers(
    names: list[str],
    ref_cmd: list[str],
    impl_cmd: list[str],
    impl_env: dict[str, str],
    natsd_js_args: str,
    log_dir: Path,
    store_root: Path,
) -> list[Server]:
    """JetStream-enabled servers, each with its own (wiped on start) store directory."""
    out: list[Server] = []
    for n in names:
        d = store_root / n
        if n == REF:
            cmd = [*ref_cmd, "-js", "-sd", str(d)]
            out.append(Server(REF, cmd, log_dir, store_dir=d, log_stem=f"{REF}-js"))
        elif n == REF_SYNC:
            conf = store_root / f"{REF_SYNC}.conf"
            sd = json.dumps(str(d))
            conf.write_text(f"jetstream {{ store_dir: {sd}, sync_interval: always }}\n")
            out.append(Server(REF_SYNC, [*ref_cmd, "-c", str(conf)], log_dir, store_dir=d))
        elif n == IMPL:
            extra = [x.replace("{store}", str(d)) for x in shlex.split(natsd_js_args)]
            cmd = [*impl_cmd, *extra]
            out.append(Server(IMPL, cmd, log_dir, impl_env, store_dir=d, log_stem=f"{IMPL}-js"))
        elif n == IMPL_LAZY:
            # like REF_SYNC: a nats-server config file (natsd reads them), not --natsd-js-args
            conf = store_root / f"{IMPL_LAZY}.conf"
            sd, every = json.dumps(str(d)), json.dumps(LAZY_INTERVAL)
            conf.write_text(f"jetstream {{ store_dir: {sd}, sync_interval: {every} }}\n")
            cmd = [*impl_cmd, "-c", str(conf)]
            out.append(Server(IMPL_LAZY, cmd, log_dir, impl_env, store_dir=d))
        else:
            raise ValueError(n)
    return out


CLUSTER_NAME = "bench"


@dataclass
class ClusterServer(Server):
    """A two-server cluster on loopback, as one column: ``port`` is the first server's
    client port (publishers connect there), ``peer_port`` the second's (subscribers of the
    cross-server scenarios). Both are started with the same command plus nats-server's
    cluster flags, and it is ready once each server's INFO lists both client URLs (the
    route is up)."""

    peer: Server | None = None
    peer_port: int = 0

    def _start_once(self, timeout: float) -> None:
        ca, cb = free_port(), free_port()
        base = list(self.cmd)
        self.peer = Server(
            self.name, self._clustered(base, cb, ca), self.log_dir, self.env,
            log_stem=f"{self.log_stem or self.name}-b",
        )  # fmt: skip
        self.cmd = self._clustered(base, ca, cb)
        try:
            super()._start_once(timeout)
            self.peer.start(timeout, attempts=1)
        finally:
            self.cmd = base
        self.peer_port = self.peer.port
        deadline = time.monotonic() + timeout
        while not all(len(self._urls(p)) >= 2 for p in (self.port, self.peer_port)):
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{self.name}: the two servers did not form a cluster in {timeout:.0f}s;"
                    " log tail:\n" + self.log_tail()
                )
            time.sleep(0.05)

    @staticmethod
    def _clustered(cmd: list[str], own: int, other: int) -> list[str]:
        return [
            *cmd,
            "--cluster_name", CLUSTER_NAME,
            "--cluster", f"nats://{HOST}:{own}",
            "--routes", f"nats://{HOST}:{other}",
        ]  # fmt: skip

    @staticmethod
    def _urls(port: int) -> list[Any]:
        info = read_info(port) or {}
        urls = info.get("connect_urls")
        return urls if isinstance(urls, list) else []

    def cpu_seconds(self) -> float:
        return super().cpu_seconds() + (self.peer.cpu_seconds() if self.peer else 0.0)

    def alive(self) -> bool:
        return super().alive() and self.peer is not None and self.peer.alive()

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        if self.peer is not None:
            self.peer.stop(timeout)

    def log_tail(self, lines: int = 15) -> str:
        tail = super().log_tail(lines)
        return tail + ("\n  (second server)\n" + self.peer.log_tail(lines) if self.peer else "")
