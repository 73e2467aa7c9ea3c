"""Ports etcd-io/raft v3.7.0 raftpb/ (raft.proto, alias.go, confchange.go, confstate.go,
util.go) (Apache-2.0).

The protobuf messages become plain classes with ``__slots__``. Go's proto2 pointers (a field
may be unset) become plain values whose zero value stands for "unset", which is what every
``GetX()`` call in upstream reads anyway; the one pointer that is tested for nil,
``Message.Snapshot``, stays optional. The enums are ``IntEnum`` classes with Go's names, so
``MessageType.MsgApp.name`` is Go's ``String()``; the module-level aliases mirror alias.go.

The wire form (protobuf upstream) is not here: ``MarshalConfChange`` and the codec belong to
``natsd.raft.codec``. ``IsEmptySnap``, ``IsEmptyHardState`` and ``isHardStateEqual`` come from
node.go (the rest of node.go is not ported) because every layer above needs them.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final, TypeAlias

# None is a placeholder node ID used when there is no leader (raft.go).
NONE: Final = 0


class EntryType(IntEnum):
    EntryNormal = 0
    EntryConfChange = 1  # corresponds to ConfChange
    EntryConfChangeV2 = 2  # corresponds to ConfChangeV2


class MessageType(IntEnum):
    MsgHup = 0
    MsgBeat = 1
    MsgProp = 2
    MsgApp = 3
    MsgAppResp = 4
    MsgVote = 5
    MsgVoteResp = 6
    MsgSnap = 7
    MsgHeartbeat = 8
    MsgHeartbeatResp = 9
    MsgUnreachable = 10
    MsgSnapStatus = 11
    MsgCheckQuorum = 12
    MsgTransferLeader = 13
    MsgTimeoutNow = 14
    MsgReadIndex = 15
    MsgReadIndexResp = 16
    MsgPreVote = 17
    MsgPreVoteResp = 18
    MsgStorageAppend = 19
    MsgStorageAppendResp = 20
    MsgStorageApply = 21
    MsgStorageApplyResp = 22
    MsgForgetLeader = 23
    # NOTE (upstream): when adding new message types, remember to update the isLocalMsg and
    # isResponseMsg arrays in util.go.


class ConfChangeTransition(IntEnum):
    # Automatically use the simple protocol if possible, otherwise fall back to
    # ConfChangeJointImplicit. Most applications will want to use this.
    ConfChangeTransitionAuto = 0
    # Use joint consensus unconditionally, and transition out of them automatically (by
    # proposing a zero configuration change).
    ConfChangeTransitionJointImplicit = 1
    # Use joint consensus and remain in the joint configuration until the application
    # proposes a no-op configuration change.
    ConfChangeTransitionJointExplicit = 2


class ConfChangeType(IntEnum):
    ConfChangeAddNode = 0
    ConfChangeRemoveNode = 1
    ConfChangeUpdateNode = 2
    ConfChangeAddLearnerNode = 3


# alias.go
EntryNormal: Final = EntryType.EntryNormal
EntryConfChange: Final = EntryType.EntryConfChange
EntryConfChangeV2: Final = EntryType.EntryConfChangeV2

MsgHup: Final = MessageType.MsgHup
MsgBeat: Final = MessageType.MsgBeat
MsgProp: Final = MessageType.MsgProp
MsgApp: Final = MessageType.MsgApp
MsgAppResp: Final = MessageType.MsgAppResp
MsgVote: Final = MessageType.MsgVote
MsgVoteResp: Final = MessageType.MsgVoteResp
MsgSnap: Final = MessageType.MsgSnap
MsgHeartbeat: Final = MessageType.MsgHeartbeat
MsgHeartbeatResp: Final = MessageType.MsgHeartbeatResp
MsgUnreachable: Final = MessageType.MsgUnreachable
MsgSnapStatus: Final = MessageType.MsgSnapStatus
MsgCheckQuorum: Final = MessageType.MsgCheckQuorum
MsgTransferLeader: Final = MessageType.MsgTransferLeader
MsgTimeoutNow: Final = MessageType.MsgTimeoutNow
MsgReadIndex: Final = MessageType.MsgReadIndex
MsgReadIndexResp: Final = MessageType.MsgReadIndexResp
MsgPreVote: Final = MessageType.MsgPreVote
MsgPreVoteResp: Final = MessageType.MsgPreVoteResp
MsgStorageAppend: Final = MessageType.MsgStorageAppend
MsgStorageAppendResp: Final = MessageType.MsgStorageAppendResp
MsgStorageApply: Final = MessageType.MsgStorageApply
MsgStorageApplyResp: Final = MessageType.MsgStorageApplyResp
MsgForgetLeader: Final = MessageType.MsgForgetLeader

ConfChangeTransitionAuto: Final = ConfChangeTransition.ConfChangeTransitionAuto
ConfChangeTransitionJointImplicit: Final = ConfChangeTransition.ConfChangeTransitionJointImplicit
ConfChangeTransitionJointExplicit: Final = ConfChangeTransition.ConfChangeTransitionJointExplicit

ConfChangeAddNode: Final = ConfChangeType.ConfChangeAddNode
ConfChangeRemoveNode: Final = ConfChangeType.ConfChangeRemoveNode
ConfChangeUpdateNode: Final = ConfChangeType.ConfChangeUpdateNode
ConfChangeAddLearnerNode: Final = ConfChangeType.ConfChangeAddLearnerNode


class Entry:
    __slots__ = ("data", "index", "term", "type")

    def __init__(
        self,
        term: int = 0,
        index: int = 0,
        type: EntryType = EntryType.EntryNormal,
        data: bytes = b"",
    ) -> None:
        self.term = term
        self.index = index
        self.type = type
        self.data = data

    def clone(self) -> Entry:
        """proto.Clone: a shallow copy suffices as ``data`` is immutable bytes."""
        return Entry(self.term, self.index, self.type, self.data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Entry):
            return NotImplemented
        return (
            self.term == other.term
            and self.index == other.index
            and self.type == other.type
            and self.data == other.data
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Entry(term={self.term}, index={self.index}, type={self.type.name}, "
            f"data={self.data!r})"
        )


class ConfState:
    __slots__ = ("auto_leave", "learners", "learners_next", "voters", "voters_outgoing")

    def __init__(
        self,
        voters: list[int] | None = None,
        learners: list[int] | None = None,
        voters_outgoing: list[int] | None = None,
        learners_next: list[int] | None = None,
        auto_leave: bool = False,
    ) -> None:
        # The voters in the incoming config. (If the configuration is not joint, then the
        # outgoing config is empty.)
        self.voters: list[int] = voters if voters is not None else []
        # The learners in the incoming config.
        self.learners: list[int] = learners if learners is not None else []
        # The voters in the outgoing config.
        self.voters_outgoing: list[int] = voters_outgoing if voters_outgoing is not None else []
        # The nodes that will become learners when the outgoing config is removed. These
        # nodes are necessarily currently in nodes_joint (or they would have been added to
        # the incoming config right away).
        self.learners_next: list[int] = learners_next if learners_next is not None else []
        # If set, the config is joint and Raft will automatically transition into the final
        # config (i.e. remove the outgoing config) when this is safe.
        self.auto_leave = auto_leave

    def clone(self) -> ConfState:
        return ConfState(
            list(self.voters),
            list(self.learners),
            list(self.voters_outgoing),
            list(self.learners_next),
            self.auto_leave,
        )

    def equivalent(self, cs2: ConfState) -> str | None:
        """Equivalent: None if both describe the same configuration (order of the ids does
        not matter), else a message showing the differences (Go returns an error)."""
        a = (
            sorted(self.voters),
            sorted(self.learners),
            sorted(self.voters_outgoing),
            sorted(self.learners_next),
            self.auto_leave,
        )
        b = (
            sorted(cs2.voters),
            sorted(cs2.learners),
            sorted(cs2.voters_outgoing),
            sorted(cs2.learners_next),
            cs2.auto_leave,
        )
        if a == b:
            return None
        sa = ConfState(a[0], a[1], a[2], a[3], a[4])
        sb = ConfState(b[0], b[1], b[2], b[3], b[4])
        return (
            "ConfStates not equivalent after sorting:\n"
            f"{sa.go_string()}\n{sb.go_string()}\nInputs were:\n"
            f"{self.go_string()}\n{cs2.go_string()}"
        )

    def go_string(self) -> str:
        """Roughly Go's ``%+#v`` (the pointers Go would print are left out)."""

        def ids(v: list[int]) -> str:
            return "[]uint64{" + ", ".join(f"0x{i:x}" for i in v) + "}"

        return (
            f"&raftpb.ConfState{{Voters:{ids(self.voters)}, Learners:{ids(self.learners)}, "
            f"VotersOutgoing:{ids(self.voters_outgoing)}, LearnersNext:{ids(self.learners_next)}, "
            f"AutoLeave:{'true' if self.auto_leave else 'false'}}}"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfState):
            return NotImplemented
        return (
            self.voters == other.voters
            and self.learners == other.learners
            and self.voters_outgoing == other.voters_outgoing
            and self.learners_next == other.learners_next
            and self.auto_leave == other.auto_leave
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConfState(voters={self.voters}, learners={self.learners}, "
            f"voters_outgoing={self.voters_outgoing}, learners_next={self.learners_next}, "
            f"auto_leave={self.auto_leave})"
        )


class SnapshotMetadata:
    __slots__ = ("conf_state", "index", "term")

    def __init__(self, conf_state: ConfState | None = None, index: int = 0, term: int = 0) -> None:
        # Never None, as after upstream's EnsureSnapshotMetadata.
        self.conf_state: ConfState = conf_state if conf_state is not None else ConfState()
        self.index = index
        self.term = term

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SnapshotMetadata):
            return NotImplemented
        return (
            self.conf_state == other.conf_state
            and self.index == other.index
            and self.term == other.term
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"SnapshotMetadata(conf_state={self.conf_state!r}, index={self.index}, "
            f"term={self.term})"
        )


class Snapshot:
    __slots__ = ("data", "metadata")

    def __init__(self, data: bytes = b"", metadata: SnapshotMetadata | None = None) -> None:
        self.data = data
        # Never None, as after upstream's EnsureSnapshot.
        self.metadata: SnapshotMetadata = metadata if metadata is not None else SnapshotMetadata()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return self.data == other.data and self.metadata == other.metadata

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Snapshot(data={self.data!r}, metadata={self.metadata!r})"


class HardState:
    __slots__ = ("commit", "term", "vote")

    def __init__(self, term: int = 0, vote: int = 0, commit: int = 0) -> None:
        self.term = term
        self.vote = vote
        self.commit = commit

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HardState):
            return NotImplemented
        return is_hard_state_equal(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HardState(term={self.term}, vote={self.vote}, commit={self.commit})"


class Message:
    __slots__ = (
        "commit",
        "context",
        "entries",
        "from_",
        "index",
        "log_term",
        "reject",
        "reject_hint",
        "responses",
        "snapshot",
        "term",
        "to",
        "type",
        "vote",
    )

    def __init__(
        self,
        type: MessageType = MessageType.MsgHup,
        to: int = 0,
        from_: int = 0,
        term: int = 0,
        log_term: int = 0,
        index: int = 0,
        entries: list[Entry] | None = None,
        commit: int = 0,
        vote: int = 0,
        snapshot: Snapshot | None = None,
        reject: bool = False,
        reject_hint: int = 0,
        context: bytes = b"",
        responses: list[Message] | None = None,
    ) -> None:
        self.type = type
        self.to = to
        self.from_ = from_
        self.term = term
        # logTerm is generally used for appending Raft logs to followers. For example,
        # (type=MsgApp,index=100,logTerm=5) means the leader appends entries starting at
        # index=101, and the term of the entry at index 100 is 5.
        # (type=MsgAppResp,reject=true,index=100,logTerm=5) means follower rejects some
        # entries from its leader as it already has an entry with term 5 at index 100.
        # (type=MsgStorageAppendResp,index=100,logTerm=5) means the local node wrote entries
        # up to index=100 in stable storage, and the term of the entry at index 100 was 5.
        self.log_term = log_term
        self.index = index
        self.entries: list[Entry] = entries if entries is not None else []
        self.commit = commit
        # (type=MsgStorageAppend,vote=5,term=10) means the local node is voting for peer 5
        # in term 10. For MsgStorageAppends, the term, vote, and commit fields will either
        # all be set (to facilitate the construction of a HardState) if any of the fields
        # have changed or will all be unset if none of the fields have changed.
        self.vote = vote
        # Non-None and non-empty for MsgSnap messages and None for all other message types.
        self.snapshot: Snapshot | None = snapshot
        self.reject = reject
        self.reject_hint = reject_hint
        self.context = context
        # Populated by a raft node to instruct storage threads on how to respond and who to
        # respond to when the work associated with a message is complete. Populated for
        # MsgStorageAppend and MsgStorageApply messages.
        self.responses: list[Message] = responses if responses is not None else []

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            self.type == other.type
            and self.to == other.to
            and self.from_ == other.from_
            and self.term == other.term
            and self.log_term == other.log_term
            and self.index == other.index
            and self.entries == other.entries
            and self.commit == other.commit
            and self.vote == other.vote
            and self.snapshot == other.snapshot
            and self.reject == other.reject
            and self.reject_hint == other.reject_hint
            and self.context == other.context
            and self.responses == other.responses
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [
            f"type={self.type.name}",
            f"to={self.to}",
            f"from_={self.from_}",
            f"term={self.term}",
        ]
        if self.log_term:
            parts.append(f"log_term={self.log_term}")
        if self.index:
            parts.append(f"index={self.index}")
        if self.entries:
            parts.append(f"entries={self.entries!r}")
        if self.commit:
            parts.append(f"commit={self.commit}")
        if self.vote:
            parts.append(f"vote={self.vote}")
        if self.snapshot is not None:
            parts.append(f"snapshot={self.snapshot!r}")
        if self.reject:
            parts.append("reject=True")
        if self.reject_hint:
            parts.append(f"reject_hint={self.reject_hint}")
        if self.context:
            parts.append(f"context={self.context!r}")
        if self.responses:
            parts.append(f"responses={self.responses!r}")
        return "Message(" + ", ".join(parts) + ")"


class ConfChange:
    __slots__ = ("context", "id", "node_id", "type")

    def __init__(
        self,
        type: ConfChangeType = ConfChangeType.ConfChangeAddNode,
        node_id: int = 0,
        context: bytes = b"",
        id: int = 0,
    ) -> None:
        self.type = type
        self.node_id = node_id
        self.context = context
        # NB (upstream): this is used only by etcd to thread through a unique identifier.
        # No counterpart to this field exists in ConfChangeV2.
        self.id = id

    def as_v2(self) -> ConfChangeV2:
        """AsV2 returns a V2 configuration change carrying out the same operation."""
        return ConfChangeV2(
            changes=[ConfChangeSingle(self.type, self.node_id)], context=self.context
        )

    def as_v1(self) -> tuple[ConfChange | None, bool]:
        """AsV1 returns the ConfChange and true."""
        return self, True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfChange):
            return NotImplemented
        return (
            self.type == other.type
            and self.node_id == other.node_id
            and self.context == other.context
            and self.id == other.id
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConfChange(type={self.type.name}, node_id={self.node_id}, "
            f"context={self.context!r}, id={self.id})"
        )


class ConfChangeSingle:
    """An individual configuration change operation. Multiple such operations can be carried
    out atomically via a ConfChangeV2."""

    __slots__ = ("node_id", "type")

    def __init__(
        self, type: ConfChangeType = ConfChangeType.ConfChangeAddNode, node_id: int = 0
    ) -> None:
        self.type = type
        self.node_id = node_id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfChangeSingle):
            return NotImplemented
        return self.type == other.type and self.node_id == other.node_id

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ConfChangeSingle(type={self.type.name}, node_id={self.node_id})"


class ConfChangeV2:
    """Initiates configuration changes: the simple "one at a time" membership change protocol
    as well as full Joint Consensus. Leaving a joint configuration is done by proposing a
    ConfChangeV2 with only (optionally) the context set."""

    __slots__ = ("changes", "context", "transition")

    def __init__(
        self,
        transition: ConfChangeTransition = ConfChangeTransition.ConfChangeTransitionAuto,
        changes: list[ConfChangeSingle] | None = None,
        context: bytes = b"",
    ) -> None:
        self.transition = transition
        self.changes: list[ConfChangeSingle] = changes if changes is not None else []
        self.context = context

    def as_v2(self) -> ConfChangeV2:
        """AsV2 is the identity."""
        return self

    def as_v1(self) -> tuple[ConfChange | None, bool]:
        """AsV1 returns None and False."""
        return None, False

    def enter_joint(self) -> tuple[bool, bool]:
        """EnterJoint returns (auto_leave, ok). ok is true if and only if this config change
        will use Joint Consensus, which is the case if it contains more than one change or if
        the use of Joint Consensus was requested explicitly. auto_leave can only be true if
        ok is, and indicates whether the Joint State will be left automatically."""
        # NB (upstream): in theory, more config changes could qualify for the "simple"
        # protocol but it depends on the config on top of which the changes apply. In
        # practice these distinctions should not matter, so Joint Consensus is used
        # liberally.
        if self.transition != ConfChangeTransitionAuto or len(self.changes) > 1:
            if self.transition in (ConfChangeTransitionAuto, ConfChangeTransitionJointImplicit):
                auto_leave = True
            elif self.transition == ConfChangeTransitionJointExplicit:
                auto_leave = False
            else:
                raise ValueError(f"unknown transition: {self!r}")
            return auto_leave, True
        return False, False

    def leave_joint(self) -> bool:
        """LeaveJoint is true if the configuration change leaves a joint configuration. This
        is the case if the ConfChangeV2 is zero, with the possible exception of the context."""
        return self.transition == ConfChangeTransitionAuto and len(self.changes) == 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfChangeV2):
            return NotImplemented
        return (
            self.transition == other.transition
            and self.changes == other.changes
            and self.context == other.context
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ConfChangeV2(transition={self.transition.name}, changes={self.changes!r}, "
            f"context={self.context!r})"
        )


# ConfChangeI abstracts over ConfChangeV2 and (legacy) ConfChange to allow treating them in a
# unified manner: both have as_v2() and as_v1().
ConfChangeI: TypeAlias = ConfChange | ConfChangeV2


def _parse_uint(s: str) -> int:
    """strconv.ParseUint(s, 10, 64), with Go's error text."""
    if s == "" or not all("0" <= ch <= "9" for ch in s):
        raise ValueError(f'strconv.ParseUint: parsing "{s}": invalid syntax')
    v = int(s)
    if v > 2**64 - 1:
        raise ValueError(f'strconv.ParseUint: parsing "{s}": value out of range')
    return v


def conf_changes_from_string(s: str) -> list[ConfChangeSingle]:
    """ConfChangesFromString parses a space-delimited sequence of operations into a list of
    ConfChangeSingle. The supported operations are: vn (make n a voter), ln (make n a
    learner), rn (remove n) and un (update n). Raises ValueError on bad input."""
    ccs: list[ConfChangeSingle] = []
    # Go's strings.TrimSpace then strings.Split(" "): consecutive spaces give empty tokens,
    # which are refused like any token shorter than two characters.
    toks = s.strip(" \t\n\r\v\f").split(" ")
    if toks[0] == "":
        toks = []
    for tok in toks:
        if len(tok) < 2:
            raise ValueError(f"unknown token {tok}")
        c = tok[0]
        if c == "v":
            typ = ConfChangeAddNode
        elif c == "l":
            typ = ConfChangeAddLearnerNode
        elif c == "r":
            typ = ConfChangeRemoveNode
        elif c == "u":
            typ = ConfChangeUpdateNode
        else:
            raise ValueError(f"unknown input: {tok}")
        ccs.append(ConfChangeSingle(typ, _parse_uint(tok[1:])))
    return ccs


def conf_changes_to_string(ccs: list[ConfChangeSingle]) -> str:
    """ConfChangesToString is the inverse to ConfChangesFromString."""
    out: list[str] = []
    for cc in ccs:
        t = cc.type
        if t == ConfChangeAddNode:
            p = "v"
        elif t == ConfChangeAddLearnerNode:
            p = "l"
        elif t == ConfChangeRemoveNode:
            p = "r"
        elif t == ConfChangeUpdateNode:
            p = "u"
        else:
            p = "unknown"
        out.append(f"{p}{cc.node_id}")
    return " ".join(out)


# node.go


def is_hard_state_equal(a: HardState, b: HardState) -> bool:
    return a.term == b.term and a.vote == b.vote and a.commit == b.commit


def is_empty_hard_state(st: HardState | None) -> bool:
    """IsEmptyHardState returns true if the given HardState is empty."""
    return st is None or (st.term == 0 and st.vote == 0 and st.commit == 0)


def is_empty_snap(sp: Snapshot | None) -> bool:
    """IsEmptySnap returns true if the given Snapshot is empty."""
    return sp is None or sp.metadata.index == 0
