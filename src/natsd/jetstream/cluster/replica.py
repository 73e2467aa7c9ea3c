"""One replicated stream's replica on this server: one object, one state machine
(design-clustering §4.5).

A ``StreamReplica`` owns everything this server holds of one replicated stream's group:
the Raft group (``RaftGroup``), the stream's leader shadow on the publish path
(``stream.replica``, a ``jetstream/stream/replica.Replica``: in-flight sequences, waiting
publishes), and the durable consumers sharing the group (``ReplicatedConsumers``). It is the
group's state machine (``apply``, ``install``, ``hold_snapshot``, ``on_ready``, handed to the
group when it is built) and the shadow's group (``propose``, ``proposable``, ...). Its owner,
``StreamGroups``, keeps one per stream placed here and drives the periodic duties.

States and transitions (``_enter`` logs any other as an error)::

    REPAIRING ──────► FOLLOWING ◄──────────────────────────────┐
        │               │   ▲                                   │
        │     Raft leader│   │ lost it                           │ lost it
        │               ▼   │                                   │
        │            READYING ──applied its log──► LEADING ◄──► HANDING_OVER
        │                                            ▲ │ ▲          │
        │                                 lease back │ │ │          │
        │                                            │ ▼ │          │
        │                                        OUT_OF_TOUCH ◄─────┘
        └──────────────────── every state ──► STOPPED

* ``FOLLOWING``: applies committed entries; consumers held passive from their committed
  state; takes no publish (it has no subscription on the stream's subjects).
* ``READYING`` (the issue's "candidate" that won): Raft made it leader; it takes publishes
  only once it has applied its log up to its own first entry (``ready_at``), so its
  sequence shadow starts from a store that holds every committed message.
* ``LEADING``: subscribed to the stream's subjects, checks and proposes publishes, runs the
  durable consumers, answers the stream's requests while it holds the lease.
* ``HANDING_OVER``: leading with a leadership transfer under way (Raft takes no proposal
  meanwhile): publishes wait, and go to the new leader if it takes over (``handed``).
* ``OUT_OF_TOUCH``: leading without an answer from a majority for ``LEASE``: its consumers
  are held passive (another leader may be delivering), requests go unanswered; back in
  touch, it runs them again from their committed state once it has applied its log up to
  where it was (``resume_at``): a consumer state it proposed before it lost touch commits
  then, and that entry's ack-sync replies go out, so a consumer started before it applied
  would deliver those acknowledged messages again.
* ``REPAIRING``: its store ends before its log (damage, a memory stream after a restart):
  it is refilled from the others' stores (``CatchUp.repair``) while committed entries wait
  (``deferred``); it never leads meanwhile.
* ``STOPPED``: it left the group (the stream deleted, moved away, or unreplicated).

Leaving is not a state of its own: a replica the meta group no longer places here keeps
its state and counts down (``leaving_since``), handing over first if it leads.

A publish, from the client to the PubAck: the leader's subscription calls
``Stream.process``, which checks it against the store and the shadow and calls
``StreamReplica.propose``; the entry is queued and proposed with the others of the loop turn
(``StreamGroups.flush``); once committed, every replica's ``StreamReplica.apply`` stores it
(``Stream.apply_entry``), and the replica that proposed it sends the PubAck.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from typing import Any, Final, Protocol

from natsd.cluster.group import RaftGroup, has_lease
from natsd.cluster.meta import StreamAssignment
from natsd.jetstream.answer import answer
from natsd.jetstream.cluster.catchup import CatchupError, StreamSnapshot, decode_snapshot
from natsd.jetstream.cluster.consumers import ReplicatedConsumers
from natsd.jetstream.engine import JsAccount, delete_msg, find_consumer
from natsd.jetstream.stream.entries import (
    OP_API,
    OP_BATCH,
    OP_CONSUMER,
    OP_CSTATE,
    OP_DELETE_CONSUMER,
    OP_DELETE_MSG,
    OP_MSG,
    OP_PURGE,
    DeleteConsumer,
    DeleteMsg,
    EntryError,
    Purge,
    StreamOp,
    compact_index,
    decode_batch,
    decode_msg,
    decode_op,
    encode_op,
    entry_op,
)
from natsd.jetstream.stream.replica import Replica, Waiting
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.types import Message
from natsd.storage.store import StoreError
from natsd.storage.wal import GroupLog

__all__ = [
    "LEASE",
    "ReplicaOwner",
    "ReplicaState",
    "StreamReplica",
    "group_name",
    "short_of",
    "unreplicated",
]

log = logging.getLogger("natsd")

# A leader without an answer from a majority of its group to a request it sent within this
# long stops answering requests and delivering (cluster/group.has_lease; heartbeats go every
# 200 ms, so a healthy group keeps it with room to spare): well under the election timeout
# (1 s), less the 100 ms check that stops the consumers, so it has stopped before another
# leader can be elected.
LEASE: Final = 0.5

# the typed operations (a legacy API entry decodes as one), and the answers they give
_OPS: Final = frozenset({OP_API, OP_PURGE, OP_DELETE_MSG, OP_DELETE_CONSUMER})
_RTYPE: Final[dict[type, str]] = {
    Purge: "stream_purge_response",
    DeleteMsg: "stream_msg_delete_response",
    DeleteConsumer: "consumer_delete_response",
}


class ReplicaState(Enum):
    FOLLOWING = "following"
    READYING = "readying"
    LEADING = "leading"
    HANDING_OVER = "handing over"
    OUT_OF_TOUCH = "out of touch"
    REPAIRING = "repairing"
    STOPPED = "stopped"


S = ReplicaState
# every state may go to STOPPED
_NEXT: Final[dict[ReplicaState, frozenset[ReplicaState]]] = {
    S.REPAIRING: frozenset({S.FOLLOWING, S.STOPPED}),
    S.FOLLOWING: frozenset({S.READYING, S.STOPPED}),
    S.READYING: frozenset({S.LEADING, S.FOLLOWING, S.STOPPED}),
    S.LEADING: frozenset({S.HANDING_OVER, S.OUT_OF_TOUCH, S.FOLLOWING, S.STOPPED}),
    S.HANDING_OVER: frozenset({S.LEADING, S.OUT_OF_TOUCH, S.FOLLOWING, S.STOPPED}),
    S.OUT_OF_TOUCH: frozenset({S.LEADING, S.FOLLOWING, S.STOPPED}),
    S.STOPPED: frozenset(),
}
# the states in which the replica takes publishes (its shadow leads)
LEADS: Final = frozenset({S.LEADING, S.HANDING_OVER, S.OUT_OF_TOUCH})


def _current(g: RaftGroup) -> bool:
    """A follower has applied 90% of what it knows is committed (nats-server's threshold
    for serving direct gets: under a steady load it is never exactly caught up)."""
    return g.applied * 10 >= g.node.committed() * 9


def unreplicated(s: Stream) -> bool:
    """An R1 stream, answered by the one server that holds it. A replicated one that has
    no group yet (its server is restarting) answers nothing: its leader does."""
    return s.replica is None and s.cfg.num_replicas <= 1


def short_of(stream: Stream, wal_log: GroupLog) -> StreamSnapshot | None:
    """The replica's own snapshot when its store ends before what the snapshot stands for
    (a memory stream after a restart, or a store cut back below its log): the rest is
    fetched from the other replicas before the log applies again (``CatchUp.repair``)."""
    if not wal_log.snap_data:
        return None
    try:
        snap = decode_snapshot(wal_log.snap_data)
    except CatchupError:
        return None
    return snap if stream.store.last_seq() < snap.last_seq else None


def group_name(a: StreamAssignment) -> bytes:
    return f"S:{a.account}:{a.name}:{a.created}".encode()


class ReplicaOwner(Protocol):
    """What a replica asks of ``StreamGroups``, which owns it."""

    def queue(self, name: bytes, data: bytes) -> None:
        """Propose ``data`` with the group's other entries of this loop turn."""

    def wake(self, name: bytes) -> None:
        """Follow leadership on the next loop iteration (``StreamReplica.follow``)."""

    def offer_snapshot(self, name: bytes, replica: StreamReplica, m: Message) -> bool:
        """A MsgSnap from the leader: True when the catch-up holds it back (``CatchUp``)."""

    def pass_on(self, name: bytes, items: list[Waiting]) -> None:
        """Publishes that waited when leadership went, for the new leader (``PublishRelay``)."""

    def advise_leader(self, replica: StreamReplica) -> None:
        """The stream leader-elected advisory, as this replica takes over."""

    def now(self) -> float:
        """Loop time (seconds)."""


class StreamReplica:
    """This server's replica of one replicated stream (module docstring)."""

    def __init__(
        self,
        owner: ReplicaOwner,
        name: bytes,
        node_id: int,
        ja: JsAccount,
        stream: Stream,
        a: StreamAssignment,
        repairing: bool,
        clock: Callable[[], float],
    ) -> None:
        self.owner = owner
        self.name = name
        self.node_id = node_id
        self.ja = ja
        self.stream = stream
        self.assignment = a
        self.state = S.REPAIRING if repairing else S.FOLLOWING
        # the group's host clock (has_lease's ``now``)
        self._clock = clock
        # the publish path's shadow: leading or not, in-flight sequences, waiting publishes
        self.shadow = Replica(node_id, self)
        stream.replica = self.shadow
        stream.unsubscribe()  # the leader subscribes, once it is ready
        self.consumers = ReplicatedConsumers(
            ja, stream, node_id, self.propose, lambda: self.shadow.leading
        )
        self.consumers.adopt()
        # set by StreamGroups.attach right after: the group is built with this replica as
        # its state machine, so it cannot exist before it
        self.group: RaftGroup | None = None
        # as READYING: the log index it must apply before it takes publishes
        self.ready_at = 0
        # back in touch from OUT_OF_TOUCH: the log index it must apply before its
        # consumers run again (0: none waits)
        self.resume_at = 0
        # an applied COMPACT entry's index, to compact at when no WAL sync is under way
        self.compact_to = 0
        # as leader: the index of the last COMPACT entry proposed
        self.compact_proposed = 0
        # the leader this replica knows of, and since when (wall ns) it knows of it
        self.leader = 0
        self.leader_since = 0
        # for leaderless(): when this replica joined (loop time), and whether it ever knew
        # of a leader
        self.created_at = owner.now()
        self.had_leader = False
        # loop time since when the meta group no longer places it here (0: it does), and
        # whether it logged that it waits, a voter, for the group to remove it
        self.leaving_since = 0.0
        self.leaving_told = False
        # REPAIRING: committed entries (index, data) that wait for the store to be whole
        self.deferred: list[tuple[int, bytes]] = []

    # ---------------------------------------------------------------- states
    def _enter(self, new: ReplicaState) -> None:
        if new is self.state:
            return
        if new not in _NEXT[self.state]:
            # a bug, said loudly; the replica takes the state it is in (raising here would
            # stop the check loop that called it)
            log.error("stream %s/%s: replica state %s -> %s is not a transition",
                      self.ja.account.name, self.stream.name, self.state.value,
                      new.value)  # fmt: skip
        log.debug("stream %s/%s: %s -> %s", self.ja.account.name, self.stream.name,
                  self.state.value, new.value)  # fmt: skip
        self.state = new

    @property
    def repairing(self) -> bool:
        return self.state is S.REPAIRING

    def repaired(self, after: int = 0) -> None:
        """The store is whole again (``CatchUp.repair`` done): the entries that waited
        apply, those after log index ``after`` only (a snapshot installed at ``after``
        stands for the others), and the replica follows."""
        self._enter(S.FOLLOWING)
        deferred, self.deferred = self.deferred, []
        for index, data in deferred:
            if index > after:
                self.apply(index, data)

    def stop(self) -> None:
        """It leaves the group: no more publishes, nothing running."""
        self.shadow.follow()
        self.stream.unsubscribe()
        self.stream.serve_direct(False)
        self._enter(S.STOPPED)

    # ---------------------------------------------------------------- the shadow's group
    def propose(self, data: bytes) -> bool:
        """Queue an entry, proposed with the others of this loop turn in one MsgProp
        (False: this replica is not the group's leader)."""
        g = self.group
        if g is None or not g.node.is_leader():
            return False
        self.owner.queue(self.name, data)
        return True

    def is_raft_leader(self) -> bool:
        """Raft leader and still in touch with a majority (has_lease): a leader cut off
        from the others answers no request (a pull, a direct get) while another may lead."""
        g = self.group
        return g is not None and g.node.is_leader() and has_lease(g, self._clock(), LEASE)

    def transferring(self) -> bool:
        g = self.group
        return g is not None and g.node.transferring()

    def proposable(self) -> bool:
        """Raft leader and no transfer under way (on the publish path: once per publish)."""
        g = self.group
        return g is not None and g.node.proposable()

    # ---------------------------------------------------------------- the group's state machine
    def apply(self, _index: int, data: bytes) -> None:
        """A committed entry."""
        if self.state is S.REPAIRING:
            self.deferred.append((_index, data))
            return
        op = entry_op(data)
        if op == OP_MSG:  # (nearly every entry: first, and with the fewest calls)
            try:
                self.stream.apply_entry(decode_msg(data))
            except EntryError as e:
                a = self.assignment
                log.error("stream %s/%s: entry not applied: %s", a.account, a.name, e)
            return
        index = compact_index(data)
        if index:
            self.compact_to = max(self.compact_to, index)
            return
        try:
            if op in _OPS:
                self._apply_op(data)
            elif op == OP_BATCH:
                self.stream.apply_batch(*decode_batch(data))
            elif op in (OP_CONSUMER, OP_CSTATE):
                self.consumers.apply(data)
            else:
                self.stream.apply_entry(decode_msg(data))
        except EntryError as e:
            a = self.assignment
            log.error("stream %s/%s: entry not applied: %s", a.account, a.name, e)

    def install(self, index: int, data: bytes) -> None:
        """A snapshot replaced the log. The store was brought up to it before it was
        stepped (``hold_snapshot``); one whose data did not decode was stepped as it came,
        and is reported here."""
        if not data:
            return  # the group's first snapshot (its membership): nothing stored yet
        a = self.assignment
        try:
            last = decode_snapshot(data).last_seq
        except CatchupError as e:
            log.error("stream %s/%s: snapshot at %d: %s", a.account, a.name, index, e)
            return
        store = self.stream.store
        if store.last_seq() < last:
            log.error(
                "stream %s/%s: snapshot at %d installed with the store at %d, short of %d",
                a.account, a.name, index, store.last_seq(), last,
            )  # fmt: skip

    def hold_snapshot(self, m: Message) -> bool:
        return self.owner.offer_snapshot(self.name, self, m)

    def on_ready(self) -> None:
        """After every Ready of the group (cheap): wake ``follow`` only when this replica's
        part (leading or not) no longer matches Raft's, or a new leader waits to have
        applied its log."""
        g = self.group
        if g is None:
            return
        lead = g.node.leader()
        leader = lead == self.node_id and g.node.is_leader()
        if leader != self.shadow.leading or lead != self.leader or self.state is S.READYING:
            self.owner.wake(self.name)

    # ---------------------------------------------------------------- leadership
    def track_leader(self, lead: int) -> None:
        """Note when this replica first knew of its group's current leader."""
        if lead != self.leader:
            self.leader = lead
            self.had_leader = self.had_leader or bool(lead)
            self.leader_since = self.stream.clock.time_ns() if lead else 0

    def follow(self) -> None:
        """Follow leadership: a leader takes publishes once it has applied its log up to
        its own first entry; a replica that no longer leads stops taking them and hands
        what waited over to the new leader."""
        g = self.group
        if g is None or self.state in (S.REPAIRING, S.STOPPED):
            return
        node = g.node
        lead = node.leader()
        self.track_leader(lead)
        if node.is_leader() and lead == self.node_id:
            if self.state in LEADS:
                if self.state is not S.OUT_OF_TOUCH:  # (the lease decides that one's way out)
                    self._enter(S.HANDING_OVER if node.transferring() else S.LEADING)
            else:
                if self.state is S.FOLLOWING:
                    self.ready_at = node.last_index()
                    self._enter(S.READYING)
                if g.applied >= self.ready_at:
                    self._lead()
        else:
            if self.state is S.READYING:
                self._enter(S.FOLLOWING)
            elif self.state in LEADS:
                self.stop_leading()
        shadow = self.shadow
        if shadow.handed:
            self.owner.pass_on(self.name, shadow.handed)
            shadow.handed = []
        self._serve_reads(g)

    def _serve_reads(self, g: RaftGroup) -> None:
        """A stream that allows direct gets answers them from every replica that is current,
        as nats-server does: the leader while it holds its lease, and a follower that knows
        a leader once it has applied 90% of what it knows is committed (under a steady load
        a follower is never exactly caught up) and holds a log (a replica that joins the
        group serves nothing until its catch-up is done). A follower stays serving while it
        has a leader; an out-of-touch leader, a follower that lost its leader, a repairing or
        stopped replica, or direct gets turned off in the config, stop it. A mirror with
        ``mirror_direct`` answers its origin's direct gets by the same rule (its leader
        once its feed has caught up: ``Stream.mirror_caught_up``)."""
        stream = self.stream
        state = self.state
        leading = state is S.LEADING or state is S.HANDING_OVER
        # (a replica that joined an existing group holds nothing until the leader's
        # snapshot is stepped, after its catch-up: its log is empty, applied 0, and it
        # would count as current; a group's founders start applied at 1)
        following = state is S.FOLLOWING and bool(self.leader) and g.applied > 0
        cfg = stream.cfg
        if not (leading or following):
            stream.serve_direct(False)
            stream.serve_origin_direct(False)
            return
        if not cfg.allow_direct:
            stream.serve_direct(False)
        elif not stream.direct_subs and (leading or _current(g)):
            stream.serve_direct(True)
        if not cfg.mirror_direct or cfg.mirror is None:
            stream.serve_origin_direct(False)
        elif following and not stream.origin_subs and _current(g):
            stream.serve_origin_direct(True)

    def _lead(self) -> None:
        self.ready_at = self.resume_at = 0
        self._enter(S.LEADING)
        self.shadow.lead(self.stream.store.last_seq())
        self.stream.leadership_changed()
        self.stream.subscribe()
        self.consumers.activate()
        self.owner.advise_leader(self)

    def stop_leading(self) -> None:
        """This replica stops acting as leader: no more publishes, and its consumers held
        passive from their committed state. Every way out of leading goes through here: a
        consumer left running would stop taking the committed states (only a passive one
        does), and when this replica came to lead again it would deliver from where it was
        when it stopped, acknowledged messages included."""
        self.shadow.follow()
        self.stream.leadership_changed()
        self.stream.unsubscribe()
        self.consumers.passivate()
        self.ready_at = self.resume_at = 0
        if self.state in LEADS or self.state is S.READYING:
            self._enter(S.FOLLOWING)

    def keep_lease(self) -> None:
        """As leader: out of touch with a majority for ``LEASE``, the consumers stop (held
        passive from their committed state), and run again once back in touch and its log
        applied up to where it was then (``resume_at``): a leader cut off from the others
        must not deliver messages another leader may since have delivered and seen
        acknowledged. (Publishes need a commit anyway.)"""
        g = self.group
        if g is None or self.state not in LEADS:
            return
        lease = has_lease(g, self._clock(), LEASE)
        if not lease and self.state is not S.OUT_OF_TOUCH:
            self._enter(S.OUT_OF_TOUCH)
            self.resume_at = 0
            self.consumers.passivate()
            log.warning("stream %s > %s: no word from a majority of its group for %.1f s;"
                        " consumers stopped", self.ja.account.name, self.stream.name,
                        LEASE)  # fmt: skip
        elif lease and self.state is S.OUT_OF_TOUCH:
            self._enter(S.LEADING)
            # (what it proposed before, consumer states with their ack-sync replies
            # among it, commits now: the consumers start from it once it has applied)
            self.resume_at = max(g.node.last_index(), 1)
            log.info("stream %s > %s: in touch with a majority of its group again",
                     self.ja.account.name, self.stream.name)  # fmt: skip
        elif not self.resume_at:
            return
        if self.resume_at and self.state is not S.OUT_OF_TOUCH and g.applied >= self.resume_at:
            self.resume_at = 0
            self.consumers.activate()
            log.info("stream %s > %s: consumers running again", self.ja.account.name,
                     self.stream.name)  # fmt: skip
        self._serve_reads(g)  # (an out-of-touch leader answers no direct get either)

    def leads(self) -> bool:
        """Does this replica answer for its stream? It takes publishes and its group still
        has it as leader, in touch with a majority: one that just lost the leadership (the
        check has not run yet) stays quiet, so a request is not answered by two servers."""
        return self.shadow.leading and self.is_raft_leader()

    # ---------------------------------------------------------------- typed operations
    def propose_op(self, make: Callable[[Replica], StreamOp]) -> bool:
        """As leader: a purge, message delete or consumer delete the API checked goes
        through the log (``_apply_op``); False when the group did not take it."""
        shadow = self.shadow
        if not shadow.leading:
            return False
        if not self.propose(encode_op(make(shadow))):
            return False
        shadow.inflight += 1  # publishes whose checks read the store wait for it
        return True

    def _apply_op(self, data: bytes) -> None:
        """A committed purge, message delete or consumer delete: every replica applies it
        to its store and consumers in log order, so each gets the same result; the one
        that proposed it answers the request."""
        op = decode_op(data)
        stream = self.stream
        shadow = self.shadow
        mine = shadow.leading and op.proposer == shadow.node_id
        if mine:
            shadow.applied(0, "")
        result: dict[str, Any] | ApiError
        try:
            if isinstance(op, DeleteConsumer):
                # (touches no message: a replay applies it again, after the CONSUMER entry
                # earlier in the log has just held the consumer again)
                c = find_consumer(stream, op.name)
                if c is None:
                    result = E.JSConsumerNotFoundErr()
                else:
                    c.delete()  # (a passive consumer sends no advisory)
                    result = {"success": True}
            elif stream.store.last_seq() > op.as_of:
                return  # a replay after a restart: the store holds what came after it
            elif isinstance(op, Purge):
                result = {"success": True, "purged": stream.purge(op.filter, op.seq, op.keep)}
            else:
                delete_msg(stream, op.seq, op.no_erase)
                result = {"success": True}
        except ApiError as e:
            result = e
        except StoreError as e:
            result = E.JSStreamGeneralErrorF(err=str(e) or type(e).__name__)
        stream.drain()
        self.consumers.prune()  # a consumer delete
        if mine:
            r = op.request
            answer(self.ja, r.subject, r.reply or None, r.body, _RTYPE[type(op)], result,
                   stream.name)  # fmt: skip

    # ---------------------------------------------------------------- views
    def leaderless(self, started: float, after: float) -> bool:
        """This replica's group has no leader (nats-server's isGroupLeaderless): it had one
        and JetStream has run (since ``started``) for ``after`` seconds, or the group is
        that old."""
        g = self.group
        if g is None:
            return False
        lead = g.node.leader()
        self.track_leader(lead)
        if lead:
            return False
        now = self.owner.now()
        if self.had_leader and now - started >= after:
            return True
        return now - self.created_at >= after
