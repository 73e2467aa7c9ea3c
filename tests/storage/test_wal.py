"""The node WAL (storage/wal.py): replay, segment rotation and deletion, torn tails,
damage in the middle, and power loss through the fault-injecting file layer.

The oracle is the log's own in-memory view: after every append the test records what each
group holds (``_view``); a reopened log must show exactly the view at the last record that
reached the disk, and after a power loss, a view no older than the last ``commit``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from reliability.faultfs import Crash, FaultFS

from natsd.storage.wal import (
    ENTRIES,
    HARDSTATE,
    SEG_HDR_SIZE,
    GroupLog,
    Wal,
    WalError,
    encode_record,
)

View = dict[bytes, tuple[object, ...]]


def _view(wal: Wal) -> View:
    return {
        name: (
            g.term,
            g.vote,
            g.commit,
            g.snap_index,
            g.snap_term,
            g.snap_conf,
            g.snap_data,
            tuple(g.entries),
            g.compacted,
        )
        for name, g in sorted(wal.groups.items())
    }


class Driver:
    """Random Raft-like traffic for a few groups: appends (sometimes replacing a tail),
    hard states, snapshots, compactions, drops, and commits."""

    def __init__(self, wal: Wal, rng: random.Random) -> None:
        self.wal = wal
        self.rng = rng
        self.term = 1

    def step(self) -> None:
        rng, wal = self.rng, self.wal
        name = b"G%d" % rng.randrange(4)
        g = wal.groups.get(name) or GroupLog()
        op = rng.random()
        if op < 0.55:
            last = g.last_index()
            # mostly the next index; now and then a conflicting tail is replaced
            first = (
                last + 1
                if rng.random() < 0.85 or last <= g.compacted
                else rng.randint(g.compacted + 1, last)
            )
            if rng.random() < 0.1:
                self.term += 1
            n = rng.randint(1, 5)
            ents = [(first + i, self.term, rng.randrange(3), rng.randbytes(rng.randrange(40)))
                    for i in range(n)]  # fmt: skip
            wal.append_entries(name, ents)
        elif op < 0.75:
            wal.append_hard_state(name, self.term, rng.randrange(4), g.last_index())
        elif op < 0.82 and g.entries:
            at = rng.choice(g.entries)  # a snapshot of its own state: later entries stay
            wal.append_snapshot(name, at[0], at[1], b"conf" + bytes([rng.randrange(9)]),
                                rng.randbytes(rng.randrange(30)))  # fmt: skip
        elif op < 0.85:
            # one received from a leader, at or past its log's end: the log restarts there
            at = g.last_index() + rng.randrange(4)
            wal.append_snapshot(name, at, self.term, b"recv", b"leader", replace=True)
        elif op < 0.95 and g.entries:
            wal.append_compact(name, rng.choice(g.entries)[0])
        elif op < 0.97 and name in wal.groups:
            wal.append_drop(name)
        else:
            wal.commit()


def test_replay_rotation_and_deletion_keep_every_group(tmp_path: Path) -> None:
    d = str(tmp_path / "wal")
    rng = random.Random(7)
    wal = Wal.open(d, segment_size=2048)
    drv = Driver(wal, rng)
    deleted: list[int] = []
    for i in range(3000):
        drv.step()
        if i % 200 == 199:
            # what the driver does when the log grows: groups pinning the oldest segment
            # snapshot and log their hard state again, then old segments go
            for name in wal.pinning():
                g = wal.groups[name]
                if g.entries:
                    idx, term = g.entries[-1][0], g.entries[-1][1]
                    wal.append_snapshot(name, idx, term, g.snap_conf, b"s")
                wal.checkpoint(name)
            deleted += wal.delete_obsolete()
        if i % 500 == 499:
            want = _view(wal)
            wal.close()
            wal = Wal.open(d, segment_size=2048)
            drv.wal = wal
            assert _view(wal) == want, f"after {i + 1} steps"
            assert not any(g.damaged for g in wal.groups.values())
    assert len(wal.segments) > 1 and deleted, "rotation and deletion were exercised"
    assert all(not os.path.exists(os.path.join(d, f"{n:020d}.wal")) for n in deleted)
    wal.close()


def test_replaced_tail_snapshot_and_compaction_semantics(tmp_path: Path) -> None:
    d = str(tmp_path / "wal")
    wal = Wal.open(d)
    g = b"S-ORDERS"
    wal.append_entries(g, [(1, 1, 0, b"a"), (2, 1, 0, b"b"), (3, 1, 0, b"c")])
    wal.append_entries(g, [(2, 2, 0, b"B")])  # a new leader replaced index 2 on
    wal.append_hard_state(g, 2, 5, 2)
    wal.commit()
    wal.close()
    wal = Wal.open(d)
    log = wal.groups[g]
    assert log.entries == [(1, 1, 0, b"a"), (2, 2, 0, b"B")] and (log.term, log.vote) == (2, 5)
    # a local snapshot keeps the entries after it; a received one replaces the log
    wal.append_entries(g, [(3, 2, 0, b"c"), (4, 2, 0, b"d")])
    wal.append_snapshot(g, 3, 2, b"cs", b"state@3")
    assert wal.groups[g].entries == [(4, 2, 0, b"d")] and wal.groups[g].compacted == 3
    wal.append_snapshot(g, 10, 3, b"cs", b"state@10", replace=True)
    assert wal.groups[g].entries == [] and wal.groups[g].first_index() == 11
    wal.append_entries(g, [(11, 3, 0, b"x")])
    wal.append_drop(b"S-OLD")
    wal.close()
    wal = Wal.open(d)
    log = wal.groups[g]
    assert (log.snap_index, log.snap_data, log.entries) == (10, b"state@10", [(11, 3, 0, b"x")])
    wal.close()


def test_every_cut_of_the_last_write_is_a_torn_tail(tmp_path: Path) -> None:
    """The last write cut at each byte: recovery keeps the records before it, cuts the rest,
    marks nothing damaged, and appends continue after the cut."""
    src = tmp_path / "src"
    wal = Wal.open(str(src))
    wal.append_entries(b"A", [(1, 1, 0, b"first")])
    wal.append_hard_state(b"A", 1, 1, 1)
    wal.commit()
    before = _view(wal)
    seg = src / "00000000000000000001.wal"
    keep = seg.stat().st_size
    wal.append_entries(b"A", [(2, 1, 0, b"second"), (3, 1, 0, b"third")])
    wal.append_hard_state(b"B", 4, 2, 0)
    wal.close()
    full = seg.read_bytes()
    for cut in range(keep, len(full)):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / seg.name).write_bytes(full[:cut])
        w = Wal.open(str(d))
        got = _view(w)
        # whole records that fit stay; nothing partial, nothing damaged
        assert got == before or set(got) <= {b"A", b"B"}, cut
        assert not any(g.damaged for g in w.groups.values()), cut
        assert (d / seg.name).stat().st_size <= cut
        w.append_entries(b"A", [(w.groups[b"A"].last_index() + 1, 1, 0, b"after")])
        after = _view(w)
        w.close()
        assert _view(Wal.open(str(d))) == after, cut
    # and an uncut copy reads back entirely
    w = Wal.open(str(src))
    assert w.groups[b"A"].entries[-1] == (3, 1, 0, b"third") and w.groups[b"B"].term == 4


def _records(wal_dir: Path) -> tuple[Path, bytes, list[int]]:
    seg = wal_dir / "00000000000000000001.wal"
    data = seg.read_bytes()
    starts = []
    pos = SEG_HDR_SIZE
    while pos < len(data):
        starts.append(pos)
        pos += int.from_bytes(data[pos + 8 : pos + 12], "little")
    return seg, data, starts


def _three_groups(d: Path) -> None:
    wal = Wal.open(str(d))
    for i in range(1, 4):
        for name in (b"A", b"B", b"C"):
            wal.append_entries(name, [(i, 1, 0, name * i)])
    wal.close()


def test_damage_before_the_tail_marks_the_record_group(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    _three_groups(d)
    seg, data, starts = _records(d)
    # the body of B's second record (index 2): its header still names the group
    pos = starts[4]
    bad = bytearray(data)
    bad[pos + 20] ^= 0x40
    seg.write_bytes(bytes(bad))
    wal = Wal.open(str(d))
    assert {n: g.damaged for n, g in wal.groups.items()} == {b"A": False, b"B": True, b"C": False}
    assert wal.damaged_records == 1 and wal.groups[b"A"].last_index() == 3
    # nothing was cut or deleted because of the damage
    assert seg.stat().st_size == len(data)


def test_damage_in_a_record_header_marks_every_group(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    _three_groups(d)
    seg, data, starts = _records(d)
    bad = bytearray(data)
    bad[starts[1] + 9] ^= 0x01  # the length field of B's first record: no group known
    seg.write_bytes(bytes(bad))
    wal = Wal.open(str(d))
    assert all(g.damaged for g in wal.groups.values()) and set(wal.groups) == {b"A", b"B", b"C"}


def test_a_valid_body_that_does_not_parse_is_damage(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    wal = Wal.open(str(d))
    wal.append_entries(b"A", [(1, 1, 0, b"x")])
    wal.close()
    seg = d / "00000000000000000001.wal"
    with open(seg, "ab") as f:
        f.write(encode_record(ENTRIES, b"Z", b"\xff\xff\xff\xff"))  # checksums fine, count absurd
        f.write(encode_record(HARDSTATE, b"A", (1).to_bytes(8, "little") * 3))
    wal = Wal.open(str(d))
    assert wal.groups[b"Z"].damaged and not wal.groups[b"A"].damaged
    assert (wal.groups[b"A"].term, wal.groups[b"A"].commit) == (1, 1)


def test_bad_arguments_and_foreign_files(tmp_path: Path) -> None:
    wal = Wal.open(str(tmp_path / "w"))
    with pytest.raises(WalError):
        wal.append_hard_state(b"", 1, 1, 1)
    with pytest.raises(WalError):
        wal.append_hard_state(b"x" * 2000, 1, 1, 1)
    wal.close()
    (tmp_path / "w" / "junk.wal").write_bytes(b"")
    with pytest.raises(WalError, match="unexpected file"):
        Wal.open(str(tmp_path / "w"))


@pytest.mark.parametrize("seed", range(40))
def test_power_loss_keeps_everything_committed(tmp_path: Path, seed: int) -> None:
    """Random traffic on FaultFS, power lost at a random operation, the disk a power loss
    could leave (torn writes included) reopened: the groups are exactly as they were after
    some record at or after the last commit that returned: nothing committed is lost,
    nothing half-written appears, nothing is damaged."""
    rng = random.Random(seed)
    root = tmp_path / "disk"
    root.mkdir()
    fs = FaultFS(root, crash_at=rng.randint(20, 400))
    d = str(root / "wal")
    views: list[View] = []
    committed = 0
    try:
        wal = Wal.open(d, io=fs, segment_size=rng.choice((1024, 4096, 1 << 20)))
        views.append(_view(wal))
        drv = Driver(wal, rng)
        for _ in range(50_000):  # until the power goes
            drv.step()  # at most one record
            views.append(_view(wal))
            if not wal.dirty and not wal._buf:
                committed = len(views) - 1  # all of it written and synced
    except Crash:
        pass
    assert fs.crashed, "the crash point was reached"
    image = tmp_path / "image"
    fs.materialize(image, rng, torn=True)
    wal_dir = image / "wal"
    got = _view(Wal.open(str(wal_dir))) if wal_dir.exists() else {}
    assert got in views[committed:], (seed, committed, len(views))


def test_a_wal_in_new_nested_directories_survives_a_power_loss(tmp_path: Path) -> None:
    """The server's WAL is ``jetstream/_cluster/wal``: Wal.open may create more than one
    directory, and each must be made durable in its parent, or a power loss takes the
    whole log with a name (the deterministic tier's seed 51 lost a meta log that way)."""
    root = tmp_path / "disk"
    root.mkdir()
    fs = FaultFS(root)
    wal = Wal.open(str(root / "jetstream" / "_cluster" / "wal"), io=fs)
    wal.append_entries(b"A", [(2, 1, 0, b"two")])
    wal.commit()
    assert fs.unsynced(root) == []
    image = tmp_path / "image"
    fs.materialize(image, random.Random(1), torn=True)
    got = Wal.open(str(image / "jetstream" / "_cluster" / "wal"))
    assert [e[3] for e in got.groups[b"A"].entries] == [b"two"]


# ---------------------------------------------------------------- damage: cuts, runs, drops


def _two_groups_then_a_tail(d: Path) -> tuple[Path, list[int]]:
    """A and B with three entries each, then A's entries 4 and 5 and a hard state at 5:
    the log's tail is A's alone. Closed cleanly; returns the segment and record starts."""
    wal = Wal.open(str(d))
    for i in range(1, 4):
        for name in (b"A", b"B"):
            wal.append_entries(name, [(i, 1, 0, name * i)])
    wal.append_entries(b"A", [(4, 1, 0, b"four")])
    wal.append_entries(b"A", [(5, 1, 0, b"five")])
    wal.append_hard_state(b"A", 1, 1, 5)
    wal.close()
    seg, _data, starts = _records(d)
    return seg, starts


def test_a_log_cut_short_after_a_clean_close_marks_the_groups_that_lost_records(
    tmp_path: Path,
) -> None:
    """After a clean close a short log is not a torn tail: acknowledged records are gone.
    Only the group whose records went is damaged, with how far its log had reached, and
    it stays damaged across clean restarts until a commit passes that."""
    d = tmp_path / "wal"
    seg, starts = _two_groups_then_a_tail(d)
    data = seg.read_bytes()
    seg.write_bytes(data[: starts[6] + 5])  # inside A's entry 4
    wal = Wal.open(str(d))
    a, b = wal.groups[b"A"], wal.groups[b"B"]
    assert (a.damaged, a.held, a.last_index()) == (True, 5, 3) and not b.damaged
    assert "cut off after the log was closed cleanly" in a.notes[0], a.notes
    assert wal.cut_after_close is not None and wal.cut_after_close[1] == len(data)
    # unrepaired, closed and opened again: still damaged, still held at 5
    wal.close()
    wal = Wal.open(str(d))
    a = wal.groups[b"A"]
    assert (a.damaged, a.held) == (True, 5) and "not repaired" in a.notes[0], a.notes
    # a leader commits past it: repaired, and a later open agrees
    wal.append_entries(b"A", [(4, 2, 0, b"4"), (5, 2, 0, b"5"), (6, 2, 0, b"6")])
    wal.append_hard_state(b"A", 2, 0, 5)
    assert wal.groups[b"A"].damaged  # (5 is what it held: not past it)
    wal.append_hard_state(b"A", 2, 0, 6)
    assert not wal.groups[b"A"].damaged
    wal.close()
    assert not any(g.damaged for g in Wal.open(str(d)).groups.values())


def test_without_a_clean_close_a_short_log_is_a_torn_tail(tmp_path: Path) -> None:
    """No clean-close record (a crash), or one that does not check out: the cut is a torn
    tail, as before."""
    for variant in ("crash", "garbled"):
        d = tmp_path / variant / "wal"
        seg, starts = _two_groups_then_a_tail(d)
        closed = d / "closed"
        if variant == "crash":
            closed.unlink()
        else:
            raw = bytearray(closed.read_bytes())
            raw[-1] ^= 0x01
            closed.write_bytes(bytes(raw))
        seg.write_bytes(seg.read_bytes()[: starts[6] + 5])
        wal = Wal.open(str(d))
        assert not any(g.damaged for g in wal.groups.values()), variant
        assert wal.groups[b"A"].last_index() == 3 and wal.cut_after_close is None
        assert not closed.exists()  # taken, and removed before any append


def test_a_group_whose_every_record_was_cut_comes_back_empty_and_damaged(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    wal = Wal.open(str(d))
    wal.append_entries(b"A", [(1, 1, 0, b"a")])
    wal.commit()
    wal.append_entries(b"LATE", [(1, 1, 0, b"x"), (2, 1, 0, b"y")])
    wal.close()
    seg, _data, starts = _records(d)
    seg.write_bytes(seg.read_bytes()[: starts[1]])
    wal = Wal.open(str(d))
    late = wal.groups[b"LATE"]
    assert (late.damaged, late.held, late.entries) == (True, 2, [])
    assert not wal.groups[b"A"].damaged


def test_damage_running_to_the_end_of_a_segment_marks_every_group(tmp_path: Path) -> None:
    """A segment that is not the last, cut short inside a record: whatever followed the
    cut in it is gone, of any group, so every group is damaged (those first seen in a
    later segment too), not only the cut record's."""
    d = tmp_path / "wal"
    wal = Wal.open(str(d), segment_size=200)
    for i in range(1, 6):
        wal.append_entries(b"A", [(i, 1, 0, b"a" * 30)])
        wal.append_entries(b"B", [(i, 1, 0, b"b" * 30)])
    wal.append_entries(b"C", [(1, 1, 0, b"c")])
    wal.close()
    first = d / "00000000000000000001.wal"
    assert len(sorted(d.glob("*.wal"))) > 2
    raw = first.read_bytes()
    first.write_bytes(raw[: len(raw) - 10])
    (d / "closed").unlink()  # (even after a crash: a segment that is not the last)
    wal = Wal.open(str(d), segment_size=200)
    assert all(g.damaged for g in wal.groups.values()), {
        n: g.damaged for n, g in wal.groups.items()
    }


def test_a_burst_over_two_records_marks_both_groups(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    _three_groups(d)
    seg, data, starts = _records(d)
    bad = bytearray(data)
    bad[starts[3] + 20] ^= 0x10  # A's second record, body
    bad[starts[4] + 20] ^= 0x10  # B's second record, body
    seg.write_bytes(bytes(bad))
    wal = Wal.open(str(d))
    assert {n: g.damaged for n, g in wal.groups.items()} == {b"A": True, b"B": True, b"C": False}
    assert wal.groups[b"A"].held == 3


def test_a_missing_segment_between_two_marks_every_group(tmp_path: Path) -> None:
    d = tmp_path / "wal"
    wal = Wal.open(str(d), segment_size=200)
    for i in range(1, 8):
        wal.append_entries(b"A", [(i, 1, 0, b"a" * 40)])
    wal.close()
    (d / "closed").unlink()
    (d / "00000000000000000002.wal").unlink()
    wal = Wal.open(str(d), segment_size=200)
    assert wal.groups[b"A"].damaged and "missing" in wal.groups[b"A"].notes[0]


def test_a_dropped_group_is_listed_and_a_new_one_of_its_name_is_sound(tmp_path: Path) -> None:
    """A group dropped after damage of unknown group, then created again: the damage was
    before the drop and is not the new group's (the meta group an operator dropped to
    rejoin it, jetstream/cluster/rejoin.py). Damage after the drop is."""
    d = tmp_path / "wal"
    _three_groups(d)
    seg, data, starts = _records(d)
    bad = bytearray(data)
    bad[starts[1] + 9] ^= 0x01  # a header: group unknown
    seg.write_bytes(bytes(bad))
    wal = Wal.open(str(d))
    assert wal.groups[b"B"].damaged
    wal.append_drop(b"B")
    wal.close()
    wal = Wal.open(str(d))
    assert b"B" not in wal.groups and wal.dropped == {b"B"}
    wal.append_entries(b"B", [(1, 1, 0, b"new")])
    wal.append_entries(b"NEW", [(1, 1, 0, b"n")])
    wal.close()
    wal = Wal.open(str(d))
    assert not wal.groups[b"B"].damaged and wal.dropped == set()
    assert wal.groups[b"NEW"].damaged  # (first seen after the damage: it may have been its)


def test_a_group_created_after_the_open_is_sound(tmp_path: Path) -> None:
    """Damage of unknown group marks the groups recovery finds (and those it finds after
    it), never one created once the log is open."""
    d = tmp_path / "wal"
    _three_groups(d)
    seg, data, starts = _records(d)
    bad = bytearray(data)
    bad[starts[1] + 9] ^= 0x01
    seg.write_bytes(bytes(bad))
    wal = Wal.open(str(d))
    assert all(g.damaged for g in wal.groups.values())
    wal.append_entries(b"FRESH", [(1, 1, 0, b"f")])
    assert not wal.groups[b"FRESH"].damaged
