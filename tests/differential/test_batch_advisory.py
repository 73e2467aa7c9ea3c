"""The atomic batch abandoned advisory (``$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.<stream>``)
goes to the stream's account and, with an ``account`` field naming it, to the system account,
as nats-server's ``sendStreamBatchAbandonedAdvisory`` sends it: nats-server 2.15.1 against
natsd, each with an account A (JetStream) and a system account SYS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from components import require_nats_server

from .harness import ServerPair, js_config_pair, run_client_both

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

CONFIG = """
jetstream {}
system_account: SYS
accounts {
  A: { jetstream: enabled, users: [{user: a, password: p}] }
  SYS: { users: [{user: s, password: p}] }
}
"""
SUBJECT = "$JS.EVENT.ADVISORY.STREAM.BATCH_ABANDONED.>"


@pytest.fixture(scope="module")
def pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_config_pair(CONFIG) as p:
        yield p


def _masked(data: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(data)
    return {k: f"<{k}>" if k in ("id", "timestamp") else v for k, v in doc.items()}


async def test_batch_abandoned_advisory_reaches_both_accounts(pair: ServerPair) -> None:
    async def fn(nc: Any) -> Any:
        url = nc.connected_url
        sys_nc = await nats.connect(f"nats://s:p@{url.hostname}:{url.port}")
        got: dict[str, list[Any]] = {"A": [], "SYS": []}

        async def on_a(m: Any) -> None:
            got["A"].append((m.subject, _masked(m.data)))

        async def on_sys(m: Any) -> None:
            got["SYS"].append((m.subject, _masked(m.data)))

        await nc.subscribe(SUBJECT, cb=on_a)
        await sys_nc.subscribe(SUBJECT, cb=on_sys)
        await nc.flush()
        await sys_nc.flush()
        cfg = {"name": "AB", "subjects": ["ab.>"], "allow_atomic": True}
        await nc.request("$JS.API.STREAM.CREATE.AB", json.dumps(cfg).encode(), timeout=5)
        first = await nc.request(
            "ab.x", b"1", headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}, timeout=5
        )
        gap = await nc.request(
            "ab.x",
            b"3",
            headers={"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "3", "Nats-Batch-Commit": "1"},
            timeout=5,
        )
        for _ in range(40):
            if got["A"] and got["SYS"]:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        await nc.request("$JS.API.STREAM.DELETE.AB", b"", timeout=5)
        await sys_nc.close()
        return {"first": first.data.decode(), "gap": json.loads(gap.data), **got}

    ref, impl = await run_client_both(pair, fn, user="a", password="p", capture_errors=False)
    assert ref["A"] and ref["SYS"] and ref["SYS"][0][1]["account"] == "A", ref
    assert impl == ref
