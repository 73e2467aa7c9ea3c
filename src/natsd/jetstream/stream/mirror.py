"""A mirror stream's feed from its origin (nats-server ``stream.go``:
``setupMirrorConsumer``, ``processInboundMirrorMsg``, ``retryMirrorConsumer``).

The consumer (``feed.py``) starts after the last sequence the mirror holds. Every message it
delivers is stored at the origin's own sequence with the origin's timestamp; a run of
origin sequences that were deleted (the delivery sequence still contiguous) becomes a gap
of deleted sequences in the mirror. A mirror keeps the origin's headers as they are and has
no duplicate window.

This module owns the feed's rules; the stream stores (``MirrorHost``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

from natsd.core.scheduler import Clock, Scheduler
from natsd.jetstream.config.stream_types import StreamSource
from natsd.jetstream.stream.feed import OriginFeed, strip_origin_headers
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.store import StoredMsg

__all__ = ["MirrorFeed", "MirrorHost"]

CAUGHT_UP: Final = 10  # pending below this: a mirror_direct mirror answers direct gets


class MirrorHost(Protocol):
    """What the feed needs of its mirror stream."""

    @property
    def name(self) -> str: ...

    def when_committed(self, done: Callable[[], None]) -> None:
        """Run ``done`` once what the stream took so far is stored (committed, on a
        replicated stream; never, on one that stopped leading)."""
        ...

    def last_seq(self) -> int: ...

    def never_written(self) -> bool:
        """Nothing was ever stored (the configured start position applies)."""
        ...

    def mirror_align(self, delivered: int) -> None:
        """The origin's consumer starts after ``delivered``, past the mirror's last
        sequence: the mirror's sequences catch up (empty ones)."""
        ...

    def mirror_skip(self, first: int, last: int) -> None:
        """Origin sequences ``first``..``last`` were deleted there: deleted here too."""
        ...

    def mirror_store(self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int) -> bool:
        """Store at the origin's ``seq`` and ``ts``; False when the sequence does not
        follow the mirror's last (the feed starts again from there)."""
        ...

    def mirror_caught_up(self) -> None:
        """Few origin messages are left to copy: a ``mirror_direct`` mirror now answers
        direct gets for its origin."""
        ...


class MirrorFeed(OriginFeed):
    """The feed of one mirror stream."""

    def __init__(
        self,
        host: MirrorHost,
        source: StreamSource,
        sublist: Sublist[Subscription],
        scheduler: Scheduler,
        clock: Clock,
        stable: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(source, sublist, scheduler, clock, "M", stable, metadata)
        self._host = host
        self._committed = host.when_committed
        # (bound once: a call through the protocol looks the method up for every message)
        self._store: Callable[[str, bytes | None, bytes, int, int], bool] = host.mirror_store

    def _start_position(self, cfg: dict[str, Any]) -> None:
        src = self.source
        host = self._host
        if not host.never_written():
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = host.last_seq() + 1
        elif src.opt_start_seq > 0:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = src.opt_start_seq
        elif src.opt_start_time is not None:
            cfg["deliver_policy"] = "by_start_time"
            cfg["opt_start_time"] = src.opt_start_time

    def _before_request(self) -> None:
        self.sseq = self._host.last_seq()

    def _created(self, delivered: int, hdr: bytes | None) -> None:
        host = self._host
        if host.last_seq() < delivered:
            host.mirror_align(delivered)
        self.sseq = max(delivered, host.last_seq())

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
        subj = self._transformed(subject) if self._transforms else subject.decode(errors="replace")
        self._copy(subj, hdr, data, sseq, dseq, ts, pending)

    def _taker(self) -> Callable[[Subscription, bytes, StoredMsg, int, int, int], None] | None:
        return self._take_stored

    def _take_stored(
        self, sub: Subscription, pre: bytes, m: StoredMsg, dc: int, dseq: int, pending: int
    ) -> None:
        """A delivery the origin's consumer on this server hands over as stored
        (``Subscription.take``): what ``_on_msg`` and ``_take`` do with one that carries
        the same numbers in its reply subject."""
        if sub is not self._deliver or dc > 1 or pre != self._ack_pre:
            return  # (another consumer's, an earlier one of this feed's; a redelivery)
        self.last = self._mono()
        sseq = m.seq
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq = dseq
            return  # copied already
        subj = self._transformed(m.subject.encode()) if self._transforms else m.subject
        self._copy(subj, m.hdr, m.data, sseq, dseq, m.ts, pending)

    def _copy(
        self,
        subj: str,
        hdr: bytes | None,
        data: bytes,
        sseq: int,
        dseq: int,
        ts: int,
        pending: int,
    ) -> None:
        if sseq != self.sseq + 1:
            if dseq != self.dseq + 1:
                self.retry()  # a delivery was lost
                return
            self._host.mirror_skip(self.sseq + 1, sseq - 1)  # deleted at the origin
        osseq, odseq, olag = self.sseq, self.dseq, self.lag
        self.sseq, self.dseq = sseq, dseq
        self.lag = pending - 1 if pending else 0
        if pending < CAUGHT_UP:
            self._host.mirror_caught_up()
        if not self._store(subj, strip_origin_headers(hdr) if hdr else None, data, sseq, ts):
            self.sseq, self.dseq, self.lag = osseq, odseq, olag
            self.retry()
