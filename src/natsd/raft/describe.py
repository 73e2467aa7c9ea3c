"""Ports etcd-io/raft v3.7.0 util.go's describe helpers and message predicates (Apache-2.0).

The descriptions are what the conformance scripts print (Ready, messages, entries, conf
states), so the text is Go's to the byte: ``%q`` of entry data is :func:`go_quote`, an
enum's ``%v`` its Go name, a ``[]uint64`` ``[1 2 3]``. The size helpers of util.go are in
``natsd.raft.codec`` (entsSize, limitSize: protobuf sizes) and ``natsd.raft.log``
(payloadSize, payloadsSize, extend).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

from natsd.raft.codec import ProtoError, unmarshal_conf_change, unmarshal_conf_change_v2
from natsd.raft.logger import RaftPanic, go_quote, go_value
from natsd.raft.types import (
    NONE,
    ConfChangeI,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    conf_changes_to_string,
    is_empty_hard_state,
    is_empty_snap,
)

__all__ = [
    "LOCAL_APPEND_THREAD",
    "LOCAL_APPLY_THREAD",
    "EntryFormatter",
    "ReadyLike",
    "SoftStateLike",
    "describe_conf_change",
    "describe_conf_state",
    "describe_entries",
    "describe_entry",
    "describe_hard_state",
    "describe_message",
    "describe_ready",
    "describe_snapshot",
    "describe_soft_state",
    "describe_target",
    "go_quote",
    "is_local_msg",
    "is_local_msg_target",
    "is_response_msg",
    "vote_resp_msg_type",
]

# raft.go: the pseudo node ids of the local storage threads (messages to and from them are
# local). Here because describe_target needs them; raft.go's port should import these.
LOCAL_APPEND_THREAD: Final = 2**64 - 1
LOCAL_APPLY_THREAD: Final = 2**64 - 2

# EntryFormatter can be provided by the application to give a human-readable form of entry
# data. None is valid and formats the data with Go's %q.
EntryFormatter = Callable[[bytes], str] | None


_LOCAL_MSGS: Final = frozenset(
    {
        MessageType.MsgHup,
        MessageType.MsgBeat,
        MessageType.MsgUnreachable,
        MessageType.MsgSnapStatus,
        MessageType.MsgCheckQuorum,
        MessageType.MsgStorageAppend,
        MessageType.MsgStorageAppendResp,
        MessageType.MsgStorageApply,
        MessageType.MsgStorageApplyResp,
    }
)

_RESPONSE_MSGS: Final = frozenset(
    {
        MessageType.MsgAppResp,
        MessageType.MsgVoteResp,
        MessageType.MsgHeartbeatResp,
        MessageType.MsgUnreachable,
        MessageType.MsgReadIndexResp,
        MessageType.MsgPreVoteResp,
        MessageType.MsgStorageAppendResp,
        MessageType.MsgStorageApplyResp,
    }
)


def is_local_msg(msgt: MessageType) -> bool:
    return msgt in _LOCAL_MSGS


def is_response_msg(msgt: MessageType) -> bool:
    return msgt in _RESPONSE_MSGS


def is_local_msg_target(id: int) -> bool:
    return id == LOCAL_APPEND_THREAD or id == LOCAL_APPLY_THREAD


def vote_resp_msg_type(msgt: MessageType) -> MessageType:
    """voteRespMsgType maps vote and prevote message types to their corresponding
    responses."""
    if msgt == MessageType.MsgVote:
        return MessageType.MsgVoteResp
    if msgt == MessageType.MsgPreVote:
        return MessageType.MsgPreVoteResp
    raise RaftPanic(f"not a vote message: {go_value(msgt)}")


def describe_hard_state(hs: HardState) -> str:
    s = f"Term:{hs.term}"
    if hs.vote != 0:
        s += f" Vote:{hs.vote}"
    return s + f" Commit:{hs.commit}"


class SoftStateLike(Protocol):
    """node.go's SoftState: the leader and the role (a StateType, whose Go name %s
    prints)."""

    @property
    def lead(self) -> int: ...

    @property
    def raft_state(self) -> object: ...


def describe_soft_state(ss: SoftStateLike) -> str:
    return f"Lead:{ss.lead} State:{go_value(ss.raft_state)}"


def describe_conf_state(state: ConfState) -> str:
    return (
        f"Voters:{go_value(state.voters)} VotersOutgoing:{go_value(state.voters_outgoing)} "
        f"Learners:{go_value(state.learners)} LearnersNext:{go_value(state.learners_next)} "
        f"AutoLeave:{'true' if state.auto_leave else 'false'}"
    )


def describe_snapshot(snap: Snapshot) -> str:
    m = snap.metadata
    return f"Index:{m.index} Term:{m.term} ConfState:{describe_conf_state(m.conf_state)}"


class ReadyLike(Protocol):
    """node.go's Ready, as much as DescribeReady reads. A read state's ``__str__`` must be
    Go's ``%v`` of the ReadState struct (``{index [request ctx bytes]}``)."""

    @property
    def soft_state(self) -> SoftStateLike | None: ...

    @property
    def hard_state(self) -> HardState | None: ...

    @property
    def read_states(self) -> Sequence[object]: ...

    @property
    def entries(self) -> Sequence[Entry]: ...

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def committed_entries(self) -> Sequence[Entry]: ...

    @property
    def messages(self) -> Sequence[Message]: ...

    @property
    def must_sync(self) -> bool: ...


def describe_ready(rd: ReadyLike, f: EntryFormatter) -> str:
    buf: list[str] = []
    if rd.soft_state is not None:
        buf.append(describe_soft_state(rd.soft_state))
        buf.append("\n")
    if not is_empty_hard_state(rd.hard_state) and rd.hard_state is not None:
        buf.append(f"HardState {describe_hard_state(rd.hard_state)}\n")
    if len(rd.read_states) > 0:
        buf.append(f"ReadStates {go_value(list(rd.read_states))}\n")
    if len(rd.entries) > 0:
        buf.append("Entries:\n")
        buf.append(describe_entries(rd.entries, f))
    if not is_empty_snap(rd.snapshot) and rd.snapshot is not None:
        buf.append(f"Snapshot {describe_snapshot(rd.snapshot)}\n")
    if len(rd.committed_entries) > 0:
        buf.append("CommittedEntries:\n")
        buf.append(describe_entries(rd.committed_entries, f))
    if len(rd.messages) > 0:
        buf.append("Messages:\n")
        for msg in rd.messages:
            buf.append(describe_message(msg, f))
            buf.append("\n")
    if buf:
        must_sync = "true" if rd.must_sync else "false"
        return f"Ready MustSync={must_sync}:\n" + "".join(buf)
    return "<empty Ready>"


def describe_message(m: Message, f: EntryFormatter) -> str:
    """DescribeMessage returns a concise human-readable description of a Message for
    debugging."""
    return _describe_message_with_indent("", m, f)


def _describe_message_with_indent(indent: str, m: Message, f: EntryFormatter) -> str:
    buf = [
        f"{indent}{describe_target(m.from_)}->{describe_target(m.to)} {m.type.name} "
        f"Term:{m.term} Log:{m.log_term}/{m.index}"
    ]
    if m.reject:
        buf.append(f" Rejected (Hint: {m.reject_hint})")
    if m.commit != 0:
        buf.append(f" Commit:{m.commit}")
    if m.vote != 0:
        buf.append(f" Vote:{m.vote}")
    ents = m.entries
    if len(ents) == 1:
        buf.append(f" Entries:[{describe_entry(ents[0], f)}]")
    elif len(ents) > 1:
        buf.append(" Entries:[")
        for e in ents:
            buf.append(f"\n{indent}  ")
            buf.append(describe_entry(e, f))
        buf.append(f"\n{indent}]")
    s = m.snapshot
    if s is not None and not is_empty_snap(s):
        buf.append(f"\n{indent}  Snapshot: {describe_snapshot(s)}")
    if len(m.responses) > 0:
        buf.append(" Responses:[")
        for r in m.responses:
            buf.append("\n")
            buf.append(_describe_message_with_indent(indent + "  ", r, f))
        buf.append(f"\n{indent}]")
    return "".join(buf)


def describe_target(id: int) -> str:
    if id == NONE:
        return "None"
    if id == LOCAL_APPEND_THREAD:
        return "AppendThread"
    if id == LOCAL_APPLY_THREAD:
        return "ApplyThread"
    return f"{id:x}"


def describe_entry(e: Entry, f: EntryFormatter) -> str:
    """DescribeEntry returns a concise human-readable description of an Entry for
    debugging."""
    formatted = ""
    t = e.type
    if t == EntryType.EntryNormal:
        formatted = go_quote(e.data) if f is None else f(e.data)
    elif t == EntryType.EntryConfChange:
        try:
            formatted = conf_changes_to_string(unmarshal_conf_change(e.data).as_v2().changes)
        except ProtoError as err:
            formatted = str(err)
    elif t == EntryType.EntryConfChangeV2:
        try:
            formatted = conf_changes_to_string(unmarshal_conf_change_v2(e.data).changes)
        except ProtoError as err:
            formatted = str(err)
    if formatted != "":
        formatted = " " + formatted
    return f"{e.term}/{e.index} {t.name}{formatted}"


def describe_conf_change(cc: ConfChangeI) -> str:
    """DescribeConfChange returns a deterministic, human-readable representation of a
    conf change (upstream avoids the protobuf text format, whose spacing varies)."""
    cv2 = cc.as_v2()
    out = [f"transition:{cv2.transition.name}"]
    for c in cv2.changes:
        out.append(f" changes:{{type:{c.type.name} node_id:{c.node_id}}}")
    if len(cv2.context) > 0:
        out.append(f" context:{go_quote(cv2.context)}")
    return "".join(out)


def describe_entries(ents: Sequence[Entry], f: EntryFormatter) -> str:
    """DescribeEntries calls DescribeEntry for each Entry, adding a newline to each."""
    return "".join(describe_entry(e, f) + "\n" for e in ents)
