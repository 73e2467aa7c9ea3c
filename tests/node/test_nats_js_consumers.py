"""nats.js v2 (npm ``nats``) JetStream consumer usage against natsd and the real nats-server.

``consumers.mjs`` (beside this file) runs the consumer snippets of the JetStream seed with
the real library names (``consumerOpts()`` with ``durable``/``deliverTo``/``ackExplicit``/
``deliverNew``/``manualAck``/``bind``/``queue``, durable and ephemeral push
``js.subscribe``, ``js.pullSubscribe`` + ``pull({batch, expires})``, ``js.fetch``,
``js.consumers.get(...).consume()/next()/fetch()``, ``ack``/``nak(delay)``/``working``/
``term``/``ackAck`` with ``m.info``, consumer advisories and ``jsm.consumers.*``) and exits
0 when every check passed. The npm packages, the nats-server fixture and the missing-component
rule are those of ``test_nats_js.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import natsd

from .test_nats_js import (  # noqa: F401 - fixtures
    HERE,
    _failures,
    nats_server,
    node_modules,
    run_node_script,
)

SCRIPT = HERE / "consumers.mjs"

# About 6 s per server (nak delays, ack-wait redelivery, pull/fetch expiries of 0.5-1 s).
pytestmark = [pytest.mark.timeout(120)]

# Checks of consumers.mjs that fail against natsd because of known natsd bugs, by the start
# of their "FAIL ..." line (an xfail while only these fail).
KNOWN_NATSD_FAILURES: set[str] = set()


async def test_nats_js_consumers_natsd(node_modules: Path, tmp_path: Path) -> None:  # noqa: F811
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path), http_port=-1
    ) as srv:
        rc, out = await run_node_script(SCRIPT, srv.client_url)
    if rc == 0:
        return
    fails = _failures(out)
    if fails and all(any(f.startswith(k) for k in KNOWN_NATSD_FAILURES) for f in fails):
        pytest.xfail("known natsd bugs: " + "; ".join(fails))
    pytest.fail(f"consumers.mjs against natsd exited {rc}:\n{out}", pytrace=False)


@pytest.mark.differential
async def test_nats_js_consumers_nats_server(
    node_modules: Path,  # noqa: F811
    nats_server: str,  # noqa: F811
) -> None:
    """The same script passes against the real nats-server: the checks are sound."""
    rc, out = await run_node_script(SCRIPT, nats_server)
    assert rc == 0, f"consumers.mjs against nats-server exited {rc}:\n{out}"
