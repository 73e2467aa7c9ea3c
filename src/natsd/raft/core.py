"""Ports etcd-io/raft v3.7.0 raft.go (Apache-2.0): the raft struct (``Raft``) with its role
transitions, ticks, the term checks and dispatch of ``step``, and configuration changes.
The rest of raft.go, by concept: ``natsd.raft.config`` (Config), ``natsd.raft.election``
(hup, campaign, poll, answering votes and lower-term messages), ``natsd.raft.leader``
(stepLeader and the leader's replication) and ``natsd.raft.follower`` (stepCandidate,
stepFollower, the handlers of the leader's messages and restore).

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

from natsd.raft import election
from natsd.raft.codec import ents_size, marshal_conf_change
from natsd.raft.confchange import Changer, ConfChangeError
from natsd.raft.confchange import restore as confchange_restore
from natsd.raft.config import Config, ConfigError
from natsd.raft.describe import (
    LOCAL_APPEND_THREAD,
    LOCAL_APPLY_THREAD,
)
from natsd.raft.follower import restore, step_candidate, step_follower
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
from natsd.raft.logger import Logger, RaftPanic
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
    assert_conf_states_equivalent,
)
from natsd.raft.tracker import Config as TrackerConfig
from natsd.raft.tracker import Inflights, Progress, ProgressTracker
from natsd.raft.tracker import StateProbe as ProgressStateProbe
from natsd.raft.types import (
    NONE,
    ConfChangeI,
    ConfChangeV2,
    ConfState,
    Entry,
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
    "ConfigError",
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


# globalRand: crypto/rand in Go; the randomness only spreads the election timeouts.
_GLOBAL_RAND: Final = random.Random()


def global_rand_intn(n: int) -> int:
    """globalRand.Intn: a random int in [0, n)."""
    return _GLOBAL_RAND.randrange(n)


def conf_change_to_msg(c: ConfChangeI | None) -> Message:
    """confChangeToMsg (node.go): a MsgProp carrying the conf change (None: leave joint)."""
    typ, data = marshal_conf_change(c)
    return Message(type=MessageType.MsgProp, entries=[Entry(type=typ, data=data)])


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
        election.hup(self, t)

    def has_unapplied_conf_changes(self) -> bool:
        return election.has_unapplied_conf_changes(self)

    def campaign(self, t: str) -> None:
        """Transitions the raft instance to candidate state. This must only be called after
        verifying that this is a legitimate transition."""
        election.campaign(self, t)

    def poll(self, id: int, t: MessageType, v: bool) -> tuple[int, int, VoteResult]:
        return election.poll(self, id, t, v)

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
            election.step_lower_term(self, m)
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
            election.step_vote(self, m)
        else:
            self.step_func(self, m)

    def restore(self, s: Snapshot) -> bool:
        """Recovers the state machine from a snapshot (follower.restore)."""
        return restore(self, s)

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
