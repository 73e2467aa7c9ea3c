"""``cluster {}`` and the cluster flags: read into ClusterOptions, checked with nats-server's
wording (``tests/differential/test_config_cluster.py`` runs nats-server on the same files),
then accepted now that routes are wired (the refusal stays behind ``ROUTES_WIRED``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_config_cases import FLAG_ERRORS, PARSE_ERRORS, VALIDATION_ERRORS

from natsd.config import ConfigError, apply_config
from natsd.config import cluster as C
from natsd.config.flags import FlagError, build_options, parse_args
from natsd.config.options import CompressionOptions, RouteURL, ServerOptions
from natsd.config.parse import parse
from natsd.main import main


def apply(text: str) -> tuple[ServerOptions, list[str]]:
    opts = ServerOptions()
    return opts, apply_config(opts, parse(text))


def build(tmp_path: Path, text: str | None, *flags: str) -> ServerOptions:
    argv = list(flags)
    if text is not None:
        conf = tmp_path / "f.conf"
        conf.write_text(text)
        argv = ["-c", str(conf), *argv]
    return build_options(parse_args(argv))[0]


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> None:
    """Routes are wired (ROUTES_WIRED): the checks stay, the refusal is gone."""
    monkeypatch.setattr(C, "ROUTES_WIRED", True)


@pytest.fixture
def unwired(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal, as it was before routes were wired (kept: a build may turn it back on)."""
    monkeypatch.setattr(C, "ROUTES_WIRED", False)


FULL = """
server_name: s1
cluster {
  name: east
  listen: "127.0.0.1:6222"
  routes: [
    nats-route://ruser:rpass@10.0.0.1:6222
    "nats://10.0.0.2:6222"
    "nats://[::1]:6223"
  ]
  authorization { user: ruser, password: rpass, timeout: 0.5 }
  advertise: "east.example:6222"
  no_advertise: true
  connect_retries: 5
  pool_size: 1
  compression: { mode: s2_auto, rtt_thresholds: ["10ms", "20ms"] }
}
"""
# FULL as natsd can run it: every key, but a compression mode natsd honours (it refuses s2).
RUNNABLE = FULL.replace(
    'compression: { mode: s2_auto, rtt_thresholds: ["10ms", "20ms"] }', "compression: accept"
)


# ------------------------------------------------------------------ parsing
def test_a_full_block_is_read_into_cluster_options() -> None:
    opts, warnings = apply(FULL)
    assert warnings == []
    c = opts.cluster
    assert c.origin == "<string>:3: "
    assert (c.name, c.host, c.port) == ("east", "127.0.0.1", 6222)
    assert c.routes == [
        RouteURL(
            "nats-route://ruser:rpass@10.0.0.1:6222",
            "nats-route",
            "10.0.0.1",
            6222,
            "ruser",
            "rpass",
        ),
        RouteURL("nats://10.0.0.2:6222", "nats", "10.0.0.2", 6222),
        RouteURL("nats://[::1]:6223", "nats", "::1", 6223),
    ]
    assert (c.username, c.password, c.auth_timeout) == ("ruser", "rpass", 0.5)
    assert (c.advertise, c.no_advertise, c.connect_retries, c.pool_size) == (
        "east.example:6222",
        True,
        5,
        1,
    )
    assert c.compression == CompressionOptions("s2_auto", [0.010, 0.020])


def test_no_cluster_block_means_no_cluster() -> None:
    opts, _ = apply("port: 4222\n")
    assert opts.cluster.origin == "" and opts.cluster.port == 0


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("listen: 6222", "", 6222),
        ('listen: "0.0.0.0:6222"', "0.0.0.0", 6222),
        ('listen: "[::1]:-1"', "::1", -1),
        ("host: 127.0.0.1, port: 7000", "127.0.0.1", 7000),
        ("net: 10.1.1.1, port: 7000", "10.1.1.1", 7000),
    ],
)
def test_listen_host_port(text: str, host: str, port: int) -> None:
    opts, _ = apply(f"cluster {{ {text} }}")
    assert (opts.cluster.host, opts.cluster.port) == (host, port)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("accept", "accept"),
        ("off", "off"),
        ("true", "s2_fast"),
        ("false", "off"),
        ('{ mode: "s2_best" }', "s2_best"),
    ],
)
def test_compression_forms(value: str, mode: str) -> None:
    opts, _ = apply(f"cluster {{ compression: {value} }}")
    assert opts.cluster.compression.mode == mode


def test_cluster_advertise_spelling_and_token_timeout() -> None:
    opts, _ = apply('cluster { cluster_advertise: "h:1", authorization { timeout: "2s" } }')
    assert (opts.cluster.advertise, opts.cluster.auth_timeout) == ("h:1", 2.0)


def test_duplicate_route_is_a_warning_and_kept_once() -> None:
    opts, warnings = apply('cluster { routes: ["nats://a:1", "nats://a:1"] }')
    assert [r.raw for r in opts.cluster.routes] == ["nats://a:1"]
    assert warnings == [
        '<string>:1: invalid use of field "nats://a:1": Duplicate route entry detected'
    ]


# ------------------------------------------------------------------ nats-server's checks
@pytest.mark.parametrize(("text", "error"), PARSE_ERRORS, ids=[e for _, e in PARSE_ERRORS])
def test_parse_checks(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as ei:
        apply(text)
    assert str(ei.value) == f"<string>:1: {error}"


@pytest.mark.parametrize(
    ("text", "error"), VALIDATION_ERRORS, ids=[e for _, e in VALIDATION_ERRORS]
)
def test_validation_checks_come_before_the_refusal(
    text: str, error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    apply(text)  # the file itself parses
    conf = tmp_path / "f.conf"
    conf.write_text(text + "\n")
    for argv in (["-c", str(conf), "-t"], ["-c", str(conf), "-p", "-1"]):
        assert main(argv) == 1
        assert capsys.readouterr().err == f"natsd: {error}\n"


def test_every_error_is_reported_together() -> None:
    with pytest.raises(ConfigError) as ei:
        apply(
            'cluster {\n  name: "a b"\n  foo: 1\n  authorization { token: t }\n'
            "  tls: {}\n  permissions: {}\n}"
        )
    assert str(ei.value).splitlines() == [
        "<string>:2: cluster name cannot contain spaces",
        '<string>:3: unknown field "foo" in cluster',
        "<string>:4: Cluster authorization does not support tokens",
        # natsd cannot make a route's TLS without a certificate (nats-server starts, and
        # then fails every route handshake)
        "<string>:5: missing 'cert_file' in TLS configuration",
        '<string>:6: config key "cluster.permissions" is not supported by natsd yet',
    ]


def test_jetstream_cluster_checks_see_the_flags(tmp_path: Path, wired: None) -> None:
    text = "cluster { port: -1 }\njetstream: enabled\n"
    with pytest.raises(ConfigError, match="requires `server_name`"):
        build(tmp_path, text)
    # With the flags nats-server's checks pass; natsd then needs routes to form its meta
    # group from.
    with pytest.raises(ConfigError, match=r"needs a cluster port and `cluster\.routes`"):
        build(tmp_path, text, "-n", "s1", "--cluster_name", "c1")
    with_routes = "cluster { port: -1, routes: [nats://127.0.0.1:4248] }\njetstream: enabled\n"
    assert build(tmp_path, with_routes, "-n", "s1", "--cluster_name", "c1").jetstream
    opts = build(tmp_path, "cluster { port: -1 }\n", "-n", "s1", "--cluster_name", "c1")
    assert (opts.server_name, opts.cluster.name) == ("s1", "c1")
    routes_only = "cluster { name: c, routes: [nats://127.0.0.1:4248] }\njetstream: enabled\n"
    with pytest.raises(ConfigError, match=r"needs a cluster port and `cluster\.routes`"):
        build(tmp_path, routes_only, "-n", "s1")
    # Without a route port there is no JetStream cluster to check (nats-server: Port == 0).
    assert build(tmp_path, "cluster { name: c }\njetstream: enabled\n").jetstream


def test_compression_is_normalised_and_s2_refused(tmp_path: Path, wired: None) -> None:
    # validateAndNormalizeCompressionOption's rules...
    c = CompressionOptions("auto")
    C._normalize_compression(c)
    assert c == CompressionOptions("s2_auto", [0.010, 0.050, 0.100])
    c = CompressionOptions("auto", [0.005, 0.0, 0.0])
    C._normalize_compression(c)
    assert c.rtt_thresholds == [0.005]
    c = CompressionOptions("ON")
    C._normalize_compression(c)
    assert c.mode == "s2_fast"
    # ...then natsd, which does not compress routes, refuses every s2 mode.
    s2_modes = ("cluster { port: -1, compression: { mode: auto } }", "cluster { compression: ON }")
    for text in s2_modes:
        with pytest.raises(ConfigError, match="does not support route compression yet"):
            build(tmp_path, text)
    assert build(tmp_path, "cluster { compression: accept }").cluster.compression.mode == "accept"
    assert build(tmp_path, "cluster { compression: off }").cluster.compression.mode == "off"


def test_route_pooling_is_refused(tmp_path: Path, wired: None) -> None:
    with pytest.raises(ConfigError, match="does not support route pooling yet"):
        build(tmp_path, "cluster { port: -1, pool_size: 3 }")
    for n in (-1, 1):
        assert build(tmp_path, f"cluster {{ port: -1, pool_size: {n} }}").cluster.pool_size == n


# ------------------------------------------------------------------ the refusal
def test_a_valid_cluster_passes_the_config_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text(RUNNABLE)
    assert main(["-c", str(conf), "-t"]) == 0
    out = capsys.readouterr()
    assert out.out == f"natsd: configuration file {conf} test is successful\n"
    assert out.err == ""


def test_a_valid_cluster_is_refused_with_one_line_when_unwired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unwired: None
) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text(RUNNABLE)
    for argv in (["-c", str(conf), "-t"], ["-c", str(conf), "-p", "-1"]):
        assert main(argv) == 1
        out = capsys.readouterr()
        assert out.out == ""
        assert out.err == f'natsd: {conf}:3: config key "cluster" is not supported by natsd yet\n'


def test_the_refusal_is_the_only_thing_between_a_cluster_and_the_server(
    tmp_path: Path, wired: None
) -> None:
    opts = build(tmp_path, RUNNABLE)
    assert opts.cluster.name == "east" and len(opts.cluster.routes) == 3


# ------------------------------------------------------------------ flags
def test_cluster_flags_are_parsed() -> None:
    p = parse_args(
        [
            "--cluster",
            "nats://u:p@127.0.0.1:6222",
            "--routes",
            "nats://a:1, nats://b:2",
            "--cluster_name",
            "c",
            "--cluster_advertise",
            "x:1",
            "--no_advertise",
            "--connect_retries",
            "3",
        ]
    )
    assert p.explicit == {
        "cluster": "nats://u:p@127.0.0.1:6222",
        "routes": "nats://a:1, nats://b:2",
        "cluster_name": "c",
        "cluster_advertise": "x:1",
        "no_advertise": True,
        "connect_retries": 3,
    }
    assert parse_args(["--cluster_listen", "nats://h:1"]).explicit == {"cluster": "nats://h:1"}


def test_cluster_flags_override_the_file(tmp_path: Path, wired: None) -> None:
    opts = build(
        tmp_path,
        RUNNABLE,
        "--cluster",
        "nats://u:p@0.0.0.0:-1",
        "--routes",
        "nats://a:1, nats://b:2",
        "--cluster_name",
        "west",
        "--connect_retries",
        "9",
    )
    c = opts.cluster
    assert (c.host, c.port, c.username, c.password) == ("0.0.0.0", -1, "u", "p")
    assert [r.raw for r in c.routes] == ["nats://a:1", "nats://b:2"]
    assert (c.name, c.connect_retries) == ("west", 9)
    # --cluster without credentials clears the file's (nats-server's overrideCluster).
    c = build(tmp_path, RUNNABLE, "--cluster", "nats://127.0.0.1:7000").cluster
    assert (c.username, c.password, c.port) == ("", "", 7000)


@pytest.mark.parametrize(("flags", "error"), FLAG_ERRORS, ids=[e for _, e in FLAG_ERRORS])
def test_flag_checks(flags: list[str], error: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-p", "-1", *flags]) == 1
    assert capsys.readouterr().err == f"natsd: {error}\n"


@pytest.mark.parametrize(
    "argv",
    [["--cluster", "nats://127.0.0.1:-1"], ["--routes", "nats://a:1", "--cluster", "nats://h:1"]],
)
def test_valid_cluster_flags_are_refused_when_unwired(
    argv: list[str], capsys: pytest.CaptureFixture[str], unwired: None
) -> None:
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "natsd: flag --cluster is not supported by natsd yet (cluster, routes)\n"
    )


def test_routes_flag_with_a_file_cluster_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unwired: None
) -> None:
    conf = tmp_path / "f.conf"
    conf.write_text("cluster { port: -1 }\n")
    assert main(["-c", str(conf), "--routes", "nats://a:1", "-t"]) == 1
    assert capsys.readouterr().err == (
        f'natsd: {conf}:1: config key "cluster" is not supported by natsd yet\n'
    )


def test_flags_that_do_not_make_a_cluster_are_not_refused(tmp_path: Path) -> None:
    # nats-server runs without routes when only the name is given (no route port).
    opts = build(tmp_path, None, "--cluster_name", "c", "--no_advertise", "--cluster", "")
    assert (opts.cluster.name, opts.cluster.port, opts.cluster.origin) == ("c", 0, "")


def test_a_bad_route_flag_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    # nats-server keeps a nil URL here and panics later; natsd says what is wrong.
    assert main(["--cluster", "nats://127.0.0.1:-1", "--routes", "nats://a:1,nats://a:x"]) == 1
    assert capsys.readouterr().err == 'natsd: error parsing route url ["nats://a:x"]\n'


def test_bad_int_flag() -> None:
    with pytest.raises(FlagError, match="connect_retries"):
        parse_args(["--connect_retries", "x"])


# ------------------------------------------------------------------ Go's parsers
@pytest.mark.parametrize(
    ("raw", "expect"),
    [
        (
            "nats-route://u:p%40@h:1",
            RouteURL("nats-route://u:p%40@h:1", "nats-route", "h", 1, "u", "p@"),
        ),
        ("NATS://h", RouteURL("NATS://h", "nats", "h")),
        ("h:4222", RouteURL("h:4222", "h")),  # Go: scheme "h", opaque "4222"
        ("nats://[fe80::1]:4", RouteURL("nats://[fe80::1]:4", "nats", "fe80::1", 4)),
    ],
)
def test_go_url_parse(raw: str, expect: RouteURL) -> None:
    assert C.parse_go_url(raw) == expect


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("nats://h:1\x01", "net/url: invalid control character in URL"),
        ("nats://h h:1", 'invalid character " " in host name'),
        ("nats://u^x@h:1", "net/url: invalid userinfo"),
        ("nats://[::1", "missing ']' in host"),
    ],
)
def test_go_url_errors(raw: str, error: str) -> None:
    with pytest.raises(C.GoURLError) as ei:
        C.parse_go_url(raw)
    assert str(ei.value) == f"parse {C.go_quote(raw)}: {error}"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0.0), ("1.5s", 1.5), ("1m30s", 90.0), ("-2ms", -0.002), ("3us", 3e-6)],
)
def test_go_duration(text: str, seconds: float) -> None:
    assert C.go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "tags"),
    [('"SSD"', ["ssd"]), ('[" az:1 ", SSD, ssd]', ["az:1", "ssd"]), ("[]", [])],
)
def test_server_tags_are_read_as_nats_server_keeps_them(
    tmp_path: Path, value: str, tags: list[str]
) -> None:
    assert build(tmp_path, f"server_tags: {value}\n").server_tags == tags


# nats-server 2.15's texts (checked with `nats-server -t`)
@pytest.mark.parametrize(
    ("value", "typ"),
    [
        ("5", "int64"),
        ("{a: b}", "map[string]interface {}"),
        ("[a, true]", "*conf.token where string is expected"),
    ],
)
def test_server_tags_of_another_type_are_refused(tmp_path: Path, value: str, typ: str) -> None:
    with pytest.raises(ConfigError) as e:
        build(tmp_path, f"server_tags: {value}\n")
    assert str(e.value).endswith(f"error parsing tags: unsupported type {typ}")
