"""Replicated streams' Raft groups on this server (design-clustering §4.5).

Ownership: ``StreamGroups`` owns the group of every stream with ``num_replicas`` > 1 that is
placed on this server: it creates the group when the assignment applies (or restores it
from the node log after a restart) with the stream's ``StreamReplica`` (``cluster/replica.py``:
one object per replica, its states written down) as the group's state machine. It batches
the entries its replicas propose (one MsgProp per group and loop turn), wakes a replica's
``follow`` as soon as a Raft turn changes its leadership, and runs the slower duties every
100 ms (``check``: leaving, repair, compaction, membership, the lease). The API requests a
leader answers are ``api/replicated.py``. It sends the stream leader-elected advisories.

A group is named after the stream's account, name and creation time, so a stream deleted
and created again gets a new group. Its voters are the assignment's peers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import StreamAssignment
from natsd.cluster.raft_service import RaftService
from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.scheduler import Clock, Scheduler
from natsd.jetstream.cluster.catchup import (
    CatchUp,
    StreamSnapshot,
    Transfer,
    encode_snapshot,
    report_lost,
)
from natsd.jetstream.cluster.info import (
    CURRENT_FOR,
    raft_group_label,
    raftz_group,
    stream_cluster_block,
)
from natsd.jetstream.cluster.membership import LEAVE_AFTER, in_config, is_voter, next_change
from natsd.jetstream.cluster.relay import PublishRelay, publishes
from natsd.jetstream.cluster.replica import StreamReplica, group_name, short_of, unreplicated
from natsd.jetstream.engine import JsAccount, delete_stream
from natsd.jetstream.stream.entries import (
    OP_MSG,
    DeleteConsumer,
    DeleteMsg,
    Purge,
    Request,
    StreamOp,
    encode_compact,
    entry_op,
)
from natsd.jetstream.stream.replica import Replica, Waiting
from natsd.jetstream.stream.stream import Stream
from natsd.raft.state import RaftError
from natsd.raft.types import Message
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
KEEP_FOR_LAGGING: Final = 2

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
        removed: Callable[[], bool],
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self.raft = raft
        self.clock = clock
        self.scheduler = scheduler
        self.server_name = server_name
        # the account the groups' traffic goes through, and their advisories' second home
        self.system = system
        self.traffic_account = system.name
        self._cluster_name = cluster_name
        self._domain = domain
        self.respond = respond
        self._started = self.clock.monotonic()
        self.leaderless_after = LEADERLESS_AFTER
        self._nuid = Nuid()
        self._name_of = name_of
        self.members: dict[bytes, StreamReplica] = {}
        # entries proposed this loop turn, by group: one MsgProp each (see _flush)
        self._batches: dict[bytes, list[bytes]] = {}
        self._flush_scheduled = False
        # groups whose leadership changed in the last Raft turn: followed at once
        self._woken: set[bytes] = set()
        self._wake_scheduled = False
        self.compact_every = COMPACT_EVERY
        # publishes that reached a replica as it stopped leading, for the new leader
        self.relay = PublishRelay(raft.host.id, self._member_stream, name_of, clock, scheduler)
        # has this server been removed from the cluster (SERVER.REMOVE)? Its replicas then
        # leave their groups
        self.removed = removed
        # replicas catching up from a leader's store, and this server's stores as a source
        self.catchup = CatchUp(raft.host.id, system, self._source, self._caught_up, clock)

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
        repair: StreamSnapshot | None = None
        restored = name in host.wal.groups
        if restored:
            # the entries after the last compaction are applied again; the store skips
            # the messages it holds
            wal_log = host.wal.groups[name]
            report_lost(stream, wal_log, f"{a.account}/{a.name}")
            repair = short_of(stream, wal_log)
        r = StreamReplica(self, name, host.id, ja, stream, a, repair is not None, host.clock)
        sm: dict[str, Any] = {"hold_snapshot": r.hold_snapshot, "on_ready": r.on_ready}
        if restored:
            r.group = host.restore(name, r.apply, install=r.install, forwarding=False, **sm)
        elif joining:
            r.group = host.join(name, r.apply, r.install, forwarding=False, **sm)
        else:
            voters = sorted(raft_id(p) for p in (founders or a.peers))
            r.group = host.create(name, voters, r.apply, r.install, forwarding=False, **sm)
            if a.peers and a.peers[0] == self.server_name:
                r.group.node.campaign()  # a new group need not wait out an election timeout
        self.members[name] = r
        if repair is not None:
            sources = [v for v in r.group.conf.voters if v != host.id]
            index = host.wal.groups[name].snap_index
            self.catchup.repair(name, stream.store, repair, index, sources)
        self.raft.kick()

    # ---------------------------------------------------------------- ReplicaOwner
    def queue(self, name: bytes, data: bytes) -> None:
        batch = self._batches.get(name)
        if batch is None:
            batch = self._batches[name] = []
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self.scheduler.call_soon(self._flush)
        batch.append(data)

    def offer_snapshot(self, name: bytes, replica: StreamReplica, m: Message) -> bool:
        return self.catchup.offer(name, replica.stream.store, m)

    def pass_on(self, name: bytes, items: list[Waiting]) -> None:
        self.relay.add(name, items)

    def now(self) -> float:
        return self.clock.monotonic()

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
            m.consumers.install(t.snap.consumers)
            m.stream.store.seed_sources(t.snap.sources)
            m.repaired()
            m.stream.rebuild_dedupe(self.clock.time_ns())
            m.stream.rebuild_schedules()
            return
        # A repair that a leader's snapshot overtook (``CatchUp.offer`` aims a repair at a
        # newer snapshot): the entries committed meanwhile only waited (``apply`` defers
        # them while repairing), so the consumers take the snapshot's state and the
        # entries after it apply now; left repairing, the replica would defer every entry
        # for ever while its store stood still.
        repairing = m.repairing
        if repairing or m.group.applied < t.held_index:
            # (a log that got past the snapshot meanwhile, from a new leader that still had
            # the entries, holds newer consumer states than the snapshot; and newer
            # source positions)
            m.consumers.install(t.snap.consumers)
            m.stream.store.seed_sources(t.snap.sources)
        self.raft.host.step_held(t.group, t.held)
        if repairing:
            m.repaired(after=t.held_index)
        m.stream.rebuild_dedupe(self.clock.time_ns())
        # (the copied messages never went past the schedules' table: read it again)
        m.stream.rebuild_schedules()
        self.raft.kick()

    def detach(self, a: StreamAssignment) -> None:
        """The stream is deleted (or no longer placed here): leave its group."""
        m = self.members.pop(group_name(a), None)
        if m is None:
            return
        self.catchup.cancel(group_name(a))
        m.stop()
        self.raft.host.drop(group_name(a))

    def check(self) -> None:
        """Every 100 ms: leave, repair, compact, walk the membership, and follow leadership
        (which ``_follow`` also does at once when a Raft turn changed it)."""
        me = self.raft.host.id
        now = self.clock.monotonic()
        if self.catchup.transfers:
            self.catchup.tick(now)
        for name, m in list(self.members.items()):
            g = m.group
            if g is None:
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
            m.follow()
            shadow = m.shadow
            if shadow.leading and g.node.is_leader() and g.node.leader() == me:
                m.keep_lease()
                self._propose_compact(name, m, g)
                self._follow_peers(m, g)
                if len(m.assignment.peers) == 1 and self._unreplicate(m, g):
                    continue
                if shadow.waiting and not shadow.inflight and not m.transferring():
                    m.stream.drain()  # a leadership transfer that did not happen

    def wake(self, name: bytes) -> None:
        self._woken.add(name)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            self.scheduler.call_soon(self._follow_woken)

    def _follow_woken(self) -> None:
        self._wake_scheduled = False
        woken, self._woken = self._woken, set()
        for name in woken:
            m = self.members.get(name)
            if m is not None:
                m.follow()

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
        m = self.member(stream)
        return m is not None and m.propose_op(make)

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
            # The members hear of the commit at once for an operation (not a publish), and
            # for a stream whose followers answer direct gets (a KV bucket): a client that
            # reads its own write from a follower must not wait out the notice's delay.
            prompt = m.stream.cfg.allow_direct or any(entry_op(d) != OP_MSG for d in datas)
            try:
                self.raft.propose_batch(name, datas, prompt)
            except RaftError:
                if m.shadow.leading:
                    # the publishes are passed on to whoever leads next (maybe this
                    # replica again) rather than dropped: they were never in the log
                    m.shadow.handed.extend(publishes(datas))
                m.stop_leading()
        self.raft.turn_now()

    def _follow_peers(self, m: StreamReplica, g: RaftGroup) -> None:
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

    def _unreplicate(self, m: StreamReplica, g: RaftGroup) -> bool:
        """A stream scaled down to one replica, once its group is this server alone and
        nothing is in flight: the group ends and the stream runs as an R1 stream (its
        store synced, its consumers writing their state to disk again); True when done."""
        shadow = m.shadow
        cs = g.conf
        if shadow.inflight or shadow.waiting or cs.learners or cs.voters_outgoing:
            return False
        if cs.voters != [self.raft.host.id]:
            return False
        stream = m.stream
        stream.store.flush()
        stream.store.sync()
        m.consumers.sync()
        self.detach(m.assignment)
        stream.replica = None
        stream.retention_views = None
        stream.serve_direct(False)  # the API's own subscription answers an R1 stream
        for c in stream.consumers.values():
            saver = getattr(c, "saver", None)
            if saver is not None:
                saver.stop_replicating()
        stream.subscribe()
        log.info("stream %s/%s: one replica left; it runs unreplicated", m.assignment.account,
                 m.assignment.name)  # fmt: skip
        return True

    def _leave(self, name: bytes, m: StreamReplica, g: RaftGroup, now: float) -> bool:
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

    def _propose_compact(self, name: bytes, m: StreamReplica, g: RaftGroup) -> None:
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

    def _compact(self, name: bytes, m: StreamReplica, g: RaftGroup) -> None:
        """A COMPACT entry applied: make the store durable up to what it holds, then drop
        the log before the entry's index (the store now holds what those entries did)."""
        index = min(m.compact_to, g.applied)
        m.compact_to = 0
        if index < g.storage.first_index():
            return
        store = m.stream.store
        try:
            # (the applies only wrote it out: jetstream/stream/commit.py, add_replicated)
            store.flush()
            store.sync()
        except (StoreError, OSError) as e:
            # the log keeps what the store may not hold durably, until a sync succeeds
            a = m.assignment
            log.error("stream %s/%s: log not compacted: %s", a.account, a.name, e)
            return
        m.consumers.sync()
        st = store.state()
        first = st.first_seq if st.msgs else st.last_seq + 1
        committed = m.consumers.committed
        # what a replica behind the log catches up to: the state now (at or past
        # ``index``; the entries after ``index`` apply again idempotently, see the
        # cluster/catchup.py docstring)
        data = encode_snapshot(first, st.last_seq, committed, store.sources_state())
        self.raft.host.compact(name, index, data)

    def leads(self, s: Stream) -> bool:
        """Does this replica answer for ``s``? It takes publishes and its group still has
        it as leader: one that just lost the leadership (``check`` has not run yet) stays
        quiet, so a request is not answered by two servers."""
        m = self.member(s)
        return m is not None and m.leads()

    def leaderless(self, s: Stream) -> bool:
        """This replica's group has no leader (nats-server's isGroupLeaderless): it had one
        and JetStream has run for LEADERLESS_AFTER, or the group is that old. Its replicas
        then answer STREAM.INFO from their own stores instead of leaving it unanswered."""
        m = self.member(s)
        return m is not None and m.leaderless(self._started, self.leaderless_after)

    def advise_leader(self, replica: StreamReplica) -> None:
        """``$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.<stream>`` from the new leader, into
        the stream's account and (with the account named) the system account, with every
        replica listed, as nats-server sends it."""
        ja, stream = replica.ja, replica.stream
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

    def member(self, stream: Stream) -> StreamReplica | None:
        """The replica of ``stream`` on this server (None: not replicated here). Found
        through the stream's shadow (a direct get asks on every request)."""
        shadow = stream.replica
        m = shadow.group if shadow is not None else None
        if isinstance(m, StreamReplica) and self.members.get(m.name) is m:
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
        duck and shutdown wait for them, see cluster/relay.py)."""
        self.check()  # a leadership just moved: what waited for it is handed over now
        if self.relay.pending():
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
        now = self.clock.monotonic()
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

    def raftz(self, name_of: Callable[[int], str]) -> dict[str, dict[str, dict[str, Any]]]:
        """Each stream group on this server as /raftz shows it (``cluster/info.py``), by
        the stream's account and then the group's name."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        now = self.clock.monotonic()
        for name, m in self.members.items():
            g = m.group
            if g is None:
                continue
            m.track_leader(g.node.leader())
            out.setdefault(m.assignment.account, {})[raft_group_label(m.assignment)] = raftz_group(
                g, self.raft.host.id, self.traffic_account,
                name in self.catchup.transfers or m.repairing, m.leader_since,
                self.raft.last_heard, name_of, now,
            )  # fmt: skip
        return out

    def cluster_block(self, stream: Stream, cluster: str) -> dict[str, Any]:
        """The ``cluster`` block of a replicated stream's info (``cluster/info.py``)."""
        m = self.member(stream)
        if m is None or m.group is None:
            return {"name": cluster}
        m.track_leader(m.group.node.leader())
        return stream_cluster_block(
            m.group, m.assignment, cluster, self.raft.host.id, self.traffic_account,
            m.leader_since, self.raft.last_heard, self._name_of,
            self.clock.monotonic(),
        )  # fmt: skip
