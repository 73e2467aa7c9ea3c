"""The nats.js scripts (streams, consumers, KV and Object Store, v2 and v3 clients) against a
three-server natsd JetStream cluster, with the client on a server that owns none of the
streams: the ``edge`` server, which runs no JetStream, so every API request, publish, pull,
push delivery and ack crosses a route to the stream's server (issue 18). ``r3.mjs`` does the
same with replicated streams and buckets (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from components import require_node_modules
from embedded_cluster import EDGE, EmbeddedJsCluster

from .test_nats_js import HERE, NODE_TIMEOUT, node_modules, run_node_script  # noqa: F401

pytestmark = pytest.mark.timeout(300)

SCRIPTS = {
    "streams": HERE / "streams.mjs",
    "consumers": HERE / "consumers.mjs",
    "kv_os_v2": HERE / "kv_os.mjs",
    "kv_os_v3": HERE / "kv_os_v3.mjs",
    # R3 streams, consumers, KV and Object Store buckets (issue 19)
    "r3": HERE / "r3.mjs",
    # schedules, atomic and fast batches, counters through nats.js v3 (R1 streams)
    "features_v3": HERE / "features_v3.mjs",
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
async def test_nats_js_scripts_on_a_cluster(
    node_modules: Path,  # noqa: F811
    tmp_path: Path,
    script: str,
) -> None:
    if script in ("kv_os_v3", "r3", "features_v3"):
        require_node_modules("@nats-io/kv", "@nats-io/obj", "@nats-io/transport-node")
    cluster = EmbeddedJsCluster(tmp_path, edge=True)
    try:
        await cluster.start_all()
        rc, out = await run_node_script(SCRIPTS[script], cluster.url(EDGE), NODE_TIMEOUT)
        # the edge server holds nothing: everything the script did went over the routes
        assert cluster.servers[EDGE].jetstream is None
    finally:
        await cluster.stop_all()
    assert rc == 0, f"{script} against a natsd cluster exited {rc}:\n{out}"
    assert " 0 failed" in out, out
