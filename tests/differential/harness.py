"""Differential test harness: run the same inputs against the real Go
``nats-server`` (the reference) and ``natsd`` and compare what comes back.

Reusable pieces (see the module docstrings of each for details):

* :func:`nats_server_binary` -- path to the reference binary or ``None`` (from
  ``components``; tests call ``components.require_nats_server()`` instead).
* :func:`server_pair` -- context manager starting BOTH servers with the same
  command-line flags / config file on free loopback ports; yields a
  :class:`ServerPair` (``.ref`` = nats-server, ``.impl`` = natsd).
* :func:`natsd_only` / :func:`start_server` -- a single server.
* :func:`run_raw` -- raw-socket scenario runner returning a normalised
  :class:`Transcript`; :func:`compare_raw` runs it against both servers in
  parallel and returns ``(ref, impl)``.
* :func:`run_client_both` -- run the same nats-py coroutine against both
  servers and return ``(ref_result, impl_result)``; :func:`run_reference` and
  :class:`ReferenceFailure` -- a failing reference side is an error, not a value.
* :func:`normalise_json` -- replace timestamps / ids / volatile fields with
  placeholders (for JetStream JSON API comparisons).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from components import nats_server_binary
from ports import free_port

HOST = "127.0.0.1"

# --------------------------------------------------------------------------
# Locating the servers (the reference binary: components.nats_server_binary)
# --------------------------------------------------------------------------


def natsd_command() -> list[str]:
    return [sys.executable, "-m", "natsd"]


# --------------------------------------------------------------------------
# Server processes
# --------------------------------------------------------------------------


class ServerStartError(RuntimeError):
    pass


@dataclasses.dataclass
class ServerProcess:
    """A running server subprocess listening on ``host:port``."""

    name: str  # "nats-server" or "natsd"
    argv: list[str]
    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)


@dataclasses.dataclass
class ServerPair:
    """The reference server (``ref``) and natsd (``impl``), same settings."""

    ref: ServerProcess
    impl: ServerProcess
    config_path: Path | None = None

    def __iter__(self) -> Iterator[ServerProcess]:
        return iter((self.ref, self.impl))


def _wait_ready(proc: subprocess.Popen[bytes], host: str, port: int, timeout: float) -> None:
    """Poll until a TCP connect succeeds and the server sends its INFO line."""
    deadline = time.monotonic() + timeout
    last_err: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerStartError(f"exited with code {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.5) as s:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                buf = b""
                while b"\r\n" not in buf:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                if buf.startswith(b"INFO "):
                    return
                last_err = ServerStartError(f"unexpected greeting {buf[:200]!r}")
        except OSError as e:
            last_err = e
        time.sleep(0.02)
    raise ServerStartError(f"not ready after {timeout}s: {last_err}")


def start_server(
    kind: str,
    args: Sequence[str] = (),
    *,
    config_path: Path | None = None,
    host: str = HOST,
    log_dir: Path | None = None,
    ready_timeout: float = 10.0,
    attempts: int = 3,
) -> ServerProcess:
    """Start one server (``kind`` = "nats-server" or "natsd").

    ``args`` are extra nats-server style flags (e.g. ``["--max_payload",
    "1024"]``); ``config_path`` is passed with ``-c``. Retries on a new port
    if the chosen one was grabbed concurrently.
    """
    if kind == "nats-server":
        binary = nats_server_binary()
        if binary is None:
            raise ServerStartError("nats-server binary not found")
        base = [binary]
    elif kind == "natsd":
        base = natsd_command()
    else:
        raise ValueError(kind)
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="natsd-diff-"))
    error: Exception | None = None
    for attempt in range(attempts):
        port = free_port(host)
        argv = [*base, "-a", host, "-p", str(port)]
        if config_path is not None:
            argv += ["-c", str(config_path)]
        argv += list(args)
        log_path = log_dir / f"{kind}-{port}-{attempt}.log"
        with open(log_path, "wb") as logf:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT
            )
        server = ServerProcess(kind, argv, proc, host, port, log_path)
        try:
            _wait_ready(proc, host, port, ready_timeout)
            return server
        except ServerStartError as e:
            server.stop()
            error = ServerStartError(f"{kind} failed to start ({e}); argv={argv}\n{server.log()}")
            if "address already in use" not in server.log():
                break
    assert error is not None
    raise error


def write_config(text: str, directory: Path | None = None) -> Path:
    directory = directory or Path(tempfile.mkdtemp(prefix="natsd-diff-conf-"))
    path = directory / "server.conf"
    path.write_text(text)
    return path


@contextlib.contextmanager
def server_pair(args: Sequence[str] = (), *, config: str | None = None) -> Iterator[ServerPair]:
    """Start nats-server and natsd with the same flags and (optional) config
    file text; yield a :class:`ServerPair`; stop both on exit.

    Raises :class:`ServerStartError` if either cannot start (callers in tests
    should call ``components.require_nats_server()`` first).
    """
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-"))
    config_path = write_config(config, tmp) if config is not None else None
    started: list[ServerProcess] = []
    try:
        # Start both concurrently: halves start-up latency.
        with ThreadPoolExecutor(2) as ex:
            futs = [
                ex.submit(start_server, kind, args, config_path=config_path, log_dir=tmp)
                for kind in ("nats-server", "natsd")
            ]
            errors = []
            for f in futs:
                try:
                    started.append(f.result())
                except Exception as e:
                    errors.append(e)
            if errors:
                raise errors[0]
        yield ServerPair(started[0], started[1], config_path)
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def js_config_pair(config: str) -> Iterator[ServerPair]:
    """nats-server and natsd with JetStream on, each with its own store directory, and the
    same configuration file text ``config`` (account or server JetStream limits)."""
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-js-conf-"))
    conf = write_config(config, tmp)
    started: list[ServerProcess] = []
    try:
        for kind in ("nats-server", "natsd"):
            sd = tmp / f"store-{kind}"
            sd.mkdir()
            started.append(
                start_server(kind, ["-js", "-sd", str(sd)], config_path=conf, log_dir=tmp)
            )
        yield ServerPair(started[0], started[1], conf)
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def natsd_only(args: Sequence[str] = (), *, config: str | None = None) -> Iterator[ServerProcess]:
    """Start natsd alone (no reference needed)."""
    tmp = Path(tempfile.mkdtemp(prefix="natsd-only-"))
    config_path = write_config(config, tmp) if config is not None else None
    server = start_server("natsd", args, config_path=config_path, log_dir=tmp)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# Raw-socket scenarios
# --------------------------------------------------------------------------

#: INFO fields that legitimately differ between servers / runs.
VOLATILE_INFO_FIELDS: frozenset[str] = frozenset(
    {
        "server_id",
        "server_name",
        "version",
        "go",
        "git_commit",
        "client_id",
        "client_ip",
        "port",
        "host",
        "xkey",
        "nonce",
        "api_lvl",
        "jetstream",
        "domain",
        "connect_urls",
        "ws_connect_urls",
        "cluster",
        "cluster_dynamic",
        "ip",
    }
)


@dataclasses.dataclass(frozen=True)
class Pause:
    """A delay between chunks in a scenario."""

    seconds: float


Chunk = bytes | Pause | float


@dataclasses.dataclass
class Transcript:
    """What a server sent back for one raw-socket scenario.

    ``info``: the first INFO line parsed as JSON minus volatile fields (``None``
    if the server sent no INFO); ``lines``: every following frame as a list of
    text lines (split on CRLF; a trailing partial line is kept, and a lone
    ``\\n`` inside a line is preserved); ``closed``: the server closed (or
    reset) the connection before the quiet timeout.
    """

    info: dict[str, Any] | None
    lines: list[str]
    closed: bool
    raw: bytes = dataclasses.field(default=b"", compare=False, repr=False)

    def comparable(self) -> tuple[Any, ...]:
        return (self.info, self.lines, self.closed)


def parse_info(line: bytes, drop: Iterable[str] = VOLATILE_INFO_FIELDS) -> dict[str, Any]:
    assert line.startswith(b"INFO "), line
    info = json.loads(line[5:].strip())
    for k in drop:
        info.pop(k, None)
    return info


def split_lines(data: bytes, info_drop: Iterable[str] = VOLATILE_INFO_FIELDS) -> list[str]:
    """Split server output on CRLF. Later ``INFO {...}`` lines (async INFO)
    are normalised like the greeting: volatile fields dropped, keys sorted."""
    parts = data.split(b"\r\n")
    if parts and parts[-1] == b"":
        parts.pop()
    drop = frozenset(info_drop)
    out = []
    for p in parts:
        if p.startswith(b"INFO {"):
            try:
                info = parse_info(p, drop)
            except ValueError:
                pass
            else:
                out.append("INFO " + json.dumps(info, sort_keys=True, separators=(",", ":")))
                continue
        out.append(p.decode("utf-8", "backslashreplace"))
    return out


def _recv_available(
    sock: socket.socket, buf: bytearray, wait: float, deadline: float | None = None
) -> bool:
    """Read until ``wait`` seconds pass with nothing arriving (or ``deadline``,
    a ``time.monotonic()`` value, passes). Returns True if the peer closed /
    reset the connection."""
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        r, _ = _wait_io(sock, wait)
        if not r:
            return False
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ConnectionAbortedError):
            return True
        except BlockingIOError:
            continue
        if not chunk:
            return True
        buf.extend(chunk)


def _recv_for(sock: socket.socket, buf: bytearray, seconds: float) -> bool:
    """Read whatever arrives during exactly ``seconds``. True if peer closed."""
    end = time.monotonic() + seconds
    while (remaining := end - time.monotonic()) > 0:
        if _recv_available(sock, buf, remaining, end):
            return True
    return False


def run_raw(
    address: tuple[str, int] | ServerProcess,
    chunks: Sequence[Chunk],
    *,
    quiet: float = 0.3,
    delay: float = 0.0,
    info_drop: Iterable[str] = VOLATILE_INFO_FIELDS,
    until: bytes | None = None,
    settle: float = 0.05,
    connect_timeout: float = 2.0,
    max_time: float = 10.0,
) -> Transcript:
    """Connect, wait for INFO, send ``chunks`` (bytes; a :class:`Pause` or a
    bare float sleeps; ``delay`` sleeps between every pair of byte chunks),
    then collect everything until the server closes or is quiet for
    ``quiet`` seconds. Returns a normalised :class:`Transcript`.

    ``until``: stop early once the received data ends with these bytes
    (e.g. ``b"PONG\\r\\n"`` for scenarios ending in PING), after a further
    ``settle`` seconds of quiet; falls back to ``quiet`` if it never comes.

    Data arriving while sending is drained after every chunk, so output
    written before a server-side close is not lost to a TCP reset.
    """
    if isinstance(address, ServerProcess):
        address = address.address
    buf = bytearray()
    closed = False
    start = time.monotonic()
    with socket.create_connection(address, timeout=connect_timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Wait for the INFO line.
        sock.settimeout(connect_timeout)
        while b"\r\n" not in buf:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                chunk = b""
            if not chunk:
                closed = True
                break
            buf.extend(chunk)
        sock.settimeout(None)
        sock.setblocking(True)
        first_send = True
        for item in chunks:
            if closed:
                break
            if isinstance(item, Pause | float | int):
                seconds = item.seconds if isinstance(item, Pause) else float(item)
                closed = _recv_for(sock, buf, seconds)
                continue
            if not first_send and delay:
                closed = _recv_for(sock, buf, delay)
                if closed:
                    break
            first_send = False
            try:
                _send_draining(sock, bytes(item), buf)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                closed = True
                break
            if _recv_available(sock, buf, 0):
                closed = True
        if not closed:
            deadline = start + max_time
            if until is not None:
                closed = _recv_until(sock, buf, until, quiet, deadline)
                if not closed and buf.endswith(until):
                    closed = _recv_available(sock, buf, settle, deadline)
            else:
                closed = _recv_available(sock, buf, quiet, deadline)
    data = bytes(buf)
    info: dict[str, Any] | None = None
    rest = data
    if data.startswith(b"INFO "):
        end = data.index(b"\r\n") if b"\r\n" in data else len(data)
        info = parse_info(data[:end], info_drop)
        rest = data[end + 2 :]
    return Transcript(info, split_lines(rest, info_drop), closed, data)


def _wait_io(sock: socket.socket, wait: float, write: bool = False) -> tuple[bool, bool]:
    """(readable, writable) within ``wait`` seconds: ``poll``, which takes any descriptor
    number (``select`` fails above 1023, as a long test session can reach)."""
    p = select.poll()
    p.register(sock, select.POLLIN | (select.POLLOUT if write else 0))
    r = w = False
    for _fd, ev in p.poll(max(0.0, wait) * 1000):
        r = r or bool(ev & (select.POLLIN | select.POLLHUP | select.POLLERR))
        w = w or bool(ev & select.POLLOUT)
    return r, w


def _recv_until(
    sock: socket.socket, buf: bytearray, marker: bytes, quiet: float, deadline: float
) -> bool:
    """Read until ``buf`` ends with ``marker`` or ``quiet`` seconds pass with
    nothing arriving. Returns True if the peer closed / reset."""
    while not buf.endswith(marker) and time.monotonic() < deadline:
        r, _ = _wait_io(sock, quiet)
        if not r:
            return False
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ConnectionAbortedError):
            return True
        if not chunk:
            return True
        buf.extend(chunk)
    return False


def _send_draining(sock: socket.socket, data: bytes, buf: bytearray) -> None:
    """sendall() that keeps reading so neither side deadlocks on full buffers."""
    view = memoryview(data)
    sock.setblocking(False)
    try:
        while view:
            r, w = _wait_io(sock, 5.0, write=True)
            if r:
                try:
                    chunk = sock.recv(65536)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    raise ConnectionResetError("peer closed")
                if chunk:
                    buf.extend(chunk)
            if w:
                try:
                    n = sock.send(view)
                except BlockingIOError:
                    continue
                view = view[n:]
            if not r and not w:
                raise TimeoutError("send stalled")
    finally:
        sock.setblocking(True)


def compare_raw(
    pair: ServerPair, chunks: Sequence[Chunk], **kwargs: Any
) -> tuple[Transcript, Transcript]:
    """Run :func:`run_raw` against both servers concurrently: ``(ref, impl)``."""
    with ThreadPoolExecutor(2) as ex:
        fr = ex.submit(run_raw, pair.ref, chunks, **kwargs)
        fi = ex.submit(run_raw, pair.impl, chunks, **kwargs)
        return fr.result(), fi.result()


def check_raw(pair: ServerPair, chunks: Sequence[Chunk], **kwargs: Any) -> None:
    """Assert both servers answer ``chunks`` with the same transcript."""
    ref, impl = compare_raw(pair, chunks, **kwargs)
    assert ref.info == impl.info, "INFO differs"
    assert (impl.lines, impl.closed) == (ref.lines, ref.closed), (
        f"\nnats-server: {ref.lines!r} closed={ref.closed}"
        f"\nnatsd:       {impl.lines!r} closed={impl.closed}"
    )


def scenario(id: str, *chunks: Any, marks: Any = (), until: bytes | None = None) -> Any:
    """A ``pytest.param`` for a raw scenario: ``(chunks, until)``.

    A known difference is marked with ``marks=xfail("...")`` (strict), so a fix turns it
    into an XPASS failure that forces the mark's removal."""
    import pytest

    return pytest.param(list(chunks), until, id=id, marks=marks)


def xfail(reason: str) -> Any:
    import pytest

    return pytest.mark.xfail(reason=f"natsd differs: {reason}", strict=True)


# --------------------------------------------------------------------------
# nats-py clients against both servers
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ClientError:
    """An exception raised by a client coroutine, in comparable form."""

    type: str
    message: str


class ReferenceFailure(AssertionError):
    """The reference (nats-server) side of a differential scenario raised or timed out.

    Comparing it as a value would let a scenario in which both servers fail (say, both
    time out) pass without testing anything: it is an error of the scenario, reported with
    the exception and the reference server's log tail.
    """

    def __init__(self, server: ServerProcess, what: str) -> None:
        log = server.log().strip().splitlines()[-15:]
        super().__init__(
            f"the reference side ({server.name} at {server.url}) failed: {what}\n"
            "A differential scenario needs an answer from nats-server; fix the scenario "
            "(or mark an expected silence explicitly).\n"
            f"{server.name} log tail:\n" + "\n".join(log)
        )


async def run_client(
    server: ServerProcess,
    fn: Callable[[Any], Awaitable[Any]],
    *,
    capture_errors: bool = True,
    timeout: float = 10.0,
    **connect_opts: Any,
) -> Any:
    import nats

    opts: dict[str, Any] = {
        "allow_reconnect": False,
        "max_reconnect_attempts": 0,
        "connect_timeout": 2,
    }
    opts.update(connect_opts)
    try:
        nc = await nats.connect(server.url, **opts)
    except Exception as e:
        if not capture_errors:
            raise
        return ClientError(type(e).__name__, str(e))
    try:
        return await asyncio.wait_for(fn(nc), timeout)
    except Exception as e:
        if not capture_errors:
            raise
        return ClientError(type(e).__name__, str(e))
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


async def run_reference(
    server: ServerProcess, fn: Callable[[Any], Awaitable[Any]], **kwargs: Any
) -> Any:
    """:func:`run_client` on the reference server, where an exception (a timeout included)
    is a :class:`ReferenceFailure`, never a value to compare."""
    try:
        return await run_client(server, fn, capture_errors=False, **kwargs)
    except ReferenceFailure:
        raise
    except Exception as e:
        raise ReferenceFailure(server, f"{type(e).__name__}: {e}") from e


async def run_client_both(
    pair: ServerPair,
    fn: Callable[[Any], Awaitable[Any]],
    *,
    capture_errors: bool = True,
    reference_must_succeed: bool = False,
    **connect_opts: Any,
) -> tuple[Any, Any]:
    """Run ``await fn(nc)`` with a fresh nats-py connection to each server
    (sequentially) and return ``(ref_result, impl_result)``. Exceptions become
    :class:`ClientError` values (unless ``capture_errors=False``) so failures
    are compared too; a scenario that expects an answer (the JetStream API ones) passes
    ``reference_must_succeed=True``, so an exception on the nats-server side is a
    :class:`ReferenceFailure`. Extra kwargs go to ``nats.connect``.
    """
    if reference_must_succeed:
        ref = await run_reference(pair.ref, fn, **connect_opts)
    else:
        ref = await run_client(pair.ref, fn, capture_errors=capture_errors, **connect_opts)
    impl = await run_client(pair.impl, fn, capture_errors=capture_errors, **connect_opts)
    return ref, impl


# --------------------------------------------------------------------------
# JSON normalisation (JetStream API responses etc.)
# --------------------------------------------------------------------------

#: Keys whose values are volatile in JetStream / monitoring JSON.
DEFAULT_JSON_IGNORE: frozenset[str] = frozenset(
    {
        "created",
        "ts",
        "time",
        "now",
        "start",
        "server_id",
        "server_name",
        "nonce",
        "version",
        "go",
        "git_commit",
        "cluster",
        "leader",
        "first_ts",
        "last_ts",
        "last_active",
        "uptime",
    }
)

_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
# NUID (22 chars) and server / account nkeys (56 chars, N/A/U... prefix).
_ID_RE = re.compile(r"^(?:[A-Za-z0-9]{22}|[NACUOX][A-Z2-7]{55})$")


def normalise_json(
    obj: Any,
    ignore: Iterable[str] = DEFAULT_JSON_IGNORE,
    *,
    drop: Iterable[str] = (),
    timestamps: bool = True,
    ids: bool = False,
) -> Any:
    """Return a deep copy of ``obj`` with volatile values replaced.

    * keys in ``ignore`` keep their presence but the value becomes
      ``"<key>"`` (e.g. ``{"created": "<created>"}``);
    * keys in ``drop`` are removed;
    * with ``timestamps`` any RFC 3339 string becomes ``"<timestamp>"``;
    * with ``ids`` any NUID-like (22 alnum) or nkey-like string becomes
      ``"<id>"``.

    Accepts a JSON string/bytes too (parsed first).
    """
    if isinstance(obj, bytes | bytearray) or (isinstance(obj, str) and obj[:1] in ("{", "[")):
        obj = json.loads(obj)
    ignore_set = frozenset(ignore)
    drop_set = frozenset(drop)

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, val in v.items():
                if k in drop_set:
                    continue
                out[k] = f"<{k}>" if k in ignore_set else walk(val)
            return out
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            if timestamps and _TIMESTAMP_RE.match(v):
                return "<timestamp>"
            if ids and _ID_RE.match(v):
                return "<id>"
        return v

    return walk(obj)
