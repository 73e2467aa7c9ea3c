"""Ports etcd-io/raft v3.7.0 read_only.go (Apache-2.0): the leader's bookkeeping of
linearizable read-only requests (ReadOnlySafe confirms them with a heartbeat round)."""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from natsd.raft.logger import go_value
from natsd.raft.quorum import AckedIndexer, JointConfig
from natsd.raft.types import Message

__all__ = [
    "ReadIndexRequest",
    "ReadOnly",
    "ReadOnlyLeaseBased",
    "ReadOnlyOption",
    "ReadOnlySafe",
    "ReadState",
]


class ReadOnlyOption(IntEnum):
    # ReadOnlySafe guarantees the linearizability of the read only request by communicating
    # with the quorum. It is the default and suggested option.
    ReadOnlySafe = 0
    # ReadOnlyLeaseBased ensures linearizability of the read only request by relying on the
    # leader lease. It can be affected by clock drift. If the clock drift is unbounded,
    # leader might keep the lease longer than it should (clock can move backward/pause
    # without any bound). ReadIndex is not safe in that case.
    ReadOnlyLeaseBased = 1


ReadOnlySafe: Final = ReadOnlyOption.ReadOnlySafe
ReadOnlyLeaseBased: Final = ReadOnlyOption.ReadOnlyLeaseBased


class ReadState:
    """Provides state for read only query. It's the caller's responsibility to call
    read_index first before getting this state from ready; it's also the caller's duty to
    differentiate if this state is what it requests through request_ctx, eg. given a unique
    id as request_ctx."""

    __slots__ = ("index", "request_ctx")

    def __init__(self, index: int = 0, request_ctx: bytes = b"") -> None:
        self.index = index
        self.request_ctx = request_ctx

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReadState):
            return NotImplemented
        return self.index == other.index and self.request_ctx == other.request_ctx

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        # Go's %v of the struct: {Index RequestCtx}.
        return "{" + str(self.index) + " " + go_value(self.request_ctx) + "}"

    def __repr__(self) -> str:
        return f"ReadState(index={self.index}, request_ctx={self.request_ctx!r})"


class ReadIndexRequest:
    __slots__ = ("index", "req")

    def __init__(self, req: Message, index: int) -> None:
        self.req = req
        self.index = index


class ReadOnly(AckedIndexer):
    """Tracks the read-only requests, each confirmed by a quorum's heartbeat acks."""

    __slots__ = ("acks", "confirmed_reads", "option", "unconfirmed_reads")

    def __init__(self, option: ReadOnlyOption) -> None:
        """newReadOnly."""
        self.option = option
        # acks[id] is the largest read position (see heartbeat_ctx) that node id has acked.
        self.acks: dict[int, int] = {}
        # unconfirmed_reads are the read requests not yet confirmed by a quorum, in order.
        self.unconfirmed_reads: list[ReadIndexRequest] = []
        # confirmed_reads counts the requests confirmed so far (the position of
        # unconfirmed_reads[0] in the sequence of all requests).
        self.confirmed_reads = 0

    def add_request(self, commit_index: int, req: Message) -> None:
        """Adds a read only request into readonly struct. `commit_index` is the commit index
        of the raft state machine when it received the read only request."""
        self.unconfirmed_reads.append(ReadIndexRequest(req, commit_index))

    def recv_ack(self, from_: int, ctx: bytes) -> None:
        """Notifies the readonly struct that the raft state machine received an
        acknowledgment of the heartbeat that carried the read position ctx."""
        if len(ctx) != 0:
            v = int.from_bytes(ctx[:8], "little")
            # Go's max(acks[from], v) stores the key even when v is 0 (acked_index finds it).
            self.acks[from_] = max(self.acks.get(from_, 0), v)

    def acked_index(self, voter_id: int) -> tuple[int, bool]:
        idx = self.acks.get(voter_id)
        if idx is None:
            return 0, False
        return idx, True

    def maybe_advance(self, c: JointConfig) -> list[ReadIndexRequest]:
        """Advances the confirmed reads to what a quorum acked, and returns the requests
        just confirmed (in order)."""
        new_confirmed_reads = c.committed_index(self)
        if new_confirmed_reads <= self.confirmed_reads:
            return []
        n = new_confirmed_reads - self.confirmed_reads
        read_states = self.unconfirmed_reads[:n]
        self.unconfirmed_reads = self.unconfirmed_reads[n:]
        self.confirmed_reads = new_confirmed_reads
        return read_states

    def heartbeat_ctx(self) -> bytes:
        """The context for the next heartbeat: the position just past the last unconfirmed
        read (little-endian uint64), or empty when no read waits."""
        if len(self.unconfirmed_reads) == 0:
            return b""
        pos = self.confirmed_reads + len(self.unconfirmed_reads)
        return pos.to_bytes(8, "little")
