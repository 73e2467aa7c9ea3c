"""Message schedules across a restart (nats-py over real sockets, an R1 file stream): the
schedules are found again in the store; an ``@at`` whose time passed while the server was
down fires once, at start-up; a repeating one fires at its next time after start-up (the
missed ones are not made up); a schedule that a plain message ended stays ended, and one a
client cancelled stays cancelled. A memory stream's schedules are gone with its messages."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import pytest

import natsd

from .conftest import only_natsd

pytestmark = [pytest.mark.timeout(60), only_natsd]


async def _ask(nc: Any, subject: str, body: Any = b"", headers: Any = None) -> Any:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    m = await nc.request(subject, data, timeout=5, headers=headers)
    return json.loads(m.data)


def _sched(pattern: str, target: str) -> dict[str, str]:
    return {"Nats-Schedule": pattern, "Nats-Schedule-Target": target}


async def _subjects(nc: Any, stream: str) -> dict[str, int]:
    info = await _ask(nc, f"$JS.API.STREAM.INFO.{stream}", {"subjects_filter": ">"})
    return dict(info["state"].get("subjects") or {})


async def test_schedules_survive_a_restart(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"port": 0, "host": "127.0.0.1", "jetstream": True,
                          "store_dir": str(tmp_path), "http_port": -1}  # fmt: skip
    soon = datetime.now(UTC) + timedelta(seconds=1.5)
    at = "@at " + soon.strftime("%Y-%m-%dT%H:%M:%S.") + f"{soon.microsecond // 1000:03d}Z"
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        for name, storage in (("F", "file"), ("M", "memory")):
            cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "storage": storage,
                   "allow_msg_schedules": True}  # fmt: skip
            await _ask(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
        await _ask(nc, "f.sch.at", b"at", _sched(at, "f.tgt.at"))
        await _ask(nc, "f.sch.every", b"every", _sched("@every 2s", "f.tgt.every"))
        await _ask(nc, "f.sch.ended", b"x", _sched("@every 1s", "f.tgt.ended"))
        await _ask(nc, "f.sch.ended", b"plain")
        await _ask(nc, "f.sch.cancel", b"x", _sched(at, "f.tgt.cancel"))
        await _ask(
            nc, "f.x", b"", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "f.sch.cancel"}
        )
        await _ask(nc, "m.sch.at", b"at", _sched(at, "m.tgt.at"))
        await nc.close()
    await asyncio.sleep(2.0)  # the @at's time passes while the server is down
    async with natsd.Server(**kw) as srv:
        nc = await nats.connect(srv.client_url)
        await asyncio.sleep(0.6)
        got = await _subjects(nc, "F")
        assert got.get("f.tgt.at") == 1 and "f.sch.at" not in got, got
        await asyncio.sleep(2.5)
        got = await _subjects(nc, "F")
        assert got.get("f.tgt.every", 0) >= 1, got
        assert "f.tgt.ended" not in got and "f.tgt.cancel" not in got, got
        # (a memory stream does not come back: nothing of it is left to fire)
        info = await _ask(nc, "$JS.API.STREAM.INFO.M")
        assert info.get("error", {}).get("err_code") == 10059 or not info["state"]["messages"]
        await nc.close()
