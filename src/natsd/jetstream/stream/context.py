"""The two seams of a stream: what it needs from above, and what it asks of its consumers.

``StreamContext`` is everything a :class:`~natsd.jetstream.stream.stream.Stream` (and the
consumers reading it) use of the layers above: the account's Sublist, the engine's group
committer, catalog, clock and scheduler, advisories, and the account and server storage
limits. The engine builds one per stream (``engine.StreamHost``); a test or, later, a
replicated stream can build another. Nothing under ``stream/`` or ``consumer/`` imports the
engine.

``StreamListener`` is what a consumer offers its stream (the calls nats-server's
``stream.go`` makes into ``consumer.go``): hear about stored and removed messages, answer
the retention question ``need_ack``, follow a purge, stop. ``Stream.consumers`` holds
listeners; the stream never imports the consumer package.

Both are Protocols (checked by mypy, no base class). The per-message calls go through them
as they did through ``Any`` before; everything else is read once when a stream or a consumer
is built and kept as a plain attribute (``Stream.sublist``, ``Consumer.sched`` ...).
"""

from __future__ import annotations

from typing import Any, Protocol

from natsd.core.scheduler import Clock, Scheduler
from natsd.jetstream.stream.batch import BatchLimits
from natsd.jetstream.stream.commit import Committer
from natsd.jetstream.stream.fastbatch import FastLimits
from natsd.jetstream.wire.errors import ErrorDef
from natsd.router.sublist import Sublist
from natsd.router.subscription import InternalCallback, Subscription
from natsd.storage.catalog import StreamCatalog

__all__ = ["StreamContext", "StreamListener"]


class StreamContext(Protocol):
    """What a stream and its consumers need from the engine (one per stream)."""

    @property
    def clock(self) -> Clock:
        """Wall and monotonic time of every stream and consumer of the engine."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """Timers (``call_soon`` / ``call_later``); the loop, or a virtual one in tests."""
        ...

    @property
    def sublist(self) -> Sublist[Subscription]:
        """The account's Sublist: the stream's subjects, acks and deliveries live here."""
        ...

    @property
    def committer(self) -> Committer:
        """Group commit: PubAcks of file streams go out after the fsync covering them."""
        ...

    @property
    def catalog(self) -> StreamCatalog:
        """Where consumers save their config and state (``save_consumer*``)."""
        ...

    @property
    def account_name(self) -> str: ...

    @property
    def batch_limits(self) -> BatchLimits:
        """The server's atomic batch limits, and its count of open batches."""
        ...

    @property
    def fast_limits(self) -> FastLimits:
        """The server's fast batch limits, and its count of open fast batches."""
        ...

    @property
    def max_payload(self) -> int:
        """The server's max_payload: a message the stream makes itself (a counter's) is
        held to it as a published one is."""
        ...

    @property
    def domain(self) -> str:
        """The JetStream domain ("" for none): PubAcks carry it."""
        ...

    def send(self, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        """Publish into the account (replies, republish)."""
        ...

    def serve_mirror_direct(self, origin: str, stream: object, on: bool) -> None:
        """``stream``, a mirror with ``mirror_direct``, answers (or stops answering) the
        direct gets of its ``origin`` stream beside it."""
        ...

    def advise(
        self, subject: str, typ: str, body: dict[str, Any], system_too: bool = False
    ) -> None:
        """Publish a ``$JS.EVENT.*`` advisory, built only when someone listens (also in
        the system account, naming the stream's account, with ``system_too``)."""
        ...

    def limits_set(self) -> bool:
        """Whether publishes must check server or account storage limits at all."""
        ...

    def direct_answerer(self, mirror: object = None) -> InternalCallback | None:
        """What answers DIRECT.GET requests in the account (the API's), for a replica that
        serves them (``Stream.serve_direct``), or with ``mirror`` what that mirror answers
        its origin's with (``Stream.serve_origin_direct``); None without the API."""
        ...

    @property
    def clustered(self) -> bool:
        """The engine runs on a cluster (its streams' direct gets go to queue groups)."""
        ...

    def storage_exceeded(
        self, memory: bool, subject: str, hdr: bytes | None, data: bytes
    ) -> ErrorDef | None:
        """The error when storing this message would pass a storage limit, else None."""
        ...


class StreamListener(Protocol):
    """What a consumer offers its stream. All calls come on the event loop."""

    @property
    def name(self) -> str: ...

    @property
    def filters(self) -> list[str]:
        """The filter subjects (empty: every subject)."""
        ...

    @property
    def filter_all(self) -> bool: ...

    @property
    def direct(self) -> bool:
        """A mirror's or a source's consumer (``direct``): not listed, not counted."""
        ...

    def on_stored(self, seq: int, subject: str) -> None:
        """A message was stored (hot path: every publish)."""
        ...

    def on_removed(self, seq: int, subject: str) -> None:
        """A message left the stream: limits, delete, expiry, retention."""
        ...

    def on_bulk_removed(self) -> None:
        """A purge, compact or truncate removed many messages at once: recount."""
        ...

    def need_ack(self, seq: int, subject: str) -> bool:
        """Interest retention: does this consumer still need ``seq``?"""
        ...

    def purge(self, sseq: int, slseq: int, wider: bool) -> None:
        """The stream was purged; ``sseq`` is the new first sequence for this consumer."""
        ...

    def stop(self, *, deleted: bool, advisory: bool = True) -> None:
        """Stop delivering; ``deleted`` also drops the consumer's state."""
        ...


class RetentionView(Protocol):
    """What a replicated stream's retention asks of a consumer: whether its committed state
    still needs a message (``cluster/consumers.py``)."""

    @property
    def name(self) -> str: ...

    def need_ack(self, seq: int, subject: str) -> bool: ...
