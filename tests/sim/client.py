"""A small NATS client for the simulation: the client protocol over a ``sim.net`` pipe.

Real clients (nats-py, nats.js) open real sockets and so cannot join a simulated network;
this one speaks the same protocol (CONNECT, SUB, PUB/HPUB, PING/PONG; MSG/HMSG, INFO, -ERR)
and offers what the scenarios need: a request with headers and a timeout, and a pull
(a request answered by several messages on its own inbox, each with its reply subject). It
does not reconnect: a scenario opens a new client when its server goes away.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Delivery", "NoResponders", "SimClient"]

_CONNECT = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
    b'"protocol":1,"lang":"sim","version":"0"}\r\n'
)


class NoResponders(Exception):
    """The server said no one listens on the subject (a 503 status)."""


@dataclass(frozen=True)
class Delivery:
    """One message that answered a pull: its reply subject (empty for a status such as
    ``408 Request Timeout``), headers and payload."""

    reply: str
    hdr: bytes
    data: bytes


class SimClient(asyncio.Protocol):
    def __init__(self, name: str) -> None:
        self.name = name
        self.transport: Any = None
        self.buf = b""
        self.closed = False
        self.connected = asyncio.get_running_loop().create_future()
        self._ids = itertools.count(1)
        self._waiting: dict[bytes, asyncio.Future[tuple[bytes, bytes]]] = {}
        # subscriptions of their own (pulls, answered by several messages): sid -> what
        # takes each
        self._streams: dict[bytes, Callable[[Delivery | None], None]] = {}
        self._pulls = b"_PULL." + name.encode() + b"."
        self._inbox = b"_INBOX." + name.encode() + b"."
        self.errors: list[bytes] = []

    # ---------------------------------------------------------------- asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(_CONNECT + b"SUB " + self._inbox + b"* 1\r\nPING\r\n")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.connected.done():
            self.connected.set_exception(ConnectionError("closed before PONG"))
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection lost: {exc}"))
        self._waiting.clear()
        for take in list(self._streams.values()):
            take(None)
        self._streams.clear()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n")
            if end < 0:
                return
            line = self.buf[:end]
            if line.startswith((b"MSG ", b"HMSG ")):
                parts = line.split(b" ")
                size = int(parts[-1])
                hlen = int(parts[-2]) if parts[0] == b"HMSG" else 0
                start = end + 2
                if len(self.buf) < start + size + 2:
                    return
                body = self.buf[start : start + size]
                self.buf = self.buf[start + size + 2 :]
                # MSG <subject> <sid> [reply] <size>; HMSG <subject> <sid> [reply] <hdr> <size>
                with_reply = 6 if parts[0] == b"HMSG" else 5
                reply = parts[3] if len(parts) == with_reply else b""
                self._on_msg(parts[1], parts[2], reply, body[:hlen], body[hlen:])
                continue
            self.buf = self.buf[end + 2 :]
            if line == b"PING":
                self.transport.write(b"PONG\r\n")
            elif line == b"PONG":
                if not self.connected.done():
                    self.connected.set_result(None)
            elif line.startswith(b"-ERR"):
                self.errors.append(line)

    def _on_msg(self, subject: bytes, sid: bytes, reply: bytes, hdr: bytes, payload: bytes) -> None:
        take = self._streams.get(sid)
        if take is not None:
            take(Delivery(reply.decode(), hdr, payload))
            return
        fut = self._waiting.pop(subject, None)
        if fut is None or fut.done():
            return
        if hdr.startswith(b"NATS/1.0 503"):
            fut.set_exception(NoResponders(subject.decode()))
        else:
            fut.set_result((hdr, payload))

    # ---------------------------------------------------------------- the scenarios' side
    async def request(
        self,
        subject: str,
        payload: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 2.0,
    ) -> bytes:
        """The reply's payload. Raises ``TimeoutError``, ``NoResponders`` or
        ``ConnectionError``."""
        if self.closed:
            raise ConnectionError("closed")
        inbox = self._inbox + str(next(self._ids)).encode()
        fut: asyncio.Future[tuple[bytes, bytes]] = asyncio.get_running_loop().create_future()
        self._waiting[inbox] = fut
        subj = subject.encode()
        if headers:
            hdr = (
                b"NATS/1.0\r\n"
                + b"".join(k.encode() + b": " + v.encode() + b"\r\n" for k, v in headers.items())
                + b"\r\n"
            )
            head = b"HPUB %s %s %d %d\r\n" % (subj, inbox, len(hdr), len(hdr) + len(payload))
            self.transport.write(head + hdr + payload + b"\r\n")
        else:
            head = b"PUB %s %s %d\r\n" % (subj, inbox, len(payload))
            self.transport.write(head + payload + b"\r\n")
        try:
            _hdr, data = await asyncio.wait_for(fut, timeout)
        finally:
            self._waiting.pop(inbox, None)
        return data

    async def requests(
        self, batch: list[tuple[str, bytes]], timeout: float
    ) -> list[bytes | Exception]:
        """Several requests without headers written at once (as a client's flusher
        writes what piled up in one go): each one's reply payload, or the ``TimeoutError``,
        ``NoResponders`` or ``ConnectionError`` it got instead."""
        if self.closed:
            return [ConnectionError("closed") for _ in batch]
        loop = asyncio.get_running_loop()
        futs: list[tuple[bytes, asyncio.Future[tuple[bytes, bytes]]]] = []
        out = []
        for subject, payload in batch:
            inbox = self._inbox + str(next(self._ids)).encode()
            fut: asyncio.Future[tuple[bytes, bytes]] = loop.create_future()
            self._waiting[inbox] = fut
            futs.append((inbox, fut))
            out.append(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), inbox, len(payload), payload))
        self.transport.write(b"".join(out))
        results: list[bytes | Exception] = []
        end = loop.time() + timeout
        for inbox, fut in futs:
            try:
                _hdr, data = await asyncio.wait_for(fut, max(0.0, end - loop.time()))
                results.append(data)
            except (TimeoutError, NoResponders, ConnectionError) as e:
                results.append(e)
            finally:
                self._waiting.pop(inbox, None)
        return results

    async def pull(
        self, subject: str, payload: bytes, batch: int, timeout: float
    ) -> list[Delivery]:
        """Publish ``payload`` to ``subject`` with a fresh inbox as its reply, subscribed
        for this request alone (the messages that answer a pull keep their own subjects:
        the subscription tells them apart), and collect what comes there: up to ``batch``
        messages with a reply subject, ending early at a status (a message without one,
        which is included) or once ``timeout`` has passed since the request. Raises
        ``ConnectionError`` when the connection is lost first (what came by then is lost
        with it)."""
        if self.closed:
            raise ConnectionError("closed")
        sid = b"%d" % (next(self._ids) + 1)  # (sid 1 is the requests' inbox)
        inbox = self._pulls + sid
        got: list[Delivery] = []
        msgs = 0
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def take(d: Delivery | None) -> None:
            nonlocal msgs
            if done.done():
                return
            if d is None:
                done.set_exception(ConnectionError("connection lost"))
                return
            got.append(d)
            msgs += bool(d.reply)
            if not d.reply or msgs >= batch:
                done.set_result(True)

        self._streams[sid] = take
        sub = b"SUB %s %s\r\n" % (inbox, sid)
        pub = b"PUB %s %s %d\r\n" % (subject.encode(), inbox, len(payload))
        self.transport.write(sub + pub + payload + b"\r\n")
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            pass
        finally:
            self._streams.pop(sid, None)
            if not self.closed:
                self.transport.write(b"UNSUB %s\r\n" % sid)
        if done.done() and not done.cancelled() and done.exception() is not None:
            raise ConnectionError("connection lost")
        return got

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
