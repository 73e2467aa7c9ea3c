"""A stream: its config, its store, its subject subscriptions, the publish path and retention.

Ownership: the event loop owns every Stream. Messages arrive through internal subscriptions
on the account's Sublist (``_on_msg``), are checked against the JetStream publish headers
(``headers``), stored, and acknowledged through the Committer (file streams) or at once
(memory streams). Acks are small JSON documents formatted directly as bytes: no JSON encoder
per message.

What a stream needs from above comes through its ``StreamContext`` (``ctx``: the account's
Sublist, the committer, clock and scheduler, advisories, storage limits), built by the
engine; the often-used parts are bound once as attributes (``sublist``, ``clock``,
``scheduler``), which the stream's consumers read too. Its consumers are ``StreamListener``s
(``consumers``): the stream tells them about stored and removed messages, and owns the
retention rules that ask them (``ack_msg``, interest checks, ``partition_unique``), as
nats-server's ``stream.go`` does.
"""

from __future__ import annotations

import base64
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.core.clock import rfc3339
from natsd.core.filters import subject_matches
from natsd.core.headers import (
    HeaderError,
    parse_headers,
    replace_header,
    set_header,
    slice_header,
)
from natsd.core.scheduler import Clock, Scheduler
from natsd.core.transform import SubjectTransform
from natsd.jetstream.config.stream_types import (
    PersistMode,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamSource,
)
from natsd.jetstream.config.subject_mapping import subject_is_subset_match
from natsd.jetstream.stream.batch import (
    ADVISORY,
    ADVISORY_TYPE,
    AtomicBatches,
    Checked,
    check_batch,
)
from natsd.jetstream.stream.context import RetentionView, StreamContext, StreamListener
from natsd.jetstream.stream.counter import (
    COUNTER_SOURCES,
    MAX_HEADER,
    ack_value,
    check_increment,
    counter_body,
    counter_value,
    increment_of,
    is_sources_map,
    merge_sourced,
)
from natsd.jetstream.stream.entries import MsgEntry, encode_batch, encode_msg
from natsd.jetstream.stream.fastbatch import MAX_ID as FAST_MAX_ID
from natsd.jetstream.stream.fastbatch import OP_COMMIT_EOB, OP_PING, FastBatches, FastReplies
from natsd.jetstream.stream.headers import (
    FAST_BATCH_SUFFIX,
    H_BATCH_ID,
    H_EXP_LAST_MSG_ID,
    H_EXP_LAST_SEQ,
    H_EXP_LAST_SUBJ_SEQ,
    H_MSG_ID,
    H_ROLLUP,
    H_SCHEDULE,
    H_SCHEDULER,
    H_TTL,
    check_headers,
    check_last_msg_id_and_rollup,
    check_schedule_headers,
    first,
    is_marker,
    limit_text,
    marker_header,
    msg_id_of,
    only_msg_id,
    parse_ttl,
)
from natsd.jetstream.stream.mirror import MirrorFeed
from natsd.jetstream.stream.queries import seq_from_time
from natsd.jetstream.stream.replica import Replica
from natsd.jetstream.stream.schedule_check import check_schedule
from natsd.jetstream.stream.schedules import MsgSchedules
from natsd.jetstream.stream.source import (
    SOURCED_FAILED,
    SOURCED_OK,
    SourceFeed,
    get_hash,
    iname_of,
    recover_positions,
)
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError, ErrorDef
from natsd.router.msgtrace import MsgTrace, active_trace, disable_dest
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.store import (
    DiscardPolicy,
    ErrMaxBytes,
    ErrMaxMsgs,
    ErrMaxMsgsPerSubject,
    ErrMsgTooLarge,
    StoredMsg,
    StoreError,
    StreamStore,
)
from natsd.version import API_LEVEL, SERVER_VERSION

__all__ = ["Stream"]

log: Final = logging.getLogger("natsd")

_ZERO_TIME: Final = "0001-01-01T00:00:00Z"
# The queue group of the replicas that answer a stream's DIRECT.GET (nats-server's
# ``dgetGroup``, its system group "_sys_").
DIRECT_QUEUE: Final = b"_sys_"

# Policy members compared per message, bound once: on Python 3.11 `RetentionPolicy.INTEREST`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_LIMITS: Final = RetentionPolicy.LIMITS
_WORKQUEUE: Final = RetentionPolicy.WORKQUEUE
_INTEREST: Final = RetentionPolicy.INTEREST
_ASYNC: Final = PersistMode.ASYNC
_WRONG_LAST_MSG_ID: Final = 10070
_MEMORY: Final = StorageType.MEMORY
_DISCARD_NEW: Final = DiscardPolicy.NEW
# Publish headers whose checks read what an in-flight replicated entry may change.
_READS_STATE: Final = (H_EXP_LAST_SEQ, H_EXP_LAST_SUBJ_SEQ, H_EXP_LAST_MSG_ID, H_SCHEDULER)
_SOURCES_KEY: Final = COUNTER_SOURCES.encode()
_INCR_KEY: Final = b"Nats-Incr:"
_SCHEDULE_KEY: Final = b"Nats-Schedule"

# The reply a sourced message waits with on a replicated stream's leader (``rep.waiting``):
# recognised by identity, so nothing from the network is ever taken for one. (Not Final:
# one object, never a literal copied into each use.)
SOURCED_REPLY = b"$NATSD.SOURCED"

# Messages read per store call while rebuilding the duplicate window after a restart.
_REBUILD_BATCH: Final = 1024


class Stream:
    def __init__(
        self,
        ctx: StreamContext,
        cfg: StreamConfig,
        store: StreamStore,
        created_ns: int,
    ) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self.name = cfg.name
        self.store = store
        self.created_ns = created_ns
        self.clock: Clock = ctx.clock
        self.scheduler: Scheduler = ctx.scheduler
        # Bound once: the duplicate window reads the clock for every message with an id.
        self._now_ns: Callable[[], int] = self.clock.time_ns
        self.subs: list[Subscription] = []
        # On a cluster, a replica (or R1 stream) that answers DIRECT.GET (``serve_direct``),
        # and a mirror with mirror_direct answering its origin's (``serve_origin_direct``).
        self.direct_subs: list[Subscription] = []
        self.origin_subs: list[Subscription] = []
        self._subscribed = False  # (subscribe() ran: an update may change its direct gets)
        # Nats-Msg-Id -> (seq, ts_ns), oldest first, pruned by duplicate_window.
        self._dedup: OrderedDict[str, tuple[int, int]] = OrderedDict()
        # the oldest one's timestamp (0: to be looked up), so that a check while it is
        # still in the window costs a comparison; reset wherever an entry may be deleted
        self._dedup_oldest = 0
        self._last_msg_id = ""
        self._trace: MsgTrace | None = None  # the traced message ``process`` is handling
        # a replicated stream's leader: the traces of the messages it proposed, by sequence,
        # sent when each is applied (``MsgTrace.release``)
        self._held_traces: dict[int, MsgTrace] = {}
        self._name_b = self.name.encode()
        self.consumer_count = 0  # (every consumer: interest retention asks whether any)
        self.listed_consumers = 0  # (those STREAM.INFO and the account count)
        # Consumers of this stream by name (``attach`` / ``detach``). The publish path tells
        # them about every stored message through notify_consumers.
        self.consumers: dict[str, StreamListener] = {}
        # The ack sent when the disk refuses a write: the same bytes every time.
        self.write_failed_ack = self._ack_err(E.JSStreamStoreFailedF(err="write failed"))
        self._domain = ctx.domain
        # '{"stream":"<name>",["domain":"<d>",]"seq":' : an ack is this plus "<seq>}".
        self._ack_head = b'{"stream":"%s",' % self._name_b
        if self._domain:
            self._ack_head += b'"domain":"%s",' % self._domain.encode()
        self._ack_head += b'"seq":'
        self.sublist = ctx.sublist
        self._committer = ctx.committer
        self._committer.on_failure[store] = self._write_failed
        self._republish: SubjectTransform | None = None
        self._transform: SubjectTransform | None = None
        self._check_limits = False
        # A replicated stream's Raft side (None: R1, stored here at once); see replica.py.
        self.replica: Replica | None = None
        # A replicated stream's interest and workqueue decisions read its consumers'
        # committed state (set by the cluster layer): every replica removes the same
        # messages when the state applies, and an ack removes nothing by itself.
        self.retention_views: Callable[[], list[RetentionView]] | None = None
        # With a replica: a publish may hit a discard-new limit, so it is checked with
        # nothing in flight (the limit is decided against the store).
        self._limits_new = False
        # open atomic batches (batch.py), made with the first
        self._batches: AtomicBatches | None = None
        # open fast batches (fastbatch.py), made with the first; and what the checks of a
        # fast batch's message answered (None outside one)
        self._fast_batches: FastBatches | None = None
        self._fast_answer: list[bytes] | None = None
        self._fast_replies = FastReplies()  # (their reply subjects' heads, read once)
        # a mirror's feed from its origin (mirror.py), while this replica leads
        self.mirror: MirrorFeed | None = None
        self._serving_origin = False  # (its mirror_direct: answering the origin's gets)
        # its sources' feeds (source.py) by iname, while this replica leads
        self.sources: dict[str, SourceFeed] = {}
        self._feeding = False  # (the sources run: subscribe() started them)
        self._sourcing = False  # a sourced message is being published (nats-server's relaxations)
        self._sourced_plain = False  # (and its one Nats- header is its Nats-Stream-Source)
        self._sourced_answer: list[bytes] = []
        # message schedules (schedules.py), with allow_msg_schedules
        self._schedules: MsgSchedules | None = None
        self.apply_config(cfg)

    def apply_config(self, cfg: StreamConfig) -> None:
        self.cfg = cfg
        # (its store keeps where each source is: recover_positions reads it)
        self.store.track_sources([iname_of(src) for src in cfg.sources])
        # Server or account storage limits are checked per message only when configured.
        self._check_limits = self.ctx.limits_set()
        rp = cfg.republish
        self._republish = SubjectTransform(rp.src, rp.dest) if rp is not None else None
        st = cfg.subject_transform
        self._transform = SubjectTransform(st.src, st.dest) if st is not None and st.dest else None
        self._limits_new = (
            cfg.discard == _DISCARD_NEW and (cfg.max_msgs > 0 or cfg.max_bytes > 0)
        ) or (cfg.discard_new_per_subject and cfg.max_msgs_per_subject > 0)
        if not cfg.allow_atomic and self._batches is not None:
            self._batches.clear()  # turned off: the open batches are gone
        if not cfg.allow_batched and self._fast_batches is not None:
            self._fast_batches.clear()
        if cfg.mirror is None and self.mirror is not None:
            # promoted (the update without ``mirror``): a stream of its own from now on
            self._stop_mirror(retire=True)
        elif self._serving_origin and not cfg.mirror_direct and self.mirror is not None:
            # mirror_direct turned off (the origin no longer allows direct gets)
            self.ctx.serve_mirror_direct(self.mirror.source.name, self, False)
            self._serving_origin = False
        if self.origin_subs and not cfg.mirror_direct:
            self.serve_origin_direct(False)
        if self._subscribed:
            self._serve_own_direct()
        if self._feeding:
            self._update_sources()
        elif cfg.sources and self.subs and (self.replica is None or self.replica.leading):
            self._start_sources()  # (a leader's first sources, by update)
        if cfg.allow_msg_schedules and self._schedules is None:
            # (never turned off again: the config refuses it)
            self._schedules = MsgSchedules(self, self.clock, self.scheduler)
            self._schedules.recover()

    # ------------------------------------------------------------------ wiring
    def subscribe(self) -> None:
        """Take publishes on the stream's subjects, and run its mirror's or sources' feeds
        (an R1 stream's server, or a replicated stream's leader)."""
        rep = self.replica
        feeds = rep is None or rep.leading
        self._subscribed = True
        self._serve_own_direct()
        if self.cfg.mirror is not None:
            # a mirror takes no publishes: it copies its origin
            if not feeds:
                return
            if self.mirror is None:
                self.mirror = MirrorFeed(self, self.cfg.mirror, self.sublist, self.scheduler,
                                         self.clock, "JS_MIRROR_" + self._stable_hash(),
                                         self._feed_metadata("mirror"))  # fmt: skip
            self.mirror.start()
            return
        if self.cfg.sources and not self._feeding and feeds:
            self._start_sources()
        sublist = self.sublist
        subjects = self.cfg.subjects or ([] if self.cfg.sources else [self.name])
        for i, subj in enumerate(subjects):
            sub = Subscription(subj.encode(), None, b"js-%d" % i, callback=self._on_msg)
            sublist.insert(sub)
            self.subs.append(sub)

    def unsubscribe(self) -> None:
        """Stop taking publishes; a replicated stream's replica that does not lead stops
        its feeds too. (A leader's run on across a resubscribe: started again, a source
        would look for its place in a store its proposals in flight are not in yet.)"""
        sublist = self.sublist
        for sub in self.subs:
            sublist.remove(sub)
        self.subs = []
        rep = self.replica
        if rep is not None and not rep.leading:
            self._stop_mirror()
            self._stop_sources()

    def resubscribe(self) -> None:
        self.unsubscribe()
        self.subscribe()

    def serve_direct(self, on: bool) -> None:
        """Answer (or stop answering) ``$JS.API.DIRECT.GET.<name>[.>]`` from this replica's
        store, in the queue group every replica of the stream shares, so each request goes
        to one of them cluster-wide (nats-server's ``subscribeToDirect``: the leader and
        each follower once it is current; an R1 stream's server). Only on a cluster: a
        standalone server's API subscription answers (``api/direct.py``)."""
        self.direct_subs = self._direct_subs(on, self.direct_subs, self.name, None)

    def serve_origin_direct(self, on: bool) -> None:
        """A mirror with ``mirror_direct`` on a cluster: answer (or stop answering) its
        origin's direct gets from its own store, in the same queue group as the origin's
        replicas (nats-server's ``subscribeToMirrorDirect``), wherever in the cluster the
        mirror's replicas are. Its leader joins once few origin messages are left to copy
        (``mirror_caught_up``), a follower once it is current (the cluster layer)."""
        mirror = self.cfg.mirror
        if on and (mirror is None or not self.cfg.mirror_direct):
            return
        name = mirror.name if mirror is not None else ""
        self.origin_subs = self._direct_subs(on, self.origin_subs, name, self)

    def _direct_subs(
        self, on: bool, subs: list[Subscription], name: str, mirror: Stream | None
    ) -> list[Subscription]:
        """The queue subscriptions on ``$JS.API.DIRECT.GET.<name>[.>]`` after turning them
        ``on`` or off (those in ``subs`` now)."""
        if on == bool(subs):
            return subs
        sublist = self.sublist
        if not on:
            for sub in subs:
                sublist.remove(sub)
            return []
        answer = self.ctx.direct_answerer(mirror)
        if answer is None:
            return []
        base = b"$JS.API.DIRECT.GET." + name.encode()
        out = []
        for i, subj in enumerate((base, base + b".>")):
            sub = Subscription(subj, DIRECT_QUEUE, b"js-direct-%d" % i, callback=answer)
            sublist.insert(sub)
            out.append(sub)
        return out

    def _serve_own_direct(self) -> None:
        """An R1 stream on a cluster answers its direct gets in the queue group too (a
        replicated stream's replicas are the cluster layer's to turn on), so that mirrors
        with ``mirror_direct`` share them and each request has one answer."""
        if self.replica is None and self.cfg.num_replicas <= 1 and self.ctx.clustered:
            self.serve_direct(self.cfg.allow_direct)

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
        return b'{"error":%s,"stream":"%s","seq":0}' % (
            orjson.dumps(err.to_json()),
            self._name_b,
        )

    def _trace_only(self) -> bool:
        return self._trace is not None and self._trace.only

    def _untraced(self, hdr: bytes | None) -> bytes | None:
        """``hdr`` of a traced message that waits to be handled later, outside its trace:
        stored with its destination disabled, as the trace would have stored it."""
        if self._trace is not None and hdr is not None:
            return disable_dest(hdr)
        return hdr

    def _reply(self, reply: bytes | None, payload: bytes) -> None:
        if self._trace is not None:
            self._trace.js_answer(payload)
        if self._fast_answer is not None:
            self._fast_answer.append(payload)  # (a fast batch's message: _fast answers)
        elif reply:
            self.ctx.send(reply, payload)

    def process(
        self, subject_b: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """``_process``, for a traced message (``router/msgtrace.py``) with its JetStream
        event: its error, or the subject it passed the checks under."""
        if reply is SOURCED_REPLY:
            self._source_process(subject_b, hdr or b"", data)  # (one that waited)
            return
        trace = active_trace(hdr) if hdr else None
        if trace is None:
            self._process(subject_b, reply, hdr, data)
            return
        trace.js_event(self.name)
        self._trace = trace
        try:
            self._process(subject_b, reply, hdr, data)
        finally:
            self._trace = None

    def _process(
        self, subject_b: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """Store one published message, with nats-server's checks in its order (checked
        against it in tests/differential/test_publish_order.py): sealed, max_msg_size,
        the publish headers, the duplicate window, then the expected last msg id and rollup,
        limits and an invalid TTL. A retried publish is answered as a duplicate before the
        checks its first copy has since made fail."""
        rep = self.replica
        if rep is not None:
            if not rep.leading:
                return  # only the leader takes publishes (it alone subscribes)
            if (rep.waiting or not rep.group.proposable()) and not self._trace_only():
                # behind one that waits, or until a leadership transfer ends; or Raft has
                # just moved the leadership and the cluster layer is yet to notice: it
                # passes these on to the new leader (Replica.follow). (A trace-only one is
                # checked now, as nats-server does on its leader, and never proposed.)
                rep.waiting.append((subject_b, reply, self._untraced(hdr), data))
                return
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
        if (
            rep is not None
            and rep.inflight
            and not self._trace_only()
            and self._must_wait(rep, hdr)
        ):
            # (a fast batch's message too: it is sequenced in its batch when its turn comes)
            rep.waiting.append((subject_b, reply, self._untraced(hdr), data))
            return
        if (
            reply is not None
            and self._fast_answer is None  # (not _fast's own call for the message)
            and reply.endswith(FAST_BATCH_SUFFIX)
        ):
            if not cfg.allow_batched:
                self._refuse_batch(reply, E.JSBatchPublishDisabledErr, subject, hdr, data)
            else:
                self._fast(subject_b, subject, reply, hdr, data)
            return
        self._publish(rep, subject_b, subject, reply, hdr, data)

    def _publish(
        self,
        rep: Replica | None,
        subject_b: bytes,
        subject: str,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        """``_process`` past the checks of the stream's state and the message's size (a
        fast batch's message comes here from ``_fast``, checked once): its headers, the
        duplicate window, limits and TTL, then stored or proposed."""
        cfg = self.cfg
        msg_id = ""
        ttl = 0
        ttl_s = ""
        rollup = ""
        incr = 0
        counting = False  # it carries a counter increment (Nats-Incr)
        if self._sourced_plain and self._sourcing:
            only_id: str | None = ""  # (its one Nats- header is its Nats-Stream-Source)
        else:
            only_id = only_msg_id(hdr) if hdr else None
        if only_id is not None:
            # (its one Nats- header: every check passes, the duplicate window decides)
            msg_id = only_id
            if msg_id:
                dup = self._check_dup(msg_id)
                if dup is not None:
                    self._reply(reply, self._ack_ok(dup, duplicate=True))
                    return
        elif hdr:
            try:
                _status, _desc, h = parse_headers(hdr)
            except HeaderError:
                h = {}
            if h:
                if first(h, H_BATCH_ID):
                    # an atomic batch's message (batch.py)
                    if not cfg.allow_atomic:
                        self._refuse_batch(reply, E.JSAtomicPublishDisabledErr, subject, hdr, data)
                    else:
                        self._atomic(rep, subject_b, subject, reply, hdr, h, data)
                    return
                raw = increment_of(hdr) if _INCR_KEY in hdr else None
                if raw is not None and self._sourcing:
                    # a sourced counter's message: stored as it is, or on a counter stream
                    # added by what its origin's value moved (_count)
                    counting = cfg.allow_msg_counter
                    raw = None
                if raw is not None:
                    checked = check_increment(cfg, hdr, raw, len(data))
                    if isinstance(checked, ApiError):
                        self._reply(reply, self._ack_err(checked))
                        return
                    incr = checked
                    counting = True
                error = check_headers(
                    cfg, self.name, self.store, h, subject,
                    self._schedule_checker(hdr) if cfg.allow_msg_schedules
                    else check_schedule_headers, self._sourcing,
                )  # fmt: skip
                if error is not None:
                    self._reply(reply, self._ack_err(error))
                    return
                msg_id = first(h, H_MSG_ID) or ""
                if msg_id:
                    dup = self._check_dup(msg_id)
                    if dup is not None:
                        self._reply(reply, self._ack_ok(dup, duplicate=True))
                        return
                error = check_last_msg_id_and_rollup(cfg, self._last_msg_id, h, self._sourcing)
                if error is not None:
                    self._reply(reply, self._ack_err(error))
                    return
                rollup = (first(h, H_ROLLUP) or "").lower()
                ttl_s = (first(h, H_TTL) or "").strip()
                if not rollup and cfg.allow_msg_schedules and first(h, H_SCHEDULE):
                    # a schedule replaces the one before it on its subject
                    hdr = hdr[:-2] + b"Nats-Rollup: sub\r\n\r\n"
                    rollup = "sub"
        value = 0
        if cfg.allow_msg_counter:
            # (counting: hdr holds the increment)
            if not counting or hdr is None:
                self._reply(reply, self._ack_err(E.JSMessageIncrMissingErr()))
                return
            counted = self._count(rep, subject, hdr, incr, data if self._sourcing else None)
            if isinstance(counted, ApiError):
                self._reply(reply, self._ack_err(counted))
                return
            hdr, data, value = counted
        if self._check_limits:
            exceeded = self.ctx.storage_exceeded(cfg.storage == _MEMORY, subject, hdr, data)
            if exceeded is not None:
                self._reply(reply, self._ack_err(exceeded()))
                return
        if ttl_s:
            parsed = parse_ttl(ttl_s)
            if parsed is None:
                self._reply(reply, self._ack_err(E.JSMessageTTLInvalidErr()))
                return
            ttl = parsed
            marker_ttl = cfg.subject_delete_marker_ttl // 1_000_000_000
            if hdr is not None and 0 < ttl < marker_ttl and cfg.max_msgs_per_subject != 1:
                # nats-server keeps messages at least as long as the delete markers that
                # would replace them, and stores the raised TTL (with one message per
                # subject there is no marker to miss)
                ttl = marker_ttl
                hdr = set_header(hdr, H_TTL, b"%d" % marker_ttl)
        trace = self._trace
        if trace is not None and hdr is not None:
            if rep is None or trace.only:
                trace.js_stored(subject, cfg.retention == _INTEREST and not self.consumer_count)
            if trace.only:
                return  # checked, not stored, no PubAck; its msg id is not remembered
            hdr = disable_dest(hdr)
        if rep is not None:
            proposed = self._propose(rep, subject, reply, hdr, data, ttl, msg_id, rollup)
            if proposed and cfg.allow_msg_counter and hdr is not None:
                rep.counted(subject, value, slice_header(hdr, _SOURCES_KEY))
            if proposed and trace is not None:
                # sent when the leader applies it, as nats-server's processJetStreamMsg
                trace.hold()
                self._held_traces[rep.clseq] = trace
            return
        self._store_checked(subject, reply, hdr, data, ttl, msg_id, rollup, value)

    def _store_checked(
        self,
        subject: str,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
        ttl: int,
        msg_id: str,
        rollup: str,
        value: int,
    ) -> bool:
        """An R1 stream's store step for a checked message (a publish, or a message a
        schedule produced): stored, rolled up, republished, acknowledged (after the fsync
        that covers it on a file stream), and announced to the consumers. False when the
        store refused it (the publisher has its error)."""
        cfg = self.cfg
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
            return False
        except (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject) as e:
            self._reply(reply, self._ack_err(E.JSStreamStoreFailedF(err=limit_text(e))))
            return False
        except StoreError as e:
            self._reply(reply, self._ack_err(E.JSStreamStoreFailedF(err=str(e))))
            return False
        if msg_id:
            self._dedup[msg_id] = (seq, ts)
        # nats-server tracks the id of the last message, even when it had none.
        self._last_msg_id = msg_id
        if rollup == "sub":
            self.store.purge_ex(subject, seq, 0)
        elif rollup == "all":
            self.store.compact(seq)
        if self._schedules is not None:
            self._scheduled(seq, subject, hdr, ts)
        if self._republish is not None:
            self._do_republish(subject, seq, ts, hdr, data, rp_last)
        if cfg.retention == _INTEREST and not self.consumer_count:
            # Interest retention keeps nothing nobody is interested in.
            self.store.remove_msg(seq)
        # Acknowledge now (memory, or persist_mode async: written and synced after the
        # PubAck, in the next group commit) or after the fsync that covers it (file).
        if cfg.storage == _MEMORY or cfg.persist_mode == _ASYNC:
            if reply:
                publish(self.sublist, reply, None, None, self._ack_stored(seq, value))
            if cfg.storage != _MEMORY:
                self._committer.add(self.store, None)
        elif reply:
            ack = self._ack_stored(seq, value)
            self._committer.add(self.store, (self.sublist, reply, ack, self.write_failed_ack))
        else:
            self._committer.add(self.store, None)
        if self.consumers:
            self.notify_consumers(seq, subject)
        return True

    def _ack_stored(self, seq: int, value: int) -> bytes:
        """The PubAck of a stored message (a counter's carries its value)."""
        if self.cfg.allow_msg_counter:
            return self._ack_head + b'%d,"val":"%d"}' % (seq, value)
        return self._ack_head + b"%d}" % seq

    def _count(
        self, rep: Replica | None, subject: str, hdr: bytes, incr: int, sourced: bytes | None
    ) -> tuple[bytes, bytes, int] | ApiError:
        """A counter's increment made into the message stored (``counter.py``): its header
        block (the last message's Nats-Counter-Sources carried over), its body and value;
        or why it cannot be (a broken counter, too big). ``sourced``: the body of a sourced
        counter message, whose origin's value replaces the one last seen from it in
        Nats-Counter-Sources, the difference being the increment."""
        total = rep.counters.get(subject) if rep is not None else None
        if total is not None:
            value, sources = total[0], total[2]
            if sources is not None and not is_sources_map(sources):
                return E.JSMessageCounterBrokenErr()
        else:
            current = counter_value(self.store, subject)
            if current is None:
                return E.JSMessageCounterBrokenErr()
            value, sources = current
        if sourced is not None:
            merged = merge_sourced(hdr, subject, sourced, sources)
            if merged is None:
                return E.JSMessageCounterBrokenErr()
            incr, sources = merged
            hdr = replace_header(hdr, "Nats-Incr", b"%d" % incr)
        value += incr
        if sources is not None:
            hdr = replace_header(hdr, COUNTER_SOURCES, sources)
        body = counter_body(value)
        if len(hdr) > MAX_HEADER:
            return E.JSStreamHeaderExceedsMaximumErr()
        size = len(hdr) + len(body)
        cap = self.cfg.max_msg_size
        if size > self.ctx.max_payload or (cap >= 0 and size > cap):
            return E.JSStreamMessageExceedsMaximumErr()
        return hdr, body, value

    # ------------------------------------------------------------------ atomic batches
    def _atomic(
        self,
        rep: Replica | None,
        subject_b: bytes,
        subject: str,
        reply: bytes | None,
        hdr: bytes,
        h: dict[str, list[str]],
        data: bytes,
    ) -> None:
        """One message of an atomic batch (``batch.py``): staged and answered empty, or
        refused, or the commit: the batch checked and stored (or proposed) whole."""
        if self._check_limits:
            exceeded = self.ctx.storage_exceeded(self.cfg.storage == _MEMORY, subject, hdr, data)
            if exceeded is not None:
                self._reply(reply, self._ack_err(exceeded()))
                return
        batches = self._batches
        if batches is None:
            batches = AtomicBatches(self.ctx.scheduler, self.ctx.batch_limits,
                                    self._batch_abandoned, API_LEVEL, self._epoch)  # fmt: skip
            self._batches = batches
        staged = batches.stage(self.cfg, subject_b, subject, hdr, h, data)
        if staged is None:
            if reply:
                self.ctx.send(reply, b"")
            return
        if isinstance(staged, ApiError):
            self._reply(reply, self._ack_err(staged))
            return
        checked = check_batch(self, staged)
        if isinstance(checked, ApiError):
            self._reply(reply, self._ack_err(checked))
            return
        if rep is not None:
            self._propose_batch(rep, reply, staged.id, checked)
        else:
            self._store_batch(reply, staged.id, checked)

    def _epoch(self) -> int:
        rep = self.replica
        return rep.epoch if rep is not None else 0

    def _batch_abandoned(self, batch_id: str, reason: str) -> None:
        body = {"stream": self.name, "batch": batch_id, "reason": reason}
        # (nats-server sends it to the system account too)
        self.ctx.advise(ADVISORY + self.name, ADVISORY_TYPE, body, system_too=True)

    def _batch_ack(self, seq: int, batch_id: str, count: int) -> bytes:
        return self._ack_head + b'%d,"batch":%s,"count":%d}' % (
            seq, orjson.dumps(batch_id), count,
        )  # fmt: skip

    def _store_batch(self, reply: bytes | None, batch_id: str, checked: list[Checked]) -> None:
        """A checked batch stored on an R1 stream, all in this turn of the loop (no reader
        sees part of it); the last message's PubAck, after the fsync that covers it."""
        store = self.store
        first_seq = 0
        seq = 0
        stored: list[tuple[int, str]] = []
        for c in checked:
            rp_last = 0
            if self._republish is not None:
                prev = store.load_last_msg(c.subject)
                rp_last = prev.seq if prev is not None else 0
            try:
                seq, ts = store.store_msg(c.subject, c.hdr, c.data, c.ttl)
            except StoreError as e:
                if first_seq:
                    store.truncate(first_seq - 1)  # none of it, then
                    for c2 in checked:
                        if c2.msg_id and self._dedup.get(c2.msg_id, (0, 0))[0] >= first_seq:
                            del self._dedup[c2.msg_id]
                            self._dedup_oldest = 0
                limit = isinstance(e, (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject))
                text = limit_text(e) if limit else str(e)
                if isinstance(e, ErrMsgTooLarge):
                    self._reply(reply, self._ack_err(E.JSStreamMessageExceedsMaximumErr()))
                else:
                    self._reply(reply, self._ack_err(E.JSStreamStoreFailedF(err=text)))
                return
            first_seq = first_seq or seq
            if c.msg_id:
                self._dedup[c.msg_id] = (seq, ts)
            self._last_msg_id = c.msg_id
            if c.rollup == "sub":
                store.purge_ex(c.subject, seq, 0)
            elif c.rollup == "all":
                store.compact(seq)
            if self._schedules is not None:
                self._scheduled(seq, c.subject, c.hdr, ts)
            if self._republish is not None:
                self._do_republish(c.subject, seq, ts, c.hdr, c.data, rp_last)
            stored.append((seq, c.subject))
        if self.cfg.retention == _INTEREST and not self.consumer_count:
            for s, _subj in stored:
                store.remove_msg(s)
        ack = self._batch_ack(seq, batch_id, len(checked))
        if self.cfg.storage == _MEMORY:
            if reply:
                publish(self.sublist, reply, None, None, ack)
        elif reply:
            self._committer.add(store, (self.sublist, reply, ack, self.write_failed_ack))
        else:
            self._committer.add(store, None)
        if self.consumers:
            for s, subj in stored:
                self.notify_consumers(s, subj)

    def _propose_batch(
        self, rep: Replica, reply: bytes | None, batch_id: str, checked: list[Checked]
    ) -> None:
        """A checked batch proposed as one entry (``entries.BATCH``): every replica stores
        all of it or none; the last message carries the reply, answered at apply."""
        seq = rep.clseq
        now = self._now_ns()
        msgs: list[bytes] = []
        for i, c in enumerate(checked):
            seq += 1
            last = i == len(checked) - 1
            to = reply if last else None
            entry = encode_msg(rep.node_id, seq, now, c.ttl, c.subject, to, c.hdr, c.msg_id,
                               c.rollup, c.data)  # fmt: skip
            msgs.append(entry)
        if not rep.group.propose(encode_batch(rep.node_id, batch_id, msgs)):
            return  # leadership moved: no answer, nothing stored (the client starts again)
        rep.clseq = seq
        rep.inflight += len(checked)
        for i, c in enumerate(checked):
            if c.msg_id:
                rep.inflight_ids[c.msg_id] = rep.clseq - len(checked) + 1 + i
            if self.cfg.allow_msg_counter:
                value = int(orjson.loads(c.data)["val"])
                rep.counted(c.subject, value, slice_header(c.hdr, _SOURCES_KEY))

    def apply_batch(self, batch_id: str, entries: list[MsgEntry]) -> None:
        """A committed atomic batch, on every replica: its messages applied in order; the
        proposer answers the last with the batch's PubAck."""
        n = len(entries)
        for i, e in enumerate(entries):
            self.apply_entry(e, (batch_id, n) if i == n - 1 else None)

    # ------------------------------------------------------------------ fast batches
    def _fast_send(self, reply: bytes, payload: bytes) -> None:
        """An answer to a fast batch's publisher, in order with the others."""
        if self.cfg.no_ack:
            return
        if (
            self.cfg.storage == _MEMORY
            or self.cfg.persist_mode == _ASYNC
            or self.replica is not None  # (what it reports is committed: in a majority's logs)
        ):
            self.ctx.send(reply, payload)
        else:  # after the fsync that covers what it reports
            self._committer.add(self.store, (self.sublist, reply, payload, payload))

    def _fast_state(self) -> FastBatches:
        fb = self._fast_batches
        if fb is None:
            ctx = self.ctx
            fb = FastBatches(ctx.scheduler, ctx.clock, ctx.fast_limits, self._fast_send,
                             self._fast_final)  # fmt: skip
            self._fast_batches = fb
        return fb

    def _fast_applied(self, e: MsgEntry, leading: bool, error: ApiError | None = None) -> None:
        """A replicated stream applied (or, with ``error``, failed to store) a fast batch's
        message (its entry carries the batch's reply subject)."""
        assert e.reply is not None
        req = self._fast_replies.parse(e.reply)
        if req is None:
            return
        fb = self._fast_state()
        if error is None:
            fb.applied(req, e.reply, e.seq, leading)
            return
        b = fb.open.get(req.id)
        if leading and b is not None:
            fb.error(e.reply, req.seq, error.to_json())
            fb.applied(req, e.reply, b.sseq, leading)

    def _fast_final(self, seq: int, batch_id: str, count: int) -> bytes:
        return self._batch_ack(seq, batch_id, count)

    def _fast(
        self, subject_b: bytes, subject: str, reply: bytes, hdr: bytes | None, data: bytes
    ) -> None:
        """One message of a fast batch (``fastbatch.py``; nats-server's
        ``processJetStreamFastBatchMsg`` on one server)."""
        if self._check_limits:
            exceeded = self.ctx.storage_exceeded(self.cfg.storage == _MEMORY, subject, hdr, data)
            if exceeded is not None:
                self._fast_send(reply, self._ack_err(exceeded()))
                return
        req = self._fast_replies.parse(reply)
        if req is None:
            self._fast_send(reply, self._ack_err(E.JSBatchPublishInvalidPatternErr()))
            return
        fb = self._fast_state()
        b = fb.open.get(req.id)
        if b is None:
            # (an open batch's id passed this check when it opened)
            if len(req.id.encode()) > FAST_MAX_ID:
                self._fast_send(reply, self._ack_err(E.JSBatchPublishInvalidBatchIDErr()))
                return
            if req.seq != 1:
                self._fast_send(reply, self._ack_err(E.JSBatchPublishUnknownBatchIDErr()))
                return
            b = fb.open_batch(req)
            if b is None:
                self._fast_send(reply, self._ack_err(E.JSBatchPublishTooManyInflight()))
                return
        if hdr and b"Nats-Required-Api-Level:" in hdr:
            level = slice_header(hdr, b"Nats-Required-Api-Level") or b""
            if level and (not level.lstrip(b"+-").isdigit() or int(level) > API_LEVEL):
                fb.drop(b)
                self._fast_send(reply, self._ack_err(E.JSRequiredApiLevelErr()))
                return
        fb.touch(b)
        if req.op == OP_PING:
            if req.seq > b.lseq:
                fb.gap(reply, b.lseq + 1, req.seq + 1)
                if b.gap_ok:
                    b.lseq = req.seq
                    if not b.pending:
                        b.pseq = b.lseq
                    if not fb.check_flow(b, reply):
                        fb.flow(b, reply)
                else:
                    fb.commit(b, reply)
            else:
                fb.flow(b, reply)
            return
        b.lseq += 1
        if b.lseq != req.seq:
            fb.gap(reply, b.lseq, req.seq)  # (a backward one too, as the 2.15.1 binary)
            if b.gap_ok and req.seq > b.lseq:
                b.lseq = req.seq
            else:
                b.lseq -= 1
                fb.commit(b, reply)
                return
        if req.op == OP_COMMIT_EOB:
            b.lseq -= 1
            if not b.pending:
                b.pseq = b.lseq
            fb.commit(b, reply)
            return
        if req.seq == 1 and not req.commit:
            fb.flow(b, reply)  # the pace it starts at, before the message is checked
        # the message: checked and stored (or proposed) as a plain publish, its answers
        # kept; a replicated stream's entry carries the reply, which says at apply which
        # batch it belongs to (``_fast_applied``)
        rep = self.replica
        before = self.store.last_seq() if rep is None else rep.clseq
        answers: list[bytes] = []
        self._fast_answer = answers
        try:
            self._publish(rep, subject_b, subject, None if rep is None else reply, hdr, data)
        finally:
            self._fast_answer = None
        if rep is not None:
            if rep.clseq > before:
                b.pending += 1
                if req.commit:
                    fb.commit(b, reply)  # (answered when its last message is applied)
                return
        else:
            stored = self.store.last_seq()
            if stored > before:
                b.sseq = stored
                b.pseq = b.lseq
                if req.commit:
                    fb.commit(b, reply)
                else:
                    fb.check_flow(b, reply)
                return
        answer = orjson.loads(answers[-1]) if answers else {}
        error = answer.get("error")
        if error is None:  # a duplicate: skipped, counted
            if not b.pending:
                b.pseq = req.seq
                fb.check_flow(b, reply)
            if not req.commit:
                return
            if not b.gap_ok and b.lseq == 1:
                fb.drop(b)
                dup = answer.get("seq", 0)
                self._fast_send(reply, self._ack_head + b'%d,"duplicate": true,"batch":%s,'
                                b'"count":%d}' % (dup, orjson.dumps(b.id), req.seq))  # fmt: skip
                return
            fb.commit(b, reply)
            return
        if error.get("err_code") == _WRONG_LAST_MSG_ID:
            # nats-server checks it as it stores, and answers it as a plain publish's error;
            # the batch goes on, whatever its gap mode
            self._fast_send(reply, answers[-1])
            if not b.pending:
                b.pseq = b.lseq
            return
        if not b.gap_ok and b.lseq == 1:
            fb.drop(b)
            self._fast_send(reply, answers[-1])
            return
        fb.error(reply, req.seq, error)
        if b.gap_ok and not req.commit:
            return
        b.lseq -= 1
        if not b.pending:
            b.pseq = b.lseq
        fb.commit(b, reply)

    # BatchStream (batch.check_batch)
    def duplicate_of(self, msg_id: str) -> bool:
        return self._check_dup(msg_id) is not None

    def in_flight(self, msg_id: str) -> bool:
        rep = self.replica
        return rep is not None and msg_id in rep.inflight_ids

    def last_proposed(self) -> int:
        rep = self.replica
        return rep.clseq if rep is not None else self.store.last_seq()

    def counter_base(self, subject: str) -> tuple[int, bytes | None] | None:
        rep = self.replica
        total = rep.counters.get(subject) if rep is not None else None
        if total is not None:
            return total[0], total[2]
        return counter_value(self.store, subject)

    # ------------------------------------------------------------------ schedules
    def _schedule_checker(
        self, hdr: bytes
    ) -> Callable[[dict[str, list[str]], str], ApiError | None]:
        """The schedule headers' check of a publish to a stream with schedules
        (``schedule_check.py``), for ``check_headers``."""

        def check(_h: dict[str, list[str]], subject: str) -> ApiError | None:
            got = check_schedule(self.cfg, hdr, subject, self._now_ns(), self.last_is_schedule)
            return got if isinstance(got, ApiError) else None

        return check

    def last_is_schedule(self, subject: str) -> bool | None:
        """Is the last message on ``subject`` a schedule (None: it has none)?"""
        m = self.store.load_last_msg(subject)
        if m is None:
            return None
        return bool(m.hdr) and bool(slice_header(m.hdr or b"", _SCHEDULE_KEY))

    def _scheduled(self, seq: int, subject: str, hdr: bytes | None, ts: int) -> None:
        """Every stored message goes past the schedules; a fired ``@at`` schedule, or a
        client's cancel, purges the schedule's subject (below ``seq``: the same when the
        log is replayed over messages that came after it)."""
        assert self._schedules is not None
        purge = self._schedules.stored(seq, subject, hdr, ts)
        if purge:
            self.store.purge_ex(purge, seq, 0)

    def rebuild_schedules(self) -> None:
        """The store was filled from another replica's (a catch-up): the schedule table is
        read from it again."""
        if self._schedules is not None:
            self._schedules.rebuild()

    def leads(self) -> bool:
        rep = self.replica
        return rep is None or rep.leading

    def produce(self, subject: str, hdr: bytes, data: bytes, ttl: int, rollup: str) -> bool:
        """A schedule fired (``schedules.py``): its message is stored, or proposed on a
        replicated stream, as nats-server stores a sourced one (no publish header
        checks; the stream's and the server's limits apply)."""
        rep = self.replica
        if rep is not None:
            if not rep.leading or not rep.group.proposable():
                return False
            return self._propose(rep, subject, None, hdr, data, ttl, "", rollup)
        cfg = self.cfg
        if cfg.sealed or (0 <= cfg.max_msg_size < len(data) + len(hdr)):
            return False
        if self._check_limits and self.ctx.storage_exceeded(
            cfg.storage == _MEMORY, subject, hdr, data
        ):
            return False
        return self._store_checked(subject, None, hdr, data, ttl, "", rollup, 0)

    def leadership_changed(self) -> None:
        """This replica started or stopped leading: the schedules' firings in flight are
        forgotten (the leader fires what is due); a new leader's fast batches go on from
        what was applied, and their publishers hear so."""
        if self._schedules is not None:
            self._schedules.reset()
        rep = self.replica
        if rep is not None and rep.leading and self._fast_batches is not None:
            self._fast_batches.lead()
        if rep is not None and not rep.leading and rep.handed:
            # sourced messages that waited are not passed on: the new leader's sources
            # find their place in its store and copy them again
            rep.handed = [w for w in rep.handed if w[1] is not SOURCED_REPLY]

    # ------------------------------------------------------------------ replicated
    def _must_wait(self, rep: Replica, hdr: bytes | None) -> bool:
        """With entries in flight: does this publish's check read what they change?"""
        if self._limits_new:
            return True
        if not hdr:
            return False
        try:
            _status, _desc, h = parse_headers(hdr)
        except HeaderError:
            return False
        if any(first(h, k) for k in _READS_STATE):
            return True
        msg_id = first(h, H_MSG_ID)
        return bool(msg_id) and msg_id in rep.inflight_ids

    def _propose(
        self,
        rep: Replica,
        subject: str,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
        ttl: int,
        msg_id: str,
        rollup: str,
    ) -> bool:
        """The leader's store step: the checked message goes to the group with the next
        sequence; it is stored, and acknowledged, when the entry commits. False when the
        group did not take it."""
        seq = rep.clseq + 1
        entry = encode_msg(rep.node_id, seq, self._now_ns(), ttl, subject, reply, hdr, msg_id,
                           rollup, data)  # fmt: skip
        if not rep.group.propose(entry):
            # Leadership moved before this replica noticed: no answer, as nats-server's
            # processClusteredInboundMsg (NotLeader, dropped); the client retries with its
            # Nats-Msg-Id and reaches the new leader. An error here would end a publish
            # that a retry would have stored.
            return False
        rep.clseq = seq
        rep.inflight += 1
        if msg_id:
            rep.inflight_ids[msg_id] = seq
        return True

    def _applied_again(self, e: MsgEntry) -> None:
        """An entry whose message the store holds (a restart replays the log after its last
        compaction; a catch-up copied past its snapshot): what storing it did besides is
        done again, bounded by its sequence so that it is idempotent. A power loss can keep
        a message and lose the purge its rollup or its schedule's firing made just after
        it (the replica then held messages the others had purged), and the schedule table,
        read from such a store at start-up, would fire that schedule again."""
        self._purges_of(e)
        if self.cfg.retention == _INTEREST and not self.consumer_count:
            self.store.remove_msg(e.seq)  # (nobody was interested: gone on the others too)

    def _purges_of(self, e: MsgEntry) -> None:
        """What storing ``e`` purges besides: its rollup's, and its schedule's firing's
        (each below its sequence: the same when done again over later messages)."""
        if e.rollup == "sub":
            self.store.purge_ex(e.subject, e.seq, 0)
        elif e.rollup == "all":
            self.store.compact(e.seq)
        if self._schedules is not None:
            self._scheduled(e.seq, e.subject, e.hdr, e.ts)

    def apply_entry(self, e: MsgEntry, batch: tuple[str, int] | None = None) -> None:
        """A committed MSG entry, on every replica in log order (and again when a restart
        replays the log: what the store holds is skipped)."""
        store = self.store
        rep = self.replica
        leading = rep is not None and rep.leading
        mine = rep is not None and rep.mine(e.proposer, e.seq, leading)
        if e.seq <= store.last_seq():
            self._applied_again(e)
            if mine and rep is not None:
                rep.applied(e.seq, e.msg_id, e.subject)
            return
        if self.cfg.mirror is not None and e.seq > store.last_seq() + 1:
            if store.state().msgs == 0:
                store.compact(e.seq)  # an empty mirror starts where its origin's messages do
        rp_last = 0
        if leading and self._republish is not None:
            prev = store.load_last_msg(e.subject)
            rp_last = prev.seq if prev is not None else 0
        try:
            store.store_raw(e.subject, e.hdr, e.data, e.seq, e.ts, e.ttl)
        except StoreError as err:
            # A limit (discard new) refuses it on every replica alike; a write error is this
            # replica's own, and leaves it behind the others.
            limit = isinstance(err, (ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject))
            if not limit:
                log.error("stream %s: message %d not stored: %s", self.name, e.seq, err)
            if self._held_traces:
                self._release_trace(e.seq, e.subject, mine, str(err))
            fast = e.reply is not None and e.reply.endswith(FAST_BATCH_SUFFIX)
            if fast:
                text = limit_text(err) if limit else str(err)
                self._fast_applied(e, leading, E.JSStreamStoreFailedF(err=text))
            if mine and rep is not None:
                rep.applied(e.seq, e.msg_id, e.subject)
                # increments proposed on top of it are off by it: counted afresh
                rep.counters.pop(e.subject, None)
                rep.clseq = store.last_seq() + rep.inflight
                if e.reply and not fast:
                    text = limit_text(err) if limit else str(err)
                    self._reply(e.reply, self._ack_err(E.JSStreamStoreFailedF(err=text)))
            self.drain()
            return
        if e.msg_id:
            self._dedup[e.msg_id] = (e.seq, e.ts)
        self._last_msg_id = e.msg_id
        self._purges_of(e)
        if leading and self._republish is not None:
            self._do_republish(e.subject, e.seq, e.ts, e.hdr, e.data, rp_last)
        nointerest = self.cfg.retention == _INTEREST and not self.consumer_count
        if self._held_traces:
            self._release_trace(e.seq, e.subject, mine, "", nointerest)
        if nointerest:
            store.remove_msg(e.seq)
        fast = e.reply is not None and e.reply.endswith(FAST_BATCH_SUFFIX)
        if fast:
            self._fast_applied(e, leading)
        if mine and rep is not None:
            rep.applied(e.seq, e.msg_id, e.subject)
            if e.reply and not self.cfg.no_ack and not fast:
                # committed: durable in the node logs of a majority
                if batch is not None:
                    ack = self._batch_ack(e.seq, batch[0], batch[1])
                elif self.cfg.allow_msg_counter:
                    ack = self._ack_head + b'%d,"val":%s}' % (e.seq, ack_value(e.data))
                else:
                    ack = self._ack_head + b"%d}" % e.seq
                publish(self.sublist, e.reply, None, None, ack)
        if self.cfg.storage != _MEMORY:
            # written out after the PubAck (its write is queued first), synced on a timer
            self._committer.add_replicated(store)
        if self.consumers:
            self.notify_consumers(e.seq, e.subject)
        self.drain()

    def _release_trace(
        self, seq: int, subject: str, mine: bool, error: str, nointerest: bool = False
    ) -> None:
        """The entry at ``seq`` was applied: its held trace is sent (when this replica
        proposed it); traces of earlier sequences belong to proposals a leadership change
        lost, and go unsent."""
        held = self._held_traces
        for s in [s for s in held if s <= seq]:
            trace = held.pop(s)
            if s == seq and mine:
                trace.release(subject, nointerest, error)

    def drain(self) -> None:
        """Nothing in flight any more: the publishes that waited are checked now, in order
        (one that must wait again keeps the rest behind it)."""
        rep = self.replica
        if rep is None or not rep.leading or rep.inflight or not rep.waiting:
            return
        if rep.group.transferring():
            return  # the group's check drains them if the transfer fails
        items = list(rep.waiting)
        rep.waiting.clear()
        for subject_b, reply, hdr, data in items:
            if rep.waiting or not rep.leading:
                rep.waiting.append((subject_b, reply, hdr, data))
            else:
                self.process(subject_b, reply, hdr, data)
        if rep.barriers and not rep.waiting:
            rep.release()  # (those that waited may all have been answered, none proposed)

    def when_committed(self, done: Callable[[], None]) -> None:
        """Run ``done`` once what this stream took so far is stored: at once standalone;
        on a replicated stream's leader once it has committed (``Replica.after_inflight``),
        never on a replica that stopped leading."""
        rep = self.replica
        if rep is None:
            done()
        elif rep.leading:
            rep.after_inflight(done)

    def notify_consumers(self, seq: int, subject: str) -> None:
        """A message was stored at ``seq``: wake the consumers that may want it. With
        interest retention a message no consumer wants is not kept."""
        for c in list(self.consumers.values()):
            c.on_stored(seq, subject)
        if self.cfg.retention == _INTEREST:
            self._check_interest(seq, subject)

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
                self._dedup_oldest = 0
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
        self.ctx.send(dest.encode(), b"" if headers_only else data, block)

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
            exceeded = self.ctx.storage_exceeded(self.cfg.storage == _MEMORY, subject, hdr, data)
            if exceeded is not None:
                answer = exceeded()
        if not self.cfg.no_ack:
            self._reply(reply, self._ack_err(answer))

    def _check_dup(self, msg_id: str) -> int | None:
        window = self.cfg.duplicate_window
        if window <= 0:
            return None
        now = self._now_ns()
        d = self._dedup
        if now - self._dedup_oldest > window:
            # Prune from the oldest end; entries are in arrival order. (While the oldest
            # is in the window, the loop would stop at it at once.)
            oldest = 0
            while d:
                k, (_s, ts) = next(iter(d.items()))
                if now - ts <= window:
                    oldest = ts
                    break
                del d[k]
            self._dedup_oldest = oldest
        hit = d.get(msg_id)
        return hit[0] if hit is not None else None

    def rebuild_dedupe(self, now_ns: int) -> int:
        """Refill the Nats-Msg-Id window from the stored messages after a restart
        (nats-server ``rebuildDedupe``): only the messages stored within
        ``duplicate_window`` of ``now_ns`` are read, found by time, so a long stream with a
        short window costs a binary search and the window's messages. Entries keep their
        stored timestamps, so they leave the window when they would have without the
        restart. The id of the last message is restored too (Nats-Expected-Last-Msg-Id)
        when that message is in the window. Returns the number of messages with headers read."""
        window = self.cfg.duplicate_window
        if window <= 0:
            return 0
        store = self.store
        last = store.state().last_seq
        seq = seq_from_time(store, now_ns - window)
        d = self._dedup
        n = 0
        while 0 < seq <= last:
            # (messages without headers carry no id: the store passes over them unread)
            batch, seq = store.load_with_headers(seq, _REBUILD_BATCH)
            for m in batch:
                msg_id = msg_id_of(m.hdr) if m.hdr else ""
                if msg_id:
                    # A later message with the same id replaces the earlier entry, as
                    # nats-server's map does; keep arrival order for pruning.
                    d.pop(msg_id, None)
                    d[msg_id] = (m.seq, m.ts)
                if m.seq == last:
                    self._last_msg_id = msg_id
            n += len(batch)
        self._dedup_oldest = 0  # (an entry replaced above may have been the oldest)
        return n

    # ------------------------------------------------------------------ expiry
    def expire(self, now: int) -> None:
        """Apply max_age and per-message TTLs as of ``now`` (wall ns); the engine calls
        this for every stream on its expiry timer. Stores only know "as of now"."""
        cfg = self.cfg
        if cfg.max_age <= 0 and not cfg.allow_msg_ttl:
            return
        if cfg.subject_delete_marker_ttl > 0:
            emptied: list[StoredMsg] = []
            self.store.expire(now, emptied)
            self._place_delete_markers(emptied)
        else:
            self.store.expire(now)

    def _place_delete_markers(self, emptied: list[StoredMsg]) -> None:
        """Subject delete markers (nats-server 2.15): when max_age or a message's TTL removed
        the last message on a subject, an empty message takes its place on that subject
        with ``Nats-Marker-Reason: MaxAge``, ``Nats-TTL: <subject_delete_marker_ttl>`` and
        ``Nats-Rollup: sub``. It is stored through the publish path (no ack, not seen by
        core subscribers) and expires by its own TTL without leaving another marker.
        Removals by the API, purges and max_msgs/max_bytes limits leave no marker."""
        ttl = self.cfg.subject_delete_marker_ttl // 1_000_000_000
        if not emptied or ttl <= 0:
            return
        if self.replica is not None and not self.replica.leading:
            return  # the leader places them, through the group
        hdr = marker_header(ttl)
        for m in emptied:
            if m.hdr and is_marker(m.hdr):
                continue  # a marker that expires is not replaced by another
            if self.store.load_last_msg(m.subject) is not None:
                continue
            self.process(m.subject.encode(), None, hdr, b"")

    # ------------------------------------------------------------------ mirror
    def _stop_mirror(self, retire: bool = False) -> None:
        """``retire``: for good (deleted, promoted), not for a shutdown or a new leader."""
        # (a replicated mirror's replica that goes on as a current follower answers again:
        # the cluster layer's _serve_reads)
        self.serve_origin_direct(False)
        if self.mirror is not None:
            if self._serving_origin:
                self.ctx.serve_mirror_direct(self.mirror.source.name, self, False)
                self._serving_origin = False
            if retire:
                self.mirror.retire()
            else:
                self.mirror.stop()
            self.mirror = None

    def last_seq(self) -> int:
        """The last sequence stored, or on a replicated stream's leader proposed."""
        rep = self.replica
        if rep is not None and rep.leading:
            return rep.clseq
        return self.store.last_seq()

    def never_written(self) -> bool:
        st = self.store.state()
        return st.msgs == 0 and st.last_seq == 0 and self.last_seq() == 0

    def mirror_align(self, delivered: int) -> None:
        if self.replica is not None:
            return  # (the next mirrored entry's sequence leaves the gap on every replica)
        store = self.store
        last = store.last_seq()
        if delivered <= last:
            return
        if store.state().msgs == 0:
            store.compact(delivered + 1)  # (its first sequence moves up)
        else:
            store.skip_msgs(last + 1, delivered - last)
        self._mirrored_flush()

    def mirror_skip(self, first: int, last: int) -> None:
        if self.replica is not None:
            return  # (as in mirror_align)
        if last >= first and first == self.store.last_seq() + 1:
            self.store.skip_msgs(first, last - first + 1)

    def mirror_store(self, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int) -> bool:
        """A mirrored message, stored at its origin sequence and time (nats-server's
        ``processJetStreamMsg`` for a mirror: no duplicate window, the stream's own limits,
        republish and retention). A replicated stream's leader proposes it at that
        sequence and time."""
        rep = self.replica
        if rep is not None:
            return self._propose_mirrored(rep, subject, hdr, data, seq, ts)
        store = self.store
        last = store.last_seq()
        if seq != last + 1:
            if seq <= last or store.state().msgs != 0:
                return False
            store.compact(seq)  # an empty mirror starts where its origin's messages do
        rp_last = 0
        if self._republish is not None:
            prev = store.load_last_msg(subject)
            rp_last = prev.seq if prev is not None else 0
        try:
            store.store_raw(subject, hdr, data, seq, ts)
        except StoreError as err:
            log.warning("stream %s: mirrored message %d not stored: %s", self.name, seq, err)
            return True  # (lost, as nats-server loses it: the next one does not follow)
        if self._republish is not None:
            self._do_republish(subject, seq, ts, hdr, data, rp_last)
        if self.cfg.retention == _INTEREST and not self.consumer_count:
            store.remove_msg(seq)
        self._mirrored_flush()
        if self.consumers:
            self.notify_consumers(seq, subject)
        return True

    def _propose_mirrored(
        self, rep: Replica, subject: str, hdr: bytes | None, data: bytes, seq: int, ts: int
    ) -> bool:
        if not rep.leading or seq <= rep.clseq or not rep.group.proposable():
            return False
        entry = encode_msg(rep.node_id, seq, ts, 0, subject, None, hdr, "", "", data)
        if not rep.group.propose(entry):
            return False
        rep.clseq = seq
        rep.inflight += 1
        return True

    def _mirrored_flush(self) -> None:
        if self.cfg.storage != _MEMORY:
            # written out and synced on the committer's timer, as a replica's applies
            self._committer.add_replicated(self.store)

    def mirror_caught_up(self) -> None:
        if not self.cfg.mirror_direct or self.mirror is None:
            return
        if self.ctx.clustered:
            if not self.origin_subs:
                self.serve_origin_direct(True)
        elif not self._serving_origin:
            # (standalone: the API's subscription picks among the origin and its mirrors)
            self._serving_origin = True
            self.ctx.serve_mirror_direct(self.mirror.source.name, self, True)

    # ------------------------------------------------------------------ sources
    def _start_sources(self) -> None:
        """Every source's feed, placed where the stream's messages say it is."""
        self._feeding = True
        feeds = [self._new_feed(src) for src in self.cfg.sources]
        recover_positions(self.store, feeds)
        self.sources = {f.iname: f for f in feeds}
        for f in feeds:
            f.start()

    def _new_feed(self, src: StreamSource) -> SourceFeed:
        # nats-server's createSourcingConsumerHash: an origin named by several sources
        # tells them apart by their index names
        ident = self._stable_hash()
        if sum(1 for o in self.cfg.sources if o.name == src.name) > 1:
            ident = f"{ident} {iname_of(src)}"
        return SourceFeed(self, src, self.sublist, self.scheduler, self.clock,
                          "JS_SRC_" + get_hash(ident), self._feed_metadata("src"))  # fmt: skip

    def _stable_hash(self) -> str:
        """nats-server's createStableConsumerHash: this stream, its account, its domain."""
        ident = f"{self.name} {self.ctx.account_name}"
        if self._domain:
            ident += " " + self._domain
        return get_hash(ident)

    def _feed_metadata(self, kind: str) -> dict[str, str]:
        """The metadata of a mirror's (``kind`` "mirror") or source's ("src") consumer."""
        out = {f"_nats.{kind}.stream": self.name, f"_nats.{kind}.acc": self.ctx.account_name}
        if self._domain:
            out[f"_nats.{kind}.domain"] = self._domain
        return out

    def _update_sources(self) -> None:
        """An update's sources (nats-server's, by iname): a new one starts where the
        stream's messages say it is, a removed one stops, the others run on."""
        wanted = {iname_of(src): src for src in self.cfg.sources}
        for iname in [i for i in self.sources if i not in wanted]:
            self.sources.pop(iname).retire()
        added = [self._new_feed(src) for i, src in wanted.items() if i not in self.sources]
        recover_positions(self.store, added)
        for f in added:
            self.sources[f.iname] = f
            f.start()
        if not self.sources:
            self._feeding = False

    def _stop_sources(self, retire: bool = False) -> None:
        for f in self.sources.values():
            if retire:
                f.retire()
            else:
                f.stop()
        self.sources = {}
        self._feeding = False

    def identity(self) -> str:
        """nats-server 2.15's stream identity: a hash of the creation time (the same on
        every replica), which tells a source that its origin was deleted and made again."""
        return get_hash(rfc3339(self.created_ns))

    def source_start_state(self) -> tuple[int, int]:
        st = self.store.state()
        return st.first_seq, st.last_ts

    def source_store(self, subject: str, hdr: bytes, data: bytes, plain: bool) -> int:
        """A sourced message, published as nats-server's ``processJetStreamMsg`` does with
        ``sourced``: the stream's own checks, limits and duplicate window, but its TTL,
        rollup and schedule headers taken as they come, and its Nats-Stream-Source kept.
        A replicated stream's leader proposes it (or lets it wait its turn)."""
        rep = self.replica
        before = rep.clseq if rep is not None else 0
        waiting = len(rep.waiting) if rep is not None else 0
        self._sourced_plain = plain
        try:
            answers = self._source_process(subject.encode(), hdr, data)
        finally:
            self._sourced_plain = False
        for a in answers:
            if a.startswith(b'{"error"'):
                return SOURCED_FAILED
        if rep is not None and not answers and rep.clseq == before and len(rep.waiting) == waiting:
            return SOURCED_FAILED  # the group did not take it (leadership moving)
        return SOURCED_OK

    def _source_process(self, subject_b: bytes, hdr: bytes, data: bytes) -> list[bytes]:
        """``_process`` for a sourced message: what it was answered (errors, duplicates;
        nothing when it was stored, proposed or left waiting)."""
        answers = self._sourced_answer
        answers.clear()
        cfg = self.cfg
        rep = self.replica
        if rep is not None:
            if not rep.leading:
                answers.append(self._ack_err(E.JSClusterNotLeaderErr()))
                return answers
            if (
                rep.waiting
                or not rep.group.proposable()
                or (rep.inflight and self._must_wait(rep, hdr))
            ):
                rep.waiting.append((subject_b, SOURCED_REPLY, hdr, data))
                return answers
        if cfg.sealed:
            answers.append(self._ack_err(E.JSStreamSealedErr()))
            return answers
        if cfg.max_msg_size >= 0 and len(data) + len(hdr) > cfg.max_msg_size:
            answers.append(self._ack_err(E.JSStreamMessageExceedsMaximumErr()))
            return answers
        subject = subject_b.decode(errors="replace")
        if self._transform is not None:
            subject = self._transform.apply(subject) or subject
        self._fast_answer = answers
        self._sourcing = True
        try:
            self._publish(rep, subject.encode(), subject, None, hdr, data)
        finally:
            self._sourcing = False
            self._fast_answer = None
        return answers

    def _sources_info(self) -> list[dict[str, Any]]:
        return [f.info() for f in self.sources.values()]

    # ------------------------------------------------------------------ consumers
    def attach(self, c: StreamListener) -> None:
        """A consumer starts listening. With the first one the stream subscribes to its
        store's updates, through which consumers hear of removed messages (limits,
        deletes, expiry), like nats-server's ``decStreamPending``."""
        if not self.consumers:
            self.store.register_updates(self._on_store_update)
        self.consumers[c.name] = c
        self._count_consumers()

    def detach(self, c: StreamListener) -> None:
        if self.consumers.get(c.name) is c:
            del self.consumers[c.name]
        self._count_consumers()
        if not self.consumers:
            self.store.register_updates(None)

    def _count_consumers(self) -> None:
        self.consumer_count = len(self.consumers)
        # (a mirror's or a source's direct consumer is neither listed nor counted, as
        # nats-server keeps it out of the store's count and getPublicConsumers)
        self.listed_consumers = sum(1 for c in self.consumers.values() if not c.direct)

    def _on_store_update(self, msgs: int, nbytes: int, seq: int, subject: str) -> None:
        if msgs >= 0:
            return
        consumers = list(self.consumers.values())
        if seq:
            for c in consumers:
                c.on_removed(seq, subject)
        else:
            # A bulk removal (purge, compact, truncate): counts are recomputed.
            for c in consumers:
                c.on_bulk_removed()

    # ------------------------------------------------------------------ retention
    def ack_msg(self, seq: int, by: StreamListener | None) -> bool:
        """``ackMsg``: consumer ``by`` acked ``seq``; remove it when retention says so (a
        workqueue at once, interest once no other consumer still needs it)."""
        retention = self.cfg.retention
        if retention == _LIMITS or self.retention_views is not None:
            return False
        store = self.store
        if retention == _WORKQUEUE:
            return store.remove_msg(seq)
        m = store.load_msg(seq)
        if m is None:
            return False
        for o in self.consumers.values():
            if o is not by and o.need_ack(seq, m.subject):
                return False
        return store.remove_msg(seq)

    def _check_interest(self, seq: int, subject: str) -> None:
        """Interest retention: a message no consumer is interested in is not kept."""
        for c in self._holders():
            if c.need_ack(seq, subject):
                return
        self.store.remove_msg(seq)

    def _holders(self) -> list[RetentionView]:
        views = self.retention_views
        return list(self.consumers.values()) if views is None else views()

    def cleanup_no_interest(self, floor: int, ignore: StreamListener | None) -> None:
        """``cleanupNoInterestMessages``: after a consumer of an interest stream went away
        (or changed its filters or cursor), drop the messages above ``floor`` (its ack floor)
        nobody needs any more; ``ignore`` is a consumer whose interest no longer counts."""
        store = self.store
        holders = [o for o in self._holders() if ignore is None or o.name != ignore.name]
        if not holders and not self.consumers:
            store.purge()
            return
        st = store.state()
        # replicated: from the start, as ``floor`` is the caller's live state, which only
        # the leader has
        seq = max(floor if self.retention_views is None else 0, st.first_seq)
        while True:
            m = store.load_next_msg("", seq)
            if m is None:
                break
            seq = m.seq
            if not any(o.need_ack(seq, m.subject) for o in holders):
                store.remove_msg(seq)
            seq += 1

    def partition_unique(self, name: str, filters: list[str]) -> bool:
        """``partitionUnique``: no other consumer of a workqueue stream overlaps
        ``filters``."""
        for part in filters:
            for n, o in self.consumers.items():
                if n == name:
                    continue
                if o.filter_all:
                    return False
                for f in o.filters:
                    if subject_is_subset_match(part, f) or subject_is_subset_match(f, part):
                        return False
        return True

    # ------------------------------------------------------------------ purge and stop
    def purge(self, subject: str, seq: int, keep: int) -> int:
        """``stream.purge``: remove messages (all, or by subject / below ``seq`` / all but
        ``keep``) and move each affected consumer past them. Returns how many went."""
        store = self.store
        if not subject and not seq and not keep:
            purged = store.purge()
        else:
            purged = store.purge_ex(subject, seq, keep)
        if not self.consumers:
            return purged
        st = store.state()
        fseq, lseq = st.first_seq, st.last_seq
        if subject:
            fs = store.filtered_state(fseq, subject)
            fseq = fs.first
        for c in list(self.consumers.values()):
            start = fseq
            do = not subject or _equal_or_subset(c, subject)
            wider = False
            if not do and subject and _filtered_match(c, subject):
                do, wider = True, True
                start = st.first_seq
            if do:
                c.purge(start, lseq, wider)
        return purged

    def stop(self) -> None:
        """Server shutdown: consumers save their state and stop, the store closes."""
        self._stop_mirror()
        self._stop_sources()
        if self._batches is not None:
            self._batches.clear()
        if self._fast_batches is not None:
            self._fast_batches.clear()  # (their server-wide slots back)
        if self._schedules is not None:
            self._schedules.stop()
        self._held_traces.clear()
        for c in list(self.consumers.values()):
            c.stop(deleted=False)
        self.unsubscribe()
        self._subscribed = False
        self.serve_direct(False)
        try:
            self.store.stop()
        except Exception as e:
            log.error("stream %s: stop failed: %s", self.name, e)

    def delete(self) -> None:
        """The stream is being deleted: it stops taking messages and its consumers go
        with it (no advisories). The engine then drops its files."""
        self._stop_mirror(retire=True)
        self._stop_sources(retire=True)
        if self._batches is not None:
            self._batches.clear()
        if self._fast_batches is not None:
            self._fast_batches.clear()  # (their server-wide slots back)
        if self._schedules is not None:
            self._schedules.stop()
        self._held_traces.clear()
        self.unsubscribe()
        self._subscribed = False
        self.serve_direct(False)
        for c in list(self.consumers.values()):
            c.stop(deleted=True, advisory=False)
        self.consumers.clear()
        self.consumer_count = self.listed_consumers = 0
        self.store.register_updates(None)
        self._committer.on_failure.pop(self.store, None)

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
        out["consumer_count"] = self.listed_consumers
        return out

    def info_json(self, with_deleted: bool = False, subjects_filter: str = "") -> dict[str, Any]:
        return {
            # nats-server adds its version and API level to every config it returns.
            "config": self.cfg.to_json(server_version=SERVER_VERSION, api_level=API_LEVEL),
            "created": rfc3339(self.created_ns),
            "state": self.state_json(with_deleted, subjects_filter),
            **({"mirror": self.mirror.info()} if self.mirror is not None else {}),
            **({"sources": self._sources_info()} if self.sources else {}),
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


def _equal_or_subset(c: StreamListener, subject: str) -> bool:
    """``isEqualOrSubsetMatch``: a filter equal to, or within, the purged subject."""
    return any(f == subject or subject_is_subset_match(f, subject) for f in c.filters)


def _filtered_match(c: StreamListener, subject: str) -> bool:
    """``isFilteredMatch`` of the purge subject against the consumer's filters."""
    if c.filter_all:
        return True
    return any(f == subject or subject_matches(subject, f) for f in c.filters) or any(
        subject_is_subset_match(subject, f) for f in c.filters
    )
