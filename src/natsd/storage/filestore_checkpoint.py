"""The clean-shutdown index: what a store knew at ``stop``, so the next open need not read
every record again.

``FileStore.stop`` writes it into ``index.cache`` (the manifest file: version 2 keeps every
field of version 1, which remains the cross-check a full scan makes). It holds, per block,
the size and checksum (``file_sum``) of the file as written and the block's positions
(``filestore_index``): live runs, marks, the sequences of a block with gaps, the offsets
of the block being written or of an irregular one. Beside them: the store's counters,
per-subject state, the ttl timers and what was found lost before.

At open (``load``): the index is used only when the directory holds exactly the blocks it
names, each with the size and the checksum it had (every byte read and summed at
zlib-ng's speed, not parsed record by record), so damage done while the server was down still sends
the open down the full scan (``filestore_recovery``), with its reports and repairs. The
file is deleted before anything is written (by ``recover``), so a crash later never finds
an index that describes a past state.

Cost: the file grows with blocks (about GROUP-th of a record's worth per message for the
marks) and subjects; loading it reads every block once.
"""

from __future__ import annotations

import base64
import os
import sys
import zlib
from array import array
from typing import Any, Final

from natsd.storage.fileio import FileIO
from natsd.storage.filestore_index import GROUP, GROUP_SHIFT, Block, SubjState
from natsd.storage.store import LostData

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "checkpoint_doc",
    "file_sum",
    "file_sum_of",
    "load_checkpoint",
]

try:
    from zlib_ng.zlib_ng import adler32 as _adler32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; kept for odd platforms
    _adler32 = zlib.adler32

CHECKPOINT_VERSION: Final = 2
# Block files are read this much at a time when their checksum is checked.
_VERIFY_CHUNK: Final = 8 * 1024 * 1024


def file_sum(data: bytes | bytearray | memoryview, value: int = 1) -> int:
    """The checksum of a block file's bytes, continued from ``value`` (1: nothing yet).

    Adler-32, not crc32: every record (and the block header) ends with its own crc32, and
    a crc32 over data that carries its own crc32s depends only on what follows the last
    of them (crc32's residue), so it would miss damage anywhere else."""
    return _adler32(data, value)


def _enc(a: array[int] | None) -> str | None:
    if a is None:
        return None
    return base64.b64encode(a.tobytes()).decode()


def _dec(code: str, text: object) -> array[int] | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError("array field is not text")
    a = array(code)
    a.frombytes(base64.b64decode(text, validate=True))
    return a


def _alive_runs(blk: Block) -> list[int]:
    """Live positions as flat [start, end) pairs."""
    out: list[int] = []
    alive = blk.alive
    k = alive.find(1)
    while k >= 0:
        e = alive.find(0, k)
        if e < 0:
            e = blk.nrec
        out += (k, e)
        k = alive.find(1, e)
    return out


def checkpoint_doc(
    blocks: list[Block],
    subjects: dict[str, SubjState],
    ttl_heap: list[tuple[int, int]],
    lost: LostData | None,
    counters: dict[str, int],
) -> dict[str, Any]:
    """The index part of the clean-shutdown file (merged into the manifest document).
    Every block's ``fsum`` must be known (``FileStore.stop`` computes the unknown ones)."""
    out: list[dict[str, Any]] = []
    last = blocks[-1] if blocks else None
    for blk in blocks:
        # every record's place only where it is kept for good: the block being written
        # and an irregular one (a settled block a reader expanded goes back to its marks)
        full = blk is last or blk.irregular
        out.append(
            {
                "first": blk.first,
                "sum": blk.fsum,
                "seq0": blk.seq0,
                "nrec": blk.nrec,
                "alive": _alive_runs(blk),
                "seqs": _enc(blk.seqs),
                "marks": _enc(blk.marks),
                "offs": _enc(blk.offs) if full else None,
                "lens": _enc(blk.lens) if full else None,
                "irregular": blk.irregular,
            }
        )
    return {
        "byteorder": sys.byteorder,
        "index": out,
        "subjects": _subjects_doc(subjects),
        "ttl": [x for pair in ttl_heap for x in pair],
        "lost": None if lost is None else {"msgs": lost.msgs, "bytes": lost.bytes},
        **counters,
    }


def _subjects_doc(subjects: dict[str, SubjState]) -> dict[str, Any]:
    """Per-subject state in columns: the names joined by newlines (a subject never holds
    whitespace), counts, first and last sequences and stale flags as arrays. A dict of small
    lists costs about 1.5 us per subject to write and, loaded, left hundreds of MB of
    fragmented heap behind for a million KV keys; columns cost a fraction of both."""
    names = list(subjects)
    msgs = array("Q")
    firsts = array("Q")
    lasts = array("Q")
    flags = array("B")
    for ss in subjects.values():
        msgs.append(ss.msgs)
        firsts.append(ss.first)
        lasts.append(ss.last)
        flags.append(int(ss.first_stale) | int(ss.last_stale) << 1)
    return {
        "names": "\n".join(names),
        "msgs": _enc(msgs),
        "first": _enc(firsts),
        "last": _enc(lasts),
        "flags": _enc(flags),
    }


def _load_subjects(doc: dict[str, Any], out: dict[str, SubjState]) -> bool:
    """``_subjects_doc`` read back into ``out``; False when it does not add up."""
    text = doc["names"]
    if not isinstance(text, str):
        return False
    names = text.split("\n") if text else []
    msgs = _dec("Q", doc["msgs"])
    firsts = _dec("Q", doc["first"])
    lasts = _dec("Q", doc["last"])
    flags = _dec("B", doc["flags"])
    n = len(names)
    if msgs is None or firsts is None or lasts is None or flags is None:
        return False
    if not len(msgs) == len(firsts) == len(lasts) == len(flags) == n:
        return False
    for i in range(n):
        ss = SubjState(firsts[i])
        ss.msgs = msgs[i]
        ss.last = lasts[i]
        f = flags[i]
        ss.first_stale = bool(f & 1)
        ss.last_stale = bool(f & 2)
        out[names[i]] = ss
    return len(out) == n


class Checkpoint:
    """A store's state as loaded from the clean-shutdown index."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.subjects: dict[str, SubjState] = {}
        self.ttl_heap: list[tuple[int, int]] = []
        self.lost: LostData | None = None
        self.nlive = 0
        self.bytes = 0
        self.first_seq = 0
        self.first_ts = 0
        self.last_seq = 0
        self.last_ts = 0


def load_checkpoint(
    doc: dict[str, object],
    mdir: str,
    named: list[tuple[int, str]],
    io: FileIO,
    *,
    grown_last: bool = False,
) -> Checkpoint | None:
    """The state ``doc`` describes, when the block files ``named`` (first, file name) are
    exactly the ones it lists with their sizes and checksums; otherwise None (full scan).
    ``grown_last``: the last block may have grown since (a running checkpoint): only the
    bytes it had are compared."""
    if doc.get("version") != CHECKPOINT_VERSION or doc.get("byteorder") != sys.byteorder:
        return None
    try:
        return _load(doc, mdir, named, io, grown_last)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None  # not what this code writes: the blocks are the truth


def _load(
    doc: dict[str, Any], mdir: str, named: list[tuple[int, str]], io: FileIO, grown_last: bool
) -> Checkpoint | None:
    index = doc["index"]
    listed = doc["blocks"]
    if len(index) != len(named) or len(listed) != len(named):
        return None
    cp = Checkpoint()
    for i, ((first, name), ent, lst) in enumerate(zip(named, index, listed, strict=True)):
        if int(ent["first"]) != first or int(lst["first"]) != first:
            return None
        size = int(lst["size"])
        path = os.path.join(mdir, name)
        prefix = grown_last and i == len(named) - 1
        if not _same_bytes(path, size, int(ent["sum"]), io, prefix=prefix):
            return None
        blk = Block(first, path)
        blk.on_disk = True
        blk.flushed = size
        blk.fsum = int(ent["sum"])
        nrec = int(ent["nrec"])
        blk.seq0 = int(ent["seq0"])
        blk.nrec = nrec
        alive = bytearray(nrec)
        runs = ent["alive"]
        for i in range(0, len(runs), 2):
            a, b = int(runs[i]), int(runs[i + 1])
            if not 0 <= a < b <= nrec:
                return None
            alive[a:b] = b"\x01" * (b - a)
        blk.alive = alive
        blk.live = alive.count(1)
        blk.seqs = _dec("Q", ent["seqs"])
        marks = _dec("I", ent["marks"])
        if marks is None or len(marks) != (nrec + GROUP - 1) >> GROUP_SHIFT:
            return None
        blk.marks = marks
        blk.offs = _dec("I", ent["offs"])
        blk.lens = _dec("I", ent["lens"])
        blk.irregular = bool(ent["irregular"])
        if blk.seqs is not None and len(blk.seqs) != nrec:
            return None
        if (blk.offs is None) != (blk.lens is None) or (
            blk.offs is not None and (len(blk.offs) != nrec or len(blk.lens or ()) != nrec)
        ):
            return None
        cp.blocks.append(blk)
    if cp.blocks and cp.blocks[-1].offs is None:
        return None  # the block being written keeps every offset
    subjects = doc["subjects"]
    if isinstance(subjects.get("names"), str):
        if not _load_subjects(subjects, cp.subjects):
            return None
    else:
        # the form of earlier versions: {subject: [msgs, first, last, first_stale, last_stale]}
        for name, (msgs, first, last, fstale, lstale) in subjects.items():
            ss = SubjState(int(first))
            ss.msgs = int(msgs)
            ss.last = int(last)
            ss.first_stale = bool(fstale)
            ss.last_stale = bool(lstale)
            cp.subjects[str(name)] = ss
    ttl = doc["ttl"]
    cp.ttl_heap = [(int(ttl[i]), int(ttl[i + 1])) for i in range(0, len(ttl), 2)]
    lost = doc["lost"]
    if lost is not None:
        cp.lost = LostData(msgs=[int(s) for s in lost["msgs"]], bytes=int(lost["bytes"]))
    cp.nlive = int(doc["msgs"])
    cp.bytes = int(doc["bytes"])
    cp.first_seq = int(doc["first_seq"])
    cp.first_ts = int(doc["first_ts"])
    cp.last_seq = int(doc["last_seq"])
    cp.last_ts = int(doc["last_ts"])
    if sum(b.live for b in cp.blocks) != cp.nlive:
        return None
    return cp


def _same_bytes(path: str, size: int, fsum: int, io: FileIO, *, prefix: bool = False) -> bool:
    """Whether the file at ``path`` is ``size`` bytes with ``file_sum`` ``fsum`` (``prefix``:
    its first ``size`` bytes; it may be longer)."""
    try:
        fd = io.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        have = io.fsize(fd)
        if have != size and not (prefix and have > size):
            return False
        return file_sum_of(io, fd, size) == fsum
    except OSError:
        return False
    finally:
        io.close(fd)


def file_sum_of(io: FileIO, fd: int, size: int) -> int:
    """``file_sum`` of the first ``size`` bytes of ``fd`` (-1 when the file is shorter)."""
    value = 1
    off = 0
    while off < size:
        chunk = io.pread(fd, min(_VERIFY_CHUNK, size - off), off)
        if not chunk:
            return -1
        value = file_sum(chunk, value)
        off += len(chunk)
    return value
