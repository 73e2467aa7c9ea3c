"""The JetStream publish headers: their names and the checks a stream makes on them.

Called by ``Stream.process`` for every published message that has headers, so kept free of
allocation beyond what the checks need; compiled with the hot path. The checks run in
nats-server's order (``processJetStreamMsg``); the headers of features natsd does not
allow (atomic batches, schedules, sourcing) get nats-server's "disabled" errors;
counters have their own module (``counter.py``).
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from typing import Final

from natsd.core.clock import format_duration, parse_duration
from natsd.core.headers import HeaderError, parse_headers
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.config.subject_mapping import _is_valid_publish_subject
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import ErrMaxBytes, ErrMaxMsgs, StoreError, StreamStore

__all__ = [
    "FAST_BATCH_SUFFIX",
    "check_headers",
    "check_last_msg_id_and_rollup",
    "check_schedule_headers",
    "first",
    "is_marker",
    "limit_text",
    "marker_header",
    "msg_id_of",
    "only_msg_id",
    "parse_ttl",
]

H_MSG_ID: Final = "Nats-Msg-Id"
H_EXP_STREAM: Final = "Nats-Expected-Stream"
H_EXP_LAST_SEQ: Final = "Nats-Expected-Last-Sequence"
H_EXP_LAST_SUBJ_SEQ: Final = "Nats-Expected-Last-Subject-Sequence"
H_EXP_LAST_SUBJ_SEQ_SUBJ: Final = "Nats-Expected-Last-Subject-Sequence-Subject"
H_EXP_LAST_MSG_ID: Final = "Nats-Expected-Last-Msg-Id"
H_ROLLUP: Final = "Nats-Rollup"
H_TTL: Final = "Nats-TTL"
# nats-server 2.12+ publish headers (atomic batches, schedules, sourcing): on a stream that
# does not allow them, answered with nats-server's "disabled" errors.
H_BATCH_ID: Final = "Nats-Batch-Id"
H_SCHEDULE: Final = "Nats-Schedule"
H_SCHEDULE_TZ: Final = "Nats-Schedule-Time-Zone"
H_SCHEDULE_NEXT: Final = "Nats-Schedule-Next"
H_SCHEDULER: Final = "Nats-Scheduler"
H_STREAM_SOURCE: Final = "Nats-Stream-Source"
# A fast batch publish (nats-server 2.14) is told by its reply subject:
# <prefix>.<uuid>.<flow>.<gap mode>.<batch seq>.<operation>.$FI
FAST_BATCH_SUFFIX: Final = b".$FI"


def check_headers(
    cfg: StreamConfig,
    name: str,
    store: StreamStore,
    h: dict[str, list[str]],
    subject: str,
    check_schedule: Callable[[dict[str, list[str]], str], ApiError | None],
    sourced: bool = False,
) -> ApiError | None:
    """The publish header checks in nats-server's order (``processJetStreamMsg``), after
    a counter's increment (``counter.check_increment``). An empty value counts as no
    header, as nats-server's ``sliceHeader`` lookups do. ``check_schedule`` is the
    stream's (``schedule_check.py``, or ``check_schedule_headers`` without schedules).
    A Nats-Stream-Source is the server's to set: a client's is refused (nats-server 2.15's
    error). ``sourced``: a message one of the stream's sources copied, whose TTL and
    schedule headers are taken as they come."""
    exp = first(h, H_EXP_STREAM)
    if exp and exp != name:
        return E.JSStreamNotMatchErr()
    ttl_s = (first(h, H_TTL) or "").strip()
    ttl = parse_ttl(ttl_s) if ttl_s else None
    # An invalid Nats-TTL is refused later (below), a valid one here when TTLs are off.
    if ttl and not cfg.allow_msg_ttl and not sourced:
        return E.JSMessageTTLDisabledErr()
    exp_sseq = first(h, H_EXP_LAST_SUBJ_SEQ)
    if exp_sseq:
        on = first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ) or subject
        lm = store.load_last_msg(on)
        last = lm.seq if lm is not None else 0
        if not exp_sseq.isdigit() or int(exp_sseq) != last:
            return E.JSStreamWrongLastSequenceErrF(seq=last)
    elif first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ):
        return E.JSStreamExpectedLastSeqPerSubjectInvalid()
    exp_seq = first(h, H_EXP_LAST_SEQ)
    if exp_seq:
        last = store.state().last_seq
        if not exp_seq.isdigit() or int(exp_seq) != last:
            return E.JSStreamWrongLastSequenceErrF(seq=last)
    if sourced:
        return None
    error = check_schedule(h, subject)
    if error is not None:
        return error
    if first(h, H_STREAM_SOURCE):
        return E.JSMessageSourceHdrNotAllowedErr()
    return None

def check_last_msg_id_and_rollup(
    cfg: StreamConfig, last_msg_id: str, h: dict[str, list[str]], sourced: bool = False
) -> ApiError | None:
    """The checks nats-server makes after the duplicate window (a sourced message's
    rollup is applied whether or not the stream allows rollups)."""
    exp_id = first(h, H_EXP_LAST_MSG_ID)
    if exp_id and exp_id != last_msg_id:
        return E.JSStreamWrongLastMsgIDErrF(id=last_msg_id)
    rollup = first(h, H_ROLLUP)
    if rollup:
        if not cfg.allow_rollup_hdrs and not sourced:
            return E.JSStreamRollupFailedF(err="rollup not permitted")
        if rollup.lower() not in ("sub", "all"):
            text = f'rollup value invalid: "{rollup}"'
            return E.JSStreamRollupFailedF(err=text)
    return None


def msg_id_of(hdr: bytes) -> str:
    """The Nats-Msg-Id of a stored header block ("" if none or unparsable)."""
    try:
        _status, _desc, h = parse_headers(hdr)
    except HeaderError:
        return ""
    return first(h, H_MSG_ID) or ""


def check_schedule_headers(h: dict[str, list[str]], subject: str) -> ApiError | None:
    """nats-server's message schedule checks on a stream without schedules: a schedule,
    or a time zone it cannot load, is "message schedules is disabled"; Nats-Schedule-Next
    must be "purge" with a valid Nats-Scheduler before it is refused the same way, and a
    Nats-Scheduler alone is invalid."""
    tz = first(h, H_SCHEDULE_TZ)
    if first(h, H_SCHEDULE) or (tz is not None and not valid_time_zone(tz)):
        return E.JSMessageSchedulesDisabledErr()
    scheduler = first(h, H_SCHEDULER)
    nxt = first(h, H_SCHEDULE_NEXT)
    if nxt:
        if nxt != "purge":
            return E.JSMessageSchedulesSchedulerInvalidErr()
        if not scheduler or scheduler == subject or not _is_valid_publish_subject(scheduler):
            return E.JSMessageSchedulesSchedulerInvalidErr()
        return E.JSMessageSchedulesDisabledErr()
    if scheduler:
        return E.JSMessageSchedulesSchedulerInvalidErr()
    return None


def valid_time_zone(name: str) -> bool:
    """Go's ``time.LoadLocation`` (an empty name is refused by nats-server before)."""
    if name in ("UTC", "Local"):
        return True
    if not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (KeyError, ValueError, OSError):
        return False
    return True


_ONLY_ID_LINE: Final = b"NATS/1.0\r\nNats-Msg-Id:"


def only_msg_id(hdr: bytes) -> str | None:
    """The Nats-Msg-Id of a well-formed header block whose only ``Nats-`` header it is ("" for
    an empty one); None for any other block, which the full checks then read. Every publish
    check is about a ``Nats-`` header, so such a message passes them all: its id is all
    there is to look at (the usual header block of a deduplicated publish, read here without
    building the header map)."""
    if hdr.startswith(_ONLY_ID_LINE) and hdr.endswith(b"\r\n\r\n") and hdr.count(b"\r\n") == 3:
        # the block is that one line (a publisher's usual): its value is the id
        return hdr[len(_ONLY_ID_LINE) : -4].decode("utf-8", "replace").strip()
    if hdr.count(b"Nats-") != 1:
        return None
    lines = hdr.split(b"\r\n")
    if lines[0] != b"NATS/1.0":
        return None
    mid: bytes | None = None
    for raw in lines[1:]:
        if not raw:
            continue
        key, sep, value = raw.partition(b":")
        if not sep:
            return None  # malformed: as parse_headers, the full path decides
        key = key.strip()
        if not key:
            return None
        if key == b"Nats-Msg-Id":
            mid = value
    return None if mid is None else mid.decode("utf-8", "replace").strip()


def first(h: dict[str, list[str]], key: str) -> str | None:
    v = h.get(key)
    return v[0] if v else None


def parse_ttl(s: str) -> int | None:
    """Nats-TTL: seconds as an integer, a Go duration, or "never" (-1)."""
    s = s.strip()
    if s.lower() == "never":
        return -1
    try:
        secs = parse_duration(s)
    except ValueError:
        return None
    if secs < 1:
        return None
    return int(secs)


def limit_text(e: StoreError) -> str:
    if isinstance(e, ErrMaxMsgs):
        return "maximum messages exceeded"
    if isinstance(e, ErrMaxBytes):
        return "maximum bytes exceeded"
    return "maximum messages per subject exceeded"


def marker_header(ttl_s: int) -> bytes:
    """The headers of a subject delete marker (nats-server 2.15) that expires after
    ``ttl_s`` seconds: it replaces its subject's last message (``Nats-Rollup: sub``)."""
    return (
        b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: "
        + format_duration(ttl_s).encode()
        + b"\r\nNats-Rollup: sub\r\n\r\n"
    )


def is_marker(hdr: bytes) -> bool:
    """Whether a stored header block is a delete marker's (``Nats-Marker-Reason`` set)."""
    try:
        _status, _desc, h = parse_headers(hdr)
    except HeaderError:
        return False
    return bool(h.get("Nats-Marker-Reason", [""])[0])
