"""ack_tail reads an ack subject's tail in place; it must agree with splitting the tail
into tokens and converting them (the way it was read before) on every well-formed tail,
and give zeros on everything else: for a consumer's acks the first three numbers must be
plain, for a mirror's deliveries all five."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.jetstream.wire.ack_subject import ack_tail

PRE = b"$JS.ACK.S.C."


def _by_split(tail: bytes, numbers: int = 3) -> tuple[int, int, int, int, int]:
    toks = tail.split(b".")
    if len(toks) != 5 or not all(t.isdigit() and t.isascii() for t in toks[:numbers]):
        return 0, 0, 0, 0, 0
    if any(len(t) > 20 for t in toks[:numbers]):
        return 0, 0, 0, 0, 0
    nums = [int(t) for t in toks[:numbers]] + [0] * (5 - numbers)
    return nums[0], nums[1], nums[2], nums[3], nums[4]


def ack_numbers(subject: bytes, start: int) -> tuple[int, int, int]:
    dc, sseq, dseq, _ts, _pending = ack_tail(subject, start, 3)
    return dc, sseq, dseq


def test_a_client_ack_subject() -> None:
    assert ack_numbers(PRE + b"1.42.7.1700000000000000000.3", len(PRE)) == (1, 42, 7)
    assert ack_numbers(PRE + b"12.18446744073709551615.9.0.0", len(PRE)) == (
        12,
        18446744073709551615,
        9,
    )


def test_malformed_tails_read_as_zero() -> None:
    for tail in (
        b"",
        b"1.2.3.4",  # four tokens
        b"1.2.3.4.5.6",  # six
        b"1..3.4.5",  # an empty number
        b"1.-2.3.4.5",  # a sign
        b"1. 2.3.4.5",  # a space
        b"1.2_0.3.4.5",  # int() would take this one
        b"1.\xd9\xa3.3.4.5",  # a non-ASCII digit
        b"1." + b"9" * 21 + b".3.4.5",  # more than a uint64
    ):
        assert ack_numbers(PRE + tail, len(PRE)) == (0, 0, 0), tail


_token = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1).map(lambda n: b"%d" % n),
    st.binary(max_size=4),
    st.sampled_from([b"", b"0", b"007", b"+1", b"x"]),
)


@settings(derandomize=True, max_examples=500)
@given(st.lists(_token, min_size=1, max_size=7))
def test_agrees_with_splitting(tokens: list[bytes]) -> None:
    tail = b".".join(tokens)
    assert ack_numbers(PRE + tail, len(PRE)) == _by_split(tail)[:3]
    assert ack_tail(PRE + tail, len(PRE), 5) == _by_split(tail, 5)


def test_a_mirrors_read_of_a_delivery() -> None:
    assert ack_tail(PRE + b"1.42.7.1700000000000000000.3", len(PRE), 5) == (
        1, 42, 7, 1700000000000000000, 3)  # fmt: skip
    assert ack_tail(PRE + b"1.42.7.x.3", len(PRE), 5) == (0, 0, 0, 0, 0)
    assert ack_tail(PRE + b"1.42.7.5.", len(PRE), 5) == (0, 0, 0, 0, 0)
