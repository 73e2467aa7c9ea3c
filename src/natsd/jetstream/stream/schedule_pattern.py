"""Message schedule patterns (nats-server 2.12 and 2.14, ADR-51): when a schedule fires
next. Pure functions on nanosecond timestamps; the rules are nats-server's
(``server/scheduler.go`` ``parseMsgSchedule``, ``server/cron.go``), checked against the
2.15.1 binary (/work/notes/schedules-spec.md):

- ``@at <RFC 3339>``: once, at that instant (Go's ``time.Parse(time.RFC3339, ...)``: a zone
  is required, upper-case ``T`` and ``Z``, a fraction after ``.`` or ``,``);
- ``@every <Go duration>``, at least one second: from the previous planned time rounded to
  the second (half up), plus the interval;
- cron with seconds (six fields), or ``@yearly`` / ``@annually`` / ``@monthly`` /
  ``@weekly`` / ``@daily`` / ``@midnight`` / ``@hourly``, in UTC or the schedule's time zone
  (a port of robfig/cron's parser and next-time search that nats-server uses: no Python
  cron library reads its form: croniter puts seconds last and takes ``L``, ``#`` and day 7,
  cronsim treats ``*/2`` as a star and refuses ``?``).

A time already past is caught up once: from now (rounded to the second), never one firing
per missed slot.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

__all__ = [
    "format_next",
    "go_duration_ns",
    "load_zone",
    "next_cron",
    "next_fire",
    "parse_at",
]

_SECOND: Final = 1_000_000_000
_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": _SECOND,
    "m": 60 * _SECOND,
    "h": 3600 * _SECOND,
}
_DURATION_PART: Final = re.compile(r"([0-9]*(?:\.[0-9]*)?)([a-zµμ]+)")
_RFC3339: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:\d\d)"
)
_PREDEFINED: Final = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
_STAR: Final = 1 << 63
_MONTH_NAMES: Final = "jan feb mar apr may jun jul aug sep oct nov dec"
_MONTHS: Final = {n: i + 1 for i, n in enumerate(_MONTH_NAMES.split())}
_DAYS: Final = {n: i for i, n in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
_BOUNDS: Final[tuple[tuple[int, int, dict[str, int] | None], ...]] = (
    (0, 59, None),
    (0, 59, None),
    (0, 23, None),
    (1, 31, None),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)


def go_duration_ns(s: str) -> int | None:
    """Go's ``time.ParseDuration`` in nanoseconds; None when it would fail (no unit, a
    space, an unknown unit)."""
    if not s:
        return None
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or m.group(1) in ("", ".") or m.group(2) not in _UNITS:
            return None
        whole, _, frac = m.group(1).partition(".")
        unit = _UNITS[m.group(2)]
        total += int(whole or "0") * unit
        if frac:
            total += int(frac) * unit // 10 ** len(frac)
        pos = m.end()
    return sign * total


def parse_at(s: str) -> int | None:
    """Go's ``time.Parse(time.RFC3339, s)`` in nanoseconds since the epoch, or None."""
    m = _RFC3339.fullmatch(s)
    if m is None:
        return None
    year, month, day, hour, minute, sec = (int(m.group(i)) for i in range(1, 7))
    if hour > 23 or minute > 59 or sec > 59:
        return None
    zone = m.group(8)
    if zone == "Z":
        offset = 0
    else:
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 24 or om > 59:
            return None
        offset = (oh * 3600 + om * 60) * (-1 if zone[0] == "-" else 1)
    try:
        when = datetime(year, month, day, hour, minute, sec, tzinfo=UTC)
    except ValueError:
        return None
    frac = m.group(7) or ""
    ns = int((frac + "000000000")[:9]) if frac else 0
    return (int(when.timestamp()) - offset) * _SECOND + ns


def load_zone(name: str) -> tzinfo | None:
    """Go's ``time.LoadLocation``: an IANA name, ``UTC`` or ``Local``; None otherwise."""
    if name == "UTC":
        return UTC
    if name == "Local":
        return datetime.now().astimezone().tzinfo
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):
        return None


def _round_second(ns: int) -> int:
    """Go's ``Time.Round(time.Second)``: half up."""
    return (ns + _SECOND // 2) // _SECOND * _SECOND


def next_fire(pattern: str, zone: str | None, ts_ns: int, now_ns: int) -> tuple[int, bool] | None:
    """``parseMsgSchedule``: the next firing of ``pattern`` after ``ts_ns`` (the schedule
    message's time for the first, then the last planned one) and whether it repeats; None
    for a pattern nats-server refuses (10189). A repeating one already past is counted
    from now."""
    if pattern.startswith("@at "):
        if zone is not None:
            return None
        at = parse_at(pattern[4:])
        return None if at is None else (at, False)
    if pattern.startswith("@every "):
        if zone is not None:
            return None
        every = go_duration_ns(pattern[7:])
        if every is None or every < _SECOND:
            return None
        nxt = _round_second(ts_ns) + every
        if nxt < now_ns:
            nxt = _round_second(now_ns) + every
        return nxt, True
    loc: tzinfo = UTC
    if zone is not None:
        z = load_zone(zone)
        if z is None:
            return None
        loc = z
    try:
        nxt = next_cron(pattern, ts_ns, loc)
        if nxt < now_ns:
            nxt = next_cron(pattern, _round_second(now_ns), loc)
    except ValueError:
        return None
    return nxt, True


def format_next(ns: int, zone: str | None) -> str:
    """``Nats-Schedule-Next``: Go's RFC3339Nano in the schedule's zone (``Z`` for UTC)."""
    loc = load_zone(zone) if zone else UTC
    t = datetime.fromtimestamp(ns // _SECOND, tz=loc or UTC)
    frac = ns % _SECOND
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        base += "." + str(_SECOND + frac)[1:].rstrip("0")
    off = t.utcoffset() or timedelta(0)
    if not off:
        return base + "Z"
    mins = int(off.total_seconds()) // 60
    sign = "+" if mins >= 0 else "-"
    mins = abs(mins)
    return f"{base}{sign}{mins // 60:02d}:{mins % 60:02d}"


# ------------------------------------------------------------------------------ cron


def _atoi(s: str) -> int:
    """Go's ``strconv.Atoi`` for a cron number: a sign and ASCII digits, not negative."""
    d = s[1:] if s[:1] in ("+", "-") else s
    if not d or not d.isascii() or not d.isdigit() or int(s) < 0:
        raise ValueError(s)
    return int(s)


def _range(expr: str, lo: int, hi: int, names: dict[str, int] | None) -> int:
    parts = expr.split("/")
    bounds = parts[0].split("-")
    extra = 0
    if bounds[0] in ("*", "?"):
        start, end, extra = lo, hi, _STAR
    else:
        if len(bounds) > 2:
            raise ValueError("too many hyphens")

        def value(x: str) -> int:
            return names[x.lower()] if names and x.lower() in names else _atoi(x)

        start = value(bounds[0])
        end = value(bounds[1]) if len(bounds) == 2 else start
    step = 1
    if len(parts) == 2:
        step = _atoi(parts[1])
        if len(bounds) == 1:
            end = hi  # "N/step" is "N-max/step"
        if step > 1:
            extra = 0  # "*/2" is not a star
    elif len(parts) > 2:
        raise ValueError("too many slashes")
    if start < lo or end > hi or start > end or step == 0:
        raise ValueError(expr)
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _field(text: str, lo: int, hi: int, names: dict[str, int] | None) -> int:
    bits = 0
    for item in text.split(","):
        if item:  # (empty items are ignored)
            bits |= _range(item, lo, hi, names)
    return bits


def _add_month(t: datetime) -> datetime:
    """Go's ``AddDate(0, 1, 0)``: the same day of the next month, normalised (January 31
    is March 3)."""
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    first = t.replace(year=year, month=month, day=1)
    return first + timedelta(days=t.day - 1)


def next_cron(pattern: str, after_ns: int, loc: tzinfo) -> int:
    """robfig/cron's ``SpecSchedule.Next``: the first matching second strictly after
    ``after_ns``, in ``loc``; ValueError for a pattern it refuses or that never matches
    within five years."""
    fields = _PREDEFINED.get(pattern, pattern).split()
    if len(fields) != 6:
        raise ValueError("pattern requires 6 fields")
    sec, mins, hours, dom, month, dow = (
        _field(f, *b) for f, b in zip(fields, _BOUNDS, strict=True)
    )

    def absadd(t: datetime, d: timedelta) -> datetime:
        return (t.astimezone(UTC) + d).astimezone(loc)

    def day_ok(t: datetime) -> bool:
        dm = bool(1 << t.day & dom)
        wm = bool(1 << ((t.weekday() + 1) % 7) & dow)
        return (dm and wm) if (dom & _STAR or dow & _STAR) else (dm or wm)

    t = datetime.fromtimestamp(after_ns // _SECOND, tz=UTC).astimezone(loc)
    t = t + timedelta(seconds=1)
    trunc = False
    limit = t.year + 5
    while True:
        if t.year > limit:
            raise ValueError("pattern exceeds maximum range")
        wrapped = False
        while not (1 << t.month & month):
            if not trunc:
                trunc = True
                t = t.replace(day=1, hour=0, minute=0, second=0)
            t = _add_month(t)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not day_ok(t):
            if not trunc:
                trunc = True
                t = t.replace(hour=0, minute=0, second=0)
            t = t + timedelta(days=1)
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour & hours):
            if not trunc:
                trunc = True
                t = t.replace(minute=0, second=0)
            t = absadd(t, timedelta(hours=1))
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute & mins):
            if not trunc:
                trunc = True
                t = t.replace(second=0)
            t = absadd(t, timedelta(minutes=1))
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.second & sec):
            trunc = True
            t = absadd(t, timedelta(seconds=1))
            if t.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return int(t.timestamp()) * _SECOND
