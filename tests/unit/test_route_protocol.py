"""Unit tests for the sans-I/O route protocol: protocol.route_parser and protocol.route_encode.

The bytes themselves are checked against nats-server in tests/differential/test_route_wire.py;
here: every verb, every split point, bad input, limits, and random bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from natsd.protocol.parser import message_body
from natsd.protocol.route_encode import (
    ROUTE_OK,
    ROUTE_PING,
    ROUTE_PONG,
    encode_route_connect,
    encode_route_err,
    encode_route_hmsg,
    encode_route_info,
    encode_route_rmsg,
    encode_rs_minus,
    encode_rs_plus,
)
from natsd.protocol.route_parser import (
    DEFAULT_ROUTE_MAX_CONTROL_LINE,
    R_CONNECT,
    R_ERR,
    R_HMSG,
    R_INFO,
    R_OK,
    R_PEER_ERR,
    R_PING,
    R_PONG,
    R_RMSG,
    R_SUB,
    R_UNSUB,
    RouteEvent,
    RouteParser,
)

A = b"$G"
HDR = b"NATS/1.0\r\nK: v\r\n\r\n"

# (frame, the event it decodes to)
FRAMES: list[tuple[bytes, RouteEvent]] = [
    (ROUTE_PING, (R_PING,)),
    (ROUTE_PONG, (R_PONG,)),
    (ROUTE_OK, (R_OK,)),
    (encode_route_err("Authorization Violation"), (R_PEER_ERR, "Authorization Violation")),
    (
        encode_route_info({"server_id": "S1", "cluster": "c"}),
        (R_INFO, b'{"server_id":"S1","cluster":"c"}'),
    ),
    (
        encode_route_connect({"name": "S1", "cluster": "c"}),
        (R_CONNECT, b'{"name":"S1","cluster":"c"}'),
    ),
    (encode_rs_plus(A, b"foo.*"), (R_SUB, A, b"foo.*", None, 1)),
    (encode_rs_plus(A, b"foo.>", b"grp", 7), (R_SUB, A, b"foo.>", b"grp", 7)),
    (encode_rs_minus(A, b"foo.*"), (R_UNSUB, A, b"foo.*", None)),
    (encode_rs_minus(b"ACC", b"foo", b"grp"), (R_UNSUB, b"ACC", b"foo", b"grp")),
    (
        encode_route_rmsg(A, b"s", None, None, b"hello"),
        (R_RMSG, A, b"s", None, None, 5, b" 5\r\nhello\r\n"),
    ),
    (encode_route_rmsg(A, b"s", b"r", None, b""), (R_RMSG, A, b"s", b"r", None, 0, b" 0\r\n\r\n")),
    (
        encode_route_rmsg(A, b"s", b"r", [b"q1", b"q2"], b"x\r\ny"),
        (R_RMSG, A, b"s", b"r", [b"q1", b"q2"], 4, b" 4\r\nx\r\ny\r\n"),
    ),
    (
        encode_route_rmsg(A, b"s", None, [b"q1"], b"abc"),
        (R_RMSG, A, b"s", None, [b"q1"], 3, b" 3\r\nabc\r\n"),
    ),
    (
        encode_route_hmsg(A, b"s", None, None, HDR, b"pl"),
        (R_HMSG, A, b"s", None, None, 18, 20, b" 18 20\r\n" + HDR + b"pl\r\n"),
    ),
    (
        encode_route_hmsg(A, b"s", b"r", [b"q"], HDR, b""),
        (R_HMSG, A, b"s", b"r", [b"q"], 18, 18, b" 18 18\r\n" + HDR + b"\r\n"),
    ),
    (
        encode_route_hmsg(A, b"s", None, [b"q", b"w"], HDR, b"z"),
        (R_HMSG, A, b"s", None, [b"q", b"w"], 18, 19, b" 18 19\r\n" + HDR + b"z\r\n"),
    ),
]
STREAM = b"".join(f for f, _ in FRAMES)
EXPECTED = [e for _, e in FRAMES]


def feed_all(p: RouteParser, *chunks: bytes) -> list[RouteEvent]:
    out: list[RouteEvent] = []
    for c in chunks:
        out += p.feed(c)
    return out


def one_error(data: bytes, **kw: int) -> str:
    evs = RouteParser(**kw).feed(data)
    assert evs and evs[-1][0] == R_ERR, evs
    assert all(e[0] != R_ERR for e in evs[:-1])
    return str(evs[-1][1])


# ---------------------------------------------------------------- encoders: nats-server's bytes


def test_encoders_write_nats_server_layouts() -> None:
    # The layouts of route.go addRouteSubOrUnsubProtoToBuf and client.go msgHeaderForRouteOrLeaf.
    assert encode_rs_plus(A, b"foo") == b"RS+ $G foo\r\n"
    assert encode_rs_plus(A, b"foo", b"q", 12) == b"RS+ $G foo q 12\r\n"
    assert encode_rs_minus(A, b"foo", b"q") == b"RS- $G foo q\r\n"
    assert encode_route_rmsg(A, b"foo", None, None, b"hi") == b"RMSG $G foo 2\r\nhi\r\n"
    assert encode_route_rmsg(A, b"foo", b"bar", None, b"hi") == b"RMSG $G foo bar 2\r\nhi\r\n"
    assert (
        encode_route_rmsg(A, b"foo", b"bar", [b"a", b"b"], b"hi")
        == b"RMSG $G foo + bar a b 2\r\nhi\r\n"
    )
    assert encode_route_rmsg(A, b"foo", None, [b"a"], b"hi") == b"RMSG $G foo | a 2\r\nhi\r\n"
    assert encode_route_hmsg(A, b"foo", None, None, b"H", b"p") == b"HMSG $G foo 1 2\r\nHp\r\n"
    assert encode_route_hmsg(A, b"f", b"r", [b"q"], b"H", b"") == b"HMSG $G f + r q 1 1\r\nH\r\n"
    assert encode_route_info({"a": 1}) == b'INFO {"a":1} \r\n'
    assert encode_route_connect({"a": 1}) == b'CONNECT {"a":1}\r\n'
    assert encode_route_err("x y") == b"-ERR 'x y'\r\n"


# ---------------------------------------------------------------- every verb, every split


def test_every_verb_in_one_feed() -> None:
    assert RouteParser().feed(STREAM) == EXPECTED


def test_every_frame_split_at_every_byte() -> None:
    for frame, expected in FRAMES:
        for i in range(len(frame) + 1):
            p = RouteParser()
            assert feed_all(p, frame[:i], frame[i:]) == [expected], (frame, i)
            assert p.buffered == 0


def test_whole_stream_split_at_every_byte() -> None:
    for i in range(len(STREAM) + 1):
        assert feed_all(RouteParser(), STREAM[:i], STREAM[i:]) == EXPECTED, i


def test_byte_at_a_time() -> None:
    p = RouteParser()
    assert feed_all(p, *[STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_large_payload_in_small_reads_accumulates() -> None:
    payload = bytes(range(256)) * 2048  # 512 KiB
    frame = encode_route_rmsg(A, b"big", None, None, payload)
    p = RouteParser()
    evs: list[RouteEvent] = []
    for i in range(0, len(frame), 4096):
        evs += p.feed(frame[i : i + 4096])
        assert p.buffered <= len(frame)
    (ev,) = evs
    assert ev[:6] == (R_RMSG, A, b"big", None, None, len(payload))
    assert message_body(ev[6], ev[5]) == payload


def test_tail_is_rebuilt_for_odd_separators() -> None:
    (ev,) = RouteParser().feed(b"rmsg\t$G  s\tr   5 \r\nhello\r\n")
    assert ev == (R_RMSG, A, b"s", b"r", None, 5, b" 5\r\nhello\r\n")
    (ev,) = RouteParser().feed(b"HMSG $G s 1   3\nHab\r\n")
    assert ev == (R_HMSG, A, b"s", None, None, 1, 3, b" 1 3\r\nHab\r\n")


def test_case_and_tabs_as_nats_server_accepts() -> None:
    evs = RouteParser().feed(b"rs+\t$G foo\r\nping\r\nPong\r\n+ok\r\ninfo {}\r\nRS- $G\tfoo q\n")
    assert evs == [
        (R_SUB, A, b"foo", None, 1),
        (R_PING,),
        (R_PONG,),
        (R_OK,),
        (R_INFO, b"{}"),
        (R_UNSUB, A, b"foo", b"q"),
    ]


def test_reply_indicator_without_queues() -> None:
    # nats-server reads "+ <reply>" with no queue names as a plain reply.
    (ev,) = RouteParser().feed(b"RMSG $G s + r 1\r\nx\r\n")
    assert ev == (R_RMSG, A, b"s", b"r", None, 1, b" 1\r\nx\r\n")


def test_peer_err_without_quotes() -> None:
    assert RouteParser().feed(b"-ERR oops\r\n") == [(R_PEER_ERR, "oops")]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"GARBAGE\r\n", "unknown protocol operation"),
        (b"XY", "unknown protocol operation"),  # refused before any newline
        (b"PUB foo 1\r\nx\r\n", "unknown protocol operation"),
        (b"MSG foo 1 1\r\nx\r\n", "unknown protocol operation"),
        (b"SUB foo 1\r\n", "unknown protocol operation"),
        (b"RMSG $G 5\r\n", "RMSG has too few arguments"),
        (b"RMSG $G foo x\r\n", "RMSG has a bad size"),
        (b"RMSG $G foo -1\r\n", "RMSG has a bad size"),
        (b"RMSG $G foo 1234567890\r\n", "RMSG has a bad size"),
        (b"RMSG $G foo * r q 1\r\nx\r\n", "RMSG has a bad reply indicator"),
        (b"RMSG $G foo 1\r\nxy\r\n", "message payload not followed by CRLF"),
        (b"HMSG $G foo 2\r\n", "HMSG has too few arguments"),
        (b"HMSG $G foo 3 2\r\nab\r\n", "HMSG has a bad header size"),
        (b"HMSG $G foo x 2\r\nab\r\n", "HMSG has a bad header size"),
        (b"RS+ $G\r\n", "RS+ needs <account> <subject> [<queue> <weight>]"),
        (b"RS+ $G foo q\r\n", "RS+ needs <account> <subject> [<queue> <weight>]"),
        (b"RS+ $G foo q 0\r\n", "RS+ has a bad queue weight"),
        (b"RS+ $G foo q w\r\n", "RS+ has a bad queue weight"),
        (b"RS- $G\r\n", "RS- needs <account> <subject> [<queue>]"),
        (b"RS- $G a b c\r\n", "RS- needs <account> <subject> [<queue>]"),
        (b"RS+$G foo\r\n", "unknown protocol operation"),
        (b"INFO\r\n", "unknown protocol operation"),
        (b"INFO \r\n", "INFO has no body"),
        (b"CONNECTX {}\r\n", "unknown protocol operation"),
        (b"LS+ $G foo\r\n", "LS+ is not supported (no lnoc)"),
        (b"LS- $G foo\r\n", "LS- is not supported (no lnoc)"),
        (b"LMSG c $G foo 0 1\r\nx\r\n", "LMSG is not supported (no lnoc)"),
    ],
)
def test_bad_input_is_an_error_event(data: bytes, reason: str) -> None:
    assert one_error(data) == reason


def test_parser_is_dead_after_an_error() -> None:
    p = RouteParser()
    assert p.feed(b"PING\r\nBOGUS\r\nPING\r\n") == [
        (R_PING,),
        (R_ERR, "unknown protocol operation"),
    ]
    assert p.dead and p.buffered == 0
    assert p.feed(b"PING\r\n") == []


# ---------------------------------------------------------------- limits


def test_max_control_line_with_and_without_newline() -> None:
    p = RouteParser(max_control_line=64)
    long_subject = b"a" * 100
    assert p.feed(b"RS+ $G " + long_subject + b"\r\n") == [(R_ERR, "maximum control line exceeded")]
    # Without a newline the buffer stops growing at the limit.
    p = RouteParser(max_control_line=64)
    assert p.feed(b"RMSG $G ") == []
    evs: list[RouteEvent] = []
    for _ in range(100):
        evs += p.feed(b"a")
        assert p.buffered <= 65
    assert evs == [(R_ERR, "maximum control line exceeded")]


def test_default_control_line_is_nats_server_route_limit() -> None:
    assert DEFAULT_ROUTE_MAX_CONTROL_LINE == 65536
    subject = b"a" * 60000  # far over a client's 4096, within a route's
    (ev,) = RouteParser().feed(encode_rs_plus(A, subject))
    assert ev == (R_SUB, A, subject, None, 1)


def test_max_payload() -> None:
    assert one_error(b"RMSG $G foo 11\r\n", max_payload=10) == "maximum payload exceeded"
    assert one_error(b"HMSG $G foo 1 11\r\n", max_payload=10) == "maximum payload exceeded"
    (ev,) = RouteParser(max_payload=10).feed(encode_route_rmsg(A, b"f", None, None, b"0123456789"))
    assert ev[5] == 10


# ---------------------------------------------------------------- fuzz


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=64), max_size=8))
def test_random_bytes_never_raise(chunks: list[bytes]) -> None:
    p = RouteParser(max_payload=1024, max_control_line=256)
    evs: list[RouteEvent] = []
    for c in chunks:
        evs += p.feed(c)
        assert p.buffered <= 256 + 1024 + 16
    errs = [i for i, e in enumerate(evs) if e[0] == R_ERR]
    assert errs in ([], [len(evs) - 1])


_TOKENS = st.sampled_from(
    [
        b"RMSG",
        b"HMSG",
        b"RS+",
        b"RS-",
        b"LS+",
        b"INFO",
        b"PING",
        b"+OK",
        b"-ERR",
        b"$G",
        b"foo",
        b"+",
        b"|",
        b"q",
        b"0",
        b"1",
        b"5",
        b"99",
        b" ",
        b"\t",
        b"\r\n",
        b"\n",
        b"\r",
        b"x",
    ]
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=40), st.integers(min_value=0, max_value=200))
def test_protocol_shaped_noise_never_raises(tokens: list[bytes], cut: int) -> None:
    data = b"".join(tokens)
    p = RouteParser(max_payload=64, max_control_line=128)
    evs = feed_all(p, data[:cut], data[cut:])
    whole = RouteParser(max_payload=64, max_control_line=128).feed(data)
    assert evs == whole  # splitting never changes the result
    errs = [i for i, e in enumerate(evs) if e[0] == R_ERR]
    assert errs in ([], [len(evs) - 1])


@given(
    st.lists(
        st.tuples(
            st.binary(min_size=1, max_size=8).filter(lambda b: not any(c in b for c in b" \t\r\n")),
            st.none() | st.just(b"_INBOX.r"),
            st.none() | st.lists(st.sampled_from([b"q1", b"q2", b"grp"]), min_size=1, max_size=3),
            st.none() | st.just(HDR),
            st.binary(max_size=40),
        ),
        max_size=5,
    ),
    st.integers(min_value=1, max_value=17),
)
def test_encode_then_parse_round_trips(frames: list[tuple], step: int) -> None:
    data = b""
    for subj, reply, queues, hdr, payload in frames:
        if hdr is None:
            data += encode_route_rmsg(A, subj, reply, queues, payload)
        else:
            data += encode_route_hmsg(A, subj, reply, queues, hdr, payload)
    p = RouteParser()
    evs = feed_all(p, *[data[i : i + step] for i in range(0, len(data), step)])
    assert len(evs) == len(frames)
    # A tab anywhere in a read turns the compiled build's RMSG fast path off: both paths agree.
    assert RouteParser().feed(data + b"PING\t\r\n") == [*evs, (R_PING,)]
    for ev, (subj, reply, queues, hdr, payload) in zip(evs, frames, strict=True):
        if hdr is None:
            assert ev[:6] == (R_RMSG, A, subj, reply, queues, len(payload))
            assert message_body(ev[6], ev[5]) == payload
        else:
            assert ev[:7] == (R_HMSG, A, subj, reply, queues, len(hdr), len(hdr) + len(payload))
            assert message_body(ev[7], ev[6]) == hdr + payload


@pytest.mark.parametrize("length", [63, 64, 65])
def test_control_line_limit_does_not_depend_on_the_split(length: int) -> None:
    line = b"RS+ $G " + b"a" * (length - 7) + b"\r\n"
    whole = RouteParser(max_control_line=64).feed(line)
    assert whole == (
        [(R_ERR, "maximum control line exceeded")]
        if length > 64
        else [(R_SUB, A, b"a" * (length - 7), None, 1)]
    )
    for i in range(len(line) + 1):
        assert feed_all(RouteParser(max_control_line=64), line[:i], line[i:]) == whole, i
