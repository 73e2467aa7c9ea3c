"""The raft core's logger: a port of etcd-io/raft v3.7.0 logger.go (Apache-2.0), kept pure.

The core calls ``infof``/``debugf``/... with Go format strings, verbatim from upstream, and
the logger renders them with :func:`go_sprintf` (below) only when a line is kept: the
conformance scripts compare the rendered lines byte for byte, and a logger that keeps
nothing pays for no formatting. Go's fmt subset lives here, the lowest module of the
package, so that the describe helpers and any logger can share it. ``panic``/``panicf``
(and ``fatal``/``fatalf``, which in Go exit the process) raise :class:`RaftPanic`, the
Python form of Go's ``panic``: the core's invariants are broken and the caller must not go
on with this instance.

No ``logging`` module and no I/O here (the raft layer is pure): the node that embeds the
core passes a logger that forwards to natsd's own logs.
"""

from __future__ import annotations

from enum import Enum
from typing import NoReturn, Protocol

from natsd.core.goquote import go_quote

__all__ = [
    "DiscardLogger",
    "Logger",
    "RaftPanic",
    "get_logger",
    "go_quote",
    "go_sprint",
    "go_sprintf",
    "go_sprintln",
    "go_value",
    "reset_default_logger",
    "set_logger",
]


# ---------------------------------------------------------------------------------------------
# Go's fmt, the subset the raft core's format strings use (%d %x %X %s %v %+v %q %t, widths).
# The conformance scripts compare log lines and descriptions byte for byte, so the format
# strings stay Go's and are rendered here rather than translated to Python's %-syntax.


def go_value(arg: object, plus: bool = False) -> str:
    """``%v`` (``%+v`` when plus): Go's default format for the values the core passes."""
    if arg is None:
        return "<nil>"
    if arg is True:
        return "true"
    if arg is False:
        return "false"
    if isinstance(arg, Enum):
        return arg.name
    if isinstance(arg, int):
        return str(int(arg))
    if isinstance(arg, str):
        return arg
    if isinstance(arg, (bytes, bytearray, memoryview)):
        return "[" + " ".join(str(x) for x in bytes(arg)) + "]"
    if isinstance(arg, (list, tuple)):
        return "[" + " ".join(go_value(x, plus) for x in arg) + "]"
    if plus:
        fn = getattr(arg, "go_plus_v", None)
        if fn is not None:
            return str(fn())
    return str(arg)


def _go_hex(arg: object, upper: bool) -> str:
    if isinstance(arg, Enum):
        arg = arg.value
    if isinstance(arg, bool):
        return "%!x(bool=" + ("true" if arg else "false") + ")"
    if isinstance(arg, int):
        s = format(arg, "X" if upper else "x")
    elif isinstance(arg, str):
        s = arg.encode().hex()
    elif isinstance(arg, (bytes, bytearray, memoryview)):
        s = bytes(arg).hex()
    elif isinstance(arg, (list, tuple)):
        return "[" + " ".join(_go_hex(x, upper) for x in arg) + "]"
    else:
        s = str(arg).encode().hex()
    return s.upper() if upper else s


def _go_verb(verb: str, plus: bool, arg: object) -> str:
    if verb == "d":
        if isinstance(arg, Enum):
            return str(arg.value)
        if isinstance(arg, int) and not isinstance(arg, bool):
            return str(int(arg))
        if isinstance(arg, (list, tuple)):
            return "[" + " ".join(_go_verb("d", plus, x) for x in arg) + "]"
        return "%!d(" + go_value(arg, False) + ")"
    if verb == "x" or verb == "X":
        return _go_hex(arg, verb == "X")
    if verb == "q":
        if isinstance(arg, (bytes, bytearray, memoryview, str)):
            return go_quote(bytes(arg) if not isinstance(arg, str) else arg)
        return go_quote(go_value(arg, plus))
    if verb == "t":
        if arg is True or arg is False:
            return "true" if arg else "false"
        return "%!t(" + go_value(arg, False) + ")"
    if verb == "s" and isinstance(arg, (bytes, bytearray, memoryview)):
        return bytes(arg).decode("utf-8", "replace")
    # %s and %v: a Stringer's String() is the object's __str__.
    return go_value(arg, plus)


def go_sprintf(format: str, *args: object) -> str:
    """Go's ``fmt.Sprintf`` for the verbs the raft core uses: ``%d %x %X %s %v %+v %q %t``,
    an optional width with ``-`` or ``0`` flags (``%5d``) and ``%%``. A value's ``__str__``
    is its Go ``String()``; an object may offer ``go_plus_v()`` for ``%+v``. Missing and
    extra arguments are reported the way Go does (``%!d(MISSING)``, ``%!(EXTRA ...)``)."""
    if "%" not in format:
        if args:
            return format + "%!(EXTRA " + ", ".join(go_value(a, False) for a in args) + ")"
        return format
    out: list[str] = []
    n = len(format)
    i = 0
    ai = 0
    while i < n:
        j = format.find("%", i)
        if j < 0:
            out.append(format[i:])
            break
        out.append(format[i:j])
        i = j + 1
        plus = minus = zero = False
        while i < n and format[i] in "+-0# ":
            c = format[i]
            if c == "+":
                plus = True
            elif c == "-":
                minus = True
            elif c == "0":
                zero = True
            i += 1
        width = 0
        while i < n and "0" <= format[i] <= "9":
            width = width * 10 + ord(format[i]) - 48
            i += 1
        if i >= n:
            out.append("%!(NOVERB)")
            break
        verb = format[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            out.append("%!" + verb + "(MISSING)")
            continue
        s = _go_verb(verb, plus, args[ai])
        ai += 1
        if width > len(s):
            pad = width - len(s)
            if minus:
                s = s + " " * pad
            elif zero and verb in "dxX":
                neg = s.startswith("-")
                digits = s[1:] if neg else s
                s = ("-" if neg else "") + "0" * pad + digits
            else:
                s = " " * pad + s
        out.append(s)
    if ai < len(args):
        out.append("%!(EXTRA " + ", ".join(go_value(a, False) for a in args[ai:]) + ")")
    return "".join(out)


def go_sprint(*args: object) -> str:
    """Go's ``fmt.Sprint``: operands in their default format, a space between two operands
    when neither is a string."""
    out: list[str] = []
    prev_str = True
    for k, a in enumerate(args):
        is_str = isinstance(a, str)
        if k > 0 and not is_str and not prev_str:
            out.append(" ")
        out.append(go_value(a, False))
        prev_str = is_str
    return "".join(out)


def go_sprintln(*args: object) -> str:
    """Go's ``fmt.Sprintln``: operands separated by spaces, then a newline."""
    return " ".join(go_value(a, False) for a in args) + "\n"


class RaftPanic(Exception):
    """Go's ``panic`` in the raft core: an invariant is broken (a commit index past the log,
    an entry conflicting with a committed one, ...). The message is the panic's text."""


class Logger(Protocol):
    """Go's ``raft.Logger`` interface. The ``f`` variants take a Go format string."""

    def debug(self, *v: object) -> None: ...
    def debugf(self, format: str, *v: object) -> None: ...
    def info(self, *v: object) -> None: ...
    def infof(self, format: str, *v: object) -> None: ...
    def warning(self, *v: object) -> None: ...
    def warningf(self, format: str, *v: object) -> None: ...
    def error(self, *v: object) -> None: ...
    def errorf(self, format: str, *v: object) -> None: ...
    def fatal(self, *v: object) -> NoReturn: ...
    def fatalf(self, format: str, *v: object) -> NoReturn: ...
    def panic(self, *v: object) -> NoReturn: ...
    def panicf(self, format: str, *v: object) -> NoReturn: ...


class DiscardLogger:
    """Keeps nothing; ``panic``/``fatal`` still raise :class:`RaftPanic` with Go's text."""

    __slots__ = ()

    def debug(self, *v: object) -> None:
        pass

    def debugf(self, format: str, *v: object) -> None:
        pass

    def info(self, *v: object) -> None:
        pass

    def infof(self, format: str, *v: object) -> None:
        pass

    def warning(self, *v: object) -> None:
        pass

    def warningf(self, format: str, *v: object) -> None:
        pass

    def error(self, *v: object) -> None:
        pass

    def errorf(self, format: str, *v: object) -> None:
        pass

    def fatal(self, *v: object) -> NoReturn:
        raise RaftPanic(go_sprint(*v))

    def fatalf(self, format: str, *v: object) -> NoReturn:
        raise RaftPanic(go_sprintf(format, *v))

    def panic(self, *v: object) -> NoReturn:
        raise RaftPanic(go_sprint(*v))

    def panicf(self, format: str, *v: object) -> NoReturn:
        raise RaftPanic(go_sprintf(format, *v))


class _Current:
    """The package-wide logger of Go's ``getLogger()`` (MemoryStorage panics through it).
    An instance attribute rather than a ``global``: cheaper in the mypyc build."""

    __slots__ = ("logger",)

    def __init__(self) -> None:
        self.logger: Logger = DiscardLogger()


_CURRENT = _Current()


def set_logger(logger: Logger) -> None:
    """Go's ``SetLogger``."""
    _CURRENT.logger = logger


def reset_default_logger() -> None:
    """Go's ``ResetDefaultLogger``: back to the logger that keeps nothing."""
    _CURRENT.logger = DiscardLogger()


def get_logger() -> Logger:
    """Go's ``getLogger``."""
    return _CURRENT.logger
