"""A replicated stream's half of Raft: whether this replica leads, and the leader's shadow.

Design-clustering §4.5. A stream with ``num_replicas`` > 1 has a Raft group over its peers
(the group itself is the cluster layer's: ``jetstream/cluster/streams.py``). Only the
group's leader subscribes to the stream's subjects. A publish is checked there, against the
leader's store, exactly as on a standalone server (``Stream.process``), and instead of being
stored it is proposed as a ``MSG`` entry carrying the sequence and timestamp the leader gave
it. Every replica stores the committed entries in log order (``Stream.apply_entry``) with
``store_raw``, so all stores end identical; the replica that proposed an entry sends its
PubAck once the entry is committed, that is, durable in the node logs of a majority.

The leader's shadow (``Replica``) is what makes checking before storing exact:

* ``clseq`` is the last sequence given out: the store's last sequence plus the entries in
  flight (proposed, not yet applied). A new leader takes publishes only once it has applied
  everything in its log up to its own first entry, so ``clseq`` starts from a store that
  holds every committed message.
* A publish whose checks read what an in-flight entry is about to change (an expected last
  sequence, subject sequence or message id; a message id that is itself in flight; a stream
  that discards new messages at its limits) waits, with every publish behind it, until
  nothing is in flight, and is then checked against the store. Plain publishes never wait.

Replaying a group after a restart applies entries again: an entry whose sequence the store
already holds is skipped, so applying is idempotent.

The log is kept short by ``COMPACT`` entries: the leader proposes one with the lowest index
every replica's log has reached, and each replica, once its store is synced, drops its log
up to there (no replica then ever needs a snapshot from the leader; one that was away holds
back compaction until it is back).

Purges, message deletes and consumer deletes go through the log too, as typed operations
that every replica applies in log order. The entries themselves (what each holds, how it is
encoded) are ``entries.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

__all__ = ["Replica", "ReplicaGroup", "Waiting"]


class ReplicaGroup(Protocol):
    """The group a replica proposes to (the cluster layer's ``StreamReplica``), handed to
    it at construction."""

    def propose(self, data: bytes) -> bool:
        """Propose an entry (False: dropped, e.g. leadership just moved)."""

    def is_raft_leader(self) -> bool:
        """The group still has this replica as its leader, in touch with a majority."""

    def transferring(self) -> bool:
        """The group is handing its leadership over (Raft takes no proposals meanwhile):
        publishes wait, and go to the new leader (``handed``) if it takes over."""

    def proposable(self) -> bool:
        """Both at once, on the publish path (one call per publish): Raft leader, and no
        transfer under way."""


# A publish waiting for the in-flight entries to apply: (subject, reply, hdr, data).
Waiting = tuple[bytes, bytes | None, bytes | None, bytes]


class Replica:
    """The stream side of one replica: whether it leads (takes publishes), and as leader
    the shadow of what is in flight. The cluster layer's replica (``group``) flips
    ``leading`` through ``lead`` and ``follow``."""

    __slots__ = (
        "acks_through",
        "barriers",
        "clseq",
        "counters",
        "epoch",
        "group",
        "handed",
        "inflight",
        "inflight_ids",
        "leading",
        "node_id",
        "waiting",
    )

    def __init__(self, node_id: int, group: ReplicaGroup) -> None:
        self.node_id = node_id
        self.group = group
        self.leading = False
        self.clseq = 0
        self.inflight = 0
        # Nats-Msg-Id -> sequence of the in-flight entry carrying it
        self.inflight_ids: dict[str, int] = {}
        # a counter stream's running totals (nats-server's clusteredCounterTotal): subject ->
        # (value after its last proposed increment, increments in flight, the
        # Nats-Counter-Sources that message carries); the next increment builds on it
        self.counters: dict[str, tuple[int, int, bytes | None]] = {}
        # counts leadership changes: an atomic batch opened under one is gone after it
        self.epoch = 0
        self.waiting: deque[Waiting] = deque()
        # as a former leader: the entries it proposed up to this sequence may still commit,
        # and it sends their PubAcks when they do (the client waits for them)
        self.acks_through = 0
        # publishes that waited when leadership went: the cluster layer passes them on
        self.handed: list[Waiting] = []
        # what runs once the entries proposed before it have applied (``after_inflight``):
        # (the last such entry's sequence, or -1 while publishes still wait; what to run)
        self.barriers: list[tuple[int, Callable[[], None]]] = []

    def lead(self, last_seq: int) -> None:
        """This replica leads from now on; its store holds every committed entry."""
        self.leading = True
        self.epoch += 1
        self.clseq = last_seq
        self.inflight = 0
        self.inflight_ids.clear()
        self.counters.clear()
        self.waiting.clear()
        self.barriers.clear()

    def follow(self) -> None:
        """Leadership is gone: what was in flight may still commit (this replica sends
        those PubAcks when it applies them, ``acks_through``); what waited is handed over
        (``handed``: the cluster layer passes it on to the new leader)."""
        if self.leading:
            self.acks_through = max(self.acks_through, self.clseq)
            self.epoch += 1
        self.leading = False
        self.inflight = 0
        self.inflight_ids.clear()
        self.counters.clear()
        self.handed.extend(self.waiting)
        self.waiting.clear()
        self.barriers.clear()  # (what they wait for may never commit: they never run)

    def mine(self, proposer: int, seq: int, leading: bool) -> bool:
        """Does this replica answer the entry at ``seq`` that ``proposer`` proposed?"""
        return proposer == self.node_id and (leading or seq <= self.acks_through)

    def counted(self, subject: str, value: int, sources: bytes | None) -> None:
        """A counter's increment on ``subject`` was proposed; its value is ``value``."""
        prev = self.counters.get(subject)
        self.counters[subject] = (value, (prev[1] if prev is not None else 0) + 1, sources)

    def applied(self, seq: int, msg_id: str, subject: str = "") -> None:
        """An entry this replica proposed as leader was applied."""
        if self.counters:
            total = self.counters.get(subject)
            if total is not None:
                if total[1] > 1:
                    self.counters[subject] = (total[0], total[1] - 1, total[2])
                else:
                    del self.counters[subject]
        if self.inflight:
            self.inflight -= 1
        if msg_id and self.inflight_ids.get(msg_id) == seq:
            del self.inflight_ids[msg_id]
        if seq > self.clseq:
            self.clseq = seq
        if self.barriers:
            self.release()

    def after_inflight(self, done: Callable[[], None]) -> None:
        """Run ``done`` once every entry this leader proposed so far, and every publish
        waiting to be proposed, has committed and applied: at once when nothing is in
        flight. A flow control answer that acknowledges an origin's messages to a copy
        waits so (nats-server proposes it through the log for the same reason): a leader
        lost before then never runs it, and the new leader copies those messages again."""
        if not self.inflight and not self.waiting:
            done()
            return
        self.barriers.append((-1 if self.waiting else self.clseq, done))

    def release(self) -> None:
        """Run the barriers whose entries have all applied (a leader's entries are
        proposed in sequence order, so those through ``clseq - inflight`` have)."""
        through = self.clseq - self.inflight
        idle = not self.inflight and not self.waiting
        due = self.barriers
        self.barriers = []
        keep: list[tuple[int, Callable[[], None]]] = []
        for target, done in due:
            if target < 0 and not self.waiting:
                target = self.clseq  # (its publishes were proposed: the newest entry)
            if idle or 0 <= target <= through:
                done()
            else:
                keep.append((target, done))
        # (a barrier run may propose, and add barriers of its own: those come after)
        self.barriers = keep + self.barriers
