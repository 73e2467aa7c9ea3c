"""Push delivery (:class:`PushDelivery`): deliver-subject interest, idle heartbeats, flow
control.

nats-server watches the account's sublist for interest in a push consumer's deliver
subject. natsd's router has no interest notifications, so a push consumer polls: quickly
(5 ms doubling up to 100 ms) while nobody listens, once a second while bound. A failed
delivery (no subscriber took it) also marks the consumer inactive at once. As in nats-server,
only subscriptions on exactly the deliver subject (and, with a deliver group, a queue
subscription of that group) bind a push consumer; wildcard subscribers still receive what
is delivered but do not make the consumer active.

Flow control (``flow_control: true``): after half a window of bytes the server sends a
``100 FlowControl Request`` with a reply subject ``$JS.FC.<stream>.<consumer>.<id>``;
delivery stops once a full window is outstanding until the client answers. The window starts
at 2 MB and doubles with every answer up to 32 MB (``JsFlowControlMaxPending``). While
stalled, idle heartbeats carry ``Nats-Consumer-Stalled: <reply>``.

``ack_policy: flow_control`` (nats-server 2.14, what its durable sourcing uses): the answers
are the acknowledgements. An answer with ``Nats-Last-Stream`` (and ``Nats-Last-Consumer``)
acknowledges everything up to that stream sequence, as an ``ack_policy: all`` ack would;
the server asks once ``max_ack_pending`` messages are out, and at an idle heartbeat while
any are, besides the byte window. Only the latest request's answer counts.

Rules kept here: ``active``, the deliver subject, the flow-control window and outstanding
request (``pbytes``, ``maxpb``, ``pblimit``, ``fcsz``, ``fcid``), ``last_send`` and the
interest-watch and heartbeat timers are written only by the strategy; the inactivity timer
(inherited from ``Delivery``) runs only while nobody listens. ``stop()`` cancels all three
timers and leaves the flow-control subscription. Everything runs on the event loop.
"""

from __future__ import annotations

import logging
import random
import string
from collections.abc import Callable
from typing import Any, Final

from natsd.core.headers import slice_header
from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import AckPolicy, ConsumerConfig
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.delivery import Delivery
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.waiting import CONSUMER_IS_PUSH, heartbeat_header
from natsd.jetstream.stream.stream import Stream
from natsd.router.publish import publish, publish_as
from natsd.router.subscription import Subscription

__all__ = ["FLOW_CONTROL_MAX_PENDING", "PushDelivery"]

log: Final = logging.getLogger("natsd")

# Not Final: tests lower it (a Final would be compiled in).
FLOW_CONTROL_MAX_PENDING = 32 * 1024 * 1024  # JsFlowControlMaxPending
POLL_MIN: Final = 0.005
POLL_MAX: Final = 0.1
POLL_BOUND: Final = 1.0
FC_REQUEST: Final = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_ALNUM: Final = string.ascii_letters + string.digits


class PushDelivery(Delivery):
    """Delivery to a push consumer's deliver subject."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        cursor: Cursor,
        acks: AckTracker,
        stream: Stream,
        bell: Doorbell,
        name: str,
        on_inactive: Callable[[], None],
    ) -> None:
        super().__init__(cfg, cursor, acks, stream, bell, on_inactive)
        self._name = name
        self.active = False
        self.dsubj = cfg.deliver_subject.encode()
        self.pbytes = 0
        self.maxpb = 0
        self.pblimit = 0
        self.fcsz = 0
        self.fcid: bytes = b""
        self._ack_fc = cfg.ack_policy == AckPolicy.FLOW_CONTROL
        self.last_send = 0.0  # monotonic time of the last push send (heartbeats)
        self._fc_pre = "$JS.FC." + stream.name + "." + name + "."
        self._fc_sub: Subscription | None = None
        self._hbtmr: Cancellable | None = None
        self._itmr: Cancellable | None = None
        self._itmr_delay = 0.0

    # ------------------------------------------------------------------ the strategy
    def start(self) -> None:
        cfg = self.cfg
        if cfg.flow_control:
            self.pblimit = FLOW_CONTROL_MAX_PENDING
            self.maxpb = max(self.pblimit // 16, 1)
            self._fc_sub = Subscription(
                (self._fc_pre + "*").encode(), None, b"fc", callback=self._on_fc
            )
            self._sublist.insert(self._fc_sub)
        self.last_send = self._mono()
        self.active = self.has_interest()
        if not self.active and self.thresh > 0:
            self._arm_inactivity(self.thresh)
        self._itmr_delay = POLL_MIN
        self._schedule_watch()
        if cfg.idle_heartbeat > 0:
            self._hbtmr = self._sched.call_later(cfg.idle_heartbeat / 1e9, self._on_heartbeat)

    def stop(self, deleted: bool) -> None:
        super().stop(deleted)
        if self._fc_sub is not None:
            self._sublist.remove(self._fc_sub)
            self._fc_sub = None
        for t in (self._hbtmr, self._itmr):
            if t is not None:
                t.cancel()
        self._hbtmr = self._itmr = None

    def ready(self) -> bool:
        return self.active

    def can_take(self) -> bool:
        return self.active and not (self.maxpb > 0 and self.pbytes > self.maxpb)

    def before_run(self) -> None:
        if self.active and not self.has_interest():
            # nats-server drops delivery interest synchronously when the last subscriber on
            # the deliver subject goes; the watcher polls only once a second while bound, so
            # look before delivering rather than deliver to nobody (the message would count
            # as delivered and wait out ack_wait instead of staying pending).
            self.update_interest(False)
        self.lane = self._lane() if self.active else None

    def _lane(self) -> Subscription | None:
        """The deliver subject's one subscriber, when it takes messages as stored (a
        mirror's feed on this server) and nothing else would receive them: no other
        subscriber, no queue group, no route (on a cluster every delivery takes the
        routed path, which peers may want). Looked up once per run of the loop; a
        subscriber that comes meanwhile sees the next run's messages."""
        sl = self._sublist
        if sl.forward is not None or self.cfg.headers_only:
            return None
        psubs, qsubs = sl.match(self.dsubj)
        if qsubs or len(psubs) != 1:
            return None
        sub = psubs[0]
        return sub if sub.take is not None else None

    def sent_inside(self, sz: int) -> None:
        """A message of ``sz`` bytes went down the lane (``send``'s accounting)."""
        self.last_send = self._mono()
        if self.maxpb > 0:
            self.pbytes += sz
            self._maybe_flow_control(sz)

    def claim(self, sz: int) -> bytes | None:
        return self.dsubj

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
        n = publish_as(self._sublist, dsubj, subject, ack_reply, hdr, data)
        self.last_send = self._mono()
        if self.maxpb > 0:
            self.pbytes += sz
            self._maybe_flow_control(sz)
        if n == 0:
            self._acks.undelivered(seq)
            self.update_interest(self.has_interest())

    def request(self, reply: bytes, data: bytes) -> None:
        if not self._stopped:
            self.send_status(reply, CONSUMER_IS_PUSH)

    def keep_alive(self) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
            self._arm_inactivity(self.thresh)

    def info(self, out: dict[str, Any]) -> None:
        if self.active and not self.has_interest():
            # Losing the subscriber shows at once (nats-server hears of it synchronously).
            self.update_interest(False)
        if self.active:
            out["push_bound"] = True

    def _still_active(self) -> bool:
        return self.active

    # ------------------------------------------------------------------ interest
    def has_interest(self) -> bool:
        """Is someone subscribed on exactly the deliver subject (in the deliver group)?"""
        dsubj = self.dsubj
        sl = self._sublist
        psubs, qsubs = sl.match(dsubj)
        if self.cfg.deliver_group:
            group = self.cfg.deliver_group.encode()
            if any(s.queue == group and s.subject == dsubj for grp in qsubs for s in grp):
                return True
            return sl.forward is not None and sl.forward.has_exact(dsubj, group)
        if any(s.subject == dsubj for s in psubs):
            return True
        if any(s.subject == dsubj for grp in qsubs for s in grp):
            return True
        # on a cluster, the subscriber may be a client of another server
        return sl.forward is not None and sl.forward.has_exact(dsubj, None)

    def update_interest(self, interest: bool) -> None:
        """``updateDeliveryInterest``: (de)activate and run the inactivity timer."""
        if self._stopped:
            return
        if interest and not self.active:
            self._bell.ring()
        self.active = interest
        if not interest and (self._itmr is None or self._itmr_delay >= POLL_BOUND):
            self._itmr_delay = POLL_MIN
            self._schedule_watch()
        if self._dtmr is not None and self.thresh > 0 and not interest:
            return
        self.stop_inactivity()
        if not interest and self.thresh > 0:
            self._arm_inactivity(self.thresh)

    def _schedule_watch(self) -> None:
        if self._itmr is not None:
            self._itmr.cancel()
        delay = POLL_BOUND if self.active else self._itmr_delay
        self._itmr = self._sched.call_later(delay, self._watch)

    def _watch(self) -> None:
        self._itmr = None
        if self._stopped:
            return
        interest = self.has_interest()
        if interest != self.active:
            self.update_interest(interest)
        if self.active:
            self._itmr_delay = POLL_BOUND
        else:
            self._itmr_delay = min(max(self._itmr_delay * 2, POLL_MIN), POLL_MAX)
        if not self._watching():
            self._schedule_watch()

    def _watching(self) -> bool:
        # A method, not ``self._itmr is None`` inline in _watch: mypy keeps the narrowing of
        # ``self._itmr = None`` across the update_interest call, so mypyc compiled that read
        # as a check for None and raised TypeError when update_interest had re-armed it.
        return self._itmr is not None

    def change_deliver_subject(self, new: str) -> None:
        """A durable push consumer was re-bound to another deliver subject: everything
        pending is redelivered there."""
        if self._stopped or not self.cfg.deliver_subject or new == self.cfg.deliver_subject:
            return
        if self._acks.pending:
            self._acks.force_expire()
        self.dsubj = new.encode()
        self.cfg.deliver_subject = new
        # As in nats-server the new subject's interest is noticed asynchronously (the
        # watcher polls within milliseconds), not in the update's own response.
        self.active = False
        self._itmr_delay = POLL_MIN
        self._schedule_watch()
        self._bell.ring()

    # ------------------------------------------------------------------ heartbeats
    def _on_heartbeat(self) -> None:
        self._hbtmr = None
        if self._stopped:
            return
        hb = self.cfg.idle_heartbeat / 1e9
        now = self._mono()
        idle = now - self.last_send
        if idle < hb:
            self._hbtmr = self._sched.call_later(hb - idle, self._on_heartbeat)
            return
        if self.active:
            cur = self._cur
            hdr = heartbeat_header(cur.dseq - 1, cur.sseq - 1, self.fcid)
            if self.send_status(self.dsubj, hdr) == 0:
                self.update_interest(self.has_interest())
            elif self._ack_fc and self._acks.pending and not self.fcid:
                # acknowledged only through flow control: ask for what is out
                self._send_flow_control()
        self.last_send = now
        self._hbtmr = self._sched.call_later(hb, self._on_heartbeat)

    # ------------------------------------------------------------------ flow control
    def _maybe_flow_control(self, sz: int) -> None:
        """``needFlowControl`` after a delivery of ``sz`` bytes."""
        if not self.fcid and (
            self.pbytes > self.maxpb // 2 or (self._ack_fc and self._acks.full())
        ):
            self._send_flow_control()
        elif self.fcid and (self.pbytes - self.fcsz) >= self.maxpb:
            self.fcsz += sz

    def _send_flow_control(self) -> None:
        reply = (self._fc_pre + "".join(random.choices(_ALNUM, k=4))).encode()
        self.fcsz, self.fcid = self.pbytes, reply
        publish(self._sublist, self.dsubj, reply, FC_REQUEST, b"")

    def _on_fc(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        try:
            self._on_flow_control(subject, hdr)
        except Exception:
            log.exception(
                "consumer %s > %s: flow control reply failed", self._stream.name, self._name
            )

    def _on_flow_control(self, subject: bytes, hdr: bytes | None) -> None:
        if self._stopped or subject != self.fcid:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = b"", 0
        self._bell.ring()
        if self._ack_fc and hdr:
            sseq = _int_header(hdr, b"Nats-Last-Stream")
            if sseq > 0:
                # (a consumer sequence may be absent: an answer before any delivery)
                self._acks.ack(sseq, max(_int_header(hdr, b"Nats-Last-Consumer"), 0), 1, b"", False)


def _int_header(hdr: bytes, key: bytes) -> int:
    """``parseInt64(sliceHeader(key, hdr))``: -1 when absent or not a plain number."""
    v = slice_header(hdr, key)
    return int(v) if v is not None and v.isdigit() and len(v) < 19 else -1
