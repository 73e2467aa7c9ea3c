"""Ports etcd-io/raft v3.7.0 rawnode_test.go (Apache-2.0): stepping, proposals and conf
changes (simple and joint, auto-left and manual), read index, start / restart, status and
the Ready life cycle; plus the asynchronous storage writes driven through RawNode."""

from __future__ import annotations

import pytest
from raft_harness import new_test_config, new_test_memory_storage, new_test_raw_node, with_peers

import natsd.raft.storage
from natsd.raft.codec import (
    entry_size,
    marshal_conf_change_v1,
    marshal_conf_change_v2,
    unmarshal_conf_change,
    unmarshal_conf_change_v2,
)
from natsd.raft.core import LOCAL_APPEND_THREAD, LOCAL_APPLY_THREAD, NO_LIMIT, Raft, StateLeader
from natsd.raft.describe import is_local_msg
from natsd.raft.log import payload_size
from natsd.raft.quorum import JointConfig, MajorityConfig
from natsd.raft.rawnode import ErrStepLocalMsg, Ready, SoftState, new_raw_node
from natsd.raft.read_only import ReadState
from natsd.raft.state import RaftError
from natsd.raft.storage import MemoryStorage, Storage, StorageError
from natsd.raft.tracker import Config as TrackerConfig
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeI,
    ConfChangeSingle,
    ConfChangeTransitionJointExplicit,
    ConfChangeTransitionJointImplicit,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)


@pytest.mark.parametrize("msgt", list(MessageType), ids=lambda t: t.name)
def test_raw_node_step(msgt: MessageType) -> None:
    s = MemoryStorage()
    s.set_hard_state(HardState(term=1, commit=1))
    s.append([Entry(term=1, index=1)])
    s.apply_snapshot(
        Snapshot(metadata=SnapshotMetadata(conf_state=ConfState(voters=[1]), index=1, term=1))
    )
    # Append an empty entry to make sure the non-local messages (like vote requests) are
    # ignored and don't trigger assertions.
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    if is_local_msg(msgt):
        # LocalMsg should be ignored.
        with pytest.raises(ErrStepLocalMsg):
            raw_node.step(Message(type=msgt))
    else:
        try:
            raw_node.step(Message(type=msgt))
        except RaftError:
            pass  # a step error (e.g. a dropped proposal) is fine, a panic is not


def _decode_cc(ent: Entry) -> ConfChangeI | None:
    if ent.type == EntryType.EntryConfChange:
        return unmarshal_conf_change(ent.data)
    if ent.type == EntryType.EntryConfChangeV2:
        return unmarshal_conf_change_v2(ent.data)
    return None


def _add(node: int, typ: object = ConfChangeAddNode) -> ConfChangeSingle:
    return ConfChangeSingle(type=typ, node_id=node)  # type: ignore[arg-type]


PROPOSE_CASES: list[tuple[ConfChangeI, ConfState, ConfState | None]] = [
    # V1 config change.
    (ConfChange(type=ConfChangeAddNode, node_id=2), ConfState(voters=[1, 2]), None),
    # Proposing the same as a V2 change works just the same, without entering a joint
    # config.
    (ConfChangeV2(changes=[_add(2)]), ConfState(voters=[1, 2]), None),
    # Ditto if we add it as a learner instead.
    (
        ConfChangeV2(changes=[_add(2, ConfChangeAddLearnerNode)]),
        ConfState(voters=[1], learners=[2]),
        None,
    ),
    # We can ask explicitly for joint consensus if we want it.
    (
        ConfChangeV2(
            changes=[_add(2, ConfChangeAddLearnerNode)],
            transition=ConfChangeTransitionJointExplicit,
        ),
        ConfState(voters=[1], voters_outgoing=[1], learners=[2]),
        ConfState(voters=[1], learners=[2]),
    ),
    # Ditto, but with implicit transition (the harness checks this).
    (
        ConfChangeV2(
            changes=[_add(2, ConfChangeAddLearnerNode)],
            transition=ConfChangeTransitionJointImplicit,
        ),
        ConfState(voters=[1], voters_outgoing=[1], learners=[2], auto_leave=True),
        ConfState(voters=[1], learners=[2]),
    ),
    # Add a new node and demote n1. This exercises the interesting case in which we really
    # need joint config changes and also need LearnersNext.
    (
        ConfChangeV2(
            changes=[_add(2), _add(1, ConfChangeAddLearnerNode), _add(3, ConfChangeAddLearnerNode)]
        ),
        ConfState(
            voters=[2], voters_outgoing=[1], learners=[3], learners_next=[1], auto_leave=True
        ),
        ConfState(voters=[2], learners=[1, 3]),
    ),
    # Ditto explicit.
    (
        ConfChangeV2(
            changes=[_add(2), _add(1, ConfChangeAddLearnerNode), _add(3, ConfChangeAddLearnerNode)],
            transition=ConfChangeTransitionJointExplicit,
        ),
        ConfState(voters=[2], voters_outgoing=[1], learners=[3], learners_next=[1]),
        ConfState(voters=[2], learners=[1, 3]),
    ),
    # Ditto implicit.
    (
        ConfChangeV2(
            changes=[_add(2), _add(1, ConfChangeAddLearnerNode), _add(3, ConfChangeAddLearnerNode)],
            transition=ConfChangeTransitionJointImplicit,
        ),
        ConfState(
            voters=[2], voters_outgoing=[1], learners=[3], learners_next=[1], auto_leave=True
        ),
        ConfState(voters=[2], learners=[1, 3]),
    ),
]


@pytest.mark.parametrize(("cc", "exp", "exp2"), PROPOSE_CASES)
def test_raw_node_propose_and_conf_change(
    cc: ConfChangeI, exp: ConfState, exp2: ConfState | None
) -> None:
    """Each case sends a configuration change which is either simple or joint, verifies
    that it applies and that the resulting ConfState matches expectations, and for joint
    configurations makes sure that they are exited successfully."""
    s = new_test_memory_storage(with_peers(1))
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    raw_node.campaign()
    proposed = False
    ccdata = b""
    # Propose the ConfChange, wait until it applies, save the resulting ConfState.
    cs: ConfState | None = None
    while cs is None:
        rd = raw_node.ready()
        s.append(rd.entries)
        for ent in rd.committed_entries:
            c = _decode_cc(ent)
            if c is not None:
                cs = raw_node.apply_conf_change(c)
        raw_node.advance(rd)
        # Once we are the leader, propose a command and a ConfChange.
        if not proposed and rd.soft_state is not None and rd.soft_state.lead == raw_node.raft.id:
            raw_node.propose(b"somedata")
            ccv1, ok = cc.as_v1()
            if ok:
                assert ccv1 is not None
                ccdata = marshal_conf_change_v1(ccv1)
                raw_node.propose_conf_change(ccv1)
            else:
                ccv2 = cc.as_v2()
                ccdata = marshal_conf_change_v2(ccv2)
                raw_node.propose_conf_change(ccv2)
            proposed = True
    # Check that the last index is exactly the conf change we put in, down to the bits.
    # Note that this comes from the Storage, which will not reflect any unstable entries
    # that we'll only be presented with in the next Ready.
    last_index = s.last_index()
    entries = s.entries(last_index - 1, last_index + 1, NO_LIMIT)
    assert len(entries) == 2
    assert entries[0].data == b"somedata"
    typ = EntryType.EntryConfChange if cc.as_v1()[1] else EntryType.EntryConfChangeV2
    assert entries[1].type == typ
    assert entries[1].data == ccdata
    assert cs == exp
    maybe_plus_one = 0
    auto_leave, ok = cc.as_v2().enter_joint()
    if ok and auto_leave:
        # If this is an auto-leaving joint conf change, it will have appended the entry
        # that auto-leaves, so add one to the last index that forms the basis of our
        # expectations on pending_conf_index. (Recall that last_index was taken from stable
        # storage, but this auto-leaving entry isn't on stable storage yet).
        maybe_plus_one = 1
    assert raw_node.raft.pending_conf_index == last_index + maybe_plus_one
    # Move the RawNode along. If the ConfChange was simple, nothing else should happen.
    # Otherwise, we're in a joint state, which is either left automatically or not. If
    # not, we add the proposal that leaves it manually.
    rd = raw_node.ready()
    context = b""
    if not exp.auto_leave:
        assert rd.entries == []
        raw_node.advance(rd)
        if exp2 is None:
            return
        context = b"manual"
        raw_node.propose_conf_change(ConfChangeV2(context=context))
        rd = raw_node.ready()
    # Check that the right ConfChange comes out.
    assert len(rd.entries) == 1
    assert rd.entries[0].type == EntryType.EntryConfChangeV2
    cc2 = unmarshal_conf_change_v2(rd.entries[0].data)
    assert cc2 == ConfChangeV2(context=context)
    # Lie and pretend the ConfChange applied. It won't do so because now we require the
    # joint quorum and we're only running one node.
    assert raw_node.apply_conf_change(cc2) == exp2
    raw_node.advance(rd)


def test_raw_node_joint_auto_leave() -> None:
    """The configuration change auto leaves even if the leader lost leadership."""
    test_cc = ConfChangeV2(
        changes=[_add(2, ConfChangeAddLearnerNode)], transition=ConfChangeTransitionJointImplicit
    )
    exp_cs = ConfState(voters=[1], voters_outgoing=[1], learners=[2], auto_leave=True)
    exp2_cs = ConfState(voters=[1], learners=[2])
    s = new_test_memory_storage(with_peers(1))
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    raw_node.campaign()
    proposed = False
    ccdata = b""
    cs: ConfState | None = None
    while cs is None:
        rd = raw_node.ready()
        s.append(rd.entries)
        for ent in rd.committed_entries:
            if ent.type == EntryType.EntryConfChangeV2:
                c = unmarshal_conf_change_v2(ent.data)
                # Force it step down.
                raw_node.step(
                    Message(type=MessageType.MsgHeartbeatResp, from_=1, term=raw_node.raft.term + 1)
                )
                cs = raw_node.apply_conf_change(c)
        raw_node.advance(rd)
        # Once we are the leader, propose a command and a ConfChange.
        if not proposed and rd.soft_state is not None and rd.soft_state.lead == raw_node.raft.id:
            raw_node.propose(b"somedata")
            ccdata = marshal_conf_change_v2(test_cc)
            raw_node.propose_conf_change(test_cc)
            proposed = True
    last_index = s.last_index()
    entries = s.entries(last_index - 1, last_index + 1, NO_LIMIT)
    assert len(entries) == 2
    assert entries[0].data == b"somedata"
    assert entries[1].type == EntryType.EntryConfChangeV2
    assert entries[1].data == ccdata
    assert cs == exp_cs
    assert raw_node.raft.pending_conf_index == 0
    # Move the RawNode along. It should not leave joint because it's follower.
    rd = raw_node.ready_without_accept()
    assert rd.entries == []
    # Make it leader again. It should leave joint automatically after moving apply index.
    raw_node.campaign()
    for _ in range(3):
        rd = raw_node.ready()
        s.append(rd.entries)
        raw_node.advance(rd)
    rd = raw_node.ready()
    s.append(rd.entries)
    # Check that the right ConfChange comes out.
    assert len(rd.entries) == 1
    assert rd.entries[0].type == EntryType.EntryConfChangeV2
    cc = unmarshal_conf_change_v2(rd.entries[0].data)
    assert cc == ConfChangeV2()
    # Lie and pretend the ConfChange applied. It won't do so because now we require the
    # joint quorum and we're only running one node.
    assert raw_node.apply_conf_change(cc) == exp2_cs


def test_raw_node_propose_add_duplicate_node() -> None:
    """Two proposals to add the same node don't affect the later proposal to add a new
    node."""
    s = new_test_memory_storage(with_peers(1))
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    rd = raw_node.ready()
    s.append(rd.entries)
    raw_node.advance(rd)
    raw_node.campaign()
    while True:
        rd = raw_node.ready()
        s.append(rd.entries)
        raw_node.advance(rd)
        if rd.soft_state is not None and rd.soft_state.lead == raw_node.raft.id:
            break

    def propose_conf_change_and_apply(cc: ConfChange) -> None:
        raw_node.propose_conf_change(cc)
        rd = raw_node.ready()
        s.append(rd.entries)
        for entry in rd.committed_entries:
            if entry.type == EntryType.EntryConfChange:
                raw_node.apply_conf_change(unmarshal_conf_change(entry.data))
        raw_node.advance(rd)

    cc1 = ConfChange(type=ConfChangeAddNode, node_id=1)
    ccdata1 = marshal_conf_change_v1(cc1)
    propose_conf_change_and_apply(cc1)
    # try to add the same node again
    propose_conf_change_and_apply(cc1)
    # the new node join should be ok
    cc2 = ConfChange(type=ConfChangeAddNode, node_id=2)
    ccdata2 = marshal_conf_change_v1(cc2)
    propose_conf_change_and_apply(cc2)
    last_index = s.last_index()
    # the last three entries should be: ConfChange cc1, cc1, cc2
    entries = s.entries(last_index - 2, last_index + 1, NO_LIMIT)
    assert len(entries) == 3
    assert entries[0].data == ccdata1
    assert entries[2].data == ccdata2


def test_raw_node_read_index() -> None:
    """RawNode.read_index sends the MsgReadIndex message to the underlying raft, and the
    ReadState can be read out."""
    msgs: list[Message] = []

    def append_step(_r: Raft, m: Message) -> None:
        msgs.append(m)

    wrs = [ReadState(1, b"somedata")]
    s = new_test_memory_storage(with_peers(1))
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    raw_node.raft.read_states = wrs
    # ensure the ReadStates can be read out
    assert raw_node.has_ready()
    rd = raw_node.ready()
    assert rd.read_states == wrs
    s.append(rd.entries)
    raw_node.advance(rd)
    # ensure raft.read_states is reset after advance
    assert raw_node.raft.read_states == []
    wrequest_ctx = b"somedata2"
    raw_node.campaign()
    while True:
        rd = raw_node.ready()
        s.append(rd.entries)
        if rd.soft_state is not None and rd.soft_state.lead == raw_node.raft.id:
            raw_node.advance(rd)
            # Once we are the leader, issue a ReadIndex request
            raw_node.raft.step_func = append_step
            raw_node.read_index(wrequest_ctx)
            break
        raw_node.advance(rd)
    # ensure that MsgReadIndex message is sent to the underlying raft
    assert len(msgs) == 1
    assert msgs[0].type == MessageType.MsgReadIndex
    assert msgs[0].entries[0].data == wrequest_ctx


def test_raw_node_start() -> None:
    """A node can be started correctly. RawNode requires the application to bootstrap the
    state, i.e. it does not accept peers and will not create faux configuration change
    entries."""
    entries = [
        Entry(term=1, index=2),  # empty entry
        Entry(term=1, index=3, data=b"foo"),  # non-empty entry
    ]
    want = Ready(
        soft_state=SoftState(1, StateLeader),
        hard_state=HardState(term=1, commit=3, vote=1),
        entries=[],  # emitted & checked in intermediate Ready cycle
        committed_entries=entries,
        must_sync=False,  # since we're only applying, not appending
    )
    storage = MemoryStorage()
    storage.ents[0].index = 1

    # The raft log really begins at index 10 in CockroachDB's way of bootstrapping (here:
    # 2), so empty followers (at index 1) always need a snapshot first.
    def bootstrap(storage: MemoryStorage, cs: ConfState) -> None:
        assert cs.voters, "no voters specified"
        fi = storage.first_index()
        assert fi >= 2, "FirstIndex >= 2 is prerequisite for bootstrap"
        with pytest.raises(StorageError):
            storage.entries(fi, fi, NO_LIMIT)
        li = storage.last_index()
        with pytest.raises(StorageError):
            storage.entries(li, li, NO_LIMIT)
        hs, ics = storage.initial_state()
        assert hs is None or (hs.term, hs.vote, hs.commit) == (0, 0, 0)
        assert ics.voters == []
        storage.apply_snapshot(Snapshot(metadata=SnapshotMetadata(index=1, term=0, conf_state=cs)))

    bootstrap(storage, ConfState(voters=[1]))
    raw_node = new_raw_node(new_test_config(1, 10, 1, storage))
    assert not raw_node.has_ready()
    raw_node.campaign()
    rd = raw_node.ready()
    storage.append(rd.entries)
    raw_node.advance(rd)
    raw_node.propose(b"foo")
    assert raw_node.has_ready()
    rd = raw_node.ready()
    assert rd.entries == entries
    storage.append(rd.entries)
    raw_node.advance(rd)
    assert raw_node.has_ready()
    rd = raw_node.ready()
    assert rd.entries == []
    assert not rd.must_sync
    raw_node.advance(rd)
    rd.soft_state, want.soft_state = None, None
    assert rd == want
    assert not raw_node.has_ready()


def test_raw_node_restart() -> None:
    entries = [Entry(term=1, index=1), Entry(term=1, index=2, data=b"foo")]
    st = HardState(term=1, commit=1)
    want = Ready(
        hard_state=None,
        # commit up to commit index in st
        committed_entries=entries[: st.commit],
        must_sync=False,
    )
    storage = new_test_memory_storage(with_peers(1))
    storage.set_hard_state(st)
    storage.append(entries)
    raw_node = new_raw_node(new_test_config(1, 10, 1, storage))
    rd = raw_node.ready()
    assert rd == want
    assert rd.hard_state is None
    raw_node.advance(rd)
    assert not raw_node.has_ready()


def test_raw_node_restart_from_snapshot() -> None:
    snap = Snapshot(metadata=SnapshotMetadata(conf_state=ConfState(voters=[1, 2]), index=2, term=1))
    entries = [Entry(term=1, index=3, data=b"foo")]
    st = HardState(term=1, commit=3)
    want = Ready(hard_state=None, committed_entries=entries, must_sync=False)
    s = MemoryStorage()
    s.set_hard_state(st)
    s.apply_snapshot(snap)
    s.append(entries)
    raw_node = new_raw_node(new_test_config(1, 10, 1, s))
    rd = raw_node.ready()
    assert rd == want
    raw_node.advance(rd)
    assert not raw_node.has_ready()


def test_raw_node_status() -> None:
    s = new_test_memory_storage(with_peers(1))
    rn = new_raw_node(new_test_config(1, 10, 1, s))
    assert rn.status().progress == {}
    rn.campaign()
    rd = rn.ready()
    s.append(rd.entries)
    rn.advance(rd)
    status = rn.status()
    assert status.lead == 1
    assert status.raft_state == StateLeader
    assert status.progress[1] == rn.raft.trk.progress[1]
    # A copy, not the tracker's own.
    assert status.progress[1] is not rn.raft.trk.progress[1]
    assert status.config == TrackerConfig(voters=JointConfig(MajorityConfig([1]), None))
    # The self-vote was delivered by advance(); the leader's empty entry is not yet
    # appended (it is in the next Ready).
    assert str(status) == (
        '{"id":"1","term":1,"vote":"1","commit":0,"lead":"1","raftState":"StateLeader",'
        '"applied":0,"progress":{"1":{"match":0,"next":1,"state":"StateReplicate"}},'
        '"leadtransferee":"0"}'
    )


class _IgnoreSizeHintMemStorage(MemoryStorage):
    """ignoreSizeHintMemStorage: returns all the entries asked for, whatever the size."""

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        return super().entries(lo, hi, NO_LIMIT)


STORAGE_COMPILED = (natsd.raft.storage.__file__ or "").endswith(".so")


def test_raw_node_commit_pagination_after_restart() -> None:
    """The RawNode version of TestNodeCommitPaginationAfterRestart: the node must not forget
    to apply entries when the storage ignores the size hint.

    Compiled, MemoryStorage (a native class) takes no interpreted subclass: there the
    storage honours the size hint, and the node still applies every entry exactly once."""
    if STORAGE_COMPILED:
        with pytest.raises(TypeError):
            _IgnoreSizeHintMemStorage()
        s = MemoryStorage()
    else:
        s = _IgnoreSizeHintMemStorage()
    s.snap.metadata.conf_state.voters = [1]
    s.hard_state = HardState(term=1, vote=1, commit=10)
    ents = [Entry(term=1, index=i + 1, type=EntryType.EntryNormal, data=b"a") for i in range(10)]
    size = sum(entry_size(e) for e in ents)
    s.ents = ents
    cfg = new_test_config(1, 10, 1, s)
    # Set a MaxSizePerMsg that would suggest to Raft that the last committed entry should not
    # be included in the initial rd.CommittedEntries. However, our storage will ignore this
    # and *will* return it (which is how the Commit index ended up being 10 initially).
    cfg.max_size_per_msg = size - entry_size(ents[-1]) - 1
    s.ents = [*ents, Entry(term=1, index=11, type=EntryType.EntryNormal, data=b"boom")]
    raw_node = new_raw_node(cfg)
    highest_applied = 0
    while highest_applied != 11:
        rd = raw_node.ready()
        n = len(rd.committed_entries)
        assert n != 0, f"stopped applying entries at index {highest_applied}"
        nxt = rd.committed_entries[0].index
        assert not (highest_applied != 0 and highest_applied + 1 != nxt), (
            f"attempting to apply index {nxt} after index {highest_applied}, leaving a gap"
        )
        highest_applied = rd.committed_entries[n - 1].index
        raw_node.advance(rd)
        raw_node.step(
            # illegal (from 2, no such peer's progress needed for a heartbeat), but we get
            # away with it
            Message(type=MessageType.MsgHeartbeat, to=1, from_=2, term=1, commit=11)
        )


def test_raw_node_bounded_log_growth_with_partition() -> None:
    """A leader partitioned from a quorum of nodes: its log is protected from unbounded
    growth even as new entries continue to be proposed (MaxUncommittedEntriesSize)."""
    max_entries = 16
    data = b"testdata"
    max_entry_size = max_entries * payload_size(Entry(data=data))
    s = new_test_memory_storage(with_peers(1))
    cfg = new_test_config(1, 10, 1, s)
    cfg.max_uncommitted_entries_size = max_entry_size
    raw_node = new_raw_node(cfg)
    # Become the leader and apply empty entry.
    raw_node.campaign()
    while True:
        rd = raw_node.ready()
        s.append(rd.entries)
        raw_node.advance(rd)
        if rd.committed_entries:
            break
    # Simulate a network partition while we make our proposals by never committing
    # anything. These proposals should not cause the leader's log to grow indefinitely.
    dropped = 0
    for _ in range(1024):
        try:
            raw_node.propose(data)
        except RaftError:
            dropped += 1
    assert dropped == 1024 - max_entries
    # Check the size of leader's uncommitted log tail. It should not exceed the
    # MaxUncommittedEntriesSize limit.
    assert raw_node.raft.uncommitted_size == max_entry_size
    # Recover from the partition. The uncommitted tail of the Raft log should disappear as
    # entries are committed.
    rd = raw_node.ready()
    assert len(rd.entries) == max_entries
    s.append(rd.entries)
    raw_node.advance(rd)
    # Entries are appended, but not applied.
    assert raw_node.raft.uncommitted_size == max_entry_size
    rd = raw_node.ready()
    assert rd.entries == []
    assert len(rd.committed_entries) == max_entries
    raw_node.advance(rd)
    assert raw_node.raft.uncommitted_size == 0


def test_raw_node_consume_ready() -> None:
    """ready_without_accept() does not call accept_ready (which resets the messages) but
    ready() does."""
    s = new_test_memory_storage(with_peers(1))
    rn = new_test_raw_node(1, 3, 1, s)
    m1 = Message(context=b"foo")
    m2 = Message(context=b"bar")
    # Inject first message, make sure it's visible via ready_without_accept.
    rn.raft.msgs.append(m1)
    rd = rn.ready_without_accept()
    assert rd.messages == [m1]
    assert rn.raft.msgs == [m1]
    # Now call ready() which should move the message into the Ready (as opposed to leaving
    # it in both places).
    rd = rn.ready()
    assert rn.raft.msgs == []
    assert rd.messages == [m1]
    # Add a message to raft to make sure that advance() doesn't drop it.
    rn.raft.msgs.append(m2)
    rn.advance(rd)
    assert rn.raft.msgs == [m2]


def test_raw_node_async_storage_writes_single_node() -> None:
    """With AsyncStorageWrites the Ready carries MsgStorageAppend / MsgStorageApply to the
    local threads; delivering their responses after the writes commits and applies the
    entries (no advance())."""
    s = new_test_memory_storage(with_peers(1))
    cfg = new_test_config(1, 10, 1, s)
    cfg.async_storage_writes = True
    rn = new_raw_node(cfg)
    rn.campaign()
    # The self-vote only counts once the vote is persisted: still a candidate.
    assert rn.raft.state != StateLeader
    applied: list[bytes] = []
    proposed = False
    for _ in range(20):
        if rn.raft.state == StateLeader and not proposed:
            rn.propose(b"foo")
            proposed = True
        if not rn.has_ready():
            break
        rd = rn.ready()
        for m in rd.messages:
            if m.type == MessageType.MsgStorageAppend:
                assert m.to == LOCAL_APPEND_THREAD
                if m.term or m.vote or m.commit:
                    s.set_hard_state(HardState(term=m.term, vote=m.vote, commit=m.commit))
                s.append(m.entries)
            elif m.type == MessageType.MsgStorageApply:
                assert m.to == LOCAL_APPLY_THREAD
                applied.extend(e.data for e in m.entries)
            else:
                pytest.fail(f"unexpected message {m}")
            for resp in m.responses:
                rn.step(resp)
    assert not rn.has_ready()
    assert rn.raft.state == StateLeader
    assert applied == [b"", b"foo"]
    assert rn.raft.raft_log.applied == 2
    assert s.last_index() == 2
    with pytest.raises(Exception, match="Advance must not be called"):
        rn.advance()


def test_raw_node_bootstrap() -> None:
    s = MemoryStorage()
    rn = new_raw_node(new_test_config(1, 10, 1, s))
    from natsd.raft.rawnode import Peer

    rn.bootstrap([Peer(1), Peer(2)])
    assert rn.raft.raft_log.committed == 2
    assert rn.raft.trk.voter_nodes() == [1, 2]
    rd = rn.ready()
    assert [e.type for e in rd.entries] == [EntryType.EntryConfChange] * 2
    assert rd.hard_state == HardState(term=1, commit=2)
    with pytest.raises(RaftError, match="at least one peer"):
        rn.bootstrap([])
    s.append(rd.entries)
    with pytest.raises(RaftError, match="nonempty Storage"):
        rn.bootstrap([Peer(1)])


class _DelegatingStorage(Storage):
    """An application's Storage (interpreted, compiled or not) over a MemoryStorage."""

    def __init__(self, ms: MemoryStorage) -> None:
        self.ms = ms
        self.calls = 0

    def initial_state(self) -> tuple[HardState | None, ConfState]:
        self.calls += 1
        return self.ms.initial_state()

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        self.calls += 1
        return self.ms.entries(lo, hi, max_size)

    def term(self, i: int) -> int:
        self.calls += 1
        return self.ms.term(i)

    def last_index(self) -> int:
        self.calls += 1
        return self.ms.last_index()

    def first_index(self) -> int:
        self.calls += 1
        return self.ms.first_index()

    def snapshot(self) -> Snapshot:
        self.calls += 1
        return self.ms.snapshot()


def test_raw_node_with_application_storage() -> None:
    """An interpreted Storage implementation drives a RawNode (also when the engine is
    compiled: Storage allows interpreted subclasses)."""
    ms = new_test_memory_storage(with_peers(1))
    s = _DelegatingStorage(ms)
    rn = new_raw_node(new_test_config(1, 10, 1, s))
    rn.campaign()
    for _ in range(5):
        rd = rn.ready()
        ms.append(rd.entries)
        rn.advance(rd)
    rn.propose(b"x")
    rd = rn.ready()
    ms.append(rd.entries)
    rn.advance(rd)
    rd = rn.ready()
    assert [e.data for e in rd.committed_entries] == [b"x"]
    rn.advance(rd)
    assert rn.raft.state == StateLeader
    assert s.calls > 0
