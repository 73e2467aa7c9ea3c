"""Ports etcd-io/raft v3.7.0 raft.go (Apache-2.0): Config and the raft struct (``Raft``) with
its role transitions, ticks, the term checks and dispatch of ``step``, elections and
configuration changes. The per-role step functions are in ``natsd.raft.leader`` (stepLeader
and the leader's replication) and ``natsd.raft.follower`` (stepCandidate, stepFollower and
the handlers of the leader's messages).

Go's errors are raised: ``step`` raises ErrProposalDropped where Go returns it; Go's panics
are RaftPanic (through the logger) or propagate. Go's ``r.step`` field (the role's step
function) is ``step_func`` here (``step`` is Go's ``Step``); ``tick`` is a field holding the
role's tick method as in Go. The election timeout's randomness is ``Raft.rand`` (Go's
globalRand.Intn), a callable that tests and the simulator replace for determinism.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from natsd.raft.codec import ents_size, marshal_conf_change
from natsd.raft.confchange import Changer, ConfChangeError
from natsd.raft.confchange import restore as confchange_restore
from natsd.raft.describe import (
    LOCAL_APPEND_THREAD,
    LOCAL_APPLY_THREAD,
    is_local_msg_target,
    vote_resp_msg_type,
)
from natsd.raft.follower import step_candidate, step_follower
from natsd.raft.leader import (
    bcast_append,
    bcast_heartbeat,
    bcast_heartbeat_with_ctx,
    maybe_send_append,
    send_append,
    send_heartbeat,
    send_timeout_now,
    step_leader,
)
from natsd.raft.log import NO_LIMIT, RaftLog, new_log_with_size, payloads_size
from natsd.raft.log_unstable import EntryID
from natsd.raft.logger import Logger, RaftPanic, get_logger
from natsd.raft.quorum import VoteResult
from natsd.raft.read_only import (
    ReadOnly,
    ReadOnlyLeaseBased,
    ReadOnlyOption,
    ReadOnlySafe,
    ReadState,
)
from natsd.raft.state import (
    CAMPAIGN_ELECTION,
    CAMPAIGN_PRE_ELECTION,
    CAMPAIGN_TRANSFER,
    ErrProposalDropped,
    ErrStepLocalMsg,
    ErrStepPeerNotFound,
    RaftError,
    SoftState,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
    StateType,
)
from natsd.raft.storage import Storage
from natsd.raft.tracker import Config as TrackerConfig
from natsd.raft.tracker import Inflights, Progress, ProgressTracker
from natsd.raft.tracker import StateProbe as ProgressStateProbe
from natsd.raft.types import (
    NONE,
    ConfChangeI,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    is_empty_hard_state,
)

__all__ = [
    "CAMPAIGN_ELECTION",
    "CAMPAIGN_PRE_ELECTION",
    "CAMPAIGN_TRANSFER",
    "LOCAL_APPEND_THREAD",
    "LOCAL_APPLY_THREAD",
    "NONE",
    "NO_LIMIT",
    "Config",
    "ErrProposalDropped",
    "ErrStepLocalMsg",
    "ErrStepPeerNotFound",
    "Raft",
    "RaftError",
    "ReadOnlyLeaseBased",
    "ReadOnlyOption",
    "ReadOnlySafe",
    "ReadState",
    "SoftState",
    "StateCandidate",
    "StateFollower",
    "StateLeader",
    "StatePreCandidate",
    "StateType",
    "conf_change_to_msg",
    "new_raft",
]

_VOTE_MSGS: Final = frozenset(
    (
        MessageType.MsgVote,
        MessageType.MsgVoteResp,
        MessageType.MsgPreVote,
        MessageType.MsgPreVoteResp,
    )
)
_AFTER_APPEND_MSGS: Final = frozenset(
    (MessageType.MsgAppResp, MessageType.MsgVoteResp, MessageType.MsgPreVoteResp)
)


class ConfigError(ValueError):
    """Config.validate's error (Go returns it; newRaft panics with its text)."""


# globalRand: crypto/rand in Go; the randomness only spreads the election timeouts.
_GLOBAL_RAND: Final = random.Random()


def global_rand_intn(n: int) -> int:
    """globalRand.Intn: a random int in [0, n)."""
    return _GLOBAL_RAND.randrange(n)


class Config:
    """The parameters to start a raft."""

    __slots__ = (
        "applied",
        "async_storage_writes",
        "check_quorum",
        "disable_conf_change_validation",
        "disable_proposal_forwarding",
        "election_tick",
        "heartbeat_tick",
        "id",
        "logger",
        "max_committed_size_per_ready",
        "max_inflight_bytes",
        "max_inflight_msgs",
        "max_size_per_msg",
        "max_uncommitted_entries_size",
        "pre_vote",
        "read_only_option",
        "step_down_on_removal",
        "storage",
    )

    def __init__(
        self,
        id: int = 0,
        election_tick: int = 0,
        heartbeat_tick: int = 0,
        storage: Storage | None = None,
        applied: int = 0,
        async_storage_writes: bool = False,
        max_size_per_msg: int = 0,
        max_committed_size_per_ready: int = 0,
        max_uncommitted_entries_size: int = 0,
        max_inflight_msgs: int = 0,
        max_inflight_bytes: int = 0,
        check_quorum: bool = False,
        pre_vote: bool = False,
        read_only_option: ReadOnlyOption = ReadOnlyOption.ReadOnlySafe,
        logger: Logger | None = None,
        disable_proposal_forwarding: bool = False,
        disable_conf_change_validation: bool = False,
        step_down_on_removal: bool = False,
    ) -> None:
        # ID is the identity of the local raft. ID cannot be 0.
        self.id = id
        # ElectionTick is the number of Node.Tick invocations that must pass between
        # elections. It must be greater than HeartbeatTick (10 * HeartbeatTick suggested).
        self.election_tick = election_tick
        # HeartbeatTick is the number of Node.Tick invocations that must pass between
        # heartbeats.
        self.heartbeat_tick = heartbeat_tick
        # Storage is the storage for raft: raft reads the persisted entries and states out
        # of it when it needs them, and the previous state and configuration on restart.
        self.storage = storage
        # Applied is the last applied index. It should only be set when restarting raft.
        self.applied = applied
        # AsyncStorageWrites: write to local storage through MsgStorageAppend and
        # MsgStorageApply messages (to LOCAL_APPEND_THREAD / LOCAL_APPLY_THREAD) instead of
        # the Ready/Advance interface.
        self.async_storage_writes = async_storage_writes
        # MaxSizePerMsg limits the max byte size of each append message (NO_LIMIT for
        # unlimited, 0 for at most one entry per message).
        self.max_size_per_msg = max_size_per_msg
        # MaxCommittedSizePerReady limits the size of the committed entries which can be
        # applying at the same time.
        self.max_committed_size_per_ready = max_committed_size_per_ready
        # MaxUncommittedEntriesSize limits the aggregate byte size of the uncommitted
        # entries that may be appended to a leader's log (0 for no limit).
        self.max_uncommitted_entries_size = max_uncommitted_entries_size
        # MaxInflightMsgs limits the max number of in-flight append messages during
        # optimistic replication phase.
        self.max_inflight_msgs = max_inflight_msgs
        # MaxInflightBytes limits the number of in-flight bytes in append messages (0:
        # ignored).
        self.max_inflight_bytes = max_inflight_bytes
        # CheckQuorum: the leader steps down when quorum is not active for an
        # electionTimeout.
        self.check_quorum = check_quorum
        # PreVote enables the Pre-Vote algorithm described in raft thesis section 9.6.
        self.pre_vote = pre_vote
        # ReadOnlyOption specifies how the read only request is processed (CheckQuorum MUST
        # be enabled for ReadOnlyLeaseBased).
        self.read_only_option = read_only_option
        # Logger is the logger used for raft log.
        self.logger = logger
        # DisableProposalForwarding: followers drop proposals rather than forwarding them.
        self.disable_proposal_forwarding = disable_proposal_forwarding
        # DisableConfChangeValidation turns off propose-time verification of configuration
        # changes against the currently active configuration.
        self.disable_conf_change_validation = disable_conf_change_validation
        # StepDownOnRemoval makes the leader step down when it is removed from the group or
        # demoted to a learner.
        self.step_down_on_removal = step_down_on_removal

    def validate(self) -> None:
        """Checks the config and fills in the defaults; raises ConfigError."""
        if self.id == NONE:
            raise ConfigError("cannot use none as id")
        if is_local_msg_target(self.id):
            raise ConfigError("cannot use local target as id")
        if self.heartbeat_tick <= 0:
            raise ConfigError("heartbeat tick must be greater than 0")
        if self.election_tick <= self.heartbeat_tick:
            raise ConfigError("election tick must be greater than heartbeat tick")
        if self.storage is None:
            raise ConfigError("storage cannot be nil")
        if self.max_uncommitted_entries_size == 0:
            self.max_uncommitted_entries_size = NO_LIMIT
        # default MaxCommittedSizePerReady to MaxSizePerMsg because they were previously
        # the same parameter.
        if self.max_committed_size_per_ready == 0:
            self.max_committed_size_per_ready = self.max_size_per_msg
        if self.max_inflight_msgs <= 0:
            raise ConfigError("max inflight messages must be greater than 0")
        if self.max_inflight_bytes == 0:
            self.max_inflight_bytes = NO_LIMIT
        elif self.max_inflight_bytes < self.max_size_per_msg:
            raise ConfigError("max inflight bytes must be >= max message size")
        if self.logger is None:
            self.logger = get_logger()
        if self.read_only_option == ReadOnlyLeaseBased and not self.check_quorum:
            raise ConfigError(
                "CheckQuorum must be enabled when ReadOnlyOption is ReadOnlyLeaseBased"
            )


class _Break(Exception):
    """errBreak: stops a log scan early."""


def conf_change_to_msg(c: ConfChangeI | None) -> Message:
    """confChangeToMsg (node.go): a MsgProp carrying the conf change (None: leave joint)."""
    typ, data = marshal_conf_change(c)
    return Message(type=MessageType.MsgProp, entries=[Entry(type=typ, data=data)])


def assert_conf_states_equivalent(logger: Logger, cs1: ConfState, cs2: ConfState) -> None:
    err = cs1.equivalent(cs2)
    if err is None:
        return
    logger.panic(err)


class Raft:
    """Go's raft struct."""

    __slots__ = (
        "check_quorum",
        "disable_conf_change_validation",
        "disable_proposal_forwarding",
        "election_elapsed",
        "election_timeout",
        "heartbeat_elapsed",
        "heartbeat_timeout",
        "id",
        "is_learner",
        "lead",
        "lead_transferee",
        "logger",
        "max_msg_size",
        "max_uncommitted_size",
        "msgs",
        "msgs_after_append",
        "pending_conf_index",
        "pending_read_index_messages",
        "pre_vote",
        "raft_log",
        "rand",
        "randomized_election_timeout",
        "read_only",
        "read_states",
        "state",
        "step_down_on_removal",
        "step_func",
        "term",
        "tick",
        "trk",
        "uncommitted_size",
        "vote",
    )

    def __init__(self, c: Config, raft_log: RaftLog, logger: Logger) -> None:
        # Use new_raft: it validates the config and restores the state from storage.
        self.id = c.id
        self.term = 0
        self.vote = 0
        self.read_states: list[ReadState] = []
        # the log
        self.raft_log = raft_log
        self.max_msg_size = c.max_size_per_msg
        self.max_uncommitted_size = c.max_uncommitted_entries_size
        self.trk = ProgressTracker(c.max_inflight_msgs, c.max_inflight_bytes)
        self.state = StateType.StateFollower
        # is_learner is true if the local raft node is a learner.
        self.is_learner = False
        # msgs contains the list of messages that should be sent out immediately to other
        # nodes. Messages in this list must target other nodes.
        self.msgs: list[Message] = []
        # msgs_after_append contains the list of messages that should be sent after the
        # accumulated unstable state (e.g. term, vote, []entry, and snapshot) has been
        # persisted to durable storage. This includes waiting for any unstable state that
        # is already in the process of being persisted (i.e. has already been handed out in
        # a prior Ready struct) to complete. Messages in this list may target other nodes
        # or may target this node; they have the type MsgAppResp, MsgVoteResp, or
        # MsgPreVoteResp. See the comment in send for details.
        self.msgs_after_append: list[Message] = []
        # the leader id
        self.lead = NONE
        # lead_transferee is id of the leader transfer target when its value is not zero.
        # Follow the procedure defined in raft thesis 3.10.
        self.lead_transferee = NONE
        # Only one conf change may be pending (in the log, but not yet applied) at a time.
        # This is enforced via pending_conf_index, which is set to a value >= the log index
        # of the latest pending configuration change (if any). Config changes are only
        # allowed to be proposed if the leader's applied index is greater than this value.
        self.pending_conf_index = 0
        # disable_conf_change_validation is Config.disable_conf_change_validation, see
        # there for details.
        self.disable_conf_change_validation = c.disable_conf_change_validation
        # an estimate of the size of the uncommitted tail of the Raft log. Used to prevent
        # unbounded log growth. Only maintained by the leader. Reset on term changes.
        self.uncommitted_size = 0
        self.read_only = ReadOnly(c.read_only_option)
        # number of ticks since it reached last election_timeout when it is leader or
        # candidate. number of ticks since it reached last election_timeout or received a
        # valid message from current leader when it is a follower.
        self.election_elapsed = 0
        # number of ticks since it reached last heartbeat_timeout. only leader keeps
        # heartbeat_elapsed.
        self.heartbeat_elapsed = 0
        self.check_quorum = c.check_quorum
        self.pre_vote = c.pre_vote
        self.heartbeat_timeout = c.heartbeat_tick
        self.election_timeout = c.election_tick
        # randomized_election_timeout is a random number between [election_timeout,
        # 2 * election_timeout - 1]. It gets reset when raft changes its state to follower
        # or candidate.
        self.randomized_election_timeout = 0
        self.disable_proposal_forwarding = c.disable_proposal_forwarding
        self.step_down_on_removal = c.step_down_on_removal
        # Go's globalRand.Intn: replaceable for deterministic tests and simulations.
        self.rand: Callable[[int], int] = global_rand_intn
        self.tick: Callable[[], None] = self.tick_election
        self.step_func: Callable[[Raft, Message], None] = step_follower
        self.logger = logger
        # pending_read_index_messages is used to store messages of type MsgReadIndex that
        # can't be answered as new leader didn't committed any log in current term. Those
        # will be handled as fast as first log is committed in current term.
        self.pending_read_index_messages: list[Message] = []

    def has_leader(self) -> bool:
        return self.lead != NONE

    def soft_state(self) -> SoftState:
        return SoftState(self.lead, self.state)

    def hard_state(self) -> HardState:
        return HardState(self.term, self.vote, self.raft_log.committed)

    def send(self, m: Message) -> None:
        """Schedules persisting state to a stable storage and AFTER that sending the message
        (as part of next Ready message processing)."""
        if m.from_ == NONE:
            m.from_ = self.id
        t = m.type
        if t in _VOTE_MSGS:
            if m.term == 0:
                # All {pre-,}campaign messages need to have the term set when sending.
                # - MsgVote: m.Term is the term the node is campaigning for, non-zero as we
                #   increment the term when campaigning.
                # - MsgVoteResp: m.Term is the new r.Term if the MsgVote was granted,
                #   non-zero for the same reason MsgVote is
                # - MsgPreVote: m.Term is the term the node will campaign, non-zero as we
                #   use m.Term to indicate the next term we'll be campaigning for
                # - MsgPreVoteResp: m.Term is the term received in the original MsgPreVote
                #   if the pre-vote was granted, non-zero for the same reasons MsgPreVote is
                self.logger.panicf("term should be set when sending %s", t)
        else:
            if m.term != 0:
                self.logger.panicf("term should not be set when sending %s (was %d)", t, m.term)
            # do not attach term to MsgProp, MsgReadIndex: proposals are a way to forward
            # to the leader and should be treated as local message. MsgReadIndex is also
            # forwarded to leader.
            if t != MessageType.MsgProp and t != MessageType.MsgReadIndex:
                m.term = self.term
        if t in _AFTER_APPEND_MSGS:
            # If async storage writes are enabled, messages added to the msgs slice are
            # allowed to be sent out before unstable state (e.g. log entry writes and
            # election votes) have been durably synced to the local disk. Certain messages
            # cannot be sent until the unstable state they depend on has been durably
            # persisted: MsgAppResp (acknowledges appended entries), MsgVoteResp and
            # MsgPreVoteResp (grant votes tied to the persisted term/vote). They are put in
            # msgs_after_append, sent only after the current unstable state is persisted.
            self.msgs_after_append.append(m)
        else:
            if m.to == self.id:
                self.logger.panicf("message should not be self-addressed when sending %s", t)
            self.msgs.append(m)

    # The leader's replication (leader.py), as methods for the callers outside it.

    def send_append(self, to: int) -> None:
        send_append(self, to)

    def maybe_send_append(self, to: int, send_if_empty: bool) -> bool:
        return maybe_send_append(self, to, send_if_empty)

    def send_heartbeat(self, to: int, ctx: bytes) -> None:
        send_heartbeat(self, to, ctx)

    def bcast_append(self) -> None:
        bcast_append(self)

    def bcast_heartbeat(self) -> None:
        bcast_heartbeat(self)

    def bcast_heartbeat_with_ctx(self, ctx: bytes) -> None:
        bcast_heartbeat_with_ctx(self, ctx)

    def send_timeout_now(self, to: int) -> None:
        send_timeout_now(self, to)

    def applied_to(self, index: int, size: int) -> None:
        old_applied = self.raft_log.applied
        new_applied = max(index, old_applied)
        self.raft_log.applied_to(new_applied, size)
        if (
            self.trk.config.auto_leave
            and new_applied >= self.pending_conf_index
            and self.state == StateLeader
        ):
            # If the current (and most recent, at least for this leader's term)
            # configuration should be auto-left, initiate that now. We use a nil Data which
            # unmarshals into an empty ConfChangeV2 and has the benefit that appendEntry can
            # never refuse it based on its size (which registers as zero).
            m = conf_change_to_msg(None)
            # NB: this proposal can't be dropped due to size, but can be dropped if a
            # leadership transfer is in progress. We'll keep checking this condition on
            # each applied entry, so either the leadership transfer will succeed and the
            # new leader will leave the joint configuration, or the leadership transfer
            # will fail, and we will propose the config change on the next advance.
            try:
                self.step(m)
            except RaftError as err:
                self.logger.debugf(
                    "not initiating automatic transition out of joint configuration %s: %v",
                    self.trk.config,
                    err,
                )
            else:
                self.logger.infof(
                    "initiating automatic transition out of joint configuration %s",
                    self.trk.config,
                )

    def applied_snap(self, snap: Snapshot) -> None:
        index = snap.metadata.index
        self.raft_log.stable_snap_to(index)
        self.applied_to(index, 0)

    def maybe_commit(self) -> bool:
        """Attempts to advance the commit index. Returns true if the commit index changed
        (in which case the caller should call bcast_append). This can only be called in
        StateLeader."""
        return self.raft_log.maybe_commit(EntryID(self.term, self.trk.committed()))

    def reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.reset_randomized_election_timeout()
        self.abort_leader_transfer()
        self.trk.reset_votes()
        last_index = self.raft_log.last_index()
        trk = self.trk
        for pid in sorted(trk.progress):
            pr = trk.progress[pid]
            # Go replaces the Progress value in place (*pr = Progress{...}): keep the
            # object, reset its fields.
            pr.match = last_index if pid == self.id else 0
            pr.next = last_index + 1
            pr._sent_commit = 0
            pr.state = ProgressStateProbe
            pr.pending_snapshot = 0
            pr.recent_active = False
            pr.msg_app_flow_paused = False
            pr.inflights = Inflights(trk.max_inflight, trk.max_inflight_bytes)
        self.pending_conf_index = 0
        self.uncommitted_size = 0
        self.read_only = ReadOnly(self.read_only.option)

    def append_entry(self, es: list[Entry]) -> bool:
        li = self.raft_log.last_index()
        cloned: list[Entry] = []
        for i, e in enumerate(es):
            cloned.append(Entry(self.term, li + 1 + i, e.type, e.data))
        # Track the size of this uncommitted proposal.
        if not self.increase_uncommitted_size(cloned):
            self.logger.warningf(
                "%x appending new entries to log would exceed uncommitted entry size limit; "
                "dropping proposal",
                self.id,
            )
            # Drop the proposal.
            return False
        # use latest "last" index after truncate/append
        li = self.raft_log.append(cloned)
        # The leader needs to self-ack the entries just appended once they have been
        # durably persisted (since it doesn't send an MsgApp to itself). This response
        # message will be added to msgs_after_append and delivered back to this node after
        # these entries have been written to stable storage. When handled, this is roughly
        # equivalent to:
        #
        #  r.trk.Progress[r.id].MaybeUpdate(e.Index)
        #  if r.maybeCommit() {
        #  	r.bcastAppend()
        #  }
        self.send(Message(to=self.id, type=MessageType.MsgAppResp, index=li))
        return True

    def tick_election(self) -> None:
        """Run by followers and candidates after r.election_timeout."""
        self.election_elapsed += 1
        if self.promotable() and self.past_election_timeout():
            self.election_elapsed = 0
            try:
                self.step(Message(from_=self.id, type=MessageType.MsgHup))
            except RaftError as err:
                self.logger.debugf("error occurred during election: %v", err)

    def tick_heartbeat(self) -> None:
        """Run by leaders to send a MsgBeat after r.heartbeat_timeout."""
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum:
                try:
                    self.step(Message(from_=self.id, type=MessageType.MsgCheckQuorum))
                except RaftError as err:
                    self.logger.debugf("error occurred during checking sending heartbeat: %v", err)
            # If current leader cannot transfer leadership in election_timeout, it becomes
            # leader again.
            if self.state == StateLeader and self.lead_transferee != NONE:
                self.abort_leader_transfer()
        if self.state != StateLeader:
            return
        if self.heartbeat_elapsed >= self.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            try:
                self.step(Message(from_=self.id, type=MessageType.MsgBeat))
            except RaftError as err:
                self.logger.debugf("error occurred during checking sending heartbeat: %v", err)

    def become_follower(self, term: int, lead: int) -> None:
        self.step_func = step_follower
        self.reset(term)
        self.tick = self.tick_election
        self.lead = lead
        self.state = StateFollower
        self.logger.infof("%x became follower at term %d", self.id, self.term)

    def become_candidate(self) -> None:
        # TODO(xiangli) remove the panic when the raft implementation is stable
        if self.state == StateLeader:
            raise RaftPanic("invalid transition [leader -> candidate]")
        self.step_func = step_candidate
        self.reset(self.term + 1)
        self.tick = self.tick_election
        self.vote = self.id
        self.state = StateCandidate
        self.logger.infof("%x became candidate at term %d", self.id, self.term)

    def become_pre_candidate(self) -> None:
        # TODO(xiangli) remove the panic when the raft implementation is stable
        if self.state == StateLeader:
            raise RaftPanic("invalid transition [leader -> pre-candidate]")
        # Becoming a pre-candidate changes our step functions and state, but doesn't change
        # anything else. In particular it does not increase r.term or change r.vote.
        self.step_func = step_candidate
        self.trk.reset_votes()
        self.tick = self.tick_election
        self.lead = NONE
        self.state = StatePreCandidate
        self.logger.infof("%x became pre-candidate at term %d", self.id, self.term)

    def become_leader(self) -> None:
        # TODO(xiangli) remove the panic when the raft implementation is stable
        if self.state == StateFollower:
            raise RaftPanic("invalid transition [follower -> leader]")
        self.step_func = step_leader
        self.reset(self.term)
        self.tick = self.tick_heartbeat
        self.lead = self.id
        self.state = StateLeader
        # Followers enter replicate mode when they've been successfully probed (perhaps
        # after having received a snapshot as a result). The leader is trivially in this
        # state. Note that r.reset() has initialized this progress with the last index
        # already.
        pr = self.trk.progress[self.id]
        pr.become_replicate()
        # The leader always has RecentActive == true; MsgCheckQuorum makes sure to preserve
        # this.
        pr.recent_active = True
        # Conservatively set the pending_conf_index to the last index in the log. There may
        # or may not be a pending config change, but it's safe to delay any future
        # proposals until we commit all our pending log entries, and scanning the entire
        # tail of the log could be expensive.
        self.pending_conf_index = self.raft_log.last_index()
        if not self.append_entry([Entry()]):
            # This won't happen because we just called reset() above.
            self.logger.panic("empty entry was dropped")
        # The payloads of the empty entry are zero: the uncommitted size is unchanged.
        self.logger.infof("%x became leader at term %d", self.id, self.term)

    def hup(self, t: str) -> None:
        if self.state == StateLeader:
            self.logger.debugf("%x ignoring MsgHup because already leader", self.id)
            return
        if not self.promotable():
            self.logger.warningf("%x is unpromotable and can not campaign", self.id)
            return
        if self.has_unapplied_conf_changes():
            self.logger.warningf(
                "%x cannot campaign at term %d since there are still pending configuration "
                "changes to apply",
                self.id,
                self.term,
            )
            return
        self.logger.infof("%x is starting a new election at term %d", self.id, self.term)
        self.campaign(t)

    def has_unapplied_conf_changes(self) -> bool:
        log = self.raft_log
        if log.applied >= log.committed:  # in fact applied == committed
            return False
        found = [False]
        # Scan all unapplied committed entries to find a config change. Paginate the scan,
        # to avoid a potentially unlimited memory spike.
        lo, hi = log.applied + 1, log.committed + 1

        def visit(ents: list[Entry]) -> None:
            for e in ents:
                if e.type == EntryType.EntryConfChange or e.type == EntryType.EntryConfChangeV2:
                    found[0] = True
                    raise _Break()

        try:
            log.scan(lo, hi, log.max_applying_ents_size, visit)
        except _Break:
            pass
        except RaftPanic:
            raise
        except Exception as err:
            self.logger.panicf("error scanning unapplied entries [%d, %d): %v", lo, hi, err)
        return found[0]

    def campaign(self, t: str) -> None:
        """Transitions the raft instance to candidate state. This must only be called after
        verifying that this is a legitimate transition."""
        if not self.promotable():
            # This path should not be hit (callers are supposed to check), but better safe
            # than sorry.
            self.logger.warningf("%x is unpromotable; campaign() should have been called", self.id)
        if t == CAMPAIGN_PRE_ELECTION:
            self.become_pre_candidate()
            vote_msg = MessageType.MsgPreVote
            # PreVote RPCs are sent for the next term before we've incremented r.term.
            term = self.term + 1
        else:
            self.become_candidate()
            vote_msg = MessageType.MsgVote
            term = self.term
        for pid in sorted(self.trk.config.voters.ids()):
            if pid == self.id:
                # The candidate votes for itself and should account for this self vote
                # once the vote has been durably persisted (since it doesn't send a MsgVote
                # to itself). This response message will be added to msgs_after_append and
                # delivered back to this node after the vote has been written to stable
                # storage.
                self.send(Message(to=pid, term=term, type=vote_resp_msg_type(vote_msg)))
                continue
            # TODO(pav-kv): it should be ok to simply print %+v for the last_entry_id.
            last = self.raft_log.last_entry_id()
            self.logger.infof(
                "%x [logterm: %d, index: %d] sent %s request to %x at term %d",
                self.id,
                last.term,
                last.index,
                vote_msg,
                pid,
                self.term,
            )
            ctx = t.encode() if t == CAMPAIGN_TRANSFER else b""
            self.send(
                Message(
                    to=pid,
                    term=term,
                    type=vote_msg,
                    index=last.index,
                    log_term=last.term,
                    context=ctx,
                )
            )

    def poll(self, id: int, t: MessageType, v: bool) -> tuple[int, int, VoteResult]:
        if v:
            self.logger.infof("%x received %s from %x at term %d", self.id, t, id, self.term)
        else:
            self.logger.infof(
                "%x received %s rejection from %x at term %d", self.id, t, id, self.term
            )
        self.trk.record_vote(id, v)
        return self.trk.tally_votes()

    def step(self, m: Message) -> None:
        """Go's Step: the entrance of handling a message (raises ErrProposalDropped etc.
        where Go returns an error)."""
        # Handle the message term, which may result in our stepping down to a follower.
        if m.term == 0:
            # local message
            pass
        elif m.term > self.term:
            if m.type == MessageType.MsgVote or m.type == MessageType.MsgPreVote:
                force = m.context == CAMPAIGN_TRANSFER.encode()
                in_lease = (
                    self.check_quorum
                    and self.lead != NONE
                    and self.election_elapsed < self.election_timeout
                )
                if not force and in_lease:
                    # If a server receives a RequestVote request within the minimum election
                    # timeout of hearing from a current leader, it does not update its term
                    # or grant its vote.
                    last = self.raft_log.last_entry_id()
                    # TODO(pav-kv): it should be ok to simply print the %+v of the last ID.
                    self.logger.infof(
                        "%x [logterm: %d, index: %d, vote: %x] ignored %s from %x "
                        "[logterm: %d, index: %d] at term %d: lease is not expired "
                        "(remaining ticks: %d)",
                        self.id,
                        last.term,
                        last.index,
                        self.vote,
                        m.type,
                        m.from_,
                        m.log_term,
                        m.index,
                        self.term,
                        self.election_timeout - self.election_elapsed,
                    )
                    return
            if m.type == MessageType.MsgPreVote:
                # Never change our term in response to a PreVote
                pass
            elif m.type == MessageType.MsgPreVoteResp and not m.reject:
                # We send pre-vote requests with a term in our future. If the pre-vote is
                # granted, we will increment our term when we get a quorum. If it is not,
                # the term comes from the node that rejected our vote so we should become a
                # follower at the new term.
                pass
            else:
                self.logger.infof(
                    "%x [term: %d] received a %s message with higher term from %x [term: %d]",
                    self.id,
                    self.term,
                    m.type,
                    m.from_,
                    m.term,
                )
                if (
                    m.type == MessageType.MsgApp
                    or m.type == MessageType.MsgHeartbeat
                    or m.type == MessageType.MsgSnap
                ):
                    self.become_follower(m.term, m.from_)
                else:
                    self.become_follower(m.term, NONE)
        elif m.term < self.term:
            self._step_lower_term(m)
            return

        t = m.type
        if t == MessageType.MsgHup:
            if self.pre_vote:
                self.hup(CAMPAIGN_PRE_ELECTION)
            else:
                self.hup(CAMPAIGN_ELECTION)
        elif t == MessageType.MsgStorageAppendResp:
            if m.index != 0:
                self.raft_log.stable_to(EntryID(m.log_term, m.index))
            if m.snapshot is not None:
                self.applied_snap(m.snapshot)
        elif t == MessageType.MsgStorageApplyResp:
            if len(m.entries) > 0:
                index = m.entries[-1].index
                self.applied_to(index, ents_size(m.entries))
                self.reduce_uncommitted_size(payloads_size(m.entries))
        elif t == MessageType.MsgVote or t == MessageType.MsgPreVote:
            self._step_vote(m)
        else:
            self.step_func(self, m)

    def _step_lower_term(self, m: Message) -> None:
        # The part of Step for a message with a term lower than ours.
        if (self.check_quorum or self.pre_vote) and (
            m.type == MessageType.MsgHeartbeat or m.type == MessageType.MsgApp
        ):
            # We have received messages from a leader at a lower term. It is possible that
            # these messages were simply delayed in the network, but this could also mean
            # that this node has advanced its term number during a network partition, and
            # it is now unable to either win an election or to rejoin the majority on the
            # old term. If checkQuorum is false, this will be handled by incrementing term
            # numbers in response to MsgVote with a higher term, but if checkQuorum is true
            # we may not advance the term on MsgVote and must generate other messages to
            # advance the term. The net result of these two features is to minimize the
            # disruption caused by nodes that have been removed from the cluster's
            # configuration: a removed node will send MsgVotes (or MsgPreVotes) which will
            # be ignored, but it will not receive MsgApp or MsgHeartbeat, so it will not
            # create disruptive term increases, by notifying leader of this node's
            # activeness. The above comments also true for Pre-Vote.
            #
            # When follower gets isolated, it soon starts an election ending up with a
            # higher term than leader, although it won't receive enough votes to win the
            # election. When it regains connectivity, this response with "pb.MsgAppResp" of
            # higher term would force leader to step down. However, this disruption is
            # inevitable to free this stuck node with fresh election. This can be prevented
            # with Pre-Vote phase.
            self.send(Message(to=m.from_, type=MessageType.MsgAppResp))
        elif m.type == MessageType.MsgPreVote:
            # Before Pre-Vote enable, there may have candidate with higher term, but less
            # log. After update to Pre-Vote, the cluster may deadlock if we drop messages
            # with a lower term.
            last = self.raft_log.last_entry_id()
            # TODO(pav-kv): it should be ok to simply print %+v of the last ID.
            self.logger.infof(
                "%x [logterm: %d, index: %d, vote: %x] rejected %s from %x "
                "[logterm: %d, index: %d] at term %d",
                self.id,
                last.term,
                last.index,
                self.vote,
                m.type,
                m.from_,
                m.log_term,
                m.index,
                self.term,
            )
            self.send(
                Message(to=m.from_, term=self.term, type=MessageType.MsgPreVoteResp, reject=True)
            )
        elif m.type == MessageType.MsgStorageAppendResp:
            if m.index != 0:
                # Don't consider the appended log entries to be stable because they may have
                # been overwritten in the unstable log during a later term. See the comment
                # in newStorageAppendResp for more about this race.
                self.logger.infof(
                    "%x [term: %d] ignored entry appends from a %s message with lower term "
                    "[term: %d]",
                    self.id,
                    self.term,
                    m.type,
                    m.term,
                )
            if m.snapshot is not None:
                # Even if the snapshot applied under a different term, its application is
                # still valid. Snapshots carry committed (term-independent) state.
                self.applied_snap(m.snapshot)
        else:
            # ignore other cases
            self.logger.infof(
                "%x [term: %d] ignored a %s message with lower term from %x [term: %d]",
                self.id,
                self.term,
                m.type,
                m.from_,
                m.term,
            )

    def _step_vote(self, m: Message) -> None:
        # The MsgVote / MsgPreVote case of Step.
        # We can vote if this is a repeat of a vote we've already cast...
        can_vote = (
            self.vote == m.from_
            # ...we haven't voted and we don't think there's a leader yet in this term...
            or (self.vote == NONE and self.lead == NONE)
            # ...or this is a PreVote for a future term...
            or (m.type == MessageType.MsgPreVote and m.term > self.term)
        )
        # ...and we believe the candidate is up to date.
        last_id = self.raft_log.last_entry_id()
        cand_last_id = EntryID(m.log_term, m.index)
        if can_vote and self.raft_log.is_up_to_date(cand_last_id):
            # Note: it turns out that that learners must be allowed to cast votes. This
            # seems counter- intuitive but is necessary in the situation in which a learner
            # has been promoted (i.e. is now a voter) but has not learned about this yet.
            # For example, consider a group in which id=1 is a learner and id=2 and id=3 are
            # voters. A configuration change promoting 1 can be committed on the quorum `{2,3}`
            # without the config change being appended to the learner's log. If the leader
            # (say 2) fails, there are de facto two voters remaining. Only 3 can win an
            # election (due to its log containing all committed entries), but to do so it
            # will need 1 to vote. But 1 considers itself a learner and will continue to do
            # so until 3 has stepped up as leader, replicates the conf change to 1, and 1
            # applies it. Ultimately, by receiving a request to vote, the learner realizes
            # that the candidate believes it to be a voter, and that it should act
            # accordingly. The candidate's config may be stale, too; but in that case it
            # won't win the election, at least in the absence of the bug discussed in:
            # https://github.com/etcd-io/etcd/issues/7625#issuecomment-488798263.
            self.logger.infof(
                "%x [logterm: %d, index: %d, vote: %x] cast %s for %x [logterm: %d, index: %d] "
                "at term %d",
                self.id,
                last_id.term,
                last_id.index,
                self.vote,
                m.type,
                m.from_,
                cand_last_id.term,
                cand_last_id.index,
                self.term,
            )
            # When responding to Msg{Pre,}Vote messages we include the term from the
            # message, not the local term. To see why, consider the case where a single
            # node was previously partitioned away and it's local term is now out of date.
            # If we include the local term (recall that for pre-votes we don't update the
            # local term), the (pre-)campaigning node on the other end will proceed to
            # ignore the message (it ignores all out of date messages). The term in the
            # original message and current local term are the same in the case of regular
            # votes, but different for pre-votes.
            self.send(Message(to=m.from_, term=m.term, type=vote_resp_msg_type(m.type)))
            if m.type == MessageType.MsgVote:
                # Only record real votes.
                self.election_elapsed = 0
                self.vote = m.from_
        else:
            self.logger.infof(
                "%x [logterm: %d, index: %d, vote: %x] rejected %s from %x "
                "[logterm: %d, index: %d] at term %d",
                self.id,
                last_id.term,
                last_id.index,
                self.vote,
                m.type,
                m.from_,
                cand_last_id.term,
                cand_last_id.index,
                self.term,
            )
            self.send(
                Message(to=m.from_, term=self.term, type=vote_resp_msg_type(m.type), reject=True)
            )

    def restore(self, s: Snapshot) -> bool:
        """Recovers the state machine from a snapshot. It restores the log and the
        configuration of state machine. If this method returns false, the snapshot was
        ignored, either because it was obsolete or because of an error."""
        if s.metadata.index <= self.raft_log.committed:
            return False
        if self.state != StateFollower:
            # This is defense-in-depth: if the leader somehow ended up applying a snapshot,
            # it could move into a new term without moving into a follower state. This
            # should never fire, but if it did, we'd have prevented damage by returning
            # early, so log only a loud warning.
            #
            # At the time of writing, the instance is guaranteed to be in follower state
            # when this method is called.
            self.logger.warningf(
                "%x attempted to restore snapshot as leader; should never happen", self.id
            )
            self.become_follower(self.term + 1, NONE)
            return False
        # More defense-in-depth: throw away snapshot if recipient is not in the config. This
        # shouldn't ever happen (at the time of writing) but lots of code here and there
        # assumes that r.id is in the progress tracker.
        cs = s.metadata.conf_state
        found = self.id in cs.voters or self.id in cs.learners or self.id in cs.voters_outgoing
        if not found:
            self.logger.warningf(
                "%x attempted to restore snapshot but it is not in the ConfState %v; "
                "should never happen",
                self.id,
                cs.go_string(),
            )
            return False
        # Now go ahead and actually restore.
        id = EntryID(s.metadata.term, s.metadata.index)
        if self.raft_log.match_term(id):
            # TODO(pav-kv): can print %+v of the id, but it will change the format.
            last = self.raft_log.last_entry_id()
            self.logger.infof(
                "%x [commit: %d, lastindex: %d, lastterm: %d] fast-forwarded commit to "
                "snapshot [index: %d, term: %d]",
                self.id,
                self.raft_log.committed,
                last.index,
                last.term,
                id.index,
                id.term,
            )
            self.raft_log.commit_to(s.metadata.index)
            return False
        self.raft_log.restore(s)
        # Reset the configuration and add the (potentially updated) peers in anew.
        self.trk = ProgressTracker(self.trk.max_inflight, self.trk.max_inflight_bytes)
        try:
            cfg, trk = confchange_restore(Changer(self.trk, self.raft_log.last_index()), cs)
        except ConfChangeError as err:
            # This should never happen. Either there's a bug in our config change handling
            # or the client corrupted the conf change.
            raise RaftPanic(f"unable to restore config {cs.go_string()}: {err}") from err
        assert_conf_states_equivalent(self.logger, cs, self.switch_to_config(cfg, trk))
        last = self.raft_log.last_entry_id()
        self.logger.infof(
            "%x [commit: %d, lastindex: %d, lastterm: %d] restored snapshot [index: %d, term: %d]",
            self.id,
            self.raft_log.committed,
            last.index,
            last.term,
            id.index,
            id.term,
        )
        return True

    def promotable(self) -> bool:
        """Whether the state machine can be promoted to leader, which is true when its own
        id is in progress list."""
        pr = self.trk.progress.get(self.id)
        return (
            pr is not None
            and not pr.is_learner
            and not self.raft_log.has_next_or_in_progress_snapshot()
        )

    def apply_conf_change(self, cc: ConfChangeV2) -> ConfState:
        changer = Changer(self.trk, self.raft_log.last_index())
        try:
            if cc.leave_joint():
                cfg, trk = changer.leave_joint()
            else:
                auto_leave, ok = cc.enter_joint()
                if ok:
                    cfg, trk = changer.enter_joint(auto_leave, cc.changes)
                else:
                    cfg, trk = changer.simple(cc.changes)
        except ConfChangeError as err:
            # TODO(tbg): return the error to the caller.
            raise RaftPanic(str(err)) from err
        return self.switch_to_config(cfg, trk)

    def switch_to_config(self, cfg: TrackerConfig, trk: dict[int, Progress]) -> ConfState:
        """Reconfigures this node to use the provided configuration. It updates the
        in-memory state and, when necessary, carries out additional actions such as
        reacting to the removal of nodes or changed quorum requirements.

        The inputs usually result from restoring a ConfState or applying a ConfChange."""
        self.trk.config = cfg
        self.trk.progress = trk
        self.logger.infof("%x switched to configuration %s", self.id, self.trk.config)
        cs = self.trk.conf_state()
        pr = trk.get(self.id)
        # Update whether the node itself is a learner, resetting to false when the node is
        # removed.
        self.is_learner = pr is not None and pr.is_learner
        if (pr is None or self.is_learner) and self.state == StateLeader:
            # This node is leader and was removed or demoted, step down if requested.
            #
            # We prevent demotions at the time writing but hypothetically we handle them
            # the same way as removing the leader.
            #
            # TODO(tbg): ask follower with largest Match to TimeoutNow (to avoid
            # interruption). This might still drop some proposals but it's better than
            # nothing.
            if self.step_down_on_removal:
                self.become_follower(self.term, NONE)
            return cs
        # The remaining steps only make sense if this node is the leader and there are
        # other nodes.
        if self.state != StateLeader or len(cs.voters) == 0:
            return cs
        if self.maybe_commit():
            # If the configuration change means that more entries are committed now,
            # broadcast/append to everyone in the updated config.
            bcast_append(self)
        else:
            # Otherwise, still probe the newly added replicas; there's no reason to let them
            # wait out a heartbeat interval (or the next incoming proposal).
            for pid in sorted(self.trk.progress):
                if pid == self.id:
                    continue
                maybe_send_append(self, pid, False)
        # If the leadTransferee was removed or demoted, abort the leadership transfer.
        if self.lead_transferee != 0 and self.lead_transferee not in self.trk.config.voters.ids():
            self.abort_leader_transfer()
        return cs

    def load_state(self, state: HardState) -> None:
        if state.commit < self.raft_log.committed or state.commit > self.raft_log.last_index():
            self.logger.panicf(
                "%x state.commit %d is out of range [%d, %d]",
                self.id,
                state.commit,
                self.raft_log.committed,
                self.raft_log.last_index(),
            )
        self.raft_log.committed = state.commit
        self.term = state.term
        self.vote = state.vote

    def past_election_timeout(self) -> bool:
        """Whether the current election_elapsed is greater than or equal to the randomized
        election timeout in [electiontimeout, 2 * electiontimeout - 1]."""
        return self.election_elapsed >= self.randomized_election_timeout

    def reset_randomized_election_timeout(self) -> None:
        self.randomized_election_timeout = self.election_timeout + self.rand(self.election_timeout)

    def abort_leader_transfer(self) -> None:
        self.lead_transferee = NONE

    def committed_entry_in_current_term(self) -> bool:
        """Whether the leader has committed an entry in its term."""
        # NB: r.term is never 0 on a leader, so if zeroTermOnOutOfBounds returns 0, we won't
        # confuse it with r.term.
        return self.raft_log.zero_term_on_out_of_bounds(self.raft_log.committed) == self.term

    def response_to_read_index_req(self, req: Message, read_index: int) -> Message:
        """Constructs a response for `req`. If `req` comes from the peer itself, a blank
        value will be returned."""
        if req.from_ == NONE or req.from_ == self.id:
            self.read_states.append(ReadState(read_index, req.entries[0].data))
            return Message()
        return Message(
            type=MessageType.MsgReadIndexResp, to=req.from_, index=read_index, entries=req.entries
        )

    def increase_uncommitted_size(self, ents: list[Entry]) -> bool:
        """Computes the size of the proposed entries and determines whether they would push
        leader over its max_uncommitted_size limit. If the new entries would exceed the
        limit, the method returns false. If not, the increase in uncommitted entry size is
        recorded and the method returns true.

        Empty payloads are never refused. This is used both for appending an empty entry at
        a new leader's term, as well as leaving a joint configuration."""
        s = payloads_size(ents)
        if (
            self.uncommitted_size > 0
            and s > 0
            and self.uncommitted_size + s > self.max_uncommitted_size
        ):
            # If the uncommitted tail of the Raft log is empty, allow any size proposal.
            # Otherwise, limit the size of the uncommitted tail of the log and drop any
            # proposal that would push the size over the limit. Note the added requirement
            # s>0 which is used to make sure that appending single empty entries to the log
            # always succeeds, used both for replicating a new leader's initial empty entry,
            # and for auto-leaving joint configurations.
            return False
        self.uncommitted_size += s
        return True

    def reduce_uncommitted_size(self, s: int) -> None:
        """Accounts for the newly committed entries by decreasing the uncommitted entry size
        limit."""
        if s > self.uncommitted_size:
            # uncommittedSize may underestimate the size of the uncommitted Raft log tail
            # but will never overestimate it. Saturate at 0 instead of allowing overflow.
            self.uncommitted_size = 0
        else:
            self.uncommitted_size -= s


def new_raft(c: Config) -> Raft:
    try:
        c.validate()
    except ConfigError as err:
        raise RaftPanic(str(err)) from err
    storage = c.storage
    logger = c.logger
    assert storage is not None and logger is not None  # validate() saw to both
    raftlog = new_log_with_size(storage, logger, c.max_committed_size_per_ready)
    hs, cs = storage.initial_state()
    r = Raft(c, raftlog, logger)
    last_id = r.raft_log.last_entry_id()
    try:
        cfg, trk = confchange_restore(Changer(r.trk, last_id.index), cs)
    except ConfChangeError as err:
        raise RaftPanic(str(err)) from err
    assert_conf_states_equivalent(r.logger, cs, r.switch_to_config(cfg, trk))
    if hs is not None and not is_empty_hard_state(hs):
        r.load_state(hs)
    if c.applied > 0:
        raftlog.applied_to(c.applied, 0)
    r.become_follower(r.term, NONE)
    nodes_strs = [format(n, "x") for n in r.trk.voter_nodes()]
    r.logger.infof(
        "newRaft %x [peers: [%s], term: %d, commit: %d, applied: %d, lastindex: %d, lastterm: %d]",
        r.id,
        ",".join(nodes_strs),
        r.term,
        r.raft_log.committed,
        r.raft_log.applied,
        last_id.index,
        last_id.term,
    )
    return r
