"""An in-process JetStream core on a virtual clock: no sockets, no event loop, no sleeps.

``JsHarness`` builds what the server builds for one account (the engine, the account's
Sublist, the ``$JS.API`` subscriptions), with memory stores that stamp messages from the
same virtual clock the consumers and the engine's expiry timer read. A test

* calls the API as a client would: a request published on ``$JS.API...`` with a reply
  subject that a capturing subscription listens on (:meth:`JsHarness.api`);
* publishes into streams through the Sublist (:meth:`JsHarness.publish`);
* receives deliveries, status messages and advisories on capturing subscriptions
  (:class:`Capture`), each stamped with the virtual time it arrived;
* moves time with :meth:`JsHarness.advance`: the timers due on the way (ack wait, pull
  expiry, heartbeats, pin and inactivity timers, max_age expiry) run at their exact due
  times, in order.

Everything is synchronous: after each call the callbacks it made ready have run
(``VirtualScheduler.run_ready``), so what a test reads is what a client would have been
sent by then. Later tiers (a replication simulator) can build several harnesses on one
``VirtualScheduler``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from natsd.core.headers import parse_headers
from natsd.core.scheduler import VirtualClock, VirtualScheduler
from natsd.jetstream.api import subscribe_api
from natsd.jetstream.consumer import Consumer
from natsd.jetstream.engine import JetStream, JsAccount
from natsd.jetstream.stream import Stream
from natsd.router.account import GLOBAL_ACCOUNT, Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.catalog import StreamCatalog, StreamRecord
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

__all__ = ["Capture", "JsHarness", "MemoryCatalog", "Msg"]


class MemoryCatalog(StreamCatalog):
    """Memory streams only, stamped by ``clock``; nothing persists. A file stream is
    refused (the harness has no disk and no fsync thread)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def load(self) -> list[StreamRecord]:
        return []

    def create(
        self, account: str, name: str, storage: str, cfg: StoreConfig, meta: bytes
    ) -> StreamStore:
        if storage != "memory":
            raise OSError("the in-process harness only has memory storage")
        return MemoryStore(cfg, now_ns=self.clock.time_ns)

    def save_meta(self, account: str, name: str, storage: str, meta: bytes) -> None:
        return None

    def remove(self, account: str, name: str, storage: str, store: StreamStore) -> None:
        store.delete()


@dataclass(frozen=True, slots=True)
class Msg:
    """One message as a subscriber received it, at virtual time ``at_ns`` (nanoseconds
    since the harness started)."""

    at_ns: int
    subject: str
    reply: str | None
    hdr: bytes | None
    data: bytes

    @property
    def at(self) -> float:
        """Arrival time in seconds since the harness started."""
        return self.at_ns / 1e9

    @property
    def status(self) -> str:
        """``"408 Request Timeout"`` for a status message, ``""`` for a plain one."""
        if not self.hdr:
            return ""
        code, desc, _h = parse_headers(self.hdr)
        if code is None:
            return ""
        return f"{code} {desc}".strip()

    @property
    def headers(self) -> dict[str, str]:
        """Header values (the first of each), e.g. ``Nats-Pin-Id``."""
        if not self.hdr:
            return {}
        _code, _desc, h = parse_headers(self.hdr)
        return {k: v[0] for k, v in h.items() if v}

    def json(self) -> Any:
        return orjson.loads(self.data)

    @property
    def ack_tokens(self) -> tuple[int, int, int]:
        """(delivery count, stream sequence, consumer sequence) from the ack reply
        ``$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>``."""
        assert self.reply is not None and self.reply.startswith("$JS.ACK."), self.reply
        toks = self.reply.split(".")
        return int(toks[4]), int(toks[5]), int(toks[6])


@dataclass(eq=False)
class Capture:
    """A subscription that keeps what it receives, in order."""

    harness: JsHarness
    subject: str
    msgs: list[Msg] = field(default_factory=list)
    sub: Subscription | None = None

    def _on_msg(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        self.msgs.append(
            Msg(
                self.harness.now_ns,
                subject.decode(),
                reply.decode() if reply is not None else None,
                hdr,
                data,
            )
        )

    def take(self) -> list[Msg]:
        """The messages received since the last ``take``."""
        out, self.msgs = self.msgs, []
        return out

    def statuses(self) -> list[tuple[float, str]]:
        return [(m.at, m.status) for m in self.msgs]

    def unsubscribe(self) -> None:
        if self.sub is not None:
            self.harness.account.sublist.remove(self.sub)
            self.sub = None


class JsHarness:
    """The JetStream engine of one account on a virtual clock (see the module docstring)."""

    def __init__(self, *, wall_start_ns: int | None = None) -> None:
        self.clock = VirtualClock() if wall_start_ns is None else VirtualClock(wall_start_ns)
        self.sched = VirtualScheduler(self.clock)
        # As the server wires it: the engine with its $JS.API subscriptions.
        self.engine = JetStream(
            MemoryCatalog(self.clock), clock=self.clock, scheduler=self.sched, api=subscribe_api
        )
        self.account = Account(GLOBAL_ACCOUNT)
        self.ja: JsAccount = self.engine.enable_account(self.account)
        self.engine.start()
        self._inbox = 0

    # ---------------------------------------------------------------- time
    @property
    def now_ns(self) -> int:
        """Virtual nanoseconds since the harness started."""
        return self.clock.elapsed_ns

    @property
    def now(self) -> float:
        return self.clock.elapsed_ns / 1e9

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass, running every timer due on the way."""
        self.sched.advance(seconds)

    def advance_to(self, seconds: float) -> None:
        """Let time pass until ``seconds`` since the harness started."""
        self.sched.advance_to_ns(round(seconds * 1e9))

    def settle(self) -> None:
        """Run what is ready now (time does not move)."""
        self.sched.run_ready()

    # ---------------------------------------------------------------- messaging
    def subscribe(self, subject: str, queue: str | None = None) -> Capture:
        cap = Capture(self, subject)
        sub = Subscription(
            subject.encode(),
            queue.encode() if queue is not None else None,
            b"cap-%d" % id(cap),
            callback=cap._on_msg,
        )
        cap.sub = sub
        self.account.sublist.insert(sub)
        return cap

    def inbox(self) -> str:
        self._inbox += 1
        return f"_INBOX.{self._inbox}"

    def publish(
        self, subject: str, data: bytes = b"", hdr: bytes | None = None, reply: str | None = None
    ) -> int:
        """Publish as a client would; returns the deliveries made. Runs what it made ready."""
        n = publish(
            self.account.sublist,
            subject.encode(),
            reply.encode() if reply is not None else None,
            hdr,
            data,
        )
        self.settle()
        return n

    def request(self, subject: str, data: bytes = b"", hdr: bytes | None = None) -> list[Msg]:
        """Publish with a fresh reply inbox; returns what arrived on it by now."""
        cap = self.subscribe(self.inbox())
        self.publish(subject, data, hdr, reply=cap.subject)
        cap.unsubscribe()
        return cap.msgs

    def api(self, op: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``$JS.API.<op>`` with a JSON body; the one JSON response."""
        raw = orjson.dumps(body) if body is not None else b""
        replies = self.request("$JS.API." + op, raw)
        assert len(replies) == 1, replies
        out = replies[0].json()
        assert isinstance(out, dict)
        return out

    # ---------------------------------------------------------------- JetStream helpers
    def add_stream(self, name: str, **cfg: Any) -> dict[str, Any]:
        body = {"name": name, "storage": "memory", **cfg}
        body.setdefault("subjects", [name.lower() + ".>"])
        out = self.api("STREAM.CREATE." + name, body)
        assert "error" not in out, out
        return out

    def add_consumer(self, stream: str, **cfg: Any) -> dict[str, Any]:
        name = cfg.get("durable_name") or cfg.get("name")
        op = f"CONSUMER.CREATE.{stream}.{name}" if name else f"CONSUMER.CREATE.{stream}"
        out = self.api(op, {"stream_name": stream, "config": cfg})
        assert "error" not in out, out
        return out

    def js_publish(
        self, subject: str, data: bytes = b"", hdr: bytes | None = None
    ) -> dict[str, Any]:
        """A JetStream publish; the PubAck (memory streams ack at once)."""
        replies = self.request(subject, data, hdr)
        assert len(replies) == 1, replies
        ack = replies[0].json()
        assert isinstance(ack, dict)
        return ack

    def fetch(self, stream: str, consumer: str, inbox: Capture, **req: Any) -> None:
        """A pull request (``MSG.NEXT``) whose messages go to ``inbox``."""
        body = orjson.dumps(req) if req else b""
        self.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, reply=inbox.subject)

    def ack(self, msg: Msg, kind: bytes = b"+ACK") -> None:
        assert msg.reply is not None
        self.publish(msg.reply, kind)

    def stream(self, name: str) -> Stream:
        return self.ja.streams[name]

    def consumer(self, stream: str, name: str) -> Consumer:
        c = self.ja.streams[stream].consumers[name]
        assert isinstance(c, Consumer)
        return c

    def consumer_names(self, stream: str) -> list[str]:
        return sorted(self.ja.streams[stream].consumers)
