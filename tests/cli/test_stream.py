"""``nats stream`` sub-commands: info/ls/get/view/rmm/purge/edit/rm, JSON output and errors."""

from __future__ import annotations

import base64

import pytest

from .conftest import Cli, ServerProc


def _setup(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults")
    server.publish(("orders.new", "Order #1001"), headers={"X-Id": "1001"})
    server.publish(("orders.new", "Order #1002"), headers={"X-Id": "1002"})
    server.publish(("orders.shipped", "Order #1001 shipped"), headers={"X-Id": "1001"})


def test_info_ls_and_json(cli: Cli, server: ServerProc) -> None:
    _setup(cli, server)
    out = cli.run("stream", "info", "ORDERS").stdout
    assert "Information for Stream ORDERS" in out
    assert "Subjects: orders.>" in out
    assert "Messages: 3" in out
    assert "Maximum Age: unlimited" in out
    info = cli.json("stream", "info", "ORDERS")
    assert info["config"]["name"] == "ORDERS"  # the API's field names, unchanged
    assert info["state"]["messages"] == 3
    table = cli.run("stream", "ls").stdout
    assert "ORDERS" in table and "Messages" in table and "Last Message" in table
    assert cli.json("stream", "ls") == ["ORDERS"]
    assert cli.run("stream", "ls", "--names").stdout.split() == ["ORDERS"]
    subjects = cli.json("stream", "subjects", "ORDERS")
    assert subjects == {"orders.new": 2, "orders.shipped": 1}


@pytest.mark.slow
def test_get_view_rmm_purge(cli: Cli, server: ServerProc) -> None:
    _setup(cli, server)
    out = cli.run("stream", "get", "ORDERS", "2").stdout
    assert "Item: ORDERS#2" in out and "on Subject orders.new" in out
    assert "X-Id: 1002" in out and "Order #1002" in out
    m = cli.json("stream", "get", "ORDERS", "--last-for", "orders.shipped")
    assert m["seq"] == 3 and base64.b64decode(m["data"]) == b"Order #1001 shipped"
    view = cli.run("stream", "view", "ORDERS", "--subject", "orders.new").stdout
    assert "[1] Subject: orders.new" in view and "[2] Subject: orders.new" in view
    assert "shipped" not in view
    assert cli.run("stream", "view", "ORDERS", "--raw", "--id", "2").stdout.splitlines() == [
        "Order #1002",
        "Order #1001 shipped",
    ]
    cli.run("stream", "rmm", "ORDERS", "1", "-f")
    st = server.api("STREAM.INFO.ORDERS")["state"]
    assert (st["messages"], st["first_seq"]) == (2, 2)
    r = cli.run("stream", "get", "ORDERS", "1", check=False)
    assert r.returncode == 1 and "nats: error:" in r.stderr
    purged = cli.json("stream", "purge", "ORDERS", "--subject", "orders.new", "-f")
    assert purged["success"] is True and purged["purged"] == 1
    assert server.api("STREAM.INFO.ORDERS")["state"]["messages"] == 1


@pytest.mark.slow
def test_edit_and_rm(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults")
    dry = cli.run("stream", "edit", "ORDERS", "--max-msgs", "100", "--dry-run")
    assert "max_msgs" in dry.stdout
    assert server.api("STREAM.INFO.ORDERS")["config"]["max_msgs"] == -1
    cli.run(
        "stream",
        "edit",
        "ORDERS",
        "--max-msgs",
        "100",
        "--max-age",
        "1y",
        "--description",
        "orders",
        "--subjects",
        "orders.>,returns.>",
        "-f",
    )
    cfg = server.api("STREAM.INFO.ORDERS")["config"]
    assert cfg["max_msgs"] == 100 and cfg["description"] == "orders"
    assert cfg["max_age"] == 365 * 24 * 3600 * 10**9
    assert cfg["subjects"] == ["orders.>", "returns.>"]
    # Without a terminal and without -f a destructive command refuses, and says why.
    r = cli.run("stream", "rm", "ORDERS", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    cli.run("stream", "rm", "ORDERS", "-f")
    assert server.api("STREAM.NAMES").get("streams") in (None, [])


def test_errors_exit_non_zero(cli: Cli, server: ServerProc) -> None:
    r = cli.run("stream", "info", "MISSING", check=False)
    assert r.returncode == 1
    assert "nats: error: could not load Stream MISSING: stream not found (10059)" in r.stderr
    cli.run("stream", "add", "A", "--subjects", "a.>", "--defaults")
    r = cli.run("stream", "add", "B", "--subjects", "a.>", "--defaults", check=False)
    assert r.returncode == 1 and "could not create Stream" in r.stderr and "overlap" in r.stderr
    r = cli.run("stream", "add", "C", "--max-age", "soon", "--defaults", check=False)
    assert r.returncode == 1 and "invalid duration 'soon'" in r.stderr
    r = cli.run("stream", "add", "C", "--max-bytes", "lots", "--defaults", check=False)
    assert r.returncode == 1 and "invalid size 'lots'" in r.stderr
    r = cli.run("stream", "frobnicate", check=False)
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.slow
def test_add_from_config_file_and_copy(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--max-msgs", "7", "--defaults")
    saved = cli.run("stream", "info", "ORDERS", "--json").stdout
    (cli.cwd / "orders.json").write_text(saved)
    server.api("STREAM.DELETE.ORDERS")
    cli.run("stream", "add", "--config", "orders.json")
    assert server.api("STREAM.INFO.ORDERS")["config"]["max_msgs"] == 7
    cli.run("stream", "copy", "ORDERS", "ARCHIVE", "--subjects", "archive.>")
    cfg = server.api("STREAM.INFO.ARCHIVE")["config"]
    assert cfg["subjects"] == ["archive.>"] and cfg["max_msgs"] == 7
