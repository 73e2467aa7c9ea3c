"""Where each source of a sourcing stream is, as its store keeps it (storage/sources_index.py,
nats-server 2.15's SourcesState): kept on every store of a message naming a configured
source, also through a purge; forgotten by a truncate; persisted by a file store at its
checkpoints and at stop, read back at open with the messages stored since; a file that
does not check out (torn, damaged, naming messages the store lost) is ignored, never
trusted."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.storage.filestore import FileStore
from natsd.storage.sources_index import SOURCES_FILE, SourcesIndex, decode_sources
from natsd.storage.store import LostData, StoreConfig

from .conftest import StoreKit

A = "A > >"
B = "B b.* b.x.*"
ELSEWHERE = "C > >"


def _hdr(origin: str, seq: int, ident: str = "ID1", filters: str = "> >") -> bytes:
    return f"NATS/1.0\r\nNats-Stream-Source: {origin} {seq} {filters} s.x {ident}\r\n\r\n".encode()


def test_kept_per_configured_source_through_a_purge(kit: StoreKit) -> None:
    store = kit.make()
    store.track_sources([A, B])
    assert store.sources_state() == {}
    store.store_msg("s.x", _hdr("A", 4), b"1")
    store.store_msg("s.x", _hdr("B", 9, "ID2", "b.* b.x.*"), b"2")
    store.store_msg("s.x", _hdr("A", 5), b"3")
    store.store_msg("s.x", _hdr("C", 70), b"not configured")
    store.store_msg("s.own", None, b"its own")
    huge = b"NATS/1.0\r\nNats-Stream-Source: A 99999999999999999999999 > > s.x\r\n\r\n"
    store.store_msg("s.x", huge, b"")  # (no sequence: ignored)
    want = {A: (5, "ID1"), B: (9, "ID2")}
    assert store.sources_state() == want
    store.purge()
    assert store.sources_state() == want  # (nats-server keeps them: a purge copies nothing twice)
    store.track_sources([A])  # B dropped by an update
    assert store.sources_state() == {A: (5, "ID1")}
    store.track_sources([A, ELSEWHERE])  # C added: unseen until a message names it
    assert store.sources_state() == {A: (5, "ID1")}
    store.store_msg("s.x", _hdr("C", 71), b"")
    assert store.sources_state() == {A: (5, "ID1"), ELSEWHERE: (71, "ID1")}


def test_a_header_of_a_server_before_2_10_places_every_source_of_its_origin(
    kit: StoreKit,
) -> None:
    store = kit.make()
    store.track_sources([A, "A a.> >"])
    store.store_msg("s.x", b"NATS/1.0\r\nNats-Stream-Source: A 12\r\n\r\n", b"")
    assert store.sources_state() == {A: (12, ""), "A a.> >": (12, "")}


def test_a_truncate_forgets_them(kit: StoreKit) -> None:
    store = kit.make()
    store.track_sources([A])
    for seq in range(1, 6):
        store.store_msg("s.x", _hdr("A", seq), b"")
    store.truncate(3)
    assert store.sources_state() == {}  # (the stream's scan finds A 3 again)
    store.store_msg("s.x", _hdr("A", 4), b"")
    assert store.sources_state() == {A: (4, "ID1")}


def test_untracked_stores_keep_nothing(kit: StoreKit) -> None:
    store = kit.make()
    store.store_msg("s.x", _hdr("A", 4), b"")
    store.track_sources([A])
    assert store.sources_state() == {}
    store.track_sources([])
    store.store_msg("s.x", _hdr("A", 5), b"")
    assert store.sources_state() == {}


def _open(path: Path, inames: list[str] | None = None) -> FileStore:
    fs = FileStore(path, StoreConfig(name="S"), block_size=1024)
    fs.track_sources([A, B] if inames is None else inames)
    return fs


def _crash(fs: FileStore) -> None:
    fs._close_fds()
    fs._closed = True


def test_a_file_store_reads_them_back(tmp_path: Path) -> None:
    fs = _open(tmp_path / "s")
    fs.store_msg("s.x", _hdr("A", 7), b"")
    for i in range(300):
        fs.store_msg("s.own", None, b"%d" % i)
    fs.purge_ex("s.x", 0, 0)  # the sourced message itself is gone
    last = fs.last_seq()
    fs.stop()
    path = tmp_path / "s" / "msgs" / SOURCES_FILE
    assert decode_sources(path.read_bytes()) == (last + 1, {A: (7, "ID1")})
    again = _open(tmp_path / "s")
    assert again.sources_state() == {A: (7, "ID1")}
    again.stop()
    # what it reads is the file (stamped after the last message: nothing read since), not
    # the messages: a file naming what no message names is taken as it is
    idx = SourcesIndex([A, B])
    idx.seed({A: (99, "X"), B: (5, "Y")})
    path.write_bytes(idx.encode(last + 1))
    again = _open(tmp_path / "s")
    assert again.sources_state() == {A: (99, "X"), B: (5, "Y")}
    again.stop()


def test_after_a_crash_the_messages_since_the_checkpoint_are_read(tmp_path: Path) -> None:
    fs = _open(tmp_path / "s")
    fs.checkpoint_every = fs.checkpoint_cost = 0.0
    fs._ckpt_next = 0.0
    for seq in range(1, 60):
        fs.store_msg("s.x", _hdr("A", seq), b"x" * 40)
        fs.flush()
    assert (tmp_path / "s" / "msgs" / SOURCES_FILE).exists()
    fs.checkpoint_every = 3600.0  # none after this: the next ones are "stored since"
    fs._ckpt_next = float("inf")
    fs.store_msg("s.x", _hdr("B", 3, "ID2", "b.* b.x.*"), b"")
    fs.store_msg("s.x", _hdr("A", 60), b"")
    fs.flush()
    _crash(fs)
    again = _open(tmp_path / "s")
    assert again.sources_state() == {A: (60, "ID1"), B: (3, "ID2")}
    again.stop()


@pytest.mark.parametrize("how", ["torn", "damaged", "ahead", "not-ours", "lost"])
def test_a_file_that_does_not_check_out_is_ignored(tmp_path: Path, how: str) -> None:
    fs = _open(tmp_path / "s")
    for seq in range(1, 4):
        fs.store_msg("s.x", _hdr("A", seq), b"")
    fs.stop()
    path = tmp_path / "s" / "msgs" / SOURCES_FILE
    raw = path.read_bytes()
    if how == "torn":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "damaged":
        path.write_bytes(raw[:-3] + bytes([raw[-3] ^ 0x20]) + raw[-2:])
    elif how == "ahead":
        # a file stamped past the store's end (its last messages are gone): not trusted
        path.write_bytes(_ahead(raw))
    elif how == "not-ours":
        path.write_bytes(b"\x00" * 64)
    again = FileStore(tmp_path / "s", StoreConfig(name="S"), block_size=1024)
    if how == "lost":
        # the open found messages lost: a position may name one of them
        again._lost = LostData(msgs=[2], bytes=10)
    again.track_sources([A])
    assert again.sources_state() == {}
    again.stop()


def _ahead(raw: bytes) -> bytes:
    got = decode_sources(raw)
    assert got is not None
    idx = SourcesIndex([A])
    idx.seed(got[1])
    return idx.encode(got[0] + 5)


def test_the_file_goes_with_the_sources(tmp_path: Path) -> None:
    fs = _open(tmp_path / "s")
    fs.store_msg("s.x", _hdr("A", 1), b"")
    fs.stop()
    fs = _open(tmp_path / "s", [])
    assert not (tmp_path / "s" / "msgs" / SOURCES_FILE).exists()
    fs.stop()
    # and a store that never saw a source writes none
    fs = _open(tmp_path / "t")
    fs.store_msg("s.own", None, b"")
    fs.stop()
    assert not os.path.exists(tmp_path / "t" / "msgs" / SOURCES_FILE)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoding_anything_never_raises(raw: bytes) -> None:
    got = decode_sources(raw)
    assert got is None or (got[0] >= 1 and all(p[0] >= 1 for p in got[1].values()))


def test_encode_round_trip_and_bit_flips() -> None:
    idx = SourcesIndex([A, B])
    idx.note(_hdr("A", 5))
    raw = idx.encode(42)
    assert decode_sources(raw) == (42, {A: (5, "ID1")})
    rng = random.Random(5)
    for _ in range(200):
        i = rng.randrange(len(raw))
        flipped = raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1 :]
        assert decode_sources(flipped) in (None, (42, {A: (5, "ID1")}))


def test_a_snapshot_seeds_the_tracked_sources(kit: StoreKit) -> None:
    """A replica caught up from a leader's snapshot takes its positions (also for messages
    the leader no longer holds); a source not tracked here is not taken."""
    store = kit.make()
    store.track_sources([A])
    store.store_msg("s.x", _hdr("A", 2), b"")  # (what catch-up copied)
    store.seed_sources({A: (5, "ID9"), ELSEWHERE: (3, "")})
    assert store.sources_state() == {A: (5, "ID9")}
    untracked = kit.make()
    untracked.seed_sources({A: (5, "ID9")})
    assert untracked.sources_state() == {}


_TOKENS = st.sampled_from(
    ["A", "B", ">", "b.*", "b.x.*", "s.x", "ID1", "", "7", "$JS.ACK.A.c.1.2.3.4.5"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TOKENS | st.integers(0, 2**66).map(str), min_size=1, max_size=7),
       st.sampled_from([" ", "  ", ""]))  # fmt: skip
def test_the_quick_read_agrees_with_the_parser(tokens: list[str], lead: str) -> None:
    """``note`` reads the usual header form with finds and slices: for any value, what it
    keeps is what the parser (``source_of``) makes of it."""
    from natsd.core.source_header import source_of

    inames = [A, B, "A b.* b.x.*", "B > >"]
    hdr = f"NATS/1.0\r\nNats-Stream-Source:{lead}{' '.join(tokens)}\r\n\r\n".encode()
    idx = SourcesIndex(inames)
    idx.note(hdr)
    want = SourcesIndex(inames)
    parsed = source_of(hdr)
    if parsed is not None:
        iname, origin, seq, ident = parsed
        for i in [iname] if iname else [i for i in inames if i.split(" ")[0] == origin]:
            if i in want.entries:
                want.entries[i] = (seq, ident)
    assert idx.known() == want.known()


def test_the_quick_read_of_a_value_with_more_fields() -> None:
    idx = SourcesIndex([A])
    idx.note(b"NATS/1.0\r\nNats-Stream-Source: A 5 > > s.x ID1 extra\r\n\r\n")
    assert idx.known() == {A: (5, "ID1")}


def test_headers_read_in_batches_place_each_source_by_its_newest() -> None:
    """``note`` keeps headers and reads them newest first in batches: across batch
    boundaries, mixed with headers of other kinds, each source ends at its newest."""
    idx = SourcesIndex([A, B])
    b_last = 0
    for seq in range(1, 3001):
        idx.note(_hdr("A", seq))
        if seq % 7 == 0:
            b_last = seq * 10
            idx.note(_hdr("B", b_last, "ID2", "b.* b.x.*"))
        if seq % 5 == 0:
            idx.note(b"NATS/1.0\r\nOther: x\r\n\r\n")
        if seq == 1500:
            assert idx.known() == {A: (1500, "ID1"), B: (14980, "ID2")}
    assert idx.known() == {A: (3000, "ID1"), B: (b_last, "ID2")}
    idx.note(b"NATS/1.0\r\nNats-Stream-Source: A 9\r\n\r\n")  # (before 2.10: its origin's)
    assert idx.known() == {A: (9, ""), B: (b_last, "ID2")}


def test_at_open_the_newest_messages_place_what_they_name(tmp_path: Path) -> None:
    """The file's positions, then the messages stored after its stamp read newest first:
    a source they name takes its newest, one they do not keeps the file's."""
    fs = _open(tmp_path / "s")
    fs.store_msg("s.x", _hdr("B", 5, "ID2", "b.* b.x.*"), b"")
    fs.stop()  # (the file: B at 5)
    fs = _open(tmp_path / "s")
    fs.checkpoint_every = 3600.0
    fs._ckpt_next = float("inf")
    fs._sources_at = float("inf")  # (no rewrite: what follows is "stored since")
    for seq in range(1, 40):
        fs.store_msg("s.x", _hdr("A", seq), b"")
        fs.store_msg("s.own", None, b"")
    fs.flush()
    _crash(fs)
    again = _open(tmp_path / "s")
    assert again.sources_state() == {A: (39, "ID1"), B: (5, "ID2")}
    again.stop()


def test_a_file_not_used_is_removed(tmp_path: Path) -> None:
    fs = _open(tmp_path / "s")
    fs.store_msg("s.x", _hdr("A", 1), b"")
    fs.stop()
    path = tmp_path / "s" / "msgs" / SOURCES_FILE
    path.write_bytes(path.read_bytes()[:-1])  # (torn)
    again = _open(tmp_path / "s")
    assert again.sources_state() == {} and not path.exists()
    again._close_fds()
    again._closed = True
