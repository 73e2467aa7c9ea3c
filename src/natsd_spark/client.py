"""The network side of the Spark data source: nats-py calls, run on a private event loop.

Spark calls a data source synchronously, on the driver (planning) and in Python workers on
the executors (``read``/``write``). Each of those calls owns one :class:`Session`: a fresh
asyncio loop and one nats-py connection, created where the call runs and closed when it ends,
so nothing unpicklable crosses from driver to executor.

- Reading uses ``$JS.API.DIRECT.GET.<stream>`` batch requests (``{"seq": N, "batch": K,
  "next_by_subj": F}``), which natsd and nats-server answer with one message per reply and a
  ``204 EOB`` status at the end. Streams without ``allow_direct`` fall back to
  ``$JS.API.STREAM.MSG.GET`` one message at a time (correct, slower).
- Writing pipelines publishes with a bounded window of outstanding PubAcks, each checked
  (:class:`Publisher`), or, into a stream with ``allow_batched``, streams them as one
  fast-ingest batch per task (:class:`FastPublisher`, nats-server 2.14): the server answers
  every few hundred messages instead of every one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import nats
from nats.aio.client import Client, RawCredentials
from nats.aio.msg import Msg

from natsd_spark.options import ConnectOptions, Offset

__all__ = [
    "FastPublisher",
    "JetStreamError",
    "Publisher",
    "Session",
    "StoredMessage",
    "StreamInfo",
    "subject_matches",
]

T = TypeVar("T")

#: Headers the server adds to a direct-get reply; not part of the stored message.
DIRECT_HEADERS = frozenset({
    "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
    "Nats-Last-Sequence", "Nats-UpTo-Sequence",
})


class JetStreamError(RuntimeError):
    """The server refused a request (stream missing, bad publish, ...)."""


@dataclass(frozen=True)
class StreamInfo:
    name: str
    first_seq: int
    last_seq: int
    messages: int
    allow_direct: bool
    allow_batched: bool = False


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    subject: str
    data: bytes
    headers: dict[str, str] | None
    time: str


def subject_matches(filter_: str, subject: str) -> bool:
    """NATS wildcard match: ``*`` one token, ``>`` one or more trailing tokens."""
    ft = filter_.split(".")
    st = subject.split(".")
    for i, tok in enumerate(ft):
        if tok == ">":
            return len(st) > i
        if i >= len(st) or (tok != "*" and tok != st[i]):
            return False
    return len(ft) == len(st)


class Session:
    """One event loop and one connection, used synchronously (``run``)."""

    def __init__(self, conn: ConnectOptions) -> None:
        self.conn = conn
        self.loop = asyncio.new_event_loop()
        self.nc: Client | None = None

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    def __enter__(self) -> Session:
        try:
            self.nc = self.run(self._connect())
        except BaseException:
            self.loop.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.nc is not None and not self.nc.is_closed:
                self.run(self.nc.close())
        finally:
            self.loop.close()

    async def _connect(self) -> Client:
        c = self.conn
        kwargs: dict[str, Any] = {
            "servers": list(c.servers),
            "connect_timeout": c.timeout,
            "allow_reconnect": False,
            # nats-py reads 0 as "forever", also for the initial connect.
            "max_reconnect_attempts": 1,
            "reconnect_time_wait": 0.2,
        }
        if c.user is not None:
            kwargs["user"], kwargs["password"] = c.user, c.password
        if c.token is not None:
            kwargs["token"] = c.token
        if c.nkey_seed is not None:
            kwargs["nkeys_seed_str"] = c.nkey_seed
        if c.creds is not None:
            kwargs["user_credentials"] = RawCredentials(c.creds)
        tls = c.tls_context()
        if tls is not None:
            kwargs["tls"] = tls
            kwargs["tls_handshake_first"] = c.tls_first
        errors: list[str] = []

        async def _err(e: Exception) -> None:
            errors.append(str(e))

        kwargs["error_cb"] = _err
        try:
            return await asyncio.wait_for(nats.connect(**kwargs), timeout=c.timeout * 2)
        except (Exception, TimeoutError) as e:
            detail = "; ".join(dict.fromkeys(errors)) or repr(e)
            raise JetStreamError(
                f"jetstream: cannot connect to {', '.join(c.servers)}: {detail}"
            ) from e

    @property
    def client(self) -> Client:
        assert self.nc is not None, "Session used outside 'with'"
        return self.nc

    # ------------------------------------------------------------------ API requests
    async def api(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = json.dumps(body).encode() if body is not None else b""
        try:
            msg = await self.client.request(subject, payload, timeout=self.conn.timeout)
        except nats.errors.NoRespondersError:
            raise JetStreamError(
                f"jetstream: no responders on {subject} (is JetStream enabled?)"
            ) from None
        doc: dict[str, Any] = json.loads(msg.data)
        err = doc.get("error")
        if err:
            raise JetStreamError(
                f"jetstream: {subject}: {err.get('description')} (code {err.get('code')}, "
                f"err_code {err.get('err_code')})"
            )
        return doc

    def stream_info(self, stream: str) -> StreamInfo:
        doc = self.run(self.api(f"$JS.API.STREAM.INFO.{stream}"))
        st = doc.get("state", {})
        return StreamInfo(
            name=stream,
            first_seq=int(st.get("first_seq", 0)),
            last_seq=int(st.get("last_seq", 0)),
            messages=int(st.get("messages", 0)),
            allow_direct=bool(doc.get("config", {}).get("allow_direct", False)),
            allow_batched=bool(doc.get("config", {}).get("allow_batched", False)),
        )

    def seq_at_time(self, info: StreamInfo, when: str) -> int:
        """The first sequence stored at or after ``when``; last_seq + 1 if none."""
        if info.allow_direct:
            msg = self.run(self._direct_one({"start_time": when}, info.name))
            if msg is None:
                return info.last_seq + 1
            return int(msg.headers["Nats-Sequence"]) if msg.headers else info.last_seq + 1
        raise JetStreamError(
            f"jetstream: timestamp offsets need a stream with allow_direct; "
            f"stream {info.name!r} has it off"
        )

    def resolve(self, off: Offset, info: StreamInfo) -> int:
        """An offset as the next sequence to read."""
        if off.kind == "earliest":
            return max(info.first_seq, 1)
        if off.kind == "latest":
            return info.last_seq + 1
        if off.kind == "seq":
            return off.seq
        return self.seq_at_time(info, off.time)

    async def _direct_one(self, body: dict[str, Any], stream: str) -> Msg | None:
        subject = f"$JS.API.DIRECT.GET.{stream}"
        msg = await self.client.request(subject, json.dumps(body).encode(),
                                        timeout=self.conn.timeout)
        status = (msg.headers or {}).get("Status")
        if status == "404":
            return None
        if status:
            raise JetStreamError(f"jetstream: direct get on {stream}: status {status} "
                                 f"{(msg.headers or {}).get('Description', '')}")
        return msg

    async def _msg_get(self, stream: str, seq: int, next_by: str) -> StoredMessage | None:
        body: dict[str, Any] = {"seq": seq}
        if next_by:
            body["next_by_subj"] = next_by
        subject = f"$JS.API.STREAM.MSG.GET.{stream}"
        msg = await self.client.request(subject, json.dumps(body).encode(),
                                        timeout=self.conn.timeout)
        doc = json.loads(msg.data)
        if "error" in doc:
            if doc["error"].get("code") == 404:
                return None
            raise JetStreamError(f"jetstream: {subject}: {doc['error'].get('description')}")
        m = doc["message"]

        hdrs: dict[str, str] | None = None
        if m.get("hdrs"):
            hdrs = _parse_headers(base64.b64decode(m["hdrs"]))
        return StoredMessage(int(m["seq"]), m["subject"], base64.b64decode(m.get("data", "")),
                             hdrs, m["time"])

    # ------------------------------------------------------------------ range reads
    async def read_chunk(
        self, stream: str, cur: int, end: int, filter_: str, batch: int, direct: bool
    ) -> tuple[list[StoredMessage], int]:
        """Messages with ``cur <= seq < end`` (up to ``batch``); and the next ``cur``.

        The returned cursor equals ``end`` when the range is exhausted.
        """
        if cur >= end:
            return [], end
        if not direct:
            m = await self._msg_get(stream, cur, filter_ or ">")
            if m is None or m.seq >= end:
                return [], end
            return [m], m.seq + 1
        want = min(batch, end - cur)
        body: dict[str, Any] = {"seq": cur, "batch": want}
        if filter_:
            body["next_by_subj"] = filter_
        nc = self.client
        inbox = nc.new_inbox()
        got: list[Msg] = []
        end_status: asyncio.Future[tuple[str, str]] = self.loop.create_future()

        async def on_msg(msg: Msg) -> None:
            hdrs = msg.headers
            status = hdrs.get("Status") if hdrs else None
            if status:
                if not end_status.done():
                    end_status.set_result((status, hdrs.get("Description", "") if hdrs else ""))
            else:
                got.append(msg)

        # A callback collects the replies (cheaper than next_msg per message); the EOB (or
        # an error status) ends the batch.
        sub = await nc.subscribe(inbox, cb=on_msg)
        try:
            await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(body).encode(),
                             reply=inbox)
            try:
                status, desc = await asyncio.wait_for(end_status, timeout=self.conn.timeout)
            except TimeoutError:
                raise JetStreamError(
                    f"jetstream: direct get on {stream} timed out at seq {cur}") from None
        finally:
            await sub.unsubscribe()
        if status == "404":  # nothing at or after cur
            return [], end
        if status != "204":
            raise JetStreamError(
                f"jetstream: direct get on {stream}: status {status} {desc}".rstrip())
        out: list[StoredMessage] = []
        for msg in got:
            hdrs = msg.headers or {}
            seq = int(hdrs["Nats-Sequence"])
            if seq >= end:  # past our range: so is the rest of this batch
                return out, end
            user = {k: v for k, v in hdrs.items() if k not in DIRECT_HEADERS}
            out.append(StoredMessage(seq, hdrs["Nats-Subject"], msg.data, user or None,
                                     hdrs.get("Nats-Time-Stamp", "")))
        if not out:
            return out, end
        nxt = out[-1].seq + 1
        if len(out) < want and out[-1].seq >= end - 1:
            nxt = end
        return out, nxt


def _parse_headers(raw: bytes) -> dict[str, str] | None:
    text = raw.decode(errors="replace")
    lines = text.split("\r\n")[1:]
    out: dict[str, str] = {}
    for line in lines:
        if not line:
            continue
        k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out or None


class Publisher:
    """Pipelined publishes with at most ``window`` PubAcks outstanding; every ack checked.

    Acks come back on one wildcard inbox subscription; each publish has its own reply
    subject ``<inbox>.<n>``. The first failure (error ack, wrong stream, timeout) is raised.
    """

    def __init__(self, session: Session, window: int, stream: str | None) -> None:
        self.s = session
        self.window = window
        self.stream = stream
        self.published = 0
        self.duplicates = 0
        self._inflight: dict[str, tuple[str, asyncio.Future[None]]] = {}
        self._prefix = ""
        self._sub: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._error: BaseException | None = None

    async def start(self) -> None:
        nc = self.s.client
        self._prefix = nc.new_inbox()
        self._sub = await nc.subscribe(self._prefix + ".*", cb=self._on_ack)
        self._sem = asyncio.Semaphore(self.window)

    async def _on_ack(self, msg: Msg) -> None:
        entry = self._inflight.pop(msg.subject, None)
        if entry is None:
            return
        desc, fut = entry
        assert self._sem is not None
        self._sem.release()
        try:
            self._check(msg, desc)
            if not fut.done():
                fut.set_result(None)
        except JetStreamError as e:
            if self._error is None:
                self._error = e
            if not fut.done():
                fut.set_exception(e)

    def _check(self, msg: Msg, desc: str) -> None:
        status = (msg.headers or {}).get("Status")
        if status == "503":
            raise JetStreamError(f"jetstream: publish {desc}: no stream listens on the subject")
        try:
            doc = json.loads(msg.data)
        except ValueError:
            raise JetStreamError(f"jetstream: publish {desc}: bad ack {msg.data[:80]!r}") from None
        err = doc.get("error")
        if err:
            raise JetStreamError(
                f"jetstream: publish {desc} refused: {err.get('description')} "
                f"(err_code {err.get('err_code')})")
        if self.stream is not None and doc.get("stream") != self.stream:
            raise JetStreamError(
                f"jetstream: publish {desc} stored in stream {doc.get('stream')!r}, "
                f"expected {self.stream!r}")
        if doc.get("duplicate"):
            self.duplicates += 1

    async def publish(self, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        if self._error is not None:
            raise self._error
        assert self._sem is not None
        try:
            if self._sem.locked():
                await asyncio.wait_for(self._sem.acquire(), timeout=self.s.conn.timeout)
            else:
                # Does not suspend: publishes accumulate and go out in one write when the
                # window fills (or at finish), instead of one socket write per message.
                await self._sem.acquire()
        except TimeoutError:
            raise JetStreamError(
                f"jetstream: no publish ack within {self.s.conn.timeout}s "
                f"({len(self._inflight)} outstanding)") from None
        if self._error is not None:
            self._sem.release()
            raise self._error
        reply = f"{self._prefix}.{self.published}"
        fut: asyncio.Future[None] = self.s.loop.create_future()
        fut.add_done_callback(_consume)
        desc = f"to {subject!r}" + (
            f" (Nats-Msg-Id {headers['Nats-Msg-Id']})" if headers and "Nats-Msg-Id" in headers
            else "")
        self._inflight[reply] = (desc, fut)
        self.published += 1
        await self.s.client.publish(subject, data, reply=reply, headers=headers)

    async def publish_all(
        self, rows: Iterable[tuple[str, bytes, dict[str, str] | None]]
    ) -> None:
        for subject, data, headers in rows:
            await self.publish(subject, data, headers)

    async def finish(self) -> None:
        """Wait for every outstanding ack (timing out as a failure)."""
        await self.s.client.flush(timeout=int(max(1, self.s.conn.timeout)))
        futs = [f for _, f in self._inflight.values()]
        if futs:
            _done, pending = await asyncio.wait(futs, timeout=self.s.conn.timeout)
            if pending:
                raise JetStreamError(
                    f"jetstream: {len(pending)} publish acks not received within "
                    f"{self.s.conn.timeout}s")
        if self._error is not None:
            raise self._error
        if self._sub is not None:
            await self._sub.unsubscribe()


class FastPublisher:
    """One task's rows as fast-ingest batches (nats-server 2.14, a stream with
    ``allow_batched``): each message's reply subject says its batch and place
    (``<inbox>.<batch>.<flow>.fail.<n>.<op>.$FI``); the server answers with a flow ack every
    ``msgs`` messages stored (on a file stream, after the fsync that covers them), and the
    publisher keeps at most ``window`` messages (at least ``2 * FLOW``) beyond the last one:
    as with PubAcks, a durable server's flow acks wait for an fsync, and a window of a few
    flows would idle the connection during each. The batch ends with an empty commit
    message and its PubAck, whose count must be every message sent.

    Exactly once as :class:`Publisher`: every message has its ``Nats-Msg-Id`` and the server
    skips the ones it has already stored, so a retried task stores nothing twice; a gap or
    an error (``fail`` mode ends the batch) fails the task. The server does not say how many
    messages it skipped as duplicates: ``duplicates`` stays None. A batch idle for
    ``IDLE`` seconds is committed and the next message starts a new one (the server drops a
    batch after 10 s without messages).
    """

    FLOW = 500  # the most messages between flow acks we ask for (the server's own maximum)
    IDLE = 4.0

    def __init__(self, session: Session, stream: str, window: int = 2 * FLOW) -> None:
        self.s = session
        self.stream = stream
        self._window = max(window, 2 * self.FLOW)
        self.published = 0
        self.duplicates: int | None = None
        self._prefix = ""
        self._sub: Any = None
        self._bid = ""
        self._seq = 0  # batch sequence of the last message sent
        self._acked = 0  # batch sequence of the last flow ack
        self._subject = ""  # where the commit goes (a subject of the stream)
        self._last = 0.0
        self._final: dict[str, Any] | None = None
        self._error: BaseException | None = None
        self._news = asyncio.Event()

    async def start(self) -> None:
        nc = self.s.client
        self._prefix = nc.new_inbox()
        self._sub = await nc.subscribe(self._prefix + ".>", cb=self._on_answer)

    def _fail(self, text: str) -> None:
        if self._error is None:
            self._error = JetStreamError(f"jetstream: fast batch {self._bid}: {text}")

    async def _on_answer(self, msg: Msg) -> None:
        # <prefix>.<batch>.<flow>.fail.<n>.<op>.$FI: answers of an earlier batch are stale
        tokens = msg.subject.split(".")
        if len(tokens) < 8 or tokens[-6] != self._bid:
            return
        self._news.set()
        if (msg.headers or {}).get("Status") == "503":
            self._fail("no stream listens on the subject")
            return
        try:
            doc = json.loads(msg.data)
        except ValueError:
            self._fail(f"bad answer {msg.data[:80]!r}")
            return
        kind = doc.get("type")
        if kind == "ack":
            self._acked = max(self._acked, int(doc.get("seq", 0)))
        elif kind == "gap":
            self._fail(f"messages {doc.get('last_seq')} to {doc.get('seq')} were lost")
        elif kind == "err" or "error" in doc:
            err = doc.get("error") or {}
            self._fail(
                f"refused at message {doc.get('seq', self._seq)}: {err.get('description')} "
                f"(err_code {err.get('err_code')})")
        elif "count" in doc:
            self._final = doc

    async def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.s.conn.timeout
        await self.s.client.flush(timeout=int(max(1, self.s.conn.timeout)))
        while not done() and self._error is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise JetStreamError(
                    f"jetstream: fast batch {self._bid}: no {what} within "
                    f"{self.s.conn.timeout}s ({self._seq} sent, {self._acked} acknowledged)")
            self._news.clear()
            try:
                await asyncio.wait_for(self._news.wait(), left)
            except TimeoutError:
                pass

    async def publish(self, subject: str, data: bytes, headers: dict[str, str] | None) -> None:
        if self._error is not None:
            raise self._error
        now = time.monotonic()
        if self._seq and now - self._last > self.IDLE:
            await self._commit()
        self._last = now
        if not self._seq:
            self._bid = uuid.uuid4().hex
            self._acked = 0
            self._final = None
        if self._seq + 1 - self._acked > self._window:
            await self._wait(lambda: self._seq + 1 - self._acked <= self._window, "flow ack")
            if self._error is not None:
                raise self._error
        self._seq += 1
        op = 0 if self._seq == 1 else 1
        reply = f"{self._prefix}.{self._bid}.{self.FLOW}.fail.{self._seq}.{op}.$FI"
        self._subject = subject
        self.published += 1
        await self.s.client.publish(subject, data, reply=reply, headers=headers)

    async def _commit(self) -> None:
        """End the open batch (an empty message that commits without being stored) and
        check its PubAck."""
        if not self._seq:
            return
        sent = self._seq
        reply = f"{self._prefix}.{self._bid}.{self.FLOW}.fail.{sent + 1}.3.$FI"
        await self.s.client.publish(self._subject, b"", reply=reply)
        await self._wait(lambda: self._final is not None, "PubAck")
        if self._error is not None:
            raise self._error
        final = self._final or {}
        if final.get("stream") != self.stream:
            raise JetStreamError(
                f"jetstream: fast batch {self._bid} stored in stream {final.get('stream')!r}, "
                f"expected {self.stream!r}")
        if int(final.get("count", -1)) != sent:
            raise JetStreamError(
                f"jetstream: fast batch {self._bid}: {sent} messages sent, the server "
                f"committed {final.get('count')}")
        self._seq = 0

    async def finish(self) -> None:
        await self._commit()
        if self._sub is not None:
            await self._sub.unsubscribe()


def _consume(fut: asyncio.Future[None]) -> None:
    # Errors are reported through Publisher._error; avoid "exception never retrieved".
    if not fut.cancelled():
        fut.exception()


def run_sync(session: Session, fn: Callable[[], Awaitable[T]]) -> T:
    return session.run(fn())
