"""``python -m natsd.jetstream.cluster.rejoin``: an operator drops a stopped server's meta
group records (the way out of meta damage on a majority, jetstream/cluster/driver.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from natsd.cluster.meta import META_GROUP
from natsd.jetstream.cluster import rejoin
from natsd.storage.wal import Wal


def _store(tmp: Path) -> Path:
    d = tmp / "store" / "jetstream" / "_cluster" / "wal"
    wal = Wal.open(str(d))
    wal.append_snapshot(META_GROUP, 1, 1, b"", b"", replace=True)
    wal.append_entries(META_GROUP, [(2, 1, 0, b'{"op":"noop"}')])
    wal.append_entries(b"S:$G:R3:1", [(2, 1, 0, b"m")])
    wal.close()
    return tmp / "store"


def test_it_drops_the_meta_group_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    assert rejoin.main([str(store)]) == 0
    assert "meta group records dropped" in capsys.readouterr().out
    wal = Wal.open(rejoin.wal_dir(str(store)))
    assert META_GROUP not in wal.groups and META_GROUP in wal.dropped
    assert wal.groups[b"S:$G:R3:1"].entries == [(2, 1, 0, b"m")]
    wal.close()
    # nothing left to drop
    assert rejoin.main([str(store)]) == 1
    assert "no meta group records" in capsys.readouterr().err


def test_it_refuses_a_log_not_closed_cleanly_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    wal_dir = Path(rejoin.wal_dir(str(store)))
    (wal_dir / "closed").unlink()  # running, or crashed
    assert rejoin.main([str(store)]) == 1
    assert "not closed cleanly" in capsys.readouterr().err
    assert rejoin.main(["--force", str(wal_dir)]) == 0  # (the log's own directory works too)
    assert META_GROUP not in Wal.open(str(wal_dir)).groups


def test_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert rejoin.main([]) == 2
    assert rejoin.main([str(tmp_path / "nothing")]) == 1
    assert "no node log" in capsys.readouterr().err
