"""Output for people and scripts: tables, sizes, durations, JSON, errors and prompts.

Sizes and durations are parsed the way the Go ``nats`` CLI parses them (``1GB``, ``256MiB``,
``-1``; ``30s``, ``24h``, ``1d3h``, ``1w``, ``1y``) and printed the way it prints them
(``1.0 GiB``, ``1d2h3m4s``). Tables and progress bars use ``rich``; when stdout is not a
terminal rich prints plain text without colour, with a wide fixed width so scripts and tests see
whole lines.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

__all__ = [
    "CliError",
    "ask",
    "ask_bool",
    "ask_choice",
    "ask_int",
    "confirm",
    "console",
    "err_console",
    "human_bytes",
    "human_count",
    "human_duration",
    "parse_duration",
    "parse_size",
    "print_json",
    "print_section",
    "print_table",
    "progress_bar",
]

NANOS = 1_000_000_000


class CliError(Exception):
    """A failure to report to the user: printed as ``nats: error: <message>``, exit 1."""


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(file=stream, highlight=False, soft_wrap=True)
    return Console(file=stream, width=200, highlight=False, color_system=None, soft_wrap=True)


console = _console(False)
err_console = _console(True)


# --------------------------------------------------------------------------- durations
_DUR_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": NANOS,
    "m": 60 * NANOS,
    "h": 3600 * NANOS,
    "d": 24 * 3600 * NANOS,
    "w": 7 * 24 * 3600 * NANOS,
    "M": 30 * 24 * 3600 * NANOS,
    "y": 365 * 24 * 3600 * NANOS,
}
_DUR_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w|M|y)")


def parse_duration(text: str) -> int:
    """A duration as nanoseconds: Go syntax plus ``d``, ``w``, ``M`` (30d) and ``y`` (365d).

    ``""`` and ``"0"`` are 0; a bare number is seconds.
    """
    s = text.strip()
    if s in ("", "0"):
        return 0
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return int(float(s) * NANOS)
    neg = s.startswith("-")
    if neg:
        s = s[1:]
    pos = 0
    total = 0.0
    for m in _DUR_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DUR_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise CliError(f"invalid duration {text!r} (use e.g. 30s, 5m, 1h30m, 24h, 7d, 1y)")
    return -int(total) if neg else int(total)


def human_duration(nanos: int | float | None) -> str:
    """``1d2h3m4s``, ``2m0s``, ``1.5s``, ``250ms``; 0 is ``0s``."""
    if not nanos:
        return "0s"
    ns = int(nanos)
    if ns < 0:
        return "-" + human_duration(-ns)
    if ns < 1_000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:g}µs"
    if ns < NANOS:
        return f"{ns / 1_000_000:.3g}ms"
    secs = ns / NANOS
    if secs < 60:
        return f"{secs:.2f}".rstrip("0").rstrip(".") + "s"
    whole = round(secs)
    years, whole = divmod(whole, 365 * 86400)
    days, whole = divmod(whole, 86400)
    hours, whole = divmod(whole, 3600)
    minutes, seconds = divmod(whole, 60)
    out = ""
    if years:
        out += f"{years}y"
    if days:
        out += f"{days}d"
    if years or days:
        for v, u in ((hours, "h"), (minutes, "m"), (seconds, "s")):
            if v:
                out += f"{v}{u}"
        return out
    if hours:
        out += f"{hours}h"
    return out + f"{minutes}m{seconds}s"


def human_since(ts: str | None) -> str:
    """How long ago an RFC 3339 timestamp was, as a duration (``"never"`` when unset)."""
    when = parse_time(ts)
    if when is None:
        return "never"
    delta = (datetime.now(UTC) - when).total_seconds()
    return human_duration(max(delta, 0) * NANOS)


def parse_time(ts: str | None) -> datetime | None:
    """An RFC 3339 timestamp from the server (nanosecond precision allowed)."""
    if not ts or ts.startswith("0001-01-01"):
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", ts)
    if not m:
        return None
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    tz = m.group(3) or "Z"
    tz = "+00:00" if tz == "Z" else tz
    try:
        return datetime.fromisoformat(f"{m.group(1)}.{frac}{tz}")
    except ValueError:
        return None


def human_time(ts: str | None) -> str:
    """A server timestamp as local ``YYYY-MM-DD HH:MM:SS`` (empty when unset)."""
    when = parse_time(ts)
    if when is None:
        return ""
    return when.astimezone().strftime("%Y-%m-%d %H:%M:%S")


# --------------------------------------------------------------------------- sizes
_SIZE_MULT: dict[str, int] = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
    "TIB": 1 << 40,
    "P": 1 << 50,
    "PB": 1 << 50,
    "PIB": 1 << 50,
}


def parse_size(text: str) -> int:
    """Bytes from ``1024``, ``512K``, ``1GB``, ``256MiB`` (powers of 1024, as the Go CLI);
    ``""`` and ``-1`` mean unlimited (-1)."""
    s = text.strip()
    if s in ("", "-1"):
        return -1
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", s)
    if not m or m.group(2).upper() not in _SIZE_MULT:
        raise CliError(f"invalid size {text!r} (use e.g. 1024, 512K, 256MiB, 1GB, or -1)")
    return int(float(m.group(1)) * _SIZE_MULT[m.group(2).upper()])


def human_bytes(n: int | float | None) -> str:
    """``0 B``, ``999 B``, ``1.0 KiB``, ``256 MiB``, ``1.5 GiB`` (IEC, like go-humanize)."""
    v = float(n or 0)
    if v < 1024:
        return f"{int(v)} B"
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    e = min(int(math.log(v, 1024)), len(units))
    val = v / (1024**e)
    return f"{val:.1f} {units[e - 1]}" if val < 10 else f"{val:.0f} {units[e - 1]}"


def human_count(n: int | float | None) -> str:
    """``1,234,567``."""
    return f"{int(n or 0):,}"


def limit(v: int | None, fmt: Any = human_count) -> str:
    """A limit value, ``unlimited`` for -1 and 0 where 0 means none."""
    if v is None or v <= 0:
        return "unlimited"
    return str(fmt(v))


# --------------------------------------------------------------------------- printing
def print_json(value: Any) -> None:
    """Indented JSON on stdout (field names as the server sent them)."""
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def print_table(
    title: str | None,
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    right: Iterable[int] = (),
) -> None:
    """A bordered table with a title; columns in ``right`` are right-aligned."""
    table = Table(title=title, title_justify="left", show_lines=False)
    rset = set(right)
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i in rset else "left", overflow="fold")
    for row in rows:
        table.add_row(*(Text(str(c)) for c in row))
    console.print(table)


def print_section(title: str | None, pairs: Sequence[tuple[str, Any]]) -> None:
    """``Key: value`` lines with the colons aligned, the layout of ``nats stream info``."""
    if title:
        console.print(Text(title))
        console.print()
    if not pairs:
        return
    width = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        if k == "":
            console.print()
            continue
        console.print(Text(f"{k.rjust(width + 2)}: {v}"))
    console.print()


def info(message: str) -> None:
    """A status line for people (stderr, so stdout carries only data)."""
    err_console.print(Text(f"{datetime.now().strftime('%H:%M:%S')} {message}"))


def progress_bar(
    total: int | None, description: str, enabled: bool, unit: str = "bytes"
) -> Progress:
    """A progress bar on stderr (``unit`` "bytes" for transfers, "msgs" for counts); it prints
    nothing when not wanted or when stderr is not a terminal."""
    columns: list[Any] = [TextColumn("{task.description}"), BarColumn(), TaskProgressColumn()]
    if unit == "bytes":
        columns += [DownloadColumn(binary_units=True), TransferSpeedColumn()]
    else:
        columns += [MofNCompleteColumn(), TimeElapsedColumn()]
    return Progress(
        *columns,
        TimeRemainingColumn(),
        console=err_console,
        disable=not enabled or not sys.stderr.isatty(),
        transient=False,
    )


# --------------------------------------------------------------------------- prompts
def interactive() -> bool:
    """Prompts are asked only with a terminal on stdin and stdout."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def ask(question: str, default: str, accept_defaults: bool = False) -> str:
    """Ask for a value; the default when ``--defaults`` is given or there is no terminal."""
    if accept_defaults or not interactive():
        return default
    suffix = f" [{default}]" if default else ""
    try:
        answer = input(f"? {question}{suffix}: ").strip()
    except EOFError:
        return default
    return answer or default


def ask_choice(question: str, choices: Iterable[str], default: str, accept_defaults: bool) -> str:
    """``ask`` limited to ``choices``; asks again on a terminal after a wrong answer."""
    valid = list(choices)
    while True:
        answer = ask(f"{question} ({', '.join(valid)})", default, accept_defaults)
        if answer in valid:
            return answer
        if accept_defaults or not interactive():
            raise CliError(f"invalid value {answer!r} for {question} ({', '.join(valid)})")
        err_console.print(f"  please answer one of: {', '.join(valid)}", markup=False)


def ask_int(question: str, default: int, accept_defaults: bool) -> int:
    """``ask`` for an integer; asks again on a terminal after a wrong answer."""
    while True:
        answer = ask(question, str(default), accept_defaults)
        try:
            return int(answer)
        except ValueError:
            if accept_defaults or not interactive():
                raise CliError(f"invalid number {answer!r} for {question}") from None
            err_console.print("  please answer with a number", markup=False)


def confirm(question: str, force: bool) -> bool:
    """A destructive action: ``-f/--force`` skips the question; without a terminal it must."""
    if force:
        return True
    if not interactive():
        raise CliError(f"{question}? pass -f/--force to confirm without a terminal")
    return ask_bool(question, False)


def ask_bool(question: str, default: bool, accept_defaults: bool = False) -> bool:
    """A yes/no question; the default without a terminal."""
    if accept_defaults or not interactive():
        return default
    hint = "Y/n" if default else "y/N"
    try:
        answer = input(f"? {question} ({hint}) ").strip().lower()
    except EOFError:
        return default
    if not answer:
        return default
    return answer in ("y", "yes")
