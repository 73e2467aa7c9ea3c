"""FileStore I/O contract: no syscalls on store, flush errors roll back, sync in a thread."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from natsd.storage.fileio import FileIO
from natsd.storage.filestore import FileStore
from natsd.storage.store import ErrStoreIO, StoreConfig

from .conftest import damage

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def cfg(**kw: object) -> StoreConfig:
    return StoreConfig(name="S", **kw)  # type: ignore[arg-type]


def crash(fs: FileStore) -> None:
    fs._close_fds()
    fs._closed = True


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, str]] = []

    def __call__(self, msgs: int, nbytes: int, seq: int, subject: str) -> None:
        self.calls.append((msgs, nbytes, seq, subject))


def failing(exc: OSError, times: int, real: Callable[..., Any]) -> Callable[..., Any]:
    left = [times]

    def fake(*args: Any) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise exc
        return real(*args)

    return fake


def test_store_msg_makes_no_system_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Storing writes nothing and syncs nothing (flush and sync do). The one call it may
    make is a read: a message a limit removes is read for its size and subject, which
    memory does not hold per message."""
    fs = FileStore(tmp_path, cfg(max_msgs_per_subject=50), block_size=512)
    fs.store_msg("warm", None, b"up")
    fs.flush()

    def boom(*_a: object) -> None:
        raise AssertionError("system call on the store path")

    for name in ("write", "pwrite", "open", "fsync", "fdatasync", "lseek", "unlink"):
        monkeypatch.setattr(FileIO, name, staticmethod(boom))
    for i in range(2000):  # rolls dozens of blocks and drops old ones via the limit
        fs.store_msg(f"s.{i % 7}", HDR if i % 2 else None, b"d" * 40, ttl=0)
    # Reads see what is still buffered.
    m = fs.load_msg(2001)
    assert m is not None and m.subject == "s.4" and m.hdr == HDR
    m = fs.load_next_msg("s.3", 1500)
    assert m is not None and m.subject == "s.3"
    monkeypatch.undo()
    assert fs.flush() == 2001
    fs.stop()


@pytest.mark.parametrize("partial", [False, True])
def test_enospc_rolls_back_the_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partial: bool
) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=4096)
    rec = Recorder()
    fs.register_updates(rec)
    for i in range(10):
        fs.store_msg("ok", None, b"%d" % i)
    assert fs.flush() == 10
    fs.sync()
    size_before = sum(p.stat().st_size for p in (tmp_path / "msgs").glob("*.blk"))
    fs.remove_msg(2)  # a deletion in the failed batch: kept in memory, retried on disk
    for _ in range(5):
        fs.store_msg("doomed", None, b"x" * 300)  # crosses into a new block
    real_write = os.write
    if partial:
        calls = [0]

        def half_then_fail(fd: int, data: Any) -> int:
            calls[0] += 1
            if calls[0] == 1:
                return real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(FileIO, "write", staticmethod(half_then_fail))
    else:
        monkeypatch.setattr(
            FileIO,
            "write",
            staticmethod(failing(OSError(errno.ENOSPC, "No space left"), 1, real_write)),
        )
    with pytest.raises(ErrStoreIO):
        fs.flush()
    monkeypatch.undo()
    # Files are back to their pre-flush size; the unwritten messages are gone from the
    # index and reported removed; earlier messages are intact and readable.
    assert sum(p.stat().st_size for p in (tmp_path / "msgs").glob("*.blk")) <= size_before
    assert [fs.load_msg(q) is None for q in range(11, 16)] == [True] * 5
    assert all(fs.load_msg(q) is not None for q in range(1, 11) if q != 2)
    removed = sorted(c[2] for c in rec.calls if c[0] < 0)
    assert removed == [2, 11, 12, 13, 14, 15]
    st = fs.state()
    assert (st.msgs, st.last_seq) == (9, 15)
    # Sequences are burned, not reused, and the next flush works.
    assert fs.store_msg("after", None, b"a")[0] == 16
    assert fs.flush() == 16
    fs.sync()
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(), block_size=4096)
    st = fs2.state(with_deleted=True)
    assert (st.msgs, st.last_seq, st.lost) == (10, 16, None)
    assert st.deleted == [2, 11, 12, 13, 14, 15]
    assert damage(fs2.recovery_report) == []
    fs2.stop()


def test_enospc_creating_a_block_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=256)
    fs.store_msg("a", None, b"1")
    fs.flush()
    for _ in range(10):
        fs.store_msg("a", None, b"x" * 50)
    monkeypatch.setattr(
        FileIO, "open", staticmethod(failing(OSError(errno.ENOSPC, "full"), 1, os.open))
    )
    with pytest.raises(ErrStoreIO):
        fs.flush()
    monkeypatch.undo()
    assert fs.state().msgs == 1
    fs.store_msg("a", None, b"2")
    fs.flush()
    fs.stop()
    fs2 = FileStore(tmp_path, cfg(), block_size=256)
    assert fs2.state().msgs == 2 and fs2.state().lost is None
    fs2.stop()


def test_failed_rollback_marks_the_store_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = FileStore(tmp_path, cfg())
    for i in range(5):
        fs.store_msg("a", None, b"%d" % i)
    fs.flush()
    fs.sync()
    fs.store_msg("a", None, b"lost")
    real_write = os.write

    def half(fd: int, data: Any) -> int:
        real_write(fd, bytes(data)[:10])
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(FileIO, "write", staticmethod(half))
    monkeypatch.setattr(
        FileIO, "ftruncate", staticmethod(failing(OSError(errno.EIO, "I/O"), 9, os.ftruncate))
    )
    with pytest.raises(ErrStoreIO):
        fs.flush()
    monkeypatch.undo()
    with pytest.raises(ErrStoreIO):
        fs.store_msg("a", None, b"refused")
    with pytest.raises(ErrStoreIO):
        fs.flush()
    assert [fs.load_msg(q) is not None for q in range(1, 7)] == [True] * 5 + [False]
    crash(fs)
    fs2 = FileStore(tmp_path, cfg())  # recovery cuts the torn tail away
    assert fs2.state().msgs == 5 and fs2.state().lost is None
    assert any("torn" in r for r in damage(fs2.recovery_report))
    fs2.stop()


def test_fsync_failure_poisons_sync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = FileStore(tmp_path, cfg())
    fs.store_msg("a", None, b"1")
    fs.flush()
    err = OSError(errno.EIO, "I/O error")
    monkeypatch.setattr(FileIO, "fdatasync", staticmethod(failing(err, 1, os.fdatasync)))
    monkeypatch.setattr(FileIO, "fsync", staticmethod(failing(err, 1, os.fsync)))
    with pytest.raises(ErrStoreIO):
        fs.sync()
    monkeypatch.undo()
    # After a failed fsync nothing flushed before it can be called durable, ever again.
    fs.store_msg("a", None, b"2")
    fs.flush()
    with pytest.raises(ErrStoreIO):
        fs.sync()
    m = fs.load_msg(1)
    assert m is not None and m.data == b"1"
    fs._close_fds()


def test_sync_in_a_thread_while_storing(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(max_msgs=3000), block_size=2048)
    stop = threading.Event()
    errors: list[BaseException] = []
    syncs = [0]

    def syncer() -> None:
        while not stop.is_set():
            try:
                fs.sync()
                syncs[0] += 1
            except BaseException as e:
                errors.append(e)
                return

    t = threading.Thread(target=syncer)
    t.start()
    try:
        for i in range(20_000):
            fs.store_msg(f"t.{i % 11}", HDR if i % 5 == 0 else None, b"p" * (i % 64))
            if i % 97 == 0:
                fs.remove_msg(i - 50)
            if i % 50 == 0:
                fs.flush()  # rolls blocks, creates files, queues unlinks of old ones
            if i % 5000 == 4999:
                fs.purge_ex("t.3", 0, 10)
        fs.flush()
    finally:
        stop.set()
        t.join()
    assert not errors and syncs[0] > 0
    fs.sync()
    want = fs.state(with_deleted=True)
    msgs = {q: fs.load_msg(q) for q in range(want.first_seq, want.last_seq + 1)}
    crash(fs)
    fs2 = FileStore(tmp_path, cfg(max_msgs=3000), block_size=2048)
    assert fs2.state(with_deleted=True) == want
    assert {q: fs2.load_msg(q) for q in msgs} == msgs
    assert damage(fs2.recovery_report) == []
    fs2.stop()


def test_open_descriptors_stay_bounded(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=256)
    for i in range(1000):
        fs.store_msg("a", None, b"%040d" % i)
    fs.flush()
    fs.stop()
    fds_before = len(os.listdir("/proc/self/fd"))
    fs2 = FileStore(tmp_path, cfg(), block_size=256)
    for q in range(1, 1001):
        m = fs2.load_msg(q)
        assert m is not None and m.data == b"%040d" % (q - 1)
    fs2.erase_msg(3)
    fs2.flush()
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 18
    fs2.stop()
    assert len(os.listdir("/proc/self/fd")) == fds_before


def test_flush_returns_last_sequence_and_reads_span_buffer_and_disk(tmp_path: Path) -> None:
    fs = FileStore(tmp_path, cfg(), block_size=300)
    assert fs.flush() == 0
    for i in range(10):
        fs.store_msg("a" if i % 2 else "b", None, b"%d" % i)
    assert fs.flush() == 10
    for i in range(10, 20):
        fs.store_msg("a" if i % 2 else "b", None, b"%d" % i)
    got = []
    seq = 0
    while (m := fs.load_next_msg("a", seq + 1)) is not None:
        got.append(m.data)
        seq = m.seq
    assert got == [b"%d" % i for i in range(1, 20, 2)]
    last = fs.load_last_msg("b")
    assert last is not None and last.data == b"18"
    fs.skip_msgs(21, 3)
    assert fs.flush() == 23
    fs.stop()
