"""nats.js v2 (npm ``nats``) JetStream stream usage against natsd and the real nats-server.

``streams.mjs`` (beside this file) drives streams through the library's JetStreamManager
and JetStreamClient and exits 0 when every check passed. The packages come from
``package-lock.json``; ``make node-modules`` (a prerequisite of ``make test``) installs them
into ``tests/node/node_modules`` with ``npm ci``. Without node or the packages the tests fail
under CI and skip with the reason elsewhere (``components.require_node_modules``).

natsd runs embedded on the pytest event loop, so node is run with
``asyncio.create_subprocess_exec`` and awaited (a blocking ``subprocess.run`` would
freeze the server it talks to).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import require_nats_server, require_node_modules
from ports import free_port

import natsd

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "streams.mjs"
NODE_TIMEOUT = 90.0

# Checks of streams.mjs that fail against natsd because of known natsd bugs, by the start
# of their "FAIL ..." line. When only these fail the natsd test is an xfail; when a bug is
# fixed the test passes and the entry should go.
KNOWN_NATSD_FAILURES: set[str] = set()


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """node and tests/node/node_modules (``make node-modules``: npm ci from package-lock.json).

    The packages are installed by the Makefile, not here: a fixture that installs can only
    skip when the registry is away, and then a whole area goes untested while CI is green.
    """
    return require_node_modules()


async def run_node_script(script: Path, url: str, timeout: float = NODE_TIMEOUT) -> tuple[int, str]:
    """Run ``node <script> <url>`` here; (exit status, output), -1 when it timed out."""
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(script),
        url,
        cwd=HERE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        return -1, out.decode(errors="replace") + f"\n[node timed out after {timeout}s]"
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


def _failures(output: str) -> list[str]:
    return [line[5:] for line in output.splitlines() if line.startswith("FAIL ")]


async def test_nats_js_streams_natsd(node_modules: Path, tmp_path: Path) -> None:
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path), http_port=-1
    ) as srv:
        rc, out = await run_node_script(SCRIPT, srv.client_url)
    if rc == 0:
        return
    fails = _failures(out)
    if fails and all(any(f.startswith(k) for k in KNOWN_NATSD_FAILURES) for f in fails):
        pytest.xfail("known natsd bugs: " + "; ".join(fails))
    pytest.fail(f"streams.mjs against natsd exited {rc}:\n{out}", pytrace=False)


# ------------------------------------------------------------------ reference server


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[str]:
    binary = require_nats_server()
    port = free_port()
    log = tmp_path / "nats-server.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")],
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nats-server exited {proc.returncode}:\n{log.read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"nats-server not ready on port {port}:\n{log.read_text()}")
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.differential
async def test_nats_js_streams_nats_server(node_modules: Path, nats_server: str) -> None:
    """The same script passes against the real nats-server: the checks are sound."""
    rc, out = await run_node_script(SCRIPT, nats_server)
    assert rc == 0, f"streams.mjs against nats-server exited {rc}:\n{out}"
