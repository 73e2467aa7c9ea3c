"""A natsd server on its own thread and event loop, for any test suite (sync or async).

``ThreadedServer`` builds the same ``natsd.Server`` the ``natsd`` command runs, in process, on
a loop of its own: code under test that blocks (a synchronous client, ``time.sleep``) does
not stall it, and an asyncio test talks to it over loopback like any client.

- Options are ``natsd.Server``'s (``jetstream=True``, ``store_dir=...``, ``port=...``), or a
  configuration file's text (``config="jetstream { store_dir: /tmp/x }"``), or both (the
  keywords win). The client port is a free one unless one is given.
- Time: the server's JetStream runs on a :class:`~natsd.testing.clock.TestClock`;
  :meth:`ThreadedServer.advance` moves it forward.
- Faults: with ``faults=True`` JetStream's files go through a
  :class:`~natsd.testing.faults.FaultyDisk` (``srv.disk``): a full disk, failing fsyncs,
  and :meth:`ThreadedServer.power_loss`, which restarts the server on what a power cut
  would have left on disk.

Ownership: the server and its loop belong to the thread; the test's thread reaches them only
through :meth:`ThreadedServer.call` (and what is built on it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from natsd.config.apply import apply_config
from natsd.config.options import ServerOptions
from natsd.config.parse import parse
from natsd.server import Server
from natsd.storage.fileio import DEFAULT_IO, FileIO
from natsd.testing.clock import TestClock
from natsd.testing.faults import Crash, FaultyDisk

__all__ = ["ThreadedCluster", "ThreadedServer", "cluster"]

T = TypeVar("T")

START_TIMEOUT = 30.0


class ThreadedServer:
    """A natsd server running on a thread of its own. Use it as a context manager, or call
    :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        config: str | None = None,
        *,
        faults: bool = False,
        **options: Any,
    ) -> None:
        opts = ServerOptions()
        if config is not None:
            opts.port = 0
            apply_config(opts, parse(config))
        elif "port" not in options:
            opts.port = 0
        self.options = opts
        self.overrides = dict(options)
        self.clock = TestClock()
        self.disk: FaultyDisk | None = None
        if faults:
            store_dir = self._store_dir()
            if store_dir is None:
                raise ValueError("faults=True needs JetStream with a store_dir")
            self.disk = FaultyDisk(store_dir)
        self.server: Server | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0

    def _store_dir(self) -> str | None:
        js = self.overrides.get("jetstream", self.options.jetstream)
        if not js:
            return None
        d = self.overrides.get("store_dir") or self.options.js.store_dir
        return str(d) if d else None

    # ---------------------------------------------------------------- lifecycle
    def start(self, timeout: float = START_TIMEOUT) -> ThreadedServer:
        """Start the server; returns once it accepts clients (or raises why it did not)."""
        if self._thread is not None:
            raise RuntimeError("already started")
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="natsd-test-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"natsd did not start within {timeout} s")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down as ``natsd`` does on SIGTERM (clients closed, stores synced)."""
        t = self._thread
        if t is None:
            return
        loop, stop = self.loop, self._stop
        if loop is not None and stop is not None and t.is_alive():
            loop.call_soon_threadsafe(stop.set)
        t.join(timeout)
        self._thread = None

    def restart(self, timeout: float = START_TIMEOUT) -> ThreadedServer:
        """Stop, then start again on the same port and store."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._main())
        except Crash:
            # The power went out under a task. Nothing more reaches the disk (every
            # operation raises Crash), so closing the connections is all a shutdown does.
            srv = self.server
            if srv is not None:
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(asyncio.wait_for(srv.shutdown(), 5))
        finally:
            self._ready.set()
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        io: FileIO = self.disk if self.disk is not None else DEFAULT_IO
        try:
            srv = Server(
                self.options, file_io=io, clock=self.clock, scheduler=self.clock,
                **self.overrides,
            )  # fmt: skip
            await srv.start()
        except BaseException as e:
            self._error = e
            return
        self.server = srv
        self.port = srv.port
        # a restart (power loss included) comes back on the same port
        self.overrides["port"] = srv.port
        self._ready.set()
        await self._stop.wait()
        try:
            await asyncio.wait_for(srv.shutdown(), 10)
        except BaseException:
            if self.disk is None or not self.disk.crashed:
                raise  # after a power cut the disk refuses everything: expected

    # ---------------------------------------------------------------- the test's side
    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 10.0) -> T:
        """Run ``fn(*args)`` on the server's loop and return its result."""
        loop = self.loop
        if loop is None or not self.running:
            raise RuntimeError("the server is not running")
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn(*args))
            except BaseException as e:
                fut.set_exception(e)

        loop.call_soon_threadsafe(run)
        return fut.result(timeout)

    def advance(self, seconds: float) -> int:
        """Move the server's JetStream time ``seconds`` forward, running every timer that
        falls due (ack waits, backoff, TTLs, duplicate windows, inactive thresholds);
        returns how many ran. Redeliveries and expiries it causes are sent as it returns
        (give the client a moment to read them)."""
        return self.call(self.clock.advance, seconds)

    def power_loss(self, torn: bool = True, seed: int | None = None) -> ThreadedServer:
        """Cut the power: the server stops where it is (nothing is synced or shut down), its
        store is replaced by what the disk would hold after the cut (only what was synced;
        with ``torn``, some unsynced writes too, the last possibly cut short), and the
        server starts again on it, same port. Needs ``faults=True``."""
        disk = self.disk
        if disk is None:
            raise RuntimeError("power_loss needs ThreadedServer(faults=True)")
        disk.cut_power()
        self.stop()
        root = Path(disk.root)
        scratch = Path(tempfile.mkdtemp(prefix="natsd-power-loss-"))
        try:
            image = scratch / "image"
            disk.materialize(image, random.Random(seed), torn)
            shutil.rmtree(root)
            shutil.copytree(image, root)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self.disk = FaultyDisk(root)
        return self.start()


def _free_ports(n: int) -> list[int]:
    """``n`` ports free on loopback right now (bound then released: a route port must be
    known before the servers that dial it start)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class ThreadedCluster:
    """Servers joined by routes (every one names all of them), JetStream clustered, each
    on its own thread. ``servers[i]`` is a :class:`ThreadedServer` named ``n<i+1>``."""

    def __init__(self, size: int, store_root: str | Path, name: str = "natsd-test") -> None:
        ports = _free_ports(size)
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in ports)
        root = Path(store_root)
        self.servers = [
            ThreadedServer(
                f"""
                server_name: n{i + 1}
                jetstream {{ store_dir: "{root / f"n{i + 1}"}" }}
                cluster {{ name: {name}, listen: "127.0.0.1:{port}", routes: [{routes}] }}
                """
            )
            for i, port in enumerate(ports)
        ]

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def start(self, timeout: float = START_TIMEOUT) -> ThreadedCluster:
        """Start every server; returns once the JetStream meta group has a leader that
        every server knows."""
        try:
            for s in self.servers:
                s.start()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(s.running and s.call(_js_current, s.server) for s in self.servers):
                return
            time.sleep(0.05)
        raise TimeoutError(f"no JetStream meta leader known to every server in {timeout} s")

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    def __enter__(self) -> ThreadedCluster:
        return self.start()

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _js_current(srv: Server | None) -> bool:
    jsc = srv.js_cluster if srv is not None else None
    return jsc is not None and not jsc.health()


def cluster(size: int, store_root: str | Path) -> ThreadedCluster:
    """``size`` servers joined by routes with JetStream clustered (not started)."""
    return ThreadedCluster(size, store_root)
