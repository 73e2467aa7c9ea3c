"""Counters survive what a stream survives (nats-py over real sockets, file and memory
streams): the value is the subject's last stored message, so a restart on the same store
counts on from it, and a purge of the subject starts it again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

import natsd

from .conftest import only_natsd

pytestmark = [pytest.mark.timeout(60), only_natsd]


async def _incr(nc: Any, subject: str, by: str) -> dict[str, Any]:
    msg = await nc.request(subject, b"", headers={"Nats-Incr": by}, timeout=5)
    out: dict[str, Any] = json.loads(msg.data)
    return out


async def _api(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    out: dict[str, Any] = json.loads((await nc.request(subject, data, timeout=5)).data)
    return out


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_a_counter_counts_on_after_a_restart(tmp_path: Path, storage: str) -> None:
    kw: dict[str, Any] = {"port": 0, "host": "127.0.0.1", "jetstream": True,
                          "store_dir": str(tmp_path), "http_port": -1}  # fmt: skip
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        cfg = {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True, "storage": storage}
        assert "config" in await _api(nc, "$JS.API.STREAM.CREATE.C", cfg)
        for by in ("5", "-2", "10"):
            await _incr(nc, "c.a", by)
        assert (await _incr(nc, "c.b", "1"))["val"] == "1"
        await nc.close()
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        if storage == "memory":
            # a memory stream starts empty after a restart, and its counters at 0
            await _api(nc, "$JS.API.STREAM.CREATE.C", cfg)
            assert (await _incr(nc, "c.a", "1"))["val"] == "1"
        else:
            assert await _incr(nc, "c.a", "1") == {"stream": "C", "seq": 5, "val": "14"}
            await _api(nc, "$JS.API.STREAM.PURGE.C", {"filter": "c.a"})
            assert (await _incr(nc, "c.a", "2"))["val"] == "2"
            assert (await _incr(nc, "c.b", "1"))["val"] == "2"
        await nc.close()
