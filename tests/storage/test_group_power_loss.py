"""Power loss under the node log: in-process GroupHosts (cluster/group.py), each WAL
(storage/wal.py) on its own fault-injecting file layer (tests/reliability/faultfs.py),
joined by a seeded network that delays, drops, duplicates and reorders frames and now and
then isolates a node.

A run proposes uniquely numbered entries to the leaders of a few groups and cuts the power
of one node, or of all of them, at random points: at an arbitrary file operation (so in the
middle of a WAL append, between the write and its fdatasync, during a segment rotation, a
compaction or the recovery of the previous cut), or between a turn's ``prepare`` and its
sync. A cut node's disk becomes what a power loss could leave (unsynced writes dropped or
torn, FaultFS.materialize); the node is rebuilt from that WAL (``Wal.open``, a new
``GroupHost``, ``restore`` of every group, its state machine from the snapshot in the log)
and carries on. An entry is acknowledged once the leader has applied it.

Checked throughout:

- a node's durable (term, vote) of a group never goes backwards: the term never drops, and
  within a term a vote, once cast, never changes (a double vote after power loss); judged
  after every WAL sync and every restart;
- at most one leader per term (every step);
- every acknowledged entry is in the synced log (or the logged snapshot) of a majority
  (after every restart, and every 20 steps);
- every node applies the same entry at the same index, in increasing order (every apply);

and at the end, after the network heals and every node is back, every node has applied the
same entries in the same order, every acknowledged entry among them, none twice.

A failing seed names itself; replay it with ``NATSD_PL_SEED=<seed> NATSD_PL_CUTS=<cuts>
.venv/bin/python -m pytest -q tests/storage/test_group_power_loss.py -k replay`` (the
message spells it out). The default run (25 seeds x 20 cuts)
is in both tiers of ``make test``, pure and compiled; ``pytest -m soak
tests/storage/test_group_power_loss.py`` runs 400 more seeds of 40 cuts each.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from reliability.faultfs import Crash, FaultFS

from natsd.cluster.frames import decode_frame
from natsd.cluster.group import GroupHost, raft_id
from natsd.raft.state import ErrProposalDropped
from natsd.raft.types import MessageType
from natsd.storage.wal import Wal, WalError

# The default run: SEEDS seeds of CUTS power cuts each (500 cuts), in BATCHES pytest items.
SEEDS = 25
CUTS = 20
BATCHES = 5
SOAK_SEEDS = 400
SOAK_BATCHES = 20
FIVE_NODES_EVERY = 4  # every 4th seed runs five nodes, the rest three
PROMISES = {MessageType.MsgAppResp, MessageType.MsgVoteResp, MessageType.MsgPreVoteResp}

State = list[tuple[int, bytes]]  # a group's state machine: the applied (index, data)


class PowerLossFailure(AssertionError):
    pass


def _encode_state(state: State) -> bytes:
    return b"\n".join(b"%d %s" % (i, d) for i, d in state)


def _decode_state(data: bytes) -> State:
    out: State = []
    for line in data.split(b"\n") if data else ():
        i, d = line.split(b" ", 1)
        out.append((int(i), d))
    return out


@dataclass
class Node:
    name: str
    id: int
    gen: int = 0
    fs: FaultFS | None = None
    host: GroupHost | None = None
    pending: list | None = None  # type: ignore[type-arg]  # work prepared, not yet synced
    down_until: int = -1  # down (power off) until this step; -1: up
    states: dict[bytes, State] = field(default_factory=dict)
    # per group, what its WAL held when last synced: entries by index, and the snapshot's
    # state (what a power loss cannot take away, whatever else it does)
    durable: dict[bytes, tuple[dict[int, bytes], dict[int, bytes], bytes]] = field(
        default_factory=dict
    )


class Sim:
    def __init__(
        self, seed: int, root: Path, cuts: int = CUTS, fs_class: type[FaultFS] = FaultFS
    ) -> None:
        self.seed = seed
        self.fs_class = fs_class
        self.rng = random.Random(seed)
        rng = self.rng
        self.root = root
        self.n = 5 if seed % FIVE_NODES_EVERY == FIVE_NODES_EVERY - 1 else 3
        self.quorum = self.n // 2 + 1
        self.groups = [b"G%d" % i for i in range(rng.randint(1, 3))]
        self.segment_size = rng.choice((1024, 2048, 8192))
        self.drop = rng.choice((0.0, 0.05, 0.15))
        self.dup = rng.choice((0.0, 0.03))
        self.max_delay = rng.choice((0, 1, 3))
        self.split_turns = rng.choice((0.0, 0.3, 0.7))  # how often prepare and sync straddle a step
        self.cut_rate = rng.choice((0.015, 0.03, 0.06))  # per step
        self.cuts_wanted = cuts
        names = [f"n{i + 1}" for i in range(self.n)]
        self.nodes = {raft_id(n): Node(n, raft_id(n)) for n in names}
        self.now = 0
        self.wire: list[tuple[int, int, int, int, bytes]] = []  # (due, seq, src, dest, frame)
        self.seq = 0
        self.isolated: int | None = None
        self.isolated_until = 0
        self.next_value = 0
        self.acked: dict[bytes, dict[bytes, int]] = {g: {} for g in self.groups}  # data -> index
        self.committed: dict[bytes, dict[int, bytes]] = {g: {} for g in self.groups}
        self.leaders: dict[tuple[bytes, int], int] = {}
        # (node, group) -> the last (term, vote) seen durable
        self.hard: dict[tuple[int, bytes], tuple[int, int]] = {}
        self.proposing = True
        self.cuts = 0
        self.node_cuts = 0
        self.mid_op_cuts = 0
        self.cluster_cuts = 0  # cuts of every node at once
        self.unsynced_cuts = 0  # nodes cut with WAL writes not yet synced
        self.torn_tails = 0  # restarts whose recovery cut a torn tail off
        self.restarts = 0
        self.snapshots_installed = 0
        self.compactions = 0

    # ------------------------------------------------------------------ failures
    def fail(self, msg: str) -> None:
        raise PowerLossFailure(
            f"seed {self.seed} (n={self.n}) at step {self.now}, cut {self.cuts}: {msg}\n"
            f"replay: NATSD_PL_SEED={self.seed} NATSD_PL_CUTS={self.cuts_wanted} "
            ".venv/bin/python -m pytest -q "
            "tests/storage/test_group_power_loss.py -k replay"
        )

    # ------------------------------------------------------------------ nodes
    def _disk(self, node: Node) -> Path:
        return self.root / node.name / f"gen{node.gen}"

    def _callbacks(self, node: Node, group: bytes):  # type: ignore[no-untyped-def]
        def apply(index: int, data: bytes) -> None:
            st = node.states[group]
            if st and index <= st[-1][0]:
                self.fail(f"{node.name} {group!r} applied {index} after {st[-1][0]}")
            st.append((index, data))
            seen = self.committed[group].setdefault(index, data)
            if seen != data:
                self.fail(f"{node.name} {group!r} applied {data!r} at {index}, others {seen!r}")
            host = node.host
            assert host is not None
            if host.groups[group].node.is_leader():
                self.acked[group].setdefault(data, index)

        def install(index: int, data: bytes) -> None:
            st = _decode_state(data)
            for i, d in st:
                if self.committed[group].setdefault(i, d) != d:
                    self.fail(f"{node.name} {group!r} installed {d!r} at {i}")
            node.states[group] = st
            self.snapshots_installed += 1

        return apply, install

    def _send(self, src: Node):  # type: ignore[no-untyped-def]
        def send(peer: int, frame: bytes) -> None:
            host = src.host
            assert host is not None
            if (host.wal.dirty or host.wal._buf) and host.needs_sync:
                # requests may leave before the sync (etcd's msgs); what promises this
                # node's disk (append and vote responses) may not
                promised = [m.type.name for _, m in decode_frame(frame) if m.type in PROMISES]
                if promised:
                    self.fail(f"{src.name} sent {promised} before its WAL sync")
            if self.rng.random() < self.drop:
                return
            for _ in range(2 if self.rng.random() < self.dup else 1):
                self.seq += 1
                due = self.now + self.rng.randint(0, self.max_delay)
                self.wire.append((due, self.seq, src.id, peer, frame))

        return send

    def _host(self, node: Node) -> GroupHost:
        assert node.fs is not None
        wal = Wal.open(str(self._disk(node) / "wal"), io=node.fs, segment_size=self.segment_size)
        rand = random.Random(f"{self.seed}/{node.name}/{node.gen}").randrange
        return GroupHost(node.id, wal, self._send(node), rand=rand)

    def boot(self) -> None:
        voters = sorted(self.nodes)
        for node in self.nodes.values():
            self._disk(node).mkdir(parents=True)
            node.fs = self.fs_class(self._disk(node))
            node.host = host = self._host(node)
            for g in self.groups:
                node.states[g] = []
                apply, install = self._callbacks(node, g)
                host.create(g, voters, apply, install)
            self._capture(node)

    def power_cut(self, node: Node) -> None:
        """The disk as a power loss now would leave it; the node is off until restarted."""
        fs = node.fs
        assert fs is not None
        if fs.unsynced(self._disk(node)):
            self.unsynced_cuts += 1
        old = self._disk(node)
        node.gen += 1
        # its own generator: materialize draws per file, and the seed must replay alone
        fs.materialize(self._disk(node), random.Random(self.rng.random()), torn=True)
        for fd in list(fs.fds):
            fs.close(fd)  # the old process's descriptors (its WAL segment)
        node.fs = None
        node.host = None
        node.pending = None
        node.states = {}
        node.down_until = self.now + self.rng.choice((0, 0, 1, 5, 20))
        self.node_cuts += 1
        _rmtree(old)

    def restart(self, node: Node) -> None:
        """Rebuild the node from its WAL. Power may go again during recovery."""
        node.down_until = -1
        node.fs = self.fs_class(self._disk(node))
        if self.rng.random() < 0.1:
            node.fs.crash_at = self.rng.randint(1, 6)
        try:
            node.host = host = self._host(node)
            self.restarts += 1
            self.torn_tails += host.wal.cut_bytes > 0
            if set(host.wal.groups) != set(self.groups):
                self.fail(f"{node.name} recovered groups {sorted(host.wal.groups)}")
            for g in self.groups:
                log = host.wal.groups[g]
                if log.damaged:
                    self.fail(f"{node.name} {g!r} damaged after a power loss")
                node.states[g] = _decode_state(log.snap_data) if log.snap_index else []
                apply, install = self._callbacks(node, g)
                host.restore(g, apply, log.snap_index, install)
            self._capture(node)
            self._check_acked_durable()  # what the power loss left must still hold them
        except Crash:
            self.cuts += 1
            self.mid_op_cuts += 1
            self.power_cut(node)
            node.down_until = self.now
        except WalError as e:
            self.fail(f"{node.name}: its WAL does not open after a power loss: {e}")

    # ------------------------------------------------------------------ checks
    def _capture(self, node: Node) -> None:
        """At a point where the node's WAL is synced: what it holds is durable. Its (term,
        vote) of each group must not have gone backwards; its log is remembered for the
        majority check."""
        host = node.host
        assert host is not None
        wal = host.wal
        if wal.dirty or wal._buf:
            return  # written but not synced: not durable yet
        for g in self.groups:
            log = wal.groups[g]
            prev = node.durable.get(g)
            snap = (
                prev[1]
                if prev is not None and prev[2] == log.snap_data
                else dict(_decode_state(log.snap_data))
            )
            node.durable[g] = ({i: d for i, _t, _k, d in log.entries}, snap, log.snap_data)
            cur = (log.term, log.vote)
            was = self.hard.get((node.id, g))
            if was is not None:
                if cur[0] < was[0]:
                    self.fail(f"{node.name} {g!r}: term went back from {was} to {cur}")
                if cur[0] == was[0] and was[1] and cur[1] != was[1]:
                    self.fail(f"{node.name} {g!r}: vote changed within a term, {was} -> {cur}")
            self.hard[(node.id, g)] = cur

    def _check_leaders(self) -> None:
        for node in self.up():
            assert node.host is not None
            for g in self.groups:
                r = node.host.groups[g].node
                if r.is_leader():
                    was = self.leaders.setdefault((g, r.term()), node.id)
                    if was != node.id:
                        self.fail(f"{g!r} term {r.term()}: two leaders, {was} and {node.id}")

    def _check_acked_durable(self) -> None:
        """Every acknowledged entry is in the synced log, or the logged snapshot, of a
        majority (a node that is off counts by what it held at its last sync: its restart
        then shows whether the power loss kept it)."""
        for g in self.groups:
            logs = [nd.durable[g] for nd in self.nodes.values() if g in nd.durable]
            for data, index in self.acked[g].items():
                n = sum(1 for ents, snap, _ in logs if (ents.get(index) or snap.get(index)) == data)
                if n < self.quorum:
                    self.fail(f"acked {data!r} at {index} of {g!r} on {n} disks of {self.n}")

    # ------------------------------------------------------------------ the loop
    def up(self) -> list[Node]:
        return [nd for nd in self.nodes.values() if nd.host is not None]

    def _deliver(self) -> None:
        due = [w for w in self.wire if w[0] <= self.now]
        self.wire = [w for w in self.wire if w[0] > self.now]
        self.rng.shuffle(due)  # frames due at once arrive in any order
        for _due, _seq, src, dest, frame in due:
            node = self.nodes[dest]
            if node.host is None:
                continue
            if self.isolated in (src, dest) and self.now < self.isolated_until:
                continue
            self._guard(node, lambda h=node.host, f=frame: h.receive(f))

    def _guard(self, node: Node, fn) -> None:  # type: ignore[no-untyped-def]
        """Run fn on node; a Crash from its file layer is a power cut there."""
        try:
            fn()
        except Crash:
            self.mid_op_cuts += 1
            self._cut_event(node)

    def _cut_event(self, node: Node) -> None:
        self.cuts += 1
        # a quarter of the cuts take the whole cluster's power at once
        everyone = self.rng.random() < 0.25
        self.cluster_cuts += everyone
        for victim in self.up() if everyone else [node]:
            self.power_cut(victim)

    def _propose(self) -> None:
        if not self.proposing:
            return
        for g in self.groups:
            if self.rng.random() < 0.5:
                continue
            for node in self.up():
                assert node.host is not None
                if not node.host.groups[g].node.is_leader():
                    continue
                for _ in range(self.rng.randint(1, 3)):
                    self.next_value += 1
                    try:
                        node.host.propose(g, b"v%d" % self.next_value)
                    except ErrProposalDropped:
                        pass

    def _turn(self, node: Node) -> None:
        host = node.host
        assert host is not None
        if node.pending is not None:
            work, node.pending = node.pending, None
            host.wal.sync()
            self._capture(node)
            host.finish(work)
        if self.rng.random() < self.split_turns:
            # write now, sync next step: frames and proposals are stepped in between
            work = host.prepare()
            if work:
                node.pending = work
        else:
            host.turn()
        if node.pending is None:
            self._capture(node)

    def _maybe_compact(self, node: Node) -> None:
        host = node.host
        assert host is not None
        if node.pending is not None:
            return
        for g in self.groups:
            rg = host.groups[g]
            log = host.wal.groups[g]
            if rg.applied - log.snap_index >= 12 and self.rng.random() < 0.2:
                st = node.states[g]
                # the state machine holds exactly what was applied up to rg.applied
                host.compact(g, rg.applied, _encode_state(st))
                self.compactions += 1
                self._capture(node)

    def step(self, faults: bool) -> None:
        self.now += 1
        rng = self.rng
        for node in self.nodes.values():
            if node.host is None and 0 <= node.down_until <= self.now:
                self.restart(node)
        for node in self.up():
            assert node.host is not None
            node.host.tick()
        self._deliver()
        self._propose()
        for node in self.up():
            if node.host is None:
                continue  # cut with the whole cluster during an earlier node's turn
            self._guard(node, lambda n=node: self._turn(n))
            if node.host is not None:
                self._guard(node, lambda n=node: self._maybe_compact(n))
        if faults:
            if self.isolated is None or self.now >= self.isolated_until:
                self.isolated = None
                if rng.random() < 0.01:
                    self.isolated = rng.choice(sorted(self.nodes))
                    self.isolated_until = self.now + rng.randint(10, 40)
            up = self.up()
            if up and rng.random() < self.cut_rate:
                victim = rng.choice(up)
                assert victim.fs is not None
                if rng.random() < 0.7:
                    # at one of its next file operations, wherever that falls
                    victim.fs.crash_at = victim.fs.ops + rng.randint(1, 8)
                else:
                    self._cut_event(victim)  # now: between turns or between prepare and sync
        self._check_leaders()
        if self.now % 20 == 0:
            self._check_acked_durable()

    def run(self) -> Sim:
        try:
            self.boot()
            steps = 0
            while self.cuts < self.cuts_wanted:
                self.step(faults=True)
                steps += 1
                if steps > 400 * self.cuts_wanted:
                    self.fail(f"only {self.cuts} cuts in {steps} steps")
            self.heal()
        except PowerLossFailure:
            raise
        except Exception as e:  # e.g. the engine's RaftPanic on a log it cannot accept
            self.fail(f"{type(e).__name__}: {e}")
        return self

    def heal(self) -> None:
        """Every node back, no more faults, no more drops: everything converges."""
        self.drop = 0.0
        self.isolated = None
        self.split_turns = 0.0  # every turn ends within its step, so a step can be quiet
        for node in self.nodes.values():
            if node.fs is not None:
                node.fs.crash_at = 0
        # proposals for a while (every group commits in its current term), then quiet
        for i in range(3000):
            self.proposing = i < 60
            self.step(faults=False)
            for node in self.nodes.values():
                if node.fs is not None:
                    node.fs.crash_at = 0
            if self.now % 10 == 0 and self._converged():
                break
        else:
            self.fail("no convergence after healing: " + self._lag())
        self._check_acked_durable()
        for g in self.groups:
            final = next(iter(self.up())).states[g]
            datas = [d for _, d in final]
            if len(set(datas)) != len(datas):
                self.fail(f"{g!r}: an entry applied twice")
            have = dict(final)
            for data, index in self.acked[g].items():
                if have.get(index) != data:
                    self.fail(f"acked {data!r} at {index} of {g!r} lost")
            for index, data in self.committed[g].items():
                if have.get(index) != data:
                    self.fail(f"committed {data!r} at {index} of {g!r} lost")

    def _converged(self) -> bool:
        up = self.up()
        if len(up) < self.n or any(nd.pending is not None for nd in up):
            return False
        for g in self.groups:
            first = up[0].states[g]
            if not first or any(nd.states[g] != first for nd in up[1:]):
                return False
            if max(self.committed[g], default=0) > first[-1][0]:
                return False
            leaders = [nd for nd in up if nd.host.groups[g].node.is_leader()]  # type: ignore[union-attr]
            if len(leaders) != 1:
                return False
        return True

    def _lag(self) -> str:
        return "; ".join(
            f"{nd.name}: " + ", ".join(f"{g!r}={len(nd.states.get(g, []))}" for g in self.groups)
            for nd in self.nodes.values()
        )


def _rmtree(p: Path) -> None:
    if not p.exists():
        return
    for child in p.iterdir():
        if child.is_dir():
            _rmtree(child)
        else:
            child.unlink()
    p.rmdir()


def run_seed(seed: int, root: Path, cuts: int = CUTS, fs_class: type[FaultFS] = FaultFS) -> Sim:
    root.mkdir(parents=True, exist_ok=True)
    return Sim(seed, root / f"s{seed}", cuts, fs_class).run()


class LyingFS(FaultFS):
    """A disk whose fdatasync returns without making anything durable."""

    def fdatasync(self, fd: int) -> None:
        with self.lock:
            self._tick()


@pytest.mark.parametrize("batch", range(BATCHES))
def test_power_loss_seeds(batch: int, tmp_path: Path) -> None:
    per = SEEDS // BATCHES
    sims = [run_seed(s, tmp_path, CUTS) for s in range(batch * per, (batch + 1) * per)]
    for sim in sims:
        assert sim.cuts >= CUTS
        assert any(sim.acked[g] for g in sim.groups), f"seed {sim.seed} acknowledged nothing"
    # the batch cut where it matters: inside file operations, with writes not yet synced,
    # leaving torn tails; the whole cluster at once; around compactions and snapshots sent
    for what in ("mid_op_cuts", "unsynced_cuts", "torn_tails", "cluster_cuts", "compactions",
                 "snapshots_installed"):  # fmt: skip
        assert sum(getattr(sim, what) for sim in sims) > 0, what


def test_replay(tmp_path: Path) -> None:
    """Replays $NATSD_PL_SEED (default 0) with $NATSD_PL_CUTS cuts (default CUTS)."""
    cuts = int(os.environ.get("NATSD_PL_CUTS", str(CUTS)))
    sim = run_seed(int(os.environ.get("NATSD_PL_SEED", "0")), tmp_path, cuts)
    assert sim.cuts >= cuts


@pytest.mark.soak
@pytest.mark.parametrize("batch", range(SOAK_BATCHES))
def test_power_loss_soak(batch: int, tmp_path: Path) -> None:
    per = SOAK_SEEDS // SOAK_BATCHES
    for s in range(1000 + batch * per, 1000 + (batch + 1) * per):
        assert run_seed(s, tmp_path, CUTS * 2).cuts >= CUTS * 2


def test_the_checks_catch_a_disk_that_loses_synced_data(tmp_path: Path) -> None:
    """On a disk whose fdatasync does nothing, power loss takes back votes and acknowledged
    entries: the simulation must notice, and say which seed."""
    caught: list[str] = []
    for seed in range(12):
        try:
            run_seed(seed, tmp_path / "lying", CUTS, LyingFS)
        except PowerLossFailure as e:
            caught.append(str(e))
    assert len(caught) >= 9, caught
    assert all("NATSD_PL_SEED=" in c and f"NATSD_PL_CUTS={CUTS} " in c for c in caught)
    text = "\n".join(caught)
    assert "term went back" in text and "damaged" in text, text


def test_the_checks_catch_a_lost_ack_a_second_leader_and_a_changed_vote(tmp_path: Path) -> None:
    sim = run_seed(2, tmp_path)
    g = sim.groups[0]
    node = next(iter(sim.nodes.values()))
    # an acknowledged entry no disk holds
    sim.acked[g][b"ghost"] = 3
    with pytest.raises(PowerLossFailure, match="ghost"):
        sim._check_acked_durable()
    del sim.acked[g][b"ghost"]
    # another node already led the current leader's term
    leader = next(nd for nd in sim.up() if nd.host.groups[g].node.is_leader())  # type: ignore[union-attr]
    term = leader.host.groups[g].node.term()  # type: ignore[union-attr]
    sim.leaders[(g, term)] = next(i for i in sim.nodes if i != leader.id)
    with pytest.raises(PowerLossFailure, match="two leaders"):
        sim._check_leaders()
    # the disk showed a vote for someone else in the same term
    term, vote = sim.hard[(node.id, g)]
    sim.hard[(node.id, g)] = (term, vote + 1)
    with pytest.raises(PowerLossFailure, match="vote changed"):
        sim._capture(node)


def test_a_seed_runs_identically_twice(tmp_path: Path) -> None:
    def fingerprint(sim: Sim) -> tuple[object, ...]:
        acked = {g: sorted(a.items()) for g, a in sim.acked.items()}
        counts = (sim.now, sim.cuts, sim.node_cuts, sim.mid_op_cuts, sim.next_value)
        return (counts, sorted(sim.leaders.items()), acked)

    a = run_seed(5, tmp_path / "a")
    b = run_seed(5, tmp_path / "b")
    assert fingerprint(a) == fingerprint(b)
