"""Unit tests for natsd.core.headers (the NATS/1.0 header block)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.core.headers import HeaderError, encode_headers, parse_headers, status_headers


def test_parse_plain_block() -> None:
    assert parse_headers(b"NATS/1.0\r\nFoo: bar\r\n\r\n") == (None, "", {"Foo": ["bar"]})


def test_parse_empty_block() -> None:
    assert parse_headers(b"NATS/1.0\r\n\r\n") == (None, "", {})


def test_parse_status_only() -> None:
    assert parse_headers(b"NATS/1.0 503\r\n\r\n") == (503, "", {})
    assert parse_headers(b"NATS/1.0 503") == (503, "", {})


def test_parse_status_with_description() -> None:
    assert parse_headers(b"NATS/1.0 408 Request Timeout\r\n\r\n") == (408, "Request Timeout", {})
    assert parse_headers(b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\n\r\n") == (
        100,
        "Idle Heartbeat",
        {"Nats-Last-Consumer": ["5"]},
    )


def test_parse_multi_value_headers_keep_order_and_case() -> None:
    block = b"NATS/1.0\r\nA: 1\r\nb: x\r\nA: 2\r\nA: 3\r\nB: y\r\n\r\n"
    status, desc, hdrs = parse_headers(block)
    assert status is None and desc == ""
    assert hdrs == {"A": ["1", "2", "3"], "b": ["x"], "B": ["y"]}
    assert list(hdrs) == ["A", "b", "B"]


def test_parse_value_with_colons_and_whitespace_trimmed() -> None:
    _, _, hdrs = parse_headers(b"NATS/1.0\r\nUrl:  http://h:1/x  \r\nEmpty:\r\n\r\n")
    assert hdrs == {"Url": ["http://h:1/x"], "Empty": [""]}


@pytest.mark.parametrize(
    "block",
    [
        b"HTTP/1.1 200\r\n\r\n",
        b"",
        b"NATS/1.0 abc\r\n\r\n",
        b"NATS/1.0\r\nno colon here\r\n\r\n",
        b"NATS/1.0\r\n: value\r\n\r\n",
    ],
)
def test_parse_errors(block: bytes) -> None:
    with pytest.raises(HeaderError):
        parse_headers(block)


def test_header_error_is_value_error() -> None:
    assert issubclass(HeaderError, ValueError)


def test_encode_exact_bytes() -> None:
    assert encode_headers() == b"NATS/1.0\r\n\r\n"
    assert encode_headers({"A": ["1", "2"], "B": ["x"]}) == (
        b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: x\r\n\r\n"
    )
    assert encode_headers(None, 503) == b"NATS/1.0 503\r\n\r\n"
    assert encode_headers({}, 408, "Request Timeout") == b"NATS/1.0 408 Request Timeout\r\n\r\n"
    assert encode_headers({"K": []}) == b"NATS/1.0\r\n\r\n"


def test_status_headers() -> None:
    assert status_headers(503) == b"NATS/1.0 503\r\n\r\n"
    assert status_headers(408, "Request Timeout", Nats_Pending_Messages="3") == (
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\n\r\n"
    )


def test_no_responders_block_parses() -> None:
    block = b"NATS/1.0 503\r\nNats-Subject: nobody\r\n\r\n"
    assert parse_headers(block) == (503, "", {"Nats-Subject": ["nobody"]})


KEY = st.text(alphabet="ABCXYZabcxyz0189-_", min_size=1, max_size=12)
VALUE = st.text(
    alphabet=st.sampled_from(list("abcXYZ019 :;=/-_.,\"'\u00e9\u4e2d\U0001f600")), max_size=20
).map(str.strip)
HEADERS = st.dictionaries(KEY, st.lists(VALUE, min_size=1, max_size=3), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    headers=HEADERS,
    status=st.one_of(st.none(), st.integers(100, 999)),
    desc=st.sampled_from(["", "Request Timeout", "No Messages", "Idle Heartbeat"]),
)
def test_round_trip(headers: dict[str, list[str]], status: int | None, desc: str) -> None:
    block = encode_headers(headers, status, desc)
    assert block.startswith(b"NATS/1.0") and block.endswith(b"\r\n\r\n")
    got_status, got_desc, got = parse_headers(block)
    assert got_status == status
    assert got_desc == (desc if status is not None else "")
    assert got == headers
