"""Helpers for the JetStream consumer differential tests (:mod:`.test_consumers`).

A scenario is an ``async def scenario(c: ConsumerRecorder) -> None`` that talks to one
server through a raw NATS protocol connection (:class:`RawConn`: ``CONNECT``/``SUB``/
``PUB``/``HPUB`` written by hand, ``MSG``/``HMSG`` frames parsed by hand, so status lines
and header blocks are seen exactly as the server wrote them). Everything worth comparing
is appended to ``c.log`` as ``(label, value)``; :func:`run_scenario` runs the same scenario
against nats-server and natsd concurrently and returns both normalised logs.

Inboxes are deterministic (``_I.<log length>`` for :meth:`ConsumerRecorder.fetch`, names
chosen by the scenario such as ``_W1``, ``_R.<n>`` for API requests and sync acks) so
delivery subjects compare equal between servers.

Normalisation (:func:`normalise`), applied when the scenario ends:

* JSON: ``created``/``ts``/``last_active``/``time``/``timestamp``/``server_id``/
  ``server_name``/``leader``/``pause_remaining``/``pinned_ts``/``ack_time`` values masked;
  ``cluster``
  dropped; in ``metadata`` the ``_nats.*`` keys describing the server (``_nats.ver``/
  ``_nats.level``) dropped, ``_nats.req.level`` kept; ``api.level`` dropped.
* ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` reply subjects:
  the timestamp token becomes ``<ts>``.
* Flow-control reply subjects (``$JS.FC.<stream>.<consumer>.<id>``): the random id is
  masked.
* Names the scenario registered with :meth:`ConsumerRecorder.alias` (server-generated
  ephemeral consumer names, ...) are replaced everywhere by their alias.

Set ``NATSD_DIFF_IMPL=nats-server`` to run nats-server on *both* sides (the self-check
used to prove a scenario is stable after normalisation).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from .harness import ServerPair, ServerProcess, start_server

API = "$JS.API"

#: ``NATSD_DIFF_IMPL=nats-server``: the "impl" side is a second nats-server (self-check).
SELF_CHECK = os.environ.get("NATSD_DIFF_IMPL", "natsd") == "nats-server"

#: Keys whose values are volatile; they keep their presence, the value is masked.
VOLATILE = frozenset(
    {
        "created",
        "ts",
        "first_ts",
        "last_ts",
        "last_active",
        "time",
        "server_id",
        "server_name",
        "leader",
        "pause_remaining",
        "pinned_ts",
        "timestamp",
        "ack_time",
    }
)
#: Keys dropped altogether (``cluster`` is only sent by nats-server).
DROP = frozenset({"cluster"})
KEPT_NATS_METADATA = frozenset({"_nats.req.level"})

TIMEOUT = "<timeout>"

_ACK_RE = re.compile(r"^\$JS\.ACK\.([^.]+)\.([^.]+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)\.(\d+)$")
_FC_RE = re.compile(r"^\$JS\.FC\.([^.]+)\.([^.]+)\.(.+)$")


# ====================================================================== raw connection
class Frame:
    """One ``MSG``/``HMSG`` the server sent."""

    __slots__ = ("data", "hdr", "reply", "sid", "subject")

    def __init__(self, subject: str, sid: int, reply: str, hdr: bytes | None, data: bytes):
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self.hdr = hdr
        self.data = data

    @property
    def status(self) -> str:
        """``"404 No Messages"`` etc. for status messages, ``""`` otherwise."""
        if not self.hdr:
            return ""
        first = self.hdr.split(b"\r\n", 1)[0].decode()
        return first[len("NATS/1.0") :].strip()

    def headers(self) -> list[tuple[str, str]]:
        if not self.hdr:
            return []
        out = []
        for line in self.hdr.decode("utf-8", "backslashreplace").split("\r\n")[1:]:
            if line:
                name, _, value = line.partition(":")
                out.append((name, value.strip()))
        return out

    def header(self, name: str) -> str | None:
        for k, v in self.headers():
            if k.lower() == name.lower():
                return v
        return None

    def __repr__(self) -> str:
        return (
            f"Frame({self.subject!r}, reply={self.reply!r}, hdr={self.hdr!r}, data={self.data!r})"
        )


class RawConn:
    """A NATS connection written by hand: headers on, no_responders on, verbose off."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.frames: dict[int, list[Frame]] = {}
        self.errors: list[str] = []
        self._sid = 0
        self._req = 0
        self._changed = asyncio.Event()
        self._pongs = 0
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        self.reply_sid = 0  # the _R.> subscription for request replies

    @classmethod
    async def open(cls, server: ServerProcess) -> RawConn:
        reader, writer = await asyncio.open_connection(server.host, server.port, limit=1 << 22)
        line = await reader.readline()
        assert line.startswith(b"INFO "), line
        conn = cls(reader, writer)
        connect = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "name": "consumer-diff",
        }
        writer.write(f"CONNECT {json.dumps(connect)}\r\n".encode())
        conn._task = asyncio.create_task(conn._read_loop())
        await conn.ping()
        conn.reply_sid = conn.sub("_R.>")
        return conn

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        with contextlib.suppress(Exception):
            self.writer.close()

    # ------------------------------------------------------------------ reading
    async def _read_loop(self) -> None:
        r = self.reader
        try:
            while True:
                line = await r.readuntil(b"\r\n")
                op, _, rest = line[:-2].partition(b" ")
                op = op.upper()
                if op == b"MSG":
                    args = rest.split()
                    size = int(args[-1])
                    payload = await r.readexactly(size + 2)
                    reply = args[2].decode() if len(args) == 4 else ""
                    self._add(Frame(args[0].decode(), int(args[1]), reply, None, payload[:-2]))
                elif op == b"HMSG":
                    args = rest.split()
                    hsize, total = int(args[-2]), int(args[-1])
                    payload = await r.readexactly(total + 2)
                    reply = args[2].decode() if len(args) == 5 else ""
                    f = Frame(
                        args[0].decode(),
                        int(args[1]),
                        reply,
                        payload[:hsize],
                        payload[hsize:total],
                    )
                    self._add(f)
                elif op == b"PING":
                    self.writer.write(b"PONG\r\n")
                elif op == b"PONG":
                    self._pongs += 1
                    self._notify()
                elif op == b"-ERR":
                    self.errors.append(rest.decode())
                    self._notify()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed = True
            self._notify()

    def _add(self, f: Frame) -> None:
        self.frames.setdefault(f.sid, []).append(f)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, timeout: float) -> None:
        ev = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), timeout)

    # ------------------------------------------------------------------ writing
    def sub(self, subject: str, queue: str = "") -> int:
        self._sid += 1
        q = f" {queue}" if queue else ""
        self.writer.write(f"SUB {subject}{q} {self._sid}\r\n".encode())
        self.frames[self._sid] = []
        return self._sid

    def unsub(self, sid: int) -> None:
        self.writer.write(f"UNSUB {sid}\r\n".encode())

    def pub(
        self,
        subject: str,
        data: bytes | str = b"",
        reply: str = "",
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
    ) -> None:
        if isinstance(data, str):
            data = data.encode()
        r = f" {reply}" if reply else ""
        if headers is None:
            self.writer.write(f"PUB {subject}{r} {len(data)}\r\n".encode() + data + b"\r\n")
            return
        items = headers.items() if isinstance(headers, dict) else headers
        hdr = ("NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in items) + "\r\n").encode()
        total = len(hdr) + len(data)
        self.writer.write(
            f"HPUB {subject}{r} {len(hdr)} {total}\r\n".encode() + hdr + data + b"\r\n"
        )

    async def ping(self, timeout: float = 5.0) -> None:
        """Round trip: everything sent before was processed by the server."""
        want = self._pongs + 1
        self.writer.write(b"PING\r\n")
        await self.writer.drain()
        deadline = time.monotonic() + timeout
        while self._pongs < want:
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                raise TimeoutError("no PONG")
            await self._wait_change(left)

    # ------------------------------------------------------------------ waiting
    async def wait_frames(
        self, sid: int, n: int, timeout: float, *, until_status: bool = False
    ) -> list[Frame]:
        """Wait until ``sid`` holds at least ``n`` frames (or ``timeout``); take and
        return them all. ``until_status``: also stop at a terminal status frame (a pull
        request's 404/408/409/..., not a ``100`` heartbeat / flow control)."""
        deadline = time.monotonic() + timeout

        def terminal() -> bool:
            fs = self.frames[sid]
            return until_status and bool(fs) and fs[-1].status[:3] not in ("", "100")

        while len(self.frames[sid]) < n and not terminal():
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                break
            await self._wait_change(left)
        out, self.frames[sid] = self.frames[sid], []
        return out

    async def request(
        self,
        subject: str,
        body: bytes | str | dict[str, Any] | None = b"",
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 2.0,
    ) -> Frame | None:
        """A request with reply subject ``_R.<n>``; ``None`` on timeout."""
        if isinstance(body, dict):
            body = json.dumps(body)
        self._req += 1
        inbox = f"_R.{self._req}"
        self.pub(subject, body or b"", reply=inbox, headers=headers)
        deadline = time.monotonic() + timeout
        sid = self.reply_sid
        while True:
            for i, f in enumerate(self.frames[sid]):
                if f.subject == inbox:
                    del self.frames[sid][i]
                    return f
            if self.closed:
                raise ConnectionError(f"server closed the connection: {self.errors}")
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            await self._wait_change(left)


# ====================================================================== normalisation
def _norm_metadata(md: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in md.items() if not k.startswith("_nats.") or k in KEPT_NATS_METADATA}


def norm_subject(s: str) -> str:
    m = _ACK_RE.match(s)
    if m:
        stream, cons, dlv, sseq, cseq, _ts, pending = m.groups()
        return f"$JS.ACK.{stream}.{cons}.{dlv}.{sseq}.{cseq}.<ts>.{pending}"
    m = _FC_RE.match(s)
    if m:
        return f"$JS.FC.{m.group(1)}.{m.group(2)}.<id>"
    return s


def normalise(obj: Any, aliases: dict[str, str] | None = None) -> Any:
    """Deep copy of a logged value with the volatile parts masked (see module doc)."""
    subst = sorted((aliases or {}).items(), key=lambda kv: -len(kv[0]))

    def text(s: str) -> str:
        s = norm_subject(s)
        for real, alias in subst:
            if real in s:
                s = s.replace(real, alias)
        return s

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, val in v.items():
                if k in DROP:
                    continue
                if k in VOLATILE:
                    out[k] = f"<{k}>"
                elif k == "metadata" and isinstance(val, dict):
                    md = _norm_metadata(val)
                    if md:
                        out[k] = walk(md)
                elif k == "api" and isinstance(val, dict):
                    out[k] = {kk: walk(vv) for kk, vv in val.items() if kk != "level"}
                else:
                    out[text(k)] = walk(val)
            return out
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return text(v)
        return v

    return walk(obj)


def frame_records(frames: list[Frame], dedupe: bool = False) -> list[dict[str, Any]]:
    """:func:`frame_record` of each frame; with ``dedupe`` consecutive identical status
    frames (idle heartbeats, whose number depends on timing) are collapsed into one."""
    out: list[dict[str, Any]] = []
    for f in frames:
        rec = frame_record(f)
        if dedupe and out and f.hdr is not None and not f.data and out[-1] == rec:
            continue
        out.append(rec)
    return out


def frame_record(f: Frame) -> dict[str, Any]:
    """A delivered message as a comparable dict (only the parts that are present)."""
    out: dict[str, Any] = {"subject": f.subject}
    if f.reply:
        out["reply"] = f.reply
    if f.hdr is not None:
        out["status"] = f.status
        hdrs = f.headers()
        if hdrs:
            out["headers"] = hdrs
    data = f.data.decode("utf-8", "backslashreplace")
    if data:
        out["data"] = data
    return out


def _decode(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return {"<raw>": data.decode("utf-8", "backslashreplace")}


# ====================================================================== recorder
class ConsumerRecorder:
    """Drives one server through a :class:`RawConn` and records what comes back."""

    def __init__(self, conn: RawConn) -> None:
        self.conn = conn
        self.log: list[tuple[str, Any]] = []
        self.aliases: dict[str, str] = {}

    # ------------------------------------------------------------------ basics
    def note(self, label: str, value: Any) -> None:
        self.log.append((label, value))

    def alias(self, real: str, alias: str) -> None:
        """Replace ``real`` by ``alias`` everywhere in the final log (generated names)."""
        if real:
            self.aliases[real] = alias

    async def raw(
        self, subject: str, body: bytes | str | dict[str, Any] | None = b"", timeout: float = 2.0
    ) -> Any:
        """An API request (subject relative to ``$JS.API.`` unless it starts with
        ``$``); returns the decoded JSON or :data:`TIMEOUT` (not recorded)."""
        if not subject.startswith("$"):
            subject = f"{API}.{subject}"
        f = await self.conn.request(subject, body, timeout=timeout)
        if f is None:
            return TIMEOUT
        if f.hdr is not None and not f.data:
            return {"<status>": f.status}
        return _decode(f.data)

    async def req(
        self,
        label: str,
        subject: str,
        body: bytes | str | dict[str, Any] | None = b"",
        *,
        timeout: float = 2.0,
        keys: tuple[str, ...] | None = None,
    ) -> Any:
        """An API request, recorded; ``keys`` records only those top-level keys (plus
        ``error``) of the response. Returns the full decoded response."""
        resp = await self.raw(subject, body, timeout)
        out = resp
        if keys is not None and isinstance(resp, dict):
            out = {k: resp[k] for k in (*keys, "error") if k in resp}
        self.log.append((label, out))
        return resp

    async def stream(self, name: str, **cfg: Any) -> Any:
        """Create a stream (subjects default to ``<name lower>.>``, storage to memory);
        records only errors.

        Memory is the default because nats-server 2.15 has a race when a *file* stream is
        deleted and re-created with the same name at once (every scenario deletes its
        streams and the next one re-creates them): now and then the new stream stores each
        message twice. File-store scenarios use stream names no other scenario uses."""
        cfg.setdefault("subjects", [f"{name.lower()}.>"])
        cfg.setdefault("storage", "memory")
        resp = await self.raw(f"STREAM.CREATE.{name}", {"name": name, **cfg})
        if not isinstance(resp, dict) or "error" in resp:
            self.log.append((f"stream {name}", resp))
        return resp

    async def create(
        self,
        label: str,
        stream: str,
        cfg: dict[str, Any],
        *,
        subject: str | None = None,
        action: str | None = None,
        keys: tuple[str, ...] | None = None,
    ) -> Any:
        """CONSUMER.CREATE (``$JS.API.CONSUMER.CREATE.<stream>.<name>`` when the config
        has a name or durable_name, else ``.CREATE.<stream>``), recorded."""
        if subject is None:
            name = cfg.get("name") or cfg.get("durable_name")
            subject = f"CONSUMER.CREATE.{stream}" + (f".{name}" if name else "")
        body: dict[str, Any] = {"stream_name": stream, "config": cfg}
        if action is not None:
            body["action"] = action
        resp = await self.req(label, subject, body, keys=keys)
        if (
            isinstance(resp, dict)
            and "error" not in resp
            and not (cfg.get("name") or cfg.get("durable_name"))
        ):
            # A server-generated ephemeral name.
            self.alias(resp.get("name", ""), f"<ephemeral{len(self.aliases) + 1}>")
        return resp

    async def info(self, label: str, stream: str, consumer: str, *, counters: bool = True) -> Any:
        """CONSUMER.INFO; with ``counters`` only the state counters are recorded."""
        keys = COUNTERS if counters else None
        return await self.req(label, f"CONSUMER.INFO.{stream}.{consumer}", keys=keys)

    async def await_pending(
        self, stream: str, consumer: str, n: int, *, timeout: float = 3.0
    ) -> None:
        """Wait (unrecorded) until the consumer reports ``num_pending == n``.

        nats-server's stream stores a publish and signals its consumers on different
        goroutines, so a ``no_wait`` pull sent right after the PubAck can, on a loaded
        machine, find nothing pending yet; a scenario that wants the message counted
        first waits here."""
        await self.await_info(stream, consumer, "num_pending", n, timeout=timeout)

    async def await_waiting(
        self, stream: str, consumer: str, n: int, *, timeout: float = 3.0
    ) -> None:
        """Wait (unrecorded) until the consumer reports ``num_waiting == n``.

        nats-server queues a pull request to the consumer's own goroutine, so a PING after
        the request does not prove it is registered; a consumer deleted in that window drops
        the request without the 409 a registered one gets (seen under load)."""
        await self.await_info(stream, consumer, "num_waiting", n, timeout=timeout)

    async def await_info(
        self, stream: str, consumer: str, key: str, n: int, *, timeout: float = 3.0
    ) -> None:
        """Poll CONSUMER.INFO (unrecorded) until ``key == n``. Gives up quietly after
        ``timeout``: the recorded steps that follow then show the difference."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = await self.raw(f"CONSUMER.INFO.{stream}.{consumer}")
            if isinstance(info, dict) and info.get(key) == n:
                return
            await asyncio.sleep(0.02)

    async def pub(
        self, subject: str, data: bytes | str = b"x", headers: dict[str, str] | None = None
    ) -> Any:
        """A JetStream publish; the PubAck is returned, recorded only if it is not one."""
        if isinstance(data, str):
            data = data.encode()
        f = await self.conn.request(subject, data, headers=headers)
        resp = TIMEOUT if f is None else _decode(f.data)
        if not isinstance(resp, dict) or "error" in resp or "seq" not in resp:
            self.log.append((f"pub {subject}", resp))
        return resp

    async def pubs(self, subject: str, n: int, data: str = "m") -> None:
        for i in range(1, n + 1):
            await self.pub(subject, f"{data}{i}")

    async def state(self, label: str, stream: str, *, settle: float = 2.0) -> Any:
        """Record the stream's message count / first / last seq / consumer count, once two
        reads 50 ms apart agree (acks remove messages asynchronously; at most ``settle``
        seconds)."""
        deadline = time.monotonic() + settle
        prev: Any = None
        while True:
            info = await self.raw(f"STREAM.INFO.{stream}")
            st = info.get("state", info) if isinstance(info, dict) else info
            if isinstance(st, dict):
                keys = ("messages", "first_seq", "last_seq", "consumer_count")
                st = {k: st[k] for k in keys if k in st}
            if st == prev or time.monotonic() > deadline:
                break
            prev = st
            await asyncio.sleep(0.05)
        self.log.append((label, st))
        return st

    # ------------------------------------------------------------------ messages
    def sub(self, subject: str, queue: str = "") -> int:
        return self.conn.sub(subject, queue)

    def pull(self, stream: str, consumer: str, body: dict[str, Any] | str, inbox: str) -> None:
        """Send a pull request (``$JS.API.CONSUMER.MSG.NEXT``) with reply ``inbox``."""
        if isinstance(body, dict):
            body = json.dumps(body)
        self.conn.pub(f"{API}.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox)

    async def frames(
        self,
        label: str,
        sid: int,
        n: int,
        *,
        timeout: float = 3.0,
        record: bool = True,
        dedupe: bool = False,
        until_status: bool = False,
    ) -> list[Frame]:
        """Wait for ``n`` frames on ``sid`` (fewer on timeout, see
        :meth:`RawConn.wait_frames` for ``until_status``), record them (see
        :func:`frame_records` for ``dedupe``)."""
        got = await self.conn.wait_frames(sid, n, timeout, until_status=until_status)
        if record:
            self.log.append((label, frame_records(got, dedupe)))
        return got

    async def messages(
        self, label: str, sid: int, n: int, *, timeout: float = 3.0, record: bool = True
    ) -> list[Frame]:
        """Wait for ``n`` messages on ``sid``, skipping status frames (idle heartbeats,
        flow control requests, whose number depends on timing); record the messages."""
        deadline = time.monotonic() + timeout
        got: list[Frame] = []
        while len(got) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for f in await self.conn.wait_frames(sid, 1, left):
                if not f.status:
                    got.append(f)
        if record:
            self.log.append((label, frame_records(got)))
        return got

    async def advisories(self, label: str, sid: int, n: int, *, timeout: float = 3.0) -> Any:
        """Wait for ``n`` advisories on ``sid`` and record ``[subject, payload]`` pairs with
        the advisory ``id`` masked (``timestamp`` is masked by :func:`normalise`)."""
        got = await self.conn.wait_frames(sid, n, timeout)
        out = []
        for f in got:
            doc = _decode(f.data)
            if isinstance(doc, dict) and "id" in doc:
                doc["id"] = "<id>"
            out.append([f.subject, doc])
        self.log.append((label, out))
        return out

    async def quiet(self, label: str, sid: int, seconds: float) -> list[Frame]:
        """Record whatever arrives on ``sid`` within ``seconds`` (usually nothing)."""
        await asyncio.sleep(seconds)
        await self.conn.ping()
        got, self.conn.frames[sid] = self.conn.frames[sid], []
        self.log.append((label, frame_records(got)))
        return got

    async def fetch(
        self,
        label: str,
        stream: str,
        consumer: str,
        body: dict[str, Any],
        n: int,
        *,
        inbox: str | None = None,
        timeout: float = 3.0,
        record: bool = True,
        until_status: bool = False,
    ) -> list[Frame]:
        """Pull request on a fresh inbox and wait for ``n`` frames (recorded); with
        ``until_status`` a terminal status frame ends the wait early."""
        inbox = inbox or f"_I.{len(self.log)}"
        sid = self.conn.sub(inbox)
        self.pull(stream, consumer, body, inbox)
        got = await self.frames(
            label, sid, n, timeout=timeout, record=record, until_status=until_status
        )
        self.conn.unsub(sid)
        return got

    async def ack(
        self, label: str | None, f: Frame | str, body: str = "+ACK", timeout: float = 1.0
    ) -> Any:
        """Ack (any kind) a delivered message. With a ``label`` the ack is sent as a
        request and the reply recorded (ack-sync); otherwise it is fire-and-forget
        followed by a PING round trip."""
        subject = f if isinstance(f, str) else f.reply
        if label is None:
            self.conn.pub(subject, body)
            await self.conn.ping()
            return None
        r = await self.conn.request(subject, body, timeout=timeout)
        out = TIMEOUT if r is None else frame_record(r)
        if isinstance(out, dict):
            out.pop("subject", None)
        self.log.append((label, out))
        return out


#: The CONSUMER.INFO state fields recorded by :meth:`ConsumerRecorder.info`.
COUNTERS = (
    "delivered",
    "ack_floor",
    "num_ack_pending",
    "num_redelivered",
    "num_waiting",
    "num_pending",
)


# ====================================================================== running
async def reset(conn: RawConn) -> None:
    """Delete every stream of the account (consumers go with them)."""
    for _ in range(3):
        f = await conn.request(f"{API}.STREAM.NAMES", b"")
        names = (json.loads(f.data).get("streams") or []) if f is not None else []
        if not names:
            return
        for name in names:
            await conn.request(f"{API}.STREAM.DELETE.{name}", b"")


Scenario = Callable[[ConsumerRecorder], Awaitable[None]]


async def run_one(server: ServerProcess, scenario: Scenario, timeout: float = 20.0) -> Any:
    conn = await RawConn.open(server)
    try:
        await reset(conn)
        rec = ConsumerRecorder(conn)
        await asyncio.wait_for(scenario(rec), timeout)
        if conn.errors:
            rec.note("-ERR", conn.errors)
        await reset(conn)
        return normalise(rec.log, rec.aliases)
    finally:
        await conn.close()


async def run_scenario(
    pair: ServerPair, scenario: Scenario, *, timeout: float = 20.0
) -> tuple[Any, Any]:
    """Run ``scenario`` against both servers concurrently: ``(ref_log, impl_log)``."""
    ref, impl = await asyncio.gather(
        run_one(pair.ref, scenario, timeout), run_one(pair.impl, scenario, timeout)
    )
    return ref, impl


# ====================================================================== comparing
def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` (nats-server) and ``b`` (natsd) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}.{k}: nats-server={a[k]!r} natsd=<absent>")
            elif k not in a:
                out.append(f"{path}.{k}: nats-server=<absent> natsd={b[k]!r}")
            else:
                out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path or '.'}: nats-server={a!r} natsd={b!r}"]


def assert_same(ref: Any, impl: Any) -> None:
    """Equality of two scenario logs, with a per-label list of differing paths."""
    lines = []
    for (label, a), (_, b) in zip(ref, impl, strict=False):
        lines += [f"[{label}] {d}" for d in diff(a, b)]
    if len(ref) != len(impl):
        lines.append(f"log lengths differ: {len(ref)} != {len(impl)}")
    assert impl == ref, "differences:\n" + "\n".join(lines)


def dump_log(log: Any) -> None:
    """With ``NATSD_DIFF_DUMP=<dir>``: write ``log`` to ``<dir>/<current test id>.json``."""
    directory = os.environ.get("NATSD_DIFF_DUMP")
    if not directory:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "scenario").rsplit(" (", 1)[0]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test.split("::")[-1])
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"{name}.json").write_text(json.dumps(log, indent=1) + "\n")


def entry(log: list[tuple[str, Any]], label: str) -> Any:
    """The value logged under ``label`` (the first one)."""
    for k, v in log:
        if k == label:
            return v
    raise KeyError(label)


# ====================================================================== servers
@contextlib.contextmanager
def consumer_server_pair(extra_args: tuple[str, ...] = ()) -> Iterator[ServerPair]:
    """nats-server and natsd (or a second nats-server with ``NATSD_DIFF_IMPL=nats-server``),
    each with ``-js -sd <own tmp dir>``."""
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-cons-"))
    started: list[ServerProcess] = []
    kinds = ("nats-server", "nats-server" if SELF_CHECK else "natsd")
    try:
        for i, kind in enumerate(kinds):
            sd = tmp / f"store-{i}-{kind}"
            sd.mkdir()
            started.append(start_server(kind, ["-js", "-sd", str(sd), *extra_args], log_dir=tmp))
        yield ServerPair(started[0], started[1])
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
