"""The block format on its own: encoding, scanning, resynchronisation (no files)."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    FLAG_ERASED,
    REC_OVERHEAD,
    block_header,
    block_name,
    encode_erased,
    encode_record,
    encode_tombstone,
    parse_block_name,
    record_msg_size,
    scan_block,
)
from natsd.storage.store import file_msg_size

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def block(first: int, *records: bytes) -> bytes:
    return block_header(first) + b"".join(records)


def rec(
    seq: int, subject: str = "a.b", hdr: bytes = b"", data: bytes = b"x", ttl: int = 0
) -> bytes:
    return encode_record(seq, 1000 + seq, subject.encode(), hdr, data, ttl)


def test_names() -> None:
    assert block_name(1) == "00000000000000000001.blk"
    assert parse_block_name(block_name(123456789)) == 123456789
    for bad in ("1.blk", "0000000000000000000x.blk", "00000000000000000001.blk.tmp", "x"):
        assert parse_block_name(bad) is None


def test_round_trip_and_sizes() -> None:
    data = block(5, rec(5, "s", HDR, b"hello", ttl=7), rec(6, "é", b"", b""))
    scan = scan_block(data, 5)
    assert scan.header_ok and not scan.bad and scan.tail is None
    (s5, off5, len5, ts5, ttl5, subj5, size5, er5), m6 = scan.msgs
    assert (s5, off5, ts5, ttl5, subj5, er5) == (5, BLOCK_HDR_SIZE, 1005, 7, "s", False)
    assert len5 == REC_OVERHEAD + 1 + len(HDR) + 5
    assert size5 == file_msg_size("s", HDR, b"hello") == record_msg_size(1, len(HDR), 5)
    assert m6[5] == "é" and m6[6] == file_msg_size("é", None, b"")
    assert scan.valid_end == len(data) and scan.seen_max == 6


def test_tombstones_and_erased_records() -> None:
    erased = encode_erased(2, 1002, 3, 0, 4, os.urandom(7))
    assert len(erased) == len(rec(2, "abc", b"", b"data"))
    data = block(1, rec(1), erased, encode_tombstone(1, 10, 99))
    scan = scan_block(data, 1)
    assert scan.tombs == [(1, 10, 99)]
    assert [m[7] for m in scan.msgs] == [False, True]
    assert scan.seen_max == 10
    assert FLAG_ERASED  # the flag bit is above any sequence


def test_damaged_body_is_reported_by_sequence() -> None:
    r2 = bytearray(rec(2, data=b"payload"))
    r2[-6] ^= 3  # two bits: beyond single-bit correction
    scan = scan_block(block(1, rec(1), bytes(r2), rec(3)), 1)
    assert [m[0] for m in scan.msgs] == [1, 3]
    (bad,) = scan.bad
    assert bad.seq == 2 and bad.length == len(r2)


def test_damaged_header_resynchronises() -> None:
    r2 = bytearray(rec(2))
    r2[9] ^= 0xFF  # the length: the header crc catches it, the scan finds record 3
    scan = scan_block(block(1, rec(1), bytes(r2), rec(3), rec(4)), 1)
    assert [m[0] for m in scan.msgs] == [1, 3, 4]
    (bad,) = scan.bad
    assert bad.seq is None and (bad.prev_seq, bad.next_seq) == (1, 3)


def test_payload_that_contains_a_record_magic() -> None:
    inner = rec(99)  # a whole valid record as the payload of another
    data = block(1, rec(1, data=inner), rec(2))
    scan = scan_block(data, 1)
    assert [m[0] for m in scan.msgs] == [1, 2] and not scan.bad


def test_torn_tail_is_marked_not_lost() -> None:
    full = block(1, rec(1), rec(2, data=b"y" * 50))
    for cut in range(len(full) - len(rec(2, data=b"y" * 50)) + 1, len(full)):
        scan = scan_block(full[:cut], 1)
        assert [m[0] for m in scan.msgs] == [1]
        assert scan.tail is not None and not scan.bad
        assert scan.valid_end == BLOCK_HDR_SIZE + len(rec(1))


def test_bad_block_header_still_scans_records() -> None:
    data = bytearray(block(7, rec(7), rec(8)))
    data[0] = 0
    scan = scan_block(bytes(data), 7)
    assert not scan.header_ok and "magic" in scan.header_problem
    assert [m[0] for m in scan.msgs] == [7, 8]
    scan = scan_block(block(8, rec(8)), 7)
    assert not scan.header_ok and "file name" in scan.header_problem


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6), st.integers(0, 10_000), st.integers(1, 255))
def test_any_single_byte_damage_costs_at_most_one_record(victim: int, pos: int, x: int) -> None:
    records = [rec(i + 1, f"s.{i}", HDR if i % 2 else b"", b"p" * (i * 7)) for i in range(7)]
    data = bytearray(block(1, *records))
    start = BLOCK_HDR_SIZE + sum(len(r) for r in records[:victim])
    where = start + pos % len(records[victim])
    data[where] ^= x
    scan = scan_block(bytes(data), 1)
    got = [m[0] for m in scan.msgs]
    lost = victim + 1
    if bin(x).count("1") == 1:
        # A single flipped bit is corrected (and handed to the opener to rewrite).
        assert got == list(range(1, 8)) and scan.bad == [] and scan.tail is None
        ((off, fixed),) = scan.fixes
        assert off == start and fixed == records[victim]
    elif victim == 6 and scan.tail is not None:
        assert got == [1, 2, 3, 4, 5, 6]  # the last record reads as a torn tail
    else:
        assert got == [s for s in range(1, 8) if s != lost], (victim, where)
        (bad,) = scan.bad
        assert bad.seq in (lost, None)


def test_every_single_bit_flip_in_a_record_is_corrected() -> None:
    r2 = rec(2, "sub.ject", HDR, bytes(range(200)))
    for bit in range(len(r2) * 8):
        bad = bytearray(r2)
        bad[bit // 8] ^= 1 << (bit % 8)
        scan = scan_block(block(1, rec(1), bytes(bad), rec(3)), 1)
        assert [m[0] for m in scan.msgs] == [1, 2, 3], bit
        assert scan.fixes == [(BLOCK_HDR_SIZE + len(rec(1)), r2)], bit
