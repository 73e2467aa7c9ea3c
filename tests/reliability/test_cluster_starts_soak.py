"""The soak tier's start-up stress (issue 33): 3 and 5 natsd JetStream servers started
together 200 times each, with and without a CPU hog beside them, and 3 natsd with 2
nats-server 100 times. Every start must come up whole within the bound: a full mesh, one
meta leader seen by every JetStream server, and an R1 and an R3 stream created at once
(tests/cluster_starts.py). ``NATSD_START_RUNS`` changes the count; the failures are listed
together at the end with the first one's logs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cluster_starts import cpu_hog, start_together

RUNS = int(os.environ.get("NATSD_START_RUNS", "200"))


@pytest.mark.soak
@pytest.mark.timeout(0)
@pytest.mark.parametrize(
    ("natsd", "others", "hog", "runs"),
    [
        (3, 0, False, RUNS),
        (3, 0, True, RUNS),
        (5, 0, False, RUNS),
        (5, 0, True, RUNS),
        (3, 2, False, max(1, RUNS // 2)),
    ],
    ids=["3", "3-hog", "5", "5-hog", "3+2-nats-server"],
)
async def test_starts_soak(tmp_path: Path, natsd: int, others: int, hog: bool, runs: int) -> None:
    failures: list[str] = []
    first_logs = ""
    worst = 0.0
    t0 = time.monotonic()
    with cpu_hog(hog):
        for k in range(runs):
            run = await start_together(tmp_path / f"s{k}", natsd, others)
            if run.ok:
                worst = max(worst, run.ready_s)
                continue
            failures.append(f"start {k}: {run.summary()}")
            first_logs = first_logs or run.logs
    took = time.monotonic() - t0
    print(f"{runs} starts in {took:.0f}s, slowest {worst:.2f}s, {len(failures)} failed")
    assert not failures, "\n".join(failures) + "\n" + first_logs


@pytest.mark.soak
@pytest.mark.timeout(0)
@pytest.mark.parametrize(("cuts", "early"), [(True, 0), (False, 1)])
def test_every_ordering_of_three_servers_with_cuts_or_early_timers(cuts: bool, early: int) -> None:
    """The start-up explorer's larger runs (a few minutes each): three servers whose routes
    the network may cut once per pair, or whose redials may fire before what settles them."""
    from route_sim import World, explore

    stats = explore(lambda: World(3, eager_turns=True, cuts=cuts, early=early))
    print(stats)
    assert stats.runs >= 1000
