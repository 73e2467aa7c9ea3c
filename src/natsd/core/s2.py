"""S2 streams (klauspost/compress's extension of the Snappy framing format): what stream
backups travel in between natsd, nats-server and the ``nats`` command line.

*Writing* produces a Snappy-framed stream with cramjam (the ``sNaPpY`` identifier, blocks of
64 KiB): every S2 reader, nats-server's included, reads Snappy streams. *Reading* takes both:
a stream nats-server writes says ``S2sTwO`` and its blocks may use S2's one extension to the
Snappy block format, the *repeat* copy (a 1-byte-offset copy whose offset is 0 reuses the
previous copy's offset, with a longer length encoding), which no Snappy decoder accepts and
no Python package decodes (cramjam has Snappy only). So a block is first given to cramjam's
Snappy decoder (Rust, and the only path a natsd-written stream takes) and only when that
refuses it to :func:`decode_block` here, which follows the block format as klauspost's
reference decoder (``s2/decode_other.go``) reads it. Every chunk's checksum (masked CRC-32C
of the decoded bytes, google-crc32c) is checked, so a damaged stream is refused, never
decoded into something else.

:class:`FrameReader` is incremental: an archive arrives in chunks of any size and is checked
as it comes, holding at most one frame (4 MiB at most) that has not been decoded yet.
"""

from __future__ import annotations

from typing import Final

import cramjam
import google_crc32c

__all__ = [
    "MAX_BLOCK",
    "FrameReader",
    "FrameWriter",
    "S2Error",
    "decode_block",
    "masked_crc",
]

MAGIC_S2: Final = b"S2sTwO"
MAGIC_SNAPPY: Final = b"sNaPpY"
# S2's largest block; a Snappy stream's are 64 KiB.
MAX_BLOCK: Final = 4 << 20
_MAX_SNAPPY_BLOCK: Final = 64 << 10
# The largest chunk a reader accepts: a block that did not compress, plus its checksum.
_MAX_CHUNK: Final = MAX_BLOCK + (MAX_BLOCK // 6) + 32 + 4

_COMPRESSED: Final = 0x00
_UNCOMPRESSED: Final = 0x01
_IDENTIFIER: Final = 0xFF

_snappy_raw: Final = cramjam.snappy.decompress_raw
_crc32c: Final = google_crc32c.value


class S2Error(ValueError):
    """The stream is not a valid S2 (or Snappy) stream: corrupt, truncated, or unsupported."""


def masked_crc(data: bytes | bytearray | memoryview) -> int:
    """The framing format's checksum: CRC-32C, rotated right by 15 and offset."""
    c = int(_crc32c(bytes(data)))
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _uvarint(src: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(src) or shift > 28:
            raise S2Error("corrupt block: bad length")
        b = src[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def decode_block(src: bytes) -> bytes:
    """One S2 (or Snappy) block: a uvarint of the decoded length, then literals and copies."""
    want, s = _uvarint(src, 0)
    if want > MAX_BLOCK:
        raise S2Error("corrupt block: longer than 4 MiB")
    dst = bytearray()
    n = len(src)
    offset = 0
    while s < n:
        tag = src[s]
        kind = tag & 3
        if kind == 0:  # literal
            x = tag >> 2
            if x < 60:
                s += 1
            else:
                extra = x - 59
                if s + 1 + extra > n:
                    raise S2Error("corrupt block: literal length past the end")
                x = int.from_bytes(src[s + 1 : s + 1 + extra], "little")
                s += 1 + extra
            length = x + 1
            if length > want - len(dst) or length > n - s:
                raise S2Error("corrupt block: literal past the end")
            dst += src[s : s + length]
            s += length
            continue
        if kind == 1:  # copy, 1-byte offset; offset 0 is S2's repeat
            if s + 2 > n:
                raise S2Error("corrupt block: copy past the end")
            length = (tag >> 2) & 7
            toffset = ((tag & 0xE0) << 3) | src[s + 1]
            s += 2
            if toffset == 0:
                if length >= 5:
                    extra = length - 4
                    if s + extra > n:
                        raise S2Error("corrupt block: repeat past the end")
                    v = int.from_bytes(src[s : s + extra], "little")
                    s += extra
                    length = v + (4, 1 << 8, 1 << 16)[extra - 1]
            else:
                offset = toffset
            length += 4
        elif kind == 2:  # copy, 2-byte offset
            if s + 3 > n:
                raise S2Error("corrupt block: copy past the end")
            length = 1 + (tag >> 2)
            offset = src[s + 1] | (src[s + 2] << 8)
            s += 3
        else:  # copy, 4-byte offset
            if s + 5 > n:
                raise S2Error("corrupt block: copy past the end")
            length = 1 + (tag >> 2)
            offset = int.from_bytes(src[s + 1 : s + 5], "little")
            s += 5
        d = len(dst)
        if offset <= 0 or d < offset or length > want - d:
            raise S2Error("corrupt block: bad copy")
        start = d - offset
        if offset >= length:
            dst += dst[start : start + length]
        else:  # overlapping: the last ``offset`` bytes repeat
            piece = bytes(dst[start:])
            dst += (piece * (length // offset + 1))[:length]
    if len(dst) != want:
        raise S2Error("corrupt block: shorter than its length")
    return bytes(dst)


def _decode(block: bytes, snappy: bool) -> bytes:
    try:
        return bytes(_snappy_raw(block))
    except Exception:
        if snappy:
            raise S2Error("corrupt Snappy block") from None
    return decode_block(block)


class FrameReader:
    """Decodes an S2 or Snappy framed stream fed in pieces of any size."""

    __slots__ = ("_buf", "_snappy", "_started")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._started = False
        self._snappy = False

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The decoded bytes of every chunk ``data`` completes (raises :class:`S2Error`)."""
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        while len(buf) - pos >= 4:
            kind = buf[pos]
            size = buf[pos + 1] | (buf[pos + 2] << 8) | (buf[pos + 3] << 16)
            if not self._started and kind != _IDENTIFIER:
                raise S2Error("not an S2 stream: no stream identifier")
            if size > _MAX_CHUNK:
                raise S2Error("chunk too large")
            if len(buf) - pos - 4 < size:
                break
            body = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            if kind == _IDENTIFIER:
                if body == MAGIC_S2:
                    self._snappy = False
                elif body == MAGIC_SNAPPY:
                    self._snappy = True
                else:
                    raise S2Error("not an S2 stream: unknown stream identifier")
                self._started = True
            elif kind in (_COMPRESSED, _UNCOMPRESSED):
                if size < 4:
                    raise S2Error("corrupt chunk: shorter than its checksum")
                checksum = int.from_bytes(body[:4], "little")
                data_ = body[4:]
                if kind == _COMPRESSED:
                    want, _ = _uvarint(data_, 0)
                    limit = _MAX_SNAPPY_BLOCK if self._snappy else MAX_BLOCK
                    if want > limit:
                        raise S2Error("corrupt chunk: block too large")
                    data_ = _decode(data_, self._snappy)
                elif len(data_) > (_MAX_SNAPPY_BLOCK if self._snappy else MAX_BLOCK):
                    raise S2Error("corrupt chunk: block too large")
                if masked_crc(data_) != checksum:
                    raise S2Error("checksum mismatch")
                if data_:
                    out.append(data_)
            elif kind <= 0x7F:
                raise S2Error(f"unsupported chunk type {kind:#04x}")
            # 0x80-0xfe: padding, S2's index and other skippable chunks
        del buf[:pos]
        return out

    def finish(self) -> None:
        """The stream ended: raises unless it ended on a chunk boundary after its identifier."""
        if not self._started:
            raise S2Error("not an S2 stream: empty")
        if self._buf:
            raise S2Error("truncated: the stream ends inside a chunk")


class FrameWriter:
    """A Snappy-framed stream (readable by every S2 reader), written in pieces."""

    __slots__ = ("_c",)

    def __init__(self) -> None:
        self._c = cramjam.snappy.Compressor()

    def write(self, data: bytes | bytearray | memoryview) -> bytes:
        """The framed bytes for ``data`` (complete chunks; nothing is held back)."""
        self._c.compress(bytes(data))
        return bytes(self._c.flush())
