"""Atomic batches on an R3 stream (ADR-50), three nats-server processes against three
natsd: the leader stages the batch and proposes it as one Raft entry, so every replica
holds all of it or none; a leadership change drops the open batches (the publisher's next
message is told the batch is incomplete, nothing is stored); a batch then starts again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from proc_cluster import ProcCluster, running

pytestmark = pytest.mark.timeout(180)


def _b(bid: str, seq: int, commit: bool = False) -> dict[str, str]:
    h = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(seq)}
    if commit:
        h["Nats-Batch-Commit"] = "1"
    return h


async def _ask(nc: Any, subject: str, body: Any = None, headers: Any = None) -> Any:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    m = await nc.request(subject, data, timeout=5, headers=headers)
    return json.loads(m.data) if m.data else ""


async def _scenario(servers: ProcCluster) -> Any:
    ncs = [await nats.connect(s.url, allow_reconnect=False) for s in servers]
    a = ncs[0]
    cfg = {"name": "AB", "subjects": ["ab.>"], "num_replicas": 3, "allow_atomic": True,
           "allow_direct": True}  # fmt: skip
    for _ in range(100):
        try:
            if "config" in await _ask(a, "$JS.API.STREAM.CREATE.AB", cfg):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    for _ in range(100):  # (a leader is elected and takes publishes)
        try:
            if "seq" in await _ask(a, "ab.warm", b"w"):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    out: dict[str, Any] = {}
    out["batch"] = [await _ask(a, f"ab.{i}", b"x", _b("b1", i, i == 3)) for i in (1, 2, 3)]
    # a leadership change in the middle of a batch
    out["before"] = [await _ask(a, "ab.x", b"x", _b("b2", i)) for i in (1, 2)]
    await _ask(a, "$JS.API.STREAM.LEADER.STEPDOWN.AB")
    third: Any = None
    for _ in range(100):
        try:
            third = await _ask(a, "ab.x", b"x", _b("b2", 3, True))
            break
        except Exception:  # no leader for a moment
            await asyncio.sleep(0.2)
    out["after stepdown"] = third
    again: Any = None
    for _ in range(100):
        try:
            again = [await _ask(a, "ab.y", b"y", _b("b2", i, i == 2)) for i in (1, 2)]
            break
        except Exception:
            await asyncio.sleep(0.2)
    out["again"] = again
    await asyncio.sleep(0.5)
    out["states"] = []
    for nc in ncs:
        m = await nc.request("$JS.API.DIRECT.GET.AB", json.dumps({"seq": 6}).encode(), timeout=5)
        out["states"].append((m.headers or {}).get("Nats-Subject"))
    info = await _ask(a, "$JS.API.STREAM.INFO.AB")
    out["messages"] = info["state"]["messages"]
    for nc in ncs:
        await nc.close()
    return out


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_atomic_batch_on_an_r3_stream(kind: str, tmp_path: Path) -> None:
    c = ProcCluster(
        tmp_path, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)], jetstream=[True] * 3
    )
    with running(c) as started:
        got = asyncio.run(_scenario(started))
    assert got["batch"] == ["", "", {"stream": "AB", "seq": 4, "batch": "b1", "count": 3}]
    assert got["before"] == ["", ""]
    assert got["after stepdown"]["error"]["err_code"] == 10176, got
    assert got["again"] == ["", {"stream": "AB", "seq": 6, "batch": "b2", "count": 2}], got
    assert got["states"] == ["ab.y"] * 3
    assert got["messages"] == 6
