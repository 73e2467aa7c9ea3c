"""A JetStream consumer: the composition of its parts, its cursor and its delivery loop.

Modelled on nats-server's ``consumer.go``. The consumer keeps only what every part shares:

* the :class:`~natsd.jetstream.consumer.shared.Cursor` (``sseq`` / ``dseq``, the next stream
  and delivery sequences, and ``npc``, the messages pending), written only here (the delivery
  loop, start, reset, purge, the stream hooks), and the last-per-subject start list;
* the config and the filters, and the lifecycle (``start``, ``stop``, ``delete``,
  ``update_config``).

Everything else belongs to a part that alone writes it and cancels its own timers in its
``stop()``:

=================  =====================================================================
``acks``           :class:`~natsd.jetstream.consumer.ack.AckTracker`: pending acks,
                   redelivery counts and queue, ack floors, stored view, ack-wait timer
``delivery``       a :class:`~natsd.jetstream.consumer.delivery.Delivery`, chosen once:
                   :class:`~natsd.jetstream.consumer.pull.PullDelivery` (wait queue,
                   request expiry and heartbeats, priority groups) or
                   :class:`~natsd.jetstream.consumer.push.PushDelivery` (interest, flow
                   control, heartbeats); both own the inactivity timer
``pacing``         :class:`~natsd.jetstream.consumer.pacing.Pacing`: pause, replay timing,
                   rate limit, the held message
``saver``          :class:`~natsd.jetstream.consumer.state.StateSaver`: when the state is
                   written, ack-sync replies
``adv``            :class:`~natsd.jetstream.consumer.advisory.Advisories`
``bell``           :class:`~natsd.jetstream.consumer.shared.Doorbell`: wakes ``_run``
=================  =====================================================================

Delivery: a part rings the bell, which schedules ``_run`` on the loop; ``_run`` delivers
while the strategy can take messages, a bounded number per turn. Acks arrive on an internal
subscription on ``$JS.ACK.<stream>.<consumer>.>`` and go to the tracker; pull requests come
through the API (``request_next``). Time and timers come from the stream's ``Clock`` and
``Scheduler``, so a test drives them on a virtual clock. Ownership: the event loop owns every
consumer; nothing here blocks except the small state writes of file consumers.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from natsd.core.clock import rfc3339
from natsd.core.filters import match_tokens
from natsd.jetstream.config.consumer_config import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
)
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.delivery import Delivery, inactive_threshold
from natsd.jetstream.consumer.pacing import Pacing
from natsd.jetstream.consumer.pull import PullDelivery
from natsd.jetstream.consumer.push import PushDelivery
from natsd.jetstream.consumer.readahead import ReadAhead
from natsd.jetstream.consumer.seq import reset_seq, starting_seq
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.state import StateSaver
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire.ack_subject import ack_tail
from natsd.router.subscription import Subscription
from natsd.storage.store import StoredMsg
from natsd.version import API_LEVEL, SERVER_VERSION

__all__ = ["Consumer"]

log: Final = logging.getLogger("natsd")

RUN_BUDGET: Final = 256  # deliveries per loop turn before yielding
# what a delivery's reply subject would have counted toward the flow-control window when
# it goes down the lane without one (``Delivery.lane``): about its length
_LANE_REPLY: Final = 64

# Policy members compared per message, bound once: on Python 3.11 `AckPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_ACK_NONE: Final = AckPolicy.NONE
_LIMITS: Final = RetentionPolicy.LIMITS
_INTEREST: Final = RetentionPolicy.INTEREST

_ACK: Final = b"+ACK"
_OK: Final = b"+OK"
_NAK: Final = b"-NAK"
_WPI: Final = b"+WPI"
_NXT: Final = b"+NXT"
_TERM: Final = b"+TERM"


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
        # A replica that does not lead its replicated stream holds the consumer passive:
        # config and the committed state only (``start_passive``).
        self.passive = False
        self.is_pull = not cfg.deliver_subject  # fixed: an update cannot change it
        # a mirror's or a source's (fixed too): neither listed nor counted, nor saved
        self.direct = cfg.direct
        self._sublist = stream.sublist

        # The cursor (module docstring) and the last-per-subject start list.
        self.cur = Cursor()
        self.npf = 0  # num pending floor: sequences <= npf are already counted
        self.lss: list[int] | None = None
        self.ahead = ReadAhead()  # the next messages, while the consumer takes every subject
        self.lss_resume = 0

        # The parts.
        self.bell = Doorbell(stream.scheduler, self._run)
        self.adv = Advisories(stream, name)
        self.saver = StateSaver(stream, name, persist, self._state_doc)
        self.acks = AckTracker(cfg, self.cur, stream, self, self.adv, self.saver, self.bell)
        self.pacing = Pacing(cfg, stream, self.adv, self.bell)
        self.delivery: Delivery
        if self.is_pull:
            self.delivery = PullDelivery(
                cfg, self.cur, self.acks, stream, self.bell, self.adv, self.delete
            )
        else:
            self.delivery = PushDelivery(
                cfg, self.cur, self.acks, stream, self.bell, name, self.delete
            )
        self.delivery.configure(cfg, inactive_threshold(cfg))

        self._ack_sub: Subscription | None = None
        self._ack_pre = b"$JS.ACK." + stream.name.encode() + b"." + name.encode() + b"."

        self.filters: list[str] = []
        self.filter_all = True
        self._flit: set[str] = set()
        self._fwild: list[list[str]] = []
        self._set_filters(cfg)

    # ------------------------------------------------------------------ config
    def _set_filters(self, cfg: ConsumerConfig) -> None:
        self.ahead.drop()
        filters = cfg.filters
        self.filters = filters
        self.filter_all = not filters
        self._flit = {f for f in filters if "*" not in f and ">" not in f}
        self._fwild = [f.split(".") for f in filters if f not in self._flit]

    def _apply_runtime_config(self, cfg: ConsumerConfig) -> None:
        self.acks.configure(cfg)
        self.delivery.configure(cfg, inactive_threshold(cfg))
        self.pacing.configure(cfg)

    @property
    def dthresh(self) -> float:
        """Seconds of inactivity before the consumer is deleted (0: never)."""
        return self.delivery.thresh

    @property
    def retention(self) -> RetentionPolicy:
        """The stream's retention policy (a stream update may change limits/interest)."""
        return self.stream.cfg.retention

    def matches(self, subject: str) -> bool:
        if self.filter_all or subject in self._flit:
            return True
        return any(match_tokens(subject, ft) for ft in self._fwild)

    def paused_until(self) -> int:
        return self.pacing.paused_until()

    # ------------------------------------------------------------------ lifecycle
    def start(self, state: dict[str, Any] | None) -> None:
        """Pick the starting sequence (or restore saved state) and subscribe."""
        self._position(state)
        self._stream_num_pending()
        if self.cfg.ack_policy != _ACK_NONE and self.cfg.ack_policy != AckPolicy.FLOW_CONTROL:
            # (flow_control is acknowledged by the flow control answers: no ack subject,
            # as nats-server, so an ack sent to a message's reply reaches nobody)
            subj = self._ack_pre + b">"
            self._ack_sub = Subscription(
                subj, None, b"ack-" + self.name.encode(), callback=self._on_ack
            )
            self._sublist.insert(self._ack_sub)
        self.delivery.start()
        self.pacing.start()
        self.acks.start()
        if state is None:
            self.saver.mark_dirty()
        self.bell.ring()

    def start_passive(self, state: dict[str, Any] | None) -> None:
        """Hold the consumer without running it: on a replica that does not lead its
        replicated stream, the config and the state the leader committed (``set_state``),
        from which this replica starts it if it comes to lead. No subscription, delivery or
        timer; ``closed`` keeps the stream's hooks out. A new consumer's starting position is
        computed here as the leader computes it, at the same point of the stream's log."""
        self.passive = True
        self.closed = True
        self.saver.stop()
        self.bell.stop()
        self._position(state)

    def set_state(self, state: dict[str, Any]) -> None:
        """A passive consumer takes the state its leader committed."""
        self._position(state)

    def _position(self, state: dict[str, Any] | None) -> None:
        """The cursor and ack state: from saved ``state``, or a new consumer's start."""
        cur = self.cur
        if state is not None:
            first = self.stream.store.state().first_seq
            cur.dseq, cur.sseq = self.acks.restore(state, first)
        else:
            cur.sseq, self.lss, self.lss_resume = starting_seq(self.stream, self.cfg, self.filters)
            cur.dseq = 1
            self.acks.start_at(cur.sseq)

    def state_doc(self) -> bytes:
        """The state as saved and replicated (the ack tracker's stored view)."""
        return self.acks.state_doc()

    def stop(self, *, deleted: bool, advisory: bool = True) -> None:
        """Stop delivering; ``deleted`` also answers waiting pulls with ``409 Consumer
        Deleted`` and sends the delete advisory. Each part cancels its own timers."""
        if self.closed:
            return
        if deleted:
            if advisory:
                self.adv.consumer_action("delete")
        elif self.saver.dirty:
            self.saver.flush()
        self.delivery.stop(deleted)
        self.closed = True
        if self._ack_sub is not None:
            self._sublist.remove(self._ack_sub)
            self._ack_sub = None
        self.bell.stop()
        self.acks.stop()
        self.pacing.stop()
        self.saver.stop()

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
            stream.cleanup_no_interest(self.acks.asflr, self)

    def reset_to(self, seq: int) -> int:
        """``resetStartingSeq``: restart delivery at ``seq`` (0: just above the ack floor),
        forgetting what is pending. Raises ValueError with nats-server's reason."""
        seq = reset_seq(self.stream, self.cfg, self.acks.asflr, seq)
        self.acks.reset(seq)
        self.lss = None
        self.ahead.drop()
        self.cur.sseq, self.cur.dseq = seq, 1
        if self.retention == _INTEREST:
            self.stream.cleanup_no_interest(self.acks.asflr, None)
        self._stream_num_pending()
        self.saver.mark_dirty()
        self.bell.ring()
        return seq

    def purge(self, sseq: int, slseq: int, wider: bool) -> None:
        """The stream was purged: ``sseq`` is its new first sequence for this consumer."""
        if self.passive:
            return  # the leader's consumer follows the purge; its state comes committed
        if sseq == 0 and not wider:
            sseq = slseq + 1
        cur = self.cur
        if cur.sseq < sseq:
            cur.sseq = sseq
        raise_to = self.acks.purge_below(sseq, wider)
        if raise_to:
            cur.dseq = raise_to
        self.acks.purged()
        self._stream_num_pending()

    def save_meta(self) -> None:
        """Persist name, creation time and config (file consumers; raises OSError)."""
        self.saver.save_meta(self.created_ns, self.cfg)

    def _state_doc(self) -> bytes:
        return self.acks.state_doc()

    # ------------------------------------------------------------------ num pending
    def _calc_num_pending(self) -> int:
        store = self.stream.store
        sseq = self.cur.sseq
        lps = self.cfg.deliver_policy == DeliverPolicy.LAST_PER_SUBJECT
        if self.filter_all:
            return store.num_pending(sseq, "", lps)
        return sum(store.num_pending(sseq, f, lps) for f in self.filters)

    def on_bulk_removed(self) -> None:
        """A purge, compact or truncate of the store: recount what is pending."""
        self.ahead.drop()
        self.cur.npc = self._calc_num_pending()

    def _stream_num_pending(self) -> None:
        self.cur.npc = self._calc_num_pending()
        self.npf = self.stream.store.state().last_seq

    def num_pending(self) -> int:
        """``checkNumPending``: the running count, kept within what the stream holds."""
        st = self.stream.store.state()
        cur = self.cur
        if cur.sseq > st.last_seq:
            cur.npc = 0
        elif cur.npc > 0:
            cur.npc = min(cur.npc, st.msgs, st.last_seq - cur.sseq + 1)
        return max(cur.npc, 0)

    # ------------------------------------------------------------------ stream hooks
    def on_stored(self, seq: int, subject: str) -> None:
        """The stream stored a message (hot path: called for every message)."""
        if self.closed or not (self.filter_all or self.matches(subject)):
            return
        cur = self.cur
        if seq > self.npf:
            cur.npc += 1
        if seq < cur.sseq:
            return
        if self.delivery.ready():
            self.bell.ring()

    def on_removed(self, seq: int, subject: str) -> None:
        """``decStreamPending``: a message left the stream (limits, delete, retention)."""
        self.ahead.removed(seq)
        if self.closed:
            return
        if seq >= self.cur.sseq and self.matches(subject):
            self.cur.npc -= 1
        self.acks.removed(seq)

    def need_ack(self, sseq: int, subject: str) -> bool:
        """``needAck``: does this consumer still hold interest in ``sseq``?"""
        if not self.filter_all and not self.matches(subject):
            return False
        return self.acks.need_ack(sseq)

    # ------------------------------------------------------------------ delivery loop
    def _run(self) -> None:
        self.bell.answered()
        if self.closed:
            return
        cfg = self.cfg
        cur = self.cur
        acks = self.acks
        pacing = self.pacing
        delivery = self.delivery
        ack_none = cfg.ack_policy == _ACK_NONE
        delivery.before_run()
        lane = delivery.lane
        blocked_by_max = False
        budget = RUN_BUDGET
        while True:
            if pacing.is_paused() or not delivery.can_take():
                break
            if budget <= 0:
                self.bell.ring()
                return
            budget -= 1
            held = pacing.take_held()
            if held is not None:
                m, dc = held
            else:
                got = self._get_next()
                if got is None:
                    blocked_by_max = acks.full()
                    break
                m, dc = got
                if pacing.on and pacing.hold(m, dc):
                    return
            seq = m.seq
            if dc == 1:
                cur.npc -= 1
            if lane is not None:
                take = lane.take
                if take is not None:
                    # (an internal subscriber on this server: the message as stored, with
                    # what its reply subject would have said)
                    dseq = cur.dseq
                    cur.dseq += 1
                    acks.delivered(dseq, seq, dc, m.ts)
                    take(lane, self._ack_pre, m, dc, dseq, max(cur.npc, 0))
                    hdr = m.hdr
                    delivery.sent_inside(len(m.subject) + _LANE_REPLY + len(m.data)
                                         + (len(hdr) if hdr else 0))  # fmt: skip
                    if ack_none and self.stream.cfg.retention != _LIMITS:
                        self.stream.ack_msg(seq, self)
                    continue
            ack_reply = b"%s%d.%d.%d.%d.%d" % (
                self._ack_pre,
                dc,
                seq,
                cur.dseq,
                m.ts,
                max(cur.npc, 0),
            )
            hdr, data = m.hdr, m.data
            if cfg.headers_only:
                hdr, data = _headers_only(hdr, data)
            sz = len(m.subject) + len(ack_reply) + (len(hdr) if hdr else 0) + len(data)
            dsubj = delivery.claim(sz)
            if dsubj is None:
                # Nobody can take it after all: put it back.
                if dc == 1 and seq == cur.sseq - 1:
                    cur.sseq -= 1
                    cur.npc += 1
                else:
                    acks.put_back(seq)
                break
            dseq = cur.dseq
            cur.dseq += 1
            acks.delivered(dseq, seq, dc, m.ts)
            delivery.send(dsubj, m.subject.encode(), seq, ack_reply, hdr, data, sz)
            if ack_none and self.stream.cfg.retention != _LIMITS:
                self.stream.ack_msg(seq, self)
        # Nothing more to do now: expire / heartbeat waiting requests and arm timers.
        pacing.caught_up(cur.sseq)
        delivery.idle(not blocked_by_max)

    def _get_next(self) -> tuple[StoredMsg, int] | None:
        """``getNextMsg``: redeliveries first, then the next matching message."""
        acks = self.acks
        if acks.rdq:
            got = acks.next_redelivery()
            if got is not None:
                return got
        if acks.full():
            return None
        store = self.stream.store
        cur = self.cur
        while self.lss:
            seq = self.lss.pop(0)
            if not self.lss:
                self.lss = None
                cur.sseq = self.lss_resume
            else:
                cur.sseq = seq
            cur.sseq += 1
            m = store.load_msg(seq)
            if m is not None:
                return m, 1
        m = self._load_next(cur.sseq)
        if m is None:
            last = store.state().last_seq
            if last >= cur.sseq:
                cur.sseq = last + 1
            return None
        cur.sseq = m.seq + 1
        return m, 1

    def _load_next(self, start: int) -> StoredMsg | None:
        store = self.stream.store
        if self.filter_all:
            return self.ahead.next_msg(store, start)
        if len(self.filters) == 1:
            return store.load_next_msg(self.filters[0], start)
        best: StoredMsg | None = None
        for f in self.filters:
            m = store.load_next_msg(f, start)
            if m is not None and (best is None or m.seq < best.seq):
                best = m
        return best

    def request_next(self, reply: bytes, data: bytes) -> None:
        """A pull request (``$JS.API.CONSUMER.MSG.NEXT``); push consumers answer 409."""
        if not self.closed:
            self.delivery.request(reply, data)

    # ------------------------------------------------------------------ acks
    def _on_ack(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        # Called from the router while it delivers a client's message: a failure here must
        # not take the client's connection down with it.
        try:
            self._process_ack_msg(subject, reply, data)
        except Exception:
            log.exception("consumer %s > %s: ack %r failed", self.stream.name, self.name, subject)

    def _process_ack_msg(self, subject: bytes, reply: bytes | None, msg: bytes) -> None:
        if self.closed:
            return
        # "<ack prefix><dc>.<sseq>.<dseq>.<ts>.<pending>": the prefix is this consumer's own
        # ($JS.ACK.<stream>.<consumer>.), so only the five numeric tokens are split off.
        pre = self._ack_pre
        sseq = dseq = dc = 0
        if subject.startswith(pre):
            dc, sseq, dseq, _ts, _pending = ack_tail(subject, len(pre), 3)
        if self.cfg.inactive_threshold > 0:
            self.delivery.keep_alive()
        acks = self.acks
        skip_reply = sseq == 0
        if not msg or msg == _ACK or msg == _OK:
            if not acks.ack(sseq, dseq, dc, reply or b"", True):
                skip_reply = True
        elif msg.startswith(_NXT):
            acks.ack(sseq, dseq, dc, b"", True)
            if reply:
                self.request_next(reply, msg[len(_NXT) :])
            skip_reply = True
        elif msg.startswith(_NAK):
            acks.nak(sseq, dseq, dc, msg)
        elif msg == _WPI:
            acks.progress(sseq)
        elif msg.startswith(_TERM):
            reason = msg[len(_TERM) :].strip().decode(errors="replace")
            if not acks.term(sseq, dseq, dc, reason, reply or b""):
                skip_reply = True
        if reply and not skip_reply:
            self.saver.ack_reply(reply)

    # ------------------------------------------------------------------ info
    def info(self, *, versioned: bool = True) -> dict[str, Any]:
        """CONSUMER.INFO; ``versioned`` adds nats-server's ``_nats.ver``/``_nats.level``
        response metadata (create and info responses have it, list entries do not)."""
        np = self.num_pending()
        acks, cur = self.acks, self.cur
        if acks.st_dc or acks.st_ds:
            dlv_c, dlv_s = acks.st_dc, acks.st_ds
        else:
            dlv_c, dlv_s = max(cur.dseq, 1) - 1, max(cur.sseq, 1) - 1
        delivered: dict[str, Any] = {"consumer_seq": dlv_c, "stream_seq": dlv_s}
        if acks.ldt:
            delivered["last_active"] = rfc3339(acks.ldt)
        ack_floor: dict[str, Any] = {"consumer_seq": acks.st_fc, "stream_seq": acks.st_fs}
        if acks.lat:
            ack_floor["last_active"] = rfc3339(acks.lat)
        if versioned:
            cfg = self.cfg.to_json(server_version=SERVER_VERSION, api_level=API_LEVEL)
        else:
            cfg = self.cfg.to_json()
        out: dict[str, Any] = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": rfc3339(self.created_ns),
            "config": cfg,
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(acks.pending),
            "num_redelivered": 0 if self.cfg.max_deliver == 1 else len(acks.rdc),
            "num_waiting": 0,
            "num_pending": np,
        }
        self.delivery.info(out)
        groups = self.delivery.priority_groups()
        until = self.pacing.paused_until()
        now_ns = self.stream.clock.time_ns
        now = now_ns()
        if until > now:
            out["paused"] = True
            out["pause_remaining"] = until - now
        out["ts"] = rfc3339(now_ns())
        if groups:
            out["priority_groups"] = groups
        return out

    # ------------------------------------------------------------------ pause / updates
    def set_pause(self, pause_until: str | None) -> None:
        self.cfg.pause_until = pause_until
        self.pacing.update_pause_timer()
        self.bell.ring()

    def update_config(self, cfg: ConsumerConfig) -> None:
        """Apply an allowed config update (``updateConfig``)."""
        old = self.cfg
        if self.passive:
            self.cfg = cfg
            self.acks.configure(cfg)
            if cfg.filters != old.filters:
                self._set_filters(cfg)
            return
        delivery = self.delivery
        if cfg.deliver_subject != old.deliver_subject:
            delivery.change_deliver_subject(cfg.deliver_subject)
        if cfg.max_ack_pending != old.max_ack_pending:
            self.bell.ring()
        if cfg.ack_wait != old.ack_wait or cfg.backoff != old.backoff:
            self.acks.ack_wait_changed()
        thresh_changed = cfg.inactive_threshold != old.inactive_threshold
        if thresh_changed:
            delivery.stop_inactivity()
        refilter = cfg.filters != old.filters
        self.cfg = cfg
        self._apply_runtime_config(cfg)
        if thresh_changed:
            delivery.start_inactivity()
        if (cfg.pause_until or "") != (old.pause_until or ""):
            self.pacing.update_pause_timer()
        if refilter:
            self._set_filters(cfg)
            if self.retention == _INTEREST:
                self.stream.cleanup_no_interest(self.acks.asflr, None)
            self._stream_num_pending()
        self.saver.mark_dirty()
        self.bell.ring()


def _headers_only(hdr: bytes | None, data: bytes) -> tuple[bytes, bytes]:
    base = hdr[:-2] if hdr else b"NATS/1.0\r\n"
    return base + b"Nats-Msg-Size: %d\r\n\r\n" % len(data), b""
