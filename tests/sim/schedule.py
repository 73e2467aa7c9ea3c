"""One schedule of the deterministic tier: a seed decides everything.

``run_schedule(seed, base)`` builds a ``JsWorld`` of three or five servers (the seed's
choice unless ``size`` says), creates an R3 stream and, in three schedules of ten (the
seed's choice unless ``consumer`` says), a durable pull consumer that reads it throughout,
starts publishers, lets the nemesis inject one to three faults (each held for a while, then
healed; while a cut holds, reads go through every server it leaves without a majority of
the stream's peers), waits for every publish to be acknowledged and the replicas to
converge, and checks the stream on every replica, then the consumer. It returns a
``Result`` (the faults, the virtual time it took, the network fingerprint) or raises
``SimFailure`` naming the seed, the faults and the world's log.

Replay: ``python tests/sim/schedule.py SEED`` runs one schedule and prints its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":  # run as a script: the tests directory is the import root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.client import NoResponders
from sim.consumer import SimConsumer
from sim.msg_schedules import SchedulePublisher
from sim.vloop import Stalled, run_virtual
from sim.world import STREAM, JsWorld, SimFailure, fresh_tmp, seeded_ids, virtual_cpu

__all__ = ["FAULTS", "Result", "run_schedule", "with_consumer"]

FAULTS = ("crash", "restart", "isolate", "split", "slow", "move")
# The share of seeds whose schedule has a consumer (with_consumer): a consumer costs about a
# third more wall time per schedule (0.1 s), so 3 in 10 keeps `make test`'s 200 seeds about
# a sixth dearer than without. (Seeds 1-24, the mutants' kill suite, have 7 with one.)
CONSUMER_SHARE = 0.3
# the faults that need five servers (a minority of two; a free server to move to)
_FIVE = ("split", "move")


@dataclass
class Result:
    seed: int
    size: int
    faults: list[str] = field(default_factory=list)
    acked: int = 0
    virtual_s: float = 0.0
    wall_s: float = 0.0
    fingerprint: str = ""
    log: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what the servers logged as errors
    consumer: bool = False  # the schedule has a durable pull consumer (with_consumer)
    deliveries: int = 0  # its deliveries
    schedules: bool = False  # message schedules in a second stream (sim/msg_schedules.py)
    fired: int = 0  # the @at schedules that fired


# An error a server may never log, whatever the faults: it means a disk lost what it had
# promised to keep (cluster/group.py, _lost_unsaid).
FORBIDDEN = ("it had acknowledged",)


class _Errors(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


class Nemesis:
    def __init__(self, w: JsWorld, consumer: bool) -> None:
        self.w = w
        self.rng = w.rng
        self.consumer = consumer

    async def hold_cut(self, hold: float) -> None:
        """Hold the cuts just made for ``hold`` seconds, reading meanwhile through every
        server they leave without a majority of the stream's peers (``JsWorld.probe``),
        then heal."""
        w = self.w
        end = w.loop.time() + hold - 0.05
        probes = [asyncio.ensure_future(w.probe(n, end, self.consumer)) for n in w.cut_off()]
        await asyncio.sleep(hold)
        w.net.heal()
        w.say("heal")
        await asyncio.gather(*probes)

    def target(self, kind: str) -> str:
        """The stream leader half of the time, else any live server."""
        w = self.w
        leader = w.stream_leader()
        if leader and self.rng.random() < 0.5:
            return leader
        return self.rng.choice(sorted(w.live))

    async def inject(self, kind: str) -> None:
        w, rng = self.w, self.rng
        hold = rng.uniform(0.5, 4.0)
        if kind == "crash":
            name = self.target(kind)
            w.crash(name)
            await asyncio.sleep(hold)
            await w.revive(name)
        elif kind == "restart":
            await w.restart(self.target(kind))
        elif kind == "isolate":
            name = self.target(kind)
            w.say(f"isolate {name} for {hold:.2f}s")
            for other in w.names:
                if other != name:
                    w.net.cut(name, other)
            await self.hold_cut(hold)
        elif kind == "split":
            side = rng.sample(w.names, len(w.names) // 2)
            w.say(f"split {sorted(side)} for {hold:.2f}s")
            for a in side:
                for b in w.names:
                    if b not in side:
                        w.net.cut(a, b)
            await self.hold_cut(hold)
        elif kind == "slow":
            name = self.target(kind)
            delay = rng.uniform(0.05, 0.8)
            w.say(f"slow {name} by {delay:.3f}s for {hold:.2f}s")
            w.net.slow(name, delay)
            await asyncio.sleep(hold)
            w.net.slow(name, 0)
        elif kind == "move":
            await self.move()
        else:
            raise ValueError(kind)

    async def move(self) -> None:
        """Replace one of the stream's peers; the cycle ends when it has left and the new
        peer holds the stream."""
        w, rng = self.w, self.rng
        peers = w.stream_peers()
        gone = rng.choice(sorted(peers))
        w.say(f"move {gone} out of {sorted(peers)}")
        c = await w.client("mover")
        try:
            for _ in range(20):
                try:
                    r = await w.api(c, f"$JS.API.STREAM.PEER.REMOVE.{STREAM}", {"peer": gone})
                except (TimeoutError, NoResponders, ConnectionError):
                    r = {"error": "no answer"}
                if r.get("success"):
                    break
                w.say(f"peer remove: {r}")
                await asyncio.sleep(0.5)
            else:
                raise SimFailure(f"seed {w.seed}: peer remove of {gone} never succeeded")
        finally:
            c.close()
        await w.until(
            lambda: gone not in w.stream_peers() and len(w.stream_peers()) == 3,
            20.0,
            f"{gone} not replaced",
        )
        await w.until(lambda: w.stream(gone) is None, 20.0, f"{gone} kept its copy")


async def _schedule(w: JsWorld, res: Result) -> None:
    rng = w.rng
    await w.start_all()
    await w.create_stream("admin", {"name": STREAM, "subjects": ["sim.>"], "num_replicas": 3})
    reader: SimConsumer | None = None
    reading: asyncio.Future[None] | None = None
    if res.consumer:
        reader = SimConsumer(w, random.Random(w.seed ^ 0xC0_5E))
        await reader.create()
        reading = asyncio.ensure_future(reader.run())
    scheduler: SchedulePublisher | None = None
    scheduling: asyncio.Future[None] | None = None
    if res.schedules:
        scheduler = SchedulePublisher(w, random.Random(w.seed ^ 0x5C_4E))
        await scheduler.create()
    w.publishing = True
    if scheduler is not None:
        scheduling = asyncio.ensure_future(scheduler.run())
    pubs = [
        asyncio.ensure_future(w.publisher(pid, rng.randint(20, 60)))
        for pid in range(1, rng.randint(2, 3) + 1)
    ]
    nemesis = Nemesis(w, res.consumer)
    kinds = [k for k in FAULTS if w.size == 5 or k not in _FIVE]
    for _ in range(rng.randint(1, 3)):
        await asyncio.sleep(rng.uniform(0.05, 1.0))
        kind = rng.choice(kinds)
        res.faults.append(kind)
        await nemesis.inject(kind)
    # every publish acknowledged in the end (a stream with a leader takes them)
    done, _pending = await asyncio.wait(pubs, timeout=60.0)
    w.publishing = False
    for t in pubs:
        if t not in done:
            raise SimFailure(f"seed {w.seed}: publishes not all acknowledged within 60s")
        t.result()
    if scheduling is not None:
        await scheduling
    res.acked = len(w.history.records)
    peers = w.stream_peers()
    await w.until(lambda: w.converged(peers), 30.0, f"replicas {peers} converge")
    rep = w.check_replicas(peers)
    w.say(f"{res.acked} publishes acknowledged; replicas {peers} converged")
    if not rep.ok:
        raise SimFailure(f"seed {w.seed}: {rep.summary()}")
    if reader is not None and reading is not None:
        stored = {seq: data for seq, _subj, data, _ts, _hdr in w.contents(peers[0])}
        await reader.drain(reading, stored)
        await reader.check_replicas(peers)
        res.deliveries = reader.deliveries
    if scheduler is not None:
        await scheduler.check(sorted(n for n in w.live if scheduler.stream(n) is not None))
        res.fired = scheduler.fired


def with_consumer(seed: int) -> bool:
    """Does the schedule of ``seed`` have a consumer? (A generator of its own: the world's
    draws nothing for it.)"""
    return random.Random(seed ^ 0xC0_0C).random() < CONSUMER_SHARE


def run_schedule(
    seed: int,
    base: Path,
    size: int | None = None,
    consumer: bool | None = None,
    schedules: bool = False,
) -> Result:
    t0 = time.perf_counter()
    tmp = fresh_tmp(base, seed)
    box: list[JsWorld] = []
    res = Result(seed, 0, consumer=with_consumer(seed) if consumer is None else consumer,
                 schedules=schedules)  # fmt: skip
    logger = logging.getLogger("natsd")
    handler = _Errors(res.errors)
    saved = logger.level, logger.propagate
    # errors only, and only to the result (a schedule's elections and route churn are
    # not news; what the servers call an error goes into the failure report)
    logger.setLevel(logging.ERROR)
    logger.propagate = False
    logger.addHandler(handler)

    async def main() -> None:
        w = JsWorld(tmp, seed, size or (3 if seed % 2 == 0 else 5))
        box.append(w)
        res.size = w.size
        try:
            await _schedule(w, res)
            bad = [e for e in res.errors if any(f in e for f in FORBIDDEN)]
            if bad:
                raise SimFailure(f"seed {seed}: a server logged {bad[0]!r}")
        finally:
            with contextlib.suppress(Exception):
                await w.stop_all()

    try:
        with seeded_ids(seed), virtual_cpu():
            run_virtual(main)
    except (SimFailure, Stalled, Exception) as e:
        w = box[0] if box else None
        log = "\n".join(w.log) if w else ""
        errors = "".join(f"\n  server error: {e}" for e in res.errors[:20])
        raise SimFailure(
            f"seed {seed} ({res.size} servers, faults {res.faults}): {type(e).__name__}: {e}\n"
            f"replay: python tests/sim/schedule.py {seed}\n{log}{errors}"
        ) from e
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        shutil.rmtree(tmp, ignore_errors=True)
    w = box[0]
    res.virtual_s = w.loop.time()
    res.wall_s = time.perf_counter() - t0
    res.fingerprint = w.net.fingerprint()
    res.log = w.log
    return res


if __name__ == "__main__":
    seeds = [int(a) for a in sys.argv[1:]] or [1]
    with tempfile.TemporaryDirectory() as d:
        for s in seeds:
            r = run_schedule(s, Path(d))
            print("\n".join(r.log))
            print(
                f"seed {s}: {r.size} servers, faults {r.faults}, {r.acked} publishes, "
                f"{'a consumer: ' + str(r.deliveries) + ' deliveries, ' if r.consumer else ''}"
                f"{r.virtual_s:.1f}s virtual in {r.wall_s:.2f}s, {r.fingerprint}"
            )
