"""What the file store keeps in memory about its blocks, and subject matching on ``str``.

Memory grows with blocks and subjects, never with messages: a stored message costs one
byte here (its live flag), everything else about it is read from its block when needed.

Per block (``Block``), always in memory:

- its records in *position* order ``k = 0 .. nrec-1``: every message record (live or not;
  tombstones are not counted) in the order the file holds them, which is ascending
  sequence order;
- ``alive``: one byte per position, 1 while the message is live;
- the sequence at each position: ``seq0 + k`` when the block is *dense* (``seqs`` is None:
  no gaps between its records, the usual case), otherwise ``seqs[k]`` (an array: gaps come
  only from ``skip_msgs``, a ``store_raw`` past a gap, or a truncation's rewrite);
- where each record is: ``offs``/``lens`` for every position while the block is being
  written (the last block, which takes every recent read) or when it is *irregular* (damage
  found at open left unreadable bytes between its records); otherwise only ``marks``, the
  offset of every ``GROUP``-th record, and a read walks record headers from the mark
  (``BlockStore._rec``): one small read per random access, 4 bytes kept per ``GROUP``
  messages (8: measured against 16, 32 and 64, it keeps a random read within 1.5x of an
  offset kept per message).

Per subject (``SubjState``): count, first and last, with first/last recomputed lazily
after removals (nats-server memstore ``firstNeedsUpdate``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Final

from natsd.core.filters import is_all, is_literal, subject_matches

__all__ = [
    "GROUP",
    "GROUP_SHIFT",
    "Block",
    "SubjState",
    "is_all",
    "is_literal",
    "subject_matches",
]

GROUP_SHIFT: Final = 3  # (a mark per 8 records, see the module docstring)
GROUP: Final = 1 << GROUP_SHIFT  # records per mark


class Block:
    """One block file, its write buffer and its records' positions (module docstring).

    ``flushed`` bytes are in the file; ``buf`` holds what was appended since the last flush
    (it starts with the block header when the file has never been written). Records never
    straddle the two. ``fd`` is -1 while the file is closed; it is opened and closed only on
    the owner thread and closed only under the store's lock (``sync`` dups it under that
    lock, so it never fsyncs a recycled descriptor).
    """

    __slots__ = (
        "alive",
        "buf",
        "fd",
        "first",
        "flushed",
        "fsum",
        "irregular",
        "lens",
        "live",
        "marks",
        "nrec",
        "offs",
        "on_disk",
        "path",
        "seq0",
        "seqs",
    )

    def __init__(self, first: int, path: str, buf: bytearray | None = None) -> None:
        self.first = first
        self.path = path
        self.fd = -1
        self.flushed = 0
        self.buf = buf if buf is not None else bytearray()
        self.on_disk = False
        # Message records in the block (live or not), flushed or buffered.
        self.nrec = 0
        self.live = 0
        self.alive = bytearray()
        self.seq0 = first  # the sequence at position 0 (when there is one)
        self.seqs: array[int] | None = None  # per position, only when not dense
        self.marks: array[int] = array("I")  # offset of position GROUP * j
        # offset and length per position: the block being written, or an irregular one
        self.offs: array[int] | None = array("I")
        self.lens: array[int] | None = array("I")
        # Found at open with unreadable bytes or stray records between its records: the
        # offsets stay (a walk over its headers could not count positions).
        self.irregular = False
        # checksum (``file_sum``) of the file's ``flushed`` bytes as written; -1 when not
        # known (the clean-shutdown index computes it then, ``filestore_checkpoint``)
        self.fsum = 1

    @property
    def size(self) -> int:
        return self.flushed + len(self.buf)

    def add(self, seq: int, off: int, reclen: int, live: bool = True) -> None:
        """Append the position of a record just written (or found at open) at ``off``."""
        k = self.nrec
        if k == 0:
            self.seq0 = seq
        elif self.seqs is None:
            if seq != self.seq0 + k:
                self.seqs = array("Q", range(self.seq0, self.seq0 + k))
                self.seqs.append(seq)
        else:
            self.seqs.append(seq)
        if not k & (GROUP - 1):
            self.marks.append(off)
        offs = self.offs
        if offs is not None:
            offs.append(off)
            self.lens.append(reclen)  # type: ignore[union-attr]
        self.alive.append(1 if live else 0)
        if live:
            self.live += 1
        self.nrec = k + 1

    def cut(self, n: int) -> None:
        """Forget every position from ``n`` on (their records left the file; dead)."""
        if n >= self.nrec:
            return
        del self.alive[n:]
        if self.seqs is not None:
            del self.seqs[n:]
        del self.marks[(n + GROUP - 1) >> GROUP_SHIFT :]
        if self.offs is not None:
            del self.offs[n:]
            del self.lens[n:]  # type: ignore[union-attr]
        self.nrec = n

    def settle(self) -> None:
        """No longer the block being appended to: keep only the marks (unless irregular)."""
        if self.irregular:
            return
        self.offs = None
        self.lens = None

    def seq_at(self, k: int) -> int:
        seqs = self.seqs
        return self.seq0 + k if seqs is None else seqs[k]

    @property
    def last_rec(self) -> int:
        """The sequence of the last record (``seq0 - 1`` when there is none)."""
        return self.seq_at(self.nrec - 1) if self.nrec else self.seq0 - 1

    def pos(self, seq: int) -> int:
        """The position of ``seq``'s record, -1 when the block has none."""
        seqs = self.seqs
        if seqs is None:
            k = seq - self.seq0
            return k if 0 <= k < self.nrec else -1
        k = bisect_left(seqs, seq)
        return k if k < len(seqs) and seqs[k] == seq else -1

    def pos_from(self, seq: int) -> int:
        """The first position whose sequence is >= ``seq`` (``nrec`` when none)."""
        seqs = self.seqs
        if seqs is None:
            return min(max(seq - self.seq0, 0), self.nrec)
        return bisect_left(seqs, seq)

    def pos_upto(self, seq: int) -> int:
        """The last position whose sequence is <= ``seq`` (-1 when none)."""
        seqs = self.seqs
        if seqs is None:
            return min(seq - self.seq0, self.nrec - 1) if seq >= self.seq0 else -1
        return bisect_right(seqs, seq) - 1

    def __repr__(self) -> str:
        return f"Block({self.first}, live={self.live}, size={self.size})"


class SubjState:
    __slots__ = ("first", "first_stale", "last", "last_stale", "msgs")

    def __init__(self, seq: int) -> None:
        self.msgs = 1
        self.first = seq
        self.last = seq
        self.first_stale = False
        self.last_stale = False
