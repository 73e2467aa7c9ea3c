"""Accounts' imports and exports across a cluster: the same scenario on three natsd servers
and on three nats-server servers (processes on loopback), compared.

The importer's clients sit on one server and the exporter's on another, so every stream
import crosses a route as the exporter's interest (the shadow subscriptions), every request
crosses it in the exporter's account and every response comes back on the exporter's
``_R_.`` subject. A client of the importer on the third server subscribes to the service's
subject too: it gets the requests published there, and the request is still taken once.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import nats
import orjson
import pytest
from proc_cluster import ProcCluster

pytestmark = pytest.mark.timeout(120)

ACCOUNTS = """
accounts {
  A: {
    users: [{user: a, password: pw}]
    exports: [
      {stream: "news.>"}
      {service: "svc.>"}
      {service: "strm", response_type: stream}
      {service: "idle"}
    ]
  }
  B: {
    users: [{user: b, password: pw}]
    imports: [
      {stream: {account: A, subject: "news.>"}, prefix: "a"}
      {service: {account: A, subject: "svc.echo"}, to: "echo"}
      {service: {account: A, subject: "strm"}}
      {service: {account: A, subject: "idle"}}
    ]
  }
}
"""

_REPLY = re.compile(r"^_R_\.[0-9A-Za-z]{6}\.[0-9A-Za-z]{6}$")


async def _scenario(cluster: ProcCluster) -> dict[str, Any]:
    def conn(i: int, user: str) -> Any:
        return nats.connect(cluster[i].url, user=user, password="pw", allow_reconnect=False)

    b1 = await conn(0, "b")
    a2 = await conn(1, "a")
    b3 = await conn(2, "b")
    out: dict[str, Any] = {}
    got: list[tuple[str, str, str, str]] = []

    def collect(who: str) -> Any:
        async def cb(m: Any) -> None:
            reply = "<inbox>" if m.reply.startswith("_INBOX.") else m.reply
            got.append((who, m.subject, reply, m.data.decode()))

        return cb

    await b1.subscribe("a.news.>", cb=collect("b1:a.news.>"))
    await b1.subscribe("a.news.q", queue="g", cb=collect("b1:q"))
    await b3.subscribe("a.*.sport", cb=collect("b3:a.*.sport"))
    await b3.subscribe("a.news.q", queue="g", cb=collect("b3:q"))
    await b3.subscribe("echo", cb=collect("b3:echo"))
    seen: list[tuple[str, bool, str]] = []

    async def echo(m: Any) -> None:
        info = orjson.loads(m.headers["Nats-Request-Info"])
        seen.append((m.subject, bool(_REPLY.match(m.reply)), info["acc"]))
        await a2.publish(m.reply, b"re:" + m.data)

    async def parts(m: Any) -> None:
        for i in range(3):
            await a2.publish(m.reply, b"part%d" % i)
        await a2.publish(m.reply, b"")

    await a2.subscribe("svc.>", cb=echo)
    await a2.subscribe("strm", cb=parts)
    for nc in (b1, a2, b3):
        await nc.flush()
    await asyncio.sleep(1.0)  # the interest reaches every server
    await a2.publish("news.sport", b"s1", reply="r.1")
    for i in range(4):
        await a2.publish("news.q", b"q%d" % i)
    await a2.flush()
    r = await b1.request("echo", b"hi", timeout=5)
    out["echo"] = r.data.decode()
    inbox = b1.new_inbox()
    sub = await b1.subscribe(inbox)
    await b1.publish("strm", b"", reply=inbox)
    parts_got = []
    for _ in range(4):
        parts_got.append((await sub.next_msg(timeout=5)).data.decode())
    out["strm"] = parts_got
    try:
        await b1.request("idle", b"x", timeout=3)
        out["none"] = "answered"
    except nats.errors.NoRespondersError:
        out["none"] = "no responders"
    await asyncio.sleep(0.5)
    out["seen"] = sorted(seen)
    # the queue group spans servers: each message reaches one member
    out["queue"] = sorted(d for w, _, _, d in got if w.endswith(":q"))
    out["got"] = sorted((w, s, r, d) for w, s, r, d in got if not w.endswith(":q"))
    for nc in (b1, a2, b3):
        await nc.close()
    return out


async def _run(tmp: Path, kinds: str | list[str]) -> dict[str, Any]:
    cluster = ProcCluster(tmp, 3, kinds=kinds, jetstream=[False] * 3, extra=ACCOUNTS)
    await cluster.start(wait="")
    try:
        for s in cluster:
            await cluster.routed(s.name)
        return await _scenario(cluster)
    finally:
        await cluster.close()


def test_imports_across_a_cluster_as_nats_server(tmp_path: Path) -> None:
    ref = asyncio.run(_run(tmp_path / "ref", "nats-server"))
    impl = asyncio.run(_run(tmp_path / "impl", "natsd"))
    assert ref["echo"] == "re:hi"
    assert ref["seen"] == [("svc.echo", True, "B")]
    assert impl == ref


@pytest.mark.parametrize(
    "kinds",
    [["natsd", "nats-server", "natsd"], ["nats-server", "natsd", "nats-server"]],
    ids=["exporter on nats-server", "importers on nats-server"],
)
def test_imports_across_a_mixed_cluster(tmp_path: Path, kinds: list[str]) -> None:
    """natsd and nats-server in one cluster: each server's imports work with the other's
    routes (shadow interest, requests and responses in the exporter's account)."""
    ref = asyncio.run(_run(tmp_path / "ref", "nats-server"))
    mixed = asyncio.run(_run(tmp_path / "mixed", kinds))
    assert mixed == ref
