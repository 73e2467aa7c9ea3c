"""The pieces of message counters (``jetstream/stream/counter.py``) on their own: header
lookup and replacement as nats-server's sliceHeader / setHeader do them, the increment's
syntax, and reading a counter's value as Go's encoding/json does."""

from __future__ import annotations

import pytest

from natsd.core.headers import replace_header, slice_header
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.stream.counter import (
    check_increment,
    counter_body,
    is_sources_map,
)
from natsd.jetstream.wire.errors import ApiError

H = b"NATS/1.0\r\nX-Nats-Incr: 9\r\nNats-Incr:  12 \r\nNats-Incr: 3\r\n\r\n"


def test_slice_header_finds_the_first_key_that_starts_a_line() -> None:
    assert slice_header(H, b"Nats-Incr") == b"12 "  # leading spaces skipped, not trailing
    assert slice_header(H, b"nats-incr") is None
    assert slice_header(b"NATS/1.0\r\nNats-Incr:\r\n\r\n", b"Nats-Incr") == b""
    assert slice_header(b"NATS/1.0\r\nNats-Incrx: 1\r\n\r\n", b"Nats-Incr") is None


def test_replace_header_in_place_or_at_the_end() -> None:
    hdr = b"NATS/1.0\r\nA: 1\r\nNats-Counter-Sources: old\r\nB: 2\r\n\r\n"
    assert replace_header(hdr, "Nats-Counter-Sources", b"{}") == (
        b"NATS/1.0\r\nA: 1\r\nNats-Counter-Sources: {}\r\nB: 2\r\n\r\n"
    )
    assert replace_header(b"NATS/1.0\r\nA: 1\r\n\r\n", "K", b"v") == (
        b"NATS/1.0\r\nA: 1\r\nK: v\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("raw", "payload", "want"),
    [
        (b"1", 0, 1),
        (b"-007", 0, -7),
        (b"+" + b"9" * 40, 0, int("9" * 40)),
        (b"1_0", 0, 10171),
        (b"\xd9\xa1", 0, 10171),  # an Arabic-Indic one: not Go's digit
        (b"1", 3, 10170),
    ],
)
def test_check_increment(raw: bytes, payload: int, want: int) -> None:
    cfg = StreamConfig(name="C", allow_msg_counter=True)
    got = check_increment(cfg, b"NATS/1.0\r\nNats-Incr: " + raw + b"\r\n\r\n", raw, payload)
    if isinstance(got, ApiError):
        assert got.err_code == want
    else:
        assert got == want


def test_a_stream_without_counters_and_incompatible_headers() -> None:
    off = StreamConfig(name="P")
    hdr = b"NATS/1.0\r\nNats-Incr: 1\r\n\r\n"
    got = check_increment(off, hdr, b"1", 0)
    assert isinstance(got, ApiError) and got.err_code == 10168
    on = StreamConfig(name="C", allow_msg_counter=True)
    rollup = b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Rollup: sub\r\n\r\n"
    got = check_increment(on, rollup, b"1", 0)
    assert isinstance(got, ApiError) and got.err_code == 10171
    empty = b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Rollup: \r\n\r\n"
    assert check_increment(on, empty, b"1", 0) == 1


def test_bodies_and_sources() -> None:
    assert counter_body(-12) == b'{"val":"-12"}'
    assert is_sources_map(b'{"O1":{"foo.1":"5"}}') and is_sources_map(b"null")
    assert not is_sources_map(b'{"O1":{"foo.1":5}}') and not is_sources_map(b"no")
