"""Port of etcd-io/raft v3.7.0 storage_test.go (and util_test.go's TestLimitSize)."""

from __future__ import annotations

import pytest
from entry_helpers import terms

from natsd.raft.codec import entry_size, ents_size, limit_size
from natsd.raft.log import NO_LIMIT
from natsd.raft.logger import RaftPanic
from natsd.raft.storage import (
    ErrCompacted,
    ErrSnapOutOfDate,
    ErrUnavailable,
    MemoryStorage,
    StorageError,
)
from natsd.raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata

ENTS = terms(3, 3, 4, 5)
ENTS4 = terms(3, 3, 4, 5, 6)


@pytest.mark.parametrize(
    ("i", "werr", "wterm"),
    [
        (2, ErrCompacted, 0),
        (3, None, 3),
        (4, None, 4),
        (5, None, 5),
        (6, ErrUnavailable, 0),
    ],
)
def test_storage_term(i: int, werr: type[StorageError] | None, wterm: int) -> None:
    s = MemoryStorage(list(ENTS))
    if werr is not None:
        with pytest.raises(werr):
            s.term(i)
    else:
        assert s.term(i) == wterm


def _sz(*k: int) -> int:
    return sum(entry_size(ENTS4[i]) for i in k)


@pytest.mark.parametrize(
    ("lo", "hi", "maxsize", "werr", "wentries"),
    [
        (2, 6, NO_LIMIT, ErrCompacted, None),
        (3, 4, NO_LIMIT, ErrCompacted, None),
        (4, 5, NO_LIMIT, None, terms(4, 4)),
        (4, 6, NO_LIMIT, None, terms(4, 4, 5)),
        (4, 7, NO_LIMIT, None, terms(4, 4, 5, 6)),
        # even if maxsize is zero, the first entry should be returned
        (4, 7, 0, None, terms(4, 4)),
        # limit to 2
        (4, 7, _sz(1, 2), None, terms(4, 4, 5)),
        # limit to 2
        (4, 7, _sz(1, 2) + _sz(3) // 2, None, terms(4, 4, 5)),
        (4, 7, _sz(1, 2, 3) - 1, None, terms(4, 4, 5)),
        # all
        (4, 7, _sz(1, 2, 3), None, terms(4, 4, 5, 6)),
    ],
)
def test_storage_entries(
    lo: int,
    hi: int,
    maxsize: int,
    werr: type[StorageError] | None,
    wentries: list[Entry] | None,
) -> None:
    s = MemoryStorage(list(ENTS4))
    if werr is not None:
        with pytest.raises(werr):
            s.entries(lo, hi, maxsize)
    else:
        assert s.entries(lo, hi, maxsize) == wentries


def test_storage_entries_panics_past_last_index_and_only_dummy_is_unavailable() -> None:
    s = MemoryStorage(list(ENTS))
    with pytest.raises(RaftPanic, match=r"^entries' hi\(7\) is out of bound lastindex\(5\)$"):
        s.entries(4, 7, NO_LIMIT)
    with pytest.raises(ErrUnavailable, match=r"^requested entry at index is unavailable$"):
        MemoryStorage().entries(1, 1, NO_LIMIT)


def test_storage_entries_result_is_the_callers() -> None:
    s = MemoryStorage(list(ENTS))
    got = s.entries(4, 6, NO_LIMIT)
    got.append(Entry(term=9, index=9))
    assert s.entries(4, 6, NO_LIMIT) == terms(4, 4, 5)
    assert s.last_index() == 5


def test_storage_last_index() -> None:
    s = MemoryStorage(list(ENTS))
    assert s.last_index() == 5
    s.append(terms(6, 5))
    assert s.last_index() == 6


def test_storage_first_index() -> None:
    s = MemoryStorage(list(ENTS))
    assert s.first_index() == 4
    s.compact(4)
    assert s.first_index() == 5


@pytest.mark.parametrize(
    ("i", "werr", "windex", "wterm", "wlen"),
    [
        (2, ErrCompacted, 3, 3, 3),
        (3, ErrCompacted, 3, 3, 3),
        (4, None, 4, 4, 2),
        (5, None, 5, 5, 1),
    ],
)
def test_storage_compact(
    i: int, werr: type[StorageError] | None, windex: int, wterm: int, wlen: int
) -> None:
    s = MemoryStorage(list(ENTS))
    if werr is not None:
        with pytest.raises(werr):
            s.compact(i)
    else:
        s.compact(i)
    assert s.ents[0].index == windex
    assert s.ents[0].term == wterm
    assert len(s.ents) == wlen


def test_storage_compact_past_last_index_panics() -> None:
    s = MemoryStorage(list(ENTS))
    with pytest.raises(RaftPanic, match=r"^compact 6 is out of bound lastindex\(5\)$"):
        s.compact(6)


@pytest.mark.parametrize(
    ("i", "wsnap"),
    [
        (4, Snapshot(b"data", SnapshotMetadata(ConfState(voters=[1, 2, 3]), 4, 4))),
        (5, Snapshot(b"data", SnapshotMetadata(ConfState(voters=[1, 2, 3]), 5, 5))),
    ],
)
def test_storage_create_snapshot(i: int, wsnap: Snapshot) -> None:
    cs = ConfState(voters=[1, 2, 3])
    s = MemoryStorage(list(ENTS))
    got = s.create_snapshot(i, cs, b"data")
    assert got == wsnap
    cs.voters.append(4)  # the storage keeps a copy
    assert s.snapshot() == wsnap


def test_storage_create_snapshot_errors() -> None:
    s = MemoryStorage(list(ENTS))
    s.create_snapshot(4, None, b"")
    with pytest.raises(ErrSnapOutOfDate, match=r"^requested index is older than the existing"):
        s.create_snapshot(4, None, b"")
    with pytest.raises(RaftPanic, match=r"^snapshot 6 is out of bound lastindex\(5\)$"):
        s.create_snapshot(6, None, b"")


@pytest.mark.parametrize(
    ("entries", "wentries"),
    [
        (terms(1, 1, 2), terms(3, 3, 4, 5)),
        (terms(3, 3, 4, 5), terms(3, 3, 4, 5)),
        (terms(3, 3, 6, 6), terms(3, 3, 6, 6)),
        (terms(3, 3, 4, 5, 5), terms(3, 3, 4, 5, 5)),
        # Truncate incoming entries, truncate the existing entries and append.
        (terms(2, 3, 3, 5), terms(3, 3, 5)),
        # Truncate the existing entries and append.
        (terms(4, 5), terms(3, 3, 5)),
        # Direct append.
        (terms(6, 5), terms(3, 3, 4, 5, 5)),
    ],
)
def test_storage_append(entries: list[Entry], wentries: list[Entry]) -> None:
    s = MemoryStorage(list(ENTS))
    s.append(entries)
    assert s.ents == wentries


def test_storage_append_with_a_gap_panics() -> None:
    s = MemoryStorage(list(ENTS))
    with pytest.raises(RaftPanic, match=r"^missing log entry \[last: 5, append at: 7\]$"):
        s.append(terms(7, 5))


def test_storage_append_keeps_handed_out_lists_intact() -> None:
    s = MemoryStorage(list(ENTS))
    before = s.entries(4, 6, NO_LIMIT)
    s.append(terms(4, 9))
    assert before == terms(4, 4, 5)
    assert s.ents == terms(3, 3, 9)


CS = ConfState(voters=[1, 2, 3])


@pytest.mark.parametrize(
    ("snapshots", "expected"),
    [
        # normal case
        ([Snapshot(b"data", SnapshotMetadata(CS, 4, 4))], None),
        # snapshot out of date
        (
            [
                Snapshot(b"data", SnapshotMetadata(CS, 4, 4)),
                Snapshot(b"data", SnapshotMetadata(CS, 3, 3)),
            ],
            ErrSnapOutOfDate,
        ),
        # bootstrap with confState
        ([Snapshot(b"data", SnapshotMetadata(CS))], None),
    ],
)
def test_storage_apply_snapshot(
    snapshots: list[Snapshot], expected: type[StorageError] | None
) -> None:
    s = MemoryStorage()
    err: StorageError | None = None
    for sn in snapshots:
        try:
            s.apply_snapshot(sn)
        except StorageError as e:
            err = e
    if expected is None:
        assert err is None
        last = snapshots[-1]
        assert s.snapshot() == last
        assert s.ents == [Entry(term=last.metadata.term, index=last.metadata.index)]
        hs, cs = s.initial_state()
        assert hs is None
        assert cs == CS
    else:
        assert isinstance(err, expected)


def test_storage_initial_state_and_call_stats() -> None:
    s = MemoryStorage()
    hs, cs = s.initial_state()
    assert hs is None
    assert cs == ConfState()
    s.set_hard_state(HardState(term=1, vote=2, commit=3))
    assert s.initial_state()[0] == HardState(1, 2, 3)
    s.first_index()
    s.last_index()
    s.term(0)
    s.snapshot()
    st = s.call_stats
    assert (st.initial_state, st.first_index, st.last_index, st.term, st.snapshot) == (
        2,
        1,
        1,
        1,
        1,
    )


def test_storage_error_texts_are_gos() -> None:
    assert str(ErrCompacted()) == "requested index is unavailable due to compaction"
    assert str(ErrSnapOutOfDate()) == "requested index is older than the existing snapshot"
    assert str(ErrUnavailable()) == "requested entry at index is unavailable"


# util_test.go: TestLimitSize
LIMIT_ENTS = [Entry(index=4, term=4), Entry(index=5, term=5), Entry(index=6, term=6)]


@pytest.mark.parametrize(
    ("max_size", "want"),
    [
        (NO_LIMIT, 3),  # all entries are returned
        # Even if maxSize is zero, the first entry should be returned.
        (0, 1),
        # Limit to 2.
        (ents_size(LIMIT_ENTS[:2]), 2),
        (ents_size(LIMIT_ENTS[:2]) + entry_size(LIMIT_ENTS[2]) // 2, 2),
        (ents_size(LIMIT_ENTS) - 1, 2),
        # All.
        (ents_size(LIMIT_ENTS), 3),
    ],
)
def test_limit_size(max_size: int, want: int) -> None:
    got = limit_size(LIMIT_ENTS, max_size)
    assert got == LIMIT_ENTS[:want]
    assert len(got) == 1 or ents_size(got) <= max_size
