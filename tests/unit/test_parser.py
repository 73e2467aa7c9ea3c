"""Unit tests for natsd.protocol.parser (sans-I/O client protocol parser)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from natsd.protocol.parser import (
    DEFAULT_MAX_CONTROL_LINE,
    OP_CONNECT,
    OP_ERR,
    OP_HPUB,
    OP_PING,
    OP_PONG,
    OP_PUB,
    OP_SUB,
    OP_UNSUB,
    Parser,
    message_body,
)

ERR_UNKNOWN = "Unknown Protocol Operation"
ERR_MCL = "maximum control line exceeded"
ERR_MAXP = "Maximum Payload Violation"
VALID_OPS = {OP_PUB, OP_HPUB, OP_SUB, OP_UNSUB, OP_PING, OP_PONG, OP_CONNECT, OP_ERR}


def _body(tail: bytes, size: int) -> bytes:
    assert tail.startswith(b" ") and tail.endswith(b"\r\n"), tail
    body = tail[len(tail) - size - 2 : len(tail) - 2]
    assert len(body) == size
    return body


def norm(ev: tuple) -> tuple:
    """PUB/HPUB events as (op, subject, reply, [hdr_len,] payload).

    The parser hands the frame's ``tail`` (`` <sizes>\r\n<payload>\r\n``) to the router; the
    tests compare semantic content and check the tail's exact bytes separately.
    """
    if ev[0] == OP_PUB:
        _, subject, reply, size, tail = ev
        if isinstance(size, bytes):  # (OP_PUB, subject, reply, size_token, payload) layout
            return (OP_PUB, subject, reply, tail)
        assert message_body(tail, size) == _body(tail, size)
        return (OP_PUB, subject, reply, _body(tail, size))
    if ev[0] == OP_HPUB:
        _, subject, reply, hlen, size, tail = ev
        if isinstance(size, bytes):  # (..., hdr_len, sizes_token, data) layout
            return (OP_HPUB, subject, reply, hlen, tail)
        body = _body(tail, size)
        assert hlen <= size
        return (OP_HPUB, subject, reply, hlen, body)
    return ev


def parse(data: bytes, **kw: int) -> list[tuple]:
    return [norm(e) for e in Parser(**kw).feed(data)]


def feed_chunks(chunks: list[bytes], **kw: int) -> list[tuple]:
    p = Parser(**kw)
    out: list[tuple] = []
    for c in chunks:
        out.extend(norm(e) for e in p.feed(c))
    return out


# --------------------------------------------------------------------------- each event type


def test_pub_without_reply() -> None:
    assert parse(b"PUB foo 5\r\nhello\r\n") == [(OP_PUB, b"foo", None, b"hello")]


def test_pub_with_reply() -> None:
    assert parse(b"PUB foo.bar _INBOX.x 2\r\nhi\r\n") == [(OP_PUB, b"foo.bar", b"_INBOX.x", b"hi")]


def test_pub_empty_payload() -> None:
    assert parse(b"PUB foo 0\r\n\r\n") == [(OP_PUB, b"foo", None, b"")]


def test_pub_payload_containing_crlf() -> None:
    assert parse(b"PUB foo 6\r\na\r\nb\r\n\r\n") == [(OP_PUB, b"foo", None, b"a\r\nb\r\n")]


def test_pub_size_token_copied_verbatim() -> None:
    # The size token is kept as sent so it can be copied into the MSG line.
    assert parse(b"PUB foo 005\r\nhello\r\n") == [(OP_PUB, b"foo", None, b"hello")]


def test_hpub_without_reply() -> None:
    hdr = b"NATS/1.0\r\nA: b\r\n\r\n"
    data = b"HPUB foo %d %d\r\n%shello\r\n" % (len(hdr), len(hdr) + 5, hdr)
    ev = parse(data)
    assert ev == [(OP_HPUB, b"foo", None, len(hdr), hdr + b"hello")]


def test_hpub_with_reply() -> None:
    hdr = b"NATS/1.0\r\n\r\n"
    ev = parse(b"HPUB foo rep 12 14\r\n" + hdr + b"hi\r\n")
    assert ev == [(OP_HPUB, b"foo", b"rep", 12, hdr + b"hi")]


def test_hpub_with_tabs_and_extra_spaces() -> None:
    hdr = b"NATS/1.0\r\n\r\n"
    ev = parse(b"HPUB foo   12\t 12\r\n" + hdr + b"\r\n")
    assert ev == [(OP_HPUB, b"foo", None, 12, hdr)]


# The router copies the event's tail straight into MSG/HMSG frames, so its exact bytes matter.
@pytest.mark.parametrize(
    ("data", "event"),
    [
        (b"PUB foo 5\r\nhello\r\n", (OP_PUB, b"foo", None, 5, b" 5\r\nhello\r\n")),
        (b"PUB foo r.1 2\r\nhi\r\n", (OP_PUB, b"foo", b"r.1", 2, b" 2\r\nhi\r\n")),
        (b"PUB foo 0\r\n\r\n", (OP_PUB, b"foo", None, 0, b" 0\r\n\r\n")),
        (b"PUB foo 2\nhi\r\n", (OP_PUB, b"foo", None, 2, b" 2\r\nhi\r\n")),
        (b"PUB\tfoo\t2\r\nhi\r\n", (OP_PUB, b"foo", None, 2, b" 2\r\nhi\r\n")),
        (b"PUB foo  r  2 \r\nhi\r\n", (OP_PUB, b"foo", b"r", 2, b" 2\r\nhi\r\n")),
        (b"pub foo 2\r\nhi\r\n", (OP_PUB, b"foo", None, 2, b" 2\r\nhi\r\n")),
        (
            b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
            (OP_HPUB, b"foo", None, 12, 14, b" 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        ),
        (
            b"HPUB foo r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
            (OP_HPUB, b"foo", b"r", 12, 14, b" 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        ),
        (
            b"HPUB\tfoo  12\t14\nNATS/1.0\r\n\r\nhi\r\n",
            (OP_HPUB, b"foo", None, 12, 14, b" 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        ),
    ],
)
def test_pub_event_tail_bytes(data: bytes, event: tuple) -> None:
    assert Parser().feed(data) == [event]
    # Identical when the frame arrives byte by byte.
    p = Parser()
    got: list[tuple] = []
    for i in range(len(data)):
        got.extend(p.feed(data[i : i + 1]))
    assert got == [event]


def test_message_body_extracts_payload_from_tail() -> None:
    (ev,) = Parser().feed(b"PUB foo 6\r\nab\r\ncd\r\n")
    assert message_body(ev[4], ev[3]) == b"ab\r\ncd"
    (ev,) = Parser().feed(b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
    assert message_body(ev[5], ev[4]) == b"NATS/1.0\r\n\r\nhi"


def test_vertical_tab_in_subject_parses_the_same_however_split() -> None:
    data = b"PUB foo\x0bbar 5\r\nhello\r\nSUB\tx\t1\r\n"
    whole = Parser().feed(data)
    p = Parser()
    cut = data.index(b"SUB")
    split = p.feed(data[:cut]) + p.feed(data[cut:])
    assert [norm(e) for e in whole] == [norm(e) for e in split]


def test_sub_without_and_with_queue() -> None:
    assert parse(b"SUB foo 1\r\nSUB foo.* q 22\r\n") == [
        (OP_SUB, b"foo", None, b"1"),
        (OP_SUB, b"foo.*", b"q", b"22"),
    ]


def test_unsub_without_and_with_max() -> None:
    assert parse(b"UNSUB 1\r\nUNSUB 22 10\r\n") == [(OP_UNSUB, b"1", None), (OP_UNSUB, b"22", 10)]


def test_ping_pong() -> None:
    assert parse(b"PING\r\nPONG\r\n") == [(OP_PING,), (OP_PONG,)]


def test_connect() -> None:
    js = b'{"verbose":false,"pedantic":false,"name":"a b"}'
    assert parse(b"CONNECT " + js + b"\r\n") == [(OP_CONNECT, js)]


def test_connect_is_limited_by_max_control_line() -> None:
    # nats-server 2.x refuses a CONNECT longer than max_control_line (measured: 5000 bytes
    # under the default 4096 get -ERR 'maximum control line exceeded', whole or split);
    # long JWTs need a larger max_control_line there too.
    js = b'{"jwt":"' + b"x" * 10000 + b'"}'
    line = b"CONNECT " + js + b"\r\n"
    for mcl, want in (
        (4096, [(OP_ERR, "maximum control line exceeded")]),
        (20000, [(OP_CONNECT, js)]),
    ):
        p = Parser(max_control_line=mcl)
        ev: list[tuple] = []
        for i in range(0, len(line), 512):
            ev.extend(p.feed(line[i : i + 512]))
        assert ev == want
        assert Parser(max_control_line=mcl).feed(line) == want


def test_info_from_client_is_ignored() -> None:
    assert parse(b'INFO {"x":1}\r\nPING\r\n') == [(OP_PING,)]


def test_lowercase_and_mixed_case_verbs() -> None:
    data = (
        b"pub foo 1\r\na\r\n"
        b"hpub foo 12 12\r\nNATS/1.0\r\n\r\n\r\n"
        b"sub foo 1\r\n"
        b"Sub foo q 2\r\n"
        b"unsub 1\r\n"
        b"uNsUb 2 3\r\n"
        b"ping\r\n"
        b"pong\r\n"
        b"connect {}\r\n"
    )
    assert parse(data) == [
        (OP_PUB, b"foo", None, b"a"),
        (OP_HPUB, b"foo", None, 12, b"NATS/1.0\r\n\r\n"),
        (OP_SUB, b"foo", None, b"1"),
        (OP_SUB, b"foo", b"q", b"2"),
        (OP_UNSUB, b"1", None),
        (OP_UNSUB, b"2", 3),
        (OP_PING,),
        (OP_PONG,),
        (OP_CONNECT, b"{}"),
    ]


def test_newline_only_line_endings() -> None:
    data = b"PUB foo 2\nhi\r\nSUB foo 1\nUNSUB 1 2\nPING\nPONG\nCONNECT {}\n"
    assert parse(data) == [
        (OP_PUB, b"foo", None, b"hi"),
        (OP_SUB, b"foo", None, b"1"),
        (OP_UNSUB, b"1", 2),
        (OP_PING,),
        (OP_PONG,),
        (OP_CONNECT, b"{}"),
    ]


def test_tabs_and_extra_spaces_as_separators() -> None:
    data = b"PUB\tfoo\t3\r\nabc\r\nSUB\tfoo\t\t1\r\nSUB   bar   q   2  \r\n"
    assert parse(data) == [
        (OP_PUB, b"foo", None, b"abc"),
        (OP_SUB, b"foo", None, b"1"),
        (OP_SUB, b"bar", b"q", b"2"),
    ]


@pytest.mark.parametrize(
    ("data", "event"),
    [
        (b"SUB\tfoo 1\r\n", (OP_SUB, b"foo", None, b"1")),
        (b"SUB\tfoo q 1\r\n", (OP_SUB, b"foo", b"q", b"1")),
        (b"UNSUB\t1 5\r\n", (OP_UNSUB, b"1", 5)),
        (b'CONNECT\t{"verbose": false}\r\n', (OP_CONNECT, b'{"verbose": false}')),
    ],
)
def test_tab_after_verb_with_spaces_later(data: bytes, event: tuple) -> None:
    assert parse(data) == [event]


def test_buffered_reports_held_bytes() -> None:
    p = Parser()
    assert p.buffered == 0
    assert p.feed(b"PUB foo 5\r\nhel") == []
    assert p.buffered == len(b"PUB foo 5\r\nhel")
    assert [norm(e) for e in p.feed(b"lo\r\n")] == [(OP_PUB, b"foo", None, b"hello")]
    assert p.buffered == 0
    assert p.feed(b"PIN") == []
    assert p.buffered == 3
    assert p.feed(b"G\r\n") == [(OP_PING,)]
    assert p.buffered == 0


# --------------------------------------------------------------------------- mixed stream

_HDR = b"NATS/1.0\r\nX-Key: v1\r\nX-Key: v2\r\n\r\n"
MIXED: list[tuple[bytes, tuple | None]] = [
    (
        b'CONNECT {"verbose":false,"headers":true}\r\n',
        (OP_CONNECT, b'{"verbose":false,"headers":true}'),
    ),
    (b"PING\r\n", (OP_PING,)),
    (b"PONG\r\n", (OP_PONG,)),
    (b"SUB foo.bar 1\r\n", (OP_SUB, b"foo.bar", None, b"1")),
    (b"SUB foo.* workers 2\r\n", (OP_SUB, b"foo.*", b"workers", b"2")),
    (b"PUB foo.bar 5\r\nhello\r\n", (OP_PUB, b"foo.bar", None, b"hello")),
    (
        b"PUB foo.bar _INBOX.abc 11\r\nhello world\r\n",
        (OP_PUB, b"foo.bar", b"_INBOX.abc", b"hello world"),
    ),
    (b"PUB crlf 8\r\n\r\nPING\r\n\r\n", (OP_PUB, b"crlf", None, b"\r\nPING\r\n")),
    (b"PUB empty 0\r\n\r\n", (OP_PUB, b"empty", None, b"")),
    (
        b"HPUB h.x %d %d\r\n%sbody\r\n" % (len(_HDR), len(_HDR) + 4, _HDR),
        (OP_HPUB, b"h.x", None, len(_HDR), _HDR + b"body"),
    ),
    (
        b"HPUB h.y r.1 %d %d\r\n%s\r\n" % (len(_HDR), len(_HDR), _HDR),
        (OP_HPUB, b"h.y", b"r.1", len(_HDR), _HDR),
    ),
    (b"UNSUB 1\r\n", (OP_UNSUB, b"1", None)),
    (b"UNSUB 2 100\r\n", (OP_UNSUB, b"2", 100)),
    (b"pub low 3\r\nabc\r\n", (OP_PUB, b"low", None, b"abc")),
    (
        b"hpub low r 12 13\r\nNATS/1.0\r\n\r\nz\r\n",
        (OP_HPUB, b"low", b"r", 12, b"NATS/1.0\r\n\r\nz"),
    ),
    (b"sub low q 3\r\n", (OP_SUB, b"low", b"q", b"3")),
    (b"unsub 3 1\r\n", (OP_UNSUB, b"3", 1)),
    (b"ping\r\n", (OP_PING,)),
    (b"pong\r\n", (OP_PONG,)),
    (b"connect {}\r\n", (OP_CONNECT, b"{}")),
    (b"PUB nl 2\nok\r\n", (OP_PUB, b"nl", None, b"ok")),
    (b"SUB nl 4\n", (OP_SUB, b"nl", None, b"4")),
    (b"UNSUB 4 7\n", (OP_UNSUB, b"4", 7)),
    (b"PING\n", (OP_PING,)),
    (b"PONG\n", (OP_PONG,)),
    (b"HPUB nl 12 12\nNATS/1.0\r\n\r\n\r\n", (OP_HPUB, b"nl", None, 12, b"NATS/1.0\r\n\r\n")),
    (b"INFO {}\r\n", None),
    (b"PUB last 1\r\n\n\r\n", (OP_PUB, b"last", None, b"\n")),
]
MIXED_STREAM = b"".join(f for f, _ in MIXED)
MIXED_EVENTS = [e for _, e in MIXED if e is not None]


def test_mixed_stream_whole() -> None:
    assert parse(MIXED_STREAM) == MIXED_EVENTS


def test_mixed_stream_split_at_every_point() -> None:
    for i in range(len(MIXED_STREAM) + 1):
        got = feed_chunks([MIXED_STREAM[:i], MIXED_STREAM[i:]])
        assert got == MIXED_EVENTS, f"split at {i}"


def test_mixed_stream_byte_by_byte() -> None:
    chunks = [MIXED_STREAM[i : i + 1] for i in range(len(MIXED_STREAM))]
    assert feed_chunks(chunks) == MIXED_EVENTS


def test_mixed_stream_three_way_splits() -> None:
    n = len(MIXED_STREAM)
    for i in range(0, n, 7):
        for j in range(i, n, 11):
            got = feed_chunks([MIXED_STREAM[:i], MIXED_STREAM[i:j], MIXED_STREAM[j:]])
            assert got == MIXED_EVENTS, (i, j)


def test_empty_feed_is_harmless() -> None:
    p = Parser()
    assert p.feed(b"") == []
    assert p.feed(b"PI") == []
    assert p.feed(b"") == []
    assert p.feed(b"NG\r\n") == [(OP_PING,)]


# --------------------------------------------------------------------------- large payloads


@pytest.mark.parametrize("size", [300 * 1024, 1024 * 1024])
def test_large_payload_in_1k_chunks(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + b"\r\n" * ((size % 256) // 2)
    payload = payload[:size].ljust(size, b"x")
    frame = b"PUB big r %d\r\n" % size + payload + b"\r\nPING\r\n"
    p = Parser()
    events: list[tuple] = []
    max_buffered = 0
    for i in range(0, len(frame), 1024):
        events.extend(norm(e) for e in p.feed(frame[i : i + 1024]))
        max_buffered = max(max_buffered, p.buffered)
    assert events == [(OP_PUB, b"big", b"r", payload), (OP_PING,)]
    assert p.buffered == 0
    assert max_buffered < len(frame)


def test_large_hpub_in_odd_chunks() -> None:
    hdr = b"NATS/1.0\r\nK: v\r\n\r\n"
    body = b"\r\n".join(b"line %d" % i for i in range(40000))
    frame = b"HPUB big %d %d\r\n" % (len(hdr), len(hdr) + len(body)) + hdr + body + b"\r\n"
    p = Parser()
    events: list[tuple] = []
    for i in range(0, len(frame), 4093):
        events.extend(norm(e) for e in p.feed(frame[i : i + 4093]))
    assert events == [(OP_HPUB, b"big", None, len(hdr), hdr + body)]


def test_payload_exactly_max_payload_is_accepted() -> None:
    assert parse(b"PUB foo 100\r\n" + b"x" * 100 + b"\r\n", max_payload=100) == [
        (OP_PUB, b"foo", None, b"x" * 100)
    ]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "data",
    [
        b"FOO bar\r\n",
        b"HELLO\r\n",
        b"PUBX foo 1\r\n",
        b"PUB\r\n",
        b"SUB\r\n",
        b"UNSUB\r\n",
        b"\r\n",
        b"MSG foo 1 1\r\na\r\n",
        b"+OK\r\n",
        b"-ERR 'x'\r\n",
    ],
)
def test_unknown_operation(data: bytes) -> None:
    assert parse(data) == [(OP_ERR, ERR_UNKNOWN)]


@pytest.mark.parametrize(
    "line",
    [
        b"SUB " + b"a" * (DEFAULT_MAX_CONTROL_LINE + 1) + b" 1",
        b"UNSUB " + b"1" * (DEFAULT_MAX_CONTROL_LINE + 1),
        b"PUB " + b"a" * (DEFAULT_MAX_CONTROL_LINE + 1) + b" 1",
        b"HPUB " + b"a" * (DEFAULT_MAX_CONTROL_LINE + 1) + b" 0 0",
    ],
)
def test_max_control_line_exceeded(line: bytes) -> None:
    # Whole line in one read.
    assert parse(line + b"\r\n") == [(OP_ERR, ERR_MCL)]
    # Line arriving in pieces without its newline: reported without waiting for the end.
    p = Parser()
    ev: list[tuple] = []
    for i in range(0, len(line), 100):
        ev.extend(p.feed(line[i : i + 100]))
    assert ev == [(OP_ERR, ERR_MCL)]


def test_control_line_at_max_is_accepted() -> None:
    subj = b"a" * (DEFAULT_MAX_CONTROL_LINE - 2)
    line = b"SUB " + subj + b" 1\r\n"
    assert len(line) - len(b"SUB ") - 2 == DEFAULT_MAX_CONTROL_LINE
    assert parse(line) == [(OP_SUB, subj, None, b"1")]
    chunks = [line[i : i + 1] for i in range(len(line))]
    assert feed_chunks(chunks) == [(OP_SUB, subj, None, b"1")]


def test_unterminated_long_line_hits_control_line_limit() -> None:
    p = Parser()
    ev = p.feed(b"SUB ")
    for _ in range(100):
        ev.extend(p.feed(b"x" * 100))
        assert p.buffered <= DEFAULT_MAX_CONTROL_LINE + 8
    assert ev == [(OP_ERR, ERR_MCL)]


@pytest.mark.parametrize("junk", [b"x", b"GET / HTTP/1.1", b"\x16\x03\x01", b"PUX", b"SUBX"])
def test_garbage_rejected_without_waiting_for_newline(junk: bytes) -> None:
    # Like nats-server's byte-driven parser: bytes that cannot start a verb fail at once.
    assert Parser().feed(junk) == [(OP_ERR, ERR_UNKNOWN)]


@pytest.mark.parametrize("prefix", [b"P", b"PU", b"HPU", b"su", b"UNSU", b"CONNEC", b"PIN", b"INF"])
def test_verb_prefix_waits_for_more(prefix: bytes) -> None:
    p = Parser()
    assert p.feed(prefix) == []
    assert p.buffered == len(prefix)


def test_ping_pong_with_trailing_bytes() -> None:
    # nats-server reads the verb and skips to the end of the line.
    assert parse(b"PINGX\r\nPONG junk\r\nping \r\n") == [(OP_PING,), (OP_PONG,), (OP_PING,)]


@pytest.mark.parametrize(
    "line",
    [b"PUB foo 101\r\n", b"PUB foo r 101\r\n", b"HPUB foo 12 101\r\n", b"HPUB foo r 12 101\r\n"],
)
def test_max_payload_reported_on_control_line(line: bytes) -> None:
    # Reported as soon as the control line arrives, before any payload byte.
    p = Parser(max_payload=100)
    assert p.feed(line) == [(OP_ERR, ERR_MAXP)]
    assert p.feed(b"x" * 101 + b"\r\n") == []


def test_max_payload_reported_when_line_is_split() -> None:
    p = Parser(max_payload=100)
    assert p.feed(b"PUB foo 10") == []
    assert p.feed(b"1\r") == []
    assert p.feed(b"\n") == [(OP_ERR, ERR_MAXP)]


@pytest.mark.parametrize(
    "data",
    [
        b"PUB foo 3\r\nabcX\r\n",
        b"PUB foo 3\r\nabcde",
        b"PUB foo 3\r\nab\r\n\r\n",
        b"PUB foo 3\r\nabc\nPING\r\n",
        b"HPUB foo 12 12\r\nNATS/1.0\r\n\r\nXY",
    ],
)
def test_payload_not_followed_by_crlf(data: bytes) -> None:
    assert parse(data) == [(OP_ERR, ERR_UNKNOWN)]
    # Same result however the bytes are split.
    assert feed_chunks([data[i : i + 1] for i in range(len(data))]) == [(OP_ERR, ERR_UNKNOWN)]


@pytest.mark.parametrize(
    "data",
    [
        b"PUB foo\r\n",
        b"PUB\tfoo\r\n",
        b"PUB a b c 3\r\n",
        b"PUB foo x\r\n",
        b"PUB foo -1\r\n",
        b"PUB foo 1.5\r\n",
        b"PUB foo 0x10\r\n",
        b"HPUB foo 5\r\n",
        b"HPUB foo a 5\r\n",
        b"HPUB foo 5 b\r\n",
        b"HPUB foo 10 5\r\n",
        b"HPUB a b c 1 2\r\n",
        b"SUB foo\r\n",
        b"SUB a b c d\r\n",
        b"UNSUB 1 2 3\r\n",
    ],
)
def test_bad_arguments(data: bytes) -> None:
    assert parse(data) == [(OP_ERR, None)]


def test_events_before_error_are_returned_and_parser_dies() -> None:
    p = Parser()
    assert p.feed(b"PING\r\nSUB foo 1\r\nBOGUS\r\nPING\r\n") == [
        (OP_PING,),
        (OP_SUB, b"foo", None, b"1"),
        (OP_ERR, ERR_UNKNOWN),
    ]
    assert p.feed(b"PING\r\n") == []
    assert p.feed(b"PUB foo 1\r\na\r\n") == []
    assert p.buffered == 0


def test_dead_after_split_error() -> None:
    p = Parser(max_payload=10)
    assert p.feed(b"PUB foo 5\r\nhel") == []
    assert p.feed(b"loXX") == [(OP_ERR, ERR_UNKNOWN)]
    assert p.feed(b"\r\nPING\r\n") == []
    assert p.buffered == 0


@pytest.mark.parametrize("mcl", [DEFAULT_MAX_CONTROL_LINE, 16384])
@pytest.mark.parametrize("digits", [10, 20, 4000, 5000])
def test_oversized_size_tokens_are_protocol_errors(mcl: int, digits: int) -> None:
    # nats-server's parseSize rejects more than 9 digits; nothing may escape feed() (CPython's
    # int() refuses strings over 4300 digits, reachable when max_control_line is raised).
    big = b"9" * digits
    for line in (
        b"PUB foo " + big,
        b"PUB foo r " + big,
        b"HPUB foo 1 " + big,
        b"HPUB foo " + big + b" 1",
    ):
        ev = Parser(max_control_line=mcl).feed(line + b"\r\n")
        if len(line) - 5 > mcl:
            assert ev == [(OP_ERR, ERR_MCL)]
        else:
            assert ev == [(OP_ERR, None)], line[:20]


@pytest.mark.parametrize("mx", [b"x", b"-1", b"1.5", b"9" * 10, b"9" * 5000])
def test_unsub_with_unusable_max_unsubscribes_at_once(mx: bytes) -> None:
    # nats-server: parseSize fails -> max <= 0 -> the subscription is removed immediately.
    assert parse(b"UNSUB 1 " + mx + b"\r\n", max_control_line=16384) == [(OP_UNSUB, b"1", 0)]


def test_unsub_max_zero() -> None:
    assert parse(b"UNSUB 1 0\r\n") == [(OP_UNSUB, b"1", 0)]


# --------------------------------------------------------------------------- hypothesis

TOKEN = st.text(alphabet="abcxyzAZ09_-*>", min_size=1, max_size=6)
SUBJECT = st.lists(TOKEN, min_size=1, max_size=4).map(lambda ts: ".".join(ts).encode())
SID = st.integers(min_value=1, max_value=10**6).map(lambda n: str(n).encode())
PAYLOAD = st.lists(
    st.one_of(st.binary(max_size=20), st.sampled_from([b"\r\n", b"\n", b"\r", b"PING\r\n"])),
    max_size=5,
).map(b"".join)
EOL = st.sampled_from([b"\r\n", b"\n"])


def _verb(draw: st.DrawFn, verb: bytes) -> bytes:
    return draw(st.sampled_from([verb, verb.lower()]))


@st.composite
def frame(draw: st.DrawFn) -> tuple[bytes, tuple]:
    kind = draw(st.sampled_from(["pub", "hpub", "sub", "unsub", "ping", "pong", "connect"]))
    eol = draw(EOL)
    # One separator per frame: mixing a tab after the verb with spaces later is a known bug
    # (see test_tab_after_verb_with_spaces_later).
    sep = draw(st.sampled_from([b" ", b" ", b"\t", b"  "]))
    if kind == "pub":
        subj = draw(SUBJECT)
        reply = draw(st.one_of(st.none(), SUBJECT))
        payload = draw(PAYLOAD)
        args = [subj] + ([reply] if reply else []) + [b"%d" % len(payload)]
        data = _verb(draw, b"PUB") + sep + sep.join(args) + eol + payload + b"\r\n"
        return data, (OP_PUB, subj, reply, payload)
    if kind == "hpub":
        subj = draw(SUBJECT)
        reply = draw(st.one_of(st.none(), SUBJECT))
        hdr = b"NATS/1.0\r\n" + draw(PAYLOAD) + b"\r\n\r\n"
        body = draw(PAYLOAD)
        sizes = [b"%d" % len(hdr), b"%d" % (len(hdr) + len(body))]
        args = [subj] + ([reply] if reply else []) + sizes
        data = _verb(draw, b"HPUB") + sep + sep.join(args) + eol + hdr + body + b"\r\n"
        return data, (OP_HPUB, subj, reply, len(hdr), hdr + body)
    if kind == "sub":
        subj = draw(SUBJECT)
        queue = draw(st.one_of(st.none(), TOKEN.map(str.encode)))
        sid = draw(SID)
        args = [subj] + ([queue] if queue else []) + [sid]
        return _verb(draw, b"SUB") + sep + sep.join(args) + eol, (OP_SUB, subj, queue, sid)
    if kind == "unsub":
        sid = draw(SID)
        mx = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=999_999_999)))
        tail = b"" if mx is None else sep + b"%d" % mx
        return _verb(draw, b"UNSUB") + sep + sid + tail + eol, (OP_UNSUB, sid, mx)
    if kind == "ping":
        return _verb(draw, b"PING") + eol, (OP_PING,)
    if kind == "pong":
        return _verb(draw, b"PONG") + eol, (OP_PONG,)
    js = b'{"name":"' + draw(st.text(alphabet="abc xyz", max_size=10)).encode() + b'"}'
    return _verb(draw, b"CONNECT") + b" " + js + eol, (OP_CONNECT, js)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for c in points:
        out.append(data[prev:c])
        prev = c
    out.append(data[prev:])
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(frame(), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 10**6), max_size=10),
)
def test_hypothesis_valid_frames(frames: list[tuple[bytes, tuple]], cuts: list[int]) -> None:
    data = b"".join(f for f, _ in frames)
    expected = [e for _, e in frames]
    assert parse(data) == expected
    p = Parser()
    got: list[tuple] = []
    for chunk in _split(data, cuts):
        got.extend(norm(e) for e in p.feed(chunk))
    assert got == expected
    assert p.buffered == 0


FRAGMENTS = st.sampled_from(
    [
        b"PUB ",
        b"HPUB ",
        b"SUB ",
        b"UNSUB ",
        b"PING",
        b"PONG",
        b"CONNECT ",
        b"INFO ",
        b"pub ",
        b"hpub ",
        b"\r\n",
        b"\n",
        b"\r",
        b" ",
        b"\t",
        b"foo",
        b"bar.*",
        b">",
        b"0",
        b"1",
        b"5",
        b"12",
        b"999",
        b"2000",
        b"99999999999999999999",
        b"-1",
        b"NATS/1.0",
        b"x" * 300,
    ]
)
ARBITRARY = st.lists(st.one_of(st.binary(max_size=40), FRAGMENTS), max_size=40).map(b"".join)

SMALL_MCL = 256
SMALL_MAXP = 1024
SLACK = 64
CONNECT_ALLOWANCE = 1024 * 1024 + SLACK


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=ARBITRARY, cuts=st.lists(st.integers(0, 10**6), max_size=8))
def test_hypothesis_arbitrary_bytes_never_raise(data: bytes, cuts: list[int]) -> None:
    for kw in ({"max_control_line": SMALL_MCL, "max_payload": SMALL_MAXP}, {}):
        p = Parser(**kw)
        mcl = p.max_control_line
        bound = mcl + p.max_payload + SLACK
        if b"CONNECT" in data.upper():
            bound = max(bound, CONNECT_ALLOWANCE)
        events: list[tuple] = []
        for chunk in _split(data, cuts):
            new = p.feed(chunk)
            if events and events[-1][0] == OP_ERR:
                assert new == []
            events.extend(new)
            assert p.buffered <= bound
        for i, ev in enumerate(events):
            assert isinstance(ev, tuple)
            assert ev[0] in VALID_OPS
            if ev[0] == OP_ERR:
                assert i == len(events) - 1
                assert ev[1] in (None, ERR_UNKNOWN, ERR_MCL, ERR_MAXP)
                assert p.buffered == 0
            elif ev[0] == OP_PUB:
                assert len(ev[4]) == int(ev[3]) <= p.max_payload
            elif ev[0] == OP_HPUB:
                assert ev[3] <= len(ev[5]) <= p.max_payload


def test_bare_connect_closes_without_reason() -> None:
    # nats-server closes a "CONNECT" with no JSON silently (differential-tested).
    assert parse(b"CONNECT\r\n") == [(OP_ERR, None)]
