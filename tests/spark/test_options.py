"""Option parsing, partition planning and helpers of the Spark data source (no Spark, no server)."""

from __future__ import annotations

import itertools
import re

import pytest

from natsd_spark.client import subject_matches
from natsd_spark.directget import parse_user_headers
from natsd_spark.options import (
    Offset,
    parse_offset,
    parse_read_options,
    parse_write_options,
)
from natsd_spark.source import _micros, plan_ranges


def test_defaults() -> None:
    o = parse_read_options({"stream": "S"})
    assert o.conn.servers == ("nats://127.0.0.1:4222",)
    assert o.starting == Offset("earliest") and o.ending == Offset("latest")
    assert not o.include_headers and o.min_partitions == 1
    s = parse_read_options({"stream": "S"}, streaming=True)
    assert s.starting == Offset("latest")


def test_values_parse() -> None:
    o = parse_read_options({
        "servers": "127.0.0.1:1, nats://h:2", "STREAM": "S", "subjects": "a.*, b.>",
        "startingOffsets": "5", "endingOffsets": "2026-01-02T03:04:05.5+01:00",
        "minPartitions": "4", "includeHeaders": "TRUE", "user": "u", "password": "p",
    })
    assert o.conn.servers == ("nats://127.0.0.1:1", "nats://h:2")
    assert o.subjects == ("a.*", "b.>")
    assert o.starting == Offset("seq", seq=5)
    assert o.ending == Offset("time", time="2026-01-02T02:04:05.500000Z")
    assert o.min_partitions == 4 and o.include_headers
    assert (o.conn.user, o.conn.password) == ("u", "p")


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({}, "'stream' is required"),
        ({"stream": "a.b"}, "not a valid stream name"),
        ({"stream": "S", "startingOffsets": "yesterday"}, "'startingOffsets' must be"),
        ({"stream": "S", "startingOffsets": "0"}, "sequences start at 1"),
        ({"stream": "S", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        ({"stream": "S", "minPartitions": "0"}, "'minPartitions' must be >= 1"),
        ({"stream": "S", "minPartitions": "x"}, "must be an integer"),
        ({"stream": "S", "includeHeaders": "maybe"}, "true or false"),
        ({"stream": "S", "subjects": "a.>.b"}, "invalid subject filter"),
        ({"stream": "S", "user": "u"}, "given together"),
        ({"stream": "S", "token": "t", "user": "u", "password": "p"}, "exclusive"),
        ({"stream": "S", "maxMessagesPerTrigger": "5"}, "streaming queries only"),
        ({"stream": "S", "startingOffset": "5"}, "unknown jetstream read option"),
    ],
)
def test_bad_read_options(opts: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_read_options(opts)


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(ValueError, match="batch queries only"):
        parse_read_options({"stream": "S", "endingOffsets": "5"}, streaming=True)


def test_write_options() -> None:
    w = parse_write_options({"servers": "x:1", "writeId": "job-7", "maxPendingAcks": "10"})
    assert w.write_id == "job-7" and w.max_pending_acks == 10 and w.stream is None
    with pytest.raises(ValueError, match="unknown jetstream write option"):
        parse_write_options({"subject": "x"})
    with pytest.raises(ValueError, match="'maxPendingAcks' must be >= 1"):
        parse_write_options({"maxPendingAcks": "0"})
    assert parse_write_options({}).fast_batch == "auto"
    assert parse_write_options({"fastBatch": "TRUE"}).fast_batch == "true"
    assert parse_write_options({"fastbatch": "false"}).fast_batch == "false"
    with pytest.raises(ValueError, match="'fastBatch' must be one of auto, true, false"):
        parse_write_options({"fastBatch": "sometimes"})
    # Spark hands a named streaming query's name to its sink.
    assert parse_write_options({"queryName": "q", "checkpointLocation": "/ck"}).stream is None


def test_parse_offset_latest_refused_where_asked() -> None:
    with pytest.raises(ValueError, match="cannot be 'latest'"):
        parse_offset("latest", "x", allow_latest=False)


@pytest.mark.parametrize(
    ("lo", "hi", "minp", "size", "want"),
    [
        (1, 1, 1, 10, []),
        (1, 11, 1, 100, [(1, 11)]),
        (1, 11, 3, 100, [(1, 5), (5, 8), (8, 11)]),
        (1, 26, 1, 10, [(1, 10), (10, 18), (18, 26)]),
        (5, 7, 8, 10, [(5, 6), (6, 7)]),
    ],
)
def test_plan_ranges(
    lo: int, hi: int, minp: int, size: int, want: list[tuple[int, int]]
) -> None:
    got = plan_ranges(lo, hi, minp, size)
    assert got == want
    if got:  # contiguous, covering, none wider than size
        assert got[0][0] == lo and got[-1][1] == hi
        assert all(a[1] == b[0] for a, b in itertools.pairwise(got))
        assert all(b - a <= size for a, b in got)


def test_micros() -> None:
    assert _micros("1970-01-01T00:00:01.123456789Z") == 1_123_456
    assert _micros("1970-01-01T00:00:01Z") == 1_000_000
    assert _micros("1970-01-01T01:00:01.5+01:00") == 1_500_000
    assert _micros("") is None


@pytest.mark.parametrize(
    ("filt", "subject", "ok"),
    [
        ("a.b", "a.b", True), ("a.*", "a.b", True), ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True), ("a.>", "a", False), (">", "x", True), ("a.b", "a", False),
    ],
)
def test_subject_matches(filt: str, subject: str, ok: bool) -> None:
    assert subject_matches(filt, subject) is ok


# --------------------------------------------------------------------------- direct-get parsing
def _reply(sid: int, seq: int, subject: str, data: bytes, stored: bytes = b"") -> bytes:
    hdr = (b"NATS/1.0\r\n" + stored + b"Nats-Stream: S\r\nNats-Subject: %s\r\n"
           b"Nats-Sequence: %d\r\nNats-Time-Stamp: 2026-11-22T10:00:0%d.123456789Z\r\n"
           b"Nats-Num-Pending: 9\r\nNats-Last-Sequence: 0\r\n\r\n") % (
        subject.encode(), seq, seq % 10)
    return b"HMSG _INBOX.x %d %d %d\r\n%s%s\r\n" % (sid, len(hdr), len(hdr) + len(data), hdr,
                                                   data)


def _eob(sid: int, pending: int) -> bytes:
    hdr = b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: 3\r\n\r\n" % pending
    return b"HMSG _INBOX.x %d %d %d\r\n%s\r\n" % (sid, len(hdr), len(hdr), hdr)


def test_take_raw_at_every_split_point() -> None:
    """Replies split anywhere across reads parse the same; other traffic is left alone."""
    import asyncio

    from natsd_spark.directget import Columns, _Batch, _take_raw

    wire = (_reply(7, 3, "a.b", b"x\r\ny") + _reply(7, 4, "a.c", b"",
                                                     b"Nats-Subject: fake\r\nk: v\r\n")
            + _reply(7, 9, "a.d", b"past the end") + _eob(7, 0))
    loop = asyncio.new_event_loop()
    try:
        for cut in range(len(wire) + 1):
            b = _Batch(3, 9, 10, Columns(True), loop.create_future())
            buf = bytearray(wire[:cut])
            assert not _take_raw(buf, {7: b})
            buf.extend(wire[cut:] + b"MSG other 1 2\r\nhi\r\n")
            assert _take_raw(buf, {7: b})  # stopped at the MSG for nats-py
            assert bytes(buf) == b"MSG other 1 2\r\nhi\r\n"
            c = b.cols
            assert c.seqs == [3, 4] and c.subjects == [b"a.b", b"a.c"]
            assert c.data == [b"x\r\ny", b""]
            assert c.times == [b"2026-11-22T10:00:03.123456789Z",
                               b"2026-11-22T10:00:04.123456789Z"]
            assert (b.status, b.pending, b.count, b.last, b.past_end) == (b"204", 0, 3, 9, True)
            assert b.complete()
            assert c.headers is not None
            assert parse_user_headers(c.headers[1]) == [("k", ["v"])]
    finally:
        loop.close()


def test_take_raw_stops_at_another_sid() -> None:
    """The one-regex path for the usual reply still leaves other subscriptions' replies
    (same layout, another sid) to nats-py, and switches batches by sid."""
    import asyncio

    from natsd_spark.directget import Columns, _Batch, _take_raw

    loop = asyncio.new_event_loop()
    try:
        a = _Batch(1, 100, 100, Columns(False), loop.create_future())
        b = _Batch(1, 100, 100, Columns(False), loop.create_future())
        other = _reply(9, 5, "z", b"q")
        buf = bytearray(_reply(7, 1, "a", b"1") + _reply(8, 2, "b", b"22") + _reply(7, 3, "c", b"")
                        + other)
        assert _take_raw(buf, {7: a, 8: b})
        assert bytes(buf) == other
        assert (a.cols.seqs, a.cols.data, b.cols.seqs, b.cols.data) == (
            [1, 3], [b"1", b""], [2], [b"22"])
    finally:
        loop.close()


def test_parse_user_headers() -> None:
    raw = (b"NATS/1.0\r\nA: 1\r\nB:2\r\nA: 3\r\nNats-Stream: S\r\nNats-Subject: s\r\n"
           b"Nats-Sequence: 1\r\n\r\n")
    assert parse_user_headers(raw) == [("A", ["1", "3"]), ("B", ["2"])]
    assert parse_user_headers(b"NATS/1.0\r\nNats-Stream: S\r\nNats-Sequence: 1\r\n\r\n") is None


def test_tls_and_nkey_options_travel_as_contents(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pickle
    import ssl

    from tlscerts import make_certs

    from natsd_spark.options import parse_connect

    certs = make_certs(tmp_path / "certs")
    opts = {
        "servers": "tls://localhost:4222",
        "tlsCaFile": str(certs.ca),
        "tlsCertFile": str(certs.alice_cert),
        "tlsKeyFile": str(certs.alice_key),
        "tlsFirst": "true",
    }
    conn = parse_connect(opts)
    assert conn.tls_ca == certs.ca.read_text() and conn.tls_first
    # What reaches an executor holds the files' contents, not paths on the driver.
    again = pickle.loads(pickle.dumps(conn))
    for f in (certs.ca, certs.alice_cert, certs.alice_key):
        f.rename(f.with_suffix(".gone"))
    ctx = again.tls_context()
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED
    assert "BEGIN" not in repr(again) and "PRIVATE" not in repr(again)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"tlsCaFile": "/nope/ca.pem"}, "'tlsCaFile': cannot read '/nope/ca.pem'"),
        ({"tlsCertFile": "CERT"}, "'tlsCertFile' and 'tlsKeyFile' must be given together"),
        ({"nkeySeedFile": "SEED", "user": "u", "password": "p"}, "are exclusive"),
        ({"nkeySeedFile": "NOTSEED"}, "does not hold a user nkey seed"),
        ({"tlsCaFile": "GARBAGE"}, "cannot use the files given"),
        ({"tlsFirst": "maybe"}, "'tlsFirst' must be true or false"),
    ],
)
def test_bad_tls_options(tmp_path, opts: dict[str, str], message: str) -> None:  # type: ignore[no-untyped-def]
    from tlscerts import make_certs

    from natsd_spark.options import parse_connect

    certs = make_certs(tmp_path / "certs")
    (tmp_path / "seed").write_text("SUAMSCZIPZX5KKDYFAHJGYO42YRLSE3ZKBUJDHLJH3S5XB3WZKGEX3IIGI")
    (tmp_path / "notseed").write_text("hello")
    (tmp_path / "garbage").write_text("not a certificate")
    subst = {
        "CERT": str(certs.alice_cert),
        "SEED": str(tmp_path / "seed"),
        "NOTSEED": str(tmp_path / "notseed"),
        "GARBAGE": str(tmp_path / "garbage"),
    }
    real = {k: subst.get(v, v) for k, v in opts.items()}
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_connect(real)
