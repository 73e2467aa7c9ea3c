"""Pull consumers: the next-message request, the waiting-request queue, status messages.

Modelled on nats-server's ``waitQueue`` / ``processNextMsgRequest`` / ``processWaiting`` /
``nextWaiting``. A pull request (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>``) becomes a
:class:`WaitingRequest`; deliveries go to the request at the head of the queue, and a
request that still wants more moves to the tail, so concurrent fetchers share messages
round-robin. Requests end with a status message exactly as nats-server sends them::

    NATS/1.0 404 No Messages
    NATS/1.0 408 Request Timeout / Nats-Pending-Messages / Nats-Pending-Bytes
    NATS/1.0 409 Exceeded MaxWaiting | Message Size Exceeds MaxBytes | Batch Completed ...
    NATS/1.0 100 Idle Heartbeat / Nats-Last-Consumer / Nats-Last-Stream

Times are monotonic seconds of the consumer's clock (``c.mono()``). Everything runs on the
event loop.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from natsd.jetstream.config.consumer_config import PriorityPolicy, go_duration
from natsd.jetstream.consumer import priority as prio
from natsd.jetstream.wire.gojson import _GoJSONError
from natsd.jetstream.wire.gotyped import BOOL, DURATION, INT, INT64, STRING, StructT, unmarshal

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer

__all__ = [
    "NextRequest",
    "WaitQueue",
    "WaitingRequest",
    "arm_waiting_timer",
    "heartbeat_header",
    "next_waiting",
    "parse_next_request",
    "pending_status",
    "process_next_request",
    "process_waiting",
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

# Policy members compared per message, bound once: on Python 3.11 `PriorityPolicy.NONE`
# is a call to EnumType.__getattr__ (~70 ns); a module Final is a C static under mypyc.
_PRIORITY_NONE: Final = PriorityPolicy.NONE
_PINNED_CLIENT: Final = PriorityPolicy.PINNED_CLIENT
_PRIORITIZED: Final = PriorityPolicy.PRIORITIZED


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


def parse_next_request(data: bytes) -> NextRequest:
    """``nextReqFromMsg``: an empty body is one message, a number is a batch size, a JSON
    object is a full request. Raises ValueError with the ``Bad Request - ...`` reason."""
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


# ---------------------------------------------------------------------- request handling
def process_next_request(c: Consumer, reply: bytes, data: bytes) -> None:
    """``processNextMsgRequest``: queue a pull request or answer it with a status."""
    if c.closed:
        return
    wq = c.waiting
    if wq is None:
        c.send(reply, b"", CONSUMER_IS_PUSH)
        return
    try:
        req = parse_next_request(data)
    except ValueError as e:
        c.send(reply, b"", status(400, f"Bad Request - {e}"))
        return
    cfg = c.cfg
    if cfg.max_batch > 0 and req.batch > cfg.max_batch:
        c.send(reply, b"", status(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}"))
        return
    if req.expires and cfg.max_expires > 0 and req.expires > cfg.max_expires:
        text = f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires)}"
        c.send(reply, b"", status(409, text))
        return
    if req.max_bytes > 0 and cfg.max_bytes > 0 and req.max_bytes > cfg.max_bytes:
        c.send(reply, b"", status(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}"))
        return
    refused = prio.check_request(c, req)
    if refused is not None:
        c.send(reply, b"", status(*refused))
        return
    now = c.mono()
    if wq.is_full() and now - c.lwqic > 1.0:
        process_waiting(c, False)
    if req.no_wait:
        msgs_pending = c.npc + len(c.rdq)
        if msgs_pending <= 0 and req.expires == 0:
            wq.last = now
            c.send(reply, b"", NO_MESSAGES)
            return
        if msgs_pending > 0:
            brp = process_waiting(c, False)
            if msgs_pending < brp:
                wq.last = now
                c.send(reply, b"", REQUESTS_PENDING)
                return
    wr = WaitingRequest(reply, req, now)
    added = wq.add_prioritized(wr) if cfg.priority_policy == _PRIORITIZED else wq.add(wr)
    if not added:
        if not req.heartbeat:
            c.send(reply, b"", EXCEEDED_MAX_WAITING)
        return
    c._signal()


def process_waiting(c: Consumer, eos: bool) -> int:
    """``processWaiting``: expire requests (``408``), end no-wait ones at the end of the
    stream (``404``), drop those nobody listens to, send due heartbeats. Returns the
    messages the remaining requests still want."""
    wq = c.waiting
    if wq is None or not wq.q:
        return 0
    now = c.mono()
    c.lwqic = now
    has_interest = c._sublist.has_interest
    brp = 0
    keep: deque[WaitingRequest] = deque()
    for wr in wq.q:
        expired = bool(wr.expires) and now > wr.expires
        if (eos and wr.no_wait) or expired:
            if expired:
                c.send(wr.reply, b"", pending_status(408, "Request Timeout", wr.n, wr.b))
                continue
            if not wr.expires or wr.d > 0:
                c.send(wr.reply, b"", NO_MESSAGES)
                continue
        if not has_interest(wr.reply):
            continue
        brp += wr.n
        if wr.hbt and now >= wr.hbt:
            c.send(wr.reply, b"", heartbeat_header(c.dseq - 1, c.sseq - 1))
            wr.hbt = now + wr.hb
        keep.append(wr)
    wq.q = keep
    return brp


def next_waiting(c: Consumer, sz: int) -> WaitingRequest | None:
    """``nextWaiting``: the request the next message (of ``sz`` bytes) goes to."""
    wq = c.waiting
    if wq is None:
        return None
    has_interest = c._sublist.has_interest
    policy = c.cfg.priority_policy
    need_new_pin = policy == _PINNED_CLIENT and not c.pin_id
    cycled = 0
    while wq.q:
        wr = wq.q[0]
        if not wr.expires or c.mono() < wr.expires:
            verdict = "ok"
            if policy != _PRIORITY_NONE:
                verdict = prio.serve_check(c, wr, need_new_pin)
            if verdict == "cycle":
                wq.cycle()
                cycled += 1
                if cycled >= len(wq):
                    return None
                continue
            if verdict == "wrong":
                hdr = pending_status(423, "Nats-Wrong-Pin-Id", wr.n, wr.b)
                c.send(wr.reply, b"", hdr)
                wq.remove_head()
                continue
            if wr.b > 0:
                if sz <= wr.b:
                    wr.b -= sz
                    if wr.b == 0:
                        wr.n = 1
                else:
                    hdr = pending_status(409, "Message Size Exceeds MaxBytes", wr.n, wr.b)
                    c.send(wr.reply, b"", hdr)
                    if verdict == "pinned":
                        c.pin_id = ""
                        c.pinned_ts = 0
                    wq.remove_head()
                    continue
            if has_interest(wr.reply):
                return wq.pop_and_requeue() if policy == _PRIORITIZED else wq.pop()
        else:
            c.send(wr.reply, b"", pending_status(408, "Request Timeout", wr.n, wr.b))
        wq.remove_head()
    return None


def arm_waiting_timer(c: Consumer) -> None:
    """Run ``process_waiting`` again at the next request expiry or heartbeat."""
    wq = c.waiting
    if wq is None or not wq.q:
        if c.wtmr is not None:
            c.wtmr.cancel()
            c.wtmr = None
        return
    fexp = 0.0
    for wr in wq.q:
        for t in (wr.hbt, wr.expires):
            if t and (not fexp or t < fexp):
                fexp = t
    if not fexp:
        return
    if c.wtmr is not None:
        if abs(c.wtmr_at - fexp) < 0.0005:
            return
        c.wtmr.cancel()
    c.wtmr_at = fexp
    c.wtmr = c.sched.call_later(max(fexp - c.mono(), 0.001), _on_waiting_timer, c)


def _on_waiting_timer(c: Consumer) -> None:
    c.wtmr = None
    if c.closed:
        return
    process_waiting(c, True)
    arm_waiting_timer(c)
    c._signal()
