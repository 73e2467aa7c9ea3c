"""Ports etcd-io/raft v3.7.0 tracker/ (state.go, inflights.go, progress.go, tracker.go)
(Apache-2.0).

Go's unexported fields that clash with exported methods of the same name get a leading
underscore (``Progress._sent_commit`` beside ``Progress.sent_commit()``, ``Inflights._count``
beside ``Inflights.count()``). ``Config`` is embedded in Go's ``ProgressTracker``; here it is
the attribute ``ProgressTracker.config``. Go's nil learner maps (printed differently from
empty ones, and checked by confchange) are ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Final

from natsd.raft.quorum import AckedIndexer, JointConfig, MajorityConfig, VoteResult, VoteWon
from natsd.raft.types import ConfState


class StateType(IntEnum):
    """The state of a tracked follower."""

    # StateProbe indicates a follower whose last index isn't known. Such a follower is
    # "probed" (i.e. an append sent periodically) to narrow down its last index. In the
    # ideal (and common) case, only one round of probing is necessary as the follower will
    # react with a hint. Followers that are probed over extended periods of time are often
    # offline.
    StateProbe = 0
    # StateReplicate is the state steady in which a follower eagerly receives log entries to
    # append to its log.
    StateReplicate = 1
    # StateSnapshot indicates a follower that needs log entries not available from the
    # leader's Raft log. Such a follower needs a full snapshot to return to StateReplicate.
    StateSnapshot = 2

    def __str__(self) -> str:
        return self.name


StateProbe: Final = StateType.StateProbe
StateReplicate: Final = StateType.StateReplicate
StateSnapshot: Final = StateType.StateSnapshot


class Inflights:
    """Limits the number of MsgApp (represented by the largest index contained within) sent
    to followers but not yet acknowledged by them. Callers use full() to check whether more
    messages can be sent, call add() whenever they are sending a new append, and release
    "quota" via free_le() whenever an ack is received."""

    __slots__ = ("_buffer", "_bytes", "_count", "_max_bytes", "_size", "_start")

    def __init__(self, size: int, max_bytes: int) -> None:
        """NewInflights: up to ``size`` inflight messages, with the total byte size up to
        ``max_bytes``. If max_bytes is 0 then there is no byte size limit. The max_bytes
        limit is soft, i.e. a single message that brings it from size < max_bytes to
        size >= max_bytes is accepted."""
        # the starting index in the buffer
        self._start = 0
        self._count = 0  # number of inflight messages in the buffer
        self._bytes = 0  # number of inflight bytes
        self._size = size  # the max number of inflight messages
        self._max_bytes = max_bytes  # the max total byte size of inflight messages
        # A ring buffer of (index, bytes) per in-flight message: the index of the last entry
        # inside the message and the total byte size of its entries.
        self._buffer: list[tuple[int, int]] = []

    def clone(self) -> Inflights:
        """An Inflights that is identical to but shares no memory with the receiver."""
        ins = Inflights(self._size, self._max_bytes)
        ins._start = self._start
        ins._count = self._count
        ins._bytes = self._bytes
        ins._buffer = list(self._buffer)
        return ins

    def add(self, index: int, nbytes: int) -> None:
        """Notifies the Inflights that a new message with the given index and byte size is
        being dispatched. full() must be called prior to add() to verify that there is room
        for one more message, and consecutive calls to add() must provide a monotonic
        sequence of indexes."""
        if self.full():
            raise RuntimeError("cannot add into a Full inflights")
        nxt = self._start + self._count
        size = self._size
        if nxt >= size:
            nxt -= size
        if nxt >= len(self._buffer):
            self._grow()
        self._buffer[nxt] = (index, nbytes)
        self._count += 1
        self._bytes += nbytes

    def _grow(self) -> None:
        """Grow the inflight buffer by doubling up to inflights.size. We grow on demand
        instead of preallocating to inflights.size to handle systems which have thousands of
        Raft groups per process."""
        new_size = len(self._buffer) * 2
        if new_size == 0:
            new_size = 1
        elif new_size > self._size:
            new_size = self._size
        self._buffer.extend([(0, 0)] * (new_size - len(self._buffer)))

    def free_le(self, to: int) -> None:
        """FreeLE frees the inflights smaller or equal to the given `to` flight."""
        buf = self._buffer
        if self._count == 0 or to < buf[self._start][0]:
            # out of the left side of the window
            return
        idx = self._start
        size = self._size
        nbytes = 0
        i = 0
        while i < self._count:
            index, b = buf[idx]
            if to < index:  # found the first large inflight
                break
            nbytes += b
            # increase index and maybe rotate
            idx += 1
            if idx >= size:
                idx -= size
            i += 1
        # free i inflights and set new start index
        self._count -= i
        self._bytes -= nbytes
        self._start = idx
        if self._count == 0:
            # inflights is empty, reset the start index so that we don't grow the buffer
            # unnecessarily.
            self._start = 0

    def full(self) -> bool:
        """Full returns true if no more messages can be sent at the moment."""
        return self._count == self._size or (
            self._max_bytes != 0 and self._bytes >= self._max_bytes
        )

    def count(self) -> int:
        """Count returns the number of inflight messages."""
        return self._count

    def reset(self) -> None:
        """reset frees all inflights."""
        self._start = 0
        self._count = 0
        self._bytes = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Inflights):
            return NotImplemented
        return (
            self._start == other._start
            and self._count == other._count
            and self._bytes == other._bytes
            and self._size == other._size
            and self._max_bytes == other._max_bytes
            and self._buffer == other._buffer
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Inflights(start={self._start}, count={self._count}, bytes={self._bytes}, "
            f"size={self._size}, max_bytes={self._max_bytes}, buffer={self._buffer})"
        )


class Progress:
    """A follower's progress in the view of the leader. Leader maintains progresses of all
    followers, and sends entries to the follower based on its progress.

    NB(tbg): Progress is basically a state machine whose transitions are mostly strewn
    around `*raft.raft`. Additionally, some fields are only used when in a certain State.
    All of this isn't ideal."""

    __slots__ = (
        "_sent_commit",
        "inflights",
        "is_learner",
        "match",
        "msg_app_flow_paused",
        "next",
        "pending_snapshot",
        "recent_active",
        "state",
    )

    def __init__(
        self,
        match: int = 0,
        next: int = 0,
        state: StateType = StateType.StateProbe,
        pending_snapshot: int = 0,
        recent_active: bool = False,
        msg_app_flow_paused: bool = False,
        inflights: Inflights | None = None,
        is_learner: bool = False,
        sent_commit: int = 0,
    ) -> None:
        # Match is the index up to which the follower's log is known to match the leader's.
        self.match = match
        # Next is the log index of the next entry to send to this follower. All entries
        # with indices in (Match, Next) interval are already in flight.
        #
        # Invariant: 0 <= Match < Next. NB: it follows that Next >= 1.
        # In StateSnapshot, Next == PendingSnapshot + 1.
        self.next = next
        # sentCommit is the highest commit index in flight to the follower.
        #
        # Generally, it is monotonic, but can regress in some cases, e.g. when converting to
        # `StateProbe` or when receiving a rejection from a follower.
        # In StateSnapshot, sentCommit == PendingSnapshot == Next-1.
        self._sent_commit = sent_commit
        # State defines how the leader should interact with the follower.
        #
        # When in StateProbe, leader sends at most one replication message per heartbeat
        # interval. It also probes actual progress of the follower.
        # When in StateReplicate, leader optimistically increases next to the latest entry
        # sent after sending replication message. This is an optimized state for fast
        # replicating log entries to the follower.
        # When in StateSnapshot, leader should have sent out snapshot before and stops
        # sending any replication message.
        self.state = state
        # PendingSnapshot is used in StateSnapshot and tracks the last index of the leader
        # at the time at which it realized a snapshot was necessary. This matches the index
        # in the MsgSnap message emitted from raft.
        #
        # While there is a pending snapshot, replication to the follower is paused. The
        # follower will transition back to StateReplicate if the leader receives an
        # MsgAppResp from it that reconnects the follower to the leader's log (such an
        # MsgAppResp is emitted when the follower applies a snapshot). PendingSnapshot is
        # not taken into account there because a system may delegate the sending of
        # snapshots to other data sources, whose snapshot may be ahead or behind.
        #
        # The follower will transition to StateProbe if ReportSnapshot is called on the
        # leader; if SnapshotFinish is passed then PendingSnapshot becomes the basis for the
        # next attempt to append. If the MsgAppResp is lost, the second mechanism ensures
        # that the follower does not erroneously remain in StateSnapshot.
        self.pending_snapshot = pending_snapshot
        # RecentActive is true if the progress is recently active. Receiving any messages
        # from the corresponding follower indicates the progress is active. RecentActive can
        # be reset to false after an election timeout. This is always true on the leader.
        self.recent_active = recent_active
        # MsgAppFlowPaused is used when the MsgApp flow to a node is throttled. This happens
        # in StateProbe, or StateReplicate with saturated Inflights. In both cases, we need
        # to continue sending MsgApp once in a while to guarantee progress, but we only do
        # so when MsgAppFlowPaused is false (it is reset on receiving a heartbeat response),
        # to not overflow the receiver. See is_paused().
        self.msg_app_flow_paused = msg_app_flow_paused
        # Inflights is a sliding window for the inflight messages. Each inflight message
        # contains one or more log entries. The max number of entries per message is
        # defined in raft config as MaxSizePerMsg. Thus inflight effectively limits both
        # the number of inflight messages and the bandwidth each Progress can use. When
        # inflights is Full, no more message should be sent. When a leader sends out a
        # message, the index of the last entry should be added to inflights. The index MUST
        # be added into inflights in order. When a leader receives a reply, the previous
        # inflights should be freed by calling inflights.free_le with the index of the last
        # received entry. (Go leaves it nil in some tests; here it is never None.)
        self.inflights: Inflights = inflights if inflights is not None else Inflights(0, 0)
        # IsLearner is true if this progress is tracked for a learner.
        self.is_learner = is_learner

    def copy(self) -> Progress:
        """A shallow copy (Go's ``ppr := *pr``): the Inflights are shared."""
        return Progress(
            self.match,
            self.next,
            self.state,
            self.pending_snapshot,
            self.recent_active,
            self.msg_app_flow_paused,
            self.inflights,
            self.is_learner,
            self._sent_commit,
        )

    def reset_state(self, state: StateType) -> None:
        """Moves the Progress into the specified State, resetting MsgAppFlowPaused,
        PendingSnapshot, and Inflights."""
        self.msg_app_flow_paused = False
        self.pending_snapshot = 0
        self.state = state
        self.inflights.reset()

    def become_probe(self) -> None:
        """Transitions into StateProbe. Next is reset to Match+1 or, optionally and if
        larger, the index of the pending snapshot."""
        # If the original state is StateSnapshot, progress knows that the pending snapshot
        # has been sent to this peer successfully, then probes from pendingSnapshot + 1.
        if self.state == StateSnapshot:
            pending_snapshot = self.pending_snapshot
            self.reset_state(StateProbe)
            self.next = max(self.match + 1, pending_snapshot + 1)
        else:
            self.reset_state(StateProbe)
            self.next = self.match + 1
        self._sent_commit = min(self._sent_commit, self.next - 1)

    def become_replicate(self) -> None:
        """Transitions into StateReplicate, resetting Next to Match+1."""
        self.reset_state(StateReplicate)
        self.next = self.match + 1

    def become_snapshot(self, snapshoti: int) -> None:
        """Moves the Progress to StateSnapshot with the specified pending snapshot index."""
        self.reset_state(StateSnapshot)
        self.pending_snapshot = snapshoti
        self.next = snapshoti + 1
        self._sent_commit = snapshoti

    def sent_entries(self, entries: int, nbytes: int) -> None:
        """Updates the progress on the given number of consecutive entries being sent in a
        MsgApp, with the given total bytes size, appended at log indices >= pr.Next.

        Must be used with StateProbe or StateReplicate."""
        if self.state == StateReplicate:
            if entries > 0:
                self.next += entries
                self.inflights.add(self.next - 1, nbytes)
            # If this message overflows the in-flights tracker, or it was already full,
            # consider this message being a probe, so that the flow is paused.
            self.msg_app_flow_paused = self.inflights.full()
        elif self.state == StateProbe:
            # TODO(pavelkalinnikov): this condition captures the previous behaviour, but we
            # should set MsgAppFlowPaused unconditionally for simplicity, because any MsgApp
            # in StateProbe is a probe, not only non-empty ones.
            if entries > 0:
                self.msg_app_flow_paused = True
        else:
            raise RuntimeError(f"sending append in unhandled state {self.state}")

    def can_bump_commit(self, index: int) -> bool:
        """True if sending the given commit index can potentially advance the follower's
        commit index."""
        # Sending the given commit index may bump the follower's commit index up to Next-1
        # in normal operation, or higher in some rare cases. Allow sending a commit index
        # eagerly only if we haven't already sent one that bumps the follower's commit all
        # the way to Next-1.
        return index > self._sent_commit and self._sent_commit < self.next - 1

    def sent_commit(self, commit: int) -> None:
        """SentCommit updates the sentCommit."""
        self._sent_commit = commit

    def maybe_update(self, n: int) -> bool:
        """Called when an MsgAppResp arrives from the follower, with the index acked by it.
        Returns false if the given n index comes from an outdated message. Otherwise it
        updates the progress and returns true."""
        if n <= self.match:
            return False
        self.match = n
        self.next = max(self.next, n + 1)  # invariant: Match < Next
        self.msg_app_flow_paused = False
        return True

    def maybe_decr_to(self, rejected: int, match_hint: int) -> bool:
        """Adjusts the Progress to the receipt of a MsgApp rejection. The arguments are the
        index of the append message rejected by the follower, and the hint that we want to
        decrease to.

        Rejections can happen spuriously as messages are sent out of order or duplicated. In
        such cases, the rejection pertains to an index that the Progress already knows were
        previously acknowledged, and false is returned without changing the Progress.

        If the rejection is genuine, Next is lowered sensibly, and the Progress is cleared
        for sending log entries."""
        if self.state == StateReplicate:
            # The rejection must be stale if the progress has matched and "rejected" is
            # smaller than "match".
            if rejected <= self.match:
                return False
            # Directly decrease next to match + 1.
            #
            # TODO(tbg): why not use matchHint if it's larger?
            self.next = self.match + 1
            # Regress the sentCommit since it unlikely has been applied.
            self._sent_commit = min(self._sent_commit, self.next - 1)
            return True
        # The rejection must be stale if "rejected" does not match next - 1. This is because
        # non-replicating followers are probed one entry at a time. The check is a best
        # effort assuming message reordering is rare.
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        # Regress the sentCommit since it unlikely has been applied.
        self._sent_commit = min(self._sent_commit, self.next - 1)
        self.msg_app_flow_paused = False
        return True

    def is_paused(self) -> bool:
        """Whether sending log entries to this node has been throttled. This is done when a
        node has rejected recent MsgApps, is currently waiting for a snapshot, or has
        reached the MaxInflightMsgs limit. In normal operation, this is false. A throttled
        node will be contacted less frequently until it has reached a state in which it's
        able to accept a steady stream of log entries again."""
        state = self.state
        if state == StateProbe or state == StateReplicate:
            return self.msg_app_flow_paused
        if state == StateSnapshot:
            return True
        raise RuntimeError("unexpected state")

    def __str__(self) -> str:
        out = [f"{self.state} match={self.match} next={self.next}"]
        if self.is_learner:
            out.append(" learner")
        if self.is_paused():
            out.append(" paused")
        if self.pending_snapshot > 0:
            out.append(f" pendingSnap={self.pending_snapshot}")
        if not self.recent_active:
            out.append(" inactive")
        n = self.inflights.count()
        if n > 0:
            out.append(f" inflight={n}")
            if self.inflights.full():
                out.append("[full]")
        return "".join(out)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Progress):
            return NotImplemented
        return (
            self.match == other.match
            and self.next == other.next
            and self._sent_commit == other._sent_commit
            and self.state == other.state
            and self.pending_snapshot == other.pending_snapshot
            and self.recent_active == other.recent_active
            and self.msg_app_flow_paused == other.msg_app_flow_paused
            and self.inflights == other.inflights
            and self.is_learner == other.is_learner
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Progress({self})"


# ProgressMap is a map of *Progress.
ProgressMap = dict[int, Progress]


def progress_map_str(m: dict[int, Progress]) -> str:
    """ProgressMap.String: the ProgressMap in sorted key order, one Progress per line."""
    return "".join(f"{i}: {m[i]}\n" for i in sorted(m))


def _set_str(s: set[int]) -> str:
    return str(MajorityConfig(s))


class Config:
    """The configuration tracked in a ProgressTracker."""

    __slots__ = ("auto_leave", "learners", "learners_next", "voters")

    def __init__(
        self,
        voters: JointConfig | None = None,
        auto_leave: bool = False,
        learners: set[int] | None = None,
        learners_next: set[int] | None = None,
    ) -> None:
        self.voters: JointConfig = voters if voters is not None else JointConfig()
        # AutoLeave is true if the configuration is joint and a transition to the incoming
        # configuration should be carried out automatically by Raft when this is possible.
        # If false, the configuration will be joint until the application initiates the
        # transition manually.
        self.auto_leave = auto_leave
        # Learners is a set of IDs corresponding to the learners active in the current
        # configuration (None when there are none, like Go's nil map).
        #
        # Invariant: Learners and Voters does not intersect, i.e. if a peer is in either
        # half of the joint config, it can't be a learner; if it is a learner it can't be
        # in either half of the joint config. This invariant simplifies the implementation
        # since it allows peers to have clarity about its current role without taking into
        # account joint consensus.
        self.learners: set[int] | None = learners
        # When we turn a voter into a learner during a joint consensus transition, we cannot
        # add the learner directly when entering the joint state, because this would
        # violate the invariant that the intersection of voters and learners is empty. For
        # example, demoting 3 from voters {1 2 3} naively gives voters {1 2} & {1 2 3} and
        # learners {3}. Instead we get voters {1 2} & {1 2 3}, learners {} and
        # next_learners {3}: 3 is still purely a voter, but we remember the intention to
        # make it a learner upon transitioning into the final configuration (voters {1 2},
        # learners {3}, next_learners {}).
        #
        # Note that next_learners is not used while adding a learner that is not also a
        # voter in the joint config. In this case, the learner is added right away when
        # entering the joint configuration, so that it is caught up as soon as possible.
        self.learners_next: set[int] | None = learners_next

    def __str__(self) -> str:
        out = [f"voters={self.voters}"]
        if self.learners is not None:
            out.append(f" learners={_set_str(self.learners)}")
        if self.learners_next is not None:
            out.append(f" learners_next={_set_str(self.learners_next)}")
        if self.auto_leave:
            out.append(" autoleave")
        return "".join(out)

    def clone(self) -> Config:
        """A copy of the Config that shares no memory with the original. As upstream's, it
        does not carry AutoLeave over (confchange sets it on every path that needs it)."""
        return Config(
            JointConfig(self.voters.incoming.copy(), self.voters.outgoing.copy()),
            False,
            set(self.learners) if self.learners is not None else None,
            set(self.learners_next) if self.learners_next is not None else None,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return (
            self.voters == other.voters
            and self.auto_leave == other.auto_leave
            and self.learners == other.learners
            and self.learners_next == other.learners_next
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Config({self})"


class MatchAckIndexer(AckedIndexer):
    """matchAckIndexer: the Match of each voter's Progress is its acked index."""

    __slots__ = ("progress",)

    def __init__(self, progress: dict[int, Progress]) -> None:
        self.progress = progress

    def acked_index(self, voter_id: int) -> tuple[int, bool]:
        pr = self.progress.get(voter_id)
        if pr is None:
            return 0, False
        return pr.match, True


class ProgressTracker:
    """Tracks the currently active configuration and the information known about the nodes
    and learners in it. In particular, it tracks the match index for each peer which in
    turn allows reasoning about the committed index."""

    __slots__ = ("config", "max_inflight", "max_inflight_bytes", "progress", "votes")

    def __init__(self, max_inflight: int, max_inflight_bytes: int) -> None:
        """MakeProgressTracker initializes a ProgressTracker."""
        # The outgoing voters and the learners are only populated when used.
        self.config = Config()
        self.progress: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.max_inflight = max_inflight
        self.max_inflight_bytes = max_inflight_bytes

    def conf_state(self) -> ConfState:
        """A ConfState representing the active configuration."""
        cfg = self.config
        return ConfState(
            voters=cfg.voters.incoming.slice(),
            voters_outgoing=cfg.voters.outgoing.slice(),
            learners=sorted(cfg.learners) if cfg.learners is not None else [],
            learners_next=sorted(cfg.learners_next) if cfg.learners_next is not None else [],
            auto_leave=cfg.auto_leave,
        )

    def is_singleton(self) -> bool:
        """True if (and only if) there is only one voting member (i.e. the leader) in the
        current configuration."""
        voters = self.config.voters
        return len(voters.incoming) == 1 and len(voters.outgoing) == 0

    def committed(self) -> int:
        """The largest log index known to be committed based on what the voting members of
        the group have acknowledged."""
        return self.config.voters.committed_index(MatchAckIndexer(self.progress))

    def visit(self, f: Callable[[int, Progress], None]) -> None:
        """Invokes the supplied closure for all tracked progresses in stable order."""
        progress = self.progress
        for i in sorted(progress):
            f(i, progress[i])

    def quorum_active(self) -> bool:
        """True if the quorum is active from the view of the local raft state machine."""
        votes: dict[int, bool] = {}
        for i, pr in self.progress.items():
            if pr.is_learner:
                continue
            votes[i] = pr.recent_active
        return self.config.voters.vote_result(votes) == VoteWon

    def voter_nodes(self) -> list[int]:
        """A sorted list of voters."""
        return sorted(self.config.voters.ids())

    def learner_nodes(self) -> list[int]:
        """A sorted list of learners."""
        learners = self.config.learners
        if not learners:
            return []
        return sorted(learners)

    def reset_votes(self) -> None:
        """Prepares for a new round of vote counting via record_vote."""
        self.votes = {}

    def record_vote(self, voter_id: int, v: bool) -> None:
        """Records that the node with the given id voted for this Raft instance if v == true
        (and declined it otherwise)."""
        if voter_id not in self.votes:
            self.votes[voter_id] = v

    def tally_votes(self) -> tuple[int, int, VoteResult]:
        """The number of granted and rejected Votes, and whether the election outcome is
        known."""
        # Make sure to populate granted/rejected correctly even if the Votes slice contains
        # members no longer part of the configuration. This doesn't really matter in the way
        # the numbers are used (they're informational), but might as well get it right.
        granted = 0
        rejected = 0
        votes = self.votes
        for i, pr in self.progress.items():
            if pr.is_learner:
                continue
            v = votes.get(i)
            if v is None:
                continue
            if v:
                granted += 1
            else:
                rejected += 1
        return granted, rejected, self.config.voters.vote_result(votes)
