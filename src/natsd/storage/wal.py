"""The node's write-ahead log: one per server, shared by every Raft group on it.

Why one log for all groups: one ``fdatasync`` per event-loop turn then covers every group's
appends and hard states at once (design-clustering §4.3); a log per group would cost one
sync per group per turn. The stream stores stay the state machines; only this log is
synced per batch.

Layout, in ``<directory>`` (``<store_dir>/jetstream/_cluster/wal/`` on a server)::

    00000000000000000001.wal     segments, named by their number, append-only
    00000000000000000002.wal

A segment starts with a 16-byte header and then holds records back to back::

    segment header  <4sHHI4x  magic b"\\x89NWL", version, reserved (0), segment number
                              ... and the crc32 of those 12 bytes in the last 4
    record          <4sI      magic b"\\xf1NWR", crc32 of the 7 field bytes that follow
                    <IBH      record length (all of it, trailer included), kind,
                              group name length
                    group name, body (by kind, below)
                    <I        crc32 of everything above

Record kinds and bodies (all integers little-endian):

- ``ENTRIES``: ``<I`` count, then per entry ``<QQBI`` index, term, type, data length, data.
  Entries replace whatever the group held from their first index on (Raft overwrites a
  conflicting tail), so replay truncates before it appends.
- ``HARDSTATE``: ``<QQQ`` term, vote, commit.
- ``SNAPSHOT``: ``<QQB`` index, term, replace flag, ``<I`` + conf state bytes, ``<I`` + data
  bytes. The log up to ``index`` is replaced by the snapshot; with the flag (a snapshot
  received from the leader, etcd's ``ApplySnapshot``) the entries after it go too, without
  it (a snapshot the node took of its own state) they stay. The flag, not the entries found
  at replay, decides: older segments may be gone by then.
- ``COMPACT``: ``<Q`` index: entries up to it are no longer needed.
- ``DROP``: the group is gone.

Framing as in the file store (``filestore_format``): the header crc makes the length
trustworthy before the body is checked, so a damaged record is skipped by its own length or,
when its header is damaged, by resynchronising on the next record that checks out.

Recovery (``Wal.open``): a record that fails its checks with nothing valid after it is a
torn append of the last write (it was never acknowledged: acks wait for the sync): the
segment is cut there and appends continue. A bad record *followed by* a valid one is
damage: the groups it touches (all groups, when its header cannot be trusted, or when the
bad bytes run to the end of a segment that is not the last: what followed there is gone)
come back ``damaged`` and must stay out of elections until repaired (§4.8). Nothing is
deleted because of damage.

A torn tail and a log cut short by damage look alike, except after a clean close:
``close`` leaves ``closed`` beside the segments (written after the last sync, through a
synced rename) with the last segment's number and size and, per group, how far its log
reached (``GroupLog.reach``) and, when it was still damaged, how far it had reached
before the damage (``held``). ``open`` reads it and
removes it (durably, before anything is appended: a crash later must not pass for a clean
close). A group that now reaches less than it did at the close lost acknowledged records
to a cut (or a deleted segment): it is damaged as for a bad record, and ``held`` says how
far its log had reached. A group still damaged at the close stays so until a hard state
whose commit passes ``held`` is appended (the leader committed past all it had held), so
that a restart does not forget unrepaired damage whose record went with its segment.
Without the file (a crash, or a log older than it) a short tail is a torn tail, as before::

    closed      <4sI      magic b"\x89NWC", crc32 of what follows
                <QQI      last segment number, its size, group count
                per group <H name length, name, <QQ reach, held (0: not damaged)

Segments rotate at ``segment_size``; ``delete_obsolete`` removes a leading segment once every
group it holds records for has compacted past it, dropped, or written a later hard state and
snapshot. All I/O goes through ``FileIO``, so the fault-injecting layer sees it.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from natsd.core.crc import crc32 as record_crc
from natsd.storage.fileio import DEFAULT_IO, O_CLOEXEC, FileIO

__all__ = [
    "COMPACT",
    "DROP",
    "ENTRIES",
    "HARDSTATE",
    "SNAPSHOT",
    "GroupLog",
    "Wal",
    "WalEntry",
    "WalError",
]

SEG_MAGIC: Final = b"\x89NWL"
REC_MAGIC: Final = b"\xf1NWR"
CLOSED_MAGIC: Final = b"\x89NWC"
# the clean-close record (see the module docstring)
CLOSED: Final = "closed"
VERSION: Final = 1
DEFAULT_SEGMENT_SIZE: Final = 64 * 1024 * 1024

ENTRIES: Final = 1
HARDSTATE: Final = 2
SNAPSHOT: Final = 3
COMPACT: Final = 4
DROP: Final = 5
_KINDS: Final = frozenset((ENTRIES, HARDSTATE, SNAPSHOT, COMPACT, DROP))

_SEG_HDR: Final = struct.Struct("<4sHHI")  # + crc32
SEG_HDR_SIZE: Final = _SEG_HDR.size + 4
_PREFIX: Final = struct.Struct("<4sI")
_FIELDS: Final = struct.Struct("<IBH")
REC_HDR_SIZE: Final = _PREFIX.size + _FIELDS.size
_TRAILER: Final = struct.Struct("<I")
REC_OVERHEAD: Final = REC_HDR_SIZE + _TRAILER.size
_ENTRY: Final = struct.Struct("<QQBI")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
_HARD: Final = struct.Struct("<QQQ")
_SNAP: Final = struct.Struct("<QQB")
_CLOSED_HDR: Final = struct.Struct("<4sIQQI")
_CLOSED_GROUP: Final = struct.Struct("<QQ")
_U16: Final = struct.Struct("<H")
_KIND_NAMES: Final = {ENTRIES: "entries", HARDSTATE: "hard state", SNAPSHOT: "snapshot",
                      COMPACT: "compaction", DROP: "drop"}  # fmt: skip
# At most this many notes of damage are kept per group (what the server logs).
MAX_NOTES: Final = 8
# A group name is at most this long (nats-server's stream names are shorter still).
MAX_GROUP: Final = 1024
_crc32: Final = zlib.crc32

# (index, term, type, data)
WalEntry = tuple[int, int, int, bytes]


class WalError(Exception):
    """The log cannot be used (a segment header is unreadable, a bad argument)."""


@dataclass
class GroupLog:
    """What the log holds for one group after recovery."""

    # HardState (term, vote, commit); zeros when never written
    term: int = 0
    vote: int = 0
    commit: int = 0
    # the latest snapshot: index, term, conf state bytes, data (index 0: none)
    snap_index: int = 0
    snap_term: int = 0
    snap_conf: bytes = b""
    snap_data: bytes = b""
    # the entries after the snapshot / compaction point, consecutive
    entries: list[WalEntry] = field(default_factory=list)
    # entries up to here were compacted away (at least the snapshot index)
    compacted: int = 0
    # damage before the tail touched this group (§4.8): it must not vote or campaign
    damaged: bool = False
    # a damaged group: how far its log reached before the damage (its repair point: a
    # leader's commit past it vouches for everything it held); 0 for a sound group
    held: int = 0
    # what the damage was, in words, for the log (at most MAX_NOTES)
    notes: list[str] = field(default_factory=list)

    def first_index(self) -> int:
        return self.entries[0][0] if self.entries else self.compacted + 1

    def last_index(self) -> int:
        return self.entries[-1][0] if self.entries else max(self.compacted, self.snap_index)

    def reach(self) -> int:
        """How far the log reaches: its last index or its commit, whichever is higher."""
        return max(self.last_index(), self.commit)

    def note(self, what: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(what)

    def _append(self, ents: list[WalEntry]) -> None:
        if not ents:
            return
        first = ents[0][0]
        log = self.entries
        if log and first <= log[-1][0]:
            # Raft replaced a conflicting tail: keep what is before the new first index.
            keep = first - log[0][0]
            del log[max(keep, 0) :]
        if log and first != log[-1][0] + 1:
            # a gap: the earlier entries cannot be used (only after damage)
            log.clear()
        log.extend(ents)

    def _compact(self, index: int) -> None:
        if index <= self.compacted:
            return
        self.compacted = index
        log = self.entries
        if log:
            cut = index - log[0][0] + 1
            if cut > 0:
                del log[:cut]

    def _snapshot(self, index: int, term: int, conf: bytes, data: bytes, replace: bool) -> None:
        self.snap_index, self.snap_term, self.snap_conf, self.snap_data = index, term, conf, data
        if replace:
            self.entries.clear()
            self.compacted = index
        else:
            self._compact(index)


def encode_record(kind: int, group: bytes, body: bytes) -> bytes:
    """One framed record (exposed for tests that build damaged logs by hand)."""
    fields = _FIELDS.pack(REC_OVERHEAD + len(group) + len(body), kind, len(group))
    rec = b"".join((_PREFIX.pack(REC_MAGIC, _crc32(fields)), fields, group, body))
    return rec + _TRAILER.pack(record_crc(rec))


def _decode_closed(raw: bytes) -> tuple[int, int, dict[bytes, tuple[int, int]]] | None:
    """The clean-close record's (last segment, its size, group -> (reach, held)),
    None when it does not check out (then it is as if there were none)."""
    if len(raw) < _CLOSED_HDR.size:
        return None
    magic, crc, seg, size, n = _CLOSED_HDR.unpack_from(raw, 0)
    if magic != CLOSED_MAGIC or crc != _crc32(raw[8:]):
        return None
    groups: dict[bytes, tuple[int, int]] = {}
    pos = _CLOSED_HDR.size
    try:
        for _ in range(n):
            (nlen,) = _U16.unpack_from(raw, pos)
            pos += 2
            name = raw[pos : pos + nlen]
            pos += nlen
            reach, held = _CLOSED_GROUP.unpack_from(raw, pos)
            pos += _CLOSED_GROUP.size
            groups[name] = (int(reach), int(held))
    except struct.error:
        return None
    if pos != len(raw):
        return None
    return int(seg), int(size), groups


def _seg_header(number: int) -> bytes:
    h = _SEG_HDR.pack(SEG_MAGIC, VERSION, 0, number)
    return h + _U32.pack(_crc32(h))


def _seg_name(number: int) -> str:
    return f"{number:020d}.wal"


def _entries_body(ents: Iterable[WalEntry]) -> bytes:
    parts = [b""]
    n = 0
    for index, term, etype, data in ents:
        parts.append(_ENTRY.pack(index, term, etype, len(data)))
        parts.append(data)
        n += 1
    parts[0] = _U32.pack(n)
    return b"".join(parts)


def _decode_entries(body: memoryview) -> list[WalEntry]:
    (n,) = _U32.unpack_from(body, 0)
    pos = 4
    out: list[WalEntry] = []
    for _ in range(n):
        index, term, etype, dlen = _ENTRY.unpack_from(body, pos)
        pos += _ENTRY.size
        if pos + dlen > len(body):
            raise ValueError("entry data past the record")
        out.append((index, term, etype, bytes(body[pos : pos + dlen])))
        pos += dlen
    if pos != len(body):
        raise ValueError("trailing bytes in an ENTRIES record")
    return out


def _check_record(buf: memoryview, pos: int) -> tuple[int, int, int] | None:
    """(length, kind, group length) of a record at ``pos`` whose checksums and lengths all
    check out, else None."""
    end = len(buf)
    if pos + REC_HDR_SIZE > end:
        return None
    magic, hcrc = _PREFIX.unpack_from(buf, pos)
    if magic != REC_MAGIC or _crc32(buf[pos + 8 : pos + REC_HDR_SIZE]) != hcrc:
        return None
    length, kind, glen = _FIELDS.unpack_from(buf, pos + 8)
    if kind not in _KINDS or length < REC_OVERHEAD + glen or pos + length > end:
        return None
    (tcrc,) = _TRAILER.unpack_from(buf, pos + length - 4)
    if record_crc(buf[pos : pos + length - 4]) != tcrc:
        return None
    return length, kind, glen


def _header(buf: memoryview, pos: int) -> tuple[int, int, bytes] | None:
    """(length, kind, group) of a record whose header checks out but whose body does not
    (None when the header itself is damaged: the record could belong to any group, and
    its length cannot be trusted)."""
    if pos + REC_HDR_SIZE > len(buf):
        return None
    magic, hcrc = _PREFIX.unpack_from(buf, pos)
    if magic != REC_MAGIC or _crc32(buf[pos + 8 : pos + REC_HDR_SIZE]) != hcrc:
        return None
    length, kind, glen = _FIELDS.unpack_from(buf, pos + 8)
    start = pos + REC_HDR_SIZE
    if kind not in _KINDS or length < REC_OVERHEAD + glen or start + glen > len(buf):
        return None
    return length, kind, bytes(buf[start : start + glen])


class _Segment:
    __slots__ = ("groups", "number", "size")

    def __init__(self, number: int, size: int) -> None:
        self.number = number
        self.size = size
        # per group: the highest entry index this segment holds for it (0: none), and
        # whether it holds a HARDSTATE / SNAPSHOT / COMPACT record of the group
        self.groups: dict[bytes, list[int]] = {}

    def note(self, group: bytes, kind: int, last_index: int) -> None:
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = [0, 0, 0, 0]
        if last_index > g[0]:
            g[0] = last_index
        if HARDSTATE <= kind <= COMPACT:
            g[kind - HARDSTATE + 1] = 1


class Wal:
    """The append side and the recovered state. Not thread-safe: the owner (the group
    scheduler) serialises ``append_*``, ``flush``, ``sync`` and ``delete_obsolete``."""

    def __init__(
        self, directory: str, io: FileIO = DEFAULT_IO, segment_size: int = DEFAULT_SEGMENT_SIZE
    ) -> None:
        self.directory = directory
        self.io = io
        self.segment_size = segment_size
        self.groups: dict[bytes, GroupLog] = {}
        self.segments: list[_Segment] = []
        self._fd = -1
        self._buf: list[bytes] = []
        self._buf_size = 0
        # what the current segment will hold once the buffer is written
        self._pending: list[tuple[bytes, int, int]] = []
        # group -> segments of its latest HARDSTATE, SNAPSHOT and COMPACT records: those
        # records hold the group's state, so their segments stay (see delete_obsolete)
        self._latest: dict[bytes, list[int]] = {}
        self.dirty = False  # written since the last sync
        self.syncs = 0  # fdatasyncs made (what a batch costs)
        # records of unknown group found damaged so far, and per group dropped since: the
        # count when its DROP was replayed (a group created later is damaged only when
        # such damage came after its drop)
        self._unknown_damage = 0
        self._dropped_at: dict[bytes, int] = {}
        self._unknown_notes: list[str] = []
        # groups whose last record is a DROP (the meta group's: an operator's, see
        # jetstream/cluster/rejoin.py)
        self.dropped: set[bytes] = set()
        self.damaged_records = 0
        self.cut_bytes = 0  # torn tail removed by recovery
        # the log ends before where it ended at its clean close: (segment, size) then
        # and now; None when it does not, or nothing says where it ended
        self.cut_after_close: tuple[int, int, int, int] | None = None

    # ---------------------------------------------------------------- recovery
    @classmethod
    def open(
        cls, directory: str, io: FileIO = DEFAULT_IO, segment_size: int = DEFAULT_SEGMENT_SIZE
    ) -> Wal:
        """Open (creating it if needed) and recover the log in ``directory``."""
        wal = cls(directory, io, segment_size)
        # every directory made here durable in its parent, not only the last one: a WAL in
        # a directory whose own name a power loss can take is lost whole (the
        # deterministic tier's seed 51 lost a server's meta log that way)
        io.makedirs_durable(directory)
        names = sorted(n for n in io.listdir(directory) if n.endswith(".wal"))
        numbers = []
        for n in names:
            try:
                numbers.append(int(n[:-4]))
            except ValueError:
                raise WalError(f"unexpected file {n!r} in {directory}") from None
        closed_at = os.path.join(directory, CLOSED)
        closed = io.read_file(closed_at) if io.exists(closed_at) else None
        for i, number in enumerate(numbers):
            if i and number != numbers[i - 1] + 1:
                # segments go only from the front (delete_obsolete): one missing between
                # two others held records of any group
                missing = (f"the log (segments {_seg_name(numbers[i - 1] + 1)} to"
                           f" {_seg_name(number - 1)} are missing)")  # fmt: skip
                wal._mark_damaged({}, True, missing)
            wal._recover_segment(number, last=i == len(numbers) - 1)
        if closed is not None:
            found = _decode_closed(closed)
            if found is not None:
                wal._check_closed(*found)
            # gone before anything is appended: a crash from now on is not a clean close
            io.unlink(closed_at)
            io.fsync_dir(directory)
        for g in wal.groups.values():
            if g.damaged:
                g.held = max(g.held, g.reach())
        # a group created from now on is new: no damage found here can have been its
        wal._unknown_damage = 0
        wal._dropped_at.clear()
        wal._unknown_notes.clear()
        if wal.segments:
            last = wal.segments[-1]
            wal._fd = io.open(
                os.path.join(directory, _seg_name(last.number)), os.O_WRONLY | O_CLOEXEC
            )
            io.lseek(wal._fd, last.size, os.SEEK_SET)  # appends go after the last record
        else:
            wal._new_segment(1)
        return wal

    def _recover_segment(self, number: int, last: bool) -> None:
        path = os.path.join(self.directory, _seg_name(number))
        raw = self.io.read_file(path)
        buf = memoryview(raw)
        hdr_ok = len(buf) >= SEG_HDR_SIZE
        if hdr_ok:
            h = bytes(buf[: _SEG_HDR.size])
            magic, version, _res, num = _SEG_HDR.unpack(h)
            (crc,) = _U32.unpack_from(buf, _SEG_HDR.size)
            hdr_ok = magic == SEG_MAGIC and crc == _crc32(h) and num == number
            if hdr_ok and version != VERSION:
                raise WalError(f"{path}: unsupported WAL version {version}")
        if not hdr_ok:
            if last and REC_MAGIC not in raw:
                # a segment created and torn before its header was synced: start it again
                fd = self.io.open(path, os.O_WRONLY | O_CLOEXEC)
                try:
                    self.io.ftruncate(fd, 0)
                    self.io.write_all(fd, _seg_header(number))
                    self.io.fdatasync(fd)
                finally:
                    self.io.close(fd)
                self.cut_bytes += len(raw)
                self.segments.append(_Segment(number, SEG_HDR_SIZE))
                return
            raise WalError(f"{path}: damaged segment header")
        seg = _Segment(number, len(buf))
        self.segments.append(seg)
        pos = SEG_HDR_SIZE
        end = len(buf)
        name = _seg_name(number)
        bad_at = -1  # start of the damaged run we are skipping
        # the groups (and record kinds) of the damaged run's records whose headers check out
        bad_groups: dict[bytes, list[int]] = {}
        bad_any = False  # a record of the run could belong to any group
        while pos < end:
            rec = _check_record(buf, pos)
            if rec is None:
                if bad_at < 0:
                    bad_at = pos
                hdr = _header(buf, pos)
                if hdr is None:
                    bad_any = True
                    nxt = raw.find(REC_MAGIC, pos + 1)
                    pos = nxt if nxt >= 0 else end
                    continue
                length, kind, group = hdr
                bad_groups.setdefault(group, []).append(kind)
                if pos + length > end:
                    bad_any = True  # it runs past the end: whatever followed it is gone
                    pos = end
                else:
                    pos += length  # skipped by its own length
                continue
            if bad_at >= 0:
                # a valid record after a damaged run: that is damage, not a torn tail
                self._mark_damaged(bad_groups, bad_any, f"{name} at byte {bad_at}")
                bad_at, bad_groups, bad_any = -1, {}, False
            length, kind, glen = rec
            self._replay(seg, buf, pos, length, kind, glen)
            pos += length
        if bad_at >= 0:
            if last:
                # the torn tail of the last write: never acknowledged, cut it off
                fd = self.io.open(path, os.O_WRONLY | O_CLOEXEC)
                try:
                    self.io.ftruncate(fd, bad_at)
                    self.io.fdatasync(fd)
                finally:
                    self.io.close(fd)
                self.cut_bytes += end - bad_at
                seg.size = bad_at
            else:
                # later segments hold valid records: this was acknowledged data, and so
                # was whatever followed the damage in this segment, of any group
                self._mark_damaged(bad_groups, True, f"{name} from byte {bad_at} to its end")

    def _mark_damaged(self, groups: dict[bytes, list[int]], any_group: bool, where: str) -> None:
        self.damaged_records += 1
        for group, kinds in groups.items():
            g = self._group(group)
            g.damaged = True
            what = "/".join(sorted({_KIND_NAMES.get(k, "?") for k in kinds}))
            g.note(f"a damaged {what} record in {where}")
        if any_group:
            note = f"a damaged record of unknown group in {where}"
            for g in self.groups.values():
                g.damaged = True
                g.note(note)
            # the record could have belonged to a group that appears only later, too
            self._unknown_damage += 1
            if len(self._unknown_notes) < MAX_NOTES:
                self._unknown_notes.append(note)

    def _group(self, name: bytes) -> GroupLog:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = GroupLog()
            self.dropped.discard(name)
            if self._unknown_damage > self._dropped_at.get(name, 0):
                g.damaged = True
                for note in self._unknown_notes:
                    g.note(note)
        return g

    # ---------------------------------------------------------------- clean close
    def _check_closed(self, seg: int, size: int, reach: dict[bytes, tuple[int, int]]) -> None:
        """Compare the recovered log with what it was at its clean close (see the module
        docstring)."""
        last = self.segments[-1] if self.segments else None
        now = (last.number, last.size) if last is not None else (0, 0)
        if now < (seg, size):
            self.cut_after_close = (seg, size, now[0], now[1])
        for name, (was, held) in reach.items():
            g = self.groups.get(name)
            if g is None:
                g = self._group(name)  # every record of it is gone
            if g.reach() < was:
                g.damaged = True
                g.held = max(g.held, was)
                g.note(f"its records up to index {was} were cut off after the log was"
                       f" closed cleanly (it now reaches {g.reach()}; the log ended at"
                       f" {_seg_name(seg)} byte {size}, now at {_seg_name(now[0])} byte"
                       f" {now[1]})")  # fmt: skip
            if held:
                if not g.damaged:
                    g.note(f"damage found before the last clean close, not repaired since"
                           f" (its log had reached index {held})")  # fmt: skip
                g.damaged = True
                g.held = max(g.held, held)

    def _write_closed(self) -> None:
        last = self.segments[-1]
        parts = [b""]
        for name, g in self.groups.items():
            parts.append(_U16.pack(len(name)))
            parts.append(name)
            held = max(g.held, g.reach()) if g.damaged else 0
            parts.append(_CLOSED_GROUP.pack(g.reach(), held))
        body = b"".join(parts)
        head = _CLOSED_HDR.pack(CLOSED_MAGIC, 0, last.number, last.size, len(self.groups))
        crc = _crc32(head[8:] + body)
        data = _CLOSED_HDR.pack(CLOSED_MAGIC, crc, last.number, last.size, len(self.groups))
        self.io.write_file_atomic(os.path.join(self.directory, CLOSED), data + body)

    def _replay(
        self, seg: _Segment, buf: memoryview, pos: int, length: int, kind: int, glen: int
    ) -> None:
        start = pos + REC_HDR_SIZE
        name = bytes(buf[start : start + glen])
        body = buf[start + glen : pos + length - 4]
        try:
            last_index = self._apply(name, kind, body)
        except (ValueError, struct.error):
            # checksums held but the body does not parse: written by a broken writer
            where = f"{_seg_name(seg.number)} at byte {pos} (it does not parse)"
            self._mark_damaged({name: [kind]}, False, where)
            return
        seg.note(name, kind, last_index)
        self._note_latest(name, kind, seg.number)

    def _apply(self, name: bytes, kind: int, body: memoryview) -> int:
        """Replay one record into ``self.groups``; returns the highest entry index it holds."""
        if kind == DROP:
            self.groups.pop(name, None)
            self._latest.pop(name, None)
            self.dropped.add(name)
            self._dropped_at[name] = self._unknown_damage
            return 0
        g = self._group(name)
        if kind == ENTRIES:
            ents = _decode_entries(body)
            g._append(ents)
            return ents[-1][0] if ents else 0
        if kind == HARDSTATE:
            g.term, g.vote, g.commit = _HARD.unpack(body)
            return 0
        if kind == SNAPSHOT:
            index: int
            term: int
            index, term, replace = _SNAP.unpack_from(body, 0)
            pos = _SNAP.size
            (clen,) = _U32.unpack_from(body, pos)
            conf = bytes(body[pos + 4 : pos + 4 + clen])
            pos += 4 + clen
            (dlen,) = _U32.unpack_from(body, pos)
            data = bytes(body[pos + 4 : pos + 4 + dlen])
            if pos + 4 + dlen != len(body) or len(conf) != clen:
                raise ValueError("SNAPSHOT lengths")
            g._snapshot(index, term, conf, data, bool(replace))
            return index
        (at,) = _U64.unpack(body)
        g._compact(int(at))
        return 0

    def _note_latest(self, name: bytes, kind: int, number: int) -> None:
        if HARDSTATE <= kind <= COMPACT:
            lt = self._latest.get(name)
            if lt is None:
                lt = self._latest[name] = [0, 0, 0]
            lt[kind - HARDSTATE] = number

    # ---------------------------------------------------------------- appends
    def append_entries(self, group: bytes, entries: list[WalEntry]) -> None:
        """Entries from ``entries[0]``'s index on replace what the group had there."""
        if entries:
            self._add(group, ENTRIES, _entries_body(entries), entries[-1][0])
            self._group(group)._append(list(entries))

    def append_hard_state(self, group: bytes, term: int, vote: int, commit: int) -> None:
        self._add(group, HARDSTATE, _HARD.pack(term, vote, commit), 0)
        g = self._group(group)
        g.term, g.vote, g.commit = term, vote, commit
        if g.damaged and commit > g.held:
            # a leader committed past all the damaged log had held: repaired
            g.damaged, g.held = False, 0

    def append_snapshot(
        self,
        group: bytes,
        index: int,
        term: int,
        conf: bytes,
        data: bytes = b"",
        *,
        replace: bool = False,
    ) -> None:
        """A snapshot at ``index``: taken locally (the entries after it stay), or with
        ``replace`` received from the leader (the whole log is replaced)."""
        body = b"".join(
            (
                _SNAP.pack(index, term, 1 if replace else 0),
                _U32.pack(len(conf)),
                conf,
                _U32.pack(len(data)),
                data,
            )
        )
        self._add(group, SNAPSHOT, body, index)
        self._group(group)._snapshot(index, term, conf, data, replace)

    def append_compact(self, group: bytes, index: int) -> None:
        self._add(group, COMPACT, _U64.pack(index), 0)
        self._group(group)._compact(index)

    def append_drop(self, group: bytes) -> None:
        self._add(group, DROP, b"", 0)
        self.groups.pop(group, None)
        self.dropped.add(group)

    def _add(self, group: bytes, kind: int, body: bytes, last_index: int) -> None:
        if not group or len(group) > MAX_GROUP:
            raise WalError(f"group name of {len(group)} bytes (1 to {MAX_GROUP})")
        rec = encode_record(kind, group, body)
        if self._buf_size and self.segments[-1].size + self._buf_size + len(rec) > (
            self.segment_size
        ):
            self.flush()
        if self.segments[-1].size > SEG_HDR_SIZE and (
            self.segments[-1].size + len(rec) > self.segment_size
        ):
            self._rotate()
        self._buf.append(rec)
        self._buf_size += len(rec)
        self._pending.append((group, kind, last_index))

    # ---------------------------------------------------------------- durability
    def flush(self) -> int:
        """Write the buffered records (one write); returns the bytes written. Not durable
        until ``sync``."""
        if not self._buf:
            return 0
        data = b"".join(self._buf) if len(self._buf) > 1 else self._buf[0]
        seg = self.segments[-1]
        self.io.write_all(self._fd, data)
        for group, kind, last_index in self._pending:
            if kind == DROP:
                self._latest.pop(group, None)
                for s in self.segments:
                    s.groups.pop(group, None)
            else:
                seg.note(group, kind, last_index)
                self._note_latest(group, kind, seg.number)
        seg.size += len(data)
        self._buf.clear()
        self._pending.clear()
        self._buf_size = 0
        self.dirty = True
        return len(data)

    def sync(self) -> None:
        """Make everything written so far durable (one fdatasync of the open segment;
        earlier segments were synced when they were closed)."""
        if self.dirty:
            self.io.fdatasync(self._fd)
            self.dirty = False
            self.syncs += 1

    def commit(self) -> None:
        """``flush`` then ``sync``: what must happen before an ack or a vote leaves."""
        self.flush()
        self.sync()

    def _rotate(self) -> None:
        self.flush()
        self.sync()
        self.io.close(self._fd)
        self._fd = -1
        self._new_segment(self.segments[-1].number + 1)

    def _new_segment(self, number: int) -> None:
        path = os.path.join(self.directory, _seg_name(number))
        fd = self.io.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
        self.io.write_all(fd, _seg_header(number))
        self.io.fdatasync(fd)
        self.io.fsync_dir(self.directory)
        self._fd = fd
        self.segments.append(_Segment(number, SEG_HDR_SIZE))

    # ---------------------------------------------------------------- space
    def delete_obsolete(self) -> list[int]:
        """Delete leading segments no group needs any more; returns their numbers.

        A segment is needed while it holds, for a live group, an entry above the group's
        compaction point, or the group's latest hard state or snapshot record."""
        self.flush()
        deleted: list[int] = []
        while len(self.segments) > 1:
            seg = self.segments[0]
            if any(self._needs(name, seg, g) for name, g in seg.groups.items()):
                break
            self.io.unlink(os.path.join(self.directory, _seg_name(seg.number)))
            deleted.append(seg.number)
            self.segments.pop(0)
        if deleted:
            self.io.fsync_dir(self.directory)
        return deleted

    def _needs(self, name: bytes, seg: _Segment, note: list[int]) -> bool:
        g = self.groups.get(name)
        if g is None:
            return False
        if note[0] > g.compacted:
            return True  # entries still in the log
        latest = self._latest.get(name, [0, 0, 0])
        # the group's latest hard state, snapshot or compaction point
        return any(note[k + 1] and latest[k] == seg.number for k in range(3))

    def checkpoint(self, group: bytes) -> None:
        """Log the group's hard state, snapshot and compaction point again, so that older
        segments no longer hold its state (entries above its compaction point still pin
        them: snapshot and compact first)."""
        g = self.groups[group]
        if g.snap_index:
            # not "replace": the entries after it stay
            self.append_snapshot(group, g.snap_index, g.snap_term, g.snap_conf, g.snap_data)
        if g.compacted:
            self.append_compact(group, g.compacted)
        self.append_hard_state(group, g.term, g.vote, g.commit)

    def pinning(self) -> list[bytes]:
        """The groups that keep the oldest segment from being deleted: when the log grows
        too large the driver makes them snapshot, compact and ``checkpoint``."""
        if len(self.segments) < 2:
            return []
        seg = self.segments[0]
        return [name for name, note in seg.groups.items() if self._needs(name, seg, note)]

    def size(self) -> int:
        return sum(s.size for s in self.segments) + self._buf_size

    def close(self) -> None:
        """Sync and close; then leave the clean-close record (see the module docstring)."""
        if self._fd >= 0:
            self.commit()
            self.io.close(self._fd)
            self._fd = -1
            self._write_closed()
