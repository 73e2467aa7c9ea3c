"""Ports etcd-io/raft v3.7.0 status.go (Apache-2.0): Status and BasicStatus, the snapshot of
a raft's state the application reads (and String(), the JSON form Go prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from natsd.raft.logger import go_quote
from natsd.raft.state import SoftState, StateType
from natsd.raft.tracker import Config as TrackerConfig
from natsd.raft.tracker import Progress
from natsd.raft.types import HardState

if TYPE_CHECKING:
    from natsd.raft.core import Raft

__all__ = ["BasicStatus", "Status", "get_basic_status", "get_progress_copy", "get_status"]


class BasicStatus:
    """Basic information about the raft. It is cheaper to retrieve than Status (no
    allocation of the progress map)."""

    __slots__ = ("applied", "hard_state", "id", "lead_transferee", "soft_state")

    def __init__(
        self,
        id: int = 0,
        hard_state: HardState | None = None,
        soft_state: SoftState | None = None,
        applied: int = 0,
        lead_transferee: int = 0,
    ) -> None:
        self.id = id
        # Go embeds *pb.HardState and SoftState; their fields are also properties here.
        self.hard_state: HardState = hard_state if hard_state is not None else HardState()
        self.soft_state: SoftState = soft_state if soft_state is not None else SoftState()
        self.applied = applied
        self.lead_transferee = lead_transferee

    @property
    def term(self) -> int:
        return self.hard_state.term

    @property
    def vote(self) -> int:
        return self.hard_state.vote

    @property
    def commit(self) -> int:
        return self.hard_state.commit

    @property
    def lead(self) -> int:
        return self.soft_state.lead

    @property
    def raft_state(self) -> StateType:
        return self.soft_state.raft_state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BasicStatus):
            return NotImplemented
        return (
            self.id == other.id
            and self.hard_state == other.hard_state
            and self.soft_state == other.soft_state
            and self.applied == other.applied
            and self.lead_transferee == other.lead_transferee
        )

    __hash__ = None  # type: ignore[assignment]


class Status:
    """The current status of the given group: BasicStatus, the configuration and (on a
    leader) a copy of every Progress."""

    __slots__ = ("basic", "config", "progress")

    def __init__(
        self,
        basic: BasicStatus | None = None,
        config: TrackerConfig | None = None,
        progress: dict[int, Progress] | None = None,
    ) -> None:
        self.basic: BasicStatus = basic if basic is not None else BasicStatus()
        self.config: TrackerConfig = config if config is not None else TrackerConfig()
        self.progress: dict[int, Progress] = progress if progress is not None else {}

    # The fields Go promotes from the embedded BasicStatus.
    @property
    def id(self) -> int:
        return self.basic.id

    @property
    def hard_state(self) -> HardState:
        return self.basic.hard_state

    @property
    def soft_state(self) -> SoftState:
        return self.basic.soft_state

    @property
    def applied(self) -> int:
        return self.basic.applied

    @property
    def lead_transferee(self) -> int:
        return self.basic.lead_transferee

    @property
    def term(self) -> int:
        return self.basic.hard_state.term

    @property
    def vote(self) -> int:
        return self.basic.hard_state.vote

    @property
    def commit(self) -> int:
        return self.basic.hard_state.commit

    @property
    def lead(self) -> int:
        return self.basic.soft_state.lead

    @property
    def raft_state(self) -> StateType:
        return self.basic.soft_state.raft_state

    def marshal_json(self) -> str:
        # Go ranges over the progress map in random order; sorted here.
        b = self.basic
        j = (
            f'{{"id":"{b.id:x}","term":{b.term},"vote":"{b.vote:x}","commit":{b.commit},'
            f'"lead":"{b.lead:x}","raftState":{go_quote(b.raft_state.name)},'
            f'"applied":{b.applied},"progress":{{'
        )
        if len(self.progress) == 0:
            j += "},"
        else:
            parts = [
                f'"{k:x}":{{"match":{v.match},"next":{v.next},"state":{go_quote(str(v.state))}}}'
                for k, v in sorted(self.progress.items())
            ]
            j += ",".join(parts) + "},"
        j += f'"leadtransferee":"{b.lead_transferee:x}"}}'
        return j

    def __str__(self) -> str:
        return self.marshal_json()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (
            self.basic == other.basic
            and self.config == other.config
            and self.progress == other.progress
        )

    __hash__ = None  # type: ignore[assignment]


def get_progress_copy(r: Raft) -> dict[int, Progress]:
    m: dict[int, Progress] = {}
    for pid in sorted(r.trk.progress):
        pr = r.trk.progress[pid]
        p = pr.copy()
        p.inflights = pr.inflights.clone()
        m[pid] = p
    return m


def get_basic_status(r: Raft) -> BasicStatus:
    return BasicStatus(
        id=r.id,
        hard_state=r.hard_state(),
        soft_state=r.soft_state(),
        applied=r.raft_log.applied,
        lead_transferee=r.lead_transferee,
    )


def get_status(r: Raft) -> Status:
    """The current status of the given group. This allocates, see get_basic_status for a
    cheaper alternative."""
    basic = get_basic_status(r)
    progress: dict[int, Progress] = {}
    if basic.raft_state == StateType.StateLeader:
        progress = get_progress_copy(r)
    return Status(basic, r.trk.config.clone(), progress)
