"""ack_numbers reads an ack subject's tail in place; it must agree with splitting the tail
into tokens and converting them (the way it was read before) on every well-formed tail,
and give (0, 0, 0) on everything else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.jetstream.consumer.ack import ack_numbers

PRE = b"$JS.ACK.S.C."


def _by_split(tail: bytes) -> tuple[int, int, int]:
    toks = tail.split(b".")
    if len(toks) != 5 or not all(t.isdigit() and t.isascii() for t in toks[:3]):
        return 0, 0, 0
    if any(len(t) > 20 for t in toks[:3]):
        return 0, 0, 0
    return int(toks[0]), int(toks[1]), int(toks[2])


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
    assert ack_numbers(PRE + tail, len(PRE)) == _by_split(tail)
