"""A port of Go's encoding/json scanner as nats-server uses it, so 'invalid JSON: ...'
error texts match nats-server's exactly.

The scanner turns a body into ``_Node`` trees (:func:`parse_all`, :func:`parse_one`);
:mod:`gotyped` decodes those into Go structs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from natsd.jetstream.wire.errors import (
    JSInvalidJSONErr,
)


class _GoJSONError(Exception):
    """A Go ``encoding/json`` error text (nats-server prefixes it with "invalid JSON: ")."""


_OBJ, _ARR, _STR, _NUM, _BOOL, _NULL = range(6)
_KIND_NAMES = {_OBJ: "object", _ARR: "array", _STR: "string", _NUM: "number", _BOOL: "bool"}


class _Node:
    """A decoded JSON value that remembers its kind and raw text (Go unmarshalers need it).

    Objects keep their members as an ordered list of (key, node) so that duplicate keys and
    case-insensitive matching behave as in Go.
    """

    __slots__ = ("kind", "raw", "value")

    def __init__(self, kind: int, value: Any, raw: str) -> None:
        self.kind = kind
        self.value = value
        self.raw = raw


def _go_quote_rune(ch: str) -> str:
    """The inside of Go's ``strconv.Quote`` for one rune (``\\t``, ``\\x00``, ``\\ufeff``)."""
    simple = {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
    if ch in simple:
        return simple[ch]
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if ch.isprintable() or ch == " ":
        return ch
    if o < 0x20 or o == 0x7F:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def _go_quote(s: str) -> str:
    """Go's ``%q`` of a string."""
    return '"' + "".join(_go_quote_rune(c) for c in s) + '"'


def _go_quote_char(ch: str) -> str:
    """Go's ``quoteChar`` used in syntax errors: ``'x'``, ``'\\t'``, ``'"'``."""
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    return "'" + _go_quote_rune(ch) + "'"


_HEX = frozenset(b"0123456789abcdefABCDEF")
_DIGITS = frozenset(b"0123456789")
_SIMPLE_ESC = {
    ord('"'): '"',
    ord("\\"): "\\",
    ord("/"): "/",
    ord("b"): "\b",
    ord("f"): "\f",
    ord("n"): "\n",
    ord("r"): "\r",
    ord("t"): "\t",
}
_MAX_DEPTH = 256


class _Scanner:
    """Go-compatible JSON syntax check + parse, one top-level value at a time."""

    def __init__(self, data: bytes) -> None:
        self.b = data
        self.n = len(data)
        self.i = 0

    # -- errors
    def _rune_at(self, i: int) -> tuple[str, int]:
        for size in (1, 2, 3, 4):
            chunk = self.b[i : i + size]
            try:
                return chunk.decode("utf-8"), len(chunk)
            except UnicodeDecodeError:
                continue
        return chr(0xDC00 + self.b[i]), 1

    def _fail(self, i: int, context: str) -> _GoJSONError:
        ch, size = self._rune_at(i)
        return _GoJSONError(
            f"invalid character {_go_quote_char(ch)} {context} at offset {i + size}"
        )

    @staticmethod
    def _eof() -> _GoJSONError:
        return _GoJSONError("unexpected EOF")

    # -- scanning
    def skip_ws(self) -> None:
        b, n, i = self.b, self.n, self.i
        while i < n and b[i] in (0x20, 0x09, 0x0A, 0x0D):
            i += 1
        self.i = i

    def at_end(self) -> bool:
        self.skip_ws()
        return self.i >= self.n

    def value(self, depth: int = 0) -> _Node:
        self.skip_ws()
        if self.i >= self.n:
            raise self._eof()
        if depth > _MAX_DEPTH:
            raise _GoJSONError("exceeded max depth")
        c = self.b[self.i]
        if c == 0x7B:  # {
            return self._object(depth)
        if c == 0x5B:  # [
            return self._array(depth)
        if c == 0x22:  # "
            start = self.i
            s = self._string()
            return _Node(_STR, s, self._raw(start))
        if c == 0x2D or c in _DIGITS:
            return self._number()
        if c == 0x74:
            return self._literal(b"true", _BOOL, True)
        if c == 0x66:
            return self._literal(b"false", _BOOL, False)
        if c == 0x6E:
            return self._literal(b"null", _NULL, None)
        raise self._fail(self.i, "looking for beginning of value")

    def _raw(self, start: int) -> str:
        return self.b[start : self.i].decode("utf-8", errors="replace")

    def _object(self, depth: int) -> _Node:
        start = self.i
        self.i += 1
        members: list[tuple[str, _Node]] = []
        self.skip_ws()
        if self.i >= self.n:
            raise self._eof()
        if self.b[self.i] == 0x7D:
            self.i += 1
            return _Node(_OBJ, members, self._raw(start))
        while True:
            self.skip_ws()
            if self.i >= self.n:
                raise self._eof()
            if self.b[self.i] != 0x22:
                raise self._fail(self.i, "looking for beginning of object key string")
            key = self._string()
            self.skip_ws()
            if self.i >= self.n:
                raise self._eof()
            if self.b[self.i] != 0x3A:
                raise self._fail(self.i, "after object key")
            self.i += 1
            members.append((key, self.value(depth + 1)))
            self.skip_ws()
            if self.i >= self.n:
                raise self._eof()
            c = self.b[self.i]
            if c == 0x2C:
                self.i += 1
                continue
            if c == 0x7D:
                self.i += 1
                return _Node(_OBJ, members, self._raw(start))
            raise self._fail(self.i, "after object key:value pair")

    def _array(self, depth: int) -> _Node:
        start = self.i
        self.i += 1
        items: list[_Node] = []
        self.skip_ws()
        if self.i >= self.n:
            raise self._eof()
        if self.b[self.i] == 0x5D:
            self.i += 1
            return _Node(_ARR, items, self._raw(start))
        while True:
            items.append(self.value(depth + 1))
            self.skip_ws()
            if self.i >= self.n:
                raise self._eof()
            c = self.b[self.i]
            if c == 0x2C:
                self.i += 1
                continue
            if c == 0x5D:
                self.i += 1
                return _Node(_ARR, items, self._raw(start))
            raise self._fail(self.i, "after array element")

    def _string(self) -> str:
        b, n = self.b, self.n
        i = self.i + 1
        out: list[str] = []
        run = i
        while True:
            if i >= n:
                raise self._eof()
            c = b[i]
            if c == 0x22:
                out.append(b[run:i].decode("utf-8", errors="replace"))
                self.i = i + 1
                return "".join(out)
            if c == 0x5C:
                out.append(b[run:i].decode("utf-8", errors="replace"))
                if i + 1 >= n:
                    raise self._eof()
                e = b[i + 1]
                if e in _SIMPLE_ESC:
                    out.append(_SIMPLE_ESC[e])
                    i += 2
                elif e == 0x75:  # \uXXXX
                    cp, i = self._unicode_escape(i)
                    if 0xD800 <= cp < 0xDC00:
                        # A high surrogate needs a low one right after it.
                        if (
                            i + 6 <= n
                            and b[i] == 0x5C
                            and b[i + 1] == 0x75
                            and all(x in _HEX for x in b[i + 2 : i + 6])
                        ):
                            low = int(b[i + 2 : i + 6], 16)
                            if 0xDC00 <= low < 0xE000:
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                                i += 6
                            else:
                                cp = 0xFFFD
                        else:
                            cp = 0xFFFD
                    elif 0xDC00 <= cp < 0xE000:
                        cp = 0xFFFD
                    out.append(chr(cp))
                else:
                    seq = b[i : i + 2].decode("utf-8", errors="replace")
                    raise _GoJSONError(
                        f"invalid escape sequence `{seq}` in string at offset {i + 2}"
                    )
                run = i
                continue
            if c < 0x20:
                raise self._fail(i, "in string")
            i += 1

    def _unicode_escape(self, i: int) -> tuple[int, int]:
        b = self.b
        if i + 6 > self.n:
            raise self._eof()
        digits = b[i + 2 : i + 6]
        if not all(x in _HEX for x in digits):
            seq = b[i : i + 6].decode("utf-8", errors="replace")
            raise _GoJSONError(f"invalid escape sequence `{seq}` in string at offset {i + 6}")
        return int(digits, 16), i + 6

    def _number(self) -> _Node:
        b, n = self.b, self.n
        start = i = self.i
        if b[i] == 0x2D:
            i += 1
            if i >= n:
                raise self._eof()
            if b[i] not in _DIGITS:
                raise self._fail(i, "in numeric literal")
        if b[i] == 0x30:
            i += 1
        else:
            while i < n and b[i] in _DIGITS:
                i += 1
        if i < n and b[i] == 0x2E:
            i += 1
            if i >= n:
                raise self._eof()
            if b[i] not in _DIGITS:
                raise self._fail(i, "in numeric literal")
            while i < n and b[i] in _DIGITS:
                i += 1
        if i < n and b[i] in (0x65, 0x45):
            i += 1
            if i >= n:
                raise self._eof()
            if b[i] in (0x2B, 0x2D):
                i += 1
                if i >= n:
                    raise self._eof()
            if b[i] not in _DIGITS:
                raise self._fail(i, "in numeric literal")
            while i < n and b[i] in _DIGITS:
                i += 1
        self.i = i
        lit = b[start:i].decode()
        return _Node(_NUM, lit, lit)

    def _literal(self, word: bytes, kind: int, value: Any) -> _Node:
        i = self.i
        for k in range(1, len(word)):
            if i + k >= self.n:
                raise self._eof()
            if self.b[i + k] != word[k]:
                raise self._fail(i + k, f"in literal {word.decode()} (expecting {chr(word[k])!r})")
        self.i = i + len(word)
        return _Node(kind, value, word.decode())


def parse_all(data: bytes) -> Iterator[_Node]:
    """The top-level JSON values of ``data`` in turn, each checked for syntax before it is
    returned (as ``json.Decoder`` reads them); errors raise ``_GoJSONError``."""
    sc = _Scanner(data)
    while not sc.at_end():
        yield sc.value()


def parse_one(data: bytes) -> _Node:
    """``json.Unmarshal``'s view of ``data``: exactly one value (trailing data is a syntax
    error)."""
    sc = _Scanner(data)
    node = sc.value()
    sc.skip_ws()
    if sc.i < sc.n:
        raise sc._fail(sc.i, "after top-level value")
    return node


def _node_from_py(v: Any) -> _Node:
    """A ``_Node`` tree for an already-decoded Python value (dicts from orjson/json)."""
    if v is None:
        return _Node(_NULL, None, "null")
    if v is True or v is False:
        return _Node(_BOOL, v, "true" if v else "false")
    if isinstance(v, int):
        return _Node(_NUM, str(v), str(v))
    if isinstance(v, float):
        lit = json.dumps(v)
        return _Node(_NUM, lit, lit)
    if isinstance(v, str):
        return _Node(_STR, v, json.dumps(v, ensure_ascii=False))
    if isinstance(v, dict):
        members = [(str(k), _node_from_py(x)) for k, x in v.items()]
        return _Node(_OBJ, members, _py_raw(v))
    if isinstance(v, list | tuple):
        return _Node(_ARR, [_node_from_py(x) for x in v], _py_raw(v))
    s = str(v)
    return _Node(_STR, s, json.dumps(s, ensure_ascii=False))


def _py_raw(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(v)


def decode_go_json(data: bytes) -> Iterator[Any]:
    """Parse ``data`` like Go's ``json.Decoder`` reads a request: the top-level values in
    turn, each checked for syntax before it is returned. Raises ``ApiError``
    (``JSInvalidJSONErr``) with Go's message. Values come back as plain Python objects."""
    try:
        for node in parse_all(data):
            yield _to_py(node)
    except _GoJSONError as e:
        raise JSInvalidJSONErr(err=str(e)) from None


def _to_py(node: _Node) -> Any:
    if node.kind == _OBJ:
        return {k: _to_py(v) for k, v in node.value}
    if node.kind == _ARR:
        return [_to_py(v) for v in node.value]
    if node.kind == _NUM:
        lit: str = node.value
        try:
            return int(lit)
        except ValueError:
            return float(lit)
    return node.value
