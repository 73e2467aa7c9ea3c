"""Fast-ingest batches on an R3 stream (nats-server 2.14), three nats-server processes
against three natsd: each message is its own Raft entry, the flow acks and the final PubAck
leave as the leader applies them, a duplicate is skipped and counted, and after a leader
stepdown the new leader tells the publisher where the batch stands (a flow ack for what
was applied, to the last reply subject) and the batch goes on to its commit."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from proc_cluster import ProcCluster, running

pytestmark = pytest.mark.timeout(180)


async def _ask(nc: Any, subject: str, body: Any = None, timeout: float = 5.0) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)


class Publisher:
    """One fast batch's publisher: its answers, in the order they came."""

    def __init__(self, nc: Any, bid: str, flow: int, gap: str = "fail") -> None:
        self.nc, self.bid, self.flow, self.gap = nc, bid, flow, gap
        self.got: list[Any] = []

    async def start(self) -> None:
        async def on(m: Any) -> None:
            self.got.append(json.loads(m.data) if m.data else "")

        await self.nc.subscribe(f"fb.{self.bid}.>", cb=on)
        await self.nc.flush()

    async def send(self, seq: int, op: int, headers: dict[str, str] | None = None) -> None:
        reply = f"fb.{self.bid}.{self.flow}.{self.gap}.{seq}.{op}.$FI"
        await self.nc.publish("fr.a", b"m%d" % seq, reply=reply, headers=headers)
        await self.nc.flush()

    async def until(self, pred: Any, within: float = 10.0) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if pred(self.got):
                return True
            await asyncio.sleep(0.02)
        return False

    def final(self) -> Any:
        return next((a for a in self.got if isinstance(a, dict) and "count" in a), None)

    def acks(self) -> list[int]:
        return [a["seq"] for a in self.got if isinstance(a, dict) and a.get("type") == "ack"]


async def _fast(servers: ProcCluster) -> dict[str, Any]:
    ncs = [await nats.connect(s.url, allow_reconnect=False) for s in servers]
    a = ncs[0]
    cfg = {"name": "FR", "subjects": ["fr.>"], "num_replicas": 3, "allow_batched": True,
           "allow_direct": True}  # fmt: skip
    for _ in range(100):
        try:
            if "config" in await _ask(a, "$JS.API.STREAM.CREATE.FR", cfg):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    for _ in range(100):  # (a leader takes publishes)
        try:
            if "seq" in json.loads((await a.request("fr.warm", b"", timeout=1)).data):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    out: dict[str, Any] = {}
    # 25 messages, ack every 10, committed by the last: every one stored, one PubAck
    p = Publisher(a, "clean", 10)
    await p.start()
    for seq in range(1, 26):
        await p.send(seq, 0 if seq == 1 else 2 if seq == 25 else 1)
    await p.until(lambda got: any(isinstance(x, dict) and "count" in x for x in got))
    out["clean final"] = p.final()
    out["clean acks rise"] = p.acks() == sorted(p.acks()) and p.acks()[:1] == [0]
    # a duplicate (the Nats-Msg-Id of message 1 again) is skipped and counted
    d = Publisher(a, "dups", 10)
    await d.start()
    await d.send(1, 0, {"Nats-Msg-Id": "x1"})
    await d.send(2, 1, {"Nats-Msg-Id": "x1"})
    await d.send(3, 2, {"Nats-Msg-Id": "x3"})
    await d.until(lambda got: any(isinstance(x, dict) and "count" in x for x in got))
    out["dups final"] = d.final()
    # a stepdown in the middle: the new leader says where the batch is, it goes on
    s = Publisher(a, "step", 2)
    await s.start()
    for seq in range(1, 6):
        await s.send(seq, 0 if seq == 1 else 1)
    await s.until(lambda got: 4 in [x.get("seq") for x in got if isinstance(x, dict)])
    before = len(s.got)
    await _ask(a, "$JS.API.STREAM.LEADER.STEPDOWN.FR")

    def new_leaders_ack(got: list[Any]) -> bool:
        return any(
            isinstance(x, dict) and x.get("type") == "ack" and x["seq"] == 5 for x in got[before:]
        )

    out["new leader's ack"] = await s.until(new_leaders_ack)
    for _ in range(100):  # (the new leader takes publishes)
        try:
            if "seq" in json.loads((await a.request("fr.warm", b"", timeout=1)).data):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    await s.send(6, 1)
    await s.send(7, 2)
    await s.until(lambda got: any(isinstance(x, dict) and "count" in x for x in got))
    fin = s.final()
    out["step final count"] = fin and fin["count"]
    info = await _ask(a, "$JS.API.STREAM.INFO.FR")
    out["messages"] = info["state"]["messages"]
    reads = []
    await asyncio.sleep(0.5)
    for nc in ncs:  # every replica holds the same last message
        m = await nc.request("$JS.API.DIRECT.GET.FR.fr.a", b"", timeout=5)
        reads.append((m.headers or {}).get("Nats-Sequence"))
    out["replicas agree"] = len(set(reads)) == 1
    for nc in ncs:
        await nc.close()
    return out


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_fast_batch_on_an_r3_stream(kind: str, tmp_path: Path) -> None:
    c = ProcCluster(
        tmp_path, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)], jetstream=[True] * 3
    )
    with running(c) as started:
        got = asyncio.run(_fast(started))
    assert got["clean final"] == {"stream": "FR", "seq": 26, "batch": "clean", "count": 25}, got
    assert got["clean acks rise"], got
    assert got["dups final"] == {"stream": "FR", "seq": 28, "batch": "dups", "count": 3}, got
    assert got["new leader's ack"] and got["step final count"] == 7, got
    # (two warm-up publishes, one before the stepdown and one after)
    assert got["messages"] == 2 + 25 + 2 + 7 and got["replicas agree"], got
