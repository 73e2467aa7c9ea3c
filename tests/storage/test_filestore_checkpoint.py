"""The clean-shutdown index: a clean restart reads no record; anything else scans.

Each case builds a store with the shapes the index must carry (several blocks, dense and
with gaps, deletions, ttls, many subjects, an erased record), stops it cleanly, and opens it
again with the block scanner made to fail: the open must not need it, and must find the same
state and messages. Damage or a crash sends the open down the full scan instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from natsd.storage import filestore_recovery
from natsd.storage.filestore import FileStore
from natsd.storage.filestore_recovery import MANIFEST
from natsd.storage.store import StoreConfig, StoredMsg

from .conftest import damage

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", allow_msg_ttl=True, **kw)  # type: ignore[arg-type]


def build(path: Path) -> FileStore:
    fs = FileStore(path, cfg(), block_size=1024)
    for i in range(300):
        fs.store_msg(f"s.{i % 13}", HDR if i % 3 == 0 else None, b"p" * (i % 40), ttl=0)
        if i % 50 == 0:
            fs.flush()
    fs.skip_msgs(fs.last_seq() + 1, 1000)  # a block with a gap in its sequences
    for i in range(40):
        fs.store_msg("t.ttl" if i % 2 else "t.x", None, b"q%d" % i, ttl=3600 if i % 2 else 0)
    for seq in (5, 6, 7, 120, 121, 299):
        fs.remove_msg(seq)
    fs.erase_msg(200)
    fs.purge_ex("s.4", 0, 3)
    fs.flush()
    fs.sync()
    return fs


def snapshot(fs: FileStore) -> tuple[object, ...]:
    st = fs.state(with_deleted=True)
    msgs: list[StoredMsg | None] = [fs.load_msg(q) for q in range(1, st.last_seq + 1)]
    return (
        st,
        fs.subjects_state(">"),
        [(m.subject, m.seq, m.ts, m.hdr, m.data, m.ttl) for m in msgs if m is not None],
        sorted(fs._ttl_heap),
        fs.load_range(1, 10_000)[-1].seq,
    )


def no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a clean restart scanned a block")

    monkeypatch.setattr(filestore_recovery, "scan_block", refuse)


def test_a_clean_restart_reads_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = build(tmp_path)
    want = snapshot(fs)
    assert len(fs._blocks) > 3 and any(b.seqs is not None for b in fs._blocks)
    fs.stop()
    with monkeypatch.context() as m:
        no_scan(m)
        fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert not (tmp_path / "msgs" / MANIFEST).exists()  # gone before anything is written
    assert snapshot(fs2) == want
    assert fs2.recovery_report == []
    # It goes on working, and the next clean restart takes the index again.
    seq, _ts = fs2.store_msg("s.new", None, b"after")
    fs2.remove_msg(10)
    want = snapshot(fs2)
    fs2.stop()
    with monkeypatch.context() as m:
        no_scan(m)
        fs3 = FileStore(tmp_path, cfg(), block_size=1024)
    assert snapshot(fs3) == want and fs3.load_msg(seq) is not None
    fs3.stop()


def test_after_a_crash_the_blocks_are_scanned(tmp_path: Path) -> None:
    fs = build(tmp_path)
    want = snapshot(fs)
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)  # takes the index and deletes it
    fs2._close_fds()
    fs2._closed = True  # killed: no index written
    fs3 = FileStore(tmp_path, cfg(), block_size=1024)
    assert any("unclean shutdown" in r for r in fs3.recovery_report)
    assert snapshot(fs3) == want
    fs3.stop()


@pytest.mark.parametrize("where", ["first block", "last block"])
def test_damage_while_stopped_is_found_by_the_full_scan(tmp_path: Path, where: str) -> None:
    fs = build(tmp_path)
    fs.stop()
    blocks = sorted((tmp_path / "msgs").glob("*.blk"))
    path = blocks[0] if where == "first block" else blocks[-1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x44
    data[len(data) // 2 + 7] ^= 0x21  # two bits apart: beyond single-bit correction
    path.write_bytes(bytes(data))
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert damage(fs2.recovery_report), fs2.recovery_report
    fs2.stop()


def test_a_block_file_gone_while_stopped_is_reported(tmp_path: Path) -> None:
    fs = build(tmp_path)
    fs.stop()
    blocks = sorted((tmp_path / "msgs").glob("*.blk"))
    os.unlink(blocks[1])
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    st = fs2.state()
    assert st.lost is not None and st.lost.msgs
    assert any("missing" in r for r in fs2.recovery_report)
    fs2.stop()


def test_an_index_that_does_not_parse_is_ignored(tmp_path: Path) -> None:
    fs = build(tmp_path)
    want = snapshot(fs)
    fs.stop()
    idx = tmp_path / "msgs" / MANIFEST
    raw = bytearray(idx.read_bytes())
    raw[-5] ^= 0xFF
    idx.write_bytes(bytes(raw))
    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    assert any("damaged" in r for r in fs2.recovery_report)
    assert snapshot(fs2) == want
    fs2.stop()
