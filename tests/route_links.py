"""Routes through a proxy the test controls: :class:`Link`, one dialing direction between two
servers of a :class:`proc_cluster.ProcCluster` made with ``proxied=True`` (the fault suite).

Each ordered pair of servers (a dials b) has its own Link: a TCP proxy in the test process in
front of b's cluster port, listed in a's ``cluster.routes``. Cutting or black-holing the two
links of a pair partitions those two servers and nothing else; holding what one server sends
another delays those bytes, in order, until they are released.
"""

from __future__ import annotations

import asyncio
import contextlib


class Link:
    """One dialing direction between two servers: a proxy to the target's route port.

    ``cut()`` aborts every connection and refuses new ones (as a peer that is gone);
    ``blackhole()`` keeps the connections but drops every byte (as a silent network), and the
    connections are aborted when the link heals, since their byte streams have holes.
    ``hold(direction)`` keeps back the bytes going one way (``TO_TARGET``: what the dialer
    sends; ``TO_DIALER``: what the target answers) as a slow network would, in order, until
    ``release`` forwards them (all, or the first chunks a ``held()`` count names) or the link
    heals."""

    TO_TARGET = "to_target"
    TO_DIALER = "to_dialer"

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.state = "open"  # open | cut | blackhole
        self.holding: set[str] = set()  # TO_TARGET, TO_DIALER
        self._held: dict[asyncio.StreamWriter, list[bytes]] = {}
        self._server: asyncio.Server | None = None
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = port

    async def _accept(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if self.state != "open":
            w.transport.abort()
            return
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            w.transport.abort()
            return
        pair = (w, uw)
        self._conns.add(pair)
        try:
            await asyncio.gather(
                self._pipe(r, uw, self.TO_TARGET), self._pipe(ur, w, self.TO_DIALER)
            )
        finally:
            self._conns.discard(pair)
            w.transport.abort()
            uw.transport.abort()

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, way: str) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await r.read(1 << 16):
                if self.state != "open":
                    continue
                if way in self.holding or self._held.get(w):
                    self._held.setdefault(w, []).append(data)  # (after what waits already)
                    continue
                w.write(data)
                await w.drain()
        w.transport.abort()

    def _abort_all(self) -> None:
        self._held.clear()
        for a, b in list(self._conns):
            a.transport.abort()
            b.transport.abort()

    def hold(self, way: str) -> None:
        self.holding.add(way)

    def held(self) -> dict[asyncio.StreamWriter, int]:
        """How many chunks wait, per connection: a mark for ``release``."""
        return {w: len(q) for w, q in self._held.items()}

    def release(self, upto: dict[asyncio.StreamWriter, int] | None = None) -> None:
        """Forward what is held: everything, or (``upto``) the chunks that were held when
        ``held()`` counted them, the rest still held."""
        for w, q in list(self._held.items()):
            n = len(q) if upto is None else upto.get(w, 0)
            for data in q[:n]:
                w.write(data)
            del q[:n]
            if not q:
                del self._held[w]

    def cut(self) -> None:
        self.state = "cut"
        self._abort_all()

    def blackhole(self) -> None:
        self.state = "blackhole"

    def heal(self) -> None:
        if self.state == "blackhole":
            self._abort_all()
        self.state = "open"
        self.holding.clear()
        self.release()

    async def close(self) -> None:
        self._abort_all()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
