"""Ports etcd-io/raft v3.7.0 confchange/ (confchange.go, restore.go) (Apache-2.0).

Go returns ``(tracker.Config, tracker.ProgressMap, error)``; here the Changer's methods
return ``(Config, ProgressMap)`` and raise ``ConfChangeError`` with upstream's message.
"""

from __future__ import annotations

from collections.abc import Callable

from natsd.raft.quorum import JointConfig, MajorityConfig
from natsd.raft.tracker import Config, Inflights, Progress, ProgressTracker
from natsd.raft.types import (
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeRemoveNode,
    ConfChangeSingle,
    ConfChangeUpdateNode,
    ConfState,
)


class ConfChangeError(Exception):
    """A configuration change was refused; the message is upstream's error text."""


class Changer:
    """Facilitates configuration changes. It exposes methods to handle simple and joint
    consensus while performing the proper validation that allows refusing invalid
    configuration changes before they affect the active configuration.

    The tracker is only read (the methods work on copies), as in Go where the Changer holds
    a copy of it."""

    __slots__ = ("last_index", "tracker")

    def __init__(self, tracker: ProgressTracker, last_index: int) -> None:
        self.tracker = tracker
        self.last_index = last_index

    def enter_joint(
        self, auto_leave: bool, ccs: list[ConfChangeSingle]
    ) -> tuple[Config, dict[int, Progress]]:
        """Verifies that the outgoing (=right) majority config of the joint config is empty
        and initializes it with a copy of the incoming (=left) majority config. That is, it
        transitions from (1 2 3)&&() to (1 2 3)&&(1 2 3).

        The supplied changes are then applied to the incoming majority config, resulting in
        a joint configuration that in terms of the Raft thesis (Section 4.3) corresponds to
        `C_{new,old}`."""
        cfg, trk = self._check_and_copy()
        if joint(cfg):
            raise ConfChangeError("config is already joint")
        if len(incoming(cfg.voters)) == 0:
            # We allow adding nodes to an empty config for convenience (testing and
            # bootstrap), but you can't enter a joint state.
            raise ConfChangeError("can't make a zero-voter config joint")
        # Clear the outgoing config, then copy incoming to outgoing.
        cfg.voters.outgoing = incoming(cfg.voters).copy()
        self._apply(cfg, trk, ccs)
        cfg.auto_leave = auto_leave
        return check_and_return(cfg, trk)

    def leave_joint(self) -> tuple[Config, dict[int, Progress]]:
        """Transitions out of a joint configuration. It is an error to call this method if
        the configuration is not joint, i.e. if the outgoing majority config Voters[1] is
        empty.

        The outgoing majority config of the joint configuration will be removed, that is,
        the incoming config is promoted as the sole decision maker. In the notation of the
        Raft thesis (Section 4.3), this method transitions from `C_{new,old}` into `C_new`.

        At the same time, any staged learners (LearnersNext) the addition of which was held
        back by an overlapping voter in the former outgoing config will be inserted into
        Learners."""
        cfg, trk = self._check_and_copy()
        if not joint(cfg):
            raise ConfChangeError("can't leave a non-joint config")
        if cfg.learners_next is not None:
            for i in cfg.learners_next:
                cfg.learners = _nil_aware_add(cfg.learners, i)
                trk[i].is_learner = True
        cfg.learners_next = None
        inc = incoming(cfg.voters)
        for i in outgoing(cfg.voters):
            is_voter = i in inc
            is_learner = cfg.learners is not None and i in cfg.learners
            if not is_voter and not is_learner:
                del trk[i]
        cfg.voters.outgoing = MajorityConfig()
        cfg.auto_leave = False
        return check_and_return(cfg, trk)

    def simple(self, ccs: list[ConfChangeSingle]) -> tuple[Config, dict[int, Progress]]:
        """Carries out a series of configuration changes that (in aggregate) mutates the
        incoming majority config Voters[0] by at most one. This method will raise if that is
        not the case, if the resulting quorum is zero, or if the configuration is in a joint
        state (i.e. if there is an outgoing configuration)."""
        cfg, trk = self._check_and_copy()
        if joint(cfg):
            raise ConfChangeError("can't apply simple config change in joint config")
        self._apply(cfg, trk, ccs)
        if symdiff(incoming(self.tracker.config.voters).ids, incoming(cfg.voters).ids) > 1:
            raise ConfChangeError("more than one voter changed without entering joint config")
        return check_and_return(cfg, trk)

    def _apply(self, cfg: Config, trk: dict[int, Progress], ccs: list[ConfChangeSingle]) -> None:
        """apply a change to the configuration. By convention, changes to voters are always
        made to the incoming majority config Voters[0]. Voters[1] is either empty or
        preserves the outgoing majority configuration while in a joint state."""
        for cc in ccs:
            if cc.node_id == 0:
                # etcd replaces the NodeId with zero if it decides (downstream of raft) to
                # not apply a change, so we have to have explicit code here to ignore these.
                continue
            t = cc.type
            if t == ConfChangeAddNode:
                self._make_voter(cfg, trk, cc.node_id)
            elif t == ConfChangeAddLearnerNode:
                self._make_learner(cfg, trk, cc.node_id)
            elif t == ConfChangeRemoveNode:
                self._remove(cfg, trk, cc.node_id)
            elif t == ConfChangeUpdateNode:
                pass
            else:
                raise ConfChangeError(f"unexpected conf type {int(t)}")
        if len(incoming(cfg.voters)) == 0:
            raise ConfChangeError("removed all voters")

    def _make_voter(self, cfg: Config, trk: dict[int, Progress], node_id: int) -> None:
        """Adds or promotes the given ID to be a voter in the incoming majority config."""
        pr = trk.get(node_id)
        if pr is None:
            self._init_progress(cfg, trk, node_id, False)
            return
        pr.is_learner = False
        cfg.learners = _nil_aware_delete(cfg.learners, node_id)
        cfg.learners_next = _nil_aware_delete(cfg.learners_next, node_id)
        incoming(cfg.voters).add(node_id)

    def _make_learner(self, cfg: Config, trk: dict[int, Progress], node_id: int) -> None:
        """Makes the given ID a learner or stages it to be a learner once an active joint
        configuration is exited.

        The former happens when the peer is not a part of the outgoing config, in which case
        we either add a new learner or demote a voter in the incoming config.

        The latter case occurs when the configuration is joint and the peer is a voter in
        the outgoing config. In that case, we do not want to add the peer as a learner
        because then we'd have to track a peer as a voter and learner simultaneously.
        Instead, we add the learner to LearnersNext, so that it will be added to Learners
        the moment the outgoing config is removed by leave_joint()."""
        pr = trk.get(node_id)
        if pr is None:
            self._init_progress(cfg, trk, node_id, True)
            return
        if pr.is_learner:
            return
        # Remove any existing voter in the incoming config...
        self._remove(cfg, trk, node_id)
        # ... but save the Progress.
        trk[node_id] = pr
        # Use LearnersNext if we can't add the learner to Learners directly, i.e. if the
        # peer is still tracked as a voter in the outgoing config. It will be turned into a
        # learner in leave_joint(). Otherwise, add a regular learner right away.
        if node_id in outgoing(cfg.voters):
            cfg.learners_next = _nil_aware_add(cfg.learners_next, node_id)
        else:
            pr.is_learner = True
            cfg.learners = _nil_aware_add(cfg.learners, node_id)

    def _remove(self, cfg: Config, trk: dict[int, Progress], node_id: int) -> None:
        """remove this peer as a voter or learner from the incoming config."""
        if node_id not in trk:
            return
        incoming(cfg.voters).discard(node_id)
        cfg.learners = _nil_aware_delete(cfg.learners, node_id)
        cfg.learners_next = _nil_aware_delete(cfg.learners_next, node_id)
        # If the peer is still a voter in the outgoing config, keep the Progress.
        if node_id not in outgoing(cfg.voters):
            del trk[node_id]

    def _init_progress(
        self, cfg: Config, trk: dict[int, Progress], node_id: int, is_learner: bool
    ) -> None:
        """initProgress initializes a new progress for the given node or learner."""
        if not is_learner:
            incoming(cfg.voters).add(node_id)
        else:
            cfg.learners = _nil_aware_add(cfg.learners, node_id)
        trk[node_id] = Progress(
            # Initializing the Progress with the last index means that the follower can be
            # probed (with the last index).
            #
            # TODO(tbg): seems awfully optimistic. Using the first index would be better.
            # The general expectation here is that the follower has no log at all (and will
            # thus likely need a snapshot), though the app may have applied a snapshot out
            # of band before adding the replica (thus making the first index the better
            # choice).
            match=0,
            next=max(self.last_index, 1),  # invariant: Match < Next
            inflights=Inflights(self.tracker.max_inflight, self.tracker.max_inflight_bytes),
            is_learner=is_learner,
            # When a node is first added, we should mark it as recently active. Otherwise,
            # CheckQuorum may cause us to step down if it is invoked before the added node
            # has had a chance to communicate with us.
            recent_active=True,
        )

    def _check_and_copy(self) -> tuple[Config, dict[int, Progress]]:
        """Copies the tracker's config and progress map (deeply enough for the purposes of
        the Changer) and returns those copies. Raises if check_invariants does."""
        cfg = self.tracker.config.clone()
        # A shallow copy of each Progress is enough because we only mutate the Learner
        # field.
        trk = {i: pr.copy() for i, pr in self.tracker.progress.items()}
        return check_and_return(cfg, trk)


def check_invariants(cfg: Config, trk: dict[int, Progress]) -> None:
    """Makes sure that the config and progress are compatible with each other. This is used
    to check both what the Changer is initialized with, as well as what it returns."""
    # NB: intentionally allow the empty config. In production we'll never see a non-empty
    # config (we prevent it from being created) but we will need to be able to *create* an
    # initial config, for example during bootstrap (or during tests). Instead of having to
    # hand-code this, we allow transitioning from an empty config into any other legal and
    # non-empty config.
    for ids in (cfg.voters.ids(), cfg.learners, cfg.learners_next):
        if ids is None:
            continue
        for i in ids:
            if i not in trk:
                raise ConfChangeError(f"no progress for {i}")
    # Any staged learner was staged because it could not be directly added due to a
    # conflicting voter in the outgoing config.
    if cfg.learners_next is not None:
        for i in cfg.learners_next:
            if i not in outgoing(cfg.voters):
                raise ConfChangeError(f"{i} is in LearnersNext, but not Voters[1]")
            if trk[i].is_learner:
                raise ConfChangeError(f"{i} is in LearnersNext, but is already marked as learner")
    # Conversely Learners and Voters doesn't intersect at all.
    if cfg.learners is not None:
        for i in cfg.learners:
            if i in outgoing(cfg.voters):
                raise ConfChangeError(f"{i} is in Learners and Voters[1]")
            if i in incoming(cfg.voters):
                raise ConfChangeError(f"{i} is in Learners and Voters[0]")
            if not trk[i].is_learner:
                raise ConfChangeError(f"{i} is in Learners, but is not marked as learner")
    if not joint(cfg):
        # We enforce that empty maps are nil instead of zero. (Go also checks that
        # Voters[1] is nil here; a MajorityConfig has no nil, and not joint means empty.)
        if cfg.learners_next is not None:
            raise ConfChangeError("cfg.LearnersNext must be nil when not joint")
        if cfg.auto_leave:
            raise ConfChangeError("AutoLeave must be false when not joint")


def check_and_return(cfg: Config, trk: dict[int, Progress]) -> tuple[Config, dict[int, Progress]]:
    """Calls check_invariants on the input and returns the input."""
    check_invariants(cfg, trk)
    return cfg, trk


def _nil_aware_add(m: set[int] | None, node_id: int) -> set[int]:
    """nilAwareAdd populates a map entry, creating the map if necessary; returns the map."""
    if m is None:
        m = set()
    m.add(node_id)
    return m


def _nil_aware_delete(m: set[int] | None, node_id: int) -> set[int] | None:
    """nilAwareDelete deletes from a map, nil'ing the map itself if it is empty after;
    returns the map."""
    if m is None:
        return None
    m.discard(node_id)
    if len(m) == 0:
        return None
    return m


def symdiff(left: set[int], right: set[int]) -> int:
    """The count of the symmetric difference between the sets of uint64s, i.e.
    len( (l - r) \\union (r - l))."""
    return len(left ^ right)


def joint(cfg: Config) -> bool:
    return len(outgoing(cfg.voters)) > 0


def incoming(voters: JointConfig) -> MajorityConfig:
    return voters.incoming


def outgoing(voters: JointConfig) -> MajorityConfig:
    return voters.outgoing


def describe(ccs: list[ConfChangeSingle]) -> str:
    """The type and NodeId of the configuration changes as a space-delimited string."""
    return " ".join(f"{cc.type.name}({cc.node_id})" for cc in ccs)


# restore.go


def to_conf_change_single(
    cs: ConfState,
) -> tuple[list[ConfChangeSingle], list[ConfChangeSingle]]:
    """Translates a conf state into 1) a list of operations creating first the config that
    will become the outgoing one, and then the incoming one, and b) another list that, when
    applied to the config resulted from 1), represents the ConfState."""
    # Example to follow along this code:
    # voters=(1 2 3) learners=(5) outgoing=(1 2 4 6) learners_next=(4)
    #
    # This means that before entering the joint config, the configuration had voters
    # (1 2 4 6) and perhaps some learners that are already gone. The new set of voters is
    # (1 2 3), i.e. (1 2) were kept around, and (4 6) are no longer voters; however 4 is
    # poised to become a learner upon leaving the joint state. We can't tell whether 5 was
    # a learner before entering the joint config, but it doesn't matter (we'll pretend that
    # it wasn't).
    #
    # The code below will construct
    # outgoing = add 1; add 2; add 4; add 6
    # incoming = remove 1; remove 2; remove 4; remove 6
    #            add 1;    add 2;    add 3;
    #            add-learner 5;
    #            add-learner 4;
    #
    # So, when starting with an empty config, after applying 'outgoing' we have
    #
    #   quorum=(1 2 4 6)
    #
    # From which we enter a joint state via 'incoming'
    #
    #   quorum=(1 2 3)&&(1 2 4 6) learners=(5) learners_next=(4)
    #
    # as desired.
    out: list[ConfChangeSingle] = []
    inc: list[ConfChangeSingle] = []
    for i in cs.voters_outgoing:
        # If there are outgoing voters, first add them one by one so that the (non-joint)
        # config has them all.
        out.append(ConfChangeSingle(ConfChangeAddNode, i))
    # We're done constructing the outgoing slice, now on to the incoming one (which will
    # apply on top of the config created by the outgoing slice).
    #
    # First, we'll remove all of the outgoing voters.
    for i in cs.voters_outgoing:
        inc.append(ConfChangeSingle(ConfChangeRemoveNode, i))
    # Then we'll add the incoming voters and learners.
    for i in cs.voters:
        inc.append(ConfChangeSingle(ConfChangeAddNode, i))
    for i in cs.learners:
        inc.append(ConfChangeSingle(ConfChangeAddLearnerNode, i))
    # Same for LearnersNext; these are nodes we want to be learners but which are currently
    # voters in the outgoing config.
    for i in cs.learners_next:
        inc.append(ConfChangeSingle(ConfChangeAddLearnerNode, i))
    return out, inc


_Op = Callable[[Changer], tuple[Config, dict[int, Progress]]]


def _chain(chg: Changer, ops: list[_Op]) -> tuple[Config, dict[int, Progress]]:
    # Go's Changer holds a copy of the tracker, so the chain's updates never reach the
    # caller's tracker: work on a tracker of our own.
    trk = ProgressTracker(chg.tracker.max_inflight, chg.tracker.max_inflight_bytes)
    trk.config = chg.tracker.config
    trk.progress = chg.tracker.progress
    trk.votes = chg.tracker.votes
    chg = Changer(trk, chg.last_index)
    for op in ops:
        cfg, prs = op(chg)
        trk.config = cfg
        trk.progress = prs
    return trk.config, trk.progress


def _simple_op(cc: ConfChangeSingle) -> _Op:
    return lambda chg: chg.simple([cc])


def restore(chg: Changer, cs: ConfState) -> tuple[Config, dict[int, Progress]]:
    """Takes a Changer (which must represent an empty configuration), and runs a sequence
    of changes enacting the configuration described in the ConfState.

    TODO(tbg) it's silly that this takes a Changer. Unravel this by making sure the Changer
    only needs a ProgressMap (not a whole Tracker) at which point this can just take
    LastIndex and MaxInflight directly instead and cook up the results from that alone."""
    out, inc = to_conf_change_single(cs)
    ops: list[_Op] = []
    if len(out) == 0:
        # No outgoing config, so just apply the incoming changes one by one.
        for cc in inc:
            ops.append(_simple_op(cc))
    else:
        # The ConfState describes a joint configuration.
        #
        # First, apply all of the changes of the outgoing config one by one, so that it
        # temporarily becomes the incoming active config. For example, if the config is
        # (1 2 3)&(2 3 4), this will establish (2 3 4)&().
        for cc in out:
            ops.append(_simple_op(cc))
        # Now enter the joint state, which rotates the above additions into the outgoing
        # config, and adds the incoming config in. Continuing the example above, we'd get
        # (1 2 3)&(2 3 4), i.e. the incoming operations would be removing 2,3,4 and then
        # adding in 1,2,3 while transitioning into a joint state.
        auto_leave = cs.auto_leave
        ops.append(lambda chg: chg.enter_joint(auto_leave, inc))
    return _chain(chg, ops)
