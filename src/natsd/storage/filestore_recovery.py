"""Opening a file store: read every block, verify it, rebuild the index, report what was lost.

After a clean shutdown whose blocks are byte for byte as it left them, the index comes from
``index.cache`` instead and no record is parsed (``filestore_checkpoint``). Otherwise:

Rules (and why):

- Every record is checked (header crc, lengths, body crc). A damaged record costs only
  itself: the scan resynchronises on the next valid record (``filestore_format.scan_block``).
- An incomplete record or unreadable bytes at the very end of the *last* block are a torn
  append (the process or machine died mid-write): they are cut off and reported, not counted
  as lost, since no sync covered them. Only the last block: blocks are written in order and
  one sync covers them all, so a later block with records proves an earlier block's end was
  written (and synced, if anything after it was), and damage there is a loss.
- Anything else unreadable stays on disk untouched and is reported; the sequences it held are
  inferred from the neighbouring records and listed in ``LostData`` unless a tombstone says
  they were deleted anyway. Blocks and streams are never deleted because of damage.
- A block whose own header is damaged is salvaged (its records carry their own checksums)
  and the header is rewritten from the file name.
- ``index.cache`` (the manifest ``FileStore.stop`` writes), when the blocks changed since,
  is only a cross-check: it says which sequences were live and how big each block was, which
  catches
  what per-record checksums cannot (a block file gone, a block cut short, a last record
  damaged beyond recognition). It is deleted at open so a stale one is never trusted, and a
  missing or unreadable one costs nothing.
"""

from __future__ import annotations

import heapq
import itertools
import os
import zlib
from array import array
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

import orjson

from natsd.storage.fileio import DEFAULT_IO, O_CLOEXEC, FileIO
from natsd.storage.filestore_checkpoint import Checkpoint, file_sum, load_checkpoint
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    BlockScan,
    BlockVersionError,
    block_header,
    parse_block_name,
    scan_block,
)
from natsd.storage.filestore_index import GROUP, Block, SubjState
from natsd.storage.sources_index import SOURCES_FILE
from natsd.storage.store import LostData, StoreError

__all__ = [
    "CHECKPOINT",
    "MANIFEST",
    "UNCLEAN",
    "UNCLEAN_LOSS",
    "Recovered",
    "from_checkpoint",
    "manifest_doc",
    "read_manifest",
    "recover",
    "repair_block",
    "write_checkpoint",
    "write_manifest",
]

MANIFEST: Final = "index.cache"
# The running checkpoint (``filestore_resume``); a clean open renames the manifest to it.
CHECKPOINT: Final = "index.ckpt"
# First words of the report line for a store that was not stopped cleanly.
UNCLEAN: Final = "unclean shutdown"
# What an unclean shutdown may have cost, said the same way by both recovery paths: a store
# synced lazily (a sync_interval, or a replicated stream's store, which its node log refills)
# may miss what came after its last fsync.
UNCLEAN_LOSS: Final = (
    "messages written after the last fsync may be missing with a lazy sync_interval (lost) "
    "or on a replicated stream (taken again from its node log); with the default sync, "
    "nothing an R1 stream acknowledged is"
)
_MANIFEST_MAGIC: Final = b"NDSC1\n"
# Listing every lost sequence is pointless past this; the report gives the ranges.
_MAX_LOST_LISTED: Final = 1_000_000


@dataclass(slots=True)
class Recovered:
    blocks: list[Block] = field(default_factory=list)
    nlive: int = 0
    subjects: dict[str, SubjState] = field(default_factory=dict)
    ttl_heap: list[tuple[int, int]] = field(default_factory=list)
    bytes: int = 0
    first_seq: int = 0
    first_ts: int = 0
    last_seq: int = 0
    last_ts: int = 0
    lost: LostData | None = None
    report: list[str] = field(default_factory=list)
    # Deleted before the last clean shutdown, deletion record damaged: tombstone again.
    redelete: list[int] = field(default_factory=list)


class _Tombs:
    """Merged tombstone ranges with a membership test."""

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        merged: list[list[int]] = []
        for a, b, _ts in sorted(ranges):
            if merged and a <= merged[-1][1] + 1:
                if b > merged[-1][1]:
                    merged[-1][1] = b
            else:
                merged.append([a, b])
        self.starts = [r[0] for r in merged]
        self.ends = [r[1] for r in merged]

    def __contains__(self, seq: int) -> bool:
        i = bisect_right(self.starts, seq) - 1
        return i >= 0 and seq <= self.ends[i]


def _runs(seqs: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for s in seqs:
        if out and out[-1][1] + 1 == s:
            out[-1][1] = s
        else:
            out.append([s, s])
    return out


def _fmt_seqs(seqs: list[int]) -> str:
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in _runs(seqs)[:20]]
    more = " ..." if len(_runs(seqs)) > 20 else ""
    return ",".join(parts) + more


# ------------------------------------------------------------------------------ manifest


def _encode(doc: dict[str, object]) -> bytes:
    body = orjson.dumps(doc)
    return _MANIFEST_MAGIC + b"%08x\n" % zlib.crc32(body) + body


def write_manifest(mdir: str, doc: dict[str, object], io: FileIO = DEFAULT_IO) -> None:
    """Atomically write the clean-shutdown manifest (tmp, fsync, rename, fsync dir)."""
    io.write_file_atomic(os.path.join(mdir, MANIFEST), _encode(doc))


def write_checkpoint(mdir: str, doc: dict[str, object], io: FileIO = DEFAULT_IO) -> None:
    """Replace the running checkpoint atomically (tmp, fsync, rename, fsync dir), like the
    manifest: the store keeps its rule that nothing it wrote is unsynced when it
    acknowledges (its checksums would catch a torn one anyway)."""
    io.write_file_atomic(os.path.join(mdir, CHECKPOINT), _encode(doc))


def read_manifest(
    mdir: str, report: list[str], io: FileIO = DEFAULT_IO, name: str = MANIFEST
) -> dict[str, object] | None:
    """The manifest (or, ``name``, the running checkpoint) document; None when absent or
    damaged (said in ``report``)."""
    path = os.path.join(mdir, name)
    try:
        raw = io.read_file(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        report.append(f"{name}: unreadable ({e}); ignored, blocks are the truth")
        return None
    doc: object = None
    if raw.startswith(_MANIFEST_MAGIC) and len(raw) >= len(_MANIFEST_MAGIC) + 9:
        crc_hex = raw[len(_MANIFEST_MAGIC) : len(_MANIFEST_MAGIC) + 8]
        body = raw[len(_MANIFEST_MAGIC) + 9 :]
        try:
            if int(crc_hex, 16) == zlib.crc32(body):
                doc = orjson.loads(body)
        except ValueError:
            doc = None
    if not isinstance(doc, dict):
        report.append(f"{name}: damaged; ignored, index rebuilt from the blocks")
        return None
    return doc


# ------------------------------------------------------------------------------ recovery


def recover(mdir: str, io: FileIO = DEFAULT_IO, fresh: bool = False) -> Recovered:
    """Scan ``mdir`` and rebuild everything. Repairs only torn tails and block headers.
    ``fresh``: the directory was just created (no shutdown to speak of)."""
    rec = Recovered()
    report = rec.report
    manifest = read_manifest(mdir, report, io)
    clean = io.exists(os.path.join(mdir, MANIFEST))
    if manifest is not None or clean:
        # A manifest describes one clean shutdown; once we start writing it is stale as
        # that, but still a good running checkpoint (checked against the blocks like any).
        try:
            io.replace(os.path.join(mdir, MANIFEST), os.path.join(mdir, CHECKPOINT))
            # Durably: a manifest that came back after a crash would describe a past state.
            io.fsync_dir(mdir)
        except FileNotFoundError:
            pass

    named: list[tuple[int, str]] = []
    for name in io.listdir(mdir):
        first = parse_block_name(name)
        if first is not None:
            named.append((first, name))
        elif name.endswith(".tmp"):
            # Left by an interrupted rewrite or manifest write; the rename never happened,
            # so the original file is intact and this copy is garbage by construction.
            io.unlink(os.path.join(mdir, name))
            report.append(f"removed leftover temporary file {name}")
        elif name not in (MANIFEST, CHECKPOINT, SOURCES_FILE):
            report.append(f"ignored unknown file {name}")
    named.sort()
    if manifest is not None and clean:
        cp = load_checkpoint(manifest, mdir, named, io)
        if cp is not None:
            from_checkpoint(rec, cp)
            return rec

    interned: dict[bytes, str] = {}
    scans: list[tuple[Block, BlockScan]] = []
    for i, (first, name) in enumerate(named):
        blk = Block(first, os.path.join(mdir, name))
        blk.on_disk = True
        fd = io.open(blk.path, os.O_RDWR | O_CLOEXEC)
        try:
            size = io.fsize(fd)
            data = io.pread(fd, size, 0) if size else b""
            try:
                scan = scan_block(data, first, interned)
            except BlockVersionError as e:
                raise StoreError(f"{e}; this natsd cannot read it") from e
            repair_block(io, fd, blk, scan, size, is_last=i == len(named) - 1, report=report)
            # the checksum of what the file now holds (the clean-shutdown index records it)
            unchanged = scan.header_ok and not scan.fixes
            blk.fsum = file_sum(memoryview(data)[: blk.flushed]) if unchanged else -1
        finally:
            io.close(fd)
        scans.append((blk, scan))

    _rebuild(rec, scans, manifest)
    if not fresh and not clean:
        report.append(
            f"{UNCLEAN}: no clean-shutdown record; recovered up to seq {rec.last_seq} as "
            f"found on disk ({UNCLEAN_LOSS})"
        )
    if any(s.tail is not None or not s.header_ok or s.fixes for _b, s in scans):
        io.fsync_dir(mdir)
    return rec


def from_checkpoint(rec: Recovered, cp: Checkpoint) -> None:
    """``rec`` takes the state ``cp`` holds."""
    rec.blocks = cp.blocks
    rec.subjects = cp.subjects
    rec.ttl_heap = cp.ttl_heap
    heapq.heapify(rec.ttl_heap)
    rec.lost = cp.lost
    rec.nlive = cp.nlive
    rec.bytes = cp.bytes
    rec.first_seq = cp.first_seq
    rec.first_ts = cp.first_ts
    rec.last_seq = cp.last_seq
    rec.last_ts = cp.last_ts


def repair_block(
    io: FileIO,
    fd: int,
    blk: Block,
    scan: BlockScan,
    size: int,
    *,
    is_last: bool,
    report: list[str],
) -> None:
    name = os.path.basename(blk.path)
    changed = False
    if not scan.header_ok:
        if size < BLOCK_HDR_SIZE:
            report.append(f"block {name}: {scan.header_problem}; header rewritten")
            io.ftruncate(fd, 0)
            size = 0
        else:
            report.append(
                f"block {name}: {scan.header_problem}; {len(scan.msgs)} message records "
                f"salvaged by their own checksums, header rewritten"
            )
        io.pwrite(fd, block_header(blk.first), 0)
        changed = True
        size = max(size, BLOCK_HDR_SIZE)
    for off, fixed in scan.fixes:
        io.pwrite(fd, fixed, off)
        changed = True
    end = size
    if scan.tail is not None:
        off, why, seq = scan.tail
        off = max(off, BLOCK_HDR_SIZE)
        what = f" (seq {seq})" if seq is not None else ""
        if is_last:
            report.append(
                f"block {name}: torn tail at offset {off}: {why}{what}; truncated "
                f"{size - off} bytes (never covered by a sync)"
            )
            io.ftruncate(fd, off)
            end = off
            changed = True
        else:
            # The sequences it held are counted lost by the gap check against the next block.
            report.append(
                f"block {name}: {why}{what} at offset {off}, but later blocks exist, so it "
                f"was written whole before them; damage, left in place"
            )
    if changed:
        io.fsync(fd)
    blk.flushed = end
    for note in scan.notes:
        report.append(f"block {name}: {note}")


class _Found:
    """What one block's records said, kept while the blocks after it are read: per
    position, the subject (an index into the store's subject names), message size,
    timestamp and ttl (arrays: a few bytes per record, freed once the index is built)."""

    __slots__ = ("sids", "sizes", "ts", "ttls")

    def __init__(self) -> None:
        self.sids = array("I")
        self.sizes = array("I")
        self.ts = array("q")
        self.ttls = array("q")


def _is_live(blocks: list[Block], firsts: list[int], seq: int) -> bool:
    i = bisect_right(firsts, seq) - 1
    if i < 0:
        return False
    blk = blocks[i]
    k = blk.pos(seq)
    return k >= 0 and bool(blk.alive[k])


def _index_block(
    blk: Block,
    scan: BlockScan,
    upto: int | None,
    names: dict[str, int],
    report: list[str],
) -> _Found:
    """The positions of ``blk``'s records (every non-erased one live for now: tombstones
    are applied once every block is read), from ``scan``, whose records are then let go."""
    bfirst = blk.first
    accepted: list[tuple[int, int, int, int, int, str, int, bool]] = []
    ordered = True
    prev = bfirst - 1
    for m in scan.msgs:
        seq = m[0]
        if seq < bfirst or (upto is not None and seq >= upto):
            report.append(f"block {bfirst}: unexpected record for seq {seq}; ignored")
            ordered = False
            continue
        if seq <= prev:
            ordered = False
        prev = max(prev, seq)
        accepted.append(m)
    irregular = not ordered or bool(scan.bad) or scan.skipped > 0
    if irregular:
        # Positions by sequence (first copy wins); offsets kept for every one of them.
        seen: set[int] = set()
        uniq = []
        for m in accepted:
            if m[0] in seen:
                report.append(f"block {bfirst}: unexpected record for seq {m[0]}; ignored")
                continue
            seen.add(m[0])
            uniq.append(m)
        accepted = sorted(uniq)
        blk.irregular = True
    found = _Found()
    n = len(accepted)
    if not irregular and n and accepted[-1][0] - accepted[0][0] == n - 1:
        # Dense and regular (the usual block): its positions in bulk.
        offs = array("I", [m[1] for m in accepted])
        blk.seq0 = accepted[0][0]
        blk.nrec = n
        blk.offs = offs
        blk.lens = array("I", [m[2] for m in accepted])
        blk.marks = offs[::GROUP]
        blk.alive = bytearray(b"\x01") * n
        for k, m in enumerate(accepted):
            if m[7]:
                blk.alive[k] = 0
    else:
        for seq, off, reclen, _ts, _ttl, _subj, _size, erased in accepted:
            blk.add(seq, off, reclen, not erased)
    sids: list[int] = []
    for m in accepted:
        subj = m[5]
        sid = names.get(subj)
        if sid is None:
            sid = names[subj] = len(names)
        sids.append(sid)
    found.sids = array("I", sids)
    found.sizes = array("I", [m[6] for m in accepted])
    found.ts = array("q", [m[3] for m in accepted])
    found.ttls = array("q", [m[4] for m in accepted])
    scan.msgs = []
    return found


def _kill_range(blocks: list[Block], firsts: list[int], lo: int, hi: int) -> None:
    """Mark every position with a sequence in [lo, hi] dead."""
    i = max(bisect_right(firsts, lo) - 1, 0)
    for bi in range(i, len(blocks)):
        blk = blocks[bi]
        if blk.first > hi:
            return
        a = blk.pos_from(lo)
        b = blk.pos_upto(hi) + 1
        if a < b:
            blk.alive[a:b] = bytes(b - a)


def _rebuild(
    rec: Recovered, scans: list[tuple[Block, BlockScan]], manifest: dict[str, object] | None
) -> None:
    report = rec.report
    tomb_ranges = [t for _b, s in scans for t in s.tombs]
    tombs = _Tombs(tomb_ranges)
    subjects = rec.subjects
    ttl_heap = rec.ttl_heap
    last_seq = 0
    last_ts = 0
    last_is_msg = False
    for a_b in tomb_ranges:
        if a_b[1] > last_seq:
            last_seq, last_ts, last_is_msg = a_b[1], a_b[2], False
    # After a clean shutdown the manifest says which records were live: one that is not
    # (and no tombstone says so) lost its deletion record to damage; it stays deleted.
    dead = _manifest_dead(scans, manifest, tombs)
    names: dict[str, int] = {}
    found: list[_Found] = []
    for i, (blk, scan) in enumerate(scans):
        if blk.first - 1 > last_seq:
            last_seq, last_ts, last_is_msg = blk.first - 1, 0, False
        if scan.seen_max > last_seq:
            # A damaged last record still used its sequence.
            last_seq, last_ts, last_is_msg = scan.seen_max, 0, False
        for m in scan.msgs:
            seq, ts = m[0], m[3]
            if seq >= last_seq and (seq > last_seq or not last_is_msg):
                last_seq, last_ts, last_is_msg = seq, ts, True
        upto = scans[i + 1][0].first if i + 1 < len(scans) else None
        found.append(_index_block(blk, scan, upto, names, report))
        rec.blocks.append(blk)
    blocks = rec.blocks
    firsts = [b.first for b in blocks]
    for a, b in zip(tombs.starts, tombs.ends, strict=True):
        _kill_range(blocks, firsts, a, b)
    for seq in sorted(dead):
        if _is_live(blocks, firsts, seq):
            _kill_range(blocks, firsts, seq, seq)
            rec.redelete.append(seq)
    # Per-subject state, sizes and ttls of the live messages, in sequence order.
    sname = list(names)
    nbytes = 0
    nlive = 0
    for blk, f in zip(blocks, found, strict=True):
        alive = blk.alive
        blk.live = alive.count(1)
        nlive += blk.live
        if blk.live and blk.live == blk.nrec and not any(f.ttls):
            # Every record live, none with a ttl (the usual block): per subject in bulk.
            if not rec.first_seq:
                rec.first_seq = blk.seq_at(0)
                rec.first_ts = f.ts[0]
            nbytes += sum(f.sizes)
            sids = f.sids
            counts = Counter(sids)
            last_k: dict[int, int] = {}
            for k in range(len(sids) - 1, -1, -1):
                if sids[k] not in last_k:
                    last_k[sids[k]] = k
                    if len(last_k) == len(counts):
                        break
            for sid, cnt in counts.items():
                subj = sname[sid]
                fseq = blk.seq_at(sids.index(sid))
                lseq = blk.seq_at(last_k[sid])
                ss = subjects.get(subj)
                if ss is None:
                    ss = subjects[subj] = SubjState(fseq)
                    ss.msgs = cnt
                else:
                    ss.msgs += cnt
                ss.last = lseq
            continue
        k = alive.find(1)
        while k >= 0:
            seq = blk.seq_at(k)
            if not rec.first_seq:
                rec.first_seq = seq
                rec.first_ts = f.ts[k]
            nbytes += f.sizes[k]
            ttl = f.ttls[k]
            if ttl > 0:
                ttl_heap.append((f.ts[k] + ttl * 1_000_000_000, seq))
            subj = sname[f.sids[k]]
            ss = subjects.get(subj)
            if ss is None:
                subjects[subj] = SubjState(seq)
            else:
                ss.msgs += 1
                ss.last = seq
            k = alive.find(1, k + 1)
    found.clear()
    for blk in blocks[:-1]:
        blk.settle()
    rec.bytes = nbytes
    rec.nlive = nlive
    heapq.heapify(rec.ttl_heap)

    def live(seq: int) -> bool:
        return _is_live(blocks, firsts, seq)

    lost: set[int] = set()
    lost_bytes = 0
    # Damaged records and unreadable regions inside blocks.
    for i, (blk, scan) in enumerate(scans):
        name = os.path.basename(blk.path)
        for bad in scan.bad:
            if bad.seq is not None:
                if bad.tombstone:
                    report.append(
                        f"block {name}: damaged tombstone at offset {bad.offset} (first seq "
                        f"{bad.seq}); messages it deleted may have reappeared"
                    )
                elif bad.seq in tombs or live(bad.seq):
                    report.append(
                        f"block {name}: damaged record of deleted seq {bad.seq} at offset "
                        f"{bad.offset}; nothing lost"
                    )
                else:
                    lost.add(bad.seq)
                    lost_bytes += bad.size
                    report.append(
                        f"block {name}: damaged record seq {bad.seq} at offset {bad.offset} "
                        f"({bad.length} bytes, checksum mismatch); message lost"
                    )
                continue
            hi = bad.next_seq
            if hi is None:
                # No message record follows in this block: bounded by the next block, or
                # for the last block by the last sequence the store knows of.
                hi = scans[i + 1][0].first if i + 1 < len(scans) else last_seq + 1
            cand: list[int] = []
            if hi is not None and hi - bad.prev_seq - 1 <= _MAX_LOST_LISTED:
                cand = [s for s in range(bad.prev_seq + 1, hi) if s not in tombs and not live(s)]
            lost.update(cand)
            lost_bytes += bad.length
            what = f"seqs {_fmt_seqs(cand)}" if cand else "no live sequences identified"
            report.append(
                f"block {name}: {bad.length} unreadable bytes at offset {bad.offset} "
                f"(after seq {bad.prev_seq}); {what} lost; if they held a deletion record "
                f"(tombstone), messages it deleted may have reappeared"
            )
    # Sequences that fall between blocks with no record and no tombstone.
    for (blk, scan), (nxt, _ns) in itertools.pairwise(scans):
        lo, hi = scan.seen_max + 1, nxt.first - 1
        if lo > hi or hi - lo + 1 > _MAX_LOST_LISTED:
            continue
        cand = [s for s in range(lo, hi + 1) if s not in tombs and s not in lost]
        if cand:
            lost.update(cand)
            if scan.tail is not None:
                lost_bytes += blk.flushed - max(scan.tail[0], BLOCK_HDR_SIZE)
            report.append(
                f"seqs {_fmt_seqs(cand)} missing between blocks {blk.first} and {nxt.first} "
                f"(no record, no tombstone); lost"
            )

    if manifest is not None:
        last_seq, lost_bytes = _check_manifest(rec, manifest, tombs, lost, last_seq, lost_bytes)
    if rec.redelete:
        report.append(
            f"seqs {_fmt_seqs(rec.redelete)} were deleted at the last clean shutdown but "
            f"their deletion record is damaged; kept deleted (tombstone rewritten)"
        )

    rec.last_seq = last_seq
    rec.last_ts = last_ts
    if not nlive:
        rec.first_seq = last_seq + 1 if (rec.blocks or last_seq) else 0
        rec.first_ts = 0
    if lost:
        rec.lost = LostData(msgs=sorted(lost), bytes=lost_bytes)


def _check_manifest(
    rec: Recovered,
    manifest: dict[str, object],
    tombs: _Tombs,
    lost: set[int],
    last_seq: int,
    lost_bytes: int,
) -> tuple[int, int]:
    report = rec.report
    expected = _parse_manifest(manifest)
    if expected is None:
        report.append(f"{MANIFEST}: unexpected content; ignored")
        return last_seq, lost_bytes
    m_last, blocks = expected
    if m_last > last_seq:
        report.append(
            f"last sequence was {m_last} at the last clean shutdown but the blocks end at "
            f"{last_seq}; keeping {m_last} so sequences are never reused"
        )
        last_seq = m_last
    have = {b.first: b for b in rec.blocks}
    firsts = [b.first for b in rec.blocks]
    for first, size, runs in blocks:
        blk = have.get(first)
        if blk is None:
            report.append(f"block {first} listed at the last clean shutdown is missing")
        elif blk.flushed != size:
            report.append(
                f"block {first} is {blk.flushed} bytes, was {size} at the last clean shutdown"
            )
        if blk is not None and [list(r) for r in runs] == _live_runs(blk):
            continue  # every message live then is live now (the usual case: no per-seq walk)
        missing = [
            s
            for a, b in runs
            for s in range(a, b + 1)
            if not _is_live(rec.blocks, firsts, s) and s not in tombs
        ]
        new = [s for s in missing if s not in lost]
        if new:
            lost.update(new)
            report.append(
                f"seqs {_fmt_seqs(new)} were live in block {first} at the last clean "
                f"shutdown and are gone; lost"
            )
    return last_seq, lost_bytes


def _manifest_dead(
    scans: list[tuple[Block, BlockScan]], manifest: dict[str, object] | None, tombs: _Tombs
) -> set[int]:
    if manifest is None:
        return set()
    parsed = _parse_manifest(manifest)
    if parsed is None:
        return set()
    m_last, blocks = parsed
    live: dict[int, list[tuple[int, int]]] = {first: runs for first, _size, runs in blocks}
    dead: set[int] = set()
    for blk, scan in scans:
        runs = live.get(blk.first)
        if runs is None:
            continue
        starts = [a for a, _b in runs]
        for m in scan.msgs:
            seq = m[0]
            if seq > m_last or m[7] or seq in tombs:
                continue
            i = bisect_right(starts, seq) - 1
            if i < 0 or seq > runs[i][1]:
                dead.add(seq)
    return dead


def _parse_manifest(
    doc: dict[str, object],
) -> tuple[int, list[tuple[int, int, list[tuple[int, int]]]]] | None:
    last = doc.get("last_seq")
    blocks = doc.get("blocks")
    if not isinstance(last, int) or not isinstance(blocks, list):
        return None
    out: list[tuple[int, int, list[tuple[int, int]]]] = []
    for b in blocks:
        if not isinstance(b, dict):
            return None
        first, size, live = b.get("first"), b.get("size"), b.get("live")
        if not isinstance(first, int) or not isinstance(size, int) or not isinstance(live, list):
            return None
        runs: list[tuple[int, int]] = []
        for r in live:
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)):
                return None
            runs.append((r[0], r[1]))
        out.append((first, size, runs))
    return last, out


def manifest_doc(
    blocks: list[Block],
    nlive: int,
    first_seq: int,
    last_seq: int,
    nbytes: int,
) -> dict[str, object]:
    return {
        "version": 1,
        "first_seq": first_seq,
        "last_seq": last_seq,
        "msgs": nlive,
        "bytes": nbytes,
        "blocks": [{"first": b.first, "size": b.flushed, "live": _live_runs(b)} for b in blocks],
    }


def _live_runs(blk: Block) -> list[list[int]]:
    """The block's live sequences as [first, last] runs."""
    out: list[list[int]] = []
    alive = blk.alive
    k = alive.find(1)
    if blk.seqs is None:
        while k >= 0:
            e = alive.find(0, k)
            if e < 0:
                e = blk.nrec
            out.append([blk.seq0 + k, blk.seq0 + e - 1])
            k = alive.find(1, e)
        return out
    while k >= 0:
        s = blk.seq_at(k)
        if out and out[-1][1] + 1 == s:
            out[-1][1] = s
        else:
            out.append([s, s])
        k = alive.find(1, k + 1)
    return out
