"""A small NATS client for the simulation: the client protocol over a ``sim.net`` pipe.

Real clients (nats-py, nats.js) open real sockets and so cannot join a simulated network;
this one speaks the same protocol (CONNECT, SUB, PUB/HPUB, PING/PONG; MSG/HMSG, INFO, -ERR)
and offers the one thing the scenarios need: a request with headers and a timeout. It does
not reconnect: a scenario opens a new client when its server goes away.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

__all__ = ["NoResponders", "SimClient"]

_CONNECT = (
    b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
    b'"protocol":1,"lang":"sim","version":"0"}\r\n'
)


class NoResponders(Exception):
    """The server said no one listens on the subject (a 503 status)."""


class SimClient(asyncio.Protocol):
    def __init__(self, name: str) -> None:
        self.name = name
        self.transport: Any = None
        self.buf = b""
        self.closed = False
        self.connected = asyncio.get_running_loop().create_future()
        self._ids = itertools.count(1)
        self._waiting: dict[bytes, asyncio.Future[tuple[bytes, bytes]]] = {}
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
                self._on_msg(parts[1], body[:hlen], body[hlen:])
                continue
            self.buf = self.buf[end + 2 :]
            if line == b"PING":
                self.transport.write(b"PONG\r\n")
            elif line == b"PONG":
                if not self.connected.done():
                    self.connected.set_result(None)
            elif line.startswith(b"-ERR"):
                self.errors.append(line)

    def _on_msg(self, subject: bytes, hdr: bytes, payload: bytes) -> None:
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

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
