"""The pure parts of ``nats``: sizes, durations, templates, ack subjects, argument parsing."""

from __future__ import annotations

import pytest

from natscli.consumer import parse_ack_subject
from natscli.main import build_parser
from natscli.output import (
    CliError,
    human_bytes,
    human_duration,
    parse_duration,
    parse_size,
)
from natscli.pubsub import parse_headers, render_template
from natscli.stream import cluster_pairs, split_subjects

S = 10**9


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("", 0),
        ("0", 0),
        ("30s", 30 * S),
        ("24h", 24 * 3600 * S),
        ("1h30m", 5400 * S),
        ("1d3h5m2s", (86400 + 3 * 3600 + 5 * 60 + 2) * S),
        ("1w", 7 * 86400 * S),
        ("1M", 30 * 86400 * S),
        ("1y", 365 * 86400 * S),
        ("500ms", S // 2),
        ("1.5s", 3 * S // 2),
        ("10", 10 * S),
    ],
)
def test_parse_duration(text: str, nanos: int) -> None:
    assert parse_duration(text) == nanos


@pytest.mark.parametrize("bad", ["soon", "1x", "h", "1h 2m"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(CliError):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("-1", -1),
        ("", -1),
        ("1024", 1024),
        ("512K", 512 << 10),
        ("1KB", 1024),
        ("256MiB", 256 << 20),
        ("256mb", 256 << 20),
        ("1GB", 1 << 30),
        ("1.5G", 3 << 29),
        ("2TiB", 2 << 40),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


def test_parse_size_rejects() -> None:
    with pytest.raises(CliError):
        parse_size("lots")


def test_human_formats() -> None:
    assert [human_bytes(n) for n in (0, 999, 1024, 1536, 256 << 20, 1 << 30)] == [
        "0 B",
        "999 B",
        "1.0 KiB",
        "1.5 KiB",
        "256 MiB",
        "1.0 GiB",
    ]
    assert human_duration(0) == "0s"
    assert human_duration(120 * S) == "2m0s"
    assert human_duration(24 * 3600 * S) == "1d"
    assert human_duration((86400 + 3600 + 1) * S) == "1d1h1s"
    assert human_duration(S // 4) == "250ms"
    assert human_duration(3 * S // 2) == "1.5s"


def test_templates_and_headers() -> None:
    assert render_template("Message {{Count}} / {{ Cnt }}", 7) == "Message 7 / 7"
    assert render_template("echo {{Request}}", 1, "ping") == "echo ping"
    assert len(render_template("{{Random 5 5}}", 1)) == 5
    assert render_template("{{Unknown}}", 1) == "{{Unknown}}"
    assert render_template("{{Unix}}", 1).isdigit()
    assert parse_headers(["A:1", "B= two ", "Seq:{{Count}}"], 3) == {
        "A": "1",
        "B": "two",
        "Seq": "3",
    }
    with pytest.raises(CliError):
        parse_headers(["novalue"])


def test_cluster_information_rows_as_the_go_cli() -> None:
    cluster = {
        "name": "demo", "raft_group": "S-R3F-x", "leader": "n1",
        "leader_since": "2026-12-02T05:00:00Z",
        "replicas": [
            {"name": "n2", "current": True, "active": 26_000_000},
            {"name": "n3", "current": False, "active": 0, "lag": 7, "offline": True},
            {"name": "n4", "current": False, "active": 1_500_000_000, "lag": 1},
        ],
    }  # fmt: skip
    assert cluster_pairs(cluster, "2026-12-02T05:01:30Z") == [
        ("Name", "demo"),
        ("Cluster Group", "S-R3F-x"),
        ("Leader", "n1 (1m30s)"),
        ("Replica", "n2, current, seen 26ms ago"),
        ("Replica", "n3, outdated, OFFLINE, not seen, 7 operations behind"),
        ("Replica", "n4, outdated, seen 1.5s ago, 1 operation behind"),
    ]


def test_split_subjects() -> None:
    assert split_subjects(["orders.>", "a,b", "c d"]) == ["orders.>", "a", "b", "c", "d"]


def test_ack_subjects() -> None:
    v1 = parse_ack_subject("$JS.ACK.ORDERS.proc.1.5.3.1700000000000000000.2")
    assert v1 is not None
    assert (v1.stream, v1.consumer, v1.delivered, v1.stream_seq, v1.consumer_seq, v1.pending) == (
        "ORDERS",
        "proc",
        1,
        5,
        3,
        2,
    )
    v2 = parse_ack_subject("$JS.ACK.dom.ACCHASH.ORDERS.proc.2.6.4.1700000000000000000.0.tok")
    assert v2 is not None and (v2.stream, v2.delivered, v2.stream_seq) == ("ORDERS", 2, 6)
    assert parse_ack_subject("_INBOX.abc") is None


@pytest.mark.parametrize(
    "argv",
    [
        # every command line the seed documents show
        "stream add ORDERS --subjects orders.> --storage file --retention limits --max-age 24h",
        "stream add ORDERS --subjects orders.> --storage file --retention limits --defaults",
        "pub orders.new Order_#1001",
        "consumer add ORDERS payments-service --filter orders.created --deliver all --ack explicit",
        "consumer add ORDERS audit-log --filter orders.> --deliver all --pull",
        "consumer add ORDERS order-processor --pull --deliver all --ack explicit --defaults",
        "consumer next ORDERS order-processor --count 3 --ack",
        # and the flags the issue names
        "stream add S --max-msgs 10 --max-bytes 1GB --max-msgs-per-subject 2 --discard new "
        "--dupe-window 1m --replicas 1 --defaults",
        "consumer add S C --max-deliver 3 --wait 30s --target out.c --defaults",
        "-s nats://h:4222 --user u --password p stream ls",
        "stream ls --creds /x --token t",
        "stream info S --json",
    ],
)
def test_parser_accepts(argv: str) -> None:
    ns = build_parser().parse_args(argv.split())
    assert callable(ns.func)
