"""Ack tracking of a consumer: what is delivered and unacknowledged, redelivery, ack floors,
the ack-wait timer and the stored view (nats-server ``processAckMsg``, ``processNak``,
``processTerm``, ``checkPending``, and the consumer store's ``UpdateDelivered`` /
``UpdateAcks``).

Ack subjects are ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``;
the consumer parses them and calls :meth:`AckTracker.ack` / ``nak`` / ``term`` /
``progress``.

Rules kept here (:class:`AckTracker`):

* Every field below is written only by the tracker's methods, on the event loop:

  - ``pending``: stream seq -> [consumer seq, delivery time ns] of delivered, unacked
    messages (empty with ``ack_policy: none``);
  - ``rdc``: stream seq -> redelivery count; ``rdq`` / ``rdqi``: the sequences queued for
    redelivery, in order / as a set;
  - ``adflr`` / ``asflr``: the ack floor (consumer / stream sequence): everything at or
    below it is acknowledged;
  - the *stored view* (``st_dc``, ``st_ds``, ``st_fc``, ``st_fs``, ``st_pending``): what
    nats-server's consumer store reports in CONSUMER.INFO and persists, moved by the rules
    of ``UpdateDelivered`` / ``UpdateAcks``; ``ldt`` / ``lat``: last delivery / ack (ns);
  - the ack-wait timer (``check_pending`` runs when the earliest pending message is due).

* It reads the consumer's :class:`~natsd.jetstream.consumer.shared.Cursor` (floors follow
  it when nothing is pending) and never writes it: :meth:`purge_below` returns the delivery
  sequence the consumer has to raise its cursor to.
* It reports out through what it is handed: the stream (``ack_msg`` for interest and
  workqueue retention, the store for redeliveries), the advisories, the state saver
  (``mark_dirty``, ack-sync replies) and the doorbell (room below ``max_ack_pending``,
  messages due for redelivery).
"""

from __future__ import annotations

import logging
import random
from collections import deque
from typing import Any, Final

import orjson

from natsd.core.clock import parse_duration
from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import AckPolicy, ConsumerConfig
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.state import StateSaver
from natsd.jetstream.stream.context import StreamListener
from natsd.jetstream.stream.stream import Stream
from natsd.storage.store import StoredMsg

__all__ = [
    "ACK_WAIT_DELAY",
    "TERM_UNACKED_LIMITS",
    "AckTracker",
    "drop_upto",
    "next_above",
    "parse_nak_delay",
]

log: Final = logging.getLogger("natsd")

ACK_WAIT_DELAY: Final = 1_000_000  # ackWaitDelay: 1ms added to timer deadlines (ns)
TERM_UNACKED_LIMITS: Final = "Unacknowledged message was deleted"

# Policy members compared per message, bound once: on Python 3.11 `AckPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_ACK_NONE: Final = AckPolicy.NONE
_ACK_ALL: Final = AckPolicy.ALL
_ACK_FC: Final = AckPolicy.FLOW_CONTROL
_ACK_EXPLICIT: Final = AckPolicy.EXPLICIT
_LIMITS: Final = RetentionPolicy.LIMITS

_NAK: Final = b"-NAK"


class AckTracker:
    """Pending acks, redeliveries, ack floors and the stored view of one consumer."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        cursor: Cursor,
        stream: Stream,
        listener: StreamListener,
        adv: Advisories,
        saver: StateSaver,
        bell: Doorbell,
    ) -> None:
        self.cfg = cfg
        self._cur = cursor
        self._stream = stream
        self._listener = listener  # the consumer, as the stream knows it (ack_msg)
        self._adv = adv
        self._saver = saver
        self._bell = bell
        self._sched = stream.scheduler
        self._now_ns = stream.clock.time_ns
        self._mono = stream.clock.monotonic
        self.pending: dict[int, list[int]] = {}
        self.rdc: dict[int, int] = {}
        self.rdq: deque[int] = deque()
        self.rdqi: set[int] = set()
        self.adflr = 0
        self.asflr = 0
        self.st_dc = 0
        self.st_ds = 0
        self.st_fc = 0
        self.st_fs = 0
        self.st_pending: dict[int, int] = {}
        self.ldt = 0  # last delivery (ns)
        self.lat = 0  # last ack (ns)
        self.maxp = 0  # max_ack_pending, 0: no limit (and for ack_policy none)
        self.maxdc = 0  # max_deliver, 0: no limit
        self.sfreq = 0  # sample_freq in percent
        self._ptmr: Cancellable | None = None
        self._ptmr_end = 0.0
        self._stopped = False
        self._ap_none = self._ap_all = self._ap_explicit = False
        self._backoff: list[int] = cfg.backoff
        self._ack_wait = 0  # ns (0: none, flow_control's)
        self.configure(cfg)

    def configure(self, cfg: ConsumerConfig) -> None:
        """The consumer's config, at creation and after an update."""
        self.cfg = cfg
        # The policy as native flags: the per-message paths test these, not the config
        # object (an interpreted dataclass: an attribute read and an enum compare each).
        self._ap_none = cfg.ack_policy == _ACK_NONE
        # (flow_control acknowledges like all: up to the sequence a flow control answer names)
        self._ap_all = cfg.ack_policy == _ACK_ALL or cfg.ack_policy == _ACK_FC
        self._ap_explicit = cfg.ack_policy == _ACK_EXPLICIT
        self._backoff = cfg.backoff
        self._ack_wait = cfg.ack_wait
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

    def full(self) -> bool:
        """``max_ack_pending`` messages are unacknowledged: no new ones go out."""
        return self.maxp > 0 and len(self.pending) >= self.maxp

    # ------------------------------------------------------------------ start / stop
    def start_at(self, sseq: int) -> None:
        """A new consumer starts delivering at ``sseq``: everything below counts as acked
        (the store's ``SetStarting``)."""
        self.adflr = 0
        self.asflr = sseq - 1
        self.st_ds = self.st_fs = sseq - 1

    def restore(self, st: dict[str, Any], first_seq: int) -> tuple[int, int]:
        """Take the persisted state (``applyState``); returns the (delivery, stream)
        sequences the cursor resumes at."""
        d = st.get("delivered", {})
        f = st.get("ack_floor", {})
        self.st_dc, self.st_ds = int(d.get("consumer_seq", 0)), int(d.get("stream_seq", 0))
        self.st_fc, self.st_fs = int(f.get("consumer_seq", 0)), int(f.get("stream_seq", 0))
        self.adflr, self.asflr = self.st_fc, self.st_fs
        self.pending = {int(s): [int(p[0]), int(p[1])] for s, p in st.get("pending", {}).items()}
        self.st_pending = {s: p[0] for s, p in self.pending.items()}
        self.rdc = {int(s): int(n) for s, n in st.get("redelivered", {}).items()}
        for s in [s for s in self.rdc if s < first_seq]:
            del self.rdc[s]
        return self.st_dc + 1, self.st_ds + 1

    def state_doc(self) -> bytes:
        """The persisted state: the stored view, the cursor, pending and redeliveries."""
        cur = self._cur
        # The maps go to orjson as they are, their int keys written as strings by it: no
        # dict of str keys built per save (this is written every STATE_FLUSH_DELAY while
        # acks come in, and pending can hold max_ack_pending entries).
        return orjson.dumps(
            {
                "delivered": {"consumer_seq": self.st_dc, "stream_seq": self.st_ds},
                "ack_floor": {"consumer_seq": self.st_fc, "stream_seq": self.st_fs},
                "cursor": {"consumer_seq": cur.dseq, "stream_seq": cur.sseq},
                "pending": self.pending,
                "redelivered": self.rdc,
            },
            option=orjson.OPT_NON_STR_KEYS,
        )

    def start(self) -> None:
        """Recheck what a restored consumer had pending soon after it starts."""
        if self.pending:
            delay = 0.5 + random.random()
            self._reset_ptmr(min(delay, (self.cfg.ack_wait + ACK_WAIT_DELAY) / 1e9))

    def stop(self) -> None:
        self._stopped = True
        self._stop_ptmr()

    def reset(self, seq: int) -> None:
        """``CONSUMER.RESET``: forget everything pending; ``seq`` is delivered next."""
        self.pending.clear()
        self.rdc.clear()
        self.rdq.clear()
        self.rdqi.clear()
        self.adflr, self.asflr = 0, seq - 1
        self.ldt = self.lat = 0
        self.st_dc, self.st_ds, self.st_fc, self.st_fs = 0, seq - 1, 0, seq - 1
        self.st_pending = {}
        self._stop_ptmr()

    def purge_below(self, sseq: int, wider: bool) -> int:
        """The stream was purged below ``sseq`` (``wider``: also elsewhere): acknowledge
        what is gone. Returns the delivery sequence the cursor must be raised to (0: as
        it is); then call :meth:`purged`."""
        raise_to = 0
        if self.asflr < sseq:
            store = self._stream.store
            self.asflr = sseq - 1
            for seq, p in list(self.pending.items()):
                gone = seq <= self.asflr or (wider and store.load_msg(seq) is None)
                if gone:
                    if p[0] > self.adflr:
                        self.adflr = p[0]
                        if self.adflr > max(self._cur.dseq, raise_to):
                            raise_to = self.adflr
                    del self.pending[seq]
                    self.rdc.pop(seq, None)
                    self._update_acks(p[0], seq, b"")
        return raise_to

    def purged(self) -> None:
        """After :meth:`purge_below` and the cursor's move: floors and redelivery queue."""
        cur = self._cur
        if not self.pending:
            self.rdc.clear()
            self.adflr, self.asflr = cur.dseq - 1, cur.sseq - 1
        keep = [s for s in self.rdq if s >= cur.sseq]
        self.rdq = deque(keep)
        self.rdqi = set(keep)
        self.write_store_state()

    # ------------------------------------------------------------------ delivery
    def delivered(self, dseq: int, seq: int, dc: int, ts: int) -> None:
        """Message ``seq`` went out as delivery ``dseq`` (its ``dc``-th)."""
        now = self._now_ns()  # one clock read for both
        self._update_delivered(dseq, seq, dc, ts, now)
        if self._ap_none:
            self.adflr, self.asflr = dseq, seq
        else:
            self._track_pending(seq, dseq, now)

    def next_redelivery(self) -> tuple[StoredMsg, int] | None:
        """The next queued redelivery and its delivery count (``getNextMsg``'s first
        part); what passed ``max_deliver`` or left the stream is dropped on the way."""
        store = self._stream.store
        rdq = self.rdq
        while rdq:
            seq = rdq.popleft()
            self.rdqi.discard(seq)
            dc = self._inc_delivery_count(seq)
            if self.maxdc and dc > self.maxdc:
                if dc == self.maxdc + 1:
                    self._adv.max_deliveries(seq, dc - 1)
                p = self.pending.pop(seq, None)
                if p is not None:
                    self._update_delivered(p[0], seq, dc, p[1])
                    self._move_ack_floor(p[0], seq)
                continue
            m = store.load_msg(seq)
            if m is None:
                self._dec_delivery_count(seq)
                p = self.pending.get(seq)
                if p is not None:
                    self.term(seq, p[0], dc - 1, TERM_UNACKED_LIMITS, b"")
                continue
            return m, dc
        return None

    def put_back(self, seq: int) -> None:
        """A redelivery found nobody to take it: it waits in the queue again."""
        if seq not in self.rdqi:
            self._dec_delivery_count(seq)
            self._add_to_rdq(seq)

    def undelivered(self, seq: int) -> None:
        """Nobody received delivery of ``seq``: it does not count as a delivery."""
        self._dec_delivery_count(seq)

    def redeliver_now(self, seq: int) -> bool:
        """Queue pending ``seq`` for redelivery without waiting for ack_wait; False when
        it is not pending or already queued."""
        if seq in self.pending and seq not in self.rdqi:
            self._add_to_rdq(seq)
            return True
        return False

    def removed(self, seq: int) -> None:
        """``seq`` left the stream: a pending one is terminated (next loop turn)."""
        p = self.pending.get(seq)
        if p is not None:
            dc = self.delivery_count(seq)
            self._sched.call_soon(self._term_removed, seq, p[0], dc)
        elif seq in self.rdc:
            del self.rdc[seq]
            self._saver.mark_dirty()

    def _term_removed(self, seq: int, dseq: int, dc: int) -> None:
        if not self._stopped and seq in self.pending:
            self.term(seq, dseq, dc, TERM_UNACKED_LIMITS, b"")

    def need_ack(self, sseq: int) -> bool:
        """``needAck`` (after the consumer's filter check)."""
        if self._ap_explicit:
            need = sseq > self.asflr and (sseq >= self._cur.sseq or sseq in self.pending)
        else:
            need = sseq > self.asflr
        return need or sseq in self.rdc

    def deadline_after(self, now: int, extra_ns: int) -> int:
        """Nanoseconds from ``now`` until every pending message's ack wait (or backoff)
        plus ``extra_ns`` is over; 0 when it already is."""
        delay = 0
        bo = self.cfg.backoff
        for seq, p in self.pending.items():
            wait = bo[min(max(self.rdc.get(seq, 0), 0), len(bo) - 1)] if bo else self.cfg.ack_wait
            ts = p[1] + wait + ACK_WAIT_DELAY + extra_ns
            if ts > now:
                delay = max(delay, ts - now)
        return delay

    # ------------------------------------------------------------------ redelivery counts
    def delivery_count(self, seq: int) -> int:
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

    # ------------------------------------------------------------------ acks
    def ack(self, sseq: int, dseq: int, dc: int, reply: bytes, sample: bool) -> bool:
        """``processAckMsg``; True when the caller should send the ack-sync reply."""
        if self._stopped or sseq >= self._cur.sseq:
            return False
        stream = self._stream
        in_place = stream.cfg.retention != _LIMITS
        acked: list[int] = []
        need_signal = False
        pending = self.pending
        if self._ap_explicit:
            p = pending.get(sseq)
            if p is not None:
                if sample and self.sfreq > 0:
                    self._sample_ack(sseq, dseq, dc, p[1])
                if self.maxp > 0 and len(pending) >= self.maxp:
                    need_signal = True
                del pending[sseq]
                dseq = p[0]
                self._move_ack_floor(dseq, sseq)
            # (both are empty unless something was redelivered: no lookups then)
            if self.rdc:
                self.rdc.pop(sseq, None)
            if self.rdqi:
                self._remove_from_rdq(sseq)
        elif self._ap_all:
            if dseq <= self.adflr or sseq <= self.asflr:
                return True
            if self.maxp > 0 and len(pending) >= self.maxp:
                need_signal = True
            floor = self.asflr
            self.adflr, self.asflr = dseq, sseq
            for s in drop_upto(pending, floor, sseq):
                if in_place and s != sseq:
                    acked.append(s)
                self.rdc.pop(s, None)
                self._remove_from_rdq(s)
        else:
            return in_place
        self._update_acks(dseq, sseq, b"" if in_place else reply)
        if in_place:
            stream.ack_msg(sseq, self._listener)
            for s in acked:
                stream.ack_msg(s, self._listener)
        if need_signal:
            self._bell.ring()
        return in_place

    def term(self, sseq: int, dseq: int, dc: int, reason: str, reply: bytes) -> bool:
        """``+TERM`` (and messages that left the stream while pending)."""
        in_place = self.ack(sseq, dseq, dc, reply, False)
        self._adv.terminated(dseq, sseq, dc, reason)
        return in_place

    def nak(self, sseq: int, dseq: int, dc: int, nak: bytes) -> None:
        """``-NAK`` [delay]: redeliver now, or once the delay is over."""
        if dseq <= self.adflr or dseq > self._cur.dseq:
            return
        p = self.pending.get(sseq)
        if p is None:
            return
        self._adv.nak(dseq, sseq, dc)
        arg = nak[len(_NAK) :].strip()
        if arg:
            delay = parse_nak_delay(arg)
            if delay is not None:
                self._remove_from_rdq(sseq)
                p[1] = self._now_ns() - self.cfg.ack_wait + delay
                self._update_delivered(p[0], sseq, dc, p[1])
                if self._ptmr is not None:
                    self._reset_ptmr(0.01)
                return
            stream = self._stream
            log.warning(
                "JetStream consumer '%s > %s > %s' bad NAK delay value: %r",
                stream.ctx.account_name,
                stream.name,
                self._adv.name,
                arg.decode(errors="replace"),
            )
        if sseq not in self.rdqi:
            self._add_to_rdq(sseq)
        self._bell.ring()

    def progress(self, seq: int) -> None:
        """``+WPI``: the ack wait of ``seq`` starts over."""
        p = self.pending.get(seq)
        if p is not None:
            p[1] = self._now_ns()
            self._update_delivered(p[0], seq, 1, p[1])

    def _sample_ack(self, sseq: int, dseq: int, dc: int, ts: int) -> None:
        if self.sfreq < 100 and random.randrange(100) > self.sfreq:
            return
        self._adv.ack_metric(dseq, sseq, self._now_ns() - ts, dc)

    # ------------------------------------------------------------------ ack wait
    def _track_pending(self, seq: int, dseq: int, now: int) -> None:
        p = self.pending.get(seq)
        if p is not None:
            p[1] = now
        else:
            self.pending[seq] = [dseq, now]
        bo = self._backoff
        if bo:
            bi = min(max(self.rdc.get(seq, 0), 0), len(bo) - 1)
            delay = bo[bi] + ACK_WAIT_DELAY
            end = self._mono() + delay / 1e9
            if self._ptmr is None or self._ptmr_end > end:
                self._reset_ptmr(delay / 1e9)
        elif self._ptmr is None and self._ack_wait > 0:
            # (no ack wait, flow_control's: nothing is redelivered, and no timer is armed;
            # the native copy spares each delivery a read of the interpreted config)
            # Without backoff no timer is ever armed for longer than ack_wait (plus the
            # margin), so one that is armed ends no later than this message's would: no
            # clock read per delivery to find that out.
            self._reset_ptmr((self._ack_wait + ACK_WAIT_DELAY) / 1e9)

    def ack_wait_changed(self) -> None:
        """A config update changed ack_wait: recheck what is pending soon."""
        if self._ptmr is not None:
            self._reset_ptmr(0.1)

    def _reset_ptmr(self, delay: float) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
        self._ptmr = self._sched.call_later(delay, self._check_pending)
        self._ptmr_end = self._mono() + delay

    def _stop_ptmr(self) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
            self._ptmr = None

    def _has_max_deliveries(self, seq: int) -> bool:
        if not self.maxdc:
            return False
        dc = self.delivery_count(seq)
        if dc < self.maxdc:
            return False
        if dc == self.maxdc:
            self._adv.max_deliveries(seq, dc)
        if self.maxp > 0 and len(self.pending) >= self.maxp:
            self._bell.ring()
        p = self.pending.pop(seq, None)
        if p is not None:
            self._update_delivered(p[0], seq, dc + 1, p[1])
            self._move_ack_floor(p[0], seq)
        self.rdc[seq] = dc
        return True

    def _check_pending(self) -> None:
        """``checkPending``: queue what waited longer than ack_wait (or its backoff)."""
        self._ptmr = None
        if self._stopped or not self.pending:
            return
        ttl = self.cfg.ack_wait
        if ttl == 0:
            return
        fseq = self._stream.store.state().first_seq
        now = self._now_ns()
        bo = self.cfg.backoff
        nxt = bo[-1] if bo else ttl + ACK_WAIT_DELAY
        expired: list[int] = []
        changed = False
        pending = self.pending
        for seq, p in list(pending.items()):
            if seq < fseq or seq <= self.asflr:
                del pending[seq]
                self.rdc.pop(seq, None)
                self._remove_from_rdq(seq)
                changed = True
                if seq > self.asflr:
                    self.asflr = seq
                if p[0] > self.adflr:
                    self.adflr = p[0]
                continue
            elapsed, deadline = now - p[1], ttl
            if bo:
                dc = max(self.rdc.get(seq, 0), 0)
                nbi = dc + 1
                if dc + 1 >= len(bo):
                    dc = len(bo) - 1
                    nbi = dc
                deadline = bo[dc]
                if bo[nbi] < nxt:
                    nxt = bo[nbi]
            if elapsed >= deadline:
                if seq not in self.rdqi and not self._has_max_deliveries(seq):
                    expired.append(seq)
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            for seq in expired:
                self._add_to_rdq(seq)
            off = now - pending[expired[0]][1]
            for seq in expired:
                pe = pending.get(seq)
                if pe is not None:
                    pe[1] += off
            self._bell.ring()
        if pending:
            self._reset_ptmr(max(nxt, 0) / 1e9)
        else:
            self.rdq.clear()
            self.rdqi.clear()
            cur = self._cur
            self.adflr, self.asflr = cur.dseq - 1, cur.sseq - 1
        if changed:
            self.write_store_state()

    def force_expire(self) -> None:
        """``forceExpirePending``: queue everything pending for redelivery now."""
        expired = [
            s for s in list(self.pending) if s not in self.rdqi and not self._has_max_deliveries(s)
        ]
        if expired:
            expired.sort()
            for seq in expired:
                self._add_to_rdq(seq)
            now = self._now_ns()
            off = now - self.pending[expired[0]][1]
            for seq in expired:
                self.pending[seq][1] += off
            self._reset_ptmr((self.cfg.ack_wait + ACK_WAIT_DELAY) / 1e9)
        self._bell.ring()

    # ------------------------------------------------------------------ floors, stored view
    def _move_ack_floor(self, dseq: int, sseq: int) -> None:
        cur = self._cur
        if not self.pending:
            self.adflr, self.asflr = cur.dseq - 1, cur.sseq - 1
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            ss = next_above(self.pending, sseq, cur.sseq)
            if ss:
                pd = self.pending[ss][0]
                if pd > 0:
                    self.adflr, self.asflr = pd - 1, ss - 1

    def _update_delivered(self, dseq: int, sseq: int, dc: int, ts: int, now: int = 0) -> None:
        """The consumer store's ``UpdateDelivered``, plus last-delivery activity (at
        ``now`` when the caller has read the clock)."""
        self.ldt = now or self._now_ns()
        self._saver.mark_dirty()
        if self._ap_none:
            if dc != 1:
                return
            if dseq > self.st_dc:
                self.st_dc = self.st_fc = dseq
            if sseq > self.st_ds:
                self.st_ds = self.st_fs = sseq
            return
        if dseq <= self.st_fc:
            return
        if sseq > self.st_ds:
            self.st_pending[sseq] = dseq
        if dseq > self.st_dc:
            self.st_dc = dseq
        if sseq > self.st_ds:
            self.st_ds = sseq

    def _update_acks(self, dseq: int, sseq: int, reply: bytes) -> None:
        """The consumer store's ``UpdateAcks`` (moves the reported ack floor) and the
        ack-sync reply."""
        self.lat = self._now_ns()
        if reply:
            self._saver.ack_reply(reply)
        if self._ap_none or dseq <= self.st_fc:
            return
        stp = self.st_pending
        pd = stp.get(sseq)
        if pd is None:
            return
        self._saver.mark_dirty()
        if self._ap_all:
            floor = self.st_fs
            self.st_fc, self.st_fs = dseq, sseq
            drop_upto(stp, min(floor, sseq - 1), sseq)
            return
        del stp[sseq]  # (not stp.pop: a method call with a lookup of "pop" per ack)
        if 0 < pd < dseq:
            dseq = pd
        if not stp:
            self.st_fc, self.st_fs = self.st_dc, self.st_ds
        elif dseq == self.st_fc + 1:
            self.st_fc, self.st_fs = dseq, sseq
            if self.st_dc > dseq:
                ss = next_above(stp, sseq, self.st_ds + 1)
                if ss and stp[ss] > 0:
                    self.st_fc, self.st_fs = stp[ss] - 1, ss - 1

    def write_store_state(self) -> None:
        """``writeStoreState``: the stored view becomes the runtime state (the store's
        ``Update`` refuses inconsistent or outdated states)."""
        cur = self._cur
        dc, ds = cur.dseq - 1, cur.sseq - 1
        if self.adflr > dc or self.asflr > ds:
            return
        if dc < self.st_dc or self.asflr < self.st_fs:
            return
        self.st_dc, self.st_ds = dc, ds
        self.st_fc, self.st_fs = self.adflr, self.asflr
        self.st_pending = {s: p[0] for s, p in self.pending.items()}
        self._saver.mark_dirty()


def next_above(pending: dict[int, Any], sseq: int, limit: int) -> int:
    """The lowest pending sequence above ``sseq`` (below ``limit``), 0 if none: walks the
    sequences when the gap is small (acks in order), else scans the pending set."""
    if limit - sseq <= 2 * len(pending) + 8:
        for ss in range(sseq + 1, limit):
            if ss in pending:
                return ss
        return 0
    return min((s for s in pending if s > sseq), default=0)


def drop_upto(pending: dict[int, Any], floor: int, sseq: int) -> list[int]:
    """Remove and return (ascending) the pending sequences in (``floor``, ``sseq``]."""
    if sseq - floor <= len(pending):
        out = [s for s in range(floor + 1, sseq + 1) if s in pending]
    else:
        out = sorted(s for s in pending if s <= sseq)
    for s in out:
        del pending[s]
    return out


def parse_nak_delay(arg: bytes) -> int | None:
    """``-NAK {"delay": <ns>}`` or ``-NAK <go duration>``; None when it does not parse."""
    if arg[:1] == b"{":
        try:
            doc = orjson.loads(arg)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(doc, dict):
            return None
        d = doc.get("delay", 0)
        return int(d) if isinstance(d, int) and not isinstance(d, bool) else None
    try:
        text = arg.decode()
        if text.replace(".", "", 1).isdigit():
            return None  # Go durations need a unit
        return int(parse_duration(text) * 1e9)
    except (ValueError, UnicodeDecodeError):
        return None
