"""Ports etcd-io/raft v3.7.0 raft.go's candidate and follower side (Apache-2.0):
stepCandidate, stepFollower and the handlers of the leader's messages (handleAppendEntries,
handleHeartbeat, handleSnapshot)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.raft.confchange import Changer, ConfChangeError
from natsd.raft.confchange import restore as confchange_restore
from natsd.raft.leader import bcast_append
from natsd.raft.log_unstable import EntryID, LogSlice
from natsd.raft.logger import RaftPanic
from natsd.raft.quorum import VoteLost, VoteWon
from natsd.raft.read_only import ReadOnlyLeaseBased, ReadState
from natsd.raft.state import (
    CAMPAIGN_ELECTION,
    CAMPAIGN_TRANSFER,
    ErrProposalDropped,
    StateFollower,
    StatePreCandidate,
    assert_conf_states_equivalent,
)
from natsd.raft.tracker import ProgressTracker
from natsd.raft.types import NONE, Message, MessageType, Snapshot

if TYPE_CHECKING:
    from natsd.raft.core import Raft

__all__ = [
    "handle_append_entries",
    "handle_heartbeat",
    "handle_snapshot",
    "log_slice_from_msg_app",
    "restore",
    "step_candidate",
    "step_follower",
]


def step_candidate(r: Raft, m: Message) -> None:
    """Shared by StateCandidate and StatePreCandidate; the difference is whether they
    respond to MsgVoteResp or MsgPreVoteResp."""
    if r.state == StatePreCandidate:
        my_vote_resp_type = MessageType.MsgPreVoteResp
    else:
        my_vote_resp_type = MessageType.MsgVoteResp
    t = m.type
    if t == MessageType.MsgProp:
        r.logger.infof("%x no leader at term %d; dropping proposal", r.id, r.term)
        raise ErrProposalDropped()
    if t == MessageType.MsgApp:
        r.become_follower(m.term, m.from_)  # always m.Term == r.Term
        handle_append_entries(r, m)
    elif t == MessageType.MsgHeartbeat:
        r.become_follower(m.term, m.from_)  # always m.Term == r.Term
        handle_heartbeat(r, m)
    elif t == MessageType.MsgSnap:
        r.become_follower(m.term, m.from_)  # always m.Term == r.Term
        handle_snapshot(r, m)
    elif t == my_vote_resp_type:
        gr, rj, res = r.poll(m.from_, t, not m.reject)
        r.logger.infof("%x has received %d %s votes and %d vote rejections", r.id, gr, t, rj)
        if res == VoteWon:
            if r.state == StatePreCandidate:
                r.campaign(CAMPAIGN_ELECTION)
            else:
                r.become_leader()
                bcast_append(r)
        elif res == VoteLost:
            # pb.MsgPreVoteResp contains future term of pre-candidate m.Term > r.Term; reuse
            # r.Term
            r.become_follower(r.term, NONE)
    elif t == MessageType.MsgTimeoutNow:
        r.logger.debugf(
            "%x [term %d state %v] ignored MsgTimeoutNow from %x", r.id, r.term, r.state, m.from_
        )


def step_follower(r: Raft, m: Message) -> None:
    t = m.type
    if t == MessageType.MsgProp:
        if r.lead == NONE:
            r.logger.infof("%x no leader at term %d; dropping proposal", r.id, r.term)
            raise ErrProposalDropped()
        if r.disable_proposal_forwarding:
            r.logger.infof(
                "%x not forwarding to leader %x at term %d; dropping proposal",
                r.id,
                r.lead,
                r.term,
            )
            raise ErrProposalDropped()
        m.to = r.lead
        r.send(m)
    elif t == MessageType.MsgApp:
        r.election_elapsed = 0
        r.lead = m.from_
        handle_append_entries(r, m)
    elif t == MessageType.MsgHeartbeat:
        r.election_elapsed = 0
        r.lead = m.from_
        handle_heartbeat(r, m)
    elif t == MessageType.MsgSnap:
        r.election_elapsed = 0
        r.lead = m.from_
        handle_snapshot(r, m)
    elif t == MessageType.MsgTransferLeader:
        if r.lead == NONE:
            r.logger.infof("%x no leader at term %d; dropping leader transfer msg", r.id, r.term)
            return
        m.to = r.lead
        r.send(m)
    elif t == MessageType.MsgForgetLeader:
        if r.read_only.option == ReadOnlyLeaseBased:
            r.logger.error("ignoring MsgForgetLeader due to ReadOnlyLeaseBased")
            return
        if r.lead != NONE:
            r.logger.infof("%x forgetting leader %x at term %d", r.id, r.lead, r.term)
            r.lead = NONE
    elif t == MessageType.MsgTimeoutNow:
        r.logger.infof(
            "%x [term %d] received MsgTimeoutNow from %x and starts an election to get leadership.",
            r.id,
            r.term,
            m.from_,
        )
        # Leadership transfers never use pre-vote even if r.preVote is true; we know we are
        # not recovering from a partition so there is no need for the extra round trip.
        r.hup(CAMPAIGN_TRANSFER)
    elif t == MessageType.MsgReadIndex:
        if r.lead == NONE:
            r.logger.infof("%x no leader at term %d; dropping index reading msg", r.id, r.term)
            return
        m.to = r.lead
        r.send(m)
    elif t == MessageType.MsgReadIndexResp:
        if len(m.entries) != 1:
            r.logger.errorf(
                "%x invalid format of MsgReadIndexResp from %x, entries count: %d",
                r.id,
                m.from_,
                len(m.entries),
            )
            return
        r.read_states.append(ReadState(m.index, m.entries[0].data))


def log_slice_from_msg_app(m: Message) -> LogSlice:
    """logSliceFromMsgApp extracts the appended LogSlice from a MsgApp message."""
    # TODO(pav-kv): consider also validating the logSlice here.
    return LogSlice(m.term, EntryID(m.log_term, m.index), m.entries)


def handle_append_entries(r: Raft, m: Message) -> None:
    # TODO(pav-kv): construct logSlice up the stack next to receiving the message, and
    # validate it before taking any action (e.g. bumping term).
    a = log_slice_from_msg_app(m)
    if a.prev.index < r.raft_log.committed:
        r.send(Message(to=m.from_, type=MessageType.MsgAppResp, index=r.raft_log.committed))
        return
    mlast_index, ok = r.raft_log.maybe_append(a, m.commit)
    if ok:
        r.send(Message(to=m.from_, type=MessageType.MsgAppResp, index=mlast_index))
        return
    r.logger.debugf(
        "%x [logterm: %d, index: %d] rejected MsgApp [logterm: %d, index: %d] from %x",
        r.id,
        r.raft_log.zero_term_on_out_of_bounds(m.index),
        m.index,
        m.log_term,
        m.index,
        m.from_,
    )
    # Our log does not match the leader's at index m.Index. Return a hint to the leader - a
    # guess on the maximal (index, term) at which the logs match. Do this by searching
    # through the follower's log for the maximum (index, term) pair with a term <= the
    # MsgApp's LogTerm and an index <= the MsgApp's Index. This can help skip all indexes
    # in the follower's uncommitted tail with terms greater than the MsgApp's LogTerm.
    #
    # See the other caller for findConflictByTerm (in stepLeader) for a much more detailed
    # explanation of this mechanism.

    # NB: m.Index >= raftLog.committed by now (see the early return above), and
    # raftLog.lastIndex() >= raftLog.committed by invariant, so min of the two is >=
    # raftLog.committed. Hence, the findConflictByTerm argument is within the valid
    # interval, which then will return a valid (index, term) pair with a non-zero term
    # (unless the log is empty). However, it is safe to send a zero LogTerm in this
    # response in any case, so we don't verify it here.
    hint_index = min(m.index, r.raft_log.last_index())
    hint_index, hint_term = r.raft_log.find_conflict_by_term(hint_index, m.log_term)
    r.send(
        Message(
            to=m.from_,
            type=MessageType.MsgAppResp,
            index=m.index,
            reject=True,
            reject_hint=hint_index,
            log_term=hint_term,
        )
    )


def handle_heartbeat(r: Raft, m: Message) -> None:
    r.raft_log.commit_to(m.commit)
    r.send(Message(to=m.from_, type=MessageType.MsgHeartbeatResp, context=m.context))


def handle_snapshot(r: Raft, m: Message) -> None:
    # MsgSnap messages should always carry a non-nil Snapshot, but err on the side of
    # safety and treat a nil Snapshot as a zero-valued Snapshot.
    s = m.snapshot if m.snapshot is not None else Snapshot()
    sindex, sterm = s.metadata.index, s.metadata.term
    if r.restore(s):
        r.logger.infof(
            "%x [commit: %d] restored snapshot [index: %d, term: %d]",
            r.id,
            r.raft_log.committed,
            sindex,
            sterm,
        )
        r.send(Message(to=m.from_, type=MessageType.MsgAppResp, index=r.raft_log.last_index()))
    else:
        r.logger.infof(
            "%x [commit: %d] ignored snapshot [index: %d, term: %d]",
            r.id,
            r.raft_log.committed,
            sindex,
            sterm,
        )
        r.send(Message(to=m.from_, type=MessageType.MsgAppResp, index=r.raft_log.committed))


def restore(r: Raft, s: Snapshot) -> bool:
    """Recovers the state machine from a snapshot. It restores the log and the
    configuration of state machine. If this method returns false, the snapshot was
    ignored, either because it was obsolete or because of an error."""
    if s.metadata.index <= r.raft_log.committed:
        return False
    if r.state != StateFollower:
        # This is defense-in-depth: if the leader somehow ended up applying a snapshot,
        # it could move into a new term without moving into a follower state. This
        # should never fire, but if it did, we'd have prevented damage by returning
        # early, so log only a loud warning.
        #
        # At the time of writing, the instance is guaranteed to be in follower state
        # when this method is called.
        r.logger.warningf("%x attempted to restore snapshot as leader; should never happen", r.id)
        r.become_follower(r.term + 1, NONE)
        return False
    # More defense-in-depth: throw away snapshot if recipient is not in the config. This
    # shouldn't ever happen (at the time of writing) but lots of code here and there
    # assumes that r.id is in the progress tracker.
    cs = s.metadata.conf_state
    found = r.id in cs.voters or r.id in cs.learners or r.id in cs.voters_outgoing
    if not found:
        r.logger.warningf(
            "%x attempted to restore snapshot but it is not in the ConfState %v; "
            "should never happen",
            r.id,
            cs.go_string(),
        )
        return False
    # Now go ahead and actually restore.
    id = EntryID(s.metadata.term, s.metadata.index)
    if r.raft_log.match_term(id):
        # TODO(pav-kv): can print %+v of the id, but it will change the format.
        last = r.raft_log.last_entry_id()
        r.logger.infof(
            "%x [commit: %d, lastindex: %d, lastterm: %d] fast-forwarded commit to "
            "snapshot [index: %d, term: %d]",
            r.id,
            r.raft_log.committed,
            last.index,
            last.term,
            id.index,
            id.term,
        )
        r.raft_log.commit_to(s.metadata.index)
        return False
    r.raft_log.restore(s)
    # Reset the configuration and add the (potentially updated) peers in anew.
    r.trk = ProgressTracker(r.trk.max_inflight, r.trk.max_inflight_bytes)
    try:
        cfg, trk = confchange_restore(Changer(r.trk, r.raft_log.last_index()), cs)
    except ConfChangeError as err:
        # This should never happen. Either there's a bug in our config change handling
        # or the client corrupted the conf change.
        raise RaftPanic(f"unable to restore config {cs.go_string()}: {err}") from err
    assert_conf_states_equivalent(r.logger, cs, r.switch_to_config(cfg, trk))
    last = r.raft_log.last_entry_id()
    r.logger.infof(
        "%x [commit: %d, lastindex: %d, lastterm: %d] restored snapshot [index: %d, term: %d]",
        r.id,
        r.raft_log.committed,
        last.index,
        last.term,
        id.index,
        id.term,
    )
    return True
