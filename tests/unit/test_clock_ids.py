"""Unit tests for natsd.core.clock (Go durations, RFC 3339) and natsd.core.ids."""

from __future__ import annotations

import string
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from natsd.core.clock import format_duration, now_ns, parse_duration, rfc3339
from natsd.core.ids import Nuid, new_server_id

# ------------------------------------------------------------------ parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("2.5s", 2.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("100ns", 1e-7),
        ("1h2m3s", 3723.0),
        ("-1.5h", -5400.0),
        ("+10s", 10.0),
        ("10", 10.0),
        ("  5s ", 5.0),
        ("0", 0.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_parse_duration_numbers_are_seconds() -> None:
    assert parse_duration(5) == 5.0
    assert parse_duration(2.5) == 2.5


@pytest.mark.parametrize("text", ["", "   ", "abc", "5x", "1h30", "h", "1.5.5s", "s5", "1d"])
def test_parse_duration_errors(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


# ------------------------------------------------------------------ format_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1, "1s"),
        (1.5, "1.5s"),
        (59, "59s"),
        (60, "1m0s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (3723, "1h2m3s"),
        (3723.5, "1h2m3.5s"),
        (86400, "24h0m0s"),
        (0.25, "250ms"),
        (0.001, "1ms"),
        (0.0015, "1.5ms"),
        (0.000123, "123\u00b5s"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_format_duration_keeps_precision_like_go() -> None:
    assert format_duration(1.234567) == "1.234567s"
    assert format_duration(0.001234567) == "1.234567ms"


# ------------------------------------------------------------------ rfc3339


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1_500_000_000, "1970-01-01T00:00:01.5Z"),
        (1_704_164_645_123_456_789, "2024-01-02T03:04:05.123456789Z"),
        (1_704_164_645_120_000_000, "2024-01-02T03:04:05.12Z"),
        (1_704_164_645_000_000_001, "2024-01-02T03:04:05.000000001Z"),
        (1_704_164_645_000_000_000, "2024-01-02T03:04:05Z"),
    ],
)
def test_rfc3339(ns: int, text: str) -> None:
    assert rfc3339(ns) == text


@given(st.lists(st.integers(min_value=0, max_value=4_102_444_800 * 10**9), max_size=20))
def test_rfc3339_cache_never_changes_answers(stamps: list[int]) -> None:
    # rfc3339 remembers the last second it formatted; any order of calls, including
    # repeats and neighbours of a second, must give what a fresh format gives.
    for ns in stamps + [s + 1 for s in stamps] + stamps[::-1]:
        secs, frac = divmod(ns, 10**9)
        base = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        want = (f"{base}.{frac:09d}".rstrip("0") if frac else base) + "Z"
        assert rfc3339(ns) == want


def test_now_ns_is_recent_int() -> None:
    n = now_ns()
    assert isinstance(n, int)
    assert n > 1_600_000_000 * 10**9


# ------------------------------------------------------------------ ids

B32 = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
B62 = set(string.digits + string.ascii_letters)


def test_server_id_shape() -> None:
    ids = {new_server_id() for _ in range(50)}
    assert len(ids) == 50
    for sid in ids:
        assert len(sid) == 56
        assert sid[0] == "N"
        assert set(sid) <= B32


def test_nuid_shape_and_uniqueness() -> None:
    n = Nuid()
    ids = [n.next() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for x in ids[:100]:
        assert len(x) == 22
        assert set(x) <= B62
    # Sequential ids share the random prefix.
    assert len({x[:12] for x in ids[:100]}) == 1


def test_nuid_prefix_rolls_over_at_max_sequence() -> None:
    n = Nuid()
    first = n.next()
    n._seq = Nuid._MAX_SEQ - 1
    nxt = n.next()
    assert len(nxt) == 22 and set(nxt) <= B62
    assert nxt[:12] != first[:12]
    assert n.next()[:12] == nxt[:12]


def test_two_nuids_differ() -> None:
    assert Nuid().next()[:12] != Nuid().next()[:12]
