"""Randomized safety checks of the engine (natsd's own, in the spirit of the raft paper's
figure 3): clusters of RawNodes driven through the application's Ready loop over a lossy,
reordering, partitioning network with random ticks and proposals. After every step:

- Election safety: at most one leader is elected in a given term.
- Log matching / state machine safety: every node applied the same entry at a given index,
  and applies the indexes in order without gaps.
- Commit indexes and terms never go backwards on a node.

After the chaos the network heals: the cluster elects a leader, commits a last proposal,
and every node applies it.

With asynchronous storage writes the local append and apply threads are simulated: each
runs its queue of MsgStorageAppend / MsgStorageApply in order, at random moments, and then
delivers the messages' responses (a crash loses what they had not done yet)."""

from __future__ import annotations

import random

import pytest
from raft_harness import new_test_config, new_test_memory_storage, with_peers

from natsd.raft.core import LOCAL_APPEND_THREAD, LOCAL_APPLY_THREAD, StateLeader
from natsd.raft.logger import DiscardLogger
from natsd.raft.rawnode import RawNode, new_raw_node
from natsd.raft.state import RaftError
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import EntryType, HardState, Message, MessageType


class Cluster:
    def __init__(
        self, n: int, rng: random.Random, pre_vote: bool, check_quorum: bool, async_writes: bool
    ) -> None:
        self.rng = rng
        self.ids = list(range(1, n + 1))
        self.async_writes = async_writes
        self.append_q: dict[int, list[Message]] = {id: [] for id in self.ids}
        self.apply_q: dict[int, list[Message]] = {id: [] for id in self.ids}
        self.pre_vote = pre_vote
        self.check_quorum = check_quorum
        self.storage: dict[int, MemoryStorage] = {}
        self.nodes: dict[int, RawNode] = {}
        for id in self.ids:
            self.storage[id] = new_test_memory_storage(with_peers(*self.ids))
            self.start(id, 0)
        self.in_flight: list[Message] = []
        self.partition: dict[int, int] = {}  # id -> side; messages cross no sides
        self.drop = 0.0
        self.applied: dict[int, list[tuple[int, int, bytes]]] = {id: [] for id in self.ids}
        self.log_at: dict[int, tuple[int, bytes]] = {}  # index -> (term, data) applied
        self.leaders: dict[int, int] = {}  # term -> leader
        self.last_commit: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.last_term: dict[int, int] = dict.fromkeys(self.ids, 0)
        self.proposed = 0

    def start(self, id: int, applied: int) -> None:
        """Starts (or restarts, from what its storage persisted) node id."""
        cfg = new_test_config(id, 10, 1, self.storage[id])
        cfg.pre_vote = self.pre_vote
        cfg.check_quorum = self.check_quorum
        cfg.logger = DiscardLogger()
        cfg.applied = applied
        cfg.async_storage_writes = self.async_writes
        rn = new_raw_node(cfg)
        # Each node draws its election timeouts from the test's generator.
        rn.raft.rand = self.rng.randrange
        rn.raft.reset_randomized_election_timeout()
        self.nodes[id] = rn

    def restart(self, id: int) -> None:
        """A crash: what was not persisted is lost, the node comes back from its storage
        with the index it applied (so it applies nothing twice)."""
        seq = self.applied[id]
        self.append_q[id] = []
        self.apply_q[id] = []
        if self.async_writes:
            # The apply thread's writes need not be durable, and it may have applied past
            # the commit index the append thread persisted: the state machine comes back
            # at most at the persisted commit (and applies the rest again).
            hs = self.storage[id].hard_state
            persisted = hs.commit if hs is not None else 0
            while seq and seq[-1][0] > persisted:
                seq.pop()
        self.start(id, seq[-1][0] if seq else 0)
        # Only the persisted state survives: the commit index and, with asynchronous writes,
        # the term may go back to the stored ones.
        self.last_commit[id] = self.nodes[id].raft.raft_log.committed
        self.last_term[id] = self.nodes[id].raft.term

    def connected(self, a: int, b: int) -> bool:
        return self.partition.get(a, 0) == self.partition.get(b, 0)

    def process_ready(self, id: int) -> None:
        rn = self.nodes[id]
        s = self.storage[id]
        while rn.has_ready():
            rd = rn.ready()
            if self.async_writes:
                for m in rd.messages:
                    if m.to == LOCAL_APPEND_THREAD:
                        self.append_q[id].append(m)
                    elif m.to == LOCAL_APPLY_THREAD:
                        self.apply_q[id].append(m)
                    else:
                        self.in_flight.append(m)
                self.check(id)
                continue
            if rd.snapshot is not None and rd.snapshot.metadata.index > 0:
                s.apply_snapshot(rd.snapshot)
            s.append(rd.entries)
            if rd.hard_state is not None:
                s.set_hard_state(rd.hard_state)
            self.in_flight.extend(rd.messages)
            for e in rd.committed_entries:
                self.apply(id, e.index, e.term, e.data if e.type == EntryType.EntryNormal else b"")
            rn.advance(rd)
            self.check(id)

    def run_local_thread(self, id: int, apply: bool) -> None:
        """The local append (or apply) thread of node id does its oldest work, then
        delivers the responses it carries."""
        q = self.apply_q[id] if apply else self.append_q[id]
        if not q:
            return
        m = q.pop(0)
        if apply:
            assert m.type == MessageType.MsgStorageApply
            for e in m.entries:
                self.apply(id, e.index, e.term, e.data if e.type == EntryType.EntryNormal else b"")
        else:
            assert m.type == MessageType.MsgStorageAppend
            s = self.storage[id]
            if m.snapshot is not None and m.snapshot.metadata.index > 0:
                s.apply_snapshot(m.snapshot)
            s.append(m.entries)
            if m.term or m.vote or m.commit:
                s.set_hard_state(HardState(term=m.term, vote=m.vote, commit=m.commit))
        for resp in m.responses:
            if resp.to == id:
                self.nodes[id].step(resp)
            else:
                self.in_flight.append(resp)
        self.process_ready(id)

    def apply(self, id: int, index: int, term: int, data: bytes) -> None:
        seq = self.applied[id]
        if seq:
            assert index == seq[-1][0] + 1, f"node {id} applies {index} after {seq[-1][0]}"
        seq.append((index, term, data))
        prev = self.log_at.setdefault(index, (term, data))
        assert prev == (term, data), f"node {id} applied {(term, data)} at {index}, another {prev}"

    def check(self, id: int) -> None:
        r = self.nodes[id].raft
        assert r.raft_log.committed >= self.last_commit[id]
        assert r.term >= self.last_term[id]
        self.last_commit[id] = r.raft_log.committed
        self.last_term[id] = r.term
        if r.state == StateLeader:
            other = self.leaders.setdefault(r.term, id)
            assert other == id, f"two leaders in term {r.term}: {other} and {id}"

    def settle(self) -> None:
        """Delivers every message and runs every local thread until nothing is left."""
        while self.in_flight or any(self.append_q.values()) or any(self.apply_q.values()):
            for id in self.ids:
                while self.append_q[id]:
                    self.run_local_thread(id, False)
                while self.apply_q[id]:
                    self.run_local_thread(id, True)
            while self.in_flight:
                self.deliver_one()

    def deliver_one(self) -> None:
        if not self.in_flight:
            return
        m = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))  # reordering
        if self.rng.random() < self.drop or not self.connected(m.from_, m.to):
            return
        try:
            self.nodes[m.to].step(m)
        except RaftError:
            pass
        self.process_ready(m.to)

    def step(self) -> None:
        x = self.rng.random()
        if self.async_writes and self.rng.random() < 0.3:
            self.run_local_thread(self.rng.choice(self.ids), self.rng.random() < 0.5)
            return
        if x < 0.4:
            self.deliver_one()
        elif x < 0.8:
            id = self.rng.choice(self.ids)
            self.nodes[id].tick()
            self.process_ready(id)
        elif x < 0.9:
            id = self.rng.choice(self.ids)
            self.proposed += 1
            try:
                self.nodes[id].propose(f"p{self.proposed}".encode())
            except RaftError:
                pass
            self.process_ready(id)
        elif x < 0.905:
            self.restart(self.rng.choice(self.ids))
        elif x < 0.97:
            # a new partition (or none)
            self.partition = {id: self.rng.randrange(2) for id in self.ids}
        else:
            self.partition = {}


@pytest.mark.parametrize("async_writes", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("seed", range(16))
def test_random_cluster_safety(seed: int, async_writes: bool) -> None:
    rng = random.Random(seed)
    c = Cluster(rng.choice((3, 5)), rng, seed % 2 == 1, seed % 3 == 0, async_writes=async_writes)
    c.drop = rng.choice((0.0, 0.05, 0.2))
    for _ in range(3000):
        c.step()
    # Heal and let the cluster settle: a leader commits a last proposal everywhere.
    c.partition = {}
    c.drop = 0.0
    leader = 0
    for _ in range(400):
        for id in c.ids:
            c.nodes[id].tick()
            c.process_ready(id)
        c.settle()
        leaders = [id for id in c.ids if c.nodes[id].raft.state == StateLeader]
        if leaders:
            leader = leaders[0]
            break
    assert leader, "no leader after healing"
    c.nodes[leader].propose(b"last")
    c.process_ready(leader)
    for _ in range(50):
        c.settle()
        c.nodes[leader].tick()
        c.process_ready(leader)
    for id in c.ids:
        datas = [d for _, _, d in c.applied[id]]
        assert b"last" in datas, f"node {id} did not apply the last proposal"
    assert len(c.leaders) >= 1
