"""Where route connections come from: the cluster listener and outgoing dials.

The mesh (cluster/mesh.py) never calls the event loop's socket API itself; it is handed a
``RouteNet``. The server gives it ``AsyncioRouteNet`` (asyncio's ``create_server`` and
``create_connection``); the start-up ordering tests give it a network they drive by hand,
where every accept, delivery and close is a step they choose (tests/unit/route_sim.py).

Ownership: the event loop owns the listener and every dial in flight; a dial reports once,
through its ``done`` callback, unless it was cancelled first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol, cast

from natsd.connection.route import RouteConnection
from natsd.core.scheduler import Cancellable

__all__ = ["AsyncioRouteNet", "DialDone", "Listener", "RouteNet"]

# A dial's outcome: the connection (after its connection_made), or None and why not.
DialDone = Callable[[RouteConnection | None, str], None]


class Listener(Protocol):
    def close(self) -> None: ...


class RouteNet(Protocol):
    async def listen(
        self, host: str, port: int, factory: Callable[[], RouteConnection]
    ) -> tuple[Listener, int]:
        """Listen on ``host:port`` (port 0: any); every accepted connection is made by
        ``factory``. Returns the listener and the port it took."""

    def dial(
        self,
        host: str,
        port: int,
        factory: Callable[[], RouteConnection],
        timeout: float,
        done: DialDone,
    ) -> Cancellable:
        """Connect to ``host:port`` with a connection made by ``factory``; ``done`` hears
        the outcome once. Cancelling it means ``done`` is never called."""

    async def wait_closed(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for the closed listener to let go of its port."""


class _Dial:
    """A dial in flight, as a Cancellable (a task's cancel returns a bool)."""

    __slots__ = ("task",)

    def __init__(self, task: asyncio.Task[None]) -> None:
        self.task = task

    def cancel(self) -> None:
        self.task.cancel()


class AsyncioRouteNet:
    """The real network: the running event loop's TCP listener and connections."""

    def __init__(self) -> None:
        self._servers: list[asyncio.Server] = []

    async def listen(
        self, host: str, port: int, factory: Callable[[], RouteConnection]
    ) -> tuple[Listener, int]:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            # RouteConnection implements asyncio.Protocol by duck typing.
            cast("Callable[[], asyncio.Protocol]", factory),
            host=host or None,
            port=port,
            reuse_address=True,
        )
        self._servers.append(server)
        return server, int(server.sockets[0].getsockname()[1])

    def dial(
        self,
        host: str,
        port: int,
        factory: Callable[[], RouteConnection],
        timeout: float,
        done: DialDone,
    ) -> Cancellable:
        task = asyncio.get_running_loop().create_task(
            self._dial(host, port, factory, timeout, done)
        )
        return _Dial(task)

    async def _dial(
        self,
        host: str,
        port: int,
        factory: Callable[[], RouteConnection],
        timeout: float,
        done: DialDone,
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(cast("Callable[[], asyncio.Protocol]", factory), host, port),
                timeout,
            )
        except (OSError, TimeoutError) as e:
            done(None, str(e) or type(e).__name__)
            return
        done(cast(RouteConnection, proto), "")

    async def wait_closed(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for the listeners closed by ``close`` to let go."""
        for s in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(s.wait_closed(), timeout)
