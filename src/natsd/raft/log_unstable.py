"""Ports etcd-io/raft v3.7.0 log_unstable.go (Apache-2.0): the entries and snapshot not yet
written to Storage; and types.go (entryID, logSlice), here rather than in ``natsd.raft.log``
because Unstable needs entryID and log.py imports this module (log.py re-exports them)."""

from __future__ import annotations

from natsd.raft.logger import DiscardLogger, Logger
from natsd.raft.types import Entry, Snapshot, SnapshotMetadata

__all__ = ["EntryID", "LogSlice", "Unstable", "clone_snapshot", "pb_entry_id"]


class EntryID:
    """entryID uniquely identifies a raft log entry.

    Every entry is associated with a leadership term which issued this entry and initially
    appended it to the log. There can only be one leader at any term, and a leader never
    issues two entries with the same index."""

    __slots__ = ("index", "term")

    def __init__(self, term: int = 0, index: int = 0) -> None:
        self.term = term
        self.index = index

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EntryID):
            return NotImplemented
        return self.term == other.term and self.index == other.index

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        # Go's %v of the struct.
        return f"{{{self.term} {self.index}}}"

    def go_plus_v(self) -> str:
        """Go's %+v of the struct."""
        return f"{{term:{self.term} index:{self.index}}}"

    def __repr__(self) -> str:
        return f"EntryID(term={self.term}, index={self.index})"


def pb_entry_id(entry: Entry) -> EntryID:
    """pbEntryID returns the ID of the given Entry."""
    return EntryID(entry.term, entry.index)


class LogSlice:
    """logSlice describes a correct slice of a raft log.

    Every log slice is considered in a context of a specific leader term. This term does not
    necessarily match EntryID.term of the entries, since a leader log contains both entries
    from its own term, and some earlier terms.

    Two slices with a matching LogSlice.term are guaranteed to be consistent, i.e. they never
    contain two different entries at the same index. The reverse is not true: two slices
    with different LogSlice.term may contain both matching and mismatching entries.
    Specifically, logs at two different leader terms share a common prefix, after which they
    *permanently* diverge.

    A well-formed LogSlice conforms to raft safety properties. It provides the following
    guarantees:

     1. entries[i].index == prev.index + 1 + i,
     2. prev.term <= entries[0].term,
     3. entries[i-1].term <= entries[i].term,
     4. entries[len-1].term <= term.

    Property (1) means the slice is contiguous. Properties (2) and (3) mean that the terms of
    the entries in a log never regress. Property (4) means that a leader log at a specific
    term never has entries from higher terms.

    Users of this class can assume the invariants hold true. Exception is the "gateway" code
    that initially constructs LogSlice, such as when its content is sourced from a message
    that was received via transport, or from Storage, or in a test code that manually
    hard-codes it. In these cases, the invariants should be validated using valid()."""

    __slots__ = ("entries", "prev", "term")

    def __init__(
        self, term: int = 0, prev: EntryID | None = None, entries: list[Entry] | None = None
    ) -> None:
        # term is the leader term containing the given entries in its log.
        self.term = term
        # prev is the ID of the entry immediately preceding the entries.
        self.prev: EntryID = prev if prev is not None else EntryID()
        # entries contains the consecutive entries representing this slice.
        self.entries: list[Entry] = entries if entries is not None else []

    def last_index(self) -> int:
        """The index of the last entry in this log slice, or prev.index if there are no
        entries."""
        return self.prev.index + len(self.entries)

    def last_entry_id(self) -> EntryID:
        """The ID of the last entry in this log slice, or prev if there are no entries."""
        if self.entries:
            return pb_entry_id(self.entries[-1])
        return self.prev

    def valid(self) -> None:
        """Raises ValueError (Go returns the error) unless the LogSlice is well-formed; see
        the class docstring for what constitutes a valid raft log slice."""
        prev = self.prev
        for e in self.entries:
            id = pb_entry_id(e)
            if id.term < prev.term or id.index != prev.index + 1:
                raise ValueError(
                    f"leader term {self.term}: entries {prev.go_plus_v()} and "
                    f"{id.go_plus_v()} not consistent"
                )
            prev = id
        if self.term < prev.term:
            raise ValueError(f"leader term {self.term}: entry {prev.go_plus_v()} has a newer term")


def clone_snapshot(s: Snapshot) -> Snapshot:
    """proto.Clone of a Snapshot: a deep copy of the metadata (the conf state's lists are
    mutable); the data bytes are immutable and shared."""
    md = s.metadata
    return Snapshot(s.data, SnapshotMetadata(md.conf_state.clone(), md.index, md.term))


class Unstable:
    """unstable contains "unstable" log entries and snapshot state that has not yet been
    written to Storage. The type serves two roles. First, it holds on to new log entries and
    an optional snapshot until they are handed to a Ready struct for persistence. Second, it
    continues to hold on to this state after it has been handed off to provide raftLog with
    a view of the in-progress log entries and snapshot until their writes have been
    stabilized and are guaranteed to be reflected in queries of Storage. After this point,
    the corresponding log entries and/or snapshot can be cleared from unstable.

    unstable.entries[i] has raft log position i+unstable.offset. Note that unstable.offset
    may be less than the highest log position in storage; this means that the next write to
    storage might need to truncate the log before persisting unstable.entries.

    ``entries`` is owned: every accessor hands out a copy (Go protects its slices with full
    slice expressions instead), so appending and stabilizing work on the list in place. The
    constructor takes ownership of the list it is given.
    """

    __slots__ = (
        "entries",
        "logger",
        "offset",
        "offset_in_progress",
        "snapshot",
        "snapshot_in_progress",
    )

    def __init__(
        self,
        snapshot: Snapshot | None = None,
        entries: list[Entry] | None = None,
        offset: int = 0,
        snapshot_in_progress: bool = False,
        offset_in_progress: int = 0,
        logger: Logger | None = None,
    ) -> None:
        # the incoming unstable snapshot, if any.
        self.snapshot: Snapshot | None = snapshot
        # all entries that have not yet been written to storage.
        self.entries: list[Entry] = entries if entries is not None else []
        # entries[i] has raft log position i+offset.
        self.offset = offset
        # if true, snapshot is being written to storage.
        self.snapshot_in_progress = snapshot_in_progress
        # entries[:offset_in_progress-offset] are being written to storage. Like offset,
        # offset_in_progress is exclusive, meaning that it contains the index following the
        # largest in-progress entry.
        # Invariant: offset <= offset_in_progress
        self.offset_in_progress = offset_in_progress
        self.logger: Logger = logger if logger is not None else DiscardLogger()

    def maybe_first_index(self) -> tuple[int, bool]:
        """The index of the first possible entry in entries if it has a snapshot."""
        if self.snapshot is not None:
            return self.snapshot.metadata.index + 1, True
        return 0, False

    def maybe_last_index(self) -> tuple[int, bool]:
        """The last index if it has at least one unstable entry or snapshot."""
        n = len(self.entries)
        if n != 0:
            return self.offset + n - 1, True
        if self.snapshot is not None:
            return self.snapshot.metadata.index, True
        return 0, False

    def maybe_term(self, i: int) -> tuple[int, bool]:
        """The term of the entry at index i, if there is any."""
        offset = self.offset
        if i < offset:
            snap = self.snapshot
            if snap is not None and snap.metadata.index == i:
                return snap.metadata.term, True
            return 0, False
        # Past offset only the entries can answer (maybeLastIndex's snapshot case has
        # snapshot.index == offset-1 < i).
        k = i - offset
        if k >= len(self.entries):
            return 0, False
        return self.entries[k].term, True

    def next_entries(self) -> list[Entry]:
        """The unstable entries that are not already in the process of being written to
        storage (empty when there are none)."""
        in_progress = self.offset_in_progress - self.offset
        if len(self.entries) == in_progress:
            return []
        return self.entries[in_progress:]

    def next_snapshot(self) -> Snapshot | None:
        """The unstable snapshot, if one exists that is not already in the process of being
        written to storage."""
        if self.snapshot is None or self.snapshot_in_progress:
            return None
        return clone_snapshot(self.snapshot)

    def accept_in_progress(self) -> None:
        """Marks all entries and the snapshot, if any, in the unstable as having begun the
        process of being written to storage. The entries/snapshot will no longer be returned
        from next_entries/next_snapshot. However, new entries/snapshots added after a call
        to accept_in_progress will be returned from those methods, until the next call to
        accept_in_progress."""
        if self.entries:
            # NOTE: +1 because offset_in_progress is exclusive, like offset.
            self.offset_in_progress = self.entries[-1].index + 1
        if self.snapshot is not None:
            self.snapshot_in_progress = True

    def stable_to(self, id: EntryID) -> None:
        """Marks entries up to the entry with the specified (index, term) as being
        successfully written to stable storage.

        The method should only be called when the caller can attest that the entries can not
        be overwritten by an in-progress log append. See the related comment in
        newStorageAppendRespMsg."""
        gt, ok = self.maybe_term(id.index)
        if not ok:
            # Unstable entry missing. Ignore.
            self.logger.infof("entry at index %d missing from unstable log; ignoring", id.index)
            return
        if id.index < self.offset:
            # Index matched unstable snapshot, not unstable entry. Ignore.
            self.logger.infof("entry at index %d matched unstable snapshot; ignoring", id.index)
            return
        if gt != id.term:
            # Term mismatch between unstable entry and specified entry. Ignore. This is
            # possible if part or all of the unstable log was replaced between that time that
            # a set of entries started to be written to stable storage and when they
            # finished.
            self.logger.infof(
                "entry at (index,term)=(%d,%d) mismatched with "
                "entry at (%d,%d) in unstable log; ignoring",
                id.index,
                id.term,
                id.index,
                gt,
            )
            return
        num = id.index + 1 - self.offset
        # In place: the list is never handed out (see the class docstring), so Go's
        # re-slicing and shrinkEntriesArray reduce to dropping the stable prefix.
        del self.entries[:num]
        self.offset = id.index + 1
        self.offset_in_progress = max(self.offset_in_progress, self.offset)

    def stable_snap_to(self, i: int) -> None:
        if self.snapshot is not None and self.snapshot.metadata.index == i:
            self.snapshot = None
            self.snapshot_in_progress = False

    def restore(self, s: Snapshot) -> None:
        self.offset = s.metadata.index + 1
        self.offset_in_progress = self.offset
        self.entries = []
        self.snapshot = clone_snapshot(s)
        self.snapshot_in_progress = False

    def truncate_and_append(self, ents: list[Entry]) -> None:
        from_index = ents[0].index
        if from_index == self.offset + len(self.entries):
            # from_index is the next index in the entries, so append directly.
            self.entries.extend(ents)
        elif from_index <= self.offset:
            self.logger.infof("replace the unstable entries from index %d", from_index)
            # The log is being truncated to before our current offset portion, so set the
            # offset and replace the entries.
            self.entries = list(ents)
            self.offset = from_index
            self.offset_in_progress = self.offset
        else:
            # Truncate to from_index (exclusive), and append the new entries.
            self.logger.infof("truncate the unstable entries before index %d", from_index)
            keep = self.slice(self.offset, from_index)
            keep.extend(ents)
            self.entries = keep
            # Only in-progress entries before from_index are still considered to be
            # in-progress.
            self.offset_in_progress = min(self.offset_in_progress, from_index)

    def slice(self, lo: int, hi: int) -> list[Entry]:
        """The entries from the unstable log with indexes in the range [lo, hi). The entire
        range must be stored in the unstable log or the method panics. The returned list is
        the caller's, but the entries in it must not be changed because they are still
        shared with unstable."""
        self.must_check_out_of_bounds(lo, hi)
        return self.entries[lo - self.offset : hi - self.offset]

    def must_check_out_of_bounds(self, lo: int, hi: int) -> None:
        """u.offset <= lo <= hi <= u.offset+len(u.entries)"""
        if lo > hi:
            self.logger.panicf("invalid unstable.slice %d > %d", lo, hi)
        upper = self.offset + len(self.entries)
        if lo < self.offset or hi > upper:
            self.logger.panicf(
                "unstable.slice[%d,%d) out of bound [%d,%d]", lo, hi, self.offset, upper
            )
