"""nats.js v2 (npm ``nats``) over TLS and with nkeys, against natsd and the real nats-server
with the same certificates and configuration (``tls.mjs`` beside this file): a client
certificate the server verifies, TLS first, an nkey user, and a client certificate the
server does not trust (refused by both)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nkeys
import pytest
from components import require_nats_server, require_node_modules
from differential.harness import ServerProcess, server_pair
from tlscerts import Certs, make_certs

HERE = Path(__file__).resolve().parent

SEED = "SUAMSCZIPZX5KKDYFAHJGYO42YRLSE3ZKBUJDHLJH3S5XB3WZKGEX3IIGI"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def servers(certs: Certs) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    require_node_modules()
    require_nats_server()
    public = nkeys.from_seed(bytearray(SEED.encode())).public_key.decode()
    conf = certs.tls_block(verify=True, handshake_first="200ms") + (
        f"authorization {{ users = [ {{ nkey: {public} }} ] }}\n"
    )
    with server_pair(config=conf) as pair:
        yield pair.ref, pair.impl


async def _node(cfg: dict[str, Any]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(HERE / "tls.mjs"),
        json.dumps(cfg),
        cwd=HERE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


CASES = {
    "client-cert": {"who": "alice"},
    "tls-first": {"who": "alice", "handshakeFirst": True},
    "untrusted-cert": {"who": "stranger", "expect": 2},
    "no-nkey": {"who": "alice", "seed": None, "expect": 2},
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_nats_js_tls(
    servers: tuple[ServerProcess, ServerProcess], certs: Certs, case: str
) -> None:
    spec = CASES[case]
    who = str(spec["who"])
    results = []
    for server in servers:
        cfg = {
            "url": f"tls://localhost:{server.port}",
            "ca": str(certs.ca),
            "cert": str(getattr(certs, f"{who}_cert")),
            "key": str(getattr(certs, f"{who}_key")),
            "handshakeFirst": bool(spec.get("handshakeFirst")),
            "seed": spec.get("seed", SEED),
        }
        rc, out = await _node(cfg)
        results.append(rc)
        assert rc == spec.get("expect", 0), f"{server.name}: exit {rc}\n{out}"
    assert results[0] == results[1]
