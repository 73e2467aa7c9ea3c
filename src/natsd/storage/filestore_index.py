"""In-memory index types of the file store, and subject matching on ``str`` subjects.

The index is three structures, all rebuilt from the blocks at open:

- ``msgs: dict[seq, Entry]`` — every live message: ``(subject, block, offset, record length,
  ts, ttl, size)``. A tuple because it is the cheapest object CPython builds, and the store
  makes one per message.
- each ``Block.seqs`` — the message sequences stored in that block, ascending (dead ones are
  pruned lazily). Walking blocks and bisecting these lists finds the next/previous live
  message in time proportional to records, never to sequence gaps (a ``skip_msgs`` of a
  billion sequences costs nothing).
- ``subjects: dict[str, SubjState]`` — per-subject count, first and last, with the first/last
  recomputed lazily after removals (nats-server memstore ``firstNeedsUpdate``).
"""

from __future__ import annotations

from natsd.core.filters import is_all, is_literal, subject_matches

__all__ = [
    "E_BLK",
    "E_LEN",
    "E_OFF",
    "E_SIZE",
    "E_SUBJ",
    "E_TS",
    "E_TTL",
    "Block",
    "Entry",
    "SubjState",
    "is_all",
    "is_literal",
    "subject_matches",
]


class Block:
    """One block file and its write buffer.

    ``flushed`` bytes are in the file; ``buf`` holds what was appended since the last flush
    (it starts with the block header when the file has never been written). Records never
    straddle the two. ``fd`` is -1 while the file is closed; it is opened and closed only on
    the owner thread and closed only under the store's lock (``sync`` dups it under that
    lock, so it never fsyncs a recycled descriptor).
    """

    __slots__ = ("buf", "fd", "first", "flushed", "live", "nrec", "on_disk", "path", "seqs")

    def __init__(self, first: int, path: str, buf: bytearray | None = None) -> None:
        self.first = first
        self.path = path
        self.fd = -1
        self.flushed = 0
        self.buf = buf if buf is not None else bytearray()
        self.seqs: list[int] = []
        self.live = 0
        # Message records physically in the block (live or not), flushed or buffered.
        self.nrec = 0
        self.on_disk = False

    @property
    def size(self) -> int:
        return self.flushed + len(self.buf)

    def __repr__(self) -> str:
        return f"Block({self.first}, live={self.live}, size={self.size})"


# (subject, block, offset, record length, ts, ttl, size)
Entry = tuple[str, Block, int, int, int, int, int]
E_SUBJ, E_BLK, E_OFF, E_LEN, E_TS, E_TTL, E_SIZE = range(7)


class SubjState:
    __slots__ = ("first", "first_stale", "last", "last_stale", "msgs")

    def __init__(self, seq: int) -> None:
        self.msgs = 1
        self.first = seq
        self.last = seq
        self.first_stale = False
        self.last_stale = False
