"""Subscriptions and the sink interface a subscriber's connection offers the router.

The router never imports the connection layer: a client connection is any object that
satisfies ``Sink``. The fan-out loop appends encoded frames straight to ``sink.out`` and
calls ``sink.kick()`` only when the sink has no flush pending yet, because a method call
per message is the single largest cost of delivery in CPython.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["InternalCallback", "Sink", "Subscription"]


class Sink:
    """The outbound side of a subscriber, as the fan-out loop sees it.

    A concrete base class rather than a Protocol: under mypyc, attribute access on a native
    class is a struct field read, while a Protocol forces a dictionary lookup per access,
    and the fan-out loop touches these fields for every delivered message.
    """

    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.out: list[bytes] = []
        self.out_size = 0
        self.flush_pending = False
        self.headers = False
        self.echo = True
        # None unless the user has subscribe deny rules that must be checked per delivery.
        self.sub_deny: Callable[[bytes], bool] | None = None
        # None unless the user has allow_responses: told each reply subject delivered to
        # this subscriber, which may then publish a response there.
        self.track_reply: Callable[[bytes], None] | None = None
        self.msgs_out = 0
        self.bytes_out = 0
        # Publishes in a row that went to one route peer and nowhere else (cluster/forward.py
        # counts them for a worker to move the connection to that peer).
        self.route_hits = 0

    def kick(self) -> None:
        """Frames were appended to ``out`` and no flush is pending: schedule one."""
        raise NotImplementedError

    def sub_exhausted(self, sub: Subscription) -> None:
        """A subscription reached its UNSUB max and must be removed."""
        raise NotImplementedError


# (sub, subject, reply, headers | None, payload)
InternalCallback = Callable[["Subscription", bytes, bytes | None, bytes | None, bytes], None]


class Subscription:
    __slots__ = (
        "callback",
        "client",
        "delivered",
        "max",
        "queue",
        "sid",
        "subject",
        "take",
    )

    def __init__(
        self,
        subject: bytes,
        queue: bytes | None,
        sid: bytes,
        client: Sink | None = None,
        callback: InternalCallback | None = None,
    ) -> None:
        self.subject = subject
        self.queue = queue
        self.sid = sid
        self.client = client
        self.callback = callback
        self.max = 0
        self.delivered = 0
        # An internal subscriber that takes a JetStream consumer's messages as stored,
        # without the reply subject made and read back (a mirror's feed on the origin's
        # server: ``(sub, consumer's ack prefix, message, delivery count, delivery
        # sequence, pending)``); None for every other kind.
        self.take: Callable[[Subscription, bytes, Any, int, int, int], None] | None = None

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription {self.subject!r}{q} sid={self.sid!r}>"
