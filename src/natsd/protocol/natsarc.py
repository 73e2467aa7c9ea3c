"""NATSARC1: the entry format of a stream backup (nats-server 2.15's ``server/archive``),
inside an S2 stream (:mod:`natsd.core.s2`).

The archive is ``NATSARC1`` then entries, each: uvarint name length, varint (zig-zag)
timestamp, uvarint sequence, uvarint header size, uvarint payload size, the name, then
header-size + payload-size bytes. A backup's entries are, in order: ``state.json`` (the
stream's state), one ``consumers/<name>`` per consumer (its config and state, JSON), one
entry per message (name = subject, the stream sequence, the store timestamp, the headers
then the payload), and the end sentinel: an entry whose fields are all zero and whose name
is empty. A backup without the sentinel was cut short.

:class:`EntryReader` takes the decoded bytes in pieces of any size and hands back whole
entries, refusing a name longer than 1 MiB or a body longer than the limit it is given
before it buffers either (a consumer's entry may be up to ``MAX_META``: its pending map
grows with its unacknowledged messages), so a damaged archive cannot make it hold more than
one entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAGIC",
    "ArchiveError",
    "Entry",
    "EntryReader",
    "encode_entry",
    "end_entry",
]

MAGIC: Final = b"NATSARC1"
MAX_NAME: Final = 1 << 20
# The largest entry that is not a message (the state, a consumer's config and state).
MAX_META: Final = 256 << 20


class ArchiveError(ValueError):
    """Not a valid NATSARC1 archive (damaged, truncated or out of bounds)."""


@dataclass(slots=True)
class Entry:
    name: bytes
    ts: int
    seq: int
    hdr_size: int
    body: bytes  # headers then payload

    @property
    def is_end(self) -> bool:
        return not self.name and not self.ts and not self.seq and not self.body


def _uvarint(v: int, out: bytearray) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_entry(name: bytes, ts: int, seq: int, hdr: bytes, payload: bytes) -> bytes:
    """One entry (without the leading ``MAGIC``, which the writer puts first once)."""
    out = bytearray()
    _uvarint(len(name), out)
    _uvarint(ts << 1 if ts >= 0 else ~(ts << 1), out)  # zig-zag, as Go's PutVarint
    _uvarint(seq, out)
    _uvarint(len(hdr), out)
    _uvarint(len(payload), out)
    out += name
    out += hdr
    out += payload
    return bytes(out)


def end_entry() -> bytes:
    return encode_entry(b"", 0, 0, b"", b"")


class EntryReader:
    """Whole entries out of the archive's decoded bytes, fed in pieces."""

    __slots__ = ("_buf", "_magic", "_max_body")

    def __init__(self, max_body: int) -> None:
        self._buf = bytearray()
        self._magic = False
        self._max_body = max_body

    def _read_uvarint(self, pos: int) -> tuple[int, int]:
        """(value, next position), or (-1, pos) when the bytes end inside it."""
        buf = self._buf
        value = shift = 0
        while pos < len(buf):
            b = buf[pos]
            pos += 1
            if shift == 63 and b > 1:
                raise ArchiveError("archive: invalid archive stream (varint overflows)")
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 63:
                raise ArchiveError("archive: invalid archive stream (varint overflows)")
        return -1, pos

    def feed(self, data: bytes) -> list[Entry]:
        buf = self._buf
        buf += data
        out: list[Entry] = []
        pos = 0
        if not self._magic:
            if len(buf) < len(MAGIC):
                return out
            if bytes(buf[: len(MAGIC)]) != MAGIC:
                raise ArchiveError(
                    "not a NATS Server 2.15 stream backup (no NATSARC1 archive: backups of"
                    " nats-server 2.14 and older, a tar of its files, are not supported)"
                )
            self._magic = True
            pos = len(MAGIC)
        while True:
            fields = []
            p = pos
            for _ in range(5):
                v, p = self._read_uvarint(p)
                if v < 0:
                    break
                fields.append(v)
            if len(fields) < 5:
                break
            name_len, zts, seq, hsize, psize = fields
            if name_len > MAX_NAME:
                raise ArchiveError("archive: invalid archive stream (entry name too long)")
            # a message is bounded by the server's max payload; the state and a consumer
            # (sequence 0: its pending map can be large) by MAX_META
            limit = self._max_body if seq else MAX_META
            if hsize + psize > limit:
                raise ArchiveError(
                    f"archive: entry of {hsize + psize} bytes is larger than allowed ({limit})"
                )
            end = p + name_len + hsize + psize
            if end > len(buf):
                break
            ts = (zts >> 1) ^ -(zts & 1)
            name = bytes(buf[p : p + name_len])
            body = bytes(buf[p + name_len : end])
            out.append(Entry(name, ts, seq, hsize, body))
            pos = end
        del buf[:pos]
        return out

    def finish(self) -> None:
        """The archive ended: raises if it ended inside an entry (or before its magic)."""
        if not self._magic:
            raise ArchiveError("archive: invalid archive stream (empty)")
        if self._buf:
            raise ArchiveError("archive: invalid archive stream (ends inside an entry)")
