"""Lame duck through ``Server.lame_duck`` with the configured ``lame_duck_duration``.

``lame_duck_duration`` read from a configuration file reaches ``Server.lame_duck``: the
server stops accepting at once, closes its clients spread over the duration (not all at
the same instant, so they do not reconnect elsewhere as one herd), then shuts down.
(SIGUSR2, the ``ldm`` INFO flag and the grace period are tested with the signal handling.)
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

import natsd
from natsd.config import load_config

from .conftest import RawClient, only_natsd

pytestmark = [pytest.mark.timeout(60), only_natsd]

CLIENTS = 5
DURATION = 1.5
GRACE = 0.2


async def test_lame_duck_duration_from_config(tmp_path: Path) -> None:
    conf = tmp_path / "ldm.conf"
    conf.write_text(
        'listen: "127.0.0.1:-1"\nlame_duck_duration: "1500ms"\n'
        'lame_duck_grace_period: "200ms"\n'
    )
    opts, warnings = load_config(os.fspath(conf))
    assert warnings == []
    assert opts.lame_duck_duration == DURATION
    assert opts.lame_duck_grace_period == GRACE

    srv = natsd.Server(opts)
    await srv.start()
    clients = [await RawClient.open(srv.port) for _ in range(CLIENTS)]
    try:
        for c in clients:
            await c.connect()
        assert len(srv.clients) == CLIENTS

        t0 = time.monotonic()
        task = asyncio.create_task(srv.lame_duck())
        await asyncio.sleep(0)

        async def closed_at(c: RawClient) -> float:
            await c.read_until_closed(timeout=DURATION + 10)
            return time.monotonic() - t0

        # No new connections from the start of lame duck.
        with pytest.raises(OSError):
            _r, w = await asyncio.open_connection("127.0.0.1", srv.port)
            w.close()

        times = sorted(await asyncio.gather(*(closed_at(c) for c in clients)))
        await asyncio.wait_for(task, DURATION + 10)
        await asyncio.wait_for(srv.wait_stopped(), 1)
        stopped = time.monotonic() - t0
    finally:
        for c in clients:
            c.close()
        await srv.shutdown()

    # After the grace period the clients are closed spread over the rest of the duration,
    # each pause between half and all of (duration - grace) / clients (nats-server's
    # lameDuckMode): the last goes at least 4 half-intervals after the first, where an
    # immediate shutdown closes them all within milliseconds.
    half_interval = (DURATION - GRACE) / CLIENTS / 2
    assert times[0] >= GRACE * 0.9, times
    assert times[-1] - times[0] >= (CLIENTS - 1) * half_interval * 0.9, times
    # ... and the server is gone once the last client is (not long after it).
    assert stopped < DURATION + 8, (stopped, times)
