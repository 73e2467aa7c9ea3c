"""JetStream consumer load-generator workers for the natsd benchmark.

* ``prefill``: fill a stream with ``n`` messages (pipelined publishes, every PubAck
  checked), run by the orchestrator before the timed consumer runs.
* ``pull_main``: durable pull consumer, a fetch loop like ``nats bench js fetch``:
  ``PUB $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable> <inbox>.<i> {"batch":B,"expires":E}``,
  receive the B messages, acknowledge each (``PUB <$JS.ACK reply> +ACK``, no reply subject)
  as it arrives, and send the next fetch once the batch is complete (in the same write
  as the last acks; no fetch is outstanding while acks are pending on the client).
* ``push_main``: durable push consumer (``deliver_subject``), created by the worker on its
  own connection after it subscribed to the deliver subject; explicit acks like
  ``nats bench`` (its push consumer: ack explicit, max_ack_pending 500, no flow control,
  no heartbeats).
* ``e2e_main``: one publisher publishing one message at a time (with a reply subject,
  as ``js.Publish`` does) into a stream whose pull consumer always has a waiting pull
  request (``Consume()``-style: a new batch is requested when half of the previous one
  is used); latency = publish sent -> message received at the consumer.

Deliveries are counted without a JSON parse or a per-message Python loop: every delivery
is ``MSG <subject> <sid> $JS.ACK.<...> <size>\\r\\n<payload>\\r\\n`` where only the ack
subject varies, so one regex ``findall`` over the complete frames of a received chunk
returns the ack subjects, and the chunk is accepted only if the frames tile it exactly
(``k * fixed + sum(len(reply)) == end``); payload bytes are part of the pattern, so they
are checked too.  Anything else (a status ``HMSG``, ``PING``, an API reply, ``-ERR``) sends
the chunk to the general parser.  The last ack subject of every chunk is split to check
that the deliveries arrive in stream order without redeliveries (stream seq = count,
delivery count 1).  Every blocking call is bounded (socket timeout = idle timeout, an
absolute deadline).
"""

from __future__ import annotations

import json
import re
import select
import socket
import time
from typing import TYPE_CHECKING, Any

from .jsload import AckCounter
from .loadgen import (
    PING,
    PONG,
    RECV_CHUNK,
    BenchError,
    Msg,
    Report,
    StreamParser,
    _run_worker,
    connect,
    connect_inbox,
    latency_stats,
    make_payload,
    new_inbox,
)

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

ACK_PREFIX = b"$JS.ACK."
ACK_SUFFIX = b" 4\r\n+ACK\r\n"
ACK_JOIN = ACK_SUFFIX + b"PUB "
#: ack subjects longer than this are not deliveries (bounds the partial-frame buffer)
MAX_REPLY = 512


def ack_frames(replies: list[bytes]) -> bytes:
    """``PUB <reply> 4\\r\\n+ACK\\r\\n`` for every ack subject (no reply subject: a plain ack)."""
    return b"PUB " + ACK_JOIN.join(replies) + ACK_SUFFIX


def next_request(api: bytes, reply: bytes, batch: int, expires_ns: int) -> bytes:
    body = b'{"batch":%d,"expires":%d}' % (batch, expires_ns)
    return b"PUB %s %s %d\r\n%s\r\n" % (api, reply, len(body), body)


def ack_meta(reply: bytes) -> tuple[int, int]:
    """(delivery count, stream sequence) of a ``$JS.ACK`` subject (v1 and v2 forms)."""
    t = reply.split(b".")
    try:
        if len(t) == 9:  # $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending>
            return int(t[4]), int(t[5])
        if len(t) >= 11:  # $JS.ACK.<domain>.<hash>.<stream>.<consumer>.<dc>.<sseq>...
            return int(t[6]), int(t[7])
    except ValueError:
        pass
    raise BenchError(f"not a JetStream ack subject: {reply[:120]!r}")


def describe(m: Msg) -> str:
    """A status / API message that is not a delivery, for error messages."""
    body = m.payload
    if body.startswith(b"NATS/1.0"):
        return body.split(b"\r\n", 1)[0].decode(errors="replace")
    return repr(body[:200])


class DeliveryCounter:
    """Counts the JetStream deliveries of one subscription (see module docstring).

    ``feed`` returns the ack subjects of the deliveries completed by the data; messages
    that are not deliveries (statuses, API replies) go to ``other``; PINGs are answered
    and PONGs counted.
    """

    def __init__(self, sock: socket.socket, subject: str, sid: bytes, payload: bytes) -> None:
        self.sock = sock
        self.subject = subject.encode()
        self.sid = sid
        self.payload = payload
        self.prefix = b"MSG " + self.subject + b" " + sid + b" "
        self.tail = b" %d\r\n" % len(payload) + payload + b"\r\n"
        self.fixed = len(self.prefix) + len(self.tail)
        self.max_partial = self.fixed + MAX_REPLY
        self.frame_rest = len(payload) + 4  # CRLF + payload + CRLF after the header line
        self.pat = re.compile(
            re.escape(self.prefix) + rb"(\$JS\.ACK\.[^ \r\n]+)" + re.escape(self.tail)
        )
        self.buf = b""
        self.count = 0
        self.other: list[Msg] = []
        self.pongs = 0
        self.slow_chunks = 0
        self.last_reply = b""

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.buf + data if self.buf else data
        end = buf.rfind(self.tail)
        if end < 0:
            replies: list[bytes] = []
            end = 0
        else:
            end += len(self.tail)
            replies = self.pat.findall(buf, 0, end)
            if len(replies) * self.fixed + sum(map(len, replies)) != end:
                return self._slow(buf)  # something else among the deliveries
        rest = buf[end:]
        if rest and (
            rest[: len(self.prefix)] != self.prefix[: len(rest)]
            or len(rest) > self.max_partial
            or ((eol := rest.find(b"\r\n")) >= 0 and len(rest) >= eol + self.frame_rest)
        ):
            # not the beginning of a delivery, or a complete frame the pattern did not match
            self.buf = b""
            if replies:
                self._account(replies)
            return replies + self._slow(rest)
        self.buf = rest
        if replies:
            self._account(replies)
        return replies

    def _account(self, replies: list[bytes]) -> None:
        self.count += len(replies)
        last = self.last_reply = replies[-1]
        dc, sseq = ack_meta(last)
        if sseq != self.count or dc != 1:
            raise BenchError(
                f"delivery {self.count} is stream seq {sseq} with delivery count {dc}"
                " (expected every message once, in stream order)"
            )

    def _slow(self, buf: bytes) -> list[bytes]:
        self.slow_chunks += 1
        parser = StreamParser()
        msgs = parser.feed(buf)
        if parser.pings:
            self.sock.sendall(PONG * parser.pings)
        self.pongs += parser.pongs
        replies: list[bytes] = []
        for m in msgs:
            if m.sid == self.sid and m.reply and m.reply.startswith(ACK_PREFIX):
                if m.subject != self.subject or m.payload != self.payload:
                    raise BenchError(
                        f"unexpected delivery on {m.subject!r}: {len(m.payload)} bytes"
                        f" {m.payload[:40]!r}"
                    )
                replies.append(m.reply)
            else:
                self.other.append(m)
        if len(parser.buf) > self.max_partial + 4096:
            raise BenchError(f"unparseable data from server: {bytes(parser.buf[:80])!r}")
        self.buf = bytes(parser.buf)
        if replies:
            self._account(replies)
        return replies

    def pending(self) -> str:
        return repr(self.buf[:200]) if self.buf else "(nothing)"


def _recv(sock: socket.socket, counter: DeliveryCounter, n: int, what: str) -> bytes:
    try:
        data = sock.recv(RECV_CHUNK)
    except TimeoutError as exc:
        raise BenchError(
            f"no {what} within the idle timeout: {counter.count} of {n} messages received"
        ) from exc
    if not data:
        raise BenchError(
            f"server closed the connection after {counter.count} of {n} messages; unparsed: "
            + counter.pending()
        )
    return data


def _flush_pong(sock: socket.socket, counter: DeliveryCounter, n: int, exact: bool) -> None:
    """PING, then read until the PONG: the server has read everything sent before it."""
    sock.sendall(PING)
    pongs = counter.pongs
    while counter.pongs == pongs:
        counter.feed(_recv(sock, counter, n, "PONG"))
        if counter.other:
            raise BenchError(f"unexpected message at the end: {describe(counter.other[0])}")
        if exact and counter.count > n:
            raise BenchError(f"received {counter.count} messages, expected {n}")


# --------------------------------------------------------------------------- prefill


def prefill(
    port: int, subject: str, size: int, n: int, window: int, deadline: float, idle_timeout: float
) -> dict[str, float]:
    """Publish ``n`` messages to ``subject`` (<= ``window`` PubAcks outstanding); bounded."""
    inbox, sock, _ = connect_inbox(port)
    prefix = f"PUB {subject} {inbox}.".encode()
    suffix = f" {size}\r\n".encode() + make_payload(size) + b"\r\n"
    batch = max(1, min(1000, window // 4))
    with sock:
        sock.settimeout(idle_timeout)
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        acks = AckCounter(sock)
        sent = 0
        t0 = time.monotonic()
        while acks.acks < n:
            if time.monotonic() > deadline:
                raise BenchError(f"prefill: deadline exceeded at {acks.acks} of {n} acks")
            if sent < n and window - (sent - acks.acks) >= min(batch, n - sent):
                k = min(batch, n - sent)
                sock.sendall(b"".join(prefix + b"%d" % i + suffix for i in range(sent, sent + k)))
                sent += k
                if not poller.poll(0):
                    continue
            try:
                data = sock.recv(RECV_CHUNK)
            except TimeoutError as exc:
                raise BenchError(f"prefill: no PubAck for {idle_timeout:.0f}s") from exc
            if not data:
                raise BenchError(f"prefill: connection closed after {acks.acks} acks")
            acks.feed(data)
        t1 = time.monotonic()
    if acks.acks != n or acks.max_seq != n:
        raise BenchError(f"prefill: {acks.acks} acks, highest seq {acks.max_seq}, expected {n}")
    return {"msgs": float(n), "seconds": t1 - t0, "rate": n / max(1e-9, t1 - t0)}


# --------------------------------------------------------------------------- pull


def _pull(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    batch: int,
    ack: bool,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox, sock, parser = connect_inbox(port)
    if parser.buf:
        raise BenchError("unexpected data after the handshake")
    q.put({"role": "cons", "idx": 0, "event": "ready"})
    api = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}".encode()
    reply = inbox.encode() + b"."
    expires = int(idle_timeout * 1e9)  # a fetch that cannot complete ends with a 408: fail
    with sock:
        sock.settimeout(idle_timeout)
        counter = DeliveryCounter(sock, subject, b"1", make_payload(size))
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        fetches = 1
        want = min(batch, n)  # messages requested so far
        sock.sendall(next_request(api, reply + b"0", want, expires))
        while counter.count < n:
            replies = counter.feed(_recv(sock, counter, n, "message"))
            if counter.other:
                raise BenchError(
                    f"fetch {fetches} ended early with {describe(counter.other[0])} after"
                    f" {counter.count} of {n} messages"
                )
            out = ack_frames(replies) if ack and replies else b""
            if counter.count >= want:
                if counter.count > want:
                    raise BenchError(f"{counter.count} messages for {want} requested")
                if want < n:
                    b = min(batch, n - want)
                    out += next_request(api, reply + b"%d" % fetches, b, expires)
                    want += b
                    fetches += 1
            if out:
                sock.sendall(out)
            if time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded after {counter.count} of {n} messages")
        _flush_pong(sock, counter, n, exact=True)
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    return {
        "count": counter.count,
        "fetches": fetches,
        "slow_chunks": counter.slow_chunks,
        "first": t0,
        "last": t1,
        "cpu": cpu,
    }


def pull_main(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    batch: int,
    ack: bool,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Fetch ``n`` messages in batches of ``batch`` from a durable pull consumer."""
    _run_worker(
        q,
        "cons",
        0,
        lambda: _pull(
            port, stream, durable, subject, size, n, batch, ack, q, go, deadline, idle_timeout
        ),
    )


# --------------------------------------------------------------------------- push


def _push(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    config: dict[str, Any],
    exact: bool,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    dsubj, api_inbox = new_inbox(), new_inbox()
    sock, parser = connect(port, extra=f"SUB {dsubj} 1\r\nSUB {api_inbox} 2\r\n".encode())
    if parser.buf:
        raise BenchError("unexpected data after the handshake")
    q.put({"role": "cons", "idx": 0, "event": "ready"})
    body = json.dumps(
        {
            "stream_name": stream,
            "config": {**config, "durable_name": durable, "deliver_subject": dsubj},
        }
    ).encode()
    create = b"PUB $JS.API.CONSUMER.CREATE.%s.%s %s %d\r\n%s\r\n" % (
        stream.encode(),
        durable.encode(),
        api_inbox.encode(),
        len(body),
        body,
    )
    ack = config.get("ack_policy", "none") != "none"
    created = False
    with sock:
        sock.settimeout(idle_timeout)
        counter = DeliveryCounter(sock, subject, b"1", make_payload(size))
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        sock.sendall(create)  # delivery starts as soon as the consumer exists (we listen)
        while counter.count < n or not created:
            replies = counter.feed(_recv(sock, counter, n, "message"))
            for m in counter.other:
                if m.sid != b"2":
                    raise BenchError(f"unexpected message: {describe(m)}")
                doc = json.loads(m.payload)
                if "error" in doc:
                    raise BenchError(f"consumer create failed: {doc['error']}")
                created = True
            counter.other.clear()
            if ack and replies:
                sock.sendall(ack_frames(replies))
            if exact and counter.count > n:
                raise BenchError(f"received {counter.count} messages, expected {n}")
            if time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded after {counter.count} of {n} messages")
        if exact:
            _flush_pong(sock, counter, n, exact=True)
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    return {
        "count": min(counter.count, n) if not exact else counter.count,
        "slow_chunks": counter.slow_chunks,
        "first": t0,
        "last": t1,
        "cpu": cpu,
    }


def push_main(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    config: dict[str, Any],
    exact: bool,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Create a durable push consumer (``config``) on its own connection; count ``n`` messages."""
    _run_worker(
        q,
        "cons",
        0,
        lambda: _push(
            port, stream, durable, subject, size, n, config, exact, q, go, deadline, idle_timeout
        ),
    )


# --------------------------------------------------------------------------- end-to-end


def _e2e(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    batch: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    pinbox, cinbox = new_inbox(), new_inbox()
    psock, pparser = connect(port, extra=f"SUB {pinbox}.* 1\r\n".encode())
    try:
        csock, cparser = connect(port, extra=f"SUB {cinbox}.* 1\r\n".encode())
    except BaseException:
        psock.close()
        raise
    prefix = f"PUB {subject} {pinbox}.".encode()
    suffix = f" {size}\r\n".encode() + make_payload(size) + b"\r\n"
    api = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}".encode()
    reply = cinbox.encode() + b"."
    expires = int(idle_timeout * 1e9)
    lat: list[int] = []
    clock = time.perf_counter_ns
    with psock, csock:
        if pparser.buf or cparser.buf:
            raise BenchError("unexpected data after the handshake")
        psock.settimeout(idle_timeout)
        csock.settimeout(idle_timeout)
        counter = DeliveryCounter(csock, subject, b"1", make_payload(size))
        acks = AckCounter(psock)
        total = n_warm + n
        # a pull request is waiting before the first publish; a new one goes out when half
        # of the outstanding batch is used (as Consume() does), so one is always waiting
        pulls = 1
        credit = batch
        csock.sendall(next_request(api, reply + b"0", batch, expires))
        _flush_pong(csock, counter, total, exact=True)
        q.put({"role": "cons", "idx": 0, "event": "ready"})
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        stop_at = min(t0 + max_time, deadline)
        for i in range(total):
            frame = prefix + b"%d" % i + suffix
            s0 = clock()
            psock.sendall(frame)
            replies: list[bytes] = []
            while counter.count <= i:
                replies += counter.feed(_recv(csock, counter, total, "message"))
                if counter.other:
                    raise BenchError(
                        f"pull request ended with {describe(counter.other[0])} after"
                        f" {counter.count} messages"
                    )
            s1 = clock()
            if counter.count != i + 1:
                raise BenchError(f"{counter.count} messages received for {i + 1} published")
            credit -= 1
            out = ack_frames(replies)
            if credit <= batch // 2:
                out += next_request(api, reply + b"%d" % pulls, batch, expires)
                pulls += 1
                credit += batch
            csock.sendall(out)
            while acks.acks <= i:
                try:
                    data = psock.recv(65536)
                except TimeoutError as exc:
                    raise BenchError(f"no PubAck within the idle timeout for publish {i}") from exc
                if not data:
                    raise BenchError("server closed the publisher connection")
                acks.feed(data)
            if i >= n_warm:
                lat.append(s1 - s0)
                if time.monotonic() >= stop_at:
                    break
            elif time.monotonic() > deadline:
                raise BenchError("deadline exceeded during warm-up")
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
        _flush_pong(csock, counter, counter.count, exact=True)
    if not lat:
        raise BenchError("no measured messages")
    if acks.acks != counter.count or acks.max_seq != counter.count:
        raise BenchError(
            f"{counter.count} delivered, {acks.acks} PubAcks, highest seq {acks.max_seq}"
        )
    return {
        "count": counter.count,
        "measured": len(lat),
        "slow_chunks": counter.slow_chunks,
        "first": t0,
        "last": t1,
        "cpu": cpu,
        **latency_stats(lat),
    }


def e2e_main(
    port: int,
    stream: str,
    durable: str,
    subject: str,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    batch: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Publish one message at a time; time publish -> delivery through a pull consumer."""
    _run_worker(
        q,
        "cons",
        0,
        lambda: _e2e(
            port,
            stream,
            durable,
            subject,
            size,
            n,
            n_warm,
            max_time,
            batch,
            q,
            go,
            deadline,
            idle_timeout,
        ),
    )
