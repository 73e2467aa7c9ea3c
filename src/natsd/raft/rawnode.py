"""Ports etcd-io/raft v3.7.0 rawnode.go and bootstrap.go, with node.go's Ready, Peer,
SnapshotStatus and MustSync (Apache-2.0): RawNode, the thread-unsafe Node the application
drives (tick, step, ready / advance), including the asynchronous storage writes
(MsgStorageAppend / MsgStorageApply and their responses, to and from LOCAL_APPEND_THREAD and
LOCAL_APPLY_THREAD).

Go's errors are raised (ErrStepLocalMsg, ErrStepPeerNotFound, ErrProposalDropped, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Final

from natsd.raft.codec import ents_size, marshal_conf_change
from natsd.raft.core import Config, Raft, conf_change_to_msg, new_raft
from natsd.raft.describe import (
    LOCAL_APPEND_THREAD,
    LOCAL_APPLY_THREAD,
    is_local_msg,
    is_local_msg_target,
    is_response_msg,
)
from natsd.raft.read_only import ReadState
from natsd.raft.state import (
    ErrProposalDropped,
    ErrStepLocalMsg,
    ErrStepPeerNotFound,
    RaftError,
    SoftState,
    StateType,
)
from natsd.raft.status import BasicStatus, Status, get_basic_status, get_status
from natsd.raft.tracker import Inflights, Progress
from natsd.raft.types import (
    NONE,
    ConfChange,
    ConfChangeAddNode,
    ConfChangeI,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    is_empty_hard_state,
    is_empty_snap,
    is_hard_state_equal,
)

__all__ = [
    "BasicStatus",
    "ErrProposalDropped",
    "ErrStepLocalMsg",
    "ErrStepPeerNotFound",
    "Peer",
    "ProgressType",
    "ProgressTypeLearner",
    "ProgressTypePeer",
    "RawNode",
    "Ready",
    "SnapshotFailure",
    "SnapshotFinish",
    "SnapshotStatus",
    "SoftState",
    "Status",
    "must_sync",
    "new_raw_node",
]

_EMPTY_STATE: Final = HardState()


class SnapshotStatus(IntEnum):
    SnapshotFinish = 1
    SnapshotFailure = 2


SnapshotFinish: Final = SnapshotStatus.SnapshotFinish
SnapshotFailure: Final = SnapshotStatus.SnapshotFailure


class ProgressType(IntEnum):
    """The type of progress returned by with_progress."""

    ProgressTypePeer = 0
    ProgressTypeLearner = 1


ProgressTypePeer: Final = ProgressType.ProgressTypePeer
ProgressTypeLearner: Final = ProgressType.ProgressTypeLearner


class Peer:
    __slots__ = ("context", "id")

    def __init__(self, id: int = 0, context: bytes = b"") -> None:
        self.id = id
        self.context = context


class Ready:
    """Encapsulates the entries and messages that are ready to read, be saved to stable
    storage, committed or sent to other peers. All fields in Ready are read-only."""

    __slots__ = (
        "committed_entries",
        "entries",
        "hard_state",
        "messages",
        "must_sync",
        "read_states",
        "snapshot",
        "soft_state",
    )

    def __init__(
        self,
        soft_state: SoftState | None = None,
        hard_state: HardState | None = None,
        read_states: list[ReadState] | None = None,
        entries: list[Entry] | None = None,
        snapshot: Snapshot | None = None,
        committed_entries: list[Entry] | None = None,
        messages: list[Message] | None = None,
        must_sync: bool = False,
    ) -> None:
        # The current volatile state of a Node. SoftState will be None if there is no
        # update. It is not required to consume or store SoftState.
        self.soft_state = soft_state
        # The current state of a Node to be saved to stable storage BEFORE Messages are
        # sent. HardState will be None (Go: empty) if there is no update.
        self.hard_state = hard_state
        # ReadStates can be used for node to serve linearizable read requests locally when
        # its applied index is greater than the index in ReadState.
        self.read_states: list[ReadState] = read_states if read_states is not None else []
        # Entries specifies entries to be saved to stable storage BEFORE Messages are sent.
        self.entries: list[Entry] = entries if entries is not None else []
        # Snapshot specifies the snapshot to be saved to stable storage.
        self.snapshot = snapshot
        # CommittedEntries specifies entries to be committed to a store/state-machine.
        # These have previously been appended to stable storage.
        self.committed_entries: list[Entry] = (
            committed_entries if committed_entries is not None else []
        )
        # Messages specifies outbound messages. If async storage writes are not enabled,
        # these messages must be sent AFTER Entries are appended to stable storage. If
        # async storage writes are enabled, these messages can be sent immediately as the
        # messages that have the completion of the async writes as a precondition are
        # attached to the individual MsgStorage{Append,Apply} messages instead. If it
        # contains a MsgSnap message, the application MUST report back to raft when the
        # snapshot has been received or has failed by calling report_snapshot.
        self.messages: list[Message] = messages if messages is not None else []
        # MustSync indicates whether the HardState and Entries must be durably written to
        # disk or if a non-durable write is permissible.
        self.must_sync = must_sync

    # The fields Go promotes from the embedded *pb.HardState.
    @property
    def term(self) -> int:
        return self.hard_state.term if self.hard_state is not None else 0

    @property
    def vote(self) -> int:
        return self.hard_state.vote if self.hard_state is not None else 0

    @property
    def commit(self) -> int:
        return self.hard_state.commit if self.hard_state is not None else 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ready):
            return NotImplemented
        return (
            self.soft_state == other.soft_state
            and _hs_eq(self.hard_state, other.hard_state)
            and self.read_states == other.read_states
            and self.entries == other.entries
            and _snap_eq(self.snapshot, other.snapshot)
            and self.committed_entries == other.committed_entries
            and self.messages == other.messages
            and self.must_sync == other.must_sync
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Ready(soft_state={self.soft_state!r}, hard_state={self.hard_state!r}, "
            f"read_states={self.read_states!r}, entries={self.entries!r}, "
            f"snapshot={self.snapshot!r}, committed_entries={self.committed_entries!r}, "
            f"messages={self.messages!r}, must_sync={self.must_sync})"
        )


def _hs_eq(a: HardState | None, b: HardState | None) -> bool:
    # An empty HardState and none are the same update (none).
    if is_empty_hard_state(a) and is_empty_hard_state(b):
        return True
    return a == b


def _snap_eq(a: Snapshot | None, b: Snapshot | None) -> bool:
    if is_empty_snap(a) and is_empty_snap(b):
        return True
    return a == b


def must_sync(st: HardState, prevst: HardState, entsnum: int) -> bool:
    """MustSync returns true if the hard state and count of Raft entries indicate that a
    synchronous write to persistent storage is required."""
    # Persistent state on all servers: (Updated on stable storage before responding to
    # RPCs) currentTerm, votedFor, log entries[]
    return entsnum != 0 or st.vote != prevst.vote or st.term != prevst.term


def need_storage_append_msg(r: Raft, rd: Ready) -> bool:
    # Return true if log entries, hard state, or a snapshot need to be written to stable
    # storage. Also return true if any messages are contingent on all prior
    # MsgStorageAppend being processed.
    return (
        len(rd.entries) > 0
        or not is_empty_hard_state(rd.hard_state)
        or not is_empty_snap(rd.snapshot)
        or len(r.msgs_after_append) > 0
    )


def need_storage_append_resp_msg(r: Raft, rd: Ready) -> bool:
    # Return true if raft needs to hear about stabilized entries or an applied snapshot.
    # See the comment in newStorageAppendRespMsg, which explains why we check
    # hasNextOrInProgressUnstableEnts instead of len(rd.Entries) > 0.
    return r.raft_log.has_next_or_in_progress_unstable_ents() or not is_empty_snap(rd.snapshot)


def new_storage_append_msg(r: Raft, rd: Ready) -> Message:
    """Creates the message that should be sent to the local append thread to instruct it to
    append log entries, write an updated hard state, and apply a snapshot. The message also
    carries a set of responses that should be delivered after the rest of the message is
    processed. Used with AsyncStorageWrites."""
    m = Message(
        type=MessageType.MsgStorageAppend,
        to=LOCAL_APPEND_THREAD,
        from_=r.id,
        entries=rd.entries,
    )
    if rd.hard_state is not None and not is_empty_hard_state(rd.hard_state):
        # If the Ready includes a HardState update, assign each of its fields to the
        # corresponding fields in the Message. This allows clients to reconstruct the
        # HardState and save it to stable storage.
        #
        # If the Ready does not include a HardState update, make sure to not assign a
        # value to any of the fields so that a HardState reconstructed from them will be
        # empty (return true from raft.IsEmptyHardState).
        m.term = rd.hard_state.term
        m.vote = rd.hard_state.vote
        m.commit = rd.hard_state.commit
    if not is_empty_snap(rd.snapshot):
        m.snapshot = rd.snapshot
    # Attach all messages in msgsAfterAppend as responses to be delivered after the
    # message is processed, along with a self-directed MsgStorageAppendResp to acknowledge
    # the entry stability.
    #
    # NB: it is important for performance that MsgStorageAppendResp message be handled
    # after self-directed MsgAppResp messages on the leader (which will be contained in
    # msgsAfterAppend). This ordering allows the MsgAppResp handling to use a fast-path in
    # r.raftLog.term() before the newly appended entries are removed from the unstable
    # log.
    m.responses = r.msgs_after_append
    if need_storage_append_resp_msg(r, rd):
        m.responses = [*m.responses, new_storage_append_resp_msg(r, rd)]
    return m


def new_storage_append_resp_msg(r: Raft, rd: Ready) -> Message:
    """Creates the message that should be returned to node after the unstable log entries,
    hard state, and snapshot in the current Ready (along with those in all prior Ready
    structs) have been saved to stable storage."""
    m = Message(
        type=MessageType.MsgStorageAppendResp,
        to=r.id,
        from_=LOCAL_APPEND_THREAD,
        # Dropped after term change, see below.
        term=r.term,
    )
    if r.raft_log.has_next_or_in_progress_unstable_ents():
        # If the raft log has unstable entries, attach the last index and term of the
        # append to the response message. This (index, term) tuple will be handed back and
        # consulted when the stability of those log entries is signaled to the unstable.
        # If the (index, term) match the unstable log by the time the response is received
        # (unstable.stableTo), the unstable log can be truncated.
        #
        # However, with just this logic, there would be an ABA problem[^1] that could lead
        # to the unstable log and the stable log getting out of sync temporarily and
        # leading to an inconsistent view. The problem is prevented by (1) the term being
        # attached to the message (dropped by the raft if stale, see Step), and (2) the
        # leader never appending at an index it already wrote to its own log in its term.
        #
        # [^1]: https://en.wikipedia.org/wiki/ABA_problem
        last = r.raft_log.last_entry_id()
        m.index = last.index
        m.log_term = last.term
    if not is_empty_snap(rd.snapshot):
        m.snapshot = rd.snapshot
    return m


def need_storage_apply_msg(rd: Ready) -> bool:
    return len(rd.committed_entries) > 0


def need_storage_apply_resp_msg(rd: Ready) -> bool:
    return need_storage_apply_msg(rd)


def new_storage_apply_msg(r: Raft, rd: Ready) -> Message:
    """Creates the message that should be sent to the local apply thread to instruct it to
    apply committed log entries. The message also carries a response that should be
    delivered after the rest of the message is processed. Used with AsyncStorageWrites."""
    ents = rd.committed_entries
    return Message(
        type=MessageType.MsgStorageApply,
        to=LOCAL_APPLY_THREAD,
        from_=r.id,
        term=0,  # committed entries don't apply under a specific term
        entries=ents,
        responses=[new_storage_apply_resp_msg(r, ents)],
    )


def new_storage_apply_resp_msg(r: Raft, ents: list[Entry]) -> Message:
    """Creates the message that should be returned to node after the committed entries in
    the current Ready (along with those in all prior Ready structs) have been applied to
    the local state machine."""
    return Message(
        type=MessageType.MsgStorageApplyResp,
        to=r.id,
        from_=LOCAL_APPLY_THREAD,
        term=0,  # committed entries don't apply under a specific term
        entries=ents,
    )


class RawNode:
    """A thread-unsafe Node. The methods of this struct correspond to the methods of Node
    and are described more fully there."""

    __slots__ = ("async_storage_writes", "prev_hard_st", "prev_soft_st", "raft", "steps_on_advance")

    def __init__(self, raft: Raft, async_storage_writes: bool) -> None:
        self.raft = raft
        self.async_storage_writes = async_storage_writes
        # Mutable fields.
        self.prev_soft_st: SoftState = raft.soft_state()
        self.prev_hard_st: HardState = raft.hard_state()
        self.steps_on_advance: list[Message] = []

    def tick(self) -> None:
        """Advances the internal logical clock by a single tick."""
        self.raft.tick()

    def tick_quiesced(self) -> None:
        """Advances the internal logical clock by a single tick without performing any
        other state machine processing. It allows the caller to avoid periodic heartbeats
        and elections when all of the peers in a Raft group are known to be at the same
        state. Expected usage is to periodically invoke Tick or TickQuiesced depending on
        whether the group is "active" or "quiesced".

        WARNING: Be very careful about using this method as it subverts the Raft state
        machine. You should probably be using Tick instead.

        DEPRECATED: This method will be removed in a future release."""
        self.raft.election_elapsed += 1

    def campaign(self) -> None:
        """Causes this RawNode to transition to candidate state."""
        self.raft.step(Message(type=MessageType.MsgHup))

    def propose(self, data: bytes) -> None:
        """Proposes data be appended to the raft log."""
        self.raft.step(
            Message(type=MessageType.MsgProp, from_=self.raft.id, entries=[Entry(data=data)])
        )

    def propose_conf_change(self, cc: ConfChangeI) -> None:
        """Proposes a config change. See (Node).ProposeConfChange for details."""
        self.raft.step(conf_change_to_msg(cc))

    def apply_conf_change(self, cc: ConfChangeI) -> ConfState:
        """Applies a config change to the local node. The app must call this when it
        applies a configuration change, except when it decides to reject the configuration
        change, in which case no call must take place."""
        return self.raft.apply_conf_change(cc.as_v2())

    def step(self, m: Message) -> None:
        """Advances the state machine using the given message."""
        # Ignore unexpected local messages receiving over network.
        if is_local_msg(m.type) and not is_local_msg_target(m.from_):
            raise ErrStepLocalMsg()
        if (
            is_response_msg(m.type)
            and not is_local_msg_target(m.from_)
            and m.from_ not in self.raft.trk.progress
        ):
            raise ErrStepPeerNotFound()
        self.raft.step(m)

    def ready(self) -> Ready:
        """The outstanding work that the application needs to handle. This includes
        appending and applying entries or a snapshot, updating the HardState, and sending
        messages. The returned Ready *must* be handled and subsequently passed back via
        advance()."""
        rd = self.ready_without_accept()
        self.accept_ready(rd)
        return rd

    def ready_without_accept(self) -> Ready:
        """Like ready, but does not call accept_ready, so the Ready is not consumed."""
        r = self.raft
        rd = Ready(
            entries=r.raft_log.next_unstable_ents(),
            committed_entries=r.raft_log.next_committed_ents(self.apply_unstable_entries()),
            messages=r.msgs,
        )
        soft_st = r.soft_state()
        if not soft_st.equal(self.prev_soft_st):
            # Allocate only when SoftState changes.
            rd.soft_state = soft_st
        hard_st = r.hard_state()
        if not is_hard_state_equal(hard_st, self.prev_hard_st):
            rd.hard_state = hard_st
        if r.raft_log.has_next_unstable_snapshot():
            rd.snapshot = r.raft_log.next_unstable_snapshot()
        if len(r.read_states) != 0:
            rd.read_states = r.read_states
        rd.must_sync = must_sync(r.hard_state(), self.prev_hard_st, len(rd.entries))
        if self.async_storage_writes:
            # If async storage writes are enabled, enqueue messages to local storage
            # threads, where applicable.
            if need_storage_append_msg(r, rd):
                rd.messages = [*rd.messages, new_storage_append_msg(r, rd)]
            if need_storage_apply_msg(rd):
                rd.messages = [*rd.messages, new_storage_apply_msg(r, rd)]
        else:
            # If async storage writes are disabled, immediately enqueue msgsAfterAppend to
            # be sent out. The Ready struct contract mandates that Messages cannot be sent
            # until after Entries are written to stable storage.
            extra = [m for m in r.msgs_after_append if m.to != r.id]
            if extra:
                rd.messages = rd.messages + extra
        return rd

    def accept_ready(self, rd: Ready) -> None:
        """Called when the consumer of the RawNode has decided to go ahead and handle a
        Ready. Nothing must alter the state of the RawNode between this call and the prior
        call to ready()."""
        r = self.raft
        if rd.soft_state is not None:
            self.prev_soft_st = rd.soft_state
        if rd.hard_state is not None and not is_empty_hard_state(rd.hard_state):
            self.prev_hard_st = rd.hard_state
        if len(rd.read_states) != 0:
            r.read_states = []
        if not self.async_storage_writes:
            if len(self.steps_on_advance) != 0:
                r.logger.panicf("two accepted Ready structs without call to Advance")
            for m in r.msgs_after_append:
                if m.to == r.id:
                    self.steps_on_advance.append(m)
            if need_storage_append_resp_msg(r, rd):
                self.steps_on_advance.append(new_storage_append_resp_msg(r, rd))
            if need_storage_apply_resp_msg(rd):
                self.steps_on_advance.append(new_storage_apply_resp_msg(r, rd.committed_entries))
        r.msgs = []
        r.msgs_after_append = []
        r.raft_log.accept_unstable()
        if len(rd.committed_entries) > 0:
            ents = rd.committed_entries
            index = ents[-1].index
            r.raft_log.accept_applying(index, ents_size(ents), self.apply_unstable_entries())

    def apply_unstable_entries(self) -> bool:
        """Whether entries are allowed to be applied once they are known to be committed but
        before they have been written locally to stable storage."""
        return not self.async_storage_writes

    def has_ready(self) -> bool:
        """Called when RawNode user need to check if any Ready pending."""
        # TODO(nvanbenschoten): order these cases in terms of cost and frequency.
        r = self.raft
        if not r.soft_state().equal(self.prev_soft_st):
            return True
        hard_st = r.hard_state()
        if not is_empty_hard_state(hard_st) and not is_hard_state_equal(hard_st, self.prev_hard_st):
            return True
        if r.raft_log.has_next_unstable_snapshot():
            return True
        if len(r.msgs) > 0 or len(r.msgs_after_append) > 0:
            return True
        if r.raft_log.has_next_unstable_ents() or r.raft_log.has_next_committed_ents(
            self.apply_unstable_entries()
        ):
            return True
        return len(r.read_states) != 0

    def advance(self, rd: Ready | None = None) -> None:
        """Notifies the RawNode that the application has applied and saved progress in the
        last Ready results. It must not be called when using AsyncStorageWrites; response
        messages from the local append and apply threads take its place."""
        r = self.raft
        if self.async_storage_writes:
            r.logger.panicf("Advance must not be called when using AsyncStorageWrites")
        steps = self.steps_on_advance
        self.steps_on_advance = []
        for m in steps:
            try:
                r.step(m)
            except RaftError:  # Go ignores the error
                pass

    def status(self) -> Status:
        """The current status of the given group. This allocates, see basic_status and
        with_progress for allocation-friendlier choices."""
        return get_status(self.raft)

    def basic_status(self) -> BasicStatus:
        """A BasicStatus. Notably this does not contain the Progress map; see with_progress
        for an allocation-free way to inspect it."""
        return get_basic_status(self.raft)

    def with_progress(self, visitor: Callable[[int, ProgressType, Progress], None]) -> None:
        """Invokes the supplied visitor for all tracked progresses (a copy of each, without
        Inflights: Go passes the Progress by value with Inflights nil)."""
        trk = self.raft.trk
        for pid in sorted(trk.progress):
            pr = trk.progress[pid]
            typ = ProgressTypeLearner if pr.is_learner else ProgressTypePeer
            p = pr.copy()
            p.inflights = Inflights(0, 0)
            visitor(pid, typ, p)

    # natsd: one field of BasicStatus or Status each, without building either. etcd's
    # BasicStatus is a cheap value in Go; here it allocates, and a replicated stream asks
    # "do I lead?" on every publish. Code outside raft/ reads the engine only through
    # these, status() and basic_status(), never through ``raft``.
    def is_leader(self) -> bool:
        """BasicStatus().RaftState == StateLeader."""
        return self.raft.state == StateType.StateLeader

    def leader(self) -> int:
        """BasicStatus().Lead: the leader this node knows of (0: none)."""
        return self.raft.lead

    def node_id(self) -> int:
        """BasicStatus().ID."""
        return self.raft.id

    def term(self) -> int:
        """BasicStatus().Term."""
        return self.raft.term

    def transferring(self) -> bool:
        """BasicStatus().LeadTransferee != 0: a leadership transfer is under way."""
        return self.raft.lead_transferee != NONE

    def proposable(self) -> bool:
        """Leader, and no transfer under way: a proposal would be taken."""
        r = self.raft
        return r.state == StateType.StateLeader and r.lead_transferee == NONE

    def committed(self) -> int:
        """Status().Commit."""
        return self.raft.raft_log.committed

    def last_index(self) -> int:
        """The index of the last entry of this node's log."""
        return self.raft.raft_log.last_index()

    def conf_change_pending(self) -> bool:
        """A configuration change is proposed and not applied yet (Raft takes one at a
        time)."""
        r = self.raft
        return r.pending_conf_index > r.raft_log.applied

    def committed_in_term(self) -> bool:
        """The last committed entry is of the current term: as leader, everything before
        its term is known committed (etcd's committedEntryInCurrentTerm)."""
        r = self.raft
        log_ = r.raft_log
        return log_.zero_term_on_out_of_bounds(log_.committed) == r.term

    def matches(self) -> dict[int, int]:
        """As leader, every tracked node's match index (Status().Progress[id].Match,
        without copying the progresses); empty on a follower."""
        r = self.raft
        if r.state != StateType.StateLeader:
            return {}
        return {pid: pr.match for pid, pr in r.trk.progress.items()}

    def tracked(self) -> list[int]:
        """The ids of the nodes this node's progress tracker holds (voters and learners of
        the configuration it has applied)."""
        return list(self.raft.trk.progress)

    def use_rand(self, rand: Callable[[int], int]) -> None:
        """natsd: draw election timeouts from ``rand`` (a seeded generator, for tests
        that replay), the current one included."""
        self.raft.rand = rand
        self.raft.reset_randomized_election_timeout()

    def lower_match(self, id: int, term: int, hint: int) -> None:
        """natsd: a follower whose log damage cut it short rejected an append of ``term``
        with ``hint``: as leader, stop believing it holds what it once acknowledged. etcd's
        leader never lowers a follower's match (a sound follower never loses acknowledged
        entries), so without this it would probe above the follower's log for ever. Lowered
        to at most the commit index, the match cannot make an uncommitted entry look
        replicated; the follower's rejects keep lowering it until the log matching check
        passes, and then appends flow from there."""
        r = self.raft
        if r.state != StateType.StateLeader or term != r.term:
            return
        pr = r.trk.progress.get(id)
        if pr is None or hint >= pr.match:
            return
        pr.match = min(hint, r.raft_log.committed)
        pr.become_probe()

    def report_unreachable(self, id: int) -> None:
        """Reports the given node is not reachable for the last send."""
        try:
            self.raft.step(Message(type=MessageType.MsgUnreachable, from_=id))
        except RaftError:
            pass

    def report_snapshot(self, id: int, status: SnapshotStatus) -> None:
        """Reports the status of the sent snapshot."""
        rej = status == SnapshotFailure
        try:
            self.raft.step(Message(type=MessageType.MsgSnapStatus, from_=id, reject=rej))
        except RaftError:
            pass

    def transfer_leader(self, transferee: int) -> None:
        """Tries to transfer leadership to the given transferee."""
        try:
            self.raft.step(Message(type=MessageType.MsgTransferLeader, from_=transferee))
        except RaftError:
            pass

    def forget_leader(self) -> None:
        """Forgets a follower's current leader, changing it to None. See
        (Node).ForgetLeader for details."""
        self.raft.step(Message(type=MessageType.MsgForgetLeader))

    def read_index(self, rctx: bytes) -> None:
        """Requests a read state. The read state will be set in ready. Read State has a read
        index. Once the application advances further than the read index, any linearizable
        read requests issued before the read request can be processed safely. The read state
        will have the same rctx attached."""
        try:
            self.raft.step(Message(type=MessageType.MsgReadIndex, entries=[Entry(data=rctx)]))
        except RaftError:
            pass

    def bootstrap(self, peers: list[Peer]) -> None:
        """Initializes the RawNode for first use by appending configuration changes for the
        supplied peers. This method returns an error if the Storage is nonempty.

        It is recommended that instead of calling this method, applications bootstrap their
        state manually by setting up a Storage that has a first index > 1 and which stores
        the desired ConfState as its InitialState."""
        if len(peers) == 0:
            raise RaftError("must provide at least one peer to Bootstrap")
        r = self.raft
        last_index = r.raft_log.storage.last_index()
        if last_index != 0:
            raise RaftError("can't bootstrap a nonempty Storage")
        # We've faked out initial entries above, but nothing has been persisted. Start with
        # an empty HardState (thus the first Ready will emit a HardState update for the app
        # to persist).
        self.prev_hard_st = _EMPTY_STATE
        # TODO(tbg): remove StartNode and give the application the tools needed to
        # initialize itself.
        r.become_follower(1, NONE)
        ents: list[Entry] = []
        for i, peer in enumerate(peers):
            cc = ConfChange(type=ConfChangeAddNode, node_id=peer.id, context=peer.context)
            _, data = marshal_conf_change(cc)
            ents.append(Entry(type=EntryType.EntryConfChange, term=1, index=i + 1, data=data))
        r.raft_log.append(ents)
        # Now apply them, mainly so that the application can call Campaign immediately
        # after StartNode in tests. Note that these nodes will be added to raft twice: here
        # and when the application's Ready loop calls ApplyConfChange. The calls to
        # addNode must come after all calls to raftLog.append so progress.next is set after
        # these bootstrapping entries (it is an error if we try to append these entries
        # since they have already been committed). We do not set raftLog.applied so the
        # application will be able to observe all conf changes via Ready.CommittedEntries.
        #
        # TODO(bdarnell): These entries are still unstable; do we need to preserve the
        # invariant that committed < unstable?
        r.raft_log.committed = len(ents)
        for peer in peers:
            r.apply_conf_change(ConfChange(node_id=peer.id, type=ConfChangeAddNode).as_v2())


def new_raw_node(config: Config) -> RawNode:
    """Instantiates a RawNode from the given configuration. See Bootstrap() for bootstrapping
    an initial state; this replaces the former 'peers' argument to this method (with
    identical behavior). However, It is recommended that instead of calling Bootstrap,
    applications bootstrap their state manually by setting up a Storage that has a first
    index > 1 and which stores the desired ConfState as its InitialState."""
    r = new_raft(config)
    return RawNode(r, config.async_storage_writes)
