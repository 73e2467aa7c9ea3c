"""A runner for cockroachdb/datadriven test files, the format of etcd-io/raft's scripts.

A file is a sequence of directives::

    # a comment
    cmd key key=val key=(a, b)
    input lines
    ----
    expected output, up to the first blank line

and, for output that itself holds blank lines, a doubled fence::

    cmd
    ----
    ----
    output

    with a blank line
    ----
    ----

The parsing follows datadriven's test_data_reader.go and line_parser.go: comment lines (``#``
after trimming) and blank lines between directives are skipped, a directive line ending in
``\\`` continues on the next line, the input is trimmed, a non-empty actual output gets a
final newline. A directive runs through a handler that returns the actual output; the first
mismatch fails with a unified diff, as ``go test`` does.

``NATSD_RAFT_REWRITE=1`` is the rewrite mode (datadriven's ``-rewrite``): every directive
runs, the file is rewritten with the actual outputs into a copy under ``natsd-raft-rewrite/``
in the temporary directory (``tempfile.gettempdir()``, /tmp on Linux), and the unified diff
between the script and that copy is printed; the test still fails if they differ.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REWRITE_DIR = Path(tempfile.gettempdir()) / "natsd-raft-rewrite"


class DataDrivenError(Exception):
    """A malformed script or argument (datadriven's t.Fatalf)."""


_BOOLS = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}  # fmt: skip


def parse_uint(s: str) -> int:
    """strconv.ParseUint(s, 10, 64)."""
    if not s or not s.isascii() or not s.isdigit():
        raise DataDrivenError(f'strconv.ParseUint: parsing "{s}": invalid syntax')
    if int(s) > 2**64 - 1:
        raise DataDrivenError(f'strconv.ParseUint: parsing "{s}": value out of range')
    return int(s)


def parse_int(s: str) -> int:
    """strconv.ParseInt(s, 10, 64)."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isascii() or not body.isdigit():
        raise DataDrivenError(f'strconv.ParseInt: parsing "{s}": invalid syntax')
    v = int(s)
    if not -(2**63) <= v < 2**63:
        raise DataDrivenError(f'strconv.ParseInt: parsing "{s}": value out of range')
    return v


def parse_bool(s: str) -> bool:
    """strconv.ParseBool."""
    if s not in _BOOLS:
        raise DataDrivenError(f'strconv.ParseBool: parsing "{s}": invalid syntax')
    return _BOOLS[s]


class CmdArg:
    """An argument on the directive line: ``key``, ``key=value`` or ``key=(v1, v2, ...)``."""

    __slots__ = ("key", "vals")

    def __init__(self, key: str, vals: list[str] | None = None) -> None:
        self.key = key
        self.vals: list[str] = vals if vals is not None else []

    def __str__(self) -> str:
        if len(self.vals) == 0:
            return self.key
        if len(self.vals) == 1:
            return f"{self.key}={self.vals[0]}"
        return f"{self.key}=({', '.join(self.vals)})"

    def __repr__(self) -> str:
        return f"CmdArg({self})"

    def _val(self, i: int) -> str:
        if i < 0 or i >= len(self.vals):
            raise DataDrivenError(f"cannot scan index {i} of key {self.key}")
        return self.vals[i]

    # CmdArg.Scan(t, i, &dest) for each destination type the scripts use.
    def scan_str(self, i: int = 0) -> str:
        return self._val(i)

    def scan_uint(self, i: int = 0) -> int:
        return parse_uint(self._val(i))

    def scan_int(self, i: int = 0) -> int:
        return parse_int(self._val(i))

    def scan_bool(self, i: int = 0) -> bool:
        return parse_bool(self._val(i))


class TestData:
    """One directive: its position, command, arguments, input and expected output."""

    __test__ = False  # not a pytest class
    __slots__ = ("cmd", "cmd_args", "expected", "input", "pos", "rewrite")

    def __init__(self) -> None:
        self.pos = ""
        self.cmd = ""
        self.cmd_args: list[CmdArg] = []
        self.input = ""
        self.expected = ""
        self.rewrite = False

    def has_arg(self, key: str) -> bool:
        return self.arg(key) is not None

    def arg(self, key: str) -> CmdArg | None:
        """The first CmdArg with the given key, or None."""
        for a in self.cmd_args:
            if a.key == key:
                return a
        return None

    def _single(self, key: str) -> CmdArg:
        a = self.arg(key)
        if a is None:
            raise DataDrivenError(f"{self.pos}: missing argument: {key}")
        if len(a.vals) != 1:
            raise DataDrivenError(
                f"{self.pos}: {key}: got 1 destinations, but {len(a.vals)} values"
            )
        return a

    # ScanArgs(t, key, &dest) with a single scalar destination.
    def scan_uint(self, key: str) -> int:
        return self._single(key).scan_uint()

    def scan_int(self, key: str) -> int:
        return self._single(key).scan_int()

    def scan_bool(self, key: str) -> bool:
        return self._single(key).scan_bool()

    def scan_str(self, key: str) -> str:
        return self._single(key).scan_str()

    def fatal(self, msg: str) -> DataDrivenError:
        """An error carrying the directive's position (raise it)."""
        return DataDrivenError(f"{self.pos}: {msg}")


def parse_line(line: str) -> tuple[str, list[CmdArg]]:
    """ParseLine: a directive line into its command and arguments. Values in parentheses may
    nest parentheses; a top-level comma separates them."""
    line = line.strip()
    if line == "":
        return "", []
    orig = line

    def fail(rest: str) -> DataDrivenError:
        column = len(orig) - len(rest) + 1
        return DataDrivenError(f"cannot parse directive at column {column}: {orig}")

    def until(s: str, chars: str) -> tuple[str, str]:
        idx = len(s)
        for ch in chars:
            j = s.find(ch)
            if j != -1 and j < idx:
                idx = j
        return s[:idx], s[idx:]

    cmd, line = until(line, " ")
    if cmd == "":
        raise fail(line)
    line = line.strip()
    args: list[CmdArg] = []
    while line != "":
        key, line = until(line, " =")
        if key == "":
            raise fail(line)
        arg = CmdArg(key)
        if line != "" and line[0] == "=":
            line = line[1:]
            if line == "" or line[0] == " ":
                arg.vals = [""]  # empty value
            elif line[0] != "(":
                val, line = until(line, " ")
                arg.vals = [val]
            else:
                pos = 1
                nest = 1
                last = pos
                while nest > 0:
                    if pos == len(line):
                        # The string ended before we found the final ')'.
                        raise fail(line)
                    ch = line[pos]
                    pos += 1
                    if ch == ",":
                        if nest == 1:
                            arg.vals.append(line[last : pos - 1])
                            while pos < len(line) and line[pos] == " ":
                                pos += 1
                            last = pos
                    elif ch == "(":
                        nest += 1
                    elif ch == ")":
                        nest -= 1
                arg.vals.append(line[last : pos - 1])
                line = line[pos:].strip()
        args.append(arg)
        line = line.strip()
    return cmd, args


_BLANK_LINE = re.compile(r"(?m)^[\t ]*\n")


def has_blank_line(s: str) -> bool:
    return _BLANK_LINE.search(s) is not None


def _split_lines(text: str) -> list[str]:
    """bufio.Scanner's ScanLines: split on \\n, drop one trailing \\r, no final empty line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


class _Reader:
    """testDataReader: yields the directives of one file, keeping the rewrite buffer."""

    def __init__(self, name: str, text: str, rewrite: bool) -> None:
        self.name = name
        self.lines = _split_lines(text)
        self.i = 0  # lines consumed (= datadriven's scanner.line)
        self.data = TestData()
        self.out: list[str] | None = [] if rewrite else None

    def _scan(self) -> str | None:
        if self.i >= len(self.lines):
            return None
        line = self.lines[self.i]
        self.i += 1
        return line

    def emit(self, s: str) -> None:
        if self.out is not None:
            self.out.append(s + "\n")

    def next(self) -> bool:
        while (line := self._scan()) is not None:
            self.data = TestData()
            self.emit(line)
            pos = f"{self.name}:{self.i}"
            self.data.pos = pos
            line = line.strip()
            if line.startswith("#"):
                continue  # comment lines
            while line.endswith("\\"):
                nxt = self._scan()
                if nxt is None:
                    break
                self.emit(nxt)
                line = line[:-1] + " " + nxt.strip()
            try:
                cmd, args = parse_line(line)
            except DataDrivenError as e:
                raise DataDrivenError(f"{pos}: {e}") from None
            if cmd == "":
                continue
            if cmd == "subtest":
                raise DataDrivenError(f"{pos}: subtest directives are not supported")
            self.data.cmd = cmd
            self.data.cmd_args = args
            buf: list[str] = []
            separator = False
            while (ln := self._scan()) is not None:
                if ln == "----":
                    separator = True
                    break
                self.emit(ln)
                buf.append(ln + "\n")
            self.data.input = "".join(buf).strip()
            if separator:
                self._read_expected()
            self.data.rewrite = self.out is not None
            return True
        return False

    def _read_expected(self) -> None:
        buf: list[str] = []
        line = self._scan()
        if line == "----":
            # Doubled fence: look for two successive lines of "----" before terminating.
            while (ln := self._scan()) is not None:
                if ln == "----":
                    ln2 = self._scan()
                    if ln2 is not None:
                        if ln2 == "----":
                            # Read the following blank line (else rewriting emits an extra one).
                            after = self._scan()
                            if after is not None and after != "":
                                raise DataDrivenError(
                                    f"{self.name}:{self.i}: non-blank line after end of double "
                                    "---- separator section"
                                )
                            break
                        buf.append(ln + "\n")
                        buf.append(ln2 + "\n")
                        continue
                buf.append(ln + "\n")
        else:
            # Terminate on first blank line.
            while line is not None and line.strip() != "":
                buf.append(line + "\n")
                line = self._scan()
        self.data.expected = "".join(buf)

    def rewritten(self) -> str:
        assert self.out is not None
        data = "".join(self.out)
        # Remove any trailing blank line.
        if len(data) > 2 and data.endswith("\n\n"):
            data = data[:-1]
        return data


def rewrite_mode() -> bool:
    return os.environ.get("NATSD_RAFT_REWRITE", "") not in ("", "0")


def _diff(a: str, b: str, fa: str, fb: str, context: int) -> str:
    return "".join(
        difflib.unified_diff(
            a.splitlines(keepends=True), b.splitlines(keepends=True), fa, fb, n=context
        )
    )


def run_text(
    name: str, text: str, f: Callable[[TestData], str], *, rewrite: bool = False
) -> tuple[int, str | None]:
    """Run every directive of ``text`` through ``f``. Without rewrite, raise AssertionError
    at the first output that differs from the expected one (with a unified diff, like
    datadriven). With rewrite, return the text rewritten with the actual outputs. Returns
    (number of directives run, rewritten text or None)."""
    r = _Reader(name, text, rewrite)
    n = 0
    while r.next():
        n += 1
        d = r.data
        actual = f(d)
        if actual != "" and not actual.endswith("\n"):
            actual += "\n"
        if rewrite:
            r.emit("----")
            if has_blank_line(actual):
                r.emit("----")
                assert r.out is not None
                r.out.append(actual)
                r.emit("----")
                r.emit("----")
                r.emit("")
            else:
                # actual already ends in \n so emit adds a blank line.
                r.emit(actual)
        elif d.expected != actual:
            diff = _diff(d.expected, actual, "expected", "actual", 5)
            raise AssertionError(
                f"\n{d.pos}:\n {d.input}\noutput didn't match expected:\n{diff}"
                f"\nexpected:\n{d.expected}\nfound:\n{actual}"
            )
    return n, (r.rewritten() if rewrite else None)


def run_test(path: Path, f: Callable[[TestData], str]) -> int:
    """RunTest on a file. In rewrite mode (NATSD_RAFT_REWRITE=1) every directive runs, the
    rewritten file goes under REWRITE_DIR (natsd-raft-rewrite in the temporary directory), and
    its diff against the script is printed (and fails the test). Returns the number of
    directives run."""
    text = path.read_text()
    rewrite = rewrite_mode()
    n, new = run_text(str(path), text, f, rewrite=rewrite)
    if new is not None:
        target = REWRITE_DIR.joinpath(*path.resolve().parts[-3:])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
        if new != text:
            diff = _diff(text, new, str(path), str(target), 3)
            sys.stdout.write(diff)
            raise AssertionError(f"{path} differs from its rewrite {target}:\n{diff}")
    return n


def script_files(directory: Path) -> list[Path]:
    """The script files of a directory, as datadriven.Walk visits them (sorted, no hidden or
    temporary files)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no raft scripts at {directory} (set NATSD_RAFT_SCRIPTS)")
    return sorted(
        p
        for p in directory.iterdir()
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith("~")
    )
