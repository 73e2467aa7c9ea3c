"""The ``nats`` command sequences of the seed documents, exactly as written.

``../shared/seeds/001_83e0699eb672777e.txt`` ("Putting It Together") and
``../shared/seeds/000_b5861102f63533b6.txt`` (JetStream core concepts), relative to the
repository root, show these commands; each test runs them in order against nats-server and
natsd and checks the streams, consumers and messages they produce.

000 runs ``nats stream add`` and ``nats consumer add`` without ``--defaults``: the Go CLI
would prompt for the rest; without a terminal ``nats`` takes the prompts' defaults. Its "push
consumer" example gives no ``--target``, so (as with the Go CLI's empty answer to "Delivery
target (empty for Pull Consumers)") it is a pull consumer.
"""

from __future__ import annotations

import re

from .conftest import Cli, ServerProc

HOUR_NS = 3600 * 10**9


def test_seed_001_putting_it_together(cli: Cli, server: ServerProc) -> None:
    # Create a stream that captures any subject under `orders.`
    cli.run(
        "stream",
        "add",
        "ORDERS",
        "--subjects",
        "orders.>",
        "--storage",
        "file",
        "--retention",
        "limits",
        "--defaults",
    )
    # Publish a few orders
    cli.run("pub", "orders.new", "Order #1001")
    cli.run("pub", "orders.new", "Order #1002")
    cli.run("pub", "orders.shipped", "Order #1001 shipped")

    info = server.api("STREAM.INFO.ORDERS")
    assert info["config"]["subjects"] == ["orders.>"]
    assert info["config"]["storage"] == "file"
    assert info["config"]["retention"] == "limits"
    assert info["state"]["messages"] == 3

    # Create a durable pull consumer that delivers from the beginning of the stream
    cli.run(
        "consumer",
        "add",
        "ORDERS",
        "order-processor",
        "--pull",
        "--deliver",
        "all",
        "--ack",
        "explicit",
        "--defaults",
    )
    # Fetch and acknowledge the next batch of messages
    r = cli.run("consumer", "next", "ORDERS", "order-processor", "--count", "3", "--ack")

    bodies = [ln for ln in r.stdout.splitlines() if ln.startswith("Order #")]
    assert bodies == ["Order #1001", "Order #1002", "Order #1001 shipped"]
    assert r.stdout.count("Acknowledged message") == 3
    heads = re.findall(r"subj: (\S+) / tries: 1 / cons seq: (\d+) / str seq: (\d+)", r.stdout)
    assert heads == [
        ("orders.new", "1", "1"),
        ("orders.new", "2", "2"),
        ("orders.shipped", "3", "3"),
    ]

    ci = server.api("CONSUMER.INFO.ORDERS.order-processor")
    assert ci["config"]["durable_name"] == "order-processor"
    assert ci["config"]["deliver_policy"] == "all"
    assert ci["config"]["ack_policy"] == "explicit"
    assert "deliver_subject" not in ci["config"]
    assert ci["num_pending"] == 0
    assert ci["num_ack_pending"] == 0
    assert ci["ack_floor"]["stream_seq"] == 3


def test_seed_000_core_concepts(cli: Cli, server: ServerProc) -> None:
    # Create a Stream binding all messages under orders.>
    cli.run(
        "stream",
        "add",
        "ORDERS",
        "--subjects",
        "orders.>",
        "--storage",
        "file",
        "--retention",
        "limits",
        "--max-age",
        "24h",
    )
    cfg = server.api("STREAM.INFO.ORDERS")["config"]
    assert cfg["subjects"] == ["orders.>"]
    assert (cfg["storage"], cfg["retention"], cfg["max_age"]) == ("file", "limits", 24 * HOUR_NS)
    assert (cfg["max_msgs"], cfg["max_bytes"], cfg["discard"]) == (-1, -1, "old")

    # Create a Push Consumer (server pushes to a subject)
    cli.run(
        "consumer",
        "add",
        "ORDERS",
        "payments-service",
        "--filter",
        "orders.created",
        "--deliver",
        "all",
        "--ack",
        "explicit",
    )
    # Create a Pull Consumer (client fetches on demand)
    cli.run(
        "consumer",
        "add",
        "ORDERS",
        "audit-log",
        "--filter",
        "orders.>",
        "--deliver",
        "all",
        "--pull",
    )

    pay = server.api("CONSUMER.INFO.ORDERS.payments-service")["config"]
    assert pay["filter_subject"] == "orders.created"
    assert (pay["deliver_policy"], pay["ack_policy"]) == ("all", "explicit")
    audit = server.api("CONSUMER.INFO.ORDERS.audit-log")["config"]
    assert audit["filter_subject"] == "orders.>"
    assert (audit["deliver_policy"], audit["ack_policy"]) == ("all", "explicit")
    assert "deliver_subject" not in audit

    assert cli.json("consumer", "ls", "ORDERS") == ["audit-log", "payments-service"]

    cli.run("pub", "orders.created", "order 1 created")
    cli.run("pub", "orders.paid", "order 1 paid")
    r = cli.run("consumer", "next", "ORDERS", "payments-service", "--raw")
    assert r.stdout.strip() == "order 1 created"
    r = cli.run("consumer", "next", "ORDERS", "audit-log", "--count", "2", "--raw")
    assert r.stdout.split("\n")[:2] == ["order 1 created", "order 1 paid"]


def test_seed_000_stream_options(cli: Cli, server: ServerProc) -> None:
    """The configuration table of seed 000: storage, retention, max-age/msgs/bytes."""
    cli.run(
        "stream",
        "add",
        "WQ",
        "--subjects",
        "jobs.>",
        "--storage",
        "memory",
        "--retention",
        "workqueue",
        "--max-msgs",
        "1000",
        "--max-bytes",
        "1GB",
        "--max-age",
        "1h",
        "--defaults",
    )
    cli.run(
        "stream",
        "add",
        "INT",
        "--subjects",
        "events.>",
        "--retention",
        "interest",
        "--max-msgs-per-subject",
        "5",
        "--discard",
        "new",
        "--dupe-window",
        "30s",
        "--max-bytes",
        "256MiB",
        "--replicas",
        "1",
        "--defaults",
    )
    wq = server.api("STREAM.INFO.WQ")["config"]
    assert (wq["storage"], wq["retention"], wq["max_msgs"]) == ("memory", "workqueue", 1000)
    assert (wq["max_bytes"], wq["max_age"]) == (1 << 30, HOUR_NS)
    it = server.api("STREAM.INFO.INT")["config"]
    assert (it["retention"], it["max_msgs_per_subject"], it["discard"]) == ("interest", 5, "new")
    assert (it["duplicate_window"], it["max_bytes"]) == (30 * 10**9, 256 << 20)
