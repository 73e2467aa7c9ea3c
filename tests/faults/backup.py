"""The fault run's backup case: after the last fault, a backup of the replicated stream (its
leader makes it, from what its group committed) holds exactly what the stream holds, read
back message by message with natsd's archive reader (the check a restore makes first).
Then the backup is restored on the cluster as another stream (its replicas as the
stream's, placed through the meta group after the faults' aftermath), which serves the same
messages at the same sequences; it is deleted again."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from nats.aio.client import Client as NATS
from reliability.checker import drain

from natscli.backup import DATA_FILE, restore_from_directory, snapshot_to_directory
from natscli.conn import ConnOptions, JsApi
from natsd.core.s2 import FrameReader
from natsd.jetstream.backup.restore import ArchiveCheck
from natsd.protocol.natsarc import EntryReader

__all__ = ["check_backup"]


async def check_backup(nc: NATS, stream: str, tmp: Path) -> str:
    stored = [(m.seq, m.subject, m.data) for m in await drain(nc, stream)]
    api = JsApi(nc, ConnOptions(servers=[], timeout=30.0))
    # (one directory per backup: a run checks one at the end of each epoch)
    target = Path(tempfile.mkdtemp(prefix=f"backup-{stream}-", dir=tmp))
    summary = await snapshot_to_directory(nc, api, stream, target, idle=30.0)
    raw = (target / DATA_FILE).read_bytes()
    restored = await _restored_as_another(nc, api, stream, target)
    shutil.rmtree(target)
    check = ArchiveCheck(8 << 20)
    check.feed(raw)
    check.finish()
    frames, entries = FrameReader(), EntryReader(8 << 20)
    backed = [
        (e.seq, e.name.decode(), e.body[e.hdr_size :])
        for block in frames.feed(raw)
        for e in entries.feed(block)
        if e.seq
    ]
    if backed != stored:
        diff = [(a, b) for a, b in zip(backed, stored, strict=False) if a != b][:3]
        raise AssertionError(
            f"backup of {stream}: {len(backed)} messages, the stream {len(stored)};"
            f" first differences (backup, stream): {diff!r}"
        )
    if restored != stored:
        diff = [(a, b) for a, b in zip(restored, stored, strict=False) if a != b][:3]
        raise AssertionError(
            f"backup of {stream} restored: {len(restored)} messages, the stream {len(stored)};"
            f" first differences (restored, stream): {diff!r}"
        )
    return (f"backup of {stream}: {len(backed)} messages in {summary['chunks']} chunks,"
            f" {len(check.consumers)} consumers, the same as the stream holds; restored on"
            f" the cluster as another stream, the same again")  # fmt: skip


async def _restored_as_another(
    nc: NATS, api: JsApi, stream: str, target: Path
) -> list[tuple[int, str, bytes]]:
    """The backup in ``target`` restored under another name and subjects: its messages."""
    name = f"{stream}_RESTORED"
    meta = json.loads((target / "backup.json").read_text())
    meta["config"]["name"] = name
    meta["config"]["subjects"] = [f"restored.{stream.lower()}.>"]
    (target / "backup.json").write_text(json.dumps(meta))
    await restore_from_directory(nc, api, target)
    try:
        return [(m.seq, m.subject, m.data) for m in await drain(nc, name)]
    finally:
        await nc.request(f"$JS.API.STREAM.DELETE.{name}", b"", timeout=30)
