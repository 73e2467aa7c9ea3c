"""The file store's on-disk format: block files, their records, and the scan that reads them.

Layout of a stream directory (``FileStore(directory, cfg)``)::

    <directory>/msgs/00000000000000000001.blk    blocks, named by their first sequence
    <directory>/msgs/00000000000000004097.blk
    <directory>/msgs/index.cache                 clean-shutdown manifest (a cache, optional)

A block starts with a 20-byte header and then holds records back to back::

    block header  <4sHHQI   magic b"\\x89NDB", version, reserved (0), first_seq,
                            crc32 of the 16 bytes before it
    record        <4sI      magic b"\\xf1NDR", crc32 of the 34 field bytes that follow
                  <IQqHIq   record length (all of it, trailer included),
                            sequence | flag bits 56..63, timestamp ns,
                            subject length, headers length, ttl seconds
                  subject, headers, payload
                  <I        crc32 of everything above (header and body)

Why two checksums: the header crc makes the length and sequence trustworthy before the body
is checked, so (1) a record whose body is damaged is skipped by its own length and reported
by its exact sequence, and (2) a record that runs past the end of the file is known to be a
torn append rather than a corrupt length. When a header itself is damaged, the scanner looks
for the next record magic whose header crc, lengths and body crc all check out
(resynchronisation, as in LevelDB's log format), so one bad record costs only itself.

Why crc32 and not blake2b: zlib's crc32 costs ~0.2 µs per small record and ~2 ms per 8 MiB
block here (zlib-ng's, which ``core/crc`` uses for long records, a tenth of that), blake2b
about three times (small) to five times (bulk) zlib's, and the threat is media errors and
torn writes, not an adversary. Two independent 32-bit checks (header and
body) plus the magic make an accidental false accept during resynchronisation negligible.

Flag bits in the sequence field:

- ``FLAG_TOMBSTONE``: a deletion record. The sequence is the first deleted sequence and the
  8-byte payload the last (a range, so a purge, a compaction or ``skip_msgs`` is one record).
  Tombstones are appended to the block being written, never to the message's own block, so
  the files stay append-only; a tombstone always lives in the same block as its message or a
  later one, which is why only *leading* blocks are ever removed.
- ``FLAG_ERASED``: a message record whose subject, headers and payload were overwritten in
  place with random bytes (``erase_msg``); the record stays valid (new checksums).
- ``FLAG_S2``: a message record of a stream with ``compression: s2`` whose payload is stored
  compressed (a Snappy block, which S2 decoders read too; ``compress_payload``). The
  payload's own length is the block's leading varint (``s2_len``), so sizes and limits count
  the message as sent, as nats-server's do. Subject and headers stay plain: the per-subject
  scans and header reads never decompress. A payload that would not shrink is stored plain,
  so a compressed stream holds both kinds, and so does one whose setting was changed.

Why per record and not per block (nats-server compresses a block when it is full): a
record is read by its offset without its neighbours, blocks stay append-only (no rewrite
when one fills), and a damaged record costs only itself. The price is a poorer ratio on
small messages, which are stored plain.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

import cramjam

from natsd.core.crc import crc32 as record_crc

__all__ = [
    "BLOCK_HDR_SIZE",
    "BLOCK_MAGIC",
    "BLOCK_VERSION",
    "FLAG_ERASED",
    "FLAG_MASK",
    "FLAG_S2",
    "FLAG_TOMBSTONE",
    "REC_HDR_SIZE",
    "REC_MAGIC",
    "REC_OVERHEAD",
    "SEQ_MASK",
    "BlockScan",
    "BlockVersionError",
    "block_header",
    "block_name",
    "compress_payload",
    "encode_erased",
    "encode_record",
    "encode_tombstone",
    "inflate_payload",
    "parse_block_name",
    "record_msg_size",
    "s2_len",
    "scan_block",
]

BLOCK_MAGIC: Final = b"\x89NDB"
BLOCK_VERSION: Final = 1
_BLOCK_HDR: Final = struct.Struct("<4sHHQI")
BLOCK_HDR_SIZE: Final = _BLOCK_HDR.size  # 20
_BLOCK_HDR_BODY: Final = struct.Struct("<4sHHQ")

REC_MAGIC: Final = b"\xf1NDR"
REC_PREFIX: Final = struct.Struct("<4sI")
REC_FIELDS: Final = struct.Struct("<IQqHIq")
REC_TRAILER: Final = struct.Struct("<I")
REC_HDR_SIZE: Final = REC_PREFIX.size + REC_FIELDS.size  # 42
_REC_HEAD: Final = struct.Struct("<4sIIQqHIq")  # prefix and fields in one unpack
REC_OVERHEAD: Final = REC_HDR_SIZE + REC_TRAILER.size  # 46
_TOMB_BODY: Final = struct.Struct("<Q")
TOMB_SIZE: Final = REC_OVERHEAD + _TOMB_BODY.size

SEQ_MASK: Final = (1 << 56) - 1
FLAG_TOMBSTONE: Final = 1 << 63
FLAG_ERASED: Final = 1 << 62
FLAG_S2: Final = 1 << 61
FLAG_MASK: Final = ~SEQ_MASK & 0xFFFF_FFFF_FFFF_FFFF
_KNOWN_FLAGS: Final = FLAG_TOMBSTONE | FLAG_ERASED | FLAG_S2
# Payloads shorter than this are stored plain: a Snappy block of a few dozen bytes rarely
# beats them by more than its own varint.
COMPRESS_MIN: Final = 64
_compress_raw: Final = cramjam.snappy.compress_raw
_decompress_raw: Final = cramjam.snappy.decompress_raw

_crc32: Final = zlib.crc32
_CRC_POLY: Final = 0xEDB88320  # crc32 (zlib), reflected
# Single-bit correction walks 8 steps per byte; past this a damaged record is just lost.
_MAX_CORRECTABLE: Final = 256 * 1024
_pack_fields: Final = REC_FIELDS.pack
_pack_prefix: Final = REC_PREFIX.pack
_pack_trailer: Final = REC_TRAILER.pack


class BlockVersionError(Exception):
    """A block with an intact header of a format version this code does not know."""


def block_name(first: int) -> str:
    return f"{first:020d}.blk"


def parse_block_name(name: str) -> int | None:
    if not name.endswith(".blk"):
        return None
    stem = name[:-4]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def block_header(first: int) -> bytes:
    body = _BLOCK_HDR_BODY.pack(BLOCK_MAGIC, BLOCK_VERSION, 0, first)
    return body + struct.pack("<I", _crc32(body))


def record_msg_size(slen: int, hlen: int, dlen: int) -> int:
    """``file_msg_size`` from lengths (nats-server fileStoreMsgSizeRaw)."""
    return 30 + slen + dlen + (4 + hlen if hlen else 0)


def encode_record(seqf: int, ts: int, subject: bytes, hdr: bytes, data: bytes, ttl: int) -> bytes:
    """One complete record. The store's hot path inlines the same steps."""
    slen = len(subject)
    hlen = len(hdr)
    reclen = REC_OVERHEAD + slen + hlen + len(data)
    fields = _pack_fields(reclen, seqf, ts, slen, hlen, ttl)
    rec = b"".join((_pack_prefix(REC_MAGIC, _crc32(fields)), fields, subject, hdr, data))
    return rec + _pack_trailer(record_crc(rec))


def compress_payload(data: bytes) -> bytes | None:
    """``data`` as a Snappy block when that is shorter, else None (store it plain)."""
    if len(data) < COMPRESS_MIN:
        return None
    z = bytes(_compress_raw(data))
    return z if len(z) < len(data) else None


def s2_len(buf: bytes, off: int, end: int) -> int:
    """The uncompressed length a Snappy/S2 block at ``buf[off:end]`` announces (its leading
    uvarint), or -1 when that is not a well-formed varint of at most 32 bits."""
    n = 0
    shift = 0
    while off < end and shift < 35:
        b = buf[off]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n if n <= 0xFFFF_FFFF else -1
        off += 1
        shift += 7
    return -1


def inflate_payload(z: bytes, size: int) -> bytes | None:
    """A compressed payload back, or None when the block does not decode to ``size`` bytes
    (its record checked out, so only a writer's fault could cause that)."""
    try:
        data = bytes(_decompress_raw(z))
    except Exception:
        return None
    return data if len(data) == size else None


def encode_tombstone(first: int, last: int, ts: int) -> bytes:
    return encode_record(first | FLAG_TOMBSTONE, ts, b"", b"", _TOMB_BODY.pack(last), 0)


def encode_erased(seq: int, ts: int, slen: int, hlen: int, dlen: int, noise: bytes) -> bytes:
    """A same-length replacement for a message record: flagged erased, body overwritten."""
    assert len(noise) == slen + hlen + dlen
    return encode_record(
        seq | FLAG_ERASED, ts, noise[:slen], noise[slen : slen + hlen], noise[slen + hlen :], 0
    )


# ---------------------------------------------------------------------------------- scanning

# One scanned message record: (seq, offset, record length, ts, ttl, subject, msg size, erased)
ScannedMsg = tuple[int, int, int, int, int, str, int, bool]


@dataclass(slots=True)
class BadRegion:
    """Bytes that held no valid record. ``seq`` is known when the header checked out and only
    the body was damaged; otherwise the missing sequences are inferred from the neighbours
    (``prev_seq`` < missing < ``next_seq``)."""

    offset: int
    length: int
    seq: int | None
    size: int  # message size when seq is known, else the region's byte length
    prev_seq: int
    next_seq: int | None = None
    tombstone: bool = False


@dataclass(slots=True)
class BlockScan:
    first: int
    header_ok: bool = True
    header_problem: str = ""
    msgs: list[ScannedMsg] = field(default_factory=list)
    # (first, last, ts) of every tombstone range
    tombs: list[tuple[int, int, int]] = field(default_factory=list)
    bad: list[BadRegion] = field(default_factory=list)
    # Offset just past the last valid record; the file is cut here when the tail is torn.
    valid_end: int = BLOCK_HDR_SIZE
    # Set when the block ends in an incomplete or unreadable tail: (offset, why, seq or None).
    tail: tuple[int, str, int | None] | None = None
    seen_max: int = 0  # highest sequence any valid record here accounts for
    notes: list[str] = field(default_factory=list)
    # (offset, corrected record) for records restored by single-bit correction; the opener
    # writes them back so later reads see good bytes.
    fixes: list[tuple[int, bytes]] = field(default_factory=list)
    # Valid records that are neither messages nor tombstones (unknown flags): skipped.
    skipped: int = 0


def _check_header(buf: bytes, name_first: int, scan: BlockScan) -> None:
    if len(buf) < BLOCK_HDR_SIZE:
        scan.header_ok = False
        scan.header_problem = f"short header ({len(buf)} bytes)"
        return
    magic, version, _res, first, crc = _BLOCK_HDR.unpack_from(buf, 0)
    if _crc32(buf[: BLOCK_HDR_SIZE - 4]) != crc or magic != BLOCK_MAGIC:
        scan.header_ok = False
        why = "bad magic" if magic != BLOCK_MAGIC else "header checksum mismatch"
        scan.header_problem = why
        return
    if version != BLOCK_VERSION:
        raise BlockVersionError(f"block {block_name(name_first)} has format version {version}")
    if first != name_first:
        scan.header_ok = False
        scan.header_problem = f"header says first sequence {first}, file name says {name_first}"


def _valid_at(mv: memoryview, pos: int, end: int) -> tuple[int, int] | None:
    """(record length, header state) when a record header at ``pos`` checks out: state 2 = body
    valid too, 1 = header valid, body damaged, complete; 0 = header valid, runs past ``end``."""
    if pos + REC_HDR_SIZE > end:
        return None
    magic, hcrc = REC_PREFIX.unpack_from(mv, pos)
    if magic != REC_MAGIC or _crc32(mv[pos + 8 : pos + REC_HDR_SIZE]) != hcrc:
        return None
    reclen, _seqf, _ts, slen, hlen, _ttl = REC_FIELDS.unpack_from(mv, pos + 8)
    if reclen < REC_OVERHEAD + slen + hlen:
        return None
    if pos + reclen > end:
        return reclen, 0
    (crc,) = REC_TRAILER.unpack_from(mv, pos + reclen - 4)
    return reclen, 2 if record_crc(mv[pos : pos + reclen - 4]) == crc else 1


def scan_block(buf: bytes, name_first: int, subjects: dict[bytes, str] | None = None) -> BlockScan:
    """Read every record of one block file's contents. Pure: no I/O, nothing changed.

    ``subjects`` interns decoded subjects across blocks (many messages share a subject).
    """
    scan = BlockScan(first=name_first, seen_max=name_first - 1)
    _check_header(buf, name_first, scan)
    if subjects is None:
        subjects = {}
    mv = memoryview(buf)
    end = len(buf)
    pos = BLOCK_HDR_SIZE
    if not scan.header_ok and len(buf) < BLOCK_HDR_SIZE:
        # Nothing past a partial header; the opener rewrites the header.
        scan.valid_end = 0
        return scan
    msgs = scan.msgs
    seen = name_first - 1
    unpack_fields = REC_FIELDS.unpack_from
    unpack_head = _REC_HEAD.unpack_from
    unpack_trailer = REC_TRAILER.unpack_from
    crc32 = _crc32
    while pos < end:
        # Fast path: a valid plain message record, checked with one header unpack and two
        # crc32 calls (recovery reads every record, so this loop is the startup time).
        if pos + REC_HDR_SIZE <= end:
            magic, hcrc, reclen, seqf, ts, slen, hlen, ttl = unpack_head(buf, pos)
            rend = pos + reclen
            if (
                magic == REC_MAGIC
                and (seqf <= SEQ_MASK or seqf & FLAG_MASK == FLAG_S2)
                and rend <= end
                and reclen >= REC_OVERHEAD + slen + hlen
                and crc32(mv[pos + 8 : pos + REC_HDR_SIZE]) == hcrc
                and record_crc(mv[pos : rend - 4]) == unpack_trailer(buf, rend - 4)[0]
            ):
                dlen = reclen - REC_OVERHEAD - slen - hlen
                if seqf > SEQ_MASK:
                    seqf &= SEQ_MASK
                    dlen = s2_len(buf, pos + REC_HDR_SIZE + slen + hlen, rend - 4)
                if dlen >= 0:  # (else the slow path below reports it)
                    sb = buf[pos + REC_HDR_SIZE : pos + REC_HDR_SIZE + slen]
                    subj = subjects.get(sb)
                    if subj is None:
                        subj = sb.decode("utf-8", "surrogateescape")
                        subjects[sb] = subj
                    size = 30 + slen + dlen + (4 + hlen if hlen else 0)
                    msgs.append((seqf, pos, reclen, ts, ttl, subj, size, False))
                    if seqf > seen:
                        seen = seqf
                    pos = rend
                    scan.valid_end = pos
                    continue
        state = _valid_at(mv, pos, end)
        if state is None or state[1] == 1:
            fixed = _correct_single_bit(buf, pos, end, state is not None)
            if fixed is not None:
                buf = buf[:pos] + fixed + buf[pos + len(fixed) :]
                mv = memoryview(buf)
                scan.fixes.append((pos, fixed))
                scan.notes.append(
                    f"record at offset {pos} had a single flipped bit; corrected and rewritten"
                )
                continue
        if state is None or state[1] == 0:
            # Unreadable header, or a readable one whose record runs past the end of file.
            nxt = _resync(buf, mv, pos + 1, end)
            if nxt is None:
                if state is not None:
                    _r, seqf, *_ = unpack_fields(mv, pos + 8)
                    scan.tail = (
                        pos,
                        f"incomplete record ({end - pos} of {state[0]} bytes)",
                        seqf & SEQ_MASK,
                    )
                else:
                    scan.tail = (pos, f"{end - pos} unreadable bytes", None)
                break
            region = BadRegion(pos, nxt - pos, None, nxt - pos, seen)
            region.next_seq = _first_msg_seq(mv, nxt, end)
            scan.bad.append(region)
            pos = nxt
            continue
        reclen, ok = state
        _r, seqf, ts, slen, hlen, ttl = unpack_fields(mv, pos + 8)
        seq = seqf & SEQ_MASK
        flags = seqf & FLAG_MASK
        if ok == 1:
            dlen = reclen - REC_OVERHEAD - slen - hlen
            is_tomb = bool(flags & FLAG_TOMBSTONE)
            size = reclen if is_tomb else record_msg_size(slen, hlen, dlen)
            scan.bad.append(BadRegion(pos, reclen, seq, size, seen, seq, is_tomb))
            if not is_tomb and seq > seen:
                seen = seq
            pos += reclen
            scan.valid_end = pos
            continue
        dlen = reclen - REC_OVERHEAD - slen - hlen
        if flags & FLAG_S2 and not flags & FLAG_ERASED:
            dlen = s2_len(buf, pos + REC_HDR_SIZE + slen + hlen, pos + reclen - 4)
        if flags & ~_KNOWN_FLAGS or (flags & FLAG_TOMBSTONE and flags & FLAG_S2):
            scan.notes.append(f"record at offset {pos} has unknown flags {flags:#x}; skipped")
            scan.skipped += 1
        elif dlen < 0:
            scan.notes.append(f"record at offset {pos} has a malformed compressed payload; skipped")
            scan.skipped += 1
        elif flags & FLAG_TOMBSTONE:
            if reclen != TOMB_SIZE or slen or hlen:
                scan.notes.append(f"malformed tombstone at offset {pos}; skipped")
            else:
                (last,) = _TOMB_BODY.unpack_from(mv, pos + REC_HDR_SIZE)
                if last < seq:
                    scan.notes.append(f"tombstone at offset {pos} has an empty range; skipped")
                else:
                    scan.tombs.append((seq, last, ts))
                    if last > seen:
                        seen = last
        else:
            sb = bytes(mv[pos + REC_HDR_SIZE : pos + REC_HDR_SIZE + slen])
            subj = subjects.get(sb)
            if subj is None:
                subj = sb.decode("utf-8", "surrogateescape")
                subjects[sb] = subj
            msgs.append(
                (
                    seq,
                    pos,
                    reclen,
                    ts,
                    ttl,
                    subj,
                    record_msg_size(slen, hlen, dlen),
                    bool(flags & FLAG_ERASED),
                )
            )
            if seq > seen:
                seen = seq
        pos += reclen
        scan.valid_end = pos
    scan.seen_max = seen
    return scan


def _correct_single_bit(buf: bytes, pos: int, end: int, header_ok: bool) -> bytes | None:
    """The record at ``pos`` with one bit flipped back, when exactly that makes it valid.

    Media errors often damage a single bit. Flipping each of the 336 header bits (magic,
    header crc, fields) and checking the header crc and then the body crc finds a header
    error. With a good header, a body crc that differs from the stored one in exactly one
    bit is a flip in the trailer itself, and otherwise crc32's linearity locates a single
    flipped bit in the subject, headers or payload (records up to ``_MAX_CORRECTABLE``
    bytes). Anything else is not corrected (the record is reported lost instead). A wrong
    correction would need a 32-bit crc to match by chance after a multi-bit error."""
    if header_ok:
        reclen = REC_FIELDS.unpack_from(buf, pos + 8)[0]
        (stored,) = REC_TRAILER.unpack_from(buf, pos + reclen - 4)
        actual = _crc32(buf[pos : pos + reclen - 4])
        diff = stored ^ actual
        if diff and diff & (diff - 1) == 0:
            return buf[pos : pos + reclen - 4] + REC_TRAILER.pack(actual)
        body_len = reclen - 4
        if body_len > _MAX_CORRECTABLE:
            return None
        # crc32 is linear: a flip of bit j of byte k changes the crc by g(8 * (L - k) - j),
        # where g(m) is the register 1 stepped m times. Step until it equals the change.
        r = 1
        for m in range(1, 8 * body_len + 1):
            r = (r >> 1) ^ (_CRC_POLY if r & 1 else 0)
            if r == diff:
                k = body_len - (m + 7) // 8
                j = 8 * ((m + 7) // 8) - m
                if k < REC_HDR_SIZE:
                    return None  # the header crc checked out: not a header bit
                rec = bytearray(buf[pos : pos + body_len])
                rec[k] ^= 1 << j
                if _crc32(rec) != stored:
                    return None
                return bytes(rec) + buf[pos + body_len : pos + reclen]
        return None
    if pos + REC_HDR_SIZE > end:
        return None
    head = bytearray(buf[pos : pos + REC_HDR_SIZE])
    for i in range(REC_HDR_SIZE * 8):
        head[i >> 3] ^= 1 << (i & 7)
        if head[:4] == REC_MAGIC:
            (hcrc,) = struct.unpack_from("<I", head, 4)
            if _crc32(head[8:]) == hcrc:
                reclen, _seqf, _ts, slen, hlen, _ttl = REC_FIELDS.unpack_from(head, 8)
                if reclen >= REC_OVERHEAD + slen + hlen and pos + reclen <= end:
                    body = bytes(head) + buf[pos + REC_HDR_SIZE : pos + reclen - 4]
                    (crc,) = REC_TRAILER.unpack_from(buf, pos + reclen - 4)
                    if _crc32(body) == crc:
                        return body + buf[pos + reclen - 4 : pos + reclen]
        head[i >> 3] ^= 1 << (i & 7)
    return None


def _resync(buf: bytes, mv: memoryview, start: int, end: int) -> int | None:
    """Offset of the next fully valid record at or after ``start``."""
    pos = start
    while True:
        pos = buf.find(REC_MAGIC, pos, end)
        if pos < 0:
            return None
        state = _valid_at(mv, pos, end)
        if state is not None and state[1] == 2:
            return pos
        pos += 1


def _first_msg_seq(mv: memoryview, pos: int, end: int) -> int | None:
    """Sequence of the first message record (not tombstone) from ``pos`` on, walking only
    valid records; used to bound the sequences an unreadable region can have held."""
    while pos < end:
        state = _valid_at(mv, pos, end)
        if state is None or state[1] == 0:
            return None
        # A record with a valid header but a damaged body still tells its sequence.
        _r, seqf, *_ = REC_FIELDS.unpack_from(mv, pos + 8)
        if not seqf & FLAG_TOMBSTONE:
            return int(seqf & SEQ_MASK)
        pos += state[0]
    return None
