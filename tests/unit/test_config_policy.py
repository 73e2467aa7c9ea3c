"""The configuration policy: every key at every level natsd reads is honoured, warned about
(cosmetic), refused with a start-up error naming it, or unknown (an error, as nats-server)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from natsd.config import ConfigError, apply_config
from natsd.config import policy as P
from natsd.config.options import ServerOptions
from natsd.config.parse import parse
from natsd.main import main
from natsd.security.permissions import ResponsePermission

# How to write `key: value` at each level, and the path natsd names it by.
PLACES: dict[str, tuple[str, str]] = {
    P.TOP.name: ("{kv}", "{k}"),
    P.AUTHORIZATION.name: ("authorization {{ {kv} }}", "authorization.{k}"),
    P.USER.name: (
        "authorization {{ users: [ {{ user: u, {kv} }} ] }}",
        "authorization.users[0].{k}",
    ),
    P.PERMISSIONS.name: (
        "authorization {{ users: [ {{ user: u, permissions: {{ {kv} }} }} ] }}",
        "authorization.users[0].permissions.{k}",
    ),
    P.SUBJECT_PERMISSION.name: (
        "authorization {{ users: [ {{ user: u, permissions: {{ publish: {{ {kv} }} }} }} ] }}",
        "authorization.users[0].permissions.publish.{k}",
    ),
    P.TLS.name: ("tls {{ {kv} }}", "tls.{k}"),
    P.ALLOW_RESPONSES.name: (
        "authorization {{ users: [ {{ user: u,"
        " permissions: {{ allow_responses: {{ {kv} }} }} }} ] }}",
        "authorization.users[0].permissions.allow_responses.{k}",
    ),
    P.ACCOUNT.name: ("accounts {{ A: {{ {kv} }} }}", "accounts.A.{k}"),
    P.EXPORT.name: ("accounts {{ A: {{ exports: [ {{ {kv} }} ] }} }}", "accounts.A.exports[0].{k}"),
    P.IMPORT.name: ("accounts {{ A: {{ imports: [ {{ {kv} }} ] }} }}", "accounts.A.imports[0].{k}"),
    P.IMPORT_ACCOUNT.name: (
        "accounts {{ A: {{ imports: [ {{ stream: {{ account: A, subject: s, {kv} }} }} ] }} }}",
        "accounts.A.imports[0].stream.{k}",
    ),
    P.ACCOUNT_JETSTREAM.name: (
        "accounts {{ A: {{ jetstream: {{ {kv} }} }} }}",
        "accounts.A.jetstream.{k}",
    ),
    P.JETSTREAM.name: ("jetstream {{ {kv} }}", "jetstream.{k}"),
    P.CLUSTER.name: ("cluster {{ {kv} }}", "cluster.{k}"),
    P.CLUSTER_AUTHORIZATION.name: (
        "cluster {{ authorization {{ {kv} }} }}",
        "cluster.authorization.{k}",
    ),
}


def place(level: P.Level, key: str, value: str = "1") -> tuple[str, str]:
    text, path = PLACES[level.name]
    return text.format(kv=f"{key}: {value}") + "\n", path.format(k=key)


def keys_of(table: str) -> list[tuple[P.Level, str]]:
    return [(lv, k) for lv in P.LEVELS for k in sorted(getattr(lv, table))]


def ids(item: tuple[P.Level, str]) -> str:
    return f"{item[0].name}:{item[1]}"


def apply(text: str) -> tuple[ServerOptions, list[str]]:
    opts = ServerOptions()
    return opts, apply_config(opts, parse(text))


def test_every_level_has_a_place() -> None:
    assert set(PLACES) == {lv.name for lv in P.LEVELS}


# ------------------------------------------------------------------ refused


@pytest.mark.parametrize(("level", "key"), keys_of("refused"), ids=map(ids, keys_of("refused")))
def test_refused_key_is_a_startup_error_naming_it(
    level: P.Level, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, path = place(level, key)
    with pytest.raises(ConfigError) as ei:
        apply(text)
    assert str(ei.value) == f'<string>:1: config key "{path}" is not supported by natsd yet'
    # The console command: exit 1, with -t too, one line naming the key and its line.
    conf = tmp_path / "f.conf"
    conf.write_text(text)
    for argv in (["-c", str(conf), "-t"], ["-c", str(conf), "-p", "-1"]):
        assert main(argv) == 1
        out = capsys.readouterr()
        assert out.out == ""
        assert out.err == f'natsd: {conf}:1: config key "{path}" is not supported by natsd yet\n'


def test_refusals_are_reported_together_each_on_its_line(tmp_path: Path) -> None:
    text = (
        "port: 4222\n"
        "http_base_path: /x\n"
        "jetstream {\n  store_dir: /x\n  cipher: aes\n  key: k\n}\n"
        "authorization { users: [ { user: u, proxy_required: true } ] }\n"
        "what: 1\n"
    )
    with pytest.raises(ConfigError) as ei:
        apply(text)
    assert str(ei.value).splitlines() == [
        '<string>:2: config key "http_base_path" is not supported by natsd yet',
        '<string>:5: config key "jetstream.cipher" is not supported by natsd yet',
        '<string>:6: config key "jetstream.key" is not supported by natsd yet',
        '<string>:8: config key "authorization.users[0].proxy_required" is not supported by'
        " natsd yet",
        '<string>:9: unknown field "what"',
    ]


def test_refused_key_in_an_included_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "tls.conf").write_text("# HTTP\nhttp_base_path: /x\n")
    main_conf = tmp_path / "main.conf"
    main_conf.write_text("port: 4222\ninclude tls.conf\n")
    with pytest.raises(
        ConfigError, match=r"tls\.conf:2: config key \"http_base_path\" is not supported"
    ):
        from natsd.config import load_config

        load_config(str(main_conf))


@pytest.mark.parametrize("value", ["false", "no"])
def test_jetstream_strict_false_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match=r'"jetstream\.strict" is not supported by natsd yet'):
        apply(f"jetstream {{ strict: {value} }}")
    opts, warnings = apply("jetstream { strict: true }")
    assert warnings == [] and opts.jetstream


# ------------------------------------------------------------------ cosmetic


@pytest.mark.parametrize(("level", "key"), keys_of("cosmetic"), ids=map(ids, keys_of("cosmetic")))
def test_cosmetic_key_warns_once_and_starts(level: P.Level, key: str) -> None:
    text, path = place(level, key)
    opts, warnings = apply(text)
    assert warnings == [f'<string>:1: config key "{path}" has no effect in natsd and was ignored']
    reference, _ = apply(PLACES[level.name][0].format(kv=""))
    assert opts == reference


def test_cosmetic_key_warning_through_the_console_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text("port: 4222\nlogtime: true\n")
    assert main(["-c", str(conf), "-t"]) == 0
    out = capsys.readouterr()
    assert out.err == (
        f'natsd: warning: {conf}:2: config key "logtime" has no effect in natsd and was ignored\n'
    )
    assert f"configuration file {conf} test is successful" in out.out


# ------------------------------------------------------------------ unknown


@pytest.mark.parametrize("level", P.LEVELS, ids=lambda lv: lv.name)
def test_unknown_key_is_an_error_at_every_level(level: P.Level) -> None:
    text, path = place(level, "no_such_key")
    where = path.rpartition(".")[0]
    with pytest.raises(ConfigError) as ei:
        apply(text)
    assert str(ei.value) == '<string>:1: unknown field "no_such_key"' + (
        f" in {where}" if where else ""
    )


def test_keys_used_as_variables_are_not_unknown() -> None:
    opts, warnings = apply(
        "TOKEN: s3cret\nPORT: 4333\nport: $PORT\nauthorization { token: $TOKEN }\n"
        "accounts { LIMITS: { max_streams: 3 }\n  A: { jetstream: $LIMITS } }\n"
        "jetstream { DIR: /js\n store_dir: $DIR }\n"
    )
    assert warnings == []
    assert (opts.port, opts.token, opts.js.store_dir) == (4333, "s3cret", "/js")
    assert set(opts.accounts) == {"A"}
    assert opts.accounts["A"].jetstream == {"max_streams": 3}
    # Defined and never used: an unknown field, as in nats-server.
    with pytest.raises(ConfigError, match='unknown field "TOKEN"'):
        apply("TOKEN: s3cret\n")


# ------------------------------------------------------------------ supported

# A value for each supported key and what it must change (no supported key may be read
# and then dropped).
SAMPLES: dict[tuple[str, str], str] = {
    (P.TOP.name, "listen"): "127.0.0.1:4333",
    (P.TOP.name, "host"): "10.0.0.1",
    (P.TOP.name, "net"): "10.0.0.1",
    (P.TOP.name, "addr"): "10.0.0.1",
    (P.TOP.name, "server_name"): "srv",
    (P.TOP.name, "server_tags"): "[ssd, \"az:1\"]",
    (P.TOP.name, "name"): "srv",
    (P.TOP.name, "http"): "8333",
    (P.TOP.name, "http_host"): "127.0.0.1",
    (P.TOP.name, "ping_interval"): '"3s"',
    (P.TOP.name, "write_deadline"): '"3s"',
    (P.TOP.name, "lame_duck_duration"): '"30s"',
    (P.TOP.name, "lame_duck_grace_period"): '"3s"',
    (P.TOP.name, "authorization"): "{ token: t }",
    (P.TOP.name, "no_auth_user"): "u",
    (P.TOP.name, "accounts"): "{ A: {} }",
    (P.TOP.name, "jetstream"): "enabled",
    (P.TOP.name, "store_dir"): "/js",
    (P.TOP.name, "storedir"): "/js",
    (P.TOP.name, "debug"): "true",
    (P.TOP.name, "trace"): "true",
    (P.TOP.name, "trace_verbose"): "true",
    (P.TOP.name, "trace_headers"): "true",
    (P.TOP.name, "log_file"): "/tmp/n.log",
    (P.TOP.name, "logfile"): "/tmp/n.log",
    (P.TOP.name, "pid_file"): "/tmp/n.pid",
    (P.TOP.name, "pidfile"): "/tmp/n.pid",
    (P.TOP.name, "cluster"): '{ name: c, listen: "127.0.0.1:6222" }',
    (P.TOP.name, "allow_non_tls"): "true",
    (P.AUTHORIZATION.name, "user"): "u",
    (P.AUTHORIZATION.name, "username"): "u",
    (P.AUTHORIZATION.name, "pass"): "p",
    (P.AUTHORIZATION.name, "password"): "p",
    (P.AUTHORIZATION.name, "token"): "t",
    (P.AUTHORIZATION.name, "users"): "[ {user: u} ]",
    (P.JETSTREAM.name, "enable"): "false",
    (P.JETSTREAM.name, "enabled"): "false",
    (P.JETSTREAM.name, "store"): "/js",
    (P.JETSTREAM.name, "store_dir"): "/js",
    (P.JETSTREAM.name, "storedir"): "/js",
    (P.JETSTREAM.name, "sync"): "always",
    (P.JETSTREAM.name, "sync_interval"): '"10s"',
    (P.JETSTREAM.name, "domain"): "hub",
}
# Keys that change nothing on their own, each tested with what they need elsewhere.
ALONE_NO_CHANGE = {
    (P.TOP.name, "tls"),  # needs certificate files: tests/unit/test_tls_config.py
    (P.JETSTREAM.name, "strict"),  # test_jetstream_strict_false_is_refused
    (P.AUTHORIZATION.name, "pass"),  # a password without a user: test_user_spellings
    (P.AUTHORIZATION.name, "password"),
    # default permissions for no users: test_default_permissions_apply_...
    (P.AUTHORIZATION.name, "permissions"),
    (P.AUTHORIZATION.name, "default_permission"),
    (P.AUTHORIZATION.name, "default_permissions"),
}


def supported_keys() -> list[tuple[P.Level, str]]:
    levels = (P.TOP, P.AUTHORIZATION, P.JETSTREAM)
    return [
        (lv, k)
        for lv in levels
        for k in sorted(lv.supported | lv.natsd_only)
        if (lv.name, k) not in ALONE_NO_CHANGE
    ]


@pytest.mark.parametrize(("level", "key"), supported_keys(), ids=map(ids, supported_keys()))
def test_supported_key_changes_the_options(level: P.Level, key: str) -> None:
    value = SAMPLES.get((level.name, key), "7")
    text, _ = place(level, key, value)
    base = ServerOptions()
    if level is P.JETSTREAM:
        # Against the same block without the key: only `key` may change anything.
        if key in ("enable", "enabled"):
            base, _ = apply("jetstream {}")
        else:
            text = text.replace("{ ", "{ enabled: false, ")
            base, _ = apply("jetstream { enabled: false }")
    opts, warnings = apply(text)
    assert warnings == []
    assert dataclasses.asdict(opts) != dataclasses.asdict(base), key


@pytest.mark.parametrize(
    "key", sorted(P.ACCOUNT_JETSTREAM.supported | P.ACCOUNT_JETSTREAM.natsd_only)
)
def test_every_account_jetstream_key_is_kept(key: str) -> None:
    value = "true" if key in ("max_bytes_required", "max_stream_bytes", "max_bytes") else "7"
    opts, warnings = apply(place(P.ACCOUNT_JETSTREAM, key, value)[0])
    assert warnings == []
    (limit,) = opts.accounts["A"].jetstream.values()  # type: ignore[union-attr]
    assert limit == (True if value == "true" else 7)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('max_streams: "5"', "Expected a parseable size for \"max_streams\", got '5'"),
        ("max_mem: true", 'Expected a parseable size for "max_mem", got True'),
        ("max_bytes_required: 1", 'Expected a parseable bool for "max_bytes_required", got 1'),
    ],
)
def test_account_jetstream_values_are_typed_as_nats_server(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as ei:
        apply(f"accounts {{ A: {{ jetstream: {{ {text} }} }} }}")
    assert str(ei.value) == f"accounts.A.jetstream: {error}"


@pytest.mark.parametrize("key", ["permissions", "default_permission", "default_permissions"])
def test_default_permissions_apply_to_users_without_their_own(key: str) -> None:
    opts, _ = apply(
        f"authorization {{ {key}: {{ publish: 'a.>' }}, users: [ {{user: x}}, "
        "{user: y, permissions: { publish: 'b' }} ] }\n"
        "accounts { A: { default_permissions: { subscribe: { deny: '>' } },"
        " users: [ {user: z} ] } }"
    )
    perms = {u.username: u.permissions for u in opts.users}
    assert perms["x"] is not None and perms["x"].publish is not None
    assert perms["x"].publish.allowed(b"a.b") and not perms["x"].publish.allowed(b"b")
    assert perms["y"] is not None and perms["y"].publish is not None
    assert perms["y"].publish.allowed(b"b") and not perms["y"].publish.allowed(b"a.b")
    assert perms["z"] is not None and perms["z"].subscribe is not None
    assert perms["z"].subscribe.denied(b"anything")


@pytest.mark.parametrize("name", ["user", "username"])
@pytest.mark.parametrize("pw", ["pass", "password"])
@pytest.mark.parametrize("perm", ["permission", "permissions", "authorization"])
def test_user_spellings(name: str, pw: str, perm: str) -> None:
    opts, warnings = apply(
        f"authorization {{ {name}: solo, {pw}: s1 }}\n"
        f"accounts {{ A: {{ users: [ {{ {name}: x, {pw}: p1, {perm}: {{ publish: 'a' }} }} ] }} }}"
    )
    assert warnings == []
    solo, x = opts.users
    assert (solo.username, solo.password, solo.account) == ("solo", "s1", "$G")
    assert (x.username, x.password, x.account) == ("x", "p1", "A")
    assert x.permissions is not None and x.permissions.publish is not None
    assert x.permissions.publish.allow == ["a"]


def test_permission_keys_are_case_insensitive() -> None:
    opts, _ = apply(
        "authorization { users: [ {user: x,"
        " Permissions: { PUBLISH: { Allow: 'a', DENY: 'a.b' } } } ] }"
    )
    (u,) = opts.users
    assert u.permissions is not None and u.permissions.publish is not None
    assert u.permissions.publish.allowed(b"a") and not u.permissions.publish.allowed(b"c")
    assert u.permissions.publish.deny == ["a.b"]


def test_permission_aliases_fold_to_one_spelling() -> None:
    opts, _ = apply(
        "authorization { users: [ {user: x, permission: { import: 'in.>', export: 'out.>',"
        " publish_allow_responses: { max_msgs: 3, ttl: '1s' } } } ] }"
    )
    (u,) = opts.users
    assert u.permissions is not None and u.permissions.publish and u.permissions.subscribe
    assert u.permissions.publish.allow == ["in.>"]
    assert u.permissions.subscribe.allow == ["out.>"]
    assert u.permissions.allow_responses == ResponsePermission(max_msgs=3, expires=1.0)


def test_accounts_as_a_list_of_names_and_reserved_names() -> None:
    opts, _ = apply("accounts: [A, B]")
    assert set(opts.accounts) == {"A", "B"}
    with pytest.raises(ConfigError, match='"\\$G" is a Reserved Account'):
        apply("accounts { $G: {} }".replace("$G", '"$G"'))


def test_store_dir_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match="Duplicate 'store_dir' configuration"):
        apply("store_dir: /a\njetstream { store_dir: /b }")


# ------------------------------------------------------------------ console command


def test_console_command_test_flag_refuses_in_a_subprocess(tmp_path: Path) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text("port: 4222\njetstream {\n  cipher: chacha\n}\n")
    res = subprocess.run(
        [sys.executable, "-m", "natsd", "-c", str(conf), "-t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == (
        f'natsd: {conf}:3: config key "jetstream.cipher" is not supported by natsd yet\n'
    )


def test_console_command_reports_a_syntax_error_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text("port: {\n")
    assert main(["-c", str(conf), "-t"]) == 1
    assert capsys.readouterr().err == (
        f"natsd: {conf}:1: unterminated map: missing '}}' before end of input\n"
    )
