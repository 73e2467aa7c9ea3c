"""The block layer of FileStore: block files, write buffers, flush, sync, reads.

``BlockStore`` owns the files and the durability machinery; ``FileStore`` (``filestore``)
builds the stream semantics on top of it. See ``filestore``'s docstring for the durability
contract and the thread rules this code implements.

Ownership and threads. One thread (the server's event loop) owns the store and calls every
method except ``sync``. ``sync`` may run on a worker thread at the same time (group commit).
The only state the two share is guarded by ``_lock``: the set of blocks written since the
last sync, the "directory changed" flag, the unlinks waiting for a sync, and every block's
``fd`` (closed only under the lock; ``sync`` fsyncs ``dup``s taken under it, so it can never
fsync a descriptor number the owner closed and reused).
"""

from __future__ import annotations

import errno
import os
import struct
import threading
import time
import zlib
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Final

from natsd.core.crc import crc32 as record_crc
from natsd.storage.fileio import DEFAULT_IO, O_CLOEXEC, FileIO
from natsd.storage.filestore_checkpoint import file_sum
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    FLAG_TOMBSTONE,
    REC_FIELDS,
    REC_HDR_SIZE,
    REC_MAGIC,
    REC_OVERHEAD,
    SEQ_MASK,
    block_header,
    block_name,
    encode_tombstone,
)
from natsd.storage.filestore_index import GROUP, GROUP_SHIFT, Block, SubjState
from natsd.storage.filestore_query import QueryMixin
from natsd.storage.filestore_recovery import recover
from natsd.storage.store import (
    ErrStoreClosed,
    ErrStoreIO,
    LostData,
    StoreConfig,
    StoredMsg,
    StoreError,
)

__all__ = ["BlockStore"]

# Block files kept open for reading besides the ones being written.
_MAX_OPEN_FDS: Final = 16
# A sequential reader gets this much read-ahead per pread.
_READAHEAD: Final = 64 * 1024
# load_range's window starts at _READAHEAD and doubles per read up to this.
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
# Decoded subjects kept for reuse (``_name``) before the table starts over.
_NAMES: Final = 4096
# A run of dead positions longer than this is jumped over through the marks, not walked.
_WALK_GAP: Final = 16

_crc32: Final = zlib.crc32
_unpack_fields: Final = REC_FIELDS.unpack_from
_unpack_hcrc: Final = struct.Struct("<I").unpack_from
# Record length and sequence (with flags) of REC_FIELDS.
_unpack_len_seq: Final = struct.Struct("<IQ").unpack_from


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
        self.want = _READAHEAD


class BlockStore(QueryMixin):
    """Block files plus the in-memory index; stream semantics live in the subclass."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        cfg: StoreConfig,
        block_size: int,
        io: FileIO = DEFAULT_IO,
        now_ns: Callable[[], int] = time.time_ns,
    ):
        self._io = io
        # the wall clock messages and tombstones are stamped with (a test's may run ahead)
        self._now_ns = now_ns
        self._dir = os.fspath(directory)
        self._mdir = os.path.join(self._dir, "msgs")
        # Any size works (a block takes at least one record); tests use tiny ones.
        self._block_size = max(block_size, 64)
        self._cfg = cfg
        self._closed = False
        self._failed: str | None = None
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._dirty: dict[Block, None] = {}
        self._dir_dirty = False
        self._unlink_wait: list[str] = []  # dropped before the last flush
        self._pending_unlinks: list[str] = []  # the next sync may unlink these
        self._sync_error: str | None = None
        self._unflushed: list[Block] = []
        self._pending_tombs: list[list[int]] = []  # [first, last, ts]
        self._open_fds: OrderedDict[Block, None] = OrderedDict()
        self._rwin: tuple[Block, int, bytes] | None = None
        self._read_end: tuple[Block | None, int] = (None, -1)
        self._unlink_now = False  # truncate unlinks at once instead of at the next sync
        self._reclaiming = False  # inside _reclaim_dropped (no recursion)

        created = not io.isdir(self._mdir)
        if created:
            # Every directory made here is made durable in its parent before anything is
            # written into it (a new stream directory included).
            made: list[str] = []
            d = self._mdir
            while d and not io.isdir(d):
                made.append(d)
                up = os.path.dirname(d)
                if up == d:
                    break
                d = up
            io.makedirs(self._mdir)
            for d in made:
                io.fsync_dir(os.path.dirname(d) or ".")
        self._created = created
        r = recover(self._mdir, io, created)
        self.recovery_report: list[str] = r.report
        self._lost: LostData | None = r.lost
        self._blocks: list[Block] = r.blocks
        self._firsts: list[int] = [b.first for b in r.blocks]
        self._nlive = r.nlive  # live messages
        self._subjects: dict[str, SubjState] = r.subjects
        self._ttl_heap: list[tuple[int, int]] = r.ttl_heap
        self._bytes = r.bytes
        self._first_seq = r.first_seq
        self._first_ts = r.first_ts
        self._last_seq = r.last_seq
        self._last_ts = r.last_ts
        # Subjects decoded from records, shared (bounded: cleared when it grows past _NAMES).
        self._names: dict[bytes, str] = {}
        for seq in r.redelete:
            self._add_tomb_range(seq, seq, r.last_ts)

    def _remove(self, seq: int, tomb: bool = True, notify: bool = True) -> int:
        """Take one message out of the index (the subclass's stream semantics); its size,
        or -1 when it was not live."""
        raise NotImplementedError

    def _add_tomb_range(self, first: int, last: int, ts: int) -> None:
        tombs = self._pending_tombs
        if tombs and tombs[-1][1] + 1 == first:
            tombs[-1][1] = last
            tombs[-1][2] = ts
        else:
            tombs.append([first, last, ts])

    def _roll(self, first: int) -> Block:
        if self._blocks:
            self._blocks[-1].settle()
        blk = Block(first, os.path.join(self._mdir, block_name(first)))
        blk.buf = bytearray(block_header(first))
        self._blocks.append(blk)
        self._firsts.append(first)
        self._unflushed.append(blk)
        if len(self._blocks) > 1:
            self._drop_leading_blocks()
        return blk

    def _drop_leading_blocks(self) -> None:
        """Drop leading blocks with no live message (never the block being written). Only
        leading ones: a tombstone lives in its message's block or a later one, so removing a
        middle block could lose deletions of earlier messages."""
        blocks = self._blocks
        k = 0
        while k < len(blocks) - 1 and blocks[k].live == 0:
            k += 1
        if not k:
            return
        for b in blocks[:k]:
            self._retire(b)
        # New lists, not in-place deletes: iterators over the old ones stay valid.
        self._blocks = blocks[k:]
        self._firsts = self._firsts[k:]

    def _retire(self, blk: Block) -> None:
        with self._lock:
            if blk.fd >= 0:
                self._io.close(blk.fd)
                blk.fd = -1
            self._dirty.pop(blk, None)
        self._open_fds.pop(blk, None)
        if blk in self._unflushed:
            self._unflushed.remove(blk)
        if self._rwin is not None and self._rwin[0] is blk:
            self._rwin = None
        blk.buf = bytearray()
        if blk.on_disk:
            if self._unlink_now:
                try:
                    self._io.unlink(blk.path)
                except FileNotFoundError:
                    pass
            else:
                # Unlinked by the sync after the next flush (see the module docstring).
                self._unlink_wait.append(blk.path)

    def _open_for_write(self, blk: Block) -> None:
        fd = self._ensure_fd(blk)
        self._io.lseek(fd, blk.flushed, os.SEEK_SET)

    def _ensure_fd(self, blk: Block) -> int:
        fd = blk.fd
        if fd >= 0:
            self._open_fds.move_to_end(blk)
            return fd
        io = self._io
        if blk.on_disk:
            fd = io.open(blk.path, os.O_RDWR | O_CLOEXEC)
        else:
            path = blk.path
            if path in self._unlink_wait or path in self._pending_unlinks:
                # Only truncate can reuse a name; finish the old file's removal first.
                with self._lock:
                    for lst in (self._unlink_wait, self._pending_unlinks):
                        while path in lst:
                            lst.remove(path)
                io.unlink(path)
            fd = io.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | O_CLOEXEC, 0o644)
            blk.on_disk = True
            with self._lock:
                self._dir_dirty = True
        io.lseek(fd, blk.flushed, os.SEEK_SET)
        blk.fd = fd
        self._open_fds[blk] = None
        if len(self._open_fds) > _MAX_OPEN_FDS:
            self._evict_fds()
        return fd

    def _evict_fds(self) -> None:
        active = self._blocks[-1] if self._blocks else None
        for b in list(self._open_fds):
            if len(self._open_fds) <= _MAX_OPEN_FDS:
                break
            if b is active or b.buf:
                continue
            with self._lock:
                self._io.close(b.fd)
                b.fd = -1
            del self._open_fds[b]

    def flush(self) -> int:
        if self._closed:
            raise ErrStoreClosed()
        if self._failed is not None:
            raise ErrStoreIO(self._failed)
        saved_tombs = [list(t) for t in self._pending_tombs]
        if self._pending_tombs:
            self._emit_tombstones()
        blocks = list(self._unflushed)
        write = self._io.write
        try:
            for blk in blocks:
                fd = self._ensure_fd(blk)
                with memoryview(blk.buf) as view:
                    done = 0
                    total = len(view)
                    while done < total:
                        n = write(fd, view[done:])
                        if n <= 0:
                            raise OSError(errno.EIO, "write returned 0")
                        done += n
        except OSError as exc:
            self._rollback(blocks, saved_tombs)
            if self._unlink_wait and not self._reclaiming:
                self._reclaim_dropped()
            raise ErrStoreIO(f"flush failed: {exc}") from exc
        for blk in blocks:
            blk.flushed += len(blk.buf)
            if blk.fsum >= 0:
                blk.fsum = file_sum(blk.buf, blk.fsum)
            blk.buf = bytearray()
        self._unflushed.clear()
        with self._lock:
            for blk in blocks:
                self._dirty[blk] = None
            if self._unlink_wait:
                self._pending_unlinks.extend(self._unlink_wait)
                self._unlink_wait = []
        if len(self._open_fds) > _MAX_OPEN_FDS:
            self._evict_fds()
        return self._last_seq

    def _reclaim_dropped(self) -> None:
        """After a failed flush, free the files of blocks a purge/compact dropped: write the
        pending tombstones alone (the rollback left no message in the buffers), fsync, and
        let that sync unlink them. Those files only go after a flush + sync, so on a full
        disk they would otherwise hold the very space every later flush needs. Best effort:
        if even the tombstones do not fit, the next flush tries again."""
        self._reclaiming = True
        try:
            self.flush()
            self.sync()
        except StoreError:
            pass
        finally:
            self._reclaiming = False

    def _emit_tombstones(self) -> None:
        blk = self._blocks[-1] if self._blocks else self._roll(self._last_seq + 1)
        for first, last, ts in self._pending_tombs:
            blk.buf += encode_tombstone(first, last, ts)
        self._pending_tombs = []
        if blk not in self._unflushed:
            self._unflushed.append(blk)

    def _rollback(self, blocks: list[Block], saved_tombs: list[list[int]]) -> None:
        """Undo a failed flush: files back to their pre-flush size, buffered messages out of
        the index with their sequences burned (tombstoned by the next good flush)."""
        burned: list[int] = []
        cuts: list[tuple[Block, int]] = []
        for blk in blocks:
            if blk.fd >= 0:
                try:
                    self._io.ftruncate(blk.fd, blk.flushed)
                    self._io.lseek(blk.fd, blk.flushed, os.SEEK_SET)
                except OSError as exc:
                    self._failed = (
                        f"block {os.path.basename(blk.path)} could not be restored after a "
                        f"failed write ({exc}); reopen the store"
                    )
            keep = BLOCK_HDR_SIZE if blk.flushed == 0 else 0
            buf = bytes(blk.buf)
            pos = keep
            n = 0
            while pos + REC_HDR_SIZE <= len(buf):
                reclen, seqf, *_ = _unpack_fields(buf, pos + 8)
                if not seqf & FLAG_TOMBSTONE:
                    burned.append(seqf & SEQ_MASK)
                    n += 1
                pos += reclen
            cuts.append((blk, blk.nrec - n))
        self._pending_tombs = saved_tombs
        # Out of the index while the records can still be read (the buffers hold them).
        for seq in burned:
            if self._remove(seq) < 0:
                # Already deleted (its tombstone is among saved_tombs) or erased.
                self._add_tomb_range(seq, seq, self._now_ns())
        for blk, n in cuts:
            keep = BLOCK_HDR_SIZE if blk.flushed == 0 else 0
            blk.buf = bytearray(blk.buf[:keep])
            blk.cut(n)
        self._unflushed = [b for b in blocks if b.buf]
        self._rwin = None

    def sync(self) -> None:
        """fsync what flush wrote, then the directory, then unlink dropped blocks.

        ``_sync_lock`` serialises whole syncs. The engine never overlaps two, but the
        store's own truncate/stop call sync and must wait for one in flight: its captured
        unlinks could otherwise hit a block file that truncate re-creates under the same
        name. Uncontended otherwise, so free."""
        with self._sync_lock:
            self._sync()

    def _sync(self) -> None:
        io = self._io
        with self._lock:
            if self._closed and not self._dirty:
                return
            if self._sync_error is not None:
                raise ErrStoreIO(self._sync_error)
            dirty = list(self._dirty)
            self._dirty.clear()
            fds: list[int] = []
            paths: list[str] = []
            try:
                for blk in dirty:
                    if blk.fd >= 0:
                        fds.append(io.dup(blk.fd))
                    else:
                        paths.append(blk.path)
            except OSError as exc:
                for fd in fds:
                    io.close(fd)
                for blk in dirty:
                    self._dirty[blk] = None
                raise ErrStoreIO(f"sync: {exc}") from exc
            need_dir = self._dir_dirty
            self._dir_dirty = False
            unlinks = self._pending_unlinks
            self._pending_unlinks = []
        try:
            for fd in fds:
                io.fdatasync(fd)
            for path in paths:
                try:
                    fd = io.open(path, os.O_RDONLY | O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:
                    io.fdatasync(fd)
                finally:
                    io.close(fd)
            if need_dir or unlinks:
                io.fsync_dir(self._mdir)
        except OSError as exc:
            with self._lock:
                self._sync_error = f"fsync failed ({exc}); durability of earlier writes unknown"
            raise ErrStoreIO(self._sync_error) from exc
        finally:
            for fd in fds:
                io.close(fd)
        if unlinks:
            failed: list[str] = []
            for path in unlinks:
                try:
                    io.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    failed.append(path)
            try:
                io.fsync_dir(self._mdir)
            except OSError:
                failed = unlinks
            if failed:
                with self._lock:
                    self._pending_unlinks.extend(failed)

    def _close_fds(self) -> None:
        with self._lock:
            for blk in self._blocks:
                if blk.fd >= 0:
                    self._io.close(blk.fd)
                    blk.fd = -1
            self._dirty.clear()
        self._open_fds.clear()

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
            ahead = max(ahead, _READAHEAD)
        want = max(length, min(ahead, fl - off))
        data = self._io.pread(fd, want, off)
        self._read_end = (blk, off + length)
        if want > length:
            self._rwin = (blk, off, data)
        return data, 0

    def _rec(self, blk: Block, k: int) -> tuple[int, int]:
        """(offset, length) of the record at position ``k``: kept for the block being
        written (and irregular ones); otherwise found by walking the record headers from
        the mark before it (at most GROUP - 1 of them, one read). (0, 0) when they cannot
        be walked (bytes changed since open): a read of it fails its checks."""
        offs = blk.offs
        if offs is not None:
            return offs[k], blk.lens[k]  # type: ignore[index]
        j = k >> GROUP_SHIFT
        n = k & _GROUP_MASK
        off = blk.marks[j]
        marks = blk.marks
        end = marks[j + 1] if j + 1 < len(marks) else blk.size
        try:
            if end - off <= _GROUP_REGION and (end <= blk.flushed or off >= blk.flushed):
                # the group's bytes in one read (the window for the record read that follows)
                raw, b = self._read(blk, off, end - off)
                if off < blk.flushed and not b:
                    self._rwin = (blk, off, raw)
                stop = min(len(raw), b + end - off)
                while b + REC_HDR_SIZE <= stop:
                    reclen, seqf = _unpack_len_seq(raw, b + 8)
                    if reclen < REC_OVERHEAD or raw[b : b + 4] != REC_MAGIC:
                        break
                    if not seqf & FLAG_TOMBSTONE:
                        if not n:
                            return off, reclen
                        n -= 1
                    off += reclen
                    b += reclen
                return 0, 0
            while off + REC_HDR_SIZE <= end:
                raw, b = self._read(blk, off, REC_HDR_SIZE, _GROUP_READ)
                if len(raw) - b < REC_HDR_SIZE or raw[b : b + 4] != REC_MAGIC:
                    break
                reclen, seqf = _unpack_len_seq(raw, b + 8)
                if reclen < REC_OVERHEAD:
                    break
                if not seqf & FLAG_TOMBSTONE:
                    if not n:
                        return off, reclen
                    n -= 1
                off += reclen
        except OSError as exc:
            raise ErrStoreIO(f"read block {blk.first}: {exc}") from exc
        return 0, 0

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
            _r, _seqf, ts, slen, hlen, ttl = _unpack_fields(raw, b + 8)
            if _crc32(memoryview(raw)[b + 8 : b + REC_HDR_SIZE]) != _unpack_hcrc(raw, b + 4)[0]:
                return None
            if len(raw) - b < REC_HDR_SIZE + slen:
                raw, b = self._read(blk, off, REC_HDR_SIZE + slen)
                if len(raw) - b < REC_HDR_SIZE + slen:
                    return None
        except OSError as exc:
            raise ErrStoreIO(f"read block {blk.first}: {exc}") from exc
        p = b + REC_HDR_SIZE
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
                if seqf == seq:
                    p = base + REC_HDR_SIZE
                    subj = self._name(raw[p : p + slen])
                    p += slen
                    hdr = raw[p : p + hlen] if hlen else None
                    return StoredMsg(subj, seq, ts, hdr, raw[p + hlen : end - 4], ttl)
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
        walk = blk.offs is None  # (a block with every offset known never walks)
        off, _len = self._rec(blk, k)
        # The window: bytes [woff, woff + len(win)) of the block.
        win = b""
        woff = 0
        w = self._rwin
        if w is not None and w[0] is blk:
            woff = w[1]
            win = w[2]
        while k < nrec:
            s = seq0 + k if seqs is None else seqs[k]
            b = off - woff
            if b < 0 or b + REC_HDR_SIZE > len(win):
                win = self._range_read(blk, off, REC_HDR_SIZE, rng, s)
                woff = off
                b = 0
            if len(win) - b >= REC_HDR_SIZE:
                reclen, seqf, ts, slen, hlen, ttl = _unpack_fields(win, b + 8)
            else:
                reclen = seqf = ts = slen = hlen = ttl = 0
            if reclen >= REC_OVERHEAD and seqf & FLAG_TOMBSTONE:
                off += reclen
                continue
            if rng.hdrs_only:
                rng.seen += 1
                rng.next = s + 1
                if rng.seen >= rng.max_msgs:
                    if hlen and seqf == s:
                        self._range_take(blk, k, s, out)
                    return True
                if not hlen and seqf == s and reclen >= REC_OVERHEAD:
                    # no headers, no message id: passed over unread
                    k += 1
                    off += reclen
                    if k < nrec and alive[k]:
                        if not walk:
                            off, _len = self._rec(blk, k)
                        continue
                    nk = alive.find(1, k)
                    if nk < 0:
                        return False
                    k = nk
                    off, _len = self._rec(blk, k)
                    continue
            end = b + reclen
            if end > len(win) and reclen >= REC_OVERHEAD:
                win = self._range_read(blk, off, reclen, rng, s)
                woff = off
                b = 0
                end = reclen
            # crc32 over a record and its stored crc (little-endian) is a constant.
            if (
                seqf == s
                and reclen >= REC_OVERHEAD
                and end <= len(win)
                and record_crc(memoryview(win)[b:end]) == _CRC_RESIDUE
            ):
                p = b + REC_HDR_SIZE
                sb = win[p : p + slen]
                subj = names.get(sb)
                if subj is None:
                    subj = self._name(sb)
                p += slen
                hdr = win[p : p + hlen] if hlen else None
                out.append(StoredMsg(subj, s, ts, hdr, win[p + hlen : end - 4], ttl))
                if len(out) >= rng.max_msgs and not rng.hdrs_only:
                    return True
                if rng.max_bytes > 0:
                    rng.total += reclen - REC_OVERHEAD
                    if rng.total >= rng.max_bytes:
                        return True
            else:
                at, _len = self._rec(blk, k)
                if at != off:
                    # The walk lost its footing (bytes changed since open): from the mark.
                    off = at
                    continue
                self._mark_lost(s, blk, k)
            k += 1
            off += reclen
            if k < nrec and alive[k]:
                if not walk:
                    off, _len = self._rec(blk, k)
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

    def _range_take(self, blk: Block, k: int, seq: int, out: list[StoredMsg]) -> None:
        m = self._load_at(blk, k, seq)
        if m is not None:
            out.append(m)

    def _range_read(self, blk: Block, off: int, need: int, rng: _Range, seq: int) -> bytes:
        """The window for ``load_range`` at ``off`` (at least ``need`` bytes when there are),
        growing from _READAHEAD to _RANGE_WINDOW per read."""
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

    def _rewrite_block(self, blk: Block, seq: int) -> None:
        """Replace ``blk`` with its live records <= seq plus tombstones for every dead
        sequence from the first block up to ``seq`` (deletions recorded in blocks about to go
        must survive them)."""
        parts: list[bytes] = [block_header(blk.first)]
        moved: list[tuple[int, int]] = []  # (seq, record length)
        for s in self._iter_live(blk.first, seq):
            k = blk.pos(s)
            if k < 0:
                continue
            off, reclen = self._rec(blk, k)
            raw, base = self._read(blk, off, reclen)
            if reclen < REC_OVERHEAD or len(raw) - base < reclen:
                raise OSError(errno.EIO, f"short read in block {blk.first} at {off}")
            parts.append(bytes(raw[base : base + reclen]))
            moved.append((s, reclen))
        lo = self._blocks[0].first
        prev = lo - 1
        now = self._last_ts
        for s in self._iter_live(lo, seq):
            if s > prev + 1:
                parts.append(encode_tombstone(prev + 1, s - 1, now))
            prev = s
        if prev < seq:
            parts.append(encode_tombstone(max(prev + 1, 1), seq, now))
        data = b"".join(parts)
        tmp = blk.path + ".tmp"
        io = self._io
        fd = io.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
        try:
            io.write_all(fd, data)
            io.fsync(fd)
        except BaseException:
            io.close(fd)
            raise
        io.replace(tmp, blk.path)
        with self._lock:
            if blk.fd >= 0:
                io.close(blk.fd)
            blk.fd = fd
            self._dirty.pop(blk, None)
        self._open_fds[blk] = None
        self._rwin = None
        blk.flushed = len(data)
        blk.fsum = file_sum(data)
        blk.buf = bytearray()
        if blk in self._unflushed:
            self._unflushed.remove(blk)
        # The positions are the new file's.
        fresh = Block(blk.first, blk.path)
        pos = BLOCK_HDR_SIZE
        for s, reclen in moved:
            fresh.add(s, pos, reclen)
            pos += reclen
        blk.nrec = fresh.nrec
        blk.live = fresh.live
        blk.alive = fresh.alive
        blk.seq0 = fresh.seq0
        blk.seqs = fresh.seqs
        blk.marks = fresh.marks
        blk.offs = fresh.offs
        blk.lens = fresh.lens
