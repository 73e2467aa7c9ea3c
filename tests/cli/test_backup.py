"""``nats stream backup|restore`` and ``nats account backup|restore`` against natsd: the
directory they write, what they print, a restore over an existing stream refused, a
restore with another configuration, and a whole account backed up and restored."""

from __future__ import annotations

import json

from .conftest import Cli, ServerProc


def _setup(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults")
    cli.run("stream", "add", "AUDIT", "--subjects", "audit.>", "--defaults")
    server.publish(*[("orders.new", f"Order #{i}") for i in range(30)])
    server.publish(("audit.x", "one"), ("audit.x", "two"))
    server.api(
        "CONSUMER.CREATE.ORDERS.PICKER",
        {"stream_name": "ORDERS", "config": {"durable_name": "PICKER", "ack_policy": "explicit"}},
    )


def test_stream_backup_and_restore(cli: Cli, server: ServerProc) -> None:
    _setup(cli, server)
    out = cli.run("stream", "backup", "ORDERS", "bk", "--no-progress").stdout
    assert 'Starting backup of Stream "ORDERS"' in out
    assert 'compressed data in 1 chunks for stream "ORDERS"' in out
    meta = json.loads((cli.cwd / "bk" / "backup.json").read_text())
    assert meta["config"]["name"] == "ORDERS" and meta["state"]["messages"] == 30
    assert meta["state"]["consumer_count"] == 1
    assert (cli.cwd / "bk" / "stream.arc.s2").stat().st_size > 0
    # a second backup into the same directory is refused (the first stays whole)
    again = cli.run("stream", "backup", "ORDERS", "bk", "--no-progress", check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    # a restore over an existing stream is refused
    taken = cli.run("stream", "restore", "bk", "--no-progress", check=False)
    assert taken.returncode != 0 and 'Stream "ORDERS" already exist' in taken.stderr
    cli.run("stream", "rm", "ORDERS", "-f")
    out = cli.run("stream", "restore", "bk", "--no-progress").stdout
    assert 'Starting restore of Stream "ORDERS" from file "bk"' in out
    assert 'Restored stream "ORDERS"' in out
    info = server.api("STREAM.INFO.ORDERS")
    assert info["state"]["messages"] == 30 and info["state"]["last_seq"] == 30
    assert server.api("CONSUMER.INFO.ORDERS.PICKER")["num_pending"] == 30
    # with another configuration (same name): the messages, under the new limits
    cli.run("stream", "rm", "ORDERS", "-f")
    cfg = dict(meta["config"], max_msgs=10)
    (cli.cwd / "cfg.json").write_text(json.dumps(cfg))
    cli.run("stream", "restore", "bk", "--no-progress", "--config", "cfg.json")
    info = server.api("STREAM.INFO.ORDERS")
    assert info["config"]["max_msgs"] == 10
    assert (info["state"]["messages"], info["state"]["first_seq"]) == (10, 21)
    bad = dict(meta["config"], name="OTHER")
    (cli.cwd / "bad.json").write_text(json.dumps(bad))
    r = cli.run("stream", "restore", "bk", "--config", "bad.json", check=False)
    assert r.returncode != 0


def test_account_backup_and_restore(cli: Cli, server: ServerProc) -> None:
    _setup(cli, server)
    out = cli.run("account", "backup", "all", "-f").stdout
    assert "Performing backup of all streams to all" in out
    assert sorted(p.name for p in (cli.cwd / "all").iterdir()) == ["AUDIT", "ORDERS"]
    refused = cli.run("account", "restore", "all", check=False)
    assert refused.returncode != 0 and "exists already" in refused.stderr
    cli.run("stream", "rm", "ORDERS", "-f")
    cli.run("stream", "rm", "AUDIT", "-f")
    out = cli.run("account", "restore", "all").stdout
    assert 'Restoring backup of all 2 streams in directory "all"' in out
    assert server.api("STREAM.INFO.AUDIT")["state"]["messages"] == 2
    assert server.api("STREAM.INFO.ORDERS")["state"]["messages"] == 30
