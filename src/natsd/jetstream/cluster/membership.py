"""A replicated stream's group follows its assignment's peers by Raft configuration changes.

Design-clustering §4.8, rule 4: membership changes only through Raft's own configuration
changes, a new member a learner first. When the meta group changes a stream's peers
(``STREAM.PEER.REMOVE``: one server out, a free one in), every replica keeps the group
running as it was; the group's leader then walks it to the new peers, one change at a time
(each waits until the previous one is applied):

1. **Add the newcomers as learners.** A learner receives the log but neither votes nor
   counts for commits; the new server joined with an empty log (``GroupHost.join``), so the
   leader sends it its snapshot and it copies the stream from the leader's store
   (``cluster/catchup.py``) before taking the entries that follow.
2. **Swap**, once every wanted learner has the whole committed log: one joint change
   promotes the learners and removes the voters no longer wanted (Raft leaves the joint
   configuration by itself). A group never has fewer voters than before while a newcomer
   is still catching up.
3. A leader that is itself to be removed first hands its leadership to a remaining voter,
   which carries on.

A removed replica (``leaving``) leaves its group, deleting its copy, once its removal is
committed: it applied a configuration that no longer holds it, or a member that applied
one told it so (``GroupHost._tell_removed``: the leader stops sending to a removed member,
which may never see the commit otherwise). **A voter never leaves before that**, however long
the swap takes: while the group counts it, its leaving could cost the group its majority for
good. Two overlapping moves of an R3 group (its voters {a, b, c}; c's replacement still
catching up when b is removed too) would otherwise have b and c leave while the joint change
to {a, d, e} still needs two of {a, b, c} (the fault soak found this). Meanwhile it is set
aside and reported: it keeps voting and applying, and logs once that it waits. A learner
never counts for a majority, so one the meta group no longer wants (a newcomer whose move
was undone) leaves ``LEAVE_AFTER`` seconds after that even if nobody tells it.
"""

from __future__ import annotations

from typing import Final

from natsd.cluster.group import RaftGroup, conf_holds
from natsd.raft.types import (
    ConfChangeSingle,
    ConfChangeType,
    ConfChangeV2,
)

__all__ = ["LEAVE_AFTER", "in_config", "is_voter", "next_change"]

LEAVE_AFTER: Final = 10.0

_ADD: Final = ConfChangeType.ConfChangeAddNode
_LEARNER: Final = ConfChangeType.ConfChangeAddLearnerNode
_REMOVE: Final = ConfChangeType.ConfChangeRemoveNode


def in_config(g: RaftGroup, node: int) -> bool:
    """Is ``node`` a member of the group's applied configuration (in any role)?"""
    return conf_holds(g.conf, node)


def is_voter(g: RaftGroup, node: int) -> bool:
    """Does ``node`` count for the group's majority (either side of a joint configuration)?"""
    return node in g.conf.voters or node in g.conf.voters_outgoing


def next_change(g: RaftGroup, want: set[int], me: int) -> ConfChangeV2 | int | None:
    """As the group's leader: the next configuration change toward the voters ``want``;
    an int: the voter to hand the leadership to first (this leader is to be removed);
    None: nothing to do now (done, or the previous change is not applied yet)."""
    node = g.node
    if node.conf_change_pending():
        return None  # one change at a time
    cs = g.conf
    if cs.voters_outgoing or cs.learners_next:
        return None  # joint: Raft proposes leaving it
    voters, learners = set(cs.voters), set(cs.learners)
    if voters == want and not learners:
        return None
    new = sorted(want - voters - learners)
    if new:
        return ConfChangeV2(changes=[ConfChangeSingle(_LEARNER, n) for n in new])
    drop = voters - want
    if me in drop:
        stay = voters & want
        matches = node.matches()
        best = max(stay, key=lambda v: matches.get(v, -1), default=0)
        return best or None
    committed = node.committed()
    matches = node.matches()
    joining = learners & want
    if any(matches.get(n, -1) < committed for n in joining):
        return None  # a newcomer is still catching up
    changes = [ConfChangeSingle(_ADD, n) for n in sorted(joining)]
    changes += [ConfChangeSingle(_REMOVE, n) for n in sorted(drop | (learners - want))]
    return ConfChangeV2(changes=changes) if changes else None
