"""``nats consumer`` add/info/ls/edit/rm/next/sub."""

from __future__ import annotations

import pytest

from .conftest import Cli, ServerProc, finish, wait_for_line

# Many `nats` runs (about 0.3 s each): part of `make test`, left out by -m 'not slow'.
pytestmark = pytest.mark.slow


@pytest.fixture
def orders(cli: Cli, server: ServerProc) -> Cli:
    cli.run("stream", "add", "ORDERS", "--subjects", "orders.>", "--defaults")
    server.publish(
        ("orders.new", "order 1"), ("orders.new", "order 2"), ("orders.shipped", "order 3")
    )
    return cli


def test_add_info_ls_edit_rm(orders: Cli, server: ServerProc) -> None:
    cli = orders
    out = cli.run(
        "consumer",
        "add",
        "ORDERS",
        "c1",
        "--pull",
        "--filter",
        "orders.new",
        "--deliver",
        "2",
        "--max-deliver",
        "5",
        "--wait",
        "10s",
        "--max-pending",
        "50",
        "--description",
        "first",
        "--defaults",
    ).stdout
    assert "Information for Consumer ORDERS > c1" in out
    assert "Filter Subject: orders.new" in out and "Deliver Policy: From Sequence 2" in out
    cfg = server.api("CONSUMER.INFO.ORDERS.c1")["config"]
    assert cfg["opt_start_seq"] == 2 and cfg["max_deliver"] == 5
    assert cfg["ack_wait"] == 10 * 10**9 and cfg["max_ack_pending"] == 50
    info = cli.json("consumer", "info", "ORDERS", "c1")
    assert info["name"] == "c1" and info["num_pending"] == 1
    assert "Unprocessed Messages: 1" in cli.run("consumer", "info", "ORDERS", "c1").stdout
    table = cli.run("consumer", "ls", "ORDERS").stdout
    assert "c1" in table and "first" in table and "Ack Pending" in table
    cli.run(
        "consumer", "edit", "ORDERS", "c1", "--description", "second", "--max-deliver", "7", "-f"
    )
    cfg = server.api("CONSUMER.INFO.ORDERS.c1")["config"]
    assert (cfg["description"], cfg["max_deliver"]) == ("second", 7)
    r = cli.run("consumer", "rm", "ORDERS", "c1", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    cli.run("consumer", "rm", "ORDERS", "c1", "-f")
    assert cli.json("consumer", "ls", "ORDERS") == []
    r = cli.run("consumer", "info", "ORDERS", "c1", check=False)
    assert r.returncode == 1 and "consumer not found" in r.stderr


def test_next_nak_and_no_ack(orders: Cli, server: ServerProc) -> None:
    cli = orders
    cli.run(
        "consumer",
        "add",
        "ORDERS",
        "work",
        "--pull",
        "--deliver",
        "all",
        "--ack",
        "explicit",
        "--defaults",
    )
    r = cli.run("consumer", "next", "ORDERS", "work", "--no-ack")
    assert "order 1" in r.stdout and "Acknowledged" not in r.stdout
    assert server.api("CONSUMER.INFO.ORDERS.work")["num_ack_pending"] == 1
    # order 1 waits for its ack (30s), so the next one is order 2, which is nak'ed...
    r = cli.run("consumer", "next", "ORDERS", "work", "--nak")
    assert "order 2" in r.stdout and "Negative Acknowledged message" in r.stdout
    # ... and so redelivered at once, before order 3.
    r = cli.run("consumer", "next", "ORDERS", "work", "--count", "2")
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("order")] == ["order 2", "order 3"]
    assert "subj: orders.new / tries: 2 / cons seq: 3 / str seq: 2" in r.stdout


def test_next_on_empty_consumer_fails(orders: Cli, server: ServerProc) -> None:
    cli = orders
    cli.run("consumer", "add", "ORDERS", "late", "--pull", "--deliver", "new", "--defaults")
    r = cli.run("consumer", "next", "ORDERS", "late", "--timeout", "1s", check=False)
    assert r.returncode == 1 and "no message received" in r.stderr


def test_push_consumer_sub(orders: Cli, server: ServerProc) -> None:
    cli = orders
    cli.run(
        "consumer",
        "add",
        "ORDERS",
        "pusher",
        "--target",
        "deliver.pusher",
        "--deliver",
        "all",
        "--ack",
        "explicit",
        "--heartbeat",
        "-1",
        "--no-flow-control",
        "--defaults",
    )
    cfg = server.api("CONSUMER.INFO.ORDERS.pusher")["config"]
    assert cfg["deliver_subject"] == "deliver.pusher"
    sub = cli.popen("consumer", "sub", "ORDERS", "pusher", "--count", "3")
    rc, out, err = finish(sub, timeout=20)
    assert rc == 0, err
    assert "Subscribing to topic deliver.pusher" in out
    assert out.count("/ tries: 1 /") == 3 and "order 3" in out
    info = server.api("CONSUMER.INFO.ORDERS.pusher")
    assert info["ack_floor"]["stream_seq"] == 3


def test_pull_consumer_sub_does_next(orders: Cli, server: ServerProc) -> None:
    orders.run("consumer", "add", "ORDERS", "p", "--pull", "--deliver", "last", "--defaults")
    r = orders.run("consumer", "sub", "ORDERS", "p", "--raw")
    assert r.stdout.strip() == "order 3"


def test_core_sub_on_push_delivery_subject(orders: Cli) -> None:
    """``nats sub`` on a consumer's delivery subject sees pushed messages too."""
    orders.run(
        "consumer",
        "add",
        "ORDERS",
        "watch",
        "--target",
        "push.watch",
        "--deliver",
        "new",
        "--ack",
        "none",
        "--heartbeat",
        "-1",
        "--no-flow-control",
        "--defaults",
    )
    sub = orders.popen("sub", "push.watch", "--count", "1")
    wait_for_line(sub, "Subscribing on push.watch")
    orders.run("pub", "orders.new", "pushed")
    rc, out, _ = finish(sub)
    assert rc == 0 and "pushed" in out
