"""Port of etcd-io/raft v3.7.0 log_unstable_test.go."""

from __future__ import annotations

import pytest
from entry_helpers import CaptureLogger, snap, terms

from natsd.raft.log_unstable import EntryID, Unstable
from natsd.raft.logger import RaftPanic
from natsd.raft.types import Entry, Snapshot

S41 = snap(4, 1)


@pytest.mark.parametrize(
    ("entries", "offset", "snapshot", "wok", "windex"),
    [
        # no snapshot
        (terms(5, 1), 5, None, False, 0),
        ([], 0, None, False, 0),
        # has snapshot
        (terms(5, 1), 5, S41, True, 5),
        ([], 5, S41, True, 5),
    ],
)
def test_unstable_maybe_first_index(
    entries: list[Entry], offset: int, snapshot: Snapshot | None, wok: bool, windex: int
) -> None:
    u = Unstable(entries=list(entries), offset=offset, snapshot=snapshot)
    assert u.maybe_first_index() == (windex, wok)


@pytest.mark.parametrize(
    ("entries", "offset", "snapshot", "wok", "windex"),
    [
        # last in entries
        (terms(5, 1), 5, None, True, 5),
        (terms(5, 1), 5, S41, True, 5),
        # last in snapshot
        ([], 5, S41, True, 4),
        # empty unstable
        ([], 0, None, False, 0),
    ],
)
def test_maybe_last_index(
    entries: list[Entry], offset: int, snapshot: Snapshot | None, wok: bool, windex: int
) -> None:
    u = Unstable(entries=list(entries), offset=offset, snapshot=snapshot)
    assert u.maybe_last_index() == (windex, wok)


@pytest.mark.parametrize(
    ("entries", "offset", "snapshot", "index", "wok", "wterm"),
    [
        # term from entries
        (terms(5, 1), 5, None, 5, True, 1),
        (terms(5, 1), 5, None, 6, False, 0),
        (terms(5, 1), 5, None, 4, False, 0),
        (terms(5, 1), 5, S41, 5, True, 1),
        (terms(5, 1), 5, S41, 6, False, 0),
        # term from snapshot
        (terms(5, 1), 5, S41, 4, True, 1),
        (terms(5, 1), 5, S41, 3, False, 0),
        ([], 5, S41, 5, False, 0),
        ([], 5, S41, 4, True, 1),
        ([], 0, None, 5, False, 0),
    ],
)
def test_unstable_maybe_term(
    entries: list[Entry],
    offset: int,
    snapshot: Snapshot | None,
    index: int,
    wok: bool,
    wterm: int,
) -> None:
    u = Unstable(entries=list(entries), offset=offset, snapshot=snapshot)
    assert u.maybe_term(index) == (wterm, wok)


def test_unstable_restore() -> None:
    u = Unstable(
        entries=terms(5, 1),
        offset=5,
        offset_in_progress=6,
        snapshot=snap(4, 1),
        snapshot_in_progress=True,
    )
    s = snap(6, 2)
    u.restore(s)
    assert u.offset == s.metadata.index + 1
    assert u.offset_in_progress == s.metadata.index + 1
    assert len(u.entries) == 0
    assert u.snapshot == s
    assert u.snapshot is not s  # a clone, as upstream's proto.Clone
    assert not u.snapshot_in_progress


@pytest.mark.parametrize(
    ("entries", "offset", "offset_in_progress", "wentries"),
    [
        # nothing in progress
        (terms(5, 1, 1), 5, 5, terms(5, 1, 1)),
        # partially in progress
        (terms(5, 1, 1), 5, 6, terms(6, 1)),
        # everything in progress
        (terms(5, 1, 1), 5, 7, []),
    ],
)
def test_unstable_next_entries(
    entries: list[Entry], offset: int, offset_in_progress: int, wentries: list[Entry]
) -> None:
    u = Unstable(entries=list(entries), offset=offset, offset_in_progress=offset_in_progress)
    assert u.next_entries() == wentries


@pytest.mark.parametrize(
    ("snapshot", "in_progress", "want"),
    [
        # snapshot not unstable
        (None, False, None),
        # snapshot not in progress
        (S41, False, S41),
        # snapshot in progress
        (S41, True, None),
    ],
)
def test_unstable_next_snapshot(
    snapshot: Snapshot | None, in_progress: bool, want: Snapshot | None
) -> None:
    u = Unstable(snapshot=snapshot, snapshot_in_progress=in_progress)
    assert u.next_snapshot() == want


@pytest.mark.parametrize(
    ("entries", "snapshot", "offset_in_progress", "snapshot_in_progress", "woip", "wsip"),
    [
        ([], None, 5, False, 5, False),  # no entries
        (terms(5, 1), None, 5, False, 6, False),  # entries not in progress
        (terms(5, 1, 1), None, 5, False, 7, False),  # entries not in progress
        (terms(5, 1, 1), None, 6, False, 7, False),  # in-progress to the first entry
        (terms(5, 1, 1), None, 7, False, 7, False),  # in-progress to the second entry
        # with snapshot
        ([], S41, 5, False, 5, True),  # no entries
        (terms(5, 1), S41, 5, False, 6, True),  # entries not in progress
        (terms(5, 1, 1), S41, 5, False, 7, True),  # entries not in progress
        (terms(5, 1, 1), S41, 6, False, 7, True),  # in-progress to the first entry
        (terms(5, 1, 1), S41, 7, False, 7, True),  # in-progress to the second entry
        ([], S41, 5, True, 5, True),  # snapshot already in progress
        (terms(5, 1), S41, 5, True, 6, True),
        (terms(5, 1, 1), S41, 5, True, 7, True),
        (terms(5, 1, 1), S41, 6, True, 7, True),
        (terms(5, 1, 1), S41, 7, True, 7, True),
    ],
)
def test_unstable_accept_in_progress(
    entries: list[Entry],
    snapshot: Snapshot | None,
    offset_in_progress: int,
    snapshot_in_progress: bool,
    woip: int,
    wsip: bool,
) -> None:
    u = Unstable(
        entries=list(entries),
        snapshot=snapshot,
        offset_in_progress=offset_in_progress,
        snapshot_in_progress=snapshot_in_progress,
    )
    u.accept_in_progress()
    assert u.offset_in_progress == woip
    assert u.snapshot_in_progress == wsip


@pytest.mark.parametrize(
    ("entries", "offset", "oip", "snapshot", "index", "term", "woffset", "woip", "wlen"),
    [
        ([], 0, 0, None, 5, 1, 0, 0, 0),
        (terms(5, 1), 5, 6, None, 5, 1, 6, 6, 0),  # stable to the first entry
        (terms(5, 1, 1), 5, 6, None, 5, 1, 6, 6, 1),  # stable to the first entry
        # stable to the first entry and in-progress ahead
        (terms(5, 1, 1), 5, 7, None, 5, 1, 6, 7, 1),
        # stable to the first entry and term mismatch
        (terms(6, 2), 6, 7, None, 6, 1, 6, 7, 1),
        (terms(5, 1), 5, 6, None, 4, 1, 5, 6, 1),  # stable to old entry
        (terms(5, 1), 5, 6, None, 4, 2, 5, 6, 1),  # stable to old entry
        # with snapshot
        (terms(5, 1), 5, 6, S41, 5, 1, 6, 6, 0),  # stable to the first entry
        (terms(5, 1, 1), 5, 6, S41, 5, 1, 6, 6, 1),  # stable to the first entry
        # stable to the first entry and in-progress ahead
        (terms(5, 1, 1), 5, 7, S41, 5, 1, 6, 7, 1),
        # stable to the first entry and term mismatch
        (terms(6, 2), 6, 7, snap(5, 1), 6, 1, 6, 7, 1),
        (terms(5, 1), 5, 6, S41, 4, 1, 5, 6, 1),  # stable to snapshot
        (terms(5, 2), 5, 6, snap(4, 2), 4, 1, 5, 6, 1),  # stable to old entry
    ],
)
def test_unstable_stable_to(
    entries: list[Entry],
    offset: int,
    oip: int,
    snapshot: Snapshot | None,
    index: int,
    term: int,
    woffset: int,
    woip: int,
    wlen: int,
) -> None:
    u = Unstable(entries=list(entries), offset=offset, offset_in_progress=oip, snapshot=snapshot)
    u.stable_to(EntryID(term=term, index=index))
    assert u.offset == woffset
    assert u.offset_in_progress == woip
    assert len(u.entries) == wlen


def test_unstable_stable_to_logs_why_it_ignores() -> None:
    log = CaptureLogger()
    u = Unstable(entries=terms(5, 1), offset=5, offset_in_progress=6, logger=log)
    u.stable_to(EntryID(term=1, index=9))
    u.stable_to(EntryID(term=2, index=5))
    u.snapshot = snap(4, 1)
    u.stable_to(EntryID(term=1, index=4))
    assert log.lines == [
        "INFO entry at index 9 missing from unstable log; ignoring",
        "INFO entry at (index,term)=(5,2) mismatched with entry at (5,1) in unstable log; ignoring",
        "INFO entry at index 4 matched unstable snapshot; ignoring",
    ]


@pytest.mark.parametrize(
    ("entries", "offset", "oip", "toappend", "woffset", "woip", "wentries"),
    [
        # append to the end
        (terms(5, 1), 5, 5, terms(6, 1, 1), 5, 5, terms(5, 1, 1, 1)),
        (terms(5, 1), 5, 6, terms(6, 1, 1), 5, 6, terms(5, 1, 1, 1)),
        # replace the unstable entries
        (terms(5, 1), 5, 5, terms(5, 2, 2), 5, 5, terms(5, 2, 2)),
        (terms(5, 1), 5, 5, terms(4, 2, 2, 2), 4, 4, terms(4, 2, 2, 2)),
        (terms(5, 1), 5, 6, terms(5, 2, 2), 5, 5, terms(5, 2, 2)),
        # truncate the existing entries and append
        (terms(5, 1, 1, 1), 5, 5, terms(6, 2), 5, 5, terms(5, 1, 2)),
        (terms(5, 1, 1, 1), 5, 5, terms(7, 2, 2), 5, 5, terms(5, 1, 1, 2, 2)),
        (terms(5, 1, 1, 1), 5, 6, terms(6, 2), 5, 6, terms(5, 1, 2)),
        (terms(5, 1, 1, 1), 5, 7, terms(6, 2), 5, 6, terms(5, 1, 2)),
    ],
)
def test_unstable_truncate_and_append(
    entries: list[Entry],
    offset: int,
    oip: int,
    toappend: list[Entry],
    woffset: int,
    woip: int,
    wentries: list[Entry],
) -> None:
    u = Unstable(entries=list(entries), offset=offset, offset_in_progress=oip)
    u.truncate_and_append(toappend)
    assert u.offset == woffset
    assert u.offset_in_progress == woip
    assert u.entries == wentries


def test_unstable_slices_are_copies() -> None:
    """Go protects unstable's array with full slice expressions; here every accessor hands
    out a new list, so growing what was handed out cannot reach the log."""
    u = Unstable(entries=terms(5, 1, 1, 1), offset=5, offset_in_progress=5)
    got = u.slice(5, 7)
    got.append(Entry(term=9, index=7))
    nxt = u.next_entries()
    nxt.clear()
    assert u.entries == terms(5, 1, 1, 1)


@pytest.mark.parametrize(
    ("lo", "hi", "message"),
    [
        (7, 6, "invalid unstable.slice 7 > 6"),
        (4, 6, "unstable.slice[4,6) out of bound [5,8]"),
        (5, 9, "unstable.slice[5,9) out of bound [5,8]"),
    ],
)
def test_unstable_slice_out_of_bounds_panics(lo: int, hi: int, message: str) -> None:
    u = Unstable(entries=terms(5, 1, 1, 1), offset=5)
    with pytest.raises(RaftPanic) as exc:
        u.slice(lo, hi)
    assert str(exc.value) == message
