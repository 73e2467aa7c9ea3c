"""Ports etcd-io/raft v3.7.0 raft.go's StateType, CampaignType and errors, node.go's
SoftState and util.go's assertConfStatesEquivalent (Apache-2.0).

A module of its own so that core.py (the raft struct) and leader.py / follower.py (its step
functions) share them without importing each other at run time. ``natsd.raft.core`` and
``natsd.raft.rawnode`` re-export them.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from natsd.raft.logger import Logger
from natsd.raft.types import ConfState

__all__ = [
    "CAMPAIGN_ELECTION",
    "CAMPAIGN_PRE_ELECTION",
    "CAMPAIGN_TRANSFER",
    "ErrProposalDropped",
    "ErrStepLocalMsg",
    "ErrStepPeerNotFound",
    "RaftError",
    "SoftState",
    "StateCandidate",
    "StateFollower",
    "StateLeader",
    "StatePreCandidate",
    "StateType",
    "assert_conf_states_equivalent",
]


class StateType(IntEnum):
    """The role of a node in the cluster (Go's String() is the member's name)."""

    StateFollower = 0
    StateCandidate = 1
    StateLeader = 2
    StatePreCandidate = 3

    def __str__(self) -> str:
        return self.name


StateFollower: Final = StateType.StateFollower
StateCandidate: Final = StateType.StateCandidate
StateLeader: Final = StateType.StateLeader
StatePreCandidate: Final = StateType.StatePreCandidate

# CampaignType: the type of campaigning; its string is also the vote's context for a
# leader transfer (the context lets the voter tell a forced campaign).
# CAMPAIGN_PRE_ELECTION represents the first phase of a normal election when Config.pre_vote
# is true.
CAMPAIGN_PRE_ELECTION: Final = "CampaignPreElection"
# CAMPAIGN_ELECTION represents a normal (time-based) election (the second phase of the
# election when Config.pre_vote is true).
CAMPAIGN_ELECTION: Final = "CampaignElection"
# CAMPAIGN_TRANSFER represents the type of leader transfer.
CAMPAIGN_TRANSFER: Final = "CampaignTransfer"


class RaftError(Exception):
    """An error Go's raft returns (``error`` values); raised here."""


class ErrProposalDropped(RaftError):
    """Returned when the proposal is ignored by some cases, so that the proposer can be
    notified and fail fast."""

    def __init__(self, msg: str = "raft proposal dropped") -> None:
        super().__init__(msg)


class ErrStepLocalMsg(RaftError):
    """Returned when trying to step a local raft message."""

    def __init__(self, msg: str = "raft: cannot step raft local message") -> None:
        super().__init__(msg)


class ErrStepPeerNotFound(RaftError):
    """Returned when trying to step a response message but there is no peer found in
    raft.trk for that node."""

    def __init__(self, msg: str = "raft: cannot step as peer not found") -> None:
        super().__init__(msg)


class SoftState:
    """Volatile state that does not need to be persisted to the WAL."""

    __slots__ = ("lead", "raft_state")

    def __init__(self, lead: int = 0, raft_state: StateType = StateType.StateFollower) -> None:
        self.lead = lead
        self.raft_state = raft_state

    def equal(self, b: SoftState) -> bool:
        return self.lead == b.lead and self.raft_state == b.raft_state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SoftState):
            return NotImplemented
        return self.equal(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SoftState(lead={self.lead}, raft_state={self.raft_state.name})"


def assert_conf_states_equivalent(logger: Logger, cs1: ConfState, cs2: ConfState) -> None:
    err = cs1.equivalent(cs2)
    if err is None:
        return
    logger.panic(err)
