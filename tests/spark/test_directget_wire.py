"""The connector's direct-get reply parser (``_take_raw``) against a plain reference parser,
on random traffic: usual replies (the one-regex path), replies with stored headers, odd
values and payloads with CRLF inside (the general path), status frames, and every way of
cutting the bytes into reads."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd_spark.directget import Columns, _Batch, _take_raw

SID = 7

_token = st.text("abcxyz019-_", min_size=1, max_size=6)
_subject = st.lists(_token, min_size=1, max_size=3).map(".".join)
# Values the server would never send but a parser must not trip over: spaces and tabs.
_odd_value = st.sampled_from(["a b", " a", "a\tb", "a "])
_payload = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"", b"\r\n", b"x\r\nHMSG y", b"\r", b"abc\r", b"\nNATS/1.0\r\n\r\n"]),
)
_stored = st.one_of(
    st.just(b""),
    st.sampled_from([
        b"k: v\r\n",
        b"Nats-Subject: fake\r\nk: v\r\n",
        b"Nats-Stream: X\r\nNats-Subject: s\r\nNats-Sequence: 99\r\n"
        b"Nats-Time-Stamp: 2000-01-01T00:00:00Z\r\n",
    ]),
)


@st.composite
def _message(draw: st.DrawFn) -> tuple[int, bytes, bytes, bytes, bytes]:
    """(seq, subject, time stamp, payload, stored header lines)."""
    seq = draw(st.integers(1, 10**12))
    subject = draw(st.one_of(_subject, _odd_value)).encode()
    ts = draw(st.one_of(
        st.just("2026-11-22T10:00:00.123456789Z"), _odd_value)).encode()
    return seq, subject, ts, draw(_payload), draw(_stored)


def _frame(inbox: bytes, sid: int, hdr: bytes, data: bytes) -> bytes:
    return b"HMSG %s %d %d %d\r\n%s%s\r\n" % (inbox, sid, len(hdr), len(hdr) + len(data), hdr,
                                              data)


def _reply(msg: tuple[int, bytes, bytes, bytes, bytes], pending: int) -> bytes:
    seq, subject, ts, data, stored = msg
    hdr = (b"NATS/1.0\r\n%sNats-Stream: S\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\n"
           b"Nats-Time-Stamp: %s\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n\r\n"
           % (stored, subject, seq, ts, pending, max(seq - 1, 0)))
    return _frame(b"_INBOX.abc", SID, hdr, data)


def _expected(msgs: list[tuple[int, bytes, bytes, bytes, bytes]]) -> Columns:
    """What a reader must take from each reply: the server's values (its headers come after
    any stored ones), stripped; the payload as sent."""
    out = Columns(True)
    for seq, subject, ts, data, _stored in msgs:
        out.seqs.append(seq)
        out.subjects.append(subject.strip())
        out.times.append(ts.strip())
        out.data.append(data)
    return out


@settings(max_examples=300, deadline=None)
@given(msgs=st.lists(_message(), min_size=1, max_size=12), data=st.data())
def test_take_raw_matches_a_reference_parse(
    msgs: list[tuple[int, bytes, bytes, bytes, bytes]], data: st.DataObject
) -> None:
    eob = _frame(b"_INBOX.abc", SID,
                 b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 1\r\n\r\n",
                 b"")
    wire = b"".join(_reply(m, len(msgs) - i - 1) for i, m in enumerate(msgs)) + eob
    wire += b"PING\r\n"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=6)))
    loop = asyncio.new_event_loop()
    try:
        b = _Batch(0, 10**13, 10**13, Columns(True), loop.create_future())
        buf = bytearray()
        other = False
        for lo, hi in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            buf.extend(wire[lo:hi])
            other = _take_raw(buf, {SID: b})
        assert other and bytes(buf) == b"PING\r\n"  # left for nats-py
        want = _expected(msgs)
        got = b.cols
        assert (got.seqs, got.subjects, got.times, got.data) == (
            want.seqs, want.subjects, want.times, want.data)
        assert got.headers is not None and len(got.headers) == len(msgs)
        assert (b.status, b.pending, b.count, b.last) == (b"204", 0, len(msgs), msgs[-1][0])
    finally:
        loop.close()
