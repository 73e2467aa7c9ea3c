"""Whole natsd JetStream clusters in one process, on virtual time, replayable from a seed.

A ``JsWorld`` runs three or five unchanged ``natsd.server.Server`` objects in one
``VirtualLoop`` (sim/vloop.py), their routes and clients on a ``SimNetwork`` (sim/net.py),
each server's files on a ``FaultFS`` (a real directory plus a model of what a power loss
would leave). Every random choice (link delays, start order, election timeouts, route
back-offs, server ids, faults and their timing) comes from the seed, so a seed names one
schedule, callback for callback; ``fingerprint`` says which.

Faults (``Nemesis``):

* ``crash``: a server loses power: its connections reset, and it comes back later from the
  disk a power loss leaves (``FaultFS.materialize``, torn writes included half the time);
* ``restart``: a graceful stop and start (lame-duck leader transfer included);
* ``isolate``: every link of one server cut (the stream leader, half of the time);
* ``split``: a random minority cut off from the majority (five servers);
* ``slow``: one server's links slowed by 50-800 ms (a slow follower or leader);
* ``move``: one of the stream's peers replaced with ``STREAM.PEER.REMOVE`` (five servers).

Workload: publishers with ``Nats-Msg-Id`` that retry a publish until it is acknowledged
(``reliability.checker``'s self-describing payloads); in three schedules of ten a durable
pull consumer that acknowledges every message with ack-sync (sim/consumer.py). Checks, once
every fault has healed and the replicas converged: the stream's copy on every replica holds
every acknowledged message once, in order, at the sequence its PubAck named, and the
replicas are identical; the consumer's rules (sim/consumer.py). And while a cut leaves a
server with at most half of the stream's peers, reads through a client of that server
(``probe``): once its lease has run out it answers none as the stream's leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedded_cluster import store_messages
from reliability.checker import History, Outcome, Report, StoredMsg, check, make_payload, msg_id

from natsd.config.cluster import parse_go_url
from natsd.config.options import ClusterOptions
from natsd.core import ids
from natsd.jetstream.cluster.replica import LEASE
from natsd.server import Server
from natsd.testing.faultfs import FaultFS
from sim.client import NoResponders, SimClient
from sim.net import Endpoint, SimNetwork

__all__ = ["JsWorld", "LoopClock", "SimFailure", "seeded_ids", "virtual_cpu"]

CLUSTER = "sim"
STREAM = "SIM"
CONSUMER = "W"
ROUTE_PORT = 6200
CLIENT_PORT = 4200
_EPOCH_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


class SimFailure(AssertionError):
    """What a schedule broke, with the seed that replays it."""


class LoopClock:
    """The ``Clock`` of a server on the virtual loop: wall and monotonic time from it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def time_ns(self) -> int:
        return _EPOCH_NS + int(self.loop.time() * 1e9)

    def monotonic(self) -> float:
        return self.loop.time()


class _SeededSecrets:
    """``secrets``' two functions natsd's ids use, drawn from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choice(self, seq: Any) -> Any:
        return self.rng.choice(seq)

    def randbelow(self, n: int) -> int:
        return self.rng.randrange(n)


@contextlib.contextmanager
def seeded_ids(seed: int) -> Iterator[None]:
    """Server ids and NUIDs from ``seed`` (they decide duplicate-route resolution), and the
    ``random`` module seeded too (consumer back-off jitter, generated names)."""
    saved = ids.secrets
    state = random.getstate()
    ids.secrets = _SeededSecrets(random.Random(seed ^ 0x5EED))  # type: ignore[assignment]
    random.seed(seed)
    try:
        yield
    finally:
        ids.secrets = saved  # type: ignore[assignment]
        random.setstate(state)


# natsd modules that read the CPU clock (``time.perf_counter``) to decide what runs when:
# connection/fairness.py and the client read path size a client's input slices by what
# reading took, and defer the rest of a read to a later loop turn once a turn has used 2 ms
# (or a read is more than 1 ms of measured work). On a loaded machine that cut reads at
# different places from one run to the next, and one seed ran two schedules.
_CPU_CLOCK_READERS = ("natsd.connection.fairness", "natsd.connection.client")


class _VirtualCpuTime:
    """The ``time`` module as those modules see it in a simulation: ``perf_counter`` is the
    running loop's clock, which stands still within a callback (the simulated CPU takes
    no time, as the loop's clock says), the rest is the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def perf_counter() -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # (not on the loop: no simulated server runs there)
            return time.perf_counter()


@contextlib.contextmanager
def virtual_cpu() -> Iterator[None]:
    """Within: ``_CPU_CLOCK_READERS`` read the loop's clock as their CPU clock, so no read
    is cut by how long processing took on this machine. A module that no longer reads
    ``time`` as a module attribute fails the run rather than leave it to the machine's
    load. (Compiled modules keep their own reference: this tier runs pure Python.)"""
    mods = [importlib.import_module(m) for m in _CPU_CLOCK_READERS]
    for m in mods:
        if getattr(m, "time", None) is not time:
            raise RuntimeError(f"{m.__name__} has no module attribute time: update sim/world.py")
    fake = _VirtualCpuTime()
    for m in mods:
        m.time = fake  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for m in mods:
            m.time = time  # type: ignore[attr-defined]


@dataclass
class Incarnation:
    """One server object: a restart makes the next one, on the disk the last one left."""

    name: str
    gen: int
    server: Server
    ep: Endpoint
    fs: FaultFS
    store: Path


@dataclass
class JsWorld:
    tmp: Path
    seed: int
    size: int = 3
    log: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.rng = random.Random(self.seed)
        self.net = SimNetwork(self.loop, random.Random(self.rng.getrandbits(64)))
        self.clock = LoopClock(self.loop)
        self.names = [f"n{i}" for i in range(1, self.size + 1)]
        self.live: dict[str, Incarnation] = {}
        self.gens: dict[str, int] = dict.fromkeys(self.names, 0)
        self.burials: list[asyncio.Task[None]] = []
        self.history = History()
        self.publishing = False

    # ---------------------------------------------------------------- servers
    def say(self, what: str) -> None:
        self.log.append(f"{self.loop.time():9.3f} {what}")

    def route_port(self, name: str) -> int:
        return ROUTE_PORT + self.names.index(name)

    def client_port(self, name: str) -> int:
        return CLIENT_PORT + self.names.index(name)

    async def start(self, name: str, store: Path | None = None) -> Server:
        gen = self.gens[name] + 1
        self.gens[name] = gen
        store = store if store is not None else self.tmp / f"{name}.{gen}"
        store.mkdir(parents=True, exist_ok=True)
        fs = FaultFS(store)
        ep = self.net.endpoint(name, f"{name}#{gen}")
        routes = [parse_go_url(f"nats-route://127.0.0.1:{self.route_port(n)}") for n in self.names]
        cluster = ClusterOptions(
            name=CLUSTER, host="127.0.0.1", port=self.route_port(name), routes=routes
        )
        srv = Server(
            host="127.0.0.1",
            port=0,
            server_name=name,
            cluster=cluster,
            http_port=-1,
            jetstream=True,
            store_dir=str(store),
            file_io=fs,
            clock=self.clock,
            route_net=self.net.route_net(ep),
            rng=random.Random(self.rng.getrandbits(64)),
        )
        await srv.start()
        self.net.listeners[self.client_port(name)] = (ep, srv.new_client)
        self.live[name] = Incarnation(name, gen, srv, ep, fs, store)
        self.say(f"start {ep}")
        return srv

    async def start_all(self) -> None:
        """Every server, in a seeded order, a seeded few milliseconds apart."""
        order = list(self.names)
        self.rng.shuffle(order)
        for name in order:
            await self.start(name)
            await asyncio.sleep(self.rng.random() * 0.05)
        await self.until(lambda: self.meta_leader() != "", 20.0, "no meta leader")
        await self.until(
            lambda: all(
                len(i.server.js_cluster.meta.servers) == self.size for i in self.live.values()
            ),
            20.0,
            "servers do not all see each other",
        )

    def crash(self, name: str) -> None:
        """Power loss: the network forgets the server at once; what its disk holds now
        (torn writes half of the time) is where it starts again."""
        inc = self.live.pop(name)
        self.net.crash(inc.ep)
        image = self.tmp / f"{name}.{inc.gen + 1}"
        torn = self.rng.random() < 0.5
        inc.fs.materialize(image, random.Random(self.rng.getrandbits(64)), torn)
        self.say(f"crash {inc.ep} (torn={torn})")
        # the old object still holds timers and tasks: stop it, out of everyone's reach
        self.burials.append(self.loop.create_task(self._bury(inc)))

    async def _bury(self, inc: Incarnation) -> None:
        with contextlib.suppress(Exception):
            await inc.server.shutdown()
        shutil.rmtree(inc.store, ignore_errors=True)

    async def revive(self, name: str) -> None:
        await asyncio.gather(*self.burials)
        self.burials.clear()
        await self.start(name, self.tmp / f"{name}.{self.gens[name] + 1}")

    async def restart(self, name: str) -> None:
        inc = self.live.pop(name)
        self.say(f"stop {inc.ep}")
        await inc.server.shutdown()
        await self.start(name, inc.store)

    async def stop_all(self) -> None:
        for name in list(self.live):
            await self.live.pop(name).server.shutdown()
        await asyncio.gather(*self.burials)

    # ---------------------------------------------------------------- who is who
    def meta_leader(self) -> str:
        for name, inc in self.live.items():
            jc = inc.server.js_cluster
            if jc is not None and jc.is_leader():
                return name
        return ""

    def stream(self, name: str, stream: str = STREAM) -> Any:
        """Server ``name``'s replica of ``stream`` (None: not there, or the server is down)."""
        inc = self.live.get(name)
        js = inc.server.jetstream if inc is not None else None
        if js is None or "$G" not in js.accounts:
            return None
        return js.accounts["$G"].streams.get(stream)

    async def create_stream(self, tag: str, cfg: dict[str, Any]) -> None:
        """Create the stream ``cfg`` through a client ``tag``, asking again while the meta
        group has no leader or refuses it for now."""
        c = await self.client(tag)
        try:
            for _ in range(20):
                try:
                    r = await self.api(c, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
                except (TimeoutError, NoResponders, ConnectionError):
                    await asyncio.sleep(0.2)
                    continue
                if "error" not in r:
                    return
                self.say(f"create: {r['error']}")
                await asyncio.sleep(0.2)
            raise SimFailure(f"seed {self.seed}: stream {cfg['name']} could not be created")
        finally:
            c.close()

    def stream_leader(self) -> str:
        for name in self.live:
            s = self.stream(name)
            if s is not None and s.replica is not None and s.replica.leading:
                return name
        return ""

    def stream_peers(self) -> list[str]:
        """The stream's peers in the meta leader's assignment (all servers' when none)."""
        ml = self.meta_leader()
        if ml:
            a = self.live[ml].server.js_cluster.meta.stream("$G", STREAM)
            if a is not None:
                return list(a.peers)
        return [n for n in self.names if self.stream(n) is not None]

    def failure(self, what: str) -> SimFailure:
        return SimFailure(f"seed {self.seed}: {what}")

    async def until(self, cond: Callable[[], Any], within: float, what: str) -> None:
        deadline = self.loop.time() + within
        while not cond():
            if self.loop.time() > deadline:
                raise SimFailure(f"seed {self.seed}: {what} within {within}s")
            await asyncio.sleep(0.02)

    # ---------------------------------------------------------------- clients
    async def client(
        self, tag: str, server: str | None = None, rng: random.Random | None = None
    ) -> SimClient:
        """A connected client of ``server`` (by default a live one drawn from ``rng``, the
        world's generator unless given)."""
        for _ in range(50):
            if server is None and not self.live:
                await asyncio.sleep(0.1)
                continue
            name = server if server is not None else (rng or self.rng).choice(sorted(self.live))
            if name not in self.live:
                await asyncio.sleep(0.1)
                continue
            c = SimClient(tag)
            ep = self.net.endpoint(f"client-{tag}", f"{tag}>{name}")
            # (a refused dial leaves ``connected`` unresolved: the wait below gives up)
            self.net.connect(ep, self.client_port(name), lambda c=c: c, 1.0, _ignore)
            try:
                await asyncio.wait_for(asyncio.shield(c.connected), 1.0)
                return c
            except (ConnectionError, TimeoutError):
                c.close()
                await asyncio.sleep(0.1)
        raise SimFailure(f"seed {self.seed}: client {tag} could not connect")

    async def api(self, c: SimClient, subject: str, body: Any = None) -> dict[str, Any]:
        data = b"" if body is None else json.dumps(body).encode()
        out: dict[str, Any] = json.loads(await c.request(subject, data, timeout=3.0))
        return out

    # ---------------------------------------------------------------- workload
    async def publisher(self, pid: int, count: int) -> None:
        """Publish ``count`` messages, each retried with its Nats-Msg-Id until acknowledged
        (or the run stops publishing: then it is unknown)."""
        rng = random.Random(self.rng.getrandbits(64))
        c: SimClient | None = None
        for counter in range(count):
            data = make_payload(pid, counter, rng.randint(16, 600), rng)
            hdr = {"Nats-Msg-Id": msg_id(pid, counter)}
            outcome, seq = Outcome.UNKNOWN, None
            c, reply = await self.publish_answered(c, f"p{pid}", f"sim.{pid}", data, hdr, rng)
            if reply is not None:
                outcome, seq = Outcome.ACKED, int(reply["seq"])
            self.history.record(pid, counter, outcome, seq)
            if outcome is not Outcome.ACKED:
                return
            await asyncio.sleep(rng.random() * 0.02)
        if c is not None:
            c.close()

    async def publish_answered(
        self,
        c: SimClient | None,
        tag: str,
        subject: str,
        data: bytes,
        hdr: dict[str, str],
        rng: random.Random,
        pick: random.Random | None = None,
    ) -> tuple[SimClient | None, dict[str, Any] | None]:
        """A publish (with its ``Nats-Msg-Id`` in ``hdr``) sent again until it is answered
        without an error, through ``c`` or a new client of a server drawn from ``pick``
        (the world's generator unless given); the client and the answer (None: the run
        stopped publishing first)."""
        while self.publishing:
            if c is None or c.closed:
                c = await self.client(tag, rng=pick)
            try:
                reply = json.loads(
                    await c.request(subject, data, hdr, timeout=rng.uniform(0.5, 2.0))
                )
            except (TimeoutError, NoResponders, ConnectionError):
                await asyncio.sleep(rng.uniform(0.01, 0.2))
                continue
            if "error" in reply:
                await asyncio.sleep(rng.uniform(0.01, 0.2))
                continue
            out: dict[str, Any] = reply
            return c, out
        return c, None

    # ---------------------------------------------------------------- reads through a cut
    def cut_off(self) -> list[str]:
        """The live servers that the cuts leave with at most half of the stream's peers
        (themselves included): none of them can hold a leader's lease."""
        peers = set(self.stream_peers())
        out = []
        for n in sorted(self.live):
            reach = {p for p in peers if p == n or not self.net.is_cut(n, p)}
            if 2 * len(reach) <= len(peers):
                out.append(n)
        return out

    async def probe(self, name: str, until: float, consumer: bool) -> None:
        """Reads through a client of ``name``, cut off from a majority of the stream's
        peers since now, every 0.1 s until ``until``: ``STREAM.INFO``, ``STREAM.MSG.GET``
        and (with a consumer) ``CONSUMER.INFO``. Only the stream's leader answers the last
        two, and only while it holds its lease: an answer from a majority of its group to
        a request it sent within ``LEASE`` (cluster/group.has_lease). None can reach it
        now, so for a read sent ``LEASE`` after the cut it answers none of them, and no
        ``STREAM.INFO`` naming itself leader (a replica whose group has had no leader for a
        while answers one from its own store, naming no leader)."""
        loop = self.loop
        expired = loop.time() + LEASE + 0.02
        reads = [
            ("info", f"$JS.API.STREAM.INFO.{STREAM}", b""),
            ("get", f"$JS.API.STREAM.MSG.GET.{STREAM}", b'{"seq":1}'),
        ]
        if consumer:
            reads.append(("consumer", f"$JS.API.CONSUMER.INFO.{STREAM}.{CONSUMER}", b""))
        c = await self.client(f"probe-{name}", server=name)

        async def ask(kind: str, subject: str, body: bytes) -> tuple[str, float, Any]:
            sent = loop.time()
            try:
                return kind, sent, json.loads(await c.request(subject, body, timeout=0.3))
            except (TimeoutError, NoResponders, ConnectionError):
                return kind, sent, None

        asks: list[asyncio.Future[tuple[str, float, Any]]] = []
        while loop.time() < until:
            asks.extend(asyncio.ensure_future(ask(*r)) for r in reads)
            await asyncio.sleep(0.1)
        answers = await asyncio.gather(*asks)
        c.close()
        as_leader = [
            (kind, sent, a)
            for kind, sent, a in answers
            if a is not None and (kind != "info" or (a.get("cluster") or {}).get("leader") == name)
        ]
        late = [(k, t, a) for k, t, a in as_leader if t >= expired]
        self.say(
            f"probe {name}: {len(answers)} reads, {len(as_leader) - len(late)} answered as "
            f"leader within the lease, {len(late)} after it"
        )
        if late:
            kind, sent, a = late[0]
            raise self.failure(
                f"{name}, cut off since {expired - LEASE - 0.02:.3f}, answered {len(late)} "
                f"reads as the stream's leader after its lease ran out; the first, a {kind} "
                f"sent at {sent:.3f}: {_gist(a)}"
            )

    # ---------------------------------------------------------------- checks
    def contents(self, name: str) -> list[tuple[int, str, bytes, int, bytes]]:
        s = self.stream(name)
        return [] if s is None else store_messages(s.store)

    def converged(self, peers: list[str]) -> bool:
        states = []
        for n in peers:
            s = self.stream(n)
            if s is None:
                return False
            st = s.store.state()
            states.append((st.msgs, st.first_seq, st.last_seq))
        return len(set(states)) == 1

    def check_replicas(self, peers: list[str]) -> Report:
        first = self.contents(peers[0])
        for n in peers[1:]:
            other = self.contents(n)
            if other != first:
                diff = next(
                    (a, b) for a, b in zip([*first, None], [*other, None], strict=False) if a != b
                )
                raise SimFailure(
                    f"seed {self.seed}: replicas {peers[0]} and {n} differ "
                    f"({len(first)} vs {len(other)} messages; first difference {diff!r:.200})"
                )
        stored = [StoredMsg(seq, subj, data, _msg_id(hdr)) for seq, subj, data, _ts, hdr in first]
        return check(self.history, stored)


def _gist(answer: dict[str, Any]) -> str:
    """What an API answer says about the stream or consumer (not its config)."""
    keys = ("error", "cluster", "state", "message", "delivered", "ack_floor", "num_pending")
    return json.dumps({k: answer[k] for k in keys if k in answer})[:500]


def _ignore(proto: Any, why: str) -> None:
    return None


def _msg_id(hdr: bytes) -> str | None:
    for line in hdr.split(b"\r\n"):
        if line.lower().startswith(b"nats-msg-id:"):
            return line.split(b":", 1)[1].strip().decode()
    return None


def fresh_tmp(base: Path, seed: int) -> Path:
    d = base / f"seed-{seed}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d
