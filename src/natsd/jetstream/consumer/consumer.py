"""A JetStream consumer: its cursor, pending acks, redeliveries and the delivery loop.

Modelled on nats-server's ``consumer.go``. State, as nats-server keeps it:

* ``sseq`` / ``dseq``: the next stream sequence to look at and the next consumer (delivery)
  sequence; ``adflr`` / ``asflr``: the ack floor (consumer / stream sequence);
* ``pending``: stream seq -> [consumer seq, delivery time ns] of delivered, unacked messages;
* ``rdc``: stream seq -> redelivery count; ``rdq``: sequences queued for redelivery;
* the *stored* view (``st_*``), what nats-server's consumer store reports in CONSUMER.INFO and
  persists: delivered and ack-floor sequence pairs moved by the same rules as the store's
  ``UpdateDelivered`` / ``UpdateAcks``.

Delivery: ``_signal()`` schedules ``_run()`` on the loop; ``_run`` delivers while someone can
take messages (a waiting pull request, or an active push subscriber that flow control does
not hold back), a bounded number per turn. Acks arrive on an internal subscription on
``$JS.ACK.<stream>.<consumer>.>``; pull requests through the API subscription
(``pull``); push specifics (interest, heartbeats, flow control) are in
``push``. Time and timers come from the stream's ``Clock`` and ``Scheduler``
(``now_ns`` / ``mono`` / ``sched``), so a test drives them on a virtual clock. Ownership: the
event loop owns every consumer; nothing here blocks except the small state writes of file
consumers.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from natsd.core.filters import match_tokens
from natsd.core.scheduler import Cancellable, Scheduler
from natsd.jetstream.config.consumer_config import (
    DELETE_WAIT_DEFAULT,
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    rfc3339_to_ns,
)
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer import ack, pull, push
from natsd.jetstream.consumer import advisory as adv
from natsd.jetstream.consumer import priority as prio
from natsd.jetstream.consumer import seq as cseq
from natsd.jetstream.consumer import state as cstate
from natsd.jetstream.stream.stream import Stream
from natsd.router.publish import publish, publish_as
from natsd.router.subscription import Subscription
from natsd.storage.store import StoredMsg

__all__ = ["Consumer"]

log: Final = logging.getLogger("natsd")

ACK_WAIT_DELAY: Final = ack.ACK_WAIT_DELAY
RUN_BUDGET: Final = 256  # deliveries per loop turn before yielding
STATE_FLUSH_DELAY: Final = 0.1  # seconds between a state change and its write (file consumers)
TERM_UNACKED_LIMITS: Final = "Unacknowledged message was deleted"

# Policy members compared per message, bound once: on Python 3.11 `AckPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_ACK_NONE: Final = AckPolicy.NONE
_ACK_EXPLICIT: Final = AckPolicy.EXPLICIT
_PINNED_CLIENT: Final = PriorityPolicy.PINNED_CLIENT
_LIMITS: Final = RetentionPolicy.LIMITS
_INTEREST: Final = RetentionPolicy.INTEREST


class Consumer:
    def __init__(
        self,
        stream: Stream,
        name: str,
        cfg: ConsumerConfig,
        created_ns: int,
        persist: bool,
    ) -> None:
        self.stream = stream
        self.name = name
        self.cfg = cfg
        self.created_ns = created_ns
        self.persist = persist  # file stream and not mem_storage
        self.closed = False
        # The clocks and the scheduler of the stream (its engine's), bound once: the
        # wall clock is read for every delivery and ack.
        self.sched: Scheduler = stream.scheduler
        self.now_ns: Callable[[], int] = stream.clock.time_ns
        self.mono: Callable[[], float] = stream.clock.monotonic
        self._sublist = stream.sublist

        # Cursor and ack state (see module docstring).
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.pending: dict[int, list[int]] = {}
        self.rdc: dict[int, int] = {}
        self.rdq: deque[int] = deque()
        self.rdqi: set[int] = set()
        self.lss: list[int] | None = None  # last-per-subject start list
        self.lss_resume = 0
        self.npc = 0  # num pending (messages matching, at or after sseq)
        self.npf = 0  # num pending floor: sequences <= npf are already counted
        # Stored view.
        self.st_dc = 0
        self.st_ds = 0
        self.st_fc = 0
        self.st_fs = 0
        self.st_pending: dict[int, int] = {}
        self.ldt = 0  # last delivery (ns)
        self.lat = 0  # last ack (ns)

        self.maxp = cfg.max_ack_pending if cfg.ack_policy != _ACK_NONE else 0
        self.maxdc = max(cfg.max_deliver, 0)
        self.sfreq = 0
        self.dthresh = 0.0

        # Pull.
        self.waiting: pull.WaitQueue | None = None
        self.lwqic = 0.0  # last processWaiting call (monotonic)
        # Push.
        self.active = False
        self.dsubj = cfg.deliver_subject.encode()
        self.pbytes = 0
        self.maxpb = 0
        self.pblimit = 0
        self.fcsz = 0
        self.fcid: bytes = b""
        self.last_send = 0.0  # monotonic time of the last push send (heartbeats)
        # Priority groups (priority.py).
        self.pin_id = ""
        self.pinned_ts = 0
        self.pin_tmr: Cancellable | None = None

        # Delivery loop.
        self._scheduled = False
        self._held: tuple[StoredMsg, int] | None = None
        self._held_at = 0.0  # when the held message may go (monotonic)
        self.replay = cfg.replay_policy == ReplayPolicy.ORIGINAL
        self._replay_lseq = 0
        self._replay_lts = 0
        self._rl_rate = 0.0
        self._rl_burst = 0.0
        self._rl_tokens = 0.0
        self._rl_ts = 0.0

        # Timers.
        self._ptmr: Cancellable | None = None
        self._ptmr_end = 0.0
        self.dtmr: Cancellable | None = None
        self.wtmr: Cancellable | None = None
        self.wtmr_at = 0.0
        self.hbtmr: Cancellable | None = None
        self.itmr: Cancellable | None = None
        self.itmr_delay = 0.0
        self._uptmr: Cancellable | None = None
        self._run_tmr: Cancellable | None = None
        self._flush_tmr: Cancellable | None = None
        self._dirty = False
        # Ack-sync replies waiting for the state save that records their acks.
        self._sync_replies: list[bytes] = []

        self._ack_sub: Subscription | None = None
        self.fc_sub: Subscription | None = None
        name_b = name.encode()
        stream_b = stream.name.encode()
        self._ack_pre = b"$JS.ACK." + stream_b + b"." + name_b + b"."
        self.fc_pre = "$JS.FC." + stream.name + "." + name + "."

        self._set_filters(cfg)
        self._apply_runtime_config(cfg)

    # ------------------------------------------------------------------ config
    def _set_filters(self, cfg: ConsumerConfig) -> None:
        filters = cfg.filters
        self.filters = filters
        self.filter_all = not filters
        self._flit = {f for f in filters if "*" not in f and ">" not in f}
        self._fwild = [f.split(".") for f in filters if f not in self._flit]

    def _apply_runtime_config(self, cfg: ConsumerConfig) -> None:
        self.maxp = cfg.max_ack_pending if cfg.ack_policy != _ACK_NONE else 0
        self.maxdc = max(cfg.max_deliver, 0)
        if cfg.sample_freq:
            s = cfg.sample_freq.rstrip("%")
            try:
                self.sfreq = int(s)
            except ValueError:
                self.sfreq = 0
        else:
            self.sfreq = 0
        self._update_inactive_threshold(cfg)
        if cfg.rate_limit_bps:
            self._rl_rate = cfg.rate_limit_bps / 8.0
            burst = self.stream.cfg.max_msg_size
            self._rl_burst = float(burst if burst > 0 else 1024 * 1024)
            self._rl_tokens = self._rl_burst
            self._rl_ts = self.mono()
        else:
            self._rl_rate = 0.0

    def _update_inactive_threshold(self, cfg: ConsumerConfig) -> None:
        """``updateInactiveThreshold``: ephemerals always get one (5s default, stamped into
        the config); pull consumers get up to a second of jitter."""
        jitter = 0.1 + random.random() * 0.9
        if not cfg.durable_name and cfg.inactive_threshold <= 0:
            self.dthresh = DELETE_WAIT_DEFAULT / 1e9 + jitter
            cfg.inactive_threshold = DELETE_WAIT_DEFAULT
        elif cfg.inactive_threshold > 0:
            base = cfg.inactive_threshold / 1e9
            self.dthresh = base + jitter if not cfg.deliver_subject else base
        else:
            self.dthresh = 0.0

    @property
    def retention(self) -> RetentionPolicy:
        """The stream's retention policy (a stream update may change limits/interest)."""
        return self.stream.cfg.retention

    @property
    def is_pull(self) -> bool:
        return not self.cfg.deliver_subject

    def matches(self, subject: str) -> bool:
        if self.filter_all or subject in self._flit:
            return True
        return any(match_tokens(subject, ft) for ft in self._fwild)

    def paused_until(self) -> int:
        return rfc3339_to_ns(self.cfg.pause_until)

    # ------------------------------------------------------------------ lifecycle
    def start(self, state: dict[str, Any] | None) -> None:
        """Pick the starting sequence (or restore saved state) and subscribe."""
        if state is not None:
            cstate.apply_state(self, state)
        else:
            self._select_starting_seq()
        self._stream_num_pending()
        subj = self._ack_pre + b">"
        if self.cfg.ack_policy != _ACK_NONE:
            self._ack_sub = Subscription(
                subj, None, b"ack-" + self.name.encode(), callback=self._on_ack
            )
            self._sublist.insert(self._ack_sub)
        if self.is_pull:
            self.waiting = pull.WaitQueue(self.cfg.max_waiting, self.mono())
        else:
            push.start(self)
        if self.dthresh > 0 and self.is_pull:
            self.dtmr = self.sched.call_later(self.dthresh, self._delete_not_active)
        self._update_pause_timer()
        if self.replay:
            self._replay_lseq = self.stream.store.state().last_seq
        if self.pending:
            delay = 0.5 + random.random()
            ack.reset_ptmr(self, min(delay, (self.cfg.ack_wait + ACK_WAIT_DELAY) / 1e9))
        if state is None:
            self.mark_dirty()
        self._signal()

    def stop(self, *, deleted: bool, advisory: bool = True) -> None:
        """Stop delivering; ``deleted`` also answers waiting pulls with ``409 Consumer
        Deleted``, sends the delete advisory and drops the consumer's files."""
        if self.closed:
            return
        if deleted:
            if advisory:
                adv.consumer_action(self, "delete")
            if self.waiting is not None:
                for wr in list(self.waiting.q):
                    self.send(wr.reply, b"", pull.CONSUMER_DELETED)
        elif self._dirty:
            self.flush_state()
        self.closed = True
        self.waiting = None
        for sub in (self._ack_sub, self.fc_sub):
            if sub is not None:
                self._sublist.remove(sub)
        self._ack_sub = self.fc_sub = None
        for t in (
            self._ptmr,
            self.dtmr,
            self.wtmr,
            self.hbtmr,
            self.itmr,
            self._uptmr,
            self._run_tmr,
            self._flush_tmr,
            self.pin_tmr,
        ):
            if t is not None:
                t.cancel()
        self._ptmr = self.dtmr = self.wtmr = self.hbtmr = self.itmr = None
        self._uptmr = self._run_tmr = self._flush_tmr = self.pin_tmr = None

    def delete(self, advisory: bool = True) -> None:
        """Delete this consumer: stop it (``409 Consumer Deleted`` to waiting pulls, the
        delete advisory), leave the stream, forget its files, and with interest retention
        drop what only it still held."""
        self.stop(deleted=True, advisory=advisory)
        stream = self.stream
        stream.detach(self)
        if self.persist:
            ctx = stream.ctx
            try:
                ctx.catalog.remove_consumer(ctx.account_name, stream.name, self.name, "file")
            except OSError as e:
                log.error("consumer %s > %s: cannot remove files: %s", stream.name, self.name, e)
        if stream.cfg.retention == _INTEREST:
            stream.cleanup_no_interest(self.asflr, self)

    def _select_starting_seq(self) -> None:
        cseq.select_starting_seq(self)

    def reset_to(self, seq: int) -> int:
        return cseq.reset_to(self, seq)

    def purge(self, sseq: int, slseq: int, wider: bool) -> None:
        cseq.purge(self, sseq, slseq, wider)

    # ------------------------------------------------------------------ num pending
    def _calc_num_pending(self) -> int:
        store = self.stream.store
        lps = self.cfg.deliver_policy == DeliverPolicy.LAST_PER_SUBJECT
        if self.filter_all:
            return store.num_pending(self.sseq, "", lps)
        return sum(store.num_pending(self.sseq, f, lps) for f in self.filters)

    def on_bulk_removed(self) -> None:
        """A purge, compact or truncate of the store: recount what is pending."""
        self.npc = self._calc_num_pending()

    def _stream_num_pending(self) -> None:
        self.npc = self._calc_num_pending()
        self.npf = self.stream.store.state().last_seq

    def num_pending(self) -> int:
        """``checkNumPending``: the running count, kept within what the stream holds."""
        st = self.stream.store.state()
        if self.sseq > st.last_seq:
            self.npc = 0
        elif self.npc > 0:
            self.npc = min(self.npc, st.msgs, st.last_seq - self.sseq + 1)
        return max(self.npc, 0)

    # ------------------------------------------------------------------ stream hooks
    def on_stored(self, seq: int, subject: str) -> None:
        """The stream stored a message (hot path: called for every message)."""
        if self.closed or not (self.filter_all or self.matches(subject)):
            return
        if seq > self.npf:
            self.npc += 1
        if seq < self.sseq:
            return
        if (self.waiting is not None and self.waiting.q) or (
            self.active and self.cfg.deliver_subject
        ):
            self._signal()

    def on_removed(self, seq: int, subject: str) -> None:
        """``decStreamPending``: a message left the stream (limits, delete, retention)."""
        if self.closed:
            return
        if seq >= self.sseq and self.matches(subject):
            self.npc -= 1
        p = self.pending.get(seq)
        if p is not None:
            dc = self._delivery_count(seq)
            self.sched.call_soon(self._term_removed, seq, p[0], dc)
        elif seq in self.rdc:
            del self.rdc[seq]
            self.mark_dirty()

    def _term_removed(self, seq: int, dseq: int, dc: int) -> None:
        if not self.closed and seq in self.pending:
            self.process_term(seq, dseq, dc, TERM_UNACKED_LIMITS, b"")

    # ------------------------------------------------------------------ delivery loop
    def _signal(self) -> None:
        if not self._scheduled and not self.closed:
            self._scheduled = True
            self.sched.call_soon(self._run)

    def is_paused(self) -> bool:
        pu = self.cfg.pause_until
        return pu is not None and rfc3339_to_ns(pu) > self.now_ns()

    def _run(self) -> None:
        self._scheduled = False
        if self.closed:
            return
        cfg = self.cfg
        is_push = bool(cfg.deliver_subject)
        if is_push and self.active and not push.has_interest(self):
            # nats-server drops delivery interest synchronously when the last subscriber on
            # the deliver subject goes; the watcher polls only once a second while bound, so
            # look before delivering rather than deliver to nobody (the message would count
            # as delivered and wait out ack_wait instead of staying pending).
            push.update_interest(self, False)
        blocked_by_max = False
        budget = RUN_BUDGET
        while True:
            if self.is_paused():
                break
            if is_push:
                if not self.active or (self.maxpb > 0 and self.pbytes > self.maxpb):
                    break
            elif self.waiting is None or not self.waiting.q:
                break
            if budget <= 0:
                self._signal()
                return
            budget -= 1
            held = self._held
            if held is not None:
                self._held = None
                m, dc = held
            else:
                got = self._get_next()
                if got is None:
                    blocked_by_max = self.maxp > 0 and len(self.pending) >= self.maxp
                    break
                m, dc = got
                if self.replay or self._rl_rate:
                    wait = self._pace(m)
                    if wait > 0:
                        self._held = (m, dc)
                        self._run_tmr = self.sched.call_later(wait, self._resume)
                        return
            if dc == 1:
                self.npc -= 1
            ack_reply = b"%s%d.%d.%d.%d.%d" % (
                self._ack_pre,
                dc,
                m.seq,
                self.dseq,
                m.ts,
                max(self.npc, 0),
            )
            hdr, data = m.hdr, m.data
            if cfg.headers_only:
                hdr, data = _headers_only(hdr, data)
            sz = len(m.subject) + len(ack_reply) + (len(hdr) if hdr else 0) + len(data)
            wrn = wrb = 0
            if is_push:
                dsubj = self.dsubj
            else:
                wr = pull.next_waiting(self, sz)
                if wr is None:
                    # Nobody can take it after all: put it back.
                    if dc == 1 and m.seq == self.sseq - 1:
                        self.sseq -= 1
                        self.npc += 1
                    elif m.seq not in self.rdqi:
                        self._dec_delivery_count(m.seq)
                        self._add_to_rdq(m.seq)
                    break
                dsubj = wr.reply
                wrn, wrb = wr.n, wr.b
                if cfg.priority_policy == _PINNED_CLIENT and self.pin_id:
                    hdr = prio.add_pin_header(hdr, self.pin_id)
                    sz = len(m.subject) + len(ack_reply) + len(hdr) + len(data)
                if wr.n > 0 and wr.hb:
                    wr.hbt = self.mono() + wr.hb
            self._deliver(dsubj, ack_reply, m, hdr, data, dc, sz)
            if wrn <= 0 and wrb > 0:
                self.send(dsubj, b"", pull.pending_status(409, "Batch Completed", wrn, wrb))
        # Nothing more to do now: expire / heartbeat waiting requests and arm timers.
        if self.replay and self.sseq > self._replay_lseq:
            self.replay = False
        if self.waiting is not None:
            pull.process_waiting(self, not blocked_by_max)
            pull.arm_waiting_timer(self)

    def _resume(self) -> None:
        self._run_tmr = None
        self._signal()

    def _pace(self, m: StoredMsg) -> float:
        """Seconds to hold ``m`` for replay-original timing and the rate limit."""
        wait = 0.0
        if self.replay:
            if self._replay_lts:
                d = (m.ts - self._replay_lts) / 1e9
                if d > 0.001:
                    wait = d
            self._replay_lts = m.ts
        if self._rl_rate:
            now = self.mono()
            self._rl_tokens = min(
                self._rl_burst, self._rl_tokens + (now - self._rl_ts) * self._rl_rate
            )
            self._rl_ts = now
            self._rl_tokens -= len(m.subject) + len(m.data) + (len(m.hdr) if m.hdr else 0)
            if self._rl_tokens < 0:
                wait = max(wait, -self._rl_tokens / self._rl_rate)
        return wait

    def _get_next(self) -> tuple[StoredMsg, int] | None:
        """``getNextMsg``: redeliveries first, then the next matching message."""
        store = self.stream.store
        while self.rdq:
            seq = self.rdq.popleft()
            self.rdqi.discard(seq)
            dc = self._inc_delivery_count(seq)
            if self.maxdc and dc > self.maxdc:
                if dc == self.maxdc + 1:
                    adv.max_deliveries(self, seq, dc - 1)
                p = self.pending.pop(seq, None)
                if p is not None:
                    ack.update_delivered(self, p[0], seq, dc, p[1])
                    ack.move_ack_floor(self, p[0], seq)
                continue
            m = store.load_msg(seq)
            if m is None:
                self._dec_delivery_count(seq)
                p = self.pending.get(seq)
                if p is not None:
                    self.process_term(seq, p[0], dc - 1, TERM_UNACKED_LIMITS, b"")
                continue
            return m, dc
        if self.maxp > 0 and len(self.pending) >= self.maxp:
            return None
        while self.lss:
            seq = self.lss.pop(0)
            if not self.lss:
                self.lss = None
                self.sseq = self.lss_resume
            else:
                self.sseq = seq
            self.sseq += 1
            m = store.load_msg(seq)
            if m is not None:
                return m, 1
        m = self._load_next(self.sseq)
        if m is None:
            last = store.state().last_seq
            if last >= self.sseq:
                self.sseq = last + 1
            return None
        self.sseq = m.seq + 1
        return m, 1

    def _load_next(self, start: int) -> StoredMsg | None:
        store = self.stream.store
        if self.filter_all:
            return store.load_next_msg("", start)
        if len(self.filters) == 1:
            return store.load_next_msg(self.filters[0], start)
        best: StoredMsg | None = None
        for f in self.filters:
            m = store.load_next_msg(f, start)
            if m is not None and (best is None or m.seq < best.seq):
                best = m
        return best

    def _deliver(
        self,
        dsubj: bytes,
        ack_reply: bytes,
        m: StoredMsg,
        hdr: bytes | None,
        data: bytes,
        dc: int,
        sz: int,
    ) -> None:
        dseq = self.dseq
        self.dseq += 1
        seq = m.seq
        ack.update_delivered(self, dseq, seq, dc, m.ts)
        ack_none = self.cfg.ack_policy == _ACK_NONE
        if ack_none:
            self.adflr, self.asflr = dseq, seq
        else:
            ack.track_pending(self, seq, dseq)
        n = publish_as(self._sublist, dsubj, m.subject.encode(), ack_reply, hdr, data)
        if self.cfg.deliver_subject:
            self.last_send = self.mono()
            if self.maxpb > 0:
                self.pbytes += sz
                push.maybe_flow_control(self, sz)
        elif self.dthresh > 0 and self.waiting is not None:
            self.waiting.last = self.mono()
        if n == 0:
            self._did_not_deliver(seq, dsubj)
        if ack_none and self.retention != _LIMITS:
            self.stream.ack_msg(seq, self)

    def _did_not_deliver(self, seq: int, dsubj: bytes) -> None:
        self._dec_delivery_count(seq)
        if self.cfg.deliver_subject:
            push.update_interest(self, push.has_interest(self))
        elif self.waiting is not None:
            pull.process_waiting(self, False)
            wr = self.waiting.find(dsubj)
            if wr is not None:
                wr.n += 1
                wr.d -= 1
            if seq in self.pending and seq not in self.rdqi:
                self._add_to_rdq(seq)
                if self.waiting.q:
                    self._signal()

    def send(self, subject: bytes, data: bytes, hdr: bytes | None = None) -> int:
        return publish(self._sublist, subject, None, hdr, data)

    # ------------------------------------------------------------------ redelivery
    def _delivery_count(self, seq: int) -> int:
        dc = self.rdc.get(seq, 0)
        return dc if dc >= 1 else 1

    def _inc_delivery_count(self, seq: int) -> int:
        n = self.rdc.get(seq, 0) + 1
        self.rdc[seq] = n
        return n + 1

    def _dec_delivery_count(self, seq: int) -> None:
        dc = self.rdc.get(seq)
        if dc is None:
            return
        if dc > 1:
            self.rdc[seq] = dc - 1
        else:
            del self.rdc[seq]

    def _add_to_rdq(self, seq: int) -> None:
        self.rdq.append(seq)
        self.rdqi.add(seq)

    def _remove_from_rdq(self, seq: int) -> None:
        if seq in self.rdqi:
            self.rdqi.discard(seq)
            try:
                self.rdq.remove(seq)
            except ValueError:
                pass

    # ------------------------------------------------------------------ acks (ack.py)
    def _on_ack(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        # Called from the router while it delivers a client's message: a failure here must
        # not take the client's connection down with it.
        try:
            ack.on_ack(self, sub, subject, reply, hdr, data)
        except Exception:
            log.exception("consumer %s > %s: ack %r failed", self.stream.name, self.name, subject)

    def process_ack(self, sseq: int, dseq: int, dc: int, reply: bytes, sample: bool) -> bool:
        return ack.process_ack(self, sseq, dseq, dc, reply, sample)

    def process_term(self, sseq: int, dseq: int, dc: int, reason: str, reply: bytes) -> bool:
        return ack.process_term(self, sseq, dseq, dc, reason, reply)

    def force_expire_pending(self) -> None:
        ack.force_expire_pending(self)

    # ------------------------------------------------------------------ info / state
    def info(self, *, versioned: bool = True) -> dict[str, Any]:
        return cstate.info(self, versioned=versioned)

    def mark_dirty(self) -> None:
        if self._dirty:
            return
        self._dirty = True
        if self.persist and not self.closed and self._flush_tmr is None:
            self._flush_tmr = self.sched.call_later(STATE_FLUSH_DELAY, self.flush_state)

    def flush_state(self) -> None:
        cstate.flush_state(self)

    def ack_reply(self, reply: bytes) -> None:
        """Answer an ack-sync. For a file consumer only once the state recording the ack
        is on disk (saved and directory-synced), so a confirmed ack never comes back
        after a crash; acks arriving in the same loop turn share one save."""
        if not self.persist:
            self.send(reply, b"")
            return
        if not self._sync_replies:
            self.sched.call_soon(self._flush_for_replies)
        self._sync_replies.append(reply)

    def _flush_for_replies(self) -> None:
        replies, self._sync_replies = self._sync_replies, []
        if self.closed or not cstate.flush_state(self, durable=True):
            return  # not recorded: no confirmation; the client's retry finds the state
        for r in replies:
            self.send(r, b"")

    # ------------------------------------------------------------------ retention
    def need_ack(self, sseq: int, subject: str) -> bool:
        """``needAck``: does this consumer still hold interest in ``sseq``?"""
        if not self.filter_all and not self.matches(subject):
            return False
        ap = self.cfg.ack_policy
        if ap == _ACK_EXPLICIT:
            need = sseq > self.asflr and (sseq >= self.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    # ------------------------------------------------------------------ inactivity
    def _suppress_deletion(self) -> None:
        if self.cfg.deliver_subject:
            if self.dtmr is not None:
                self.dtmr.cancel()
                self.dtmr = self.sched.call_later(self.dthresh, self._delete_not_active)
        elif self.waiting is not None:
            self.waiting.last = self.mono()

    def _delete_not_active(self) -> None:
        """``deleteNotActive``: remove an inactive consumer, unless it proved alive."""
        self.dtmr = None
        if self.closed:
            return
        if self.cfg.deliver_subject:
            if self.active:
                return
        else:
            wq = self.waiting
            assert wq is not None
            elapsed = self.mono() - wq.last
            if elapsed < self.dthresh:
                self.dtmr = self.sched.call_later(self.dthresh - elapsed, self._delete_not_active)
                return
            pull.process_waiting(self, True)
            if wq.q:
                self.dtmr = self.sched.call_later(self.dthresh, self._delete_not_active)
                return
            now = self.now_ns()
            delay = 0
            bo = self.cfg.backoff
            for seq, p in self.pending.items():
                if bo:
                    wait = bo[min(max(self.rdc.get(seq, 0), 0), len(bo) - 1)]
                else:
                    wait = self.cfg.ack_wait
                ts = p[1] + wait + ACK_WAIT_DELAY + int(self.dthresh * 1e9)
                if ts > now:
                    delay = max(delay, ts - now)
            if delay > 0:
                self.dtmr = self.sched.call_later(delay / 1e9, self._delete_not_active)
                return
        self.delete()

    # ------------------------------------------------------------------ pause
    def _update_pause_timer(self) -> None:
        if self._uptmr is not None:
            self._uptmr.cancel()
            self._uptmr = None
        until = self.paused_until()
        now = self.now_ns()
        if until > now:
            self._uptmr = self.sched.call_later((until - now) / 1e9, self._unpause)

    def _unpause(self) -> None:
        self._uptmr = None
        if self.closed:
            return
        adv.pause(self, False, self.cfg.pause_until or "")
        self._signal()

    def set_pause(self, pause_until: str | None) -> None:
        self.cfg.pause_until = pause_until
        self._update_pause_timer()
        self._signal()

    # ------------------------------------------------------------------ updates
    def update_config(self, cfg: ConsumerConfig) -> None:
        """Apply an allowed config update (``updateConfig``)."""
        old = self.cfg
        if cfg.deliver_subject != old.deliver_subject:
            push.change_deliver_subject(self, cfg.deliver_subject)
        if cfg.max_ack_pending != old.max_ack_pending:
            self._signal()
        if cfg.ack_wait != old.ack_wait and self._ptmr is not None:
            ack.reset_ptmr(self, 0.1)
        if cfg.inactive_threshold != old.inactive_threshold:
            if self.dtmr is not None:
                self.dtmr.cancel()
                self.dtmr = None
        refilter = cfg.filters != old.filters
        self.cfg = cfg
        self._apply_runtime_config(cfg)
        if cfg.inactive_threshold != old.inactive_threshold and self.dthresh > 0:
            self.dtmr = self.sched.call_later(self.dthresh, self._delete_not_active)
        if (cfg.pause_until or "") != (old.pause_until or ""):
            self._update_pause_timer()
        if refilter:
            self._set_filters(cfg)
            if self.retention == _INTEREST:
                self.stream.cleanup_no_interest(self.asflr, None)
            self._stream_num_pending()
        self.mark_dirty()
        self._signal()


def _headers_only(hdr: bytes | None, data: bytes) -> tuple[bytes, bytes]:
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + b"Nats-Msg-Size: %d\r\n\r\n" % len(data), b""
