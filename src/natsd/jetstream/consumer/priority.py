"""Priority groups of pull consumers (ADR-42), as nats-server 2.11+ runs them.

* ``overflow``: a request carrying ``min_pending`` / ``min_ack_pending`` is only served once
  the consumer has at least that many messages pending / unacknowledged; others are passed
  over (cycled to the back of the wait queue).
* ``pinned_client``: the first request of the group gets a pin id (``Nats-Pin-Id`` header on
  its messages, a ``PINNED`` advisory); from then on only requests carrying that id are
  served, requests with another id get ``423 Nats-Pin-Id mismatch`` / ``423
  Nats-Wrong-Pin-Id``. The pin is dropped when no request of the pinned client arrived for
  ``priority_timeout`` or by ``$JS.API.CONSUMER.UNPIN`` (``UNPINNED`` advisory).
* ``prioritized``: requests are served in ``priority`` order (0 first), FIFO within one.

Functions of a :class:`~natsd.jetstream.consumer.consumer.Consumer`; all on the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.jetstream.config.consumer_config import PriorityPolicy
from natsd.jetstream.consumer import advisory as adv

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer
    from natsd.jetstream.consumer.pull import NextRequest, WaitingRequest

__all__ = [
    "add_pin_header",
    "assign_pin",
    "check_request",
    "group_state",
    "serve_check",
    "unpin",
]

# Policy members compared per message, bound once: on Python 3.11 `PriorityPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module global is one dict lookup.
_PRIORITY_NONE: Final = PriorityPolicy.NONE
_OVERFLOW: Final = PriorityPolicy.OVERFLOW
_PINNED_CLIENT: Final = PriorityPolicy.PINNED_CLIENT

_nuid = Nuid()
PIN_HEADER = b"Nats-Pin-Id"


def check_request(c: Consumer, req: NextRequest) -> tuple[int, str] | None:
    """The request checks of ``processNextMsgRequest``: a refusal as (status, text)."""
    if req.group is None:  # not a JSON request: no priority fields
        return None
    pol = c.cfg.priority_policy
    if (req.min_pending or req.min_ack_pending) and pol != _OVERFLOW:
        return 400, "Bad Request - Not a Overflow Priority consumer"
    if req.pin_id and pol != _PINNED_CLIENT:
        return 400, "Bad Request - Not a Pinned Client Priority consumer"
    if not 0 <= req.priority <= 9:
        return 400, "Bad Request - Priority must be between 0 and 9"
    if pol != _PRIORITY_NONE:
        if not req.group:
            return 400, "Bad Request - Priority Group missing"
        if req.group not in c.cfg.priority_groups:
            return 400, "Bad Request - Invalid Priority Group"
        if c.pin_id:
            if req.pin_id == c.pin_id:
                _set_pin_timer(c, req.group)
            elif req.pin_id:
                return 423, "Nats-Pin-Id mismatch"
    return None


def serve_check(c: Consumer, wr: WaitingRequest, need_new_pin: bool) -> str:
    """What ``nextWaiting`` does with the head request before sizes and interest:
    ``"ok"``, ``"pinned"`` (it just got the pin), ``"cycle"`` (pass it over) or ``"wrong"``
    (refuse it with ``423 Nats-Wrong-Pin-Id``)."""
    pol = c.cfg.priority_policy
    verdict = "ok"
    if pol == _PINNED_CLIENT:
        if need_new_pin:
            if wr.group is None or not wr.pin_id:
                assign_pin(c, wr)
                verdict = "pinned"
            else:
                return "wrong"
        elif c.pin_id:
            if wr.group is not None and wr.pin_id == c.pin_id:
                pass
            elif wr.group is None or not wr.pin_id:
                return "cycle"
            else:
                return "wrong"
    elif (
        pol == _OVERFLOW
        and wr.group is not None
        and (wr.min_pending > 0 or wr.min_ack_pending > 0)
        and not (
            (wr.min_pending > 0 and wr.min_pending <= c.npc + 1)
            or (wr.min_ack_pending > 0 and wr.min_ack_pending <= len(c.pending))
        )
    ):
        return "cycle"
    return verdict


def assign_pin(c: Consumer, wr: WaitingRequest) -> None:
    """``assignNewPinId``: the request's client becomes the pinned one."""
    if wr.group is None or not wr.group:
        return
    c.pin_id = _nuid.next()
    c.pinned_ts = c.now_ns()
    wr.pin_id = c.pin_id
    _set_pin_timer(c, wr.group)
    adv.pinned(c, wr.group, c.pin_id)


def unpin(c: Consumer, group: str, reason: str) -> None:
    """Drop the pin (``unassignPinId``) and say so (``UNPINNED`` advisory)."""
    had = bool(c.pin_id)
    c.pin_id = ""
    c.pinned_ts = 0
    if c.pin_tmr is not None:
        c.pin_tmr.cancel()
        c.pin_tmr = None
    if had or reason == "admin":
        adv.unpinned(c, group, reason)
    c._signal()


def _set_pin_timer(c: Consumer, group: str) -> None:
    if c.pin_tmr is not None:
        c.pin_tmr.cancel()
    c.pin_tmr = c.sched.call_later(c.cfg.priority_timeout / 1e9, _pin_expired, c, group)


def _pin_expired(c: Consumer, group: str) -> None:
    c.pin_tmr = None
    if c.closed or not c.pin_id:
        return
    unpin(c, group, "timeout")


def add_pin_header(hdr: bytes | None, pin: str) -> bytes:
    """``genHeader``: the message's own headers plus ``Nats-Pin-Id``."""
    line = PIN_HEADER + b": " + pin.encode() + b"\r\n"
    if not hdr:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    return hdr[:-2] + line + b"\r\n"


def group_state(c: Consumer) -> list[dict[str, Any]]:
    """``priority_groups`` of CONSUMER.INFO (the first group, as nats-server reports)."""
    if not c.cfg.priority_groups:
        return []
    st: dict[str, Any] = {"group": c.cfg.priority_groups[0]}
    if c.pin_id:
        st["pinned_client_id"] = c.pin_id
    st["pinned_ts"] = rfc3339(c.pinned_ts) if c.pinned_ts else "0001-01-01T00:00:00Z"
    return [st]
