"""Fixtures for integration tests: natsd over real sockets, driven by nats-py and raw TCP.

Every test talks to a server through ``make_server(**opts)``, which by default starts an
embedded ``natsd.Server`` on a random port. Setting ``NATSD_IT_TARGET=nats-server`` runs the
same tests against the real Go nats-server (options are translated into a config file), which
is how the expectations in these tests were checked against the reference implementation.

Users are given as plain dicts so both targets can be configured from one description::

    {"user": "a", "password": "pw", "account": "A",
     "permissions": {"publish": {"allow": ["x.>"]}, "subscribe": ["y"]}}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from embedded_cluster import EmbeddedJsCluster
from nats.aio.client import Client as NATS

import natsd
from natsd.config.options import AccountConfig
from natsd.security.auth import User
from natsd.security.permissions import parse_permissions

ROOT = Path(__file__).resolve().parents[2]
TARGET = os.environ.get("NATSD_IT_TARGET", "natsd")
REAL = TARGET == "nats-server"

only_natsd = pytest.mark.skipif(REAL, reason="natsd-specific behaviour")

LISTEN_RE = re.compile(r"Listening for client connections on (\S+):(\d+)")
_ASYNC_INFO = re.compile(rb"(?:^|(?<=\r\n))INFO \{[^\r\n]*\} ?\r\n")
MONITOR_RE = re.compile(r"Starting http monitor on (\S+):(\d+)")


# --------------------------------------------------------------------------- helpers
def server_cmd() -> list[str]:
    """The command line prefix that runs the server under test as a process."""
    if REAL:
        return [require_nats_server()]
    return [sys.executable, "-m", "natsd"]


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str, bytes]:
    """Blocking GET; returns (status, content-type, body). Use via asyncio.to_thread."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


async def get_json(url: str) -> dict[str, Any]:
    status, _, body = await asyncio.to_thread(http_get, url)
    assert status == 200, (url, status, body[:200])
    return json.loads(body)


async def wait_for(
    pred: Callable[[], Any] | Callable[[], Awaitable[Any]],
    timeout: float = 5.0,
    interval: float = 0.02,
    what: str | Callable[[], str] = "condition",
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        res = pred()
        if asyncio.iscoroutine(res):
            res = await res
        if res:
            return res
        if time.monotonic() > deadline:
            desc = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {desc}")
        await asyncio.sleep(interval)


# --------------------------------------------------------------------------- raw client
class RawClient:
    """A bare TCP connection speaking the NATS text protocol by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buf = b""
        self.info: dict[str, Any] = {}
        self.eof = False
        # Set once the greeting INFO was read: later (async) INFO lines are dropped.
        self.skip_info = False

    @classmethod
    async def open(
        cls, port: int, host: str = "127.0.0.1", rcvbuf: int | None = None, read_info: bool = True
    ) -> RawClient:
        if rcvbuf is None:
            reader, writer = await asyncio.open_connection(host, port)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
            reader, writer = await asyncio.open_connection(sock=sock, limit=rcvbuf)
        rc = cls(reader, writer)
        if read_info:
            line = await rc.readline()
            rc.skip_info = True
            assert line.startswith(b"INFO "), line
            rc.info = json.loads(line[5:])
        return rc

    async def send(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.writer.write(data)
        await self.writer.drain()

    async def _fill(self, timeout: float) -> bool:
        """Read more bytes into buf; False at EOF or connection reset."""
        if self.eof:
            return False
        try:
            chunk = await asyncio.wait_for(self.reader.read(65536), timeout)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        if self.skip_info:
            # nats-server (2.11+) sends an INFO with connect_info=true after the first PONG;
            # async INFOs are not what the tests look at.
            self.buf = _ASYNC_INFO.sub(b"", self.buf)
        return True

    async def readline(self, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while b"\r\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no line within {timeout}s; have {self.buf[:200]!r}")
            if not await self._fill(left):
                raise ConnectionError(f"closed before a full line; have {self.buf[:200]!r}")
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    async def expect(self, needle: bytes, timeout: float = 5.0) -> bytes:
        """Read until ``needle`` was received; returns everything up to and including it."""
        deadline = time.monotonic() + timeout
        while needle not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"{needle!r} not received within {timeout}s; have {self.buf[-300:]!r}"
                )
            if not await self._fill(left):
                raise ConnectionError(f"closed before {needle!r}; have {self.buf[-300:]!r}")
        i = self.buf.index(needle) + len(needle)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    async def read_until_closed(self, timeout: float = 5.0, keep: int | None = None) -> bytes:
        """Read until the server closes the connection; returns the bytes received.

        With ``keep`` only the last ``keep`` bytes are returned (for draining large volumes);
        ``self.total_read`` counts everything read by this call.
        """
        deadline = time.monotonic() + timeout
        self.total_read = len(self.buf)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"connection still open after {timeout}s; read {self.total_read} bytes, "
                    f"last: {self.buf[-200:]!r}"
                )
            n = len(self.buf)
            if not await self._fill(left):
                out, self.buf = self.buf, b""
                return out
            self.total_read += len(self.buf) - n
            if keep is not None and len(self.buf) > keep:
                self.buf = self.buf[-keep:]

    async def connect(self, **opts: Any) -> None:
        """CONNECT (verbose off) and PING/PONG to know it was processed."""
        o = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
        }
        o.update(opts)
        await self.send(f"CONNECT {json.dumps(o)}\r\nPING\r\n")
        await self.expect(b"PONG\r\n")

    async def ping(self) -> None:
        await self.send(b"PING\r\n")
        await self.expect(b"PONG\r\n")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


# --------------------------------------------------------------------------- servers
@dataclass
class ServerHandle:
    """What tests use of a running server, whichever implementation runs it."""

    host: str
    port: int
    monitor_port: int
    embedded: Any = None
    proc: subprocess.Popen[bytes] | None = None
    log_path: str = ""
    opts: dict[str, Any] = field(default_factory=dict)

    @property
    def client_url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{self.host}:{self.monitor_port}"

    def log(self) -> str:
        if not self.log_path:
            return ""
        return Path(self.log_path).read_text(errors="replace")


def _natsd_users(specs: list[dict[str, Any]]) -> list[User]:
    return [
        User(
            s["user"],
            s["password"],
            s.get("account", "$G"),
            parse_permissions(s["permissions"]) if s.get("permissions") else None,
        )
        for s in specs
    ]


def _conf_value(v: Any) -> str:
    # JSON is a subset of the nats-server config syntax.
    return json.dumps(v)


def nats_server_config(opts: dict[str, Any]) -> str:
    """Translate make_server options into a nats-server configuration file."""
    lines = ['listen: "127.0.0.1:-1"', 'http: "127.0.0.1:-1"']
    simple = (
        "max_payload",
        "max_pending",
        "max_connections",
        "ping_max",
        "max_control_line",
        "max_subs",
    )
    for k in simple:
        if k in opts:
            lines.append(f"{k}: {opts[k]}")
    if "ping_interval" in opts:
        lines.append(f'ping_interval: "{int(opts["ping_interval"] * 1000)}ms"')
    if "write_deadline" in opts:
        lines.append(f'write_deadline: "{int(opts["write_deadline"] * 1000)}ms"')
    users = opts.get("users") or []
    global_users = [u for u in users if u.get("account", "$G") == "$G"]
    accounts: dict[str, list[dict[str, Any]]] = {a: [] for a in opts.get("accounts", [])}
    for u in users:
        if u.get("account", "$G") != "$G":
            accounts.setdefault(u["account"], []).append(u)

    def conf_user(u: dict[str, Any]) -> dict[str, Any]:
        d = {"user": u["user"], "password": u["password"]}
        if u.get("permissions"):
            d["permissions"] = u["permissions"]
        return d

    auth: dict[str, Any] = {}
    if global_users:
        auth["users"] = [conf_user(u) for u in global_users]
    if opts.get("token"):
        auth["token"] = opts["token"]
    if "auth_timeout" in opts:
        auth["timeout"] = opts["auth_timeout"]
    if auth:
        lines.append(f"authorization: {_conf_value(auth)}")
    if accounts:
        acc = {name: {"users": [conf_user(u) for u in us]} for name, us in accounts.items()}
        lines.append(f"accounts: {_conf_value(acc)}")
    if opts.get("no_auth_user"):
        lines.append(f"no_auth_user: {opts['no_auth_user']}")
    return "\n".join(lines) + "\n"


class ServerProcess:
    """A server (natsd or nats-server) run as a child process, stderr to a file."""

    def __init__(self, args: list[str], log_path: str, cwd: str | None = None) -> None:
        self.args = args
        self.log_path = log_path
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.monitor_port = 0

    def start(self) -> ServerProcess:
        # Append so restarts keep the earlier log; offset marks where this run starts.
        self._offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                [*server_cmd(), *self.args],
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                cwd=self.cwd,
                start_new_session=True,
            )
        finally:
            logf.close()
        return self

    def log(self) -> str:
        return Path(self.log_path).read_text(errors="replace")

    def current_log(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    async def wait_ready(self, timeout: float = 15.0) -> ServerProcess:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            text = self.current_log()
            if "Server is ready" in text:
                m = LISTEN_RE.search(text)
                assert m, text
                self.port = int(m.group(2))
                mm = MONITOR_RE.search(text)
                if mm:
                    self.monitor_port = int(mm.group(2))
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                raise AssertionError(f"server not ready after {timeout}s:\n{text}")
            await asyncio.sleep(0.02)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    async def wait_exit(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"process {self.proc.pid} did not exit within {timeout}s")
            await asyncio.sleep(0.02)
        return int(self.proc.returncode)

    def stop(self) -> None:
        """SIGKILL to the server's process group (its own session), then wait until no
        process of it runs: with ``--workers`` the workers are in it too, and they only die
        after their supervisor, so a test's directory could otherwise be removed under a
        worker still writing its store."""
        p = self.proc
        if p is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            p.wait(5)
        deadline = time.monotonic() + 5
        while _group_runs(p.pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def _group_runs(pgid: int) -> bool:
    """Does a process of group ``pgid`` still run (a zombie does not count)?"""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@pytest.fixture
def tmp_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="natsd-it-") as d:
        yield d


@pytest.fixture
async def spawn(tmp_dir: str) -> AsyncIterator[Callable[..., ServerProcess]]:
    """spawn(*args) -> ServerProcess (started, not yet waited for); killed at teardown."""
    procs: list[ServerProcess] = []

    def _spawn(*args: str, log_name: str | None = None, cwd: str | None = None) -> ServerProcess:
        log_path = os.path.join(tmp_dir, log_name or f"server-{len(procs)}.log")
        sp = ServerProcess(list(args), log_path, cwd=cwd or tmp_dir).start()
        procs.append(sp)
        return sp

    yield _spawn
    for sp in procs:
        sp.stop()


@pytest.fixture
async def make_server(tmp_dir: str) -> AsyncIterator[Callable[..., Awaitable[ServerHandle]]]:
    """make_server(**opts) -> ServerHandle of a running server with monitoring on.

    opts: max_payload, max_pending, max_connections, ping_interval, ping_max, auth_timeout,
    write_deadline, max_control_line, max_subs, users (dicts, see module doc), token,
    no_auth_user, accounts (list of account names).
    """
    handles: list[ServerHandle] = []
    procs: list[ServerProcess] = []

    async def _make(**opts: Any) -> ServerHandle:
        if REAL:
            conf = os.path.join(tmp_dir, f"real-{len(procs)}.conf")
            Path(conf).write_text(nats_server_config(opts))
            sp = ServerProcess(["-c", conf], os.path.join(tmp_dir, f"real-{len(procs)}.log"))
            procs.append(sp)
            await sp.start().wait_ready()
            h = ServerHandle(
                "127.0.0.1", sp.port, sp.monitor_port, proc=sp.proc, log_path=sp.log_path, opts=opts
            )
        else:
            kw = dict(opts)
            if "users" in kw:
                kw["users"] = _natsd_users(kw["users"])
            if "accounts" in kw:
                kw["accounts"] = {a: AccountConfig(a) for a in kw["accounts"]}
            srv = natsd.Server(host="127.0.0.1", port=0, http_port=-1, http_host="127.0.0.1", **kw)
            await srv.start()
            h = ServerHandle("127.0.0.1", srv.port, srv.monitor_port, embedded=srv, opts=opts)
        handles.append(h)
        return h

    yield _make
    for h in handles:
        if h.embedded is not None:
            await h.embedded.shutdown()
    for sp in procs:
        sp.stop()


@pytest.fixture
async def server(make_server: Callable[..., Awaitable[ServerHandle]]) -> ServerHandle:
    """A default server (no auth, default limits)."""
    return await make_server()


@pytest.fixture
async def connect(
    make_server: Any,
) -> AsyncIterator[Callable[..., Awaitable[NATS]]]:
    """connect(url, **nats_connect_kwargs) -> nats-py client, closed at teardown.

    Defaults: no reconnect (a test that wants reconnects says so), errors collected on
    ``nc.test_errors`` instead of being logged.
    """
    clients: list[NATS] = []

    async def _connect(url: str, **kw: Any) -> NATS:
        errors: list[Exception] = []

        async def _err(e: Exception) -> None:
            errors.append(e)

        kw.setdefault("error_cb", _err)
        kw.setdefault("allow_reconnect", False)
        kw.setdefault("connect_timeout", 3)
        nc = await nats.connect(url, **kw)
        nc.test_errors = errors  # type: ignore[attr-defined]
        clients.append(nc)
        return nc

    yield _connect
    for nc in clients:
        if not nc.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 5)


@pytest.fixture
async def raw() -> AsyncIterator[Callable[..., Awaitable[RawClient]]]:
    """raw(port, **kw) -> RawClient (INFO already read), closed at teardown."""
    conns: list[RawClient] = []

    async def _raw(port: int, **kw: Any) -> RawClient:
        rc = await RawClient.open(port, **kw)
        conns.append(rc)
        return rc

    yield _raw
    for rc in conns:
        rc.close()


@pytest.fixture
async def trio(tmp_path: Path) -> AsyncIterator[EmbeddedJsCluster]:
    """Three embedded JetStream servers n1..n3, started, with a meta leader (a module may
    define its own ``trio``, which then takes precedence)."""
    t = EmbeddedJsCluster(tmp_path)
    try:
        await t.start_all()
        yield t
    finally:
        await t.stop_all()


@pytest.fixture(autouse=True)
def _replica_states_hold(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No in-process replicated stream moved outside its state table during the test
    (``jetstream/cluster/replica.py`` reports such a move instead of raising)."""
    yield
    bad = [
        r.getMessage()
        for r in caplog.get_records("call")
        if "is not a transition" in r.getMessage()
    ]
    assert not bad, bad
