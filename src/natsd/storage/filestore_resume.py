"""Opening a store after a crash from its running checkpoint, reading only what was written
since.

A running store writes its index (``filestore_checkpoint``'s document, the same one a clean
``stop`` writes) into ``index.ckpt`` from time to time: after a flush, once a block was
sealed since the last one and enough time has passed (``FileStore``). A clean open renames
the clean-shutdown index to that name, so a store always has one after its first minutes.

After a crash (no clean-shutdown index), ``resume`` tries it before the full scan:

- every block it names must still be there with the bytes it had (size and Adler-32; the
  last one may have grown: only its first bytes are compared), the blocks after it are
  new; blocks before its first were retired before the crash (every message in them
  deleted) and whose files were not unlinked yet, and they go now;
- the bytes written since (the tail of its last block, the new blocks) are scanned, and
  must hold nothing but new messages in order: the next sequences, no tombstone, no damage
  beyond a torn tail of the very last block, which is cut off as the full scan would.

Anything else (a deletion since the checkpoint, a rewritten or missing block, damage, a
checkpoint that does not parse) returns None and the full scan (``filestore_recovery``)
runs with its checks and reports. The file carries a crc32 of its body, so a torn write
of it is never taken for a good one, and is replaced atomically and fsynced like every
other file of the store.
"""

from __future__ import annotations

import heapq
import os

from natsd.storage.fileio import O_CLOEXEC, FileIO
from natsd.storage.filestore_checkpoint import Checkpoint, file_sum, load_checkpoint
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    BlockScan,
    BlockVersionError,
    block_name,
    parse_block_name,
    scan_block,
)
from natsd.storage.filestore_index import Block, SubjState
from natsd.storage.filestore_recovery import (
    CHECKPOINT,
    MANIFEST,
    UNCLEAN,
    UNCLEAN_LOSS,
    Recovered,
    from_checkpoint,
    read_manifest,
    repair_block,
)
from natsd.storage.sources_index import SOURCES_FILE
from natsd.storage.store import StoreError

__all__ = ["resume"]


def resume(mdir: str, io: FileIO) -> Recovered | None:
    """The store's state from its running checkpoint and what was written since, or None
    (the full scan must run). Only after a crash: never when a clean-shutdown index exists."""
    if io.exists(os.path.join(mdir, MANIFEST)):
        return None
    if not io.exists(os.path.join(mdir, CHECKPOINT)):
        return None
    doc = read_manifest(mdir, [], io, CHECKPOINT)
    if doc is None:
        return None
    named: list[tuple[int, str]] = []
    for name in io.listdir(mdir):
        first = parse_block_name(name)
        if first is not None:
            named.append((first, name))
        elif name.endswith(".tmp") or name not in (CHECKPOINT, SOURCES_FILE):
            return None  # the full scan deals with (and reports) anything else
    named.sort()
    index = doc.get("index")
    if not isinstance(index, list):
        return None
    try:
        firsts = [int(e["first"]) for e in index]
    except (KeyError, TypeError, ValueError):
        return None
    if not firsts:
        return None
    retired = [nm for nm in named if nm[0] < firsts[0]]
    rest = named[len(retired) :]
    if [f for f, _n in rest[: len(firsts)]] != firsts:
        return None
    cp = load_checkpoint(doc, mdir, rest[: len(firsts)], io, grown_last=True)
    if cp is None:
        return None
    try:
        return _since(mdir, io, cp, rest[len(firsts) - 1 :], retired)
    except BlockVersionError as e:
        raise StoreError(f"{e}; this natsd cannot read it") from e


def _since(
    mdir: str,
    io: FileIO,
    cp: Checkpoint,
    named: list[tuple[int, str]],
    retired: list[tuple[int, str]],
) -> Recovered | None:
    """``cp`` plus the records after it: ``named`` is the checkpoint's last block (grown or
    not) and every block after it."""
    cpblk = cp.blocks[-1]
    known = cpblk.flushed  # its size at the checkpoint
    scans: list[tuple[Block, BlockScan, bytes]] = []
    nxt = cp.last_seq + 1
    interned: dict[bytes, str] = {}
    for i, (first, name) in enumerate(named):
        path = os.path.join(mdir, name)
        fd = io.open(path, os.O_RDONLY | O_CLOEXEC)
        try:
            data = io.pread(fd, io.fsize(fd), 0)
        finally:
            io.close(fd)
        scan = scan_block(data, first, interned)
        last = i == len(named) - 1
        if not scan.header_ok or scan.fixes or scan.bad or scan.skipped:
            return None
        if scan.tail is not None and not last:
            return None
        start = known if i == 0 else 0
        if i == 0 and sum(1 for m in scan.msgs if m[1] < start) != cpblk.nrec:
            return None  # what the checkpoint knew of it is not what is there
        if scan.tombs and (i > 0 or _tombs_after(data, scan, start)):
            return None
        for m in scan.msgs:
            if m[1] < start:
                continue
            if m[0] != nxt or (i > 0 and m is scan.msgs[0] and m[0] != first):
                return None
            nxt += 1
        blk = cpblk if i == 0 else Block(first, path)
        scans.append((blk, scan, data))
    rec = Recovered()
    report = rec.report
    for i, (blk, scan, data) in enumerate(scans):
        if scan.tail is not None:
            # a torn append at the very end (checked above): cut as the full scan does
            fd = io.open(blk.path, os.O_RDWR | O_CLOEXEC)
            try:
                repair_block(io, fd, blk, scan, len(data), is_last=True, report=report)
            finally:
                io.close(fd)
        else:
            blk.flushed = len(data)
        blk.on_disk = True
        blk.fsum = file_sum(memoryview(data)[: blk.flushed])
        _add_records(blk, scan, known if i == 0 else 0)
    blocks = cp.blocks[:-1] + [b for b, _s, _d in scans]
    for blk in blocks[:-1]:
        blk.settle()
    for _f, name in retired:
        io.unlink(os.path.join(mdir, name))
        report.append(f"block {name}: retired before the crash (no live message); removed")
    if retired:
        io.fsync_dir(mdir)
    from_checkpoint(rec, cp)
    rec.blocks = blocks
    _add_counts(rec, scans, known)
    first_new = scans[0][0].first if len(scans) > 1 else cpblk.first
    report.append(
        f"{UNCLEAN}: no clean-shutdown record; recovered up to seq {rec.last_seq} from the "
        f"running checkpoint and the blocks written since ({block_name(first_new)} on): "
        f"{UNCLEAN_LOSS}"
    )
    return rec


def _tombs_after(data: bytes, scan: BlockScan, start: int) -> bool:
    """Whether the checkpoint's last block holds a tombstone written after it. Tombstones
    carry no offset in a scan, so the region after ``start`` is scanned again alone."""
    if start >= len(data):
        return False
    tail = data[:BLOCK_HDR_SIZE] + data[start:]
    return bool(scan_block(tail, scan.first, {}).tombs)


def _add_records(blk: Block, scan: BlockScan, start: int) -> None:
    """Positions of ``blk``'s records from offset ``start`` on."""
    for seq, off, reclen, _ts, _ttl, _subj, _size, erased in scan.msgs:
        if off >= start:
            blk.add(seq, off, reclen, not erased)


def _add_counts(rec: Recovered, scans: list[tuple[Block, BlockScan, bytes]], known: int) -> None:
    """Counters, subjects and ttls of the records written after the checkpoint."""
    subjects = rec.subjects
    for i, (_blk, scan, _data) in enumerate(scans):
        start = known if i == 0 else 0
        for seq, off, _reclen, ts, ttl, subj, size, erased in scan.msgs:
            if off < start:
                continue
            rec.last_seq, rec.last_ts = seq, ts
            if erased:
                continue
            if not rec.nlive:
                rec.first_seq, rec.first_ts = seq, ts
            rec.nlive += 1
            rec.bytes += size
            if ttl > 0:
                heapq.heappush(rec.ttl_heap, (ts + ttl * 1_000_000_000, seq))
            ss = subjects.get(subj)
            if ss is None:
                subjects[subj] = SubjState(seq)
            else:
                ss.msgs += 1
                ss.last = seq
                ss.last_stale = False  # as a store does: the new message is the last
        scan.msgs = []
