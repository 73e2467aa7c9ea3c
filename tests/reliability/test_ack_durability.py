"""PubAck after the fsync that covers it, proven at the server level.

An embedded ``natsd.Server`` runs JetStream on a file store whose ``FileIO`` is the fault
layer (``faultfs.FaultFS``, injected with ``Server(file_io=...)``); nats-py publishes over a
real socket. On the server, the client's connection gets a spy transport: at the moment a
write carrying PubAcks is handed to the socket (from then on the ack can reach the client
whatever happens to this machine), the spy takes the crash image a power loss right then
would leave (``FaultFS.materialize``: only fsynced bytes and durably linked names). After
the run every image is opened with the normal file layer and must hold every message acked
in that write, byte for byte.

Publishes come one at a time (the group-commit batch of one or two is fsynced on the loop
thread) and in concurrent bursts (bigger batches are fsynced on the worker thread while the
loop reads more publishes), so both paths of ``jetstream/commit.py`` are covered.

- default (fsync before every ack, group commit) and ``sync_interval: always``: every acked
  message is in the power-loss image taken at its ack. Acking before the fsync (tried by
  moving ``_ack`` ahead of the sync in ``Committer._start``) fails these tests.
- lazy (``sync_interval: 2m``): the ack follows the write, not an fsync. Guaranteed, and
  asserted: every acked message is in the image a *process* crash at the ack would leave
  (the files as written: the OS keeps them); a power loss at the ack loses acked messages
  (asserted too, so the mode really is lazy); a clean shutdown fsyncs them all.
- disk full: the fault layer fails writes (or fsyncs) with ENOSPC. The publish gets
  nats-server's error (503 / 10077 ``JSStreamStoreFailedF``), nothing acknowledged is lost
  (power-loss images, a restart on the last one), and once space returns publishing
  recovers: at once after a failed write; after a failed fsync only once the store is
  reopened (a restart), because after a failed fsync the kernel may have dropped the dirty
  pages and a retry that "succeeds" would be a lie (``storage/filestore.py``).
No tmpfs mount and no root needed (``tests/jetstream/test_disk_full.py`` is the real-disk
version of the write case).
"""

from __future__ import annotations

import asyncio
import errno
import random
import re
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import APIError

import natsd
from natsd.storage.disk_catalog import DiskCatalog

from .faultfs import FaultFS

pytestmark = pytest.mark.timeout(120)

STREAM = "ACKD"
ACK_RE = re.compile(rb'\{"stream":"' + STREAM.encode() + rb'",(?:"domain":"[^"]*",)?"seq":(\d+)')
STORE_FAILED = 10077  # JSStreamStoreFailedF, code 503 (nats-server's errors.json)


class SpyTransport:
    """Forwards everything to the real transport; ``on_write`` sees each write first."""

    def __init__(self, inner: Any, on_write: Callable[[bytes], None]) -> None:
        self._inner = inner
        self._on_write = on_write

    def write(self, data: Any) -> None:
        self._on_write(bytes(data))
        self._inner.write(data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class AckImage:
    """What a crash at the moment ``seqs`` were acked would leave."""

    seqs: list[int]
    power_loss: Path  # only fsynced data and names (FaultFS.materialize)
    process_crash: Path | None  # the files as written (the OS keeps them on kill -9)


@dataclass
class Rig:
    fs: FaultFS
    store: Path
    srv: natsd.Server
    nc: Any
    js: Any
    work: Path
    images: list[AckImage] = field(default_factory=list)
    error_acks: int = 0
    payloads: dict[int, bytes] = field(default_factory=dict)
    _n: int = 0

    def on_write(self, data: bytes) -> None:
        self.error_acks += data.count(b'"err_code":%d' % STORE_FAILED)
        seqs = [int(m) for m in ACK_RE.findall(data)]
        if not seqs:
            return
        self._n += 1
        power = self.work / f"power-{self._n}"
        self.fs.materialize(power, random.Random(0), torn=False)
        proc = None
        if self.srv.options.js.sync_interval is not None:
            proc = self.work / f"process-{self._n}"
            with self.fs.lock:  # no write or fsync between the copy's files
                shutil.copytree(self.store, proc)
        self.images.append(AckImage(seqs, power, proc))

    async def publish(self, i: int) -> int:
        data = b"m%06d:" % i + random.Random(i).randbytes(40 + i % 300)
        ack = await self.js.publish(f"ackd.{i % 7}", data)
        assert ack.stream == STREAM
        self.payloads[ack.seq] = data
        return int(ack.seq)

    async def publish_mix(self, start: int, single: int = 12, bursts: int = 3) -> None:
        """``single`` publishes one by one, then ``bursts`` bursts of 60 concurrent ones."""
        for i in range(start, start + single):
            await self.publish(i)
        base = start + single
        for b in range(bursts):
            await asyncio.gather(*(self.publish(base + b * 60 + k) for k in range(60)))


@asynccontextmanager
async def rig(tmp_path: Path, **js_opts: Any) -> AsyncIterator[Rig]:
    store = tmp_path / "store"
    store.mkdir()
    work = tmp_path / "images"
    work.mkdir()
    fs = FaultFS(store)
    srv = natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(store), file_io=fs, **js_opts
    )
    await srv.start()
    nc = None
    try:
        nc = await nats.connect(srv.client_url, allow_reconnect=False)
        js = nc.jetstream(timeout=10)
        await js.add_stream(name=STREAM, subjects=["ackd.>"])
        r = Rig(fs, store, srv, nc, js, work)
        (conn,) = srv.clients.values()
        conn.transport = SpyTransport(conn.transport, r.on_write)  # type: ignore[assignment]
        yield r
    finally:
        if nc is not None:
            await nc.close()
        await srv.shutdown()


def stored(image: Path) -> dict[int, bytes]:
    """Every message of STREAM in a store directory, opened with the normal file layer."""
    recs = DiskCatalog(image).load()
    try:
        out: dict[int, bytes] = {}
        for rec in recs:
            if rec.name != STREAM:
                continue
            st = rec.store.state()
            for seq in range(max(st.first_seq, 1), st.last_seq + 1):
                msg = rec.store.load_msg(seq)
                if msg is not None:
                    out[seq] = msg.data
        return out
    finally:
        for rec in recs:
            rec.store.stop()


def missing_at_ack(r: Rig, kind: str) -> list[str]:
    """Acked messages absent (or different) in the image taken when their ack was sent."""
    bad: list[str] = []
    for img in r.images:
        path = img.power_loss if kind == "power" else img.process_crash
        assert path is not None
        have = stored(path)
        for seq in img.seqs:
            if have.get(seq) != r.payloads.get(seq):
                bad.append(f"seq {seq} ({path.name})")
    return bad


def assert_every_ack_durable(r: Rig, expected: int) -> None:
    acked = [s for img in r.images for s in img.seqs]
    assert sorted(acked) == sorted(r.payloads), "every PubAck the client got went through the spy"
    assert len(acked) == expected
    bad = missing_at_ack(r, "power")
    assert not bad, (
        f"{len(bad)} of {len(acked)} acked messages were not durable when their ack was "
        f"sent (a power loss right after the ack loses them): {bad[:10]}"
    )


# ---------------------------------------------------------------------------- fsync modes


async def test_default_mode_acks_after_the_fsync(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        await r.publish_mix(0)
        # Group commit really batched: fewer ack writes than acks.
        assert len(r.images) < len(r.payloads)
    assert_every_ack_durable(r, 12 + 180)


async def test_sync_always_acks_after_the_fsync(tmp_path: Path) -> None:
    async with rig(tmp_path, sync_always=True) as r:
        await r.publish_mix(0, single=8, bursts=2)
    assert_every_ack_durable(r, 8 + 120)


async def test_lazy_mode_acks_after_the_write(tmp_path: Path) -> None:
    """``sync_interval: 2m``: acked once written; fsynced on the timer or at shutdown."""
    async with rig(tmp_path, sync_interval=120.0) as r:
        await r.publish_mix(0, single=8, bursts=2)
        acked = len(r.payloads)
        assert missing_at_ack(r, "process") == [], "an ack was sent before its write"
        # Not fsynced at the ack: a power loss then loses acknowledged messages.
        lost = missing_at_ack(r, "power")
        assert lost, "lazy mode fsynced before acking (no acked message was at risk)"
    # A clean shutdown fsyncs everything: a power loss after it loses nothing.
    final = tmp_path / "after-shutdown"
    r.fs.materialize(final, random.Random(0), torn=False)
    assert stored(final) == r.payloads
    assert acked == 8 + 120


# ---------------------------------------------------------------------------- disk full


async def refused(r: Rig, i: int) -> None:
    with pytest.raises(APIError) as e:
        await r.publish(i)
    assert (e.value.code, e.value.err_code) == (503, STORE_FAILED), e.value


async def restart_on(image: Path, tmp: Path) -> tuple[dict[int, bytes], int]:
    """A server on a crash image: what it serves, and the seq a new publish gets."""
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=str(image)) as s:
        nc = await nats.connect(s.client_url, allow_reconnect=False)
        try:
            js = nc.jetstream(timeout=10)
            info = await js.stream_info(STREAM)
            out: dict[int, bytes] = {}
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                try:
                    out[seq] = (await js.get_msg(STREAM, seq)).data or b""
                except nats.js.errors.NotFoundError:
                    pass
            ack = await js.publish("ackd.new", b"after restart")
            return out, int(ack.seq)
        finally:
            await nc.close()


async def test_disk_full_on_write(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        await r.publish_mix(0, single=10, bursts=1)
        before = dict(r.payloads)
        r.fs.fail_errno = errno.ENOSPC  # writes fail: the disk is full
        for i in range(1000, 1005):
            await refused(r, i)
        assert r.error_acks == 5
        assert dict(r.payloads) == before
        # Reads still work and every acknowledged message is there, live and after a
        # power loss now.
        for seq, data in before.items():
            assert (await r.js.get_msg(STREAM, seq)).data == data
        now = tmp_path / "full"
        r.fs.materialize(now, random.Random(0), torn=False)
        assert stored(now) == before

        r.fs.fail_errno = None  # space is back: publishing recovers at once
        await r.publish_mix(2000, single=5, bursts=1)
        after = sorted(set(r.payloads) - set(before))
        assert len(after) == 65 and min(after) > max(before)  # refused seqs are not reused
    assert_every_ack_durable(r, 70 + 65)
    last = r.images[-1].power_loss
    served, seq = await restart_on(last, tmp_path)
    assert served == r.payloads
    assert seq > max(r.payloads)


async def test_disk_full_on_fsync(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        await r.publish_mix(0, single=10, bursts=1)
        before = dict(r.payloads)
        r.fs.fail_errno = errno.ENOSPC
        r.fs.fail_ops = frozenset({"sync"})  # the write succeeds, its fsync fails
        for i in range(1000, 1003):
            await refused(r, i)
        r.fs.fail_errno = None
        # The store's durability is poisoned until it is reopened: still refused.
        await refused(r, 1003)
        assert dict(r.payloads) == before
        for seq, data in before.items():
            assert (await r.js.get_msg(STREAM, seq)).data == data
    assert_every_ack_durable(r, 70)
    # Power loss now: every acked message survives, and nothing the server never stored.
    image = tmp_path / "after-fsync-failure"
    r.fs.materialize(image, random.Random(0), torn=False)
    served, seq = await restart_on(image, tmp_path)
    assert served == before
    assert seq > max(before)
    # Or a clean restart on the same files (the refused writes may have reached the disk:
    # a refused publish can be stored, as after any crash between write and ack; an acked
    # one is never lost).
    served, seq = await restart_on(r.store, tmp_path)
    assert all(served.get(s) == d for s, d in before.items())
    assert seq > max(served)
