"""Atomic batches on an R1 file stream across restarts (nats-py over real sockets): a batch
a crash cut short (its first messages written, the rest and the commit not) is dropped when
the stream is opened again, never half kept; a whole batch stays; and a batch open when the
server stops is gone after it (the next message is told the batch is incomplete)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest

import natsd
from natsd.storage.disk_catalog import DiskCatalog

from .conftest import only_natsd

pytestmark = [pytest.mark.timeout(60), only_natsd]


def _b(bid: str, seq: int, commit: bool = False) -> dict[str, str]:
    h = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(seq)}
    if commit:
        h["Nats-Batch-Commit"] = "1"
    return h


async def _ask(nc: Any, subject: str, data: bytes, headers: Any = None) -> Any:
    m = await nc.request(subject, data, timeout=5, headers=headers)
    return json.loads(m.data) if m.data else ""


async def test_a_batch_cut_short_by_a_crash_is_dropped(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"port": 0, "host": "127.0.0.1", "jetstream": True,
                          "store_dir": str(tmp_path), "http_port": -1}  # fmt: skip
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        cfg = {"name": "A", "subjects": ["a.>"], "allow_atomic": True}
        await _ask(nc, "$JS.API.STREAM.CREATE.A", json.dumps(cfg).encode())
        acks = [await _ask(nc, "a.x", b"%d" % i, _b("whole", i, i == 3)) for i in (1, 2, 3)]
        assert acks[-1] == {"stream": "A", "seq": 3, "batch": "whole", "count": 3}
        assert await _ask(nc, "a.y", b"open", _b("open", 1)) == ""
        await nc.close()
    # what a crash between a batch's writes leaves: its first two messages, no commit
    (rec,) = [r for r in DiskCatalog(tmp_path).load() if r.name == "A"]
    for i in (1, 2):
        hdr = f"NATS/1.0\r\nNats-Batch-Id: cut\r\nNats-Batch-Sequence: {i}\r\n\r\n".encode()
        rec.store.store_msg("a.z", hdr, b"partial", 0)
    assert rec.store.state().msgs == 5
    rec.store.stop()
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        info = await _ask(nc, "$JS.API.STREAM.INFO.A", b"")
        assert (info["state"]["messages"], info["state"]["last_seq"]) == (3, 3)
        late = await _ask(nc, "a.y", b"late", _b("open", 2, True))
        assert late["error"]["err_code"] == 10176
        again = [await _ask(nc, "a.y", b"%d" % i, _b("open", i, i == 2)) for i in (1, 2)]
        assert again[-1] == {"stream": "A", "seq": 5, "batch": "open", "count": 2}
        await nc.close()
