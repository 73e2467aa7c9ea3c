"""A replicated stream's leader stopped (SIGSTOP) and resumed, as real processes: the answers
a follower gave to what the leader sent just before the pause reach it only after it (held
back on their way, as a paused process's socket buffers hold them), while the others have
elected a leader and stored a message it does not have. Those answers are to old requests:
the resumed leader must not take them for a majority's word (cluster/group.has_lease) and
answer as the stream's leader from its stale store.

The routes go through the proxies of tests/route_links.py, so the test decides what
reaches the paused server and when.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nats
import pytest
from faults.workload import (
    STREAM,
    create_stream,
    probe_leader,
    quiet_close,
    quiet_error,
    stream_leader,
)
from nats.aio.client import Client as NATS
from proc_cluster import ProcCluster

pytestmark = pytest.mark.timeout(120)


async def _publish(nc: NATS, data: bytes, deadline: float) -> int:
    """Publish until acknowledged; the sequence it was stored at."""
    last: object = None
    while time.monotonic() < deadline:
        try:
            ack = json.loads((await nc.request("f.x", data, timeout=0.5)).data)
            if "error" not in ack:
                return int(ack["seq"])
            last = ack
        except Exception as e:  # no leader yet
            last = e
        await asyncio.sleep(0.05)
    raise AssertionError(f"not acknowledged: {last!r}")


async def _connect(url: str | list[str], reconnect: bool = True) -> NATS:
    servers = url if isinstance(url, list) else [url]
    return await nats.connect(servers=servers, allow_reconnect=reconnect,
                              max_reconnect_attempts=-1, reconnect_time_wait=0.1,
                              error_cb=quiet_error)  # fmt: skip


async def test_a_resumed_leader_does_not_serve_on_answers_to_its_requests_from_before_the_pause(
    tmp_path: Path,
) -> None:
    c = ProcCluster(tmp_path, 3, cluster_name="fc", proxied=True)
    conns: list[NATS] = []
    try:
        await c.start()
        admin = await _connect(c.urls)
        conns.append(admin)
        await create_stream(admin, 3)
        for i in range(5):
            assert await _publish(admin, b"%d" % i, time.monotonic() + 10) == i + 1
        lead = ""
        while not lead:
            lead = await stream_leader(admin)
        held, cut = sorted(n for n in c.names if n != lead)
        # a connection to the leader alone: what it answers, it answers itself
        probe = await _connect(c[lead].url, reconnect=False)
        conns.append(probe)
        assert await probe_leader(probe, lead, 0.3), "the observable: it answers as leader"

        # what ``held`` sends the leader waits on the way; the leader keeps its lease
        # through ``cut`` meanwhile
        c.hold_toward(lead, [held])
        await asyncio.sleep(0.4)  # two heartbeat rounds: answers from ``held`` wait
        c[lead].pause()
        t0 = time.monotonic()
        mark = c.held()  # the answers to what it sent before the pause
        assert any(sum(m.values()) for m in mark.values())
        c.set_pair(lead, cut, up=False)  # the new leader's word cannot reach it
        # the two others elect a leader, which stores a sixth message
        other = await _connect(c[cut].url)
        conns.append(other)
        assert await _publish(other, b"while paused", t0 + 15) == 6
        new = await stream_leader(other)
        assert new in (held, cut)
        await asyncio.sleep(max(0.0, t0 + 3.0 - time.monotonic()))
        c[lead].resume()
        await asyncio.sleep(0.2)
        # resumed: it reads those old answers (and nothing newer: no word of the new term)
        c.release_held(mark)
        stale = await probe_leader(probe, lead, 1.0)
        assert not stale, (
            f"{lead}, resumed, answered as the leader ({new} leads) from its stale store: "
            f"{[a['state']['last_seq'] for a in stale]} (6 stored)\n{c.logs()}"
        )

        # healed: it follows the new leader and catches up
        c.heal_links()
        deadline = time.monotonic() + 20
        while (st := await asyncio.to_thread(c[lead].stream_state, STREAM)) is None or (
            st.get("last_seq") != 6
        ):
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.1)
        assert await stream_leader(admin) != ""
    finally:
        for nc in conns:
            await quiet_close(nc)
        await c.close()
