"""Unit tests for natsd.config.flags (Go flag syntax) and natsd.config (conf -> ServerOptions)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from natsd.config import ConfigError, apply_config, load_config
from natsd.config.flags import FlagError, build_options, parse_args
from natsd.config.options import ServerOptions
from natsd.config.parse import parse

# ------------------------------------------------------------------ parse_args


@pytest.mark.parametrize(
    "argv",
    [
        ["-p", "4333"],
        ["-p=4333"],
        ["--p", "4333"],
        ["--port=4333"],
        ["--port", "4333"],
        ["-port", "4333"],
    ],
)
def test_port_flag_forms(argv: list[str]) -> None:
    assert parse_args(argv).explicit == {"port": 4333}


def test_value_may_start_with_dash() -> None:
    assert parse_args(["--port", "-1"]).explicit == {"port": -1}
    assert parse_args(["-p", "-1"]).explicit == {"port": -1}
    assert parse_args(["-n", "-odd-name-"]).explicit == {"server_name": "-odd-name-"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-js"], True),
        (["--jetstream"], True),
        (["-js=true"], True),
        (["-js=1"], True),
        (["-js=t"], True),
        (["-js=TRUE"], True),
        (["-js=false"], False),
        (["--jetstream=0"], False),
        (["-js=F"], False),
    ],
)
def test_bool_flag_forms(argv: list[str], expected: bool) -> None:
    assert parse_args(argv).explicit == {"jetstream": expected}


def test_bool_flag_does_not_consume_next_argument() -> None:
    p = parse_args(["-js", "-p", "1"])
    assert p.explicit == {"jetstream": True, "port": 1}


def test_string_flags_with_equals() -> None:
    p = parse_args(["-sd=/x", "-a=127.0.0.1", "--name=n1", "-l=/tmp/a=b.log"])
    assert p.explicit == {
        "store_dir": "/x",
        "host": "127.0.0.1",
        "server_name": "n1",
        "log_file": "/tmp/a=b.log",
    }


def test_debug_trace_flags() -> None:
    assert parse_args(["-DV"]).explicit == {"debug_trace": True}
    assert parse_args(["-D", "-V"]).explicit == {"debug": True, "trace": True}
    assert parse_args(["--debug", "--trace"]).explicit == {"debug": True, "trace": True}


def test_config_version_help_test_flags() -> None:
    p = parse_args(["-c", "/etc/nats.conf", "-t"])
    assert p.config_file == "/etc/nats.conf"
    assert p.test_config and not p.show_help and not p.show_version
    assert p.explicit == {}
    assert parse_args(["-v"]).show_version
    assert parse_args(["--version"]).show_version
    assert parse_args(["-h"]).show_help
    assert parse_args(["--help"]).show_help
    assert parse_args([]).config_file == ""


def test_ignored_compat_flags_accepted() -> None:
    """-T, -s, --logtime and --syslog parse (scripts pass them) and change nothing."""
    p = parse_args(["-T", "-s", "--logtime=false", "--syslog"])
    assert p.config_file == ""
    assert not (p.show_help or p.show_version or p.test_config or p.signal)
    assert set(p.explicit) <= {"ignored_bool"}
    opts, warnings = build_options(p)
    assert warnings == []
    assert opts == ServerOptions()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-bogus"], "flag provided but not defined: -bogus"),
        (["--nope=1"], "flag provided but not defined: -nope"),
        (["-p"], "flag needs an argument: -p"),
        (["-p", "abc"], "invalid value"),
        (["-p="], "invalid value"),
        (["-js=maybe"], "invalid boolean value"),
        (["positional"], "unexpected argument"),
        (["-p", "1", "extra"], "unexpected argument"),
        (["-"], "unexpected argument"),
    ],
)
def test_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError, match=message):
        parse_args(argv)


def test_flag_error_is_value_error() -> None:
    assert issubclass(FlagError, ValueError)


def test_int_flag_accepts_go_base_prefixes() -> None:
    assert parse_args(["-p", "0x1F90"]).explicit == {"port": 8080}


# ------------------------------------------------------------------ build_options


def test_build_options_defaults() -> None:
    opts, warnings = build_options(parse_args([]))
    assert warnings == []
    assert opts == ServerOptions()


def test_build_options_flags_only() -> None:
    opts, _ = build_options(
        parse_args(
            [
                "--port",
                "-1",
                "-js",
                "-sd=/data",
                "-m",
                "8222",
                "-DV",
                "--max_payload=2048",
                "--ping_interval=30s",
                "--user",
                "u",
                "--pass",
                "p",
                "--auth",
                "tok",
                "-n",
                "srv",
                "-a",
                "127.0.0.1",
                "--no_auth_user",
                "u",
            ]
        )
    )
    assert opts.port == 0  # -1 means a random port
    assert opts.jetstream is True
    assert opts.js.store_dir == "/data"
    assert opts.http_port == 8222
    assert opts.debug and opts.trace
    assert opts.max_payload == 2048
    assert opts.ping_interval == 30.0
    assert [(u.username, u.password, u.account) for u in opts.users] == [("u", "p", "$G")]
    assert opts.token == "tok"
    assert opts.server_name == "srv"
    assert opts.host == "127.0.0.1"
    assert opts.no_auth_user == "u"


CONF = """\
# natsd test configuration
listen: 127.0.0.1:4333
http: "localhost:8333"
server_name: from_conf
max_payload: 2MB
debug: false
ping_interval: "2m"
jetstream {
  store_dir: "/conf/js"
  max_mem: 1G
  max_file: 10GB
}
authorization {
  users = [
    {user: alice, password: a1}
    {user: bob, password: b1, permissions: {publish: "foo.>"}}
  ]
}
"""


def test_build_options_config_then_flags_override(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(CONF)
    opts, warnings = build_options(
        parse_args(
            [
                *("-c", str(conf), "-p", "5555", "-sd=/flag/js", "-D"),
                *("--user", "alice", "--pass", "new"),
            ]
        )
    )
    assert warnings == []
    assert opts.config_file == str(conf)
    # From the file.
    assert opts.host == "127.0.0.1"
    assert opts.http_host == "localhost" and opts.http_port == 8333
    assert opts.server_name == "from_conf"
    assert opts.max_payload == 2 * 1024 * 1024
    assert opts.ping_interval == 120.0
    assert opts.jetstream is True
    assert opts.js.max_memory == 1_000_000_000
    assert opts.js.max_file == 10 * 1024**3
    # Flags win.
    assert opts.port == 5555
    assert opts.js.store_dir == "/flag/js"
    assert opts.debug is True
    users = {u.username: u for u in opts.users}
    assert set(users) == {"alice", "bob"}
    assert users["alice"].password == "new"
    assert users["bob"].password == "b1"
    assert users["bob"].permissions is not None


def test_build_options_flag_can_disable_conf_jetstream(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text("jetstream: enabled\nport: 4000\n")
    opts, _ = build_options(parse_args(["-c", str(conf), "-js=false"]))
    assert opts.jetstream is False
    assert opts.port == 4000


def test_build_options_reports_config_warnings(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text("port: 4000\nlogtime: false\n")
    opts, warnings = build_options(parse_args(["-c", str(conf)]))
    assert opts.port == 4000
    assert warnings == [f'{conf}:2: config key "logtime" has no effect in natsd and was ignored']


def test_build_options_refuses_unsupported_config_keys(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text("port: 4000\nhttp_base_path: /x\n")
    with pytest.raises(ConfigError) as ei:
        build_options(parse_args(["-c", str(conf)]))
    assert str(ei.value) == f'{conf}:2: config key "http_base_path" is not supported by natsd yet'


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017 - confparse.ConfigError or OSError
        load_config(str(tmp_path / "missing.conf"))


# ------------------------------------------------------------------ apply_config


def apply(text: str) -> tuple[ServerOptions, list[str]]:
    opts = ServerOptions()
    warnings = apply_config(opts, parse(text))
    return opts, warnings


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("listen: 127.0.0.1:4333", "127.0.0.1", 4333),
        ("listen: 4333", "0.0.0.0", 4333),
        ("listen: '4333'", "0.0.0.0", 4333),
        ("listen: ':4333'", "0.0.0.0", 4333),
        ("listen: 'localhost'", "localhost", 4222),
        ("listen: '[::1]:4333'", "::1", 4333),
        ("host: 10.0.0.1\nport: 1234", "10.0.0.1", 1234),
        ("net: 10.0.0.2", "10.0.0.2", 4222),
        ("port: -1", "0.0.0.0", -1),
    ],
)
def test_listen(text: str, host: str, port: int) -> None:
    opts, warnings = apply(text)
    assert warnings == []
    assert (opts.host, opts.port) == (host, port)


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("http: 8222", "0.0.0.0", 8222),
        ("http: localhost:8333", "localhost", 8333),
        ("http_port: 8444", "0.0.0.0", 8444),
        ("monitor_port: 8555", "0.0.0.0", 8555),
        ("http_host: 127.0.0.1\nhttp_port: -1", "127.0.0.1", -1),
    ],
)
def test_http(text: str, host: str, port: int) -> None:
    opts, warnings = apply(text)
    assert warnings == []
    assert (opts.http_host, opts.http_port) == (host, port)


def test_limits_and_durations() -> None:
    opts, warnings = apply(
        "max_payload: 512KB\nmax_control_line: 8192\nmax_pending: 10MB\nmax_connections: 100\n"
        "max_subscriptions: 50\nping_interval: '1m30s'\nping_max: 5\nwrite_deadline: '5s'\n"
        "lame_duck_duration: 30\n"
    )
    assert warnings == []
    assert opts.max_payload == 512 * 1024
    assert opts.max_control_line == 8192
    assert opts.max_pending == 10 * 1024 * 1024
    assert opts.max_connections == 100
    assert opts.max_subs == 50
    assert opts.ping_interval == 90.0
    assert opts.ping_max == 5
    assert opts.write_deadline == 5.0
    assert opts.lame_duck_duration == 30.0


def test_bad_values_raise_config_error() -> None:
    with pytest.raises(ConfigError):
        apply("max_payload: 'lots'")
    with pytest.raises(ConfigError):
        apply("port: true")
    with pytest.raises(ConfigError):
        apply("ping_interval: 'soon'")
    with pytest.raises(ConfigError):
        apply("authorization: 5")
    with pytest.raises(ConfigError):
        apply("accounts: [1, 2]")
    with pytest.raises(ConfigError):
        apply("jetstream: [1]")
    with pytest.raises(ConfigError):
        apply("authorization { users: {user: a} }")
    with pytest.raises(ConfigError):
        apply("authorization { users: [ {password: x} ] }")
    with pytest.raises(ConfigError, match="nkey"):
        apply("authorization { users: [ {nkey: UABC} ] }")


def test_authorization_single_user_with_permissions() -> None:
    opts, warnings = apply(
        "authorization { user: admin, password: s3cret, timeout: 3,"
        " permissions: { publish: { allow: ['a.>'], deny: 'a.b' }, subscribe: 'x' } }"
    )
    assert warnings == []
    (u,) = opts.users
    assert (u.username, u.password, u.account) == ("admin", "s3cret", "$G")
    assert u.permissions is not None and u.permissions.publish is not None
    assert u.permissions.publish.allowed(b"a.c") and not u.permissions.publish.allowed(b"a.b")
    assert opts.auth_timeout == 3.0


def test_authorization_users_and_token() -> None:
    opts, _ = apply(
        """
        authorization {
          token: "t0k"
          timeout: "1.5s"
          users = [
            {user: a, password: pa}
            {username: b, pass: pb, permissions: {subscribe: {deny: ">"}}}
          ]
        }
        """
    )
    assert opts.token == "t0k"
    assert opts.auth_timeout == 1.5
    assert [(u.username, u.password, u.account) for u in opts.users] == [
        ("a", "pa", "$G"),
        ("b", "pb", "$G"),
    ]
    assert opts.users[1].permissions is not None
    assert opts.users[1].permissions.subscribe is not None


def test_authorization_refused_and_unknown_keys_are_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        apply("authorization { token: x, nkeys: [], auth_callout: {} }")
    assert str(ei.value).splitlines() == [
        '<string>:1: unknown field "nkeys" in authorization',
        '<string>:1: config key "authorization.auth_callout" is not supported by natsd yet',
    ]


def test_accounts_with_users_and_jetstream_limits() -> None:
    opts, warnings = apply(
        """
        accounts {
          A: {
            users: [
              {user: a1, password: p1}
              {user: a2, password: p2, permissions: {publish: "x"}}
            ]
            jetstream: { max_mem: 1G, max_file: 10G, Max_Streams: 5 }
          }
          B: { users: [ {user: b1, password: p1} ], jetstream: enabled }
          C: { jetstream: disabled }
          D: {}
        }
        no_auth_user: a1
        """
    )
    assert warnings == []
    assert set(opts.accounts) == {"A", "B", "C", "D"}
    # Stored under the names account info reports.
    assert opts.accounts["A"].jetstream == {
        "max_memory": 1_000_000_000,
        "max_storage": 10_000_000_000,
        "max_streams": 5,
    }
    assert opts.accounts["B"].jetstream == {}
    assert opts.accounts["C"].jetstream is None
    assert opts.accounts["D"].jetstream is None
    assert [(u.username, u.account) for u in opts.users] == [("a1", "A"), ("a2", "A"), ("b1", "B")]
    assert opts.users[1].permissions is not None
    assert opts.no_auth_user == "a1"


def test_accounts_refused_key_is_an_error() -> None:
    with pytest.raises(ConfigError) as ei:
        apply("accounts { A: { mappings: { foo: bar }, users: [] } }")
    assert str(ei.value) == (
        '<string>:1: config key "accounts.A.mappings" is not supported by natsd yet'
    )


def test_jetstream_block() -> None:
    opts, warnings = apply(
        "jetstream { store_dir: '/js', max_memory_store: 2GB, max_file_store: 1T, domain: hub,"
        " sync_interval: '10s' }"
    )
    assert warnings == []
    assert opts.jetstream is True
    assert opts.js.store_dir == "/js"
    assert opts.js.max_memory == 2 * 1024**3
    assert opts.js.max_file == 1000**4
    assert opts.js.domain == "hub"
    assert opts.js.sync_interval == 10.0
    assert opts.js.sync_always is False


def test_jetstream_sync_always_and_disabled_block() -> None:
    opts, _ = apply("jetstream { store: '/js', sync_interval: always, enabled: false }")
    assert opts.js.sync_always is True
    assert opts.js.store_dir == "/js"
    assert opts.jetstream is False


@pytest.mark.parametrize(
    ("text", "enabled"),
    [
        ("jetstream: true", True),
        ("jetstream: enabled", True),
        ("jetstream: enable", True),
        ("jetstream: false", False),
        ("jetstream: disabled", False),
        ("jetstream: {}", True),
    ],
)
def test_jetstream_scalar_forms(text: str, enabled: bool) -> None:
    opts, warnings = apply(text)
    assert warnings == []
    assert opts.jetstream is enabled


def test_jetstream_refused_keys_are_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        apply("jetstream { store_dir: /js, cipher: aes, limits: {} }")
    assert str(ei.value).splitlines() == [
        '<string>:1: config key "jetstream.cipher" is not supported by natsd yet',
        '<string>:1: config key "jetstream.limits" is not supported by natsd yet',
    ]


def test_refused_top_level_keys_are_errors_and_cosmetic_keys_warn() -> None:
    with pytest.raises(ConfigError) as ei:
        apply(
            "cluster { port: 6222 }\nleafnodes {}\ngateway {}\nlogtime: true\nsyslog: false\n"
            "max_traced_msg_len: 100\nport: 4999\n"
        )
    # cluster {} is read and checked here; build_options refuses it after the flags
    # (tests/unit/test_config_cluster.py).
    assert [line.split('"')[1] for line in str(ei.value).splitlines()] == [
        "leafnodes",
        "gateway",
    ]
    opts, warnings = apply("logtime: true\nsyslog: false\nmax_traced_msg_len: 100\nport: 4999\n")
    assert opts.port == 4999
    assert [w.split('"')[1] for w in warnings] == ["logtime", "syslog", "max_traced_msg_len"]


def test_keys_are_case_insensitive() -> None:
    opts, warnings = apply("Listen: 127.0.0.1:1111\nMAX_PAYLOAD: 100\nDebug: true\nTrace: true\n")
    assert warnings == []
    assert (opts.host, opts.port, opts.max_payload) == ("127.0.0.1", 1111, 100)
    assert opts.debug and opts.trace


def test_logging_files() -> None:
    opts, warnings = apply("log_file: /var/log/n.log\npid_file: /run/n.pid")
    assert warnings == []
    assert opts.log_file == "/var/log/n.log" and opts.pid_file == "/run/n.pid"
    opts, _ = apply("logfile: a\npidfile: b")
    assert (opts.log_file, opts.pid_file) == ("a", "b")


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--tlscert", "c.pem", "--tlskey", "k.pem"],
            "--tlscert --tlskey need --tls or --tlsverify",
        ),
        (["--tls", "--tlskey", "k.pem"], "TLS Server certificate must be present and valid"),
        (["--tls", "--tlscert", "c.pem"], "TLS Server private key must be present and valid"),
    ],
)
def test_tls_flags_are_checked(argv: list[str], error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        build_options(parse_args(argv))


def test_tls_flags_make_the_tls_block(tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    cert, key, cafile = tmp_path / "c.pem", tmp_path / "k.pem", tmp_path / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(cafile))
    argv = ["--tlsverify", "--tlscert", str(cert), "--tlskey", str(key), "--tlscacert", str(cafile)]
    opts, _ = build_options(parse_args(argv))
    assert opts.tls is not None and opts.tls.verify
    assert (opts.tls.cert_file, opts.tls.key_file, opts.tls.ca_file) == (
        str(cert),
        str(key),
        str(cafile),
    )
