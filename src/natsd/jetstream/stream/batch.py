"""Atomic batch publish (nats-server 2.12, ADR-50): on a stream with ``allow_atomic`` a
publisher sends messages with ``Nats-Batch-Id``, ``Nats-Batch-Sequence`` 1, 2, ... and a
last one with ``Nats-Batch-Commit: 1`` (stored too) or ``eob`` (not stored); the stream
stages them and, at the commit, checks them all against the stream and each other and
stores them all or none. Each staged message with a reply gets an empty answer (flow
control); the commit gets ``{"stream","seq","batch","count"}`` or the first error.

This module owns the staging (``AtomicBatches``: a stream's open batches, their timers and
the limits) and the checks made at the commit (``check_batch``); the stream stores what
passed (``Stream._commit_batch``). The rules, limits and errors are nats-server 2.15's
(``jetstream_batching.go``), checked against the binary in tests/differential:

- per stream at most 50 open batches, per server 1000, at most 1000 messages a batch, and a
  batch left 10 s without a message is abandoned (``$JS.EVENT.ADVISORY.STREAM.
  BATCH_ABANDONED``), as are one out of order, one too large and one that asks for an API
  level the server does not have; checks failing at the commit abandon it silently;
- staged messages are the leader's alone: a leadership change drops every open batch, and
  the publisher's next message of it is told the batch is incomplete;
- on a replicated stream the whole batch is one Raft entry, so every replica stores all of
  it or none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from natsd.core.headers import HeaderError, parse_headers, replace_header
from natsd.core.scheduler import Cancellable, Clock, Scheduler
from natsd.jetstream.config.stream_types import StorageType, StreamConfig
from natsd.jetstream.stream.counter import (
    COUNTER_SOURCES,
    MAX_HEADER,
    check_increment,
    counter_body,
    increment_of,
    is_sources_map,
)
from natsd.jetstream.stream.headers import (
    H_BATCH_ID,
    H_EXP_LAST_MSG_ID,
    H_EXP_LAST_SEQ,
    H_EXP_LAST_SUBJ_SEQ,
    H_EXP_LAST_SUBJ_SEQ_SUBJ,
    H_EXP_STREAM,
    H_MSG_ID,
    H_ROLLUP,
    H_STREAM_SOURCE,
    H_TTL,
    check_schedule_headers,
    first,
    parse_ttl,
)
from natsd.jetstream.stream.schedule_check import check_schedule
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import DiscardPolicy, StreamStore, file_msg_size, mem_msg_size

__all__ = [
    "ADVISORY",
    "AtomicBatches",
    "BatchLimits",
    "Checked",
    "Staged",
    "check_batch",
    "cut_partial_batch",
]

H_BATCH_SEQ: Final = "Nats-Batch-Sequence"
H_BATCH_COMMIT: Final = "Nats-Batch-Commit"
H_REQUIRED_LEVEL: Final = "Nats-Required-Api-Level"
MAX_ID: Final = 64
ADVISORY: Final = "$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED."
ADVISORY_TYPE: Final = "io.nats.jetstream.advisory.v1.stream_batch_abandoned"


@dataclass
class BatchLimits:
    """The server's atomic batch limits (nats-server's defaults; shared by its streams)."""

    per_stream: int = 50
    total: int = 1000
    max_msgs: int = 1000
    timeout: float = 10.0
    open: int = 0  # open batches of every stream of the server


@dataclass
class Staged:
    """One open batch: its messages so far (subject as published, subject stored, header
    block, data), the leadership it was opened under, and its inactivity timer."""

    id: str
    epoch: int
    msgs: list[tuple[bytes, str, bytes, bytes]] = field(default_factory=list)
    timer: Cancellable | None = None
    timed_out: bool = False
    eob: bool = False  # committed by an end-of-batch marker (not stored)


class AtomicBatches:
    """A stream's open atomic batches (on its leader). ``abandoned(batch id, reason)`` is
    told of each one given up with an advisory."""

    def __init__(
        self,
        scheduler: Scheduler,
        limits: BatchLimits,
        abandoned: Callable[[str, str], None],
        api_level: int,
        epoch: Callable[[], int],
    ) -> None:
        self._scheduler = scheduler
        self._limits = limits
        self._abandoned = abandoned
        self._api_level = api_level
        # the stream's leadership (Replica.epoch; 0 for R1): a batch opened under another is
        # gone, without an advisory
        self._epoch = epoch
        self.open: dict[str, Staged] = {}

    def stage(
        self,
        cfg: StreamConfig,
        subject_b: bytes,
        subject: str,
        hdr: bytes,
        h: dict[str, list[str]],
        data: bytes,
    ) -> ApiError | Staged | None:
        """One message of a batch (``processJetStreamAtomicBatchMsg``, after the sealed
        and size checks): an error to answer, None when it was staged (answered empty),
        or the batch when this message commits it (``Staged.msgs`` ends with it unless it
        is the ``eob`` marker)."""
        if not cfg.allow_atomic:
            return E.JSAtomicPublishDisabledErr()
        bid = first(h, H_BATCH_ID) or ""
        if len(bid.encode()) > MAX_ID:
            return E.JSAtomicPublishInvalidBatchIDErr()
        seq_s = first(h, H_BATCH_SEQ) or ""
        if not seq_s.isascii() or not seq_s.isdigit() or int(seq_s) >= 1 << 64:
            return E.JSAtomicPublishMissingSeqErr()
        seq = int(seq_s)
        commit = h.get(H_BATCH_COMMIT)
        value = commit[0] if commit else None
        eob = value == "eob"
        limits = self._limits
        epoch = self._epoch()
        batch = self.open.get(bid)
        if batch is not None and batch.epoch != epoch:
            self._drop(batch)  # opened under another leadership: gone
            batch = None
        if batch is None:
            if seq != 1:
                if seq - (1 if eob else 0) > limits.max_msgs:
                    return E.JSAtomicPublishTooLargeBatchErrF(size=limits.max_msgs)
                return E.JSAtomicPublishIncompleteBatchErr()
            if len(self.open) >= limits.per_stream or limits.open >= limits.total:
                return E.JSAtomicPublishTooManyInflight()
            batch = Staged(bid, epoch)
            self.open[bid] = batch
            limits.open += 1
        if commit is not None and value not in ("1", "eob"):
            self._drop(batch)
            return E.JSAtomicPublishInvalidBatchCommitErr()
        level = first(h, H_REQUIRED_LEVEL)
        if level is not None and (not _is_int(level) or int(level) > self._api_level):
            self._give_up(batch, "unsupported")
            return E.JSRequiredApiLevelErr()
        if batch.timed_out or seq != len(batch.msgs) + 1 or (seq == 1 and eob):
            self._give_up(batch, "timeout" if batch.timed_out else "incomplete")
            return E.JSAtomicPublishIncompleteBatchErr()
        if seq - (1 if eob else 0) > limits.max_msgs:
            self._give_up(batch, "large")
            return E.JSAtomicPublishTooLargeBatchErrF(size=limits.max_msgs)
        if batch.timer is not None:
            batch.timer.cancel()
            batch.timer = None
        if not eob:
            if level is not None:
                hdr = _without(hdr, H_REQUIRED_LEVEL)
            batch.msgs.append((subject_b, subject, hdr, data))
        if commit is None:
            batch.timer = self._scheduler.call_later(limits.timeout, self._expire, batch)
            return None
        self._drop(batch)
        batch.eob = eob
        return batch

    def _expire(self, batch: Staged) -> None:
        """No message for the timeout: the batch is given up (an advisory now; the
        publisher's next message of it is told it is incomplete)."""
        batch.timer = None
        if self.open.get(batch.id) is not batch:
            return
        if batch.epoch != self._epoch():
            self._drop(batch)  # the leadership changed under it: dropped, nothing to say
        else:
            self._give_up(batch, "timeout")

    def _give_up(self, batch: Staged, reason: str) -> None:
        self._drop(batch)
        self._abandoned(batch.id, reason)

    def _drop(self, batch: Staged) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
            batch.timer = None
        if self.open.get(batch.id) is batch:
            del self.open[batch.id]
            self._limits.open -= 1

    def clear(self) -> None:
        """Every open batch dropped, without advisories (a leadership change, a config
        update that turns atomic publish off, the stream deleted)."""
        for batch in list(self.open.values()):
            self._drop(batch)


def _is_int(s: str) -> bool:
    t = s[1:] if s[:1] in ("+", "-") else s
    return t.isascii() and t.isdigit()


def _without(hdr: bytes, key: str) -> bytes:
    """``hdr`` without its ``key`` lines."""
    k = key.lower().encode()
    lines = hdr.split(b"\r\n")
    kept = [ln for ln in lines[1:] if ln and ln.split(b":", 1)[0].strip().lower() != k]
    return b"\r\n".join([lines[0], *kept]) + b"\r\n\r\n"


# ---------------------------------------------------------------------------- the commit


class BatchStream(Protocol):
    """What the commit-time checks read of the stream."""

    @property
    def name(self) -> str: ...

    @property
    def cfg(self) -> StreamConfig: ...

    @property
    def store(self) -> StreamStore: ...

    def duplicate_of(self, msg_id: str) -> bool:
        """Is ``msg_id`` in the duplicate window (stored, or in flight on a replica)?"""
        ...

    def in_flight(self, msg_id: str) -> bool:
        """Is ``msg_id`` on a message proposed and not yet applied?"""
        ...

    def last_proposed(self) -> int:
        """The stream's last sequence, counting what is in flight."""
        ...

    def counter_base(self, subject: str) -> tuple[int, bytes | None] | None:
        """A counter's current value (in flight included) and sources; None: broken."""
        ...

    @property
    def clock(self) -> Clock: ...

    def last_is_schedule(self, subject: str) -> bool | None:
        """Is the last message on ``subject`` a schedule (None: it has none)?"""
        ...


@dataclass
class Checked:
    """A batch message as it will be stored: subject, header block, data, TTL, msg id,
    rollup ("", "sub" or "all")."""

    subject: str
    hdr: bytes
    data: bytes
    ttl: int
    msg_id: str
    rollup: str


def check_batch(s: BatchStream, batch: Staged) -> list[Checked] | ApiError:
    """nats-server's checks of a committed batch (``checkMsgHeadersPreClusteredProposal``
    for each message in order, against the stream and the batch's earlier messages): the
    messages to store, or the first error."""
    cfg = s.cfg
    store = s.store
    last = s.last_proposed()
    state = store.state()
    memory = cfg.storage == StorageType.MEMORY
    out: list[Checked] = []
    ids: set[str] = set()
    written: dict[str, int] = {}  # subject -> messages of the batch on it
    counters: dict[str, tuple[int, bytes | None]] = {}
    schedules: dict[str, bool] = {}  # subject -> is the batch's message on it a schedule

    def last_is_schedule(subject: str) -> bool | None:
        if subject in schedules:
            return schedules[subject]
        return s.last_is_schedule(subject)

    size = 0
    for k, (_subject_b, subject, hdr, data) in enumerate(batch.msgs, 1):
        try:
            _status, _desc, h = parse_headers(hdr)
        except HeaderError:
            h = {}
        if H_EXP_LAST_MSG_ID in h:
            return E.JSAtomicPublishUnsupportedHeaderBatchErr(header=H_EXP_LAST_MSG_ID)
        if len(hdr) > MAX_HEADER:
            return E.JSStreamHeaderExceedsMaximumErr()
        incr: int | None = None
        raw = increment_of(hdr) if b"Nats-Incr:" in hdr else None
        if raw is not None:
            checked = check_increment(cfg, hdr, raw, len(data))
            if isinstance(checked, ApiError):
                return checked
            incr = checked
        exp = first(h, H_EXP_STREAM)
        if exp and exp != s.name:
            return E.JSStreamNotMatchErr()
        ttl = 0
        ttl_s = (first(h, H_TTL) or "").strip()
        if ttl_s:
            parsed = parse_ttl(ttl_s)
            if not cfg.allow_msg_ttl and parsed != 0:
                return E.JSMessageTTLDisabledErr()
            if parsed is None:
                return E.JSMessageTTLInvalidErr()
            ttl = parsed
        msg_id = first(h, H_MSG_ID) or ""
        if msg_id:
            if s.in_flight(msg_id):
                return E.JSStreamDuplicateMessageConflict()
            if msg_id in ids or s.duplicate_of(msg_id):
                return E.JSAtomicPublishContainsDuplicateMessageErr()
            ids.add(msg_id)
        if first(h, H_STREAM_SOURCE):
            return E.JSMessageSourceHdrNotAllowedErr()
        if cfg.allow_msg_counter:
            if incr is None:
                return E.JSMessageIncrMissingErr()
            base = counters.get(subject)
            if base is None:
                base = s.counter_base(subject)
                if base is None:
                    return E.JSMessageCounterBrokenErr()
            value, sources = base[0] + incr, base[1]
            if sources is not None:
                if not is_sources_map(sources):
                    return E.JSMessageCounterBrokenErr()
                hdr = replace_header(hdr, COUNTER_SOURCES, sources)
            counters[subject] = (value, sources)
            data = counter_body(value)
        exp_seq = first(h, H_EXP_LAST_SEQ)
        if exp_seq:
            want = last + k - 1
            if not exp_seq.isdigit() or int(exp_seq) != want:
                return E.JSStreamWrongLastSequenceErrF(seq=want)
            if k > 1:
                return E.JSStreamWrongLastSequenceConstantErr()
        exp_sseq = first(h, H_EXP_LAST_SUBJ_SEQ)
        if exp_sseq:
            on = first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ) or subject
            if on in written:
                return E.JSStreamWrongLastSequenceConstantErr()
            lm = store.load_last_msg(on)
            at = lm.seq if lm is not None else 0
            if not exp_sseq.isdigit() or int(exp_sseq) != at:
                return E.JSStreamWrongLastSequenceErrF(seq=at)
        elif first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ):
            return E.JSStreamExpectedLastSeqPerSubjectInvalid()
        if cfg.allow_msg_schedules:
            sched = check_schedule(cfg, hdr, subject, s.clock.time_ns(), last_is_schedule)
            if isinstance(sched, ApiError):
                return sched
            if sched.add_rollup:
                # a schedule replaces the one before it on its subject
                hdr = hdr[:-2] + b"Nats-Rollup: sub\r\n\r\n"
                h = {**h, H_ROLLUP: ["sub"]}
            schedules[subject] = sched.schedule
        else:
            error = check_schedule_headers(h, subject)
            if error is not None:
                return error
        rollup = ""
        r = first(h, H_ROLLUP)
        if r:
            if not cfg.allow_rollup_hdrs or cfg.deny_purge:
                return E.JSStreamRollupFailedF(err="rollup not permitted")
            rollup = r.lower()
            if rollup == "sub":
                if subject in written:
                    return E.JSStreamRollupFailedF(err="batch rollup sub invalid")
            elif rollup == "all":
                if k > 1:
                    return E.JSStreamRollupFailedF(err="batch rollup all invalid")
            else:
                return E.JSStreamRollupFailedF(err=f'rollup value invalid: "{r}"')
        size += (mem_msg_size if memory else file_msg_size)(subject, hdr, data)
        if cfg.discard == DiscardPolicy.NEW:
            if cfg.max_msgs > 0 and state.msgs + k > cfg.max_msgs:
                return E.JSStreamStoreFailedF(err="maximum messages exceeded")
            if cfg.max_bytes > 0 and state.bytes + size > cfg.max_bytes:
                return E.JSStreamStoreFailedF(err="maximum bytes exceeded")
            if cfg.discard_new_per_subject and cfg.max_msgs_per_subject > 0 and not rollup:
                held = store.subjects_totals(subject).get(subject, 0)
                if held + written.get(subject, 0) + 1 > cfg.max_msgs_per_subject:
                    return E.JSStreamStoreFailedF(err="maximum messages per subject exceeded")
        written[subject] = written.get(subject, 0) + 1
        out.append(Checked(subject, hdr, data, ttl, msg_id, rollup))
    if batch.eob and out:
        c = out[-1]
        c.hdr = replace_header(c.hdr, H_BATCH_COMMIT, b"1")
    return out


def cut_partial_batch(store: StreamStore) -> int:
    """An R1 stream's store after a crash: a batch is stored in one turn of the loop, but a
    crash (or power loss) between its writes can leave its first messages without the
    rest. Its last stored message then has a batch id and no commit header (the stored end
    of a batch always has one); its messages, never acknowledged, are cut off so that no
    part of a batch stays. Returns how many were."""
    last = store.load_msg(store.last_seq()) if store.last_seq() else None
    if last is None or not last.hdr or b"Nats-Batch-Id:" not in last.hdr:
        return 0
    try:
        _status, _desc, h = parse_headers(last.hdr)
    except HeaderError:
        return 0
    seq_s = first(h, H_BATCH_SEQ) or ""
    if not first(h, H_BATCH_ID) or H_BATCH_COMMIT in h or not seq_s.isdigit():
        return 0
    start = max(store.state().first_seq, last.seq - int(seq_s) + 1)
    store.truncate(start - 1)
    return last.seq - start + 1
