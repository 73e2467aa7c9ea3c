"""Raft engine micro benchmark (issue 17): three in-memory RawNodes in one process.

Commit: the leader proposes batches of ``--batch`` entries (``--size`` bytes each); every
node's Ready is handled as an application would (append to MemoryStorage, set the hard
state, deliver the messages, apply the committed entries, advance) until every node applied
the batch. Reported: CPU per committed entry summed over all three nodes (the issue's target
is <= 10 us compiled), and entries committed per second.

Elections: the current leader's followers are told to campaign in turn; each election runs
to a new leader known by all nodes. Reported: elections per second and CPU per election.

The process runs with the server's garbage-collector settings (``natsd.server.tune_gc``);
the driver loop here is interpreted Python and counts in the CPU figure, as an
application's would.

    .venv/bin/python bench/raft_bench.py       # compiled
    NATSD_PURE=1 .venv/bin/python bench/raft_bench.py                 # pure Python
"""

from __future__ import annotations

import argparse
import time

import natsd.raft.core as core_mod
from natsd.raft.core import Config
from natsd.raft.rawnode import RawNode, new_raw_node
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import (
    ConfState,
    EntryType,
    Message,
    Snapshot,
    SnapshotMetadata,
)
from natsd.server import tune_gc

IDS = (1, 2, 3)


class Cluster:
    def __init__(self) -> None:
        self.storage: dict[int, MemoryStorage] = {}
        self.nodes: dict[int, RawNode] = {}
        self.applied = dict.fromkeys(IDS, 0)
        for i in IDS:
            st = MemoryStorage()
            meta = SnapshotMetadata(conf_state=ConfState(voters=list(IDS)), index=1, term=1)
            st.apply_snapshot(Snapshot(metadata=meta))
            self.storage[i] = st
            cfg = Config(
                id=i,
                election_tick=10,
                heartbeat_tick=1,
                storage=st,
                max_size_per_msg=1 << 20,
                max_inflight_msgs=256,
                max_uncommitted_entries_size=1 << 30,
                check_quorum=True,
                pre_vote=True,
            )
            self.nodes[i] = new_raw_node(cfg)

    def pump(self) -> int:
        """Handle every node's Ready once and deliver the messages; returns messages sent."""
        inbox: list[Message] = []
        for i, rn in self.nodes.items():
            if not rn.has_ready():
                continue
            rd = rn.ready()
            st = self.storage[i]
            if rd.snapshot is not None:
                st.apply_snapshot(rd.snapshot)
            if rd.entries:
                st.append(rd.entries)
            if rd.hard_state is not None:
                st.set_hard_state(rd.hard_state)
            inbox.extend(rd.messages)
            n = 0
            for e in rd.committed_entries:
                if e.type == EntryType.EntryNormal and e.data:
                    n += 1
            self.applied[i] += n
            rn.advance(rd)
        for m in inbox:
            self.nodes[m.to].step(m)
        return len(inbox)

    def settle(self) -> None:
        while self.pump() or any(rn.has_ready() for rn in self.nodes.values()):
            pass

    def leader(self) -> int:
        leads = {rn.basic_status().lead for rn in self.nodes.values()}
        return leads.pop() if len(leads) == 1 else 0


def bench_commit(batches: int, batch: int, size: int) -> tuple[float, float]:
    c = Cluster()
    c.nodes[1].campaign()
    c.settle()
    assert c.leader() == 1, "node 1 leads"
    payload = b"x" * size
    target = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(batches):
        for _ in range(batch):
            c.nodes[1].propose(payload)
        target += batch
        while min(c.applied.values()) < target:
            if not c.pump():
                # heartbeats carry the commit index to followers when nothing else does
                c.nodes[1].tick()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    n = batches * batch
    assert all(v == n for v in c.applied.values())
    return cpu / n * 1e6, n / wall


def bench_elections(rounds: int) -> tuple[float, float]:
    c = Cluster()
    c.nodes[1].campaign()
    c.settle()
    t0, c0 = time.perf_counter(), time.process_time()
    done = 0
    for k in range(rounds):
        lead = c.leader()
        nxt = IDS[(IDS.index(lead) + 1 + k % 2) % len(IDS)]
        # a leader transfer: the campaign a real failover makes, without waiting ticks
        c.nodes[lead].transfer_leader(nxt)
        c.settle()
        if c.leader() == nxt:
            done += 1
    cpu = time.process_time() - c0
    wall = time.perf_counter() - t0
    assert done == rounds, f"{done} of {rounds} elections completed"
    return done / wall, cpu / done * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--elections", type=int, default=2000)
    a = ap.parse_args()
    tune_gc()  # the collector settings a natsd server runs with
    compiled = (core_mod.__file__ or "").endswith(".so")
    print(f"raft engine: {'compiled (mypyc)' if compiled else 'pure Python'} ({core_mod.__file__})")
    cpu_us, rate = bench_commit(a.batches, a.batch, a.size)
    print(
        f"commit: {a.batches} batches x {a.batch} entries x {a.size} B on 3 nodes: "
        f"{cpu_us:.2f} us CPU per committed entry (all nodes), {rate:,.0f} entries/s"
    )
    eps, cpu_e = bench_elections(a.elections)
    print(f"elections: {eps:,.0f} per second, {cpu_e:.0f} us CPU each (leader transfer)")


if __name__ == "__main__":
    main()
