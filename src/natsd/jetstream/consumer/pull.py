"""Pull delivery (:class:`PullDelivery`): messages answer waiting pull requests.

Modelled on nats-server's ``processNextMsgRequest`` / ``processWaiting`` / ``nextWaiting``.
A pull request (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`` or an ack's ``+NXT``)
becomes a :class:`~natsd.jetstream.consumer.waiting.WaitingRequest` in the wait queue; the
request, queue and status messages themselves are in ``waiting`` (re-exported here).

Rules kept here: the wait queue, ``lwqic`` (last ``processWaiting``), the request-expiry /
heartbeat timer and the priority groups (:class:`~natsd.jetstream.consumer.priority.Priority`)
belong to the strategy and are written only by it; ``stop()`` answers waiting requests with
``409 Consumer Deleted`` when the consumer is deleted and cancels the timers (its own, the
inactivity timer and the pin timer). It reads the cursor and the ack tracker. Times are
monotonic seconds of the consumer's clock. Everything runs on the event loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Final

from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import ConsumerConfig, PriorityPolicy, go_duration
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.delivery import Delivery
from natsd.jetstream.consumer.priority import CYCLE, PINNED, WRONG, Priority, add_pin_header
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.waiting import (
    CONSUMER_DELETED,
    EXCEEDED_MAX_WAITING,
    NO_MESSAGES,
    REQUESTS_PENDING,
    NextRequest,
    WaitingRequest,
    WaitQueue,
    heartbeat_header,
    parse_next_request,
    pending_status,
    status,
)
from natsd.jetstream.stream.stream import Stream
from natsd.router.publish import publish_as

__all__ = [
    "NextRequest",
    "PullDelivery",
    "WaitQueue",
    "WaitingRequest",
    "heartbeat_header",
    "parse_next_request",
    "pending_status",
    "status",
]

# Policy members compared per message, bound once: on Python 3.11 `PriorityPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_PRIORITY_NONE: Final = PriorityPolicy.NONE
_PINNED_CLIENT: Final = PriorityPolicy.PINNED_CLIENT
_PRIORITIZED: Final = PriorityPolicy.PRIORITIZED


class PullDelivery(Delivery):
    """Delivery to waiting pull requests."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        cursor: Cursor,
        acks: AckTracker,
        stream: Stream,
        bell: Doorbell,
        adv: Advisories,
        on_inactive: Callable[[], None],
    ) -> None:
        super().__init__(cfg, cursor, acks, stream, bell, on_inactive)
        self.waiting = WaitQueue(cfg.max_waiting, self._mono())
        self.prio = Priority(cfg, cursor, acks, stream, adv, bell)
        self.lwqic = 0.0  # last processWaiting call (monotonic)
        self._wtmr: Cancellable | None = None
        self._wtmr_at = 0.0
        self._wr: WaitingRequest | None = None  # the request claim() chose

    def configure(self, cfg: ConsumerConfig, thresh: float) -> None:
        super().configure(cfg, thresh)
        self.prio.configure(cfg)

    # ------------------------------------------------------------------ the strategy
    def start(self) -> None:
        self.start_inactivity()

    def stop(self, deleted: bool) -> None:
        if deleted:
            for wr in list(self.waiting.q):
                self.send_status(wr.reply, CONSUMER_DELETED)
        self.waiting.q.clear()
        super().stop(deleted)
        self.prio.stop()
        if self._wtmr is not None:
            self._wtmr.cancel()
            self._wtmr = None

    def signal_shutdown(self) -> bool:
        """nats-server's ``signalPullConsumers``: every waiting request hears ``409 Server
        Shutdown`` before the server goes (a client then asks again once reconnected,
        instead of waiting on a request that died with the server). True when one did."""
        for wr in self.waiting.q:
            self.send_status(wr.reply, pending_status(409, "Server Shutdown", wr.n, wr.b))
        return bool(self.waiting.q)

    def ready(self) -> bool:
        return bool(self.waiting.q)

    def can_take(self) -> bool:
        return bool(self.waiting.q)

    def claim(self, sz: int) -> bytes | None:
        wr = self._next_waiting(sz)
        self._wr = wr
        return wr.reply if wr is not None else None

    def send(
        self,
        dsubj: bytes,
        subject: bytes,
        seq: int,
        ack_reply: bytes,
        hdr: bytes | None,
        data: bytes,
        sz: int,
    ) -> None:
        wr = self._wr
        assert wr is not None
        self._wr = None
        wrn, wrb = wr.n, wr.b
        pin = self.prio.pin_id
        if pin and self.cfg.priority_policy == _PINNED_CLIENT:
            hdr = add_pin_header(hdr, pin)
        if wrn > 0 and wr.hb:
            wr.hbt = self._mono() + wr.hb
        n = publish_as(self._sublist, dsubj, subject, ack_reply, hdr, data)
        if self.thresh > 0:
            self.waiting.last = self._mono()
        if n == 0:
            self._did_not_deliver(seq, dsubj)
        if wrn <= 0 and wrb > 0:
            self.send_status(dsubj, pending_status(409, "Batch Completed", wrn, wrb))

    def _did_not_deliver(self, seq: int, dsubj: bytes) -> None:
        acks = self._acks
        acks.undelivered(seq)
        self.process_waiting(False)
        wr = self.waiting.find(dsubj)
        if wr is not None:
            wr.n += 1
            wr.d -= 1
        if acks.redeliver_now(seq) and self.waiting.q:
            self._bell.ring()

    def idle(self, eos: bool) -> None:
        self.process_waiting(eos)
        self._arm_waiting_timer()

    def keep_alive(self) -> None:
        self.waiting.last = self._mono()

    def info(self, out: dict[str, Any]) -> None:
        self.process_waiting(False)
        out["num_waiting"] = len(self.waiting)

    def priority_groups(self) -> list[dict[str, Any]]:
        return self.prio.group_state()

    def unpin(self, group: str) -> None:
        self.prio.unpin(group, "admin")

    def _still_active(self) -> bool:
        wq = self.waiting
        elapsed = self._mono() - wq.last
        if elapsed < self.thresh:
            self._arm_inactivity(self.thresh - elapsed)
            return True
        self.process_waiting(True)
        if wq.q:
            self._arm_inactivity(self.thresh)
            return True
        delay = self._acks.deadline_after(self._now_ns(), int(self.thresh * 1e9))
        if delay > 0:
            self._arm_inactivity(delay / 1e9)
            return True
        return False

    # ------------------------------------------------------------------ requests
    def request(self, reply: bytes, data: bytes) -> None:
        """``processNextMsgRequest``: queue a pull request or answer it with a status."""
        if self._stopped:
            return
        wq = self.waiting
        try:
            req = parse_next_request(data)
        except ValueError as e:
            self.send_status(reply, status(400, f"Bad Request - {e}"))
            return
        cfg = self.cfg
        if cfg.max_batch > 0 and req.batch > cfg.max_batch:
            self.send_status(reply, status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"))
            return
        if req.expires and cfg.max_expires > 0 and req.expires > cfg.max_expires:
            text = f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires)}"
            self.send_status(reply, status(409, text))
            return
        if req.max_bytes > 0 and cfg.max_bytes > 0 and req.max_bytes > cfg.max_bytes:
            text = f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"
            self.send_status(reply, status(409, text))
            return
        refused = self.prio.check_request(req)
        if refused is not None:
            self.send_status(reply, status(*refused))
            return
        now = self._mono()
        if wq.is_full() and now - self.lwqic > 1.0:
            self.process_waiting(False)
        if req.no_wait:
            msgs_pending = self._cur.npc + len(self._acks.rdq)
            if msgs_pending <= 0 and req.expires == 0:
                wq.last = now
                self.send_status(reply, NO_MESSAGES)
                return
            if msgs_pending > 0:
                brp = self.process_waiting(False)
                if msgs_pending < brp:
                    wq.last = now
                    self.send_status(reply, REQUESTS_PENDING)
                    return
        wr = WaitingRequest(reply, req, now)
        added = wq.add_prioritized(wr) if cfg.priority_policy == _PRIORITIZED else wq.add(wr)
        if not added:
            if not req.heartbeat:
                self.send_status(reply, EXCEEDED_MAX_WAITING)
            return
        self._bell.ring()

    def process_waiting(self, eos: bool) -> int:
        """``processWaiting``: expire requests (``408``), end no-wait ones at the end of
        the stream (``404``), drop those nobody listens to, send due heartbeats. Returns
        the messages the remaining requests still want."""
        wq = self.waiting
        if not wq.q:
            return 0
        now = self._mono()
        self.lwqic = now
        has_interest = self._sublist.has_interest
        cur = self._cur
        brp = 0
        keep: deque[WaitingRequest] = deque()
        for wr in wq.q:
            expired = bool(wr.expires) and now > wr.expires
            if (eos and wr.no_wait) or expired:
                if expired:
                    self.send_status(wr.reply, pending_status(408, "Request Timeout", wr.n, wr.b))
                    continue
                if not wr.expires or wr.d > 0:
                    self.send_status(wr.reply, NO_MESSAGES)
                    continue
            if not has_interest(wr.reply):
                continue
            brp += wr.n
            if wr.hbt and now >= wr.hbt:
                self.send_status(wr.reply, heartbeat_header(cur.dseq - 1, cur.sseq - 1))
                wr.hbt = now + wr.hb
            keep.append(wr)
        wq.q = keep
        return brp

    def _next_waiting(self, sz: int) -> WaitingRequest | None:
        """``nextWaiting``: the request the next message (of ``sz`` bytes) goes to."""
        wq = self.waiting
        sl = self._sublist
        prio = self.prio
        policy = self.cfg.priority_policy
        need_new_pin = policy == _PINNED_CLIENT and not prio.pin_id
        cycled = 0
        while wq.q:
            wr = wq.q[0]
            if not wr.expires or self._mono() < wr.expires:
                pinned = False
                if policy != _PRIORITY_NONE:
                    verdict = prio.serve_check(wr, need_new_pin)
                    if verdict == CYCLE:
                        wq.cycle()
                        cycled += 1
                        if cycled >= len(wq):
                            return None
                        continue
                    if verdict == WRONG:
                        hdr = pending_status(423, "Nats-Wrong-Pin-Id", wr.n, wr.b)
                        self.send_status(wr.reply, hdr)
                        wq.remove_head()
                        continue
                    pinned = verdict == PINNED
                if wr.b > 0:
                    if sz <= wr.b:
                        wr.b -= sz
                        if wr.b == 0:
                            wr.n = 1
                    else:
                        hdr = pending_status(409, "Message Size Exceeds MaxBytes", wr.n, wr.b)
                        self.send_status(wr.reply, hdr)
                        if pinned:
                            prio.drop_pin()
                        wq.remove_head()
                        continue
                if wr.live_at == sl.removes or self._listens(wr):
                    return wq.pop_and_requeue() if policy == _PRIORITIZED else wq.pop()
            else:
                self.send_status(wr.reply, pending_status(408, "Request Timeout", wr.n, wr.b))
            wq.remove_head()
        return None

    def _listens(self, wr: WaitingRequest) -> bool:
        """``Sublist.has_interest`` for ``wr``'s reply, with a local subscriber remembered
        (``live_at``) so the request's next messages skip the match. Interest on a peer
        server is asked each time (its removals are not counted here)."""
        sl = self._sublist
        p, q = sl.match(wr.reply)
        if p or q:
            wr.live_at = sl.removes
            return True
        fwd = sl.forward
        return fwd is not None and fwd.has_interest(wr.reply)

    def _arm_waiting_timer(self) -> None:
        """Run ``process_waiting`` again at the next request expiry or heartbeat."""
        wq = self.waiting
        if not wq.q:
            if self._wtmr is not None:
                self._wtmr.cancel()
                self._wtmr = None
            return
        fexp = 0.0
        for wr in wq.q:
            for t in (wr.hbt, wr.expires):
                if t and (not fexp or t < fexp):
                    fexp = t
        if not fexp:
            return
        if self._wtmr is not None:
            if abs(self._wtmr_at - fexp) < 0.0005:
                return
            self._wtmr.cancel()
        self._wtmr_at = fexp
        self._wtmr = self._sched.call_later(max(fexp - self._mono(), 0.001), self._on_timer)

    def _on_timer(self) -> None:
        self._wtmr = None
        if self._stopped:
            return
        self.process_waiting(True)
        self._arm_waiting_timer()
        self._bell.ring()
