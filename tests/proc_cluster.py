"""Clusters of server processes on loopback: the suite's one harness for them (the in-process
one is ``embedded_cluster.EmbeddedJsCluster``).

:class:`ProcCluster` writes one config file per server and starts each as a process: natsd
(``python -m natsd``, compiled when the test runs compiled) or nats-server, or a mix. The
ports and store directory sit in the config, not on the command line, so a server restarted
comes back on the same ports with the same files, as an operator restarting a machine would.
What a test may choose:

* ``kinds``: "natsd" or "nats-server" for every server, or one kind per server;
* ``jetstream``: which servers run JetStream (all by default); every server routes to every
  JetStream server, a server without JetStream to every server;
* ``auth``: accounts ``A`` (JetStream, user ``a``/``a``) and, with ``system_account``, ``SYS``
  (user ``sys``/``sys``) instead of the global account;
* ``tags`` (per server), ``extra`` (appended to each config), ``cluster_extra`` (inside each
  ``cluster {}``, a ``tls {}`` block for example), ``cluster_name`` ("": none, so that the
  servers must agree on one they make up);
* ``proxied``: every route goes through a :class:`route_links.Link` the test controls
  (partitions, black holes, held bytes). Route gossip would route around the proxies (a
  server that accepts a route tells its other peers the dialer's address, and they dial it
  directly), so every server then advertises a dead port: a gossiped dial fails
  ``connect_retries`` times and gives up, and all routes stay explicit.

Signals, by one name each on :class:`ServerProc`: ``stop`` (SIGTERM, graceful), ``kill``
(SIGKILL), ``pause``/``resume`` (SIGSTOP/SIGCONT). Views: ``http``/``get`` of the monitoring
port, ``jsz``, ``seen_leader``, ``route_names``, ``stream_state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import nats
from components import require_nats_server
from differential.harness import ServerStartError, _wait_ready
from embedded_cluster import spawn_natsd
from nats.aio.client import Client as NATS
from ports import free_ports
from route_links import Link

HOST = "127.0.0.1"
USER = ("a", "a")
SYS_USER = ("sys", "sys")
#: nats-server's ``getHash`` alphabet: a peer id is 8 sha256 bytes, each taken modulo 62.
_HASH_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def peer_hash(server_name: str) -> str:
    """The ``peer`` id nats-server shows for a server in /jsz and ``cluster.replicas``."""
    digest = hashlib.sha256(server_name.encode()).digest()
    return "".join(_HASH_DIGITS[b % len(_HASH_DIGITS)] for b in digest[:8])


# route connection lines (see ServerProc.log_tail)
_CHATTER = re.compile(r"Route connection created|Router connection closed|Duplicate Route")


class ServerProc:
    """One server of a :class:`ProcCluster`; its ports and files stay fixed across restarts.
    The log file collects every start's output."""

    def __init__(
        self,
        index: int,
        name: str,
        kind: str,
        ports: tuple[int, int, int],
        tmp: Path,
        jetstream: bool,
    ) -> None:
        self.index = index  # its position in the cluster
        self.name = name
        self.kind = kind  # "natsd" or "nats-server"
        self.port, self.http_port, self.cluster_port = ports
        self.jetstream = jetstream
        self.conf = tmp / f"{name}.conf"
        self.log_path = tmp / f"{name}.log"
        self.store_dir = tmp / name
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0
        self.wait_ready = True  # start() waits for the client port's INFO (not when proxied)

    def __repr__(self) -> str:
        return f"<{self.kind} {self.name} :{self.port}>"

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def monitor_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- the process -----------------------------------------------------------------------
    def start(self, ready_timeout: float = 15.0) -> None:
        """Start the process; unless the cluster is proxied (the proxies run on the test's
        event loop, which this call would hold), wait until its client port greets."""
        self.starts += 1
        self.paused = False
        if self.kind == "natsd":
            self.proc = spawn_natsd(self.conf, self.log_path)
        else:
            binary = require_nats_server()
            with open(self.log_path, "ab") as logf:
                self.proc = subprocess.Popen(
                    [binary, "-c", str(self.conf)],
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=logf,
                    start_new_session=True,
                )
        if not self.wait_ready:
            return
        try:
            _wait_ready(self.proc, HOST, self.port, ready_timeout)
        except ServerStartError as e:
            self.stop()
            raise ServerStartError(f"{self.name} failed to start ({e})\n{self.log()}") from e

    def terminate(self) -> None:
        """SIGTERM (a paused server is resumed first), without waiting for the exit."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
            self.paused = False
            self.proc.terminate()

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, and wait: the server syncs and closes its stores; SIGKILL when it has
        not exited within ``timeout``."""
        if not self.alive:
            return
        assert self.proc is not None
        self.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """kill -9: no shutdown, nothing flushed."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but stops answering."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT, when this harness paused it."""
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    # -- views -----------------------------------------------------------------------------
    def http(self, path: str, timeout: float = 5.0) -> tuple[int, Any]:
        """GET a monitoring endpoint: (status, body), the body decoded from JSON when it is
        JSON and as text otherwise; error statuses are returned, an unreachable server
        raises OSError."""
        try:
            with urllib.request.urlopen(self.monitor_url + path, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def get(self, path: str, timeout: float = 1.0) -> dict[str, Any] | None:
        """A monitoring endpoint's JSON object, or None when the server does not answer
        with one (down, paused, starting)."""
        try:
            status, body = self.http(path, timeout)
        except OSError:
            return None
        return body if status == 200 and isinstance(body, dict) else None

    def jsz(self, query: str = "") -> dict[str, Any]:
        status, body = self.http("/jsz" + (f"?{query}" if query else ""))
        assert status == 200 and isinstance(body, dict), (status, body)
        return body

    def seen_leader(self) -> str:
        """The meta leader's server_name as this server sees it ("" while unknown or when
        the server does not answer)."""
        doc = self.get("/jsz")
        return str(((doc or {}).get("meta_cluster") or {}).get("leader") or "")

    def route_names(self) -> set[str]:
        """The servers this one has a route to, by name, from ``/routez``."""
        doc = self.get("/routez", 2.0) or {}
        return {str(r.get("remote_name") or r.get("remote_id")) for r in doc.get("routes") or []}

    def stream_state(self, stream: str) -> dict[str, Any] | None:
        """This server's replica of ``stream``, from ``/jsz`` (None when unreachable, ``{}``
        when it holds none)."""
        doc = self.get("/jsz?accounts=true&streams=true")
        if doc is None:
            return None
        for acc in doc.get("account_details") or []:
            for sd in acc.get("stream_detail") or []:
                if sd["name"] == stream:
                    state: dict[str, Any] = sd["state"]
                    return state
        return {}

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 4000) -> str:
        """The end of the log without the route chatter (connections made, closed and
        duplicated, which fill a faulted cluster's logs), so a failure shows what the
        server did."""
        lines = [ln for ln in self.log().splitlines() if not _CHATTER.search(ln)]
        return "\n".join(lines)[-n:]

    def raft_summary(self) -> str:
        """One line per Raft group this server runs (``/raftz`` of the system account and
        of the accounts the test clusters use), for a failure's report."""
        out = []
        for acc in ("", "$G", "A"):
            doc = self.get("/raftz" + (f"?acc={acc}" if acc else ""))
            for acc_name, groups in (doc or {}).items():
                for name, g in groups.items():
                    peers = {
                        p.get("name"): p.get("last_replicated_index", "-")
                        for p in (g.get("peers") or {}).values()
                    }
                    wal = g.get("wal") or {}
                    out.append(
                        f"  {acc_name}/{name}: {g.get('state')} term {g.get('term')} leader"
                        f" {g.get('leader', '-')} commit {g.get('committed')} applied"
                        f" {g.get('applied')} log {wal.get('first_seq')}..{g.get('pindex')}"
                        f"{' catching up' if g.get('catching_up') else ''} peers {peers}"
                    )
        return "\n".join(out) if out else "  (no /raftz answer)"


class ProcCluster:
    """``n`` servers joined by routes (see the module for the options). Index it by position
    or by name; iterate it for the servers in order."""

    def __init__(
        self,
        tmp: Path,
        n: int = 3,
        *,
        kinds: str | Sequence[str] = "natsd",
        names: Sequence[str] | None = None,
        jetstream: Sequence[bool] | None = None,
        auth: bool = False,
        system_account: bool = False,
        tags: Sequence[Sequence[str]] | None = None,
        extra: str = "",
        cluster_extra: str = "",
        cluster_name: str = "pc",
        proxied: bool = False,
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        kind_of = [kinds] * n if isinstance(kinds, str) else list(kinds)
        self.names = list(names) if names else [f"n{i + 1}" for i in range(n)]
        js = list(jetstream) if jetstream is not None else [True] * n
        self.auth = auth
        # client, monitor, cluster port per server; one proxy port per ordered pair and a
        # dead port to advertise when proxied
        ports = free_ports(3 * n + (n * (n - 1) + 1 if proxied else 0))
        self.servers = [
            ServerProc(i, nm, kind_of[i], (ports[i], ports[n + i], ports[2 * n + i]), tmp, js[i])
            for i, nm in enumerate(self.names)
        ]
        self._by_name = {s.name: s for s in self.servers}
        self.links: dict[tuple[str, str], Link] = {}
        self._link_ports: dict[tuple[str, str], int] = {}
        dead_port = 0
        if proxied:
            rest = iter(ports[3 * n :])
            dead_port = next(rest)
            for a in self.servers:
                a.wait_ready = False
                for b in self.servers:
                    if a is not b:
                        self.links[(a.name, b.name)] = Link(b.cluster_port)
                        self._link_ports[(a.name, b.name)] = next(rest)
        for i, s in enumerate(self.servers):
            if proxied:
                routes = [self._link_ports[(s.name, o.name)] for o in self.servers if o is not s]
            else:  # itself included, as one config for every server would have it
                routes = [o.cluster_port for o in self.servers if o.jetstream or not s.jetstream]
            tag = tags[i] if tags else ()
            text = _config(s, routes, cluster_name, dead_port, cluster_extra, extra, auth,
                           system_account, tag)  # fmt: skip
            s.conf.write_text(text)

    def __getitem__(self, key: int | str) -> ServerProc:
        return self.servers[key] if isinstance(key, int) else self._by_name[key]

    def __iter__(self) -> Iterator[ServerProc]:
        return iter(self.servers)

    def __len__(self) -> int:
        return len(self.servers)

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    # -- life ------------------------------------------------------------------------------
    async def start(self, wait: str = "leader", timeout: float = 30.0) -> None:
        """Start the proxies, then every server; ``wait``: "leader" (every server names the
        same meta leader), "js" (``$JS.API.INFO`` answers through every server, see
        :meth:`wait_js_ready`) or "" (nothing: the servers were only started)."""
        for key, link in self.links.items():
            await link.start(self._link_ports[key])
        for s in self.servers:
            await asyncio.to_thread(s.start) if s.wait_ready else s.start()
        if wait == "leader":
            await self.meta_leader(timeout=timeout)
        elif wait == "js":
            await self.wait_js_ready(timeout)

    async def close(self) -> None:
        """Stop every server gracefully (at once), then the proxies."""
        await asyncio.gather(*(asyncio.to_thread(s.stop) for s in self.servers))
        for link in self.links.values():
            await link.close()

    async def restart(self, key: int | str) -> None:
        s = self[key]
        await asyncio.to_thread(s.stop)
        await asyncio.to_thread(s.start) if s.wait_ready else s.start()

    async def connect(self, key: int | str, *, system: bool = False, **kwargs: Any) -> NATS:
        """A nats-py client on that server only (no reconnect, so answers come from it),
        as user ``a`` (or ``sys``) when the cluster has accounts."""
        opts: dict[str, Any] = {"allow_reconnect": False, "connect_timeout": 2}
        if self.auth:
            opts["user"], opts["password"] = SYS_USER if system else USER
        opts.update(kwargs)
        return await nats.connect(self[key].url, **opts)

    # -- waiting for the cluster -----------------------------------------------------------
    async def meta_leader(self, among: Sequence[str] | None = None, timeout: float = 30.0) -> str:
        """The meta leader's name that every live server named (or those ``among``) agrees
        on; waits for agreement."""
        names = list(among) if among else [s.name for s in self.servers if s.alive]
        deadline = time.monotonic() + timeout
        seen: set[str] = set()
        while time.monotonic() < deadline:
            seen = {await asyncio.to_thread(self[n].seen_leader) for n in names}
            if len(seen) == 1 and "" not in seen:
                return seen.pop()
            await asyncio.sleep(0.1)
        raise AssertionError(f"no agreed meta leader among {names}: {seen}\n{self.logs()}")

    async def routed(self, name: str, timeout: float = 20.0) -> None:
        """``name`` has a route to every other server (a restarted server answers for what
        the others hold only once it has)."""
        others = {s.name for s in self.servers} - {name}
        deadline = time.monotonic() + timeout
        while not others <= await asyncio.to_thread(self[name].route_names):
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} has not routed to every peer:\n{self.logs()}")
            await asyncio.sleep(0.1)

    async def wait_js_ready(self, timeout: float = 30.0) -> None:
        """Until ``$JS.API.INFO`` answers without an error through every live server and each
        one's ``/healthz`` is 200: the first needs a meta leader (nats-server answers 10008 or
        nothing before one is elected) and the routes the request travels to it; the second,
        that each server has heard from the leader itself."""
        end = time.monotonic() + timeout
        for s in self.servers:
            if not s.alive:
                continue
            last: object = None
            while True:
                try:
                    nc = await self.connect(s.name)
                    try:
                        m = await nc.request("$JS.API.INFO", b"", timeout=1)
                        last = json.loads(m.data)
                        if "error" not in last:
                            break
                    finally:
                        await nc.close()
                except Exception as e:
                    last = e
                if time.monotonic() > end:
                    raise AssertionError(f"JetStream not ready on {s.name}: {last}")
                await asyncio.sleep(0.2)
            while await asyncio.to_thread(s.get, "/healthz") is None:
                if time.monotonic() > end:
                    raise AssertionError(f"{s.name} /healthz: {s.http('/healthz')}")
                await asyncio.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(
            f"--- {s.name} ({s.kind})\n{s.raft_summary()}\n{s.log_tail()}" for s in self.servers
        )

    # -- the network (a proxied cluster) ----------------------------------------------------
    def partition(self, side: set[str], mode: str) -> None:
        """Cut every link between ``side`` and the other servers (``mode``: cut|blackhole)."""
        for (a, b), link in self.links.items():
            if (a in side) != (b in side):
                link.cut() if mode == "cut" else link.blackhole()

    def heal_links(self) -> None:
        for link in self.links.values():
            link.heal()

    def set_pair(self, a: str, b: str, up: bool, mode: str = "cut") -> None:
        for key in ((a, b), (b, a)):
            link = self.links[key]
            if up:
                link.heal()
            elif mode == "cut":
                link.cut()
            else:
                link.blackhole()

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


def _config(
    s: ServerProc,
    routes: list[int],
    cluster_name: str,
    dead_port: int,
    cluster_extra: str,
    extra: str,
    auth: bool,
    system_account: bool,
    tags: Sequence[str],
) -> str:
    urls = ", ".join(f'"nats-route://{HOST}:{p}"' for p in routes)
    text = f"server_name: {s.name}\nlisten: {HOST}:{s.port}\nhttp: {HOST}:{s.http_port}\n"
    if tags:
        text += f"server_tags: [{', '.join(json.dumps(t) for t in tags)}]\n"
    if s.jetstream:
        s.store_dir.mkdir(parents=True, exist_ok=True)
        text += f"jetstream {{ store_dir: {json.dumps(str(s.store_dir))} }}\n"
    gossip = f'advertise: "{HOST}:{dead_port}", connect_retries: 1, ' if dead_port else ""
    named = f"name: {cluster_name}, " if cluster_name else ""  # "": each server makes one up
    text += (
        f"cluster {{ {named}listen: {HOST}:{s.cluster_port}, {gossip}"
        f"routes: [{urls}]\n{cluster_extra}}}\n"
    )
    if auth:
        a_user = f'users: [{{user: "{USER[0]}", password: "{USER[1]}"}}]'
        sys_user = f'users: [{{user: "{SYS_USER[0]}", password: "{SYS_USER[1]}"}}]'
        text += "accounts {\n"
        if system_account:
            text += f"  SYS {{ {sys_user} }}\n"
        text += f"  A {{ jetstream: enabled, {a_user} }}\n}}\n"
        if system_account:
            text += "system_account: SYS\n"
    return text + extra


@contextlib.contextmanager
def running(cluster: ProcCluster, wait: str = "js", timeout: float = 30.0) -> Iterator[ProcCluster]:
    """Start ``cluster`` and stop it on exit, for synchronous tests (a cluster with proxies
    needs a running event loop of the test's own: use ``start``/``close``)."""
    assert not cluster.links, "proxies need the test's event loop"
    if any(s.kind == "nats-server" for s in cluster):
        require_nats_server()
    try:
        asyncio.run(cluster.start(wait, timeout))
        yield cluster
    finally:
        asyncio.run(cluster.close())


async def js_request(nc: NATS, subject: str, body: Any = b"", timeout: float = 5.0) -> Any:
    """A ``$JS.API`` request: the decoded JSON answer (``body`` may be a dict)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    m = await nc.request(subject, data, timeout=timeout)
    return json.loads(m.data)
