"""``compression: s2`` on file streams, against nats-server: the same answers for the same
messages (state, bytes counted as sent, every read path), with the setting turned off and on
again; and on an R3 stream (three nats-server processes against three natsd) across a
leader stepdown and a replica's restart, every replica reading every message back."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from proc_cluster import ProcCluster

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .r3_helpers import ask, on_three, publish
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

T = 10.0
ROW = b'{"region": "eu-west", "sensor": "t-%d", "celsius": 21.5, "ok": true}'
HDRS = {"Nats-Msg-Id": "", "Source": "plant-7"}


def payloads() -> list[tuple[str, bytes, dict[str, str] | None]]:
    """(subject, payload, headers): compressible rows, short ones, random bytes, empty."""
    rnd = random.Random(7).randbytes(3000)
    out: list[tuple[str, bytes, dict[str, str] | None]] = []
    for i in range(40):
        if i % 8 == 0:
            data = b"short %d" % i
        elif i % 8 == 1:
            data = rnd[i : i + 700]  # does not compress: stored plain
        elif i % 8 == 2:
            data = b""
        else:
            data = (ROW % i) * (1 + i % 9)
        hdrs = {**HDRS, "Nats-Msg-Id": f"m{i}"} if i % 3 == 0 else None
        out.append((f"z.{i % 4}", data, hdrs))
    return out


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def test_a_compressed_stream_answers_as_nats_server(js_pair: ServerPair) -> None:
    msgs = payloads()

    async def sc(js: JsRecorder) -> None:
        cfg = {"name": "Z", "subjects": ["z.>"], "compression": "s2", "allow_direct": True}
        await js.req("create", "STREAM.CREATE.Z", cfg, timeout=T)
        for i, (subject, data, hdrs) in enumerate(msgs):
            await js.pub(f"pub {i}", subject, data, hdrs, timeout=T)
        await js.req("info", "STREAM.INFO.Z", {"subjects_filter": ">"}, timeout=T)
        for seq in range(1, len(msgs) + 1):
            await js.req(f"get {seq}", "STREAM.MSG.GET.Z", {"seq": seq}, timeout=T)
        for subject in ("z.0", "z.3"):
            await js.direct(f"direct last {subject}", "Z", {"last_by_subj": subject}, timeout=T)
        await js.direct("direct batch", "Z", {"seq": 5, "batch": 1}, timeout=T)
        await js.req("remove 6", "STREAM.MSG.DELETE.Z", {"seq": 6}, timeout=T)
        await js.req("erase 7", "STREAM.MSG.DELETE.Z", {"seq": 7, "no_erase": False}, timeout=T)
        await js.req("off", "STREAM.UPDATE.Z", {**cfg, "compression": "none"}, timeout=T)
        await js.pub("plain again", "z.1", ROW * 5, timeout=T)
        await js.req("on", "STREAM.UPDATE.Z", cfg, timeout=T)
        await js.pub("compressed again", "z.1", ROW * 6, timeout=T)
        await js.req("get plain again", "STREAM.MSG.GET.Z", {"last_by_subj": "z.1"}, timeout=T)
        await js.req("purge z.2", "STREAM.PURGE.Z", {"filter": "z.2"}, timeout=T)
        await js.req("info after", "STREAM.INFO.Z", {"subjects_filter": ">"}, timeout=T)
        await js.req("del", "STREAM.DELETE.Z", record=False, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["create"]["config"]["compression"] == "s2"
    assert answers["info"]["state"]["messages"] == len(msgs)
    got = base64.b64decode(answers["get 4"]["message"]["data"])
    assert got == msgs[3][1]
    assert_same(ref, impl)


# ----------------------------------------------------------------------------- R3
async def _replicated(c: ProcCluster) -> dict[str, Any]:
    msgs = payloads()
    a = await nats.connect(c[0].url, allow_reconnect=False)
    cfg = {"name": "ZR", "subjects": ["z.>"], "num_replicas": 3, "compression": "s2",
           "allow_direct": True}  # fmt: skip
    await ask(a, "$JS.API.STREAM.CREATE.ZR", cfg)
    half = len(msgs) // 2
    for i, (subject, data, hdrs) in enumerate(msgs[:half]):
        await publish(a, subject, data, {**(hdrs or {}), "Nats-Msg-Id": f"k{i}"})
    await ask(a, "$JS.API.STREAM.LEADER.STEPDOWN.ZR")
    for _ in range(100):  # until the new leader is known
        leader = (await ask(a, "$JS.API.STREAM.INFO.ZR")).get("cluster", {}).get("leader")
        if leader:
            break
        await asyncio.sleep(0.2)
    # a follower, and not the server this client is on
    follower = next(i for i, s in enumerate(c.servers) if i and s.name != leader)
    await c.restart(follower)
    for i, (subject, data, hdrs) in enumerate(msgs[half:], start=half):
        await publish(a, subject, data, {**(hdrs or {}), "Nats-Msg-Id": f"k{i}"})
    await a.close()
    out: dict[str, Any] = {"reads": []}
    for s in c.servers:
        nc = await nats.connect(s.url, allow_reconnect=False)
        got = []
        for seq in range(1, len(msgs) + 1):
            for _ in range(50):  # a restarted replica may still be catching up
                m = await nc.request("$JS.API.DIRECT.GET.ZR", json.dumps({"seq": seq}).encode())
                if m.headers and "Nats-Sequence" in m.headers:
                    break
                await asyncio.sleep(0.2)
            got.append(m.data)
        out["reads"].append(got)
        await nc.close()
    state = (await ask(await nats.connect(c[0].url), "$JS.API.STREAM.INFO.ZR"))["state"]
    out["state"] = {k: state[k] for k in ("messages", "bytes", "first_seq", "last_seq")}
    return out


def test_a_compressed_r3_stream_across_stepdown_and_restart(tmp_path: Path) -> None:
    require_nats_server()
    want = [data for _, data, _ in payloads()]
    ref = on_three("nats-server", tmp_path, _replicated)
    got = on_three("natsd", tmp_path, _replicated)
    assert ref["reads"] == [want] * 3
    assert got["reads"] == [want] * 3
    assert got["state"] == ref["state"]
