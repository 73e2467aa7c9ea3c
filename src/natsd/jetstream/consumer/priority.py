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

Rules kept here (:class:`Priority`, owned by the consumer's ``PullDelivery``): the pin
(``pin_id``, ``pinned_ts``) and its timer are written only here; the pin timer restarts with
every request of the pinned client and is cancelled by ``unpin`` and ``stop``. It reads the
cursor's pending count and the ack tracker's pending acks for the overflow rule. All on the
event loop.
"""

from __future__ import annotations

from typing import Any, Final

from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import ConsumerConfig, PriorityPolicy
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.waiting import NextRequest, WaitingRequest
from natsd.jetstream.stream.stream import Stream

__all__ = [
    "CYCLE",
    "OK",
    "PINNED",
    "WRONG",
    "Priority",
    "add_pin_header",
]

# Policy members compared per message, bound once: on Python 3.11 `PriorityPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_PRIORITY_NONE: Final = PriorityPolicy.NONE
_OVERFLOW: Final = PriorityPolicy.OVERFLOW
_PINNED_CLIENT: Final = PriorityPolicy.PINNED_CLIENT

# What nextWaiting does with the head request (Priority.serve_check).
OK: Final = "ok"  # serve it
PINNED: Final = "pinned"  # serve it: its client just got the pin
CYCLE: Final = "cycle"  # pass it over for now
WRONG: Final = "wrong"  # refuse it with 423 Nats-Wrong-Pin-Id

_nuid = Nuid()
PIN_HEADER = b"Nats-Pin-Id"


class Priority:
    """The priority groups of one pull consumer: the pin and the overflow rule."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        cursor: Cursor,
        acks: AckTracker,
        stream: Stream,
        adv: Advisories,
        bell: Doorbell,
    ) -> None:
        self.cfg = cfg
        self._cur = cursor
        self._acks = acks
        self._sched = stream.scheduler
        self._now_ns = stream.clock.time_ns
        self._adv = adv
        self._bell = bell
        self.pin_id = ""
        self.pinned_ts = 0
        self._pin_tmr: Cancellable | None = None
        self._stopped = False

    def configure(self, cfg: ConsumerConfig) -> None:
        """The consumer's config, at creation and after an update."""
        self.cfg = cfg

    def stop(self) -> None:
        self._stopped = True
        if self._pin_tmr is not None:
            self._pin_tmr.cancel()
            self._pin_tmr = None

    def check_request(self, req: NextRequest) -> tuple[int, str] | None:
        """The request checks of ``processNextMsgRequest``: a refusal as (status, text)."""
        if req.group is None:  # not a JSON request: no priority fields
            return None
        pol = self.cfg.priority_policy
        if (req.min_pending or req.min_ack_pending) and pol != _OVERFLOW:
            return 400, "Bad Request - Not a Overflow Priority consumer"
        if req.pin_id and pol != _PINNED_CLIENT:
            return 400, "Bad Request - Not a Pinned Client Priority consumer"
        if not 0 <= req.priority <= 9:
            return 400, "Bad Request - Priority must be between 0 and 9"
        if pol != _PRIORITY_NONE:
            if not req.group:
                return 400, "Bad Request - Priority Group missing"
            if req.group not in self.cfg.priority_groups:
                return 400, "Bad Request - Invalid Priority Group"
            if self.pin_id:
                if req.pin_id == self.pin_id:
                    self._set_pin_timer(req.group)
                elif req.pin_id:
                    return 423, "Nats-Pin-Id mismatch"
        return None

    def serve_check(self, wr: WaitingRequest, need_new_pin: bool) -> str:
        """What ``nextWaiting`` does with the head request before sizes and interest:
        ``OK``, ``PINNED`` (it just got the pin), ``CYCLE`` (pass it over) or ``WRONG``
        (refuse it with ``423 Nats-Wrong-Pin-Id``)."""
        pol = self.cfg.priority_policy
        verdict = OK
        if pol == _PINNED_CLIENT:
            if need_new_pin:
                if wr.group is None or not wr.pin_id:
                    self._assign_pin(wr)
                    verdict = PINNED
                else:
                    return WRONG
            elif self.pin_id:
                if wr.group is not None and wr.pin_id == self.pin_id:
                    pass
                elif wr.group is None or not wr.pin_id:
                    return CYCLE
                else:
                    return WRONG
        elif (
            pol == _OVERFLOW
            and wr.group is not None
            and (wr.min_pending > 0 or wr.min_ack_pending > 0)
            and not (
                (wr.min_pending > 0 and wr.min_pending <= self._cur.npc + 1)
                or (wr.min_ack_pending > 0 and wr.min_ack_pending <= len(self._acks.pending))
            )
        ):
            return CYCLE
        return verdict

    def _assign_pin(self, wr: WaitingRequest) -> None:
        """``assignNewPinId``: the request's client becomes the pinned one."""
        if wr.group is None or not wr.group:
            return
        self.pin_id = _nuid.next()
        self.pinned_ts = self._now_ns()
        wr.pin_id = self.pin_id
        self._set_pin_timer(wr.group)
        self._adv.pinned(wr.group, self.pin_id)

    def drop_pin(self) -> None:
        """The request that just got the pin could not be served: no pin (its timer runs
        out on its own)."""
        self.pin_id = ""
        self.pinned_ts = 0

    def unpin(self, group: str, reason: str) -> None:
        """Drop the pin (``unassignPinId``) and say so (``UNPINNED`` advisory)."""
        had = bool(self.pin_id)
        self.pin_id = ""
        self.pinned_ts = 0
        if self._pin_tmr is not None:
            self._pin_tmr.cancel()
            self._pin_tmr = None
        if had or reason == "admin":
            self._adv.unpinned(group, reason)
        self._bell.ring()

    def _set_pin_timer(self, group: str) -> None:
        if self._pin_tmr is not None:
            self._pin_tmr.cancel()
        self._pin_tmr = self._sched.call_later(
            self.cfg.priority_timeout / 1e9, self._pin_expired, group
        )

    def _pin_expired(self, group: str) -> None:
        self._pin_tmr = None
        if self._stopped or not self.pin_id:
            return
        self.unpin(group, "timeout")

    def group_state(self) -> list[dict[str, Any]]:
        """``priority_groups`` of CONSUMER.INFO (the first group, as nats-server reports)."""
        if not self.cfg.priority_groups:
            return []
        st: dict[str, Any] = {"group": self.cfg.priority_groups[0]}
        if self.pin_id:
            st["pinned_client_id"] = self.pin_id
        st["pinned_ts"] = rfc3339(self.pinned_ts) if self.pinned_ts else "0001-01-01T00:00:00Z"
        return [st]


def add_pin_header(hdr: bytes | None, pin: str) -> bytes:
    """``genHeader``: the message's own headers plus ``Nats-Pin-Id``."""
    line = PIN_HEADER + b": " + pin.encode() + b"\r\n"
    if not hdr:
        return b"NATS/1.0\r\n" + line + b"\r\n"
    return hdr[:-2] + line + b"\r\n"
