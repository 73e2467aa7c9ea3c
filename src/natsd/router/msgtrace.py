"""Message tracing (nats-server's ADR-41): a message published with a ``Nats-Trace-Dest``
header makes each server it crosses send a trace event to that subject, telling where the
message went; with ``Nats-Trace-Only: true`` it is traced and not delivered.

Only a message whose header block holds ``Nats-Trace-Dest`` comes here (the client's
publish path looks for it in HPUB headers alone), so nothing on the untraced path changes.
The rules, event JSON and error strings are nats-server 2.15's (``server/msgtrace.go``):

- the header keys are matched exactly as written (``Nats-Trace-Dest``, ``Nats-Trace-Only``,
  ``Nats-Trace-Origin-Account``); ``traceparent`` is not a trigger here, since the account
  ``trace_dest`` it needs is refused by the configuration;
- ``Nats-Trace-Only`` is 1, true or on (any case);
- a destination that is not a valid publish subject: delivered untraced, or dropped when
  trace-only; one the publisher may not publish to: dropped with a permissions error;
- the event is JSON as Go's encoder writes it (compact, struct field order, sorted header
  keys, ``<``, ``>`` and ``&`` escaped), timestamps in RFC 3339 with nanoseconds, local time
  for the events and UTC for the server block.

A replicated stream holds the trace of a message it proposes (``MsgTrace.hold``) and sends
it once its leader has applied the message, with the subject it was stored under or the
store's error, as nats-server does (a proposal a failover loses sends none).

One difference from nats-server, in what a trace subscriber sees and not in what is
delivered or stored: nats-server writes a trace delivered on its own server with an empty
reply and so two spaces (``MSG trace.dest 1  506``), natsd with one, as every other message
(clients parse both).
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from random import randrange
from typing import Any, Final

import cramjam

from natsd.core.headers import replace_header
from natsd.protocol.parser import message_body
from natsd.router.account import SYSTEM_ACCOUNT
from natsd.router.publish import publish
from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription

__all__ = [
    "KIND_CLIENT",
    "TRACE_DEST",
    "TRACE_DEST_KEY",
    "TRACE_HOP_KEY",
    "TRACE_ORIGIN_ACCOUNT",
    "TRACE_PROTO",
    "MsgTrace",
    "active_trace",
    "deliver_traced",
    "disable_dest",
    "finish_trace",
    "go_json",
    "header_block",
    "is_trace_only",
    "rfc3339_nano",
    "run_internal",
    "send_trace",
    "trace_headers",
]

TRACE_DEST: Final = b"Nats-Trace-Dest"
TRACE_DEST_KEY: Final = "Nats-Trace-Dest"
_ONLY: Final = "Nats-Trace-Only"
TRACE_ORIGIN_ACCOUNT: Final = "Nats-Trace-Origin-Account"
TRACE_HOP_KEY: Final = "Nats-Trace-Hop"
_ACCEPT_ENCODING: Final = "Accept-Encoding"
# A route peer that announces at least this protocol takes part in traces (nats-server's
# MsgTraceProto): it is sent trace-only messages and sends its own trace event.
TRACE_PROTO: Final = 3
DEST_DISABLED: Final = "trace disabled"  # (not a valid subject: it has a space)
_STATUS_LINE: Final = b"NATS/1.0\r\n"

_JS_API: Final = b"$JS.API."
KIND_CLIENT: Final = 0
KIND_ROUTER: Final = 1

ERR_ONLY_NO_SUPPORT: Final = "Not delivered because remote does not support message tracing"
ERR_NO_SUPPORT: Final = (
    "Message delivered but remote does not support message tracing so no trace event "
    "generated from there"
)
ERR_NO_ECHO: Final = "Not delivered because of no echo"
ERR_SUB_DENY: Final = "Not delivered because subscription denies this subject"
ERR_CLIENT_CLOSED: Final = "Not delivered because client is closed"


def trace_headers(hdr: bytes) -> dict[str, list[str]] | None:
    """The headers of a message that asks for a trace (``genHeaderMapIfTraceHeadersPresent``):
    every header with a key and a value, in order, values trimmed of spaces and tabs; None
    when there is no ``Nats-Trace-Dest``, or when its first value is ``trace disabled``."""
    if not hdr.startswith(_STATUS_LINE):
        return None
    out: dict[str, list[str]] = {}
    dest: str | None = None
    for raw in hdr[len(_STATUS_LINE) :].split(b"\r\n"):
        i = raw.find(b":")
        if i <= 0:
            continue
        key = raw[:i].decode(errors="replace")
        value = raw[i + 1 :].strip(b" \t").decode(errors="replace")
        if not value:
            continue
        if key == TRACE_DEST_KEY and dest is None:
            dest = value
        out.setdefault(key, []).append(value)
    if dest is None or dest == DEST_DISABLED:
        return None
    return out


def is_trace_only(headers: dict[str, list[str]]) -> bool:
    vals = headers.get(_ONLY)
    return vals is not None and vals[0].lower() in ("1", "true", "on")


def go_json(doc: Any) -> bytes:
    """``doc`` as Go's ``encoding/json`` writes it: compact, keys in the order given, with
    Go's HTML-safe escapes (the characters only ever appear inside strings)."""
    s = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    if "<" in s or ">" in s or "&" in s or "\u2028" in s or "\u2029" in s:
        s = (
            s.replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )
    return s.encode()


def rfc3339_nano(t_ns: int, utc: bool = False) -> str:
    """Go's ``time.RFC3339Nano``: nanoseconds with the trailing zeros dropped, ``Z`` for a
    zero offset, else ``+hh:mm``; local time unless ``utc``."""
    secs, ns = divmod(t_ns, 1_000_000_000)
    dt = datetime.fromtimestamp(secs, UTC)
    if not utc:
        dt = dt.astimezone()
    out = dt.strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{ns:09d}".rstrip("0")
    if frac:
        out += "." + frac
    off = dt.utcoffset()
    mins = int(off.total_seconds()) // 60 if off is not None else 0
    if mins == 0:
        return out + "Z"
    sign = "+" if mins > 0 else "-"
    mins = abs(mins)
    return f"{out}{sign}{mins // 60:02d}:{mins % 60:02d}"


def _now() -> str:
    return rfc3339_nano(time.time_ns())


# The trace of the message an internal subscription (a stream's) is handling now.
_active: list[MsgTrace] = []


def run_internal(trace: MsgTrace, fn: Callable[[], object]) -> None:
    """Run an internal subscription's callback for a traced message (``active_trace``)."""
    _active.append(trace)
    try:
        fn()
    finally:
        _active.pop()


def active_trace(hdr: bytes | None) -> MsgTrace | None:
    """Inside ``run_internal``, for the traced message's own headers: its trace."""
    if _active and hdr and TRACE_DEST in hdr:
        return _active[-1]
    return None


def disable_dest(hdr: bytes) -> bytes:
    """``hdr`` with its ``Nats-Trace-Dest`` value replaced, in place, by ``trace disabled``
    (what a stream stores: a consumer's delivery must not start the trace again), as
    nats-server's stream does it (``setHeader``)."""
    return replace_header(hdr, TRACE_DEST.decode(), DEST_DISABLED.encode())


class MsgTrace:
    """One traced message on this server: its events, and whether it is only traced."""

    __slots__ = ("account", "dest", "events", "headers", "held", "hop", "hops", "js", "msgsize",
                 "only", "sender")  # fmt: skip

    def __init__(
        self,
        dest: str,
        only: bool,
        headers: dict[str, list[str]],
        msgsize: int,
        account: str,
        from_route: bool = False,
    ) -> None:
        self.dest = dest
        self.only = only
        self.headers = headers
        self.msgsize = msgsize
        self.account = account
        self.hops = 0
        # the hop this server is on: "" at the origin (whatever a client wrote there),
        # "1", "1.2", ... as the routes numbered it
        hops = headers.get(TRACE_HOP_KEY) if from_route else None
        self.hop = hops[0] if hops else ""
        self.events: list[dict[str, Any]] = []
        self.js: dict[str, Any] | None = None
        # held by a replicated stream until it applies the message (``hold``); the send
        # left for it then (``finish_trace``)
        self.held = False
        self.sender: Callable[[], None] | None = None

    def hold(self) -> None:
        """A replicated stream proposed the message: the trace goes when it is applied
        (``release``), or never if the proposal is lost."""
        self.held = True

    def release(self, subject: str, nointerest: bool, error: str = "") -> None:
        """The stream applied the held message: stored under ``subject``, or refused by
        the store with ``error``; the trace is sent now."""
        if error:
            if self.js is not None:
                self.js["error"] = error
        else:
            self.js_stored(subject, nointerest)
        self.held = False
        sender, self.sender = self.sender, None
        if sender is not None:
            sender()

    def next_hop(self) -> str:
        """The hop of the next route this server sends the message on (``setHopHeader``)."""
        self.hops += 1
        return f"{self.hop}.{self.hops}" if self.hop else str(self.hops)

    def egress_route(self, cid: int, name: str, hop: str, error: str = "") -> None:
        ev: dict[str, Any] = {"type": "eg", "ts": _now(), "kind": KIND_ROUTER, "cid": cid}
        if name:
            ev["name"] = name
        ev["hop"] = hop
        if error:
            ev["error"] = error
        self.events.append(ev)

    def js_event(self, stream: str) -> None:
        """A stream takes the message (``addJetStreamEvent``)."""
        self.js = {"type": "js", "ts": _now(), "stream": stream}
        self.events.append(self.js)

    def js_stored(self, subject: str, nointerest: bool) -> None:
        """It passed the stream's checks, under ``subject`` (``updateJetStreamEvent``)."""
        if self.js is not None:
            self.js["ts"] = _now()
            self.js["subject"] = subject
            if nointerest:
                self.js["nointerest"] = True

    def js_answer(self, payload: bytes) -> None:
        """The stream answered the publish with ``payload``: an error or a duplicate."""
        if self.js is None:
            return
        try:
            doc = json.loads(payload)
        except ValueError:
            return
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            self.js["error"] = str(err.get("description", ""))
        elif isinstance(doc, dict) and doc.get("duplicate"):
            self.js["error"] = "msgid is duplicate"

    def ingress(self, kind: int, cid: int, name: str, subject: bytes, error: str = "") -> None:
        ev: dict[str, Any] = {"type": "in", "ts": _now(), "kind": kind, "cid": cid}
        if name:
            ev["name"] = name
        ev["acc"] = self.account
        ev["subj"] = subject.decode(errors="replace")
        if error:
            ev["error"] = error
        self.events.append(ev)

    def service_import(self, account: str, subject: bytes) -> None:
        """The message crossed a service import into ``account`` (no transform here)."""
        subj = subject.decode(errors="replace")
        self.events.append({"type": "si", "ts": _now(), "acc": account, "from": subj, "to": subj})

    def egress_client(self, c: Sink, sub: Subscription, error: str = "") -> None:
        ev: dict[str, Any] = {"type": "eg", "ts": _now(), "kind": KIND_CLIENT, "cid": c.cid}
        name = getattr(c, "name", "")
        if name:
            ev["name"] = name
        ev["sub"] = sub.subject.decode(errors="replace")
        if sub.queue:
            ev["queue"] = sub.queue.decode(errors="replace")
        if error:
            ev["error"] = error
        self.events.append(ev)

    def event(self, server: dict[str, Any]) -> bytes:
        """The trace message's payload (``MsgTraceEvent``); ``server`` is the server block."""
        request: dict[str, Any] = {}
        if self.headers:
            request["header"] = {k: self.headers[k] for k in sorted(self.headers)}
        if self.msgsize:
            request["msgsize"] = self.msgsize
        doc: dict[str, Any] = {"server": server, "request": request}
        if self.hops:
            doc["hops"] = self.hops
        doc["events"] = self.events
        return go_json(doc)


def deliver_traced(
    trace: MsgTrace,
    psubs: list[Subscription],
    qsubs: list[list[Subscription]],
    subject: bytes,
    publisher: Sink | None,
    plain: Callable[[Subscription], int],
    internal: Callable[[Subscription], object],
) -> int:
    """``router/deliver.deliver`` for a traced message: an egress event per client
    subscription that would take it (with nats-server's error for one that would not).
    Trace-only writes nothing, yet counts as delivered (a queue group stops at its pick, and
    the publisher gets no "no responders"). ``plain`` delivers to one subscription the
    usual way; ``internal`` runs an internal subscription (the server's own) with the trace
    active (``run_internal``)."""
    n = 0
    for sub in psubs:
        if _one(trace, sub, publisher, subject, plain, internal):
            n += 1
    for group in qsubs:
        gsize = len(group)
        start = randrange(gsize) if gsize > 1 else 0
        for k in range(gsize):
            if _one(trace, group[(start + k) % gsize], publisher, subject, plain, internal):
                n += 1
                break
    return n


def _one(
    trace: MsgTrace,
    sub: Subscription,
    publisher: Sink | None,
    subject: bytes,
    plain: Callable[[Subscription], int],
    internal: Callable[[Subscription], object],
) -> bool:
    c = sub.client
    if c is None:
        if sub.subject.startswith(_JS_API):
            # nats-server serves the API from the system account through an import that
            # does not pass traces on: the import is traced, a trace-only request stops
            # there (its reply gets a 503), any other is served untraced
            trace.service_import(SYSTEM_ACCOUNT, subject)
            if trace.only:
                return False
            return plain(sub) > 0
        internal(sub)
        return True
    if c is publisher and not c.echo:
        trace.egress_client(c, sub, ERR_NO_ECHO)
        return False
    if c.sub_deny is not None and c.sub_deny(subject):
        trace.egress_client(c, sub, ERR_SUB_DENY)
        return False
    if getattr(c, "closed", False):
        trace.egress_client(c, sub, ERR_CLIENT_CLOSED)
        return False
    trace.egress_client(c, sub)
    if trace.only:
        return True
    return plain(sub) > 0


def finish_trace(sublist: Sublist[Subscription], trace: MsgTrace, server: dict[str, Any]) -> None:
    """The traced message has gone where it goes on this server: its trace is sent, unless
    a replicated stream holds it (then the stream's ``release`` sends it)."""
    if trace.held:
        trace.sender = lambda: send_trace(sublist, trace, server)
        return
    send_trace(sublist, trace, server)


def send_trace(sublist: Sublist[Subscription], trace: MsgTrace, server: dict[str, Any]) -> None:
    """Publish ``trace``'s event to its destination in the account of ``sublist``: a plain
    message (no reply), compressed as the traced message's ``Accept-Encoding`` asks (the
    key as written; snappy or s2: framed snappy, else gzip; any other value: identity), as
    nats-server's ``sendInternalAccountSysMsg``."""
    payload = trace.event(server)
    accept = trace.headers.get(_ACCEPT_ENCODING)
    hdr: bytes | None = None
    if accept:
        want = accept[0].lower()
        if "snappy" in want or "s2" in want:
            encoding = "snappy"
            payload = bytes(cramjam.snappy.compress(payload))
        elif "gzip" in want:
            encoding = "gzip"
            payload = gzip.compress(payload)
        else:
            encoding = "identity"
        hdr = b"NATS/1.0\r\nContent-Encoding: " + encoding.encode() + b"\r\n\r\n"
    publish(sublist, trace.dest.encode(), None, hdr, payload)


def header_block(tail: bytes, size: int, hlen: int) -> bytes:
    """The header block of a parsed HPUB (``tail`` as the parser sliced it)."""
    return message_body(tail, size)[:hlen]
