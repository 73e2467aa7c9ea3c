"""Counters on an R3 stream (ADR-49), three nats-server processes against three natsd: the
leader computes each value before it proposes the message, from the increments still in
flight; pipelined increments from three connections make one chain whose values add up, a
leader stepdown keeps it (the new leader counts from its store), a duplicate stays a
duplicate, and every replica answers a direct get with the same value."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from proc_cluster import ProcCluster, running

pytestmark = pytest.mark.timeout(180)

N = 60  # increments per connection, pipelined


async def _ask(nc: Any, subject: str, body: Any = None, timeout: float = 5.0) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)


async def _counters(servers: ProcCluster) -> Any:
    ncs = [await nats.connect(s.url, allow_reconnect=False) for s in servers]
    a = ncs[0]
    cfg = {"name": "CR", "subjects": ["cr.>"], "num_replicas": 3, "allow_msg_counter": True,
           "allow_direct": True}  # fmt: skip
    for _ in range(100):
        try:
            if "config" in await _ask(a, "$JS.API.STREAM.CREATE.CR", cfg):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    for _ in range(100):  # (a leader is elected and takes publishes)
        try:
            warm = await a.request("cr.warm", b"", headers={"Nats-Incr": "0"}, timeout=1)
            if "seq" in json.loads(warm.data):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    acks: list[Any] = []

    async def burst(nc: Any, k: int) -> None:
        inbox = nc.new_inbox()
        done = asyncio.Event()
        got: list[Any] = []

        async def on(m: Msg) -> None:
            got.append(json.loads(m.data))
            if len(got) == N:
                done.set()

        await nc.subscribe(inbox, cb=on)
        for i in range(N):
            await nc.publish("cr.a", b"", reply=inbox, headers={"Nats-Incr": str(k * 10 + i % 3)})
        await nc.flush()
        await asyncio.wait_for(done.wait(), 30)
        acks.extend(got)

    await asyncio.gather(*(burst(nc, k + 1) for k, nc in enumerate(ncs)))
    errors = [x for x in acks if "error" in x]
    # the chain: sequence order, each value the one before plus its increment
    by_seq = sorted((x["seq"], int(x["val"])) for x in acks if "val" in x)
    chain_ok = True
    prev = 0
    for seq, _val in by_seq:
        m = await _ask(a, "$JS.API.STREAM.MSG.GET.CR", {"seq": seq})
        hdrs = base64.b64decode(m["message"]["hdrs"]).decode()
        incr = int(hdrs.split("Nats-Incr: ")[1].split("\r\n")[0])
        val = int(json.loads(base64.b64decode(m["message"]["data"]))["val"])
        chain_ok = chain_ok and val == prev + incr
        prev = val
    total = sum(k * 10 * N + sum(i % 3 for i in range(N)) for k in (1, 2, 3))
    out: dict[str, Any] = {"errors": errors, "chain": chain_ok, "last": prev, "sum": total}
    # a stepdown: the new leader counts on from its store; the duplicate stays one
    first = json.loads(
        (await a.request("cr.b", b"", headers={"Nats-Incr": "5", "Nats-Msg-Id": "d1"})).data
    )
    await _ask(a, "$JS.API.STREAM.LEADER.STEPDOWN.CR")
    after: Any = None
    for _ in range(100):
        try:
            after = json.loads(
                (await a.request("cr.b", b"", headers={"Nats-Incr": "1000"}, timeout=1)).data
            )
            if "val" in after:
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    dup = json.loads(
        (await a.request("cr.b", b"", headers={"Nats-Incr": "5", "Nats-Msg-Id": "d1"})).data
    )
    out["stepdown"] = (first.get("val"), after.get("val") if after else None,
                       dup.get("duplicate"), dup.get("seq") == first.get("seq"))  # fmt: skip
    await asyncio.sleep(0.5)
    reads = []
    for nc in ncs:
        m = await nc.request("$JS.API.DIRECT.GET.CR.cr.b", b"", timeout=5)
        reads.append(m.data.decode())
    out["reads"] = reads
    for nc in ncs:
        await nc.close()
    return out


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_counter_on_an_r3_stream(kind: str, tmp_path: Path) -> None:
    c = ProcCluster(
        tmp_path, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)], jetstream=[True] * 3
    )
    with running(c) as started:
        got = asyncio.run(_counters(started))
    assert got["errors"] == [] and got["chain"], got
    assert got["last"] == got["sum"]
    assert got["stepdown"] == ("5", "1005", True, True)
    assert got["reads"] == ['{"val":"1005"}'] * 3
