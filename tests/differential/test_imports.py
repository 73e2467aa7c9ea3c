"""Accounts' imports and exports, compared between nats-server and natsd with nats-py.

One configuration: account A exports streams and services, B and C import them (with
``prefix``, ``to``, wildcards, a private export, each response type). Each scenario runs
the same client code against both servers and compares what every client saw: subjects,
replies (a service's ``_R_.`` reply by its shape), payloads, headers. Start-up errors of bad
configurations are compared line by line.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import orjson
import pytest
from components import require_nats_server

from .harness import ServerPair, ServerProcess, server_pair
from .test_limits_monitor import _accountz

pytestmark = pytest.mark.differential

CONFIG = """
http: "127.0.0.1:-1"
accounts {
  A: {
    users: [{user: a, password: pw}]
    exports: [
      {stream: "news.>"}
      {stream: "private.>", accounts: [B]}
      {stream: "metrics.*.cpu"}
      {service: "svc.>"}
      {service: "single"}
      {service: "strm", response_type: stream}
      {service: "chunk", response_type: chunked}
      {service: "nobody"}
    ]
  }
  B: {
    users: [{user: b, password: pw}]
    imports: [
      {stream: {account: A, subject: "news.>"}, prefix: "a"}
      {stream: {account: A, subject: "private.x"}}
      {stream: {account: A, subject: "metrics.*.cpu"}, to: "cpu.*"}
      {service: {account: A, subject: "svc.echo"}}
      {service: {account: A, subject: "single"}, to: "req.single"}
      {service: {account: A, subject: "strm"}}
      {service: {account: A, subject: "chunk"}}
      {service: {account: A, subject: "nobody"}}
    ]
  }
  C: {
    users: [{user: c, password: pw}]
    imports: [
      {service: {account: A, subject: "svc.*"}, to: "local.*"}
      {stream: {account: A, subject: "news.sport"}}
    ]
  }
}
"""

_REPLY = re.compile(rb"^_R_\.[0-9A-Za-z]{6}\.[0-9A-Za-z]{6}$")


@pytest.fixture(scope="module")
def links_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with server_pair(config=CONFIG) as pair:
        yield pair


async def _conn(server: ServerProcess, user: str, errors: list[str] | None = None) -> Any:
    async def on_error(e: Exception) -> None:
        if errors is not None:
            errors.append(str(e))

    return await nats.connect(
        server.url, user=user, password="pw", allow_reconnect=False, error_cb=on_error
    )


def _shape(reply: str) -> str:
    if _REPLY.match(reply.encode()):
        return "_R_.<prefix>.<id>"
    return reply


def _headers(h: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(h or {})
    info = out.get("Nats-Request-Info")
    if info is not None:
        got = orjson.loads(info)
        got.pop("rtt", None)  # the requester's round trip: measured, never the same
        out["Nats-Request-Info"] = got
    return out


async def _settle(*ncs: Any) -> None:
    for nc in ncs:
        await nc.flush()
        await nc.flush()
    await asyncio.sleep(0.1)


async def _streams(server: ServerProcess) -> list[tuple[str, str, str, str, dict[str, Any]]]:
    a = await _conn(server, "a")
    b = await _conn(server, "b")
    c = await _conn(server, "c")
    got: list[tuple[str, str, str, str, dict[str, Any]]] = []

    def collect(who: str) -> Any:
        async def cb(m: Any) -> None:
            got.append((who, m.subject, m.reply, m.data.decode(), _headers(m.headers)))

        return cb

    # wider, narrower, overlapping and exact subscriptions of the imported subjects
    await b.subscribe("a.news.>", cb=collect("b:a.news.>"))
    await b.subscribe("a.*.weather", cb=collect("b:a.*.weather"))
    await b.subscribe(">", cb=collect("b:>"))
    await b.subscribe("private.*", cb=collect("b:private.*"))
    await b.subscribe("cpu.*", cb=collect("b:cpu.*"))
    await b.subscribe("cpu.host2", cb=collect("b:cpu.host2"))
    await c.subscribe("news.*", cb=collect("c:news.*"))
    # a queue group of the importer: one of its members gets each message
    await b.subscribe("a.news.q", queue="workers", cb=collect("b:q"))
    await b.subscribe("a.news.q", queue="workers", cb=collect("b:q"))
    await _settle(b, c)
    await a.publish("news.weather", b"w1", reply="r.1")
    await a.publish("news.sport", b"s1", headers={"X-K": "v"})
    await a.publish("news.q", b"q1")
    await a.publish("private.x", b"p1")
    await a.publish("private.y", b"p2")  # not imported
    await a.publish("metrics.host1.cpu", b"c1")
    await a.publish("metrics.host2.cpu", b"c2")
    await a.publish("metrics.host2.mem", b"m1")  # not exported
    # the importer's own publishes never reach the exporter, nor come back imported
    await b.publish("news.weather", b"from-b")
    await b.publish("a.news.weather", b"from-b-local")
    await _settle(a, b, c)
    for nc in (a, b, c):
        await nc.close()
    return sorted(got)


def test_stream_imports(links_pair: ServerPair) -> None:
    ref = asyncio.run(_streams(links_pair.ref))
    impl = asyncio.run(_streams(links_pair.impl))
    assert ref, "the reference delivered nothing"
    assert impl == ref


async def _services(server: ServerProcess) -> dict[str, Any]:
    a = await _conn(server, "a")
    b = await _conn(server, "b")
    c = await _conn(server, "c")
    seen: list[tuple[str, str, dict[str, Any], str]] = []

    async def echo(m: Any) -> None:
        seen.append((m.subject, _shape(m.reply), _headers(m.headers), m.data.decode()))
        await a.publish(m.reply, b"resp1:" + m.data)
        await a.publish(m.reply, b"resp2:" + m.data)

    async def parts(m: Any) -> None:
        seen.append((m.subject, _shape(m.reply), _headers(m.headers), m.data.decode()))
        for i in range(3):
            await a.publish(m.reply, b"part%d" % i)
        await a.publish(m.reply, b"")  # the end of a streamed response
        await a.publish(m.reply, b"after-eof")

    for subj in ("svc.>", "single"):
        await a.subscribe(subj, cb=echo)
    for subj in ("strm", "chunk"):
        await a.subscribe(subj, cb=parts)
    await _settle(a)
    out: dict[str, Any] = {}

    async def collect(nc: Any, subject: str, payload: bytes, headers: Any = None) -> list[str]:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish(subject, payload, reply=inbox, headers=headers)
        await _settle(nc, a)
        await asyncio.sleep(0.2)
        msgs = []
        while True:
            try:
                m = await sub.next_msg(timeout=0.1)
            except nats.errors.TimeoutError:
                break
            msgs.append(m.data.decode())
        await sub.unsubscribe()
        return msgs

    out["echo"] = await collect(b, "svc.echo", b"hi", headers={"X-Req": "1"})
    out["single"] = await collect(b, "req.single", b"one")
    out["strm"] = await collect(b, "strm", b"s")
    out["chunk"] = await collect(b, "chunk", b"c")
    out["wildcard"] = await collect(c, "local.ping", b"w")
    # a client cannot forge the requester's account
    out["forged"] = await collect(b, "svc.echo", b"f", headers={"Nats-Request-Info": '{"acc":"A"}'})
    try:
        await b.request("nobody", b"x", timeout=2)
        out["nobody"] = "answered"
    except nats.errors.NoRespondersError:
        out["nobody"] = "no responders"
    out["not imported"] = await collect(b, "svc.other", b"x")
    out["responder saw"] = sorted(seen, key=repr)
    for nc in (a, b, c):
        await nc.close()
    return out


def test_service_imports(links_pair: ServerPair) -> None:
    ref = asyncio.run(_services(links_pair.ref))
    impl = asyncio.run(_services(links_pair.impl))
    assert ref["echo"] == ["resp1:hi"]
    assert impl == ref


async def _reserved(server: ServerProcess) -> list[str]:
    errors: list[str] = []
    b = await _conn(server, "b", errors)
    for reply in ("_R_.abc.def", "$JS.ACK.s.c.1.1.1.1.0", "_GR_.x.y", "_R_x", "$JS.ACKS"):
        await b.publish("anything", b"x", reply=reply)
    await _settle(b)
    await asyncio.sleep(0.1)
    await b.close()
    return errors


def test_reserved_reply_subjects(links_pair: ServerPair) -> None:
    ref = asyncio.run(_reserved(links_pair.ref))
    impl = asyncio.run(_reserved(links_pair.impl))
    assert len(ref) == 3
    assert impl == ref


def _links_of(server: ServerProcess, name: str) -> dict[str, Any]:
    detail = _accountz(server, f"?acc={name}")["account_detail"]
    # nats-server's implicit service imports from $SYS (its system services) are not in
    # natsd yet; both list in map order
    imports = [i for i in detail.get("imports", []) if i["account"] != "$SYS"]
    return {
        "imports": sorted(imports, key=repr),
        "exports": sorted(detail.get("exports", []), key=repr),
    }


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_accountz_lists_imports_and_exports(links_pair: ServerPair, name: str) -> None:
    ref = _links_of(links_pair.ref, name)
    assert ref["imports"] or ref["exports"]
    assert _links_of(links_pair.impl, name) == ref


# ---------------------------------------------------------------------- configuration
BAD = {
    "unknown account": """
accounts { A: { exports: [{stream: "s.>"}] }
           B: { imports: [{stream: {account: Z, subject: "s.x"}}] } }""",
    "not exported": """
accounts { A: { exports: [{stream: "s.>"}] }
           B: { imports: [{stream: {account: A, subject: "t.x"}}] } }""",
    "wider than the export": """
accounts { A: { exports: [{service: "s.x"}] }
           B: { imports: [{service: {account: A, subject: "s.>"}}] } }""",
    "private": """
accounts { A: { exports: [{stream: "s.>", accounts: [C]}] }
           B: { imports: [{stream: {account: A, subject: "s.x"}}] }
           C: {} }""",
    "private, undefined account": """
accounts { A: { exports: [{stream: "s.>", accounts: [Z]}] } }""",
    "wildcard prefix": """
accounts { A: { exports: [{stream: "s.>"}] }
           B: { imports: [{stream: {account: A, subject: "s.x"}, prefix: "p.*"}] } }""",
    "duplicate stream import": """
accounts { A: { exports: [{stream: "s.>"}] }
           B: { imports: [{stream: {account: A, subject: "s.x"}},
                          {stream: {account: A, subject: "s.x"}, to: "y"}] } }""",
    "duplicate service import": """
accounts { A: { exports: [{service: "s.>"}] }
           B: { imports: [{service: {account: A, subject: "s.x"}, to: "q"},
                          {service: {account: A, subject: "s.y"}, to: "q"}] } }""",
    "service cycle": """
accounts { A: { exports: [{service: "q"}], imports: [{service: {account: B, subject: "q"}}] }
           B: { exports: [{service: "q"}], imports: [{service: {account: A, subject: "q"}}] } }""",
    "stream cycle": """
accounts { A: { exports: [{stream: "q"}], imports: [{stream: {account: B, subject: "q"}}] }
           B: { exports: [{stream: "q"}], imports: [{stream: {account: A, subject: "q"}}] } }""",
    "response type": """
accounts { A: { exports: [{service: "q", response_type: "many"}] } }""",
    "response on a stream": """
accounts { A: { exports: [{stream: "q", response_type: "stream"}] } }""",
    "threshold": """
accounts { A: { exports: [{service: "q", threshold: "soon"}] } }""",
    "exports not a list": """
accounts { A: { exports: {stream: "q"} } }""",
    "import without subject": """
accounts { A: { exports: [{stream: "q"}] }
           B: { imports: [{stream: {account: A}}] } }""",
    "stream and service": """
accounts { A: { exports: [{stream: "q", service: "r"}] } }""",
}


def _errors(out: str) -> list[str]:
    lines = []
    for line in out.splitlines():
        line = re.sub(r"^nats-server: ", "", line.strip())
        line = re.sub(r"^(natsd: )?(config error: )?", "", line)
        line = re.sub(r"^\S+\.conf:\d+(:\d+)?: ", "", line)
        # nats-server reads a map's keys in Go's random order: which of the two it saw
        # first is chance
        line = re.sub(
            r'^Detected (stream|service) "\w+" but already saw a (stream|service)$',
            "Detected a stream and a service",
            line,
        )
        if line and "compiled modules" not in line:
            lines.append(line)
    return sorted(lines)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_configurations(name: str, tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text(BAD[name] + "\n")
    ref = subprocess.run(
        [require_nats_server(), "-c", str(conf), "-t"], capture_output=True, text=True, timeout=60
    )
    impl = subprocess.run(
        [sys.executable, "-m", "natsd", "-c", str(conf), "-t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ref.returncode == 1, ref.stderr
    assert impl.returncode == 1, impl.stderr
    assert _errors(impl.stderr) == _errors(ref.stderr)
