"""A consumer's read-ahead: the next live messages of the stream, read in one store call.

A consumer that takes every subject delivers the stream in order, and one ``load_range`` of
up to :data:`AHEAD_MSGS` messages costs much less per message than a ``load_next_msg`` each
(measured compiled, 128-byte messages: file store 2.85 -> 1.75 us, memory store 0.26 ->
0.10 us). What is read stays at most :data:`AHEAD_BYTES` (and at least one message).

It answers for a sequence only while what it read is still true: the stream tells its
consumers of every removal (``Consumer.on_removed`` / ``on_bulk_removed``, through the
store's update callback), and a removal at or after the oldest sequence it may still answer
for drops what it holds. Appends cannot change it (they land after the last sequence it
read). A start before that oldest sequence (a cursor moved back further than the one message
the delivery loop puts back) reads again.
"""

from __future__ import annotations

from typing import Final

from natsd.storage.store import StoredMsg, StreamStore

__all__ = ["AHEAD_BYTES", "AHEAD_MSGS", "ReadAhead"]

AHEAD_MSGS: Final = 64
AHEAD_BYTES: Final = 32 * 1024


class ReadAhead:
    """Owned by one consumer; only its delivery loop reads through it."""

    __slots__ = ("_low", "_msgs", "_next")

    def __init__(self) -> None:
        self._msgs: list[StoredMsg] = []
        self._next = 0  # index of the first message not yet handed out
        # The lowest sequence it may still answer for: the last one handed out (the loop
        # may put it back and ask again), or the first read.
        self._low = 0

    def next_msg(self, store: StreamStore, start: int) -> StoredMsg | None:
        """The first live message at or after ``start``, as ``store.load_next_msg("",
        start)`` would answer."""
        msgs = self._msgs
        if msgs and self._low <= start <= msgs[-1].seq:
            i = self._next
            if i > 0 and msgs[i - 1].seq >= start:
                i -= 1  # the one handed out last, asked for again
            while msgs[i].seq < start:
                i += 1
            m = msgs[i]
            self._next = i + 1
            self._low = m.seq
            return m
        msgs = store.load_range(start, AHEAD_MSGS, AHEAD_BYTES)
        self._msgs = msgs
        if not msgs:
            return None
        self._next = 1
        m = msgs[0]
        self._low = m.seq
        return m

    def removed(self, seq: int) -> None:
        """Message ``seq`` left the stream."""
        if self._msgs and seq >= self._low:
            self._msgs = []

    def drop(self) -> None:
        """Forget what was read (a bulk removal, a cursor reset, a new config)."""
        self._msgs = []
