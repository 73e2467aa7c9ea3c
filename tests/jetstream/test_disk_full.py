"""A file stream on a full disk: end to end with nats-py against a natsd process.

The store directory is a 2 MB tmpfs mounted for the test (skipped when mounting is not
permitted). When the disk refuses a write, the publishes it covers get a JetStream error
PubAck (``JSStreamStoreFailedF``: 503 / 10077) instead of an ack; every message acknowledged
before stays readable byte for byte; once space is freed (a ballast file removed, or the
stream purged) publishing resumes with higher sequences, and a restart finds exactly the
acknowledged messages. nats-server disables JetStream on ENOSPC instead, so this is not a
differential test.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from ports import free_port

from .test_crash import NatsdProcess

pytestmark = pytest.mark.timeout(60)

DISK = "2m"
PAYLOAD = 24 * 1024
STREAM = "DF"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh 2 MB tmpfs, unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


class Node:
    """natsd on the small disk; restartable."""

    def __init__(self, disk: Path, log: Path) -> None:
        self.store = disk / "store"
        self.port = free_port()
        self.log = log
        self.proc: NatsdProcess | None = None
        self.nc: Any = None

    async def start(self) -> Any:
        self.proc = await NatsdProcess(self.store, self.port, self.log).start().wait_ready()
        self.nc = await nats.connect(self.proc.url, allow_reconnect=False)
        return self.nc

    async def stop(self) -> None:
        if self.nc is not None:
            with contextlib.suppress(Exception):
                await self.nc.close()
            self.nc = None
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    async def request(self, subject: str, body: bytes | dict[str, Any] = b"") -> Any:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        msg = await self.nc.request(subject, data, timeout=5)
        return json.loads(msg.data)


@pytest.fixture
async def node(small_disk: Path, tmp_path: Path) -> AsyncIterator[Node]:
    n = Node(small_disk, tmp_path / "natsd.log")
    try:
        yield n
    finally:
        await n.stop()
        if n.proc is not None:
            n.proc.ensure_dead()


def payload(i: int) -> bytes:
    return (b"%08d" % i) * (PAYLOAD // 8)


async def fill(node: Node, start: int) -> tuple[dict[int, bytes], dict[str, Any]]:
    """Publish until the disk refuses: the acknowledged (seq -> payload) and the error ack."""
    acked: dict[int, bytes] = {}
    for i in range(start, start + 200):
        ack = await node.request(f"df.{i}", payload(i))
        if "error" in ack:
            return acked, ack
        assert ack["stream"] == STREAM and ack["seq"] not in acked
        acked[ack["seq"]] = payload(i)
    pytest.fail("the disk never filled up")


async def check_readable(node: Node, acked: dict[int, bytes]) -> None:
    info = await node.request(f"$JS.API.STREAM.INFO.{STREAM}")
    assert info["state"]["messages"] == len(acked), info["state"]
    for seq, data in acked.items():
        r = await node.request(f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": seq})
        assert "message" in r, (seq, r)
        assert base64.b64decode(r["message"]["data"]) == data, seq


def assert_store_failed(ack: dict[str, Any]) -> None:
    assert ack["error"]["code"] == 503 and ack["error"]["err_code"] == 10077, ack
    assert ack["stream"] == STREAM and ack["seq"] == 0, ack


async def create(node: Node) -> None:
    r = await node.request(
        f"$JS.API.STREAM.CREATE.{STREAM}", {"name": STREAM, "subjects": ["df.>"]}
    )
    assert "error" not in r, r


async def test_publish_fails_on_full_disk_and_resumes(node: Node, small_disk: Path) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (512 * 1024))
    await node.start()
    await create(node)
    acked, err = await fill(node, 0)
    assert len(acked) > 10
    assert_store_failed(err)
    # Still full: refused again, and reads keep working.
    assert_store_failed(await node.request("df.again", payload(999)))
    await check_readable(node, acked)

    ballast.unlink()
    ack = await node.request("df.after", b"after")
    assert "error" not in ack, ack
    assert ack["seq"] > max(acked)  # sequences of refused writes are burned, never reused
    acked[ack["seq"]] = b"after"
    await check_readable(node, acked)

    await node.stop()
    await node.start()
    await check_readable(node, acked)
    ack = await node.request("df.restarted", b"x")
    assert "error" not in ack and ack["seq"] > max(acked), ack


async def test_purge_frees_a_full_disk(node: Node) -> None:
    await node.start()
    await create(node)
    acked, err = await fill(node, 0)
    assert_store_failed(err)
    await check_readable(node, acked)

    r = await node.request(f"$JS.API.STREAM.PURGE.{STREAM}")
    assert r.get("success") is True, r
    # The purged blocks are unlinked once the purge's tombstone is durable, which takes a
    # flush: the first write after the purge may still find the disk full (and then frees
    # the space), every later one fits again.
    first = await node.request("df.first", payload(999))
    if "error" in first:
        assert_store_failed(first)
    more, err = await fill(node, 1000)
    if "error" not in first:
        more[first["seq"]] = payload(999)
    assert len(more) > 10, (len(more), err)
    assert min(more) > max(acked)
    assert_store_failed(err)
    await check_readable(node, more)

    await node.stop()
    await node.start()
    await check_readable(node, more)


async def test_retry_with_msg_id_after_full_disk_is_stored(node: Node, small_disk: Path) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * (512 * 1024))
    await node.start()
    await create(node)
    acked, err = await fill(node, 0)
    assert_store_failed(err)
    hdrs = {"Nats-Msg-Id": "retry-me"}
    msg = await node.nc.request("df.id", payload(7), headers=hdrs, timeout=5)
    assert_store_failed(json.loads(msg.data))
    ballast.unlink()
    msg = await node.nc.request("df.id", payload(7), headers=hdrs, timeout=5)
    ack = json.loads(msg.data)
    assert "error" not in ack and not ack.get("duplicate"), ack
    acked[ack["seq"]] = payload(7)
    await check_readable(node, acked)
