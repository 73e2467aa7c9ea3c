"""The fault suite's runner: publishers with ``Nats-Msg-Id`` against a replicated stream on a
:class:`~proc_cluster.ProcCluster` (proxied), a nemesis injecting one fault per cycle, then the
checks (issue 19).

**Publishers.** Each publisher has its own connection (to its own server, the others as
reconnect targets) and publishes self-describing payloads (``reliability.checker``) in order.
A publish that gets no PubAck (timeout, no responders, a lost connection, an error) is retried
with the same ``Nats-Msg-Id`` until it is acknowledged, so the stream must deduplicate across
leader changes. A publish still unacknowledged when the run ends is *unknown*.

**Consumer.** A durable pull consumer of the stream (it shares the stream's group) is read
throughout by :class:`~faults.workload.AckingConsumer`, which acknowledges every message with
ack-sync. After the last cycle it must have taken and confirmed every message the stream
holds, and no message may come back for a pull sent after its ack-sync was answered.

**Faults** (one per cycle, chosen by the seed): kill -9 of the stream leader, of a follower,
of two servers of five, of every server at once; SIGSTOP of the leader for longer than an
election; the leader isolated, a random minority/majority split (links cut, or black-holed:
connections kept, bytes dropped); a flapping link. Each fault holds for about an election and
a half, then heals (restart, SIGCONT, links back), and the cycle ends when a publish is
acknowledged again.

``pause_leader`` is the SIGSTOP a resumed leader could mistake for a short one: what some
followers (one short of a majority with the leader) send it is held back on the way from
just before the stop, the others are cut off from it, and once it runs again (SIGCONT) it is
given what was held up to the stop, the answers to what it sent before the pause. While its
routes stay that way it must answer no request as the stream's leader (``probe_leader``): it
has had no word from a majority since the pause (cluster/group.has_lease).

**Membership** (an R3 stream on five servers, where two servers are free): ``move`` asks for
one of the stream's peers (the leader or a follower) to be replaced, by ``STREAM.PEER.REMOVE``
or ``STREAM.PEER.EVACUATE``, and while the newcomer joins and catches up kills -9 one other
server half of the time (the newcomer, the leader, or a bystander). The cycle ends once the
replaced server has left and deleted its copy and the new replicas are current.

**Epochs.** With ``epoch`` set (the soak tier: ``NATSD_FAULT_EPOCH``, 100 by default), the
run is cut into epochs of that many cycles, each on a fresh stream: at an epoch's end come
the checks below, then the servers start again, the stream is deleted (every server's copy
must go) and created again under the same name. A stream grows with every cycle, and a
restart reads the whole store and a move copies it, so without epochs a thousand cycles
would cost far more than ten times a hundred.

**Checks**, after the last cycle (of the run, or of an epoch) has healed and the replicas
have converged:

* through the cluster: every message read back with ``DIRECT.GET`` and checked
  (``reliability.checker.check``: lost prefix/middle/suffix, corrupt, duplicated, out of order,
  sequence mismatch);
* per replica, offline: every server stopped gracefully, each one's store opened with the
  natsd file store and checked the same way, and the replicas compared message by message
  (sequence, subject, headers, data, timestamp): identical; exactly ``replicas`` servers
  hold the stream (a replaced one deleted its copy).

A failure prints the seed; ``NATSD_FAULT_SEED`` replays its schedule of faults (the timing of
real processes is not deterministic, the schedule is).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import nats
from nats.aio.client import Client as NATS
from proc_cluster import ProcCluster
from reliability.checker import History, Outcome

from faults.backup import check_backup
from faults.sourcing import (
    SOURCING_STREAMS,
    SourcePublisher,
    check_sourcing,
    create_sourcing_streams,
)
from faults.workload import (
    BATCH_STREAM,
    CONSUMER,
    COUNTER_STREAM,
    FAST_STREAM,
    SCHEDULE_STREAM,
    STREAM,
    AckingConsumer,
    BatchPublisher,
    CounterPublisher,
    FastPublisher,
    Progress,
    Publisher,
    SchedulePublisher,
    Tracer,
    api,
    check_batches,
    check_counter,
    check_fast,
    check_schedules,
    check_stores,
    create_batch_stream,
    create_consumer,
    create_counter_stream,
    create_fast_stream,
    create_schedule_stream,
    create_stream,
    finish,
    holds_stream,
    probe_leader,
    quiet_close,
    quiet_error,
    stream_leader,
    wait_healthy,
)

# NATSD_FAULT_NOTES=<file>: every note is appended there as it is made (the run's log is
# otherwise printed only when it fails), to follow a soak that runs for hours.
NOTES = os.environ.get("NATSD_FAULT_NOTES", "")
FAULTS_3 = ("kill_leader", "kill_follower", "stop_leader", "pause_leader", "isolate_leader",
            "split", "flap", "kill_all")  # fmt: skip
FAULTS_5 = (*FAULTS_3, "kill_two", "split")
# an R3 stream on five servers: its peers change too (twice as likely as another fault)
FAULTS_5_R3 = (*FAULTS_5, "move", "move", "move", "move", "move", "move", "move", "move", "move")


@dataclass
class Run:
    cluster: ProcCluster
    replicas: int
    seed: int
    cycles: int
    # Cycles per stream (0: one stream for the whole run): see ``replace_stream``.
    epoch: int = 0
    # The faults to draw from (empty: every fault the cluster's shape allows).
    kinds: tuple[str, ...] = ()
    log: list[str] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)  # every PubAck's arrival, in order
    gaps: dict[str, list[float]] = field(default_factory=dict)  # fault -> longest ack gaps
    # move cycles, and those whose peer was replaced (asked without an error, and the
    # replaced server no longer holds the stream once the cycle healed)
    moves: int = 0
    moved: int = 0

    def note(self, what: str) -> None:
        line = f"{time.monotonic():.2f} {what}"
        self.log.append(line)
        if NOTES:  # a long soak's progress, as it goes
            with open(NOTES, "a") as f:
                f.write(line + "\n")

    def summary(self) -> str:
        """Per fault: how many cycles, and the median and longest time without a PubAck."""
        out = []
        for kind, gaps in sorted(self.gaps.items()):
            gs = sorted(gaps)
            out.append(f"{kind:15s} x{len(gs):3d}  gap p50 {gs[len(gs) // 2]:.2f} s  "
                       f"max {gs[-1]:.2f} s")  # fmt: skip
        return "\n".join(out)

    async def diagnose(self, admin: NATS) -> str:
        """Each server's view (meta leader, the stream's state) and the stream's info."""
        out = []
        for p in self.cluster:
            jsz = await asyncio.to_thread(p.get, "/jsz")
            meta = (jsz or {}).get("meta_cluster", {}).get("leader")
            st = await asyncio.to_thread(p.stream_state, STREAM)
            out.append(f"  {p.name}: alive={p.alive} meta_leader={meta} stream={st}")
        try:
            m = await admin.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=1.0)
            out.append(f"  info: {m.data[:600]!r}")
        except Exception as e:  # no leader answers
            out.append(f"  info: {e!r}")
        return "\n".join(out)

    async def states(self) -> list[dict[str, Any] | None]:
        """Each replica's state (None: a server unreachable). With fewer replicas than
        servers, only the servers holding the stream, and [None] until exactly
        ``replicas`` do (a replaced peer deletes its copy when it leaves)."""
        return self._holders(await self._every_state())

    async def _every_state(self) -> list[dict[str, Any] | None]:
        """Each server's state of the stream ({}: it holds none; None: unreachable)."""
        return [await asyncio.to_thread(p.stream_state, STREAM) for p in self.cluster]

    def _holders(self, out: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
        if self.replicas == len(out) or None in out:
            return out
        held = [st for st in out if st]
        return held if len(held) == self.replicas else [None]

    async def execute(self) -> None:
        c = self.cluster
        rng = random.Random(self.seed)
        await c.start()
        admin = await nats.connect(servers=c.urls, max_reconnect_attempts=-1,
                                   reconnect_time_wait=0.1, error_cb=quiet_error)  # fmt: skip
        try:
            epoch = self.epoch or self.cycles
            for first in range(0, self.cycles, epoch):
                if first:
                    await self.replace_stream(admin)
                else:
                    await create_stream(admin, self.replicas)
                    await create_consumer(admin)
                end = min(first + epoch, self.cycles)
                history = await self.run_epoch(first, end, rng, admin)
                await self.check_offline(history, restart=end < self.cycles)
            self.check_moves()
        finally:
            await quiet_close(admin)
            await c.close()

    async def run_epoch(self, first: int, end: int, rng: random.Random, admin: NATS) -> History:
        """Cycles ``first``..``end - 1`` against the stream as it is: publishers and the
        consumer started, the faults, then the checks through the cluster (``finish``)."""
        c = self.cluster
        names = c.names
        history = History()
        pubs: list[Publisher] = []
        tasks: list[asyncio.Task[None]] = []
        consumer: AckingConsumer | None = None
        others: list[asyncio.Task[None]] = []  # (the tracer's, stopped apart)
        tnc: NATS | None = None
        try:
            cnc = await nats.connect(servers=c.urls, max_reconnect_attempts=-1,
                                     reconnect_time_wait=0.1, error_cb=quiet_error)  # fmt: skip
            consumer = AckingConsumer(cnc)
            tasks.append(asyncio.create_task(consumer.run()))
            for i in range(3):
                own = c[names[i % len(names)]].url
                nc = await nats.connect(servers=[own, *[u for u in c.urls if u != own]],
                                        max_reconnect_attempts=-1, reconnect_time_wait=0.1,
                                        dont_randomize=True, error_cb=quiet_error)  # fmt: skip
                pub = Publisher(i, nc, history, self.ack_times)
                pubs.append(pub)
                tasks.append(asyncio.create_task(pub.run(random.Random(rng.random()))))
            tnc = await nats.connect(servers=c.urls, max_reconnect_attempts=-1,
                                     reconnect_time_wait=0.1, error_cb=quiet_error)  # fmt: skip
            tracer = Tracer(tnc)
            tracing = asyncio.create_task(tracer.run())
            others.append(tracing)
            await create_counter_stream(admin, self.replicas)
            counter = CounterPublisher(tnc)
            counting = asyncio.create_task(counter.run(random.Random(rng.random())))
            others.append(counting)
            await create_batch_stream(admin, self.replicas)
            batcher = BatchPublisher(tnc)
            batching = asyncio.create_task(batcher.run(random.Random(rng.random())))
            others.append(batching)
            await create_schedule_stream(admin, self.replicas)
            scheduler = SchedulePublisher(tnc)
            scheduling = asyncio.create_task(scheduler.run(random.Random(rng.random())))
            others.append(scheduling)
            await create_fast_stream(admin, self.replicas)
            faster = FastPublisher(tnc)
            fasting = asyncio.create_task(faster.run(random.Random(rng.random())))
            others.append(fasting)
            await create_sourcing_streams(admin, self.replicas)
            sourcer = SourcePublisher(tnc)
            sourcing = asyncio.create_task(sourcer.run(random.Random(rng.random())))
            others.append(sourcing)
            faults = FAULTS_3 if len(names) == 3 else FAULTS_5
            if self.replicas < len(names):
                faults = FAULTS_5_R3
            faults = self.kinds or faults
            for cycle in range(first, end):
                kind = rng.choice(faults)
                await self.cycle(cycle, kind, rng, admin, pubs)
            tracer.stopping = True
            await tracing
            assert tracer.traced > 0, f"no trace of {tracer.sent} trace-only publishes came back"
            await counter.stop(counting)
            await batcher.stop(batching)
            await scheduler.stop(scheduling)
            await faster.stop(fasting)
            await sourcer.stop(sourcing)
            await finish(pubs, tasks[1:], admin, self.states, c.logs, consumer)
            self.note(await check_backup(admin, STREAM, c[0].store_dir.parent))
            self.note(f"published: acked {history.count(Outcome.ACKED)}, "
                      f"unknown {history.count(Outcome.UNKNOWN)}; consumer {CONSUMER}: "
                      f"{consumer.deliveries} deliveries of {len(consumer.delivered)} "
                      f"messages, all confirmed; {tracer.sent} trace-only publishes "
                      f"({tracer.traced} traced by the stream), none stored")  # fmt: skip
            self.note(await check_counter(admin, counter))
            self.note(await check_batches(admin, batcher))
            self.note(await check_schedules(admin, scheduler))
            self.note(await check_fast(admin, faster))
            self.note(await check_sourcing(admin, sourcer))
            for name in (COUNTER_STREAM, BATCH_STREAM, SCHEDULE_STREAM, FAST_STREAM,
                         *SOURCING_STREAMS):  # fmt: skip
                await api(admin, f"$JS.API.STREAM.DELETE.{name}", None, 60, done=(10059,))
        finally:
            for t in (*tasks, *others):
                t.cancel()
            if tnc is not None:
                await quiet_close(tnc)
            if consumer is not None:
                await quiet_close(consumer.nc)
            for p in pubs:
                await quiet_close(p.nc)
        return history

    def check_moves(self) -> None:
        """Most move cycles moved: a move refused or lost now and then (a meta election
        under the request, a kill -9 during it) is a fault's aftermath, but a run whose
        moves mostly did not happen has not tested membership changes at all."""
        if self.moves:
            self.note(f"moves: {self.moved} of {self.moves} replaced a peer")
            assert 3 * self.moved >= 2 * self.moves, (
                f"only {self.moved} of {self.moves} move cycles replaced a peer"
            )

    async def check_offline(self, history: History, restart: bool) -> None:
        """Every server stopped gracefully and each replica's store checked offline
        (``check_stores``); with ``restart``, the servers started again afterwards."""
        c = self.cluster
        await asyncio.gather(*(asyncio.to_thread(p.stop) for p in c))
        held = [(p.name, p.store_dir) for p in c if holds_stream(p.store_dir)]
        assert len(held) == self.replicas, f"the stream is on {[nm for nm, _ in held]}"
        n = check_stores(history, held)
        self.note(f"replicas identical: {n} messages on each of {[nm for nm, _ in held]}")
        if restart:
            for p in c:
                p.start()
            await c.meta_leader()

    async def replace_stream(self, admin: NATS, timeout: float = 120.0) -> None:
        """A new epoch: the stream (and its consumer) deleted, every server's copy gone,
        then created again under the same name, empty. The stream stays as big as one
        epoch makes it, so a thousand cycles cost what a hundred do (a restart reads the
        whole store; a move copies it), and each epoch ends with the full checks."""
        # 10059 (stream not found) on a retry: the first attempt deleted it, its answer lost
        await api(admin, f"$JS.API.STREAM.DELETE.{STREAM}", None, 60, done=(10059,))
        deadline = time.monotonic() + timeout
        while (every := await self._every_state()) != [{}] * len(every):
            if time.monotonic() > deadline:
                raise AssertionError(f"stream still held after its delete: {every!r}\n"
                                     f"{self.cluster.logs()}")  # fmt: skip
            await asyncio.sleep(0.2)
        await create_stream(admin, self.replicas)
        await create_consumer(admin)
        self.note(f"stream {STREAM} deleted and created again")

    async def cycle(
        self, n: int, kind: str, rng: random.Random, admin: NATS, pubs: list[Publisher]
    ) -> None:
        c = self.cluster
        names = c.names
        leader = await stream_leader(admin) or rng.choice(names)
        followers = [x for x in names if x != leader]
        hold = rng.uniform(1.2, 2.5)
        start = time.monotonic()
        first_ack = len(self.ack_times)
        self.note(f"cycle {n}: {kind} (leader {leader}, hold {hold:.1f} s)")
        killed: list[str] = []
        stopped: list[str] = []
        victim = ""  # a move: the peer asked to be replaced
        if kind in ("kill_leader", "kill_follower", "kill_two", "kill_all"):
            killed = {"kill_leader": [leader], "kill_follower": [rng.choice(followers)],
                      "kill_two": rng.sample(names, 2), "kill_all": list(names)}[kind]  # fmt: skip
            for x in killed:
                c[x].kill()
            await asyncio.sleep(hold)
        elif kind == "stop_leader":
            stopped = [leader]
            c[leader].pause()
            await asyncio.sleep(hold)
        elif kind == "pause_leader":
            await self.pause_leader(rng, leader, followers, hold)
        elif kind in ("isolate_leader", "split"):
            mode = rng.choice(("cut", "blackhole"))
            if kind == "isolate_leader":
                side = {leader}
            else:
                side = set(rng.sample(names, rng.randint(1, (len(names) - 1) // 2)))
            self.note(f"  {mode} {sorted(side)} | {sorted(set(names) - side)}")
            c.partition(side, mode)
            await asyncio.sleep(hold)
        elif kind == "move":
            killed, victim = await self.move(rng, admin, leader)
        elif kind == "flap":
            a, b = rng.sample(names, 2)
            end = time.monotonic() + hold
            up = True
            while time.monotonic() < end:
                up = not up
                c.set_pair(a, b, up, rng.choice(("cut", "blackhole")))
                await asyncio.sleep(rng.uniform(0.1, 0.6))
        else:
            raise AssertionError(kind)
        # heal
        c.heal_links()
        for x in stopped:
            c[x].resume()
        for x in killed:
            c[x].start()
        before = sum(p.acked for p in pubs)
        healed = time.monotonic()
        slow = False
        while sum(p.acked for p in pubs) <= before:
            waited = time.monotonic() - healed
            if waited > 20 and not slow:
                # Slow, not yet a failure: what every server says now, for the record.
                slow = True
                self.note(f"  SLOW: no PubAck 20 s after healing\n{await self.diagnose(admin)}")
            if waited > 90:
                raise AssertionError(f"cycle {n} ({kind}): no publish acknowledged within 90 s "
                                     f"of healing\n{chr(10).join(self.log[-6:])}\n"
                                     f"{self.cluster.logs()}")  # fmt: skip
            await asyncio.sleep(0.05)
        # The longest time without any PubAck, from the fault to the first ack after healing.
        times = [start, *self.ack_times[first_ack:]]
        gap = max(b - a for a, b in itertools.pairwise(times))
        self.gaps.setdefault(kind, []).append(gap)
        self.note(f"  longest gap without a PubAck: {gap:.2f} s")
        # The next fault starts from a whole cluster: every replica back and caught up (and
        # after a move, the replaced server gone from the stream).
        t0 = time.monotonic()
        if kind == "move":
            self.moves += 1
            await self.wait_holders()
            if victim and not await self.holds(victim):
                self.moved += 1
        await wait_healthy(admin, self.replicas, c.logs)
        self.note(f"  every replica current {time.monotonic() - t0:.2f} s later")

    async def pause_leader(
        self, rng: random.Random, leader: str, followers: list[str], hold: float
    ) -> None:
        """SIGSTOP of the leader with some followers' answers held back on the way and the
        others cut off; resumed, it is given the held answers (to what it sent before the
        pause) and must not answer as leader on their word. The cycle heals the links."""
        c = self.cluster
        held = rng.sample(followers, (len(c.names) - 1) // 2)
        cut = [x for x in followers if x not in held]
        self.note(f"  answers of {held} held back, {cut} cut off")
        try:
            probe = await nats.connect(c[leader].url, allow_reconnect=False,
                                       error_cb=quiet_error)  # fmt: skip
        except Exception as e:  # the server is not up (a cycle's aftermath)
            self.note(f"  pause_leader: no connection to {leader} ({e!r})")
            return
        try:
            c.hold_toward(leader, held)
            await asyncio.sleep(0.3)  # a heartbeat round or so, its answers held
            c[leader].pause()
            mark = c.held()
            for x in cut:
                c.set_pair(leader, x, up=False)
            await asyncio.sleep(hold)
            c[leader].resume()
            c.release_held(mark)
            stale = await probe_leader(probe, leader, 1.0)
            if stale:
                seqs = [a.get("state", {}).get("last_seq") for a in stale]
                raise AssertionError(f"{leader}, resumed with only answers from before its "
                                     f"pause, answered as the stream's leader {len(stale)} "
                                     f"times (last_seq {seqs})\n{chr(10).join(self.log[-6:])}\n"
                                     f"{c.logs()}")  # fmt: skip
        finally:
            await quiet_close(probe)

    async def move(self, rng: random.Random, admin: NATS, leader: str) -> tuple[list[str], str]:
        """One of the stream's peers replaced; meanwhile one other server killed half of
        the time. Returns the servers killed (restarted when the cycle heals) and the peer
        asked to be replaced ("": none was, or the request was refused)."""
        c = self.cluster
        try:
            m = await admin.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=2.0)
            block = json.loads(m.data).get("cluster", {})
        except Exception as e:  # no leader to say: the cycle has nothing to move
            self.note(f"  move: no stream info ({e!r})")
            return [], ""
        peers = [block.get("leader"), *[r["name"] for r in block.get("replicas", [])]]
        peers = [p for p in peers if p]
        if len(peers) != self.replicas:
            self.note(f"  move: peers {peers}, skipped")
            return [], ""
        victim = rng.choice(peers)
        verb = rng.choice(("REMOVE", "EVACUATE"))
        body = json.dumps({"peer": victim}).encode()
        try:
            r = await admin.request(f"$JS.API.STREAM.PEER.{verb}.{STREAM}", body, timeout=2.0)
            answer = json.loads(r.data)
        except Exception as e:  # answered once proposed; a timeout is a meta election
            answer = {"error": repr(e)}
        self.note(f"  {verb} {victim} (leader {leader}): {answer}")
        killed: list[str] = []
        await asyncio.sleep(rng.uniform(0.0, 0.8))
        if "error" not in answer and rng.random() < 0.5:
            others = [x for x in c.names if x != victim]
            killed = [rng.choice(others)]
            self.note(f"  kill -9 {killed[0]} during the move")
            c[killed[0]].kill()
        await asyncio.sleep(rng.uniform(1.2, 2.5))
        return killed, "" if "error" in answer else victim

    async def holds(self, name: str) -> bool:
        """Does server ``name`` hold the stream (it answers /jsz with it)?"""
        return bool(await asyncio.to_thread(self.cluster[name].stream_state, STREAM))

    async def wait_holders(self, timeout: float = 60.0) -> None:
        """Until exactly ``replicas`` servers hold the stream (the replaced one has left and
        deleted its copy, which it does only once its replacement has caught up and the swap
        is committed); fails after ``timeout`` seconds in which the newcomer's copy did not
        grow, and not before the stream could have been copied (gigabytes, late in a soak;
        a newcomer busy copying may not answer /jsz meanwhile)."""
        wait = Progress(timeout)
        last: Any = None
        remaining: float | None = None
        while wait.left(remaining):
            every = await self._every_state()
            last = self._holders(every)
            if None not in last:
                return
            seqs = [st["last_seq"] for st in every if st]
            wait.copying(max((st["bytes"] for st in every if st), default=0))
            # the copy furthest behind: what is left to copy
            remaining = max(seqs) - min(seqs) if seqs else None
            await asyncio.sleep(0.2)
        raise AssertionError(f"stream not on exactly {self.replicas} servers after {timeout} s "
                             "without progress: "
                             f"{last!r}\n{self.cluster.logs()}")  # fmt: skip


# The schedules make test runs: the same every run, so a failure replays and a pass means
# the same thing each time. The soak tier draws new ones.
FIXED_SEED: Final = 20261129


def fault_seed(fixed: int | None = FIXED_SEED) -> int:
    """The seed of a fault run: ``NATSD_FAULT_SEED`` when set (``random``: a new one), else
    ``fixed`` (None: a new one, as the soak tier wants). A failing run prints it."""
    env = os.environ.get("NATSD_FAULT_SEED", "")
    if env and env != "random":
        return int(env)
    if fixed is None or env == "random":
        return random.randrange(1 << 32)
    return fixed


async def run_faults(
    tmp: Path,
    servers: int,
    replicas: int,
    seed: int,
    cycles: int,
    epoch: int = 0,
    cluster_extra: str = "",
    kinds: tuple[str, ...] = (),
) -> Run:
    cluster = ProcCluster(tmp, servers, cluster_extra=cluster_extra, cluster_name="fc",
                          proxied=True)  # fmt: skip
    run = Run(cluster, replicas, seed, cycles, epoch, kinds=kinds)
    try:
        await run.execute()
    except BaseException:
        print(f"FAULT RUN FAILED: servers={servers} R{replicas} seed={seed} epoch={epoch} "
              f"(replay: NATSD_FAULT_SEED={seed})")  # fmt: skip
        print("\n".join(run.log))
        raise
    return run
