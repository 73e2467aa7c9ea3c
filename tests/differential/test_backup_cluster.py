"""Stream restore on a three-server cluster, three nats-server processes against three
natsd: an R3 stream with a durable consumer part-way through is backed up, deleted and
restored as R3; the answers (a name in use refused before any chunk, the final answer's
shape and state, a damaged archive refused) and what every replica then serves (the
messages, the consumer's position, the next sequence) are the same on both. One
difference is deliberate: after a damaged archive's restore nats-server keeps the
stream's assignment (a stream in STREAM.NAMES that no server holds), natsd nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from proc_cluster import ProcCluster

from natscli.backup import DATA_FILE, restore_from_directory, snapshot_to_directory
from natscli.conn import ApiError, ConnOptions, JsApi

from .r3_helpers import ask, on_three, publish

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]


async def _scenario(c: ProcCluster, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nc = await nats.connect(c[0].url)
    api = JsApi(nc, ConnOptions(servers=[c[0].url], timeout=10.0))
    try:
        cfg = {"name": "RB", "subjects": ["rb.>"], "num_replicas": 3, "storage": "file"}
        made = await ask(nc, "$JS.API.STREAM.CREATE.RB", cfg)
        assert "error" not in made, made
        for i in range(12):
            await publish(nc, "rb.a", b"m%d" % i, {"Nats-Msg-Id": f"id-{i}"})
        dur = {"stream_name": "RB", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await ask(nc, "$JS.API.CONSUMER.DURABLE.CREATE.RB.D", dur)
        js = nc.jetstream()
        sub = await js.pull_subscribe("", durable="D", stream="RB")
        for m in await sub.fetch(4, timeout=5):
            await m.ack_sync()
        await asyncio.sleep(0.5)
        await snapshot_to_directory(nc, api, "RB", tmp / "RB")
        meta = json.loads((tmp / "RB" / "backup.json").read_text())
        # a name in use is refused before any chunk
        refused = await ask(nc, "$JS.API.STREAM.RESTORE.RB", meta)
        out["in_use"] = (refused.get("type"), refused.get("error", {}).get("err_code"))
        assert (await ask(nc, "$JS.API.STREAM.DELETE.RB")).get("success") is True
        await asyncio.sleep(0.5)
        # a damaged archive is refused, and leaves no stream
        bad = tmp / "bad"
        bad.mkdir()
        (bad / "backup.json").write_text(json.dumps(meta))
        raw = bytearray((tmp / "RB" / DATA_FILE).read_bytes())
        raw[len(raw) // 2] ^= 0x5A
        (bad / DATA_FILE).write_bytes(bytes(raw))
        try:
            await restore_from_directory(nc, api, bad)
            out["damaged"] = 0
        except ApiError as e:
            out["damaged"] = e.err_code
        for _ in range(10):
            names = await ask(nc, "$JS.API.STREAM.NAMES")
            if not names.get("streams"):
                break
            await asyncio.sleep(0.2)
        out["after_damaged"] = names.get("streams") or []
        if out["after_damaged"]:
            # (nats-server 2.15 keeps the assignment of a restore that failed: deleted here)
            assert (await ask(nc, "$JS.API.STREAM.DELETE.RB")).get("success") is True
            await asyncio.sleep(0.5)
        done = await restore_from_directory(nc, api, tmp / "RB")
        out["final"] = {
            "type": done["type"],
            "keys": sorted(k for k in done if k not in ("ts",)),
            "num_replicas": done["config"]["num_replicas"],
            "state": {k: done["state"][k] for k in ("messages", "first_seq", "last_seq")},
        }
    finally:
        await nc.close()
    # every server, once its replica is current, serves the same
    seen = []
    for s in c:
        nc = await nats.connect(s.url)
        try:
            info: dict[str, Any] = {}
            for _ in range(100):
                info = await ask(nc, "$JS.API.STREAM.INFO.RB")
                reps = info.get("cluster", {}).get("replicas") or []
                if len(reps) == 2 and all(r.get("current") for r in reps):
                    break
                await asyncio.sleep(0.2)
            ci: dict[str, Any] = {}
            for _ in range(50):
                # (nats-server's consumer leader counts num_pending 0 for a moment after
                # the restore)
                ci = await ask(nc, "$JS.API.CONSUMER.INFO.RB.D")
                if ci.get("num_pending", 0) + ci.get("delivered", {}).get("stream_seq", 0) == 12:
                    break
                await asyncio.sleep(0.2)
            got = await ask(nc, "$JS.API.STREAM.MSG.GET.RB", {"seq": 7})
            seen.append((
                info["state"]["messages"],
                len(info["cluster"]["replicas"]),
                ci["delivered"]["stream_seq"],
                ci["ack_floor"]["stream_seq"],
                ci["num_pending"],
                got["message"]["subject"],
            ))  # fmt: skip
        finally:
            await nc.close()
    out["served"] = seen
    nc = await nats.connect(c[2].url)
    try:
        out["next"] = (await publish(nc, "rb.b", b"after", {"Nats-Msg-Id": "after"}))["seq"]
    finally:
        await nc.close()
    return out


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
def test_r3_restore_on_a_cluster(kind: str, tmp_path: Path) -> None:
    if kind == "nats-server":
        require_nats_server()
    got = on_three(kind, tmp_path, lambda c: _scenario(c, tmp_path))
    assert got["in_use"] == ("io.nats.jetstream.api.v1.stream_restore_response", 10130), got
    assert got["damaged"] == 10062, got
    # natsd leaves no stream behind a restore that failed; nats-server 2.15.1 keeps the
    # stream's assignment (its STREAM.NAMES lists it until it is deleted)
    assert got["after_damaged"] == ([] if kind == "natsd" else ["RB"]), got
    assert got["final"]["type"] == "io.nats.jetstream.api.v1.stream_create_response", got
    assert got["final"]["num_replicas"] == 3
    assert got["final"]["state"] == {"messages": 12, "first_seq": 1, "last_seq": 12}, got
    assert "cluster" not in got["final"]["keys"], got  # (as nats-server's final answer)
    assert got["served"] == [(12, 2, 4, 4, 8, "rb.a")] * 3, got
    assert got["next"] == 13, got
