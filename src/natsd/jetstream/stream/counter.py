"""Message counters (nats-server 2.12, ADR-49): on a stream with ``allow_msg_counter``
every message is an increment. A publish carries ``Nats-Incr: <integer>`` and no payload;
the stream stores it with the body ``{"val":"<new value>"}``, the subject's last value plus
the increment, and the PubAck carries ``"val"``. The value is nothing but the subject's last
stored message (a purge of the subject starts it again at 0); integers of any size.

The rules and errors are nats-server 2.15's (``stream.go`` ``getMessageIncr`` and
``processJetStreamMsg``, checked against the binary in tests/differential):

- ``Nats-Incr`` is found as nats-server's ``sliceHeader`` finds it: the key exactly as
  written, its first occurrence, leading spaces skipped and nothing trimmed at the end;
  empty is absent; the value is Go's ``big.Int.SetString(v, 10)``: ``[+-]?[0-9]+``;
- an increment with a payload, or with a rollup or any ``Nats-Expected-*`` header, is
  invalid; on a stream without counters it is "message counters is disabled";
- the stored header block is the publisher's, with ``Nats-Counter-Sources`` carried over
  from the last message when it has one: the aggregation of sourced counters. A counter
  stream that sources other counters adds to its subject what each origin subject's value
  moved by since the value last seen from it, kept in that header as
  ``{"<origin stream>":{"<origin subject>":"<value>"}}`` (``merge_sourced``).

On a replicated stream the leader computes the value before it proposes the message
(nats-server's ``checkMsgHeadersPreClusteredProposal``), from the running total of the
increments still in flight on the subject (``Replica.counters``) or else the last stored
message; every replica stores the proposed message as it is.
"""

from __future__ import annotations

import json
import re
from typing import Final

from natsd.core.headers import slice_header
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import StreamStore

__all__ = [
    "COUNTER_SOURCES",
    "MAX_HEADER",
    "ack_value",
    "check_increment",
    "counter_body",
    "counter_value",
    "increment_of",
    "is_sources_map",
    "merge_sourced",
]

INCR: Final = b"Nats-Incr"
COUNTER_SOURCES: Final = "Nats-Counter-Sources"
# nats-server refuses a stored header block longer than this (math.MaxUint16)
MAX_HEADER: Final = 65535
# big.Int.SetString(s, 10), ASCII only (Python's int() also takes "1_0", " 7" and other
# scripts' digits)
_BIG_INT: Final = re.compile(rb"[+-]?[0-9]+")
# Headers an increment may not carry (with a value): it is computed, not conditional.
_NOT_WITH_INCR: Final = (
    b"Nats-Rollup",
    b"Nats-Expected-Stream",
    b"Nats-Expected-Last-Msg-Id",
    b"Nats-Expected-Last-Subject-Sequence-Subject",
    b"Nats-Expected-Last-Sequence",
    b"Nats-Expected-Last-Subject-Sequence",
)


def increment_of(hdr: bytes | None) -> bytes | None:
    """The raw ``Nats-Incr`` value of a publish; None when absent or empty."""
    if not hdr:
        return None
    raw = slice_header(hdr, INCR)
    return raw or None


def check_increment(cfg: StreamConfig, hdr: bytes, raw: bytes, payload: int) -> int | ApiError:
    """The increment of a publish that carries ``Nats-Incr`` (``raw``), or why it is
    refused, in nats-server's order: invalid, disabled, a payload, an incompatible header."""
    if not _BIG_INT.fullmatch(raw):
        return E.JSMessageIncrInvalidErr()
    if not cfg.allow_msg_counter:
        return E.JSMessageIncrDisabledErr()
    if payload:
        return E.JSMessageIncrPayloadErr()
    for key in _NOT_WITH_INCR:
        if slice_header(hdr, key):
            return E.JSMessageIncrInvalidErr()
    return int(raw)


def counter_value(store: StreamStore, subject: str) -> tuple[int, bytes | None] | None:
    """The subject's current value and its ``Nats-Counter-Sources`` (from its last stored
    message; 0 and none without one), or None when that message is no counter (nats-server's
    "message counter is broken")."""
    last = store.load_last_msg(subject)
    if last is None:
        return 0, None
    value = _value_of(last.data)
    if value is None:
        return None
    sources = slice_header(last.hdr, COUNTER_SOURCES.encode()) if last.hdr else None
    if sources is not None and not is_sources_map(sources):
        return None
    return value, sources


def _value_of(body: bytes) -> int | None:
    """``{"val":"<integer>"}`` as Go's encoding/json reads it into a struct: other fields
    ignored, the key matched without case, the last of repeated keys wins."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    val: object = None
    for k, v in doc.items():
        if k.lower() == "val":
            val = v
    if not isinstance(val, str) or not _BIG_INT.fullmatch(val.encode()):
        return None
    return int(val)


def is_sources_map(raw: bytes) -> bool:
    """Does ``raw`` unmarshal into Go's ``map[string]map[string]string``?"""
    try:
        doc = json.loads(raw)
    except ValueError:
        return False
    if doc is None:
        return True
    if not isinstance(doc, dict):
        return False
    return all(
        v is None or (isinstance(v, dict) and all(isinstance(x, str) for x in v.values()))
        for v in doc.values()
    )


def ack_value(body: bytes) -> bytes:
    """The PubAck's ``"val"`` (a JSON string) of a stored counter message."""
    value = _value_of(body)
    return b'"%d"' % (value if value is not None else 0)


def counter_body(value: int) -> bytes:
    """The stored body of a counter message."""
    return b'{"val":"%d"}' % value


def merge_sourced(
    hdr: bytes, subject: str, body: bytes, sources: bytes | None
) -> tuple[int, bytes] | None:
    """A sourced counter message (nats-server's ``processJetStreamMsg`` with a
    ``Nats-Stream-Source``): the increment it makes, its origin's value less the value
    last seen from that origin stream and subject, and the updated Nats-Counter-Sources
    (Go's JSON: keys sorted, no spaces, ``<>&`` escaped). None when its body is no
    counter value."""
    value = _value_of(body)
    if value is None:
        return None
    src = slice_header(hdr, b"Nats-Stream-Source") or b""
    fields = src.decode(errors="replace").split(" ")
    origin = fields[0]
    origin_subject = fields[4] if len(fields) >= 5 else subject
    doc: dict[str, dict[str, str]] = {}
    if sources:
        loaded = json.loads(sources)
        if isinstance(loaded, dict):
            doc = {k: dict(v or {}) for k, v in loaded.items()}
    seen = doc.setdefault(origin, {})
    prev = seen.get(origin_subject, "")
    seen[origin_subject] = str(value)
    previous = int(prev) if _BIG_INT.fullmatch(prev.encode()) else 0
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return value - previous, text.encode()
