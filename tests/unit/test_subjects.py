"""Unit tests for natsd.core.subjects (nats-server sublist.go rules)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.core.subjects import (
    is_valid_literal_subject,
    is_valid_subject,
    subject_has_wildcard,
    subject_matches,
    subset_match,
    tokens,
)

VALID = [
    b"foo",
    b"foo.bar",
    b"foo.bar.baz",
    b"*",
    b">",
    b"foo.*",
    b"*.bar",
    b"foo.>",
    b"*.*.>",
    b"foo.*.baz.>",
    b"foo*",  # '*' inside a token is a literal character
    b"foo.bar*",
    b"*foo",
    b"f>o",
    b"foo>.bar",  # '>' inside a token is literal, so it may appear before the last token
    b"$JS.API.INFO",
    b"_INBOX.abc123",
    b"a-b_c.d:e",
    b"\xc3\xa9t\xc3\xa9",
]

INVALID = [
    b"",
    b".",
    b"..",
    b"foo.",
    b".foo",
    b"foo..bar",
    b">.foo",
    b"foo.>.bar",
    b">.>",
    b"foo bar",
    b"foo\tbar",
    b"foo\rbar",
    b"foo\nbar",
    b"foo\fbar",
    b" foo",
    b"foo.* ",
    b"foo. .bar",
]


@pytest.mark.parametrize("subject", VALID)
def test_valid_subjects(subject: bytes) -> None:
    assert is_valid_subject(subject)


@pytest.mark.parametrize("subject", INVALID)
def test_invalid_subjects(subject: bytes) -> None:
    assert not is_valid_subject(subject)
    assert not is_valid_literal_subject(subject)


@pytest.mark.parametrize(
    ("subject", "literal"),
    [
        (b"foo", True),
        (b"foo.bar", True),
        (b"foo*", True),
        (b"foo.bar>", True),
        (b"*", False),
        (b">", False),
        (b"foo.*", False),
        (b"foo.>", False),
        (b"*.foo", False),
        (b"foo..bar", False),
    ],
)
def test_literal_subjects(subject: bytes, literal: bool) -> None:
    assert is_valid_literal_subject(subject) is literal


@pytest.mark.parametrize(
    ("subject", "wild"),
    [
        (b"foo", False),
        (b"foo*", False),
        (b"foo.b>r", False),
        (b"*", True),
        (b">", True),
        (b"foo.*.bar", True),
        (b"foo.>", True),
    ],
)
def test_subject_has_wildcard(subject: bytes, wild: bool) -> None:
    assert subject_has_wildcard(subject) is wild


def test_tokens() -> None:
    assert tokens(b"a.b.c") == [b"a", b"b", b"c"]
    assert tokens(b"a") == [b"a"]


@pytest.mark.parametrize(
    ("literal", "pattern", "expected"),
    [
        (b"foo", b"foo", True),
        (b"foo", b"bar", False),
        (b"foo.bar", b"foo.bar", True),
        (b"foo.bar", b"foo", False),
        (b"foo", b"foo.bar", False),
        (b"foo.bar", b"foo.*", True),
        (b"foo.bar", b"*.bar", True),
        (b"foo.bar", b"*.*", True),
        (b"foo.bar", b"*", False),
        (b"foo", b"*", True),
        (b"foo.bar.baz", b"foo.*", False),
        (b"foo.bar.baz", b"foo.*.baz", True),
        (b"foo.bar.baz", b"foo.>", True),
        (b"foo.bar", b"foo.>", True),
        (b"foo", b"foo.>", False),
        (b"foo", b">", True),
        (b"foo.bar.baz", b">", True),
        (b"foo.bar.baz", b"*.>", True),
        (b"foo", b"*.>", False),
        (b"foo.bar", b"foo.bar.>", False),
        (b"foo*", b"foo*", True),
        (b"foox", b"foo*", False),  # foo* is a literal token, not a prefix wildcard
        (b"foo.x", b"foo.x*", False),
        (b"a.b.c.d", b"a.*.c.>", True),
        (b"a.b.x.d", b"a.*.c.>", False),
    ],
)
def test_subject_matches(literal: bytes, pattern: bytes, expected: bool) -> None:
    assert subject_matches(literal, pattern) is expected


@pytest.mark.parametrize(
    ("pattern", "filt", "expected"),
    [
        (b"foo.bar", b"foo.bar", True),
        (b"foo.bar", b"foo.*", True),
        (b"foo.bar", b"foo.>", True),
        (b"foo.bar", b">", True),
        (b"foo.*", b"foo.*", True),
        (b"foo.*", b"foo.>", True),
        (b"foo.*", b"*.*", True),
        (b"foo.*", b">", True),
        (b"foo.>", b"foo.>", True),
        (b"foo.>", b">", True),
        (b"foo.*.baz", b"foo.>", True),
        (b"foo.*", b"foo.bar", False),
        (b"foo.>", b"foo.*", False),
        (b"foo.>", b"foo.bar", False),
        (b">", b"foo.>", False),
        (b"*", b"foo", False),
        (b"foo", b"foo.>", False),
        (b"foo.bar.baz", b"foo.*", False),
        (b"foo.bar", b"foo.bar.baz", False),
        (b"*.bar", b"foo.*", False),
        (b"foo.*", b"*.bar", False),
    ],
)
def test_subset_match(pattern: bytes, filt: bytes, expected: bool) -> None:
    assert subset_match(pattern, filt) is expected


# ---------------------------------------------------------------------- properties

TOK = st.sampled_from([b"a", b"b", b"c", b"ab"])
LITERAL = st.lists(TOK, min_size=1, max_size=4).map(b".".join)
PAT_TOK = st.sampled_from([b"a", b"b", b"*"])


@st.composite
def pattern(draw: st.DrawFn) -> bytes:
    toks = draw(st.lists(PAT_TOK, min_size=1, max_size=3))
    if draw(st.booleans()):
        toks.append(b">")
    return b".".join(toks)


def _all_literals(max_len: int = 5) -> list[bytes]:
    out: list[bytes] = []
    layer = [b""]
    alphabet = [b"a", b"b", b"zz"]
    for _ in range(max_len):
        layer = [(p + b"." + t) if p else t for p in layer for t in alphabet]
        out.extend(layer)
    return out


# Patterns have at most 4 tokens, so a witness never needs more than 5.
ALL_LITERALS = _all_literals(5)


@settings(max_examples=200, deadline=None)
@given(literal=LITERAL)
def test_literal_matches_itself(literal: bytes) -> None:
    assert is_valid_literal_subject(literal)
    assert subject_matches(literal, literal)
    assert subset_match(literal, literal)
    assert subject_matches(literal, b">")


@settings(max_examples=200, deadline=None)
@given(p=pattern(), f=pattern())
def test_subset_match_agrees_with_brute_force(p: bytes, f: bytes) -> None:
    # subset_match(p, f) holds exactly when every literal matched by p is matched by f,
    # checked over every literal of up to 5 tokens drawn from the patterns' tokens plus one.
    assert is_valid_subject(p) and is_valid_subject(f)
    if subset_match(p, f):
        for lit in ALL_LITERALS:
            if subject_matches(lit, p):
                assert subject_matches(lit, f), (lit, p, f)
    else:
        witness = [
            lit for lit in ALL_LITERALS if subject_matches(lit, p) and not subject_matches(lit, f)
        ]
        assert witness, (p, f)
