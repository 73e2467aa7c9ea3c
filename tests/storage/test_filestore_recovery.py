"""FileStore restart and recovery: clean restarts, crashes, torn tails, corruption, caches.

"Crash" here means the process dies: whatever was flushed is in the page cache and survives,
nothing else runs (no stop(), no manifest). ``crash()`` only closes the descriptors so the
test does not leak them.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from natsd.storage.filestore import FileStore
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    BLOCK_MAGIC,
    block_name,
    scan_block,
)
from natsd.storage.store import StoreConfig, StoredMsg, StoreError

from .conftest import damage

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"
T0 = 1_700_000_000 * 1_000_000_000


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", **kw)  # type: ignore[arg-type]


def crash(fs: FileStore) -> None:
    """Abandon the store as a killed process would (flushed data stays in the OS)."""
    fs._close_fds()
    fs._closed = True


def blk_files(d: Path) -> list[Path]:
    return sorted((d / "msgs").glob("*.blk"))


def record_spans(path: Path) -> dict[int, tuple[int, int]]:
    """seq -> (offset, length) of every message record in a block file."""
    data = path.read_bytes()
    first = int(path.name[:-4])
    return {m[0]: (m[1], m[2]) for m in scan_block(data, first).msgs}


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5A]))


def all_msgs(fs: FileStore, upto: int) -> dict[int, StoredMsg]:
    out = {}
    for q in range(upto + 1):
        m = fs.load_msg(q)
        if m is not None:
            out[q] = m
    return out


def filled(d: Path, n: int = 20, block_size: int = 1 << 20) -> FileStore:
    fs = FileStore(d, cfg(allow_msg_ttl=True), block_size=block_size)
    for i in range(1, n + 1):
        fs.store_msg(f"s.{i % 3}", HDR if i % 2 else None, b"payload-%04d" % i)
    fs.flush()
    fs.sync()
    return fs


# ---------------------------------------------------------------------------- restarts


def rich_store(d: Path) -> FileStore:
    fs = FileStore(d, cfg(allow_msg_ttl=True), block_size=512)
    fs.store_msg("a.1", HDR, b"one")
    fs.store_msg("a.2", None, b"")
    fs.store_raw("b", HDR, bytes(range(256)), 5, T0, ttl=30)  # gap 3..4
    fs.skip_msgs(6, 2)
    fs.store_msg("c", None, b"x" * 1000, ttl=-1)  # bigger than a block
    for i in range(30):
        fs.store_msg(f"d.{i % 4}", HDR if i % 3 else None, b"%d" % i)
    fs.remove_msg(2)
    fs.erase_msg(12)
    fs.purge_ex("d.1", 0, 1)
    return fs


@pytest.mark.parametrize("how", ["stop", "crash"])
def test_restart_is_byte_identical(tmp_path: Path, how: str) -> None:
    fs = rich_store(tmp_path)
    before = fs.state(with_deleted=True)
    msgs = all_msgs(fs, before.last_seq + 1)
    totals = fs.subjects_totals("")
    if how == "stop":
        fs.stop()
    else:
        fs.flush()
        fs.sync()
        crash(fs)
    fs2 = FileStore(tmp_path, cfg(allow_msg_ttl=True), block_size=512)
    assert damage(fs2.recovery_report) == []
    assert fs2.state(with_deleted=True) == before
    assert before.lost is None and before.deleted and 2 in before.deleted
    assert all_msgs(fs2, before.last_seq + 1) == msgs
    m = fs2.load_msg(5)
    assert m is not None and (m.ts, m.ttl, m.hdr, m.data) == (T0, 30, HDR, bytes(range(256)))
    assert fs2.subjects_totals("") == totals
    assert fs2.store_msg("z", None, b"")[0] == before.last_seq + 1
    fs2.stop()


def test_crash_after_flush_only_loses_nothing_flushed(tmp_path: Path) -> None:
    # A process crash keeps the page cache: flush alone survives it (not a power cut).
    fs = filled(tmp_path, 10)
    fs.remove_msg(3)
    fs.store_msg("late", None, b"flushed")
    fs.flush()
    fs.store_msg("never", None, b"not flushed")
    crash(fs)
    fs2 = FileStore(tmp_path, cfg())
    st = fs2.state(with_deleted=True)
    assert (st.msgs, st.last_seq, st.deleted, st.lost) == (10, 11, [3], None)
    m = fs2.load_msg(11)
    assert m is not None and m.data == b"flushed"
    assert fs2.store_msg("again", None, b"")[0] == 12
    fs2.stop()


def test_deletes_survive_a_crash(tmp_path: Path) -> None:
    fs = filled(tmp_path, 30, block_size=300)
    fs.remove_msg(7)
    fs.purge_ex("s.1", 20, 0)
    fs.compact(3)
    fs.flush()
    fs.sync()
    before = fs.state(with_deleted=True)
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(), block_size=300)
    assert fs2.state(with_deleted=True) == before
    assert damage(fs2.recovery_report) == []
    fs2.stop()


# ---------------------------------------------------------------------------- torn tails


def test_torn_tail_at_every_offset_of_the_last_record(tmp_path: Path) -> None:
    src = tmp_path / "src"
    fs = filled(src, 6)
    crash(fs)
    (path,) = blk_files(src)
    off, reclen = record_spans(path)[6]
    assert off + reclen == path.stat().st_size
    good = all_msgs(FileStore(tmp_path / "probe", cfg()), 0)  # empty, just exercises open
    assert good == {}
    for cut in range(reclen):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(src, d)
        with open(d / "msgs" / path.name, "r+b") as f:
            f.truncate(off + cut)
        fs2 = FileStore(d, cfg())
        st = fs2.state()
        assert (st.msgs, st.last_seq, st.lost) == (5, 5, None), cut
        if cut:
            assert any("torn tail" in r for r in damage(fs2.recovery_report)), cut
        assert (d / "msgs" / path.name).stat().st_size == off
        for q in range(1, 6):
            m = fs2.load_msg(q)
            assert m is not None and m.data == b"payload-%04d" % q
        # The store continues where the intact records end, and the next open is clean.
        assert fs2.store_msg("next", None, b"n")[0] == 6
        fs2.flush()
        fs2.sync()
        crash(fs2)
        fs3 = FileStore(d, cfg())
        assert damage(fs3.recovery_report) == [] and fs3.state().msgs == 6
        crash(fs3)


def test_torn_tail_after_clean_shutdown_is_caught_by_the_manifest(tmp_path: Path) -> None:
    fs = filled(tmp_path, 6)
    fs.stop()
    (path,) = blk_files(tmp_path)
    off, reclen = record_spans(path)[6]
    with open(path, "r+b") as f:
        f.truncate(off + reclen // 2)
    fs2 = FileStore(tmp_path, cfg())
    st = fs2.state()
    assert st.lost is not None and st.lost.msgs == [6]
    assert any("clean shutdown" in r for r in damage(fs2.recovery_report))
    assert st.last_seq == 6  # the manifest keeps the sequence from being reused
    assert fs2.store_msg("x", None, b"")[0] == 7
    fs2.stop()


# ---------------------------------------------------------------------------- corruption


REC_POSITIONS = {
    "magic": 0,
    "header-crc": 5,
    "length": 9,
    "sequence": 13,
    "timestamp": 22,
    "ttl": 36,
    "subject": 43,
    "headers": 50,
    "payload": -8,
    "checksum": -1,
}


@pytest.mark.parametrize("where", sorted(REC_POSITIONS))
@pytest.mark.parametrize("how", ["stop", "crash"])
def test_flipped_byte_costs_exactly_that_record(tmp_path: Path, where: str, how: str) -> None:
    fs = filled(tmp_path, 21)
    crash(fs) if how == "crash" else fs.stop()
    (path,) = blk_files(tmp_path)
    off, reclen = record_spans(path)[11]
    pos = REC_POSITIONS[where]
    flip(path, off + (pos if pos >= 0 else reclen + pos))
    fs2 = FileStore(tmp_path, cfg())
    st = fs2.state(with_deleted=True)
    assert st.lost is not None and st.lost.msgs == [11]
    assert st.lost.bytes > 0
    assert (st.msgs, st.first_seq, st.last_seq, st.deleted) == (20, 1, 21, [11])
    assert fs2.load_msg(11) is None
    for q in [*range(1, 11), *range(12, 22)]:
        m = fs2.load_msg(q)
        assert m is not None and m.data == b"payload-%04d" % q, q
    assert any("11" in r and "lost" in r for r in damage(fs2.recovery_report)), damage(
        fs2.recovery_report
    )
    # Nothing on disk was touched; the store carries on after the damage.
    assert fs2.store_msg("after", None, b"a")[0] == 22
    fs2.stop()
    fs3 = FileStore(tmp_path, cfg())
    lost = fs3.state().lost
    assert lost is not None and lost.msgs == [11] and fs3.state().msgs == 21
    fs3.stop()


def test_damaged_record_of_a_deleted_message_loses_nothing(tmp_path: Path) -> None:
    fs = filled(tmp_path, 10)
    fs.remove_msg(4)
    fs.flush()
    fs.sync()
    crash(fs)
    (path,) = blk_files(tmp_path)
    off, reclen = record_spans(path)[4]
    flip(path, off + reclen - 3)
    fs2 = FileStore(tmp_path, cfg())
    assert fs2.state().lost is None and fs2.state().msgs == 9
    assert any("deleted seq 4" in r for r in damage(fs2.recovery_report))
    fs2.stop()


def test_unreadable_region_spanning_records(tmp_path: Path) -> None:
    fs = filled(tmp_path, 40, block_size=800)
    crash(fs)
    files = blk_files(tmp_path)
    assert len(files) >= 3
    mid = files[1]
    spans = record_spans(mid)
    seqs = sorted(spans)
    victims = seqs[1:4]
    start = spans[victims[0]][0]
    end = spans[victims[-1]][0] + spans[victims[-1]][1]
    with open(mid, "r+b") as f:
        f.seek(start)
        f.write(b"\0" * (end - start))
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    st = fs2.state()
    assert st.lost is not None and st.lost.msgs == victims
    assert st.msgs == 40 - len(victims) and st.last_seq == 40
    assert all(fs2.load_msg(q) is not None for q in range(1, 41) if q not in victims)
    fs2.stop()


def test_garbage_at_the_end_of_a_middle_block_is_kept_and_reported(tmp_path: Path) -> None:
    fs = filled(tmp_path, 40, block_size=800)
    crash(fs)
    mid = blk_files(tmp_path)[1]
    spans = record_spans(mid)
    last = max(spans)
    off, reclen = spans[last]
    with open(mid, "r+b") as f:
        f.seek(off)
        f.write(b"\xff" * reclen)
    size = mid.stat().st_size
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    lost = fs2.state().lost
    assert lost is not None and lost.msgs == [last]
    assert mid.stat().st_size == size  # not the last block: left in place
    fs2.stop()


def test_cut_off_end_of_an_earlier_block_is_lost_not_torn(tmp_path: Path) -> None:
    # Blocks are written in order and one sync covers them all: when a later block has
    # records, an earlier block's end was written too, so missing bytes there are a loss.
    fs = filled(tmp_path, 40, block_size=800)
    crash(fs)
    first = blk_files(tmp_path)[0]
    spans = record_spans(first)
    size = first.stat().st_size
    with open(first, "r+b") as f:
        f.truncate(size - 150)
    gone = [q for q, (off, ln) in spans.items() if off + ln > size - 150]
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    st = fs2.state()
    assert st.lost is not None and st.lost.msgs == gone and len(gone) >= 2
    assert st.msgs == 40 - len(gone) and st.last_seq == 40
    assert first.stat().st_size == size - 150  # damage is left in place
    assert any("later blocks exist" in r for r in damage(fs2.recovery_report))
    fs2.stop()


def test_corrupt_block_header_is_reported_and_salvaged(tmp_path: Path) -> None:
    fs = filled(tmp_path, 40, block_size=800)
    before = all_msgs(fs, 41)
    crash(fs)
    files = blk_files(tmp_path)
    victim = files[1]
    with open(victim, "r+b") as f:
        f.write(b"XXXX")
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    assert any(victim.name in r and "bad magic" in r for r in damage(fs2.recovery_report))
    assert fs2.state().lost is None
    assert all_msgs(fs2, 41) == before
    crash(fs2)
    assert victim.read_bytes()[:4] == BLOCK_MAGIC  # header rewritten from the file name
    fs3 = FileStore(tmp_path, cfg(), block_size=800)
    assert damage(fs3.recovery_report) == []
    fs3.stop()


def test_empty_block_file_from_a_crash_during_creation(tmp_path: Path) -> None:
    fs = filled(tmp_path, 5)
    crash(fs)
    (tmp_path / "msgs" / block_name(6)).write_bytes(b"")
    fs2 = FileStore(tmp_path, cfg())
    assert fs2.state().msgs == 5 and fs2.state().lost is None
    assert fs2.store_msg("x", None, b"")[0] == 6
    fs2.stop()
    fs3 = FileStore(tmp_path, cfg())
    assert fs3.state().msgs == 6 and damage(fs3.recovery_report) == []
    fs3.stop()


def test_unknown_block_version_refuses_to_open(tmp_path: Path) -> None:
    fs = filled(tmp_path, 3)
    fs.stop()
    (path,) = blk_files(tmp_path)
    body = struct.pack("<4sHHQ", BLOCK_MAGIC, 99, 0, 1)
    with open(path, "r+b") as f:
        f.write(body + struct.pack("<I", zlib.crc32(body)))
    with pytest.raises(StoreError, match="version 99"):
        FileStore(tmp_path, cfg())
    assert path.exists()


def test_leftover_tmp_and_unknown_files(tmp_path: Path) -> None:
    fs = filled(tmp_path, 3)
    fs.stop()
    (tmp_path / "msgs" / (block_name(1) + ".tmp")).write_bytes(b"half a rewrite")
    (tmp_path / "msgs" / "notes.txt").write_text("mine")
    fs2 = FileStore(tmp_path, cfg())
    assert fs2.state().msgs == 3
    assert not (tmp_path / "msgs" / (block_name(1) + ".tmp")).exists()
    assert (tmp_path / "msgs" / "notes.txt").exists()
    assert len(damage(fs2.recovery_report)) == 2
    fs2.stop()


# ---------------------------------------------------------------------------- the cache


@pytest.mark.parametrize("damage", ["deleted", "flipped", "truncated", "garbage"])
def test_index_cache_is_only_a_cache(tmp_path: Path, damage: str) -> None:
    fs = rich_store(tmp_path)
    before = fs.state(with_deleted=True)
    msgs = all_msgs(fs, before.last_seq)
    fs.stop()
    cache = tmp_path / "msgs" / "index.cache"
    assert cache.exists()
    if damage == "deleted":
        cache.unlink()
    elif damage == "flipped":
        flip(cache, cache.stat().st_size // 2)
    elif damage == "truncated":
        cache.write_bytes(cache.read_bytes()[:20])
    else:
        cache.write_bytes(os.urandom(300))
    fs2 = FileStore(tmp_path, cfg(allow_msg_ttl=True), block_size=512)
    assert fs2.state(with_deleted=True) == before
    assert all_msgs(fs2, before.last_seq) == msgs
    assert not cache.exists()  # consumed at open: a stale one is never trusted
    if damage != "deleted":
        assert any("index.cache" in r for r in fs2.recovery_report)
    fs2.stop()


def test_manifest_detects_a_missing_block_file(tmp_path: Path) -> None:
    fs = filled(tmp_path, 40, block_size=800)
    fs.stop()
    files = blk_files(tmp_path)
    gone = sorted(record_spans(files[1]))
    files[1].unlink()
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    st = fs2.state()
    assert st.lost is not None and st.lost.msgs == gone
    assert st.msgs == 40 - len(gone) and st.last_seq == 40
    assert any("missing" in r for r in damage(fs2.recovery_report))
    fs2.stop()


def test_manifest_keeps_last_seq_when_the_last_block_vanishes(tmp_path: Path) -> None:
    fs = filled(tmp_path, 40, block_size=800)
    fs.stop()
    files = blk_files(tmp_path)
    tail = sorted(record_spans(files[-1]))
    files[-1].unlink()
    fs2 = FileStore(tmp_path, cfg(), block_size=800)
    st = fs2.state()
    assert st.last_seq == 40 and st.lost is not None and st.lost.msgs == tail
    assert fs2.store_msg("x", None, b"")[0] == 41
    fs2.stop()


def test_block_header_size_is_what_the_format_says(tmp_path: Path) -> None:
    fs = filled(tmp_path, 1)
    fs.stop()
    (path,) = blk_files(tmp_path)
    assert record_spans(path)[1][0] == BLOCK_HDR_SIZE


def test_damage_found_at_read_time_is_reported_and_survives_restart(tmp_path: Path) -> None:
    fs = filled(tmp_path, 10)
    (path,) = blk_files(tmp_path)
    off, reclen = record_spans(path)[4]
    flip(path, off + reclen - 6)  # under the running store's feet
    fs._rwin = None  # no read-ahead copy of the old bytes
    assert fs.load_msg(4) is None
    st = fs.state()
    assert st.lost is not None and st.lost.msgs == [4] and st.msgs == 9
    assert any("seq 4" in r for r in damage(fs.recovery_report))
    assert fs.load_msg(5) is not None
    fs.stop()
    fs2 = FileStore(tmp_path, cfg())
    lost = fs2.state().lost
    assert lost is not None and lost.msgs == [4]  # judged again, not hidden by a tombstone
    fs2.stop()
