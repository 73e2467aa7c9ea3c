"""A cluster's files written by the release before typed replicated operations load in this
one: every stream, message and consumer is found, and the purge, message delete and consumer
delete that the old release logged as raw API requests (``API`` entries) are applied by the
replica that missed them, from the others' logs, as the typed operations they asked for.

``cluster_v1.tar.gz`` and what it holds: ``make_cluster_v1.py``.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, api_request, stream_contents, take_and_ack, until

from natsd.jetstream.consumer.consumer import Consumer

pytestmark = pytest.mark.timeout(120)

FIXTURE = Path(__file__).with_name("cluster_v1.tar.gz")

# R3 after the old release's operations: r3.b at the even sequences, r3.a kept 17 and 19
# by the purge, 19 deleted, then 21-25 on r3.b
R3_SEQS = [*range(2, 21, 2), 17, *range(21, 26)]


async def test_a_cluster_written_by_the_previous_release_loads(tmp_path: Path) -> None:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    trio = EmbeddedJsCluster(tmp_path)
    await trio.start_all()
    try:

        def r3(name: str) -> list[int]:
            return sorted(seq for seq, *_ in stream_contents(trio, name, "R3"))

        # n3 was away for the purge and the deletes: it applies them from the log
        await until(lambda: all(r3(n) == sorted(R3_SEQS) for n in trio.names), timeout=20)
        for name in trio.names:
            rows = {seq: (subj, data) for seq, subj, data, _ts in stream_contents(trio, name, "R3")}
            assert rows[17] == ("r3.a", b"m17") and rows[25] == ("r3.b", b"m25")

        def consumers(name: str) -> set[str]:
            js = trio.servers[name].jetstream
            s = js.accounts["$G"].streams.get("R3")
            return set() if s is None else set(s.consumers)

        await until(lambda: all(consumers(n) == {"D1"} for n in trio.names), timeout=20)
        for name in trio.names:
            c = trio.servers[name].jetstream.accounts["$G"].streams["R3"].consumers["D1"]
            assert isinstance(c, Consumer)
        r1 = [seq for n in trio.names for seq, *_ in stream_contents(trio, n, "R1")]
        assert r1 == [1, 2, 3, 4, 5]

        nc = await nats.connect(trio.url("n2"))
        try:
            info = await api_request(nc, "$JS.API.CONSUMER.INFO.R3.D1")
            assert info["ack_floor"]["stream_seq"] == 10, info
            # D1 goes on where the old release left it: 12 is the next message
            assert await take_and_ack(nc, "R3", "D1", 2) == [12, 14]
            info = await api_request(nc, "$JS.API.STREAM.INFO.R3")
            assert info["state"]["messages"] == len(R3_SEQS)
            # and the typed operations of this release work on the same group
            purge = await api_request(nc, "$JS.API.STREAM.PURGE.R3", {"filter": "r3.a"})
            assert purge["purged"] == 1, purge
            await until(lambda: all(17 not in r3(n) for n in trio.names))
        finally:
            await nc.close()
    finally:
        await trio.stop_all()
