"""Pull requests: the parsed request, the queue of waiting requests, the status messages.

Modelled on nats-server's ``JSApiConsumerGetNextRequest``, ``waitingRequest`` and
``waitQueue``. Deliveries go to the request at the head of the queue, and a request that
still wants more moves to the tail, so concurrent fetchers share messages round-robin
(``prioritized`` consumers keep the queue in priority order instead). Requests end with a
status message exactly as nats-server sends them::

    NATS/1.0 404 No Messages
    NATS/1.0 408 Request Timeout / Nats-Pending-Messages / Nats-Pending-Bytes
    NATS/1.0 409 Exceeded MaxWaiting | Message Size Exceeds MaxBytes | Batch Completed ...
    NATS/1.0 100 Idle Heartbeat / Nats-Last-Consumer / Nats-Last-Stream

Plain data: a :class:`WaitQueue` belongs to one ``PullDelivery`` (``pull``), which alone
changes it. Times are monotonic seconds of the consumer's clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from natsd.jetstream.wire.gojson import _GoJSONError
from natsd.jetstream.wire.gotyped import BOOL, DURATION, INT, INT64, STRING, StructT, unmarshal

__all__ = [
    "CONSUMER_DELETED",
    "CONSUMER_IS_PUSH",
    "EXCEEDED_MAX_WAITING",
    "NO_MESSAGES",
    "REQUESTS_PENDING",
    "NextRequest",
    "WaitQueue",
    "WaitingRequest",
    "heartbeat_header",
    "parse_next_request",
    "pending_status",
    "status",
]


def status(code: int, description: str) -> bytes:
    return b"NATS/1.0 %d %s\r\n\r\n" % (code, description.encode())


def pending_status(code: int, description: str, n: int, b: int) -> bytes:
    return b"NATS/1.0 %d %s\r\nNats-Pending-Messages: %d\r\nNats-Pending-Bytes: %d\r\n\r\n" % (
        code,
        description.encode(),
        n,
        b,
    )


def heartbeat_header(dseq: int, sseq: int, stalled: bytes = b"") -> bytes:
    """``100 Idle Heartbeat`` with the last consumer / stream sequences (and the flow
    control reply a stalled push consumer waits for)."""
    hdr = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n" % (
        dseq,
        sseq,
    )
    if stalled:
        hdr += b"Nats-Consumer-Stalled: " + stalled + b"\r\n"
    return hdr + b"\r\n"


NO_MESSAGES: Final = status(404, "No Messages")
REQUESTS_PENDING: Final = status(408, "Requests Pending")

EXCEEDED_MAX_WAITING: Final = status(409, "Exceeded MaxWaiting")
CONSUMER_DELETED: Final = status(409, "Consumer Deleted")
CONSUMER_IS_PUSH: Final = status(409, "Consumer is push based")


@dataclass(slots=True)
class NextRequest:
    batch: int = 1
    expires: int = 0  # ns, 0 = no expiry
    max_bytes: int = 0
    no_wait: bool = False
    heartbeat: int = 0  # ns
    group: str | None = None  # priority group fields, None when the request had none
    min_pending: int = 0
    min_ack_pending: int = 0
    pin_id: str = ""
    priority: int = 0


_NEXT: Final = StructT(
    "server.JSApiConsumerGetNextRequest",
    {
        "expires": ("expires", DURATION),
        "batch": ("batch", INT),
        "max_bytes": ("max_bytes", INT),
        "no_wait": ("no_wait", BOOL),
        "idle_heartbeat": ("heartbeat", DURATION),
        "group": ("group", STRING),
        "min_pending": ("min_pending", INT64),
        "min_ack_pending": ("min_ack_pending", INT64),
        "id": ("id", STRING),
        "priority": ("priority", INT),
    },
    lambda: {
        "expires": 0,
        "batch": 0,
        "max_bytes": 0,
        "no_wait": False,
        "heartbeat": 0,
        "group": "",
        "min_pending": 0,
        "min_ack_pending": 0,
        "id": "",
        "priority": 0,
    },
    strict=False,
)


# Bodies already parsed: a puller sends the same request body again and again (nats.py's
# fetch, ``nats bench``), and the Go-compatible JSON decoder costs ~60 us a request (0.6 us
# a message at batch 100). NextRequest is never written after parsing, so one is shared.
# Bounded: cleared when full; refused bodies are not kept.
_PARSED: Final[dict[bytes, NextRequest]] = {}
_PARSED_MAX: Final = 256


def parse_next_request(data: bytes) -> NextRequest:
    """``nextReqFromMsg``: an empty body is one message, a number is a batch size, a JSON
    object is a full request. Raises ValueError with the ``Bad Request - ...`` reason."""
    known = _PARSED.get(data)
    if known is not None:
        return known
    req = _parse_next_request(data)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[data] = req
    return req


def _parse_next_request(data: bytes) -> NextRequest:
    body = data.strip()
    if not body:
        return NextRequest()
    if body[:1] == b"{":
        try:
            doc = unmarshal(body, _NEXT)
        except _GoJSONError as e:
            raise ValueError(str(e)) from None
        req = NextRequest(
            batch=int(doc["batch"]),
            expires=int(doc["expires"]),
            max_bytes=int(doc["max_bytes"]),
            no_wait=bool(doc["no_wait"]),
            heartbeat=int(doc["heartbeat"]),
            group=str(doc["group"]),
            min_pending=int(doc["min_pending"]),
            min_ack_pending=int(doc["min_ack_pending"]),
            pin_id=str(doc["id"]),
            priority=int(doc["priority"]),
        )
        if req.heartbeat > 0 and req.heartbeat * 2 > req.expires:
            raise ValueError("heartbeat value too large")
        return req
    try:
        return NextRequest(batch=int(body.decode()))
    except ValueError:
        return NextRequest()


class WaitingRequest:
    __slots__ = (
        "b",
        "d",
        "expires",
        "group",
        "hb",
        "hbt",
        "live_at",
        "min_ack_pending",
        "min_pending",
        "n",
        "no_wait",
        "pin_id",
        "priority",
        "received",
        "reply",
    )

    def __init__(self, reply: bytes, req: NextRequest, now: float) -> None:
        self.reply = reply
        self.n = req.batch
        self.d = 0
        self.b = req.max_bytes
        self.no_wait = req.no_wait
        self.received = now
        # A negative expiry is already over (the request times out at once).
        self.expires = now + req.expires / 1e9 if req.expires else 0.0
        self.hb = req.heartbeat / 1e9 if req.heartbeat > 0 else 0.0
        self.hbt = now + self.hb if self.hb else 0.0
        self.group = req.group  # None: the request had no priority group fields
        self.min_pending = req.min_pending
        self.min_ack_pending = req.min_ack_pending
        self.pin_id = req.pin_id
        self.priority = req.priority if req.group is not None else _MAX_PRIORITY
        # The subscription list's removal count when the reply was last found subscribed
        # on this server: while no subscription has been removed since, it still is.
        self.live_at = -1


_MAX_PRIORITY: Final = (1 << 31) - 1


class WaitQueue:
    """The requests waiting for messages, at most ``max`` of them, oldest first."""

    __slots__ = ("last", "max", "q")

    def __init__(self, max_waiting: int, now: float = 0.0) -> None:
        self.max = max_waiting
        self.q: deque[WaitingRequest] = deque()
        self.last = now  # monotonic time of the last request or delivery (inactivity)

    def __len__(self) -> int:
        return len(self.q)

    def is_full(self) -> bool:
        return len(self.q) >= self.max

    def add(self, wr: WaitingRequest) -> bool:
        if self.is_full():
            return False
        self.q.append(wr)
        self.last = wr.received
        return True

    def pop(self) -> WaitingRequest:
        """Take one message's worth from the head request: it moves to the tail while it
        wants more (so requests share messages), or leaves the queue when done."""
        q = self.q
        wr = q[0]
        wr.d += 1
        wr.n -= 1
        if wr.n > 0 and len(q) > 1:
            q.popleft()
            q.append(wr)
        elif wr.n <= 0:
            q.popleft()
        return wr

    def add_prioritized(self, wr: WaitingRequest) -> bool:
        """Insert by priority (lowest first), after the requests of the same priority."""
        if self.is_full():
            return False
        self._insert(wr)
        self.last = wr.received
        return True

    def _insert(self, wr: WaitingRequest) -> None:
        q = self.q
        for i, other in enumerate(q):
            if other.priority > wr.priority:
                q.insert(i, wr)
                return
        q.append(wr)

    def pop_and_requeue(self) -> WaitingRequest:
        """``popAndRequeue``: like :meth:`pop`, but a request that wants more goes back to
        the end of its own priority."""
        q = self.q
        wr = q[0]
        wr.d += 1
        wr.n -= 1
        if wr.n > 0 and len(q) > 1:
            q.popleft()
            self._insert(wr)
        elif wr.n <= 0:
            q.popleft()
        return wr

    def cycle(self) -> None:
        """Move the head request to the back (passed over for now)."""
        self.q.rotate(-1)

    def remove_head(self) -> None:
        self.q.popleft()

    def remove(self, wr: WaitingRequest) -> None:
        try:
            self.q.remove(wr)
        except ValueError:
            pass

    def find(self, reply: bytes) -> WaitingRequest | None:
        for wr in self.q:
            if wr.reply == reply:
                return wr
        return None
