"""Ports etcd-io/raft v3.7.0 raft.go's elections (Apache-2.0): hup, campaign, poll, the
check for unapplied conf changes, and the parts of Step that answer vote requests and
messages of lower terms. Functions of the Raft (``hup(r, t)`` for ``r.hup(t)``); ``Raft``
has methods forwarding to them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.raft.describe import vote_resp_msg_type
from natsd.raft.log_unstable import EntryID
from natsd.raft.logger import RaftPanic
from natsd.raft.quorum import VoteResult
from natsd.raft.state import CAMPAIGN_PRE_ELECTION, CAMPAIGN_TRANSFER, StateLeader
from natsd.raft.types import NONE, Entry, EntryType, Message, MessageType

if TYPE_CHECKING:
    from natsd.raft.core import Raft

__all__ = ["campaign", "has_unapplied_conf_changes", "hup", "poll", "step_lower_term", "step_vote"]


class _Break(Exception):
    """errBreak: stops a log scan early."""


def hup(r: Raft, t: str) -> None:
    if r.state == StateLeader:
        r.logger.debugf("%x ignoring MsgHup because already leader", r.id)
        return
    if not r.promotable():
        r.logger.warningf("%x is unpromotable and can not campaign", r.id)
        return
    if r.has_unapplied_conf_changes():
        r.logger.warningf(
            "%x cannot campaign at term %d since there are still pending configuration "
            "changes to apply",
            r.id,
            r.term,
        )
        return
    r.logger.infof("%x is starting a new election at term %d", r.id, r.term)
    r.campaign(t)


def has_unapplied_conf_changes(r: Raft) -> bool:
    log = r.raft_log
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
        r.logger.panicf("error scanning unapplied entries [%d, %d): %v", lo, hi, err)
    return found[0]


def campaign(r: Raft, t: str) -> None:
    """Transitions the raft instance to candidate state. This must only be called after
    verifying that this is a legitimate transition."""
    if not r.promotable():
        # This path should not be hit (callers are supposed to check), but better safe
        # than sorry.
        r.logger.warningf("%x is unpromotable; campaign() should have been called", r.id)
    if t == CAMPAIGN_PRE_ELECTION:
        r.become_pre_candidate()
        vote_msg = MessageType.MsgPreVote
        # PreVote RPCs are sent for the next term before we've incremented r.term.
        term = r.term + 1
    else:
        r.become_candidate()
        vote_msg = MessageType.MsgVote
        term = r.term
    for pid in sorted(r.trk.config.voters.ids()):
        if pid == r.id:
            # The candidate votes for itself and should account for this self vote
            # once the vote has been durably persisted (since it doesn't send a MsgVote
            # to itself). This response message will be added to msgs_after_append and
            # delivered back to this node after the vote has been written to stable
            # storage.
            r.send(Message(to=pid, term=term, type=vote_resp_msg_type(vote_msg)))
            continue
        # TODO(pav-kv): it should be ok to simply print %+v for the last_entry_id.
        last = r.raft_log.last_entry_id()
        r.logger.infof(
            "%x [logterm: %d, index: %d] sent %s request to %x at term %d",
            r.id,
            last.term,
            last.index,
            vote_msg,
            pid,
            r.term,
        )
        ctx = t.encode() if t == CAMPAIGN_TRANSFER else b""
        r.send(
            Message(
                to=pid,
                term=term,
                type=vote_msg,
                index=last.index,
                log_term=last.term,
                context=ctx,
            )
        )


def poll(r: Raft, id: int, t: MessageType, v: bool) -> tuple[int, int, VoteResult]:
    if v:
        r.logger.infof("%x received %s from %x at term %d", r.id, t, id, r.term)
    else:
        r.logger.infof("%x received %s rejection from %x at term %d", r.id, t, id, r.term)
    r.trk.record_vote(id, v)
    return r.trk.tally_votes()


def step_vote(r: Raft, m: Message) -> None:
    # The MsgVote / MsgPreVote case of Step.
    # We can vote if this is a repeat of a vote we've already cast...
    can_vote = (
        r.vote == m.from_
        # ...we haven't voted and we don't think there's a leader yet in this term...
        or (r.vote == NONE and r.lead == NONE)
        # ...or this is a PreVote for a future term...
        or (m.type == MessageType.MsgPreVote and m.term > r.term)
    )
    # ...and we believe the candidate is up to date.
    last_id = r.raft_log.last_entry_id()
    cand_last_id = EntryID(m.log_term, m.index)
    if can_vote and r.raft_log.is_up_to_date(cand_last_id):
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
        r.logger.infof(
            "%x [logterm: %d, index: %d, vote: %x] cast %s for %x [logterm: %d, index: %d] "
            "at term %d",
            r.id,
            last_id.term,
            last_id.index,
            r.vote,
            m.type,
            m.from_,
            cand_last_id.term,
            cand_last_id.index,
            r.term,
        )
        # When responding to Msg{Pre,}Vote messages we include the term from the
        # message, not the local term. To see why, consider the case where a single
        # node was previously partitioned away and it's local term is now out of date.
        # If we include the local term (recall that for pre-votes we don't update the
        # local term), the (pre-)campaigning node on the other end will proceed to
        # ignore the message (it ignores all out of date messages). The term in the
        # original message and current local term are the same in the case of regular
        # votes, but different for pre-votes.
        r.send(Message(to=m.from_, term=m.term, type=vote_resp_msg_type(m.type)))
        if m.type == MessageType.MsgVote:
            # Only record real votes.
            r.election_elapsed = 0
            r.vote = m.from_
    else:
        r.logger.infof(
            "%x [logterm: %d, index: %d, vote: %x] rejected %s from %x "
            "[logterm: %d, index: %d] at term %d",
            r.id,
            last_id.term,
            last_id.index,
            r.vote,
            m.type,
            m.from_,
            cand_last_id.term,
            cand_last_id.index,
            r.term,
        )
        r.send(Message(to=m.from_, term=r.term, type=vote_resp_msg_type(m.type), reject=True))


def step_lower_term(r: Raft, m: Message) -> None:
    # The part of Step for a message with a term lower than ours.
    if (r.check_quorum or r.pre_vote) and (
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
        r.send(Message(to=m.from_, type=MessageType.MsgAppResp))
    elif m.type == MessageType.MsgPreVote:
        # Before Pre-Vote enable, there may have candidate with higher term, but less
        # log. After update to Pre-Vote, the cluster may deadlock if we drop messages
        # with a lower term.
        last = r.raft_log.last_entry_id()
        # TODO(pav-kv): it should be ok to simply print %+v of the last ID.
        r.logger.infof(
            "%x [logterm: %d, index: %d, vote: %x] rejected %s from %x "
            "[logterm: %d, index: %d] at term %d",
            r.id,
            last.term,
            last.index,
            r.vote,
            m.type,
            m.from_,
            m.log_term,
            m.index,
            r.term,
        )
        r.send(Message(to=m.from_, term=r.term, type=MessageType.MsgPreVoteResp, reject=True))
    elif m.type == MessageType.MsgStorageAppendResp:
        if m.index != 0:
            # Don't consider the appended log entries to be stable because they may have
            # been overwritten in the unstable log during a later term. See the comment
            # in newStorageAppendResp for more about this race.
            r.logger.infof(
                "%x [term: %d] ignored entry appends from a %s message with lower term [term: %d]",
                r.id,
                r.term,
                m.type,
                m.term,
            )
        if m.snapshot is not None:
            # Even if the snapshot applied under a different term, its application is
            # still valid. Snapshots carry committed (term-independent) state.
            r.applied_snap(m.snapshot)
    else:
        # ignore other cases
        r.logger.infof(
            "%x [term: %d] ignored a %s message with lower term from %x [term: %d]",
            r.id,
            r.term,
            m.type,
            m.from_,
            m.term,
        )
