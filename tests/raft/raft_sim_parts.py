"""The pieces of the Raft simulation (raft_sim.py): its event kinds, the parameters a seed
draws, a simulated node (its disk, its RawNode, its storage threads), the run's counters."""

from __future__ import annotations

import random
from collections import deque

from raft_sim_check import COMPACTED, MISSING, Violation

from natsd.raft.codec import decode_message
from natsd.raft.log import NO_LIMIT
from natsd.raft.rawnode import RawNode
from natsd.raft.state import StateLeader
from natsd.raft.storage import ErrCompacted, ErrUnavailable, MemoryStorage
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeI,
    ConfChangeRemoveNode,
    ConfChangeSingle,
    ConfChangeTransitionAuto,
    ConfChangeTransitionJointExplicit,
    ConfChangeTransitionJointImplicit,
    ConfChangeV2,
    ConfState,
    Message,
    MsgAppResp,
    MsgVoteResp,
)

# Event kinds (the heap holds (time, seq, kind, node, incarnation, payload)).
TICK = 0
DELIVER = 1
READY = 2
APPEND_WORK = 3
APPLY_WORK = 4
PROPOSE = 5
CRASH = 6
RESTART = 7
PARTITION = 8
UNPARTITION = 9
SNAP_STATUS = 10
HEAL = 11
LIVE_PROPOSE = 12
READ = 13
TRANSFER = 14
CONF = 15
KIND_NAMES = [
    "tick",
    "deliver",
    "ready",
    "append-work",
    "apply-work",
    "propose",
    "crash",
    "restart",
    "partition",
    "unpartition",
    "snap-status",
    "heal",
    "live-propose",
    "read",
    "transfer",
    "conf-change",
]


class Params:
    """A run's shape, all drawn from the seed's rng."""

    __slots__ = (
        "async_writes",
        "check_quorum",
        "compact",
        "compact_every",
        "conf_changes",
        "crash_mean_ms",
        "delay_max_ms",
        "down_max_ms",
        "drop_p",
        "dup_p",
        "election_tick",
        "fault_ms",
        "forwarding",
        "heartbeat_tick",
        "live_bound_ms",
        "live_proposals",
        "max_committed",
        "max_inflight",
        "max_inflight_bytes",
        "max_size_per_msg",
        "mid_crash_p",
        "n",
        "partition_mean_ms",
        "pre_vote",
        "propose_mean_ms",
        "raft_bootstrap",
        "read_mean_ms",
        "slow_disk_p",
        "step_down_on_removal",
        "tail_p",
        "transfer_mean_ms",
    )

    def __init__(self, rng: random.Random, fault_ms: int, async_writes: bool | None) -> None:
        self.n = rng.choice((3, 3, 4, 5, 5))
        self.async_writes = rng.random() < 0.4 if async_writes is None else async_writes
        self.pre_vote = rng.random() < 0.5
        self.check_quorum = rng.random() < 0.5
        self.forwarding = rng.random() < 0.7
        self.max_size_per_msg = rng.choice((0, 200, 4096, NO_LIMIT))
        # 0 would default to max_size_per_msg, and a zero budget for committed entries
        # panics (as in Go): at least one byte, which still lets one entry through.
        self.max_committed = rng.choice(
            (1, 512, NO_LIMIT) if self.max_size_per_msg == 0 else (0, 1, 512, NO_LIMIT)
        )
        self.max_inflight = rng.choice((1, 4, 256))
        # Flow control by bytes too (0: none); it may not be below max_size_per_msg.
        self.max_inflight_bytes = rng.choice(
            (0,) if self.max_size_per_msg > 4096 else (0, 4096, 1 << 16)
        )
        self.compact = rng.random() < 0.5
        self.compact_every = rng.randrange(3, 30)
        self.fault_ms = fault_ms
        self.drop_p = rng.choice((0.0, 0.02, 0.1, 0.25))
        self.dup_p = rng.choice((0.0, 0.02, 0.1))
        self.delay_max_ms = rng.choice((2, 10, 30))
        self.tail_p = rng.choice((0.0, 0.02, 0.1))
        self.crash_mean_ms = rng.choice((300, 1000, 3000, 10**9))
        self.down_max_ms = rng.choice((20, 200, 600))
        self.mid_crash_p = rng.choice((0.0, 0.05))
        self.partition_mean_ms = rng.choice((300, 1000, 10**9))
        self.propose_mean_ms = rng.choice((5, 20, 60))
        self.slow_disk_p = rng.choice((0.0, 0.1, 0.3))
        self.read_mean_ms = rng.choice((50, 200, 10**9))
        self.transfer_mean_ms = rng.choice((300, 10**9))
        self.election_tick = rng.choice((5, 10, 10, 20))
        self.heartbeat_tick = rng.choice((1, 1, 2))
        # Membership changes (ConfChange and ConfChangeV2, joint or not) among a pool of
        # n + 2 nodes; they need the initial members in the log (RawNode.bootstrap), for a
        # node added later learns the configuration by replaying it.
        self.conf_changes = rng.random() < 0.5
        self.raft_bootstrap = self.conf_changes or rng.random() < 0.5
        self.step_down_on_removal = rng.random() < 0.5
        if self.conf_changes and not (self.check_quorum or self.pre_vote):
            # Without either, a learner whose term a removed node's MsgVote raised past the
            # leader's is stranded for good: it ignores the leader's lower-term MsgApp
            # without answering, and being a learner never campaigns to get the terms
            # even (upstream relies on the campaign; see sim17-engine-bugs.md).
            self.pre_vote = True
        self.live_proposals = 5
        self.live_bound_ms = 6000

    def __str__(self) -> str:
        return " ".join(f"{k}={getattr(self, k)}" for k in self.__slots__)


class Node:
    __slots__ = (
        "append_busy",
        "append_q",
        "applied",
        "apply_busy",
        "apply_q",
        "bootstrap",
        "commit_ptr",
        "conf_index",
        "conf_state",
        "decommissioned",
        "id",
        "inc",
        "ready_busy",
        "rn",
        "snap_floor",
        "storage",
        "tick_ms",
    )

    def __init__(self, id: int, tick_ms: int, voters: list[int], raft_bootstrap: bool) -> None:
        self.id = id
        self.tick_ms = tick_ms
        # The disk: survives crashes. Unless RawNode.bootstrap writes the initial members
        # into the log, a member starts as etcd's tests do, with the ConfState in storage.
        self.storage = MemoryStorage()
        self.bootstrap: list[int] = []
        if id in voters:
            if raft_bootstrap:
                self.bootstrap = list(voters)
            else:
                self.storage.snap.metadata.conf_state = ConfState(voters=list(voters))
        # The configuration as of the applied index (for the snapshots the node makes).
        self.conf_state = self.storage.snap.metadata.conf_state.clone()
        # The index of the last conf change applied.
        self.conf_index = 0
        # Shut down after the healing for being outside the group (restarted if a change
        # still in flight adds it back).
        self.decommissioned = False
        self.rn: RawNode | None = None
        # Incarnation: events and replies addressed to an earlier life are dropped.
        self.inc = 0
        # The state machine (volatile): the last applied index; its content is the
        # checker's applied sequence, which every applied entry is checked against.
        self.applied = 0
        # Applying an index at or below this is a no-op (a snapshot restored the state
        # machine past entries still queued for the apply thread).
        self.snap_floor = 0
        # The highest index whose commit on this node was reported to the checker.
        self.commit_ptr = 0
        self.append_q: deque[Message] = deque()
        self.apply_q: deque[Message] = deque()
        self.ready_busy = False
        self.append_busy = False
        self.apply_busy = False

    def term_at(self, i: int) -> int:
        """The term of the entry at i in the node's (engine's) log, for the checker."""
        assert self.rn is not None
        try:
            return self.rn.raft.raft_log.term(i)
        except ErrCompacted:
            return COMPACTED
        except ErrUnavailable:
            return MISSING

    def storage_term(self, i: int) -> int:
        try:
            return self.storage.term(i)
        except ErrCompacted:
            return COMPACTED
        except ErrUnavailable:
            return MISSING


class Stats:
    __slots__ = (
        "applied",
        "crashes",
        "delivered",
        "dropped",
        "leaders",
        "partitions",
        "reads",
        "snapshots",
    )

    def __init__(self) -> None:
        self.crashes = 0
        self.partitions = 0
        self.delivered = 0
        self.dropped = 0
        self.snapshots = 0
        self.leaders = 0
        self.applied = 0
        self.reads = 0


def members_of(cs: ConfState) -> set[int]:
    return set(cs.voters) | set(cs.learners) | set(cs.voters_outgoing)


def is_leader(n: Node) -> bool:
    return n.rn is not None and n.rn.raft.state == StateLeader


def describe_event(payload: object) -> str:
    if isinstance(payload, tuple) and len(payload) == 4:
        frm, _, data, _ = payload
        try:
            m = decode_message(data)
        except Exception:
            return f"from {frm}"
        return f"{m.type.name} {m.from_}->{m.to} t{m.term} i{m.index} n{len(m.entries)} c{m.commit}"
    return "" if payload is None else repr(payload)


def random_conf_change(rng: random.Random, cfg: ConfState, pool: list[int]) -> ConfChangeI | None:
    """A random membership change valid for ``cfg`` keeping three to five voters (or None),
    or the leaving of a joint configuration."""
    cc: ConfChangeI
    if cfg.voters_outgoing:
        cc = ConfChangeV2()
    else:
        voters, learners = set(cfg.voters), set(cfg.learners)
        outsiders = [i for i in pool if i not in voters and i not in learners]
        options: list[ConfChangeSingle] = []
        for i in outsiders + sorted(learners):
            options.append(ConfChangeSingle(ConfChangeAddNode, i))
        for i in outsiders:
            options.append(ConfChangeSingle(ConfChangeAddLearnerNode, i))
        for i in sorted(voters):
            options.append(ConfChangeSingle(ConfChangeRemoveNode, i))
            options.append(ConfChangeSingle(ConfChangeAddLearnerNode, i))
        for i in sorted(learners):
            options.append(ConfChangeSingle(ConfChangeRemoveNode, i))
        changes = rng.sample(options, min(len(options), rng.choice((1, 1, 2))))
        after = set(voters)
        for ch in changes:
            if ch.type == ConfChangeAddNode:
                after.add(ch.node_id)
            else:
                after.discard(ch.node_id)
        ids = [ch.node_id for ch in changes]
        if not 3 <= len(after) <= 5 or len(set(ids)) != len(ids):
            return None
        if len(changes) == 1 and rng.random() < 0.5:
            cc = ConfChange(changes[0].type, changes[0].node_id)
        else:
            transition = rng.choice(
                (
                    ConfChangeTransitionAuto,
                    ConfChangeTransitionJointImplicit,
                    ConfChangeTransitionJointExplicit,
                )
            )
            cc = ConfChangeV2(transition, changes)
    return cc


# Responses Go holds back until the state they answer from is persisted (raft.send puts
# them in msgsAfterAppend); requests and the other responses leave at once.
AFTER_APPEND = frozenset((MsgAppResp, MsgVoteResp))


def check_promises(sender: Node, m: Message) -> None:
    """What a message promises (a vote, an acknowledged entry, the term of either) must be
    durable when it leaves ``sender``, unless the node has since durably moved to a later
    term (then it can no longer act in m's term: Go sends a Ready's messages after
    persisting its final state, which may be later than the state a message was made in)."""
    hs = sender.storage.hard_state
    hs_term = hs.term if hs is not None else 0
    if m.term > hs_term and m.type in AFTER_APPEND:
        raise Violation(
            f"node {sender.id} sends {m.type.name} in term {m.term} before persisting the "
            f"term (persisted {hs})"
        )
    if m.type == MsgVoteResp and not m.reject and hs_term <= m.term:
        # Else a crash lets the node vote twice in the term.
        if hs is None or (hs.term, hs.vote) != (m.term, m.to):
            raise Violation(
                f"node {sender.id} sends its vote for {m.to} in term {m.term} before persisting "
                f"it (persisted {hs})"
            )
    elif (
        m.type == MsgAppResp
        and not m.reject
        and hs_term == m.term
        and sender.rn is not None
        and sender.rn.raft.term == m.term
    ):
        # Else a crash loses an entry a quorum counted on. (Once the node is in a later
        # term, with async writes not yet persisted, its log may already have dropped
        # the entry for the new leader's: the durable one is what the ack is about.)
        stored = sender.storage_term(m.index)
        log_term = sender.term_at(m.index)
        if stored == MISSING or (log_term != COMPACTED and stored not in (log_term, COMPACTED)):
            raise Violation(
                f"node {sender.id} acknowledges index {m.index} before persisting it "
                f"(stored term {stored}, log term {log_term})"
            )


def random_partition(
    rng: random.Random, ids: list[int], leaders: list[int]
) -> set[tuple[int, int]]:
    """The directed links a random partition blocks."""
    r = rng.random()
    if r < 0.4:
        # Split in two.
        side = set(rng.sample(ids, rng.randrange(1, len(ids))))
        return {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
    if r < 0.7:
        # Isolate the node (often the leader) from everyone, both ways.
        x = leaders[0] if leaders and rng.random() < 0.7 else rng.choice(ids)
        return {(a, b) for a in ids for b in ids if a != b and x in (a, b)}
    # One-way links: a node hears but is not heard, or the reverse.
    x = rng.choice(ids)
    out = rng.random() < 0.5
    return {(x, b) if out else (b, x) for b in ids if b != x}


def check_final_storage(members: list[Node], committed: list[int]) -> None:
    """At the end every member's storage holds the committed entries it has applied (or a
    snapshot covers them), with the committed terms."""
    for node in members:
        st = node.storage
        for i in range(st.first_index(), min(node.applied, st.last_index()) + 1):
            if i < len(committed) and st.term(i) != committed[i]:
                raise Violation(
                    f"at the end node {node.id} stores term {st.term(i)} at index {i}, "
                    f"where term {committed[i]} was committed"
                )
