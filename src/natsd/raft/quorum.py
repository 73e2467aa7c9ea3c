"""Ports etcd-io/raft v3.7.0 quorum/ (quorum.go, majority.go, joint.go, voteresult_string.go)
(Apache-2.0).

Go's ``Index`` is a plain int here; ``index_str`` is its ``String()``. ``MajorityConfig`` (a
Go map used as a set) wraps a ``set[int]``; ``JointConfig`` (a Go ``[2]MajorityConfig``)
keeps its two halves as attributes and can be indexed with 0 and 1 like the Go array.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from enum import IntEnum
from typing import Final

# The Index a MajorityConfig without voters commits: math.MaxUint64, printed as ∞, so that
# the empty half of a joint quorum defers to the other half.
MAX_INDEX: Final = 2**64 - 1


def index_str(i: int) -> str:
    """Index.String(): the log position, or ∞ for math.MaxUint64."""
    if i == MAX_INDEX:
        return "∞"
    return str(i)


class AckedIndexer:
    """Looks up a commit index for a given ID of a voter from a corresponding
    MajorityConfig. A base class rather than a Protocol so that compiled subclasses are
    called through the vtable."""

    __slots__ = ()

    def acked_index(self, voter_id: int) -> tuple[int, bool]:
        raise NotImplementedError


class MapAckIndexer(AckedIndexer):
    """mapAckIndexer: an AckedIndexer over a plain dict of voter ID to index."""

    __slots__ = ("m",)

    def __init__(self, m: dict[int, int] | None = None) -> None:
        self.m: dict[int, int] = m if m is not None else {}

    def acked_index(self, voter_id: int) -> tuple[int, bool]:
        idx = self.m.get(voter_id)
        if idx is None:
            return 0, False
        return idx, True


class VoteResult(IntEnum):
    """The outcome of a vote. ``str()`` is the stringer output of the Go type."""

    # VotePending indicates that the decision of the vote depends on future votes, i.e.
    # neither "yes" or "no" has reached quorum yet.
    VotePending = 1
    # VoteLost indicates that the quorum has voted "no".
    VoteLost = 2
    # VoteWon indicates that the quorum has voted "yes".
    VoteWon = 3

    def __str__(self) -> str:
        return self.name


VotePending: Final = VoteResult.VotePending
VoteLost: Final = VoteResult.VoteLost
VoteWon: Final = VoteResult.VoteWon


class MajorityConfig:
    """A set of IDs that uses majority quorums to make decisions."""

    __slots__ = ("ids",)

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self.ids: set[int] = set(ids)

    # The Go map operations.
    def __len__(self) -> int:
        return len(self.ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids)

    def __contains__(self, voter_id: object) -> bool:
        return voter_id in self.ids

    def add(self, voter_id: int) -> None:
        self.ids.add(voter_id)

    def discard(self, voter_id: int) -> None:
        self.ids.discard(voter_id)

    def copy(self) -> MajorityConfig:
        return MajorityConfig(self.ids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MajorityConfig):
            return NotImplemented
        return self.ids == other.ids

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return "(" + " ".join(f"{i:x}" for i in sorted(self.ids)) + ")"

    def __repr__(self) -> str:
        return f"MajorityConfig{self}"

    def describe(self, l: AckedIndexer) -> str:  # noqa: E741 (upstream's name)
        """A (multi-line) representation of the commit indexes for the given lookuper."""
        n = len(self.ids)
        if n == 0:
            return "<empty majority quorum>"
        # (id, idx, ok: idx found?)
        info: list[tuple[int, int, bool]] = []
        for voter_id in self.ids:
            idx, ok = l.acked_index(voter_id)
            info.append((voter_id, idx, ok))
        # Populate the bars so that the i-th largest commit index has bar i (we plot this as
        # sort of a progress bar), and equal index => equal bar.
        info.sort(key=lambda t: (t[1], t[0]))
        bars: dict[int, int] = {info[0][0]: 0}
        for i in range(1, len(info)):
            if info[i - 1][1] < info[i][1]:
                bars[info[i][0]] = i
            else:
                bars[info[i][0]] = bars[info[i - 1][0]]
        info.sort(key=lambda t: t[0])
        out = [" " * n + "    idx\n"]
        for voter_id, idx, ok in info:
            bar = bars[voter_id]
            if not ok:
                out.append("?" + " " * n)
            else:
                out.append("x" * bar + ">" + " " * (n - bar))
            out.append(f" {idx:5d}    (id={voter_id:x})\n")
        return "".join(out)

    def slice(self) -> list[int]:
        """Slice returns the MajorityConfig as a sorted list."""
        return sorted(self.ids)

    def committed_index(self, l: AckedIndexer) -> int:  # noqa: E741 (upstream's name)
        """The committed index from those supplied via the provided AckedIndexer (for the
        active config)."""
        n = len(self.ids)
        if n == 0:
            # This plays well with joint quorums which, when one half is the zero
            # MajorityConfig, should behave like the other half.
            return MAX_INDEX
        # Voters that have not reported in count as zero; they end up on the left after
        # sorting anyway.
        srt = [0] * n
        i = n - 1
        for voter_id in self.ids:
            idx, ok = l.acked_index(voter_id)
            if ok:
                srt[i] = idx
                i -= 1
        srt.sort()
        # The smallest index into the array for which the value is acked by a quorum. In
        # other words, from the end of the slice, move n/2+1 to the left (accounting for
        # zero-indexing).
        return srt[n - (n // 2 + 1)]

    def vote_result(self, votes: dict[int, bool]) -> VoteResult:
        """Takes a mapping of voters to yes/no (true/false) votes and returns whether the
        vote is pending (neither a quorum of yes nor of no has been reached), won (a quorum
        of yes) or lost (a quorum of no)."""
        if len(self.ids) == 0:
            # By convention, the elections on an empty config win. This comes in handy with
            # joint quorums because it'll make a half-populated joint quorum behave like a
            # majority quorum.
            return VoteWon
        voted_cnt = 0  # vote counts for yes.
        missing = 0
        for voter_id in self.ids:
            v = votes.get(voter_id)
            if v is None:
                missing += 1
                continue
            if v:
                voted_cnt += 1
        q = len(self.ids) // 2 + 1
        if voted_cnt >= q:
            return VoteWon
        if voted_cnt + missing >= q:
            return VotePending
        return VoteLost


class JointConfig:
    """A configuration of two groups of (possibly overlapping) majority configurations.
    Decisions require the support of both majorities. ``c[0]`` is the incoming config,
    ``c[1]`` the outgoing one (empty unless joint)."""

    __slots__ = ("incoming", "outgoing")

    def __init__(
        self, incoming: MajorityConfig | None = None, outgoing: MajorityConfig | None = None
    ) -> None:
        self.incoming: MajorityConfig = incoming if incoming is not None else MajorityConfig()
        self.outgoing: MajorityConfig = outgoing if outgoing is not None else MajorityConfig()

    def __getitem__(self, i: int) -> MajorityConfig:
        if i == 0:
            return self.incoming
        if i == 1:
            return self.outgoing
        raise IndexError(i)

    def __setitem__(self, i: int, c: MajorityConfig) -> None:
        if i == 0:
            self.incoming = c
        elif i == 1:
            self.outgoing = c
        else:
            raise IndexError(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JointConfig):
            return NotImplemented
        return self.incoming == other.incoming and self.outgoing == other.outgoing

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        if len(self.outgoing) > 0:
            return str(self.incoming) + "&&" + str(self.outgoing)
        return str(self.incoming)

    def __repr__(self) -> str:
        return f"JointConfig{self}"

    def ids(self) -> set[int]:
        """IDs returns a new set of the voters present in the joint configuration."""
        return self.incoming.ids | self.outgoing.ids

    def describe(self, l: AckedIndexer) -> str:  # noqa: E741 (upstream's name)
        """A (multi-line) representation of the commit indexes for the given lookuper."""
        return MajorityConfig(self.ids()).describe(l)

    def committed_index(self, l: AckedIndexer) -> int:  # noqa: E741 (upstream's name)
        """The largest committed index for the given joint quorum. An index is jointly
        committed if it is committed in both constituent majorities."""
        idx0 = self.incoming.committed_index(l)
        idx1 = self.outgoing.committed_index(l)
        if idx0 < idx1:
            return idx0
        return idx1

    def vote_result(self, votes: dict[int, bool]) -> VoteResult:
        """Whether the vote is pending, lost, or won. A joint quorum requires both majority
        quorums to vote in favor."""
        r1 = self.incoming.vote_result(votes)
        r2 = self.outgoing.vote_result(votes)
        if r1 == r2:
            # If they agree, return the agreed state.
            return r1
        if r1 == VoteLost or r2 == VoteLost:
            # If either config has lost, loss is the only possible outcome.
            return VoteLost
        # One side won, the other one is pending, so the whole outcome is.
        return VotePending
