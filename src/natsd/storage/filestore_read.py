"""The read side of the file store's blocks: where a record is, reading it, walking them.

``RecordReader`` finds a live message's block and position (``_where``), the record's
offset (``_rec``: kept for the block being written, walked from the mark before it
otherwise, ``filestore_index``), and reads records through a window (``_read``) that
sequential readers grow. ``load_range`` walks a block's records in file order; the
per-subject scans read each record's header (``_iter_subjects``). Every read checks the
record's crc32 and sequence; one that fails is reported lost (``_mark_lost``) and leaves
the index until the next open judges its bytes again.

``BlockStore`` (``filestore_io``) owns the files, buffers and descriptors this reads
through; the queries over it are ``QueryMixin``'s (``filestore_query``).
"""

from __future__ import annotations

import struct
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from typing import Final, cast

from natsd.core.crc import crc32 as record_crc
from natsd.storage.fileio import FileIO
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    FLAG_S2,
    FLAG_TOMBSTONE,
    REC_FIELDS,
    REC_HDR_SIZE,
    REC_MAGIC,
    REC_OVERHEAD,
    inflate_payload,
    s2_len,
)
from natsd.storage.filestore_index import GROUP, GROUP_SHIFT, Block, SubjState
from natsd.storage.filestore_query import QueryMixin
from natsd.storage.store import ErrStoreClosed, ErrStoreIO, LostData, StoredMsg

__all__ = ["READAHEAD", "RecordReader"]

# A sequential reader gets this much read-ahead per pread.
READAHEAD: Final = 64 * 1024
# load_range's window starts at READAHEAD and doubles per read up to this.
_RANGE_WINDOW: Final = 1024 * 1024
# zlib.crc32 of any bytes followed by their own crc32 (little-endian): checks a record and
# its trailer in one call.
_CRC_RESIDUE: Final = 0x2144DF1C

# A walk over a group's record headers reads this much at a time.
_GROUP_READ: Final = 16 * 1024
_GROUP_MASK: Final = GROUP - 1
# A group whose records span at most this many bytes is read in one go.
_GROUP_REGION: Final = 256 * 1024
_BUF_AHEAD: Final = 256
# A compressed payload's length is a varint of at most this many bytes (32 bits).
_VARINT_MAX: Final = 5
# Decoded subjects kept for reuse (``_name``) before the table starts over.
_NAMES: Final = 4096
# Settled blocks that keep every record's place while a reader goes through them in order
# (about 8 bytes per record each).
_EXPANDED: Final = 4
# A run of dead positions longer than this is jumped over through the marks, not walked.
_WALK_GAP: Final = 16

_crc32: Final = zlib.crc32
_rec_fields: Final = REC_FIELDS.unpack_from
_unpack_hcrc: Final = struct.Struct("<I").unpack_from
_len_seq: Final = struct.Struct("<IQ").unpack_from


# The unpackers are typed so that compiled callers hold the fields as native ints: a field
# straight from struct is an object, and every sum, comparison and slice bound made with it
# would go through the generic object protocol.
def _unpack_fields(buf: bytes, off: int) -> tuple[int, int, int, int, int, int]:
    """REC_FIELDS at ``off``: (length, sequence with flags, ts, subject length, header
    length, ttl)."""
    return cast("tuple[int, int, int, int, int, int]", _rec_fields(buf, off))


def _unpack_len_seq(buf: bytes, off: int) -> tuple[int, int]:
    """Record length and sequence (with flags) of REC_FIELDS at ``off``."""
    return cast("tuple[int, int]", _len_seq(buf, off))


def _inflate(buf: bytes, start: int, end: int) -> bytes | None:
    """The compressed payload at ``buf[start:end]``, decompressed (None if it does not
    decode to the length it announces)."""
    return inflate_payload(buf[start:end], s2_len(buf, start, end))


class _Range:
    """What one ``load_range`` call has taken so far (``hdrs_only``: ``load_with_headers``,
    which counts every live message it passes in ``seen``)."""

    __slots__ = ("hdrs_only", "max_bytes", "max_msgs", "next", "seen", "total", "want")

    def __init__(self, max_msgs: int, max_bytes: int, hdrs_only: bool = False) -> None:
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes
        self.hdrs_only = hdrs_only
        self.seen = 0
        self.next = 0
        self.total = 0
        self.want = READAHEAD


class RecordReader(QueryMixin):
    """Record reads over the blocks ``BlockStore`` keeps (module docstring)."""

    _io: FileIO
    _closed: bool
    _lost: LostData | None
    # The last read window: (block, its offset, the bytes), and where the last read ended
    # (a read starting there is sequential and reads ahead).
    _rwin: tuple[Block, int, bytes] | None
    _read_end: tuple[Block | None, int]
    # Subjects decoded from records, shared (bounded: cleared when it grows past _NAMES).
    _names: dict[bytes, str]
    # Settled blocks given every record's place by ``_expand``, oldest first.
    _expanded: list[Block]
    # The record places of the last group ``_rec`` walked: (block, group, offsets, lengths);
    # None after anything that moves records (a rewrite, a rollback, a block retired).
    _glast: tuple[Block, int, list[int], list[int]] | None
    recovery_report: list[str]

    # Primitives BlockStore and FileStore provide.
    def _ensure_fd(self, blk: Block) -> int:
        raise NotImplementedError

    def _remove(self, seq: int, tomb: bool = True, notify: bool = True) -> int:
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise ErrStoreClosed()

    # ------------------------------------------------------------------ reading records
    def _read(self, blk: Block, off: int, length: int, ahead: int = 0) -> tuple[bytes, int]:
        """(buffer, start) holding ``length`` bytes of ``blk`` at ``off`` (fewer when the
        file was cut: callers check). ``ahead``: read at least this much and keep it as the
        window for the next reads."""
        fl = blk.flushed
        if off >= fl:
            start = off - fl
            # (a little past ``length`` when asked to look ahead: a header and its subject)
            return bytes(blk.buf[start : start + length + (_BUF_AHEAD if ahead else 0)]), 0
        w = self._rwin
        if w is not None and w[0] is blk and w[1] <= off and off + length <= w[1] + len(w[2]):
            self._read_end = (blk, off + length)
            return w[2], off - w[1]
        fd = self._ensure_fd(blk)
        sequential = self._read_end[0] is blk and self._read_end[1] == off
        if sequential:
            ahead = max(ahead, READAHEAD)
        want = max(length, min(ahead, fl - off))
        data = self._io.pread(fd, want, off)
        self._read_end = (blk, off + length)
        if want > length:
            self._rwin = (blk, off, data)
        return data, 0

    def _rec(self, blk: Block, k: int) -> tuple[int, int]:
        """(offset, length) of the record at position ``k``: kept for the block being
        written (and irregular ones); otherwise read from the record headers of its group,
        walked from the mark before it in one read, the last group walked kept (so reading
        on through a group walks it once). (0, 0) when they cannot be walked (bytes changed
        since open): a read of it fails its checks."""
        offs = blk.offs
        if offs is not None:
            return offs[k], blk.lens[k]  # type: ignore[index]
        j = k >> GROUP_SHIFT
        i = k & _GROUP_MASK
        g = self._glast
        if g is None or g[0] is not blk or g[1] != j:
            if g is not None and g[0] is blk and g[1] == j - 1 and self._expand(blk):
                # reading on through the block: every place of it at once
                return blk.offs[k], blk.lens[k]  # type: ignore[index]
            g = self._walk_group(blk, j)
        if i < len(g[2]):
            return g[2][i], g[3][i]
        return 0, 0

    def _expand(self, blk: Block) -> bool:
        """Give settled block ``blk`` every record's place for a while (a reader goes through
        it in order): one read of the block and a walk over its headers, paid once per
        block instead of once per group. At most ``_EXPANDED`` blocks at a time, the least
        recently expanded settling again first. False when its headers cannot be walked to
        the end (bytes changed since open): it stays with its marks. (A block whose first
        bytes are still buffered is read from its file and buffer: records never straddle
        the two, and the file holds the header.)"""
        n = blk.nrec
        offs = array("I", bytes(4 * n))
        lens = array("I", bytes(4 * n))
        k = 0
        try:
            fl = blk.flushed
            data = self._io.pread(self._ensure_fd(blk), fl, 0) if fl else b""
        except OSError as exc:
            raise ErrStoreIO(f"read block {blk.first}: {exc}") from exc
        if blk.buf:
            data += bytes(blk.buf)
        off = BLOCK_HDR_SIZE
        end = len(data)
        while k < n and off + REC_HDR_SIZE <= end:
            reclen, seqf = _unpack_len_seq(data, off + 8)
            if reclen < REC_OVERHEAD or data[off : off + 4] != REC_MAGIC:
                break
            if not seqf & FLAG_TOMBSTONE:
                offs[k] = off
                lens[k] = reclen
                k += 1
            off += reclen
        if k < n:
            return False
        blk.offs = offs
        blk.lens = lens
        expanded = self._expanded
        expanded.append(blk)
        if len(expanded) > _EXPANDED:
            old = expanded.pop(0)
            if old is not self._blocks[-1]:
                old.settle()
        return True

    def _walk_group(self, blk: Block, j: int) -> tuple[Block, int, list[int], list[int]]:
        """The record places of group ``j`` of settled block ``blk`` (fewer than it holds
        when its headers cannot be walked to the end); kept as ``_glast`` when complete."""
        n = min(GROUP, blk.nrec - (j << GROUP_SHIFT))
        goffs: list[int] = []
        glens: list[int] = []
        marks = blk.marks
        off = marks[j]
        end = marks[j + 1] if j + 1 < len(marks) else blk.size
        try:
            if end - off <= _GROUP_REGION and (end <= blk.flushed or off >= blk.flushed):
                # the group's bytes in one read (the window for the record reads that follow)
                raw, b = self._read(blk, off, end - off)
                if off < blk.flushed and not b:
                    self._rwin = (blk, off, raw)
                stop = min(len(raw), b + end - off)
                while len(goffs) < n and b + REC_HDR_SIZE <= stop:
                    reclen, seqf = _unpack_len_seq(raw, b + 8)
                    if reclen < REC_OVERHEAD or raw[b : b + 4] != REC_MAGIC:
                        break
                    if not seqf & FLAG_TOMBSTONE:
                        goffs.append(off)
                        glens.append(reclen)
                    off += reclen
                    b += reclen
            else:
                while len(goffs) < n and off + REC_HDR_SIZE <= end:
                    raw, b = self._read(blk, off, REC_HDR_SIZE, _GROUP_READ)
                    if len(raw) - b < REC_HDR_SIZE or raw[b : b + 4] != REC_MAGIC:
                        break
                    reclen, seqf = _unpack_len_seq(raw, b + 8)
                    if reclen < REC_OVERHEAD:
                        break
                    if not seqf & FLAG_TOMBSTONE:
                        goffs.append(off)
                        glens.append(reclen)
                    off += reclen
        except OSError as exc:
            raise ErrStoreIO(f"read block {blk.first}: {exc}") from exc
        g = (blk, j, goffs, glens)
        if len(goffs) == n:
            self._glast = g
        return g

    def _next_live(self, lo: int) -> tuple[Block, int, int] | None:
        """The block, position and sequence of the first live message from ``lo`` on."""
        blocks = self._blocks
        i = bisect_right(self._firsts, lo) - 1
        if i < 0:
            i = 0
        for bi in range(i, len(blocks)):
            blk = blocks[bi]
            if blk.live:
                k = blk.alive.find(1, blk.pos_from(lo))
                if k >= 0:
                    return blk, k, blk.seq_at(k)
        return None

    def _where(self, seq: int) -> tuple[Block, int] | None:
        """The block and position of live message ``seq``."""
        i = bisect_right(self._firsts, seq) - 1
        if i < 0:
            return None
        blk = self._blocks[i]
        k = blk.pos(seq)
        if k < 0 or not blk.alive[k]:
            return None
        return blk, k

    def _name(self, sb: bytes) -> str:
        names = self._names
        name = names.get(sb)
        if name is None:
            if len(names) >= _NAMES:
                names.clear()
            name = names[sb] = sb.decode("utf-8", "surrogateescape")
        return name

    def _head(self, blk: Block, k: int) -> tuple[str, int, int, int] | None:
        """(subject, size, ts, ttl) of the record at position ``k`` from its header; None
        when the header cannot be read or does not check out."""
        off, reclen = self._rec(blk, k)
        if reclen < REC_OVERHEAD:
            return None
        try:
            raw, b = self._read(blk, off, REC_HDR_SIZE, _GROUP_READ)
            if len(raw) - b < REC_HDR_SIZE:
                return None
            _r, seqf, ts, slen, hlen, ttl = _unpack_fields(raw, b + 8)
            if _crc32(memoryview(raw)[b + 8 : b + REC_HDR_SIZE]) != _unpack_hcrc(raw, b + 4)[0]:
                return None
            # (a compressed payload's length is its leading varint, after the headers)
            need = REC_HDR_SIZE + slen + (hlen + _VARINT_MAX if seqf & FLAG_S2 else 0)
            need = min(need, reclen - 4)
            if len(raw) - b < need:
                raw, b = self._read(blk, off, need)
                if len(raw) - b < need:
                    return None
        except OSError as exc:
            raise ErrStoreIO(f"read block {blk.first}: {exc}") from exc
        p = b + REC_HDR_SIZE
        if seqf & FLAG_S2:
            dlen = s2_len(raw, p + slen + hlen, b + need)
            if dlen < 0:
                return None
        else:
            dlen = reclen - REC_OVERHEAD - slen - hlen
        size = 30 + slen + dlen + (4 + hlen if hlen else 0)
        return self._name(raw[p : p + slen]), size, ts, ttl

    def _subject(self, blk: Block, k: int) -> str | None:
        h = self._head(blk, k)
        return None if h is None else h[0]

    def _load(self, seq: int) -> StoredMsg | None:
        w = self._where(seq)
        if w is None:
            return None
        return self._load_at(w[0], w[1], seq)

    def _load_at(self, blk: Block, k: int, seq: int) -> StoredMsg | None:
        off, reclen = self._rec(blk, k)
        if reclen >= REC_OVERHEAD:
            try:
                raw, base = self._read(blk, off, reclen)
            except OSError as exc:
                raise ErrStoreIO(f"read seq {seq}: {exc}") from exc
            end = base + reclen
            if end <= len(raw) and record_crc(memoryview(raw)[base:end]) == _CRC_RESIDUE:
                _r, seqf, ts, slen, hlen, ttl = _unpack_fields(raw, base + 8)
                if seqf == seq or seqf == seq | FLAG_S2:
                    p = base + REC_HDR_SIZE
                    subj = self._name(raw[p : p + slen])
                    p += slen
                    hdr = raw[p : p + hlen] if hlen else None
                    data: bytes | None = raw[p + hlen : end - 4]
                    if seqf != seq:
                        data = _inflate(raw, p + hlen, end - 4)
                    if data is not None:
                        return StoredMsg(subj, seq, ts, hdr, data, ttl)
        self._mark_lost(seq, blk, k)
        return None

    def live_seqs(self, start: int, end: int, limit: int) -> list[int]:
        self._check_open()
        out: list[int] = []
        if limit <= 0:
            return out
        for s in self._iter_live(max(start, self._first_seq), min(end, self._last_seq)):
            out.append(s)
            if len(out) >= limit:
                break
        return out

    def load_range(self, start: int, max_msgs: int, max_bytes: int = 0) -> list[StoredMsg]:
        """``_load`` for a run of messages: walks each block's records in file order and
        reads them from one growing window instead of a lookup and a read per message. Same
        checks (sequence and body crc) and the same handling of a record gone bad."""
        self._check_open()
        out: list[StoredMsg] = []
        if max_msgs <= 0 or not self._nlive:
            return out
        if start < self._first_seq:
            start = self._first_seq
        if start > self._last_seq:
            return out
        blocks = self._blocks
        bi = bisect_right(self._firsts, start) - 1
        if bi < 0:
            bi = 0
        rng = _Range(max_msgs, max_bytes)
        for bk in range(bi, len(blocks)):
            blk = blocks[bk]
            if blk.live and self._range_block(blk, blk.pos_from(start), out, rng):
                break
        return out

    def load_with_headers(self, start: int, max_msgs: int) -> tuple[list[StoredMsg], int]:
        self._check_open()
        out: list[StoredMsg] = []
        if max_msgs <= 0 or not self._nlive or start > self._last_seq:
            return out, 0
        start = max(start, self._first_seq)
        blocks = self._blocks
        bi = max(bisect_right(self._firsts, start) - 1, 0)
        rng = _Range(max_msgs, 0, hdrs_only=True)
        for bk in range(bi, len(blocks)):
            blk = blocks[bk]
            if blk.live and self._range_block(blk, blk.pos_from(start), out, rng):
                return out, rng.next
        return out, 0

    def _range_block(self, blk: Block, k: int, out: list[StoredMsg], rng: _Range) -> bool:
        """Append ``blk``'s live messages from position ``k`` on to ``out``; True once the
        range is full. Walks the records in file order (tombstones skipped, a run of dead
        positions jumped over); a record that does not check out is reported lost."""
        alive = blk.alive
        nrec = blk.nrec
        k = alive.find(1, k)
        if k < 0:
            return False
        seqs = blk.seqs
        seq0 = blk.seq0
        names = self._names
        offs = blk.offs
        walk = offs is None  # (a block with every offset known never walks)
        off, _len = self._rec(blk, k)
        # The window: bytes [woff, woff + len(win)) of the block.
        win = b""
        woff = 0
        w = self._rwin
        if w is not None and w[0] is blk:
            woff = w[1]
            win = w[2]
        # One memoryview per window (the checksum reads records through it without a copy)
        # and the last record's subject: a run of records on one subject, the usual case,
        # takes its name with a compare instead of a hash and a lookup (measured compiled:
        # slice and compare 40 ns, slice and dict lookup 67 ns, bytes.startswith at an
        # offset 109 ns, its arguments being parsed the slow way).
        wmv = memoryview(win)
        last_sb = b""
        last_subj = ""
        while k < nrec:
            s = seq0 + k if seqs is None else seqs[k]
            b = off - woff
            if b < 0 or b + REC_HDR_SIZE > len(win):
                win = self._range_read(blk, off, REC_HDR_SIZE, rng, s)
                wmv = memoryview(win)
                woff = off
                b = 0
            if len(win) - b >= REC_HDR_SIZE:
                reclen, seqf, ts, slen, hlen, ttl = _unpack_fields(win, b + 8)
            else:
                reclen = seqf = ts = slen = hlen = ttl = 0
            if reclen >= REC_OVERHEAD and seqf & FLAG_TOMBSTONE:
                off += reclen
                continue
            take = True
            z = seqf == s | FLAG_S2  # a compressed payload
            if z:
                seqf = s
            if rng.hdrs_only and seqf == s and reclen >= REC_OVERHEAD:
                # load_with_headers: every live message counts, one without headers (no
                # message id) is passed over unread
                rng.seen += 1
                rng.next = s + 1
                take = hlen > 0
            end = b + reclen
            if take and end > len(win) and reclen >= REC_OVERHEAD:
                win = self._range_read(blk, off, reclen, rng, s)
                wmv = memoryview(win)
                woff = off
                b = 0
                end = reclen
            # crc32 over a record and its stored crc (little-endian) is a constant.
            if not take:
                pass
            elif (
                seqf == s
                and reclen >= REC_OVERHEAD
                and end <= len(win)
                and record_crc(wmv[b:end]) == _CRC_RESIDUE
            ):
                p = b + REC_HDR_SIZE
                sb = win[p : p + slen]
                if sb == last_sb:
                    subj = last_subj
                else:
                    got = names.get(sb)
                    subj = self._name(sb) if got is None else got
                    last_sb, last_subj = sb, subj
                p += slen
                hdr = win[p : p + hlen] if hlen else None
                data = win[p + hlen : end - 4] if not z else _inflate(win, p + hlen, end - 4)
                if data is None:
                    self._mark_lost(s, blk, k)
                else:
                    out.append(StoredMsg(subj, s, ts, hdr, data, ttl))
                    if len(out) >= rng.max_msgs and not rng.hdrs_only:
                        return True
                    if rng.max_bytes > 0:
                        rng.total += slen + hlen + len(data)
                        if rng.total >= rng.max_bytes:
                            return True
            else:
                at, _len = self._rec(blk, k)
                if at != off:
                    # The walk lost its footing (bytes changed since open): from the mark.
                    off = at
                    continue
                self._mark_lost(s, blk, k)
            if rng.hdrs_only and rng.seen >= rng.max_msgs:
                return True
            k += 1
            off += reclen
            if k < nrec and alive[k]:
                if offs is not None:
                    off = offs[k]
                continue
            nk = alive.find(1, k)
            if nk < 0:
                return False
            if not walk or nk - k > _WALK_GAP:
                k = nk
                off, _len = self._rec(blk, k)
                continue
            while k < nk:
                # dead positions in between: step over their records
                b = off - woff
                if b < 0 or b + REC_HDR_SIZE > len(win):
                    win = self._range_read(blk, off, REC_HDR_SIZE, rng, s)
                    wmv = memoryview(win)
                    woff = off
                    b = 0
                if len(win) - b < REC_HDR_SIZE:
                    break
                rl, sf = _unpack_len_seq(win, b + 8)
                if rl < REC_OVERHEAD:
                    break
                off += rl
                if not sf & FLAG_TOMBSTONE:
                    k += 1
            if k != nk:
                k = nk
                off, _len = self._rec(blk, k)
        return False

    def _range_read(self, blk: Block, off: int, need: int, rng: _Range, seq: int) -> bytes:
        """The window for ``load_range`` at ``off`` (at least ``need`` bytes when there are),
        growing from READAHEAD to _RANGE_WINDOW per read."""
        fl = blk.flushed
        want = rng.want
        if want < _RANGE_WINDOW:
            rng.want = want * 2
        try:
            if off >= fl:
                # The write buffer (records never straddle it and the file).
                lo = off - fl
                return bytes(blk.buf[lo : lo + max(need, want)])
            fd = self._ensure_fd(blk)
            win = self._io.pread(fd, max(need, min(want, fl - off)), off)
        except OSError as exc:
            raise ErrStoreIO(f"read seq {seq}: {exc}") from exc
        self._rwin = (blk, off, win)
        return win

    def _mark_lost(self, seq: int, blk: Block, k: int) -> None:
        """A record that was fine at open is not now (media error, file cut): report it and
        drop it from the index. No tombstone: the next open judges the bytes again, so a
        real loss is reported again and a transient read error heals."""
        self.recovery_report.append(
            f"block {blk.first}: record seq {seq} failed its checksum on read; message lost"
        )
        if self._lost is None:
            self._lost = LostData()
        self._lost.msgs.append(seq)
        h = self._head(blk, k)
        self._lost.bytes += h[1] if h is not None else 0
        self._remove(seq, tomb=False)

    def _iter_live(self, lo: int, hi: int) -> Iterator[int]:
        """Live sequences from ``lo`` to ``hi``, ascending (a removal while iterating is
        fine: positions are only ever marked dead in place)."""
        blocks = self._blocks  # replaced, never edited, when blocks go
        i = bisect_right(self._firsts, lo) - 1
        if i < 0:
            i = 0
        for bi in range(i, len(blocks)):
            blk = blocks[bi]
            if blk.first > hi:
                return
            alive = blk.alive
            k = blk.pos_from(lo)
            kend = blk.pos_upto(hi) + 1
            while k < kend:
                k = alive.find(1, k, kend)
                if k < 0:
                    break
                yield blk.seq_at(k)
                k += 1

    def _iter_live_rev(self, hi: int, lo: int) -> Iterator[int]:
        blocks = self._blocks
        i = bisect_right(self._firsts, hi) - 1
        for bi in range(min(i, len(blocks) - 1), -1, -1):
            blk = blocks[bi]
            alive = blk.alive
            k = blk.pos_upto(hi)
            klo = blk.pos_from(lo)
            while k >= klo:
                k = alive.rfind(1, klo, k + 1)
                if k < 0:
                    break
                yield blk.seq_at(k)
                k -= 1
            if blk.first <= lo:
                return

    def _iter_subjects(self, lo: int, hi: int, rev: bool = False) -> Iterator[tuple[int, str]]:
        """(sequence, subject) of the live messages from ``lo`` to ``hi`` (read from their
        records; one that cannot be read is reported lost and skipped)."""
        it = self._iter_live_rev(hi, lo) if rev else self._iter_live(lo, hi)
        for s in it:
            w = self._where(s)
            if w is None:
                continue
            subj = self._subject(w[0], w[1])
            if subj is None:
                self._mark_lost(s, w[0], w[1])
                continue
            yield s, subj

    def _fresh(self, subject: str, ss: SubjState) -> None:
        """Recompute a subject's first/last after removals (lazily, like nats-server)."""
        if ss.first_stale:
            hi = self._last_seq if ss.last_stale else ss.last
            for s, subj in self._iter_subjects(ss.first + 1, hi):
                if subj == subject:
                    ss.first = s
                    break
            ss.first_stale = False
            if ss.msgs == 1:
                ss.last = ss.first
                ss.last_stale = False
        if ss.last_stale:
            for s, subj in self._iter_subjects(ss.first, ss.last - 1, rev=True):
                if subj == subject:
                    ss.last = s
                    break
            ss.last_stale = False
