"""The StreamStore interface shared by the memory and file stores.

Modelled on nats-server's ``server/store.go`` (``StreamStore``): a stream's messages in
sequence order, with per-subject indexes, limits enforcement and state queries. One contract
test suite (``tests/storage/``) runs against every implementation.

Threading and durability: a store is owned by one thread (the server's event loop). All
methods are synchronous. Writes land in the store's own buffers; ``flush()`` hands them to
the OS and ``sync()`` makes them durable (fsync). ``sync()`` is the only method that may be
called from another thread (the engine runs it in an executor to batch many publishers into
one fsync: group commit), and only concurrently with other methods, never with itself.

Subjects are ``str`` here (the JSON API and indexes work in text); the engine converts from
the wire's bytes once per stored message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "DiscardPolicy",
    "LostData",
    "SimpleState",
    "StorageUpdate",
    "StoreConfig",
    "StoreError",
    "StoredMsg",
    "StreamState",
    "StreamStore",
    "direct_size",
    "file_msg_size",
    "mem_msg_size",
]


class StoreError(Exception):
    """Base class for storage failures."""


class ErrStoreClosed(StoreError):
    pass


class ErrMaxMsgs(StoreError):
    """Discard-new stream is full (message count)."""


class ErrMaxBytes(StoreError):
    """Discard-new stream is full (bytes)."""


class ErrMaxMsgsPerSubject(StoreError):
    """Discard-new-per-subject limit reached."""


class ErrMsgTooLarge(StoreError):
    pass


class ErrStoreIO(StoreError):
    """The disk refused a write (ENOSPC, EIO...). Reads keep working."""


class DiscardPolicy(Enum):
    OLD = "old"
    NEW = "new"


@dataclass(slots=True)
class StoreConfig:
    """The limits a store enforces itself (the rest of a stream's config is the engine's)."""

    name: str
    subjects: list[str] = field(default_factory=list)
    max_msgs: int = -1
    max_bytes: int = -1
    max_age_ns: int = 0
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: DiscardPolicy = DiscardPolicy.OLD
    discard_new_per_subject: bool = False
    first_seq: int = 0
    allow_msg_ttl: bool = False
    # ``compression: s2``: a file store keeps payloads compressed (memory stores ignore it,
    # as nats-server's do)
    compress: bool = False


@dataclass(slots=True, init=False)
class StoredMsg:
    subject: str
    seq: int
    ts: int  # nanoseconds since the epoch
    hdr: bytes | None
    data: bytes
    ttl: int  # per-message TTL in seconds (Nats-TTL), 0 = none

    # Written out rather than generated: under mypyc the dataclass-made __init__ is
    # interpreted (0.3 us per message read, more than the rest of a load); this one is native.
    def __init__(
        self, subject: str, seq: int, ts: int, hdr: bytes | None, data: bytes, ttl: int = 0
    ) -> None:
        self.subject = subject
        self.seq = seq
        self.ts = ts
        self.hdr = hdr
        self.data = data
        self.ttl = ttl


@dataclass(slots=True)
class SimpleState:
    msgs: int = 0
    first: int = 0
    last: int = 0


@dataclass(slots=True)
class LostData:
    msgs: list[int] = field(default_factory=list)
    bytes: int = 0


@dataclass(slots=True)
class StreamState:
    msgs: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: int = 0
    last_seq: int = 0
    last_ts: int = 0
    num_deleted: int = 0
    deleted: list[int] | None = None  # only filled when asked for
    num_subjects: int = 0
    lost: LostData | None = None
    consumer_count: int = 0


# (msgs delta, bytes delta, seq, subject): called for every add (+1) and removal (-1), the
# way nats-server's RegisterStorageUpdates reports to the stream.
StorageUpdate = Callable[[int, int, int, str], None]


class StreamStore(ABC):
    """A stream's message store. See the module docstring for ownership rules."""

    # ------------------------------------------------------------------ writes
    @abstractmethod
    def store_msg(
        self, subject: str, hdr: bytes | None, data: bytes, ttl: int = 0
    ) -> tuple[int, int]:
        """Append a message; returns (seq, ts). Enforces limits (discard old removes the
        oldest messages, discard new raises ErrMaxMsgs/ErrMaxBytes/ErrMaxMsgsPerSubject)."""

    @abstractmethod
    def store_raw(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int = 0
    ) -> None:
        """Store with a given sequence and timestamp (restore, mirrors). ``seq`` must be
        greater than the last sequence; the gap is recorded as deleted."""

    @abstractmethod
    def skip_msgs(self, seq: int, num: int) -> None:
        """Mark ``num`` sequences starting at ``seq`` as used-but-empty (seq == last+1)."""

    @abstractmethod
    def remove_msg(self, seq: int) -> bool:
        """Delete one message; False if it was not there."""

    @abstractmethod
    def erase_msg(self, seq: int) -> bool:
        """Delete and overwrite the message's bytes on disk (secure delete)."""

    @abstractmethod
    def purge(self) -> int:
        """Remove every message; returns how many. first_seq becomes last_seq + 1."""

    @abstractmethod
    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        """nats-server PurgeEx: remove messages matching ``subject`` (wildcards allowed, ""
        = all) with sequence < ``seq`` (0 = no bound), keeping the newest ``keep`` per
        subject filter (0 = keep none). ``seq`` and ``keep`` are not combined. Returns the
        number removed."""

    @abstractmethod
    def compact(self, seq: int) -> int:
        """Remove every message with sequence < ``seq``; returns how many."""

    @abstractmethod
    def truncate(self, seq: int) -> None:
        """Remove every message with sequence > ``seq``."""

    @abstractmethod
    def expire(self, now_ns: int, emptied: list[StoredMsg] | None = None) -> int:
        """Apply max_age and per-message TTLs as of ``now_ns``; returns messages removed.
        With ``emptied``, every removed message that was the last one on its subject is
        appended to it in removal order (the engine places subject delete markers)."""

    @abstractmethod
    def update_config(self, cfg: StoreConfig) -> None:
        """Apply new limits (may remove messages at once)."""

    # ------------------------------------------------------------------ reads
    @abstractmethod
    def load_msg(self, seq: int) -> StoredMsg | None:
        """The message at ``seq``, or None if deleted / out of range."""

    @abstractmethod
    def load_next_msg(self, filter: str, start: int) -> StoredMsg | None:
        """First message with sequence >= ``start`` whose subject matches ``filter``
        (wildcards allowed; "" or ">" = any)."""

    def load_range(self, start: int, max_msgs: int, max_bytes: int = 0) -> list[StoredMsg]:
        """The live messages from ``start`` on, ascending, stepping over deleted sequences:
        at most ``max_msgs``, and (if ``max_bytes`` > 0) ending with the one that brings
        the total of subject (UTF-8), headers and payload lengths to ``max_bytes`` or more.
        What a batched direct get sends; one call instead of a load per message.

        This default is ``load_next_msg`` per message; the stores override it with a walk."""
        out: list[StoredMsg] = []
        total = 0
        while len(out) < max_msgs:
            m = self.load_next_msg("", start)
            if m is None:
                break
            out.append(m)
            start = m.seq + 1
            if max_bytes > 0:
                total += direct_size(m)
                if total >= max_bytes:
                    break
        return out

    def load_with_headers(self, start: int, max_msgs: int) -> tuple[list[StoredMsg], int]:
        """Of the next ``max_msgs`` live messages from ``start`` on, those that carry headers
        (what rebuilding the Nats-Msg-Id window reads), and the sequence to go on from
        (0: none left). The file store skips the others without checking their bodies."""
        batch = self.load_range(start, max_msgs)
        if not batch:
            return [], 0
        return [m for m in batch if m.hdr], batch[-1].seq + 1 if len(batch) == max_msgs else 0

    def live_seqs(self, start: int, end: int, limit: int) -> list[int]:
        """The sequences of the live messages in [``start``, ``end``], ascending, at most
        ``limit`` of them, without reading the messages (what a replica catching up
        compares its own store with). This default reads them; the stores override it."""
        out: list[int] = []
        while len(out) < limit and start <= end:
            m = self.load_next_msg("", start)
            if m is None or m.seq > end:
                break
            out.append(m.seq)
            start = m.seq + 1
        return out

    @abstractmethod
    def load_last_msg(self, subject: str) -> StoredMsg | None:
        """Newest message matching ``subject`` (wildcards allowed; "" = any)."""

    @abstractmethod
    def load_prev_msg(self, start: int) -> StoredMsg | None:
        """Newest message with sequence <= ``start``."""

    @abstractmethod
    def last_seq(self) -> int:
        """The last sequence used (``state().last_seq`` without building the state)."""

    @abstractmethod
    def state(self, with_deleted: bool = False) -> StreamState:
        """Totals; ``deleted`` lists interior deleted sequences when asked for."""

    @abstractmethod
    def filtered_state(self, seq: int, subject: str) -> SimpleState:
        """Messages matching ``subject`` with sequence >= ``seq``: count, first, last."""

    @abstractmethod
    def subjects_state(self, filter: str) -> dict[str, SimpleState]:
        """Per-subject state for subjects matching ``filter`` ("" or ">" = all)."""

    @abstractmethod
    def subjects_totals(self, filter: str) -> dict[str, int]:
        """Per-subject message counts for subjects matching ``filter``."""

    @abstractmethod
    def num_pending(self, sseq: int, filter: str, last_per_subject: bool) -> int:
        """Messages at or after ``sseq`` matching ``filter`` (only the last of each subject
        when ``last_per_subject``)."""

    @abstractmethod
    def multi_last_seqs(self, filters: list[str], max_seq: int, max_allowed: int) -> list[int]:
        """Sequences of the last message of every subject matching any filter, with
        sequence <= ``max_seq`` (0 = no bound), sorted ascending. More than
        ``max_allowed`` (if > 0) results raise StoreError("too many results")."""

    # ------------------------------------------------------------------ sources
    @abstractmethod
    def track_sources(self, inames: list[str]) -> None:
        """Keep, for these sources (inames; none: stop), the newest stored position
        (``sources_index``); a file store reads back what it kept before."""

    @abstractmethod
    def seed_sources(self, positions: dict[str, tuple[int, str]]) -> None:
        """A replica caught up from a snapshot: its sources' positions as they were where
        the snapshot stands (also those whose messages are gone), for the tracked sources."""

    @abstractmethod
    def sources_state(self) -> dict[str, tuple[int, str]]:
        """(origin seq, identity) of each tracked source that the stored messages name;
        the others are not known (the stream scans its messages for them)."""

    # ------------------------------------------------------------------ lifecycle
    @abstractmethod
    def register_updates(self, cb: StorageUpdate | None) -> None: ...

    @abstractmethod
    def flush(self) -> int:
        """Hand buffered writes to the OS; returns the last sequence written."""

    @abstractmethod
    def sync(self) -> None:
        """Make everything flushed durable (fsync of data files and directories)."""

    @abstractmethod
    def stop(self) -> None:
        """Flush, sync and close; the store cannot be used afterwards."""

    @abstractmethod
    def delete(self) -> None:
        """Stop and remove all of the store's data."""

    @property
    @abstractmethod
    def config(self) -> StoreConfig: ...


def file_msg_size(subject: str, hdr: bytes | None, data: bytes) -> int:
    """Bytes a message counts toward ``state().bytes`` in a file store.

    nats-server ``fileStoreMsgSizeRaw``: 22 + subject + payload + 8, plus 4 + headers when
    there are headers (verified: 44 and 66 bytes for "sz.file.a"/"hello" without and with
    an 18-byte header block).
    """
    n = 22 + len(subject.encode()) + len(data) + 8
    if hdr:
        n += 4 + len(hdr)
    return n


def direct_size(m: StoredMsg) -> int:
    """What a direct get's ``max_bytes`` counts for a message, as nats-server does: subject
    (UTF-8), headers and payload."""
    subj = m.subject
    n = len(subj) if subj.isascii() else len(subj.encode())
    hdr = m.hdr
    return n + (len(hdr) if hdr else 0) + len(m.data)


def mem_msg_size(subject: str, hdr: bytes | None, data: bytes) -> int:
    """Bytes a message counts in a memory store: nats-server ``memStoreMsgSize``,
    subject + headers + payload + 16 (verified: 32 and 50 bytes for the same messages)."""
    return len(subject.encode()) + (len(hdr) if hdr else 0) + len(data) + 16
