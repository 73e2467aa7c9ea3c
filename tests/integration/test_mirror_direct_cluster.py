"""``mirror_direct`` on a cluster, against a cluster of nats-server: an R1 origin that allows
direct gets on one server, an R3 mirror on all three and an R1 mirror on another; a direct
get of the origin sent to any server is answered once, by the origin or one of its mirrors,
with the right message; with the origin's server gone, the mirrors go on answering for it.
Three servers of each, processes on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from proc_cluster import ProcCluster

pytestmark = pytest.mark.timeout(240)

N = 20


async def _req(nc: Any, subject: str, body: Any = None) -> dict[str, Any]:
    m = await nc.request(subject, json.dumps(body).encode() if body is not None else b"",
                         timeout=10)  # fmt: skip
    return dict(json.loads(m.data))


async def _made(nc: Any, body: dict[str, Any]) -> dict[str, Any]:
    for _ in range(50):
        made = await _req(nc, f"$JS.API.STREAM.CREATE.{body['name']}", body)
        if "error" not in made:
            return made
        await asyncio.sleep(0.2)
    raise AssertionError(made)


async def _acked(nc: Any, subject: str, data: bytes) -> None:
    """Publish until acknowledged: a stream just made on another server may not have its
    interest known on the client's server yet (no responders for a moment)."""
    for _ in range(100):
        try:
            # (a retry of one that was stored is a duplicate: the msg id drops it)
            m = await nc.request(subject, data, timeout=2, headers={"Nats-Msg-Id": subject})
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            await asyncio.sleep(0.1)
            continue
        ack = json.loads(m.data)
        assert "error" not in ack, ack
        return
    raise AssertionError(f"no acknowledgement for {subject}")


async def _held(nc: Any, name: str) -> None:
    """Wait until ``name`` holds the N messages and its mirror block shows no lag."""
    info: dict[str, Any] = {}
    for _ in range(150):
        try:
            info = await _req(nc, f"$JS.API.STREAM.INFO.{name}")
        except nats.errors.TimeoutError:
            # (nats-server: only a stream's leader answers, and a just-made R3 stream
            # has none until its election ends, which on a loaded machine took over 10 s)
            continue
        if info.get("state", {}).get("messages") == N and info.get("mirror", {}).get("lag") == 0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(info)


async def _gets(nc: Any, count: int, tag: str) -> tuple[list[str], int]:
    """``count`` direct gets of the origin (by sequence, and the last of a subject), each to
    an inbox of its own: the stream that answered each, and how many were answered other
    than exactly once with the right message."""
    got: dict[str, list[Any]] = {}

    async def take(m: Any) -> None:
        got.setdefault(m.subject, []).append(m)

    sub = await nc.subscribe(f"_INBOX.md{tag}.*", cb=take)
    await nc.flush()
    want: dict[str, tuple[int, bytes]] = {}
    for k in range(count):
        seq = k % N + 1
        inbox = f"_INBOX.md{tag}.{k}"
        want[inbox] = (seq, b"m%d" % seq)
        if k % 2:
            await nc.publish("$JS.API.DIRECT.GET.O", json.dumps({"seq": seq}).encode(),
                             reply=inbox)  # fmt: skip
        else:
            await nc.publish(f"$JS.API.DIRECT.GET.O.o.k{seq}", b"", reply=inbox)
    await nc.flush()
    await asyncio.sleep(1.5)  # (a second answer would be here by now)
    await sub.unsubscribe()
    names, bad = [], 0
    for inbox, (seq, data) in want.items():
        answers = got.get(inbox, [])
        if len(answers) != 1:
            bad += 1
            continue
        m = answers[0]
        h = m.headers or {}
        if m.data != data or h.get("Nats-Sequence") != str(seq):
            bad += 1
        names.append(h.get("Nats-Stream", ""))
    return names, bad


async def _mirror_direct(tmp: Path, kind: str) -> dict[str, Any]:
    cluster = ProcCluster(tmp, 3, kinds=kind, tags=[["a"], ["b"], ["c"]])
    await cluster.start(wait="js")
    out: dict[str, Any] = {}
    try:
        nc = await cluster.connect(1)
        await _made(nc, {"name": "O", "subjects": ["o.>"], "allow_direct": True,
                         "placement": {"tags": ["a"]}})  # fmt: skip
        for i in range(1, N + 1):
            await _acked(nc, f"o.k{i}", b"m%d" % i)
        m3 = await _made(nc, {"name": "M", "mirror": {"name": "O"}, "num_replicas": 3})
        m1 = await _made(nc, {"name": "M1", "mirror": {"name": "O"},
                              "placement": {"tags": ["b"]}})  # fmt: skip
        out["mirror_direct"] = [m3["config"].get("mirror_direct"),
                                m1["config"].get("mirror_direct")]  # fmt: skip
        for name in ("M", "M1"):
            await _held(nc, name)
        await asyncio.sleep(2.0)  # (followers join once current)
        await nc.close()
        seen: set[str] = set()
        bad = 0
        for i in range(3):
            c = await cluster.connect(i)
            names, b = await _gets(c, 60, str(i))
            seen.update(names)
            bad += b
            await c.close()
        out["answered"] = sorted(seen)
        out["bad"] = bad
        cluster[0].kill()  # the origin's server
        seen = set()
        bad = 0
        for i in (1, 2):
            c = await cluster.connect(i)
            names, b = await _gets(c, 40, f"k{i}")
            seen.update(names)
            bad += b
            await c.close()
        out["without_origin"] = sorted(seen)
        out["bad_without_origin"] = bad
        return out
    finally:
        await cluster.close()


def test_mirror_direct_across_a_cluster_as_nats_server(tmp_path: Path) -> None:
    ref = asyncio.run(_mirror_direct(tmp_path / "ref", "nats-server"))
    impl = asyncio.run(_mirror_direct(tmp_path / "impl", "natsd"))
    assert ref == {
        "mirror_direct": [True, True],
        "answered": ["M", "M1", "O"],
        "bad": 0,
        "without_origin": ["M", "M1"],
        "bad_without_origin": 0,
    }, ref
    assert impl == ref
