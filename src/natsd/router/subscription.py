"""Subscriptions and the sink interface a subscriber's connection offers the router.

The router never imports the connection layer: a client connection is any object that
satisfies ``Sink``. The fan-out loop appends encoded frames straight to ``sink.out`` and
calls ``sink.kick()`` only when the sink has no flush pending yet, because a method call
per message is the single largest cost of delivery in CPython.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["InternalCallback", "Sink", "Subscription"]


class Sink(Protocol):
    cid: int
    out: list[bytes]
    out_size: int
    flush_pending: bool
    headers: bool
    echo: bool
    # None unless the user has subscribe deny rules that must be checked per delivery.
    sub_deny: Callable[[bytes], bool] | None
    msgs_out: int
    bytes_out: int

    def kick(self) -> None:
        """Frames were appended to ``out`` and no flush is pending: schedule one."""

    def sub_exhausted(self, sub: Subscription) -> None:
        """A subscription reached its UNSUB max and must be removed."""


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

    def __repr__(self) -> str:
        q = f" queue={self.queue!r}" if self.queue else ""
        return f"<Subscription {self.subject!r}{q} sid={self.sid!r}>"
