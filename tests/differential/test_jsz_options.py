"""``/jsz``'s paging and filters against nats-server: ``offset`` and ``limit`` over the
accounts (by name), ``acc`` naming one (and what happens when it names none), ``raft`` (the
counts of streams and consumers a server leads, each stream's Raft group), and
``stream-leader-only``, over HTTP and over ``$SYS.REQ.SERVER.PING.JSZ``; values that are
not booleans or integers refused with nats-server's 400 text. Both servers run the same
accounts and streams; what is compared is the structure (which accounts, streams, consumers
and keys), not the figures that differ by implementation (sizes, times, ids).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from ports import free_port

from .harness import ServerProcess, start_server

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

CONFIG = """
server_name: J1
accounts {
  SYS { users: [{user: sys, password: sys}] }
  A { jetstream: enabled, users: [{user: a, password: a}] }
  B { jetstream: enabled, users: [{user: b, password: b}] }
  C { jetstream: enabled, users: [{user: c, password: c}] }
}
system_account: SYS
"""

QUERIES = [
    "",
    "accounts=true",
    "accounts=1&offset=1",
    "accounts=true&offset=1&limit=1",
    "accounts=true&limit=2",
    "accounts=true&offset=9",
    "accounts=true&offset=-2&limit=1",
    "streams=true&limit=2",
    "consumers=true",
    "consumers=true&config=true",
    "acc=B&streams=true",
    "acc=B",
    "acc=NOPE&streams=true",
    "acc=NOPE&accounts=true&limit=1",
    "streams=true&raft=true",
    "streams=true&stream-leader-only=true",
    "accounts=T&streams=F",
]
BAD = ["accounts=yes", "streams=2", "limit=ten", "offset=1.5", "raft=on", "leader-only=x"]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[ServerProcess, int]]]:
    require_nats_server()
    tmp = Path(tempfile.mkdtemp(prefix="natsd-jsz-"))
    started: dict[str, tuple[ServerProcess, int]] = {}
    try:
        conf = tmp / "jsz.conf"
        conf.write_text(CONFIG)
        for kind in ("nats-server", "natsd"):
            sd = tmp / f"store-{kind}"
            sd.mkdir()
            port = free_port()
            args = ["-js", "-sd", str(sd), "-m", str(port)]
            started[kind] = (start_server(kind, args, config_path=conf, log_dir=tmp), port)
        for proc, _ in started.values():
            asyncio.run(_populate(proc.url))
        yield started
    finally:
        for proc, _ in started.values():
            proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _populate(url: str) -> None:
    """A: streams A2 and A1 (A1 with a consumer); B: stream B1 with two; C: none."""
    for user, streams in (("a", {"A2": 0, "A1": 1}), ("b", {"B1": 2}), ("c", {})):
        nc = await nats.connect(url, user=user, password=user)
        try:
            js = nc.jetstream()
            for name, consumers in streams.items():
                await js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
                await js.publish(f"{name.lower()}.x", b"m")
                for i in range(consumers):
                    await js.add_consumer(name, durable_name=f"D{i}", ack_policy="explicit")
        finally:
            await nc.close()


def _get(port: int, query: str, path: str = "/jsz") -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}?{query}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _shape(doc: Any) -> Any:
    """What a client reads of a /jsz answer's structure: the totals it pages by, which
    accounts (in order), streams and consumers it lists, the keys that say what was asked."""
    if not isinstance(doc, dict):
        return doc
    out: dict[str, Any] = {
        "total": doc.get("total"),
        "accounts figure": doc.get("accounts"),
        "streams": doc.get("streams"),
        "consumers": doc.get("consumers"),
        "streams_leader": doc.get("streams_leader"),
        "consumers_leader": doc.get("consumers_leader"),
        "has details": "account_details" in doc,
    }
    details = []
    for d in doc.get("account_details") or []:
        sds = []
        for sd in d.get("stream_detail") or []:
            cds = sd.get("consumer_detail") or []
            sds.append(
                (
                    sd["name"],
                    sorted(set(sd) - {"created"}),
                    sorted(c["name"] for c in cds),
                    sorted({k for c in cds for k in c} & {"config", "name", "num_pending"}),
                )
            )
        # (nats-server lists an account's streams in its map's order: compared sorted)
        details.append((d["name"], "stream_detail" in d, sorted(sds)))
    out["details"] = details
    return out


def test_jsz_paging_and_filters_as_nats_server(
    servers: dict[str, tuple[ServerProcess, int]],
) -> None:
    (_, ref_port), (_, port) = servers["nats-server"], servers["natsd"]
    for q in QUERIES:
        ref_status, ref_doc = _get(ref_port, q)
        status, doc = _get(port, q)
        assert (status, _shape(doc)) == (ref_status, _shape(ref_doc)), q
    # the details' account keys (nats-server's AccountDetail embeds JetStreamStats)
    _, ref_doc = _get(ref_port, "acc=A")
    _, doc = _get(port, "acc=A")
    assert set(doc["account_details"][0]) == set(ref_doc["account_details"][0])
    assert set(doc["account_details"][0]["api"]) <= set(ref_doc["account_details"][0]["api"])
    for q in BAD:
        assert _get(port, q) == _get(ref_port, q), q


def test_jsz_paging_over_the_system_account_as_nats_server(
    servers: dict[str, tuple[ServerProcess, int]],
) -> None:
    async def ask(url: str) -> list[Any]:
        nc = await nats.connect(url, user="sys", password="sys")
        try:
            out = []
            for body in (
                {"accounts": True, "offset": 1, "limit": 1},
                {"accounts": True, "limit": 2},
                {"streams": True, "raft": True, "stream_leader_only": True},
                {"account": "B", "streams": True, "consumer": True},
            ):
                m = await nc.request("$SYS.REQ.SERVER.PING.JSZ", json.dumps(body).encode(), 5)
                out.append(_shape(json.loads(m.data)["data"]))
            return out
        finally:
            await nc.close()

    ref = asyncio.run(ask(servers["nats-server"][0].url))
    impl = asyncio.run(ask(servers["natsd"][0].url))
    assert impl == ref
    assert [a for a, _, _ in impl[0]["details"]] == ["B"]


def test_accstatz_as_nats_server(servers: dict[str, tuple[ServerProcess, int]]) -> None:
    """``/accstatz``: the accounts with connections on the server (``unused``: every
    account), each with nats-server's keys (natsd leaves out the parts by route, gateway
    and leaf node)."""

    async def ask(url: str, port: int) -> list[Any]:
        nc = await nats.connect(url, user="b", password="b")
        try:
            await nc.publish("b1.x", b"m")
            await nc.flush()
            out = []
            for q in ("", "unused=true"):
                status, doc = _get(port, q, path="/accstatz")
                assert status == 200, doc
                out.append(
                    (
                        set(doc),
                        sorted(
                            (st["acc"], st["conns"], set(st), set(st["sent"]) & {"msgs", "bytes"})
                            for st in doc["account_statz"]
                            if q == "" or st["acc"] in ("A", "B", "C")
                        ),
                    )
                )
            out.append(_get(port, "unused=maybe", path="/accstatz"))
            return out
        finally:
            await nc.close()

    (ref_proc, ref_port), (proc, port) = servers["nats-server"], servers["natsd"]
    ref = asyncio.run(ask(ref_proc.url, ref_port))
    impl = asyncio.run(ask(proc.url, port))
    assert impl[0][1] == [("B", 1, impl[0][1][0][2], {"msgs", "bytes"})]
    for (keys, stats), (ref_keys, ref_stats) in zip(impl[:2], ref[:2], strict=True):
        assert keys == ref_keys
        assert [(a, n) for a, n, _, _ in stats] == [(a, n) for a, n, _, _ in ref_stats]
        for (_, _, st_keys, _), (_, _, ref_st_keys, _) in zip(stats, ref_stats, strict=True):
            assert st_keys == ref_st_keys
    assert impl[2] == ref[2]
