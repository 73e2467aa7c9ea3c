"""The checker itself: synthetic histories with known losses, corruption and duplicates."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .checker import (
    HEADER,
    History,
    Outcome,
    StoredMsg,
    check,
    decode_payload,
    make_payload,
    msg_id,
    random_size,
)


def _stream(keys: list[tuple[int, int]], rng: random.Random) -> list[StoredMsg]:
    return [
        StoredMsg(i + 1, "t", make_payload(p, c, random_size(rng), rng), msg_id(p, c))
        for i, (p, c) in enumerate(keys)
    ]


def _acked_history(n_pub: int, n: int) -> tuple[History, list[tuple[int, int]]]:
    """n_pub publishers interleaved round-robin, n each, all acked at their sequence."""
    h = History()
    order = [(p, c) for c in range(n) for p in range(n_pub)]
    for seq, (p, c) in enumerate(order, 1):
        h.record(p, c, Outcome.ACKED, seq)
    return h, order


def test_payload_roundtrip_and_sizes() -> None:
    rng = random.Random(1)
    for size in (16, 17, 100, 65536):
        data = make_payload(7, 123456, size, rng)
        assert len(data) == size
        assert decode_payload(data) == (7, 123456)
    sizes = [random_size(rng) for _ in range(2000)]
    assert min(sizes) >= 16 and max(sizes) <= 65536
    assert min(sizes) < 64 and max(sizes) > 32768
    with pytest.raises(ValueError):
        make_payload(1, 1, HEADER.size - 1, rng)


def test_clean_history_is_ok() -> None:
    rng = random.Random(2)
    h, order = _acked_history(3, 20)
    h.record(9, 0, Outcome.FAILED)
    h.record(9, 1, Outcome.UNKNOWN)
    h.record(9, 2, Outcome.UNKNOWN)
    stored = _stream([*order, (9, 1)], rng)
    rep = check(h, stored)
    assert rep.ok, rep.summary()
    assert (rep.stored, rep.acked, rep.failed, rep.unknown) == (61, 60, 1, 2)
    assert (rep.unknown_stored, rep.unknown_missing) == (1, 1)
    assert rep.summary().startswith("OK: 61 stored")


def test_losses_split_into_prefix_middle_suffix() -> None:
    rng = random.Random(3)
    h, order = _acked_history(2, 10)
    gone = {(0, 0), (0, 1), (0, 5), (1, 4), (1, 8), (1, 9)} | {(0, 9)}
    kept = [k for k in order if k not in gone]
    # Keep the PubAck sequences aligned: renumber the history to the stored sequences.
    stored = [
        StoredMsg(seq, "t", make_payload(p, c, 40, rng), msg_id(p, c))
        for seq, (p, c) in enumerate(order, 1)
        if (p, c) not in gone
    ]
    rep = check(h, stored)
    assert not rep.ok
    assert rep.lost_prefix == [(0, 0), (0, 1)]
    assert sorted(rep.lost_middle) == [(0, 5), (1, 4)]
    assert sorted(rep.lost_suffix) == [(0, 9), (1, 8), (1, 9)]
    assert rep.lost == sorted(gone)
    assert not (rep.corrupt or rep.unexpected or rep.duplicated or rep.out_of_order)
    assert not rep.seq_mismatch
    assert rep.stored == len(kept)
    assert "lost (acked, not read): 7" in rep.summary()


def test_publisher_that_lost_everything_is_suffix() -> None:
    rng = random.Random(4)
    h, order = _acked_history(2, 5)
    stored = [
        StoredMsg(seq, "t", make_payload(p, c, 30, rng), msg_id(p, c))
        for seq, (p, c) in enumerate(order, 1)
        if p == 0
    ]
    rep = check(h, stored)
    assert rep.lost_suffix == [(1, c) for c in range(5)]
    assert not rep.lost_prefix and not rep.lost_middle


def test_corrupt_unexpected_duplicated_out_of_order() -> None:
    rng = random.Random(5)
    h, order = _acked_history(1, 6)
    stored = _stream(order, rng)
    # seq 2: one bit flipped in the body -> corrupt (and so (0, 1) also counts as lost).
    bad = bytearray(stored[1].data)
    bad[-1] ^= 0x10
    stored[1] = StoredMsg(2, "t", bytes(bad), stored[1].msg_id)
    # seq 3: truncated below the header size -> corrupt.
    stored[2] = StoredMsg(3, "t", stored[2].data[:5], stored[2].msg_id)
    # seq 7: never published; seq 8: duplicate of (0, 4); seq 9: (0, 0) again, out of order.
    stored.append(StoredMsg(7, "t", make_payload(5, 1, 50, rng), msg_id(5, 1)))
    stored.append(StoredMsg(8, "t", make_payload(0, 4, 50, rng), msg_id(0, 4)))
    stored.append(StoredMsg(9, "t", make_payload(0, 0, 50, rng), msg_id(0, 0)))
    # seq 10: an intact payload under the wrong Msg-Id -> corrupt.
    stored.append(StoredMsg(10, "t", make_payload(0, 5, 50, rng), msg_id(0, 3)))
    rep = check(h, stored)
    assert rep.corrupt == [2, 3, 10]
    assert rep.lost_middle == [(0, 1), (0, 2)]
    assert rep.unexpected == [7]
    # (seq 10 is corrupt, not a copy of anything: duplicates are counted by intact payloads)
    assert rep.duplicated == {"p0-c4": [5, 8], "p0-c0": [1, 9]}
    assert rep.out_of_order == [8, 9]
    assert not rep.seq_mismatch


def test_seq_mismatch_and_failed_but_stored() -> None:
    rng = random.Random(6)
    h = History()
    h.record(0, 0, Outcome.ACKED, 1)
    h.record(0, 1, Outcome.ACKED, 5)  # the PubAck named 5, it is read back at 2
    h.record(0, 2, Outcome.FAILED)
    stored = _stream([(0, 0), (0, 1), (0, 2)], rng)
    rep = check(h, stored)
    assert rep.seq_mismatch == [(0, 5, 2)]
    assert rep.failed_but_stored == [(0, 2)]
    assert not rep.ok
    with pytest.raises(ValueError):
        h.record(0, 0, Outcome.ACKED, 1)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 4),
    st.integers(1, 30),
    st.sets(st.integers(0, 200)),
    st.sets(st.integers(0, 200)),
    st.randoms(use_true_random=False),
)
def test_checker_finds_exactly_the_injected_faults(
    n_pub: int, n: int, drop: set[int], dup: set[int], rng: random.Random
) -> None:
    h, order = _acked_history(n_pub, n)
    drop_keys = {order[i] for i in drop if i < len(order)}
    dup_keys = {order[i] for i in dup if i < len(order)} - drop_keys
    stored: list[StoredMsg] = []
    for seq, key in enumerate(order, 1):
        if key not in drop_keys:
            stored.append(StoredMsg(seq, "t", make_payload(*key, 20, rng), msg_id(*key)))
    # Duplicates are appended at the end, in publish order: a later copy of an earlier message
    # is also out of order unless it is that publisher's newest counter so far.
    top: dict[int, int] = {}
    for m in stored:
        p, c = decode_payload(m.data) or (0, 0)
        top[p] = max(top.get(p, -1), c)
    seq = len(order)
    want_ooo: list[int] = []
    for key in sorted(dup_keys, key=order.index):
        seq += 1
        stored.append(StoredMsg(seq, "t", make_payload(*key, 20, rng), msg_id(*key)))
        if key[1] < top[key[0]]:
            want_ooo.append(seq)
    rep = check(h, stored)
    assert rep.lost == sorted(drop_keys)
    assert set(rep.duplicated) == {msg_id(*k) for k in dup_keys}
    assert rep.out_of_order == want_ooo
    assert not rep.corrupt and not rep.unexpected and not rep.seq_mismatch
    assert rep.ok == (not drop_keys and not dup_keys)


def test_a_second_copy_without_its_msg_id_is_a_duplicate() -> None:
    """A duplicate is counted by the message's key (its payload), so a second stored copy
    that lost or never had its Nats-Msg-Id header is one too."""
    rng = random.Random(7)
    h = History()
    h.record(1, 1, Outcome.ACKED, seq=1)
    data = make_payload(1, 1, 64, rng)
    rep = check(h, [StoredMsg(1, "s", data, msg_id(1, 1)), StoredMsg(2, "s", data, None)])
    assert not rep.ok and rep.duplicated == {msg_id(1, 1): [1, 2]}
    rep = check(h, [StoredMsg(1, "s", data, None), StoredMsg(2, "s", data, None)])
    assert not rep.ok and rep.duplicated == {msg_id(1, 1): [1, 2]}
