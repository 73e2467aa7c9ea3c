"""Streams that copy a stream of another account, against nats-server: account A owns the
origin and exports its JetStream API, its deliver subjects and its flow control; account B
imports them (the API under ``$JS.A.API``) and keeps a sourcing stream and a mirror with
``external: {api, deliver}``. Compared: what B's copies hold, their STREAM.INFO blocks, and
B's own requests to A's API through the import."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import nats
import orjson
import pytest
from components import require_nats_server

from .harness import ServerPair, ServerProcess, js_config_pair

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

CONFIG = """
accounts {
  A: {
    jetstream: enabled
    users: [{user: a, password: pw}]
    exports: [
      {service: "$JS.API.>"}
      {stream: "deliver.B.>"}
      {service: "$JS.FC.>"}
    ]
  }
  B: {
    jetstream: enabled
    users: [{user: b, password: pw}]
    imports: [
      {service: {account: A, subject: "$JS.API.>"}, to: "$JS.A.API.>"}
      {stream: {account: A, subject: "deliver.B.>"}}
      {service: {account: A, subject: "$JS.FC.>"}}
    ]
  }
}
"""

EXT = {"api": "$JS.A.API", "deliver": "deliver.B"}


@pytest.fixture(scope="module")
def pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_config_pair(CONFIG) as p:
        yield p


async def _req(nc: Any, subject: str, body: Any = None) -> Any:
    m = await nc.request(subject, orjson.dumps(body) if body is not None else b"", timeout=5)
    return orjson.loads(m.data)


def _block(b: dict[str, Any]) -> dict[str, Any]:
    b = dict(b)
    b["active"] = b.get("active", -1) >= 0
    return b


async def _copies(server: ServerProcess) -> dict[str, Any]:
    a = await nats.connect(server.url, user="a", password="pw", allow_reconnect=False)
    b = await nats.connect(server.url, user="b", password="pw", allow_reconnect=False)
    out: dict[str, Any] = {}
    made = await _req(a, "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["o.>"]})
    assert "error" not in made, made
    for i in range(5):
        # (acknowledged: nats-server stores a plain publish after its PONG, so a flush
        # would not make the INFO below see it)
        ack = orjson.loads((await a.request(f"o.{i % 2}", b"m%d" % i, timeout=5)).data)
        assert ack.get("seq") == i + 1, ack
    info = await _req(b, "$JS.A.API.STREAM.INFO.ORDERS")
    out["info through the import"] = (
        info.get("config", {}).get("name"),
        info.get("state", {}).get("messages"),
    )
    out["B's own account"] = (await _req(b, "$JS.API.INFO")).get("streams")
    src = await _req(
        b,
        "$JS.API.STREAM.CREATE.COPY",
        {"name": "COPY", "sources": [{"name": "ORDERS", "filter_subject": "o.1", "external": EXT}]},
    )
    mir = await _req(
        b,
        "$JS.API.STREAM.CREATE.MIR",
        {"name": "MIR", "mirror": {"name": "ORDERS", "external": EXT}},
    )
    out["create errors"] = (src.get("error"), mir.get("error"))
    for i in range(5, 9):
        await a.publish(f"o.{i % 2}", b"m%d" % i)
    await a.flush()
    want = {"COPY": 4, "MIR": 9}
    for _ in range(200):
        states = {n: (await _req(b, f"$JS.API.STREAM.INFO.{n}"))["state"]["messages"] for n in want}
        if states == want:
            break
        await asyncio.sleep(0.05)
    out["counts"] = states
    for name in want:
        info = await _req(b, f"$JS.API.STREAM.INFO.{name}")
        out[f"{name} blocks"] = (
            [_block(x) for x in info.get("sources", [])],
            _block(info["mirror"]) if "mirror" in info else None,
        )
        msgs = []
        for seq in range(1, want[name] + 1):
            got = await _req(b, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})
            m = got.get("message", {})
            msgs.append((m.get("subject"), m.get("seq")))
        out[f"{name} messages"] = msgs
    for nc in (a, b):
        await nc.close()
    return out


def test_a_stream_sources_and_mirrors_another_accounts(pair: ServerPair) -> None:
    ref = asyncio.run(_copies(pair.ref))
    impl = asyncio.run(_copies(pair.impl))
    assert ref["counts"] == {"COPY": 4, "MIR": 9}
    assert impl == ref


NOT_ENABLED = """
accounts {
  A: { jetstream: enabled, users: [{user: a, password: pw}], exports: [{service: "$JS.API.>"}] }
  C: { users: [{user: c, password: pw}] }
  D: { users: [{user: d, password: pw}], imports: [{service: {account: A, subject: "$JS.API.>"}}] }
}
"""

VERBS = [
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.S",
    "$JS.API.STREAM.CREATE.S",
    "$JS.API.STREAM.NAMES",
    "$JS.API.CONSUMER.INFO.S.C",
    "$JS.API.STREAM.SNAPSHOT.S",
    "$JS.API.STREAM.LEADER.STEPDOWN.S",
    "$JS.API.DIRECT.GET.S",
    "$JS.API.CONSUMER.MSG.NEXT.S.C",
    "$JS.API.NO.SUCH.VERB",
]


async def _not_enabled(server: ServerProcess) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for user in ("c", "d"):
        nc = await nats.connect(server.url, user=user, password="pw", allow_reconnect=False)
        for subject in VERBS:
            body = b'{"name":"S"}' if "CREATE" in subject else b""
            try:
                m = await nc.request(subject, body, timeout=0.5)
                doc = orjson.loads(m.data)
                # what says whose JetStream answered (timestamps and totals differ)
                out[f"{user} {subject}"] = {
                    k: doc[k] for k in ("type", "error", "streams", "total") if k in doc
                } | {"name": doc.get("config", {}).get("name")}
            except Exception as e:
                out[f"{user} {subject}"] = type(e).__name__
        await nc.close()
    return out


def test_an_account_without_jetstream_is_told_so(tmp_path: Any) -> None:
    """An account without JetStream gets 10039 for each API verb (10010 for the cluster
    ones of a single server), no responders for direct gets and pulls, nothing for unknown
    verbs; one that imports another account's API gets that account's answers."""
    require_nats_server()
    with js_config_pair(NOT_ENABLED) as p:
        ref = asyncio.run(_not_enabled(p.ref))
        impl = asyncio.run(_not_enabled(p.impl))
    assert ref["c $JS.API.INFO"]["error"]["err_code"] == 10039
    assert ref["d $JS.API.INFO"]["streams"] == 0
    assert impl == ref
