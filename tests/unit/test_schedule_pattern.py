"""Message schedule patterns (``jetstream/stream/schedule_pattern.py``) against what
nats-server 2.15.1 accepted, refused and answered (captured in the ADR-51 research: @at in
RFC 3339, @every in Go durations, six-field cron with seconds and its predefined names)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from natsd.jetstream.stream.schedule_pattern import (
    format_next,
    go_duration_ns,
    next_cron,
    next_fire,
    parse_at,
)

S = 1_000_000_000


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1_000_000) * 1_000


AFTER = ns("2026-12-01T02:21:43.948+00:00")


@pytest.mark.parametrize(
    "text",
    [
        "2030-01-01T00:00:00Z",
        "2030-01-01T00:00:00.123456789Z",
        "2030-01-01T00:00:00,5Z",
        "2030-01-01T00:00:00.1234567891Z",
        "2030-01-01T00:00:00-05:00",
        "2030-01-01T00:00:00+24:00",
    ],
)
def test_at_accepts_what_go_parses(text: str) -> None:
    assert parse_at(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        "2030-01-01T00:00:00",
        "2030-01-01t00:00:00Z",
        "2030-01-01T00:00:00z",
        "2030-01-01T00:00:00+0500",
        "2030-01-01 00:00:00Z",
        "2030-01-01",
        "1893456000",
        "2030-02-30T00:00:00Z",
        "2030-01-01T23:59:60Z",
        "2030-01-01T24:00:00Z",
        "2030-01-01T00:00:00.Z",
    ],
)
def test_at_refuses_what_go_refuses(text: str) -> None:
    assert parse_at(text) is None


def test_at_values() -> None:
    assert parse_at("2030-01-01T00:00:00.5Z") == ns("2030-01-01T00:00:00+00:00") + S // 2
    assert parse_at("2030-01-01T00:00:00-05:00") == ns("2030-01-01T05:00:00+00:00")


def test_go_durations() -> None:
    assert go_duration_ns("1.5s") == 1_500_000_000
    assert go_duration_ns("1h30m") == 5400 * S
    assert go_duration_ns("1m0.5s") == 60 * S + S // 2
    for bad in ("60", "1d", "1s ", "", "s", "1..5s"):
        assert go_duration_ns(bad) is None, bad


def test_every() -> None:
    published = ns("2026-12-01T02:21:36.934+00:00")
    first = next_fire("@every 1500ms", None, published, published)
    assert first == (ns("2026-12-01T02:21:38.5+00:00"), True)
    second = next_fire("@every 1500ms", None, first[0], first[0])
    assert second == (ns("2026-12-01T02:21:40.5+00:00"), True)  # (rounded: every 2 s)
    for bad in ("@every 999ms", "@every 0s", "@every -5s", "@every 1d", "@every 60"):
        assert next_fire(bad, None, published, published) is None, bad
    # a time long past is caught up once, from now
    late = next_fire("@every 1s", None, published, published + 3600 * S)
    assert late == (published + 3600 * S - 934_000_000 + S + S, True)
    assert next_fire("@every 1s", "UTC", published, published) is None  # (zones: cron only)


@pytest.mark.parametrize(
    ("pattern", "want"),
    [
        ("*/2 * * * * *", "2026-12-01T02:21:44+00:00"),
        ("0 0 0 */2 * 1", "2026-12-03T00:00:00+00:00"),
        ("0 0 0 */1 * 1", "2026-12-07T00:00:00+00:00"),
        ("0 0 0 1 * */2", "2026-12-03T00:00:00+00:00"),
        ("0 0 0 ? * MON", "2026-12-07T00:00:00+00:00"),
        ("@hourly", "2026-12-01T03:00:00+00:00"),
        ("0 0 0 29 2 *", "2028-02-29T00:00:00+00:00"),
        ("+5 * * * * *", "2026-12-01T02:22:05+00:00"),
        ("0 0 0 1,,15 * *", "2026-12-15T00:00:00+00:00"),
    ],
)
def test_cron_next(pattern: str, want: str) -> None:
    assert next_cron(pattern, AFTER, UTC) == ns(want)


@pytest.mark.parametrize(
    "pattern",
    [
        "0 0 0 * * 7",
        "0 0 0 L * *",
        "0 0 0 1#2 * *",
        "0 0 0 * * 0-7",
        "0 0 0 * * 5-1",
        "0 0 0 * feb-jan *",
        "30 4 * * *",
        "0 0 0 30 2 *",
        "0 0 0 31 4 *",
        "@HOURLY",
        "@minutely",
        "H * * * * *",
        "garbage",
        "0 0 0 1 1 * 2030",
    ],
)
def test_cron_refused(pattern: str) -> None:
    assert next_fire(pattern, None, AFTER, AFTER) is None


def test_time_zones() -> None:
    t = ns("2026-12-01T02:22:24.001+00:00")
    nxt, repeat = next_fire("*/2 * * * * *", "Asia/Tokyo", t, t) or (0, False)
    assert repeat and format_next(nxt, "Asia/Tokyo") == "2026-12-01T11:22:26+09:00"
    assert format_next(ns("2026-12-01T02:21:40.5+00:00"), None) == "2026-12-01T02:21:40.5Z"
    assert next_fire("0 * * * * *", "utc", t, t) is None
    assert next_fire("@at 2030-01-01T00:00:00Z", "UTC", t, t) is None
