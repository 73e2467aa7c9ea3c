"""``persist_mode: async`` (nats-server 2.12) on an R1 file stream, through nats-py: the
PubAck leaves before the write reaches the disk (the next group commit writes and syncs it),
so a clean stop keeps everything acknowledged; the replicated form and a change of mode are
refused as nats-server refuses them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

import natsd

from .conftest import only_natsd

pytestmark = [pytest.mark.timeout(60), only_natsd]


async def _api(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    out: dict[str, Any] = json.loads((await nc.request(subject, data, timeout=5)).data)
    return out


async def test_async_persist_acknowledges_and_keeps_what_it_acknowledged(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"port": 0, "host": "127.0.0.1", "jetstream": True,
                          "store_dir": str(tmp_path), "http_port": -1}  # fmt: skip
    cfg = {"name": "P", "subjects": ["p.>"], "persist_mode": "async"}
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        created = await _api(nc, "$JS.API.STREAM.CREATE.P", cfg)
        assert created["config"]["persist_mode"] == "async"
        assert created["config"]["metadata"]["_nats.req.level"] == "2"
        js = nc.jetstream()
        acks = [await js.publish("p.a", b"%d" % i) for i in range(100)]
        assert [a.seq for a in acks] == list(range(1, 101))
        r3 = await _api(nc, "$JS.API.STREAM.CREATE.Q",
                        {"name": "Q", "persist_mode": "async", "num_replicas": 3})  # fmt: skip
        assert r3["error"]["err_code"] == 10052, r3
        back = await _api(nc, "$JS.API.STREAM.UPDATE.P", {**cfg, "persist_mode": "default"})
        assert back["error"]["description"] == (
            "stream configuration update can not change persist mode"
        )
        await nc.close()
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        info = await _api(nc, "$JS.API.STREAM.INFO.P")
        assert info["state"]["messages"] == 100
        await nc.close()
