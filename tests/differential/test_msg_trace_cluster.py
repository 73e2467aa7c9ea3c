"""Message tracing across routes (ADR-41): three servers, the publisher and the tracer on
the first, subscribers on the second; nats-server, natsd and mixed clusters must send the
same trace events from each server (the hop headers, the route egresses, the remote
ingress) and deliver the same messages, trace-only included."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from proc_cluster import ProcCluster

from .test_cluster_mesh import KINDS, _cluster, _meshed, _sync

pytestmark = pytest.mark.timeout(120)

_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


@pytest.fixture(params=list(KINDS))
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcCluster]:
    yield from _cluster(KINDS[request.param], tmp_path)


def _normalise(
    raw: bytes, roles: dict[str, str], cids: dict[tuple[str, int], str]
) -> dict[str, Any]:
    doc = json.loads(raw)
    server = doc["server"]
    assert _TS.match(server["time"]), server
    role = roles[server["name"]]
    doc["server"] = {"role": role, "cluster": server.get("cluster")}
    for ev in doc["events"]:
        assert _TS.match(ev.pop("ts")), ev
        if ev["kind"] == 1:
            assert isinstance(ev.pop("cid"), int)
            ev["name"] = roles.get(ev.get("name", ""), "?")
        else:
            ev["cid"] = cids.get((role, ev["cid"]), "other")  # (ids are per server)
    return doc


async def _scenario(servers: ProcCluster) -> Any:
    for s in servers:
        await _meshed(s, len(servers))
    roles = {s.name: f"s{i}" for i, s in enumerate(servers)}
    a = await nats.connect(servers[0].url, allow_reconnect=False, name="pub")
    b = await nats.connect(servers[1].url, allow_reconnect=False, name="subB")
    cids = {("s0", a._client_id): "pub", ("s1", b._client_id): "subB"}
    traces: list[bytes] = []
    got: list[Any] = []

    async def on_trace(m: Msg) -> None:
        traces.append(m.data)

    async def on_msg(m: Msg) -> None:
        got.append((m.subject, m.data, sorted((m.headers or {}).items())))

    await a.subscribe("trace.dest", cb=on_trace)
    await b.subscribe("foo", cb=on_msg)
    await b.subscribe("foo", queue="grp", cb=on_msg)
    await _sync(a, b, "b")
    out = []
    for headers in (
        {"Nats-Trace-Dest": "trace.dest"},
        {"Nats-Trace-Dest": "trace.dest", "Nats-Trace-Only": "true"},
        # a hop written by the client is replaced on the route, and not the origin's hop
        {"Nats-Trace-Dest": "trace.dest", "Nats-Trace-Hop": "7"},
    ):
        traces.clear()
        got.clear()
        await a.publish("foo", b"hello", headers=headers)
        await a.flush()
        await asyncio.sleep(0.5)
        per_server = sorted(
            (_normalise(t, roles, cids) for t in traces), key=lambda d: d["server"]["role"]
        )
        out.append({"traces": per_server, "got": sorted(got)})
    await a.close()
    await b.close()
    return out


def test_traces_across_routes_match_nats_server(cluster: ProcCluster, tmp_path: Path) -> None:
    got = asyncio.run(_scenario(cluster))
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    ref_cluster = _cluster(KINDS["nats-server"], ref_dir)
    try:
        ref = asyncio.run(_scenario(next(ref_cluster)))
    finally:
        ref_cluster.close()
    # the reference: a trace from each server, the remote one with the hop header
    assert [t["server"]["role"] for t in ref[0]["traces"]] == ["s0", "s1"]
    assert ref[0]["traces"][1]["request"]["header"]["Nats-Trace-Hop"] == ["1"]
    assert len(ref[0]["got"]) == 2 and ref[1]["got"] == []
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        assert g == r, (i, json.dumps(g, default=repr), json.dumps(r, default=repr))
