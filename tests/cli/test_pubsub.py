"""``nats pub/sub/request/reply``: counts, headers, templates, JetStream publish, errors."""

from __future__ import annotations

import re

import pytest

from .conftest import Cli, ServerProc, finish, wait_for_line


def test_pub_sub_count_headers_templates(cli: Cli, server: ServerProc) -> None:
    sub = cli.popen("sub", "greet.>", "--count", "3")
    wait_for_line(sub, "Subscribing on greet.>")
    cli.run(
        "pub",
        "greet.joe",
        "hello {{Count}} of 3",
        "--count",
        "3",
        "-H",
        "Seq:{{Count}}",
        "-H",
        "Kind=greeting",
    )
    rc, out, _ = finish(sub)
    assert rc == 0
    assert re.findall(r'\[#(\d)\] Received on "greet.joe"', out) == ["1", "2", "3"]
    assert [ln for ln in out.splitlines() if ln.startswith("hello")] == [
        "hello 1 of 3",
        "hello 2 of 3",
        "hello 3 of 3",
    ]
    assert "Seq: 2" in out and "Kind: greeting" in out


@pytest.mark.slow
def test_pub_from_stdin_and_raw_sub_queue(cli: Cli, server: ServerProc) -> None:
    sub = cli.popen("sub", "in.stdin", "--count", "2", "--raw", "--queue", "q1")
    wait_for_line(sub, "Subscribing on in.stdin in queue group q1")  # stderr; stdout is raw
    cli.run("pub", "in.stdin", "--send-on", "newline", input=b"line one\nline two\n")
    rc, out, _ = finish(sub)
    assert rc == 0 and out.splitlines() == ["line one", "line two"]


def test_request_reply(cli: Cli, server: ServerProc) -> None:
    rep = cli.popen("reply", "svc.greet", "hello {{Request}} #{{Count}}", "--count", "2")
    wait_for_line(rep, "Listening on")
    r = cli.run("request", "svc.greet", "joe", "--raw")
    assert r.stdout.strip() == "hello joe #1"
    r = cli.run("req", "svc.greet", "ann", "-H", "Who:ann")
    assert "hello ann #2" in r.stdout and "Received with rtt" in r.stderr
    rc, out, _ = finish(rep)
    assert rc == 0 and 'Received on subject "svc.greet"' in out and "Who: ann" in out


@pytest.mark.slow
def test_request_without_responders_fails(cli: Cli, server: ServerProc) -> None:
    r = cli.run("req", "nobody.home", "x", "--timeout", "1s", check=False)
    assert r.returncode == 1 and "no responders" in r.stderr


@pytest.mark.slow
def test_jetstream_publish_and_stream_sub(cli: Cli, server: ServerProc) -> None:
    cli.run("stream", "add", "EVENTS", "--subjects", "ev.>", "--defaults")
    r = cli.run("pub", "ev.a", "event {{Count}}", "--count", "2", "-J")
    assert "Stored in Stream: EVENTS Sequence: 2" in r.stderr
    r = cli.run("pub", "nostream.a", "x", "-J", "--timeout", "1s", check=False)
    assert r.returncode == 1 and "no stream" in r.stderr
    r = cli.run("sub", "--stream", "EVENTS", "--all", "--count", "2", timeout=20)
    assert "Received JetStream message: stream: EVENTS seq 1 / subject: ev.a" in r.stdout
    assert "event 2" in r.stdout
    r = cli.run("sub", "ev.a", "--jetstream", "--last", "--count", "1", "--raw")
    assert r.stdout.strip() == "event 2"
