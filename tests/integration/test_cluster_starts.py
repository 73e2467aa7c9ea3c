"""Servers started together come up whole (issue 33), a few starts each time the suite runs:
three natsd JetStream servers beside a CPU hog, five natsd, and three natsd with two
nats-server. Each start must reach a full mesh, one meta leader seen by every JetStream
server, and streams created at once (tests/cluster_starts.py). The soak tier starts them
hundreds of times (tests/reliability/test_cluster_starts_soak.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_starts import cpu_hog, start_together

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize(
    ("natsd", "others", "hog", "starts"),
    [(3, 0, True, 3), (5, 0, False, 2), (3, 2, False, 2)],
    ids=["3-natsd-beside-a-hog", "5-natsd", "3-natsd-2-nats-server"],
)
async def test_started_together(
    tmp_path: Path, natsd: int, others: int, hog: bool, starts: int
) -> None:
    with cpu_hog(hog):
        for k in range(starts):
            run = await start_together(tmp_path / f"start{k}", natsd, others)
            assert run.ok, f"start {k}: {run.summary()}\n{run.logs}"
