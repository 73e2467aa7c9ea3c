"""Ports etcd-io/raft v3.7.0 storage.go (Apache-2.0): the Storage interface and MemoryStorage.

Errors: where Go returns ``(value, err)``, a method here returns the value and raises the
error. The four sentinel errors are exception classes (subclasses of :class:`StorageError`)
whose text is Go's; ``err == ErrCompacted`` becomes ``except ErrCompacted``.

MemoryStorage has no lock: the raft layer is single-threaded (the node that drives it owns
it), unlike Go's, whose Append runs on an application goroutine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TypeVar

from natsd.raft.codec import limit_size
from natsd.raft.log_unstable import clone_snapshot
from natsd.raft.logger import get_logger
from natsd.raft.types import ConfState, Entry, HardState, Snapshot, SnapshotMetadata

_T = TypeVar("_T")

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # mypy (which brings mypy_extensions) is a dev dependency only

    def mypyc_attr(*attrs: str, **kwattrs: object) -> Callable[[_T], _T]:
        return lambda c: c


__all__ = [
    "ErrCompacted",
    "ErrSnapOutOfDate",
    "ErrSnapshotTemporarilyUnavailable",
    "ErrUnavailable",
    "InMemStorageCallStats",
    "MemoryStorage",
    "Storage",
    "StorageError",
]


class StorageError(Exception):
    """The base of the errors a Storage raises."""


class ErrCompacted(StorageError):
    """Raised by Storage.entries/compact when a requested index is unavailable because it
    predates the last snapshot."""

    def __init__(self, msg: str = "requested index is unavailable due to compaction") -> None:
        super().__init__(msg)


class ErrSnapOutOfDate(StorageError):
    """Raised by Storage.create_snapshot when a requested index is older than the existing
    snapshot."""

    def __init__(self, msg: str = "requested index is older than the existing snapshot") -> None:
        super().__init__(msg)


class ErrUnavailable(StorageError):
    """Raised by a Storage when the requested log entries are unavailable."""

    def __init__(self, msg: str = "requested entry at index is unavailable") -> None:
        super().__init__(msg)


class ErrSnapshotTemporarilyUnavailable(StorageError):
    """Raised by a Storage when the required snapshot is temporarily unavailable."""

    def __init__(self, msg: str = "snapshot is temporarily unavailable") -> None:
        super().__init__(msg)


# The application implements Storage, compiled or not: compiled, Storage is a native class,
# which an interpreted class may only subclass with this attribute (MemoryStorage takes no
# interpreted subclass).
@mypyc_attr(allow_interpreted_subclasses=True)
class Storage(ABC):
    """Storage is an interface that may be implemented by the application to retrieve log
    entries from storage.

    If any Storage method raises an error, the raft instance will become inoperable and
    refuse to participate in elections; the application is responsible for cleanup and
    recovery in this case."""

    @abstractmethod
    def initial_state(self) -> tuple[HardState | None, ConfState]:
        """The saved HardState and ConfState information. The HardState may be None to
        indicate that no HardState has been persisted yet; is_empty_hard_state treats None
        as empty. The ConfState is never None; if none has been persisted yet, return an
        empty ConfState."""

    @abstractmethod
    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        """A list of consecutive log entries in the range [lo, hi), starting from lo. The
        max_size limits the total size of the log entries returned, but at least one entry
        is returned if any.

        The caller owns the returned list and may append to it. The individual entries in
        it must not be mutated, neither by the Storage implementation nor the caller. Note
        that raft may forward these entries back to the application via Ready, so the
        corresponding handler must not mutate entries either.

        Raises ErrCompacted if entry lo has been compacted, or ErrUnavailable if an
        unavailable entry was encountered in [lo, hi)."""

    @abstractmethod
    def term(self, i: int) -> int:
        """The term of entry i, which must be in the range [first_index()-1, last_index()].
        The term of the entry before first_index is retained for matching purposes even
        though the rest of that entry may not be available."""

    @abstractmethod
    def last_index(self) -> int:
        """The index of the last entry in the log."""

    @abstractmethod
    def first_index(self) -> int:
        """The index of the first log entry that is possibly available via entries() (older
        entries have been incorporated into the latest Snapshot; if storage only contains
        the dummy entry the first log entry is not available)."""

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """The most recent snapshot. If the snapshot is temporarily unavailable, raise
        ErrSnapshotTemporarilyUnavailable, so the raft state machine knows that Storage
        needs some time to prepare the snapshot and calls snapshot() later."""


class InMemStorageCallStats:
    """How often each Storage method was called (tests look at it)."""

    __slots__ = ("entries", "first_index", "initial_state", "last_index", "snapshot", "term")

    def __init__(self) -> None:
        self.initial_state = 0
        self.first_index = 0
        self.last_index = 0
        self.entries = 0
        self.term = 0
        self.snapshot = 0


class MemoryStorage(Storage):
    """MemoryStorage implements the Storage interface backed by an in-memory list."""

    __slots__ = ("call_stats", "ents", "hard_state", "snap")

    def __init__(self, ents: list[Entry] | None = None) -> None:
        """NewMemoryStorage. ``ents`` (for tests, like Go's ``&MemoryStorage{ents: ents}``)
        replaces the dummy entry at term zero that an empty storage starts from."""
        self.hard_state: HardState | None = None
        # Go's ms.snapshot: renamed, as the method snapshot() has the field's name.
        self.snap: Snapshot = Snapshot()
        # ents[i] has raft log position i+snap.metadata.index
        self.ents: list[Entry] = ents if ents is not None else [Entry()]
        self.call_stats = InMemStorageCallStats()

    def initial_state(self) -> tuple[HardState | None, ConfState]:
        self.call_stats.initial_state += 1
        return self.hard_state, self.snap.metadata.conf_state

    def set_hard_state(self, st: HardState) -> None:
        """Saves the current HardState."""
        self.hard_state = st

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        self.call_stats.entries += 1
        offset = self.ents[0].index
        if lo <= offset:
            raise ErrCompacted()
        if hi > self._last_index() + 1:
            get_logger().panicf(
                "entries' hi(%d) is out of bound lastindex(%d)", hi, self._last_index()
            )
        # only contains dummy entries.
        if len(self.ents) == 1:
            raise ErrUnavailable()
        # A slice is a copy: appends by the caller cannot reach self.ents.
        ents = limit_size(self.ents[lo - offset : hi - offset], max_size)
        return ents

    def term(self, i: int) -> int:
        self.call_stats.term += 1
        offset = self.ents[0].index
        if i < offset:
            raise ErrCompacted()
        if i - offset >= len(self.ents):
            raise ErrUnavailable()
        return self.ents[i - offset].term

    def last_index(self) -> int:
        self.call_stats.last_index += 1
        return self._last_index()

    def _last_index(self) -> int:
        return self.ents[0].index + len(self.ents) - 1

    def first_index(self) -> int:
        self.call_stats.first_index += 1
        return self._first_index()

    def _first_index(self) -> int:
        return self.ents[0].index + 1

    def snapshot(self) -> Snapshot:
        self.call_stats.snapshot += 1
        return clone_snapshot(self.snap)

    def apply_snapshot(self, snap: Snapshot) -> None:
        """Overwrites the contents of this Storage object with those of the given snapshot.
        Raises ErrSnapOutOfDate for a snapshot older than the one it has."""
        # handle check for old snapshot being applied
        ms_index = self.snap.metadata.index
        snap_index = snap.metadata.index
        # During bootstrap, applications (e.g., etcd) may initialize only the ConfState in
        # the snapshot. In this case, both the snapshot index and term are 0.
        if ms_index != 0 and ms_index >= snap_index:
            raise ErrSnapOutOfDate()
        self.snap = clone_snapshot(snap)
        self.ents = [Entry(term=snap.metadata.term, index=snap.metadata.index)]

    def create_snapshot(self, i: int, cs: ConfState | None, data: bytes) -> Snapshot:
        """Makes a snapshot which can be retrieved with snapshot() and can be used to
        reconstruct the state at that point. If any configuration changes have been made
        since the last compaction, the result of the last apply_conf_change must be passed
        in. Raises ErrSnapOutOfDate if i is not past the current snapshot."""
        if i <= self.snap.metadata.index:
            raise ErrSnapOutOfDate()
        offset = self.ents[0].index
        if i > self._last_index():
            get_logger().panicf("snapshot %d is out of bound lastindex(%d)", i, self._last_index())
        md = self.snap.metadata
        conf_state = cs.clone() if cs is not None else md.conf_state
        self.snap = Snapshot(data, SnapshotMetadata(conf_state, i, self.ents[i - offset].term))
        return clone_snapshot(self.snap)

    def compact(self, compact_index: int) -> None:
        """Discards all log entries prior to compact_index. It is the application's
        responsibility to not attempt to compact an index greater than raftLog.applied.
        Raises ErrCompacted if compact_index is not past the first entry kept."""
        offset = self.ents[0].index
        if compact_index <= offset:
            raise ErrCompacted()
        if compact_index > self._last_index():
            get_logger().panicf(
                "compact %d is out of bound lastindex(%d)", compact_index, self._last_index()
            )
        i = compact_index - offset
        # A new list: entries are immutable, and lists handed out by entries() are copies.
        first = self.ents[i]
        ents = [Entry(term=first.term, index=first.index)]
        ents.extend(self.ents[i + 1 :])
        self.ents = ents

    def append(self, entries: list[Entry]) -> None:
        """Append the new entries to storage."""
        # TODO (upstream): ensure the entries are continuous and
        # entries[0].index > ms.entries[0].index
        if not entries:
            return
        first = self._first_index()
        last = entries[0].index + len(entries) - 1
        # shortcut if there is no new entry.
        if last < first:
            return
        # truncate compacted entries
        if first > entries[0].index:
            entries = entries[first - entries[0].index :]
        offset = entries[0].index - self.ents[0].index
        n = len(self.ents)
        if n > offset:
            # A new list: a truncated suffix may still be referenced from outside.
            self.ents = self.ents[:offset] + entries
        elif n == offset:
            self.ents.extend(entries)
        else:
            get_logger().panicf(
                "missing log entry [last: %d, append at: %d]",
                self._last_index(),
                entries[0].index,
            )
