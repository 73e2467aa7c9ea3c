"""``StreamStore.load_range``: the batch read behind a direct get, on every store (``kit``),
checked against the per-message loads it replaces; then the file store's own cases (records
in the write buffer and on disk, several blocks, a record gone bad after open)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from natsd.storage.filestore import FileStore
from natsd.storage.store import StoreConfig, StoredMsg, StreamStore, direct_size

from .conftest import StoreKit
from .test_filestore_recovery import blk_files, flip, record_spans

HDR = b"NATS/1.0\r\nA: B\r\n\r\n"


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", **kw)  # type: ignore[arg-type]


def reference(store: StreamStore, start: int, max_msgs: int, max_bytes: int) -> list[StoredMsg]:
    """What a direct get's per-message loop read before load_range existed."""
    out: list[StoredMsg] = []
    total = 0
    while len(out) < max_msgs:
        m = store.load_next_msg("", start)
        if m is None:
            break
        out.append(m)
        start = m.seq + 1
        total += direct_size(m)
        if max_bytes > 0 and total >= max_bytes:
            break
    return out


def seqs(msgs: list[StoredMsg]) -> list[int]:
    return [m.seq for m in msgs]


def fill(store: StreamStore, n: int) -> None:
    for i in range(1, n + 1):
        store.store_msg(f"r.{i % 4}", HDR if i % 3 == 0 else None, b"data-%d" % i)


def test_reads_live_messages_in_order(kit: StoreKit) -> None:
    store = kit.make()
    fill(store, 10)
    got = store.load_range(1, 100)
    assert seqs(got) == list(range(1, 11))
    for m in got:
        assert m == store.load_msg(m.seq)
    assert seqs(store.load_range(4, 3)) == [4, 5, 6]
    assert seqs(store.load_range(0, 2)) == [1, 2]  # below the first: from the first


def test_steps_over_deleted_sequences(kit: StoreKit) -> None:
    store = kit.make()
    fill(store, 12)
    for s in (1, 2, 5, 6, 7, 11):
        assert store.remove_msg(s)
    assert seqs(store.load_range(1, 100)) == [3, 4, 8, 9, 10, 12]
    assert seqs(store.load_range(5, 2)) == [8, 9]  # starting on a deleted sequence
    assert seqs(store.load_range(11, 5)) == [12]
    store.skip_msgs(13, 5)
    store.store_msg("r.x", None, b"after")
    assert seqs(store.load_range(12, 5)) == [12, 18]


def test_max_bytes_ends_with_the_message_that_reaches_it(kit: StoreKit) -> None:
    store = kit.make()
    fill(store, 10)
    sizes = [direct_size(m) for m in store.load_range(1, 100)]
    assert sizes[0] == len("r.1") + len(b"data-1")
    assert sizes[2] == len("r.3") + len(HDR) + len(b"data-3")
    # Exactly the first two: ends with the second; one byte more: ends with the third.
    assert seqs(store.load_range(1, 100, sizes[0] + sizes[1])) == [1, 2]
    assert seqs(store.load_range(1, 100, sizes[0] + sizes[1] + 1)) == [1, 2, 3]
    assert seqs(store.load_range(1, 100, 1)) == [1]  # at least one message
    assert seqs(store.load_range(1, 100, 0)) == list(range(1, 11))  # 0: no byte limit
    assert seqs(store.load_range(1, 2, 10**9)) == [1, 2]  # the count still applies


def test_unicode_subjects_count_utf8_bytes(kit: StoreKit) -> None:
    store = kit.make()
    store.store_msg("ü.é", None, b"abc")
    store.store_msg("plain", None, b"abc")
    n = len("ü.é".encode()) + 3
    assert seqs(store.load_range(1, 10, n)) == [1]
    assert seqs(store.load_range(1, 10, n + 1)) == [1, 2]


def test_past_the_end_empty_and_no_count(kit: StoreKit) -> None:
    store = kit.make()
    assert store.load_range(1, 10) == []
    fill(store, 3)
    assert store.load_range(4, 10) == []
    assert store.load_range(1000, 10) == []
    assert store.load_range(1, 0) == []
    assert store.load_range(1, -1) == []
    store.purge()
    assert store.load_range(1, 10) == []
    store.store_msg("r.0", None, b"x")
    assert seqs(store.load_range(1, 10)) == [4]


def test_matches_per_message_loads_after_random_removals(kit: StoreKit) -> None:
    rng = random.Random(7)
    store = kit.make()
    for _ in range(300):
        hdr = HDR if rng.random() < 0.3 else None
        store.store_msg(f"k.{rng.randrange(6)}", hdr, rng.randbytes(rng.randrange(40)))
    for s in rng.sample(range(1, 301), 120):
        store.remove_msg(s)
    store.compact(20)
    for _ in range(200):
        start = rng.randrange(0, 320)
        n = rng.randrange(0, 40)
        mb = rng.choice([0, 1, rng.randrange(1, 800)])
        want = reference(store, start, n, mb)
        assert store.load_range(start, n, mb) == want, (start, n, mb)
        assert StreamStore.load_range(store, start, n, mb) == want  # the interface's default


def test_survives_a_restart(kit: StoreKit) -> None:
    if not kit.persistent:
        pytest.skip("memory stores do not restart")
    store = kit.make()
    fill(store, 20)
    store.remove_msg(10)
    store = kit.reopen(store)
    got = store.load_range(1, 100)
    assert seqs(got) == [s for s in range(1, 21) if s != 10]
    assert got == reference(store, 1, 100, 0)


# ------------------------------------------------------------------------- file store only


def test_file_store_reads_across_blocks_buffer_and_disk(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=512)
    for i in range(1, 41):
        fs.store_msg(f"b.{i}", HDR if i % 2 else None, b"p" * (i % 7) + b"%d" % i)
        if i == 25:
            fs.flush()  # 1..25 on disk, 26..40 in write buffers
    assert len(fs._blocks) > 3
    fs.remove_msg(24)
    fs.remove_msg(26)
    got = fs.load_range(1, 100)
    assert seqs(got) == [s for s in range(1, 41) if s not in (24, 26)]
    assert got == reference(fs, 1, 100, 0)
    for start in range(0, 42):
        for n in (1, 2, 7, 100):
            assert fs.load_range(start, n) == reference(fs, start, n, 0)
    fs.stop()


def test_file_store_large_records_and_small_windows(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg())
    payloads = [bytes([i]) * (200_000 + i * 50_000) for i in range(12)]  # > the read window
    for i, p in enumerate(payloads):
        fs.store_msg("big", None, p)
        fs.store_msg("small", None, b"s%d" % i)
    fs.flush()
    got = fs.load_range(1, 100)
    assert [m.data for m in got[::2]] == payloads
    assert got == reference(fs, 1, 100, 0)
    fs.stop()


def test_file_store_record_gone_bad_after_open(tmp_path: Path) -> None:
    """A record that checked out at open but fails on read is skipped, reported as lost and
    dropped from the index, like ``load_msg`` does; the batch goes on past it."""
    fs = FileStore(tmp_path, cfg())
    fill(fs, 20)
    fs.flush()
    (path,) = blk_files(tmp_path)
    off, reclen = record_spans(path)[7]
    flip(path, off + reclen - 6)  # a payload byte
    off, reclen = record_spans(path)[8]
    flip(path, off + 13)  # the sequence field
    fs._rwin = None  # nothing cached from before the damage
    got = fs.load_range(5, 6)
    assert seqs(got) == [5, 6, 9, 10, 11, 12]
    st = fs.state()
    assert st.lost is not None and st.lost.msgs == [7, 8] and st.lost.bytes > 0
    assert st.msgs == 18
    assert any("seq 7" in r for r in fs.recovery_report)
    assert fs.load_msg(7) is None and fs.load_msg(8) is None
    assert seqs(fs.load_range(1, 100)) == [s for s in range(1, 21) if s not in (7, 8)]
    fs.stop()


def test_file_store_record_gone_bad_in_the_write_buffer(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg())
    fill(fs, 5)
    blk = fs._blocks[-1]
    off, reclen = fs._rec(blk, blk.pos(3))
    pos = off - blk.flushed + reclen - 6
    blk.buf[pos] ^= 0x5A
    assert seqs(fs.load_range(1, 10)) == [1, 2, 4, 5]
    st = fs.state()
    assert st.lost is not None and st.lost.msgs == [3]
    fs.stop()


def test_file_store_lost_record_empties_a_leading_block(tmp_path: Path) -> None:
    """The bad record was its block's last live one: the block goes while the walk is in it."""
    fs = FileStore(tmp_path, cfg(), block_size=256)
    fill(fs, 12)
    fs.flush()
    first = fs._blocks[0]
    live = list(fs._iter_live(first.first, first.last_rec))
    for s in live[:-1]:
        fs.remove_msg(s)
    bad = live[-1]
    path = tmp_path / "msgs" / Path(first.path).name
    off, reclen = record_spans(path)[bad]
    flip(path, off + reclen - 2)
    fs._rwin = None
    got = fs.load_range(1, 100)
    assert seqs(got) == list(range(bad + 1, 13))
    assert fs.state().first_seq == bad + 1
    fs.stop()


def test_live_seqs_match_the_default_walk(kit: StoreKit) -> None:
    """``live_seqs`` (what a replica catching up compares with the leader's store) gives the
    same sequences as the interface's reading default, over deletions, bounds and limits."""
    store = kit.make(cfg())
    fill(store, 300)
    rng = random.Random(7)
    for seq in rng.sample(range(1, 301), 120):
        store.remove_msg(seq)
    store.compact(11)
    for start, end, limit in [(1, 300, 1000), (0, 50, 7), (40, 41, 5), (290, 400, 100),
                              (150, 149, 10), (1, 300, 0), (301, 500, 10)]:  # fmt: skip
        got = store.live_seqs(start, end, limit)
        assert got == StreamStore.live_seqs(store, start, end, limit), (start, end, limit)
        assert all(store.load_msg(s) is not None for s in got)
    assert len(store.live_seqs(1, 300, 1000)) == store.state().msgs
