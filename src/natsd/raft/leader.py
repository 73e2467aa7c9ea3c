"""Ports etcd-io/raft v3.7.0 raft.go's leader side (Apache-2.0): stepLeader, the replication
to followers (sendAppend, maybeSendAppend, maybeSendSnapshot, sendHeartbeat, bcastAppend,
bcastHeartbeat), the handling of MsgAppResp, MsgHeartbeatResp, MsgSnapStatus,
MsgUnreachable, MsgTransferLeader and MsgReadIndex, and the read index responses.

Go's methods on the raft struct are functions of the Raft here (``send_append(r, to)`` for
``r.sendAppend(to)``); ``Raft`` has methods forwarding to the ones other modules call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.raft.codec import unmarshal_conf_change, unmarshal_conf_change_v2
from natsd.raft.describe import describe_conf_change
from natsd.raft.log import payloads_size
from natsd.raft.logger import RaftPanic
from natsd.raft.read_only import ReadOnlyLeaseBased, ReadOnlySafe
from natsd.raft.state import ErrProposalDropped
from natsd.raft.storage import ErrSnapshotTemporarilyUnavailable, StorageError
from natsd.raft.tracker import Progress, StateProbe, StateReplicate, StateSnapshot
from natsd.raft.types import (
    NONE,
    ConfChangeI,
    Entry,
    EntryType,
    Message,
    MessageType,
    is_empty_snap,
)

if TYPE_CHECKING:
    from natsd.raft.core import Raft

__all__ = [
    "bcast_append",
    "bcast_heartbeat",
    "bcast_heartbeat_with_ctx",
    "maybe_send_append",
    "maybe_send_snapshot",
    "release_pending_read_index_messages",
    "send_append",
    "send_heartbeat",
    "send_msg_read_index_response",
    "send_timeout_now",
    "step_leader",
]


def send_append(r: Raft, to: int) -> None:
    """Sends an append RPC with new entries (if any) and the current commit index to the
    given peer."""
    maybe_send_append(r, to, True)


def maybe_send_append(r: Raft, to: int, send_if_empty: bool) -> bool:
    """Sends an append RPC with new entries to the given peer, if necessary. Returns true if
    a message was sent. The send_if_empty argument controls whether messages with no entries
    will be sent ("empty" messages are useful to convey updated Commit indexes, but are
    undesirable when we're sending multiple messages in a batch).

    TODO(pav-kv): make invocation of maybeSendAppend stateless. The Progress struct contains
    all the state necessary for deciding whether to send a message."""
    pr = r.trk.progress[to]
    if pr.is_paused():
        return False
    prev_index = pr.next - 1
    log = r.raft_log
    try:
        prev_term = log.term(prev_index)
    except StorageError:
        # The log probably got truncated at >= pr.Next, so we can't catch up the follower
        # log anymore. Send a snapshot instead.
        return maybe_send_snapshot(r, to, pr)
    ents: list[Entry] = []
    err: StorageError | None = None
    if pr.state != StateReplicate or not pr.inflights.full():
        try:
            ents = log.entries(pr.next, r.max_msg_size)
        except StorageError as e:
            err = e
    if len(ents) == 0 and not send_if_empty:
        return False
    # TODO(pav-kv): move this check up to where err is returned.
    if err is not None:  # send a snapshot if we failed to get the entries
        return maybe_send_snapshot(r, to, pr)
    # Send the actual MsgApp otherwise, and update the progress accordingly.
    r.send(
        Message(
            to=to,
            type=MessageType.MsgApp,
            index=prev_index,
            log_term=prev_term,
            entries=ents,
            commit=log.committed,
        )
    )
    pr.sent_entries(len(ents), payloads_size(ents))
    pr.sent_commit(log.committed)
    return True


def maybe_send_snapshot(r: Raft, to: int, pr: Progress) -> bool:
    """Fetches a snapshot from Storage, and sends it to the given node. Returns true iff the
    snapshot message has been emitted successfully."""
    if not pr.recent_active:
        r.logger.debugf("ignore sending snapshot to %x since it is not recently active", to)
        return False
    try:
        snapshot = r.raft_log.snapshot()
    except ErrSnapshotTemporarilyUnavailable:
        r.logger.debugf(
            "%x failed to send snapshot to %x because snapshot is temporarily unavailable",
            r.id,
            to,
        )
        return False
    if is_empty_snap(snapshot):
        raise RaftPanic("need non-empty snapshot")
    sindex, sterm = snapshot.metadata.index, snapshot.metadata.term
    r.logger.debugf(
        "%x [firstindex: %d, commit: %d] sent snapshot[index: %d, term: %d] to %x [%s]",
        r.id,
        r.raft_log.first_index(),
        r.raft_log.committed,
        sindex,
        sterm,
        to,
        pr,
    )
    pr.become_snapshot(sindex)
    r.logger.debugf("%x paused sending replication messages to %x [%s]", r.id, to, pr)
    r.send(Message(to=to, type=MessageType.MsgSnap, snapshot=snapshot))
    return True


def send_heartbeat(r: Raft, to: int, ctx: bytes) -> None:
    """Sends a heartbeat RPC to the given peer."""
    pr = r.trk.progress[to]
    # Attach the commit as min(to.matched, r.committed). When the leader sends out
    # heartbeat message, the receiver(follower) might not be matched with the leader or it
    # might not have all the committed entries. The leader MUST NOT forward the follower's
    # commit to an unmatched index.
    commit = min(pr.match, r.raft_log.committed)
    r.send(Message(to=to, type=MessageType.MsgHeartbeat, commit=commit, context=ctx))
    pr.sent_commit(commit)


def bcast_append(r: Raft) -> None:
    """Sends RPC, with entries to all peers that are not up-to-date according to the
    progress recorded in r.trk."""
    progress = r.trk.progress
    for pid in sorted(progress):
        if pid == r.id:
            continue
        send_append(r, pid)


def bcast_heartbeat(r: Raft) -> None:
    """Sends RPC, without entries to all the peers."""
    bcast_heartbeat_with_ctx(r, r.read_only.heartbeat_ctx())


def bcast_heartbeat_with_ctx(r: Raft, ctx: bytes) -> None:
    progress = r.trk.progress
    for pid in sorted(progress):
        if pid == r.id:
            continue
        send_heartbeat(r, pid, ctx)


def send_timeout_now(r: Raft, to: int) -> None:
    r.send(Message(to=to, type=MessageType.MsgTimeoutNow))


def _decode_conf_change(e: Entry) -> ConfChangeI | None:
    if e.type == EntryType.EntryConfChange:
        return unmarshal_conf_change(e.data)
    if e.type == EntryType.EntryConfChangeV2:
        return unmarshal_conf_change_v2(e.data)
    return None


def _step_leader_prop(r: Raft, m: Message) -> None:
    if len(m.entries) == 0:
        r.logger.panicf("%x stepped empty MsgProp", r.id)
    if r.id not in r.trk.progress:
        # If we are not currently a member of the range (i.e. this node was removed from
        # the configuration while serving as leader), drop any new proposals.
        raise ErrProposalDropped()
    if r.lead_transferee != NONE:
        r.logger.debugf(
            "%x [term %d] transfer leadership to %x is in progress; dropping proposal",
            r.id,
            r.term,
            r.lead_transferee,
        )
        raise ErrProposalDropped()
    ents = m.entries
    for i in range(len(ents)):
        cc = _decode_conf_change(ents[i])
        if cc is None:
            continue
        already_pending = r.pending_conf_index > r.raft_log.applied
        already_joint = len(r.trk.config.voters.outgoing) > 0
        wants_leave_joint = len(cc.as_v2().changes) == 0
        failed_check = ""
        if already_pending:
            failed_check = (
                f"possible unapplied conf change at index {r.pending_conf_index} "
                f"(applied to {r.raft_log.applied})"
            )
        elif already_joint and not wants_leave_joint:
            failed_check = "must transition out of joint config first"
        elif not already_joint and wants_leave_joint:
            failed_check = "not in joint state; refusing empty conf change"
        if failed_check != "" and not r.disable_conf_change_validation:
            r.logger.infof(
                "%x ignoring conf change %s at config %s: %s",
                r.id,
                describe_conf_change(cc),
                r.trk.config,
                failed_check,
            )
            ents[i] = Entry(type=EntryType.EntryNormal)
        else:
            r.pending_conf_index = r.raft_log.last_index() + i + 1
    if not r.append_entry(ents):
        raise ErrProposalDropped()
    bcast_append(r)


def step_leader(r: Raft, m: Message) -> None:
    # These message types do not require any progress for m.From.
    t = m.type
    if t == MessageType.MsgBeat:
        bcast_heartbeat(r)
        return
    if t == MessageType.MsgCheckQuorum:
        if not r.trk.quorum_active():
            r.logger.warningf("%x stepped down to follower since quorum is not active", r.id)
            r.become_follower(r.term, NONE)
        # Mark everyone (but ourselves) as inactive in preparation for the next
        # CheckQuorum.
        for pid, p in r.trk.progress.items():
            if pid != r.id:
                p.recent_active = False
        return
    if t == MessageType.MsgProp:
        _step_leader_prop(r, m)
        return
    if t == MessageType.MsgReadIndex:
        # only one voting member (the leader) in the cluster
        if r.trk.is_singleton():
            resp = r.response_to_read_index_req(m, r.raft_log.committed)
            if resp.to != NONE:
                r.send(resp)
            return
        # Postpone read only request when this leader has not committed any log entry at
        # its term.
        if not r.committed_entry_in_current_term():
            r.pending_read_index_messages.append(m)
            return
        send_msg_read_index_response(r, m)
        return
    if t == MessageType.MsgForgetLeader:
        return  # noop on leader

    # All other message types require a progress for m.From (pr).
    pr = r.trk.progress.get(m.from_)
    if pr is None:
        r.logger.debugf("%x no progress available for %x", r.id, m.from_)
        return
    if t == MessageType.MsgAppResp:
        _handle_app_resp(r, m, pr)
    elif t == MessageType.MsgHeartbeatResp:
        _handle_heartbeat_resp(r, m, pr)
    elif t == MessageType.MsgSnapStatus:
        if pr.state != StateSnapshot:
            return
        if not m.reject:
            pr.become_probe()
            r.logger.debugf(
                "%x snapshot succeeded, resumed sending replication messages to %x [%s]",
                r.id,
                m.from_,
                pr,
            )
        else:
            # NB: the order here matters or we'll be probing erroneously from the snapshot
            # index, but the snapshot never applied.
            pr.pending_snapshot = 0
            pr.become_probe()
            r.logger.debugf(
                "%x snapshot failed, resumed sending replication messages to %x [%s]",
                r.id,
                m.from_,
                pr,
            )
        # If snapshot finish, wait for the MsgAppResp from the remote node before sending
        # out the next MsgApp. If snapshot failure, wait for a heartbeat interval before
        # next try
        pr.msg_app_flow_paused = True
    elif t == MessageType.MsgUnreachable:
        # During optimistic replication, if the remote becomes unreachable, there is huge
        # probability that a MsgApp is lost.
        if pr.state == StateReplicate:
            pr.become_probe()
        r.logger.debugf(
            "%x failed to send message to %x because it is unreachable [%s]", r.id, m.from_, pr
        )
    elif t == MessageType.MsgTransferLeader:
        _handle_transfer_leader(r, m, pr)


def _handle_app_resp(r: Raft, m: Message, pr: Progress) -> None:
    # NB: this code path is also hit from (*raft).advance, where the leader steps an
    # MsgAppResp to acknowledge the appended entries in the last Ready.
    pr.recent_active = True
    if m.reject:
        # RejectHint is the suggested next base entry for appending (i.e. we try to append
        # entry RejectHint+1 next), and LogTerm is the term that the follower has at index
        # RejectHint. Older versions of this library did not populate LogTerm for
        # rejections and it is zero for followers with an empty log.
        #
        # Under normal circumstances, the leader's log is longer than the follower's and
        # the follower's log is a prefix of the leader's (i.e. there is no divergent
        # uncommitted suffix of the log on the follower). In that case, the first probe
        # reveals where the follower's log ends (RejectHint=follower's last index) and the
        # subsequent probe succeeds.
        #
        # However, when networks are partitioned or systems overloaded, large divergent
        # log tails can occur. The naive attempt, probing entry by entry in decreasing
        # order, will be the product of the length of the diverging tails and the network
        # round-trip latency, which can easily result in hours of time spent probing and
        # can even cause outright outages. The probes are thus optimized as described in
        # findConflictByTerm.
        r.logger.debugf(
            "%x received MsgAppResp(rejected, hint: (index %d, term %d)) from %x for index %d",
            r.id,
            m.reject_hint,
            m.log_term,
            m.from_,
            m.index,
        )
        next_probe_idx = m.reject_hint
        if m.log_term > 0:
            # If the follower has an uncommitted log tail, we would end up probing one by
            # one until we hit the common prefix. Use the follower's term at RejectHint to
            # skip straight to the last index of the leader's log with a term <= it.
            next_probe_idx, _ = r.raft_log.find_conflict_by_term(m.reject_hint, m.log_term)
        if pr.maybe_decr_to(m.index, next_probe_idx):
            r.logger.debugf("%x decreased progress of %x to [%s]", r.id, m.from_, pr)
            if pr.state == StateReplicate:
                pr.become_probe()
            send_append(r, m.from_)
        return
    # We want to update our tracking if the response updates our matched index or if the
    # response can move a probing peer back into StateReplicate (see
    # heartbeat_rep_app_resp_between.txt for an example of the latter case).
    # NB: the same does not make sense for StateSnapshot - if `m.Index` equals pr.Match we
    # know we don't m.Index+1 in our log, so moving back to replicating state is not
    # useful; besides pr.PendingSnapshot would prevent it.
    if pr.maybe_update(m.index) or (pr.match == m.index and pr.state == StateProbe):
        if pr.state == StateProbe:
            pr.become_replicate()
        elif pr.state == StateSnapshot and pr.match + 1 >= r.raft_log.first_index():
            # Note that we don't take into account PendingSnapshot to enter this branch. No
            # matter at which index a snapshot was actually applied, as long as this allows
            # catching up the follower from the log, we will accept it. This gives systems
            # more flexibility in how they implement snapshots; see the comments on
            # PendingSnapshot.
            r.logger.debugf(
                "%x recovered from needing snapshot, resumed sending replication messages "
                "to %x [%s]",
                r.id,
                m.from_,
                pr,
            )
            # Transition back to replicating state via probing state (which takes the
            # snapshot into account). If we didn't move to replicating state, that would
            # only happen with the next round of appends (but there may not be a next round
            # for a while, exposing an inconsistent RaftStatus).
            pr.become_probe()
            pr.become_replicate()
        elif pr.state == StateReplicate:
            pr.inflights.free_le(m.index)
        if r.maybe_commit():
            # committed index has progressed for the term, so it is safe to respond to
            # pending read index requests
            release_pending_read_index_messages(r)
            bcast_append(r)
        elif r.id != m.from_ and pr.can_bump_commit(r.raft_log.committed):
            # This node may be missing the latest commit index, so send it. NB: this
            # should not be necessary when the leader is not the one sending the
            # responses.
            send_append(r, m.from_)
        # We've updated flow control information above, which may allow us to send
        # multiple (size-limited) in-flight messages at once (such as when transitioning
        # from probe to replicate, or when freeTo() covers multiple messages). Send as many
        # messages as we can.
        if r.id != m.from_:
            while maybe_send_append(r, m.from_, False):
                pass
        # Transfer leadership is in progress.
        if m.from_ == r.lead_transferee and pr.match == r.raft_log.last_index():
            r.logger.infof("%x sent MsgTimeoutNow to %x after received MsgAppResp", r.id, m.from_)
            send_timeout_now(r, m.from_)


def _handle_heartbeat_resp(r: Raft, m: Message, pr: Progress) -> None:
    pr.recent_active = True
    pr.msg_app_flow_paused = False
    # NB: if the follower is paused (full Inflights), this will still send an empty append,
    # allowing it to recover from situations in which all the messages that filled up
    # Inflights in the first place were dropped. Note also that the outgoing heartbeat
    # already communicated the commit index.
    #
    # If the follower is fully caught up but also in StateProbe (as can happen if
    # ReportUnreachable was called), we also want to send an append (it will be empty) to
    # allow the follower to transition back to StateReplicate once it responds.
    #
    # Note that StateSnapshot typically satisfies pr.Match < lastIndex, but
    # `pr.Paused()` is always true for StateSnapshot, so sendAppend is a nop.
    if pr.match < r.raft_log.last_index() or pr.state == StateProbe:
        send_append(r, m.from_)
    if r.read_only.option != ReadOnlySafe or len(m.context) == 0:
        return
    r.read_only.recv_ack(m.from_, m.context)
    for rs in r.read_only.maybe_advance(r.trk.config.voters):
        resp = r.response_to_read_index_req(rs.req, rs.index)
        if resp.to != NONE:
            r.send(resp)


def _handle_transfer_leader(r: Raft, m: Message, pr: Progress) -> None:
    if pr.is_learner:
        r.logger.debugf("%x is learner. Ignored transferring leadership", r.id)
        return
    lead_transferee = m.from_
    last_lead_transferee = r.lead_transferee
    if last_lead_transferee != NONE:
        if last_lead_transferee == lead_transferee:
            r.logger.infof(
                "%x [term %d] transfer leadership to %x is in progress, ignores request to "
                "same node %x",
                r.id,
                r.term,
                lead_transferee,
                lead_transferee,
            )
            return
        r.abort_leader_transfer()
        r.logger.infof(
            "%x [term %d] abort previous transferring leadership to %x",
            r.id,
            r.term,
            last_lead_transferee,
        )
    if lead_transferee == r.id:
        r.logger.debugf("%x is already leader. Ignored transferring leadership to self", r.id)
        return
    # Transfer leadership to third party.
    r.logger.infof(
        "%x [term %d] starts to transfer leadership to %x", r.id, r.term, lead_transferee
    )
    # Transfer leadership should be finished in one electionTimeout, so reset
    # r.electionElapsed.
    r.election_elapsed = 0
    r.lead_transferee = lead_transferee
    if pr.match == r.raft_log.last_index():
        send_timeout_now(r, lead_transferee)
        r.logger.infof(
            "%x sends MsgTimeoutNow to %x immediately as %x already has up-to-date log",
            r.id,
            lead_transferee,
            lead_transferee,
        )
    else:
        send_append(r, lead_transferee)


def release_pending_read_index_messages(r: Raft) -> None:
    if len(r.pending_read_index_messages) == 0:
        # Fast path for the common case to avoid a call to storage.LastIndex() via
        # committedEntryInCurrentTerm.
        return
    if not r.committed_entry_in_current_term():
        r.logger.error(
            "pending MsgReadIndex should be released only after first commit in current term"
        )
        return
    msgs = r.pending_read_index_messages
    r.pending_read_index_messages = []
    for m in msgs:
        send_msg_read_index_response(r, m)


def send_msg_read_index_response(r: Raft, m: Message) -> None:
    # thinking: use an internally defined context instead of the user given context. We
    # can express this in terms of the term and index instead of a user-supplied value.
    # This would allow multiple reads to piggyback on the same message.
    option = r.read_only.option
    if option == ReadOnlySafe:
        r.read_only.add_request(r.raft_log.committed, m)
        # The local node automatically acks the request.
        r.read_only.recv_ack(r.id, r.read_only.heartbeat_ctx())
        bcast_heartbeat(r)
    elif option == ReadOnlyLeaseBased:
        resp = r.response_to_read_index_req(m, r.raft_log.committed)
        if resp.to != NONE:
            r.send(resp)
