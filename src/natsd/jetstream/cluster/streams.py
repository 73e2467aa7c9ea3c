"""Replicated streams' Raft groups on this server (design-clustering §4.5).

Ownership: ``StreamGroups`` owns the group of every stream with ``num_replicas`` > 1 that is
placed on this server: it creates the group when the assignment applies (or restores it
from the node log after a restart), feeds the group's committed entries to the stream
(``Stream.apply_entry``), and follows leadership: the replica that leads, once it has
applied everything in its log up to its own first entry, subscribes to the stream's
subjects and takes publishes (``Replica.lead``); one that stops leading unsubscribes.
Leadership is followed as soon as a Raft turn changes it (``RaftGroup.on_ready`` wakes
``_follow`` on the next loop iteration), not on the 100 ms check, which keeps the slower
duties (leaving, repair, compaction, membership). The stream side of all this (the entries,
the leader's shadow) is ``jetstream/stream/replica``; the API requests its leader answers
are ``api/replicated.py``. It sends the stream leader-elected advisories.

A group is named after the stream's account, name and creation time, so a stream deleted
and created again gets a new group. Its voters are the assignment's peers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.cluster.group import RaftGroup, has_lease, peer_hash, raft_id
from natsd.cluster.meta import StreamAssignment
from natsd.cluster.raft_service import RaftService
from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.jetstream.answer import answer
from natsd.jetstream.cluster.catchup import (
    CatchUp,
    CatchupError,
    StreamSnapshot,
    Transfer,
    decode_snapshot,
    encode_snapshot,
    report_lost,
)
from natsd.jetstream.cluster.consumers import (
    ReplicatedConsumers,
)
from natsd.jetstream.cluster.handover import HandOver, publishes
from natsd.jetstream.cluster.info import CURRENT_FOR, stream_cluster_block
from natsd.jetstream.cluster.member import (
    Member,
    group_name,
    short_of,
    track_leader,
    unreplicated,
)
from natsd.jetstream.cluster.membership import LEAVE_AFTER, in_config, is_voter, next_change
from natsd.jetstream.engine import JsAccount, delete_msg, delete_stream, find_consumer
from natsd.jetstream.stream.entries import (
    OP_API,
    OP_CONSUMER,
    OP_CSTATE,
    OP_DELETE_CONSUMER,
    OP_DELETE_MSG,
    OP_PURGE,
    DeleteConsumer,
    DeleteMsg,
    EntryError,
    Purge,
    Request,
    StreamOp,
    compact_index,
    decode_msg,
    decode_op,
    encode_compact,
    encode_op,
    entry_op,
)
from natsd.jetstream.stream.replica import Replica
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.state import RaftError
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.storage.store import StoreError, StreamStore

__all__ = ["StreamGroups", "group_name", "unreplicated"]

log = logging.getLogger("natsd")

# JsCluster.respond: an API response into an account (returns it as sent)
Respond = Callable[[JsAccount, str, str, dict[str, Any]], bytes]

# The leader proposes a COMPACT entry once the log holds this many applied entries. It
# keeps the entries a replica still needs unless that replica is more than KEEP_FOR_LAGGING
# compactions behind: one that far behind (or away) catches up from the leader's store
# instead (cluster/catchup.py), so the log stays bounded while a replica is away.
COMPACT_EVERY: Final = 4096
# A leader without an answer from a majority of its group to a request it sent within this
# long stops answering requests and delivering (cluster/group.has_lease; heartbeats go every
# 200 ms, so a healthy group keeps it with room to spare): well under the election timeout
# (1 s), less the 100 ms check that stops the consumers, so it has stopped before another
# leader can be elected.
LEASE: Final = 0.5
KEEP_FOR_LAGGING: Final = 2

# the typed operations (a legacy API entry decodes as one), and the answers they give
_OPS: Final = frozenset({OP_API, OP_PURGE, OP_DELETE_MSG, OP_DELETE_CONSUMER})
_RTYPE: Final[dict[type, str]] = {
    Purge: "stream_purge_response",
    DeleteMsg: "stream_msg_delete_response",
    DeleteConsumer: "consumer_delete_response",
}


# nats-server's isGroupLeaderless: a replica answers STREAM.INFO itself when its group has
# no leader, once JetStream has run this long (or the group has existed this long).
LEADERLESS_AFTER = 10.0


class StreamGroups:
    """The replicated streams placed on this server, and their groups."""

    def __init__(
        self,
        raft: RaftService,
        server_name: str,
        name_of: Callable[[int], str],
        system: Account,
        cluster_name: Callable[[], str],
        domain: str,
        respond: Respond,
    ) -> None:
        self.raft = raft
        self.server_name = server_name
        # the account the groups' traffic goes through, and their advisories' second home
        self.system = system
        self.traffic_account = system.name
        self._cluster_name = cluster_name
        self._domain = domain
        self.respond = respond
        self._started = asyncio.get_running_loop().time()
        self.leaderless_after = LEADERLESS_AFTER
        self._nuid = Nuid()
        self._name_of = name_of
        self.members: dict[bytes, Member] = {}
        # entries proposed this loop turn, by group: one MsgProp each (see _flush)
        self._batches: dict[bytes, list[bytes]] = {}
        self._flush_scheduled = False
        # groups whose leadership changed in the last Raft turn: followed at once
        self._woken: set[bytes] = set()
        self._wake_scheduled = False
        self.compact_every = COMPACT_EVERY
        # publishes that reached a replica as it stopped leading, for the new leader
        self.hand_over = HandOver(raft.host.id, self._member_stream, name_of)
        # has this server been removed from the cluster (SERVER.REMOVE)? Set by JsCluster:
        # its replicas then leave their groups
        self.removed: Callable[[], bool] = lambda: False
        # replicas catching up from a leader's store, and this server's stores as a source
        self.catchup = CatchUp(raft.host.id, system, self._source, self._caught_up)

    def start(self) -> None:
        self.catchup.start()

    def stop(self) -> None:
        self.catchup.stop()

    def attach(
        self,
        ja: JsAccount,
        stream: Stream,
        a: StreamAssignment,
        joining: bool = False,
        founders: list[str] | None = None,
    ) -> None:
        """``stream`` is a replica of ``a`` on this server: join (or rejoin) its group;
        ``joining``: the group exists and adds this server (it replaces a removed peer, or
        a scale-up adds it); ``founders``: the voters a new group starts with when they
        are not the assignment's peers (an R1 stream scaled up: its one server, which holds
        the data; the others join)."""
        name = group_name(a)
        if name in self.members:
            self.members[name].assignment = a  # its peers may have changed
            return
        host = self.raft.host
        rep = Replica(host.id)
        stream.replica = rep
        stream.unsubscribe()  # the leader subscribes, once it is ready

        m = Member(ja, stream, a)

        def propose(data: bytes) -> bool:
            # queued, and proposed with the others of this loop turn in one MsgProp
            g = m.group
            if g is None or not g.node.is_leader():
                return False
            batch = self._batches.get(name)
            if batch is None:
                batch = self._batches[name] = []
                if not self._flush_scheduled:
                    self._flush_scheduled = True
                    asyncio.get_running_loop().call_soon(self._flush)
            batch.append(data)
            return True

        rep.propose = propose

        def is_raft_leader() -> bool:
            # and still in touch with a majority (has_lease): a leader cut off from the
            # others answers no request (a pull, a direct get) while another may lead
            g = m.group
            return (
                g is not None
                and g.node.is_leader()
                and has_lease(g, self.raft.host.clock(), LEASE)
            )

        rep.is_raft_leader = is_raft_leader

        def transferring() -> bool:
            g = m.group
            return g is not None and g.node.transferring()

        rep.transferring = transferring

        def proposable() -> bool:
            g = m.group
            if g is None:
                return False
            return g.node.proposable()

        rep.proposable = proposable
        m.consumers = ReplicatedConsumers(ja, stream, host.id, propose, lambda: rep.leading)
        m.consumers.adopt()

        def apply(_index: int, data: bytes) -> None:
            if m.repairing:
                m.deferred.append((_index, data))
                return
            index = compact_index(data)
            if index:
                m.compact_to = max(m.compact_to, index)
                return
            try:
                op = entry_op(data)
                if op in _OPS:
                    self._apply_op(m, data)
                elif op in (OP_CONSUMER, OP_CSTATE):
                    if m.consumers is not None:
                        m.consumers.apply(data)
                else:
                    stream.apply_entry(decode_msg(data))
            except EntryError as e:
                log.error("stream %s/%s: entry not applied: %s", a.account, a.name, e)

        def install(index: int, data: bytes) -> None:
            # the store was brought up to the snapshot before it was stepped (hold_snapshot);
            # one whose data did not decode was stepped as it came, and is reported here
            if not data:
                return  # the group's first snapshot (its membership): nothing stored yet
            try:
                last = decode_snapshot(data).last_seq
            except CatchupError as e:
                log.error("stream %s/%s: snapshot at %d: %s", a.account, a.name, index, e)
                return
            if stream.store.last_seq() < last:
                log.error(
                    "stream %s/%s: snapshot at %d installed with the store at %d, short of %d",
                    a.account, a.name, index, stream.store.last_seq(), last,
                )  # fmt: skip

        repair: StreamSnapshot | None = None
        if name in host.wal.groups:
            # the entries after the last compaction are applied again; the store skips
            # the messages it holds
            wal_log = host.wal.groups[name]
            report_lost(stream, wal_log, f"{a.account}/{a.name}")
            repair = short_of(stream, wal_log)
            m.repairing = repair is not None
            m.group = host.restore(name, apply, install=install, forwarding=False)
        elif joining:
            m.group = host.join(name, apply, install, forwarding=False)
        else:
            voters = sorted(raft_id(p) for p in (founders or a.peers))
            m.group = host.create(name, voters, apply, install, forwarding=False)
            if a.peers and a.peers[0] == self.server_name:
                m.group.node.campaign()  # a new group need not wait out an election timeout
        m.group.hold_snapshot = lambda msg: self.catchup.offer(name, m.stream.store, msg)
        me = host.id

        def on_ready() -> None:
            # cheap, after every Ready of the group: wake _follow only when this replica's
            # part (leading or not) no longer matches Raft's, or a new leader waits to
            # have applied its log
            g = m.group
            if g is None:
                return
            lead = g.node.leader()
            leader = lead == me and g.node.is_leader()
            if leader != rep.leading or lead != m.leader or m.ready_at:
                self._wake(name)

        m.group.on_ready = on_ready
        m.apply = apply
        self.members[name] = m
        if repair is not None:
            sources = [v for v in m.group.conf.voters if v != host.id]
            index = host.wal.groups[name].snap_index
            self.catchup.repair(name, stream.store, repair, index, sources)
        self.raft.kick()

    def reassigned(self, a: StreamAssignment) -> None:
        """The meta group changed the stream's peers without a group to attach: it left
        this server out (its replica leaves the group, ``_leave``), or scaled the stream
        down to this server alone (its group shrinks, then ends: ``_unreplicate``)."""
        m = self.members.get(group_name(a))
        if m is not None:
            m.assignment = a

    def _source(self, name: bytes, requester: int, index: int) -> StreamStore | None:
        """The store a member of group ``name`` catches up from to a snapshot at log
        ``index`` (None: not a member, or this replica has not applied that far yet)."""
        m = self.members.get(name)
        if m is None or m.group is None or m.group.applied < index or m.repairing:
            return None  # (a replica being repaired itself has a store short of its log)
        conf = m.group.conf
        if requester not in conf.voters and requester not in conf.learners:
            return None
        return m.stream.store

    def _caught_up(self, t: Transfer) -> None:
        """A catch-up is complete: the consumers take the snapshot's state, the dedup
        window is read from the store, and the held snapshot replaces the log."""
        m = self.members.get(t.group)
        if m is None or m.group is None:
            return
        if t.held is None:
            # a repair: the consumers as of its own snapshot, then the entries that waited
            if m.consumers is not None:
                m.consumers.install(t.snap.consumers)
            m.repairing = False
            deferred, m.deferred = m.deferred, []
            for index, data in deferred:
                if m.apply is not None:
                    m.apply(index, data)
            m.stream.rebuild_dedupe(time.time_ns())
            return
        if m.consumers is not None and m.group.applied < t.held_index:
            # (a log that got past the snapshot meanwhile, from a new leader that still had
            # the entries, holds newer consumer states than the snapshot)
            m.consumers.install(t.snap.consumers)
        m.stream.rebuild_dedupe(time.time_ns())
        self.raft.host.step_held(t.group, t.held)
        self.raft.kick()

    def detach(self, a: StreamAssignment) -> None:
        """The stream is deleted (or no longer placed here): leave its group."""
        m = self.members.pop(group_name(a), None)
        if m is None:
            return
        self.catchup.cancel(group_name(a))
        if m.stream.replica is not None:
            m.stream.replica.follow()
        m.stream.unsubscribe()
        self.raft.host.drop(group_name(a))

    def check(self) -> None:
        """Every 100 ms: leave, repair, compact, walk the membership, and follow leadership
        (which ``_follow`` also does at once when a Raft turn changed it)."""
        me = self.raft.host.id
        now = asyncio.get_running_loop().time()
        if self.catchup.transfers:
            self.catchup.tick(now)
        for name, m in list(self.members.items()):
            rep = m.stream.replica
            g = m.group
            if rep is None or g is None:
                continue
            out = self.server_name not in m.assignment.peers or self.removed()
            if not out:
                m.leaving_since = 0.0  # (placed here again)
            elif self._leave(name, m, g, now):
                continue
            if m.repairing:
                if g.node.is_leader():
                    self.stepdown(m.stream)  # its store is not whole yet: it must not lead
                continue
            if m.compact_to and not self.raft.busy:
                self._compact(name, m, g)
            self._follow(m)
            if rep.leading and g.node.is_leader() and g.node.leader() == me:
                self._keep_lease(m, g)
                self._propose_compact(name, m, g)
                self._follow_peers(m, g)
                if len(m.assignment.peers) == 1 and self._unreplicate(m, g):
                    continue
                if rep.waiting and not rep.inflight and not rep.transferring():
                    m.stream.drain()  # a leadership transfer that did not happen

    def _keep_lease(self, m: Member, g: RaftGroup) -> None:
        """A leader out of touch with a majority for ``LEASE`` stops its consumers (held
        passive from their committed state), and runs them again once back in touch: a
        leader cut off from the others must not deliver messages another leader may since
        have delivered and seen acknowledged. (Publishes need a commit anyway.)"""
        c = m.consumers
        if c is None:
            return
        lease = has_lease(g, self.raft.host.clock(), LEASE)
        if not lease and not m.suspended:
            m.suspended = True
            c.passivate()
            log.warning("stream %s > %s: no word from a majority of its group for %.1f s;"
                        " consumers stopped", m.ja.account.name, m.stream.name, LEASE)  # fmt: skip
        elif lease and m.suspended:
            m.suspended = False
            c.activate()

    def _wake(self, name: bytes) -> None:
        self._woken.add(name)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._follow_woken)

    def _follow_woken(self) -> None:
        self._wake_scheduled = False
        woken, self._woken = self._woken, set()
        for name in woken:
            m = self.members.get(name)
            if m is not None and m.group is not None:
                self._follow(m)

    def _follow(self, m: Member) -> None:
        """Follow leadership: a leader takes publishes once it has applied its log up to
        its own first entry; a replica that no longer leads stops taking them and hands
        what waited over to the new leader."""
        rep = m.stream.replica
        g = m.group
        if rep is None or g is None or m.repairing:
            return
        node = g.node
        track_leader(m, node.leader())
        if node.is_leader() and node.leader() == self.raft.host.id:
            if rep.leading:
                return
            if not m.ready_at:
                m.ready_at = node.last_index()
            if g.applied >= m.ready_at:
                m.ready_at = 0
                rep.lead(m.stream.store.last_seq())
                m.stream.subscribe()
                if m.consumers is not None:
                    m.consumers.activate()
                m.suspended = False
                self._advise_leader(m.ja, m.stream)
        else:
            m.ready_at = 0
            if rep.leading:
                self._stop_leading(m)
        if rep.handed:
            self.hand_over.add(group_name(m.assignment), rep.handed)
            rep.handed = []

    def propose_purge(
        self, stream: Stream, request: Request, filt: str, seq: int, keep: int
    ) -> bool:
        """As leader: a purge the API checked goes through the log (``_apply_op``); False
        when the group did not take it."""
        return self._propose_op(
            stream, lambda r: Purge(r.node_id, r.clseq, request, filt, seq, keep)
        )

    def propose_delete_msg(
        self, stream: Stream, request: Request, seq: int, no_erase: bool
    ) -> bool:
        """As leader: a message delete the API checked goes through the log."""
        return self._propose_op(
            stream, lambda r: DeleteMsg(r.node_id, r.clseq, request, seq, no_erase)
        )

    def propose_delete_consumer(self, stream: Stream, request: Request, name: str) -> bool:
        """As leader: a durable consumer's delete the API checked goes through the log."""
        return self._propose_op(stream, lambda r: DeleteConsumer(r.node_id, r.clseq, request, name))

    def _propose_op(self, stream: Stream, make: Callable[[Replica], StreamOp]) -> bool:
        rep = stream.replica
        if rep is None or not rep.leading:
            return False
        if not rep.propose(encode_op(make(rep))):
            return False
        rep.inflight += 1  # publishes whose checks read the store wait for it
        return True

    def _apply_op(self, m: Member, data: bytes) -> None:
        """A committed purge, message delete or consumer delete: every replica applies it
        to its store and consumers in log order, so each gets the same result; the one
        that proposed it answers the request."""
        op = decode_op(data)
        stream = m.stream
        rep = stream.replica
        mine = rep is not None and rep.leading and op.proposer == rep.node_id
        if mine and rep is not None:
            rep.applied(0, "")
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
        if m.consumers is not None:
            m.consumers.prune()  # a consumer delete
        if mine:
            r = op.request
            answer(m.ja, r.subject, r.reply or None, r.body, _RTYPE[type(op)], result, stream.name)

    def _flush(self) -> None:
        """Propose every group's entries of this loop turn, each group's in one MsgProp. A
        batch the engine drops (leadership just moved, or its uncommitted-size limit is
        reached) is lost with its PubAcks (the clients retry with their Nats-Msg-Id); the
        replica stops taking publishes until it has applied its log again, so its sequence
        shadow restarts from its store."""
        self._flush_scheduled = False
        batches, self._batches = self._batches, {}
        for name, datas in batches.items():
            m = self.members.get(name)
            if m is None:
                continue
            try:
                self.raft.propose_batch(name, datas)
            except RaftError:
                rep = m.stream.replica
                if rep is not None and rep.leading:
                    # the publishes are passed on to whoever leads next (maybe this
                    # replica again) rather than dropped: they were never in the log
                    rep.handed.extend(publishes(datas))
                    self._stop_leading(m)
                m.ready_at = 0

    def _stop_leading(self, m: Member) -> None:
        """This replica stops acting as leader: no more publishes, and its consumers held
        passive from their committed state. Every way out of leading goes through here: a
        consumer left running would stop taking the committed states (only a passive one
        does), and when this replica came to lead again it would deliver from where it was
        when it stopped, acknowledged messages included."""
        rep = m.stream.replica
        if rep is not None:
            rep.follow()
        m.stream.unsubscribe()
        if m.consumers is not None:
            m.consumers.passivate()
        m.suspended = False

    def _follow_peers(self, m: Member, g: RaftGroup) -> None:
        """As leader: the next Raft configuration change toward the assignment's peers
        (``cluster/membership.py``)."""
        step = next_change(g, {raft_id(p) for p in m.assignment.peers}, self.raft.host.id)
        snap_conf = g.storage.snapshot().metadata.conf_state
        if any(n not in snap_conf.learners and n not in snap_conf.voters for n in g.conf.learners):
            # A node takes a snapshot only if its configuration holds it (Raft's rule), and
            # a newcomer's empty log gets this node's snapshot: take one that does.
            m.compact_to = max(m.compact_to, g.applied)
        if step is None:
            return
        if isinstance(step, int):
            self.stepdown(m.stream, among={step})
            return
        try:
            g.node.propose_conf_change(step)
        except RaftError:
            return  # (a transfer under way): tried again at the next check
        log.info(
            "stream %s/%s: membership change %s",
            m.assignment.account, m.assignment.name,
            ", ".join(f"{c.type.name[10:]} {self._name_of(c.node_id)}" for c in step.changes),
        )  # fmt: skip
        self.raft.kick()

    def _unreplicate(self, m: Member, g: RaftGroup) -> bool:
        """A stream scaled down to one replica, once its group is this server alone and
        nothing is in flight: the group ends and the stream runs as an R1 stream (its
        store synced, its consumers writing their state to disk again); True when done."""
        rep = m.stream.replica
        cs = g.conf
        if rep is None or rep.inflight or rep.waiting or cs.learners or cs.voters_outgoing:
            return False
        if cs.voters != [self.raft.host.id]:
            return False
        stream = m.stream
        stream.store.flush()
        stream.store.sync()
        if m.consumers is not None:
            m.consumers.sync()
        self.detach(m.assignment)
        stream.replica = None
        stream.retention_views = None
        for c in stream.consumers.values():
            saver = getattr(c, "saver", None)
            if saver is not None:
                saver.replicate = None
        stream.subscribe()
        log.info("stream %s/%s: one replica left; it runs unreplicated", m.assignment.account,
                 m.assignment.name)  # fmt: skip
        return True

    def _leave(self, name: bytes, m: Member, g: RaftGroup, now: float) -> bool:
        """The meta group no longer places this replica here (its peer was removed): it
        leaves once its removal is committed, a voter never before (``cluster/membership.py``);
        True when it left."""
        if not m.leaving_since:
            m.leaving_since = now
            m.leaving_told = False
        me = self.raft.host.id
        a = m.assignment
        if g.node.is_leader():
            if self.removed():
                self.stepdown(m.stream)  # (its peers still list it: _follow_peers will not)
            return False  # it hands the leadership over first
        waited = now - m.leaving_since >= LEAVE_AFTER
        if in_config(g, me) and not g.removed:
            if is_voter(g, me):
                if waited and not m.leaving_told:
                    m.leaving_told = True
                    log.warning("stream %s/%s: removed from its peers, this replica stays (a "
                                "voter still) until its group's leader removes it", a.account,
                                a.name)  # fmt: skip
                return False
            if not waited:
                return False  # a learner nobody wants leaves after LEAVE_AFTER regardless
        log.info("stream %s/%s: this replica was removed; leaving its group", a.account, a.name)
        self.detach(a)
        try:
            delete_stream(m.ja, m.stream)
        except (StoreError, OSError) as e:
            log.error("stream %s/%s: removed replica not deleted: %s", a.account, a.name, e)
        return True

    def _member_stream(self, name: bytes) -> tuple[RaftGroup, Stream] | None:
        m = self.members.get(name)
        return None if m is None or m.group is None else (m.group, m.stream)

    def _propose_compact(self, name: bytes, m: Member, g: RaftGroup) -> None:
        """As leader: once the log holds COMPACT_EVERY applied entries, propose compacting
        it up to the lowest index every replica has, leaving out a replica more than
        KEEP_FOR_LAGGING compactions behind (away, or too slow): it will catch up from
        the store (``cluster/catchup.py``), so the log never grows without bound."""
        first = g.storage.first_index()
        every = self.compact_every
        if g.applied - first < every:
            return
        floor = g.applied - KEEP_FOR_LAGGING * every
        matches = [match for match in g.node.matches().values() if match >= floor]
        safe = min(min(matches, default=g.applied), g.applied)
        if safe - first < every // 2 or safe <= m.compact_proposed:
            return
        try:
            self.raft.propose(name, encode_compact(safe))
        except RaftError:
            return
        m.compact_proposed = safe

    def compact_here(self, name: bytes) -> bool:
        """Compact this replica's log at what it applied, without the group (the WAL needs
        the segment its old entries sit in: ``JsCluster._bound_wal``). A log is each node's
        own: a replica that later leads and finds a follower behind its log catches it up
        from the store. False when it cannot now (not a member here, or repairing); True
        too when there is nothing to compact (it did before and has applied nothing
        since): the group's state records still pin the segment, and the caller logs them
        again."""
        m = self.members.get(name)
        g = None if m is None else m.group
        if m is None or g is None or m.repairing or self.raft.busy:
            return False
        if g.applied >= g.storage.first_index():
            m.compact_to = g.applied
            self._compact(name, m, g)
        return True

    def _compact(self, name: bytes, m: Member, g: RaftGroup) -> None:
        """A COMPACT entry applied: make the store durable up to what it holds, then drop
        the log before the entry's index (the store now holds what those entries did)."""
        index = min(m.compact_to, g.applied)
        m.compact_to = 0
        if index < g.storage.first_index():
            return
        store = m.stream.store
        store.flush()
        store.sync()
        if m.consumers is not None:
            m.consumers.sync()
        st = store.state()
        first = st.first_seq if st.msgs else st.last_seq + 1
        committed = m.consumers.committed if m.consumers is not None else {}
        # what a replica behind the log catches up to: the state now (at or past
        # ``index``; the entries after ``index`` apply again idempotently, see the
        # cluster/catchup.py docstring)
        data = encode_snapshot(first, st.last_seq, committed)
        self.raft.host.compact(name, index, data)

    def leads(self, s: Stream) -> bool:
        """Does this replica answer for ``s``? It takes publishes and its group still has
        it as leader: one that just lost the leadership (``check`` has not run yet) stays
        quiet, so a request is not answered by two servers."""
        rep = s.replica
        return rep is not None and rep.leading and rep.is_raft_leader()

    def leaderless(self, s: Stream) -> bool:
        """This replica's group has no leader (nats-server's isGroupLeaderless): it had one
        and JetStream has run for LEADERLESS_AFTER, or the group is that old. Its replicas
        then answer STREAM.INFO from their own stores instead of leaving it unanswered."""
        m = self.member(s)
        if m is None or m.group is None:
            return False
        lead = m.group.node.leader()
        track_leader(m, lead)
        if lead:
            return False
        now = asyncio.get_running_loop().time()
        if m.had_leader and now - self._started >= self.leaderless_after:
            return True
        return now - m.created_at >= self.leaderless_after

    def _advise_leader(self, ja: JsAccount, stream: Stream) -> None:
        """``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>`` from the new leader, into
        the stream's account and (with the account named) the system account, with every
        replica listed, as nats-server sends it."""
        subject = b"$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream.name.encode()
        targets = [
            (sl, acc)
            for sl, acc in ((ja.account.sublist, None), (self.system.sublist, ja.account.name))
            if sl.has_interest(subject)
        ]
        if not targets:
            return
        block = self.cluster_block(stream, self._cluster_name())
        me = {"name": self.server_name, "current": True, "active": 0}
        me["peer"] = peer_hash(self.server_name)
        replicas = [*block.get("replicas", []), me]
        for sl, acc in targets:
            doc: dict[str, Any] = {
                "type": "io.nats.jetstream.advisory.v1.stream_leader_elected",
                "id": self._nuid.next(),
                "timestamp": rfc3339(stream.clock.time_ns()),
            }
            if acc is not None:
                doc["account"] = acc
            doc.update(stream=stream.name, leader=self.server_name, replicas=replicas)
            if self._domain:
                doc["domain"] = self._domain
            publish(sl, subject, None, None, orjson.dumps(doc))

    def member(self, stream: Stream) -> Member | None:
        for m in self.members.values():
            if m.stream is stream:
                return m
        return None

    def transfer_all(self, reachable: set[int]) -> bool:
        """Every group led here hands over to a member in ``reachable`` (lame duck,
        shutdown); True if one does."""
        return any([self.stepdown(m.stream, reachable) for m in list(self.members.values())])

    def leads_any(self) -> bool:
        return any(m.group is not None and m.group.node.is_leader() for m in self.members.values())

    def passing_on(self) -> bool:
        """Publishes still on their way to new leaders, or still to be answered (lame
        duck and shutdown wait for them, see cluster/handover.py)."""
        self.check()  # a leadership just moved: what waited for it is handed over now
        if self.hand_over.pending():
            return True
        # and entries this replica proposed as leader, not applied yet: it answers them
        # when they commit (Replica.acks_through), which it learns over its routes
        for m in self.members.values():
            rep = m.stream.replica
            if rep is not None and not rep.leading and rep.acks_through > m.stream.store.last_seq():
                return True
        return False

    def stepdown(self, stream: Stream, among: set[int] | None = None) -> bool:
        """Hand the leadership of ``stream``'s group to its most caught-up live follower
        (one of ``among`` when given); False when there is none."""
        m = self.member(stream)
        if m is None or m.group is None:
            return False
        node = m.group.node
        if not node.is_leader():
            return False
        now = asyncio.get_running_loop().time()
        best, best_match = 0, -1
        me = node.node_id()
        for vid, match in node.matches().items():
            if vid == me or now - self.raft.last_heard.get(vid, -1e9) > CURRENT_FOR:
                continue
            if among is not None and vid not in among:
                continue
            if match > best_match:
                best, best_match = vid, match
        if not best:
            return False
        m.group.node.transfer_leader(best)
        self.raft.kick()
        return True

    def cluster_block(self, stream: Stream, cluster: str) -> dict[str, Any]:
        """The ``cluster`` block of a replicated stream's info (``cluster/info.py``)."""
        m = self.member(stream)
        if m is None or m.group is None:
            return {"name": cluster}
        track_leader(m, m.group.node.leader())
        return stream_cluster_block(
            m.group, m.assignment, cluster, self.raft.host.id, self.traffic_account,
            m.leader_since, self.raft.last_heard, self._name_of,
            asyncio.get_running_loop().time(),
        )  # fmt: skip
