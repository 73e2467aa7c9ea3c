"""Key-Value and Object Store load-generator workers for the natsd benchmark.

Everything is raw client protocol, doing on the wire what the client libraries do:

* KV bucket ``<b>`` = stream ``KV_<b>`` on ``$KV.<b>.>``, created with the config nats-py's
  ``create_key_value`` sends (history 1 = ``max_msgs_per_subject`` 1, ``discard: new``,
  ``allow_rollup_hdrs``, ``deny_delete``, ``allow_msg_ttl``, 2 min duplicate window) plus
  ``allow_direct: true`` as ``nats kv add`` / nats.go always set it.
* ``kv_put_main``: ``kv.put`` = ``PUB $KV.<b>.<key> <inbox>.<i> <len>`` and wait for the
  PubAck; ``window`` 1 = a client calling ``put`` in a loop (per-op latency), more =
  pipelined (at most ``window`` puts unacknowledged).  Keys cycle through a pool.
* ``kv_get_main``: ``kv.get`` with ``allow_direct`` =
  ``PUB $JS.API.DIRECT.GET.KV_<b>.$KV.<b>.<key> <inbox>.<i> 0``; every answer must be a
  message (``HMSG`` with a status-less ``NATS/1.0`` header, not a ``404``) whose
  ``Nats-Subject`` header names the requested key and whose payload is the key's value.
* Object Store bucket ``<b>`` = stream ``OBJ_<b>`` on ``$O.<b>.C.>`` and ``$O.<b>.M.>``
  (nats-py's ``create_object_store`` config).  ``obj_put_main`` is nats-py's
  ``ObjectStore.put``: 128 KiB chunks published to ``$O.<b>.C.<nuid>`` (each with a reply
  subject; ``window`` 1 = one at a time as nats-py does, more = pipelined as nats.go
  does), then the meta message (``ObjectInfo`` JSON with size, chunks and the
  ``SHA-256=`` digest) on ``$O.<b>.M.<base64url(name)>`` with ``Nats-Rollup: sub``.
  ``obj_get_main`` is nats-py's ``ObjectStore.get``: ``$JS.API.STREAM.MSG.GET`` with
  ``last_by_subj`` for the meta, then an ordered push consumer (ephemeral,
  ``deliver_subject``, ``filter_subject`` = the chunk subject, ``ack_policy: none``,
  flow control, 5 s idle heartbeat, ``mem_storage``); flow-control requests are
  answered, chunks must arrive in order, and the byte count and SHA-256 must match the
  meta.

Every blocking call is bounded (socket timeout = idle timeout, an absolute deadline).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import select
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from .jsload import AckCounter
from .loadgen import (
    PONG,
    RECV_CHUNK,
    BenchError,
    Report,
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

OBJ_CHUNK = 128 * 1024  # nats-py / nats.go default chunk size
STATUS_LINE = b"NATS/1.0"
MB = 1024 * 1024


# --------------------------------------------------------------------------- configs


def kv_stream_config(bucket: str, storage: str = "file") -> dict[str, Any]:
    """The stream config of ``create_key_value(bucket=...)`` (nats-py), allow_direct on."""
    return {
        "name": f"KV_{bucket}",
        "subjects": [f"$KV.{bucket}.>"],
        "max_consumers": -1,
        "max_msgs": -1,
        "discard": "new",
        "discard_new_per_subject": False,
        "max_msgs_per_subject": 1,
        "storage": storage,
        "num_replicas": 1,
        "no_ack": False,
        "duplicate_window": 120_000_000_000,
        "sealed": False,
        "deny_delete": True,
        "deny_purge": False,
        "allow_rollup_hdrs": True,
        "allow_direct": True,
        "allow_msg_ttl": True,
        "max_age": 0,
    }


def obj_stream_config(bucket: str, storage: str = "file") -> dict[str, Any]:
    """The stream config of ``create_object_store(bucket)`` (nats-py)."""
    return {
        "name": f"OBJ_{bucket}",
        "subjects": [f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
        "max_consumers": 0,
        "discard": "new",
        "discard_new_per_subject": False,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "storage": storage,
        "num_replicas": 1,
        "no_ack": False,
        "duplicate_window": 0,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": True,
        "allow_direct": True,
        "max_age": 0,
    }


def kv_keys(n: int) -> list[bytes]:
    return [b"k%06d" % i for i in range(n)]


def kv_value(key: bytes, size: int) -> bytes:
    """The value stored under ``key``: starts with the key, so every key's value differs."""
    return (key + b":" + make_payload(size))[:size]


def get_order(nkeys: int) -> list[int]:
    """A fixed shuffled key order for the gets (not the order the keys were written in)."""
    order = list(range(nkeys))
    random.Random(5).shuffle(order)
    return order


def obj_data(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


def obj_meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def digest_text(data_digest: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(data_digest).decode()


# --------------------------------------------------------------------------- readers


class Reader(Protocol):
    count: int

    def feed(self, data: bytes) -> int: ...

    def pending(self) -> str: ...


class PutAcks(AckCounter):
    """``AckCounter`` (PubAcks, error acks fail the run) with the ``Reader`` interface."""

    @property
    def count(self) -> int:
        return self.acks


class DirectGetReader:
    """Checks direct-get answers (``HMSG <inbox>.<i> ...``) and counts them."""

    def __init__(
        self, sock: socket.socket, inbox: bytes, bucket: str, keys: list[bytes], size: int
    ) -> None:
        self.sock = sock
        self.prefix = b"HMSG " + inbox + b"."
        self.plen = len(self.prefix)
        self.keys = keys
        self.order = get_order(len(keys))
        self.subj_hdr = [b"Nats-Subject: $KV.%s.%s\r\n" % (bucket.encode(), k) for k in keys]
        self.values = [kv_value(k, size) for k in keys]
        self.buf = b""
        self.count = 0
        self.seen: set[int] | None = None

    def feed(self, data: bytes) -> int:
        buf = self.buf + data if self.buf else data
        pos = 0
        n = len(buf)
        done = 0
        while pos < n:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            if buf.startswith(self.prefix, pos):
                parts = buf[pos + self.plen : eol].split(b" ")
                if len(parts) != 4:
                    raise BenchError(f"malformed answer line {buf[pos:eol][:120]!r}")
                hlen, tlen = int(parts[2]), int(parts[3])
                start = eol + 2
                end = start + tlen
                if end + 2 > n:
                    break
                hdr = buf[start : start + hlen]
                if not hdr.startswith(STATUS_LINE + b"\r\n"):
                    line = hdr.split(b"\r\n", 1)[0].decode(errors="replace")
                    raise BenchError(f"direct get {self.count + done}: not a message: {line!r}")
                i = int(parts[0])
                k = self.order[i % len(self.keys)]
                if self.subj_hdr[k] not in hdr:
                    raise BenchError(f"direct get {i}: answer for another subject: {hdr!r:.300}")
                if buf[start + hlen : end] != self.values[k]:
                    raise BenchError(f"direct get {i}: wrong value {buf[start + hlen : end]!r:.80}")
                pos = end + 2
                done += 1
                continue
            line = buf[pos:eol]
            if line == b"PING":
                self.sock.sendall(PONG)
            elif line.startswith(b"-ERR"):
                raise BenchError(f"server error: {line.decode(errors='replace')}")
            elif line not in (b"PONG", b"+OK") and not line.startswith(b"INFO "):
                raise BenchError(f"unexpected data from server: {line[:120]!r}")
            pos = eol + 2
        self.buf = buf[pos:]
        if len(self.buf) > 1 << 20:
            raise BenchError(f"unparseable data from server: {self.buf[:80]!r}")
        self.count += done
        return done

    def pending(self) -> str:
        return repr(self.buf[:200]) if self.buf else "(nothing)"


# --------------------------------------------------------------------------- request loop


def _recv_into(sock: socket.socket, reader: Reader, what: str, idle_timeout: float) -> None:
    try:
        data = sock.recv(RECV_CHUNK)
    except TimeoutError as exc:
        raise BenchError(
            f"no {what} for {idle_timeout:.0f}s after {reader.count} answers"
        ) from exc
    if not data:
        raise BenchError(
            f"server closed the connection after {reader.count} answers; unparsed: "
            + reader.pending()
        )
    reader.feed(data)


def request_loop(
    sock: socket.socket,
    frame: Callable[[int], bytes],
    reader: Reader,
    n: int,
    n_warm: int,
    max_time: float,
    window: int,
    deadline: float,
    idle_timeout: float,
    what: str,
) -> Report:
    """Send ``frame(i)`` requests, each answered once (``reader`` counts the answers).

    ``window`` 1: one at a time, per-request latency (the first ``n_warm`` not measured);
    otherwise pipelined with at most ``window`` unanswered.  Runs for ``max_time`` s or
    ``n`` requests.  Returns counts, times and latency statistics (sync).
    """
    lat: list[int] = []
    clock = time.perf_counter_ns
    t0 = time.monotonic()
    cpu0 = time.process_time()
    stop_at = min(t0 + max_time, deadline)
    sent = 0
    if window <= 1:
        for i in range(n_warm + n):
            f = frame(i)
            s0 = clock()
            sock.sendall(f)
            while reader.count <= i:
                _recv_into(sock, reader, what, idle_timeout)
            s1 = clock()
            sent += 1
            if reader.count != sent:
                raise BenchError(f"{reader.count} answers for {sent} requests")
            if i >= n_warm:
                lat.append(s1 - s0)
                if time.monotonic() >= stop_at:
                    break
            elif time.monotonic() > deadline:
                raise BenchError("deadline exceeded during warm-up")
    else:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        batch = max(1, min(1000, window // 4))
        limit = n
        while True:
            if sent < limit:
                k = min(batch, limit - sent)
                if window - (sent - reader.count) >= k:
                    sock.sendall(b"".join(frame(i) for i in range(sent, sent + k)))
                    sent += k
                    if time.monotonic() >= stop_at:
                        limit = sent  # time is up: collect what is outstanding
                    if not poller.poll(0):
                        continue
            elif reader.count >= sent:
                break
            _recv_into(sock, reader, what, idle_timeout)
            if reader.count > sent:
                raise BenchError(f"more answers ({reader.count}) than requests ({sent})")
            if time.monotonic() > deadline:
                raise BenchError(f"deadline exceeded: {reader.count} of {sent} answered")
    t1 = time.monotonic()
    rep: Report = {
        "count": reader.count,
        "first": t0,
        "last": t1,
        "cpu": time.process_time() - cpu0,
    }
    if window <= 1:
        if not lat:
            raise BenchError("no measured requests")
        rep.update(measured=len(lat), **latency_stats(lat))
    else:
        rep["rate"] = reader.count / max(1e-9, t1 - t0)
    return rep


# --------------------------------------------------------------------------- KV put / get


def put_frames(bucket: str, keys: list[bytes], size: int, inbox: str) -> Callable[[int], bytes]:
    heads = [b"PUB $KV.%s.%s %s." % (bucket.encode(), k, inbox.encode()) for k in keys]
    tails = [b" %d\r\n%s\r\n" % (size, kv_value(k, size)) for k in keys]
    nk = len(keys)

    def frame(i: int) -> bytes:
        j = i % nk
        return heads[j] + b"%d" % i + tails[j]

    return frame


def kv_fill(
    port: int, bucket: str, nkeys: int, size: int, deadline: float, idle_timeout: float
) -> Report:
    """Put every key once (pipelined, every PubAck checked); used before the get runs."""
    inbox, sock, _ = connect_inbox(port)
    with sock:
        sock.settimeout(idle_timeout)
        acks = PutAcks(sock)
        frame = put_frames(bucket, kv_keys(nkeys), size, inbox)
        rep = request_loop(
            sock, frame, acks, nkeys, 0, 1e9, 1024, deadline, idle_timeout, "PubAck"
        )
    if acks.acks != nkeys or acks.max_seq != nkeys:
        raise BenchError(f"kv fill: {acks.acks} acks, highest seq {acks.max_seq}, want {nkeys}")
    return rep


def _kv_put(
    port: int,
    bucket: str,
    nkeys: int,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox, sock, _ = connect_inbox(port)
    frame = put_frames(bucket, kv_keys(nkeys), size, inbox)
    q.put({"role": "kv", "idx": 0, "event": "ready"})
    with sock:
        sock.settimeout(idle_timeout)
        acks = PutAcks(sock)
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        rep = request_loop(
            sock, frame, acks, n, n_warm, max_time, window, deadline, idle_timeout, "PubAck"
        )
    rep.update(max_seq=acks.max_seq, slow_chunks=acks.slow_chunks)
    return rep


def kv_put_main(
    port: int,
    bucket: str,
    nkeys: int,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """``kv.put`` in a loop (``window`` 1) or pipelined; keys cycle through ``nkeys``."""
    _run_worker(
        q,
        "kv",
        0,
        lambda: _kv_put(
            port, bucket, nkeys, size, n, n_warm, max_time, window, q, go, deadline, idle_timeout
        ),
    )


def _kv_get(
    port: int,
    bucket: str,
    nkeys: int,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    inbox, sock, _ = connect_inbox(port)
    keys = kv_keys(nkeys)
    order = get_order(nkeys)
    api = b"PUB $JS.API.DIRECT.GET.KV_%s.$KV.%s." % (bucket.encode(), bucket.encode())
    heads = [api + k + b" " + inbox.encode() + b"." for k in keys]

    def frame(i: int) -> bytes:
        return heads[order[i % nkeys]] + b"%d 0\r\n\r\n" % i

    q.put({"role": "kv", "idx": 0, "event": "ready"})
    with sock:
        sock.settimeout(idle_timeout)
        reader = DirectGetReader(sock, inbox.encode(), bucket, keys, size)
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        return request_loop(
            sock, frame, reader, n, n_warm, max_time, window, deadline, idle_timeout, "answer"
        )


def kv_get_main(
    port: int,
    bucket: str,
    nkeys: int,
    size: int,
    n: int,
    n_warm: int,
    max_time: float,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Direct gets of the (pre-filled) keys, one at a time (``window`` 1) or pipelined."""
    _run_worker(
        q,
        "kv",
        0,
        lambda: _kv_get(
            port, bucket, nkeys, size, n, n_warm, max_time, window, q, go, deadline, idle_timeout
        ),
    )


# --------------------------------------------------------------------------- object put


def obj_put(
    port: int,
    bucket: str,
    name: str,
    data: bytes,
    window: int,
    deadline: float,
    idle_timeout: float,
    go: Event | None = None,
    q: Queue[Report] | None = None,
) -> Report:
    """nats-py's ``ObjectStore.put(name, data)`` in raw protocol (see module docstring)."""
    inbox, sock, _ = connect_inbox(port)
    nuid = uuid.uuid4().hex[:22].upper()
    chunk_head = b"PUB $O.%s.C.%s %s." % (bucket.encode(), nuid.encode(), inbox.encode())
    nchunks = (len(data) + OBJ_CHUNK - 1) // OBJ_CHUNK
    view = memoryview(data)

    def frame(i: int) -> bytes:
        part = view[i * OBJ_CHUNK : (i + 1) * OBJ_CHUNK]
        return b"".join((chunk_head, b"%d %d\r\n" % (i, len(part)), part, b"\r\n"))

    if q is not None:
        q.put({"role": "obj", "idx": 0, "event": "ready"})
    with sock:
        sock.settimeout(idle_timeout)
        acks = PutAcks(sock)
        if go is not None and not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        h = hashlib.sha256()
        if window <= 1:  # nats-py: hash and publish one chunk at a time, await each ack
            for i in range(nchunks):
                h.update(view[i * OBJ_CHUNK : (i + 1) * OBJ_CHUNK])
                sock.sendall(frame(i))
                while acks.acks <= i:
                    _recv_into(sock, acks, "chunk PubAck", idle_timeout)
                if time.monotonic() > deadline:
                    raise BenchError(f"deadline exceeded after {i + 1} of {nchunks} chunks")
        else:  # nats.go: publish async (at most `window` pending), wait for all acks
            h.update(view)
            request_loop(
                sock, frame, acks, nchunks, 0, 1e9, window, deadline, idle_timeout, "PubAck"
            )
        if acks.acks != nchunks or acks.max_seq != acks.acks:
            raise BenchError(f"{acks.acks} chunk acks (highest seq {acks.max_seq}) for {nchunks}")
        digest = digest_text(h.digest())
        info = {
            "name": name,
            "bucket": bucket,
            "nuid": nuid,
            "size": len(data),
            "mtime": datetime.now(UTC).isoformat(),
            "chunks": nchunks,
            "digest": digest,
            "deleted": False,
            "options": {"max_chunk_size": OBJ_CHUNK},
        }
        body = json.dumps(info).encode()
        hdr = b"NATS/1.0\r\nNats-Rollup: sub\r\n\r\n"
        meta = obj_meta_subject(bucket, name).encode()
        sock.sendall(
            b"HPUB %s %s.meta %d %d\r\n%s%s\r\n"
            % (meta, inbox.encode(), len(hdr), len(hdr) + len(body), hdr, body)
        )
        while acks.acks <= nchunks:
            _recv_into(sock, acks, "meta PubAck", idle_timeout)
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
    if acks.acks != nchunks + 1 or acks.max_seq < nchunks + 1:
        raise BenchError(f"meta publish: {acks.acks} acks, highest seq {acks.max_seq}")
    return {
        "count": len(data),
        "chunks": nchunks,
        "digest": digest,
        "nuid": nuid,
        "first": t0,
        "last": t1,
        "cpu": cpu,
        "rate": len(data) / MB / max(1e-9, t1 - t0),
    }


def obj_put_main(
    port: int,
    bucket: str,
    name: str,
    size: int,
    window: int,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Put one ``size``-byte object (deterministic random bytes) into ``bucket``."""

    def body() -> Report:
        data = obj_data(size)
        return obj_put(port, bucket, name, data, window, deadline, idle_timeout, go, q)

    _run_worker(q, "obj", 0, body)


# --------------------------------------------------------------------------- object get


def _ack_tokens(reply: bytes) -> tuple[int, int, int]:
    """(stream seq, consumer seq, pending) of a ``$JS.ACK`` subject (v1 and v2 forms)."""
    t = reply.split(b".")
    try:
        if len(t) == 9:
            return int(t[5]), int(t[6]), int(t[8])
        if len(t) >= 11:
            return int(t[7]), int(t[8]), int(t[10])
    except ValueError:
        pass
    raise BenchError(f"not a JetStream ack subject: {reply[:120]!r}")


def _header(hdrs: bytes, name: bytes) -> bytes | None:
    for line in hdrs.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name.lower():
            return v.strip()
    return None


def _obj_get(
    port: int,
    bucket: str,
    name: str,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> Report:
    api_inbox, dsubj = new_inbox(), new_inbox()
    extra = f"SUB {api_inbox}.* 1\r\nSUB {dsubj} 2\r\n".encode()
    sock, parser = connect(port, extra=extra)
    q.put({"role": "obj", "idx": 0, "event": "ready"})
    stream = f"OBJ_{bucket}"
    with sock:
        sock.settimeout(idle_timeout)

        def recv() -> None:
            if time.monotonic() > deadline:
                raise BenchError("deadline exceeded")
            try:
                data = sock.recv(RECV_CHUNK)
            except TimeoutError as exc:
                raise BenchError(f"nothing received for {idle_timeout:.0f}s") from exc
            if not data:
                raise BenchError("server closed the connection")
            msgs.extend(parser.feed(data))
            if parser.pings:
                sock.sendall(PONG * parser.pings)
                parser.pings = 0

        def api_reply() -> dict[str, Any]:
            while True:
                for j, m in enumerate(msgs):
                    if m.sid == b"1":
                        del msgs[j]
                        doc = json.loads(m.payload)
                        if not isinstance(doc, dict):
                            raise BenchError(f"unexpected API reply {m.payload[:120]!r}")
                        if "error" in doc:
                            raise BenchError(f"API error: {doc['error']}")
                        return doc
                recv()

        msgs: list[Any] = []
        if not go.wait(max(0.0, deadline - time.monotonic())):
            raise BenchError("never got the go signal")
        t0 = time.monotonic()
        cpu0 = time.process_time()
        # 1. the meta: STREAM.MSG.GET last_by_subj (nats-py's get_info)
        body = json.dumps({"last_by_subj": obj_meta_subject(bucket, name)}).encode()
        sock.sendall(
            b"PUB $JS.API.STREAM.MSG.GET.%s %s.0 %d\r\n%s\r\n"
            % (stream.encode(), api_inbox.encode(), len(body), body)
        )
        doc = api_reply()
        info = json.loads(base64.b64decode(doc["message"]["data"]))
        nuid, size, nchunks, digest = info["nuid"], info["size"], info["chunks"], info["digest"]
        # 2. the ordered consumer on the chunk subject (nats-py's subscribe(ordered_consumer))
        cfg = {
            "deliver_policy": "all",
            "ack_policy": "none",
            "ack_wait": 22 * 3600 * 10**9,
            "max_deliver": 1,
            "filter_subject": f"$O.{bucket}.C.{nuid}",
            "replay_policy": "instant",
            "flow_control": True,
            "idle_heartbeat": 5 * 10**9,
            "deliver_subject": dsubj,
            "num_replicas": 1,
            "mem_storage": True,
        }
        body = json.dumps({"stream_name": stream, "config": cfg}).encode()
        sock.sendall(
            b"PUB $JS.API.CONSUMER.CREATE.%s %s.1 %d\r\n%s\r\n"
            % (stream.encode(), api_inbox.encode(), len(body), body)
        )
        consumer = ""
        h = hashlib.sha256()
        got = chunks = fcs = 0
        pending = -1
        while chunks < nchunks or pending != 0 or not consumer:
            if not msgs:
                recv()
            batch, msgs = msgs, []
            for m in batch:
                if m.sid == b"1":
                    doc = json.loads(m.payload)
                    if "error" in doc:
                        raise BenchError(f"consumer create failed: {doc['error']}")
                    consumer = doc["name"]
                    continue
                if m.sid != b"2":
                    raise BenchError(f"message on unexpected sid {m.sid!r}")
                if m.reply and m.reply.startswith(b"$JS.ACK."):
                    _sseq, cseq, pending = _ack_tokens(m.reply)
                    if cseq != chunks + 1:
                        raise BenchError(f"chunk {chunks + 1} arrived as consumer seq {cseq}")
                    h.update(m.payload)
                    got += len(m.payload)
                    chunks += 1
                    continue
                if m.payload.startswith(STATUS_LINE):  # flow control / idle heartbeat
                    hdrs = m.payload.split(b"\r\n\r\n", 1)[0]
                    status = hdrs.split(b"\r\n", 1)[0]
                    if not status.startswith(b"NATS/1.0 100"):
                        raise BenchError(f"unexpected status on the deliver subject: {status!r}")
                    target = m.reply or _header(hdrs, b"Nats-Consumer-Stalled")
                    if target:
                        sock.sendall(b"PUB %s 0\r\n\r\n" % target)
                        fcs += 1
                    continue
                raise BenchError(f"unexpected delivery {m.subject!r} {m.payload[:80]!r}")
            if chunks > nchunks:
                raise BenchError(f"{chunks} chunks delivered, the meta says {nchunks}")
        if got != size:
            raise BenchError(f"got {got} bytes, the meta says {size}")
        if digest_text(h.digest()) != digest:
            raise BenchError(f"digest mismatch: {digest_text(h.digest())} != {digest}")
        t1 = time.monotonic()
        cpu = time.process_time() - cpu0
        sock.sendall(b"UNSUB 2\r\n")
    return {
        "count": got,
        "chunks": chunks,
        "digest": digest,
        "consumer": consumer,
        "flow_controls": fcs,
        "first": t0,
        "last": t1,
        "cpu": cpu,
        "rate": got / MB / max(1e-9, t1 - t0),
    }


def obj_get_main(
    port: int,
    bucket: str,
    name: str,
    q: Queue[Report],
    go: Event,
    deadline: float,
    idle_timeout: float,
) -> None:
    """Read one object like nats-py's ``ObjectStore.get``; check size and digest."""
    _run_worker(q, "obj", 0, lambda: _obj_get(port, bucket, name, q, go, deadline, idle_timeout))
