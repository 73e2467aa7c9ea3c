"""The node's Raft groups and the one place their work is done: ``GroupHost.turn``.

Ownership: a server has one ``GroupHost``. It owns the node WAL (``storage.wal``), every
group's ``RawNode`` and the ``MemoryStorage`` that serves the node its log (restored from the
WAL at start-up, as etcd's server does with its WAL and MemoryStorage). Nothing else calls a
RawNode: proposals, ticks and peer messages all come through the host, and ``turn`` handles
every group's Ready at once (design-clustering §4.3):

1. collect the Ready of every group that has one;
2. write their snapshots, entries and hard states to the WAL; send at once the messages that
   promise nothing about this node's disk (a leader's appends and heartbeats, vote
   requests: etcd's ``msgs``, which its async-storage mode sends before the write is
   durable, so a leader writes in parallel with its followers, Raft thesis §10.2.1; a
   leader's appends that only carry a new commit index may be held for the owner to send
   a moment later, ``hold_commit_notices``); then
   **sync once** for all groups when a Ready needs it (etcd's ``MustSync``: new entries, a
   new term or vote, a snapshot; a commit index alone is learnt again after a crash): no
   vote or append response leaves before what it promises is durable;
3. hand the same to each group's MemoryStorage, and send the rest of the messages (append
   and vote responses), **one frame per peer** holding every group's messages for it;
4. apply the committed entries (membership changes to the RawNode, the rest to the group's
   state machine callback) and advance.

The wire frame to a peer and the send times it carries are ``cluster.frames``. Raft node ids
are the first eight bytes of the sha256 of the server name (``raft_id``).

This module does no I/O of its own beyond the WAL's and no waiting: the owner calls
``tick`` on a timer, ``receive`` with each peer frame, and ``turn`` once per loop turn (the
fsync inside it is the one the design moves to a worker thread).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from typing import Final

from natsd.cluster.frames import (
    FRAME_TARGET,
    FRAME_VERSION,
    decode_frame,
    frame_part,
    sent_at,
    sent_context,
)
from natsd.raft.codec import (
    decode_conf_state,
    encode_conf_state,
    unmarshal_conf_change,
    unmarshal_conf_change_v2,
)
from natsd.raft.config import Config
from natsd.raft.describe import is_local_msg
from natsd.raft.logger import RaftPanic
from natsd.raft.rawnode import RawNode, Ready, SnapshotFinish, new_raw_node
from natsd.raft.state import RaftError
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import (
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)
from natsd.storage.wal import GroupLog, Wal, WalEntry

__all__ = [
    "GroupHost",
    "RaftGroup",
    "conf_holds",
    "peer_hash",
    "raft_id",
]

# The context a damaged group puts on its append rejections (see RawNode.lower_match).
LOST_LOG: Final = b"lost-log"
# The context of a member's word to a node its applied configuration no longer holds: a
# rejected MsgHeartbeatResp whose index is the member's applied index (see _tell_removed).
REMOVED: Final = b"removed"
# Rejections in a row of entries a member had acknowledged, no acceptance between, that
# make its leader take its log as lost (_lost_unsaid).
LOST_AFTER: Final = 3
log: Final = logging.getLogger("natsd")
_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# nats-server's NRG values (design-clustering §4.3): a 100 ms tick, elections after 10 of
# them (randomized to 1-2 s by the engine), heartbeats every 2.
ELECTION_TICK: Final = 10
HEARTBEAT_TICK: Final = 2

_VOTES: Final = (MessageType.MsgVote, MessageType.MsgPreVote)
# A follower's answers to its leader's appends and heartbeats: the leader's lease (has_lease).
_ANSWERS: Final = (MessageType.MsgAppResp, MessageType.MsgHeartbeatResp)
# What a leader stamps with its send time (SENT).
_REQUESTS: Final = (MessageType.MsgApp, MessageType.MsgHeartbeat)
# Messages that acknowledge this node's unstable state (etcd's msgsAfterAppend): they leave
# only once the WAL sync covering that state is done. Everything else may leave before it.
_AFTER_SYNC: Final = frozenset(
    {MessageType.MsgAppResp, MessageType.MsgVoteResp, MessageType.MsgPreVoteResp}
)

# The state machine: committed normal entries, in order, with their index.
Apply = Callable[[int, bytes], None]
# A snapshot from the leader replaced the log (index, snapshot data): the state machine must
# become that state before the entries after it are applied.
Install = Callable[[int, bytes], None]
# A MsgSnap from the leader, offered before it is stepped: True when the state machine
# holds it back to fetch the state first (it steps it later with ``GroupHost.step_held``).
HoldSnapshot = Callable[[Message], bool]


def peer_hash(server_name: str) -> str:
    """nats-server's ``getHash``: a server's peer id as clients see it (the ``peer`` of
    cluster infos): the first 8 bytes of the sha256 of its name, each as a base-62 digit."""
    digest = hashlib.sha256(server_name.encode()).digest()
    return "".join(_DIGITS[b % 62] for b in digest[:8])


def raft_id(server_name: str) -> int:
    """A server's Raft node id: the first eight bytes of sha256(name), never 0."""
    return int.from_bytes(hashlib.sha256(server_name.encode()).digest()[:8], "big") or 1


class RaftGroup:
    """One group on this node: its RawNode, its log as the node reads it, its state machine."""

    __slots__ = (
        "applied",
        "apply",
        "conf",
        "hold_snapshot",
        "install",
        "name",
        "node",
        "on_ready",
        "prompt_until",
        "removed",
        "repair_at",
        "responded",
        "responded_term",
        "sent_by_leader",
        "storage",
        "votes_damaged",
    )

    def __init__(
        self,
        name: bytes,
        node: RawNode,
        storage: MemoryStorage,
        conf: ConfState,
        apply: Apply,
        install: Install | None = None,
        hold_snapshot: HoldSnapshot | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.node = node
        self.storage = storage
        self.conf = conf
        self.apply = apply
        self.install = install
        # design-clustering §4.6: a stream replica fetches the messages a snapshot stands
        # for from the leader's store before the snapshot replaces its log
        self.hold_snapshot = hold_snapshot
        # called after a Ready that changed the node's role or leader, or committed
        # entries, was handled: the state machine follows leadership at once rather than
        # on its next periodic check
        self.on_ready = on_ready
        # as leader: per member, the send time (the host's clock, seconds) of the latest
        # request of term ``responded_term`` it has answered, for has_lease
        self.responded: dict[int, float] = {}
        self.responded_term = 0
        # as follower: (leader, term, SENT time in ns) of the latest stamped request that
        # leader sent this node in that term: what this node's answers to it carry back
        self.sent_by_leader: tuple[int, int, int] | None = None
        self.applied = 0
        # as leader: the last entry proposed whose commit the members hear of at once,
        # not after GroupHost.hold_commit_notices' delay (0: none waits)
        self.prompt_until = 0
        # Damaged (the WAL found damage before its tail in this group's records, §4.8):
        # one past the last index the log had. Until a leader has committed up to it, the
        # group neither campaigns nor votes, since what it once acknowledged may be gone;
        # 0: sound.
        self.repair_at = 0
        # An operator dropped this node's log of the group to have it rejoin (the meta
        # group's, jetstream/cluster/rejoin.py): it votes while damaged, since without its
        # vote no leader may be elected (most members damaged), and whatever it had
        # acknowledged the operator chose to give up. It still campaigns for nothing.
        self.votes_damaged = False
        # A member told this node it is out: a configuration that no longer holds it is
        # committed (the member applied it, and had applied at least as much as this node).
        # A removed voter learns it this way, since the leader stops sending to it.
        self.removed = False

    @property
    def leader(self) -> int:
        return self.node.basic_status().lead

    @property
    def damaged(self) -> bool:
        if self.repair_at and self.node.committed() >= self.repair_at:
            self.repair_at = 0  # a leader's log now vouches for everything it had
        return self.repair_at != 0


class GroupHost:
    """Every Raft group of one node, its WAL, and the per-turn Ready processing."""

    def __init__(
        self,
        node_id: int,
        wal: Wal,
        send: Callable[[int, bytes], None],
        *,
        pre_vote: bool = True,
        check_quorum: bool = True,
        max_size_per_msg: int = 1 << 20,
        max_inflight_msgs: int = 256,
        max_uncommitted: int = 64 << 20,
        rand: Callable[[int], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.id = node_id
        self.wal = wal
        # send(peer id, frame): the transport (a route to the peer's server)
        self._send = send
        self._cfg = (pre_vote, check_quorum, max_size_per_msg, max_inflight_msgs, max_uncommitted)
        self._rand = rand
        # seconds, never going back nor below 0: the send times of requests (SENT), and
        # the ``now`` of has_lease for this host's groups
        self.clock = clock
        self.groups: dict[bytes, RaftGroup] = {}
        self.frames_sent = 0
        # the member whose frame ``receive`` last stepped (0: none); liveness for /jsz
        self.last_sender = 0
        # the last prepare() wrote something that must be synced before finish()
        self.needs_sync = False
        # (group, member, term) already reported as having lost acknowledged entries
        self._lost_said: set[tuple[bytes, int, int]] = set()
        # (group, member): its rejections of entries it had acknowledged since its last
        # accepting answer (see _lost_unsaid)
        self._below_match: dict[tuple[bytes, int], int] = {}
        # Hold a leader's appends without entries (a new commit index, mostly) for the
        # owner to send a moment later (``send_held``), unless an append with entries to
        # the same member, which carries the commit index too, goes first: a lone
        # publisher's next message makes each notice redundant, and sending them costs
        # every member a frame, a log write and an answer per message. Raft allows a
        # message to be delayed or lost. Off unless the owner sends the held ones. A
        # proposal marked prompt (``prompt_until``: an operation, not a publish) is not
        # held: its answer promises the replicas have it a moment later.
        self.hold_commit_notices = False
        # (group, member) -> the latest held append's frame part
        self.held: dict[tuple[bytes, int], bytes] = {}

    # ---------------------------------------------------------------- groups
    def create(
        self,
        name: bytes,
        voters: list[int],
        apply: Apply,
        install: Install | None = None,
        forwarding: bool = True,
        *,
        hold_snapshot: HoldSnapshot | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> RaftGroup:
        """A new group with these voters (every member creates it the same way). Its
        membership is logged as a snapshot at index 1, so the log starts at 2 (etcd's advice
        instead of Bootstrap: no conf change entries to replay). ``install`` receives the
        snapshots the leader sends when this node is too far behind (a group whose state
        machine cannot take one, such as a test's, may leave it out)."""
        if name in self.groups or name in self.wal.groups:
            raise ValueError(f"group {name!r} exists")
        cs = ConfState(voters=sorted(voters))
        self.wal.append_snapshot(name, 1, 1, encode_conf_state(cs), b"", replace=True)
        self.wal.commit()
        return self._start(
            name, self.wal.groups[name], apply, 0, install, forwarding, hold_snapshot, on_ready
        )

    def join(
        self,
        name: bytes,
        apply: Apply,
        install: Install | None = None,
        forwarding: bool = True,
        *,
        hold_snapshot: HoldSnapshot | None = None,
        on_ready: Callable[[], None] | None = None,
        lost: bool = False,
    ) -> RaftGroup:
        """Join an existing group that is adding this node: an empty log and no members
        (etcd's way for a node added by a configuration change). The leader finds the log
        empty and sends its snapshot, which brings the membership with it. ``lost``: the
        node was a member and its log of the group is gone (damage): the WAL keeps the
        group damaged across restarts until a leader's commit repairs it."""
        if name in self.groups or name in self.wal.groups:
            raise ValueError(f"group {name!r} exists")
        self.wal.append_snapshot(name, 0, 0, encode_conf_state(ConfState()), b"", replace=True)
        self.wal.commit()
        if lost:
            self.wal.groups[name].damaged = True
        g = self._start(
            name, self.wal.groups[name], apply, 0, install, forwarding, hold_snapshot, on_ready
        )
        # The node may have been a member before (removed, its copy deleted, added again)
        # and the leader may still believe it holds what it acknowledged then: its
        # rejections say the log was lost (LOST_LOG) until it holds a committed entry, or
        # etcd's leader, which never lowers a match, would probe above its log for ever. It
        # lost its vote too, so it casts none meanwhile (the fault soak caught the stall).
        g.repair_at = 1
        return g

    def restore(
        self,
        name: bytes,
        apply: Apply,
        applied: int = 0,
        install: Install | None = None,
        forwarding: bool = True,
        *,
        hold_snapshot: HoldSnapshot | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> RaftGroup:
        """A group found in the WAL at start-up; ``applied`` is what its state machine
        already holds (committed entries up to it are not applied again)."""
        log = self.wal.groups.get(name)
        if log is None:
            raise KeyError(name)
        return self._start(name, log, apply, applied, install, forwarding, hold_snapshot, on_ready)

    def _start(
        self,
        name: bytes,
        log: GroupLog,
        apply: Apply,
        applied: int,
        install: Install | None,
        forwarding: bool = True,
        hold_snapshot: HoldSnapshot | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> RaftGroup:
        st = MemoryStorage()
        conf = decode_conf_state(log.snap_conf) if log.snap_conf else ConfState()
        if log.snap_index:
            meta = SnapshotMetadata(conf_state=conf, index=log.snap_index, term=log.snap_term)
            st.apply_snapshot(Snapshot(data=log.snap_data, metadata=meta))
        kept = _contiguous(log.entries, log.snap_index)
        if kept:
            st.append([Entry(term=t, index=i, type=EntryType(k), data=d) for i, t, k, d in kept])
        last = kept[-1][0] if kept else log.snap_index
        if log.term or log.vote or log.commit:
            # A snapshot holds committed state only, but the hard state record written after
            # it can be lost to a power cut (torn, or in a segment the rotation left unsynced)
            # while an older one survives: the engine refuses a commit below its snapshot.
            # Nor may it pass the log kept (damage cut it short): the leader tells it again.
            commit = min(max(log.commit, log.snap_index), last)
            st.set_hard_state(HardState(term=log.term, vote=log.vote, commit=commit))
        pre_vote, check_quorum, max_msg, max_inflight, max_unc = self._cfg
        cfg = Config(
            id=self.id,
            election_tick=ELECTION_TICK,
            heartbeat_tick=HEARTBEAT_TICK,
            storage=st,
            applied=min(max(applied, log.snap_index), max(last, log.snap_index)),
            max_size_per_msg=max_msg,
            max_inflight_msgs=max_inflight,
            max_uncommitted_entries_size=max_unc,
            check_quorum=check_quorum,
            pre_vote=pre_vote,
            # a group whose proposals carry what only its leader may decide (a stream's
            # sequence numbers) must not have a follower pass them on: they are dropped
            # there (ErrProposalDropped), and the owner passes the request itself on
            disable_proposal_forwarding=not forwarding,
        )
        node = new_raw_node(cfg)
        if self._rand is not None:
            # (the first timeout was drawn from the engine's own generator while it was built)
            node.use_rand(self._rand)
        g = RaftGroup(name, node, st, conf, apply, install, hold_snapshot, on_ready)
        g.applied = cfg.applied
        if log.damaged:
            # past all its log held (``held``: what it reached before a cut, or before a
            # restart left it unrepaired): only a leader's commit can get there
            g.repair_at = max(log.last_index(), log.commit, log.held) + 1
        self.groups[name] = g
        return g

    def drop(self, name: bytes) -> None:
        self.groups.pop(name, None)
        self.wal.append_drop(name)

    # ---------------------------------------------------------------- inputs
    def tick(self) -> None:
        for g in self.groups.values():
            # a damaged group's election timer never runs: it does not campaign
            if not g.repair_at or not g.damaged:
                g.node.tick()

    def propose(self, name: bytes, data: bytes) -> None:
        """Raises the engine's ErrProposalDropped (no leader known, a transfer under way).
        The members hear of its commit at once (``prompt_until``)."""
        g = self.groups[name]
        g.node.propose(data)
        g.prompt_until = g.node.last_index()

    def propose_batch(self, name: bytes, datas: list[bytes], prompt: bool = False) -> None:
        """Several entries in one proposal (one MsgProp, so one append per follower rather
        than one per entry); all or none are taken (ErrProposalDropped). ``prompt``: the
        members hear of their commit at once, not after ``hold_commit_notices``' delay
        (an operation whose answer says every replica has it soon after)."""
        g = self.groups[name]
        ents = [Entry(data=d) for d in datas]
        g.node.step(Message(type=MessageType.MsgProp, from_=self.id, entries=ents))
        if prompt:
            g.prompt_until = g.node.last_index()

    def receive(self, frame: bytes) -> int:
        """A peer's frame: each message is stepped into its group (messages for groups this
        node does not have are dropped, as Raft expects of a lossy network). Returns the
        messages stepped; a malformed frame raises FrameError and steps nothing."""
        msgs = decode_frame(frame)
        n = 0
        self.last_sender = 0
        for name, m in msgs:
            g = self.groups.get(name)
            if g is None or m.to != self.id or is_local_msg(m.type):
                continue  # not ours, or a type only the node itself may step
            if m.context == REMOVED and m.type == MessageType.MsgHeartbeatResp:
                if m.reject and m.index >= g.applied:
                    g.removed = True  # see _tell_removed
                continue
            if g.applied and g.conf.voters and not conf_holds(g.conf, m.from_):
                self._tell_removed(g, m.from_)  # e.g. a removed voter's (pre-)vote requests
            if g.repair_at and m.type in _VOTES and not g.votes_damaged and g.damaged:
                continue  # a damaged group does not vote (§4.8)
            if m.type == MessageType.MsgAppResp:
                if not m.reject:
                    if self._below_match:  # (empty but for a member that lost its log)
                        self._below_match.pop((name, m.from_), None)
                elif m.context == LOST_LOG:
                    g.node.lower_match(m.from_, m.term, m.reject_hint)
                elif m.index <= g.node.matches().get(m.from_, -1) and m.term == g.node.term():
                    self._lost_unsaid(name, g, m)
            if (
                m.type == MessageType.MsgSnap
                and g.hold_snapshot is not None
                and m.snapshot is not None
                and m.snapshot.metadata.index > g.node.committed()
                and g.hold_snapshot(m)
            ):
                n += 1  # stepped once the state it stands for is here (step_held)
                continue
            if m.type == MessageType.MsgHeartbeat:
                # A leader's heartbeat commits up to what it believes this node holds; after
                # damage cut this node's log short (or from a peer that lies) that is past
                # its log, which the engine treats as a broken invariant. The leader learns
                # the truth from the next append's rejection.
                m.commit = min(m.commit, g.node.last_index())
            sent = -1
            if m.type in _ANSWERS or m.type in _REQUESTS:
                sent = sent_at(m.context)
                if sent >= 0 and m.type != MessageType.MsgHeartbeat:
                    # the engine's ReadIndex bookkeeping would take an answer's context for
                    # a read's position (a heartbeat's the engine echoes: etcd's way)
                    m.context = b""
            try:
                g.node.step(m)
            except RaftError:
                continue  # e.g. from a peer that is not a member: Raft drops it too
            except RaftPanic as e:
                # a message that breaks one of the engine's invariants: dropped, never a
                # reason to tear down the route that carried it
                log.error("raft group %s: message from %d dropped: %s", name, m.from_, e)
                continue
            n += 1
            if sent >= 0:
                self._note_sent(g, m, sent)
            if m.from_ in g.conf.voters or m.from_ in g.conf.learners:
                # a member's message reached its group: heard from (members' ids only,
                # so frames naming other senders cannot grow the liveness table)
                self.last_sender = m.from_
        return n

    def _lost_unsaid(self, name: bytes, g: RaftGroup, m: Message) -> None:
        """A member rejected an entry it had acknowledged, without saying its log was lost
        (LOST_LOG): its disk lost what it promised to keep and it does not know (a
        directory whose creation was never made durable, a wiped store), or it lies. etcd's
        leader, probing, would send the same append again at once, for ever: a loop at full
        speed between two servers (the deterministic tier found it, tests/sim). Taken as
        the lost log it is: the match comes down and the probe goes on from there."""
        # One such rejection may be stale, overtaken by the acceptance of the same index
        # (Raft allows messages to be reordered); a lost log sends them one after another
        # with no acceptance between.
        n = self._below_match.get((name, m.from_), 0) + 1
        self._below_match[(name, m.from_)] = n
        if n < LOST_AFTER:
            return
        key = (name, m.from_, m.term)
        if key not in self._lost_said:
            self._lost_said.add(key)
            log.error(
                "raft group %s: member %016x rejects entry %d it had acknowledged: "
                "its log lost entries it promised to keep",
                name.decode(errors="replace"),
                m.from_,
                m.index,
            )
        g.node.lower_match(m.from_, m.term, m.reject_hint)

    def _note_sent(self, g: RaftGroup, m: Message, sent: int) -> None:
        """A stepped message carried a send time (SENT). An answer of this term: the member
        heard from this node at ``sent`` (a time this node's clock has not reached yet is a
        lie, and ignored). A request from this node's leader: the time its answers to that
        leader carry back from now on."""
        if m.term != g.node.term():
            return
        if m.type in _ANSWERS:
            now = self.clock()
            at = sent / 1e9
            if at > now:
                return
            if g.responded_term != m.term:
                g.responded.clear()
                g.responded_term = m.term
            if at > g.responded.get(m.from_, -1.0e18):
                g.responded[m.from_] = at
        elif g.node.leader() == m.from_:
            last = g.sent_by_leader
            if last is None or last[:2] != (m.from_, m.term) or sent > last[2]:
                g.sent_by_leader = (m.from_, m.term, sent)

    def _stamp(self, g: RaftGroup, m: Message, now: int) -> None:
        """An outgoing message's SENT context: a leader's request gets its send time
        ``now`` (ns; a request carrying a context of its own keeps it), an answer to this
        node's leader the latest time heard from it (see SENT)."""
        t = m.type
        if t in _REQUESTS:
            if not m.context:
                m.context = sent_context(now)
        elif t in _ANSWERS:
            last = g.sent_by_leader
            if last is None or last[0] != m.to or last[1] != m.term:
                return
            if not m.context or 0 <= sent_at(m.context) < last[2]:
                m.context = sent_context(last[2])

    def step_held(self, name: bytes, m: Message) -> bool:
        """Step a MsgSnap that ``hold_snapshot`` held back (the state machine now holds
        the state it stands for); False when the group is gone or the engine refused it
        (a snapshot from an old term: the leader sends another)."""
        g = self.groups.get(name)
        if g is None:
            return False
        if m.term < g.node.term():
            # Raft ignores a message of an older term; the current leader sends its own
            log.info(
                "raft group %s: held snapshot of term %d dropped (the group is at term %d)",
                name.decode(errors="replace"), m.term, g.node.term(),
            )  # fmt: skip
            return False
        try:
            g.node.step(m)
        except (RaftError, RaftPanic) as e:
            log.warning("raft group %s: held snapshot not stepped: %s", name, e)
            return False
        return True

    # ---------------------------------------------------------------- the turn
    def turn(self) -> int:
        """Handle every group's Ready (see the module docstring), the WAL sync inline;
        returns how many groups had one."""
        work = self.prepare()
        if work:
            if self.needs_sync:
                self.wal.sync()
            self.finish(work)
        return len(work)

    def prepare(self) -> list[tuple[RaftGroup, Ready]]:
        """Step 2 up to the sync: take every group's Ready, write it to the WAL and send
        the messages that may leave before it is durable. The caller then makes the WAL
        durable when ``needs_sync`` says so (``wal.sync``, on a worker thread if it likes)
        and calls ``finish``; meanwhile peer frames and proposals may still be stepped, but
        no other ``prepare`` may run."""
        work = [(g, g.node.ready()) for g in self.groups.values() if g.node.has_ready()]
        now = int(self.clock() * 1e9)
        wal = self.wal
        needs_sync = False
        hold = self.hold_commit_notices
        held = self.held
        early: dict[int, list[bytes]] = {}
        snaps_sent: list[tuple[RaftGroup, int]] = []
        for g, rd in work:
            snap = rd.snapshot
            if snap is not None and snap.metadata.index:
                md = snap.metadata
                wal.append_snapshot(g.name, md.index, md.term, encode_conf_state(md.conf_state),
                                    snap.data, replace=True)  # fmt: skip
                needs_sync = True
            if rd.entries:
                wal.append_entries(
                    g.name, [(e.index, e.term, int(e.type), e.data) for e in rd.entries]
                )
            hs = rd.hard_state
            if hs is not None:
                wal.append_hard_state(g.name, hs.term, hs.vote, hs.commit)
            needs_sync = needs_sync or rd.must_sync
            if rd.messages:
                late = []
                prompt = g.prompt_until
                for m in rd.messages:
                    if m.type in _AFTER_SYNC:
                        late.append(m)
                        continue
                    self._stamp(g, m, now)
                    part = frame_part(g.name, m)
                    if m.type == MessageType.MsgApp and hold:
                        if not m.entries and not (prompt and m.commit >= prompt):
                            held[(g.name, m.to)] = part  # (a newer one replaces it)
                            continue
                        if held:
                            held.pop((g.name, m.to), None)  # this one says as much
                        if prompt and m.commit >= prompt:
                            g.prompt_until = 0  # (told: later notices may wait again)
                    early.setdefault(m.to, []).append(part)
                    if m.type == MessageType.MsgSnap:
                        snaps_sent.append((g, m.to))
                rd.messages = late
        wal.flush()
        self.needs_sync = needs_sync
        self._send_frames(early, snaps_sent)
        return work

    def send_held(self) -> None:
        """Send the appends ``prepare`` held (``hold_commit_notices``), one frame per peer."""
        if not self.held:
            return
        out: dict[int, list[bytes]] = {}
        for (name, to), part in self.held.items():
            if name in self.groups:
                out.setdefault(to, []).append(part)
        self.held = {}
        self._send_frames(out, [])

    def _send_frames(
        self, out: dict[int, list[bytes]], snaps_sent: list[tuple[RaftGroup, int]]
    ) -> None:
        head = bytes([FRAME_VERSION])
        for peer, parts in out.items():
            frame = [head]
            size = 1
            for part in parts:
                if size > 1 and size + len(part) > FRAME_TARGET:
                    self._send(peer, b"".join(frame))
                    self.frames_sent += 1
                    frame = [head]
                    size = 1
                frame.append(part)
                size += len(part)
            self._send(peer, b"".join(frame))
            self.frames_sent += 1
        # The transport never says whether a frame arrived, so a snapshot counts as sent:
        # the peer goes back to probing, and if the snapshot was lost its reply to the next
        # append asks for another one. Unreported, a lost snapshot would leave the peer
        # paused in StateSnapshot for as long as this node leads.
        for g, to in snaps_sent:
            g.node.report_snapshot(to, SnapshotFinish)

    def finish(self, work: list[tuple[RaftGroup, Ready]]) -> None:
        """Steps 3-4, once the WAL holds everything ``prepare`` wrote that must be durable:
        the groups' memory logs, the remaining messages (one frame per peer), the state
        machines, advance."""
        if self.needs_sync and self.wal.dirty:
            raise RuntimeError("finish before the WAL sync")  # a vote would leave unsynced
        out: dict[int, list[bytes]] = {}
        snaps_sent: list[tuple[RaftGroup, int]] = []
        now = int(self.clock() * 1e9)
        for g, rd in work:
            st = g.storage
            snap = rd.snapshot
            if snap is not None and snap.metadata.index:
                st.apply_snapshot(snap)
                g.conf = snap.metadata.conf_state
                g.applied = max(g.applied, snap.metadata.index)
            if rd.entries:
                st.append(rd.entries)
            if rd.hard_state is not None:
                st.set_hard_state(rd.hard_state)
            lost = g.repair_at != 0 and g.damaged
            for m in rd.messages:
                if lost and m.type == MessageType.MsgAppResp and m.reject:
                    m.context = LOST_LOG
                self._stamp(g, m, now)
                out.setdefault(m.to, []).append(frame_part(g.name, m))
                if m.type == MessageType.MsgSnap:
                    snaps_sent.append((g, m.to))
        self._send_frames(out, snaps_sent)
        for g, rd in work:
            if g.name not in self.groups:
                continue  # dropped while its sync ran
            snap = rd.snapshot
            if snap is not None and snap.metadata.index and g.install is not None:
                g.install(snap.metadata.index, snap.data)
            for e in rd.committed_entries:
                self._apply(g, e)
            g.node.advance(rd)
            if g.on_ready is not None and (rd.soft_state is not None or rd.committed_entries):
                g.on_ready()

    def _apply(self, g: RaftGroup, e: Entry) -> None:
        if e.index <= g.applied:
            return
        g.applied = e.index
        if e.type == EntryType.EntryNormal:
            if e.data:  # the empty entry a new leader appends carries nothing to apply
                g.apply(e.index, e.data)
            return
        cc = (
            unmarshal_conf_change(e.data)
            if e.type == EntryType.EntryConfChange
            else unmarshal_conf_change_v2(e.data)
        )
        before = g.conf
        g.conf = g.node.apply_conf_change(cc)
        if conf_holds(g.conf, self.id):
            g.removed = False  # (added back)
        for n in (*before.voters, *before.learners, *before.voters_outgoing):
            if n != self.id and not conf_holds(g.conf, n):
                self._tell_removed(g, n)

    def _tell_removed(self, g: RaftGroup, to: int) -> None:
        """Tell ``to`` that this node's applied configuration no longer holds it. A removed
        voter must not leave its group (and delete its copy) before its removal is
        committed: while the group still counts it, its leaving could cost the group its
        majority for good (two overlapping moves, the fault soak found). But the leader stops
        sending to a member as soon as it applies its removal, so the member may never see
        that commit: each member tells the nodes its configuration changes drop, and answers
        a non-member's messages (a zombie's vote requests) the same way. The receiver trusts
        it only from a member that has applied at least as much as itself."""
        m = Message(type=MessageType.MsgHeartbeatResp, to=to, from_=self.id, reject=True,
                    index=g.applied, context=REMOVED)  # fmt: skip
        self._send(to, bytes([FRAME_VERSION]) + frame_part(g.name, m))
        self.frames_sent += 1

    # ---------------------------------------------------------------- space
    def compact(self, name: bytes, index: int, data: bytes) -> None:
        """The state machine of ``name`` holds everything up to ``index`` (its state is
        ``data``): snapshot there, drop the log before it, and free WAL segments."""
        g = self.groups[name]
        snap = g.storage.create_snapshot(index, g.conf, data)
        g.storage.compact(index)
        md = snap.metadata
        self.wal.append_snapshot(name, md.index, md.term, encode_conf_state(g.conf), data)
        self.wal.append_compact(name, index)
        self.wal.commit()
        self.wal.delete_obsolete()


def conf_holds(cs: ConfState, node: int) -> bool:
    """Is ``node`` in the configuration, in any role?"""
    return (
        node in cs.voters
        or node in cs.learners
        or node in cs.voters_outgoing
        or node in cs.learners_next
    )


def has_lease(g: RaftGroup, now: float, lease: float) -> bool:
    """As leader: has a majority of the group's voters (of both configurations when
    joint) answered an append or heartbeat of this term that this node sent within
    ``lease`` seconds of ``now`` (the host's clock)? A follower grants no vote for
    ``ELECTION_TICK`` ticks after it last heard from its leader, so with ``lease`` well
    below that no other leader can have been elected meanwhile. Without it, a leader cut
    off from the others believes it leads until its check-quorum runs (one to two election
    timeouts), and serves stale reads and deliveries meanwhile.

    An answer counts from the send time it carries back (SENT), not from when it arrived:
    a leader stopped (SIGSTOP) and resumed reads the answers to what it sent before the
    pause, while the others may have elected a leader since. Answers carrying no time
    count for nothing."""
    me = g.node.node_id()
    responded = g.responded if g.responded_term == g.node.term() else {}

    def majority(voters: list[int]) -> bool:
        if not voters:
            return True
        n = 0
        for v in voters:
            if v == me or now - responded.get(v, -1e9) <= lease:
                n += 1
        return 2 * n > len(voters)

    cs = g.conf
    return majority(cs.voters) and majority(cs.voters_outgoing)


def _contiguous(entries: list[WalEntry], snap_index: int) -> list[WalEntry]:
    """The entries that follow the snapshot without a gap. Damage in the middle of a WAL
    (a flipped bit) loses records and leaves a hole: the engine's log cannot hold one, so
    what comes after it is left to the leader to send again, and the group, marked damaged
    by the WAL, stays out of elections until the leader's commit passes all it had."""
    start = 0
    while start < len(entries) and entries[start][0] <= snap_index:
        start += 1  # covered by the snapshot (its compaction record may be lost)
    expect = snap_index + 1
    for n in range(start, len(entries)):
        if entries[n][0] != expect:
            return entries[start:n]
        expect += 1
    return entries[start:]
