"""``compression: s2`` in the file store: payloads kept compressed on disk, read back whole.

The format's side (``FLAG_S2`` records, ``s2_len``, the scan) and the store's (every read
path, restart clean and after a crash, erase, a change of setting, damage), then the
contract's model-based test with compressible payloads on tiny blocks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import cramjam
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from natsd.storage.filestore import FileStore
from natsd.storage.filestore_format import (
    BLOCK_HDR_SIZE,
    FLAG_S2,
    REC_HDR_SIZE,
    block_header,
    compress_payload,
    encode_record,
    inflate_payload,
    s2_len,
    scan_block,
)
from natsd.storage.store import StoreConfig, file_msg_size

from .conftest import damage
from .test_filestore_model import CrashingMachine, run_model, tiny_block_kit
from .test_model import SUBJECTS

HDR = b"NATS/1.0\r\nK: v\r\n\r\n"
JSON = b'{"sensor": "t-%d", "celsius": 21.5, "site": "north", "ok": true}'


def body(i: int) -> bytes:
    """Every fifth payload too short to compress; the rest repetitive JSON."""
    return b"tiny%d" % i if i % 5 == 0 else (JSON % i) * (2 + i % 7)


def hdr(i: int) -> bytes | None:
    return HDR if i % 2 else None


def fill(store: FileStore, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        store.store_msg(f"s.{i % 3}", hdr(i), body(i))


def check(store: FileStore, n: int, gone: frozenset[int] = frozenset()) -> None:
    """Every read path gives back what ``fill`` stored (``gone``: 0-based indexes removed)."""
    want = {i + 1: (body(i), hdr(i)) for i in range(n) if i not in gone}
    for seq, (data, h) in want.items():
        m = store.load_msg(seq)
        assert m is not None and (m.data, m.hdr, m.subject) == (data, h, f"s.{(seq - 1) % 3}")
    assert {m.seq: (m.data, m.hdr) for m in store.load_range(1, n + 10)} == want
    with_hdrs, _ = store.load_with_headers(1, n + 10)
    assert {m.seq: m.data for m in with_hdrs} == {s: v[0] for s, v in want.items() if v[1]}
    last = max(s for s in want if (s - 1) % 3 == 1)
    got = store.load_last_msg("s.1")
    assert got is not None and got.data == want[last][0]


def disk_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in (d / "msgs").glob("*.blk"))


def records(d: Path) -> list[tuple[int, int]]:
    """(sequence, flags) of every message record on disk, read from the raw blocks."""
    out = []
    for p in sorted((d / "msgs").glob("*.blk")):
        raw = p.read_bytes()
        pos = BLOCK_HDR_SIZE
        while pos + REC_HDR_SIZE <= len(raw):
            reclen = int.from_bytes(raw[pos + 8 : pos + 12], "little")
            seqf = int.from_bytes(raw[pos + 12 : pos + 20], "little")
            out.append((seqf & ((1 << 56) - 1), seqf >> 56 << 56))
            pos += reclen
    return out


# ------------------------------------------------------------------------------- format
def test_compress_payload_only_when_it_shrinks() -> None:
    assert compress_payload(b"x" * 63) is None  # too short to try
    assert compress_payload(os.urandom(4096)) is None  # would not shrink
    data = JSON * 20
    z = compress_payload(data)
    assert z is not None and len(z) < len(data) // 4
    # A Snappy block, which S2 decoders read too; its varint announces the length.
    assert bytes(cramjam.snappy.decompress_raw(z)) == data
    assert s2_len(z, 0, len(z)) == len(data)
    assert inflate_payload(z, len(data)) == data


@given(st.integers(0, 0xFFFF_FFFF))
def test_s2_len_reads_every_32_bit_varint(n: int) -> None:
    enc = bytearray()
    v = n
    while v >= 0x80:
        enc.append(v & 0x7F | 0x80)
        v >>= 7
    enc.append(v)
    buf = b"junk" + bytes(enc) + b"tail"
    assert s2_len(buf, 4, 4 + len(enc)) == n


@pytest.mark.parametrize(
    "bad", [b"", b"\x80", b"\xff\xff\xff\xff", b"\xff\xff\xff\xff\x7f", b"\x80" * 6 + b"\x01"]
)
def test_s2_len_refuses_what_is_not_a_32_bit_varint(bad: bytes) -> None:
    assert s2_len(bad, 0, len(bad)) == -1


def test_inflate_refuses_a_block_of_the_wrong_length_or_garbage() -> None:
    z = compress_payload(JSON * 4)
    assert z is not None
    assert inflate_payload(z, len(JSON * 4) + 1) is None
    assert inflate_payload(b"\x05\xff\xff\xff", 5) is None


def test_scan_reads_compressed_records_with_their_sizes() -> None:
    data = JSON * 10
    z = compress_payload(data)
    assert z is not None
    blk = block_header(1) + b"".join(
        (
            encode_record(1 | FLAG_S2, 1001, b"a", HDR, z, 3),
            encode_record(2, 1002, b"b", b"", b"plain", 0),
        )
    )
    scan = scan_block(blk, 1)
    assert not scan.bad and not scan.notes and scan.tail is None
    (s1, _o1, len1, ts1, ttl1, subj1, size1, er1), m2 = scan.msgs
    assert (s1, ts1, ttl1, subj1, er1) == (1, 1001, 3, "a", False)
    assert len1 < len(data)  # the record holds the compressed bytes
    assert size1 == file_msg_size("a", HDR, data)  # and counts the message as sent
    assert m2[0] == 2 and m2[6] == file_msg_size("b", None, b"plain")
    assert scan.seen_max == 2


def test_scan_skips_a_compressed_record_with_a_malformed_length() -> None:
    """A record that checks out but whose payload announces no length is skipped and said;
    the record after it is read."""
    blk = block_header(1) + b"".join(
        (
            encode_record(1 | FLAG_S2, 1001, b"a", b"", b"\xff\xff\xff\xff\xff\xff", 0),
            encode_record(2, 1002, b"b", b"", b"ok", 0),
        )
    )
    scan = scan_block(blk, 1)
    assert [m[0] for m in scan.msgs] == [2]
    assert scan.skipped == 1 and "malformed compressed payload" in scan.notes[0]


# -------------------------------------------------------------------------------- store
def open_store(d: Path, compress: bool = True, block_size: int = 64 * 1024) -> FileStore:
    return FileStore(d, StoreConfig(name="S", compress=compress), block_size=block_size)


def test_every_read_path_and_the_accounting(tmp_path: Path) -> None:
    z = open_store(tmp_path / "z")
    plain = open_store(tmp_path / "p", compress=False)
    for s in (z, plain):
        fill(s, 300)
        s.flush()
    check(z, 300)
    # Sizes and limits count the messages as sent, as nats-server's do.
    assert replace(z.state(), first_ts=0, last_ts=0) == replace(
        plain.state(), first_ts=0, last_ts=0
    )
    assert disk_bytes(tmp_path / "z") < disk_bytes(tmp_path / "p") // 2
    flags = dict(records(tmp_path / "z"))
    assert {s for s, f in flags.items() if f == FLAG_S2} == {
        i + 1 for i in range(300) if i % 5
    }  # the short payloads stayed plain
    assert flags[1] == 0
    z.stop()
    plain.stop()


def test_restart_clean_and_after_a_crash(tmp_path: Path) -> None:
    d = tmp_path / "z"
    z = open_store(d, block_size=4096)  # many blocks
    fill(z, 200)
    state = z.state()
    z.stop()
    z = open_store(d, block_size=4096)
    assert damage(z.recovery_report) == [] and z.state() == state
    check(z, 200)
    fill(z, 50, start=200)
    state = z.state()
    z.flush()
    z.sync()
    z._close_fds()  # the process dies: no stop(), no manifest
    z._closed = True
    z = open_store(d, block_size=4096)
    assert damage(z.recovery_report) == [] and z.state() == state
    check(z, 250)
    z.stop()


def test_setting_changed_both_ways(tmp_path: Path) -> None:
    """A record says whether it is compressed: a stream whose setting changed reads both."""
    d = tmp_path / "z"
    s = open_store(d, compress=False)
    fill(s, 40)
    s.update_config(replace(s.config, compress=True))
    fill(s, 40, start=40)
    s.update_config(replace(s.config, compress=False))
    fill(s, 40, start=80)
    check(s, 120)
    s.flush()
    flags = dict(records(d))
    assert {q for q, f in flags.items() if f == FLAG_S2} == {
        i + 1 for i in range(40, 80) if i % 5
    }
    s.stop()
    s = open_store(d, compress=False)
    check(s, 120)
    s.stop()


def test_erase_and_remove(tmp_path: Path) -> None:
    d = tmp_path / "z"
    s = open_store(d)
    fill(s, 30)
    before = s.state().bytes
    assert s.erase_msg(7)  # a compressed one: overwritten where it is
    assert s.remove_msg(8)
    assert s.state().bytes == before - file_msg_size("s.0", None, body(6)) - file_msg_size(
        "s.1", HDR, body(7)
    )
    check(s, 30, gone=frozenset({6, 7}))
    s.flush()
    z6, z7 = compress_payload(body(6)), compress_payload(body(7))
    assert z6 is not None and z7 is not None
    on_disk = (d / "msgs" / "00000000000000000001.blk").read_bytes()
    assert z6 not in on_disk and z7 in on_disk  # erased; removed (a tombstone follows)
    s.stop()
    s = open_store(d)
    check(s, 30, gone=frozenset({6, 7}))
    s.stop()


def damaged_store(d: Path, record: int, damage_at: Callable[[bytearray, int], None]) -> FileStore:
    """Ten messages stored and the store stopped; then ``damage_at(bytes, end)`` changes
    the first block where message ``record`` ends (its trailer starts at ``end - 4``), and
    the store opens again with no index cache, reading every record."""
    s = open_store(d)
    fill(s, 10)
    s.stop()
    (d / "msgs" / "index.cache").unlink(missing_ok=True)
    path = d / "msgs" / "00000000000000000001.blk"
    raw = bytearray(path.read_bytes())
    end = BLOCK_HDR_SIZE
    for _ in range(record):
        end += int.from_bytes(raw[end + 8 : end + 12], "little")
    damage_at(raw, end)
    path.write_bytes(bytes(raw))
    return open_store(d)


def test_a_flipped_bit_in_a_compressed_payload_is_corrected(tmp_path: Path) -> None:
    def flip(raw: bytearray, end: int) -> None:
        raw[end - 5] ^= 0x10  # the last byte of record 2's compressed payload

    s = damaged_store(tmp_path / "z", 2, flip)
    assert any("single flipped bit" in r for r in s.recovery_report)
    check(s, 10)
    s.stop()


def test_a_damaged_compressed_record_costs_only_itself(tmp_path: Path) -> None:
    def smash(raw: bytearray, end: int) -> None:
        raw[end - 10 : end - 5] = b"\x00\x01\x02\x03\x04"  # more than one bit

    s = damaged_store(tmp_path / "z", 3, smash)
    assert any("seq 3" in r for r in damage(s.recovery_report)), s.recovery_report
    check(s, 10, gone=frozenset({2}))
    s.stop()


# ---------------------------------------------------------------------------- the model
class CompressingMachine(CrashingMachine):
    """The contract's operations plus publishes of payloads that compress (the contract's
    own are too short to)."""

    @precondition(lambda self: self.m.cfg.max_age_ns == 0 and not self.m.cfg.allow_msg_ttl)
    @rule(
        subject=st.sampled_from(SUBJECTS),
        unit=st.binary(min_size=1, max_size=6),
        times=st.integers(12, 80),
    )
    def store_compressible(self, subject: str, unit: bytes, times: int) -> None:
        self.store_msg(subject, None, unit * times)


def test_compressed_file_store_matches_model(tmp_path: Path) -> None:
    run_model(tiny_block_kit(tmp_path, block_size=400, compress=True), CompressingMachine, 40)
