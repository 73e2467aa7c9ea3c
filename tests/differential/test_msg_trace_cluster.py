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
from proc_cluster import ProcCluster, running

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


async def _r3(servers: ProcCluster) -> Any:
    """A traced publish into an R3 stream from the first server, delivering and then
    trace-only: what is stored, what the publisher is answered, and which servers sent
    a JetStream event (only the stream leader's server does)."""
    a = await nats.connect(servers[0].url, allow_reconnect=False, name="pub")
    js = a.jetstream()
    for _ in range(100):
        try:
            await js.add_stream(name="TR", subjects=["tr.>"], num_replicas=3)
            break
        except Exception:
            await asyncio.sleep(0.2)
    for _ in range(100):  # (a leader is elected and takes publishes)
        try:
            await js.publish("tr.warm", b"w", timeout=1)
            break
        except Exception:
            await asyncio.sleep(0.2)
    traces: list[bytes] = []
    answers: list[bytes] = []

    async def on_trace(m: Msg) -> None:
        traces.append(m.data)

    async def on_answer(m: Msg) -> None:
        answers.append(m.data)

    await a.subscribe("trace.dest", cb=on_trace)
    await a.subscribe("answer", cb=on_answer)
    await a.flush()
    out = []
    for only in (False, True):
        traces.clear()
        answers.clear()
        headers = {"Nats-Trace-Dest": "trace.dest", **({"Nats-Trace-Only": "true"} if only else {})}
        await a.publish("tr.a", b"x", reply="answer", headers=headers)
        await a.flush()
        await asyncio.sleep(1.0)
        info = await js.stream_info("TR")
        js_events = [e for t in traces for e in json.loads(t)["events"] if e["type"] == "js"]
        for e in js_events:
            e.pop("ts")
        out.append(
            {
                "messages": info.state.messages,
                "answers": [sorted(json.loads(x)) for x in answers],
                "js": js_events,
                "servers": len(traces) >= 1,
            }
        )
    stored = await js.get_msg("TR", 2)
    # (a Nats-Trace-Hop too when the leader is on another server: the route added it)
    out.append((stored.headers or {}).get("Nats-Trace-Dest"))
    await a.close()
    return out


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_traced_publish_into_an_r3_stream_as_nats_server(kind: str, tmp_path: Path) -> None:
    c = ProcCluster(
        tmp_path, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)], jetstream=[True] * 3
    )
    with running(c) as started:
        got = asyncio.run(_r3(started))
    assert got == [
        # delivering: stored once, acknowledged, one js event (from the leader's server)
        {"messages": 2, "answers": [["seq", "stream"]], "js": [
            {"type": "js", "stream": "TR", "subject": "tr.a"}], "servers": True},
        # trace-only: checked on the leader, not stored, not acknowledged
        {"messages": 2, "answers": [], "js": [
            {"type": "js", "stream": "TR", "subject": "tr.a"}], "servers": True},
        "trace disabled",
    ]  # fmt: skip
