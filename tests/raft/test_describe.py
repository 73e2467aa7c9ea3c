"""Go's formatting (strconv.Quote, fmt's verbs) and util.go's describe helpers, checked
against strings copied from etcd-io/raft v3.7.0's util_test.go and conformance scripts."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import pytest
from entry_helpers import CaptureLogger

from natsd.raft.codec import marshal_conf_change
from natsd.raft.describe import (
    LOCAL_APPEND_THREAD,
    LOCAL_APPLY_THREAD,
    describe_conf_change,
    describe_conf_state,
    describe_entries,
    describe_entry,
    describe_hard_state,
    describe_message,
    describe_ready,
    describe_snapshot,
    describe_target,
    go_quote,
    is_local_msg,
    is_local_msg_target,
    is_response_msg,
    vote_resp_msg_type,
)
from natsd.raft.log_unstable import EntryID
from natsd.raft.logger import (
    DiscardLogger,
    RaftPanic,
    get_logger,
    go_sprint,
    go_sprintf,
    go_sprintln,
    reset_default_logger,
    set_logger,
)
from natsd.raft.storage import MemoryStorage
from natsd.raft.types import (
    ConfChange,
    ConfChangeTransition,
    ConfChangeType,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
    conf_changes_from_string,
)

# strconv.Quote's rules, case by case (the expected strings are what Go prints).
QUOTE_CASES = [
    (b"", '""'),
    (b"prop_1", '"prop_1"'),
    (b"hello\x00world", r'"hello\x00world"'),  # util_test.go TestDescribeEntry
    (b"\a\b\f\n\r\t\v", r'"\a\b\f\n\r\t\v"'),
    (b'say "hi" \\ bye', r'"say \"hi\" \\ bye"'),
    (b"\x01\x1f\x7f", r'"\x01\x1f\x7f"'),
    (b"'", '"\'"'),  # a single quote needs no escape in a double-quoted literal
    ("é€😀".encode(), '"é€😀"'),  # printable runes are kept as they are
    (b"\xff", r'"\xff"'),  # not UTF-8
    (b"\xc3", r'"\xc3"'),  # truncated sequence
    (b"\xe2\x82", r'"\xe2\x82"'),
    (b"\xe2\x82\xacx", '"€x"'),
    (b"\xc0\x80", r'"\xc0\x80"'),  # overlong NUL
    (b"\xe0\x80\xaf", r'"\xe0\x80\xaf"'),  # overlong '/'
    (b"\xed\xa0\x80", r'"\xed\xa0\x80"'),  # a surrogate is not valid UTF-8
    (b"\xf4\x90\x80\x80", r'"\xf4\x90\x80\x80"'),  # past U+10FFFF
    (b"\xef\xbf\xbd", '"\ufffd"'),  # an encoded U+FFFD is a printable rune
    ("\u0085".encode(), r'"\u0085"'),  # C1 control
    ("\u00a0".encode(), r'"\u00a0"'),  # no-break space: a space, but not ASCII's
    ("\u200b".encode(), r'"\u200b"'),  # format character
    ("\u2028".encode(), r'"\u2028"'),  # line separator
    ("\ue000".encode(), r'"\ue000"'),  # private use
    ("\U000e0001".encode(), r'"\U000e0001"'),  # a tag: non-printable beyond the BMP
    ("\U0010ffff".encode(), r'"\U0010ffff"'),  # a noncharacter
    ("a\u0301".encode(), '"a\u0301"'),  # a combining mark is printable
]


@pytest.mark.parametrize(("data", "want"), QUOTE_CASES)
def test_go_quote(data: bytes, want: str) -> None:
    assert go_quote(data) == want
    assert go_sprintf("%q", data) == want


def test_go_quote_of_every_byte() -> None:
    """Each single byte: printable ASCII stays, the rest is escaped as Go does."""
    named = {7: r"\a", 8: r"\b", 9: r"\t", 10: r"\n", 11: r"\v", 12: r"\f", 13: r"\r"}
    for b in range(256):
        got = go_quote(bytes([b]))
        if b == 0x22:
            want = r"\""
        elif b == 0x5C:
            want = "\\\\"
        elif 0x20 <= b < 0x7F:
            want = chr(b)
        elif b in named:
            want = named[b]
        else:
            want = f"\\x{b:02x}"
        assert got == f'"{want}"', b


def test_go_quote_str_is_its_utf8() -> None:
    assert go_quote("tab\tand ü") == '"tab\\tand ü"'


class _State(IntEnum):
    StateFollower = 0
    StateLeader = 2


def test_go_sprintf_verbs() -> None:
    assert go_sprintf("%x [term %d] %s", 255, 3, "x") == "ff [term 3] x"
    assert go_sprintf("%X|%5d|%-3d|%05d|%%", 255, 7, 2, -3) == "FF|    7|2  |-0003|%"
    assert go_sprintf("%v %v %v %v", True, None, [1, 2, 3], []) == "true <nil> [1 2 3] []"
    leader, follower = _State.StateLeader, _State.StateFollower
    assert go_sprintf("%t %v %s %d", False, leader, follower, leader) == (
        "false StateLeader StateFollower 2"
    )
    assert go_sprintf("%v %+v", EntryID(1, 2), EntryID(1, 2)) == "{1 2} {term:1 index:2}"
    assert go_sprintf("%x %v", b"\x01\xab", b"\x01\xab") == "01ab [1 171]"
    assert go_sprintf("%s", b"raw") == "raw"
    assert go_sprintf("%v", ValueError("boom")) == "boom"
    # Missing and extra operands, the way Go reports them.
    assert go_sprintf("a %d b %d", 1) == "a 1 b %!d(MISSING)"
    assert go_sprintf("n=%d", 1, 2) == "n=1%!(EXTRA 2)"
    assert go_sprintf("plain") == "plain"


def test_go_sprint_and_sprintln() -> None:
    # Sprint puts a space between operands only when neither is a string.
    assert go_sprint("a", 1, 2, "b", "c") == "a1 2bc"
    assert go_sprintln("a", 1, 2, "b") == "a 1 2 b\n"


def test_describe_entry_as_util_test() -> None:
    entry = Entry(term=1, index=2, type=EntryType.EntryNormal, data=b"hello\x00world")
    assert describe_entry(entry, None) == '1/2 EntryNormal "hello\\x00world"'
    assert describe_entry(entry, lambda d: d.decode().upper()) == "1/2 EntryNormal HELLO\x00WORLD"
    assert describe_entry(Entry(term=8, index=21), None) == '8/21 EntryNormal ""'


def _cc_entry(term: int, index: int, cc: ConfChange | ConfChangeV2 | None) -> Entry:
    typ, data = marshal_conf_change(cc)
    return Entry(term=term, index=index, type=typ, data=data)


def test_describe_conf_change_entries_as_the_scripts() -> None:
    v1 = ConfChange(type=ConfChangeType.ConfChangeRemoveNode, node_id=1)
    assert describe_entry(_cc_entry(1, 4, v1), None) == "1/4 EntryConfChange r1"
    v2 = ConfChangeV2(changes=conf_changes_from_string("r1 v4"))
    assert describe_entry(_cc_entry(1, 4, v2), None) == "1/4 EntryConfChangeV2 r1 v4"
    assert describe_entry(_cc_entry(1, 6, None), None) == "1/6 EntryConfChangeV2"
    # Corrupt conf change data prints protobuf-go's error text.
    bad = Entry(term=1, index=7, type=EntryType.EntryConfChangeV2, data=b"\x0a\x05ab")
    assert describe_entry(bad, None) == (
        "1/7 EntryConfChangeV2 proto: cannot parse invalid wire-format data"
    )


def test_describe_conf_change_as_the_scripts() -> None:
    cc = ConfChangeV2(changes=conf_changes_from_string("v3 v4 v5"))
    # confchange_v2_add_single_explicit.txt
    assert describe_conf_change(cc) == (
        "transition:ConfChangeTransitionAuto changes:{type:ConfChangeAddNode node_id:3} "
        "changes:{type:ConfChangeAddNode node_id:4} changes:{type:ConfChangeAddNode node_id:5}"
    )
    v1 = ConfChange(type=ConfChangeType.ConfChangeAddLearnerNode, node_id=2, context=b"c\n")
    assert describe_conf_change(v1) == (
        "transition:ConfChangeTransitionAuto changes:{type:ConfChangeAddLearnerNode node_id:2} "
        'context:"c\\n"'
    )
    explicit = ConfChangeV2(transition=ConfChangeTransition.ConfChangeTransitionJointExplicit)
    assert describe_conf_change(explicit) == "transition:ConfChangeTransitionJointExplicit"


def test_describe_message_as_the_scripts() -> None:
    m = Message(
        MessageType.MsgApp,
        to=2,
        from_=1,
        term=1,
        log_term=1,
        index=3,
        commit=3,
        entries=[Entry(term=1, index=4, data=b"prop_1")],
    )
    assert describe_message(m, None) == (
        '1->2 MsgApp Term:1 Log:1/3 Commit:3 Entries:[1/4 EntryNormal "prop_1"]'
    )
    rej = Message(
        MessageType.MsgAppResp, to=2, from_=3, term=2, log_term=1, index=4, reject=True,
        reject_hint=3,
    )  # fmt: skip
    assert describe_message(rej, None) == "3->2 MsgAppResp Term:2 Log:1/4 Rejected (Hint: 3)"
    # probe_and_replicate.txt: several entries, one a line.
    multi = Message(
        MessageType.MsgApp, to=2, from_=1, term=8, log_term=6, index=19, commit=18,
        entries=[Entry(term=6, index=20, data=b"prop_6_20"), Entry(term=8, index=21)],
    )  # fmt: skip
    assert describe_message(multi, None) == (
        '1->2 MsgApp Term:8 Log:6/19 Commit:18 Entries:[\n  6/20 EntryNormal "prop_6_20"\n'
        '  8/21 EntryNormal ""\n]'
    )
    # async_storage_writes.txt: responses, indented one level.
    storage = Message(
        MessageType.MsgStorageAppend, to=LOCAL_APPEND_THREAD, from_=1, commit=12, vote=1,
        entries=[Entry(term=1, index=14, data=b"prop_3")],
        responses=[
            Message(MessageType.MsgAppResp, to=1, from_=1, term=1, index=14),
            Message(MessageType.MsgStorageAppendResp, to=1, from_=LOCAL_APPEND_THREAD, term=1,
                    log_term=1, index=14),
        ],
    )  # fmt: skip
    assert describe_message(storage, None) == (
        "1->AppendThread MsgStorageAppend Term:0 Log:0/0 Commit:12 Vote:1 Entries:[1/14 "
        'EntryNormal "prop_3"] Responses:[\n'
        "  1->1 MsgAppResp Term:1 Log:0/14\n"
        "  AppendThread->1 MsgStorageAppendResp Term:1 Log:1/14\n"
        "]"
    )
    # confchange_v1_add_single.txt: a snapshot on its own line.
    snap = Message(
        MessageType.MsgSnap, to=2, from_=1, term=1,
        snapshot=Snapshot(metadata=SnapshotMetadata(ConfState(voters=[1, 2]), 4, 1)),
    )  # fmt: skip
    assert describe_message(snap, None) == (
        "1->2 MsgSnap Term:1 Log:0/0\n  Snapshot: Index:4 Term:1 ConfState:Voters:[1 2] "
        "VotersOutgoing:[] Learners:[] LearnersNext:[] AutoLeave:false"
    )
    # An empty snapshot is not described.
    empty = Message(MessageType.MsgHeartbeat, to=2, from_=1, term=1, snapshot=Snapshot())
    assert describe_message(empty, None) == "1->2 MsgHeartbeat Term:1 Log:0/0"


def test_describe_targets_and_states() -> None:
    assert describe_target(0) == "None"
    assert describe_target(LOCAL_APPEND_THREAD) == "AppendThread"
    assert describe_target(LOCAL_APPLY_THREAD) == "ApplyThread"
    assert describe_target(255) == "ff"
    assert describe_hard_state(HardState(term=1, vote=1, commit=5)) == "Term:1 Vote:1 Commit:5"
    assert describe_hard_state(HardState(term=1, commit=0)) == "Term:1 Commit:0"
    cs = ConfState(voters=[1, 2, 3], voters_outgoing=[1], auto_leave=True)
    assert describe_conf_state(cs) == (
        "Voters:[1 2 3] VotersOutgoing:[1] Learners:[] LearnersNext:[] AutoLeave:true"
    )
    assert describe_snapshot(Snapshot(metadata=SnapshotMetadata(cs, 4, 1))) == (
        "Index:4 Term:1 ConfState:Voters:[1 2 3] VotersOutgoing:[1] Learners:[] "
        "LearnersNext:[] AutoLeave:true"
    )


@dataclass
class _Soft:
    lead: int
    raft_state: _State


@dataclass
class _Ready:
    soft_state: _Soft | None = None
    hard_state: HardState | None = None
    read_states: list[object] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    must_sync: bool = False


def test_describe_ready_as_the_scripts() -> None:
    assert describe_ready(_Ready(), None) == "<empty Ready>"
    assert describe_ready(_Ready(hard_state=HardState()), None) == "<empty Ready>"
    rd = _Ready(
        soft_state=_Soft(1, _State.StateLeader),
        entries=[Entry(term=1, index=3)],
        messages=[
            Message(MessageType.MsgApp, to=2, from_=1, term=1, log_term=1, index=2, commit=2,
                    entries=[Entry(term=1, index=3)]),
        ],
        must_sync=True,
    )  # fmt: skip
    # campaign.txt
    assert describe_ready(rd, None) == (
        "Ready MustSync=true:\n"
        "Lead:1 State:StateLeader\n"
        "Entries:\n"
        '1/3 EntryNormal ""\n'
        "Messages:\n"
        '1->2 MsgApp Term:1 Log:1/2 Commit:2 Entries:[1/3 EntryNormal ""]\n'
    )
    rd2 = _Ready(
        hard_state=HardState(term=1, vote=1, commit=3),
        snapshot=Snapshot(metadata=SnapshotMetadata(ConfState(voters=[1]), 2, 1)),
        committed_entries=[Entry(term=1, index=3)],
    )
    assert describe_ready(rd2, None) == (
        "Ready MustSync=false:\n"
        "HardState Term:1 Vote:1 Commit:3\n"
        "Snapshot Index:2 Term:1 ConfState:Voters:[1] VotersOutgoing:[] Learners:[] "
        "LearnersNext:[] AutoLeave:false\n"
        "CommittedEntries:\n"
        '1/3 EntryNormal ""\n'
    )
    assert describe_entries([Entry(term=1, index=1), Entry(term=1, index=2, data=b"x")], None) == (
        '1/1 EntryNormal ""\n1/2 EntryNormal "x"\n'
    )


LOCAL = {
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
RESPONSE = {
    MessageType.MsgUnreachable,
    MessageType.MsgAppResp,
    MessageType.MsgVoteResp,
    MessageType.MsgHeartbeatResp,
    MessageType.MsgReadIndexResp,
    MessageType.MsgPreVoteResp,
    MessageType.MsgStorageAppendResp,
    MessageType.MsgStorageApplyResp,
}


@pytest.mark.parametrize("msgt", list(MessageType))
def test_is_local_and_response_msg(msgt: MessageType) -> None:
    """util_test.go's TestIsLocalMsg and TestIsResponseMsg, over every message type."""
    assert is_local_msg(msgt) == (msgt in LOCAL)
    assert is_response_msg(msgt) == (msgt in RESPONSE)


def test_local_targets_and_vote_responses() -> None:
    assert is_local_msg_target(LOCAL_APPEND_THREAD)
    assert is_local_msg_target(LOCAL_APPLY_THREAD)
    assert not is_local_msg_target(1)
    assert vote_resp_msg_type(MessageType.MsgVote) == MessageType.MsgVoteResp
    assert vote_resp_msg_type(MessageType.MsgPreVote) == MessageType.MsgPreVoteResp
    with pytest.raises(RaftPanic, match=r"^not a vote message: MsgApp$"):
        vote_resp_msg_type(MessageType.MsgApp)


def test_discard_logger_keeps_nothing_and_panics_with_gos_text() -> None:
    log = DiscardLogger()
    log.infof("%d", 1)
    log.debug("x")
    log.warningf("%q", b"y")
    log.errorf("%v", None)
    with pytest.raises(RaftPanic) as exc:
        log.panicf("tocommit(%d) is out of range [lastIndex(%d)]", 4, 3)
    assert str(exc.value) == "tocommit(4) is out of range [lastIndex(3)]"
    with pytest.raises(RaftPanic, match=r"^a1 2$"):
        log.panic("a", 1, 2)
    with pytest.raises(RaftPanic, match=r"^fatal 7$"):
        log.fatalf("fatal %d", 7)


def test_package_logger_reaches_memory_storage_panics() -> None:
    cap = CaptureLogger()
    set_logger(cap)
    try:
        assert get_logger() is cap
        with pytest.raises(RaftPanic):
            MemoryStorage().compact(5)
        assert cap.lines == ["FATAL compact 5 is out of bound lastindex(0)"]
    finally:
        reset_default_logger()
    assert isinstance(get_logger(), DiscardLogger)
