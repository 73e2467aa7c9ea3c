"""nats.js v3's APIs for the nats-server 2.12+ stream features (``features_v3.mjs``: message
schedules through publish's ``schedule`` and ``cancelSchedule`` options, atomic batches
through ``js.startBatch``, fast-ingest batches through ``startFastIngest``, counters) against
natsd and nats-server. The script exits 0 when every check passed. The npm packages, the
nats-server fixture and the missing-component rule are those of ``test_nats_js.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from components import require_node_modules

import natsd

from .test_nats_js import (  # noqa: F401 - fixtures
    HERE,
    nats_server,
    node_modules,
    run_node_script,
)

SCRIPT = HERE / "features_v3.mjs"
NODE_TIMEOUT = 120.0

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


async def test_nats_js_features_natsd(node_modules: Path, tmp_path: Path) -> None:  # noqa: F811
    require_node_modules("@nats-io/jetstream", "@nats-io/transport-node")
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path)
    ) as srv:
        rc, out = await run_node_script(SCRIPT, srv.client_url, NODE_TIMEOUT)
    assert rc == 0, f"{SCRIPT.name} against natsd exited {rc}:\n{out}"


@pytest.mark.differential
async def test_nats_js_features_nats_server(
    node_modules: Path,  # noqa: F811
    nats_server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The same script passes against the real nats-server: the checks are sound. On a
    failure the server's log is shown too (nats-server logs why a store could not be made;
    its API answer only says that it could not)."""
    require_node_modules("@nats-io/jetstream", "@nats-io/transport-node")
    rc, out = await run_node_script(SCRIPT, nats_server, NODE_TIMEOUT)
    if rc != 0:
        out += "\n--- nats-server's log ---\n" + (tmp_path / "nats-server.log").read_text()[-4000:]
    assert rc == 0, f"{SCRIPT.name} against nats-server exited {rc}:\n{out}"
