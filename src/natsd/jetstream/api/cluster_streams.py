"""Replicated streams' Raft groups on this server (design-clustering §4.5).

Ownership: ``StreamGroups`` owns the group of every stream with ``num_replicas`` > 1 that is
placed on this server: it creates the group when the assignment applies (or restores it
from the node log after a restart), feeds the group's committed entries to the stream
(``Stream.apply_entry``), and follows leadership: the replica that leads, once it has
applied everything in its log up to its own first entry, subscribes to the stream's
subjects and takes publishes (``Replica.lead``); one that stops leading unsubscribes. The
stream side of all this (the entries, the leader's shadow) is ``jetstream/stream/replica``.

A group is named after the stream's account, name and creation time, so a stream deleted
and created again gets a new group. Its voters are the assignment's peers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import StreamAssignment
from natsd.cluster.raft_service import RaftService
from natsd.core.clock import rfc3339
from natsd.jetstream.api.dispatch import handle
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.stream.replica import (
    OP_API,
    EntryError,
    Replica,
    compact_index,
    decode_api,
    decode_entry,
    encode_api,
    encode_compact,
    entry_op,
)
from natsd.jetstream.stream.stream import Stream
from natsd.raft.state import RaftError, StateType

__all__ = ["StreamGroups", "group_name"]

log = logging.getLogger("natsd")

# A replica not heard from for this long is not "current" in the cluster block, and after
# OFFLINE_AFTER it shows as offline.
CURRENT_FOR: Final = 2.0
OFFLINE_AFTER: Final = 10.0
# The leader proposes a COMPACT entry once the log holds this many applied entries.
COMPACT_EVERY: Final = 4096


def group_name(a: StreamAssignment) -> bytes:
    return f"S:{a.account}:{a.name}:{a.created}".encode()


class _Member:
    __slots__ = (
        "assignment",
        "compact_proposed",
        "compact_to",
        "group",
        "ja",
        "leader",
        "leader_since",
        "ready_at",
        "stream",
    )

    def __init__(self, ja: JsAccount, stream: Stream, a: StreamAssignment) -> None:
        self.ja = ja
        self.stream = stream
        self.assignment = a
        self.group: RaftGroup | None = None
        # as a new leader: the log index it must apply before it takes publishes (0: none)
        self.ready_at = 0
        # an applied COMPACT entry's index, to compact at when no WAL sync is under way
        self.compact_to = 0
        # as leader: the index of the last COMPACT entry proposed
        self.compact_proposed = 0
        # the leader this replica knows of, and since when (wall ns) it knows of it
        self.leader = 0
        self.leader_since = 0


class StreamGroups:
    """The replicated streams placed on this server, and their groups."""

    def __init__(
        self,
        raft: RaftService,
        server_name: str,
        name_of: Callable[[int], str],
        traffic_account: str,
    ) -> None:
        self.raft = raft
        self.server_name = server_name
        # the account the groups' traffic goes through (the system account)
        self.traffic_account = traffic_account
        self._name_of = name_of
        self.members: dict[bytes, _Member] = {}
        self.compact_every = COMPACT_EVERY
        # leadership changes for the owner's advisories: (stream, leader now)
        self.on_leader: Callable[[JsAccount, Stream], None] | None = None

    def attach(self, ja: JsAccount, stream: Stream, a: StreamAssignment) -> None:
        """``stream`` is a replica of ``a`` on this server: join (or rejoin) its group."""
        name = group_name(a)
        if name in self.members:
            return
        host = self.raft.host
        rep = Replica(host.id)
        stream.replica = rep
        stream.unsubscribe()  # the leader subscribes, once it is ready

        def propose(data: bytes) -> bool:
            try:
                self.raft.propose(name, data)
            except RaftError:
                return False
            return True

        rep.propose = propose

        m = _Member(ja, stream, a)

        def apply(_index: int, data: bytes) -> None:
            index = compact_index(data)
            if index:
                m.compact_to = max(m.compact_to, index)
                return
            try:
                if entry_op(data) == OP_API:
                    self._apply_api(m, data)
                else:
                    stream.apply_entry(decode_entry(data))
            except EntryError as e:
                log.error("stream %s/%s: entry not applied: %s", a.account, a.name, e)

        def install(index: int, _data: bytes) -> None:
            # COMPACT entries never pass a replica's log, so the leader has no reason to
            # send a snapshot; one that arrives means this replica lost its log
            log.error(
                "stream %s/%s: the leader sent a snapshot at %d; catching up from the"
                " leader's store is not implemented yet",
                a.account,
                a.name,
                index,
            )

        if name in host.wal.groups:
            # the entries after the last compaction are applied again; the store skips
            # the messages it holds
            m.group = host.restore(name, apply, install=install)
        else:
            voters = sorted(raft_id(p) for p in a.peers)
            m.group = host.create(name, voters, apply, install)
            if a.peers and a.peers[0] == self.server_name:
                m.group.node.campaign()  # a new group need not wait out an election timeout
        self.members[name] = m
        self.raft.kick()

    def detach(self, a: StreamAssignment) -> None:
        """The stream is deleted (or no longer placed here): leave its group."""
        m = self.members.pop(group_name(a), None)
        if m is None:
            return
        if m.stream.replica is not None:
            m.stream.replica.follow()
        m.stream.unsubscribe()
        self.raft.host.drop(group_name(a))

    def check(self) -> None:
        """Follow leadership: a leader takes publishes once it has applied its log up to
        its own first entry; a replica that no longer leads stops taking them."""
        me = self.raft.host.id
        for name, m in self.members.items():
            rep = m.stream.replica
            g = m.group
            if rep is None or g is None:
                continue
            if m.compact_to and not self.raft.busy:
                self._compact(name, m, g)
            raft = g.node.raft
            if raft.lead != m.leader:
                m.leader = raft.lead
                m.leader_since = m.stream.clock.time_ns() if raft.lead else 0
            if raft.state == StateType.StateLeader and raft.lead == me:
                if rep.leading:
                    self._propose_compact(name, m, g)
                    continue
                if not m.ready_at:
                    m.ready_at = raft.raft_log.last_index()
                if g.applied >= m.ready_at:
                    m.ready_at = 0
                    rep.lead(m.stream.store.state().last_seq)
                    m.stream.subscribe()
                    if self.on_leader is not None:
                        self.on_leader(m.ja, m.stream)
            else:
                m.ready_at = 0
                if rep.leading:
                    rep.follow()
                    m.stream.unsubscribe()
                    # its consumers are the ephemeral ones it held as leader: they end
                    # with its leadership (their clients create them again)
                    for c in list(m.stream.consumers.values()):
                        if isinstance(c, Consumer):
                            c.delete()

    def propose_api(
        self, stream: Stream, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> bool:
        """As leader: an API request that changes the store goes through the log (see
        ``_apply_api``); False when the group did not take it."""
        rep = stream.replica
        if rep is None or not rep.leading:
            return False
        if not rep.propose(encode_api(rep.node_id, subject, reply, hdr, data)):
            return False
        rep.inflight += 1  # publishes whose checks read the store wait for it
        return True

    def _apply_api(self, m: _Member, data: bytes) -> None:
        """A committed API entry: every replica runs the standalone handler on the same
        store, so each gets the same result; the one that proposed it answers."""
        e = decode_api(data)
        rep = m.stream.replica
        mine = rep is not None and rep.leading and e.proposer == rep.node_id
        if mine and rep is not None:
            rep.applied(0, "")
        handle(m.ja, e.subject, e.reply if mine and e.reply else None, e.data, e.hdr)
        m.stream.drain()

    def _propose_compact(self, name: bytes, m: _Member, g: RaftGroup) -> None:
        """As leader: once the log holds COMPACT_EVERY applied entries, propose compacting
        it up to the lowest index every replica has (a replica that is away holds it
        back: it will catch up from the log, not from a snapshot)."""
        first = g.storage.first_index()
        every = self.compact_every
        if g.applied - first < every:
            return
        progress = g.node.raft.trk.progress
        safe = min(min(pr.match for pr in progress.values()), g.applied)
        if safe - first < every // 2 or safe <= m.compact_proposed:
            return
        try:
            self.raft.propose(name, encode_compact(safe))
        except RaftError:
            return
        m.compact_proposed = safe

    def _compact(self, name: bytes, m: _Member, g: RaftGroup) -> None:
        """A COMPACT entry applied: make the store durable up to what it holds, then drop
        the log before the entry's index (the store now holds what those entries did)."""
        index = min(m.compact_to, g.applied)
        m.compact_to = 0
        if index < g.storage.first_index():
            return
        store = m.stream.store
        store.flush()
        store.sync()
        self.raft.host.compact(name, index, b"")

    def member(self, stream: Stream) -> _Member | None:
        for m in self.members.values():
            if m.stream is stream:
                return m
        return None

    def stepdown(self, stream: Stream) -> bool:
        """Hand the leadership of ``stream``'s group to its most caught-up live follower;
        False when there is none."""
        m = self.member(stream)
        if m is None or m.group is None:
            return False
        raft = m.group.node.raft
        if raft.state != StateType.StateLeader:
            return False
        now = asyncio.get_running_loop().time()
        best, match = 0, -1
        for vid, pr in raft.trk.progress.items():
            if vid == raft.id or now - self.raft.last_heard.get(vid, -1e9) > CURRENT_FOR:
                continue
            if pr.match > match:
                best, match = vid, pr.match
        if not best:
            return False
        m.group.node.transfer_leader(best)
        self.raft.kick()
        return True

    def cluster_block(self, stream: Stream, cluster: str) -> dict[str, Any]:
        """The ``cluster`` block of a replicated stream's info, as nats-server shows it:
        the leader, and the other replicas with whether they are current and when they
        were last heard from (the leader knows its followers' progress)."""
        out: dict[str, Any] = {"name": cluster}
        m = self.member(stream)
        if m is None or m.group is None:
            return out
        a = m.assignment
        kind = "M" if a.config.get("storage") == "memory" else "F"
        out["raft_group"] = f"S-R{len(a.peers)}{kind}-{peer_hash(group_name(a).decode())}"
        raft = m.group.node.raft
        me = self.raft.host.id
        lead = raft.lead
        if lead:
            out["leader"] = self._name_of(lead)
            if m.leader == lead and m.leader_since:
                out["leader_since"] = rfc3339(m.leader_since)
        out["system_account"] = True
        out["traffic_account"] = self.traffic_account
        now = asyncio.get_running_loop().time()
        last = raft.raft_log.last_index()
        progress = raft.trk.progress if raft.state == StateType.StateLeader else {}
        replicas = []
        for peer in m.assignment.peers:
            vid = raft_id(peer)
            if vid == lead:
                continue
            heard = self.raft.last_heard.get(vid)
            ago = 0.0 if vid == me else (now - heard if heard is not None else None)
            pr = progress.get(vid)
            current = (vid == me) or (
                ago is not None and ago <= CURRENT_FOR and (pr is None or pr.match >= last)
            )
            row: dict[str, Any] = {"name": peer, "current": current}
            row["active"] = int((ago if ago is not None else 0.0) * 1e9)
            if pr is not None and last > pr.match:
                row["lag"] = last - pr.match
            if ago is None or ago > OFFLINE_AFTER:
                row["offline"] = True
            row["peer"] = peer_hash(peer)
            replicas.append(row)
        if replicas:
            out["replicas"] = replicas
        return out
