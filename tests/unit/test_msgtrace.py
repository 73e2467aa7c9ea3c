"""router/msgtrace.py's pure parts: the header scan, Go's JSON form and RFC 3339 times
(the behaviour against nats-server is in tests/differential/test_msg_trace.py)."""

from __future__ import annotations

from natsd.router.msgtrace import go_json, is_trace_only, rfc3339_nano, trace_headers


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
