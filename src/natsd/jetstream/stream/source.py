"""One of a stream's ``sources``: its feed from the origin stream (nats-server ``stream.go``:
``trySetupSourceConsumer``, ``processInboundSourceMsg``, ``genSourceHeader``,
``startingSequenceForSources``).

A sourced message becomes a new message of the sourcing stream (its own sequence and
time), published through the stream's publish path with nats-server's relaxations for
sourced messages and a ``Nats-Stream-Source`` header naming where it came from:
``<origin>[:<api hash>] <origin seq> <filters> <destinations> <original subject>
<origin identity>``, the filters and destinations of several transforms joined by a form
feed. That header is how a
source finds its place again: after a restart the stream's messages are read backwards
until each source's newest one is found (``recover_positions``), and its consumer starts
just after it. Deliveries are tracked by their delivery sequence: a gap in the origin's
sequence is a deleted origin message, a gap in the delivery sequence a lost delivery (the
consumer is asked for again from the last origin sequence copied).

The header's sixth field is the origin's identity (nats-server 2.15: a hash of the origin's
creation time, which its consumer answers carry). A source names the identity it knows in
each consumer request; an origin deleted and made again refuses it (10225), and the source
copies the new origin from its start.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any, Final, Protocol

from natsd.core.clock import rfc3339
from natsd.core.headers import slice_header
from natsd.core.scheduler import Clock, Scheduler
from natsd.core.source_header import H_STREAM_SOURCE_B, parse_source_header, source_of
from natsd.core.source_header import HDR_LINE as _HDR_LINE
from natsd.jetstream.config.consumer_config import rfc3339_to_ns
from natsd.jetstream.config.stream_types import StreamSource
from natsd.jetstream.stream.feed import OriginFeed, strip_origin_headers
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.store import StreamStore

__all__ = [
    "SOURCED_FAILED",
    "SOURCED_OK",
    "STREAM_IDENTITY",
    "SourceFeed",
    "SourceHost",
    "get_hash",
    "iname_of",
    "parse_source_header",
    "recover_positions",
]

log: Final = logging.getLogger("natsd")

# a consumer request's expected origin identity, and the answer's actual one (2.15)
STREAM_IDENTITY: Final = b"Nats-Stream-Identity"
_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
SOURCED_OK: Final = 1  # stored (or proposed), or a duplicate the stream already holds
SOURCED_FAILED: Final = 0  # refused: the consumer starts again at this message


def get_hash(s: str) -> str:
    """nats-server's ``getHash``: 8 base-62 characters of the SHA-256 of ``s``."""
    b = hashlib.sha256(s.encode()).digest()
    return "".join(_DIGITS[b[i] % 62] for i in range(8))


def iname_of(src: StreamSource) -> str:
    """``composeIName``: ``<name>[:<api hash>] <filters> <destinations>``, what tells two
    sources apart and what their messages' header carries."""
    name = src.name
    if src.external is not None and src.external.api:
        name += ":" + get_hash(src.external.api)
    if src.consumer is not None:
        name += ":C=" + get_hash(src.consumer.name)
    if not src.subject_transforms:
        return f"{name} {src.filter_subject or '>'} >"
    srcs = "\f".join(t.src or ">" for t in src.subject_transforms)
    dests = "\f".join(t.dest or ">" for t in src.subject_transforms)
    return f"{name} {srcs} {dests}"


class SourceHost(Protocol):
    """What a source's feed needs of its sourcing stream."""

    @property
    def name(self) -> str: ...

    def when_committed(self, done: Callable[[], None]) -> None:
        """Run ``done`` once what the stream took so far is stored (committed, on a
        replicated stream; never, on one that stopped leading)."""
        ...

    def source_store(self, subject: str, hdr: bytes, data: bytes, plain: bool) -> int:
        """Publish a sourced message into the stream: ``SOURCED_OK`` or ``SOURCED_FAILED``
        (``plain``: its one ``Nats-`` header is its Nats-Stream-Source)."""
        ...

    def source_start_state(self) -> tuple[int, int]:
        """(first sequence, last message's time in ns) of the stream, for where a source
        with no position starts."""
        ...


class SourceFeed(OriginFeed):
    """The feed of one of a stream's sources."""

    def __init__(
        self,
        host: SourceHost,
        source: StreamSource,
        sublist: Sublist[Subscription],
        scheduler: Scheduler,
        clock: Clock,
        stable: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(source, sublist, scheduler, clock, "S", stable, metadata)
        self._host = host
        self._committed = host.when_committed
        # (bound once: a call through the protocol looks the method up for every message)
        self._store: Callable[[str, bytes, bytes, bool], int] = host.source_store
        self.iname = iname_of(source)
        parts = self.iname.split(" ")
        # the header's value around the origin sequence: "<name> " and " <filters> <dests> "
        self._hdr_head = (parts[0] + " ").encode()
        self._hdr_mid = (" " + parts[1] + " " + parts[2] + " ").encode()
        # the origin's identity (nats-server 2.15: a hash of its creation time), from its
        # answers or the newest header naming this source; the header's sixth field
        self.ident = ""
        self._hdr_tail = b""

    # ------------------------------------------------------------------ the request
    def _start_position(self, cfg: dict[str, Any]) -> None:
        seq = self.sseq + 1
        if seq > 1:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = seq
            return
        src = self.source
        if src.opt_start_seq > 0:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = src.opt_start_seq
            return
        first, last_ts = self._host.source_start_state()
        if src.opt_start_time is not None:
            cfg["deliver_policy"] = "by_start_time"
            # (nats-server starts at the stream's last message when that is later)
            if last_ts and last_ts > rfc3339_to_ns(src.opt_start_time):
                cfg["opt_start_time"] = rfc3339(last_ts)
            else:
                cfg["opt_start_time"] = src.opt_start_time
        elif first > 1 and last_ts:
            # the sourcing stream was purged and its position is lost: from its last time
            cfg["deliver_policy"] = "by_start_time"
            cfg["opt_start_time"] = rfc3339(last_ts)

    def _request_headers(self) -> bytes | None:
        # the origin identity this source knows (empty at first: nothing to check)
        return b"NATS/1.0\r\n%s: %s\r\n\r\n" % (STREAM_IDENTITY, self.ident.encode())

    def _created(self, delivered: int, hdr: bytes | None) -> None:
        ident = slice_header(hdr, STREAM_IDENTITY) if hdr else None
        if ident:
            new = ident.decode(errors="replace")
            if self.ident and new != self.ident:
                # (a request that named the old identity is refused instead: _fail)
                log.warning("source stream %s was recreated: copying it again", self.source.name)
                self.sseq = 0
            self._set_ident(new)
        if self.sseq < delivered:
            self.sseq = delivered

    def _fail(self, error: dict[str, Any] | None) -> None:
        if error is not None and error.get("err_code") == 10225:
            # the origin was deleted and made again: its sequences start over, and so
            # does the copy (at once, not counted as a failure)
            log.warning("source stream %s was recreated: copying it again", self.source.name)
            self.sseq = self.dseq = 0
            self._set_ident("")
            self._cancel()
            if self._running:
                self._schedule()
            return
        super()._fail(error)

    def _set_ident(self, ident: str) -> None:
        self.ident = ident
        self._hdr_tail = (" " + ident).encode() if ident else b""

    # ------------------------------------------------------------------ messages
    def _take(
        self,
        subject: bytes,
        reply: bytes,
        hdr: bytes | None,
        data: bytes,
        sseq: int,
        dseq: int,
        ts: int,
        pending: int,
    ) -> None:
        if dseq != self.dseq + 1:
            if dseq > self.dseq and self.cname:
                self.retry()  # a delivery was lost
            return
        osseq, odseq = self.sseq, self.dseq
        self.sseq, self.dseq = sseq, dseq
        self.lag = pending - 1 if pending else 0
        # the origin sequence as its reply carries it, and the subject before transforms
        tok = reply[len(self._ack_pre) :].split(b".", 2)[1]
        line = b"%s: %s%s%s%s%s\r\n\r\n" % (
            H_STREAM_SOURCE_B, self._hdr_head, tok, self._hdr_mid, subject, self._hdr_tail
        )  # fmt: skip
        plain = True  # (no Nats- header of the origin's comes along)
        if hdr:
            # (a copy of a copy names only the stream it came from)
            kept = strip_origin_headers(hdr, _HDR_LINE)
            plain = b"Nats-" not in kept
            new_hdr = (kept[:-2] if kept.endswith(b"\r\n\r\n") else kept + b"\r\n") + line
        else:
            new_hdr = b"NATS/1.0\r\n" + line
        subj = self._transformed(subject) if self._transforms else subject.decode(errors="replace")
        if self._store(subj, new_hdr, data, plain) != SOURCED_OK:
            self.sseq, self.dseq = osseq, odseq
            self.retry()


def recover_positions(store: StreamStore, feeds: list[SourceFeed]) -> None:
    """``startingSequenceForSources``: each source's origin sequence last copied. The
    store's index (``StreamStore.sources_state``, nats-server 2.15's ``SourcesState``)
    places the sources its messages ever named, also after they were purged; the others
    are looked for in the newest message whose ``Nats-Stream-Source`` names them, reading
    the stream backwards until every source is placed or the stream's start is reached. A
    header of a server before 2.10 (no iname) places every source of its origin stream not
    yet placed."""
    todo: dict[str, list[SourceFeed]] = {}
    by_name: dict[str, list[SourceFeed]] = {}
    known = store.sources_state()
    for f in feeds:
        f.sseq = 0
        f.dseq = 0
        f._set_ident("")
        pos = known.get(f.iname)
        if pos is not None:
            f.sseq = pos[0]
            f._set_ident(pos[1])
            continue
        todo.setdefault(f.iname, []).append(f)
        key = f.iname.split(" ", 1)[0]
        by_name.setdefault(key, []).append(f)
    if not todo:
        return
    seq = store.last_seq()
    while todo and seq > 0:
        m = store.load_prev_msg(seq)
        if m is None:
            break
        seq = m.seq - 1
        parsed = source_of(m.hdr)
        if parsed is None:
            continue
        iname, stream, oseq, ident = parsed
        if iname:
            placed = todo.pop(iname, None)
            if placed is not None:
                for f in placed:
                    f.sseq = oseq
                    f._set_ident(ident)
            continue
        for f in by_name.get(stream, []):
            if f.iname in todo:
                del todo[f.iname]
                f.sseq = oseq
