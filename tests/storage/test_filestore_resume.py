"""Opening after a crash from the running checkpoint (``filestore_resume``).

Every case crashes a store (its files are left as they are, nothing stopped) and opens two
copies of the directory: one as it is, one without the checkpoint (the full scan). Both
must find the same state, subjects, ttl timers and messages. Where only new messages were
written since the checkpoint, the first open must have taken it and parsed only the blocks
written since; anything else must have taken the full scan.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from natsd.storage import filestore_format, filestore_resume
from natsd.storage.filestore import CHECKPOINT_MAX_SUBJECTS, FileStore
from natsd.storage.filestore_recovery import CHECKPOINT, MANIFEST, UNCLEAN, read_manifest

from .test_filestore_checkpoint import HDR, cfg
from .test_filestore_checkpoint import snapshot as _snapshot

RESUMED = "from the running checkpoint"
BLOCK = 1024


def snapshot(fs: FileStore) -> tuple[object, ...]:
    """State, subjects, messages, and the ttl timers of live messages (a running store
    drops those of deleted ones lazily)."""
    st, subjects, msgs, _ttl, last = _snapshot(fs)
    ttl = sorted(e for e in fs._ttl_heap if fs._where(e[1]) is not None)
    return st, subjects, msgs, ttl, last


def open_store(path: Path) -> FileStore:
    fs = FileStore(path, cfg(), block_size=BLOCK)
    # a checkpoint after every flush that follows a new block
    fs.checkpoint_every = fs.checkpoint_cost = 0.0
    fs._ckpt_next = 0.0
    return fs


def crash(fs: FileStore) -> None:
    """The process dies: what was flushed is in the files, nothing else happens."""
    fs._close_fds()
    fs._closed = True


def both(src: Path, tmp: Path) -> tuple[FileStore, FileStore]:
    """Open a copy as it is and a copy without the running checkpoint."""
    a, b = tmp / "a", tmp / "b"
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    (b / "msgs" / CHECKPOINT).unlink(missing_ok=True)
    return FileStore(a, cfg(), block_size=BLOCK), FileStore(b, cfg(), block_size=BLOCK)


def fill(fs: FileStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        ttl = 3600 if i % 7 == 0 else 0
        fs.store_msg(f"s.{i % 11}", HDR if i % 3 == 0 else None, b"p" * (i % 50), ttl=ttl)
        if i % 9 == 0:
            fs.flush()
    fs.flush()


def scanned_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first sequences of the blocks the resume path parses."""
    seen: list[int] = []
    real = filestore_format.scan_block

    def spy(data: bytes, first: int, interned: dict[bytes, str]) -> object:
        seen.append(first)
        return real(data, first, interned)

    monkeypatch.setattr(filestore_resume, "scan_block", spy)
    return seen


def test_new_messages_since_the_checkpoint_are_all_that_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = open_store(tmp_path / "s")
    fill(fs, 400)
    for seq in (3, 4, 50, 51, 52, 200):
        fs.remove_msg(seq)
    fill(fs, 40, 400)  # rolls a block: a checkpoint with the deletions in it
    assert (tmp_path / "s" / "msgs" / CHECKPOINT).exists()
    nblocks = len(fs._blocks)
    fs.checkpoint_every = 3600.0  # no more checkpoints: what follows is "written since"
    fs._ckpt_next = float("inf")
    fill(fs, 120, 440)
    want = snapshot(fs)
    crash(fs)
    seen = scanned_blocks(monkeypatch)
    a, b = both(tmp_path / "s", tmp_path)
    assert any(RESUMED in line for line in a.recovery_report), a.recovery_report
    assert all(line.startswith(UNCLEAN) for line in a.recovery_report)
    assert not any(RESUMED in line for line in b.recovery_report)
    assert snapshot(a) == snapshot(b) == want
    assert 0 < len(seen) < len(a._blocks) and len(a._blocks) > nblocks
    # and it goes on: a store, a delete, a clean stop and a clean open
    a.store_msg("s.after", None, b"x")
    a.remove_msg(8)
    after = snapshot(a)
    a.stop()
    assert snapshot(FileStore(tmp_path / "a", cfg(), block_size=BLOCK)) == after


def test_a_deletion_since_the_checkpoint_takes_the_full_scan(tmp_path: Path) -> None:
    fs = open_store(tmp_path / "s")
    fill(fs, 300)
    fs._ckpt_next = float("inf")
    fs.remove_msg(10)
    fill(fs, 20, 300)
    want = snapshot(fs)
    crash(fs)
    a, b = both(tmp_path / "s", tmp_path)
    assert not any(RESUMED in line for line in a.recovery_report)
    assert snapshot(a) == snapshot(b) == want


def test_a_torn_append_is_cut_as_the_full_scan_cuts_it(tmp_path: Path) -> None:
    fs = open_store(tmp_path / "s")
    fill(fs, 300)
    fs._ckpt_next = float("inf")
    fill(fs, 30, 300)
    last = Path(fs._blocks[-1].path)
    crash(fs)
    with last.open("r+b") as f:
        f.truncate(last.stat().st_size - 5)
    a, b = both(tmp_path / "s", tmp_path)
    assert any(RESUMED in line for line in a.recovery_report)
    assert any("torn tail" in line for line in a.recovery_report)
    assert snapshot(a) == snapshot(b)


@pytest.mark.parametrize("how", ["checkpoint", "old block", "missing block"])
def test_damage_or_a_missing_block_takes_the_full_scan(tmp_path: Path, how: str) -> None:
    fs = open_store(tmp_path / "s")
    fill(fs, 300)
    fs._ckpt_next = float("inf")
    fill(fs, 30, 300)
    second = Path(fs._blocks[1].path)
    crash(fs)
    msgs = tmp_path / "s" / "msgs"
    if how == "checkpoint":
        raw = bytearray((msgs / CHECKPOINT).read_bytes())
        raw[len(raw) // 2] ^= 0x10
        (msgs / CHECKPOINT).write_bytes(bytes(raw))
    elif how == "old block":
        raw = bytearray(second.read_bytes())
        raw[60] ^= 0x01
        second.write_bytes(bytes(raw))
    else:
        second.unlink()
    a, b = both(tmp_path / "s", tmp_path)
    assert not any(RESUMED in line for line in a.recovery_report)
    assert snapshot(a) == snapshot(b)


def test_blocks_retired_before_the_crash_go(tmp_path: Path) -> None:
    """Blocks left by a purge whose files are still there (an unlink that failed) are not
    in the checkpoint: every message in them was deleted before it. They go at open."""
    fs = open_store(tmp_path / "s")
    fill(fs, 300)
    first_blocks = [Path(b.path) for b in fs._blocks[:2]]
    kept = [(p, p.read_bytes()) for p in first_blocks]
    fs.compact(fs._blocks[2].first)  # the first two blocks retire
    fill(fs, 40, 300)  # a new block: a checkpoint without them (its sync unlinks them)
    fs._ckpt_next = float("inf")
    fill(fs, 10, 340)
    want = snapshot(fs)
    crash(fs)
    for p, data in kept:
        p.write_bytes(data)  # as if their unlink had failed
    a, b = both(tmp_path / "s", tmp_path)
    assert any(RESUMED in line for line in a.recovery_report), a.recovery_report
    assert any("retired before the crash" in line for line in a.recovery_report)
    assert snapshot(a) == snapshot(b) == want
    assert not any((tmp_path / "a" / "msgs" / p.name).exists() for p in first_blocks)


def test_a_clean_open_keeps_its_index_as_the_running_checkpoint(tmp_path: Path) -> None:
    fs = FileStore(tmp_path / "s", cfg(), block_size=BLOCK)
    fill(fs, 300)
    fs.stop()
    fs = FileStore(tmp_path / "s", cfg(), block_size=BLOCK)
    msgs = tmp_path / "s" / "msgs"
    assert not (msgs / MANIFEST).exists() and (msgs / CHECKPOINT).exists()
    fill(fs, 5, 300)
    want = snapshot(fs)
    crash(fs)
    a, b = both(tmp_path / "s", tmp_path)
    assert any(RESUMED in line for line in a.recovery_report)
    assert snapshot(a) == snapshot(b) == want


@pytest.mark.parametrize("seed", range(40))
def test_random_histories_resume_as_the_full_scan_recovers(tmp_path: Path, seed: int) -> None:
    """Random stores, deletes, erasures, purges and checkpoints, then a crash: the two opens
    agree with each other and with the store as it was."""
    rnd = random.Random(seed)
    fs = open_store(tmp_path / "s")
    for _step in range(rnd.randint(50, 400)):
        r = rnd.random()
        if r < 0.75:
            hdr = HDR if rnd.random() < 0.2 else None
            fs.store_msg(f"s.{rnd.randint(0, 20)}", hdr, b"d" * rnd.randint(0, 80), ttl=0)
        elif r < 0.85:
            st = fs.state()
            if st.msgs:
                fs.remove_msg(rnd.randint(st.first_seq, st.last_seq))
        elif r < 0.87:
            st = fs.state()
            if st.msgs:
                fs.erase_msg(rnd.randint(st.first_seq, st.last_seq))
        elif r < 0.88:
            fs.purge_ex(f"s.{rnd.randint(0, 20)}", 0, rnd.randint(0, 2))
        elif r < 0.885:
            fs.compact(fs.last_seq() - rnd.randint(0, 30))
        elif r < 0.95:
            fs.flush()
        elif r < 0.97:
            fs.sync()
        else:
            # checkpoints on (every flush after a new block) or off for a while
            fs._ckpt_next = 0.0 if rnd.random() < 0.5 else float("inf")
    fs.flush()
    want = snapshot(fs)
    crash(fs)
    a, b = both(tmp_path / "s", tmp_path)
    assert snapshot(a) == snapshot(b) == want


def test_no_running_checkpoint_past_its_subject_bound(tmp_path: Path) -> None:
    """Past CHECKPOINT_MAX_SUBJECTS the index would stall the loop: it is not written again
    (and a crash then reads the store whole)."""
    fs = open_store(tmp_path / "s")
    msgs = tmp_path / "s" / "msgs"
    for i in range(CHECKPOINT_MAX_SUBJECTS + 1):
        fs.store_msg(f"k.{i}", None, b"v")
        if i % 500 == 0:
            fs.flush()
    fs.flush()
    doc = read_manifest(str(msgs), [], fs._io, CHECKPOINT)
    assert doc is not None
    last = doc["last_seq"]
    assert isinstance(last, int) and 0 < last <= CHECKPOINT_MAX_SUBJECTS
    fill(fs, 200, 0)  # new blocks, but past the bound
    doc = read_manifest(str(msgs), [], fs._io, CHECKPOINT)
    assert doc is not None and doc["last_seq"] == last
    want = snapshot(fs)
    crash(fs)
    a, b = both(tmp_path / "s", tmp_path)
    assert snapshot(a) == snapshot(b) == want
