"""The deterministic cluster tier: whole natsd JetStream clusters (three or five unchanged
``Server`` objects) in one process and one event loop on virtual time, their routes and
clients on a simulated network, their disks on FaultFS (sim/world.py, sim/schedule.py).

Each seed is one schedule of faults (power loss with torn writes, graceful restart,
isolation, minority/majority split, a slow server, a peer move) under publishers that
retry until acknowledged, and in three seeds of ten a durable pull consumer acknowledging
each message with ack-sync; every acknowledged message must be on every replica once, in
order, at its PubAck's sequence, and the replicas identical; no message may come back to
the consumer after its ack-sync was answered, it must confirm every message, and its state
must agree on every replica; a server cut off from a majority of the stream's peers must
answer no read as the stream's leader once its lease has run out. ``make test`` runs
``NATSD_SIM_SCHEDULES`` seeds (200 by default); the soak tier runs thousands from a random
base it prints. A failure names its seed: ``python tests/sim/schedule.py SEED`` replays it.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from sim.schedule import run_schedule
from sim.world import SimFailure

SCHEDULES = int(os.environ.get("NATSD_SIM_SCHEDULES", "200"))


@pytest.mark.parametrize("seed", range(1, SCHEDULES + 1))
def test_schedule(tmp_path: Path, seed: int) -> None:
    r = run_schedule(seed, tmp_path)
    assert r.faults and r.acked >= 40, (r.faults, r.acked)
    assert not r.consumer or r.deliveries >= r.acked, (r.acked, r.deliveries)


def test_a_seed_replays_callback_for_callback(tmp_path: Path) -> None:
    """Same seed, same run: the network's delivery fingerprint (every delivery's time,
    endpoints and length, in order) and the world's log match; another seed differs. (Seed
    7 has a consumer and an isolated server read through.)"""
    a = run_schedule(7, tmp_path)
    b = run_schedule(7, tmp_path)
    c = run_schedule(8, tmp_path)
    assert a.consumer and a.deliveries and "probe" in "\n".join(a.log)
    assert (a.fingerprint, a.log) == (b.fingerprint, b.log)
    assert a.fingerprint != c.fingerprint
    assert a.virtual_s > 2.0 and a.wall_s < a.virtual_s


def test_seed_51_keeps_the_meta_log_a_power_loss_found_missing(tmp_path: Path) -> None:
    """The bug this tier found: seed 51 crashes n4 (power loss, torn writes) early. Its
    WAL lived in ``jetstream/_cluster/wal``, and Wal.open made only the last of the
    directories it created durable, so the disk came back without the meta log n4 had
    acknowledged; n4 rejected the leader's next append and the leader sent it again at
    full speed, for ever (1.8 million messages in 20 virtual seconds, 77 s of wall time,
    then the move timed out). Now the directories are durable (storage/fileio
    makedirs_durable) and a member that does lose its log is probed down
    (cluster/group._lost_unsaid): the schedule passes and no server logs the loss."""
    r = run_schedule(51, tmp_path)
    assert "crash n4#1 (torn=True)" in "\n".join(r.log)
    assert not [e for e in r.errors if "acknowledged" in e], r.errors


# the seeds whose schedule also runs message schedules (sim/msg_schedules.py)
MSG_SCHEDULES = int(os.environ.get("NATSD_SIM_MSG_SCHEDULES", "40"))


@pytest.mark.parametrize("seed", range(1, MSG_SCHEDULES + 1))
def test_schedule_with_message_schedules(tmp_path: Path, seed: int) -> None:
    """The same schedules with a second stream of ``@at`` message schedules: each
    acknowledged schedule fires once, none twice, and every replica holds the same."""
    r = run_schedule(seed, tmp_path, schedules=True)
    assert r.faults and r.fired >= 1, (r.faults, r.fired)


def test_seed_122_fires_no_schedule_twice_after_a_power_loss(tmp_path: Path) -> None:
    """The bug message schedules found here: seed 122 crashes n3 (power loss, torn writes)
    after three schedules fired. Its store came back with the firings but without the
    purges of their schedules that followed them, the schedule table read at start-up held
    the three again, and the log's replay skipped the firings (their messages were held),
    so n3, leading after n2's crash, fired them a second time. The replay now does again
    what a held entry did besides storing its message (``Stream._applied_again``)."""
    r = run_schedule(122, tmp_path, schedules=True)
    assert "crash n3#1 (torn=True)" in "\n".join(r.log)
    assert r.fired >= 10, r.fired


@pytest.mark.soak
def test_soak_schedules(tmp_path: Path) -> None:
    n = int(os.environ.get("NATSD_SIM_SOAK", "2000"))
    base = int(os.environ.get("NATSD_SIM_BASE", str(random.randrange(10**6, 10**9))))
    print(f"deterministic tier soak: seeds {base}..{base + n - 1}")
    failed: list[str] = []
    for seed in range(base, base + n):
        try:
            # (every tenth with message schedules)
            run_schedule(seed, tmp_path, schedules=seed % 10 == 0)
        except SimFailure as e:
            failed.append(str(e).splitlines()[0])
    assert not failed, "\n".join(failed)
