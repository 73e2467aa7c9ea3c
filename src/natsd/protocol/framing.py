"""What the two sans-I/O parsers (client ``protocol/parser.py`` and route
``protocol/route_parser.py``) share: holding an unfinished frame between reads, and dying.

``FrameBuffer`` is a native base class (both parsers are mypyc-compiled with it), so the
fields stay struct reads in the subclasses' ``feed`` loops. It owns the bytes held back and
the dead flag; each subclass owns its grammar, its events and its error event.
"""

from __future__ import annotations

from typing import Final

__all__ = ["FrameBuffer"]

# A frame this much larger than what arrived goes to a bytearray, so a 1 MB payload in
# 64 KB reads is not copied quadratically.
_ACCUMULATE_OVER: Final = 65536


class FrameBuffer:
    __slots__ = ("_acc", "_acc_need", "_buf", "_dead", "max_control_line", "max_payload")

    def __init__(self, max_payload: int, max_control_line: int) -> None:
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self._buf = b""
        self._acc: bytearray | None = None
        self._acc_need = 0
        self._dead = False

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._acc) if self._acc is not None else len(self._buf)

    @property
    def dead(self) -> bool:
        return self._dead

    def held(self) -> bytes:
        """The raw input held back (the start of an unfinished frame), as it arrived: what
        another parser must be fed first to continue this stream (a moved connection)."""
        return bytes(self._acc) if self._acc is not None else self._buf

    def _take(self, data: bytes) -> bytes:
        """What there is to parse now: held bytes joined with ``data``. Empty when the parser
        is dead or a large frame is still accumulating."""
        if self._dead:
            return b""
        acc = self._acc
        if acc is not None:
            acc += data
            if len(acc) < self._acc_need:
                return b""
            self._acc = None
            return bytes(acc)
        if self._buf:
            data = self._buf + data
            self._buf = b""
        return data

    def _hold(self, data: bytes, pos: int, need: int) -> None:
        """Keep the unfinished frame starting at ``pos``; ``need`` is its full length."""
        rest = data[pos:]
        if need - len(rest) > _ACCUMULATE_OVER:
            self._acc = bytearray(rest)
            self._acc_need = need
        else:
            self._buf = rest

    def _die(self) -> None:
        """After a protocol error: nothing held, nothing more parsed."""
        self._dead = True
        self._buf = b""
        self._acc = None
