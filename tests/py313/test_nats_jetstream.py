"""nats.py's newer JetStream package (``nats-jetstream``, Python >= 3.13) against natsd and
nats-server: the scripts beside this file run in build/py313 (``make py313``, a
prerequisite of ``make test``); each starts and stops its server itself. Under CI a missing
Python 3.13 environment fails these tests (``components.require_py313``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from components import require_nats_server, require_py313
from differential.harness import natsd_command
from ports import free_port

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.timeout(180)


async def _run(script: str, argv: list[str]) -> dict[str, object]:
    python = require_py313()
    proc = await asyncio.create_subprocess_exec(
        str(python), str(HERE / script), json.dumps(argv), str(free_port()),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 150)
    assert proc.returncode == 0, err.decode(errors="replace")
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("kind", ["nats-server", "natsd"])
async def test_ordered_consumer_resumes_after_a_restart(kind: str, tmp_path: Path) -> None:
    """The ordered consumer's pull request dies with the server; nats-server says so
    (``409 Server Shutdown``) and the client starts a new consumer after the restart."""
    base = [require_nats_server()] if kind == "nats-server" else natsd_command()
    argv = [*base, "-a", "127.0.0.1", "-js", "-sd", str(tmp_path / "store")]
    got = await _run("ordered_restart.py", argv)
    assert got == {
        "before": [f"msg {i}" for i in range(5)],
        "after": [f"more {i}" for i in range(5)],
        "result": "OK",
    }
