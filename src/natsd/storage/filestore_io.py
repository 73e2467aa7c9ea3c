"""The block layer of FileStore: block files, write buffers, flush, sync.

``BlockStore`` owns the files and the durability machinery (the reads over them are
``filestore_read``'s); ``FileStore`` (``filestore``) builds the stream semantics on top of
it. See ``filestore``'s docstring for the durability
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
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from natsd.storage.fileio import DEFAULT_IO, O_CLOEXEC, FileIO
from natsd.storage.filestore_checkpoint import file_sum
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    FLAG_TOMBSTONE,
    REC_FIELDS,
    REC_HDR_SIZE,
    REC_OVERHEAD,
    SEQ_MASK,
    block_header,
    block_name,
    encode_tombstone,
)
from natsd.storage.filestore_index import Block, SubjState
from natsd.storage.filestore_read import RecordReader
from natsd.storage.filestore_recovery import recover
from natsd.storage.filestore_resume import resume
from natsd.storage.store import (
    ErrStoreClosed,
    ErrStoreIO,
    LostData,
    StoreConfig,
    StoreError,
)

__all__ = ["BlockStore"]

# Block files kept open for reading besides the ones being written.
_MAX_OPEN_FDS: Final = 16
_unpack_fields: Final = REC_FIELDS.unpack_from


class BlockStore(RecordReader):
    """Block files plus their index (``filestore_index``); stream semantics live in the
    subclass."""

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
        self._rolls = 0  # blocks started (the running checkpoint follows them)

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
        # after a crash, the running checkpoint and what was written since when they check
        # out; otherwise (and after a clean stop) recovery proper
        r = (None if created else resume(self._mdir, io)) or recover(self._mdir, io, created)
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
        self._glast: tuple[Block, int, list[int], list[int]] | None = None
        self._expanded: list[Block] = []
        for seq in r.redelete:
            self._add_tomb_range(seq, seq, r.last_ts)

    def _add_tomb_range(self, first: int, last: int, ts: int) -> None:
        tombs = self._pending_tombs
        if tombs and tombs[-1][1] + 1 == first:
            tombs[-1][1] = last
            tombs[-1][2] = ts
        else:
            tombs.append([first, last, ts])

    def _roll(self, first: int) -> Block:
        self._rolls += 1
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
        self._glast = None
        if blk in self._expanded:
            self._expanded.remove(blk)
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
        self._glast = None

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
        self._glast = None
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
