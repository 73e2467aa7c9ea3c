"""Servers started together, as an operator starts a cluster: did it come up whole?

``start_together`` writes one config per server (every JetStream server's ``cluster.routes``
names every JetStream server, itself included; nats-server members name everyone and run
without JetStream), starts every process at once, and then waits, up to ``bound`` seconds,
until:

* every server's ``/routez`` lists every other server (the full mesh);
* every natsd JetStream server's ``/jsz`` names the same meta leader;
* an R1 stream, and an R3 one when there are three natsd servers or more, can be created
  at once through a client of a server picked at random, with no retry: a cluster that
  looks up must also serve.

It reports how long each took, or what was missing with the servers' logs. Used by
tests/integration/test_cluster_starts.py (a few starts in CI) and the soak tier
(tests/reliability/test_cluster_starts_soak.py: hundreds, also beside a CPU hog).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from components import require_nats_server
from embedded_cluster import spawn_natsd
from ports import free_ports

HOST = "127.0.0.1"


@dataclass
class StartRun:
    ok: bool = False
    mesh_s: float = 0.0  # until every server listed every other one
    leader_s: float = 0.0  # until every natsd JetStream server named the same leader
    ready_s: float = 0.0  # until the streams were created
    problems: list[str] = field(default_factory=list)
    logs: str = ""

    def summary(self) -> str:
        if self.ok:
            return (
                f"mesh {self.mesh_s:.2f}s leader {self.leader_s:.2f}s streams {self.ready_s:.2f}s"
            )
        return "; ".join(self.problems)


@dataclass
class _Member:
    name: str
    kind: str  # "natsd" (with JetStream) or "nats-server" (without)
    port: int
    cport: int
    http: int
    conf: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None


def _get(port: int, path: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=2) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out
    except (OSError, ValueError):
        return None


def _peers(routez: dict[str, Any] | None) -> set[str]:
    if routez is None:
        return set()
    return {str(r.get("remote_name") or r.get("remote_id")) for r in routez.get("routes") or []}


@contextlib.contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """A process that spins on one core for as long as the block runs."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()


def _members(tmp: Path, natsd: int, others: int, cluster_extra: str = "") -> list[_Member]:
    n = natsd + others
    ports = free_ports(3 * n)
    out = []
    for i in range(n):
        kind = "natsd" if i < natsd else "nats-server"
        name = f"n{i + 1}" if kind == "natsd" else f"g{i + 1 - natsd}"
        m = _Member(
            name,
            kind,
            ports[i],
            ports[n + i],
            ports[2 * n + i],
            tmp / f"{name}.conf",
            tmp / f"{name}.log",
        )
        out.append(m)
    js_routes = ", ".join(f'"nats-route://{HOST}:{m.cport}"' for m in out if m.kind == "natsd")
    all_routes = ", ".join(f'"nats-route://{HOST}:{m.cport}"' for m in out)
    for m in out:
        text = f"server_name: {m.name}\nport: {m.port}\nhost: {HOST}\nhttp_port: {m.http}\n"
        if m.kind == "natsd":
            store = json.dumps(str(tmp / m.name))
            text += f"jetstream {{ store_dir: {store} }}\n"
            routes = js_routes
        else:
            routes = all_routes
        text += (
            f"cluster {{ name: starts, listen: {HOST}:{m.cport}, routes: [{routes}]\n"
            f"{cluster_extra}}}\n"
        )
        m.conf.write_text(text)
    return out


def _spawn(m: _Member) -> subprocess.Popen[bytes]:
    if m.kind == "natsd":
        return spawn_natsd(m.conf, m.log)
    binary = require_nats_server()
    with open(m.log, "ab") as logf:
        return subprocess.Popen(
            [binary, "-c", str(m.conf)],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            start_new_session=True,
        )


async def start_together(
    tmp: Path, natsd: int, others: int = 0, bound: float = 20.0, cluster_extra: str = ""
) -> StartRun:
    """Start ``natsd`` natsd JetStream servers and ``others`` nats-server ones at once and
    check that the cluster comes up whole within ``bound`` seconds (see the module).
    ``cluster_extra`` goes into every server's ``cluster {}`` (a ``tls {}`` block)."""
    tmp.mkdir(parents=True, exist_ok=True)
    members = _members(tmp, natsd, others, cluster_extra)
    run = StartRun()
    t0 = time.monotonic()
    for m in members:
        m.proc = _spawn(m)
    try:
        await _check(members, run, t0, bound)
    finally:
        for m in members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.send_signal(signal.SIGTERM)
        for m in members:
            if m.proc is not None:
                try:
                    m.proc.wait(15)
                except subprocess.TimeoutExpired:
                    m.proc.kill()
                    m.proc.wait()
    if not run.ok:
        run.logs = "\n".join(
            f"--- {m.name} ({m.kind})\n{m.log.read_text(errors='replace')[-6000:]}" for m in members
        )
    return run


async def _check(members: list[_Member], run: StartRun, t0: float, bound: float) -> None:
    names = {m.name for m in members}
    js = [m for m in members if m.kind == "natsd"]
    deadline = t0 + bound
    seen: dict[str, set[str]] = {}
    while True:
        for m in members:
            if m.proc is not None and m.proc.poll() is not None:
                run.problems.append(f"{m.name} exited with {m.proc.returncode}")
                return
        seen = {m.name: _peers(await asyncio.to_thread(_get, m.http, "/routez")) for m in members}
        if all(seen[m.name] >= names - {m.name} for m in members):
            break
        if time.monotonic() > deadline:
            missing = {k: sorted(names - {k} - v) for k, v in seen.items() if names - {k} - v}
            run.problems.append(f"no full mesh in {bound:.0f}s: missing {missing}")
            return
        await asyncio.sleep(0.05)
    run.mesh_s = time.monotonic() - t0
    leaders: set[str] = set()
    while True:
        jsz = [await asyncio.to_thread(_get, m.http, "/jsz") for m in js]
        leaders = {str(((j or {}).get("meta_cluster") or {}).get("leader") or "") for j in jsz}
        if len(leaders) == 1 and "" not in leaders:
            break
        if time.monotonic() > deadline:
            run.problems.append(f"no meta leader agreed in {bound:.0f}s: {sorted(leaders)}")
            return
        await asyncio.sleep(0.05)
    run.leader_s = time.monotonic() - t0
    via = random.choice(members)
    nc = await nats.connect(f"nats://{HOST}:{via.port}", allow_reconnect=False)
    try:
        jsc = nc.jetstream(timeout=10)
        for name, replicas in (("R1", 1), ("R3", 3)):
            if replicas > len(js):
                continue
            try:
                await jsc.add_stream(name=name, subjects=[f"{name}.>"], num_replicas=replicas)
            except Exception as e:  # the error as the client got it
                run.problems.append(
                    f"creating {name} via {via.name} failed: {e!r} {getattr(e, 'description', '')}"
                )
                return
    finally:
        await nc.close()
    run.ready_s = time.monotonic() - t0
    run.ok = True
