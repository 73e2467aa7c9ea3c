"""A seeded, deterministic simulation of a Raft group of natsd.raft RawNodes (issue 17).

Three to five RawNodes run on a virtual clock (milliseconds) over a simulated network that
delays, drops, duplicates, reorders and partitions messages (every message goes through the
wire codec, so no two nodes share an object). Nodes crash and lose everything they had not
persisted: each node's disk is a MemoryStorage (entries, snapshot, HardState) that the
driver writes only while handling a Ready (or, with async_storage_writes, a
MsgStorageAppend), the way an application must: persist, then send, then apply, then
advance. A restart builds a new RawNode from that storage; the state machine, volatile,
comes back from the storage's snapshot. Clients propose at random times to random nodes.

After every event the invariants of raft_sim_check.Checker are checked; the driver adds
what only it sees: a message's promise (a vote, an acknowledged entry) is durable when the
message leaves, an entry handed over for applying is in storage, a ReadIndex read is not
older than what was committed when it was asked, every node applying a conf change arrives
at the same configuration; and an exception out of the engine fails the run, but for the
errors Go returns that an application drops (a dropped proposal, a response from a peer
the node no longer knows). At the end the
faults stop, the network heals, crashed nodes come back, and within a bounded virtual time
a leader must exist and every proposal made after the healing must be applied everywhere.

Besides proposals, clients ask for linearizable reads (ReadIndex), leadership transfers and,
in half the seeds, membership changes (ConfChange and ConfChangeV2, joint or not, learners,
removal of the leader) among a pool of n + 2 nodes; the application snapshots and compacts
its log now and then, so lagging nodes catch up through MsgSnap.

Everything random comes from one ``random.Random(seed)``: the fault schedule, the
network, and the engine's election timeouts (``Raft.rand``). The seed alone picks the
group's size and options, so a failure replays from its seed (see ``REPLAY``).
"""

from __future__ import annotations

import heapq
import random
from collections import deque

from raft_sim_check import COMPACTED, MISSING, Checker, Violation
from raft_sim_parts import (
    APPEND_WORK,
    APPLY_WORK,
    CONF,
    CRASH,
    DELIVER,
    HEAL,
    KIND_NAMES,
    LIVE_PROPOSE,
    PARTITION,
    PROPOSE,
    READ,
    READY,
    RESTART,
    SNAP_STATUS,
    TICK,
    TRANSFER,
    UNPARTITION,
    Node,
    Params,
    Stats,
    check_final_storage,
    check_promises,
    describe_event,
    is_leader,
    members_of,
    random_conf_change,
    random_partition,
)

from natsd.raft.codec import (
    decode_message,
    encode_message,
    unmarshal_conf_change,
    unmarshal_conf_change_v2,
)
from natsd.raft.core import Config
from natsd.raft.describe import LOCAL_APPEND_THREAD, LOCAL_APPLY_THREAD
from natsd.raft.logger import DiscardLogger
from natsd.raft.rawnode import Peer, SnapshotFailure, SnapshotFinish, new_raw_node
from natsd.raft.read_only import ReadState
from natsd.raft.state import ErrProposalDropped, ErrStepPeerNotFound, StateLeader
from natsd.raft.types import (
    ConfChangeI,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryConfChange,
    EntryNormal,
    HardState,
    Message,
    MsgProp,
    MsgSnap,
    Snapshot,
    SnapshotMetadata,
    is_empty_hard_state,
    is_empty_snap,
)

REPLAY = (
    "NATSD_RAFT_SEED={seed} .venv/bin/python -m pytest -q -p no:cacheprovider "
    "tests/raft/test_raft_simulation.py -k replay"
)


class SimulationFailure(AssertionError):
    """A seed that broke an invariant, liveness, or made the engine raise."""


class Simulation:
    def __init__(self, seed: int, fault_ms: int = 3000, async_writes: bool | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.p = self.params(fault_ms, async_writes)
        self.checker = Checker()
        self.checker.proposals = set()
        self.stats = Stats()
        self.now = 0
        self.seq = 0
        self.heap: list[tuple[int, int, int, int, int, object]] = []
        members = list(range(1, self.p.n + 1))
        pool = list(range(1, self.p.n + (3 if self.p.conf_changes else 1)))
        self.nodes: dict[int, Node] = {
            i: Node(i, 10 + self.rng.randrange(-1, 2), members, self.p.raft_bootstrap) for i in pool
        }
        self.pool = pool
        # The newest configuration any node applied, and the index it was applied at;
        # every node applying the entry at that index must arrive at the same one.
        self.config = ConfState(voters=list(members))
        self.configs: dict[int, ConfState] = {}
        # Directed links that drop everything (a partition).
        self.blocked: set[tuple[int, int]] = set()
        self.faults = True
        self.proposal_no = 0
        # Snapshots the driver made: data -> (index, term).
        self.snaps: dict[bytes, tuple[int, int]] = {}
        # payload -> the first index it was applied at.
        self.payload_index: dict[bytes, int] = {}
        self.live_payloads: list[bytes] = []
        # Linearizable reads (ReadIndex, ReadOnlySafe): request context -> the highest
        # index known committed when the read was asked; its ReadState may not be lower.
        self.reads: dict[bytes, int] = {}
        self.live_deadline = 0
        # The last events, formatted only for a failure's message.
        self.trace: deque[tuple[int, str, int, object]] = deque(maxlen=60)

    def params(self, fault_ms: int, async_writes: bool | None) -> Params:
        """The run's shape (a scripted scenario fixes its own)."""
        return Params(self.rng, fault_ms, async_writes)

    # -- the event queue ---------------------------------------------------------------

    def at(
        self, delay: int, kind: int, node: int = 0, inc: int = 0, payload: object = None
    ) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (self.now + delay, self.seq, kind, node, inc, payload))

    def expo(self, mean: int) -> int:
        return 1 + int(self.rng.expovariate(1.0 / mean)) if mean < 10**8 else 10**9

    # -- running -----------------------------------------------------------------------

    def run(self) -> Stats:
        try:
            self._run()
        except Violation as err:
            raise self.failure(f"invariant: {err}") from err
        except SimulationFailure:
            raise
        except Exception as err:
            raise self.failure(f"engine raised {type(err).__name__}: {err}") from err
        return self.stats

    def failure(self, what: str) -> SimulationFailure:
        lines = [
            f"raft simulation seed {self.seed} failed at t={self.now}ms: {what}",
            f"replay: {REPLAY.format(seed=self.seed)}",
            f"params: {self.p}",
            "last events:",
        ]
        lines += [
            f"  t={t} {kind} n{node} {describe_event(info)}" for t, kind, node, info in self.trace
        ]
        return SimulationFailure("\n".join(lines))

    def _run(self) -> None:
        for node in self.nodes.values():
            self.start(node)
        self.at(self.expo(self.p.propose_mean_ms), PROPOSE)
        self.at(self.expo(self.p.crash_mean_ms), CRASH)
        self.at(self.expo(self.p.partition_mean_ms), PARTITION)
        self.at(self.expo(self.p.read_mean_ms), READ)
        self.at(self.expo(self.p.transfer_mean_ms), TRANSFER)
        if self.p.conf_changes:
            self.at(self.expo(300), CONF)
        self.at(self.p.fault_ms, HEAL)
        self.loop()

    def loop(self) -> None:
        """Runs the events until the liveness check after the healing is satisfied."""
        heap = self.heap
        while heap:
            t, _, kind, nid, inc, payload = heapq.heappop(heap)
            self.now = t
            if kind == HEAL:
                self.heal()
                continue
            if kind == LIVE_PROPOSE:
                if self.live_propose(payload):
                    return
                continue
            if not self.faults and kind in (CRASH, PARTITION, PROPOSE, READ, TRANSFER, CONF):
                continue
            self.trace.append((t, KIND_NAMES[kind], nid, payload))
            if kind == PROPOSE:
                self.propose()
                self.at(self.expo(self.p.propose_mean_ms), PROPOSE)
            elif kind == CRASH:
                alive = [n for n in self.nodes.values() if n.rn is not None]
                if alive:
                    self.crash(self.rng.choice(alive))
                self.at(self.expo(self.p.crash_mean_ms), CRASH)
            elif kind == PARTITION:
                self.partition()
            elif kind == READ:
                self.read()
                self.at(self.expo(self.p.read_mean_ms), READ)
            elif kind == TRANSFER:
                self.transfer()
                self.at(self.expo(self.p.transfer_mean_ms), TRANSFER)
            elif kind == CONF:
                self.conf_change()
                self.at(self.expo(300), CONF)
            elif kind == UNPARTITION:
                self.blocked.clear()
                self.at(self.expo(self.p.partition_mean_ms), PARTITION)
            else:
                node = self.nodes[nid]
                if kind == RESTART:
                    if node.rn is None and not node.decommissioned:
                        self.start(node)
                    continue
                if node.rn is None or (inc != node.inc and kind != DELIVER):
                    if kind == DELIVER:
                        self.undeliverable(nid, payload)
                    continue
                if kind == TICK:
                    node.rn.tick()
                    self.at(node.tick_ms, TICK, nid, node.inc)
                elif kind == DELIVER:
                    self.deliver(node, payload)
                elif kind == READY:
                    node.ready_busy = False
                    self.handle_ready(node)
                elif kind == APPEND_WORK:
                    node.append_busy = False
                    self.append_work(node)
                elif kind == APPLY_WORK:
                    node.apply_busy = False
                    self.apply_work(node)
                elif kind == SNAP_STATUS:
                    to, ok = payload  # type: ignore[misc]
                    node.rn.report_snapshot(to, SnapshotFinish if ok else SnapshotFailure)
                if node.rn is not None:
                    self.observe(node)
                    self.schedule(node)
        raise Violation("the event queue ran dry")  # ticks never stop: unreachable

    def schedule(self, node: Node) -> None:
        """Schedules the node's Ready handling (and storage threads) a little later: the
        application does not react instantly, which lets events interleave."""
        assert node.rn is not None
        if not node.ready_busy and node.rn.has_ready():
            node.ready_busy = True
            self.at(self.disk_delay(), READY, node.id, node.inc)
        if node.append_q and not node.append_busy:
            node.append_busy = True
            self.at(self.disk_delay(), APPEND_WORK, node.id, node.inc)
        if node.apply_q and not node.apply_busy:
            node.apply_busy = True
            self.at(self.disk_delay(), APPLY_WORK, node.id, node.inc)

    def disk_delay(self) -> int:
        if self.faults and self.rng.random() < self.p.slow_disk_p:
            return self.rng.randrange(3, 30)
        return self.rng.randrange(0, 2)

    # -- node lifecycle ----------------------------------------------------------------

    def start(self, node: Node) -> None:
        p = self.p
        cfg = Config(
            id=node.id,
            election_tick=p.election_tick,
            heartbeat_tick=p.heartbeat_tick,
            storage=node.storage,
            max_size_per_msg=p.max_size_per_msg,
            max_committed_size_per_ready=p.max_committed,
            max_inflight_msgs=p.max_inflight,
            max_inflight_bytes=p.max_inflight_bytes,
            check_quorum=p.check_quorum,
            pre_vote=p.pre_vote,
            async_storage_writes=p.async_writes,
            disable_proposal_forwarding=not p.forwarding,
            step_down_on_removal=p.step_down_on_removal,
            logger=DiscardLogger(),
        )
        pre_crash_applied = node.applied
        rn = new_raw_node(cfg)
        st = node.storage
        if node.bootstrap and st.last_index() == 0 and st.hard_state is None:
            # First start (or a crash before the bootstrap was persisted).
            rn.bootstrap([Peer(i) for i in node.bootstrap])
        # Raft.rand is Go's globalRand.Intn; new_raft drew its first timeout from the
        # global one, so draw it again from the seed's rng.
        rn.raft.rand = self.rng.randrange
        rn.raft.reset_randomized_election_timeout()
        node.rn = rn
        node.inc += 1
        snap_index = node.storage.snap.metadata.index
        node.applied = snap_index
        node.conf_state = node.storage.snap.metadata.conf_state.clone()
        node.snap_floor = snap_index
        node.commit_ptr = snap_index
        node.ready_busy = node.append_busy = node.apply_busy = False
        self.checker.restored(node.id, pre_crash_applied, snap_index + 1, node.storage_term)
        self.at(self.rng.randrange(1, node.tick_ms + 1), TICK, node.id, node.inc)
        self.observe(node)
        self.schedule(node)

    def crash(self, node: Node) -> None:
        """Throws away the RawNode and whatever was not persisted (queued storage work,
        Ready not yet handled); the storage stays."""
        self.stats.crashes += 1
        self.trace.append((self.now, "crashed", node.id, f"applied={node.applied}"))
        node.rn = None
        node.append_q.clear()
        node.apply_q.clear()
        self.checker.not_leader(node.id)
        self.at(self.rng.randrange(1, self.p.down_max_ms + 1), RESTART, node.id)

    # -- the network -------------------------------------------------------------------

    def send(self, frm: int, m: Message) -> None:
        to = m.to
        if to not in self.nodes:
            raise Violation(f"node {frm} sent {m.type.name} to unknown node {to}")
        sender = self.nodes[frm]
        check_promises(sender, m)
        data = encode_message(m)
        inc = sender.inc
        snap = m.type == MsgSnap
        if self.faults and self.rng.random() < self.p.drop_p:
            self.stats.dropped += 1
            if snap:
                self.at(self.delay(), SNAP_STATUS, frm, inc, (to, False))
            return
        copies = 2 if self.faults and self.rng.random() < self.p.dup_p else 1
        for _ in range(copies):
            self.at(self.delay(), DELIVER, to, -1, (frm, inc, data, snap))

    def delay(self) -> int:
        if self.faults and self.rng.random() < self.p.tail_p:
            return self.rng.randrange(30, 300)
        return self.rng.randrange(1, self.p.delay_max_ms + 1)

    def undeliverable(self, to: int, payload: object) -> None:
        frm, inc, _, snap = payload  # type: ignore[misc]
        self.stats.dropped += 1
        if snap:
            self.at(self.delay(), SNAP_STATUS, frm, inc, (to, False))

    def deliver(self, node: Node, payload: object) -> None:
        frm, inc, data, snap = payload  # type: ignore[misc]
        assert node.rn is not None
        if (frm, node.id) in self.blocked:
            self.undeliverable(node.id, payload)
            # The transport notices the peer is unreachable now and then.
            sender = self.nodes[frm]
            if sender.rn is not None and sender.inc == inc and self.rng.random() < 0.1:
                sender.rn.report_unreachable(node.id)
            return
        m = decode_message(data)
        self.stats.delivered += 1
        try:
            node.rn.step(m)
        except ErrProposalDropped:
            if m.type != MsgProp:
                raise
        except ErrStepPeerNotFound:
            # A response from a node no longer (or not yet) in this node's configuration:
            # etcd drops it too.
            pass
        if snap:
            self.at(self.delay(), SNAP_STATUS, frm, inc, (node.id, True))

    def partition(self) -> None:
        leaders = [n.id for n in self.nodes.values() if is_leader(n)]
        self.blocked = random_partition(self.rng, self.pool, leaders)
        self.stats.partitions += 1
        self.trace.append((self.now, "blocked", 0, str(sorted(self.blocked))))
        self.at(self.rng.randrange(50, 800), UNPARTITION)

    # -- clients -----------------------------------------------------------------------

    def propose(self, payload: bytes | None = None) -> bool:
        """Proposes to a random node; False if dropped at once."""
        alive = [n for n in self.nodes.values() if n.rn is not None and self.is_member(n.id)]
        if not alive:
            return False
        node = self.rng.choice(alive)
        assert node.rn is not None
        if payload is None:
            self.proposal_no += 1
            payload = b"c%d" % self.proposal_no
        assert self.checker.proposals is not None
        self.checker.proposals.add(payload)
        ok = True
        try:
            node.rn.propose(payload)
        except ErrProposalDropped:
            ok = False
        self.observe(node)
        self.schedule(node)
        return ok

    def read(self) -> None:
        alive = [n for n in self.nodes.values() if n.rn is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        assert node.rn is not None
        ctx = b"r%d" % len(self.reads)
        self.reads[ctx] = self.checker.committed_index()
        node.rn.read_index(ctx)
        self.observe(node)
        self.schedule(node)

    def transfer(self) -> None:
        """Asks the leader (if any) to hand leadership to another node, or now and then a
        follower to forget its leader."""
        if self.rng.random() < 0.3:
            alive = [n for n in self.nodes.values() if n.rn is not None]
            if alive:
                node = self.rng.choice(alive)
                assert node.rn is not None
                self.trace.append((self.now, "forget-leader", node.id, None))
                node.rn.forget_leader()
                self.observe(node)
                self.schedule(node)
            return
        leaders = [n for n in self.nodes.values() if is_leader(n)]
        if not leaders:
            return
        node = leaders[0]
        assert node.rn is not None
        others = [i for i in self.config.voters if i != node.id]
        if not others:
            return
        to = self.rng.choice(others)
        self.trace.append((self.now, "transfer-to", node.id, to))
        node.rn.transfer_leader(to)
        self.observe(node)
        self.schedule(node)

    def read_states(self, node: Node, states: list[ReadState]) -> None:
        for rs in states:
            want = self.reads.get(rs.request_ctx)
            if want is None:
                raise Violation(f"node {node.id} got a ReadState for unknown {rs.request_ctx!r}")
            if rs.index < want:
                raise Violation(
                    f"linearizability: node {node.id} read {rs.request_ctx!r} at index "
                    f"{rs.index}, but index {want} was committed before the read was asked"
                )
            self.stats.reads += 1

    # -- Ready handling: persist, send, apply, advance ---------------------------------

    def handle_ready(self, node: Node) -> None:
        rn = node.rn
        assert rn is not None
        if not rn.has_ready():
            return
        rd = rn.ready()
        if rd.read_states:
            self.read_states(node, rd.read_states)
        if self.p.async_writes:
            for m in rd.messages:
                if m.to == LOCAL_APPEND_THREAD:
                    node.append_q.append(m)
                elif m.to == LOCAL_APPLY_THREAD:
                    node.apply_q.append(m)
                else:
                    self.send(node.id, m)
            return
        self.persist(node, rd.hard_state, rd.snapshot, rd.entries)
        if self.mid_crash(node):
            return
        for m in rd.messages:
            self.send(node.id, m)
        for e in rd.committed_entries:
            self.apply(node, e)
        rn.advance(rd)
        self.maybe_compact(node)

    def mid_crash(self, node: Node) -> bool:
        """A crash after persisting and before anything else (messages lost)."""
        if self.faults and self.p.mid_crash_p and self.rng.random() < self.p.mid_crash_p:
            self.crash(node)
            return True
        return False

    def append_work(self, node: Node) -> None:
        """The append thread: persists one MsgStorageAppend, then delivers its responses
        (to the node itself directly, to peers over the network)."""
        if not node.append_q:
            return
        m = node.append_q.popleft()
        hs = HardState(m.term, m.vote, m.commit)
        self.persist(node, hs, m.snapshot, m.entries)
        if self.mid_crash(node):
            return
        for r in m.responses:
            if r.to == node.id:
                assert node.rn is not None
                try:
                    node.rn.step(r)
                except ErrStepPeerNotFound:
                    # The node's own ack, after a conf change removed it: Go's Step
                    # refuses it the same way, and the application drops it.
                    pass
            else:
                self.send(node.id, r)

    def apply_work(self, node: Node) -> None:
        if not node.apply_q:
            return
        m = node.apply_q.popleft()
        for e in m.entries:
            self.apply(node, e)
        assert node.rn is not None
        for r in m.responses:
            node.rn.step(r)
        self.maybe_compact(node)

    def persist(
        self, node: Node, hs: HardState | None, snap: Snapshot | None, ents: list[Entry]
    ) -> None:
        st = node.storage
        chk = self.checker
        nid = node.id
        if hs is not None and not is_empty_hard_state(hs):
            chk.hard_state(nid, hs.term, hs.vote, hs.commit)
            st.set_hard_state(HardState(hs.term, hs.vote, hs.commit))
        if snap is not None and not is_empty_snap(snap):
            md = snap.metadata
            known = self.snaps.get(snap.data)
            if known != (md.index, md.term):
                raise Violation(
                    f"node {nid} got snapshot {snap.data!r} at {md.index}/{md.term}; "
                    f"the driver made it at {known}"
                )
            if md.index < node.applied:
                raise Violation(
                    f"node {nid} restores snapshot {md.index} over applied {node.applied}"
                )
            # The snapshot replaces the whole log: entries past it are dropped.
            for i in range(md.index + 1, st.last_index() + 1):
                chk.remove(nid, i, st.term(i))
            st.apply_snapshot(
                Snapshot(snap.data, SnapshotMetadata(md.conf_state.clone(), md.index, md.term))
            )
            node.applied = node.snap_floor = md.index
            node.conf_state = md.conf_state.clone()
            node.commit_ptr = max(node.commit_ptr, md.index)
            self.stats.snapshots += 1
        if ents:
            first = ents[0].index
            last_old = st.last_index()
            for i in range(max(first, st.first_index()), last_old + 1):
                k = i - first
                if k >= len(ents) or ents[k].term != st.term(i):
                    chk.remove(nid, i, st.term(i))
            prev = node.storage_term(first - 1)
            chk.append(nid, prev, [(e.index, e.term, int(e.type), e.data) for e in ents])
            st.append([e.clone() for e in ents])

    def apply(self, node: Node, e: Entry) -> None:
        i = e.index
        stored = node.storage_term(i)
        if stored != e.term and stored != COMPACTED:
            raise Violation(
                f"node {node.id} is handed index {i} (term {e.term}) to apply, which its "
                f"storage does not hold (stored term {stored})"
            )
        if i <= node.snap_floor:
            self.checker.apply(node.id, i, e.term, int(e.type), e.data)
            return
        if i != node.applied + 1:
            raise Violation(f"node {node.id} applies index {i} after {node.applied}")
        self.checker.apply(node.id, i, e.term, int(e.type), e.data)
        if e.type != EntryNormal and i > self.restoring(node):
            self.apply_conf_change(node, e)
        node.applied = i
        self.stats.applied = max(self.stats.applied, i)
        if e.type == EntryNormal and e.data:
            self.payload_index.setdefault(e.data, i)

    def restoring(self, node: Node) -> int:
        """The index of the snapshot the engine restored and the application has not yet
        persisted (0 if none). With async_storage_writes, raft.restore switches to the
        snapshot's configuration as soon as MsgSnap is stepped, while conf changes below
        it may still wait in the apply thread: applying one then would apply it to the
        newer configuration (Go panics "can't apply simple config change in joint config",
        or silently builds a wrong one; etcd-io/etcd#11510). The application skips them,
        the snapshot it is about to persist covers them."""
        assert node.rn is not None
        snap = node.rn.raft.raft_log.unstable.snapshot
        return snap.metadata.index if snap is not None else 0

    def apply_conf_change(self, node: Node, e: Entry) -> None:
        assert node.rn is not None
        cc: ConfChangeI
        if e.type == EntryConfChange:
            cc = unmarshal_conf_change(e.data)
        else:
            cc = unmarshal_conf_change_v2(e.data)
        cs = node.rn.apply_conf_change(cc)
        node.conf_state = cs.clone()
        node.conf_index = e.index
        if self.p.raft_bootstrap and e.index <= self.p.n:
            # RawNode.bootstrap applied all its peers at once: what applying one of its
            # entries returns depends on whether the node bootstrapped or replays them.
            return
        have = self.configs.get(e.index)
        if have is None:
            self.configs[e.index] = cs.clone()
            if e.index >= max(self.configs):
                self.config = cs.clone()
        elif (diff := have.equivalent(cs)) is not None:
            raise Violation(
                f"node {node.id} applies the conf change at index {e.index} and gets another "
                f"configuration than another node: {diff}"
            )

    def conf_change(self) -> None:
        """Proposes a random membership change valid for the newest configuration (the
        leader may still refuse it, e.g. with another change pending), or the leaving of
        a joint configuration."""
        cc = random_conf_change(self.rng, self.config, self.pool)
        if cc is None:
            return
        alive = [n for n in self.nodes.values() if n.rn is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        assert node.rn is not None
        self.trace.append((self.now, "conf-change", node.id, cc))
        try:
            node.rn.propose_conf_change(cc)
        except ErrProposalDropped:
            pass
        self.observe(node)
        self.schedule(node)

    def maybe_compact(self, node: Node) -> None:
        """Snapshots the state machine and compacts the log now and then."""
        st = node.storage
        # Not past the durable commit index: a restart would find a snapshot ahead of its
        # HardState's commit (newRaft panics "state.commit %d is out of range"). With
        # async_storage_writes the apply thread can run ahead of the append thread.
        hs = st.hard_state
        i = node.applied
        if hs is None or hs.commit < i:
            return
        if not self.p.compact:
            return
        # A snapshot older than the newest configuration must not be all a leader has: a
        # node removed and added again refuses a snapshot whose configuration lacks it (Go:
        # "attempted to restore snapshot but it is not in the ConfState"), and with entries
        # compacted past its log the leader has nothing else to send it.
        if node.rn is not None and self.restoring(node):
            # node.conf_state may lack a change skipped for the coming snapshot.
            return
        snap_index = st.snap.metadata.index
        stale = snap_index < node.conf_index <= i
        if not stale and (i - snap_index < self.p.compact_every or self.rng.random() < 0.5):
            return
        key = b"s%d.%d" % (node.id, i)
        term = self.checker.applied[i][0]
        self.snaps[key] = (i, term)
        st.create_snapshot(i, node.conf_state, key)
        keep = self.rng.randrange(0, 8)
        if i - keep > st.first_index() - 1:
            st.compact(i - keep)

    # -- invariants after each event ---------------------------------------------------

    def observe(self, node: Node) -> None:
        rn = node.rn
        assert rn is not None
        r = rn.raft
        chk = self.checker
        if r.state == StateLeader:
            if chk.leaders.get(r.term) is None:
                self.stats.leaders += 1
                self.trace.append((self.now, "leader", node.id, f"term={r.term}"))
            chk.leader(node.id, r.term, node.term_at)
        else:
            chk.not_leader(node.id)
        c = r.raft_log.committed
        if c > node.commit_ptr:
            for i in range(node.commit_ptr + 1, c + 1):
                t = node.term_at(i)
                if t == MISSING:
                    raise Violation(f"node {node.id} commits index {i} past its log")
                if t != COMPACTED:
                    chk.commit(node.id, r.term, i, t)
            node.commit_ptr = c

    # -- the end: heal, then liveness --------------------------------------------------

    def heal(self) -> None:
        """Stops the faults, heals the network, restarts crashed nodes; then clients
        propose and every proposal must be applied on every node in bounded time."""
        self.faults = False
        self.blocked.clear()
        self.trace.append((self.now, "heal", 0, ""))
        self.decommission()
        for node in self.nodes.values():
            if node.rn is None and not node.decommissioned:
                self.start(node)
        # The bound grows with the backlog at healing time: with one entry per MsgApp and
        # one MsgApp in flight, a follower catches up by one entry per round trip.
        backlog = max(n.rn.raft.raft_log.last_index() for n in self.nodes.values() if n.rn) - min(
            n.rn.raft.raft_log.committed for n in self.nodes.values() if n.rn
        )
        rtt = 2 * self.p.delay_max_ms + 4
        self.live_deadline = self.now + self.p.live_bound_ms + backlog * rtt
        for k in range(self.p.live_proposals):
            payload = b"live%d" % k
            self.live_payloads.append(payload)
            self.at(50 + 40 * k, LIVE_PROPOSE, payload=payload)
        self.at(50 + 40 * self.p.live_proposals, LIVE_PROPOSE, payload=None)

    def is_member(self, nid: int) -> bool:
        return nid in members_of(self.config)

    def decommission(self) -> None:
        """After the healing, nodes outside the group are shut down, as an operator would
        (a removed node that never learned of its removal would otherwise call elections
        forever), and brought back if a change still in flight adds them again."""
        for node in self.nodes.values():
            member = self.is_member(node.id)
            if node.decommissioned and member:
                node.decommissioned = False
                self.trace.append((self.now, "recommissioned", node.id, None))
                self.start(node)
            elif not node.decommissioned and not member:
                node.decommissioned = True
                if node.rn is not None:
                    self.trace.append((self.now, "decommissioned", node.id, None))
                    node.rn = None
                    node.append_q.clear()
                    node.apply_q.clear()
                    self.checker.not_leader(node.id)

    def live_propose(self, payload: object) -> bool:
        """Proposes a payload (re-proposing until it is applied somewhere: a client
        retries: at once when the proposal was dropped, else after a while), or with None
        checks progress; True when everything is done."""
        if payload is not None:
            assert isinstance(payload, bytes)
            if payload not in self.payload_index:
                self.trace.append((self.now, "live-propose", 0, payload))
                ok = self.propose(payload)
                self.at(1000 if ok else 20, LIVE_PROPOSE, payload=payload)
            return False
        self.decommission()
        members = [n for n in self.nodes.values() if self.is_member(n.id)]
        leaders = [n.id for n in members if is_leader(n)]
        if self.config.voters_outgoing and leaders:
            # Leave a joint configuration the application entered explicitly.
            leader = self.nodes[leaders[0]].rn
            assert leader is not None
            try:
                leader.propose_conf_change(ConfChangeV2())
            except ErrProposalDropped:
                pass
            self.schedule(self.nodes[leaders[0]])
        lagging = [
            (n.id, p.decode())
            for p in self.live_payloads
            for n in members
            if p not in self.payload_index or n.applied < self.payload_index[p]
        ]
        if leaders and not lagging:
            check_final_storage(members, self.checker.committed)
            return True
        if self.now >= self.live_deadline:
            raise self.failure(
                f"liveness: {self.p.live_bound_ms}ms after healing, leaders {leaders}, "
                f"not applied (node, payload): {lagging[:10]}"
            )
        self.at(20, LIVE_PROPOSE, payload=None)
        return False


def run_seed(seed: int, fault_ms: int = 3000) -> Stats:
    return Simulation(seed, fault_ms).run()
