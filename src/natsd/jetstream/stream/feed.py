"""What a mirror's and a source's feed from another stream share (nats-server
``stream.go``: ``setupMirrorConsumer`` / ``trySetupSourceConsumer``, the retry timers,
``handleFlowControl``, the heartbeat checks, ``sourceInfo``).

A feed runs while its stream leads. It asks the origin for a *direct* consumer through the
account's ``$JS.API`` like any client would, so the origin may live anywhere the request
reaches: an ephemeral push consumer with flow control and a 1 s idle heartbeat,
``ack_policy: none``, starting where the copy is. A delivery that does not line up, a
heartbeat naming deliveries the feed did not see, a store that refuses a message or 10 s
without a word drop the consumer and ask for a new one from where the copy is; failed
requests back off as nats-server's do (2 s apart at least, then 10 s per failure up to two
minutes). ``mirror.py`` and ``source.py`` decide where to start and what a delivery
becomes.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.core.headers import slice_header
from natsd.core.scheduler import Cancellable, Clock, Scheduler
from natsd.core.transform import SubjectTransform
from natsd.jetstream.config.stream_types import StreamSource
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.ack_subject import ack_tail
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.store import StoredMsg

__all__ = ["OriginFeed", "strip_origin_headers"]

HEARTBEAT_NS: Final = 1_000_000_000  # asked of the origin's consumer (sourceHealthHB)
HEALTH_CHECK: Final = 10.0  # s: a feed silent this long is set up again
RETRY_GATE: Final = 2.0  # s: at least this between two consumer requests
CREATE_WAIT: Final = 30.0  # s: for the origin's answer to a consumer request
# s: for the answer to a durable consumer's reset (srcDurableConsumerWaitTime: it is only
# moved, not made)
RESET_WAIT: Final = 5.0
_ACK_WAIT_NS: Final = 22 * 3600 * 1_000_000_000  # nats-server's (ack_policy none: unused)
_ALNUM: Final = string.digits + string.ascii_letters
_STRIPPED: Final = (b"Nats-Expected-", b"Nats-Batch-")
# an origin's answers that it does not know ``sourcing`` (JSInvalidJSONErr, a server
# before 2.14) or the API level asked for (JSRequiredApiLevelErr)
_INVALID_JSON: Final = 10025
_API_LEVEL: Final = 10185


def _api_prefix(src: StreamSource) -> str:
    """Where the origin's JetStream API is asked: ``$JS.API``, or the ``external.api``
    prefix of an origin in another account or domain (the user's service import of it)."""
    ext = src.external
    if ext is not None and ext.api:
        return ext.api.rstrip(".")
    return "$JS.API"


def rand8() -> str:
    return "".join(random.choices(_ALNUM, k=8))


def strip_origin_headers(hdr: bytes, extra: bytes = b"") -> bytes:
    """``hdr`` without the origin's publish expectations and batch headers, which the
    copy's store has nothing to do with (and without ``extra``-prefixed lines)."""
    if b"Nats-Expected-" not in hdr and b"Nats-Batch-" not in hdr and (
        not extra or extra not in hdr
    ):
        return hdr
    lines = hdr.split(b"\r\n")
    kept = [lines[0]]
    for ln in lines[1:]:
        if ln.startswith(_STRIPPED) or (extra and ln.startswith(extra)):
            continue
        kept.append(ln)
    return b"\r\n".join(kept)


class OriginFeed:
    """One feed from an origin stream, while its stream leads (``start`` / ``stop``)."""

    def __init__(
        self,
        source: StreamSource,
        sublist: Sublist[Subscription],
        scheduler: Scheduler,
        clock: Clock,
        kind: str,
        stable: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.source = source
        # the consumer's stable name (``JS_MIRROR_<hash>`` / ``JS_SRC_<hash>``) and metadata:
        # an origin on a workqueue or interest stream makes it a durable that this feed
        # acknowledges through its flow control answers (ADR-60); "" asks as nats-server
        # 2.12 did, an ephemeral named by the origin
        self._stable = stable
        self._metadata = metadata or {}
        # set once an origin refused ``sourcing`` (a server before 2.14): asked without it
        self._legacy = False
        self._sublist = sublist
        self._sched = scheduler
        self._mono = clock.monotonic
        self._kind = kind  # "M" (a mirror's) or "S" (a source's): the deliver subject's
        self._transforms = [SubjectTransform(t.src, t.dest) for t in source.subject_transforms]
        # where the copy is: the origin's stream and delivery sequences last taken, the
        # consumer they come from, and what the origin says is left (``lag``)
        self.sseq = 0
        self.dseq = 0
        self.cname = ""
        self._ack_pre = b""  # its deliveries' reply prefix: $JS.ACK.<origin>.<consumer>.
        self.lag = 0
        self.last = 0.0  # monotonic time of the last word from the origin (0: none yet)
        self.error: dict[str, Any] | None = None  # the last refused consumer request's
        self.fails = 0
        self._lreq = 0.0  # monotonic time of the last consumer request (0: none)
        self._running = False
        self._requesting = False
        self._timer: Cancellable | None = None  # the next setup, or the answer's deadline
        self._health: Cancellable | None = None
        self._deliver: Subscription | None = None
        self._deliver_subject = ""  # the consumer's, once its request is answered
        self._inbox: Subscription | None = None
        # A durable consumer of the user's (ADR-60 ``consumer: {name, deliver_subject}``):
        # reset instead of made, its deliveries acknowledged by the flow control answers,
        # never deleted; while a reset goes unanswered, a probe on its deliver subject
        # (anything arriving there says the origin is back) asks again at once.
        self._probe: Subscription | None = None
        # Runs a flow control answer once the copy holds what it acknowledges (the
        # stream's ``when_committed``; set by the subclass): on a replicated copy, the
        # messages taken are only proposed, and a leader lost before they commit must not
        # have acknowledged them (a workqueue origin removes what is acknowledged).
        self._committed: Callable[[Callable[[], None]], None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._schedule()

    def stop(self) -> None:
        self._running = False
        self._cancel()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def retire(self) -> None:
        """Stop for good (the copying stream is deleted, promoted, or drops this source):
        a durable consumer the origin keeps for this feed is deleted, best effort, as
        nats-server does (an ephemeral one goes once nobody listens; the user's own stays)."""
        running = self._running
        self.stop()
        if running and self._stable and self.cname == self._stable:
            subject = f"{_api_prefix(self.source)}.CONSUMER.DELETE.{self.source.name}.{self.cname}"
            publish(self._sublist, subject.encode(), None, None, b"")

    def _cancel(self) -> None:
        """Drop the current consumer (the origin's goes once nobody listens)."""
        for sub in (self._deliver, self._inbox, self._probe):
            if sub is not None:
                self._sublist.remove(sub)
        self._deliver = self._inbox = self._probe = None
        self._requesting = False
        if self._health is not None:
            self._health.cancel()
            self._health = None

    def _schedule(self) -> None:
        """The next request, 100-200 ms from now, and no sooner than 2 s after the last,
        plus the backoff of the failures so far (``scheduleSetupMirrorConsumerRetry``,
        ``setupSourceConsumer``)."""
        if self._timer is not None:
            self._timer.cancel()
        delay = 0.1 + random.random() * 0.1
        if self._lreq:
            delay += max(0.0, RETRY_GATE - (self._mono() - self._lreq))
        if self.fails:
            delay += min(5.0 * self.fails * 2, 120.0)
        self._timer = self._sched.call_later(delay, self._setup)

    def retry(self) -> None:
        """Drop the consumer and ask for a new one from where the copy is."""
        self._cancel()
        if self._running:
            self._schedule()

    # ------------------------------------------------------------------ the request
    def _base_config(self) -> dict[str, Any]:
        return {
            "deliver_policy": "all",
            "ack_policy": "none",
            "ack_wait": _ACK_WAIT_NS,
            "max_deliver": 1,
            "replay_policy": "instant",
            "flow_control": True,
            "idle_heartbeat": HEARTBEAT_NS,
            "inactive_threshold": int(HEALTH_CHECK * 1e9),
            "num_replicas": 0,
            "direct": True,
        }

    def _start_position(self, cfg: dict[str, Any]) -> None:
        """Set the consumer's deliver policy and start for where the copy is."""
        raise NotImplementedError

    def request(self) -> tuple[str, dict[str, Any]]:
        """The consumer request for where the copy is: its subject and body."""
        src = self.source
        cfg = self._base_config()
        self._start_position(cfg)
        subject = f"{_api_prefix(src)}.CONSUMER.CREATE.{src.name}"
        if src.filter_subject:
            cfg["filter_subject"] = src.filter_subject
        elif len(src.subject_transforms) == 1:
            cfg["filter_subject"] = src.subject_transforms[0].src or ">"
        elif src.subject_transforms:
            cfg["filter_subjects"] = [t.src or ">" for t in src.subject_transforms]
        if self._stable and not self._legacy:
            cfg["name"] = self._stable
            cfg["sourcing"] = True
            cfg["metadata"] = dict(self._metadata)
        elif self._stable:
            # (an origin that does not know sourcing consumers: a name of this copy's own)
            cfg["name"] = f"{self._stable}_{rand8()}"
        if "filter_subject" in cfg:
            # (a filtered one is named: the subject carries the filter)
            if "name" not in cfg:
                cfg["name"] = ("mirror-" if self._kind == "M" else "src-") + rand8()
            subject = f"{subject}.{cfg['name']}.{cfg['filter_subject']}"
        return subject, {"stream_name": src.name, "config": cfg, "action": ""}

    def _before_request(self) -> None:
        """Where the copy is, read again before each request."""

    def _setup(self) -> None:
        self._timer = None
        if not self._running:
            return
        self._cancel()
        self._before_request()
        self._lreq = self._mono()
        src = self.source
        ext = src.external
        durable = src.consumer
        payload = b""
        if durable is not None:
            subject = f"{_api_prefix(src)}.CONSUMER.RESET.{src.name}.{durable.name}"
            deliver = durable.deliver_subject
        else:
            subject, body = self.request()
            if ext is not None and ext.deliver:
                # an origin in another account: its deliveries come through the user's
                # stream import of that prefix (nats-server's ``<deliver>.<S|M>.<id>``)
                deliver = f"{ext.deliver}.{self._kind}.{rand8()}".replace("..", ".")
            else:
                deliver = f"$JS.{self._kind}.{rand8()}"
            body["config"]["deliver_subject"] = deliver
            payload = orjson.dumps(body)
        inbox = f"$JSC.R.{rand8()}".encode()
        sub = Subscription(inbox, None, b"feed-reply", callback=self._on_answer)
        self._sublist.insert(sub)
        self._inbox = sub
        self._requesting = True
        self._deliver_subject = deliver
        wait = RESET_WAIT if durable is not None else CREATE_WAIT
        self._timer = self._sched.call_later(wait, self._unanswered)
        publish(self._sublist, subject.encode(), inbox, self._request_headers(), payload)

    def _request_headers(self) -> bytes | None:
        """The consumer request's headers (none but a source's)."""
        return None

    def _unanswered(self) -> None:
        self._timer = None
        self._fail(None)
        durable = self.source.consumer
        if durable is not None and self._running:
            probe = Subscription(durable.deliver_subject.encode(), None, b"feed-probe",
                                 callback=self._probed)  # fmt: skip
            self._sublist.insert(probe)
            self._probe = probe

    def _probed(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """Something arrived on the durable consumer's deliver subject while backing off:
        the origin is there, so ask again now (``startProbeSubscription``)."""
        if sub is not self._probe or self._requesting or self.fails == 0:
            return
        self._sublist.remove(sub)
        self._probe = None
        self.fails = 0
        self._schedule()

    def _requires_fc(self) -> dict[str, Any]:
        """The error of a durable consumer that does not acknowledge by flow control."""
        if self._kind == "M":
            return E.JSMirrorConsumerRequiresAckFCErr().to_json()
        return E.JSSourceConsumerRequiresAckFCErr().to_json()

    def _fail(self, error: dict[str, Any] | None) -> None:
        if error is not None:
            self.error = error
        self.fails += 1
        self._cancel()
        if self._running:
            self._schedule()

    def _created(self, delivered: int, hdr: bytes | None) -> None:
        """The origin made the consumer; its deliveries start after stream sequence
        ``delivered``; ``hdr``: its answer's headers."""
        raise NotImplementedError

    def _on_answer(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if sub is not self._inbox or not self._requesting:
            return
        self._sublist.remove(sub)
        self._inbox = None
        self._requesting = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if hdr and hdr.startswith(b"NATS/1.0 503"):
            self._fail(None)  # nothing answers $JS.API (yet)
            return
        try:
            ans = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._fail(None)
            return
        if not isinstance(ans, dict) or "error" in ans or not isinstance(ans.get("name"), str):
            err = ans.get("error") if isinstance(ans, dict) else None
            code = err.get("err_code") if isinstance(err, dict) else None
            if self._stable and not self._legacy and code in (_INVALID_JSON, _API_LEVEL):
                # an origin that does not know sourcing consumers: ask as for 2.12, now
                self._legacy = True
                self._cancel()
                if self._running:
                    self._setup()
                return
            self._fail(err if isinstance(err, dict) else None)
            return
        cfg = ans.get("config")
        if self.source.consumer is not None and (
            not isinstance(cfg, dict) or cfg.get("ack_policy") != "flow_control"
        ):
            self._fail(self._requires_fc())
            return
        delivered = ans.get("delivered", {}).get("stream_seq", 0)
        delivered = delivered if isinstance(delivered, int) and delivered > 0 else 0
        self.error = None
        self.fails = 0  # (as nats-server: the backoff counts failures since the last success)
        self.cname = ans["name"]
        self._ack_pre = f"$JS.ACK.{self.source.name}.{self.cname}.".encode()
        self.dseq = 0
        self._created(delivered, hdr)
        self.last = self._mono()
        dsub = Subscription(self._deliver_subject.encode(), None, b"feed", callback=self._on_msg)
        dsub.take = self._taker()
        self._sublist.insert(dsub)
        self._deliver = dsub
        self._health = self._sched.call_later(HEALTH_CHECK, self._check_health)

    def _check_health(self) -> None:
        self._health = None
        if not self._running or self._deliver is None:
            return
        if self._mono() - self.last > HEALTH_CHECK:
            self.retry()
            return
        self._health = self._sched.call_later(HEALTH_CHECK, self._check_health)

    # ------------------------------------------------------------------ messages
    def _on_msg(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """A delivery of the current consumer: a control message, or a message to take
        (``_take``) unless it is a redelivery or one the copy holds already."""
        if sub is not self._deliver:
            return
        if not data and hdr and hdr.startswith(b"NATS/1.0 100 "):
            self.last = self._mono()
            self._control(reply, hdr)
            return
        pre = self._ack_pre
        if not reply or not reply.startswith(pre):
            return  # another consumer's (an earlier one of this feed's)
        dc, sseq, dseq, ts, pending = ack_tail(reply, len(pre), 5)
        if sseq == 0 or dc > 1:
            return  # not a delivery's reply, or a redelivery
        self.last = self._mono()
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq = dseq
            return  # copied already
        self._take(subject, reply, hdr, data, sseq, dseq, ts, pending)

    def _taker(self) -> Callable[[Subscription, bytes, StoredMsg, int, int, int], None] | None:
        """What takes the origin consumer's messages as stored when it runs on this server
        (``Subscription.take``); None: they come as messages, with their reply subjects."""
        return None

    def _take(
        self,
        subject: bytes,
        reply: bytes,
        hdr: bytes | None,
        data: bytes,
        sseq: int,
        dseq: int,
        ts: int,
        pending: int,
    ) -> None:
        """A delivery past the copy's origin sequence ``sseq``: what it becomes."""
        raise NotImplementedError

    def _transformed(self, subject: bytes) -> str:
        """The subject a delivery is stored under: the first of the feed's transforms that
        matches it, else as it is."""
        subj = subject.decode(errors="replace")
        for tr in self._transforms:
            mapped = tr.apply(subj)
            if mapped is not None:
                return mapped
        return subj

    def _control(self, reply: bytes | None, hdr: bytes) -> None:
        """A flow control request (answered with where the copy is, nats-server 2.14's
        headers) or an idle heartbeat (checked against the deliveries seen; a stalled
        consumer's flow control subject is answered)."""
        if reply:
            answer = b"NATS/1.0\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n" % (
                self.dseq,
                self.sseq,
            )
            committed = self._committed
            if committed is None:
                publish(self._sublist, reply, None, answer, b"")
            else:
                sublist, to = self._sublist, reply

                def send() -> None:
                    publish(sublist, to, None, answer, b"")

                committed(send)
            return
        last = slice_header(hdr, b"Nats-Last-Consumer")
        if last is not None and last.isdigit() and int(last) > 0 and int(last) != self.dseq:
            self.retry()  # an idle heartbeat naming deliveries this feed did not see
            return
        stalled = slice_header(hdr, b"Nats-Consumer-Stalled")
        if stalled:
            publish(self._sublist, stalled, None, None, b"")

    # ------------------------------------------------------------------ info
    def info(self) -> dict[str, Any]:
        """STREAM.INFO's ``mirror`` block or a ``sources`` entry (``sourceInfo``)."""
        src = self.source
        out: dict[str, Any] = {"name": src.name}
        if src.external is not None:
            out["external"] = src.external.to_json()
        out["lag"] = self.lag
        if self._kind == "S" and self.sseq:
            out["seq"] = self.sseq  # (the reference nats-server 2.15.1 reports a source's)
        out["active"] = int((self._mono() - self.last) * 1e9) if self.last else -1
        if self.error is not None:
            out["error"] = self.error
        if src.filter_subject and (self.cname or self._kind == "S"):
            out["filter_subject"] = src.filter_subject
        if src.subject_transforms:
            out["subject_transforms"] = [t.to_json() for t in src.subject_transforms]
        return out
