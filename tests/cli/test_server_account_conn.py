"""``nats account info``, ``nats server ping/info/check`` and the connection flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import KINDS, Cli, ServerProc, base_env


def test_account_info(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults")
    out = cli.run("account", "info").stdout
    assert "Account Information" in out and "Connected URL: nats://127.0.0.1" in out
    assert "JetStream Account Information" in out and "Streams: 1" in out
    data = cli.json("account", "info")
    assert data["jetstream"]["streams"] == 1 and "limits" in data["jetstream"]


def test_server_ping_info_check(cli: Cli, server: ServerProc) -> None:
    out = cli.run("server", "ping").stdout
    assert "rtt=" in out and "1 replies" in out
    assert cli.json("server", "info")["jetstream"] is True
    r = cli.run("server", "check", "connection")
    assert r.stdout.startswith("OK Connection") and "connect_time=" in r.stdout
    assert cli.run("server", "check", "jetstream").stdout.startswith("OK JetStream")
    cli.run("stream", "add", "S", "--subjects", "s", "--defaults")
    r = cli.run("server", "check", "stream", "--stream", "S", "--msgs-critical", "1", check=False)
    assert r.returncode == 2 and r.stdout.startswith("CRITICAL Stream S")


def test_connection_flags_env_and_context(cli: Cli, server: ServerProc, tmp_path: Path) -> None:
    # NATS_URL
    r = cli.run("stream", "ls", "-n", url=False, env={"NATS_URL": server.url})
    assert r.returncode == 0
    # -s before the sub-command, as the Go CLI allows
    r = cli.run("-s", server.url, "stream", "ls", "-n", url=False)
    assert r.returncode == 0
    # a context file, selected by name
    ctx_dir = tmp_path / "config" / "nats" / "context"
    ctx_dir.mkdir(parents=True)
    (ctx_dir / "local.json").write_text(json.dumps({"url": server.url}))
    r = cli.run("--context", "local", "server", "check", "connection", url=False)
    assert r.stdout.startswith("OK")
    # nothing listening
    r = cli.run("server", "check", "connection", "-s", "nats://127.0.0.1:1", url=False, check=False)
    assert r.returncode == 2 and r.stdout.startswith("CRITICAL")
    r = cli.run("stream", "ls", "-s", "nats://127.0.0.1:1", url=False, check=False)
    assert r.returncode == 1 and "could not connect to nats://127.0.0.1:1" in r.stderr


@pytest.fixture(params=KINDS)
def auth_servers(request: pytest.FixtureRequest, cli_root: Path) -> object:
    user = ServerProc(request.param, cli_root, ["--user", "alice", "--pass", "s3cret"]).start()
    token = ServerProc(request.param, cli_root, ["--auth", "t0ken"]).start()
    try:
        yield user, token
    finally:
        user.stop()
        token.stop()


@pytest.mark.slow
def test_user_password_and_token(
    auth_servers: tuple[ServerProc, ServerProc], tmp_path: Path
) -> None:
    user, token = auth_servers
    cli = Cli(user, tmp_path, base_env(tmp_path))
    ok = cli.run("stream", "ls", "--user", "alice", "--password", "s3cret")
    assert "No Streams defined" in ok.stdout
    bad = cli.run("stream", "ls", "--user", "alice", "--password", "wrong", check=False)
    assert bad.returncode == 1 and "nats: error: could not connect" in bad.stderr
    assert "authoriz" in bad.stderr.lower()
    env = {"NATS_USER": "alice", "NATS_PASSWORD": "s3cret"}
    assert cli.run("stream", "ls", env=env).returncode == 0
    tcli = Cli(token, tmp_path, base_env(tmp_path))
    assert tcli.run("stream", "ls", "--token", "t0ken").returncode == 0
    # The Go CLI takes a --user without a password as a token.
    assert tcli.run("stream", "ls", "--user", "t0ken").returncode == 0
    assert tcli.run("stream", "ls", "--token", "nope", check=False).returncode == 1
