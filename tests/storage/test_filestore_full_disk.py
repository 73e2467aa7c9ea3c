"""FileStore on a full disk after a purge: the purged blocks' files must not keep holding
the space every later flush needs (they are unlinked only after a flush + sync)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from natsd.storage.fileio import FileIO
from natsd.storage.filestore import FileStore
from natsd.storage.store import ErrStoreIO, StoreConfig

from .conftest import damage


def cfg() -> StoreConfig:
    return StoreConfig(name="S")


def blocks(d: Path) -> list[str]:
    return sorted(p.name for p in (d / "msgs").glob("*.blk"))


def full_disk_for(data_len: int, real: Any) -> Any:
    """os.write that refuses (ENOSPC) any write carrying a message of ``data_len`` bytes:
    small writes (tombstones, block headers) still fit, like a nearly full disk."""

    def fake(fd: int, data: Any) -> int:
        if len(data) >= data_len:
            raise OSError(errno.ENOSPC, "No space left on device")
        return int(real(fd, data))

    return fake


def test_failed_flush_after_purge_frees_the_purged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=1024)
    for i in range(20):
        fs.store_msg(f"s.{i}", None, b"x" * 200)
    fs.flush()
    fs.sync()
    old = blocks(tmp_path)
    assert len(old) > 3
    assert fs.purge() == 20
    assert blocks(tmp_path) == old  # still there: unlinked after the next flush + sync

    fs.store_msg("big", None, b"y" * 500)
    monkeypatch.setattr(FileIO, "write", staticmethod(full_disk_for(500, os.write)))
    with pytest.raises(ErrStoreIO):
        fs.flush()
    monkeypatch.undo()
    # The big message was rolled back, but the purge's tombstone was written on its own
    # and made durable, so the purged files are gone and their space is free again.
    assert not set(old) & set(blocks(tmp_path))
    st = fs.state()
    assert (st.msgs, st.first_seq, st.last_seq) == (0, 22, 21)

    seq, _ = fs.store_msg("after", None, b"z" * 500)
    assert seq == 22
    assert fs.flush() == 22
    fs.sync()
    fs.stop()

    fs2 = FileStore(tmp_path, cfg(), block_size=1024)
    st = fs2.state()
    assert (st.msgs, st.first_seq, st.last_seq, st.lost) == (1, 22, 22, None)
    m = fs2.load_msg(22)
    assert m is not None and m.data == b"z" * 500
    assert damage(fs2.recovery_report) == []
    fs2.stop()
