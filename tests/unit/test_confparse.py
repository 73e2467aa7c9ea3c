"""Tests for natsd.config.parse, the nats-server configuration file parser."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server
from ports import free_port

from natsd.config.parse import ConfigError, parse, parse_file


def p(text: str, **env: str) -> dict[str, Any]:
    return parse(text, env=env)


REALISTIC = """\
listen: 127.0.0.1:4222
http_port: 8222
max_payload: 2MB
jetstream { store_dir: "/tmp/js", max_mem: 1G, max_file: 10GB, domain: hub, sync_interval: "2m" }
authorization { users = [ {user: alice, password: "$2a$11$abc", permissions: {publish: \
{allow: ["foo.>"], deny: ["foo.bar"]}, subscribe: "_INBOX.>"}}, {user: bob, password: secret} ] }
accounts { A: { users: [{user: a, password: a}], jetstream: {max_mem: 1M, max_file: 1M, \
max_streams: 10} }, B: {users: [{user: b, password: b}]} }
no_auth_user: a
"""


def test_realistic_config() -> None:
    assert p(REALISTIC) == {
        "listen": "127.0.0.1:4222",
        "http_port": 8222,
        "max_payload": 2 * 1024 * 1024,
        "jetstream": {
            "store_dir": "/tmp/js",
            "max_mem": 1_000_000_000,
            "max_file": 10 * 1024**3,
            "domain": "hub",
            "sync_interval": "2m",
        },
        "authorization": {
            "users": [
                {
                    "user": "alice",
                    "password": "$2a$11$abc",
                    "permissions": {
                        "publish": {"allow": ["foo.>"], "deny": ["foo.bar"]},
                        "subscribe": "_INBOX.>",
                    },
                },
                {"user": "bob", "password": "secret"},
            ]
        },
        "accounts": {
            "A": {
                "users": [{"user": "a", "password": "a"}],
                "jetstream": {"max_mem": 1_000_000, "max_file": 1_000_000, "max_streams": 10},
            },
            "B": {"users": [{"user": "b", "password": "b"}]},
        },
        "no_auth_user": "a",
    }


# -- keys, separators, terminators, comments ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["foo = 2", "foo: 2", "foo 2", "foo\t2", "foo=2", "foo:2", "foo = 2;", "foo: 2,", "  foo 2  "],
)
def test_separators_and_terminators(text: str) -> None:
    assert p(text) == {"foo": 2}


def test_several_values_on_one_line() -> None:
    assert p("a: 1, b: 2; c: 3") == {"a": 1, "b": 2, "c": 3}


def test_quoted_keys_and_key_case_kept() -> None:
    assert p("\"my key\": 1\n'other key' = 2\nMaxPayload: 3") == {
        "my key": 1,
        "other key": 2,
        "MaxPayload": 3,
    }


def test_key_and_value_split_by_new_line() -> None:
    # lex.go skips all white space after a key that has no separator yet.
    assert p("foo\n  2\nbar\n= 3") == {"foo": 2, "bar": 3}


def test_new_line_after_separator_is_an_error_at_top_level_only() -> None:
    with pytest.raises(ConfigError, match="expected value but found new line"):
        p("foo =\n 2")
    assert p("m { foo =\n 2 }") == {"m": {"foo": 2}}


def test_comments() -> None:
    text = """
    # hash comment
    // slash comment
    a: 1 # trailing
    b: "x" // trailing
    c: foo#bar
    d {
      # inside a map
      e: 1 // here too
    }
    f: [ # inside an array
      1 // one
      2
    ]
    """
    assert p(text) == {"a": 1, "b": "x", "c": "foo#bar", "d": {"e": 1}, "f": [1, 2]}


def test_duplicate_keys_later_wins() -> None:
    assert p("a: 1\nb: 2\na: 3\nm {x: 1, x: 2}") == {"a": 3, "b": 2, "m": {"x": 2}}


def test_empty_input() -> None:
    assert p("") == {}
    assert p("  \n# only a comment\n") == {}


def test_top_level_braces_like_json() -> None:
    text = '{\n  "port": 4222,\n  "tags": ["a", "b"],\n  "nested": {"x": true}\n}\n'
    assert p(text) == {"port": 4222, "tags": ["a", "b"], "nested": {"x": True}}


# -- maps and arrays ------------------------------------------------------------------------


def test_nested_maps_with_various_separators() -> None:
    text = """
    cluster {
      name: c1
      listen = 0.0.0.0:6222
      authorization { user: ruser; password: "p w" }
      tls: { timeout: 2.5 }
    }
    """
    assert p(text) == {
        "cluster": {
            "name": "c1",
            "listen": "0.0.0.0:6222",
            "authorization": {"user": "ruser", "password": "p w"},
            "tls": {"timeout": 2.5},
        }
    }


def test_empty_map_and_array() -> None:
    assert p("a {}\nb: []\nc: [\n]") == {"a": {}, "b": [], "c": []}


def test_arrays_with_commas_and_new_lines() -> None:
    text = "a: [1, 2, 3]\nb: [\n  x\n  y,\n  'z'\n]\nc: [1, [2, [3]], {k: v}, ]"
    assert p(text) == {
        "a": [1, 2, 3],
        "b": ["x", "y", "z"],
        "c": [1, [2, [3]], {"k": "v"}],
    }


def test_array_of_urls() -> None:
    text = "routes = [\n  nats://a:6222\n  nats-route://user:pw@b.example.com:6222\n]"
    assert p(text) == {"routes": ["nats://a:6222", "nats-route://user:pw@b.example.com:6222"]}


# -- strings ---------------------------------------------------------------------------------


def test_double_quoted_escapes() -> None:
    assert p(r'a: "t\tn\nr\rq\"b\\x\x41u\u00e9"') == {"a": 't\tn\nr\rq"b\\xAué'}


def test_hex_escapes_are_bytes() -> None:
    # \xXX inserts one byte, so a UTF-8 sequence can be spelled byte by byte.
    assert p(r'a: "\xc3\xa9"') == {"a": "é"}


def test_single_quoted_strings_are_raw() -> None:
    assert p(r"a: 'no \escapes \n here'") == {"a": r"no \escapes \n here"}


def test_unquoted_strings() -> None:
    text = "host: 0.0.0.0\nmax_age: 24h\nuser: derek\nurl: nats://h:4222\nsubj: foo.*.>\nn: 1kx"
    assert p(text) == {
        "host": "0.0.0.0",
        "max_age": "24h",
        "user": "derek",
        "url": "nats://h:4222",
        "subj": "foo.*.>",
        "n": "1kx",
    }


def test_unquoted_string_escapes() -> None:
    assert p(r"a: x\ty") == {"a": "x\ty"}


def test_unicode_strings() -> None:
    assert p('name: "héllo wörld"\nother: ünïcode') == {"name": "héllo wörld", "other": "ünïcode"}


def test_empty_unquoted_value_before_terminator() -> None:
    # nats-server reads `a: ;` as the empty string.
    assert p("a: ;\nb: 1") == {"a": "", "b": 1}


def test_block_string() -> None:
    text = "a: (\nline one\n  line ) two\n)\nb: 1\n"
    assert p(text) == {"a": "\nline one\n  line ) two\n", "b": 1}


def test_block_string_at_end_of_input() -> None:
    assert p("a: (\nx\n)") == {"a": "\nx\n"}


# -- numbers and booleans --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("-42", -42),
        ("1.5", 1.5),
        ("-0.25", -0.25),
        ("1k", 1000),
        ("1K", 1000),
        ("1kb", 1024),
        ("1KB", 1024),
        ("1Ki", 1024),
        ("1KiB", 1024),
        ("2m", 2_000_000),
        ("2MB", 2 * 1024**2),
        ("2mib", 2 * 1024**2),
        ("1G", 1_000_000_000),
        ("1gb", 1024**3),
        ("10GB", 10 * 1024**3),
        ("1t", 10**12),
        ("1TB", 1024**4),
        ("1p", 10**15),
        ("1PiB", 1024**5),
        ("1e", 10**18),
        ("1EB", 1024**6),
        ("-2k", -2000),
        ("9223372036854775807", 2**63 - 1),
    ],
)
def test_numbers(literal: str, value: int | float) -> None:
    result = p(f"a: {literal}")["a"]
    assert result == value
    assert type(result) is type(value)


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("On", True),
        ("false", False),
        ("False", False),
        ("no", False),
        ("OFF", False),
    ],
)
def test_booleans(literal: str, value: bool) -> None:
    assert p(f"a: {literal}") == {"a": value}
    assert p(f"a: [{literal}]") == {"a": [value]}


def test_quoted_booleans_and_numbers_stay_strings() -> None:
    assert p("a: \"true\"\nb: '42'") == {"a": "true", "b": "42"}


def test_datetime() -> None:
    assert p("a: 2024-01-02T03:04:05Z") == {"a": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)}


# -- variables -------------------------------------------------------------------------------


def test_variables_top_level() -> None:
    text = "SIZE = 2MB\nNAME: 'srv'\nmax_payload: $SIZE\nserver_name: $NAME"
    assert p(text) == {
        "SIZE": 2 * 1024**2,
        "NAME": "srv",
        "max_payload": 2 * 1024**2,
        "server_name": "srv",
    }


def test_variables_innermost_scope_first() -> None:
    text = """
    pw = outer
    m {
      pw = inner
      users = [{user: a, password: $pw}]
      n { x: $pw }
    }
    top: $pw
    """
    result = p(text)
    assert result["m"]["users"] == [{"user": "a", "password": "inner"}]
    assert result["m"]["n"] == {"x": "inner"}
    assert result["top"] == "outer"


def test_variable_holding_a_map_is_copied() -> None:
    result = p("perms = {publish: [a]}\nu1: $perms\nu2: $perms")
    result["u1"]["publish"].append("b")
    assert result["u2"] == {"publish": ["a"]}


def test_variables_from_environment_are_typed() -> None:
    result = p(
        "a: $S\nb: $N\nc: $B\nd: $L\ne: $Q", S="hello", N="1k", B="true", L="[1, 2]", Q='"x y"'
    )
    assert result == {"a": "hello", "b": 1000, "c": True, "d": [1, 2], "e": "x y"}


def test_file_variable_shadows_environment() -> None:
    assert p("X = file\na: $X", X="env") == {"X": "file", "a": "file"}


def test_environment_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATSD_CONFPARSE_TEST_VAR", "42")
    assert parse("a: $NATSD_CONFPARSE_TEST_VAR") == {"a": 42}


def test_unknown_variable() -> None:
    with pytest.raises(ConfigError) as info:
        p("a: 1\n\nb: $MISSING")
    assert "variable reference for 'MISSING' on line 3 can not be found" in str(info.value)
    assert info.value.line == 3


def test_self_referencing_environment_variable() -> None:
    with pytest.raises(ConfigError, match="variable reference for 'A'"):
        p("a: $A", A="$A")


def test_unparsable_environment_variable() -> None:
    with pytest.raises(ConfigError, match="could not be parsed"):
        p("a: $A", A="two words")


def test_bcrypt_hash_is_not_a_variable() -> None:
    assert p("password: $2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG") == {
        "password": "$2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG"
    }


# -- includes --------------------------------------------------------------------------------


def test_include_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "auth.conf").write_text("users = [{user: a, password: b}]\n")
    (tmp_path / "conf.d" / "limits.conf").write_text("max_payload: 1MB\ninclude 'auth2.conf'\n")
    (tmp_path / "conf.d" / "auth2.conf").write_text("max_pending: 2MB\n")
    main = tmp_path / "main.conf"
    main.write_text(
        "port: 4222\n"
        "max_payload: 5\n"
        "include ./conf.d/limits.conf\n"
        'authorization {\n  include "conf.d/auth.conf"\n  timeout: 2\n}\n'
    )
    assert parse_file(main) == {
        "port": 4222,
        "max_payload": 1024**2,
        "max_pending": 2 * 1024**2,
        "authorization": {"users": [{"user": "a", "password": "b"}], "timeout": 2},
    }


def test_later_keys_override_included_ones(tmp_path: Path) -> None:
    (tmp_path / "inc.conf").write_text("a: 1\nb: 2\n")
    main = tmp_path / "main.conf"
    main.write_text("include inc.conf; b: 3\n")
    assert parse_file(main) == {"a": 1, "b": 3}


def test_include_with_parse_uses_filename_directory(tmp_path: Path) -> None:
    (tmp_path / "inc.conf").write_text("a: 1\n")
    assert parse("include inc.conf\n", filename=str(tmp_path / "x.conf")) == {"a": 1}


def test_included_file_does_not_see_including_files_variables(tmp_path: Path) -> None:
    (tmp_path / "inc.conf").write_text("a: $X\n")
    main = tmp_path / "main.conf"
    main.write_text("X = 1\ninclude inc.conf\n")
    with pytest.raises(ConfigError, match="variable reference for 'X'"):
        parse_file(main, env={})
    assert parse_file(main, env={"X": "7"}) == {"X": 1, "a": 7}


def test_missing_include(tmp_path: Path) -> None:
    main = tmp_path / "main.conf"
    main.write_text("a: 1\ninclude nothere.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_file(main)
    assert "nothere.conf" in str(info.value)
    assert info.value.line == 2


def test_error_in_include_names_both_files(tmp_path: Path) -> None:
    (tmp_path / "bad.conf").write_text("ok: 1\nbroken: [1,\n")
    main = tmp_path / "main.conf"
    main.write_text("include bad.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_file(main)
    message = str(info.value)
    assert "main.conf:1" in message
    assert "bad.conf:2" in message


def test_include_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("include b.conf\n")
    (tmp_path / "b.conf").write_text("include a.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        parse_file(tmp_path / "a.conf")


def test_missing_main_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="error opening config file"):
        parse_file(tmp_path / "nope.conf")


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ('a: 1\nb: "abc', "unterminated double-quoted string", 2),
        ("a: 'abc", "unterminated single-quoted string", 1),
        ('\n"abc: 1', "unterminated double-quoted key", 2),
        ("m {\n a: 1\n", "unterminated map", 1),
        ("m { a: [1, 2\n", "unterminated array", 1),
        ("a: (\nabc\n  )\n", "unterminated block string", 1),
        ("a: 1 2", "expected a top-level value to end", 1),
        ("m {a: 1 2}", "expected a map value terminator", 1),
        ("a: [1 2]", "expected an array value terminator", 1),
        ("a: [1,,2]", "unexpected array value terminator", 1),
        ("m {a: 1,, b: 2}", "expected a map value terminator", 1),
        ("m {\n: 1}", "unexpected key separator", 2),
        ("= 1", "unexpected key separator", 1),
        ("a: 1.5s", "expected a top-level value to end", 1),
        ("a: 1.", "floats must have a digit after the '.'", 1),
        ("a: .5", "floats must start with a digit", 1),
        ("a: -x", "expected a digit", 1),
        ("a: 99999999999999999999", "out of the range", 1),
        ("a: 9999999999eb", "out of the range", 1),
        ("a: 1kbb", "invalid size suffix", 1),
        ("a: 123-45", "ISO8601", 1),
        ("a: 2024-13-01T00:00:00Z", "Zulu", 1),
        (r'a: "\q"', "invalid escape character", 1),
        (r'a: "\x4"', "hexadecimal digits", 1),
        (r'a: "\ud800"', "surrogate", 1),
        ("a", "has no value", 1),
        ("a:", "has no value", 1),
        ("m {a:", "has no value", 1),
        ("m {b }", "has no value", 1),
        ("include\nx.conf", "expected include path", 1),
        ("include [x]", "expected include path", 1),
    ],
)
def test_errors(text: str, message: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text, filename="test.conf", env={})
    assert message in str(info.value)
    assert info.value.filename == "test.conf"
    assert info.value.line == line
    assert str(info.value).startswith(f"test.conf:{line}: ")


# -- agreement with the real nats-server -----------------------------------------------------

ACCEPTED = {
    "realistic": REALISTIC,
    "separators": "port = 4222\nhttp_port: 8222; max_connections 100, server_name: 'srv-1'\n",
    "comments": "# c\n// c\nport: 4222 # c\nmax_payload: 1MB // c\n",
    "sizes": "max_payload: 1KiB\nmax_pending: 64MB\njetstream {max_mem: 1G, max_file: 2T}\n",
    "variables": "SIZE = 2MB\nmax_payload: $SIZE\nauthorization { PW = secret\n"
    "  users = [{user: a, password: $PW}, {user: b, password: $PW}] }\n",
    "block": "authorization {\n  token: (\nabc\n)\n}\n",
    "strings": 'server_name: "a\\x41b"\nlisten: 0.0.0.0:4222\nserver_tags: [a, "b c"]\n',
    "braces": '{\n  "port": 4222,\n  "debug": true\n}\n',
    "nested": "cluster {\n  name: c1\n  listen: 127.0.0.1:6222\n"
    "  routes = [\n    nats://127.0.0.1:6223\n    nats://127.0.0.1:6224\n  ]\n}\n",
}

REJECTED = {
    "unterminated_string": 'server_name: "abc\n',
    "unterminated_map": "jetstream { store_dir: x\n",
    "unterminated_array": "cluster { routes: [nats://a:1\n",
    "missing_variable": "max_payload: $NATSD_CONFPARSE_SURELY_UNSET\n",
    "bad_escape": 'server_name: "\\q"\n',
    "bad_value_end": "port: 4222 4223\n",
}


@pytest.mark.parametrize(
    ("name", "text", "ok"),
    [(n, t, True) for n, t in ACCEPTED.items()] + [(n, t, False) for n, t in REJECTED.items()],
)
def test_agrees_with_nats_server(
    nats_server: str, tmp_path: Path, name: str, text: str, ok: bool
) -> None:
    conf = tmp_path / f"{name}.conf"
    conf.write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "NATSD_CONFPARSE_SURELY_UNSET"}
    proc = subprocess.run(
        [nats_server, "-c", str(conf), "-t"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert (proc.returncode == 0) == ok, proc.stdout + proc.stderr
    if ok:
        assert isinstance(parse_file(conf, env=env), dict)
    else:
        with pytest.raises(ConfigError):
            parse_file(conf, env=env)


@pytest.fixture
def nats_server() -> str:
    return require_nats_server()


@pytest.mark.parametrize("size", ["2MB", "1k", "3KiB", "1M", "512kb"])
def test_size_suffixes_match_nats_server_info(nats_server: str, tmp_path: Path, size: str) -> None:
    port = free_port()
    conf = tmp_path / "size.conf"
    conf.write_text(f"listen: 127.0.0.1:{port}\nmax_payload: {size}\n")
    proc = subprocess.Popen(
        [nats_server, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    info_line = sock.makefile("rb").readline()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert info_line.startswith(b"INFO ")
    info = json.loads(info_line[5:])
    assert parse_file(conf)["max_payload"] == info["max_payload"]
