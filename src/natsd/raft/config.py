"""Ports etcd-io/raft v3.7.0 raft.go's Config and its validate() (Apache-2.0): the
parameters to start a raft. ``natsd.raft.core`` re-exports them."""

from __future__ import annotations

from natsd.raft.describe import is_local_msg_target
from natsd.raft.log import NO_LIMIT
from natsd.raft.logger import Logger, get_logger
from natsd.raft.read_only import ReadOnlyLeaseBased, ReadOnlyOption
from natsd.raft.storage import Storage
from natsd.raft.types import NONE

__all__ = ["Config", "ConfigError"]


class ConfigError(ValueError):
    """Config.validate's error (Go returns it; newRaft panics with its text)."""


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
