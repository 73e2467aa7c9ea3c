"""A natsd JetStream cluster as real processes on loopback, with every route through a proxy
the test controls (issue 19's fault suite).

Each ordered pair of servers (a dials b) has its own :class:`Link`: a TCP proxy in the test
process in front of b's cluster port, listed in a's ``cluster.routes``. Cutting or
black-holing the two links of a pair partitions those two servers and nothing else; holding
what one server sends another (``hold_toward``) delays those bytes, in order, until they are
released.

Route gossip would route around the proxies (a server that accepts a route tells its other
peers the dialer's address, and they dial it directly), so every server advertises a dead
port: a gossiped dial fails ``connect_retries`` times and gives up. All routes are explicit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from embedded_cluster import spawn_natsd
from ports import free_ports


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


class Proc:
    """One ``python -m natsd -c nX.conf`` server (compiled when the test runs compiled)."""

    def __init__(self, name: str, tmp: Path, port: int, http: int) -> None:
        self.name = name
        self.port = port
        self.http = http
        self.conf = tmp / f"{name}.conf"
        self.log_path = tmp / f"{name}.log"
        self.store_dir = tmp / name
        self.proc: subprocess.Popen[bytes] | None = None
        self.stopped_by_signal = False

    def configure(self, cport: int, dead_port: int, routes: list[int], extra: str = "") -> None:
        """``extra``: more of ``cluster {}`` (a ``tls {}`` block)."""
        urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        self.conf.write_text(
            f"server_name: {self.name}\nport: {self.port}\nhost: 127.0.0.1\n"
            f"http_port: {self.http}\n"
            f"jetstream {{ store_dir: {json.dumps(str(self.store_dir))} }}\n"
            f"cluster {{ name: fc, listen: 127.0.0.1:{cport}, "
            f'advertise: "127.0.0.1:{dead_port}", connect_retries: 1, routes: [{urls}]\n'
            f"{extra}}}\n"
        )

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.proc = spawn_natsd(self.conf, self.log_path)
        self.stopped_by_signal = False

    def kill9(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def sigstop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped_by_signal = True

    def sigcont(self) -> None:
        if self.proc is not None and self.stopped_by_signal:
            self.proc.send_signal(signal.SIGCONT)
        self.stopped_by_signal = False

    def stop(self) -> None:
        """A graceful stop (SIGTERM): the server syncs and closes its stores."""
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill9()

    def get(self, path: str, timeout: float = 1.0) -> dict[str, Any] | None:
        try:
            url = f"http://127.0.0.1:{self.http}{path}"
            with urllib.request.urlopen(url, timeout=timeout) as r:
                out: dict[str, Any] = json.loads(r.read())
                return out
        except (OSError, ValueError):
            return None

    def stream_state(self, stream: str) -> dict[str, Any] | None:
        """This server's replica of ``stream``, from ``/jsz`` (None when unreachable)."""
        doc = self.get("/jsz?accounts=true&streams=true")
        if doc is None:
            return None
        for acc in doc.get("account_details") or []:
            for sd in acc.get("stream_detail") or []:
                if sd["name"] == stream:
                    state: dict[str, Any] = sd["state"]
                    return state
        return {}

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class FaultCluster:
    """``n`` servers, fully meshed through :class:`Link` proxies (TCP: TLS routes pass
    through them end to end). ``cluster_extra`` goes into every ``cluster {}``."""

    def __init__(self, tmp: Path, n: int, cluster_extra: str = "") -> None:
        self.names = [f"n{i + 1}" for i in range(n)]
        # client, monitor, cluster port per server, one proxy port per ordered pair, a dead port
        ports = free_ports(3 * n + n * (n - 1) + 1)
        self.dead_port = ports.pop()
        self.procs = {nm: Proc(nm, tmp, ports[i], ports[n + i]) for i, nm in enumerate(self.names)}
        cports = {nm: ports[2 * n + i] for i, nm in enumerate(self.names)}
        rest = iter(ports[3 * n :])
        self.links: dict[tuple[str, str], Link] = {}
        self._link_ports: dict[tuple[str, str], int] = {}
        for a in self.names:
            for b in self.names:
                if a != b:
                    self.links[(a, b)] = Link(cports[b])
                    self._link_ports[(a, b)] = next(rest)
        for a in self.names:
            routes = [self._link_ports[(a, b)] for b in self.names if b != a]
            self.procs[a].configure(cports[a], self.dead_port, routes, cluster_extra)

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.procs.values()]

    async def start(self) -> None:
        for key, link in self.links.items():
            await link.start(self._link_ports[key])
        for p in self.procs.values():
            p.start()

    async def close(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in self.procs.values()))
        for link in self.links.values():
            await link.close()

    # -- partitions ------------------------------------------------------------------------
    def partition(self, side: set[str], mode: str) -> None:
        """Cut every link between ``side`` and the other servers (``mode``: cut|blackhole)."""
        for (a, b), link in self.links.items():
            if (a in side) != (b in side):
                link.cut() if mode == "cut" else link.blackhole()

    def heal_links(self) -> None:
        for link in self.links.values():
            link.heal()

    def hold_toward(self, dest: str, sources: list[str]) -> None:
        """Hold back every byte ``sources`` send ``dest`` on their routes (what ``dest``
        sends them still flows), until ``release_held`` or ``heal_links``."""
        for src in sources:
            self.links[(dest, src)].hold(Link.TO_DIALER)
            self.links[(src, dest)].hold(Link.TO_TARGET)

    def held(self) -> dict[tuple[str, str], dict[asyncio.StreamWriter, int]]:
        """What every link holds now: a mark for ``release_held``."""
        return {key: link.held() for key, link in self.links.items()}

    def release_held(self, mark: dict[tuple[str, str], dict[asyncio.StreamWriter, int]]) -> None:
        """Forward what was held when ``held()`` made ``mark``; the rest stays held."""
        for key, upto in mark.items():
            self.links[key].release(upto)

    def set_pair(self, a: str, b: str, up: bool, mode: str = "cut") -> None:
        for key in ((a, b), (b, a)):
            link = self.links[key]
            if up:
                link.heal()
            elif mode == "cut":
                link.cut()
            else:
                link.blackhole()

    # -- views -----------------------------------------------------------------------------
    async def meta_leader(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = set()
            for p in self.procs.values():
                doc = await asyncio.to_thread(p.get, "/jsz")
                seen.add(str((doc or {}).get("meta_cluster", {}).get("leader", "")))
            if len(seen) == 1 and "" not in seen:
                return seen.pop()
            await asyncio.sleep(0.1)
        raise AssertionError(f"no agreed meta leader:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{p.log_tail()}" for n, p in self.procs.items())
