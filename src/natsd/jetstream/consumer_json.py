"""Typed JSON decoding of consumer API requests with Go's ``encoding/json`` rules.

nats-server decodes ``CreateConsumerRequest``, ``JSApiConsumerGetNextRequest`` and the other
consumer requests into Go structs; the ``invalid JSON: ...`` / ``Bad Request - ...`` texts
clients see come from that decoder. This module decodes a :class:`gojson._Node` tree against a
small schema and raises ``_GoJSONError`` with Go's message (first error wins, object keys
match exactly and then ignoring case, unknown keys are an error only when asked for, as with
``DisallowUnknownFields``).

A schema is a dict ``json name -> (attribute, type)``; types are instances of the classes
below. Values land in a plain dict keyed by attribute name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from natsd.jetstream.gojson import (
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
    _Scanner,
)
from natsd.jetstream.stream_unmarshal import _go_time_error, _normalise_time

__all__ = [
    "BOOL",
    "DURATION",
    "DURATIONS",
    "INT",
    "INT64",
    "MAP",
    "STRING",
    "STRINGS",
    "TIME",
    "UINT64",
    "Enum",
    "Struct",
    "decode_nodes",
    "parse_all",
]


class _Ctx:
    """Where we are in the document, for Go's ``Go struct field X.a.b`` texts."""

    __slots__ = ("index", "parts", "top", "top_go")

    def __init__(self, top: str, top_go: str, parts: tuple[str, ...] = (), index: bool = False):
        self.top = top
        self.top_go = top_go
        self.parts = parts
        self.index = index

    def key(self, name: str) -> _Ctx:
        return _Ctx(self.top, self.top_go, (*self.parts, name), False)

    def elem(self, i: int) -> _Ctx:
        return _Ctx(self.top, self.top_go, (*self.parts, str(i)), True)

    def type_error(self, node: _Node, go: str, numeric: bool = False) -> _GoJSONError:
        what = _KIND_NAMES.get(node.kind, "null")
        if node.kind == _NUM and numeric:
            what = "number " + node.raw
        if not self.parts:
            return _GoJSONError(
                f"json: cannot unmarshal {what} into Go value of type {self.top_go}"
            )
        where = self.top + "." + ".".join(self.parts)
        if self.index:
            return _GoJSONError(f"json: cannot unmarshal {what} into {where} of type {go}")
        return _GoJSONError(
            f"json: cannot unmarshal {what} into Go struct field {where} of type {go}"
        )


class _T:
    go = ""

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        raise NotImplementedError


class _Str(_T):
    go = "string"

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _STR:
            return node.value
        if node.kind == _NULL:
            return cur
        raise ctx.type_error(node, self.go)


class _Bool(_T):
    go = "bool"

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _BOOL:
            return node.value
        if node.kind == _NULL:
            return cur
        raise ctx.type_error(node, self.go)


_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")


class _Int(_T):
    def __init__(self, go: str, lo: int, hi: int) -> None:
        self.go = go
        self.lo = lo
        self.hi = hi

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _NUM:
            lit: str = node.value
            if _INT_RE.fullmatch(lit):
                v = int(lit)
                if self.lo <= v <= self.hi:
                    return v
            raise ctx.type_error(node, self.go, numeric=True)
        if node.kind == _NULL:
            return cur
        raise ctx.type_error(node, self.go)


class _List(_T):
    def __init__(self, elem: _T, go: str, zero: Callable[[], Any]) -> None:
        self.elem = elem
        self.go = go
        self.zero = zero

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _ARR:
            return [self.elem.decode(x, self.zero(), ctx.elem(i)) for i, x in enumerate(node.value)]
        if node.kind == _NULL:
            return []
        raise ctx.type_error(node, self.go)


class _Map(_T):
    go = "map[string]string"

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _OBJ:
            out: dict[str, str] = dict(cur) if cur else {}
            for k, v in node.value:
                out[k] = STRING.decode(v, "", ctx.key(k))
            return out
        if node.kind == _NULL:
            return {}
        raise ctx.type_error(node, self.go)


class _Time(_T):
    """``*time.Time``: RFC 3339 text kept as Go re-encodes it; null clears it."""

    go = "time.Time"

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _NULL:
            return None
        if node.kind != _STR:
            raise ctx.type_error(node, self.go)
        t = _normalise_time(node.value)
        if t is None:
            raise _GoJSONError(_go_time_error(node.value))
        return t


class Enum(_T):
    """A Go type with its own ``UnmarshalJSON`` comparing the raw JSON text."""

    def __init__(self, table: dict[str, Any], error: Callable[[str], str]) -> None:
        self.table = table
        self.error = error

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        v = self.table.get(node.raw)
        if v is None:
            raise _GoJSONError(self.error(node.raw))
        return v


class Struct(_T):
    """A Go struct decoded into a dict of attribute values (missing keys keep defaults)."""

    def __init__(
        self,
        go: str,
        fields: dict[str, tuple[str, _T]],
        strict: bool,
        defaults: Callable[[], dict[str, Any]],
    ) -> None:
        self.go = go
        self.fields = fields
        self.folded = {k.lower(): k for k in fields}
        self.strict = strict
        self.defaults = defaults

    def decode(self, node: _Node, cur: Any, ctx: _Ctx) -> Any:
        if node.kind == _NULL:
            return cur
        if node.kind != _OBJ:
            raise ctx.type_error(node, self.go)
        obj: dict[str, Any] = cur if cur is not None else self.defaults()
        for key, val in node.value:
            name = key if key in self.fields else self.folded.get(key.lower())
            if name is None:
                if self.strict:
                    raise _GoJSONError(f"json: unknown field {_go_quote(key)}")
                continue
            attr, typ = self.fields[name]
            obj[attr] = typ.decode(val, obj.get(attr), ctx.key(name))
        return obj


_I64 = (-(1 << 63), (1 << 63) - 1)
STRING = _Str()
BOOL = _Bool()
INT = _Int("int", *_I64)
INT64 = _Int("int64", *_I64)
UINT64 = _Int("uint64", 0, (1 << 64) - 1)
DURATION = _Int("time.Duration", *_I64)
DURATIONS = _List(DURATION, "[]time.Duration", int)
STRINGS = _List(STRING, "[]string", str)
MAP = _Map()
TIME = _Time()


def decode_nodes(nodes: Iterator[_Node], schema: Struct, top: str) -> dict[str, Any]:
    """Decode every top-level value into one struct, as Go's ``json.Decoder`` loop does
    for a request body (later values overwrite earlier ones)."""
    ctx = _Ctx(top, schema.go)
    out: dict[str, Any] = schema.defaults()
    for node in nodes:
        out = schema.decode(node, out, ctx)
    return out


def parse_all(data: bytes) -> Iterator[_Node]:
    """The top-level JSON values of ``data`` (syntax errors raise ``_GoJSONError``)."""
    sc = _Scanner(data)
    while not sc.at_end():
        yield sc.value()


def parse_one(data: bytes) -> _Node:
    """``json.Unmarshal``: exactly one value (trailing data is a syntax error)."""
    sc = _Scanner(data)
    node = sc.value()
    sc.skip_ws()
    if sc.i < sc.n:
        raise sc._fail(sc.i, "after top-level value")
    return node
