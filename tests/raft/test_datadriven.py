"""The datadriven runner itself: directive parsing, the output fences, the rewrite mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from datadriven import (
    DataDrivenError,
    TestData,
    has_blank_line,
    parse_line,
    run_test,
    run_text,
)


def _args(line: str) -> tuple[str, list[str]]:
    cmd, args = parse_line(line)
    return cmd, [str(a) for a in args]


def test_parse_line_forms() -> None:
    assert _args("") == ("", [])
    assert _args("  add-nodes 3 voters=(1,2, 3) index=10 prevote=true  ") == (
        "add-nodes",
        ["3", "voters=(1, 2, 3)", "index=10", "prevote=true"],
    )
    assert _args("xx a=b a=c") == ("xx", ["a=b", "a=c"])
    assert _args("xx a= b") == ("xx", ["a=", "b"])  # an empty value
    cmd, args = parse_line("cmd exprs=(a + (b + c), d + f) flag")
    assert cmd == "cmd"
    assert [(a.key, a.vals) for a in args] == [("exprs", ["a + (b + c)", "d + f"]), ("flag", [])]


@pytest.mark.parametrize(
    ("line", "column"),
    [("xx =", 4), ("xx a=(1,2", 6), ("xx =b", 4)],
)
def test_parse_line_errors(line: str, column: int) -> None:
    with pytest.raises(DataDrivenError, match=f"cannot parse directive at column {column}: "):
        parse_line(line)


def test_scan_values() -> None:
    _, args = parse_line("c n=18446744073709551615 b=true s=x l=(1,2) neg=-3")
    d = TestData()
    d.cmd_args = args
    assert d.scan_uint("n") == 2**64 - 1
    assert d.scan_bool("b") is True
    assert d.scan_str("s") == "x"
    assert d.scan_int("neg") == -3
    assert d.arg("l") is not None and d.arg("l").scan_uint(1) == 2  # type: ignore[union-attr]
    with pytest.raises(DataDrivenError, match="invalid syntax"):
        d.scan_uint("neg")
    with pytest.raises(DataDrivenError, match="missing argument: nope"):
        d.scan_uint("nope")
    with pytest.raises(DataDrivenError, match="got 1 destinations, but 2 values"):
        d.scan_uint("l")


SCRIPT = """\
# a comment, then blank lines between directives

echo a=1
hello
----
hello

echo
----
----
two

paragraphs
----
----

wrap \\
  b=(x, y)
----
wrap b=(x, y)
"""


def _handler(d: TestData) -> str:
    if d.cmd == "echo":
        return "two\n\nparagraphs" if d.input == "" else d.input
    return " ".join([d.cmd, *(str(a) for a in d.cmd_args)])


def test_run_text_reads_both_fences_and_continuations() -> None:
    seen: list[tuple[str, str, str]] = []

    def handler(d: TestData) -> str:
        seen.append((d.cmd, d.input, d.expected))
        return _handler(d)

    n, new = run_text("script", SCRIPT, handler)
    assert n == 3
    assert new is None
    assert seen == [
        ("echo", "hello", "hello\n"),
        ("echo", "", "two\n\nparagraphs\n"),
        ("wrap", "", "wrap b=(x, y)\n"),
    ]


def test_run_text_fails_on_the_first_difference() -> None:
    with pytest.raises(AssertionError, match=r"script:3:[\s\S]*-hello[\s\S]*\+HELLO"):
        run_text("script", SCRIPT, lambda d: _handler(d).upper())


def test_rewrite_reproduces_a_passing_script_and_fixes_a_wrong_one() -> None:
    _, same = run_text("script", SCRIPT, _handler, rewrite=True)
    assert same == SCRIPT
    wrong = SCRIPT.replace("----\nhello\n", "----\nstale\nlines\n")
    _, fixed = run_text("script", wrong, _handler, rewrite=True)
    assert fixed == SCRIPT
    # Output with a blank line gets the doubled fence; the trailing blank line is trimmed.
    _, out = run_text("s", "x\n----\nold\n", lambda d: "a\n\nb", rewrite=True)
    assert out == "x\n----\n----\na\n\nb\n----\n----\n"


def test_has_blank_line() -> None:
    assert has_blank_line("a\n\nb\n")
    assert has_blank_line("a\n \t\nb\n")
    assert not has_blank_line("a\nb\n")


def test_rewrite_mode_writes_a_copy_and_prints_the_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import datadriven

    script = tmp_path / "testdata" / "s.txt"
    script.parent.mkdir()
    script.write_text("echo\nnew\n----\nold\n")
    monkeypatch.setenv("NATSD_RAFT_REWRITE", "1")
    monkeypatch.setattr(datadriven, "REWRITE_DIR", tmp_path / "out")
    with pytest.raises(AssertionError, match="differs from its rewrite"):
        run_test(script, _handler)
    copy = tmp_path / "out" / tmp_path.name / "testdata" / "s.txt"
    assert copy.read_text() == "echo\nnew\n----\nnew\n"
    assert "-old\n+new\n" in capsys.readouterr().out
    assert script.read_text() == "echo\nnew\n----\nold\n"  # the script itself is untouched
