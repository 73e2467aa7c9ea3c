"""PyPI clients built on nats-server 2.12-2.14's stream features, used as their READMEs show
(``clients/*_check.py``, run by Python 3.13 from build/py313): ``nats-jetstream`` (its own
stream tests' features: counters, schedules, batches; mirrors and sources), ``nats-counters`` and
``natsio-counters`` (message counters), ``nats-jetstream-extra`` (atomic and fast batch
publish, batched direct gets), ``natsio-jetstream-batch`` (fast-ingest publishing, batched
direct gets). Each script records every step's result or error; nats-server 2.15.1 and
natsd must record the same, but for what says which server and API level it is."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server, require_py313
from differential.harness import natsd_command
from ports import free_port

HERE = Path(__file__).resolve().parent / "clients"
CHECKS = [
    "nats_jetstream",
    "nats_jetstream_copies",
    "nats_counters",
    "nats_jetstream_extra",
    "natsio_counters",
    "natsio_jetstream_batch",
    "natsio_schedules",
]
# what differs by design: the server's version and API level (natsd: 2.12.0 and 2 until
# every feature of a higher level works, src/natsd/version.py), random batch ids and
# ephemeral consumer names
_LEVEL_STEPS = {"account_info.api.level", "js.api_level()"}

pytestmark = pytest.mark.timeout(300)


def _normalise(doc: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(doc.get("steps", {}), sort_keys=True)
    text = re.sub(r'"(_nats\.level|_nats\.ver)": "[^"]*"', r'"\1": "<server>"', text)
    text = re.sub(r'"(batch_id|batch)": "[^"]*"', r'"\1": "<id>"', text)
    text = re.sub(r"name='[A-Za-z0-9]{22}'", "name='<ephemeral>'", text)
    text = re.sub(r"0x[0-9a-f]+", "", text)
    steps: dict[str, Any] = json.loads(text)
    return {k: v for k, v in steps.items() if k not in _LEVEL_STEPS}


def _run(check: str, argv: list[str], tmp: Path) -> dict[str, Any]:
    python = require_py313()
    port = free_port()
    server = subprocess.Popen([*argv, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no server"
                time.sleep(0.05)
        env = {**os.environ, "NATS_URL": f"nats://127.0.0.1:{port}"}
        out = subprocess.run([str(python), str(HERE / f"{check}_check.py")], env=env,
                             capture_output=True, timeout=240, cwd=HERE)  # fmt: skip
        assert out.returncode == 0, out.stderr.decode(errors="replace")
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.mark.parametrize("check", CHECKS)
async def test_feature_clients_get_what_nats_server_gives(check: str, tmp_path: Path) -> None:
    ref = await asyncio.to_thread(_run, check, [require_nats_server()], tmp_path / "ref")
    impl = await asyncio.to_thread(_run, check, natsd_command(), tmp_path / "impl")
    assert not ref.get("fatal"), ref
    want, got = _normalise(ref), _normalise(impl)
    assert len(want) > 5 and all("ok" in v or "error" in v for v in want.values())
    diff = {k: (want.get(k), got.get(k)) for k in {*want, *got} if want.get(k) != got.get(k)}
    assert not diff, json.dumps(diff, indent=1)[:3000]
