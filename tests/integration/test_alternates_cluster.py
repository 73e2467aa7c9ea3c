"""STREAM.INFO's ``alternates`` on a cluster, against a cluster of nats-server: a stream with
mirrors lists itself and them, each with its cluster; a stream without mirrors (a mirror
itself, say) lists none. Three servers of each, processes on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from proc_cluster import ProcCluster

pytestmark = pytest.mark.timeout(180)


async def _req(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    m = await nc.request(subject, json.dumps(body).encode() if body is not None else b"",
                         timeout=10)  # fmt: skip
    return dict(json.loads(m.data))


async def _alternates(tmp: Path, kind: str) -> dict[str, Any]:
    cluster = ProcCluster(tmp, 3, kinds=kind)
    await cluster.start(wait="js")
    try:
        nc = await cluster.connect(0)
        out: dict[str, Any] = {}
        for body in ({"name": "O", "subjects": ["o.>"], "num_replicas": 3},
                     {"name": "M1", "mirror": {"name": "O"}},
                     {"name": "M2", "mirror": {"name": "O"}, "num_replicas": 3},
                     {"name": "LONE", "subjects": ["lone.>"]}):  # fmt: skip
            made = await _req(nc, f"$JS.API.STREAM.CREATE.{body['name']}", body)
            assert "error" not in made, made
        for name in ("O", "M1", "M2", "LONE"):
            info: dict[str, Any] = {}
            for _ in range(50):
                info = await _req(nc, f"$JS.API.STREAM.INFO.{name}")
                if "error" not in info:
                    break
                await asyncio.sleep(0.2)
            alts = info.get("alternates")
            out[name] = sorted(alts, key=lambda a: a["name"]) if alts is not None else None
        await nc.close()
        return out
    finally:
        await cluster.close()


def test_stream_info_alternates_as_nats_server(tmp_path: Path) -> None:
    ref = asyncio.run(_alternates(tmp_path / "ref", "nats-server"))
    impl = asyncio.run(_alternates(tmp_path / "impl", "natsd"))
    assert ref["O"] == [
        {"name": n, "cluster": "pc"} for n in ("M1", "M2", "O")
    ], ref
    assert impl == ref
