"""A three-server JetStream cluster of processes on loopback, for differential tests of
clustered JetStream (the in-process harness is ``embedded_cluster.EmbeddedJsCluster``).

:func:`process_js_cluster` starts three servers of one kind ("nats-server" or "natsd") from
config files that carry everything (client, monitor and route ports, ``server_name``,
``jetstream { store_dir }``, optional ``server_tags``, and an account block with a system
account ``SYS`` and a JetStream account ``A``), waits until JetStream answers, and yields a
:class:`ProcessJsCluster` of :class:`ProcessJsServer`. The ports live in the config rather
than on the command line so that :meth:`ProcessJsCluster.restart` brings a server back on the
same ports and store directory, as an operator restarting a machine would.

Users: ``a``/``a`` in account ``A`` (JetStream enabled), ``sys``/``sys`` in ``SYS``.

Readiness is "``$JS.API.INFO`` in account A answers without an error through every server, and
every server's ``/healthz`` is 200": the first needs a meta leader (nats-server answers 10008 or
nothing before one is elected) and every server's routes, because the request travels to the
meta leader; the second, that each server has heard from the leader itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import nats
from components import nats_server_binary, require_nats_server
from nats.aio.client import Client as NATS
from ports import free_ports

from differential.harness import HOST, ServerStartError, _wait_ready, natsd_command

USER = ("a", "a")
#: nats-server's ``getHash`` alphabet: a peer id is 8 sha256 bytes, each taken modulo 62.
_HASH_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
SYS_USER = ("sys", "sys")
CLUSTER_NAME = "jsc"


@dataclasses.dataclass
class ProcessJsServer:
    """One server of the cluster; the ports stay fixed across restarts."""

    kind: str
    index: int
    name: str
    port: int
    http_port: int
    cluster_port: int
    config_path: Path
    store_dir: Path
    log_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    @property
    def monitor_url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}-{self.starts}.log"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, ready_timeout: float = 15.0) -> None:
        if self.kind == "nats-server":
            binary = nats_server_binary()
            if binary is None:
                raise ServerStartError("nats-server binary not found")
            argv = [binary, "-c", str(self.config_path)]
        else:
            argv = [*natsd_command(), "-c", str(self.config_path)]
        self.starts += 1
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT
            )
        try:
            _wait_ready(self.proc, HOST, self.port, ready_timeout)
        except ServerStartError as e:
            self.stop()
            raise ServerStartError(f"{self.name} failed to start ({e})\n{self.log()}") from e

    def stop(self, timeout: float = 5.0) -> None:
        """Graceful stop (SIGTERM, then SIGKILL); a paused server is resumed first."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)

    def kill(self) -> None:
        """kill -9: no shutdown, nothing flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but stops answering."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def http(self, path: str, timeout: float = 5.0) -> tuple[int, Any]:
        """GET a monitoring endpoint: (status, body), the body decoded from JSON when it is
        JSON and as text otherwise (an empty body is ``""``); error statuses are returned."""
        try:
            with urllib.request.urlopen(self.monitor_url + path, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def jsz(self, query: str = "") -> dict[str, Any]:
        status, body = self.http("/jsz" + (f"?{query}" if query else ""))
        assert status == 200, (status, body)
        assert isinstance(body, dict)
        return body

    def meta_leader(self) -> str | None:
        """The meta leader's server_name as this server sees it (``None`` while unknown)."""
        leader = self.jsz().get("meta_cluster", {}).get("leader")
        return str(leader) if leader else None


def peer_hash(server_name: str) -> str:
    """The ``peer`` id nats-server shows for a server in /jsz and ``cluster.replicas``."""
    digest = hashlib.sha256(server_name.encode()).digest()
    return "".join(_HASH_DIGITS[b % len(_HASH_DIGITS)] for b in digest[:8])


def _config(
    s: ProcessJsServer, routes: Sequence[int], tags: Sequence[str], extra: str, system_account: bool
) -> str:
    route_list = ", ".join(f'"nats-route://{HOST}:{p}"' for p in routes)
    tag_line = f"server_tags: [{', '.join(json.dumps(t) for t in tags)}]\n" if tags else ""
    return (
        f"server_name: {s.name}\n"
        f"listen: {HOST}:{s.port}\n"
        f"http: {HOST}:{s.http_port}\n"
        f"{tag_line}"
        f'jetstream {{ store_dir: "{s.store_dir}" }}\n'
        f"cluster {{\n  name: {CLUSTER_NAME}\n  listen: {HOST}:{s.cluster_port}\n"
        f"  routes: [{route_list}]\n}}\n"
        "accounts {\n"
        + (
            f'  SYS {{ users: [{{user: "{SYS_USER[0]}", password: "{SYS_USER[1]}"}}] }}\n'
            if system_account
            else ""
        )
        + f'  A {{ jetstream: enabled, users: [{{user: "{USER[0]}", password: "{USER[1]}"}}] }}\n'
        "}\n" + ("system_account: SYS\n" if system_account else "") + extra
    )


@dataclasses.dataclass
class ProcessJsCluster:
    servers: list[ProcessJsServer]

    def __getitem__(self, i: int) -> ProcessJsServer:
        return self.servers[i]

    def __iter__(self) -> Iterator[ProcessJsServer]:
        return iter(self.servers)

    def by_name(self, name: str) -> ProcessJsServer:
        return next(s for s in self.servers if s.name == name)

    def meta_leader(self, timeout: float = 20.0) -> ProcessJsServer:
        """The server that every live server agrees is meta leader (waits for agreement)."""
        end = time.monotonic() + timeout
        seen: set[str | None] = set()
        while time.monotonic() < end:
            seen = {s.meta_leader() for s in self.servers if s.alive()}
            if len(seen) == 1 and None not in seen:
                return self.by_name(str(seen.pop()))
            time.sleep(0.1)
        raise AssertionError(f"no agreed meta leader after {timeout}s: {seen}")

    def restart(self, i: int) -> None:
        self.servers[i].stop()
        self.servers[i].start()

    async def connect(self, i: int, *, system: bool = False, **kwargs: Any) -> NATS:
        """A nats-py client on server ``i`` only (no reconnect, so answers come from it)."""
        user, password = SYS_USER if system else USER
        opts: dict[str, Any] = {"allow_reconnect": False, "connect_timeout": 2}
        opts.update(kwargs)
        return await nats.connect(self.servers[i].url, user=user, password=password, **opts)

    async def wait_js_ready(self, timeout: float = 30.0) -> None:
        """Until ``$JS.API.INFO`` answers without an error through every live server and each
        one's ``/healthz`` is 200."""
        end = time.monotonic() + timeout
        for i, s in enumerate(self.servers):
            if not s.alive():
                continue
            last: object = None
            while True:
                try:
                    nc = await self.connect(i)
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
            # The request above may travel to the meta leader over routes before this server
            # itself has heard from it; /healthz turns 200 once it has.
            while (health := s.http("/healthz"))[0] != 200:
                if time.monotonic() > end:
                    raise AssertionError(f"{s.name} /healthz: {health}")
                await asyncio.sleep(0.1)


def build_cluster(
    kind: str,
    tmp: Path,
    *,
    tags: Sequence[Sequence[str]] = ((), (), ()),
    extra: str = "",
    system_account: bool = True,
) -> ProcessJsCluster:
    """Configure (not start) three servers of ``kind``; ``tags[i]`` are server i's tags,
    ``extra`` is appended to each config, and ``system_account=False`` leaves out the ``SYS``
    account (then :meth:`ProcessJsCluster.connect` with ``system=True`` cannot log in)."""
    servers = []
    # fixed across restarts, below the ephemeral range, all distinct
    flat = free_ports(9)
    ports = [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, 9, 3)]
    for i, (p, hp, cp) in enumerate(ports):
        store = tmp / f"store-{i}"
        store.mkdir(parents=True, exist_ok=True)
        s = ProcessJsServer(kind, i, f"{kind}-{i}", p, hp, cp, tmp / f"{kind}-{i}.conf", store, tmp)
        routes = [c for _, _, c in ports]
        s.config_path.write_text(_config(s, routes, tags[i], extra, system_account))
        servers.append(s)
    return ProcessJsCluster(servers)


@contextlib.contextmanager
def process_js_cluster(
    kind: str,
    tmp: Path,
    *,
    tags: Sequence[Sequence[str]] = ((), (), ()),
    extra: str = "",
    system_account: bool = True,
    ready_timeout: float = 30.0,
) -> Iterator[ProcessJsCluster]:
    """Start three JetStream servers of ``kind`` joined by routes and wait until JetStream
    answers through each; stop them all on exit."""
    if kind == "nats-server":
        require_nats_server()
    cluster = build_cluster(kind, tmp, tags=tags, extra=extra, system_account=system_account)
    try:
        for s in cluster:
            s.start()
        asyncio.run(cluster.wait_js_ready(ready_timeout))
        yield cluster
    finally:
        for s in cluster:
            s.stop()


async def js_request(nc: NATS, subject: str, body: Any = b"", timeout: float = 5.0) -> Any:
    """A ``$JS.API`` request: the decoded JSON answer (``body`` may be a dict)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    m = await nc.request(subject, data, timeout=timeout)
    return json.loads(m.data)
