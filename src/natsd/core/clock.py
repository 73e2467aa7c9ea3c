"""Time helpers: nanosecond wall clock and RFC 3339 formatting as nats-server prints it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Final

__all__ = ["format_duration", "now_ns", "parse_duration", "rfc3339"]


def now_ns() -> int:
    return time.time_ns()


class _LastSecond:
    """The last second formatted: messages stored or read together mostly share their
    second, and strftime is most of the cost of a direct get's Nats-Time-Stamp header.
    An instance attribute rather than a ``global``: far cheaper in the mypyc build."""

    def __init__(self) -> None:
        self.secs = -1
        self.base = ""


_LAST: Final = _LastSecond()


def rfc3339(ns: int) -> str:
    """UTC time with nanoseconds, e.g. ``2024-01-02T03:04:05.123456789Z``."""
    secs = ns // 1_000_000_000
    frac = ns - secs * 1_000_000_000
    last = _LAST
    if secs != last.secs:
        last.base = datetime.fromtimestamp(secs, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
        last.secs = secs
    if frac:
        # str(10**9 + frac)[1:] is frac zero-padded to 9 digits, without format()'s cost.
        return last.base + "." + str(1_000_000_000 + frac)[1:].rstrip("0") + "Z"
    return last.base + "Z"


def format_duration(seconds: float) -> str:
    """Go's time.Duration.String() style used by /varz (``1h2m3.5s``, ``250ms``)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ns = round(seconds * 1_000_000_000)
        if ns >= 1_000_000:
            return _trim(f"{ns / 1_000_000:.6f}") + "ms"
        if ns >= 1_000:
            return _trim(f"{ns / 1_000:.3f}") + "µs"
        return f"{ns}ns"
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    out = ""
    if h:
        out += f"{int(h)}h"
    if h or m:
        out += f"{int(m)}m"
    out += _trim(f"{s:.9f}") + "s"
    return out


def _trim(num: str) -> str:
    return num.rstrip("0").rstrip(".") if "." in num else num


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(value: str | float) -> float:
    """Go ``time.ParseDuration`` (``1h30m``, ``250ms``, ``2.5s``) to seconds.

    Plain numbers are seconds, as nats-server reads integers in duration fields.
    """
    if isinstance(value, int | float):
        return float(value)
    s = value.strip()
    if not s:
        raise ValueError("empty duration")
    try:
        return float(s)
    except ValueError:
        pass
    total = 0.0
    i = 0
    sign = 1.0
    if s[0] in "+-":
        sign = -1.0 if s[0] == "-" else 1.0
        i = 1
    while i < len(s):
        j = i
        while j < len(s) and (s[j].isdigit() or s[j] == "."):
            j += 1
        if j == i:
            raise ValueError(f"invalid duration {value!r}")
        num = float(s[i:j])
        k = j
        while k < len(s) and not (s[k].isdigit() or s[k] == "."):
            k += 1
        unit = s[j:k]
        if unit not in _UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {value!r}")
        total += num * _UNITS[unit]
        i = k
    return sign * total
