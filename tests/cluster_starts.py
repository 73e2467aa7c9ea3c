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
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nats
from proc_cluster import ProcCluster


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


async def start_together(
    tmp: Path, natsd: int, others: int = 0, bound: float = 20.0, cluster_extra: str = ""
) -> StartRun:
    """Start ``natsd`` natsd JetStream servers (n1, n2, ...) and ``others`` nats-server ones
    (g1, g2, ...) at once and check that the cluster comes up whole within ``bound`` seconds
    (see the module). ``cluster_extra`` goes into every server's ``cluster {}`` (a ``tls {}``
    block)."""
    n = natsd + others
    names = [f"n{i + 1}" for i in range(natsd)] + [f"g{i + 1}" for i in range(others)]
    cluster = ProcCluster(tmp, n, kinds=["natsd"] * natsd + ["nats-server"] * others,
                          names=names, jetstream=[i < natsd for i in range(n)],
                          cluster_extra=cluster_extra, cluster_name="starts")  # fmt: skip
    run = StartRun()
    t0 = time.monotonic()
    for s in cluster:
        s.wait_ready = False  # all at once: nobody waits for anybody
        s.start()
    try:
        await _check(cluster, run, t0, bound)
    finally:
        await cluster.close()
    if not run.ok:
        run.logs = "\n".join(f"--- {s.name} ({s.kind})\n{s.log_tail(6000)}" for s in cluster)
    return run


async def _check(cluster: ProcCluster, run: StartRun, t0: float, bound: float) -> None:
    names = {s.name for s in cluster}
    js = [s for s in cluster if s.jetstream]
    deadline = t0 + bound
    seen: dict[str, set[str]] = {}
    while True:
        for s in cluster:
            if s.proc is not None and s.proc.poll() is not None:
                run.problems.append(f"{s.name} exited with {s.proc.returncode}")
                return
        seen = {s.name: await asyncio.to_thread(s.route_names) for s in cluster}
        if all(seen[s.name] >= names - {s.name} for s in cluster):
            break
        if time.monotonic() > deadline:
            missing = {k: sorted(names - {k} - v) for k, v in seen.items() if names - {k} - v}
            run.problems.append(f"no full mesh in {bound:.0f}s: missing {missing}")
            return
        await asyncio.sleep(0.05)
    run.mesh_s = time.monotonic() - t0
    leaders: set[str] = set()
    while True:
        leaders = {await asyncio.to_thread(s.seen_leader) for s in js}
        if len(leaders) == 1 and "" not in leaders:
            break
        if time.monotonic() > deadline:
            run.problems.append(f"no meta leader agreed in {bound:.0f}s: {sorted(leaders)}")
            return
        await asyncio.sleep(0.05)
    run.leader_s = time.monotonic() - t0
    via = random.choice(cluster.servers)
    nc = await nats.connect(via.url, allow_reconnect=False)
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
