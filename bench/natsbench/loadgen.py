"""Load-generator workers for the natsd benchmark.

Every worker speaks the NATS client protocol by hand over a raw TCP socket and
is meant to run in its own OS process (``multiprocessing``), so that publisher
and subscribers never share a GIL with each other or with the orchestrator.

Workers report to the orchestrator through a ``multiprocessing.Queue`` with
small dicts: ``{"role": ..., "idx": ..., "event": "ready" | "done" | "error", ...}``.
Every blocking operation has a time limit (socket timeouts plus an absolute
``deadline`` on the shared ``time.monotonic()`` clock), so a worker never hangs.
"""

from __future__ import annotations

import math
import select
import signal
import socket
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

Report = dict[str, Any]

HOST = "127.0.0.1"
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
PING = b"PING\r\n"
PONG = b"PONG\r\n"
#: Upper bound for a control line / unparsed remainder before we call it garbage.
MAX_LINE = 64 * 1024
RECV_CHUNK = 256 * 1024


class BenchError(Exception):
    """A benchmark run failed (protocol violation, timeout, closed connection...)."""


class Counters(Protocol):
    """Shared per-subscriber message counters (a lock-free ``multiprocessing.Array('q')``)."""

    def __getitem__(self, i: int, /) -> int: ...

    def __setitem__(self, i: int, value: int, /) -> None: ...

    def __len__(self) -> int: ...


def make_payload(size: int) -> bytes:
    """Payload bytes that never contain ``MSG `` or CRLF (so frames stay unambiguous)."""
    pattern = b"0123456789abcdefghijklmnopqrstuvwxyz"
    return (pattern * (size // len(pattern) + 1))[:size]


# --------------------------------------------------------------------------- parsing


@dataclass(slots=True)
class Msg:
    subject: bytes
    sid: bytes
    reply: bytes | None
    payload: bytes


class StreamParser:
    """Small general parser for server->client traffic (the slow but complete path)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.pings = 0
        self.pongs = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Msg]:
        buf = self.buf
        buf += data
        out: list[Msg] = []
        pos = 0
        n = len(buf)
        while pos < n:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > MAX_LINE:
                    raise BenchError("protocol line too long / garbage from server")
                break
            line = bytes(buf[pos:eol])
            head = line[:5].upper()
            if head.startswith((b"MSG ", b"HMSG ")):
                args = line.split()
                is_h = head.startswith(b"HMSG")
                base = 5 if is_h else 4
                if len(args) not in (base, base + 1):
                    raise BenchError(f"malformed message line {line[:80]!r}")
                size = int(args[-1])
                start = eol + 2
                stop = start + size
                if stop + 2 > n:
                    break
                if buf[stop : stop + 2] != b"\r\n":
                    raise BenchError(f"message payload not terminated by CRLF after {line!r}")
                reply = args[3] if len(args) == base + 1 else None
                out.append(Msg(args[1], args[2], reply, bytes(buf[start:stop])))
                pos = stop + 2
                continue
            if head.startswith(b"PING"):
                self.pings += 1
            elif head.startswith(b"PONG"):
                self.pongs += 1
            elif head.startswith(b"-ERR"):
                raise BenchError(f"server error: {line.decode(errors='replace')}")
            elif not head.startswith((b"+OK", b"INFO")):
                raise BenchError(f"unexpected data from server: {line[:80]!r}")
            pos = eol + 2
        del buf[:pos]
        return out


# --------------------------------------------------------------------------- connection


def _recv_some(sock: socket.socket, deadline: float) -> bytes:
    if time.monotonic() > deadline:
        raise BenchError("deadline exceeded")
    data = sock.recv(65536)
    if not data:
        raise BenchError("server closed the connection")
    return data


def connect(
    port: int, *, extra: bytes = b"", timeout: float = 5.0
) -> tuple[socket.socket, StreamParser]:
    """Open a client connection: read INFO, send CONNECT (+ ``extra``) + PING, await PONG.

    ``extra`` (e.g. SUB lines) goes before the PING, so the PONG proves the server
    has processed it.  Returns the socket (blocking, ``timeout`` set) and the parser
    holding any bytes received after the PONG.
    """
    deadline = time.monotonic() + timeout
    sock = socket.create_connection((HOST, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while b"\r\n" not in buf:
            buf += _recv_some(sock, deadline)
            if len(buf) > MAX_LINE:
                raise BenchError("no INFO line from server")
        if not buf.startswith(b"INFO "):
            raise BenchError(f"expected INFO, got {buf[:60]!r}")
        rest = buf[buf.index(b"\r\n") + 2 :]
        sock.sendall(CONNECT + extra + PING)
        parser = StreamParser()
        msgs = parser.feed(rest)
        while parser.pongs == 0:
            msgs += parser.feed(_recv_some(sock, deadline))
            if parser.pings:
                sock.sendall(PONG * parser.pings)
                parser.pings = 0
        if msgs:
            raise BenchError("received messages during the handshake")
        parser.pongs = 0
        return sock, parser
    except BaseException:
        sock.close()
        raise


def await_route_interest(pub_port: int, sub_port: int, timeout: float) -> None:
    """Return once every subscription made on ``sub_port``'s server so far is known on
    ``pub_port``'s (its cluster peer): a probe subscription made after them on the same
    server crosses the same route after them, so once a probe published on ``pub_port``
    comes back, the earlier interest is there too."""
    probe = f"{new_inbox()}.probe".encode()
    deadline = time.monotonic() + timeout
    sub, parser = connect(sub_port, extra=b"SUB " + probe + b" 1\r\n")
    try:
        pub, _ = connect(pub_port)
        try:
            sub.settimeout(0.05)
            while True:
                pub.sendall(b"PUB " + probe + b" 0\r\n\r\n")
                try:
                    if parser.feed(_recv_some(sub, deadline)):
                        return
                except TimeoutError:
                    pass
        finally:
            pub.close()
    finally:
        sub.close()


def new_inbox() -> str:
    return f"_INBOX.{uuid.uuid4().hex[:16]}"


def connect_inbox(port: int) -> tuple[str, socket.socket, StreamParser]:
    """A fresh inbox and a connection subscribed (sid 1) to ``<inbox>.*``."""
    inbox = new_inbox()
    sock, parser = connect(port, extra=f"SUB {inbox}.* 1\r\n".encode())
    return inbox, sock, parser


def await_go(sock: socket.socket, go: Event, deadline: float, idle_timeout: float) -> Any:
    """A worker's start: ``idle_timeout`` on every blocking call, a poller on the socket
    (returned), and the orchestrator's go signal awaited (bounded by ``deadline``)."""
    sock.settimeout(idle_timeout)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not go.wait(max(0.0, deadline - time.monotonic())):
        raise BenchError("never got the go signal")
    return poller


def worker_init() -> None:
    """Signal setup for worker processes: the orchestrator owns Ctrl-C and cleanup."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_worker(q: Queue[Report], role: str, idx: int, body: Callable[[], Report]) -> None:
    worker_init()
    try:
        result = body()
    except (BenchError, OSError) as exc:
        q.put({"role": role, "idx": idx, "event": "error", "error": _describe(exc)})
    except BaseException as exc:  # unexpected bug: ship the traceback to the parent
        tb = traceback.format_exc(limit=5)
        q.put({"role": role, "idx": idx, "event": "error", "error": f"{_describe(exc)}\n{tb}"})
    else:
        result.update(role=role, idx=idx, event="done")
        q.put(result)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out waiting for the server (no progress within the idle timeout)"
    return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- subscriber


def _consume_fast(
    buf: bytearray, m: int, hdr: bytes, frame_len: int, sock: socket.socket
) -> tuple[int, int]:
    """Count complete MSG frames in ``buf[:m]`` (which starts at a frame boundary).

    Fast path: frames have a fixed length, so ``m // frame_len`` frames, verified by
    checking the first and the last frame header and the boundary of the remainder
    (any inserted or missing byte misaligns at least one of these).  Otherwise fall
    back to a frame-by-frame walk that also handles PING/INFO/-ERR.
    Returns ``(frames, carry)`` where ``buf[:carry]`` now holds the incomplete tail.
    """
    h = len(hdr)
    k = m // frame_len
    end = k * frame_len
    r = m - end
    if (
        k == 0
        or (
            buf[0:h] == hdr
            and buf[end - frame_len : end - frame_len + h] == hdr
            and buf[end - 2 : end] == b"\r\n"
        )
    ) and (r == 0 or buf[end : end + min(r, h)] == hdr[: min(r, h)]):
        if r:
            buf[0:r] = buf[end:m]
        return k, r
    return _consume_slow(buf, m, hdr, frame_len, sock)


def _consume_slow(
    buf: bytearray, m: int, hdr: bytes, frame_len: int, sock: socket.socket
) -> tuple[int, int]:
    h = len(hdr)
    pos = 0
    frames = 0
    while pos < m:
        if m - pos >= h and buf[pos : pos + h] == hdr:
            if m - pos < frame_len:
                break
            if buf[pos + frame_len - 2 : pos + frame_len] != b"\r\n":
                raise BenchError("MSG frame not terminated by CRLF (wrong payload size?)")
            frames += 1
            pos += frame_len
            continue
        if m - pos < h and hdr.startswith(bytes(buf[pos:m])):
            break  # partial header of the next frame
        eol = buf.find(b"\r\n", pos, m)
        if eol < 0:
            break
        line = bytes(buf[pos:eol])
        if line == b"PING":
            sock.sendall(PONG)
        elif line.startswith(b"-ERR"):
            raise BenchError(f"server error: {line.decode(errors='replace')}")
        elif not (line in (b"PONG", b"+OK") or line.startswith(b"INFO ")):
            raise BenchError(f"unexpected data (expected {hdr!r}...): {line[:80]!r}")
        pos = eol + 2
    r = m - pos
    if r > frame_len + MAX_LINE:
        raise BenchError("unparseable data from server")
    buf[0:r] = buf[pos:m]
    return frames, r


def _subscribe_and_count(
    port: int,
    subject: str,
    sid: int,
    size: int,
    n: int,
    idx: int,
    progress: Counters,
    q: Queue[Report],
    deadline: float,
    idle_timeout: float,
) -> Report:
    hdr = f"MSG {subject} {sid} {size}\r\n".encode()
    frame_len = len(hdr) + size + 2
    sock, parser = connect(port, extra=f"SUB {subject} {sid}\r\n".encode())
    q.put({"role": "sub", "idx": idx, "event": "ready"})
    with sock:
        sock.settimeout(idle_timeout)
        buf = bytearray(RECV_CHUNK + frame_len + 2 * MAX_LINE)
        mv = memoryview(buf)
        carry = len(parser.buf)
        buf[0:carry] = parser.buf
        count = 0
        first = 0.0
        cpu0 = 0.0
        while count < n:
            got = sock.recv_into(mv[carry:], RECV_CHUNK)
            if not got:
                raise BenchError(f"server closed the connection after {count} messages")
            now = time.monotonic()
            if count == 0 and first == 0.0:
                first = now
                cpu0 = time.process_time()
            elif now > deadline:
                raise BenchError(f"deadline exceeded after {count} of {n} messages")
            k, carry = _consume_fast(buf, carry + got, hdr, frame_len, sock)
            count += k
            progress[idx] = count
        last = time.monotonic()
        if count != n:
            raise BenchError(f"received {count} messages, expected {n}")
        cpu = time.process_time() - cpu0
        return {"count": count, "first": first, "last": last, "cpu": cpu}


def subscriber_main(
    port: int,
    subject: str,
    sid: int,
    size: int,
    n: int,
    idx: int,
    progress: Counters,
    q: Queue[Report],
    deadline: float,
    idle_timeout: float,
) -> None:
    """Subscribe to ``subject`` and count ``n`` fixed-size MSG frames."""
    _run_worker(
        q,
        "sub",
        idx,
        lambda: _subscribe_and_count(
            port, subject, sid, size, n, idx, progress, q, deadline, idle_timeout
        ),
    )


# --------------------------------------------------------------------------- publisher


@dataclass(slots=True)
class FlowConfig:
    #: messages per pre-encoded blob handed to one ``sendall``
    batch: int = 1000
    #: send a PING every this many messages
    ping_every: int = 65536
    #: never have more than this many PINGs unanswered
    max_outstanding: int = 2
    #: publisher may be at most this many messages ahead of the slowest subscriber
    sub_window: int = 131072


def _wait_pongs(
    sock: socket.socket,
    parser: StreamParser,
    poller: select.poll,
    outstanding: int,
    limit: int,
    deadline: float,
) -> int:
    """Read whatever is available; block (bounded) while ``outstanding > limit``."""
    while True:
        block = outstanding > limit
        if not block and not poller.poll(0):
            return outstanding
        data = _recv_some(sock, deadline)  # socket timeout = idle timeout
        if parser.feed(data):
            raise BenchError("publisher connection unexpectedly received messages")
        if parser.pings:
            sock.sendall(PONG * parser.pings)
            parser.pings = 0
        outstanding -= parser.pongs
        parser.pongs = 0
        if outstanding < 0:
            raise BenchError("more PONGs than PINGs")
        if not block and outstanding <= limit:
            return outstanding


def _wait_subscribers(
    progress: Counters, n_subs: int, target: int, deadline: float, idle_timeout: float
) -> None:
    lowest = min(progress[i] for i in range(n_subs))
    if lowest >= target:
        return
    last_change = time.monotonic()
    while True:
        time.sleep(0.0002)
        cur = min(progress[i] for i in range(n_subs))
        if cur >= target:
            return
        now = time.monotonic()
        if cur != lowest:
            lowest, last_change = cur, now
        elif now - last_change > idle_timeout:
            raise BenchError(f"subscribers stopped receiving (slowest at {cur} messages)")
        if now > deadline:
            raise BenchError("deadline exceeded waiting for subscribers")


def _publish(
    port: int,
    subject: str,
    size: int,
    n: int,
    q: Queue[Report],
    go: Event,
    progress: Counters,
    n_subs: int,
    flow: FlowConfig,
    deadline: float,
    idle_timeout: float,
) -> Report:
    frame = f"PUB {subject} {size}\r\n".encode() + make_payload(size) + b"\r\n"
    batch = max(1, min(flow.batch, n))
    blob = frame * batch
    sock, parser = connect(port)
    q.put({"role": "pub", "idx": 0, "event": "ready"})
    with sock:
        poller = await_go(sock, go, deadline, idle_timeout)
        outstanding = 0
        sent = 0
        next_ping = flow.ping_every
        t0 = time.monotonic()
        cpu0 = time.process_time()
        while sent < n:
            if n_subs:
                _wait_subscribers(progress, n_subs, sent - flow.sub_window, deadline, idle_timeout)
            k = min(batch, n - sent)
            chunk = blob if k == batch else blob[: k * len(frame)]
            sent += k
            if sent >= next_ping and sent < n:
                chunk += PING
                outstanding += 1
                next_ping += flow.ping_every
            sock.sendall(chunk)
            if outstanding:
                outstanding = _wait_pongs(
                    sock, parser, poller, outstanding, flow.max_outstanding - 1, deadline
                )
        sock.sendall(PING)
        _wait_pongs(sock, parser, poller, outstanding + 1, 0, deadline)
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
        return {"count": sent, "first": t0, "last": t1, "cpu": cpu}


def publisher_main(
    port: int,
    subject: str,
    size: int,
    n: int,
    q: Queue[Report],
    go: Event,
    progress: Counters,
    n_subs: int,
    flow: FlowConfig,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Publish ``n`` messages as fast as flow control allows; end with a PING/PONG."""
    _run_worker(
        q,
        "pub",
        0,
        lambda: _publish(
            port, subject, size, n, q, go, progress, n_subs, flow, deadline, idle_timeout
        ),
    )


# --------------------------------------------------------------------------- request/reply


def _respond(port: int, subject: str, q: Queue[Report], deadline: float) -> Report:
    sock, parser = connect(port, extra=f"SUB {subject} 1\r\n".encode())
    q.put({"role": "rep", "idx": 0, "event": "ready"})
    answered = 0
    with sock:
        sock.settimeout(0.5)
        pending: list[Msg] = parser.feed(b"")
        while time.monotonic() < deadline:
            if not pending:
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                pending = parser.feed(data)
            out = [
                b"PUB %s %d\r\n%s\r\n" % (m.reply, len(m.payload), m.payload)
                for m in pending
                if m.reply
            ]
            if parser.pings:
                out.append(PONG * parser.pings)
                parser.pings = 0
            if out:
                sock.sendall(b"".join(out))
            answered += len(pending)
            pending = []
    return {"count": answered}


def responder_main(port: int, subject: str, q: Queue[Report], deadline: float) -> None:
    """Answer every request on ``subject`` by publishing its payload to the reply subject."""
    _run_worker(q, "rep", 0, lambda: _respond(port, subject, q, deadline))


def percentile(sorted_vals: list[int], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_vals:
        return math.nan
    rank = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return float(sorted_vals[min(rank, len(sorted_vals)) - 1])


def latency_stats(lat: list[int], rate_key: str = "rate") -> dict[str, float]:
    """Sort ``lat`` (nanoseconds) and return its percentiles, min, max and mean in microseconds,
    plus ``rate_key``: how many of them fit in a second, one after another."""
    lat.sort()
    us = 1000.0
    return {
        "p50_us": percentile(lat, 50) / us,
        "p90_us": percentile(lat, 90) / us,
        "p99_us": percentile(lat, 99) / us,
        "p999_us": percentile(lat, 99.9) / us,
        "min_us": lat[0] / us,
        "max_us": lat[-1] / us,
        "mean_us": sum(lat) / len(lat) / us,
        rate_key: len(lat) / (sum(lat) / 1e9),
    }


def _request_loop(
    port: int,
    subject: str,
    size: int,
    n_req: int,
    n_warm: int,
    q: Queue[Report],
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox = f"_INBOX.bench.{time.monotonic_ns()}"
    payload = make_payload(size)
    req = f"PUB {subject} {inbox} {size}\r\n".encode() + payload + b"\r\n"
    resp = f"MSG {inbox} 1 {size}\r\n".encode() + payload + b"\r\n"
    sock, parser = connect(port, extra=f"SUB {inbox} 1\r\n".encode())
    q.put({"role": "req", "idx": 0, "event": "ready"})
    lat: list[int] = []
    clock = time.perf_counter_ns
    with sock:
        sock.settimeout(idle_timeout)
        if parser.buf:
            raise BenchError("unexpected data after handshake")
        for i in range(n_warm + n_req):
            t0 = clock()
            sock.sendall(req)
            data = sock.recv(65536)
            if parser.buf or data != resp:  # slow path: fragmented reply, PING, error...
                got: list[Msg] = []
                while True:
                    if not data:
                        raise BenchError(f"server closed the connection after {i} requests")
                    got += parser.feed(data)
                    if parser.pings:
                        sock.sendall(PONG * parser.pings)
                        parser.pings = 0
                    if got:
                        break
                    data = _recv_some(sock, deadline)
                if len(got) != 1 or got[0].subject.decode() != inbox or got[0].payload != payload:
                    raise BenchError(f"unexpected reply(ies) to request {i}: {got[:2]!r}")
                if parser.buf:
                    raise BenchError(f"unexpected extra data after reply {i}")
            t1 = clock()
            if i >= n_warm:
                lat.append(t1 - t0)
            elif i & 255 == 0 and time.monotonic() > deadline:
                raise BenchError("deadline exceeded during warm-up")
            if i & 1023 == 0 and time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded after {i} requests")
    return {"count": len(lat), **latency_stats(lat, "req_per_s")}


def requester_main(
    port: int,
    subject: str,
    size: int,
    n_req: int,
    n_warm: int,
    q: Queue[Report],
    deadline: float,
    idle_timeout: float,
) -> None:
    """Do ``n_warm + n_req`` sequential request/reply round trips; report latency stats."""
    _run_worker(
        q,
        "req",
        0,
        lambda: _request_loop(port, subject, size, n_req, n_warm, q, deadline, idle_timeout),
    )
