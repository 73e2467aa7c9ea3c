"""A stream: its config, its store, its subject subscriptions and the publish path.

Ownership: the event loop owns every Stream. Messages arrive through internal subscriptions
on the account's Sublist (``_on_msg``), are checked against the JetStream publish headers,
stored, and acknowledged through the Committer (file streams) or at once (memory streams).
Acks are small JSON documents formatted directly as bytes: no JSON encoder per message.
Time and timers come from the engine's ``Clock`` and ``Scheduler`` (``clock`` /
``scheduler`` here), which the stream's consumers use too.
"""

from __future__ import annotations

import base64
import re
import zoneinfo
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from natsd.core.clock import rfc3339
from natsd.core.headers import HeaderError, parse_headers
from natsd.core.scheduler import Clock, Scheduler
from natsd.core.transform import SubjectTransform
from natsd.jetstream.api.direct import seq_from_time
from natsd.jetstream.config.stream_config import StreamConfig
from natsd.jetstream.config.stream_types import RetentionPolicy, StorageType
from natsd.jetstream.config.subject_mapping import _is_valid_publish_subject
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError, ErrorDef
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.store import (
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    StoredMsg,
    StoreError,
    StreamStore,
)
from natsd.version import API_LEVEL, SERVER_VERSION

if TYPE_CHECKING:
    from natsd.jetstream.engine import JsAccount

__all__ = ["Stream"]

_ZERO_TIME: Final = "0001-01-01T00:00:00Z"

# Policy members compared per message, bound once: on Python 3.11 `RetentionPolicy.INTEREST`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_INTEREST: Final = RetentionPolicy.INTEREST
_MEMORY: Final = StorageType.MEMORY

H_MSG_ID: Final = "Nats-Msg-Id"
H_EXP_STREAM: Final = "Nats-Expected-Stream"
H_EXP_LAST_SEQ: Final = "Nats-Expected-Last-Sequence"
H_EXP_LAST_SUBJ_SEQ: Final = "Nats-Expected-Last-Subject-Sequence"
H_EXP_LAST_SUBJ_SEQ_SUBJ: Final = "Nats-Expected-Last-Subject-Sequence-Subject"
H_EXP_LAST_MSG_ID: Final = "Nats-Expected-Last-Msg-Id"
H_ROLLUP: Final = "Nats-Rollup"
H_TTL: Final = "Nats-TTL"
# nats-server 2.12+ publish headers of features natsd does not implement (counters, atomic
# batches, schedules, sourcing): answered with nats-server's "disabled" errors.
H_INCR: Final = "Nats-Incr"
H_BATCH_ID: Final = "Nats-Batch-Id"
H_SCHEDULE: Final = "Nats-Schedule"
H_SCHEDULE_TZ: Final = "Nats-Schedule-Time-Zone"
H_SCHEDULE_NEXT: Final = "Nats-Schedule-Next"
H_SCHEDULER: Final = "Nats-Scheduler"
H_STREAM_SOURCE: Final = "Nats-Stream-Source"
# A fast batch publish (nats-server 2.14) is told by its reply subject:
# <prefix>.<uuid>.<flow>.<gap mode>.<batch seq>.<operation>.$FI
FAST_BATCH_SUFFIX: Final = b".$FI"
# big.Int.SetString(s, 10), how nats-server reads Nats-Incr.
_BIG_INT: Final = re.compile(r"[+-]?[0-9]+")

# Messages read per store call while rebuilding the duplicate window after a restart.
_REBUILD_BATCH: Final = 1024


class Stream:
    def __init__(
        self,
        account: JsAccount,
        cfg: StreamConfig,
        store: StreamStore,
        created_ns: int,
    ) -> None:
        self.account = account
        self.cfg = cfg
        self.name = cfg.name
        self.store = store
        self.created_ns = created_ns
        engine = account.engine
        self.clock: Clock = engine.clock
        self.scheduler: Scheduler = engine.scheduler
        # Bound once: the duplicate window reads the clock for every message with an id.
        self._now_ns: Callable[[], int] = engine.clock.time_ns
        self.subs: list[Subscription] = []
        # Nats-Msg-Id -> (seq, ts_ns), oldest first, pruned by duplicate_window.
        self._dedup: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._last_msg_id = ""
        self._name_b = self.name.encode()
        self.consumer_count = 0
        # Consumers of this stream by name (jetstream/consumer*.py owns their type). The
        # publish path tells them about every stored message through notify_consumers.
        self.consumers: dict[str, Any] = {}
        # The ack sent when the disk refuses a write: the same bytes every time.
        self.write_failed_ack = self._ack_err(E.JSStreamStoreFailedF(err="write failed"))
        self._domain = account.engine.domain
        # '{"stream":"<name>",["domain":"<d>",]"seq":' : an ack is this plus "<seq>}".
        self._ack_head = b'{"stream":"%s",' % self._name_b
        if self._domain:
            self._ack_head += b'"domain":"%s",' % self._domain.encode()
        self._ack_head += b'"seq":'
        self._sublist = account.account.sublist
        self._committer = account.engine.committer
        self._committer.on_failure[store] = self._write_failed
        self._republish: SubjectTransform | None = None
        self._transform: SubjectTransform | None = None
        self._check_limits = False
        self.apply_config(cfg)

    def apply_config(self, cfg: StreamConfig) -> None:
        self.cfg = cfg
        # Server or account storage limits are checked per message only when configured.
        self._check_limits = self.account.engine.limits_set(self.account)
        rp = cfg.republish
        self._republish = SubjectTransform(rp.src, rp.dest) if rp is not None else None
        st = cfg.subject_transform
        self._transform = SubjectTransform(st.src, st.dest) if st is not None and st.dest else None

    # ------------------------------------------------------------------ wiring
    def subscribe(self) -> None:
        sublist = self.account.account.sublist
        for i, subj in enumerate(self.cfg.subjects or [self.name]):
            sub = Subscription(subj.encode(), None, b"js-%d" % i, callback=self._on_msg)
            sublist.insert(sub)
            self.subs.append(sub)

    def unsubscribe(self) -> None:
        sublist = self.account.account.sublist
        for sub in self.subs:
            sublist.remove(sub)
        self.subs = []

    def resubscribe(self) -> None:
        self.unsubscribe()
        self.subscribe()

    # ------------------------------------------------------------------ publish path
    def _on_msg(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        self.process(subject, reply, hdr, data)

    def _ack_ok(self, seq: int, duplicate: bool = False) -> bytes:
        if duplicate:
            return self._ack_head + b'%d,"duplicate": true}' % seq
        return self._ack_head + b"%d}" % seq

    def _ack_err(self, err: ApiError) -> bytes:
        import orjson

        return b'{"error":%s,"stream":"%s","seq":0}' % (
            orjson.dumps(err.to_json()),
            self._name_b,
        )

    def _reply(self, reply: bytes | None, payload: bytes) -> None:
        if reply:
            self.account.engine.send(self.account, reply, payload)

    def process(
        self, subject_b: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """Store one published message, with nats-server's checks in its order (checked
        against it in tests/differential/test_publish_order.py): sealed, max_msg_size,
        the publish headers, the duplicate window, then the expected last msg id and rollup,
        limits and an invalid TTL. A retried publish is answered as a duplicate before the
        checks its first copy has since made fail."""
        cfg = self.cfg
        if cfg.no_ack:
            reply = None  # nats-server answers nothing on a no_ack stream, errors included
        if cfg.sealed:
            self._reply(reply, self._ack_err(E.JSStreamSealedErr()))
            return
        size = len(data) + (len(hdr) if hdr else 0)
        if cfg.max_msg_size >= 0 and size > cfg.max_msg_size:
            self._reply(reply, self._ack_err(E.JSStreamMessageExceedsMaximumErr()))
            return
        subject = subject_b.decode()
        if self._transform is not None:
            subject = self._transform.apply(subject) or subject
        if reply is not None and reply.endswith(FAST_BATCH_SUFFIX):
            self._refuse_batch(reply, E.JSBatchPublishDisabledErr, subject, hdr, data)
            return
        msg_id = ""
        ttl = 0
        ttl_s = ""
        rollup = ""
        if hdr:
            try:
                _status, _desc, h = parse_headers(hdr)
            except HeaderError:
                h = {}
            if h:
                if _first(h, H_BATCH_ID):
                    # An atomic batch message (nats-server 2.12): natsd has no batches.
                    self._refuse_batch(reply, E.JSAtomicPublishDisabledErr, subject, hdr, data)
                    return
                error = self._check_headers(h, subject)
                if error is not None:
                    self._reply(reply, self._ack_err(error))
                    return
                msg_id = _first(h, H_MSG_ID) or ""
                if msg_id:
                    dup = self._check_dup(msg_id)
                    if dup is not None:
                        self._reply(reply, self._ack_ok(dup, duplicate=True))
                        return
                error = self._check_last_msg_id_and_rollup(h)
                if error is not None:
                    self._reply(reply, self._ack_err(error))
                    return
                rollup = (_first(h, H_ROLLUP) or "").lower()
                ttl_s = (_first(h, H_TTL) or "").strip()
        if self._check_limits:
            exceeded = self.account.engine.storage_exceeded(
                self.account, cfg.storage == _MEMORY, subject, hdr, data
            )
            if exceeded is not None:
                self._reply(reply, self._ack_err(exceeded()))
                return
        if ttl_s:
            parsed = _parse_ttl(ttl_s)
            if parsed is None:
                self._reply(reply, self._ack_err(E.JSMessageTTLInvalidErr()))
                return
            ttl = parsed
            marker_ttl = cfg.subject_delete_marker_ttl // 1_000_000_000
            if hdr is not None and 0 < ttl < marker_ttl:
                # nats-server keeps messages at least as long as the delete markers that
                # would replace them, and stores the raised TTL.
                ttl = marker_ttl
                hdr = _set_header(hdr, H_TTL, str(marker_ttl))
        # Republish's Nats-Last-Sequence is the subject's previous message, looked up
        # before storing as nats-server does (a history of 1 is about to drop it).
        rp_last = 0
        if self._republish is not None:
            prev = self.store.load_last_msg(subject)
            rp_last = prev.seq if prev is not None else 0
        try:
            seq, ts = self.store.store_msg(subject, hdr, data, ttl)
        except ErrMsgTooLarge:
            self._reply(reply, self._ack_err(E.JSStreamMessageExceedsMaximumErr()))
            return
        except (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject) as e:
            self._reply(reply, self._ack_err(E.JSStreamStoreFailedF(err=_limit_text(e))))
            return
        except StoreError as e:
            self._reply(reply, self._ack_err(E.JSStreamStoreFailedF(err=str(e))))
            return
        if msg_id:
            self._dedup[msg_id] = (seq, ts)
        # nats-server tracks the id of the last message, even when it had none.
        self._last_msg_id = msg_id
        if rollup == "sub":
            self.store.purge_ex(subject, seq, 0)
        elif rollup == "all":
            self.store.compact(seq)
        if self._republish is not None:
            self._do_republish(subject, seq, ts, hdr, data, rp_last)
        if cfg.retention == _INTEREST and not self.consumer_count:
            # Interest retention keeps nothing nobody is interested in.
            self.store.remove_msg(seq)
        # Acknowledge now (memory) or after the fsync that covers the message (file).
        if cfg.storage == _MEMORY:
            if reply:
                publish(self._sublist, reply, None, None, self._ack_head + b"%d}" % seq)
        elif reply:
            ack = self._ack_head + b"%d}" % seq
            self._committer.add(self.store, (self._sublist, reply, ack, self.write_failed_ack))
        else:
            self._committer.add(self.store, None)
        if self.consumers:
            self.notify_consumers(seq, subject)

    def notify_consumers(self, seq: int, subject: str) -> None:
        """A message was stored at ``seq``: wake the consumers that may want it. With
        interest retention a message no consumer wants is not kept."""
        for c in list(self.consumers.values()):
            c.on_stored(seq, subject)
        if self.cfg.retention == _INTEREST:
            from natsd.jetstream.consumer.attach import check_interest

            check_interest(self, seq, subject)

    def _write_failed(self) -> None:
        """The store lost buffered messages (a failed flush burns their sequences): forget
        their Nats-Msg-Ids, or a retry would be answered as a duplicate of nothing."""
        load = self.store.load_msg
        for msg_id, (seq, _ts) in list(self._dedup.items()):
            try:
                gone = load(seq) is None
            except StoreError:
                gone = True
            if gone:
                del self._dedup[msg_id]
                if msg_id == self._last_msg_id:
                    self._last_msg_id = ""

    def _do_republish(
        self, subject: str, seq: int, ts: int, hdr: bytes | None, data: bytes, last: int
    ) -> None:
        """nats-server republish: the stored message goes out again on ``dest`` with
        Nats-Stream / Nats-Subject / Nats-Sequence / Nats-Time-Stamp / Nats-Last-Sequence
        (``last``: the sequence of the subject's previous message, 0 if none)."""
        tr = self._republish
        assert tr is not None
        dest = tr.apply(subject)
        if dest is None:
            return
        extra = (
            f"Nats-Stream: {self.name}\r\nNats-Subject: {subject}\r\n"
            f"Nats-Sequence: {seq}\r\nNats-Time-Stamp: {rfc3339(ts)}\r\n"
            f"Nats-Last-Sequence: {last}\r\n"
        ).encode()
        rp = self.cfg.republish
        headers_only = rp is not None and rp.headers_only
        if headers_only:
            extra += b"Nats-Msg-Size: %d\r\n" % len(data)
        # Keep the message's own headers (minus the blank line) and append ours.
        base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
        block = base + extra + b"\r\n"
        self.account.engine.send(self.account, dest.encode(), b"" if headers_only else data, block)

    def _refuse_batch(
        self,
        reply: bytes | None,
        error: ErrorDef,
        subject: str,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        """Answer a batch publish (atomic or fast): nats-server's batch paths check the
        storage limits before they find batches disabled on the stream."""
        answer = error()
        if self._check_limits:
            exceeded = self.account.engine.storage_exceeded(
                self.account, self.cfg.storage == _MEMORY, subject, hdr, data
            )
            if exceeded is not None:
                answer = exceeded()
        if not self.cfg.no_ack:
            self._reply(reply, self._ack_err(answer))

    def _check_headers(self, h: dict[str, list[str]], subject: str) -> ApiError | None:
        """The publish header checks in nats-server's order (``processJetStreamMsg``). An
        empty value counts as no header, as nats-server's ``sliceHeader`` lookups do.
        natsd implements no counters, schedules or sourcing, so their headers get the
        errors nats-server sends on a stream that does not allow them."""
        cfg = self.cfg
        incr = _first(h, H_INCR)
        if incr:
            if not _BIG_INT.fullmatch(incr):
                return E.JSMessageIncrInvalidErr()
            return E.JSMessageIncrDisabledErr()
        exp = _first(h, H_EXP_STREAM)
        if exp and exp != self.name:
            return E.JSStreamNotMatchErr()
        ttl_s = (_first(h, H_TTL) or "").strip()
        ttl = _parse_ttl(ttl_s) if ttl_s else None
        # An invalid Nats-TTL is refused later (below), a valid one here when TTLs are off.
        if ttl and not cfg.allow_msg_ttl:
            return E.JSMessageTTLDisabledErr()
        exp_sseq = _first(h, H_EXP_LAST_SUBJ_SEQ)
        if exp_sseq:
            on = _first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ) or subject
            lm = self.store.load_last_msg(on)
            last = lm.seq if lm is not None else 0
            if not exp_sseq.isdigit() or int(exp_sseq) != last:
                return E.JSStreamWrongLastSequenceErrF(seq=last)
        elif _first(h, H_EXP_LAST_SUBJ_SEQ_SUBJ):
            return E.JSStreamExpectedLastSeqPerSubjectInvalid()
        exp_seq = _first(h, H_EXP_LAST_SEQ)
        if exp_seq:
            last = self.store.state().last_seq
            if not exp_seq.isdigit() or int(exp_seq) != last:
                return E.JSStreamWrongLastSequenceErrF(seq=last)
        error = _check_schedule_headers(h, subject)
        if error is not None:
            return error
        if _first(h, H_STREAM_SOURCE):
            return E.JSMessageSourceHdrNotAllowedErr()
        return None

    def _check_last_msg_id_and_rollup(self, h: dict[str, list[str]]) -> ApiError | None:
        """The checks nats-server makes after the duplicate window."""
        cfg = self.cfg
        exp_id = _first(h, H_EXP_LAST_MSG_ID)
        if exp_id and exp_id != self._last_msg_id:
            return E.JSStreamWrongLastMsgIDErrF(id=self._last_msg_id)
        rollup = _first(h, H_ROLLUP)
        if rollup:
            if not cfg.allow_rollup_hdrs:
                return E.JSStreamRollupFailedF(err="rollup not permitted")
            if rollup.lower() not in ("sub", "all"):
                text = f'rollup value invalid: "{rollup}"'
                return E.JSStreamRollupFailedF(err=text)
        return None

    def _check_dup(self, msg_id: str) -> int | None:
        window = self.cfg.duplicate_window
        if window <= 0:
            return None
        now = self._now_ns()
        d = self._dedup
        # Prune from the oldest end; entries are in arrival order.
        while d:
            k, (_s, ts) = next(iter(d.items()))
            if now - ts <= window:
                break
            del d[k]
        hit = d.get(msg_id)
        return hit[0] if hit is not None else None

    def rebuild_dedupe(self, now_ns: int) -> int:
        """Refill the Nats-Msg-Id window from the stored messages after a restart
        (nats-server ``rebuildDedupe``): only the messages stored within
        ``duplicate_window`` of ``now_ns`` are read, found by time, so a long stream with a
        short window costs a binary search and the window's messages. Entries keep their
        stored timestamps, so they leave the window when they would have without the
        restart. The id of the last message is restored too (Nats-Expected-Last-Msg-Id)
        when that message is in the window. Returns the number of messages read."""
        window = self.cfg.duplicate_window
        if window <= 0:
            return 0
        store = self.store
        last = store.state().last_seq
        seq = seq_from_time(store, now_ns - window)
        d = self._dedup
        n = 0
        while seq <= last:
            batch = store.load_range(seq, _REBUILD_BATCH)
            if not batch:
                break
            for m in batch:
                msg_id = _msg_id(m.hdr) if m.hdr else ""
                if msg_id:
                    # A later message with the same id replaces the earlier entry, as
                    # nats-server's map does; keep arrival order for pruning.
                    d.pop(msg_id, None)
                    d[msg_id] = (m.seq, m.ts)
                if m.seq == last:
                    self._last_msg_id = msg_id
            n += len(batch)
            seq = batch[-1].seq + 1
        return n

    # ------------------------------------------------------------------ info
    def state_json(self, with_deleted: bool = False, subjects_filter: str = "") -> dict[str, Any]:
        st = self.store.state(with_deleted=with_deleted)
        out: dict[str, Any] = {
            "messages": st.msgs,
            "bytes": st.bytes,
            "first_seq": st.first_seq,
            "first_ts": rfc3339(st.first_ts) if st.first_ts else _ZERO_TIME,
            "last_seq": st.last_seq,
            "last_ts": rfc3339(st.last_ts) if st.last_ts else _ZERO_TIME,
        }
        if st.num_deleted:
            out["num_deleted"] = st.num_deleted
            if with_deleted and st.deleted:
                out["deleted"] = st.deleted
        if st.num_subjects:
            out["num_subjects"] = st.num_subjects
        if subjects_filter:
            totals = self.store.subjects_totals(subjects_filter)
            if totals:
                out["subjects"] = totals
        if st.lost is not None and (st.lost.msgs or st.lost.bytes):
            out["lost"] = {"msgs": st.lost.msgs, "bytes": st.lost.bytes}
        out["consumer_count"] = self.consumer_count
        return out

    def info_json(self, with_deleted: bool = False, subjects_filter: str = "") -> dict[str, Any]:
        return {
            # nats-server adds its version and API level to every config it returns.
            "config": self.cfg.to_json(server_version=SERVER_VERSION, api_level=API_LEVEL),
            "created": rfc3339(self.created_ns),
            "state": self.state_json(with_deleted, subjects_filter),
            "ts": rfc3339(self._now_ns()),
        }

    def stored_msg_json(self, m: StoredMsg) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": m.subject, "seq": m.seq}
        if m.hdr:
            out["hdrs"] = base64.b64encode(m.hdr).decode()
        if m.data:
            # nats-server's StoredMsg has `json:"data,omitempty"`.
            out["data"] = base64.b64encode(m.data).decode()
        out["time"] = rfc3339(m.ts)
        return out


def _set_header(hdr: bytes, key: str, value: str) -> bytes:
    """``hdr`` with every ``key`` line dropped and ``key: value`` appended (Go setHeader)."""
    lines = hdr.split(b"\r\n")
    k = key.lower().encode()
    kept = [ln for ln in lines[1:] if ln and ln.split(b":", 1)[0].strip().lower() != k]
    return b"\r\n".join([lines[0], *kept, f"{key}: {value}".encode()]) + b"\r\n\r\n"


def _msg_id(hdr: bytes) -> str:
    """The Nats-Msg-Id of a stored header block ("" if none or unparsable)."""
    try:
        _status, _desc, h = parse_headers(hdr)
    except HeaderError:
        return ""
    return _first(h, H_MSG_ID) or ""


def _check_schedule_headers(h: dict[str, list[str]], subject: str) -> ApiError | None:
    """nats-server's message schedule checks on a stream without schedules (natsd has
    none): a schedule, or a time zone it cannot load, is "message schedules is disabled";
    Nats-Schedule-Next must be "purge" with a valid Nats-Scheduler before it is refused the
    same way, and a Nats-Scheduler alone is invalid."""
    tz = _first(h, H_SCHEDULE_TZ)
    if _first(h, H_SCHEDULE) or (tz is not None and not _valid_time_zone(tz)):
        return E.JSMessageSchedulesDisabledErr()
    scheduler = _first(h, H_SCHEDULER)
    nxt = _first(h, H_SCHEDULE_NEXT)
    if nxt:
        if nxt != "purge":
            return E.JSMessageSchedulesSchedulerInvalidErr()
        if not scheduler or scheduler == subject or not _is_valid_publish_subject(scheduler):
            return E.JSMessageSchedulesSchedulerInvalidErr()
        return E.JSMessageSchedulesDisabledErr()
    if scheduler:
        return E.JSMessageSchedulesSchedulerInvalidErr()
    return None


def _valid_time_zone(name: str) -> bool:
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


def _first(h: dict[str, list[str]], key: str) -> str | None:
    v = h.get(key)
    return v[0] if v else None


def _parse_ttl(s: str) -> int | None:
    """Nats-TTL: seconds as an integer, a Go duration, or "never" (-1)."""
    from natsd.core.clock import parse_duration

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


def _limit_text(e: StoreError) -> str:
    if isinstance(e, ErrMaxMsgs):
        return "maximum messages exceeded"
    if isinstance(e, ErrMaxBytes):
        return "maximum bytes exceeded"
    return "maximum messages per subject exceeded"
