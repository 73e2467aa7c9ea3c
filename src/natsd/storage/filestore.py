"""FileStore: a stream's messages in append-only block files (nats-server ``filestore.go``).

Modules: ``filestore_format`` (bytes on disk), ``filestore_index`` (what memory keeps),
``filestore_recovery`` (open, verify, report), ``filestore_checkpoint`` (the clean-shutdown
index), ``filestore_io`` (blocks, buffers, flush, sync), ``filestore_read`` (record reads),
``filestore_query`` (read-side queries), this one (stream semantics: limits, removal,
purge, compaction, truncation, expiry).

Ownership and threads. One thread (the server's event loop) owns the store and calls every
method except ``sync``, which may run on a worker thread at the same time (group commit);
``filestore_io`` explains the small lock that makes that safe.

Durability contract.

- ``store_msg`` appends the record to the block's in-memory buffer: no system call.
- ``flush`` writes all buffers with ``os.write`` (plus the tombstones of deletions since the
  last flush) and returns the last sequence. Nothing is durable yet.
- ``sync`` fsyncs every block file written since the last sync, then the directory if files
  were created, then performs the unlinks of dropped blocks that were queued before the last
  flush (so the tombstone that makes a purge stick is on disk before the old files go, and a
  purge can never make the store forget its last sequence), then fsyncs the directory again.
  An fsync failure poisons the store's durability: every later ``sync`` raises ErrStoreIO,
  because after a failed fsync the kernel may have dropped the dirty pages and a retry that
  "succeeds" would be a lie (the PostgreSQL fsyncgate lesson).

Disk errors during ``flush`` (ENOSPC, EIO...): a flush is all-or-nothing for messages. Every
message buffered since the last successful flush is rolled back: the files are truncated to
their pre-flush sizes, the messages leave the index (storage-update callbacks report them
removed) and their sequences are burned, not reused, recorded by a tombstone written with the
next successful flush. ``flush`` raises ErrStoreIO; the engine must fail those publishes.
Deletions are not rolled back (they stay applied in memory and their tombstones are retried).
Reads keep working. If even the truncation fails the store is marked failed: writes raise
ErrStoreIO until it is reopened (recovery then sorts out the tail).
"""

from __future__ import annotations

import errno
import heapq
import os
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Final

from natsd.core.crc import crc32 as record_crc
from natsd.storage.fileio import DEFAULT_IO, FileIO
from natsd.storage.filestore_checkpoint import CHECKPOINT_VERSION, checkpoint_doc, file_sum_of
from natsd.storage.filestore_format import (
    FLAG_S2,
    REC_FIELDS,
    REC_HDR_SIZE,
    REC_MAGIC,
    REC_OVERHEAD,
    REC_PREFIX,
    REC_TRAILER,
    compress_payload,
    encode_erased,
)
from natsd.storage.filestore_index import SubjState
from natsd.storage.filestore_io import BlockStore
from natsd.storage.filestore_recovery import manifest_doc, write_checkpoint, write_manifest
from natsd.storage.sources_index import SOURCES_FILE, SourcesIndex, decode_sources
from natsd.storage.store import (
    DiscardPolicy,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    ErrStoreClosed,
    ErrStoreIO,
    StorageUpdate,
    StoreConfig,
    StoredMsg,
    StoreError,
)

__all__ = ["DEFAULT_BLOCK_SIZE", "FileStore"]

DEFAULT_BLOCK_SIZE: Final = 8 * 1024 * 1024
# The running checkpoint (``filestore_resume``): written after a flush once blocks were
# started since the last one, either 1/CHECKPOINT_SHARE of the store's blocks or any after
# CHECKPOINT_EVERY seconds (what a crash makes the next open parse stays under both), and
# never sooner than CHECKPOINT_COST times what writing the last one took (under ~2% of the
# store's time).
CHECKPOINT_EVERY: Final = 10.0
# A sourcing stream's positions file is rewritten this often (s) while they change.
SOURCES_EVERY: Final = 10.0
CHECKPOINT_SHARE: Final = 16
CHECKPOINT_COST: Final = 50.0
# It is the whole index, written on the event loop: about 1 us per subject and 7 ns per
# message (measured, compiled, with the sync before it), so past these it would stall the
# server for more than ~40 ms each time and is not written (such a store is read whole
# after a crash).
CHECKPOINT_MAX_SUBJECTS: Final = 20_000
CHECKPOINT_MAX_MSGS: Final = 8_000_000
_crc32: Final = zlib.crc32
_pack_fields: Final = REC_FIELDS.pack
_pack_prefix: Final = REC_PREFIX.pack
_pack_trailer: Final = REC_TRAILER.pack
_unpack_fields: Final = REC_FIELDS.unpack_from


class FileStore(BlockStore):
    """See the module docstring. ``recovery_report`` lists what opening found and fixed."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        cfg: StoreConfig,
        block_size: int = DEFAULT_BLOCK_SIZE,
        io: FileIO = DEFAULT_IO,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        super().__init__(directory, cfg, block_size, io, now_ns)
        self._cb: StorageUpdate | None = None
        self._ckpt_rolls = self._rolls  # blocks started when the last checkpoint was written
        self._ckpt_at = time.monotonic()  # when it was written (monotonic)
        self._ckpt_next = 0.0  # none before (the cost of the last one)
        self.checkpoint_every = CHECKPOINT_EVERY
        self.checkpoint_cost = CHECKPOINT_COST
        self._sources: SourcesIndex | None = None  # (a sourcing stream's: track_sources)
        self._sources_at = 0.0  # when its file was last written (monotonic)
        self._sources_stamp = 0  # and the stamp it has
        self._apply_limits_cfg(cfg)
        if self._created and cfg.first_seq > 0:
            # A new stream that starts at first_seq: an empty block named first_seq says so,
            # durably at once. Only for a new directory: a store that was reset (truncate 0)
            # must not jump back to first_seq on its next open.
            self._first_seq = cfg.first_seq
            self._last_seq = cfg.first_seq - 1
            self._roll(cfg.first_seq)
            self.flush()
            self.sync()
        if self._blocks:
            self._open_for_write(self._blocks[-1])
            # Leading blocks left empty by a crash between a purge and its unlinks go now
            # (with the next flush+sync, like any other).
            self._drop_leading_blocks()
        if self._pending_tombs:
            # Recovery re-deleted messages whose deletion record was damaged: durably now.
            self.flush()
            self.sync()

    # ------------------------------------------------------------------ config
    def _apply_limits_cfg(self, cfg: StoreConfig) -> None:
        self._max_msgs = cfg.max_msgs
        self._max_bytes = cfg.max_bytes
        self._maxp = cfg.max_msgs_per_subject
        self._max_msg_size = cfg.max_msg_size
        self._discard_new = cfg.discard is DiscardPolicy.NEW
        # (applies to what is written from now on: a record says whether it is compressed)
        self._compress = cfg.compress

    @property
    def config(self) -> StoreConfig:
        return self._cfg

    def update_config(self, cfg: StoreConfig) -> None:
        self._check_open()
        old_maxp = self._maxp
        self._cfg = cfg
        self._apply_limits_cfg(cfg)
        maxp = self._maxp
        if maxp > 0 and (old_maxp <= 0 or maxp < old_maxp):
            for subj, ss in list(self._subjects.items()):
                if ss.msgs > maxp:
                    self._enforce_per_subject(subj, ss)
        self._enforce_limits()
        if cfg.max_age_ns > 0:
            self.expire(self._now_ns())

    def register_updates(self, cb: StorageUpdate | None) -> None:
        self._cb = cb

    # ------------------------------------------------------------------ writes
    def store_msg(
        self, subject: str, hdr: bytes | None, data: bytes, ttl: int = 0
    ) -> tuple[int, int]:
        if self._closed:
            raise ErrStoreClosed()
        seq = self._last_seq + 1
        ts = self._now_ns()
        self._store(subject, hdr, data, seq, ts, ttl)
        return seq, ts

    def store_raw(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int = 0
    ) -> None:
        self._check_open()
        if seq <= self._last_seq:
            raise StoreError(f"sequence mismatch: {seq} <= last {self._last_seq}")
        self._store(subject, hdr, data, seq, ts, ttl)

    def _store(
        self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int, ttl: int
    ) -> None:
        if self._failed is not None:
            raise ErrStoreIO(self._failed)
        sb = subject.encode()
        slen = len(sb)
        hlen = len(hdr) if hdr else 0
        dlen = len(data)
        size = 30 + slen + dlen + (4 + hlen if hlen else 0)
        if 0 < self._max_msg_size < hlen + dlen:
            raise ErrMsgTooLarge()
        ss = self._subjects.get(subject)
        if self._discard_new:
            self._check_discard_new(subject, ss, size)
        if seq > self._last_seq + 1:
            # store_raw with a gap: the skipped sequences are deleted, durably.
            self._add_tomb_range(self._last_seq + 1, seq - 1, ts)

        # Append the record (inlined encode_record: this is the per-message hot path).
        seqf = seq
        if self._compress:
            z = compress_payload(data)
            if z is not None:
                data = z
                seqf = seq | FLAG_S2
        reclen = REC_OVERHEAD + slen + hlen + len(data)
        blks = self._blocks
        if blks:
            blk = blks[-1]
            buf = blk.buf
            off = blk.flushed + len(buf)
            if blk.nrec and off + reclen > self._block_size:
                blk = self._roll(seq)
                buf = blk.buf
                off = len(buf)
        else:
            blk = self._roll(seq)
            buf = blk.buf
            off = len(buf)
        if not buf:
            # Invariant: a block is in _unflushed exactly when its buffer is not empty.
            self._unflushed.append(blk)
        fields = _pack_fields(reclen, seqf, ts, slen, hlen, ttl)
        if hlen:
            rec = b"".join((_pack_prefix(REC_MAGIC, _crc32(fields)), fields, sb, hdr or b"", data))
        else:
            rec = b"".join((_pack_prefix(REC_MAGIC, _crc32(fields)), fields, sb, data))
        buf += rec
        buf += _pack_trailer(record_crc(rec))

        # Index.
        if not self._nlive:
            self._first_seq = seq
            self._first_ts = ts
        blk.add(seq, off, reclen)
        self._nlive += 1
        if ss is None:
            self._subjects[subject] = SubjState(seq)
        else:
            ss.msgs += 1
            ss.last = seq
            ss.last_stale = False  # the new message is the last, whatever was removed
        self._bytes += size
        self._last_seq = seq
        self._last_ts = ts
        if ttl > 0:
            heapq.heappush(self._ttl_heap, (ts + ttl * 1_000_000_000, seq))

        # Limits (discard old and per-subject): removals are reported before the add, as
        # nats-server does.
        if ss is not None and 0 < self._maxp < ss.msgs:
            self._enforce_per_subject(subject, ss)
        if (0 < self._max_msgs < self._nlive) or (0 < self._max_bytes < self._bytes):
            self._enforce_limits()
        cb = self._cb
        if cb is not None:
            cb(1, size, seq, subject)
        if self._sources is not None and hdr:
            self._sources.note(hdr)

    def _check_discard_new(self, subject: str, ss: SubjState | None, size: int) -> None:
        asl = ss is not None and 0 < self._maxp <= ss.msgs
        if asl and self._cfg.discard_new_per_subject:
            raise ErrMaxMsgsPerSubject()
        if 0 < self._max_msgs <= self._nlive and not asl:
            raise ErrMaxMsgs()
        if 0 < self._max_bytes < self._bytes + size:
            if not asl or ss is None:
                raise ErrMaxBytes()
            # At the per-subject limit the oldest of this subject goes: is that room enough?
            self._fresh(subject, ss)
            w = self._where(ss.first)
            h = self._head(w[0], w[1]) if w is not None else None
            if h is None or h[1] < size:
                raise ErrMaxBytes()

    def _enforce_per_subject(self, subject: str, ss: SubjState) -> None:
        while ss.msgs > self._maxp > 0:
            self._fresh(subject, ss)
            if self._remove(ss.first) < 0:
                break

    def _enforce_limits(self) -> None:
        if self._discard_new:
            return
        while 0 < self._max_msgs < self._nlive:
            if self._remove(self._first_seq) < 0:
                break
        while 0 < self._max_bytes < self._bytes and self._nlive:
            if self._remove(self._first_seq) < 0:
                break

    def skip_msgs(self, seq: int, num: int) -> None:
        self._check_open()
        if seq != self._last_seq + 1:
            raise StoreError(f"sequence mismatch: {seq} != {self._last_seq + 1}")
        if num <= 0:
            return
        now = self._now_ns()
        last = seq + num - 1
        self._add_tomb_range(seq, last, now)
        self._last_seq = last
        self._last_ts = now
        if not self._nlive:
            self._first_seq = last + 1
            self._first_ts = 0

    # ------------------------------------------------------------------ removal
    def remove_msg(self, seq: int) -> bool:
        self._check_open()
        return self._remove(seq) >= 0

    def erase_msg(self, seq: int) -> bool:
        self._check_open()
        w = self._where(seq)
        if w is None:
            return False
        blk = w[0]
        off, reclen = self._rec(blk, w[1])
        try:
            raw, base = self._read(blk, off, REC_HDR_SIZE)
            if len(raw) - base < REC_HDR_SIZE:
                raise OSError(errno.EIO, "short read")
        except OSError as exc:
            raise ErrStoreIO(f"erase seq {seq}: {exc}") from exc
        _r, _seqf, ts, slen, hlen, _ttl = _unpack_fields(raw, base + 8)
        dlen = reclen - REC_OVERHEAD - slen - hlen
        h = self._head(blk, w[1])
        if h is None:
            raise ErrStoreIO(f"erase seq {seq}: record unreadable")
        subject, size = h[0], h[1]
        new = encode_erased(seq, ts, slen, hlen, dlen, os.urandom(slen + hlen + dlen))
        if off >= blk.flushed:
            start = off - blk.flushed
            blk.buf[start : start + reclen] = new
        else:
            # Overwrite the bytes where they are (secure delete), then make it durable like
            # any other write. On failure the message stays: nothing was erased.
            try:
                fd = self._ensure_fd(blk)
                if self._io.pwrite(fd, new, off) != reclen:
                    raise OSError(errno.EIO, "short write")
            except OSError as exc:
                raise ErrStoreIO(f"erase seq {seq}: {exc}") from exc
            self._rwin = None
            blk.fsum = -1
            with self._lock:
                self._dirty[blk] = None
        # The index entry goes with the subject and size the record had.
        self._remove(seq, head=(subject, size))
        return True

    def _remove(
        self,
        seq: int,
        tomb: bool = True,
        notify: bool = True,
        head: tuple[str, int] | None = None,
    ) -> int:
        w = self._where(seq)
        if w is None:
            return -1
        blk, k = w
        if head is None:
            h = self._head(blk, k)
            # A record gone unreadable since open: its subject is unknown (its count stays
            # until the next open judges the block again) and its size counts as nothing.
            head = (h[0], h[1]) if h is not None else ("", 0)
        subj, size = head
        blk.alive[k] = 0
        blk.live -= 1
        self._nlive -= 1
        self._bytes = max(self._bytes - size, 0)
        ss = self._subjects.get(subj)
        if ss is None:
            pass
        elif ss.msgs == 1:
            del self._subjects[subj]
        else:
            ss.msgs -= 1
            # With one message left it is the other end: known without a scan. This is
            # every KV put (max_msgs_per_subject 1 removes the previous value), where a
            # stale first cost a walk over the whole stream on the next put of the key.
            if seq == ss.first:
                if ss.msgs == 1 and not ss.last_stale:
                    ss.first = ss.last
                else:
                    ss.first_stale = True
            if seq == ss.last:
                if ss.msgs == 1 and not ss.first_stale:
                    ss.last = ss.first
                else:
                    ss.last_stale = True
        if tomb:
            self._add_tomb_range(seq, seq, self._now_ns())
        if seq == self._first_seq:
            self._advance_first(seq + 1)
        if blk.live == 0:
            self._drop_leading_blocks()
        cb = self._cb
        if notify and cb is not None:
            cb(-1, -size, seq, subj)
        return size

    def _advance_first(self, start: int) -> None:
        for s in self._iter_live(start, self._last_seq):
            self._first_seq = s
            self._first_ts = self._ts_of(s)
            return
        self._first_seq = self._last_seq + 1
        self._first_ts = 0

    def _ts_of(self, seq: int) -> int:
        """The timestamp of live message ``seq`` (0 when its record cannot be read)."""
        w = self._where(seq)
        h = self._head(w[0], w[1]) if w is not None else None
        return h[2] if h is not None else 0

    def purge(self) -> int:
        self._check_open()
        return self._compact_to(self._last_seq + 1)

    def compact(self, seq: int) -> int:
        self._check_open()
        if seq <= 0:
            return self.purge()
        return self._compact_to(seq)

    def _compact_to(self, seq: int) -> int:
        """Remove every message below ``seq`` with one range tombstone; one callback."""
        doomed = list(self._iter_live(1, min(seq - 1, self._last_seq)))
        nbytes = 0
        for s in doomed:
            nbytes += max(self._remove(s, tomb=False, notify=False), 0)
        if seq - 1 > self._last_seq:
            self._last_seq = seq - 1
        if not self._nlive:
            self._first_seq = self._last_seq + 1
            self._first_ts = 0
        if seq > 1:
            # One range supersedes every pending deletion below it. ts = last_ts so that a
            # restart which finds only this record still reports the right last_ts.
            self._pending_tombs = [t for t in self._pending_tombs if t[1] >= seq]
            self._add_tomb_range(1, seq - 1, self._last_ts)
        active = self._blocks[-1] if self._blocks else None
        if active is None or (active.live == 0 and active.nrec):
            # A fresh block named last+1: the emptied ones (including the old active one) can
            # go as files, and an empty store still remembers its first sequence.
            self._roll(self._last_seq + 1)
        self._drop_leading_blocks()
        cb = self._cb
        if cb is not None and doomed:
            cb(-len(doomed), -nbytes, 0, "")
        return len(doomed)

    def purge_ex(self, subject: str, seq: int, keep: int) -> int:
        self._check_open()
        if subject == "" or subject == ">":
            if seq > 0:
                return self.compact(seq)  # (seq 1 removes nothing from a stored stream)
            if keep <= 0:
                return self.purge()
            if keep >= self._nlive:
                return 0
            # Keep ``keep`` messages (not sequences): compact up to the keep-th newest.
            it = self._iter_live_rev(self._last_seq, 1)
            for _ in range(keep - 1):
                next(it)
            return self.compact(next(it))
        ss = self.filtered_state(1, subject)
        if ss.msgs == 0:
            return 0
        todo = ss.msgs
        if keep > 0:
            if keep >= todo:
                return 0
            todo -= keep
        # Any seq > 0 is an exclusive upper bound (seq=1 removes nothing, as nats-server).
        last = seq - 1 if seq > 0 else ss.last
        literal = self._is_literal_cached(subject)
        purged = 0
        for s, subj in list(self._iter_subjects(ss.first, last)):
            if (subj == subject) if literal else self._matches(subj, subject):
                if self._remove(s) >= 0:
                    purged += 1
                if purged >= todo:
                    break
        return purged

    def truncate(self, seq: int) -> None:
        """Remove every message above ``seq`` (0 = reset everything).

        Rare and heavyweight, so it runs synchronously: flush and sync, rewrite the block
        holding ``seq`` (tmp file, fsync, rename) with tombstones for every dead sequence up
        to ``seq``, unlink later blocks newest first, then flush and sync again. A crash part
        way can leave messages above ``seq``; it never loses one at or below it, nor revives
        a deletion, nor makes the store forget ``seq``."""
        self._check_open()
        if seq <= 0:
            seq = 0  # a full reset: first and last go back to 0
        elif seq >= self._last_seq:
            return
        if self._sources is not None:
            self._sources.reset()  # (a position may name a message that goes now)
        self._unlink_sources()
        self.flush()
        self.sync()
        self._unlink_now = True
        try:
            doomed = list(self._iter_live(seq + 1, self._last_seq))
            nbytes = 0
            for s in doomed:
                nbytes += max(self._remove(s, tomb=False, notify=False), 0)
            self._pending_tombs = [t for t in self._pending_tombs if t[0] <= seq]
            for t in self._pending_tombs:
                t[1] = min(t[1], seq)
            keep_ts = 0
            for s in self._iter_live_rev(seq, 1):
                keep_ts = self._ts_of(s)
                break
            self._last_seq = seq
            self._last_ts = keep_ts
            if not self._nlive:
                self._first_seq = seq + 1 if seq > 0 else 0
                self._first_ts = 0
            try:
                self._truncate_files(seq)
            except OSError as exc:
                self._failed = f"truncate to {seq} failed: {exc}; reopen the store"
                raise ErrStoreIO(self._failed) from exc
            self.flush()
            self.sync()
        finally:
            self._unlink_now = False
        cb = self._cb
        if cb is not None and doomed:
            cb(-len(doomed), -nbytes, 0, "")

    def _truncate_files(self, seq: int) -> None:
        blocks = self._blocks
        cut = -1
        for i, b in enumerate(blocks):
            if b.first <= seq:
                cut = i
        later = blocks[cut + 1 :]
        kept = blocks[: cut + 1]
        if cut >= 0:
            self._rewrite_block(kept[-1], seq)
        for b in reversed(later):
            self._retire(b)
        self._blocks = kept
        self._firsts = [b.first for b in kept]
        if not kept and seq > 0:
            self._roll(seq + 1)
        elif kept:
            self._open_for_write(kept[-1])
        self._io.fsync_dir(self._mdir)

    def expire(self, now_ns: int, emptied: list[StoredMsg] | None = None) -> int:
        self._check_open()
        removed = 0
        max_age = self._cfg.max_age_ns
        # Per-message TTLs count only while the stream allows them (a reopened store gets
        # its real config through update_config).
        ttl_on = self._cfg.allow_msg_ttl
        if max_age > 0 and self._nlive:
            cutoff = now_ns - max_age
            doomed: list[int] = []
            for s in self._iter_live(self._first_seq, self._last_seq):
                w = self._where(s)
                h = self._head(w[0], w[1]) if w is not None else None
                if h is None:
                    continue
                if h[2] > cutoff:
                    break
                if h[3] >= 0 or not ttl_on:  # ttl -1 ("never") is exempt from max_age
                    doomed.append(s)
            for s in doomed:
                last = self._last_on_subject(s) if emptied is not None else None
                if self._remove(s) >= 0:
                    removed += 1
                    if last is not None and emptied is not None:
                        emptied.append(last)
        heap = self._ttl_heap
        while ttl_on and heap and heap[0][0] <= now_ns:
            exp, s = heapq.heappop(heap)
            w = self._where(s)
            h = self._head(w[0], w[1]) if w is not None else None
            if h is not None and h[3] > 0 and h[2] + h[3] * 1_000_000_000 == exp:
                last = self._last_on_subject(s) if emptied is not None else None
                self._remove(s)
                removed += 1
                if last is not None and emptied is not None:
                    emptied.append(last)
        return removed

    def _last_on_subject(self, seq: int) -> StoredMsg | None:
        """The message at ``seq`` when it is the only one left on its subject (read before
        expiry removes it, for subject delete markers)."""
        w = self._where(seq)
        subj = self._subject(w[0], w[1]) if w is not None else None
        if subj is None:
            return None
        ss = self._subjects.get(subj)
        if ss is None or ss.msgs != 1:
            return None
        return self._load(seq)

    # ------------------------------------------------------------------ lifecycle
    def stop(self) -> None:
        if self._closed:
            return
        err: StoreError | None = None
        try:
            self.flush()
        except StoreError as exc:
            err = exc
        try:
            self.sync()
        except StoreError as exc:
            err = err or exc
        if err is None and self._failed is None:
            try:
                write_manifest(self._mdir, self._shutdown_doc(), self._io)
            except OSError:
                pass  # only a cache
            self._write_sources()
        self._close_fds()
        self._closed = True
        if err is not None:
            raise err

    def flush(self) -> int:
        seq = super().flush()
        if self._sources is not None and time.monotonic() >= self._sources_at + SOURCES_EVERY:
            # on its own timer: a store too large for running checkpoints has it too, so
            # a crash leaves at most this long of messages to read back at open
            self._write_sources()
        rolled = self._rolls - self._ckpt_rolls
        if (
            rolled
            and len(self._blocks) > 1  # (one block is read as fast as a checkpoint)
            and not self._pending_tombs
            and len(self._subjects) <= CHECKPOINT_MAX_SUBJECTS
            and self._nlive <= CHECKPOINT_MAX_MSGS
        ):
            now = time.monotonic()
            if now >= self._ckpt_next and (
                rolled * CHECKPOINT_SHARE >= len(self._blocks)
                or now >= self._ckpt_at + self.checkpoint_every
            ):
                self._running_checkpoint(now)
        return seq

    def _running_checkpoint(self, now: float) -> None:
        """Write the running checkpoint: everything is flushed, so the index describes
        exactly the bytes in the files. They are synced first: the checkpoint's own fsync of
        the directory must not make a new block's name durable before the data of the
        blocks before it (a power loss could then keep later messages and lose earlier
        ones)."""
        self._ckpt_rolls = self._rolls
        try:
            self.sync()
            write_checkpoint(self._mdir, self._shutdown_doc(), self._io)
        except (OSError, StoreError):
            pass  # only a shortcut for the next open after a crash
        else:
            self._write_sources()
        took = time.monotonic() - now
        self._ckpt_at = now
        self._ckpt_next = now + self.checkpoint_cost * took

    # ------------------------------------------------------------------ sources
    def track_sources(self, inames: list[str]) -> None:
        """``StreamStore.track_sources``. The first call of a run reads back the positions
        written at the last checkpoint or stop (``sources.idx``, valid for the messages
        below its stamp) and notes the messages stored since; a file that does not check
        out, names messages the store no longer reaches, or a store that found damage at
        open, is ignored (the stream scans)."""
        if not inames:
            self._sources = None
            self._unlink_sources()
            return
        if self._sources is not None:
            self._sources.configure(inames)
            return
        idx = SourcesIndex(inames)
        self._sources = idx
        try:
            raw = self._io.read_file(os.path.join(self._mdir, SOURCES_FILE))
        except OSError:
            return
        got = decode_sources(raw)
        if got is None or self._lost is not None or got[0] > self._last_seq + 1:
            # (gone at once: were it kept, messages stored at its sequences again could
            # make it look valid after the next crash)
            self._unlink_sources()
            return
        stamp, positions = got
        idx.seed(positions)
        # the messages stored since the stamp, newest first, until every source is
        # placed (an active one by the last few): what they name is newer than the file
        idx.place_newest_first(self._headers_back(max(stamp, self._first_seq)))

    def _headers_back(self, floor: int) -> Iterator[bytes | None]:
        """The headers of the messages from the last down to sequence ``floor``."""
        seq = self._last_seq
        while seq >= floor:
            m = self.load_prev_msg(seq)
            if m is None or m.seq < floor:
                return
            yield m.hdr
            seq = m.seq - 1

    def seed_sources(self, positions: dict[str, tuple[int, str]]) -> None:
        if self._sources is not None and positions:
            self._sources.seed(positions)

    def sources_state(self) -> dict[str, tuple[int, str]]:
        return self._sources.known() if self._sources is not None else {}

    def _write_sources(self) -> None:
        """Persist the positions, for the messages stored so far; none seen yet: no file.
        Unsynced messages may be lost with the file naming them, but then the store ends
        below its stamp and the file is not used (``track_sources``)."""
        idx = self._sources
        stamp = self._last_seq + 1
        if idx is None or (not idx.dirty and stamp == self._sources_stamp):
            return  # (a stamp moved on by the stream's own messages is worth writing too)
        self._sources_at = time.monotonic()
        self._sources_stamp = stamp
        path = os.path.join(self._mdir, SOURCES_FILE)
        try:
            if idx.known():
                self._io.write_file_atomic(path, idx.encode(stamp))
            elif self._io.exists(path):
                self._io.unlink(path)
        except OSError:
            pass  # only a shortcut: without it the stream scans

    def _unlink_sources(self) -> None:
        try:
            self._io.unlink(os.path.join(self._mdir, SOURCES_FILE))
        except OSError:
            pass

    def _shutdown_doc(self) -> dict[str, object]:
        """The manifest with the clean-shutdown index (``filestore_checkpoint``)."""
        for blk in self._blocks:
            if blk.fsum < 0:
                blk.fsum = file_sum_of(self._io, self._ensure_fd(blk), blk.flushed)
        doc = manifest_doc(self._blocks, self._nlive, self._first_seq, self._last_seq, self._bytes)
        doc.update(
            checkpoint_doc(
                self._blocks,
                self._subjects,
                # (entries of messages deleted since are dropped lazily at runtime)
                [e for e in self._ttl_heap if self._where(e[1]) is not None],
                self._lost,
                {
                    "version": CHECKPOINT_VERSION,
                    "first_ts": self._first_ts,
                    "last_ts": self._last_ts,
                },
            )
        )
        return doc

    def delete(self) -> None:
        if not self._closed:
            cb = self._cb
            if cb is not None and self._nlive:
                # The stream's accounting sees every message go, as with a purge.
                cb(-self._nlive, -self._bytes, 0, "")
            try:
                self.stop()
            except StoreError:
                self._close_fds()
                self._closed = True
        io = self._io
        if io.isdir(self._mdir):
            for name in io.listdir(self._mdir):
                try:
                    io.unlink(os.path.join(self._mdir, name))
                except FileNotFoundError:
                    pass
            try:
                io.rmdir(self._mdir)
            except OSError:
                pass
        self._nlive = 0
        self._subjects = {}
