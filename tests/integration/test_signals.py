"""Signals against real server processes: SIGHUP reload, SIGUSR1 log reopen, SIGUSR2 lame
duck mode, and ``--signal``.

Every scenario runs against natsd and against nats-server (the reference) with the same
assertions; the expected texts were read from nats-server. Waiting is on events: the log
line a server writes when it has handled a signal, a client callback, process exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from nats.aio.client import Client as NATS
from ports import free_port

KINDS = ["natsd", "nats-server"]
RELOADED = "Reloaded server configuration"
FAILED = "Failed to reload server configuration"


def _command(kind: str) -> list[str]:
    if kind == "natsd":
        return [sys.executable, "-m", "natsd"]
    return [require_nats_server()]


class Proc:
    """A server started with ``-c <file>``; its port is in the file, not on the command
    line (command-line flags override the file on reload, in both servers)."""

    def __init__(self, kind: str, directory: Path, config: str, *args: str) -> None:
        self.kind = kind
        self.dir = directory
        self.port = free_port()
        self.conf = directory / "server.conf"
        self.write(config)
        self.stderr = directory / "stderr.log"
        with open(self.stderr, "wb") as out:
            self.proc = subprocess.Popen(
                [*_command(kind), "-c", str(self.conf), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.url = f"nats://127.0.0.1:{self.port}"
        # Where the server logs: stderr, or its log_file.
        self.main_log = self.stderr

    def write(self, config: str, port: int | None = None) -> None:
        self.conf.write_text(f"host: 127.0.0.1\nport: {port or self.port}\n{config}")

    def log(self, path: Path | None = None) -> str:
        try:
            return (path or self.main_log).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    async def wait_log(
        self, text: str, count: int = 1, timeout: float = 20.0, path: Path | None = None
    ) -> str:
        deadline = time.monotonic() + timeout
        while True:
            log = self.log(path)
            if log.count(text) >= count:
                return log
            if self.proc.poll() is not None and text not in log:
                raise AssertionError(f"{self.kind} exited ({self.proc.returncode}):\n{log}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind}: no {text!r} (x{count}) in:\n{log}")
            await asyncio.sleep(0.02)

    async def reload(self, config: str | None = None, port: int | None = None) -> str:
        """Rewrite the file (if given), send SIGHUP and return the log lines it caused."""
        if config is not None:
            self.write(config, port)
        before = self.log()
        n = before.count(RELOADED) + before.count(FAILED)
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while True:
            log = self.log()
            if log.count(RELOADED) + log.count(FAILED) > n:
                return log[len(before) :]
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{self.kind}: reload not reported:\n{log}")
            await asyncio.sleep(0.02)

    async def wait_exit(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.kind} still running after {timeout}s")
            await asyncio.sleep(0.02)
        return int(self.proc.returncode)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    procs: list[Proc] = []

    async def start(kind: str, config: str, *args: str, log_file: Path | None = None) -> Proc:
        p = Proc(kind, tmp_path, config, *args)
        procs.append(p)
        p.main_log = log_file or p.stderr
        await p.wait_log("Server is ready")
        return p

    yield start
    for p in procs:
        p.stop()


class Client:
    """A nats-py connection that records what happens to it."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.closed = asyncio.Event()
        self.ldm = asyncio.Event()
        self.nc: NATS | None = None

    async def connect(self, url: str, user: str | None = None, password: str = "pw") -> Client:
        async def on_error(e: Exception) -> None:
            self.errors.append(str(e))

        async def on_closed() -> None:
            self.closed.set()

        async def on_ldm() -> None:
            self.ldm.set()

        kw: dict[str, Any] = {}
        if user is not None:
            kw = {"user": user, "password": password}
        self.nc = await nats.connect(
            url,
            allow_reconnect=False,
            connect_timeout=5,
            error_cb=on_error,
            closed_cb=on_closed,
            lame_duck_mode_cb=on_ldm,
            **kw,
        )
        return self

    @property
    def conn(self) -> NATS:
        assert self.nc is not None
        return self.nc

    async def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.nc.close(), 5)


async def sync(nc: NATS) -> None:
    """Return once the server has processed everything ``nc`` published, and ``nc`` has
    read what the server answered before that. nats-py writes the PING of ``flush()``
    straight to the socket while publishes wait in its buffer, so one flush can overtake
    them; the second PING leaves after the buffer was written."""
    await nc.flush()
    await nc.flush()


async def connect_error(url: str, user: str, password: str = "pw") -> str:
    """The error a connection attempt ends with ("" when it succeeds)."""
    try:
        nc = await nats.connect(
            url, user=user, password=password, allow_reconnect=False, connect_timeout=5
        )
    except Exception as e:
        return type(e).__name__
    await nc.close()
    return ""


async def roundtrip(c: Client, subject: str) -> bytes:
    sub = await c.conn.subscribe(subject)
    await c.conn.publish(subject, b"hi")
    msg = await sub.next_msg(timeout=5)
    await sub.unsubscribe()
    return bytes(msg.data)


USERS_BEFORE = """
authorization {
  users = [
    {user: keep, password: pw}
    {user: gone, password: pw}
    {user: repw, password: old}
    {user: perm, password: pw, permissions: {publish: ">", subscribe: ">"}}
  ]
}
"""
USERS_AFTER = """
authorization {
  users = [
    {user: keep, password: pw}
    {user: repw, password: new}
    {user: perm, password: pw, permissions: {publish: "ok.>", subscribe: ["bar", "ok.>"]}}
    {user: fresh, password: pw}
  ]
}
"""


@pytest.mark.parametrize("kind", KINDS)
async def test_reload_users_passwords_and_permissions(kind: str, server: Any) -> None:
    srv = await server(kind, USERS_BEFORE)
    keep = await Client().connect(srv.url, "keep")
    gone = await Client().connect(srv.url, "gone")
    repw = await Client().connect(srv.url, "repw", "old")
    perm = await Client().connect(srv.url, "perm")
    try:
        await perm.conn.subscribe("foo")
        await perm.conn.subscribe("bar")
        await sync(perm.conn)

        lines = await srv.reload(USERS_AFTER)
        assert RELOADED in lines and FAILED not in lines

        # The removed user is disconnected; the one whose password changed is told why.
        await asyncio.wait_for(gone.closed.wait(), 10)
        await asyncio.wait_for(repw.closed.wait(), 10)
        assert type(gone.conn.last_error).__name__ != "AuthorizationError"
        assert type(repw.conn.last_error).__name__ == "AuthorizationError"

        # New permissions apply to the connection that stays: the "foo" subscription is
        # removed and reported, publishing outside "ok.>" is refused.
        await perm.conn.publish("foo", b"x")
        await perm.conn.publish("ok.1", b"x")
        await sync(perm.conn)
        assert perm.errors == [
            'nats: permissions violation for subscription to "foo" (sid "1")',
            'nats: permissions violation for publish to "foo"',
        ]
        assert await roundtrip(perm, "ok.2") == b"hi"

        assert await roundtrip(keep, "news") == b"hi"
        assert await connect_error(srv.url, "fresh") == ""
        assert await connect_error(srv.url, "gone") != ""
        assert await connect_error(srv.url, "repw", "old") != ""
        assert await connect_error(srv.url, "repw", "new") == ""
    finally:
        for c in (keep, gone, repw, perm):
            await c.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_reload_max_payload_and_debug(kind: str, server: Any) -> None:
    srv = await server(kind, "max_payload: 1000\n")
    # A raw connection made before the reload: its limit changes with the reload.
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        assert b'"max_payload":1000' in await reader.readline()
        writer.write(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB big 1\r\nPING\r\n')
        assert await reader.readline() == b"PONG\r\n"
        assert "[DBG]" not in srv.log()

        lines = await srv.reload("max_payload: 2000\ndebug: true\n")
        assert "Reloaded: max_payload = 2000" in lines
        assert "Reloaded: debug = true" in lines

        writer.write(b"PUB big 1500\r\n" + b"x" * 1500 + b"\r\nPING\r\n")
        assert await reader.readline() == b"MSG big 1 1500\r\n"
        assert await reader.readline() == b"x" * 1500 + b"\r\n"
        assert await reader.readline() == b"PONG\r\n"

        nc = await Client().connect(srv.url)
        assert nc.conn.max_payload == 2000
        await nc.close()
        # Debug logging is on: the new connection was logged at debug level.
        await srv.wait_log("[DBG]")
    finally:
        writer.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_refused_reload_keeps_the_old_configuration(kind: str, server: Any) -> None:
    before = "authorization { users = [ {user: a, password: pw} ] }\nmax_payload: 1000\n"
    srv = await server(kind, before)
    a = await Client().connect(srv.url, "a")
    try:
        # The port cannot change at run time; nothing else in the file is applied either.
        other = free_port()
        after = "authorization { users = [ {user: z, password: pw} ] }\nmax_payload: 2000\n"
        lines = await srv.reload(after, port=other)
        refused = [ln for ln in lines.splitlines() if FAILED in ln]
        assert len(refused) == 1, lines
        assert refused[0].endswith(
            f"{FAILED}: config reload not supported for Port: old={srv.port}, new={other}"
        )
        assert RELOADED not in lines

        # A file that does not parse: the same, one error and the old configuration.
        srv.conf.write_text("port: {\n")
        lines = await srv.reload()
        assert len([ln for ln in lines.splitlines() if FAILED in ln]) == 1, lines

        assert await roundtrip(a, "still") == b"hi"
        assert await connect_error(srv.url, "a") == ""
        assert await connect_error(srv.url, "z") != ""
        b = await Client().connect(srv.url, "a")
        assert b.conn.max_payload == 1000
        await b.close()
    finally:
        await a.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_sigusr1_reopens_the_log_file(kind: str, server: Any, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    srv = await server(kind, f'log_file: "{log}"\n', log_file=log)
    rotated = tmp_path / "server.log.1"
    log.rename(rotated)
    srv.proc.send_signal(signal.SIGUSR1)
    await srv.wait_log("File log re-opened")
    await srv.reload()
    assert RELOADED not in srv.log(rotated)
    assert "Server is ready" in srv.log(rotated)


LAME_DUCK = "lame_duck_duration: 30s\nlame_duck_grace_period: 1s\n"


@pytest.mark.parametrize("kind", KINDS)
async def test_sigusr2_lame_duck_mode(kind: str, server: Any) -> None:
    srv = await server(kind, LAME_DUCK)
    clients = [await Client().connect(srv.url) for _ in range(2)]
    for c in clients:
        await sync(c.conn)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGUSR2)
    try:
        # Clients learn it from an INFO with "ldm": true; no new client is accepted.
        for c in clients:
            await asyncio.wait_for(c.ldm.wait(), 10)
        await srv.wait_log("Entering lame duck mode, stop accepting new clients")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()
        # After the grace period the clients are closed (at most a second apart), then
        # the server exits by itself.
        for c in clients:
            await asyncio.wait_for(c.closed.wait(), 20)
        assert await srv.wait_exit(20) == 0
        assert time.monotonic() - t0 >= 1.0
        log = srv.log()
        assert log.index("Closing existing clients") > log.index("Entering lame duck mode")
    finally:
        for c in clients:
            await c.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_sigterm_is_ignored_in_lame_duck_mode(kind: str, server: Any) -> None:
    srv = await server(kind, LAME_DUCK)
    c = await Client().connect(srv.url)
    await sync(c.conn)
    try:
        srv.proc.send_signal(signal.SIGUSR2)
        await asyncio.wait_for(c.ldm.wait(), 10)
        srv.proc.send_signal(signal.SIGTERM)
        await srv.wait_log('Trapped "terminated" signal')
        # Still in its grace period: the connection stays until lame duck mode closes it.
        assert not c.closed.is_set() and srv.proc.poll() is None
        assert await srv.wait_exit(20) == 0
    finally:
        await c.close()


def _natsd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "natsd", *args], capture_output=True, text=True, timeout=60
    )


async def test_signal_flag_reload_reopen_and_quit(server: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "natsd.pid"
    srv = await server("natsd", "max_payload: 1000\n", "-P", str(pid_file))
    pid = str(srv.proc.pid)
    srv.write("max_payload: 2000\n")
    res = await asyncio.to_thread(_natsd, "--signal", f"reload={pid}")
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    await srv.wait_log("Reloaded: max_payload = 2000")
    # A pid file path works in place of the pid; -sl is the short form.
    res = await asyncio.to_thread(_natsd, "-sl", f"reopen={pid_file}")
    assert res.returncode == 0, res.stderr
    await srv.wait_log("File log re-open ignored, not a file logger")
    res = await asyncio.to_thread(_natsd, "--signal", f"quit={pid_file}")
    assert res.returncode == 0, res.stderr
    assert await srv.wait_exit(20) == 0
    await srv.wait_log('Trapped "interrupt" signal')


@pytest.mark.parametrize(
    ("arg", "error"),
    [
        ("bogus=1", 'unknown signal "bogus"'),
        ("reload=notapid", "invalid pid: notapid"),
        ("reload=1=2", "invalid signal parameters: [2]"),
    ],
)
async def test_signal_flag_errors_match_nats_server(arg: str, error: str) -> None:
    res = await asyncio.to_thread(_natsd, "--signal", arg)
    assert (res.returncode, res.stderr.strip()) == (1, f"natsd: {error}")
    ref = await asyncio.to_thread(
        subprocess.run,
        [*_command("nats-server"), "--signal", arg],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ref.returncode, ref.stderr.strip()) == (1, f"nats-server: {error}")


async def test_usage_lists_the_signal_flag() -> None:
    res = await asyncio.to_thread(_natsd, "-h")
    assert "--signal <signal>[=<pid>]" in res.stdout
    assert "(ldm, stop, quit, term, reopen, reload)" in res.stdout


@pytest.mark.parametrize("kind", KINDS)
async def test_flags_still_win_after_reload(kind: str, server: Any) -> None:
    # -D on the command line: the file's "debug: false" does not turn it off on reload.
    srv = await server(kind, "debug: false\n", "-D")
    lines = await srv.reload("debug: false\nping_max: 5\n")
    assert "Reloaded: ping_max = 5" in lines and "debug" not in lines
    c = await Client().connect(srv.url)
    await c.close()
    await srv.wait_log("Client connection created")


@pytest.mark.parametrize("kind", KINDS)
async def test_reload_without_a_configuration_file(kind: str, tmp_path: Path) -> None:
    port = free_port()
    stderr = tmp_path / "stderr.log"
    with open(stderr, "wb") as out:
        proc = subprocess.Popen(
            [*_command(kind), "-a", "127.0.0.1", "-p", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 20
        while "Server is ready" not in stderr.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, stderr.read_text()
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGHUP)
        expected = f"{FAILED}: can only reload config when a file is provided using -c or --config"
        while expected not in stderr.read_text():
            assert time.monotonic() < deadline and proc.poll() is None, stderr.read_text()
            await asyncio.sleep(0.02)
        c = await Client().connect(f"nats://127.0.0.1:{port}")
        await c.close()
    finally:
        proc.kill()
        proc.wait(10)
