"""JetStream on a cluster: this server's replica of the meta group, and what applying a meta
entry means here (the meta driver).

Design-clustering §4.4. Every JetStream server of the cluster runs the meta group
(``cluster.meta``) on its node's ``RaftService``; its state says where every stream lives.
Which server answers which API request is ``api/routing.py``'s; it reads this module.

An R1 stream lives on one server, which creates it when the assignment applies and answers
the CREATE, and its consumers live with it (their configs and state in that server's store,
as on a standalone server). Only the owner subscribes to the stream's subjects, so a publish
on another server reaches it over the routes. A replicated stream has a Raft group over its
servers (``cluster/streams.py``): its leader takes the publishes and answers for it.

Bootstrap: with no meta group in the node log, the servers wait until the mesh holds every
server their ``cluster.routes`` name (self included or not; see ``expected_size``) and then
each creates the group with the same voters, computed from the same server names; nothing
needs to be exchanged. A restart restores the group from the node log.

Damage (Jepsen lost a whole stream to a meta snapshot damaged on two of five nodes of
nats-server, #7556). The meta state says which streams this server holds; one rebuilt from
records that damage cut short (a flipped bit, a log cut short after a clean close, a
snapshot that does not decode: ``storage/wal.py``) lacks streams it holds, and acting on it
would set those aside as orphans, drop their Raft logs, or, with the damage on most
servers, elect a leader whose log lost them and take them from every server. So a server
whose meta records are damaged (or gone, while its log holds other groups):

* logs an error at start saying what is damaged and what to do (``_damage_text``), and
  again every DAMAGE_REMIND while it knows no meta leader;
* does not act on its meta state (``_repairing``): every meta entry it applies is applied
  as a replay (the meta state changes, this server's streams do not), no reconciliation,
  no orphan set aside, no Raft log dropped, no meta snapshot taken; its replicated streams
  wait, unattached; its R1 streams serve as they are;
* takes no part in meta elections (``RaftGroup.damaged``: neither votes nor campaigns)
  until a leader's commit passes all its log had held;
* once it knows a leader, proposes a ``noop`` barrier every BARRIER_EVERY, and trusts its
  meta state again when it applies its own: every entry committed before it, all it had
  ever applied among them, has been applied by then. It then reconciles as after a
  restart.

With the damage on a minority this ends by itself within a second or so. On a majority no
leader can be elected (the damaged servers vote for no one): JetStream stays unavailable
and every server keeps its streams as they are, until an operator restores a damaged
server's store from a backup, or drops its meta records (``jetstream/cluster/rejoin.py``).
A server whose meta records an operator dropped rejoins the group with an empty log and
votes (``RaftGroup.votes_damaged``), and repairs as above from the leader it helps elect.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, Final

import orjson

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import (
    META_GROUP,
    MetaError,
    MetaState,
    PendingPlacements,
    ServerRow,
    StreamAssignment,
    encode_op,
    place,
)
from natsd.cluster.raft_service import RaftService
from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.scheduler import Cancellable
from natsd.jetstream.answer import API_TYPE_PREFIX
from natsd.jetstream.cluster.catchup import cut_lost
from natsd.jetstream.cluster.info import CURRENT_FOR, meta_cluster_info, raftz_group
from natsd.jetstream.cluster.local import LocalStreams
from natsd.jetstream.cluster.restore import ClusterRestores
from natsd.jetstream.cluster.servers import (
    PLACE_ALIVE,
    SystemRequests,
    removed_from,
    stepdown_target,
)
from natsd.jetstream.cluster.streams import StreamGroups
from natsd.jetstream.cluster.usage import USAGE_INTERVAL, UsageBook
from natsd.jetstream.config.stream_config import parse_stream_config
from natsd.jetstream.config.stream_types import StorageType
from natsd.jetstream.engine import (
    JetStream,
    JsAccount,
)
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.state import RaftError
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = ["JsCluster"]

log = logging.getLogger("natsd")

_CHECK_INTERVAL: Final = 0.1

# The meta log is compacted into a snapshot of the meta state every this many entries.
META_COMPACT: Final = 256
# Past this many WAL segments (64 MB each), the groups that keep the oldest one compact and
# log their state again, so that it can go (_bound_wal).
WAL_SEGMENTS_MAX: Final = 8
# A new meta group's first member campaigns on every check for this long (then elections
# are left to the election timeout).
BOOTSTRAP_CAMPAIGN: Final = 3.0
# nats-server answers 10008 after its meta group had no leader this long (lostQuorumInterval)
LEADERLESS: Final = 6.0
# Orphans (local streams the meta group does not place here) are set aside no sooner than
# this after the meta state was recovered, and only once this server is current with the
# meta leader (nats-server checks once, 30 s after its recovery, and deletes them).
ORPHANS_AFTER: Final = 5.0
# A server whose meta group is damaged and that knows no meta leader says so again this
# often; one that knows a leader proposes its barrier this often until it applies one.
DAMAGE_REMIND: Final = 30.0
BARRIER_EVERY: Final = 1.0


class JsCluster:
    """One server's part of clustered JetStream: its meta group replica, its server row,
    the replicated streams placed here (``StreamGroups``), and what applying a meta entry
    means on this server."""

    def __init__(
        self,
        engine: JetStream,
        raft: RaftService,
        system: Account,
        server_name: str,
        cluster_name: Callable[[], str],
        peers: Callable[[], list[str]],
        expected_size: Callable[[], int],
        tags: list[str],
        reply_servers: Callable[[str, bytes], list[str]] | None = None,
    ) -> None:
        self.engine = engine
        # the engine's clock and scheduler (virtual in a test): every time and timer here
        self.clock = engine.clock
        self.scheduler = engine.scheduler
        self.raft = raft
        self.system = system
        self.server_name = server_name
        self.cluster_name = cluster_name
        # names of the servers our routes are connected to, and how many servers (self
        # included) the configured routes name: the bootstrap inputs
        self._peers = peers
        self._expected = expected_size
        # (account, subject) -> the peers with interest in it: where a requester is
        self._reply_servers = reply_servers or (lambda _a, _s: [])
        self.row = ServerRow(server_name, list(tags), engine.max_memory, engine.max_store)
        self.meta = MetaState()
        self.pending = PendingPlacements()  # the leader's creates in flight
        self.group: RaftGroup | None = None
        self._leader_seen = self.clock.monotonic()
        self._bootstrap_campaign = 0.0  # until when the first member re-campaigns
        self._replay_until = 0  # meta entries up to here were applied before a restart
        self._reconciled = False
        # the meta records were damaged: the meta state is not acted on until this
        # server applies its barrier (see the module docstring)
        self._repairing = False
        self._barrier = ""
        self._barrier_at = -1e9
        self._damage_said_at = 0.0
        self._damage_notes: list[str] = []
        self._orphans_at = 0.0  # when to look for orphans (0: not due)
        self._row_proposed_at = -1e9
        self._timer: Cancellable | None = None
        self._usage_at = 0.0
        self.usage = UsageBook(engine, system, server_name, self.alive, self.is_member)
        self._nuid = Nuid()
        self._was_leader = False
        self._leader_since = 0  # ns since the epoch this server became meta leader (/raftz)
        # member names by Raft node id and back, learned as members show up (bounded by
        # the servers that are or were members: the names come from our routes and the
        # server table, not from frames)
        self._names: dict[int, str] = {}
        self._ids: dict[str, int] = {}
        # META.LEADER.STEPDOWN, SERVER.REMOVE, SERVER.EVACUATE: system account requests
        self.system_requests = SystemRequests(self)
        self.tasks: set[asyncio.Task[None]] = set()  # account info and list gathers
        # the Raft groups of the replicated streams placed here
        self.stream_groups = StreamGroups(
            raft,
            server_name,
            self.name_of,
            system,
            cluster_name,
            engine.domain,
            self.respond,
            self._removed,
            self.clock,
            self.scheduler,
        )
        # streams restored from a backup this server received (STREAM.RESTORE)
        self.restores = ClusterRestores(
            engine, server_name, self.stream_groups, lambda: self.meta, self.propose, self.clock
        )
        self.local = LocalStreams(
            engine,
            server_name,
            self.stream_groups,
            raft.host,
            lambda: self.meta,
            self.respond,
            self.propose,
            self.cluster_block,
            self.restores,
        )
        engine.join_cluster(self.cluster_block, self.alternates)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        # A replicated stream's store that lost messages to damage is cut back before the
        # first at once: were the server stopped again before its group attaches (where the
        # log or the other replicas refill it), a clean shutdown would forget the loss and
        # the hole would stay (the bit-flip fault suite caught that).
        for ja in self.engine.accounts.values():
            for s in ja.streams.values():
                if s.cfg.num_replicas > 1:
                    cut_lost(s)
        host = self.raft.host
        wal = host.wal
        self._say_wal_damage()
        log_ = wal.groups.get(META_GROUP)
        if log_ is not None:
            damage = list(log_.notes) if log_.damaged else []
            self._replay_until = log_.commit
            if log_.snap_data:
                # the meta state as of the last compaction; entries after it replay
                try:
                    self.meta = MetaState.from_snapshot(log_.snap_data)
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                    # checksums held, yet it does not decode: the log built on it is of no
                    # use; it goes, and the leader sends the whole state again
                    damage.append(f"its snapshot at index {log_.snap_index} does not decode"
                                  f" ({e})")  # fmt: skip
                    wal.append_drop(META_GROUP)
                    log_ = None
            if log_ is not None:
                self.group = host.restore(META_GROUP, self._apply, install=self._install)
                log.info("JetStream cluster: meta group restored (%d committed entries to"
                         " replay after the snapshot at index %d)",
                         max(log_.commit - log_.snap_index, 0), log_.snap_index)  # fmt: skip
                if damage or self.group.repair_at:
                    self._repair(damage or ["damage found before, not repaired yet"])
                elif self._replay_until <= self.group.applied:
                    self._reconcile()
            else:
                self.meta = MetaState()
                self.group = host.join(META_GROUP, self._apply, self._install, lost=True)
                self._repair(damage)
        elif META_GROUP in wal.dropped:
            # an operator dropped its meta records (rejoin.py): it rejoins, and votes
            self.group = host.join(META_GROUP, self._apply, self._install, lost=True)
            self.group.votes_damaged = True
            self._repair([], rejoin=True)
        elif wal.groups or wal.dropped or wal.damaged_records or wal.cut_after_close:
            # The log holds other groups (streams'), or damage: this server was in a
            # cluster, and damage took every meta record. It must not bootstrap a new meta
            # group (an empty state that would vote at once); it joins the cluster's.
            self.group = host.join(META_GROUP, self._apply, self._install, lost=True)
            self._repair(["no record of it is left (the log holds other groups' records)"])
        self.usage.start()
        self.stream_groups.start()
        self.system_requests.start()
        self.raft.start()
        self._timer = self.scheduler.call_later(_CHECK_INTERVAL, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.usage.stop()
        self.restores.stop()
        try:
            self.stream_groups.stop()
            self.system_requests.stop()
        finally:
            # the Raft runner and the WAL close even when a group's stop failed (a disk
            # gone): nothing keeps running for a server that is stopping
            try:
                self.raft.stop()
            finally:
                self.raft.host.wal.close()

    # ---------------------------------------------------------------- damage
    def _say_wal_damage(self) -> None:
        """The node log's damage, one warning per damaged group (the meta group's own
        error follows from ``start``)."""
        wal = self.raft.host.wal
        for name, g in wal.groups.items():
            if g.damaged and name != META_GROUP:
                log.warning("JetStream cluster: Raft group %s: damaged in the node log (%s):"
                            " %s; it neither votes nor campaigns until its leader repairs it",
                            name.decode(errors="replace"), wal.directory,
                            "; ".join(g.notes) or "damage")  # fmt: skip

    def _store_dir(self) -> str:
        """The JetStream store directory (the node log is ``<it>/jetstream/_cluster/wal``)."""
        d = self.raft.host.wal.directory.rstrip(os.sep)
        return os.path.dirname(os.path.dirname(os.path.dirname(d))) or "."

    def _damage_text(self) -> str:
        store = self._store_dir()
        return (
            f"JetStream cluster: the meta group's records in this server's node log"
            f" ({self.raft.host.wal.directory}) are damaged: {'; '.join(self._damage_notes)}."
            " Until a meta leader of the cluster has brought it up to date this server keeps"
            " every stream it holds as it is (none is created, set aside or deleted because"
            " of its meta state), its replicated streams wait, and it takes no part in meta"
            " leader elections; while the other servers have a meta leader this happens by"
            " itself. If most servers of the cluster log this error, no meta leader can be"
            " elected and JetStream stays unavailable: stop one damaged server, then either"
            f" restore its store directory ({store}) from a backup taken while it was"
            " stopped, or, if a server that logs no such error holds the whole meta state,"
            " drop the damaged server's meta records with `python -m"
            f" natsd.jetstream.cluster.rejoin {store}` and start it again: it then votes for"
            " a healthy server and takes the meta state from it (meta entries that only the"
            " damaged servers held are lost). Do not copy another server's store directory"
            " over this one."
        )

    def _repair(self, notes: list[str], rejoin: bool = False) -> None:
        """Start-up found the meta records damaged (or dropped by an operator): say so, and
        act on the meta state no more until this server's barrier applies."""
        self._repairing = True
        self._reconciled = False
        self._barrier = self._nuid.next()
        self._damage_notes = notes
        self._damage_said_at = self.clock.monotonic()
        if rejoin:
            log.warning("JetStream cluster: this server's meta records were dropped by an"
                        " operator: it rejoins the meta group with an empty log, votes for"
                        " a leader and takes the meta state from it; meanwhile it keeps"
                        " every stream it holds as it is")  # fmt: skip
        else:
            log.error("%s", self._damage_text())

    def _repair_check(self, now: float) -> None:
        """While repairing: propose the barrier to the leader (a noop, past the barrier),
        or say again that there is none to repair this server."""
        g = self.group
        if g is None:
            return
        if g.node.leader():
            if now - self._barrier_at >= BARRIER_EVERY:
                self._barrier_at = now
                self.propose(encode_op("noop", origin=self.server_name, barrier=self._barrier))
        elif now - self._damage_said_at >= DAMAGE_REMIND:
            self._damage_said_at = now
            if self._damage_notes:
                log.error("%s (still no meta leader)", self._damage_text())
            else:
                log.warning("JetStream cluster: rejoining the meta group: no meta leader yet")

    def _repaired(self, index: int) -> None:
        self._repairing = False
        self._replay_until = max(self._replay_until, index)
        log.warning("JetStream cluster: the meta group is repaired: this server holds the"
                    " meta leader's state as of entry %d", index)  # fmt: skip

    def _maybe_reconcile(self) -> None:
        """Bring the streams here in line with the meta state once the replay that
        follows a restart is done, never while the meta state is not trusted."""
        g = self.group
        if self._reconciled or self._repairing or g is None:
            return
        if g.applied >= self._replay_until:
            self._reconcile()

    def _check(self) -> None:
        """Every 100 ms: bootstrap when the mesh is complete, keep our server row current,
        report our usage."""
        now = self.clock.monotonic()
        if self.group is None:
            self._maybe_bootstrap()
        elif self._repairing or (self.group.repair_at and self.group.damaged):
            # (a meta state trusted again may leave the group out of elections still: the
            # leader's log was shorter than the damaged one's, whose tail was never
            # committed; noops commit past it)
            self._repair_check(now)
        elif now < self._bootstrap_campaign and not self.group.node.leader():
            if not self.group.node.is_leader():
                self.group.node.campaign()
                self.raft.kick()
        elif (
            self.leader_name()
            and self.meta.servers.get(self.server_name) != self.row
            and self.server_name not in self.meta.removed
        ):
            if now - self._row_proposed_at > 1.0:
                self._row_proposed_at = now
                self.propose(encode_op("server", **self.row.to_json()))
        leading = self.is_leader()
        if leading != self._was_leader:
            self._was_leader = leading
            self._leader_since = self.clock.time_ns() if leading else 0
            if leading:
                log.info("JetStream cluster: this server is the meta leader")
                self._advise_leader_elected()
        # the replay may have ended on an entry with nothing to apply (a new leader's empty
        # entry), which _apply never sees
        self._maybe_reconcile()
        if self._orphans_at and now >= self._orphans_at and self._meta_current(now):
            self._orphans_at = 0.0
            self.local.set_aside_orphans()
        self.stream_groups.check()
        if self.group is not None and not self._repairing:
            self.restores.tick(now, leading)
        if now - self._usage_at >= USAGE_INTERVAL:
            self._usage_at = now
            self.usage.report()
            self._maybe_compact()
            self._bound_wal()
            if self.is_leader():
                self.system_requests.tick(now)
        self._timer = self.scheduler.call_later(_CHECK_INTERVAL, self._check)

    def _maybe_bootstrap(self) -> None:
        names = sorted({*self._peers(), self.server_name})
        want = self._expected()
        if len(names) != want:
            return
        voters = [raft_id(n) for n in names]
        self.group = self.raft.host.create(META_GROUP, voters, self._apply, self._install)
        self._reconciled = True
        self._orphans_due()  # streams from before the cluster, if any
        log.info("JetStream cluster: meta group created with %s", ", ".join(names))
        if names[0] == self.server_name:
            # a new cluster need not wait out an election timeout: the first name asks for
            # votes at once, and again on every check until there is a leader (the others
            # drop its requests until they have created the group too)
            self._bootstrap_campaign = self.clock.monotonic() + BOOTSTRAP_CAMPAIGN
            self.group.node.campaign()
        self.raft.kick()

    # ---------------------------------------------------------------- meta group
    def is_leader(self) -> bool:
        g = self.group
        return g is not None and g.node.leader() == self.raft.host.id

    def leader_name(self) -> str:
        g = self.group
        if g is None or not g.node.leader():
            return ""
        return self.name_of(g.node.leader())

    def name_of(self, node_id: int) -> str:
        name = self._names.get(node_id)
        if name is None:
            for n in (self.server_name, *self._peers(), *self.meta.servers):
                if n not in self._ids:
                    self._ids[n] = raft_id(n)
                    self._names[self._ids[n]] = n
            name = self._names.get(node_id, "")
        return name

    def health(self) -> str:
        """Why this server's JetStream is not current ("" when it is), in nats-server's
        words (/healthz)."""
        if self.group is None or not self.group.node.leader():
            return "JetStream has not established contact with a meta leader"
        if not self._reconciled:
            return "JetStream is still recovering meta layer"
        if self.meta.servers.get(self.server_name) != self.row:
            # not yet placeable: the meta state does not hold our row (tags, limits) yet
            return "JetStream is not current with the meta leader"
        return ""

    def alternates(self, ja: JsAccount, stream: str) -> list[dict[str, str]] | None:
        """nats-server's streamAlternates: the stream and the mirrors of it the meta state
        holds, each with its cluster (one here); None for a stream without mirrors."""
        cluster = self.cluster_name()
        out = []
        for a in self.meta.account_streams(ja.account.name):
            mirror = a.config.get("mirror")
            if a.name == stream or (isinstance(mirror, dict) and mirror.get("name") == stream):
                alt = {"name": a.name}
                if self.engine.domain:
                    alt["domain"] = self.engine.domain
                alt["cluster"] = cluster
                out.append(alt)
        return out if len(out) > 1 else None

    def meta_info(self) -> dict[str, Any]:
        """/jsz ``meta_cluster`` (cluster/info.py)."""
        return meta_cluster_info(
            self.group,
            self.leader_name(),
            self.cluster_name(),
            self.raft.host.id,
            self.is_leader(),
            self.raft.last_heard,
            self.name_of,
            self.clock.monotonic(),
        )

    def raftz(self) -> dict[str, dict[str, dict[str, Any]]]:
        """/raftz: this server's Raft groups by account (the meta group, ``_meta_`` as
        nats-server names it, is the system account's; a stream's group its account's)."""
        out = self.stream_groups.raftz(self.name_of)
        if self.group is not None:
            out.setdefault(self.system.name, {})[META_GROUP.decode()] = raftz_group(
                self.group, self.raft.host.id, self.system.name, False, self._leader_since,
                self.raft.last_heard, self.name_of, self.clock.monotonic(),
            )  # fmt: skip
        return out

    def propose(self, data: bytes) -> bool:
        """False when the meta group cannot take it now (no leader known)."""
        if self.group is None:
            return False
        try:
            self.raft.propose(META_GROUP, data)
        except RaftError:
            return False
        return True

    def is_member(self, name: str) -> bool:
        """A JetStream server of this cluster: ourselves, one in the server table, or a
        JetStream peer our routes reach."""
        return name == self.server_name or name in self.meta.servers or name in self._peers()

    def rows_pending(self) -> bool:
        """A JetStream server of the mesh (this one included) that the server table does
        not hold yet: right after the meta group forms, each server's row follows the
        leader's election by a round trip, and placement knows only servers with a row."""
        names = {self.server_name, *self._peers()}
        return any(n not in self.meta.servers and n not in self.meta.removed for n in names)

    def alive(self) -> list[str]:
        """The servers a new stream may go to: ourselves and the peers our routes reach
        whose Raft traffic we heard within ``PLACE_ALIVE`` (a stopped process keeps its
        route open for a while, but stops answering heartbeats)."""
        now = self.clock.monotonic()
        heard = self.raft.last_heard
        fresh = [p for p in self._peers() if now - heard.get(raft_id(p), -1e9) <= PLACE_ALIVE]
        return sorted({self.server_name, *fresh})

    def requester(self, ja: JsAccount, reply: str) -> str:
        """The server the client behind ``reply`` is on: the one server (this one or a
        peer) with interest in the reply subject; "" when that is not exactly one."""
        subject = reply.encode()
        psubs, qsubs = ja.account.sublist.match(subject)
        # a client's subscription (internal ones have a callback)
        local = any(s.callback is None for s in psubs) or any(
            s.callback is None for g in qsubs for s in g
        )
        remote = self._reply_servers(ja.account.name, subject)
        found = ([self.server_name] if local else []) + remote
        return found[0] if len(found) == 1 else ""

    def place(
        self,
        replicas: int,
        tags: list[str],
        max_bytes: int,
        memory: bool,
        prefer: str = "",
        exclude: set[str] | None = None,
    ) -> list[str]:
        def room(name: str) -> bool:
            row = self.meta.servers.get(name)
            if row is None or max_bytes <= 0:
                return True
            limit = row.max_memory if memory else row.max_store
            if limit < 0:
                return True
            used: int = sum(
                int(a.config.get("max_bytes", -1))
                for a in self.meta.placed_on(name)
                if (a.config.get("storage") == "memory") == memory
                and a.config.get("max_bytes", -1) > 0
            )
            return used + max_bytes <= limit

        pending = self.pending.peers(self.clock.monotonic())
        alive = [n for n in self.alive() if not exclude or n not in exclude]
        return place(self.meta, alive, replicas, tags, room, prefer=prefer, pending=pending)

    def _apply(self, index: int, data: bytes) -> None:
        # (while repairing, every entry is a replay: this server does not act on them)
        replay = self._repairing or index <= self._replay_until
        try:
            op = self.meta.apply(index, data)
        except MetaError as e:
            log.error("JetStream cluster: meta entry %d skipped: %s", index, e)
            return
        try:
            if op.op == "noop":
                if self._repairing and op.doc.get("barrier") == self._barrier:
                    self._repaired(index)
            elif op.op == "stream":
                if op.assignment is not None:
                    self.pending.done(op.assignment.account, op.assignment.name)
                self.local.applied_stream(op, replay)
            elif op.op == "restored":
                self.local.applied_restored(op, replay)
            elif op.op == "delete":
                self.local.applied_delete(op, replay)
            elif op.op == "forget":
                self.system_requests.applied_forget(op, replay)
        finally:
            self._maybe_reconcile()

    def _install(self, index: int, data: bytes) -> None:
        """The leader sent its meta state (this server was behind its log): take it, and
        bring this server's streams in line with it as after a restart (while repairing,
        once the barrier applies)."""
        if not data:
            return
        old = self.meta
        try:
            self.meta = MetaState.from_snapshot(data)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            log.error("JetStream cluster: meta snapshot at %d unreadable: %s", index, e)
            return
        if self._repairing:
            return  # streams it deleted meanwhile are orphans once the state is trusted
        self.local.gone(old, self.meta)
        self._reconcile()

    def _maybe_compact(self) -> None:
        """Snapshot the meta state and drop the log before it every META_COMPACT entries,
        so the node log stays bounded (never while a WAL sync is under way)."""
        g = self.group
        if g is None or self.raft.busy:
            return
        index = self._meta_compact_index()
        if not index or index - g.storage.first_index() < META_COMPACT:
            return
        self.raft.host.compact(META_GROUP, index, self.meta.snapshot())

    def _meta_compact_index(self) -> int:
        """How far the meta group's log may be compacted (0: not now): all the group has
        applied, once the meta state is as of it. A new leader's empty entry applies
        nothing, so the state's own index (``meta.applied``) stays below the group's; a
        compaction there left that entry above the compaction point, and its WAL segment,
        with every later one, was kept for good (the (3,3) soak's WAL grew to 5 GB from
        its first segment: the meta log's last entry was a leader's, after a kill)."""
        g = self.group
        if g is None or not self._reconciled or self.meta.applied > g.applied:
            return 0  # (a restart: the state is from a snapshot, the log replays to it)
        return g.applied

    def _bound_wal(self) -> None:
        """Every group shares the node's WAL, and a segment goes only once no group needs
        it. A quiet group (the meta group, an idle stream) with a few entries above its
        compaction point in the oldest segment would keep every later segment, and the WAL
        would grow with the busy groups' traffic for ever (the fault soak's WALs held 5 GB,
        their first segment from the start of the run). Past WAL_SEGMENTS_MAX segments, each
        group keeping the oldest one compacts at what it applied and logs its state again;
        once that is durable, the segment goes."""
        wal = self.raft.host.wal
        if self.raft.busy or len(wal.segments) <= WAL_SEGMENTS_MAX:
            return
        for name in wal.pinning():
            if name == META_GROUP:
                g = self.group
                index = self._meta_compact_index()
                if g is None or not index:
                    continue
                if index >= g.storage.first_index():
                    self.raft.host.compact(META_GROUP, index, self.meta.snapshot())
            elif not self.stream_groups.compact_here(name):
                continue
            wal.checkpoint(name)
        wal.commit()
        wal.delete_obsolete()

    def _reconcile(self) -> None:
        self._reconciled = True
        self.local.reconcile()
        self._orphans_due()

    def _orphans_due(self) -> None:
        self._orphans_at = self.clock.monotonic() + ORPHANS_AFTER

    def _meta_current(self, now: float) -> bool:
        """This server's meta state is the cluster's, as far as it can tell (nats-server's
        ``Healthy``): it has applied everything it knows committed, and leads or heard
        the leader within CURRENT_FOR."""
        g = self.group
        if g is None or not self._reconciled or self._repairing:
            return False
        lead = g.node.leader()
        committed = g.node.committed()
        if not lead or committed == 0 or g.applied < committed:
            return False
        if lead == self.raft.host.id:
            return True
        return now - self.raft.last_heard.get(lead, -1e9) <= CURRENT_FOR

    # ---------------------------------------------------------------- leadership
    def _advise_leader_elected(self) -> None:
        """``$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED`` in the system account, with the new
        leader's peer id, as nats-server sends it."""
        subject = b"$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED"
        if not self.system.sublist.has_interest(subject):
            return
        info = self.meta_info()
        replicas = list(info.get("replicas", []))
        me = {"name": self.server_name, "current": True, "active": 0}
        me["peer"] = peer_hash(self.server_name)
        replicas.append(me)
        doc: dict[str, Any] = {
            "type": "io.nats.jetstream.advisory.v1.domain_leader_elected",
            "id": self._nuid.next(),
            "timestamp": rfc3339(self.engine.clock.time_ns()),
            "leader": peer_hash(self.server_name),
            "replicas": replicas,
            "cluster": self.cluster_name(),
        }
        if self.engine.domain:
            doc["domain"] = self.engine.domain
        publish(self.system.sublist, subject, None, None, orjson.dumps(doc))

    def _removed(self) -> bool:
        return removed_from(self.meta, self.group, self.server_name)

    def place_one(self, a: StreamAssignment, exclude: set[str]) -> str:
        cfg = parse_stream_config(a.config, name_in_subject=None)
        pl = cfg.placement
        tags = list(pl.tags) if pl is not None else []
        return self.place(1, tags, cfg.max_bytes, cfg.storage == StorageType.MEMORY,
                          exclude=exclude)[0]  # fmt: skip

    def transfer_leaders(self) -> bool:
        """nats-server's transferRaftLeaders (lame duck, shutdown): every group led here
        hands over to its most caught-up live member. True when a transfer is under way."""
        # only to servers our routes reach now (one that is stopping too has closed them)
        reachable = {raft_id(p) for p in self._peers()}
        moved = self.stream_groups.transfer_all(reachable)
        if self.is_leader() and self.group is not None:
            try:
                target = self.stepdown_target(b"")
            except ApiError:
                target = 0  # no live member to take it
            if target in reachable:
                self.group.node.transfer_leader(target)
                moved = True
        self.raft.kick()
        return moved

    def leads_any(self) -> bool:
        """Does this server still lead a group, or pass publishes on to new leaders?"""
        sg = self.stream_groups
        return self.is_leader() or sg.leads_any() or sg.passing_on()

    def stepdown_target(self, data: bytes) -> int:
        assert self.group is not None
        return stepdown_target(
            data, self.group, self.server_name, self.cluster_name(), self.meta,
            self.name_of, self.raft.last_heard, self.clock.monotonic(),
        )  # fmt: skip

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ---------------------------------------------------------------- answers
    def cluster_block(self, ja: JsAccount, stream: str) -> dict[str, Any]:
        """The ``cluster`` block of a stream on this server, or of its consumers: this
        server leads an R1 stream; a replicated one's group says who leads."""
        s = ja.streams.get(stream)
        if s is not None and s.replica is not None:
            return self.stream_groups.cluster_block(s, self.cluster_name())
        return {"name": self.cluster_name(), "leader": self.server_name}

    def reply_system(self, reply: str, rtype: str, body: dict[str, Any]) -> None:
        """An answer to a system account request."""
        self._reply(self.system.sublist, reply, rtype, body)

    def respond(self, ja: JsAccount, reply: str, rtype: str, body: dict[str, Any]) -> bytes:
        """An API response into ``ja``'s account; returns it as sent (for the audit)."""
        return self._reply(ja.account.sublist, reply, rtype, body)

    @staticmethod
    def _reply(
        sublist: Sublist[Subscription], reply: str, rtype: str, body: dict[str, Any]
    ) -> bytes:
        out = {"type": API_TYPE_PREFIX + rtype}
        out.update(body)
        data = orjson.dumps(out)
        publish(sublist, reply.encode(), None, None, data)
        return data

    def leaderless(self) -> bool:
        """No meta leader known for LEADERLESS seconds (nats-server's ``isLeaderless``):
        requests that need one are answered 10008 instead of left unanswered."""
        g = self.group
        if g is not None and g.node.leader():
            self._leader_seen = self.clock.monotonic()
            return False
        return self.clock.monotonic() - self._leader_seen >= LEADERLESS
