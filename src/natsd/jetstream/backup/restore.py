"""A stream made from a backup (``RestoreStreamV2``), checked whole before anything exists.

:class:`ArchiveCheck` reads the archive as it arrives (S2 frames and their checksums, the
NATSARC1 entries, their order: ``state.json`` first, then as many ``consumers/<name>`` as
the state counts, then messages in ascending sequence, then the end sentinel) and keeps
only the state and the consumers. A damaged, truncated or out-of-order archive is refused
with the reason before a stream or a store is made; so is one whose consumers' configs the
stream would refuse. Only then does :func:`restore_stream` read the archive a second time
into a new store, and start the stream on it as recovery starts a stream found on disk;
a failure on the way (a full disk) removes the store again: an interrupted restore leaves
no half stream.

nats-server restores a message whose ``Nats-TTL`` has run out as a deleted sequence, and
keeps each message's sequence and time; so does this.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any, Final

import orjson

from natsd.core.headers import slice_header
from natsd.core.s2 import FrameReader
from natsd.jetstream.config.consumer_config import (
    ConsumerConfig,
    check_config,
    parse_create_request,
    set_defaults,
)
from natsd.jetstream.config.stream_config import StreamConfig
from natsd.jetstream.engine import (
    JsAccount,
    StreamRecovery,
    add_consumer,
    add_stream,
    check_new_stream,
    delete_stream,
    new_stream_store,
)
from natsd.jetstream.stream.headers import parse_ttl
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.protocol.natsarc import ArchiveError, Entry, EntryReader
from natsd.storage.store import StoreError

__all__ = ["ArchiveCheck", "restore_stream"]

_READ: Final = 256 * 1024
# More consumer entries than this is not a backup (a stream's consumers are bounded by its
# account far below it).
_MAX_CONSUMERS: Final = 100_000


class ArchiveCheck:
    """Reads a backup as it arrives and refuses it (``ValueError``) at its first fault."""

    __slots__ = (
        "_entries",
        "_frames",
        "_want_consumers",
        "consumers",
        "ended",
        "last_seq",
        "messages",
        "state",
    )

    def __init__(self, max_body: int) -> None:
        self._frames = FrameReader()
        self._entries = EntryReader(max_body)
        self.state: dict[str, Any] | None = None
        self.consumers: list[tuple[str, dict[str, Any]]] = []
        self._want_consumers = 0
        self.messages = 0
        self.last_seq = 0
        self.ended = False

    def feed(self, data: bytes) -> None:
        for block in self._frames.feed(data):
            if self.ended:
                continue  # (nats-server stops reading at the sentinel)
            for e in self._entries.feed(block):
                self._entry(e)

    def finish(self) -> None:
        self._frames.finish()
        if not self.ended:
            self._entries.finish()
            raise ArchiveError("backup was truncated")

    def _entry(self, e: Entry) -> None:
        if self.ended:
            return
        if self.state is None:
            if e.name != b"state.json":
                raise ArchiveError("expected state.json first")
            try:
                state = orjson.loads(e.body)
            except orjson.JSONDecodeError as err:
                raise ArchiveError(f"error in state.json: {err}") from None
            if not isinstance(state, dict):
                raise ArchiveError("error in state.json: not an object")
            for key in ("first_seq", "last_seq", "consumer_count"):
                v = state.get(key, 0)
                if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v >= 1 << 64:
                    raise ArchiveError(f"error in state.json: bad {key}")
            if state.get("consumer_count", 0) > _MAX_CONSUMERS:
                raise ArchiveError("error in state.json: too many consumers")
            self.state = state
            self._want_consumers = int(state.get("consumer_count", 0))
            return
        if len(self.consumers) < self._want_consumers:
            if not e.name.startswith(b"consumers/"):
                raise ArchiveError(f"expected consumer, found {e.name.decode(errors='replace')!r}")
            name = e.name[len(b"consumers/") :].decode(errors="replace")
            try:
                doc = orjson.loads(e.body)
            except orjson.JSONDecodeError as err:
                raise ArchiveError(f"failed to decode consumer {name!r} state: {err}") from None
            if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
                raise ArchiveError(f"consumer {name!r} is missing config")
            if not isinstance(doc.get("state"), dict):
                raise ArchiveError(f"consumer {name!r} is missing state")
            self.consumers.append((name, doc))
            return
        if e.seq == 0:
            if e.is_end:
                self.ended = True
                return
            raise ArchiveError("expected message sequence")
        if e.seq <= self.last_seq:
            raise ArchiveError(f"message sequence {e.seq} out of order")
        if not e.name or e.hdr_size > len(e.body):
            raise ArchiveError(f"failed to parse message sequence {e.seq}")
        self.last_seq = e.seq
        self.messages += 1


def _entries(spool: IO[bytes], max_body: int) -> Iterator[Entry]:
    """The archive's entries, read back from where it was spooled (already checked)."""
    spool.seek(0)
    frames = FrameReader()
    entries = EntryReader(max_body)
    while True:
        data = spool.read(_READ)
        if not data:
            return
        for block in frames.feed(data):
            yield from entries.feed(block)


def _ttl(hdr: bytes) -> int:
    raw = slice_header(hdr, b"Nats-TTL")
    if not raw:
        return 0
    ttl = parse_ttl(raw.decode(errors="replace"))
    return ttl if ttl is not None and ttl > 0 else 0


def consumer_configs(
    ja: JsAccount, cfg: StreamConfig, check: ArchiveCheck
) -> list[tuple[ConsumerConfig, dict[str, Any]]]:
    """Each backed-up consumer's config (decoded, defaulted and checked against ``cfg``
    as a create request's) and its state in natsd's form."""
    out = []
    for name, doc in check.consumers:
        try:
            body = orjson.dumps({"stream_name": cfg.name, "config": doc["config"]})
            ccfg = parse_create_request(body).config
            if not ccfg.durable_name and not ccfg.name:
                ccfg.name = name
            set_defaults(ccfg, cfg, False, ja.limits.max_ack_pending)
            check_config(ccfg, cfg, ja.limits.max_ack_pending)
        except ApiError as err:
            raise ArchiveError(f"failed to add consumer {name!r}: {err.description}") from None
        out.append((ccfg, _natsd_state(doc["state"])))
    return out


def _natsd_state(st: dict[str, Any]) -> dict[str, Any]:
    """nats-server's ``ConsumerState`` JSON in the form natsd saves it."""

    def pair(key: str) -> dict[str, int]:
        p = st.get(key) or {}
        return {
            "consumer_seq": int(p.get("consumer_seq", 0)),
            "stream_seq": int(p.get("stream_seq", 0)),
        }

    pending = {
        int(s): [int(p.get("Sequence", 0)), int(p.get("Timestamp", 0))]
        for s, p in (st.get("pending") or {}).items()
        if isinstance(p, dict)
    }
    return {
        "delivered": pair("delivered"),
        "ack_floor": pair("ack_floor"),
        "pending": pending,
        "redelivered": {int(s): int(n) for s, n in (st.get("redelivered") or {}).items()},
    }


def restore_stream(
    ja: JsAccount,
    cfg: StreamConfig,
    spool: IO[bytes],
    check: ArchiveCheck,
    max_body: int,
    created: int = 0,
) -> Stream:
    """The stream ``cfg`` with the checked backup ``check`` read from ``spool``, its store
    synced. ``created``: the creation time a cluster's meta group gave it, else now."""
    assert check.state is not None and check.ended
    if cfg.name in ja.streams:
        raise E.JSStreamNameExistRestoreFailedErr()
    check_new_stream(ja, cfg)
    try:
        consumers = consumer_configs(ja, cfg, check)
    except ArchiveError as err:
        raise E.JSStreamRestoreErrF(err=str(err)) from None
    store, created = new_stream_store(ja, cfg, created)
    first, last = int(check.state.get("first_seq", 0)), int(check.state.get("last_seq", 0))
    now = ja.engine.clock.time_ns()
    try:
        if first > 1:
            store.compact(first)  # (the first sequence, also of a backup with no messages)
        lseq = max(first, 1) - 1
        for e in _entries(spool, max_body):
            if e.seq == 0:
                if e.is_end:
                    break
                continue  # state.json, consumers
            hdr = e.body[: e.hdr_size]
            ttl = _ttl(hdr) if hdr else 0
            if e.seq > lseq + 1:
                store.skip_msgs(lseq + 1, e.seq - lseq - 1)
            lseq = e.seq
            if ttl > 0 and e.ts + ttl * 1_000_000_000 < now:
                store.skip_msgs(e.seq, 1)  # expired already: its sequence stays used
                continue
            subject = e.name.decode("utf-8", errors="surrogateescape")
            store.store_raw(subject, hdr or None, e.body[e.hdr_size :], e.seq, e.ts, ttl)
        if lseq < last:
            store.skip_msgs(lseq + 1, last - lseq)  # (trailing deleted sequences stay used)
        store.flush()
        store.sync()
    except (StoreError, OSError, ValueError) as err:
        ja.engine.catalog.remove(ja.account.name, cfg.name, cfg.storage, store)
        raise E.JSStreamRestoreErrF(err=str(err) or type(err).__name__) from None
    stream = add_stream(ja, cfg, StreamRecovery(store, created))
    ja.engine.stream_action(ja, cfg.name, "create")
    try:
        for ccfg, state in consumers:
            add_consumer(ja, stream, ccfg, action="create", initial=state)
    except ApiError as err:
        delete_stream(ja, stream)
        raise E.JSStreamRestoreErrF(err=f"failed to add consumer: {err.description}") from None
    return stream
