"""The replicated stream entries (jetstream/stream/entries.py): round trips, the legacy API
entries decoded as typed operations, and damage that never raises anything but EntryError;
and the leader's shadow (jetstream/stream/replica.py)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.jetstream.stream.entries import (
    DeleteConsumer,
    DeleteMsg,
    EntryError,
    Purge,
    Request,
    compact_index,
    decode_msg,
    decode_op,
    encode_compact,
    encode_msg,
    encode_op,
)
from natsd.jetstream.stream.replica import Replica


@pytest.mark.parametrize(
    "args",
    [
        (7, 1, 123, 0, "a.b", b"_INBOX.x.y", None, "", "", b"data"),
        (2**64 - 1, 2**63, -5, 30, "s", None, b"NATS/1.0\r\nA: b\r\n\r\n", "id-1", "sub", b""),
        (1, 9, 0, 0, "\u00e9.x", b"", b"", "m\u00e9", "all", b"\x00" * 1000),
    ],
)
def test_msg_round_trip(args: tuple) -> None:  # type: ignore[type-arg]
    e = decode_msg(encode_msg(*args))
    proposer, seq, ts, ttl, subject, reply, hdr, msg_id, rollup, data = args
    assert (e.proposer, e.seq, e.ts, e.ttl, e.subject) == (proposer, seq, ts, ttl, subject)
    assert (e.reply, e.hdr, e.msg_id, e.rollup, e.data) == (reply or b"", hdr, msg_id, rollup, data)
    assert compact_index(encode_msg(*args)) == 0


@settings(max_examples=300, deadline=None)
@given(
    proposer=st.integers(0, 2**64 - 1),
    seq=st.integers(1, 2**64 - 1),
    ts=st.integers(-(2**63), 2**63 - 1),
    ttl=st.integers(-(2**63), 2**63 - 1),
    subject=st.text(min_size=1, max_size=40),
    reply=st.none() | st.binary(max_size=40),
    hdr=st.none() | st.binary(max_size=80),
    msg_id=st.text(max_size=30),
    rollup=st.sampled_from(["", "sub", "all"]),
    data=st.binary(max_size=300),
)
def test_msg_round_trip_any(
    proposer: int, seq: int, ts: int, ttl: int, subject: str, reply: bytes | None,
    hdr: bytes | None, msg_id: str, rollup: str, data: bytes,
) -> None:  # fmt: skip
    """Every field survives, with or without a header, msg id or rollup (the encoder has
    a shorter way for the common case: no header, no msg id)."""
    b = encode_msg(proposer, seq, ts, ttl, subject, reply, hdr, msg_id, rollup, data)
    e = decode_msg(b)
    assert (e.proposer, e.seq, e.ts, e.ttl, e.subject) == (proposer, seq, ts, ttl, subject)
    assert (e.reply, e.hdr, e.msg_id, e.rollup, e.data) == (reply or b"", hdr, msg_id, rollup, data)
    for n in range(len(b) - len(data) - 1):
        with pytest.raises(EntryError):
            decode_msg(b[:n])


def test_compact_round_trip() -> None:
    assert compact_index(encode_compact(12345)) == 12345
    assert compact_index(encode_compact(12345)[:-1]) == 0
    with pytest.raises(EntryError):
        decode_msg(encode_compact(5))


def test_damaged_entries_raise_entry_error_only() -> None:
    rng = random.Random(20261126)
    base = encode_msg(3, 42, 1, 2, "orders.new", b"_INBOX.r", b"NATS/1.0\r\n\r\n", "x", "", b"p")
    for _ in range(20000):
        b = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        b = b[: rng.randint(0, len(b))]
        try:
            decode_msg(bytes(b))
        except EntryError:
            pass
    # the data is the rest of the entry (the node log checksums every record): a cut
    # anywhere before it is an error
    for n in range(len(base) - 1):
        with pytest.raises(EntryError):
            decode_msg(base[:n])
    with pytest.raises(EntryError):
        decode_msg(encode_msg(3, 0, 1, 2, "s", None, None, "", "", b""))  # no sequence


class _NoGroup:
    """A group that takes nothing (the ReplicaGroup a shadow is built with)."""

    def propose(self, data: bytes) -> bool:
        return False

    def is_raft_leader(self) -> bool:
        return False

    def transferring(self) -> bool:
        return False

    def proposable(self) -> bool:
        return False


def test_leader_shadow() -> None:
    r = Replica(9, _NoGroup())
    r.lead(10)
    assert (r.leading, r.clseq, r.inflight) == (True, 10, 0)
    r.clseq, r.inflight, r.inflight_ids["a"] = 12, 2, 12
    r.applied(11, "")
    assert (r.inflight, r.inflight_ids) == (1, {"a": 12})
    r.applied(12, "a")
    assert (r.inflight, r.inflight_ids, r.clseq) == (0, {}, 12)
    r.waiting.append((b"s", None, None, b""))
    r.follow()
    assert (r.leading, r.inflight, list(r.waiting)) == (False, 0, [])
    assert r.group.propose(b"x") is False


REQ = Request(b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", b'{"filter":"a"}')


@pytest.mark.parametrize(
    "op",
    [
        Purge(4, 99, REQ, "a", 0, 0),
        Purge(2**64 - 1, 0, Request(b"s", b"", b""), "", 2**64 - 1, 7),
        DeleteMsg(1, 5, Request(b"$JS.API.STREAM.MSG.DELETE.S", b"r", b'{"seq":3}'), 3, True),
        DeleteMsg(1, 5, Request(b"x", b"", b""), 2**63, False),
        DeleteConsumer(9, 12, Request(b"$JS.API.CONSUMER.DELETE.S.d", b"r", b""), "d\u00e9"),
    ],
)
def test_typed_op_round_trip(op: Purge | DeleteMsg | DeleteConsumer) -> None:
    b = encode_op(op)
    assert decode_op(b) == op
    assert compact_index(b) == 0
    for n in range(len(b)):
        with pytest.raises(EntryError):
            decode_op(b[:n])


def _legacy(proposer: int, as_of: int, subject: bytes, reply: bytes, body: bytes) -> bytes:
    """An ``API`` entry as the release before typed operations wrote it."""
    return b"".join([
        struct.pack("<BBQQ", 1, 3, proposer, as_of),
        struct.pack("<H", len(subject)), subject,
        struct.pack("<H", len(reply)), reply,
        struct.pack("<I", 0xFFFFFFFF), body,
    ])  # fmt: skip


def test_legacy_api_entries_decode_as_typed_operations() -> None:
    purge = _legacy(4, 99, b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", b'{"filter":"a","keep":2}')
    assert decode_op(purge) == Purge(
        4, 99, Request(b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", b'{"filter":"a","keep":2}'),
        "a", 0, 2,
    )  # fmt: skip
    everything = _legacy(4, 1, b"$JS.API.STREAM.PURGE.S", b"", b"")
    assert decode_op(everything) == Purge(
        4, 1, Request(b"$JS.API.STREAM.PURGE.S", b"", b""), "", 0, 0
    )
    delete = _legacy(2, 7, b"$JS.API.STREAM.MSG.DELETE.S", b"r", b'{"seq":5,"no_erase":true}')
    op = decode_op(delete)
    assert isinstance(op, DeleteMsg) and (op.seq, op.no_erase, op.as_of) == (5, True, 7)
    # with a JetStream domain the subject is $JS.<domain>.API....
    cdel = _legacy(2, 7, b"$JS.hub.API.CONSUMER.DELETE.S.dur", b"r", b"")
    op = decode_op(cdel)
    assert isinstance(op, DeleteConsumer) and op.name == "dur"
    # what the handler refused changed nothing, and decodes to no operation
    for subject, body in [
        (b"$JS.API.STREAM.PURGE.S", b'{"seq":3,"keep":1}'),
        (b"$JS.API.STREAM.PURGE.S", b"not json"),
        (b"$JS.API.STREAM.MSG.DELETE.S", b'{"seq":0}'),
        (b"$JS.API.STREAM.INFO.S", b""),
    ]:
        with pytest.raises(EntryError):
            decode_op(_legacy(1, 1, subject, b"", body))


def test_damaged_ops_raise_entry_error_only() -> None:
    rng = random.Random(20261129)
    bases = [
        encode_op(Purge(4, 99, REQ, "a.>", 3, 0)),
        encode_op(DeleteConsumer(9, 12, REQ, "d")),
        _legacy(4, 99, b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", b'{"filter":"a"}'),
    ]
    for _ in range(20000):
        b = bytearray(rng.choice(bases))
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        b = b[: rng.randint(0, len(b))]
        try:
            decode_op(bytes(b))
        except EntryError:
            pass


def test_a_former_leader_answers_its_own_entries_up_to_where_it_stopped() -> None:
    """``Replica.follow`` keeps the last sequence this replica gave out as leader: it
    answers its own entries up to there when they commit after it stepped down (their
    clients wait for those PubAcks), and nothing past it or proposed by another."""
    rep = Replica(7, _NoGroup())
    rep.lead(10)
    rep.clseq = 14  # four in flight
    rep.waiting.append((b"s", b"r", None, b"held"))
    assert rep.mine(7, 20, True)  # leading: every entry it proposed
    rep.follow()
    assert rep.acks_through == 14
    assert rep.handed == [(b"s", b"r", None, b"held")] and not rep.waiting
    assert rep.mine(7, 14, False) and rep.mine(7, 11, False)
    assert not rep.mine(7, 15, False)  # past what it gave out
    assert not rep.mine(8, 12, False)  # another leader's entry
    rep.follow()  # a second follow (no leadership) keeps the mark
    assert rep.acks_through == 14


def test_barriers_run_once_what_was_proposed_before_them_applied() -> None:
    r = Replica(3, _NoGroup())
    r.lead(10)
    ran: list[str] = []
    r.after_inflight(lambda: ran.append("idle"))
    assert ran == ["idle"]  # nothing in flight: at once
    r.clseq, r.inflight = 12, 2
    r.after_inflight(lambda: ran.append("a"))  # after 11 and 12
    r.clseq, r.inflight = 13, 3
    r.after_inflight(lambda: ran.append("b"))  # after 13 too
    r.applied(11, "")
    assert ran == ["idle"]
    r.applied(12, "")
    assert ran == ["idle", "a"]
    # publishes waiting to be proposed hold a barrier back until they are proposed and apply
    r.waiting.append((b"s", None, None, b""))
    r.after_inflight(lambda: ran.append("c"))
    r.applied(13, "")
    assert ran == ["idle", "a", "b"]
    r.waiting.clear()
    r.clseq, r.inflight = 14, 1  # (the waiting publish, proposed)
    r.release()
    assert ran == ["idle", "a", "b"]
    r.applied(14, "")
    assert ran == ["idle", "a", "b", "c"]
    # leadership lost: what waited for entries that may never commit never runs
    r.clseq, r.inflight = 15, 1
    r.after_inflight(lambda: ran.append("d"))
    r.follow()
    r.lead(14)
    r.clseq, r.inflight = 15, 1
    r.applied(15, "")
    assert ran == ["idle", "a", "b", "c"] and r.barriers == []
