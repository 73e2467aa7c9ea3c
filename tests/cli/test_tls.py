"""``nats`` over TLS and with an nkey, against natsd and nats-server with the same
configuration: a client certificate the server verifies, an nkey user, TLS first (``--tlsfirst``
against a server with ``handshake_first``), the TLS options from a context file, and the
errors for files that are not there or a certificate without its key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import nkeys
import pytest
from tlscerts import Certs, make_certs

from .conftest import KINDS, Cli, ServerProc, base_env

SEED = "SUAMSCZIPZX5KKDYFAHJGYO42YRLSE3ZKBUJDHLJH3S5XB3WZKGEX3IIGI"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=KINDS)
def tls_server(
    request: pytest.FixtureRequest, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProc]:
    root = tmp_path_factory.mktemp(f"cli-tls-{request.param}")
    public = nkeys.from_seed(bytearray(SEED.encode())).public_key.decode()
    conf = root / "tls.conf"
    conf.write_text(
        certs.tls_block(verify=True, handshake_first="300ms")
        + f"authorization {{ users = [ {{ nkey: {public} }} ] }}\n"
    )
    srv = ServerProc(request.param, root, extra=["-c", str(conf)]).start()
    try:
        yield srv
    finally:
        srv.stop()


def _tls_args(certs: Certs, seed_file: Path, who: str = "alice") -> list[str]:
    return [
        "--tlsca",
        str(certs.ca),
        "--tlscert",
        str(getattr(certs, f"{who}_cert")),
        "--tlskey",
        str(getattr(certs, f"{who}_key")),
        "--nkey",
        str(seed_file),
    ]


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    f = tmp_path / "user.nk"
    f.write_text(SEED)
    return f


def _cli(server: ServerProc, tmp_path: Path) -> Cli:
    return Cli(server, tmp_path, base_env(tmp_path))


@pytest.mark.parametrize("first", [False, True], ids=["info-first", "tls-first"])
def test_jetstream_over_tls_with_nkey(
    tls_server: ServerProc, certs: Certs, seed_file: Path, tmp_path: Path, first: bool
) -> None:
    cli = _cli(tls_server, tmp_path)
    url = f"tls://localhost:{tls_server.port}"
    args = _tls_args(certs, seed_file) + (["--tlsfirst"] if first else [])
    info = cli.json("account", "info", "-s", url, *args)
    assert info["server"]["server_id"] and info["jetstream"]["memory"] == 0, info
    r = cli.run("req", "nobody.home", "x", "-s", url, *args, url=False, check=False)
    assert r.returncode != 0 and "no responders" in (r.stdout + r.stderr).lower()


def test_context_file_carries_the_tls_options(
    tls_server: ServerProc, certs: Certs, seed_file: Path, tmp_path: Path
) -> None:
    cli = _cli(tls_server, tmp_path)
    ctx_dir = tmp_path / "config" / "nats" / "context"
    ctx_dir.mkdir(parents=True)
    (ctx_dir / "secure.json").write_text(
        json.dumps(
            {
                "url": f"tls://localhost:{tls_server.port}",
                "ca": str(certs.ca),
                "cert": str(certs.alice_cert),
                "key": str(certs.alice_key),
                "nkey": str(seed_file),
            }
        )
    )
    r = cli.run("--context", "secure", "pub", "ctx.subject", "hello", url=False)
    assert r.returncode == 0, r.stderr


def test_untrusted_client_certificate_is_refused(
    tls_server: ServerProc, certs: Certs, seed_file: Path, tmp_path: Path
) -> None:
    cli = _cli(tls_server, tmp_path)
    url = f"tls://localhost:{tls_server.port}"
    args = _tls_args(certs, seed_file, "stranger")
    r = cli.run("pub", "x", "y", "-s", url, *args, url=False, check=False)
    assert r.returncode != 0 and "could not connect" in r.stderr


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--tlscert", "/nope/c.pem", "--tlskey", "/nope/k.pem"], "TLS certificate file"),
        (["--tlscert", "x.pem"], "--tlscert and --tlskey must be given together"),
        (["--nkey", "/nope/user.nk"], "nkey file /nope/user.nk does not exist"),
    ],
)
def test_bad_tls_options_are_named(
    tls_server: ServerProc, tmp_path: Path, args: list[str], error: str
) -> None:
    cli = _cli(tls_server, tmp_path)
    url = f"tls://localhost:{tls_server.port}"
    r = cli.run("pub", "x", "y", "-s", url, *args, url=False, check=False)
    assert r.returncode != 0 and error in r.stderr
