"""How a consumer's messages reach clients: the ``Delivery`` strategy, pull or push.

A consumer is pull (``PullDelivery``, ``pull``: messages answer waiting pull requests) or
push (``PushDelivery``, ``push``: messages go to the deliver subject while someone listens),
chosen once when it is built; nats-server refuses an update that would change which. The
consumer's delivery loop asks its strategy the same questions either way:

=====================  ========================================  ==============================
call                   pull                                      push
=====================  ========================================  ==============================
``ready()``            a request is waiting                      the deliver subject is bound
``can_take()``         same                                      bound, flow control not full
``claim(sz)``          the next request's reply subject or None  the deliver subject
``send(...)``          publish; pin header, batch completion     publish; flow control
``idle(eos)``          expire / heartbeat requests, arm timer    (nothing)
``request(...)``       queue a pull request                      ``409 Consumer is push based``
``keep_alive()``       an ack counts as a request (inactivity)   an ack restarts the timer
=====================  ========================================  ==============================

Rules kept here: a strategy owns the fields and timers of its way of delivering (pull: the
wait queue, request expiry and heartbeats, priority groups; push: interest, flow control,
heartbeats) and the inactivity timer (``inactive_threshold``), whose rule differs; ``stop()``
cancels all of them. It reads the cursor and the ack tracker, and changes the tracker only
through its methods. Everything runs on the event loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from natsd.core.scheduler import Cancellable
from natsd.jetstream.config.consumer_config import DELETE_WAIT_DEFAULT, ConsumerConfig
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.stream.stream import Stream
from natsd.router.publish import publish
from natsd.router.subscription import Subscription

__all__ = ["Delivery", "inactive_threshold"]


def inactive_threshold(cfg: ConsumerConfig) -> float:
    """``updateInactiveThreshold``: seconds of inactivity before the consumer is deleted
    (0: never). Ephemerals always get one (5s default, stamped into the config); pull
    consumers get up to a second of jitter."""
    jitter = 0.1 + random.random() * 0.9
    if not cfg.durable_name and cfg.inactive_threshold <= 0:
        cfg.inactive_threshold = DELETE_WAIT_DEFAULT
        return DELETE_WAIT_DEFAULT / 1e9 + jitter
    if cfg.inactive_threshold > 0:
        base = cfg.inactive_threshold / 1e9
        return base + jitter if not cfg.deliver_subject else base
    return 0.0


class Delivery:
    """What the delivery loop needs of pull or push delivery (see the module docstring);
    also the inactivity timer both share."""

    def __init__(
        self,
        cfg: ConsumerConfig,
        cursor: Cursor,
        acks: AckTracker,
        stream: Stream,
        bell: Doorbell,
        on_inactive: Callable[[], None],
    ) -> None:
        self.cfg = cfg
        self._cur = cursor
        self._acks = acks
        self._stream = stream
        self._bell = bell
        self._sublist = stream.sublist
        self._sched = stream.scheduler
        self._now_ns: Callable[[], int] = stream.clock.time_ns
        self._mono: Callable[[], float] = stream.clock.monotonic
        self._on_inactive = on_inactive  # deletes the consumer
        self.thresh = 0.0  # inactive_threshold in seconds, 0: never deleted for it
        self._dtmr: Cancellable | None = None
        self._stopped = False
        # For this run of the delivery loop: the one subscriber of a push consumer that
        # takes messages as stored (``Subscription.take``), or None (``before_run``)
        self.lane: Subscription | None = None

    def configure(self, cfg: ConsumerConfig, thresh: float) -> None:
        """The consumer's config, at creation and after an update."""
        self.cfg = cfg
        self.thresh = thresh

    def send_status(self, subject: bytes, hdr: bytes) -> int:
        """A status message (no payload) to a client."""
        return publish(self._sublist, subject, None, hdr, b"")

    # ------------------------------------------------------------------ the strategy
    def start(self) -> None:
        raise NotImplementedError

    def stop(self, deleted: bool) -> None:
        """Stop delivering and cancel every timer (``deleted``: tell waiting clients)."""
        self._stopped = True
        self.stop_inactivity()

    def ready(self) -> bool:
        """Someone waits for messages: a stored one should wake the loop."""
        raise NotImplementedError

    def can_take(self) -> bool:
        """The loop may deliver one more message now."""
        raise NotImplementedError

    def before_run(self) -> None:
        """Called once as a run of the delivery loop starts."""

    def claim(self, sz: int) -> bytes | None:
        """The subject the next message (``sz`` bytes) goes to; None: nobody can take it."""
        raise NotImplementedError

    def sent_inside(self, sz: int) -> None:
        """A message of ``sz`` bytes was handed to the ``lane`` subscriber."""

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
        """Publish stream message ``seq`` to the claimed ``dsubj`` (already tracked as
        delivered) and handle a delivery nobody received."""
        raise NotImplementedError

    def idle(self, eos: bool) -> None:
        """The loop stopped (``eos``: not because of max_ack_pending)."""

    def request(self, reply: bytes, data: bytes) -> None:
        """A pull request (``$JS.API.CONSUMER.MSG.NEXT`` or ``+NXT``)."""
        raise NotImplementedError

    def keep_alive(self) -> None:
        """An ack arrived: the consumer is in use (inactive_threshold)."""
        raise NotImplementedError

    def info(self, out: dict[str, Any]) -> None:
        """Add the strategy's fields to CONSUMER.INFO."""

    def priority_groups(self) -> list[dict[str, Any]]:
        """``priority_groups`` of CONSUMER.INFO."""
        return []

    def unpin(self, group: str) -> None:
        """``$JS.API.CONSUMER.UNPIN``."""

    def has_interest(self) -> bool:
        """A push consumer's deliver subject has a subscriber now (never for pull)."""
        return False

    def change_deliver_subject(self, new: str) -> None:
        """A config update moved a push consumer to another deliver subject."""

    # ------------------------------------------------------------------ inactivity
    def stop_inactivity(self) -> None:
        """Cancel the inactivity timer (``inactive_threshold`` is being changed)."""
        if self._dtmr is not None:
            self._dtmr.cancel()
            self._dtmr = None

    def start_inactivity(self) -> None:
        """Arm the inactivity timer for a full threshold (when there is one)."""
        if self.thresh > 0:
            self._arm_inactivity(self.thresh)

    def _arm_inactivity(self, delay: float) -> None:
        self._dtmr = self._sched.call_later(delay, self._inactivity_timer)

    def _inactivity_timer(self) -> None:
        """``deleteNotActive``: remove an inactive consumer, unless it proved alive."""
        self._dtmr = None
        if self._stopped:
            return
        if self._still_active():
            return
        self._on_inactive()

    def _still_active(self) -> bool:
        """Whether the consumer proved alive (re-arming the timer when it must look
        again); False deletes it."""
        raise NotImplementedError
