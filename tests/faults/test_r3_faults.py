"""The replicated-stream fault suite (issue 19): 63 fault cycles in ``make test`` (30 on a
three-server cluster with an R3 stream, 20 on five servers with R5, 12 on five servers with
an R3 stream whose peers change, 1 of a leader paused with its answers held back), 1,500 in
the soak tier (``make soak``, 500 of each, in epochs of 100 cycles on a fresh stream:
``NATSD_FAULT_EPOCH``). What a run does and checks is in ``faults/run.py``.

``make test`` runs fixed schedules (``faults.run.FIXED_SEED``), the soak tier new ones;
``NATSD_FAULT_SEED`` replays one (``random``: a new one); a failing run prints its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tlscerts import make_certs

from faults.run import fault_seed, run_faults


@pytest.mark.timeout(600)
async def test_r3_on_three_servers(tmp_path: Path) -> None:
    # two epochs of 15: the stream deleted and created again under faults' aftermath
    run = await run_faults(tmp_path, servers=3, replicas=3, seed=fault_seed(), cycles=30, epoch=15)
    print("\n".join(run.log))
    print(run.summary())


@pytest.mark.timeout(120)
async def test_r3_leader_paused_with_its_answers_held(tmp_path: Path) -> None:
    """``pause_leader`` alone: a leader stopped and resumed with nothing but answers to
    what it sent before the pause does not answer as leader on their word, and the run's
    checks (nothing lost, no acknowledged message delivered again, identical replicas)
    hold. One cycle, drawn every time (in the suites above, one fault of eight)."""
    run = await run_faults(tmp_path, servers=3, replicas=3, seed=fault_seed(), cycles=1,
                           kinds=("pause_leader",))  # fmt: skip
    print("\n".join(run.log))
    print(run.summary())


@pytest.mark.timeout(600)
async def test_r3_over_tls_routes(tmp_path: Path) -> None:
    """The same faults on routes that are TLS with mutual verification (issue 34): kills,
    stops, partitions and restarts each make new TLS sessions (five cycles: the TLS part is
    the sessions, the faults themselves are the three-server run's)."""
    certs = make_certs(tmp_path / "certs")
    run = await run_faults(
        tmp_path, servers=3, replicas=3, seed=fault_seed(), cycles=5,
        cluster_extra=certs.tls_block(verify=True),
    )  # fmt: skip
    print("\n".join(run.log))
    print(run.summary())


@pytest.mark.timeout(600)
async def test_r5_on_five_servers(tmp_path: Path) -> None:
    run = await run_faults(tmp_path, servers=5, replicas=5, seed=fault_seed(), cycles=20)
    print("\n".join(run.log))
    print(run.summary())


@pytest.mark.timeout(600)
async def test_r3_on_five_servers_changing_peers(tmp_path: Path) -> None:
    """Membership changes under faults: the R3 stream's peers are replaced (by PEER.REMOVE
    or PEER.EVACUATE, sometimes with a kill -9 during the move) among the other faults."""
    run = await run_faults(tmp_path, servers=5, replicas=3, seed=fault_seed(), cycles=12)
    print("\n".join(run.log))
    print(run.summary())


@pytest.mark.soak
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize(("servers", "replicas"), [(3, 3), (5, 5), (5, 3)])
async def test_soak(tmp_path: Path, servers: int, replicas: int) -> None:
    cycles = int(os.environ.get("NATSD_FAULT_CYCLES", "500"))
    epoch = int(os.environ.get("NATSD_FAULT_EPOCH", "100"))
    seed = fault_seed(None)  # a new schedule each soak
    await run_faults(tmp_path, servers=servers, replicas=replicas, seed=seed, cycles=cycles,
                     epoch=epoch)  # fmt: skip
