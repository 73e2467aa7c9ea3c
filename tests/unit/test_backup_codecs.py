"""The codecs of a stream backup: S2 framing (natsd.core.s2), NATSARC1 entries
(natsd.protocol.natsarc) and the whole-archive check (jetstream/backup/restore.py).

``data/nats-server-2.15.1-backup.s2`` is a backup nats-server 2.15.1 sent for a stream of
49 messages (one deleted) and one consumer: its blocks use S2's repeat copies, which no
Snappy decoder reads, so it is the reference for the S2 decoder.
"""

from __future__ import annotations

import random
from pathlib import Path

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.core.s2 import FrameReader, FrameWriter, S2Error, decode_block, masked_crc
from natsd.jetstream.backup.restore import ArchiveCheck
from natsd.protocol.natsarc import MAGIC, ArchiveError, EntryReader, encode_entry, end_entry

GOLDEN = (Path(__file__).parent / "data" / "nats-server-2.15.1-backup.s2").read_bytes()


def _decode(data: bytes, step: int = 1 << 20) -> bytes:
    r = FrameReader()
    out = b"".join(b"".join(r.feed(data[i : i + step])) for i in range(0, len(data), step))
    r.finish()
    return out


def test_nats_servers_backup_decodes() -> None:
    assert GOLDEN.startswith(b"\xff\x06\x00\x00S2sTwO")
    with pytest.raises(cramjam.DecompressionError):  # (its blocks are S2, not Snappy)
        cramjam.snappy.decompress(GOLDEN.replace(b"S2sTwO", b"sNaPpY", 1))
    raw = _decode(GOLDEN)
    assert raw.startswith(MAGIC)
    entries = EntryReader(1 << 20).feed(raw)
    assert [e.name for e in entries[:2]] == [b"state.json", b"consumers/D"]
    msgs = [e for e in entries if e.seq]
    assert len(msgs) == 49 and 7 not in [e.seq for e in msgs]
    first = msgs[0]
    assert (first.name, first.seq, first.body[first.hdr_size :]) == (b"s.0", 1, b"x0")
    assert first.body[: first.hdr_size] == b"NATS/1.0\r\nH: v\r\n\r\n"
    assert entries[-1].is_end
    # encoding an entry again gives nats-server's bytes
    assert encode_entry(first.name, first.ts, 1, first.body[:18], b"x0") in raw


@pytest.mark.parametrize("step", [1, 7, 1000])
def test_any_split_decodes_the_same(step: int) -> None:
    assert _decode(GOLDEN, step) == _decode(GOLDEN)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=70_000), min_size=1, max_size=6),
       st.integers(1, 5000))  # fmt: skip
def test_what_natsd_writes_reads_back(pieces: list[bytes], step: int) -> None:
    w = FrameWriter()
    stream = b"".join(w.write(p) for p in pieces)
    assert _decode(stream, step) == b"".join(pieces)


def test_s2_repeat_copies() -> None:
    # "abcd", a copy of 4 at offset 4, then a repeat (offset 0: the last offset) of 4
    block = bytes([12, 3 << 2]) + b"abcd" + bytes([0x01, 4, 0x01, 0])
    assert decode_block(block) == b"abcd" * 3
    # a repeat with a one-byte length: 8 + 8
    block = bytes([24, 3 << 2]) + b"abcd" + bytes([0x01, 4, 0x01 | (5 << 2), 0, 8])
    assert decode_block(block) == b"abcd" * 6
    with pytest.raises(S2Error):
        decode_block(bytes([4, 0x01, 0]))  # a repeat before any offset


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damage_is_refused_never_crashes(data: st.DataObject) -> None:
    raw = bytearray(GOLDEN)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    try:
        out = _decode(bytes(raw), data.draw(st.integers(1, 2000)))
    except S2Error:
        return
    if out == _decode(GOLDEN):
        return  # (a flip inside a skippable chunk's body changes nothing)
    # A flip that turns a data chunk's type into a skippable one drops that chunk: legal
    # framing, so the S2 layer reads on; the archive check then finds it incomplete.
    with pytest.raises(ValueError):
        check = ArchiveCheck(1 << 20)
        check.feed(bytes(raw))
        check.finish()


def test_a_cut_stream_is_refused() -> None:
    for cut in (1, 5, len(GOLDEN) // 2):
        with pytest.raises(S2Error):
            _decode(GOLDEN[:-cut])


def test_checksum_is_masked_crc32c() -> None:
    # the framing format's example: crc32c("") masked
    assert masked_crc(b"") == 0xA282EAD8
    assert (
        masked_crc(b"123456789")
        == (((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    )


# ---------------------------------------------------------------------- NATSARC1
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U64 = st.integers(0, (1 << 64) - 1)


@given(st.binary(max_size=40), I64, U64, st.binary(max_size=50), st.binary(max_size=200),
       st.integers(1, 30))  # fmt: skip
def test_entries_round_trip(
    name: bytes, ts: int, seq: int, hdr: bytes, payload: bytes, step: int
) -> None:
    raw = MAGIC + encode_entry(name, ts, seq, hdr, payload) + end_entry()
    r = EntryReader(1 << 20)
    got = []
    for i in range(0, len(raw), step):
        got += r.feed(raw[i : i + step])
    r.finish()
    assert len(got) == 2 and got[1].is_end
    e = got[0]
    assert (e.name, e.ts, e.seq, e.hdr_size, e.body) == (name, ts, seq, len(hdr), hdr + payload)


def test_entry_limits() -> None:
    with pytest.raises(ArchiveError):
        EntryReader(1 << 20).feed(b"NATSARC2")
    with pytest.raises(ArchiveError):  # larger than allowed, refused before it is buffered
        EntryReader(100).feed(MAGIC + encode_entry(b"s", 0, 1, b"", b"x" * 101)[:12])
    # a consumer's entry (sequence 0) may be larger than a message may
    big = encode_entry(b"consumers/C", 0, 0, b"", b"y" * 500)
    assert len(EntryReader(100).feed(MAGIC + big)) == 1
    r = EntryReader(1 << 20)
    r.feed(MAGIC + encode_entry(b"s", 0, 1, b"", b"xyz")[:-1])
    with pytest.raises(ArchiveError):
        r.finish()


# ---------------------------------------------------------------------- the archive check
def _archive(*entries: bytes, end: bool = True) -> bytes:
    raw = MAGIC + b"".join(entries) + (end_entry() if end else b"")
    return FrameWriter().write(raw)


STATE = encode_entry(b"state.json", 1, 0, b"", b'{"first_seq":1,"last_seq":3,"consumer_count":1}')
CONSUMER = encode_entry(b"consumers/C", 1, 0, b"", b'{"config":{"durable_name":"C"},"state":{}}')


def _check(data: bytes) -> ArchiveCheck:
    c = ArchiveCheck(1 << 20)
    rnd = random.Random(len(data))
    i = 0
    while i < len(data):
        n = rnd.randint(1, 50)
        c.feed(data[i : i + n])
        i += n
    c.finish()
    return c


def test_a_whole_archive_checks_out() -> None:
    c = _check(_archive(STATE, CONSUMER, encode_entry(b"a", 5, 1, b"", b"x"),
                        encode_entry(b"b", 6, 3, b"", b"y")))  # fmt: skip
    assert c.ended and c.messages == 2 and c.last_seq == 3
    assert c.consumers == [("C", {"config": {"durable_name": "C"}, "state": {}})]


@pytest.mark.parametrize(
    ("archive", "reason"),
    [
        (_archive(STATE, CONSUMER, encode_entry(b"a", 5, 1, b"", b"x"), end=False), "truncated"),
        (_archive(CONSUMER), "state.json first"),
        (_archive(STATE, encode_entry(b"a", 5, 1, b"", b"x")), "expected consumer"),
        (
            _archive(
                STATE,
                CONSUMER,
                encode_entry(b"a", 5, 2, b"", b"x"),
                encode_entry(b"a", 5, 2, b"", b"x"),
            ),
            "out of order",
        ),
        (_archive(STATE, encode_entry(b"consumers/C", 1, 0, b"", b'{"state":{}}')), "config"),
        (_archive(encode_entry(b"state.json", 1, 0, b"", b"{")), "state.json"),
        (_archive(STATE, CONSUMER, encode_entry(b"a", 5, 0, b"", b"x")), "sequence"),
        (FrameWriter().write(b"NATSARC1")[:-3], "truncated"),
    ],
)
def test_a_faulty_archive_is_refused(archive: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        _check(archive)
