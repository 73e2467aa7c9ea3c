"""nats.js Key-Value and Object Store against natsd and nats-server.

``kv_os.mjs`` (beside this file) drives nats.js v2's ``js.views.kv`` and ``js.views.os``;
``kv_os_v3.mjs`` drives v3's ``@nats-io/kv`` (``Kvm``) and ``@nats-io/obj`` (``Objm``),
including limit markers and per-key TTLs. Each exits 0 when every check passed. The npm
packages (``package-lock.json``), the nats-server fixture and the missing-component rule
are those of ``test_nats_js.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from components import require_node_modules

import natsd

from .test_nats_js import (  # noqa: F401 - fixtures
    HERE,
    _failures,
    nats_server,
    node_modules,
    run_node_script,
)

SCRIPTS = {"v2": HERE / "kv_os.mjs", "v3": HERE / "kv_os_v3.mjs"}
NODE_TIMEOUT = 120.0

# About 4 s each (TTL expiry, watch windows).
pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

# Checks of kv_os.mjs that fail against natsd because of known natsd bugs, by the start of
# their "FAIL ..." line (an xfail while only these fail).
KNOWN_NATSD_FAILURES: set[str] = set()


def _script(version: str, modules: Path) -> Path:
    if version == "v3":
        require_node_modules("@nats-io/kv", "@nats-io/obj", "@nats-io/transport-node")
    return SCRIPTS[version]


@pytest.mark.parametrize("version", ["v2", "v3"])
async def test_nats_js_kv_os_natsd(
    node_modules: Path,  # noqa: F811
    tmp_path: Path,
    version: str,
) -> None:
    script = _script(version, node_modules)
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path)
    ) as srv:
        rc, out = await run_node_script(script, srv.client_url, NODE_TIMEOUT)
    if rc == 0:
        return
    fails = _failures(out)
    if fails and all(any(f.startswith(k) for k in KNOWN_NATSD_FAILURES) for f in fails):
        pytest.xfail("known natsd bugs: " + "; ".join(fails))
    pytest.fail(f"{script.name} against natsd exited {rc}:\n{out}", pytrace=False)


@pytest.mark.differential
@pytest.mark.parametrize("version", ["v2", "v3"])
async def test_nats_js_kv_os_nats_server(
    node_modules: Path,  # noqa: F811
    nats_server: str,  # noqa: F811
    version: str,
) -> None:
    """The same scripts pass against the real nats-server: the checks are sound."""
    script = _script(version, node_modules)
    rc, out = await run_node_script(script, nats_server, NODE_TIMEOUT)
    assert rc == 0, f"{script.name} against nats-server exited {rc}:\n{out}"
