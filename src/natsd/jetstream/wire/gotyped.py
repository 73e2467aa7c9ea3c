"""Typed decoding of JetStream API requests with the rules of Go's ``encoding/json``.

nats-server decodes every request body into a Go struct, and clients see the errors of that
decoder verbatim (``invalid JSON: json: cannot unmarshal number -3 into Go struct field
JSApiMsgDeleteRequest.seq of type uint64``). This module decodes a :mod:`gojson` node tree
against a schema made of the type descriptors below and raises ``_GoJSONError`` with Go's
text: object keys match a field exactly and then ignoring case, the first error wins, unknown
keys are an error for a strict struct (``DisallowUnknownFields``) and ignored otherwise, and
``null`` leaves a value where it is (a pointer becomes nil).

A struct schema is ``{json name: (attribute, type)}``; the struct fills whatever its factory
makes: a dict (small requests) or an object such as a dataclass (stream configs).

How nats-server reads a body decides which entry point to use:

- :func:`decode_request`: ``json.Decoder`` in a loop (``unmarshalRequest``): each top-level
  value in turn decodes into the same struct, syntax errors carry `` at offset N``;
- :func:`unmarshal`: ``json.Unmarshal``: exactly one value, syntax errors without an offset
  and ``unexpected end of JSON input`` for a truncated body;
- :func:`is_empty_request` / :func:`is_json_object_or_array`: the checks some handlers make
  before (or instead of) decoding.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.gojson import (
    _ARR,
    _BOOL,
    _KIND_NAMES,
    _NULL,
    _NUM,
    _OBJ,
    _STR,
    _go_quote,
    _GoJSONError,
    _Node,
    parse_all,
    parse_one,
)

__all__ = [
    "BOOL",
    "DURATION",
    "DURATIONS",
    "INT",
    "INT32",
    "INT64",
    "MAP",
    "STRING",
    "STRINGS",
    "TIME",
    "UINT64",
    "BoolT",
    "EnumT",
    "GoType",
    "IntT",
    "ListT",
    "MapT",
    "Path",
    "StrT",
    "StructT",
    "TimeT",
    "decode_nodes",
    "decode_request",
    "go_time_ns",
    "is_empty_request",
    "is_json_object_or_array",
    "parse_all",
    "parse_one",
    "raw_enum",
    "unmarshal",
]


class Path:
    """Where a value sits in the request, for Go's error texts. Go names the top-level type
    in every field error (``Go struct field StreamConfigRequest.sources.0.external.api``),
    not the struct the field belongs to, so the path carries it."""

    __slots__ = ("index", "parts", "top_go")

    def __init__(self, top_go: str, parts: tuple[str, ...] = (), index: bool = False) -> None:
        self.top_go = top_go  # "server.StreamConfigRequest"
        self.parts = parts
        self.index = index  # the last part is an array index

    def key(self, name: str) -> Path:
        return Path(self.top_go, (*self.parts, name), False)

    def elem(self, i: int) -> Path:
        return Path(self.top_go, (*self.parts, str(i)), True)

    def type_error(self, node: _Node, go: str, numeric: bool = False) -> _GoJSONError:
        what = _KIND_NAMES.get(node.kind, "null")
        if node.kind == _NUM and numeric:
            # A number that does not fit names itself; a number for a string does not.
            what = "number " + node.raw
        if not self.parts:
            return _GoJSONError(
                f"json: cannot unmarshal {what} into Go value of type {self.top_go}"
            )
        where = self.top_go.rpartition(".")[2] + "." + ".".join(self.parts)
        if self.index:
            return _GoJSONError(f"json: cannot unmarshal {what} into {where} of type {go}")
        return _GoJSONError(
            f"json: cannot unmarshal {what} into Go struct field {where} of type {go}"
        )


class GoType:
    go = ""

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        """The value ``node`` gives a Go variable of this type that holds ``cur``."""
        raise NotImplementedError


class StrT(GoType):
    go = "string"

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _STR:
            return node.value
        if node.kind == _NULL:
            return cur
        raise path.type_error(node, self.go)


class BoolT(GoType):
    go = "bool"

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _BOOL:
            return node.value
        if node.kind == _NULL:
            return cur
        raise path.type_error(node, self.go)


_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")


class IntT(GoType):
    """A Go integer type: an integer literal in [lo, hi] (``1.0`` and ``1e2`` do not fit)."""

    def __init__(self, go: str, lo: int, hi: int) -> None:
        self.go = go
        self.lo = lo
        self.hi = hi

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _NUM:
            lit: str = node.value
            if _INT_RE.fullmatch(lit):
                v = int(lit)
                if self.lo <= v <= self.hi:
                    return v
            raise path.type_error(node, self.go, numeric=True)
        if node.kind == _NULL:
            return cur
        raise path.type_error(node, self.go)


class ListT(GoType):
    """A Go slice; ``zero`` makes the element a new slot starts from."""

    def __init__(self, elem: GoType, go: str, zero: Callable[[], Any]) -> None:
        self.elem = elem
        self.go = go
        self.zero = zero

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _ARR:
            return [
                self.elem.decode(x, self.zero(), path.elem(i)) for i, x in enumerate(node.value)
            ]
        if node.kind == _NULL:
            return []
        raise path.type_error(node, self.go)


class MapT(GoType):
    """``map[string]string``: a second object adds to the map rather than replacing it."""

    go = "map[string]string"

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _OBJ:
            out: dict[str, str] = dict(cur) if cur else {}
            for k, v in node.value:
                out[k] = STRING.decode(v, "", path.key(k))
            return out
        if node.kind == _NULL:
            return {}
        raise path.type_error(node, self.go)


class EnumT(GoType):
    """A Go type with its own ``UnmarshalJSON``: ``parse`` gets the node and returns the
    value or raises ``_GoJSONError`` with that method's text."""

    def __init__(self, parse: Callable[[_Node], Any]) -> None:
        self.parse = parse

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        return self.parse(node)


def _cannot_unmarshal(raw: str) -> str:
    return f"can not unmarshal {_go_quote(raw)}"


def raw_enum(
    table: dict[str, Any], error: Callable[[str], str] = _cannot_unmarshal, lower: bool = False
) -> EnumT:
    """An ``UnmarshalJSON`` that looks the raw JSON text (quotes included, lower-cased when
    ``lower``) up in ``table``; ``error(raw)`` is the text for anything else."""

    def parse(node: _Node) -> Any:
        v = table.get(node.raw.lower() if lower else node.raw)
        if v is None:
            raise _GoJSONError(error(node.raw))
        return v

    return EnumT(parse)


def _fold_rune(c: str) -> str:
    low = c.lower()
    up = low.upper() if len(low) == 1 else c
    return up if len(up) == 1 else c  # Go maps rune to rune; Python may not ("ß" -> "SS")


def fold_name(name: str) -> str:
    """Go's ``foldName``: keys match a field "ignoring case" when these are equal, with
    Unicode's simple folding (a key spelt with U+017F, the long s, finds ``subject``; the
    Kelvin sign finds ``k``)."""
    if name.isascii():
        return name.upper()
    return "".join(_fold_rune(c) for c in name)


class StructT(GoType):
    """A Go struct. Fields go into the dict or object ``factory`` makes (or the one already
    there); a missing key keeps what the target holds. ``strict``: unknown keys are an error
    (``DisallowUnknownFields``). ``nullable``: a pointer, which ``null`` sets to nil."""

    def __init__(
        self,
        go: str,
        fields: dict[str, tuple[str, GoType]],
        factory: Callable[[], Any],
        *,
        strict: bool = True,
        nullable: bool = False,
    ) -> None:
        self.go = go
        self.fields = fields
        self.folded = {fold_name(k): k for k in fields}
        self.factory = factory
        self.strict = strict
        self.nullable = nullable

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _NULL:
            return None if self.nullable else cur
        if node.kind != _OBJ:
            raise path.type_error(node, self.go)
        obj = cur if cur is not None else self.factory()
        as_dict = isinstance(obj, dict)
        for key, val in node.value:
            name = key if key in self.fields else self.folded.get(fold_name(key))
            if name is None:
                if self.strict:
                    raise _GoJSONError(f"json: unknown field {_go_quote(key)}")
                continue
            attr, typ = self.fields[name]
            if as_dict:
                obj[attr] = typ.decode(val, obj.get(attr), path.key(name))
            else:
                setattr(obj, attr, typ.decode(val, getattr(obj, attr), path.key(name)))
        return obj


# ---------------------------------------------------------------------- time.Time
_RFC3339 = "2006-01-02T15:04:05Z07:00"
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# time.Parse(time.RFC3339, s) reads the layout element by element: (element, what matches
# it, the range check Go makes as soon as it has read it). The hour may have one digit, the
# fraction may follow a comma; the day is checked against its month only at the end.
_TIME_STEPS: tuple[tuple[str, re.Pattern[str], tuple[str, int, int] | None], ...] = tuple(
    (elem, re.compile(pat), rng)
    for elem, pat, rng in (
        ("2006", r"\d{4}", None),
        ("-", "-", None),
        ("01", r"\d{2}", ("month", 1, 12)),
        ("-", "-", None),
        ("02", r"\d{2}", None),
        ("T", "T", None),
        ("15", r"\d\d?", ("hour", 0, 23)),
        (":", ":", None),
        ("04", r"\d{2}", ("minute", 0, 59)),
        (":", ":", None),
        ("05", r"\d{2}(?:[.,]\d+)?", ("second", 0, 59)),
        ("Z07:00", r"Z|[+-]\d{2}:\d{2}", None),
    )
)


class _Time:
    __slots__ = ("day", "hour", "minute", "month", "nanos", "offset", "second", "year")

    def __init__(self, parts: list[int], nanos: int, offset: int) -> None:
        self.year, self.month, self.day, self.hour, self.minute, self.second = parts
        self.nanos = nanos
        self.offset = offset  # seconds east of UTC


def _parse_time(s: str) -> _Time:
    """``time.Parse(time.RFC3339, s)``, or ``_GoJSONError`` with its text."""
    head = f"parsing time {_go_quote(s)}"
    got: list[str] = []
    rest = s
    for elem, pat, rng in _TIME_STEPS:
        m = pat.match(rest)
        if m is None:
            raise _GoJSONError(
                f"{head} as {_go_quote(_RFC3339)}: cannot parse {_go_quote(rest)} as "
                f"{_go_quote(elem)}"
            )
        rest = rest[m.end() :]
        got.append(m.group())
        if rng is not None and not rng[1] <= int(m.group()[:2]) <= rng[2]:
            raise _GoJSONError(f"{head}: {rng[0]} out of range")
    zone = got[11]
    offset = 0
    if zone != "Z":
        hh, mm = int(zone[1:3]), int(zone[4:6])
        # Go lets offsets of 24 hours and of 60 minutes through; the minute wins the error.
        if mm > 60:
            raise _GoJSONError(f"{head}: time zone offset minute out of range")
        if hh > 24:
            raise _GoJSONError(f"{head}: time zone offset hour out of range")
        offset = (hh * 3600 + mm * 60) * (-1 if zone[0] == "-" else 1)
    if rest:
        raise _GoJSONError(f"{head}: extra text: {_go_quote(rest)}")
    sec, frac = got[10][:2], got[10][3:]
    t = _Time([int(x) for x in (*got[0:9:2], sec)], int((frac + "000000000")[:9]), offset)
    leap = t.year % 4 == 0 and (t.year % 100 != 0 or t.year % 400 == 0)
    if not 1 <= t.day <= _MONTH_DAYS[t.month - 1] + (t.month == 2 and leap):
        raise _GoJSONError(f"{head}: day out of range")
    return t


def normalise_time(s: str) -> str:
    """RFC 3339 text as Go re-encodes the ``time.Time`` it parses from ``s`` (two-digit
    hour, at most nine fractional digits without trailing zeros, the zone as its offset:
    ``Z`` for zero); ``_GoJSONError`` with ``time.Parse``'s text if it does not parse."""
    t = _parse_time(s)
    frac = f"{t.nanos:09d}".rstrip("0")
    if t.offset:
        minutes = abs(t.offset) // 60
        zone = f"{'-' if t.offset < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}"
    else:
        zone = "Z"
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        + ("." + frac if frac else "")
        + zone
    )


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def go_time_ns(s: str) -> int:
    """``t.UnixNano()`` of the time ``s`` parses to. Go computes it in int64 and lets it wrap,
    so a time past 2262 (or before 1678) becomes some other instant, which is what nats-server
    then compares stored timestamps with."""
    t = _parse_time(s)
    days = _days_from_civil(t.year, t.month, t.day)
    secs = days * 86400 + t.hour * 3600 + t.minute * 60 + t.second - t.offset
    ns = secs * 1_000_000_000 + t.nanos
    return (ns + (1 << 63)) % (1 << 64) - (1 << 63)


class TimeT(GoType):
    """``*time.Time``: RFC 3339 text, kept as Go re-encodes it; null clears it."""

    go = "time.Time"

    def decode(self, node: _Node, cur: Any, path: Path) -> Any:
        if node.kind == _NULL:
            return None
        if node.kind != _STR:
            raise path.type_error(node, self.go)
        return normalise_time(node.value)


_I64 = (-(1 << 63), (1 << 63) - 1)
STRING = StrT()
BOOL = BoolT()
INT = IntT("int", *_I64)
INT32 = IntT("int32", -(1 << 31), (1 << 31) - 1)
INT64 = IntT("int64", *_I64)
UINT64 = IntT("uint64", 0, (1 << 64) - 1)
DURATION = IntT("time.Duration", *_I64)
DURATIONS = ListT(DURATION, "[]time.Duration", int)
STRINGS = ListT(STRING, "[]string", str)
MAP = MapT()
TIME = TimeT()


# ---------------------------------------------------------------------- entry points
def decode_nodes(nodes: Iterator[_Node], schema: StructT, into: Any = None) -> Any:
    """Decode every top-level value into one struct (``into``, or a new one), as Go's
    ``json.Decoder`` loop does for a request body: later values overwrite earlier ones."""
    path = Path(schema.go)
    out = into if into is not None else schema.factory()
    for node in nodes:
        out = schema.decode(node, out, path)
    return out


def decode_request(data: bytes, schema: StructT) -> Any:
    """nats-server's ``unmarshalRequest``: a ``json.Decoder`` with ``DisallowUnknownFields``
    (when ``schema`` is strict) over the whole body; an empty body is the zero struct.
    Errors are ``JSInvalidJSONErr`` with Go's text."""
    try:
        return decode_nodes(parse_all(data), schema)
    except _GoJSONError as e:
        raise E.JSInvalidJSONErr(err=str(e)) from None


_OFFSET = re.compile(r" at offset \d+$")


def unmarshal(data: bytes, schema: StructT) -> Any:
    """``json.Unmarshal``: exactly one value. Its syntax errors name no offset, and a
    truncated body is ``unexpected end of JSON input``."""
    try:
        return decode_nodes(iter([parse_one(data)]), schema)
    except _GoJSONError as e:
        text = _OFFSET.sub("", str(e))
        if text == "unexpected EOF":
            text = "unexpected end of JSON input"
        raise _GoJSONError(text) from None


def is_empty_request(data: bytes) -> bool:
    """``isEmptyRequest``: no body at all, or one JSON value that is an empty object
    (``null``, ``[]`` and white space alone are not empty)."""
    if not data:
        return True
    try:
        node = parse_one(data)
    except _GoJSONError:
        return False
    return node.kind == _OBJ and not node.value


def is_json_object_or_array(data: bytes) -> bool:
    """``isJSONObjectOrArray``: handlers with an optional body decode it only if it starts
    (after white space) with ``{`` or ``[``; anything else counts as no body."""
    return data.lstrip(b" \t\r\n")[:1] in (b"{", b"[")
