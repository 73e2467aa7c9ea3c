"""etcd-io/raft v3.7.0 raftpb/confchange_test.go and raftpb/confstate_test.go, and the
string forms of the raftpb types."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeRemoveNode,
    ConfChangeSingle,
    ConfChangeTransitionAuto,
    ConfChangeTransitionJointExplicit,
    ConfChangeTransitionJointImplicit,
    ConfChangeUpdateNode,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryConfChangeV2,
    HardState,
    Message,
    MessageType,
    MsgApp,
    MsgForgetLeader,
    MsgStorageAppendResp,
    Snapshot,
    SnapshotMetadata,
    conf_changes_from_string,
    conf_changes_to_string,
    is_empty_hard_state,
    is_empty_snap,
)


@pytest.mark.parametrize(
    ("cc", "expected"),
    [
        pytest.param(ConfChangeV2(), True, id="empty conf change (all zero values)"),
        pytest.param(
            ConfChangeV2(ConfChangeTransitionAuto, [], b"some context"),
            True,
            id="empty changes with context (context should be ignored)",
        ),
        pytest.param(
            ConfChangeV2(ConfChangeTransitionAuto, [ConfChangeSingle(ConfChangeAddNode, 0)]),
            False,
            id="non-empty changes",
        ),
        pytest.param(
            ConfChangeV2(ConfChangeTransitionJointImplicit),
            False,
            id="joint implicit transition with empty changes",
        ),
        pytest.param(
            ConfChangeV2(ConfChangeTransitionJointExplicit),
            False,
            id="joint explicit transition with empty changes",
        ),
        pytest.param(
            ConfChangeV2(
                ConfChangeTransitionAuto,
                [ConfChangeSingle(ConfChangeAddNode, 0), ConfChangeSingle(ConfChangeRemoveNode, 0)],
            ),
            False,
            id="auto transition with multiple changes",
        ),
    ],
)
def test_leave_joint(cc: ConfChangeV2, expected: bool) -> None:
    assert cc.leave_joint() == expected


def test_conf_change_v2_fields() -> None:
    """As upstream's test: if a field is added to ConfChangeV2, leave_joint must be revisited.
    Read from the source, as a compiled class has no ``__slots__``."""
    tree = ast.parse((Path(__file__).parents[2] / "src/natsd/raft/types.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ConfChangeV2")
    slots = next(
        n.value
        for n in cls.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "__slots__"
    )
    assert ast.literal_eval(slots) == ("changes", "context", "transition")


def test_enter_joint() -> None:
    one = [ConfChangeSingle(ConfChangeAddNode, 2)]
    two = [*one, ConfChangeSingle(ConfChangeRemoveNode, 3)]
    assert ConfChangeV2(ConfChangeTransitionAuto, one).enter_joint() == (False, False)
    assert ConfChangeV2(ConfChangeTransitionAuto, two).enter_joint() == (True, True)
    assert ConfChangeV2(ConfChangeTransitionJointImplicit, one).enter_joint() == (True, True)
    assert ConfChangeV2(ConfChangeTransitionJointExplicit, one).enter_joint() == (False, True)
    assert ConfChangeV2(ConfChangeTransitionJointExplicit).enter_joint() == (False, True)


def test_conf_change_as_v1_v2() -> None:
    cc = ConfChange(ConfChangeAddLearnerNode, 7, b"ctx", 99)
    assert cc.as_v1() == (cc, True)
    v2 = cc.as_v2()
    assert v2 == ConfChangeV2(
        ConfChangeTransitionAuto, [ConfChangeSingle(ConfChangeAddLearnerNode, 7)], b"ctx"
    )
    assert v2.as_v2() is v2
    assert v2.as_v1() == (None, False)


@pytest.mark.parametrize(
    ("cs", "cs2", "ok"),
    [
        # Reordered voters and learners.
        (
            ConfState([1, 2, 3], [5, 4, 6], [9, 8, 7], [10, 20, 15]),
            ConfState([1, 2, 3], [4, 5, 6], [7, 9, 8], [20, 10, 15]),
            True,
        ),
        # Not sensitive to nil vs empty slice.
        (ConfState(voters=[]), ConfState(), True),
        # Non-equivalent voters.
        (ConfState(voters=[1, 2, 3, 4]), ConfState(voters=[2, 1, 3]), False),
        (ConfState(voters=[1, 4, 3]), ConfState(voters=[2, 1, 3]), False),
        # Non-equivalent learners.
        (ConfState(learners=[1, 2, 3, 4]), ConfState(learners=[2, 1, 3]), False),
        # Sensitive to AutoLeave flag.
        (ConfState(auto_leave=True), ConfState(), False),
    ],
)
def test_conf_state_equivalent(cs: ConfState, cs2: ConfState, ok: bool) -> None:
    err = cs.equivalent(cs2)
    assert (err is None) == ok
    if not ok:
        assert err is not None and err.startswith("ConfStates not equivalent after sorting:\n")


def test_conf_changes_string_round_trip() -> None:
    ccs = conf_changes_from_string("  v1 l2 r3 u4  ")
    assert ccs == [
        ConfChangeSingle(ConfChangeAddNode, 1),
        ConfChangeSingle(ConfChangeAddLearnerNode, 2),
        ConfChangeSingle(ConfChangeRemoveNode, 3),
        ConfChangeSingle(ConfChangeUpdateNode, 4),
    ]
    assert conf_changes_to_string(ccs) == "v1 l2 r3 u4"
    assert conf_changes_from_string("") == []
    assert conf_changes_to_string([]) == ""


@pytest.mark.parametrize(
    ("s", "err"),
    [
        ("v", "unknown token v"),
        ("v1  v2", "unknown token "),
        ("x1", "unknown input: x1"),
        ("vx", 'strconv.ParseUint: parsing "x": invalid syntax'),
        ("v-1", 'strconv.ParseUint: parsing "-1": invalid syntax'),
        ("v18446744073709551616", 'parsing "18446744073709551616": value out of range'),
    ],
)
def test_conf_changes_from_string_errors(s: str, err: str) -> None:
    with pytest.raises(ValueError) as e:
        conf_changes_from_string(s)
    assert str(e.value).endswith(err)


def test_enum_names_are_gos() -> None:
    assert MsgApp.name == "MsgApp"
    assert MessageType(19).name == "MsgStorageAppend"
    assert int(MsgStorageAppendResp) == 20
    assert int(MsgForgetLeader) == 23
    assert len(MessageType) == 24
    assert EntryConfChangeV2.name == "EntryConfChangeV2"


def test_zero_values_and_emptiness() -> None:
    m = Message()
    assert (m.type, m.to, m.from_, m.entries, m.snapshot, m.responses) == (0, 0, 0, [], None, [])
    assert Message().entries is not Message().entries  # no shared default list
    assert is_empty_hard_state(None) and is_empty_hard_state(HardState())
    assert not is_empty_hard_state(HardState(vote=1))
    assert is_empty_snap(None) and is_empty_snap(Snapshot())
    assert not is_empty_snap(Snapshot(metadata=SnapshotMetadata(index=1)))
    e = Entry(2, 3, data=b"x")
    c = e.clone()
    assert c == e and c is not e
    cs = ConfState([1], [2])
    cs2 = cs.clone()
    cs2.voters.append(3)
    assert cs.voters == [1]
