"""Where each source of a sourcing stream is, as its store knows it (nats-server 2.15's
``SourcesState``): per configured source (its iname), the origin sequence and identity of
the newest stored message whose ``Nats-Stream-Source`` names it.

The store notes every message it stores (``note``), so the index is kept in step on every
replica, from publishes, applied entries and catch-up alike; the sourcing stream reads it
when a source starts (``known``) and scans its messages backwards only for the sources the
index has not seen. The positions survive a purge of the stream's messages, as
nats-server's do. A file store persists them (``encode`` / ``decode``) next to its
checkpoints, stamped with the first sequence they do not cover, and at open reads the
messages stored after the stamp: start-up does not grow with the stream.

Only the configured sources are kept (``configure``): a header naming anything else costs
a lookup and is forgotten, so the index's size is the stream's config's, whatever its
messages carry. A store cut back (``truncate``) forgets everything (``reset``): a position
may have named a message that is gone, and the stream's scan finds the right one.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Final

import orjson

from natsd.core.source_header import source_of

__all__ = ["SOURCES_FILE", "SourcesIndex", "decode_sources"]

SOURCES_FILE: Final = "sources.idx"
# the headers ``note`` keeps before reading them: a count, and their size
_PENDING_MSGS: Final = 1024
_PENDING_BYTES: Final = 1 << 20
_MAGIC: Final = b"NSRC1"


class SourcesIndex:
    """Positions by iname ((origin seq, identity); seq 0: none seen)."""

    __slots__ = ("_by_origin", "_pending", "_pending_bytes", "dirty", "entries")

    def __init__(self, inames: Iterable[str]) -> None:
        self.entries: dict[str, tuple[int, str]] = {}
        # origin stream name -> its inames (a header without an iname, a server's before
        # 2.10, places every source of its origin)
        self._by_origin: dict[str, list[str]] = {}
        # headers of the messages stored since the positions were last read (``note``)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.dirty = False  # (changed since the last ``encode``: a file store rewrites it)
        self.configure(inames)

    def configure(self, inames: Iterable[str]) -> None:
        """The sources now configured: others are forgotten, new ones start unseen."""
        wanted = set(inames)
        self._resolve()
        self.entries = {i: self.entries.get(i, (0, "")) for i in sorted(wanted)}
        by_origin: dict[str, list[str]] = {}
        for i in self.entries:
            by_origin.setdefault(i.split(" ", 1)[0].split(":", 1)[0], []).append(i)
        self._by_origin = by_origin

    def note(self, hdr: bytes) -> None:
        """A message with these headers was stored (after every one before it). Every
        message of a sourcing stream has one, so nothing is read here: the headers wait
        (a reference each, up to ``_PENDING_MSGS`` or ``_PENDING_BYTES``) and are read
        newest first when the positions are asked for or too many wait, each source
        placed by the newest header naming it (``_resolve``)."""
        self._pending.append(hdr)
        self._pending_bytes += len(hdr)
        self.dirty = True
        if len(self._pending) >= _PENDING_MSGS or self._pending_bytes >= _PENDING_BYTES:
            self._resolve()

    def _resolve(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_bytes = 0
        self.place_newest_first(reversed(pending))

    def place_newest_first(self, headers: Iterable[bytes | None]) -> None:
        """Place each source by the first of ``headers`` (newest first) naming it; stops
        reading once every source is placed. Sources no header names keep what they had."""
        todo = set(self.entries)
        entries = self.entries
        for hdr in headers:
            if not todo:
                break
            parsed = source_of(hdr)
            if parsed is None:
                continue
            iname, origin, seq, ident = parsed
            for i in [iname] if iname else self._by_origin.get(origin, ()):
                if i in todo:
                    entries[i] = (seq, ident)
                    todo.discard(i)
        self.dirty = True

    def seed(self, entries: dict[str, tuple[int, str]]) -> None:
        """Positions read back from a file or taken from a snapshot, for the configured
        sources among them (newer than anything noted before)."""
        self._resolve()
        self.dirty = True
        for iname, pos in entries.items():
            if iname in self.entries:
                self.entries[iname] = pos

    def reset(self) -> None:
        self._pending = []
        self._pending_bytes = 0
        self.dirty = True
        for i in self.entries:
            self.entries[i] = (0, "")

    def known(self) -> dict[str, tuple[int, str]]:
        """The sources seen, with their positions."""
        self._resolve()
        return {i: p for i, p in self.entries.items() if p[0] > 0}

    def encode(self, stamp: int) -> bytes:
        """The file: the positions of the messages below sequence ``stamp``."""
        known = {i: list(p) for i, p in self.known().items()}
        self.dirty = False
        body = orjson.dumps({"stamp": stamp, "sources": known})
        return _MAGIC + b"%08x" % zlib.crc32(body) + body


def decode_sources(raw: bytes) -> tuple[int, dict[str, tuple[int, str]]] | None:
    """(stamp, positions) of a file ``encode`` wrote; None when it is not one (damaged,
    torn, another format): the stream then scans, as without a file."""
    head = len(_MAGIC) + 8
    if not raw.startswith(_MAGIC) or len(raw) < head:
        return None
    body = raw[head:]
    try:
        if int(raw[len(_MAGIC) : head], 16) != zlib.crc32(body):
            return None
        doc = orjson.loads(body)
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    stamp = doc.get("stamp")
    sources = doc.get("sources")
    if not isinstance(stamp, int) or stamp < 1 or not isinstance(sources, dict):
        return None
    out: dict[str, tuple[int, str]] = {}
    for iname, pos in sources.items():
        if (
            not isinstance(pos, list)
            or len(pos) != 2
            or not isinstance(pos[0], int)
            or pos[0] < 1
            or not isinstance(pos[1], str)
        ):
            return None
        out[str(iname)] = (pos[0], pos[1])
    return stamp, out
