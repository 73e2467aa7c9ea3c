"""Routes over TLS (``cluster { tls {} }``, mutual verification): three natsd servers
started together form their mesh and meta group and serve an R3 stream over TLS routes;
natsd and nats-server servers in one cluster over TLS routes carry core NATS between
them; a server whose certificate the others do not trust stays out."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_starts import start_together
from tlscerts import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def test_three_natsd_over_tls_routes(certs: Certs, tmp_path: Path) -> None:
    run = await start_together(tmp_path, 3, cluster_extra=certs.tls_block(verify=True))
    assert run.ok, run.summary() + "\n" + run.logs


async def test_natsd_and_nats_server_over_tls_routes(certs: Certs, tmp_path: Path) -> None:
    run = await start_together(tmp_path, 3, 2, cluster_extra=certs.tls_block(verify=True))
    assert run.ok, run.summary() + "\n" + run.logs


async def test_routes_refuse_a_certificate_they_do_not_trust(certs: Certs, tmp_path: Path) -> None:
    # Every server trusts only the other CA: no route handshake can succeed.
    block = certs.tls_block(verify=True).replace(str(certs.ca), str(certs.other_ca))
    run = await start_together(tmp_path, 2, bound=3.0, cluster_extra=block)
    assert not run.ok and "no full mesh" in run.summary()
    assert "TLS route handshake error" in run.logs
    assert "certificate verify failed" in run.logs


async def test_mixed_cluster_refuses_an_untrusted_nats_server(certs: Certs, tmp_path: Path) -> None:
    """nats-server, too, refuses the route of a natsd whose certificate it does not trust
    (the same block everywhere: each side trusts only the other CA)."""
    block = certs.tls_block(verify=True).replace(str(certs.ca), str(certs.other_ca))
    run = await start_together(tmp_path, 1, 1, bound=3.0, cluster_extra=block)
    assert not run.ok and "no full mesh" in run.summary()
    assert "TLS route handshake error" in run.logs
