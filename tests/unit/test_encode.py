"""Unit tests for natsd.protocol.encode: exact bytes of server-to-client frames."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.protocol.encode import (
    OK,
    PING,
    PONG,
    encode_err,
    encode_hmsg,
    encode_info,
    encode_msg,
)
from natsd.protocol.parser import OP_HPUB, OP_PUB, Parser


def test_constants() -> None:
    assert OK == b"+OK\r\n"
    assert PING == b"PING\r\n"
    assert PONG == b"PONG\r\n"


def test_msg_without_reply() -> None:
    assert encode_msg(b"foo.bar", b"1", None, b"hello") == b"MSG foo.bar 1 5\r\nhello\r\n"


def test_msg_with_reply() -> None:
    assert encode_msg(b"foo", b"22", b"_INBOX.x", b"hi") == b"MSG foo 22 _INBOX.x 2\r\nhi\r\n"


def test_msg_empty_reply_is_no_reply() -> None:
    assert encode_msg(b"foo", b"1", b"", b"hi") == b"MSG foo 1 2\r\nhi\r\n"


def test_msg_empty_payload_and_binary_payload() -> None:
    assert encode_msg(b"foo", b"1", None, b"") == b"MSG foo 1 0\r\n\r\n"
    payload = bytes(range(256))
    assert encode_msg(b"foo", b"1", None, payload) == b"MSG foo 1 256\r\n" + payload + b"\r\n"


def test_hmsg_without_reply() -> None:
    hdr = b"NATS/1.0\r\nA: b\r\n\r\n"
    assert encode_hmsg(b"foo", b"3", None, hdr, b"hello") == (
        b"HMSG foo 3 18 23\r\nNATS/1.0\r\nA: b\r\n\r\nhello\r\n"
    )


def test_hmsg_with_reply_and_empty_body() -> None:
    hdr = b"NATS/1.0 503\r\n\r\n"
    assert encode_hmsg(b"inbox", b"1", b"r", hdr, b"") == (
        b"HMSG inbox 1 r 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
    )


def test_info_exact_bytes() -> None:
    info = {"server_id": "NABC", "port": 4222, "headers": True, "max_payload": 1048576}
    assert encode_info(info) == (
        b'INFO {"server_id":"NABC","port":4222,"headers":true,"max_payload":1048576} \r\n'
    )


def test_info_is_parseable_json() -> None:
    info = {"server_name": "n\u00e9\"x", "connect_urls": ["a:1", "b:2"], "nested": {"k": None}}
    frame = encode_info(info)
    assert frame.startswith(b"INFO ") and frame.endswith(b"\r\n")
    assert json.loads(frame[5:-2]) == info


@pytest.mark.parametrize(
    ("msg", "frame"),
    [
        ("Unknown Protocol Operation", b"-ERR 'Unknown Protocol Operation'\r\n"),
        ("Authorization Violation", b"-ERR 'Authorization Violation'\r\n"),
        (
            'Permissions Violation for Publish to "foo"',
            b"-ERR 'Permissions Violation for Publish to \"foo\"'\r\n",
        ),
    ],
)
def test_err(msg: str, frame: bytes) -> None:
    assert encode_err(msg) == frame


SUBJ = st.from_regex(rb"\A[a-z0-9_]{1,8}(\.[a-z0-9_]{1,8}){0,3}\Z")


@settings(max_examples=200, deadline=None)
@given(subject=SUBJ, reply=st.one_of(st.none(), SUBJ), payload=st.binary(max_size=200))
def test_msg_frame_round_trips_through_pub_parser(
    subject: bytes, reply: bytes | None, payload: bytes
) -> None:
    # A MSG frame is a PUB frame with a sid; reuse the client parser as an independent check.
    frame = encode_msg(subject, b"7", reply, payload)
    assert frame.startswith(b"MSG ")
    pub = b"PUB" + frame[3:].replace(b" 7 ", b" ", 1)
    (ev,) = Parser().feed(pub)
    assert ev[0] == OP_PUB and ev[1] == subject and ev[2] == reply
    assert ev[-1].endswith(payload + b"\r\n")


@settings(max_examples=200, deadline=None)
@given(
    subject=SUBJ,
    reply=st.one_of(st.none(), SUBJ),
    hdr=st.binary(max_size=50).map(lambda b: b"NATS/1.0\r\n" + b + b"\r\n\r\n"),
    payload=st.binary(max_size=200),
)
def test_hmsg_sizes(subject: bytes, reply: bytes | None, hdr: bytes, payload: bytes) -> None:
    frame = encode_hmsg(subject, b"7", reply, hdr, payload)
    line, _, rest = frame.partition(b"\r\n")
    parts = line.split(b" ")
    assert parts[0] == b"HMSG" and parts[1] == subject and parts[2] == b"7"
    assert parts[3:-2] == ([reply] if reply else [])
    assert int(parts[-2]) == len(hdr)
    assert int(parts[-1]) == len(hdr) + len(payload)
    assert rest == hdr + payload + b"\r\n"
    hpub = b"HPUB " + b" ".join([subject, *([reply] if reply else []), parts[-2], parts[-1]])
    (ev,) = Parser().feed(hpub + b"\r\n" + rest)
    assert ev[0] == OP_HPUB and ev[3] == len(hdr)
