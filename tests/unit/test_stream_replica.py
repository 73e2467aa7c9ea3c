"""The replicated stream entries (jetstream/stream/replica.py): round trips, and damage that
never raises anything but EntryError."""

from __future__ import annotations

import random

import pytest

from natsd.jetstream.stream.replica import (
    EntryError,
    Replica,
    compact_index,
    decode_api,
    decode_entry,
    encode_api,
    encode_compact,
    encode_msg,
)


@pytest.mark.parametrize(
    "args",
    [
        (7, 1, 123, 0, "a.b", b"_INBOX.x.y", None, "", "", b"data"),
        (2**64 - 1, 2**63, -5, 30, "s", None, b"NATS/1.0\r\nA: b\r\n\r\n", "id-1", "sub", b""),
        (1, 9, 0, 0, "\u00e9.x", b"", b"", "m\u00e9", "all", b"\x00" * 1000),
    ],
)
def test_msg_round_trip(args: tuple) -> None:  # type: ignore[type-arg]
    e = decode_entry(encode_msg(*args))
    proposer, seq, ts, ttl, subject, reply, hdr, msg_id, rollup, data = args
    assert (e.proposer, e.seq, e.ts, e.ttl, e.subject) == (proposer, seq, ts, ttl, subject)
    assert (e.reply, e.hdr, e.msg_id, e.rollup, e.data) == (reply or b"", hdr, msg_id, rollup, data)
    assert compact_index(encode_msg(*args)) == 0


def test_compact_round_trip() -> None:
    assert compact_index(encode_compact(12345)) == 12345
    assert compact_index(encode_compact(12345)[:-1]) == 0
    with pytest.raises(EntryError):
        decode_entry(encode_compact(5))


def test_damaged_entries_raise_entry_error_only() -> None:
    rng = random.Random(20261126)
    base = encode_msg(3, 42, 1, 2, "orders.new", b"_INBOX.r", b"NATS/1.0\r\n\r\n", "x", "", b"p")
    for _ in range(20000):
        b = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        b = b[: rng.randint(0, len(b))]
        try:
            decode_entry(bytes(b))
        except EntryError:
            pass
    # the data is the rest of the entry (the node log checksums every record): a cut
    # anywhere before it is an error
    for n in range(len(base) - 1):
        with pytest.raises(EntryError):
            decode_entry(base[:n])
    with pytest.raises(EntryError):
        decode_entry(encode_msg(3, 0, 1, 2, "s", None, None, "", "", b""))  # no sequence


def test_leader_shadow() -> None:
    r = Replica(9)
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
    assert r.propose(b"x") is False  # not wired to a group


def test_api_round_trip() -> None:
    b = encode_api(4, 99, b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", None, b'{"filter":"a"}')
    e = decode_api(b)
    assert (e.proposer, e.as_of, e.subject, e.reply, e.hdr, e.data) == (
        4, 99, b"$JS.API.STREAM.PURGE.S", b"_INBOX.r", None, b'{"filter":"a"}'
    )
    e = decode_api(encode_api(1, 0, b"s", None, b"NATS/1.0\r\n\r\n", b""))
    assert (e.reply, e.hdr, e.data) == (b"", b"NATS/1.0\r\n\r\n", b"")
    for n in range(len(b) - len(b'{"filter":"a"}')):
        with pytest.raises(EntryError):
            decode_api(b[:n])


def test_a_former_leader_answers_its_own_entries_up_to_where_it_stopped() -> None:
    """``Replica.follow`` keeps the last sequence this replica gave out as leader: it
    answers its own entries up to there when they commit after it stepped down (their
    clients wait for those PubAcks), and nothing past it or proposed by another."""
    rep = Replica(7)
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
