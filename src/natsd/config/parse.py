"""Parser for the nats-server configuration file format.

The grammar follows nats-server's ``conf/lex.go`` and ``conf/parse.go`` (v2.10+), which is a
hand-written state machine rather than a formal grammar, so this module mirrors its states
with a small recursive-descent parser:

* ``key = value``, ``key: value`` or ``key value``; keys may be quoted; values end at a new
  line, ``;`` or ``,``. ``#`` and ``//`` start comments.
* maps ``{ ... }``, arrays ``[ ... ]``, double-quoted strings with escapes, raw single-quoted
  strings, raw block strings ``( ... )`` closed by a ``)`` alone on its own line, and unquoted
  strings (``host: 0.0.0.0``, ``max_age: 24h``).
* integers with size suffixes (``k`` = 1000, ``kb``/``ki``/``kib`` = 1024, likewise m, g, t,
  p, e), floats, booleans (true/false/yes/no/on/off), Zulu datetimes.
* ``$NAME`` variables (innermost map scope outward, then the environment) and
  ``include path`` relative to the including file.

Deliberate differences from nats-server, all accepting input nats-server rejects or mangles:
``\\uXXXX`` escapes are accepted; ``]`` ends a number (nats-server lexes ``[1, 2]`` as the
string ``"2]"`` and fails); CRLF line endings may close a block string; a key without a value
and an unknown size suffix are errors rather than silently dropped keys.
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ConfMap", "ConfigError", "parse", "parse_file"]


class ConfigError(Exception):
    """A configuration file could not be read or parsed."""

    def __init__(self, message: str, filename: str = "<string>", line: int = 0) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        where = f"{filename}:{line}" if line else filename
        super().__init__(f"{where}: {message}")


_WS = (" ", "\t")
_NL = ("\n", "\r")
_DIGITS = "0123456789"
_HEX = "0123456789abcdefABCDEF"
# Characters that end an unquoted string (lex.go lexString).
_UNQUOTED_END = "\n\r;,]} \t"
# Characters that end a number. nats-server omits ']' here, which turns the last element of
# `[1, 2]` into the string "2]"; we end the number instead.
_NUMBER_END = "\n\r;,]} \t"
_NL_RE = re.compile(r"[\n\r]")

_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}

# Decimal suffixes are powers of 1000, "b"/"i"/"ib" ones powers of 1024 (parse.go).
_SIZE_SUFFIXES: dict[str, int] = {"": 1}
for _exp, _letter in enumerate("kmgtpe", start=1):
    _SIZE_SUFFIXES[_letter] = 1000**_exp
    for _tail in ("b", "i", "ib"):
        _SIZE_SUFFIXES[_letter + _tail] = 1024**_exp

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
_DATETIME_SHAPE = "-00-00T00:00:00Z"  # after "YYYY"; '0' stands for any digit


def parse(
    text: str, *, filename: str = "<string>", env: Mapping[str, str] | None = None
) -> ConfMap:
    """Parse configuration text into maps (:class:`ConfMap`, a dict), lists, str, int, float
    and bool.

    ``filename`` is used in error messages and as the base for relative ``include`` paths
    (a name without a directory, such as the default, resolves includes against the current
    directory, as nats-server does for in-memory configs). ``env`` supplies the variables
    that are not defined in the file; it defaults to ``os.environ``.
    """
    return _Parser(text, filename, os.environ if env is None else env, ()).parse()


def parse_file(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> ConfMap:
    """Read and parse a configuration file; includes resolve relative to its directory."""
    name = os.fspath(path)
    text = _read_text(name, "error opening config file")
    chain = (os.path.realpath(name),)
    return _Parser(text, name, os.environ if env is None else env, chain).parse()


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{what}: {e}", path) from e


class ConfMap(dict[str, Any]):
    """A parsed map: a plain dict that also remembers where each key was written and which
    keys other values referenced as ``$variables``. nats-server skips such keys when it
    checks for unknown fields (``IsUsedVariable``), and error messages name the line."""

    __slots__ = ("positions", "used")

    def __init__(self) -> None:
        super().__init__()
        self.positions: dict[str, tuple[str, int]] = {}
        self.used: set[str] = set()


class _Parser:
    def __init__(
        self,
        text: str,
        filename: str,
        env: Mapping[str, str],
        chain: tuple[str, ...],
        resolving: frozenset[str] = frozenset(),
    ) -> None:
        self.text = text
        self.n = len(text)
        self.pos = 0
        self.filename = filename
        self.env = env
        # Real paths of the files being included, to refuse include cycles (which make
        # nats-server recurse until it crashes).
        self.chain = chain
        # Environment variables being expanded, so `A=$A` fails instead of recursing.
        self.resolving = resolving
        # Maps under construction, outermost first: the variable lookup scopes.
        self.scopes: list[dict[str, Any]] = []
        # (position, line) of the last line lookup: keys are met in order, so counting new
        # lines from there keeps positions linear in the file size.
        self._line_at = (0, 1)

    # -- helpers ---------------------------------------------------------------------------

    def _peek(self) -> str:
        """The current character, or "" at the end of input (never test `"" in "..."`)."""
        return self.text[self.pos] if self.pos < self.n else ""

    def _line(self, pos: int | None = None) -> int:
        pos = self.pos if pos is None else pos
        last_pos, last_line = self._line_at
        if pos >= last_pos:
            line = last_line + self.text.count("\n", last_pos, pos)
            self._line_at = (pos, line)
            return line
        return self.text.count("\n", 0, pos) + 1

    def _error(self, message: str, pos: int | None = None) -> ConfigError:
        return ConfigError(message, self.filename, self._line(pos))

    def _skip_ws(self) -> None:
        while self._peek() in _WS:
            self.pos += 1

    def _skip_space(self) -> None:
        while self.pos < self.n and self.text[self.pos].isspace():
            self.pos += 1

    def _at_comment(self) -> bool:
        return self._peek() == "#" or self.text.startswith("//", self.pos)

    def _skip_comment(self) -> None:
        """Skip to the end of the line, leaving the new line for the caller."""
        m = _NL_RE.search(self.text, self.pos)
        self.pos = m.start() if m else self.n

    def _digits(self) -> None:
        while (c := self._peek()) and c in _DIGITS:
            self.pos += 1

    # -- structure -------------------------------------------------------------------------

    def parse(self) -> ConfMap:
        top = ConfMap()
        self.scopes.append(top)
        self._body(top, top_level=True, closed=False, open_pos=0)
        return top

    def _body(
        self, target: dict[str, Any], *, top_level: bool, closed: bool, open_pos: int
    ) -> None:
        """Parse key/value pairs into ``target``.

        ``top_level`` selects the top-level lexing rules (no new line between a separator and
        its value); ``closed`` means the body ends with ``}`` (a map, or a whole top-level
        config wrapped in braces JSON-style) rather than at the end of input.
        """
        while True:
            self._skip_space()
            if self._at_comment():
                self._skip_comment()
                continue
            c = self._peek()
            if not c:
                if closed:
                    raise self._error("unterminated map: missing '}' before end of input", open_pos)
                return
            if c == "}" and closed:
                self.pos += 1
                return
            if c in "=:":
                raise self._error(f"unexpected key separator '{c}'")
            if top_level and not closed and c == "{":
                # `{ ... }` around top-level keys, as in a JSON document, adds to the top map.
                start = self.pos
                self.pos += 1
                self._body(target, top_level=True, closed=True, open_pos=start)
                continue
            if c == "]" or (top_level and c in "}/"):
                raise self._error(f"unexpected '{c}'")
            self._pair(target, top_level)
            if self._value_end(top_level, closed):
                return

    def _value_end(self, top_level: bool, closed: bool) -> bool:
        """Consume what follows a value; True when it was the ``}`` that closes the body."""
        while True:
            self._skip_ws()
            if self._at_comment():
                self._skip_comment()
                continue
            c = self._peek()
            if not c:
                return False
            if c in "\n\r;,":
                self.pos += 1
                return False
            if c == "}":
                if closed:
                    self.pos += 1
                    return True
                if top_level:
                    # nats-server tolerates a stray '}' after a top-level value.
                    self.pos += 1
                    return False
            if top_level:
                expected = "a top-level value to end with a new line, comment or EOF"
            else:
                expected = "a map value terminator ',' or a map terminator '}'"
            raise self._error(f"expected {expected}, but got {c!r} instead")

    def _pair(self, target: dict[str, Any], top_level: bool) -> None:
        key_pos = self.pos
        c = self._peek()
        if c in ('"', "'"):
            key = self._raw_quoted(c, "key")
        else:
            key = self._bare_key(top_level)
            if key.lower() == "include" and self._peek().isspace():
                self._include(target, key_pos)
                return
        # A new line may separate a key from its separator or (without one) from its value.
        self._skip_space()
        c = self._peek()
        if c and c in "=:":
            self.pos += 1
            if top_level:
                self._skip_ws()
            else:
                self._skip_space()
            c = self._peek()
        if not c or (not top_level and c in ",}"):
            raise self._error(f"key '{key}' has no value", key_pos)
        line = self._line(key_pos)
        target[key] = self._value()
        if isinstance(target, ConfMap):
            target.positions[key] = (self.filename, line)

    def _bare_key(self, top_level: bool) -> str:
        start = self.pos
        self.pos += 1  # the first character always belongs to the key
        while (c := self._peek()) and not c.isspace() and c not in "=:":
            self.pos += 1
        if not c and not top_level:
            raise self._error("unexpected end of input processing map key")
        return self.text[start : self.pos]

    def _include(self, target: dict[str, Any], pos: int) -> None:
        self._skip_ws()
        c = self._peek()
        if c in ('"', "'"):
            path = self._raw_quoted(c, "include path")
        elif not c or c in _NL:
            raise self._error("expected include path but found end of line")
        elif c in "[{(\\-" or c in _DIGITS:
            raise self._error(f"expected include path but found {c!r}")
        else:
            start = self.pos
            while (c := self._peek()) and c not in "\n\r;} \t'":
                self.pos += 1
            path = self.text[start : self.pos]
            if c == "'":
                self.pos += 1
        full = os.path.join(os.path.dirname(self.filename), path)
        real = os.path.realpath(full)
        if real in self.chain:
            raise self._error(f"include cycle: '{path}' is already being parsed", pos)
        try:
            text = _read_text(full, "error opening include file")
            included = _Parser(text, full, self.env, (*self.chain, real)).parse()
        except ConfigError as e:
            raise self._error(f"error parsing include file '{path}': {e}", pos) from e
        # Splice at this point: later keys in the including file override included ones.
        target.update(included)
        if isinstance(target, ConfMap):
            target.positions.update(included.positions)
            target.used |= included.used

    def _array(self) -> list[Any]:
        open_pos = self.pos
        self.pos += 1
        out: list[Any] = []
        while True:
            self._skip_space()
            if self._at_comment():
                self._skip_comment()
                continue
            c = self._peek()
            if not c:
                raise self._error("unterminated array: missing ']' before end of input", open_pos)
            if c == ",":
                raise self._error("unexpected array value terminator ','")
            if c == "]":
                self.pos += 1
                return out
            out.append(self._value())
            while True:  # after a value: ',' or a new line, then the next value, or ']'
                self._skip_ws()
                if self._at_comment():
                    self._skip_comment()
                    continue
                c = self._peek()
                if not c:
                    raise self._error(
                        "unterminated array: missing ']' before end of input", open_pos
                    )
                if c in ",\n\r":
                    self.pos += 1
                    break
                if c == "]":
                    self.pos += 1
                    return out
                raise self._error(
                    "expected an array value terminator ',' or an array terminator ']', "
                    f"but got {c!r} instead"
                )

    def _map(self) -> ConfMap:
        open_pos = self.pos
        self.pos += 1
        m = ConfMap()
        self.scopes.append(m)
        try:
            self._body(m, top_level=False, closed=True, open_pos=open_pos)
        finally:
            self.scopes.pop()
        return m

    # -- values ----------------------------------------------------------------------------

    def _value(self) -> Any:
        c = self._peek()
        if not c:
            raise self._error("expected a value but found end of input")
        if c == "[":
            return self._array()
        if c == "{":
            return self._map()
        if c == "'":
            return self._raw_quoted("'", "string")
        if c == '"':
            return self._dq_string()
        if c == "(":
            return self._block()
        if c == "-":
            return self._negative()
        if c in _DIGITS:
            return self._number()
        if c == ".":
            raise self._error("floats must start with a digit")
        if c in _NL:
            raise self._error("expected value but found new line")
        return self._unquoted(self.pos)

    def _raw_quoted(self, quote: str, what: str) -> str:
        open_pos = self.pos
        end = self.text.find(quote, open_pos + 1)
        if end < 0:
            kind = "single" if quote == "'" else "double"
            raise self._error(f"unterminated {kind}-quoted {what}", open_pos)
        self.pos = end + 1
        return self.text[open_pos + 1 : end]

    def _escape(self, out: bytearray) -> None:
        """Append the character escaped by the backslash just consumed.

        Bytes are collected rather than characters because nats-server's ``\\xXX`` inserts
        one raw byte, so ``"\\xc3\\xa9"`` spells UTF-8 "é".
        """
        c = self._peek()
        self.pos += 1
        if c in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[c].encode()
            return
        width = {"x": 2, "u": 4}.get(c, 0)  # \u is our extension; nats-server rejects it
        digits = self.text[self.pos : self.pos + width]
        if width and len(digits) == width and all(d in _HEX for d in digits):
            self.pos += width
            value = int(digits, 16)
            if c == "x":
                out.append(value)
            elif 0xD800 <= value <= 0xDFFF:
                raise self._error(f"invalid escape '\\u{digits}': surrogate code point")
            else:
                out += chr(value).encode()
            return
        if width:
            raise self._error(f"expected {width} hexadecimal digits after '\\{c}'")
        raise self._error(
            f'invalid escape character {c!r}; only \\xXX, \\uXXXX, \\t, \\n, \\r, \\" '
            "and \\\\ are allowed"
        )

    def _dq_string(self) -> str:
        open_pos = self.pos
        self.pos += 1
        out = bytearray()
        seg = self.pos
        while True:
            c = self._peek()
            if not c:
                raise self._error("unterminated double-quoted string", open_pos)
            if c == "\\":
                out += self.text[seg : self.pos].encode()
                self.pos += 1
                self._escape(out)
                seg = self.pos
            elif c == '"':
                out += self.text[seg : self.pos].encode()
                self.pos += 1
                return out.decode("utf-8", errors="replace")
            else:
                self.pos += 1

    def _unquoted(self, start: int) -> Any:
        """Lex an unquoted string that began at ``start``; it may turn out a bool or $var."""
        out = bytearray()
        seg = start
        escaped = quote_ended = False
        while c := self._peek():
            if c == "\\":
                out += self.text[seg : self.pos].encode()
                self.pos += 1
                self._escape(out)
                seg = self.pos
                escaped = True
            elif c in _UNQUOTED_END:
                break
            elif c == "'":
                # lex.go ends a bare string at a single quote and swallows the quote.
                quote_ended = True
                break
            else:
                self.pos += 1
        out += self.text[seg : self.pos].encode()
        if quote_ended:
            self.pos += 1
        text = out.decode("utf-8", errors="replace")
        if escaped or quote_ended:
            return text
        if text.lower() in _BOOLS:
            return _BOOLS[text.lower()]
        if text.startswith("$"):
            return self._variable(text[1:], start)
        return text

    def _block(self) -> str:
        """A raw string from ``(`` to a ``)`` that stands alone at the start of a line."""
        open_pos = self.pos
        start = self.pos + 1
        end = start
        while True:
            end = self.text.find(")", end)
            if end < 0:
                raise self._error(
                    "unterminated block string: missing ')' alone on its own line", open_pos
                )
            after = self.text[end + 1 : end + 2]
            if self.text[end - 1] == "\n" and (not after or after in _NL):
                self.pos = end + 1
                # Like nats-server, keep the new line before the closing ')'.
                return self.text[start:end]
            end += 1

    # -- numbers ---------------------------------------------------------------------------

    def _number(self) -> Any:
        start = self.pos
        self._digits()
        c = self._peek()
        if c == "-":
            if self.pos - start != 4:
                raise self._error("dates must be in full ISO8601 Zulu form (YYYY-MM-DDTHH:MM:SSZ)")
            return self._datetime(start)
        if c == ".":
            return self._float_or_ip(start)
        if c and c.lower() in "kmgtpe":
            return self._sized(start)
        if not c or c in _NUMBER_END:
            return self._int(start)
        # Digits followed by anything else make a string, e.g. `24h` or `1:2`.
        return self._unquoted(start)

    def _negative(self) -> Any:
        start = self.pos
        self.pos += 1
        c = self._peek()
        if not c or c not in _DIGITS:
            if c == ".":
                raise self._error("floats must start with a digit, not '.'")
            raise self._error(f"expected a digit after '-' but got {c!r}")
        self._digits()
        c = self._peek()
        if c == ".":
            return self._float_or_ip(start)
        if c and c.lower() in "kmgtpe":
            return self._sized(start)
        return self._int(start)

    def _sized(self, start: int) -> Any:
        self.pos += 1  # the k/m/g/t/p/e letter
        while (c := self._peek()) and c in "bBiI":
            self.pos += 1
        if not c or c in _NUMBER_END or c in _DIGITS:
            return self._int(start)
        return self._unquoted(start)  # e.g. `1kx` or `5min` are strings

    def _int(self, start: int) -> int:
        text = self.text[start : self.pos]
        split = len(text) - len(text.lstrip("-" + _DIGITS))
        num = int(text[:split])
        suffix = text[split:].lower()
        if suffix not in _SIZE_SUFFIXES:
            raise self._error(f"invalid size suffix in '{text}'", start)
        if not _INT64_MIN <= num <= _INT64_MAX:
            raise self._error(f"integer '{text}' is out of the range", start)
        value = num * _SIZE_SUFFIXES[suffix]
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise self._error(f"integer '{text}' is out of the range", start)
        return value

    def _float_or_ip(self, start: int) -> Any:
        self.pos += 1  # the '.'
        c = self._peek()
        if not c or c not in _DIGITS:
            raise self._error(f"floats must have a digit after the '.', but got {c!r} instead")
        self._digits()
        if self._peek() == ".":
            # A second dot: an address such as 127.0.0.1:4222, kept as a string.
            while (c := self._peek()) and c in _DIGITS + ".:-":
                self.pos += 1
            return self.text[start : self.pos]
        return float(self.text[start : self.pos])

    def _datetime(self, start: int) -> _dt.datetime:
        for shape in _DATETIME_SHAPE:
            c = self._peek()
            if shape == "0" and not (c and c in _DIGITS):
                raise self._error(f"expected digit in ISO8601 datetime, but found {c!r} instead")
            if shape != "0" and c != shape:
                raise self._error(
                    f"expected {shape!r} in ISO8601 datetime, but found {c!r} instead"
                )
            self.pos += 1
        text = self.text[start : self.pos]
        try:
            value = _dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            raise self._error(
                f"expected Zulu formatted DateTime, but got '{text}'", start
            ) from None
        return value.replace(tzinfo=_dt.UTC)

    # -- variables -------------------------------------------------------------------------

    def _variable(self, name: str, pos: int) -> Any:
        line = self._line(pos)
        # Bcrypt hashes ($2a$...) are common unquoted passwords, not variable references.
        if name.startswith("2a$"):
            return "$" + name
        for scope in reversed(self.scopes):
            if name in scope:
                if isinstance(scope, ConfMap):
                    scope.used.add(name)
                # Copy containers so that one variable used twice gives independent values.
                return copy.deepcopy(scope[name])
        if name in self.env and name not in self.resolving:
            raw = self.env[name]
            if not raw.strip():
                return ""
            # Environment values are typed like config values: `1k` is 1000, `true` a bool.
            sub = _Parser(
                f"pk={raw}", f"<env {name}>", self.env, self.chain, self.resolving | {name}
            )
            try:
                return sub.parse()["pk"]
            except ConfigError as e:
                raise self._error(
                    f"variable reference for '{name}' on line {line} could not be parsed: {e}",
                    pos,
                ) from e
        raise self._error(f"variable reference for '{name}' on line {line} can not be found", pos)
