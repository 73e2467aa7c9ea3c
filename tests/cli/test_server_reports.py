"""``nats server list``, ``server report jetstream|connections`` and ``server request``
against natsd and nats-server with a system account: the system account's services
answer both the same way; a user of another account is told it needs system privileges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import KINDS, Cli, ServerProc, base_env

CONFIG = """
server_name: R1
accounts {
  SYS { users: [{user: sys, password: sys}] }
  APP { jetstream: enabled, users: [{user: app, password: app}] }
}
system_account: SYS
"""
SYS = ["--user", "sys", "--password", "sys"]


@pytest.fixture(params=KINDS)
def sys_server(request: pytest.FixtureRequest, cli_root: Path) -> Iterator[ServerProc]:
    conf = cli_root / f"sys-{request.param}.conf"
    conf.write_text(CONFIG)
    srv = ServerProc(request.param, cli_root, ["-c", str(conf)]).start()
    try:
        yield srv
    finally:
        srv.stop()


def test_server_list_report_and_request(sys_server: ServerProc, tmp_path: Path) -> None:
    cli = Cli(sys_server, tmp_path, base_env(tmp_path))
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults",
            "--user", "app", "--password", "app")  # fmt: skip
    out = cli.run("server", "list", "1", *SYS).stdout
    assert "R1" in out and "1 servers" in out
    listed = json.loads(cli.run("server", "ls", "--json", *SYS).stdout)
    assert [d["server"]["name"] for d in listed] == ["R1"]
    assert listed[0]["statsz"]["connections"] >= 1
    js = cli.run("server", "report", "jetstream", *SYS).stdout
    assert "JetStream Summary" in js and "R1" in js
    report = json.loads(cli.run("server", "report", "jetstream", "--json", *SYS).stdout)
    assert report[0]["data"]["streams"] == 1
    conns = cli.run("server", "report", "connections", *SYS).stdout
    assert "Connections out of" in conns
    varz = cli.run("server", "request", "variables", *SYS).stdout
    assert json.loads(varz)["data"]["server_name"] == "R1"
    jsz = cli.run("server", "request", "jetstream", "--options", '{"accounts": true}', *SYS)
    assert [a["name"] for a in json.loads(jsz.stdout)["data"]["account_details"]] == ["APP"]
    # (a filter naming another server: nobody answers)
    none = cli.run("server", "list", "--name", "other", "--json", *SYS).stdout
    assert json.loads(none) == []
    refused = cli.run("server", "list", "--user", "app", "--password", "app", check=False)
    assert refused.returncode != 0 and "system privileges" in refused.stderr
