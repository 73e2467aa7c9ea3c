"""router/msgtrace.py's pure parts: the header scan, Go's JSON form and RFC 3339 times
and a trace a replicated stream holds until it applies the message (the behaviour against
nats-server is in tests/differential/test_msg_trace*.py)."""

from __future__ import annotations

import json

from natsd.router.msgtrace import (
    MsgTrace,
    finish_trace,
    go_json,
    is_trace_only,
    rfc3339_nano,
    trace_headers,
)
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription


def test_trace_headers_keep_every_header_trimmed_and_need_a_destination() -> None:
    hdr = b"NATS/1.0\r\nA: 1\r\nNats-Trace-Dest:   t.d  \r\nEmpty:\r\nA:\t2\r\n\r\n"
    assert trace_headers(hdr) == {"A": ["1", "2"], "Nats-Trace-Dest": ["t.d"]}
    assert trace_headers(b"NATS/1.0\r\nNats-Trace-Only: true\r\n\r\n") is None
    assert trace_headers(b"NATS/1.0\r\nnats-trace-dest: t.d\r\n\r\n") is None  # exact case
    assert trace_headers(b"NATS/1.0\r\nNats-Trace-Dest: trace disabled\r\n\r\n") is None
    assert trace_headers(b"NATS/1.0 503\r\nNats-Trace-Dest: t.d\r\n\r\n") is None


def test_trace_only_values() -> None:
    for v, only in (("true", True), ("1", True), ("On", True), ("false", False), ("yes", False)):
        assert is_trace_only({"Nats-Trace-Only": [v]}) is only, v
    assert not is_trace_only({})


def test_go_json_escapes_as_go_does() -> None:
    # nats-server 2.15.1's bytes for the same value (captured: msgtrace spec, E1)
    assert go_json({"X-App": ['a<b>&c "q" é\u2028']}) == (
        '{"X-App":["a\\u003cb\\u003e\\u0026c \\"q\\" é\\u2028"]}'.encode()
    )


def test_rfc3339_nano_drops_trailing_zeros() -> None:
    t = 1_796_075_627_951_287_000
    assert rfc3339_nano(t, utc=True) == "2026-11-30T21:53:47.951287Z"
    assert rfc3339_nano(t - 951_287_000, utc=True) == "2026-11-30T21:53:47Z"
    assert rfc3339_nano(t + 1, utc=True) == "2026-11-30T21:53:47.951287001Z"


def test_a_held_trace_goes_when_the_stream_releases_it() -> None:
    """A replicated stream holds the trace of a message it proposed: ``finish_trace`` at
    the end of the publish leaves the send to ``release`` (at apply), which fills in the
    ``js`` event's subject, or the store's error."""
    sublist: Sublist[Subscription] = Sublist()
    got: list[bytes] = []
    sublist.insert(Subscription(b"t.d", None, b"1", callback=lambda *a: got.append(a[-1])))
    for error in ("", "maximum messages exceeded"):
        got.clear()
        trace = MsgTrace("t.d", False, {"Nats-Trace-Dest": ["t.d"]}, 10, "A")
        trace.js_event("S")
        trace.hold()
        finish_trace(sublist, trace, {"name": "n"})
        assert got == [] and trace.sender is not None
        trace.release("s.a", False, error)
        (event,) = got
        js = next(e for e in json.loads(event)["events"] if e["type"] == "js")
        assert js.get("subject") == (None if error else "s.a") and js.get("error", "") == error
    plain = MsgTrace("t.d", False, {"Nats-Trace-Dest": ["t.d"]}, 10, "A")
    got.clear()
    finish_trace(sublist, plain, {"name": "n"})
    assert len(got) == 1  # not held: sent at once
