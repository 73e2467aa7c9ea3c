"""One replicated stream's membership on this server: its group, its leadership as this
replica sees it, and the naming of groups.

Split from cluster/streams.py; ``StreamGroups`` owns the members (one per replicated stream
placed here), this module only describes one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from natsd.cluster.group import RaftGroup
from natsd.cluster.meta import StreamAssignment
from natsd.jetstream.cluster.catchup import CatchupError, StreamSnapshot, decode_snapshot
from natsd.jetstream.cluster.consumers import ReplicatedConsumers
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.stream.stream import Stream
from natsd.storage.wal import GroupLog

__all__ = ["Member", "group_name", "short_of", "track_leader", "unreplicated"]


def unreplicated(s: Stream) -> bool:
    """An R1 stream, answered by the one server that holds it. A replicated one that has
    no group yet (its server is restarting) answers nothing: its leader does."""
    return s.replica is None and s.cfg.num_replicas <= 1


def track_leader(m: Member, lead: int) -> None:
    """Note when this replica first knew of its group's current leader."""
    if lead != m.leader:
        m.leader = lead
        m.had_leader = m.had_leader or bool(lead)
        m.leader_since = m.stream.clock.time_ns() if lead else 0


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


class Member:
    __slots__ = (
        "apply",
        "assignment",
        "compact_proposed",
        "compact_to",
        "consumers",
        "created_at",
        "deferred",
        "group",
        "had_leader",
        "ja",
        "leader",
        "leader_since",
        "leaving_since",
        "leaving_told",
        "ready_at",
        "repairing",
        "stream",
        "suspended",
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
        # for leaderless(): when this replica joined (loop time), and whether it ever knew
        # of a leader
        self.created_at = asyncio.get_running_loop().time()
        self.had_leader = False
        # its durable consumers (set by StreamGroups.attach)
        self.consumers: ReplicatedConsumers | None = None
        # loop time since when the meta group no longer places it here (0: it does)
        self.leaving_since = 0.0
        # it logged that it waits, a voter, for the group to remove it
        self.leaving_told = False
        # its store is being refilled from the other replicas (CatchUp.repair): committed
        # entries wait in ``deferred`` (index, data) and it does not lead meanwhile
        self.repairing = False
        # a leader out of touch with its group: its consumers held passive (_keep_lease)
        self.suspended = False
        self.deferred: list[tuple[int, bytes]] = []
        # the group's state machine (StreamGroups.attach): applies one committed entry
        self.apply: Callable[[int, bytes], None] | None = None
