"""Stream backups that move between natsd and nats-server 2.15 (its NATSARC1 format): a
stream with messages, headers, a deleted message and consumers part-way through is backed
up with ``nats stream backup``'s client code from one server and restored into the other,
both ways and onto the same kind; every message (sequence, subject, headers, data, time),
the state and each consumer's progress come back the same. A damaged or truncated archive
is refused by natsd before any stream exists; nats-server refuses the same archives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server
from nats.aio.client import Client

from natscli.backup import DATA_FILE, restore_from_directory, snapshot_to_directory
from natscli.conn import ApiError, ConnOptions, JsApi

from .harness import ServerPair
from .js_scenarios import js_server_pair

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def _api(nc: Client, url: str) -> JsApi:
    return JsApi(nc, ConnOptions(servers=[url], timeout=10.0))


async def _req(nc: Client, subject: str, body: Any = None) -> dict[str, Any]:
    payload = json.dumps(body).encode() if body is not None else b""
    m = await nc.request(subject, payload, timeout=10)
    return dict(json.loads(m.data))


async def _populate(nc: Client, name: str, storage: str) -> None:
    """The stream every backup is made of: 40 messages (every fifth with headers), one
    deleted, a pull consumer part-way through with acks pending, a filtered one."""
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[f"{name.lower()}.>"], storage=storage)
    for i in range(40):
        hdrs = {"Order": str(i), "Kind": "x"} if i % 5 == 0 else None
        await js.publish(f"{name.lower()}.{'ab'[i % 2]}", b"m%d" % i, headers=hdrs)
    await js.delete_msg(name, 7)
    await js.add_consumer(name, durable_name="D", ack_policy="explicit")
    sub = await js.pull_subscribe("", durable="D", stream=name)
    msgs = await sub.fetch(6, timeout=5)
    for m in msgs[:4]:
        await m.ack()
    await js.add_consumer(
        name, durable_name="F", ack_policy="explicit", filter_subject=f"{name.lower()}.b"
    )
    await nc.flush()
    await asyncio.sleep(0.3)


async def _contents(nc: Client, name: str) -> dict[str, Any]:
    """What must survive a backup: the state, every message as stored, each consumer's
    position."""
    info = await _req(nc, f"$JS.API.STREAM.INFO.{name}")
    st = info["state"]
    msgs = []
    for seq in range(st["first_seq"], st["last_seq"] + 1):
        got = await _req(nc, f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})
        if "error" in got:
            msgs.append((seq, got["error"]["err_code"]))
            continue
        m = got["message"]
        msgs.append((seq, m["subject"], m.get("hdrs"), m.get("data"), m["time"]))
    consumers = {}
    for c in ("D", "F"):
        ci = await _req(nc, f"$JS.API.CONSUMER.INFO.{name}.{c}")
        consumers[c] = {
            k: ci.get(k)
            for k in ("num_ack_pending", "num_redelivered", "num_pending")
        } | {
            "delivered": {k: ci["delivered"][k] for k in ("consumer_seq", "stream_seq")},
            "ack_floor": {k: ci["ack_floor"][k] for k in ("consumer_seq", "stream_seq")},
            "filter": ci["config"].get("filter_subject"),
        }
    state = {k: st.get(k) for k in ("messages", "bytes", "first_seq", "last_seq",
                                      "num_deleted", "num_subjects", "consumer_count")}  # fmt: skip
    return {"state": state, "messages": msgs, "consumers": consumers}


async def _round_trip(src_url: str, dst_url: str, name: str, storage: str, tmp: Path) -> None:
    src = await nats.connect(src_url)
    dst = await nats.connect(dst_url)
    try:
        await _populate(src, name, storage)
        before = await _contents(src, name)
        summary = await snapshot_to_directory(src, _api(src, src_url), name, tmp / name)
        assert summary["chunks"] >= 1
        backup = json.loads((tmp / name / "backup.json").read_text())
        assert backup["config"]["name"] == name and backup["state"]["last_seq"] == 40
        if src_url == dst_url:  # (restored where it was made: in place of the original)
            await src.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=10)
        made = await restore_from_directory(dst, _api(dst, dst_url), tmp / name)
        assert made["state"]["last_seq"] == 40
        after = await _contents(dst, name)
        assert after == before
        # the restored stream takes publishes after the backup's last sequence
        ack = await dst.jetstream().publish(f"{name.lower()}.a", b"next")
        assert ack.seq == 41
    finally:
        for nc in (src, dst):
            await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=10)
            await nc.close()


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("direction", ["natsd-to-nats-server", "nats-server-to-natsd",
                                       "natsd-to-natsd"])  # fmt: skip
async def test_a_backup_restores_on_the_other_server(
    js_pair: ServerPair, tmp_path: Path, direction: str, storage: str
) -> None:
    src, dst = {
        "natsd-to-nats-server": (js_pair.impl, js_pair.ref),
        "nats-server-to-natsd": (js_pair.ref, js_pair.impl),
        "natsd-to-natsd": (js_pair.impl, js_pair.impl),
    }[direction]
    await _round_trip(src.url, dst.url, f"BK{storage[0].upper()}", storage, tmp_path)


async def _restore_error(url: str, directory: Path) -> tuple[int, bool]:
    """A restore of a damaged backup: the error code, and whether a stream was left."""
    nc = await nats.connect(url)
    try:
        try:
            await restore_from_directory(nc, _api(nc, url), directory)
        except ApiError as e:
            code = e.err_code
        else:
            code = 0
        name = json.loads((directory / "backup.json").read_text())["config"]["name"]
        info = await _req(nc, f"$JS.API.STREAM.INFO.{name}")
        left = "error" not in info
        if left:
            await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=10)
        return code, left
    finally:
        await nc.close()


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
async def test_a_damaged_archive_is_refused(
    js_pair: ServerPair, tmp_path: Path, damage: str
) -> None:
    nc = await nats.connect(js_pair.ref.url)
    try:
        await _populate(nc, "DMG", "file")
        await snapshot_to_directory(nc, _api(nc, js_pair.ref.url), "DMG", tmp_path / "b")
        await nc.request("$JS.API.STREAM.DELETE.DMG", b"", timeout=10)
    finally:
        await nc.close()
    data = tmp_path / "b" / DATA_FILE
    raw = bytearray(data.read_bytes())
    if damage == "flipped":
        raw[len(raw) // 2] ^= 0x5A
    else:
        del raw[-40:]
    data.write_bytes(bytes(raw))
    ref = await _restore_error(js_pair.ref.url, tmp_path / "b")
    impl = await _restore_error(js_pair.impl.url, tmp_path / "b")
    assert impl == (10062, False), impl
    assert ref[0] == 10062, ref
