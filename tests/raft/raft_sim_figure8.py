"""The Raft paper's Figure 8, scripted on the simulator (raft_sim.py), for issue 17's planted
bug "commit counted on an entry from a previous term".

A leader may commit an entry by counting replicas only if the entry is of its own term;
entries of earlier terms are committed indirectly, by committing a later one. A leader that
counts replicas of an older entry commits something a later leader can overwrite. Random
seeds practically never build that history (3,000 soak seeds pass with the bug planted), so
this scenario builds it step by step, with the simulator's nodes, disks, crashes, wire codec
and invariant checker, and no clock: elections are explicit campaigns and every message is
delivered or dropped by the step's rule, in the order sent, so the run is the same every
time. Terms are etcd's, which match the figure's:

1. S2 wins term 1 with everyone; its empty entry (index 1) commits everywhere.
2. (a) S1 wins term 2 (every node votes, so all move to term 2); its empty entry (2) and a
   client's entry (3) reach S2 only.
3. (b) S1 crashes. S5 wins term 3 with S3 and S4; its empty entry (2, term 3) stays on its
   own disk (its appends are lost); S5 crashes.
4. (c) S1 restarts; its first campaign (term 3) fails, S3 and S4 having voted for S5; it
   wins term 4 with S2, S3, S4 and replicates to S2 and S3 one entry per message, S3
   learning indexes 2 and 3 of term 2. When S1 hears S3 acknowledge index 3, a majority
   (S1, S2, S3) holds them, but they are not of S1's term: a correct leader does not commit
   them; the buggy one does, persists and applies them. Then S1 crashes before index 4 (term
   4) reaches S3 (everything in flight is lost).
5. (d) S5 restarts; its term-4 campaign fails, and it wins term 5 with S3 and S4 (its last
   entry, term 3, beats their term 2), and overwrites indexes 2 and 3.

At step 5 the checker sees a leader without an entry committed before its term (leader
completeness); it would then see a committed entry overwritten and a different entry
applied at index 2. With the correct engine nothing was committed, the run goes on: the
network heals, S1 comes back, and the simulator's liveness phase requires every later
proposal applied on every node, with identical applied prefixes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from raft_sim import Simulation, SimulationFailure
from raft_sim_parts import Params, check_promises

from natsd.raft.codec import decode_message, encode_message
from natsd.raft.log import NO_LIMIT
from natsd.raft.types import Message, MsgAppResp, MsgVote, MsgVoteResp

REPLAY = (
    ".venv/bin/python -m pytest -q -p no:cacheprovider tests/raft/test_raft_simulation.py "
    "-k figure8"
)
VOTES = frozenset((MsgVote, MsgVoteResp))

# A rule for a step: which messages the network delivers (the others are dropped).
Rule = Callable[[Message], bool]


def votes_among(*ids: int) -> Rule:
    group = set(ids)
    return lambda m: m.type in VOTES and m.from_ in group and m.to in group


def link(a: int, b: int) -> Rule:
    return lambda m: {m.from_, m.to} == {a, b}


def any_of(*rules: Rule) -> Rule:
    return lambda m: any(r(m) for r in rules)


def without(nid: int) -> Rule:
    return lambda m: nid not in (m.from_, m.to)


def everyone(m: Message) -> bool:
    return True


def acked_by(nid: int, index: int) -> Rule:
    """The leader hears ``nid`` acknowledge its log up to ``index``."""
    return lambda m: m.type == MsgAppResp and m.from_ == nid and not m.reject and m.index >= index


class Figure8(Simulation):
    """Figure 8 of the Raft paper on five simulated nodes (see the module's docstring)."""

    def __init__(self, async_writes: bool = False) -> None:
        self.async_mode = async_writes
        # The messages sent and not yet delivered, in order: (from, incarnation, bytes).
        self.wire: deque[tuple[int, int, bytes]] = deque()
        self.scripted = True
        # Every node's stored log (the term at each index from 1) when S1 crashed in term 4.
        self.logs_at_c: dict[int, list[int]] = {}
        super().__init__(0, fault_ms=0, async_writes=async_writes)

    def params(self, fault_ms: int, async_writes: bool | None) -> Params:
        p = Params(self.rng, fault_ms, async_writes)
        p.n = 5
        # Campaigns must win on votes alone: no pre-vote round, and no leader lease making
        # a node ignore a candidate (check_quorum).
        p.pre_vote = p.check_quorum = False
        p.forwarding = True
        # One entry per MsgApp, one MsgApp in flight: S3 learns the term-2 entries, and
        # S1 hears of it, before anything of term 4 is on its way to S3.
        p.max_size_per_msg = 0
        p.max_committed = NO_LIMIT
        p.max_inflight = 1
        p.max_inflight_bytes = 0
        p.compact = False
        p.mid_crash_p = 0.0
        p.conf_changes = p.raft_bootstrap = False
        return p

    # -- the scripted network ----------------------------------------------------------

    def failure(self, what: str) -> SimulationFailure:
        # The simulator's message (parameters, last events) under the scenario's name.
        _, _, rest = str(super().failure(what)).split("\n", 2)
        return SimulationFailure(
            f"raft Figure 8 scenario (async_writes={self.async_mode}) failed: {what}\n"
            f"replay: {REPLAY}\n{rest}"
        )

    def send(self, frm: int, m: Message) -> None:
        if not self.scripted:
            super().send(frm, m)
            return
        sender = self.nodes[frm]
        check_promises(sender, m)
        self.wire.append((frm, sender.inc, encode_message(m)))

    def settle(self, rule: Rule, until: Rule | None = None) -> None:
        """Lets the nodes handle their Ready (and storage work) and delivers, in the order
        sent, the messages ``rule`` lets through (dropping the others), until nothing is
        left to do or a delivered message satisfies ``until``."""
        while True:
            self.flush()
            if not self.wire:
                return
            frm, inc, data = self.wire.popleft()
            m = decode_message(data)
            node = self.nodes[m.to]
            payload = (frm, inc, data, False)
            if node.rn is None or not rule(m):
                self.trace.append((self.now, "drop", m.to, payload))
                continue
            self.trace.append((self.now, "deliver", m.to, payload))
            self.deliver(node, payload)
            self.observe(node)
            if until is not None and until(m):
                self.flush()
                return

    def flush(self) -> None:
        """Runs every live node's Ready handling and storage threads until all are idle."""
        busy = True
        while busy:
            busy = False
            for node in self.nodes.values():
                while node.rn is not None and (
                    node.rn.has_ready() or node.append_q or node.apply_q
                ):
                    busy = True
                    if node.rn.has_ready():
                        self.handle_ready(node)
                    elif node.append_q:
                        self.append_work(node)
                    else:
                        self.apply_work(node)
                    if node.rn is not None:
                        self.observe(node)

    def campaign(self, nid: int, rule: Rule, until: Rule | None = None) -> None:
        """Node ``nid`` campaigns (its election timeout elapsed); then settle(rule, until)."""
        node = self.nodes[nid]
        assert node.rn is not None
        self.trace.append((self.now, "campaign", nid, None))
        node.rn.campaign()
        self.observe(node)
        self.settle(rule, until)

    def log_terms(self, nid: int) -> list[int]:
        st = self.nodes[nid].storage
        return [st.term(i) for i in range(1, st.last_index() + 1)]

    # -- the scenario ------------------------------------------------------------------

    def _run(self) -> None:
        self.faults = False
        for node in self.nodes.values():
            self.start(node)
        # 1. S2 leads term 1; index 1 commits everywhere.
        self.campaign(2, everyone)
        # 2. (a) S1 leads term 2 (all vote); indexes 2 and 3 reach S2 only.
        rule_a = any_of(votes_among(1, 2, 3, 4, 5), link(1, 2))
        self.campaign(1, rule_a)
        assert self.checker.proposals is not None
        self.checker.proposals.add(b"fig8-x")
        s1 = self.nodes[1].rn
        assert s1 is not None
        s1.propose(b"fig8-x")
        self.observe(self.nodes[1])
        self.settle(rule_a)
        # 3. (b) S1 crashes; S5 leads term 3 with S3 and S4, its appends lost; S5 crashes.
        self.crash(self.nodes[1])
        self.campaign(5, votes_among(3, 4, 5))
        self.crash(self.nodes[5])
        # 4. (c) S1 restarts, fails term 3, wins term 4, replicates to S2 and S3 until S3
        # acknowledges index 3; then crashes, with all in flight lost.
        self.start(self.nodes[1])
        rule_c = any_of(votes_among(1, 2, 3, 4), link(1, 2), link(1, 3))
        self.campaign(1, rule_c)
        self.campaign(1, rule_c, until=acked_by(3, 3))
        self.wire.clear()
        self.logs_at_c = {i: self.log_terms(i) for i in self.nodes}
        self.crash(self.nodes[1])
        # 5. (d) S5 restarts, fails term 4, wins term 5 with S3 and S4, and replicates.
        self.start(self.nodes[5])
        self.campaign(5, without(1))
        self.campaign(5, without(1))
        # The end: the network heals, S1 restarts, the simulator's liveness phase.
        self.scripted = False
        self.wire.clear()
        self.heal()
        self.loop()
