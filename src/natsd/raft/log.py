"""Ports etcd-io/raft v3.7.0 log.go (Apache-2.0): raftLog, the log as raft sees it (the
stable entries in Storage and the unstable ones not yet written), and util.go's payloadSize,
payloadsSize and extend. entryID and logSlice (types.go) live in ``natsd.raft.log_unstable``
and entsSize / limitSize (protobuf sizes) in ``natsd.raft.codec``; all are re-exported here.

Errors, as in ``natsd.raft.storage``: a Go ``(value, err)`` return is a value here, and the
error (ErrCompacted, ErrUnavailable) is raised. Go's panics are RaftPanic via the logger;
an unexpected error from Storage propagates as it is (Go panics with it).

Go's uint64 arithmetic: sizes and indexes are Python ints; ``NO_LIMIT`` keeps Go's
math.MaxUint64 sentinel, and the two subtractions whose wrap-around upstream relies on are
masked to 64 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from natsd.raft.codec import ents_size, limit_size
from natsd.raft.log_unstable import EntryID, LogSlice, Unstable, clone_snapshot, pb_entry_id
from natsd.raft.logger import Logger, RaftPanic
from natsd.raft.storage import ErrCompacted, ErrUnavailable, Storage, StorageError
from natsd.raft.types import Entry, Snapshot

__all__ = [
    "NO_LIMIT",
    "EntryID",
    "LogSlice",
    "RaftLog",
    "ents_size",
    "extend",
    "limit_size",
    "new_log",
    "new_log_with_size",
    "payload_size",
    "payloads_size",
    "pb_entry_id",
]

# noLimit (raft.go): math.MaxUint64, "no limit" for sizes.
NO_LIMIT: Final = 2**64 - 1
_MASK64: Final = 2**64 - 1


def payload_size(e: Entry) -> int:
    """payloadSize: the size of the payload of the entry. Notably, it does not depend on its
    index or term. Entries with empty payloads, like those proposed after a leadership
    change, are considered to be zero size."""
    return len(e.data)


def payloads_size(ents: list[Entry]) -> int:
    """payloadsSize: the size of the payloads of the entries."""
    s = 0
    for e in ents:
        s += len(e.data)
    return s


def extend(dst: list[Entry], vals: list[Entry]) -> list[Entry]:
    """extend appends vals to dst and returns it. Go uses it to allocate precisely what is
    needed; here dst must be a list the caller owns, which is extended in place."""
    dst.extend(vals)
    return dst


class RaftLog:
    __slots__ = (
        "applied",
        "applying",
        "applying_ents_paused",
        "applying_ents_size",
        "committed",
        "logger",
        "max_applying_ents_size",
        "storage",
        "unstable",
    )

    def __init__(
        self,
        storage: Storage,
        unstable: Unstable,
        committed: int,
        applying: int,
        applied: int,
        logger: Logger,
        max_applying_ents_size: int,
    ) -> None:
        # storage contains all stable entries since the last snapshot.
        self.storage = storage
        # unstable contains all unstable entries and snapshot. they will be saved into
        # storage.
        self.unstable = unstable
        # committed is the highest log position that is known to be in stable storage on a
        # quorum of nodes.
        self.committed = committed
        # applying is the highest log position that the application has been instructed to
        # apply to its state machine. Some of these entries may be in the process of
        # applying and have not yet reached applied.
        # Use: The field is incremented when accepting a Ready struct.
        # Invariant: applied <= applying && applying <= committed
        self.applying = applying
        # applied is the highest log position that the application has successfully applied
        # to its state machine.
        # Use: The field is incremented when advancing after the committed entries in a
        # Ready struct have been applied (either synchronously or asynchronously).
        # Invariant: applied <= committed
        self.applied = applied
        self.logger = logger
        # max_applying_ents_size limits the outstanding byte size of the messages returned
        # from calls to next_committed_ents that have not been acknowledged by a call to
        # applied_to.
        self.max_applying_ents_size = max_applying_ents_size
        # applying_ents_size is the current outstanding byte size of the messages returned
        # from calls to next_committed_ents that have not been acknowledged by a call to
        # applied_to.
        self.applying_ents_size = 0
        # applying_ents_paused is true when entry application has been paused until enough
        # progress is acknowledged.
        self.applying_ents_paused = False

    def __str__(self) -> str:
        u = self.unstable
        return (
            f"committed={self.committed}, applied={self.applied}, applying={self.applying}, "
            f"unstable.offset={u.offset}, unstable.offsetInProgress={u.offset_in_progress}, "
            f"len(unstable.Entries)={len(u.entries)}"
        )

    def maybe_append(self, a: LogSlice, committed: int) -> tuple[int, bool]:
        """(0, False) if the entries cannot be appended; otherwise (last index of new
        entries, True)."""
        if not self.match_term(a.prev):
            return 0, False
        # TODO(pav-kv) (upstream): propagate logSlice down the stack. It will be used all the
        # way down in unstable, for safety checks, and for useful bookkeeping.
        lastnewi = a.prev.index + len(a.entries)
        ci = self.find_conflict(a.entries)
        if ci == 0:
            pass
        elif ci <= self.committed:
            self.logger.panicf(
                "entry %d conflict with committed entry [committed(%d)]", ci, self.committed
            )
        else:
            offset = a.prev.index + 1
            if ci - offset > len(a.entries):
                self.logger.panicf("index, %d, is out of range [%d]", ci - offset, len(a.entries))
            self.append(a.entries[ci - offset :])
        self.commit_to(min(committed, lastnewi))
        return lastnewi, True

    def append(self, ents: list[Entry]) -> int:
        """Go's variadic append(ents...), taking the list."""
        if not ents:
            return self.last_index()
        after = (ents[0].index - 1) & _MASK64
        if after < self.committed:
            self.logger.panicf("after(%d) is out of range [committed(%d)]", after, self.committed)
        self.unstable.truncate_and_append(ents)
        return self.last_index()

    def find_conflict(self, ents: list[Entry]) -> int:
        """The index of the first conflict between the existing entries and the given
        entries, if there are any. If there are no conflicting entries, and the existing
        entries contain all the given entries, zero is returned. If there are no conflicting
        entries, but the given entries contain new entries, the index of the first new entry
        is returned. An entry is considered to be conflicting if it has the same index but a
        different term. The indexes of the given entries MUST be continuously increasing."""
        for e in ents:
            if not self._match_term(e.index, e.term):
                if e.index <= self.last_index():
                    # TODO(pav-kv) (upstream): can simply print %+v of the id. This will
                    # change the log format though.
                    self.logger.infof(
                        "found conflict at index %d [existing term: %d, conflicting term: %d]",
                        e.index,
                        self.zero_term_on_out_of_bounds(e.index),
                        e.term,
                    )
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """A best guess on where this log ends matching another log, given that the only
        information known about the other log is the (index, term) of its single entry.

        Specifically, the first returned value is the max guess_index <= index, such that
        term(guess_index) <= term or term(guess_index) is not known (because this index is
        compacted or not yet stored). The second returned value is term(guess_index), or 0
        if it is unknown.

        This is used by a follower and leader to resolve log conflicts after an
        unsuccessful append to a follower, and ultimately restore the steady flow of
        appends."""
        while index > 0:
            # If there is an error (likely ErrCompacted or ErrUnavailable), we don't know
            # whether it's a match or not, so assume a possible match and return the index,
            # with 0 term indicating an unknown term.
            try:
                our_term = self.term(index)
            except (ErrCompacted, ErrUnavailable):
                return index, 0
            if our_term <= term:
                return index, our_term
            index -= 1
        return 0, 0

    def next_unstable_ents(self) -> list[Entry]:
        """All entries that are available to be written to the local stable log and are not
        already in-progress."""
        return self.unstable.next_entries()

    def has_next_unstable_ents(self) -> bool:
        """Whether there are any entries that are available to be written to the local
        stable log and are not already in-progress."""
        u = self.unstable
        return len(u.entries) > u.offset_in_progress - u.offset

    def has_next_or_in_progress_unstable_ents(self) -> bool:
        """Whether there are any entries that are available to be written to the local
        stable log or in the process of being written to the local stable log."""
        return len(self.unstable.entries) > 0

    def next_committed_ents(self, allow_unstable: bool) -> list[Entry]:
        """All the available entries for execution. Entries can be committed even when the
        local raft instance has not durably appended them to the local raft log yet. If
        allow_unstable is true, committed entries from the unstable log may be returned;
        otherwise, only entries known to reside locally on stable storage will be
        returned."""
        if self.applying_ents_paused:
            # Entry application outstanding size limit reached.
            return []
        if self.has_next_or_in_progress_snapshot():
            # See comment in has_next_committed_ents.
            return []
        lo, hi = self.applying + 1, self.max_appliable_index(allow_unstable) + 1  # [lo, hi)
        if lo >= hi:
            # Nothing to apply.
            return []
        max_size = (self.max_applying_ents_size - self.applying_ents_size) & _MASK64
        if max_size <= 0:
            self.logger.panicf(
                "applying entry size (%d-%d)=%d not positive",
                self.max_applying_ents_size,
                self.applying_ents_size,
                max_size,
            )
        try:
            return self.slice(lo, hi, max_size)
        except StorageError as err:
            self.logger.panicf("unexpected error when getting unapplied entries (%v)", err)

    def has_next_committed_ents(self, allow_unstable: bool) -> bool:
        """Whether there are any available entries for execution. This is a fast check
        without the heavy slice() of next_committed_ents()."""
        if self.applying_ents_paused:
            # Entry application outstanding size limit reached.
            return False
        if self.has_next_or_in_progress_snapshot():
            # If we have a snapshot to apply, don't also return any committed entries. Doing
            # so raises questions about what should be applied first.
            return False
        lo, hi = self.applying + 1, self.max_appliable_index(allow_unstable) + 1  # [lo, hi)
        return lo < hi

    def max_appliable_index(self, allow_unstable: bool) -> int:
        """The maximum committed index that can be applied. If allow_unstable is true,
        committed entries from the unstable log can be applied; otherwise, only entries
        known to reside locally on stable storage can be applied."""
        hi = self.committed
        if not allow_unstable:
            hi = min(hi, self.unstable.offset - 1)
        return hi

    def next_unstable_snapshot(self) -> Snapshot | None:
        """The snapshot, if present, that is available to be applied to the local storage
        and is not already in-progress."""
        return self.unstable.next_snapshot()

    def has_next_unstable_snapshot(self) -> bool:
        """Whether there is a snapshot that is available to be applied to the local storage
        and is not already in-progress."""
        u = self.unstable
        return u.snapshot is not None and not u.snapshot_in_progress

    def has_next_or_in_progress_snapshot(self) -> bool:
        """Whether there is a pending snapshot waiting for applying or in the process of
        being applied."""
        return self.unstable.snapshot is not None

    def snapshot(self) -> Snapshot:
        """The unstable snapshot if any, else Storage's (whose errors propagate)."""
        if self.unstable.snapshot is not None:
            return clone_snapshot(self.unstable.snapshot)
        return self.storage.snapshot()

    def first_index(self) -> int:
        u = self.unstable
        if u.snapshot is not None:  # unstable.maybeFirstIndex
            return u.snapshot.metadata.index + 1
        return self.storage.first_index()

    def last_index(self) -> int:
        u = self.unstable
        n = len(u.entries)
        if n != 0:  # unstable.maybeLastIndex
            return u.offset + n - 1
        if u.snapshot is not None:
            return u.snapshot.metadata.index
        return self.storage.last_index()

    def commit_to(self, tocommit: int) -> None:
        # never decrease commit
        if self.committed < tocommit:
            if self.last_index() < tocommit:
                self.logger.panicf(
                    "tocommit(%d) is out of range [lastIndex(%d)]. "
                    "Was the raft log corrupted, truncated, or lost?",
                    tocommit,
                    self.last_index(),
                )
            self.committed = tocommit

    def applied_to(self, i: int, size: int) -> None:
        if self.committed < i or i < self.applied:
            self.logger.panicf(
                "applied(%d) is out of range [prevApplied(%d), committed(%d)]",
                i,
                self.applied,
                self.committed,
            )
        self.applied = i
        self.applying = max(self.applying, i)
        if self.applying_ents_size > size:
            self.applying_ents_size -= size
        else:
            # Defense against underflow.
            self.applying_ents_size = 0
        self.applying_ents_paused = self.applying_ents_size >= self.max_applying_ents_size

    def accept_applying(self, i: int, size: int, allow_unstable: bool) -> None:
        if self.committed < i:
            self.logger.panicf(
                "applying(%d) is out of range [prevApplying(%d), committed(%d)]",
                i,
                self.applying,
                self.committed,
            )
        self.applying = i
        self.applying_ents_size += size
        # Determine whether to pause entry application until some progress is acknowledged.
        # We pause in two cases:
        # 1. the outstanding entry size equals or exceeds the maximum size.
        # 2. the outstanding entry size does not equal or exceed the maximum size, but we
        #    determine that the next entry in the log will push us over the limit. We
        #    determine this by comparing the last entry returned from next_committed_ents to
        #    the maximum entry that the method was allowed to return had there been no size
        #    limit. If these indexes are not equal, then the returned entries list must have
        #    been truncated to adhere to the memory limit.
        self.applying_ents_paused = (
            self.applying_ents_size >= self.max_applying_ents_size
            or i < self.max_appliable_index(allow_unstable)
        )

    def stable_to(self, id: EntryID) -> None:
        self.unstable.stable_to(id)

    def stable_snap_to(self, i: int) -> None:
        self.unstable.stable_snap_to(i)

    def accept_unstable(self) -> None:
        """The application has started persisting the unstable entries in storage: mark the
        current unstable entries as in-progress, to avoid returning them with future calls
        to Ready()."""
        self.unstable.accept_in_progress()

    def last_entry_id(self) -> EntryID:
        """The ID of the last entry in the log."""
        index = self.last_index()
        try:
            t = self.term(index)
        except StorageError as err:
            self.logger.panicf("unexpected error when getting the last term at %d: %v", index, err)
        return EntryID(t, index)

    def term(self, i: int) -> int:
        """The term of the entry at index i; raises ErrCompacted or ErrUnavailable when the
        log does not have it."""
        # Check the unstable log first, even before computing the valid term range, which
        # may need to access stable Storage. If we find the entry's term in the unstable
        # log, we know it was in the valid range.
        t, ok = self.unstable.maybe_term(i)
        if ok:
            return t
        # The valid term range is [first_index-1, last_index]. Even though the entry at
        # first_index-1 is compacted away, its term is available for matching purposes when
        # doing log appends.
        if i + 1 < self.first_index():
            raise ErrCompacted()
        if i > self.last_index():
            raise ErrUnavailable()
        # ErrCompacted and ErrUnavailable pass through; any other error is Go's panic.
        return self.storage.term(i)

    def entries(self, i: int, max_size: int) -> list[Entry]:
        if i > self.last_index():
            return []
        return self.slice(i, self.last_index() + 1, max_size)

    def all_entries(self) -> list[Entry]:
        """All entries in the log."""
        while True:
            try:
                return self.entries(self.first_index(), NO_LIMIT)
            except ErrCompacted:  # try again if there was a racing compaction
                continue

    def is_up_to_date(self, their: EntryID) -> bool:
        """Whether a log with the given last entry is more up-to-date than this one, by
        comparing the index and term of the last entries in the existing logs.

        If the logs have last entries with different terms, then the log with the later
        term is more up-to-date. If the logs end with the same term, then whichever log has
        the larger last index is more up-to-date. If the logs are the same, the given log is
        up-to-date."""
        our = self.last_entry_id()
        return their.term > our.term or (their.term == our.term and their.index >= our.index)

    def match_term(self, id: EntryID) -> bool:
        return self._match_term(id.index, id.term)

    def _match_term(self, index: int, term: int) -> bool:
        # match_term without an EntryID to build (find_conflict runs it per entry).
        try:
            t = self.term(index)
        except (ErrCompacted, ErrUnavailable):
            return False
        return t == term

    def maybe_commit(self, at: EntryID) -> bool:
        # NB (upstream): term should never be 0 on a commit because the leader campaigned at
        # least at term 1. But if it is 0 for some reason, we don't consider this a term
        # match.
        if at.term != 0 and at.index > self.committed and self.match_term(at):
            self.commit_to(at.index)
            return True
        return False

    def restore(self, s: Snapshot) -> None:
        self.logger.infof(
            "log [%s] starts to restore snapshot [index: %d, term: %d]",
            self,
            s.metadata.index,
            s.metadata.term,
        )
        self.committed = s.metadata.index
        self.unstable.restore(s)

    def scan(self, lo: int, hi: int, page_size: int, v: Callable[[list[Entry]], None]) -> None:
        """Visits all log entries in the [lo, hi) range, passing them to the callback. The
        callback can be invoked multiple times, with consecutive sub-ranges of the requested
        range. Passes up to page_size bytes worth of entries at a time; more if a single
        entry's size exceeds the limit.

        The entries in [lo, hi) must exist, otherwise scan() eventually raises (possibly
        after passing some entries through the callback): ErrCompacted, or RuntimeError.

        An exception the callback raises stops the scan and propagates (Go returns the
        callback's error): this is how to "break" the loop early."""
        while lo < hi:
            ents = self.slice(lo, hi, page_size)
            if not ents:
                raise RuntimeError(f"got 0 entries in [{lo}, {hi})")
            v(ents)
            lo += len(ents)

    def slice(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        """The log entries from lo through hi-1, inclusive, up to max_size bytes (at least
        one). Raises ErrCompacted if lo is compacted. The list is the caller's."""
        self.must_check_out_of_bounds(lo, hi)
        if lo == hi:
            return []
        u = self.unstable
        if lo >= u.offset:
            # u.slice makes a new list, so the caller cannot reach unstable's.
            return limit_size(u.slice(lo, hi), max_size)

        cut = min(hi, u.offset)
        try:
            ents = self.storage.entries(lo, cut, max_size)
        except ErrUnavailable:
            self.logger.panicf("entries[%d:%d) is unavailable from storage", lo, cut)
        # ErrCompacted passes through; any other error is Go's panic and propagates too.
        if hi <= u.offset:
            return ents

        # Fast path to check if ents has reached the size limitation. Either the returned
        # list is shorter than requested (which means the next entry would bring it over the
        # limit), or a single entry reaches the limit.
        if len(ents) < cut - lo:
            return ents
        # Slow path computes the actual total size, so that unstable entries are cut
        # optimally before being copied to ents.
        size = ents_size(ents)
        if size >= max_size:
            return ents

        unstable = limit_size(u.slice(u.offset, hi), max_size - size)
        # Total size of unstable may exceed max_size-size only if len(unstable) == 1. If
        # this happens, ignore this extra entry.
        if len(unstable) == 1 and size + ents_size(unstable) > max_size:
            return ents
        # Otherwise, total size of unstable does not exceed max_size-size, so total size of
        # ents+unstable does not exceed max_size. Simply concatenate them.
        return extend(ents, unstable)

    def must_check_out_of_bounds(self, lo: int, hi: int) -> None:
        """l.first_index <= lo <= hi <= l.first_index + len(l.entries); raises ErrCompacted
        when lo is below the first index, panics on the other violations."""
        if lo > hi:
            self.logger.panicf("invalid slice %d > %d", lo, hi)
        fi = self.first_index()
        if lo < fi:
            raise ErrCompacted()
        length = self.last_index() + 1 - fi
        if hi > fi + length:
            self.logger.panicf("slice[%d,%d) out of bound [%d,%d]", lo, hi, fi, self.last_index())

    def zero_term_on_out_of_bounds(self, i: int) -> int:
        """zeroTermOnOutOfBounds(l.term(i)): the term at i, or 0 if the index is compacted
        or not yet in the log; any other error panics."""
        try:
            return self.term(i)
        except (ErrCompacted, ErrUnavailable):
            return 0
        except RaftPanic:
            raise
        except Exception as err:
            self.logger.panicf("unexpected error (%v)", err)


def new_log(storage: Storage, logger: Logger) -> RaftLog:
    """newLog returns a log using the given storage and default options. It recovers the
    log to the state that it just commits and applies the latest snapshot."""
    return new_log_with_size(storage, logger, NO_LIMIT)


def new_log_with_size(storage: Storage, logger: Logger, max_applying_ents_size: int) -> RaftLog:
    """newLogWithSize returns a log using the given storage and max message size."""
    first_index = storage.first_index()
    last_index = storage.last_index()
    return RaftLog(
        storage,
        Unstable(offset=last_index + 1, offset_in_progress=last_index + 1, logger=logger),
        # Initialize our committed and applied pointers to the time of the last compaction.
        committed=first_index - 1,
        applying=first_index - 1,
        applied=first_index - 1,
        logger=logger,
        max_applying_ents_size=max_applying_ents_size,
    )
