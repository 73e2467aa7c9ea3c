"""FileStore block files: rolling, naming, whole-file removal, erase, truncate, skips."""

from __future__ import annotations

import random
import time
from pathlib import Path

from natsd.storage.filestore import FileStore
from natsd.storage.filestore_format import BLOCK_HDR_SIZE, scan_block
from natsd.storage.store import StoreConfig

from .conftest import damage

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", **kw)  # type: ignore[arg-type]


def crash(fs: FileStore) -> None:
    fs._close_fds()
    fs._closed = True


def names(d: Path) -> list[int]:
    return sorted(int(p.name[:-4]) for p in (d / "msgs").glob("*.blk"))


def fill(fs: FileStore, n: int, data: bytes = b"0123456789" * 4) -> None:
    for i in range(n):
        fs.store_msg(f"k.{i % 5}", None, data)


def durable(fs: FileStore) -> None:
    fs.flush()
    fs.sync()


def test_blocks_roll_and_are_named_by_their_first_sequence(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 100)
    assert names(tmp_path) == []  # nothing touches the disk before flush
    durable(fs)
    firsts = names(tmp_path)
    assert len(firsts) > 5 and firsts[0] == 1
    for first in firsts:
        path = tmp_path / "msgs" / f"{first:020d}.blk"
        data = path.read_bytes()
        assert len(data) <= 1024
        scan = scan_block(data, first)
        assert scan.header_ok and scan.msgs[0][0] == first and not scan.bad
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert fs2.state().msgs == 100 and all(fs2.load_msg(q) for q in range(1, 101))
    fs2.stop()


def test_a_record_larger_than_a_block_gets_its_own(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=256)
    fs.store_msg("small", None, b"s")
    fs.store_msg("big", HDR, b"B" * 5000)
    fs.store_msg("small", None, b"t")
    durable(fs)
    assert names(tmp_path) == [1, 2, 3]
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=256)
    m = fs2.load_msg(2)
    assert m is not None and m.data == b"B" * 5000 and m.hdr == HDR
    fs2.stop()


def test_purge_drops_whole_files_after_sync(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 100)
    durable(fs)
    old = names(tmp_path)
    assert fs.purge() == 100
    fs.flush()
    # Old files go only once the tombstone that makes the purge stick is durable.
    assert set(old) <= set(names(tmp_path))
    fs.sync()
    assert names(tmp_path) == [101]
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    st = fs2.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.bytes) == (0, 101, 100, 0)
    assert damage(fs2.recovery_report) == []
    assert fs2.store_msg("x", None, b"")[0] == 101
    fs2.stop()


def test_purge_without_the_unlinks_still_sticks(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 50)
    durable(fs)
    fs.purge()
    fs.flush()
    crash(fs)  # the old blocks are still there; the purge tombstone is too
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    st = fs2.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (0, 51, 50, None)
    durable(fs2)  # empty leading blocks found at open go with the next flush+sync
    fs2.store_msg("x", None, b"")
    durable(fs2)
    assert names(tmp_path)[0] >= 50
    fs2.stop()


def test_compact_drops_only_the_emptied_leading_blocks(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 100)
    durable(fs)
    firsts = names(tmp_path)
    target = firsts[3] + 2  # inside the fourth block
    assert fs.compact(target) == target - 1
    durable(fs)
    assert names(tmp_path) == firsts[3:]
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    st = fs2.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (100 - target + 1, target, 100)
    fs2.stop()


def test_limits_age_out_whole_blocks(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(max_msgs=30), block_size=1024)
    fill(fs, 300)
    durable(fs)
    assert fs.state().msgs == 30
    assert len(names(tmp_path)) <= 30 * 62 // 1024 + 3
    fs.stop()


def test_max_age_drops_whole_blocks(tmp_path: Path) -> None:
    ns = 1_000_000_000
    fs = FileStore(tmp_path, cfg(max_age_ns=10 * ns), block_size=1024)
    t0 = time.time_ns()
    for i in range(200):
        fs.store_raw("a", None, b"x" * 40, i + 1, t0 + i * ns // 10)
    durable(fs)
    assert fs.expire(t0 + 20 * ns) == 101  # ts <= now - max_age: i = 0..100
    durable(fs)
    # ~11 records a block: the first surviving block holds seq 102 at most a block back.
    assert 102 - 12 <= names(tmp_path)[0] <= 102
    fs.stop()


def test_an_emptied_middle_block_waits_until_it_leads(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 60)
    durable(fs)
    firsts = names(tmp_path)
    second = range(firsts[1], firsts[2])
    for q in second:
        fs.remove_msg(q)
    durable(fs)
    # Its tombstones live in later blocks and the first block's messages may still need
    # it: a middle block is never removed.
    assert names(tmp_path) == firsts
    for q in range(1, firsts[1]):
        fs.remove_msg(q)
    durable(fs)
    assert names(tmp_path) == firsts[2:]
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert fs2.state().first_seq == firsts[2] and damage(fs2.recovery_report) == []
    fs2.stop()


def test_erase_overwrites_the_bytes_on_disk(tmp_path: Path) -> None:
    secret = b"TOP-SECRET-" * 5
    fs = FileStore(tmp_path, cfg())
    fs.store_msg("a", None, b"public")
    fs.store_msg("s", HDR, secret)
    fs.store_msg("b", None, b"public")
    durable(fs)
    assert any(secret in p.read_bytes() for p in (tmp_path / "msgs").iterdir())
    assert fs.erase_msg(2)
    fs.store_msg("t", None, secret)  # erased while still in the write buffer
    assert fs.erase_msg(4)
    durable(fs)
    assert not any(secret in p.read_bytes() for p in (tmp_path / "msgs").iterdir())
    crash(fs)
    fs2 = FileStore(tmp_path, cfg())
    st = fs2.state(with_deleted=True)
    assert (st.msgs, st.deleted, st.lost) == (2, [2, 4], None) and st.last_seq == 4
    assert damage(fs2.recovery_report) == []
    fs2.stop()


def test_truncate_across_blocks(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    fill(fs, 100)
    fs.remove_msg(3)
    fs.remove_msg(40)
    durable(fs)
    firsts = names(tmp_path)
    cut = firsts[2] + 3
    fs.remove_msg(cut - 1)  # a deletion whose tombstone lands in a block truncate removes
    fs.truncate(cut)
    assert names(tmp_path) == firsts[:3]  # done synchronously
    st = fs.state(with_deleted=True)
    assert (st.last_seq, st.deleted) == (cut, [3, cut - 1])
    want = st
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert fs2.state(with_deleted=True) == want and damage(fs2.recovery_report) == []
    assert fs2.store_msg("n", None, b"")[0] == cut + 1
    fs2.stop()


def test_truncate_to_a_deleted_sequence_and_below_everything(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=512)
    fill(fs, 40)
    fs.remove_msg(20)
    fs.truncate(20)
    assert (fs.state().last_seq, fs.state().msgs) == (20, 19)
    fs.compact(15)
    fs.truncate(10)
    st = fs.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 11, 10)
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(), block_size=512)
    st = fs2.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 11, 10)
    fs2.truncate(0)
    assert names(tmp_path) == []
    fs2.stop()
    fs3 = FileStore(tmp_path, cfg(), block_size=512)
    st = fs3.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 0, 0)
    fs3.stop()


def test_huge_skip_costs_nothing(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg())
    fs.store_msg("a", None, b"1")
    t = time.perf_counter()
    fs.skip_msgs(2, 10**12)
    fs.store_msg("a", None, b"2")
    st = fs.state()
    assert (st.msgs, st.last_seq, st.num_deleted) == (2, 10**12 + 2, 10**12)
    m = fs.load_next_msg("a", 2)
    assert m is not None and m.seq == 10**12 + 2
    durable(fs)
    crash(fs)
    fs2 = FileStore(tmp_path, cfg())
    assert fs2.state().last_seq == 10**12 + 2 and fs2.state().lost is None
    assert fs2.filtered_state(2, "a").msgs == 1
    assert time.perf_counter() - t < 2
    fs2.stop()


def test_first_seq_config_survives_restart(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(first_seq=1000))
    fs.stop()
    fs2 = FileStore(tmp_path, StoreConfig(name="S"))  # reopened with a default config
    st = fs2.state()
    assert (st.first_seq, st.last_seq) == (1000, 999)
    assert fs2.store_msg("a", None, b"")[0] == 1000
    fs2.stop()


def test_delete_removes_the_files(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=512)
    fill(fs, 50)
    durable(fs)
    fs.delete()
    assert not (tmp_path / "msgs").exists()


def test_blocks_start_with_the_header(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=512)
    fill(fs, 30)
    fs.stop()
    for p in (tmp_path / "msgs").glob("*.blk"):
        scan = scan_block(p.read_bytes(), int(p.name[:-4]))
        assert scan.header_ok and scan.msgs[0][1] == BLOCK_HDR_SIZE


def test_settled_blocks_read_in_order_and_at_random(tmp_path: Path) -> None:
    """Blocks no longer written keep a mark per 8 records: reads walk from the marks, a
    reader going on through a block expands it (every record's place, at most a few blocks
    at a time), and tombstones between records are stepped over; all of it reads exactly
    what was stored, before and after a clean restart."""
    fs = FileStore(tmp_path, StoreConfig(name="S"), block_size=2048)
    want: dict[int, bytes] = {}
    for i in range(1, 1201):
        fs.store_msg(f"s.{i % 5}", None, b"%d" % i * (i % 9 + 1))
        want[i] = b"%d" % i * (i % 9 + 1)
        if i % 7 == 0:  # a tombstone lands between the records of the block being written
            fs.remove_msg(i - 3)
            del want[i - 3]
    fs.flush()
    rng = random.Random(5)
    for _round in range(2):
        assert len(fs._blocks) > 10
        got = {q: m.data for q in range(1, 1201) if (m := fs.load_msg(q)) is not None}
        assert got == want
        assert 0 < len(fs._expanded) <= 4  # expanded as read in order, bounded
        for q in rng.sample(range(1, 1201), 300):
            m = fs.load_msg(q)
            assert (m.data if m is not None else None) == want.get(q)
        assert [m.seq for m in fs.load_range(1, 5000)] == sorted(want)
        fs.stop()
        fs = FileStore(tmp_path, StoreConfig(name="S"), block_size=2048)
    fs.stop()
