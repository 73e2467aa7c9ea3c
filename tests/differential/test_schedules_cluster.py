"""Message schedules on an R3 stream (ADR-51), three nats-server processes against three
natsd, file and memory: only the leader produces, every replica applies the firing and
re-arms from it; an ``@every`` schedule keeps firing across two leader stepdowns with each
planned time produced once (its ``Nats-Schedule-Next`` values strictly increase); an
``@at`` schedule due during a stepdown fires once and purges itself on every replica; a
client's cancel purges a schedule on every replica."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest
from proc_cluster import ProcCluster, running

from .r3_helpers import publish

pytestmark = pytest.mark.timeout(180)


async def _ask(nc: Any, subject: str, body: Any = None, timeout: float = 5.0) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    return json.loads((await nc.request(subject, data, timeout=timeout)).data)


async def _count(nc: Any, subject: str) -> int:
    for _ in range(50):
        try:
            info = await _ask(nc, "$JS.API.STREAM.INFO.SR", {"subjects_filter": subject})
            return int((info["state"].get("subjects") or {}).get(subject, 0))
        except Exception:
            await asyncio.sleep(0.2)
    raise AssertionError("no stream info")


async def _nexts(nc: Any, subject: str) -> list[str]:
    """The Nats-Schedule-Next of every message on ``subject``, in order."""
    info = await _ask(nc, "$JS.API.STREAM.INFO.SR")
    out = []
    seq = info["state"]["first_seq"]
    while True:
        m = await _ask(nc, "$JS.API.STREAM.MSG.GET.SR", {"next_by_subj": subject, "seq": seq})
        if "message" not in m:
            return out
        hdrs = base64.b64decode(m["message"]["hdrs"]).decode()
        out.append(hdrs.split("Nats-Schedule-Next: ")[1].split("\r\n")[0])
        seq = m["message"]["seq"] + 1


async def _stepdown(nc: Any) -> None:
    for _ in range(50):
        try:
            if (await _ask(nc, "$JS.API.STREAM.LEADER.STEPDOWN.SR")).get("success"):
                return
        except Exception:
            pass
        await asyncio.sleep(0.2)


async def _schedules(servers: ProcCluster, storage: str) -> dict[str, Any]:
    ncs = [await nats.connect(s.url, allow_reconnect=False) for s in servers]
    a = ncs[0]
    cfg = {"name": "SR", "subjects": ["sch.>", "tgt.>"], "num_replicas": 3, "storage": storage,
           "allow_msg_schedules": True, "allow_direct": True}  # fmt: skip
    for _ in range(100):
        try:
            if "config" in await _ask(a, "$JS.API.STREAM.CREATE.SR", cfg):
                break
        except Exception:
            pass
        await asyncio.sleep(0.2)
    out: dict[str, Any] = {}
    await publish(a, "sch.every", b"tick",
                 {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "tgt.every",
                  "Nats-Msg-Id": "every"})  # fmt: skip
    deadline = time.monotonic() + 10
    while await _count(a, "tgt.every") < 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    when = datetime.now(UTC) + timedelta(seconds=1.5)
    pattern = "@at " + when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    await publish(
        a,
        "sch.at",
        b"once",
        {"Nats-Schedule": pattern, "Nats-Schedule-Target": "tgt.at", "Nats-Msg-Id": "at"},
    )
    await publish(a, "sch.cancel", b"never",
                 {"Nats-Schedule": "@at 2030-01-01T00:00:00Z", "Nats-Schedule-Target": "tgt.c",
                  "Nats-Msg-Id": "c"})  # fmt: skip
    await _stepdown(a)
    await asyncio.sleep(1.0)
    await _stepdown(a)
    await publish(a, "tgt.x", b"",
                 {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sch.cancel",
                  "Nats-Msg-Id": "cancel"})  # fmt: skip
    before = await _count(a, "tgt.every")
    deadline = time.monotonic() + 10
    while await _count(a, "tgt.every") < before + 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    out["every kept firing"] = await _count(a, "tgt.every") >= before + 2
    await publish(a, "sch.every", b"", {"Nats-Msg-Id": "end"})  # a plain message ends it
    await asyncio.sleep(1.5)
    nexts = await _nexts(a, "tgt.every")
    out["each planned time once"] = nexts == sorted(set(nexts))
    out["at fired"] = await _count(a, "tgt.at")
    out["cancelled"] = await _count(a, "tgt.c")
    # every replica: the fired @at and the cancelled schedule are gone, the last firing is
    # the same message
    reads = []
    for nc in ncs:
        got = []
        for subject in ("sch.at", "sch.cancel", "tgt.every"):
            m = await nc.request(f"$JS.API.DIRECT.GET.SR.{subject}", b"", timeout=5)
            got.append(m.headers.get("Status") if m.headers and "Status" in m.headers
                       else m.headers.get("Nats-Sequence") if m.headers else None)  # fmt: skip
        reads.append(got)
    out["replicas"] = reads
    for nc in ncs:
        await nc.close()
    return out


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_schedules_on_an_r3_stream(kind: str, storage: str, tmp_path: Path) -> None:
    c = ProcCluster(
        tmp_path, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)], jetstream=[True] * 3
    )
    with running(c) as started:
        got = asyncio.run(_schedules(started, storage))
    assert got["every kept firing"] and got["each planned time once"], got
    assert got["at fired"] == 1 and got["cancelled"] == 0, got
    reads = got["replicas"]
    assert [r[:2] for r in reads] == [["404", "404"]] * 3, got
    assert len({r[2] for r in reads}) == 1 and reads[0][2] is not None, got
