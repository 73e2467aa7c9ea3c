"""JetStream load-generator workers and helpers for the natsd benchmark.

* ``js_api``: one JetStream API request (stream create / info / delete) over a raw socket,
  used by the orchestrator.
* ``js_async_main``: pipelined publisher; every ``PUB`` carries its own reply subject
  ``<inbox>.<n>`` (one ``SUB <inbox>.*``), at most ``window`` acks outstanding; counts
  PubAcks.
* ``js_sync_main``: one publish at a time, waits for its PubAck; per-message latency.
* ``js_fast_main``: one fast-ingest batch (nats-server 2.14, a stream with ``allow_batched``):
  reply subjects ``<inbox>.<batch>.<flow>.fail.<n>.<op>.$FI``, at most ``2 * flow`` messages
  beyond the last flow ack, ended by a commit whose PubAck must count every message.
* ``fsync_rate``: the disk's raw 4 KiB write + fsync rate.

PubAcks are counted without a JSON parse: a chunk of complete ack frames
(``MSG <inbox>.<n> 1 <len>\\r\\n{"stream":"S","seq":N}\\r\\n``) has exactly one ``MSG `` header,
one ``"seq":`` and two CRLFs per frame, and no ``"error"``; anything else (PING, -ERR, an
error ack, foreign data) takes the slow path, which parses frame by frame and fails the
run on an error ack.  Every blocking call is bounded (socket timeout = idle timeout,
absolute deadline).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .loadgen import (
    PONG,
    RECV_CHUNK,
    BenchError,
    Report,
    StreamParser,
    _recv_some,
    _run_worker,
    await_go,
    connect,
    connect_inbox,
    latency_stats,
    make_payload,
    new_inbox,
    percentile,
)

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

ACK_END = b"}\r\n"
MSG_HDR = b"MSG "
SEQ_KEY = b'"seq":'
ERR_KEY = b'"error"'


# --------------------------------------------------------------------------- API requests


def js_api(port: int, subject: str, body: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    """Send one JetStream API request; return the decoded JSON response (bounded wait)."""
    deadline = time.monotonic() + timeout
    inbox = new_inbox()
    sock, parser = connect(port, extra=f"SUB {inbox} 1\r\n".encode(), timeout=timeout)
    with sock:
        sock.settimeout(max(0.1, timeout))
        data = json.dumps(body).encode() if body is not None else b""
        frame = b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), inbox.encode(), len(data), data)
        sock.sendall(frame)
        msgs = next_msgs(sock, parser, deadline)
        try:
            doc = json.loads(msgs[0].payload)
        except ValueError as exc:
            raise BenchError(f"{subject}: undecodable response {msgs[0].payload[:120]!r}") from exc
    if not isinstance(doc, dict):
        raise BenchError(f"{subject}: unexpected response {doc!r:.120}")
    return doc


def next_msgs(sock: socket.socket, parser: StreamParser, deadline: float) -> list[Any]:
    """Read until at least one message has arrived (answering the server's PINGs)."""
    msgs = parser.feed(b"")
    while not msgs:
        msgs = parser.feed(_recv_some(sock, deadline))
        if parser.pings:
            sock.sendall(PONG * parser.pings)
            parser.pings = 0
    return msgs


def api_error(doc: dict[str, Any]) -> str | None:
    err = doc.get("error")
    if err is None:
        return None
    if isinstance(err, dict):
        return f"{err.get('description', err)} (code {err.get('code')}, {err.get('err_code')})"
    return str(err)


# --------------------------------------------------------------------------- ack counting


class AckCounter:
    """Counts PubAck MSG frames arriving on one connection (see module docstring)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.acks = 0
        self.max_seq = 0
        self.slow_chunks = 0

    def feed(self, data: bytes) -> int:
        """Consume ``data``; return the number of acks completed by it."""
        buf = self.buf
        buf += data
        end = buf.rfind(ACK_END)
        if end < 0:
            if b"-ERR" in buf or len(buf) > 1 << 20:
                raise BenchError(f"unexpected data from server: {self.pending()}")
            return 0
        end += len(ACK_END)
        region = bytes(buf[:end])
        del buf[:end]
        k = region.count(MSG_HDR)
        if (
            region.startswith(MSG_HDR)
            and region.count(ACK_END) == k
            and region.count(SEQ_KEY) == k
            and region.count(b"\r\n") == 2 * k
            and ERR_KEY not in region
        ):
            i = region.rfind(SEQ_KEY) + len(SEQ_KEY)
            j = i
            while j < len(region) and 48 <= region[j] <= 57:
                j += 1
            seq = int(region[i:j]) if j > i else 0
            self.max_seq = max(self.max_seq, seq)
        else:
            k = self._slow(region)
        self.acks += k
        return k

    def pending(self) -> str:
        """The unconsumed bytes (for error messages)."""
        return repr(bytes(self.buf[:200])) if self.buf else "(nothing)"

    def _slow(self, region: bytes) -> int:
        self.slow_chunks += 1
        parser = StreamParser()
        msgs = parser.feed(region)
        if parser.pings:
            self.sock.sendall(PONG * parser.pings)
        if parser.buf:
            raise BenchError(f"unexpected data from server: {bytes(parser.buf[:80])!r}")
        for i, m in enumerate(msgs):
            body = m.payload
            if body.startswith(b"NATS/") and b"\r\n\r\n" in body:  # HMSG: skip the headers
                body = body.split(b"\r\n\r\n", 1)[1]
            if ERR_KEY in body:
                text = body[:300].decode(errors="replace")
                raise BenchError(f"PubAck error after {self.acks + i} good acks: {text}")
            try:
                doc = json.loads(body)
                seq = int(doc["seq"])
            except (ValueError, KeyError, TypeError) as exc:
                raise BenchError(f"not a PubAck: {body[:120]!r}") from exc
            self.max_seq = max(self.max_seq, seq)
        return len(msgs)


# --------------------------------------------------------------------------- async publish


def _js_async(
    port: int,
    subject: str,
    size: int,
    n: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox, sock, _ = connect_inbox(port)
    q.put({"role": "jspub", "idx": 0, "event": "ready"})
    prefix = f"PUB {subject} {inbox}.".encode()
    suffix = f" {size}\r\n".encode() + make_payload(size) + b"\r\n"
    window = max(1, window)
    batch = max(1, min(1000, window // 4))
    with sock:
        poller = await_go(sock, go, deadline, idle_timeout)
        acks = AckCounter(sock)
        sent = 0
        t0 = time.monotonic()
        cpu0 = time.process_time()
        stop_at = min(t0 + max_time, deadline)
        limit = n
        while True:
            if sent < limit:
                k = min(batch, limit - sent)
                if window - (sent - acks.acks) >= k:
                    frames = [prefix + b"%d" % i + suffix for i in range(sent, sent + k)]
                    sock.sendall(b"".join(frames))
                    sent += k
                    if time.monotonic() >= stop_at:
                        limit = sent  # time is up: stop sending, collect what is outstanding
                    if not poller.poll(0):
                        continue
            elif acks.acks >= sent:
                break
            try:
                data = sock.recv(RECV_CHUNK)
            except TimeoutError as exc:
                raise BenchError(
                    f"no PubAck for {idle_timeout:.0f}s: {acks.acks} of {sent} sent acknowledged"
                ) from exc
            if not data:
                raise BenchError(
                    f"server closed the connection after {acks.acks} acks; unparsed: "
                    + acks.pending()
                )
            acks.feed(data)
            if acks.acks > sent:
                raise BenchError(f"more acks ({acks.acks}) than messages sent ({sent})")
            if time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded: {acks.acks} of {sent} acknowledged")
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    return {
        "count": acks.acks,
        "max_seq": acks.max_seq,
        "slow_chunks": acks.slow_chunks,
        "first": t0,
        "last": t1,
        "cpu": cpu,
    }


def js_async_main(
    port: int,
    subject: str,
    size: int,
    n: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Publish up to ``n`` messages (or for ``max_time`` s) with <= ``window`` acks pending."""
    _run_worker(
        q,
        "jspub",
        0,
        lambda: _js_async(port, subject, size, n, max_time, window, q, go, deadline, idle_timeout),
    )


# --------------------------------------------------------------------------- fast batch


def _js_fast(
    port: int,
    subject: str,
    size: int,
    n: int,
    max_time: float,
    flow: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox = new_inbox()
    sock, parser = connect(port, extra=f"SUB {inbox}.> 1\r\n".encode())
    q.put({"role": "jspub", "idx": 0, "event": "ready"})
    head = f"PUB {subject} {inbox}.b.{flow}.fail.".encode()
    suffix = f".$FI {size}\r\n".encode() + make_payload(size) + b"\r\n"
    chunk = max(1, min(100, flow // 2))
    final: dict[str, Any] = {}
    acked = 0

    def answers(data: bytes) -> None:
        nonlocal acked
        msgs = parser.feed(data)
        if parser.pings:
            sock.sendall(PONG * parser.pings)
            parser.pings = 0
        for m in msgs:
            doc = json.loads(m.payload)
            if doc.get("type") == "ack":
                acked = max(acked, int(doc["seq"]))
            elif "count" in doc:
                final.update(doc)
            else:
                raise BenchError(f"fast batch answer: {m.payload[:200]!r}")

    with sock:
        poller = await_go(sock, go, deadline, idle_timeout)
        sent = 0
        t0 = time.monotonic()
        cpu0 = time.process_time()
        stop_at = min(t0 + max_time, deadline)
        while sent < n and time.monotonic() < stop_at:
            k = min(chunk, n - sent)
            if sent + k - acked <= 2 * flow:
                frames = [head + b"%d.%d" % (i, 0 if i == 1 else 1) + suffix
                          for i in range(sent + 1, sent + k + 1)]  # fmt: skip
                sock.sendall(b"".join(frames))
                sent += k
                if not poller.poll(0):
                    continue
            answers(_recv_some(sock, deadline))
        sock.sendall(head + b"%d.3" % (sent + 1) + b".$FI 0\r\n\r\n")
        while not final:
            if time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded waiting for the commit of {sent}")
            answers(_recv_some(sock, deadline))
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    if int(final.get("count", -1)) != sent:
        raise BenchError(f"{sent} sent, the batch committed {final}")
    return {
        "count": sent,
        "max_seq": int(final.get("seq", 0)),
        "slow_chunks": 0,
        "first": t0,
        "last": t1,
        "cpu": cpu,
    }


def js_fast_main(
    port: int,
    subject: str,
    size: int,
    n: int,
    max_time: float,
    flow: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Publish up to ``n`` messages (or for ``max_time`` s) as one fast batch."""
    _run_worker(
        q,
        "jspub",
        0,
        lambda: _js_fast(port, subject, size, n, max_time, flow, q, go, deadline, idle_timeout),
    )


# --------------------------------------------------------------------------- sync publish


def _js_sync(
    port: int,
    subject: str,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox, sock, _ = connect_inbox(port)
    q.put({"role": "jspub", "idx": 0, "event": "ready"})
    prefix = f"PUB {subject} {inbox}.".encode()
    suffix = f" {size}\r\n".encode() + make_payload(size) + b"\r\n"
    lat: list[int] = []
    clock = time.perf_counter_ns
    with sock:
        sock.settimeout(idle_timeout)
        acks = AckCounter(sock)
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        stop_at = min(t0 + max_time, deadline)
        for i in range(n_warm + n):
            frame = prefix + b"%d" % i + suffix
            s0 = clock()
            sock.sendall(frame)
            want = acks.acks + 1
            try:
                while acks.acks < want:
                    data = sock.recv(65536)
                    if not data:
                        raise BenchError(
                            f"server closed the connection after {acks.acks} acks; unparsed: "
                            + acks.pending()
                        )
                    acks.feed(data)
            except TimeoutError as exc:
                raise BenchError(
                    f"no PubAck for {idle_timeout:.0f}s after {acks.acks} acknowledged publishes"
                ) from exc
            s1 = clock()
            if acks.acks != want:
                raise BenchError(f"got {acks.acks} acks for {want} publishes")
            if i >= n_warm:
                lat.append(s1 - s0)
                if time.monotonic() >= stop_at:
                    break
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    if not lat:
        raise BenchError("no measured publishes")
    return {
        "count": acks.acks,
        "measured": len(lat),
        "max_seq": acks.max_seq,
        "slow_chunks": acks.slow_chunks,
        "first": t0,
        "last": t1,
        "cpu": cpu,
        **latency_stats(lat),
    }


def js_sync_main(
    port: int,
    subject: str,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Publish one message at a time and wait for its PubAck; report latency stats."""
    _run_worker(
        q,
        "jspub",
        0,
        lambda: _js_sync(port, subject, size, n, n_warm, max_time, q, go, deadline, idle_timeout),
    )


# --------------------------------------------------------------------------- disk


def fsync_rate(directory: Path, seconds: float = 1.0, block: int = 4096) -> dict[str, float]:
    """Append ``block`` bytes + fsync in a loop for ``seconds``; return rate and latencies."""
    path = directory / f"fsync-probe-{os.getpid()}"
    data = os.urandom(block)
    lat: list[int] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t_end = time.monotonic() + seconds
        clock = time.perf_counter_ns
        while time.monotonic() < t_end:
            s0 = clock()
            os.write(fd, data)
            os.fsync(fd)
            lat.append(clock() - s0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    total = sum(lat) / 1e9
    lat.sort()
    return {
        "fsyncs": float(len(lat)),
        "rate": len(lat) / total if total else 0.0,
        "p50_us": percentile(lat, 50) / 1000.0,
        "p99_us": percentile(lat, 99) / 1000.0,
        "mean_us": total * 1e6 / max(1, len(lat)),
    }
