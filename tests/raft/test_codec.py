"""natsd's Message codec: round trips of random messages, a strict canonical form, and fuzzing
(random and mutated bytes raise CodecError and nothing else); and the protobuf forms of conf
changes and entry sizes the raft core depends on."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import natsd.raft.types
from natsd.raft.codec import (
    MAX_RESPONSE_DEPTH,
    VERSION,
    CodecError,
    ProtoError,
    decode_conf_state,
    decode_message,
    encode_conf_state,
    encode_message,
    entry_size,
    marshal_conf_change,
    marshal_conf_change_v1,
    marshal_conf_change_v2,
    unmarshal_conf_change,
    unmarshal_conf_change_v2,
)
from natsd.raft.types import (
    ConfChange,
    ConfChangeSingle,
    ConfChangeTransition,
    ConfChangeType,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
    conf_changes_from_string,
)

U64 = 2**64 - 1


def _u64(rng: random.Random) -> int:
    # Mostly small values (the common case), sometimes up to the 64-bit edge.
    r = rng.random()
    if r < 0.4:
        return 0
    if r < 0.8:
        return rng.randrange(1, 200)
    if r < 0.95:
        return rng.randrange(0, 2**40)
    return rng.choice([U64, U64 - 1, 2**63, 2**63 - 1, 2**56, 2**49 - 1])


def _bytes(rng: random.Random, n: int = 40) -> bytes:
    if rng.random() < 0.4:
        return b""
    return rng.randbytes(rng.randrange(0, n))


def _ids(rng: random.Random) -> list[int]:
    return [_u64(rng) for _ in range(rng.randrange(0, 5))]


def random_message(rng: random.Random, depth: int = 0) -> Message:
    m = Message(
        rng.choice(list(MessageType)),
        to=_u64(rng),
        from_=_u64(rng),
        term=_u64(rng),
        log_term=_u64(rng),
        index=_u64(rng),
        commit=_u64(rng),
        vote=_u64(rng),
        reject=rng.random() < 0.3,
        reject_hint=_u64(rng),
        context=_bytes(rng, 16),
    )
    for _ in range(rng.choice([0, 0, 1, 2, 5])):
        m.entries.append(Entry(_u64(rng), _u64(rng), rng.choice(list(EntryType)), _bytes(rng, 300)))
    if rng.random() < 0.2:
        cs = ConfState(_ids(rng), _ids(rng), _ids(rng), _ids(rng), rng.random() < 0.5)
        m.snapshot = Snapshot(_bytes(rng, 100), SnapshotMetadata(cs, _u64(rng), _u64(rng)))
    if depth < 2 and rng.random() < 0.15:
        m.responses = [random_message(rng, depth + 1) for _ in range(rng.randrange(1, 4))]
    return m


def test_round_trip_of_random_messages() -> None:
    rng = random.Random(1717)
    for _ in range(3000):
        m = random_message(rng)
        b = encode_message(m)
        assert b[0] == VERSION
        got = decode_message(b)
        assert got == m
        assert encode_message(got) == b
        assert decode_message(bytearray(b)) == m
        assert decode_message(memoryview(b)) == m


def test_a_heartbeat_is_small() -> None:
    m = Message(MessageType.MsgHeartbeat, to=2, from_=1, term=5, commit=10)
    b = encode_message(m)
    assert b == bytes([VERSION, 8, 0, 2, 1, 5, 0, 0, 10, 0, 0])
    assert decode_message(b) == m


def test_append_layout() -> None:
    m = Message(
        MessageType.MsgApp,
        to=2,
        from_=1,
        term=300,
        log_term=1,
        index=3,
        commit=3,
        entries=[Entry(term=1, index=4, data=b"ab")],
    )
    assert (
        encode_message(m)
        == bytes([VERSION, 3, 0x02, 2, 1, 0xAC, 0x02, 1, 3, 3, 0, 0, 1, 0, 1, 4, 2]) + b"ab"
    )


def test_snapshot_none_and_empty_are_distinct() -> None:
    """Message.snapshot is the one optional field: None and an empty Snapshot both round
    trip."""
    a = Message(MessageType.MsgSnap)
    b = Message(MessageType.MsgSnap, snapshot=Snapshot())
    assert decode_message(encode_message(a)).snapshot is None
    assert decode_message(encode_message(b)).snapshot == Snapshot()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "empty input"),
        (bytes([2, 8, 0]), "unknown codec version 2"),
        (bytes([VERSION]), "truncated input"),
        (bytes([VERSION, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "unknown message type 24"),
        (bytes([VERSION, 8, 0x20, 0, 0, 0, 0, 0, 0, 0, 0]), "unknown message flags 0x20"),
        (bytes([VERSION, 8, 0, 0, 0, 0, 0, 0, 0, 0]), "truncated varint"),
        (bytes([VERSION, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "1 bytes after the message"),
        (bytes([VERSION, 8, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0]), "non-minimal varint"),
        (bytes([VERSION, 8, 0]) + b"\xff" * 9 + b"\x02" + bytes(7), "varint overflows 64 bits"),
        (bytes([VERSION, 3, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "entries flag with no entries"),
        (bytes([VERSION, 3, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0]), "count larger than the input"),
        (bytes([VERSION, 3, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 0, 0, 0]), "unknown entry type 3"),
        (bytes([VERSION, 3, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 1]),
         "length past the end of the input"),
        (bytes([VERSION, 3, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
         "context flag with an empty context"),
        (bytes([VERSION, 7, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0]),
         "unknown conf state flags 0x2"),
        (bytes([VERSION, 19, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0]), "responses flag with no responses"),
    ],
)  # fmt: skip
def test_malformed_inputs_name_the_fault(data: bytes, why: str) -> None:
    with pytest.raises(CodecError) as exc:
        decode_message(data)
    assert str(exc.value) == why
    assert isinstance(exc.value, ValueError)


def test_not_bytes_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        decode_message(5)  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        decode_message("\x01")  # type: ignore[arg-type]


def test_response_nesting_is_bounded() -> None:
    m = Message(MessageType.MsgStorageAppend)
    inner = m
    for _ in range(MAX_RESPONSE_DEPTH):
        nxt = Message(MessageType.MsgStorageAppendResp)
        inner.responses = [nxt]
        inner = nxt
    assert decode_message(encode_message(m)) == m  # the deepest allowed
    inner.responses = [Message(MessageType.MsgAppResp)]
    with pytest.raises(CodecError, match="nested too deeply"):
        encode_message(m)
    # Hand-built: a chain one deeper than allowed is refused by the decoder too.
    body = bytes([MessageType.MsgAppResp, 0]) + bytes(8)
    for _ in range(MAX_RESPONSE_DEPTH + 1):
        body = bytes([MessageType.MsgStorageAppend, 0x10]) + bytes(8) + b"\x01" + body
    with pytest.raises(CodecError, match="nested too deeply"):
        decode_message(bytes([VERSION]) + body)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_unencodable_values_are_codec_errors(value: int) -> None:
    with pytest.raises(CodecError):
        encode_message(Message(MessageType.MsgApp, term=value))
    with pytest.raises(CodecError):
        encode_message(Message(MessageType.MsgApp, entries=[Entry(index=value)]))


def test_a_type_that_is_no_member_is_a_codec_error() -> None:
    # Interpreted, a Message takes any int as its type and encoding refuses it; compiled,
    # the Message constructor already refuses a non-member (mypyc checks the argument).
    try:
        m = Message(300)  # type: ignore[arg-type]
    except TypeError:
        assert COMPILED_TYPES
        return
    with pytest.raises(CodecError):
        encode_message(m)


COMPILED_TYPES = (natsd.raft.types.__file__ or "").endswith(".so")


def _check_decode(data: bytes) -> None:
    """Only CodecError may escape; and what decodes is the one encoding of its message."""
    try:
        m = decode_message(data)
    except CodecError:
        return
    assert encode_message(m) == data


def _mutate(rng: random.Random, b: bytes) -> bytes:
    buf = bytearray(b)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(5)
        if op == 0 and buf:  # flip a bit
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:  # set a byte
            buf[rng.randrange(len(buf))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:  # truncate
            del buf[rng.randrange(len(buf) + 1) :]
        elif op == 3:  # insert
            i = rng.randrange(len(buf) + 1)
            buf[i:i] = rng.randbytes(rng.randrange(1, 4))
        elif buf:  # delete a byte
            del buf[rng.randrange(len(buf))]
    return bytes(buf)


def test_fuzz_mutated_encodings() -> None:
    rng = random.Random(20260603)
    decoded = 0
    for _ in range(8000):
        b = _mutate(rng, encode_message(random_message(rng)))
        _check_decode(b)
        try:
            decode_message(b)
            decoded += 1
        except CodecError:
            pass
    # The mutations reach both outcomes: the check above ran on accepted inputs too.
    assert 0 < decoded < 8000


def test_fuzz_random_bytes() -> None:
    rng = random.Random(17)
    for _ in range(5000):
        n = rng.randrange(0, 64)
        b = bytes([VERSION]) + rng.randbytes(n) if rng.random() < 0.8 else rng.randbytes(n)
        _check_decode(b)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_hypothesis_bytes(data: bytes) -> None:
    _check_decode(data)
    _check_decode(bytes([VERSION]) + data)


def test_huge_counts_do_not_allocate() -> None:
    """A count claims 2**60 entries / ids / responses in a few bytes: refused up front."""
    huge = b"\x80\x80\x80\x80\x80\x80\x80\x80\x10"  # 2**60
    for flags, mtype in ((0x02, 3), (0x10, 19)):
        data = bytes([VERSION, mtype, flags]) + bytes(8) + huge
        with pytest.raises(CodecError, match="count larger than the input"):
            decode_message(data)
    snap = bytes([VERSION, 7, 0x08]) + bytes(8) + b"\x00\x00\x00" + huge
    with pytest.raises(CodecError, match="count larger than the input"):
        decode_message(snap)


# --- protobuf forms --------------------------------------------------------------------------


def test_conf_change_bytes_are_protobufs() -> None:
    # ConfChange{Type: ConfChangeAddNode, NodeId: 2} as upstream's test environment builds it.
    v1 = ConfChange(type=ConfChangeType.ConfChangeAddNode, node_id=2)
    assert marshal_conf_change_v1(v1) == b"\x10\x00\x18\x02"
    assert marshal_conf_change(v1) == (EntryType.EntryConfChange, b"\x10\x00\x18\x02")
    full = ConfChange(type=ConfChangeType.ConfChangeRemoveNode, node_id=300, context=b"ctx", id=7)
    assert marshal_conf_change_v1(full) == b"\x08\x07\x10\x01\x18\xac\x02\x22\x03ctx"
    assert unmarshal_conf_change(marshal_conf_change_v1(full)) == full
    # ConfChangeV2{Transition: auto, Changes: [v2 l3]}.
    v2 = ConfChangeV2(changes=conf_changes_from_string("v2 l3"))
    assert marshal_conf_change_v2(v2) == b"\x08\x00\x12\x04\x08\x00\x10\x02\x12\x04\x08\x03\x10\x03"
    assert unmarshal_conf_change_v2(marshal_conf_change_v2(v2)) == v2
    assert marshal_conf_change(None) == (EntryType.EntryConfChangeV2, b"")
    assert unmarshal_conf_change_v2(b"") == ConfChangeV2()
    explicit = ConfChangeV2(
        transition=ConfChangeTransition.ConfChangeTransitionJointExplicit,
        changes=[ConfChangeSingle(ConfChangeType.ConfChangeUpdateNode, 9)],
        context=b"x",
    )
    assert unmarshal_conf_change_v2(marshal_conf_change_v2(explicit)) == explicit
    # A v1 change as V2 marshals as V2.
    assert marshal_conf_change(explicit)[0] == EntryType.EntryConfChangeV2


def test_protobuf_unknown_and_mismatched_fields_are_skipped() -> None:
    # field 1 as bytes (wrong wire type), field 9 varint, field 10 fixed64, field 11
    # fixed32, a group 12, then node_id = 5: only node_id is read.
    data = (
        b"\x0a\x01z" + b"\x48\x01" + b"\x51" + bytes(8) + b"\x5d" + bytes(4)
        + b"\x63\x08\x01\x64" + b"\x18\x05"
    )  # fmt: skip
    assert unmarshal_conf_change(data) == ConfChange(node_id=5)
    # An enum value the proto does not know stays at its default.
    assert unmarshal_conf_change(b"\x10\x09") == ConfChange()
    # Non-minimal varints are valid protobuf.
    assert unmarshal_conf_change(b"\x18\x85\x00") == ConfChange(node_id=5)


@pytest.mark.parametrize(
    "data",
    [
        b"\x18",  # truncated varint
        b"\x22\x05ab",  # length past the end
        b"\x00\x01",  # field number 0
        b"\x64",  # an end group with no start
        b"\x63\x08\x01",  # a group never closed
        b"\x63\x6c",  # a group closed by another field number
        b"\x1e",  # wire type 6
        b"\x18" + b"\xff" * 9 + b"\x02",  # past 64 bits
    ],
)
def test_protobuf_malformed_is_proto_error(data: bytes) -> None:
    with pytest.raises(ProtoError) as exc:
        unmarshal_conf_change(data)
    assert str(exc.value) == "proto: cannot parse invalid wire-format data"
    with pytest.raises(ProtoError):
        unmarshal_conf_change_v2(data)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64))
def test_fuzz_protobuf_unmarshal(data: bytes) -> None:
    for fn in (unmarshal_conf_change, unmarshal_conf_change_v2):
        try:
            fn(data)
        except ProtoError:
            pass


@pytest.mark.parametrize(
    ("entry", "size"),
    [
        (Entry(), 0),
        (Entry(term=1, index=2), 4),
        (Entry(term=1, index=2, data=b"hello"), 11),
        (Entry(term=300, index=2**35, type=EntryType.EntryConfChange, data=b"x" * 200),
         2 + 3 + 7 + 203),
        (Entry(term=U64, index=1), 1 + 10 + 2),
    ],
)  # fmt: skip
def test_entry_size_is_protobufs(entry: Entry, size: int) -> None:
    assert entry_size(entry) == size


def test_conf_state_round_trips_alone_and_refuses_junk() -> None:
    cs = ConfState(voters=[1, 2**63], learners=[7], voters_outgoing=[1], learners_next=[9],
                   auto_leave=True)  # fmt: skip
    back = decode_conf_state(encode_conf_state(cs))
    assert (back.voters, back.learners, back.voters_outgoing, back.learners_next,
            back.auto_leave) == ([1, 2**63], [7], [1], [9], True)  # fmt: skip
    for junk in (b"", b"\x02", encode_conf_state(cs) + b"\x00", b"\x00\x05\x01"):
        with pytest.raises(CodecError):
            decode_conf_state(junk)
