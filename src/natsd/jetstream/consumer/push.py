"""Push consumers: deliver-subject interest, idle heartbeats and flow control.

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
"""

from __future__ import annotations

import logging
import random
import string
from typing import TYPE_CHECKING, Final

from natsd.jetstream.consumer.pull import heartbeat_header
from natsd.router.publish import publish
from natsd.router.subscription import Subscription

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = [
    "change_deliver_subject",
    "has_interest",
    "maybe_flow_control",
    "start",
    "update_interest",
]

log: Final = logging.getLogger("natsd")

# Not Final: tests lower it (a Final would be compiled in).
FLOW_CONTROL_MAX_PENDING = 32 * 1024 * 1024  # JsFlowControlMaxPending
POLL_MIN: Final = 0.005
POLL_MAX: Final = 0.1
POLL_BOUND: Final = 1.0
FC_REQUEST: Final = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
_ALNUM: Final = string.ascii_letters + string.digits


def start(c: Consumer) -> None:
    cfg = c.cfg
    if cfg.flow_control:
        c.pblimit = FLOW_CONTROL_MAX_PENDING
        c.maxpb = max(c.pblimit // 16, 1)

        def on_fc(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
        ) -> None:
            try:
                _on_flow_control(c, subject)
            except Exception:
                log.exception("consumer %s > %s: flow control reply failed", c.stream.name, c.name)

        c.fc_sub = Subscription((c.fc_pre + "*").encode(), None, b"fc", callback=on_fc)
        c._sublist.insert(c.fc_sub)
    c.last_send = c.mono()
    c.active = has_interest(c)
    if not c.active and c.dthresh > 0:
        c.dtmr = c.sched.call_later(c.dthresh, c._delete_not_active)
    c.itmr_delay = POLL_MIN
    _schedule_watch(c)
    if cfg.idle_heartbeat > 0:
        c.hbtmr = c.sched.call_later(cfg.idle_heartbeat / 1e9, _on_heartbeat, c)


def has_interest(c: Consumer) -> bool:
    """Is someone subscribed on exactly the deliver subject (in the deliver group)?"""
    dsubj = c.dsubj
    psubs, qsubs = c._sublist.match(dsubj)
    if c.cfg.deliver_group:
        group = c.cfg.deliver_group.encode()
        return any(s.queue == group and s.subject == dsubj for grp in qsubs for s in grp)
    if any(s.subject == dsubj for s in psubs):
        return True
    return any(s.subject == dsubj for grp in qsubs for s in grp)


def update_interest(c: Consumer, interest: bool) -> None:
    """``updateDeliveryInterest``: (de)activate and run the inactivity timer."""
    if c.closed:
        return
    if interest and not c.active:
        c._signal()
    c.active = interest
    if not interest and (c.itmr is None or c.itmr_delay >= POLL_BOUND):
        c.itmr_delay = POLL_MIN
        _schedule_watch(c)
    if c.dtmr is not None and c.dthresh > 0 and not interest:
        return
    if c.dtmr is not None:
        c.dtmr.cancel()
        c.dtmr = None
    if not interest and c.dthresh > 0:
        c.dtmr = c.sched.call_later(c.dthresh, c._delete_not_active)


def _schedule_watch(c: Consumer) -> None:
    if c.itmr is not None:
        c.itmr.cancel()
    delay = POLL_BOUND if c.active else c.itmr_delay
    c.itmr = c.sched.call_later(delay, _watch, c)


def _watch(c: Consumer) -> None:
    c.itmr = None
    if c.closed:
        return
    interest = has_interest(c)
    if interest != c.active:
        update_interest(c, interest)
    if c.active:
        c.itmr_delay = POLL_BOUND
    else:
        c.itmr_delay = min(max(c.itmr_delay * 2, POLL_MIN), POLL_MAX)
    if not _watching(c):
        _schedule_watch(c)


def _watching(c: Consumer) -> bool:
    # A function, not ``c.itmr is None`` inline in _watch: mypy keeps the narrowing of
    # ``c.itmr = None`` across the update_interest call, so mypyc compiled that read as a
    # check for None and raised TypeError when update_interest had re-armed the watcher.
    return c.itmr is not None


def _on_heartbeat(c: Consumer) -> None:
    c.hbtmr = None
    if c.closed:
        return
    hb = c.cfg.idle_heartbeat / 1e9
    now = c.mono()
    idle = now - c.last_send
    if idle < hb:
        c.hbtmr = c.sched.call_later(hb - idle, _on_heartbeat, c)
        return
    if c.active:
        hdr = heartbeat_header(c.dseq - 1, c.sseq - 1, c.fcid)
        if c.send(c.dsubj, b"", hdr) == 0:
            update_interest(c, has_interest(c))
    c.last_send = now
    c.hbtmr = c.sched.call_later(hb, _on_heartbeat, c)


def maybe_flow_control(c: Consumer, sz: int) -> None:
    """``needFlowControl`` after a delivery of ``sz`` bytes."""
    if not c.fcid and c.pbytes > c.maxpb // 2:
        send_flow_control(c)
    elif c.fcid and (c.pbytes - c.fcsz) >= c.maxpb:
        c.fcsz += sz


def send_flow_control(c: Consumer) -> None:
    reply = (c.fc_pre + "".join(random.choices(_ALNUM, k=4))).encode()
    c.fcsz, c.fcid = c.pbytes, reply
    publish(c._sublist, c.dsubj, reply, FC_REQUEST, b"")


def _on_flow_control(c: Consumer, subject: bytes) -> None:
    if c.closed or subject != c.fcid:
        return
    if c.maxpb < c.pblimit:
        c.maxpb = min(c.maxpb * 2, c.pblimit)
    c.pbytes = max(c.pbytes - c.fcsz, 0)
    c.fcid, c.fcsz = b"", 0
    c._signal()


def change_deliver_subject(c: Consumer, new: str) -> None:
    """A durable push consumer was re-bound to another deliver subject: everything
    pending is redelivered there."""
    if c.closed or not c.cfg.deliver_subject or new == c.cfg.deliver_subject:
        return
    if c.pending:
        c.force_expire_pending()
    c.dsubj = new.encode()
    c.cfg.deliver_subject = new
    # As in nats-server the new subject's interest is noticed asynchronously (the watcher
    # polls within milliseconds), not in the update's own response.
    c.active = False
    c.itmr_delay = POLL_MIN
    _schedule_watch(c)
    c._signal()
