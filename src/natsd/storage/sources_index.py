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

from natsd.core.source_header import HDR_LINE, source_of

__all__ = ["SOURCES_FILE", "SourcesIndex", "decode_sources"]

SOURCES_FILE: Final = "sources.idx"
_MAX_DIGITS: Final = 20  # (a uint64's: a longer number is no sequence)
_MAGIC: Final = b"NSRC1"


class SourcesIndex:
    """Positions by iname ((origin seq, identity); seq 0: none seen)."""

    __slots__ = ("_by_origin", "_ident", "_keys", "entries")

    def __init__(self, inames: Iterable[str]) -> None:
        self.entries: dict[str, tuple[int, str]] = {}
        # origin stream name -> its inames (a header without an iname, a server's before
        # 2.10, places every source of its origin)
        self._by_origin: dict[str, list[str]] = {}
        # the inames as the header spells them (``note``'s look-up, without decoding)
        self._keys: dict[bytes, str] = {}
        self._ident: tuple[bytes, str] = (b"", "")  # (the last identity read, decoded)
        self.configure(inames)

    def configure(self, inames: Iterable[str]) -> None:
        """The sources now configured: others are forgotten, new ones start unseen."""
        wanted = set(inames)
        self.entries = {i: self.entries.get(i, (0, "")) for i in sorted(wanted)}
        self._keys = {i.encode(): i for i in self.entries}
        by_origin: dict[str, list[str]] = {}
        for i in self.entries:
            by_origin.setdefault(i.split(" ", 1)[0].split(":", 1)[0], []).append(i)
        self._by_origin = by_origin

    def note(self, hdr: bytes) -> None:
        """A message with these headers was stored (after every one before it). Every
        message of a sourcing stream has one: the usual form (``<origin> <seq> <filters>
        <dests> <subject> <identity>``, the iname being the first, third and fourth
        fields) is read with finds and slices; the others go through the parser."""
        at = hdr.find(HDR_LINE)
        if at < 0:
            return
        start = at + len(HDR_LINE)
        while start < len(hdr) and hdr[start] == 32:
            start += 1
        end = hdr.find(b"\r\n", start)
        value = hdr[start:end] if end >= 0 else hdr[start:]
        s1 = value.find(b" ")
        s2 = value.find(b" ", s1 + 1) if s1 > 0 else -1
        s3 = value.find(b" ", s2 + 1) if s2 > 0 else -1
        s4 = value.find(b" ", s3 + 1) if s3 > 0 else -1
        if s4 > 0 and not value.startswith(b"$JS.ACK."):
            iname = self._keys.get(value[:s1] + value[s2:s4])
            if iname is None:
                return  # (not a configured source's)
            seq_b = value[s1 + 1 : s2]
            if not seq_b.isdigit() or len(seq_b) > _MAX_DIGITS:
                return
            s5 = value.find(b" ", s4 + 1)
            s6 = value.find(b" ", s5 + 1) if s5 > 0 else -1
            ident_b = value[s5 + 1 : s6 if s6 > 0 else len(value)].strip() if s5 > 0 else b""
            last = self._ident
            if ident_b != last[0]:
                last = (ident_b, ident_b.decode(errors="replace"))
                self._ident = last
            self.entries[iname] = (int(seq_b), last[1])
            return
        parsed = source_of(hdr)
        if parsed is None:
            return
        iname, origin, seq, ident = parsed
        if iname:
            if iname in self.entries:
                self.entries[iname] = (seq, ident)
            return
        for i in self._by_origin.get(origin, ()):
            self.entries[i] = (seq, ident)

    def seed(self, entries: dict[str, tuple[int, str]]) -> None:
        """Positions read back from a file, for the configured sources among them."""
        for iname, pos in entries.items():
            if iname in self.entries:
                self.entries[iname] = pos

    def reset(self) -> None:
        for i in self.entries:
            self.entries[i] = (0, "")

    def known(self) -> dict[str, tuple[int, str]]:
        """The sources seen, with their positions."""
        return {i: p for i, p in self.entries.items() if p[0] > 0}

    def encode(self, stamp: int) -> bytes:
        """The file: the positions of the messages below sequence ``stamp``."""
        known = {i: list(p) for i, p in self.known().items()}
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
