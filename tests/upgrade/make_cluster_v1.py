"""Make ``cluster_v1.tar.gz``: the files of a three-server cluster as the release before
typed replicated operations (main at 043a5bd) wrote them. Kept to say how the fixture was
made; run it with that release's sources first on the path::

    git worktree add /tmp/v1 043a5bd
    NATSD_PURE=1 PYTHONPATH=/tmp/v1/src:/tmp/v1/tests python tests/upgrade/make_cluster_v1.py \
        tests/upgrade/cluster_v1.tar.gz

(``JsCluster3`` is that release's name for the in-process cluster harness, since renamed
``EmbeddedJsCluster``.)

What the files hold (``test_upgrade.py`` checks each after the upgrade):

* stream ``R3`` (3 replicas, file): 20 messages on ``r3.a`` (odd sequences) and ``r3.b``
  (even); durable pull consumers ``D1`` (5 acknowledged) and ``D2``. Then ``n3`` stops, and
  with it away: a purge of ``r3.a`` keeping 2, a delete of message 19, a delete of ``D2``,
  5 more messages (21-25) and 3 more acks on ``D1``. The purge and both deletes are the
  release's ``API`` entries in the group's log; ``n3`` has never applied them.
* stream ``R1`` (1 replica, file) with 5 messages on ``r1.x``.
"""

from __future__ import annotations

import asyncio
import sys
import tarfile
import tempfile
from pathlib import Path

import nats
from embedded_cluster import JsCluster3, api_request, publish_acked, take_and_ack


async def make(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trio = JsCluster3(Path(tmp))
        await trio.start_all()
        nc = await nats.connect(trio.url("n1"))
        r3 = {"name": "R3", "subjects": ["r3.>"], "num_replicas": 3, "storage": "file"}
        r1 = {"name": "R1", "subjects": ["r1.>"], "num_replicas": 1, "storage": "file"}
        for cfg in (r3, r1):
            assert "error" not in await api_request(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
        for i in range(1, 21):
            await publish_acked(nc, "r3.a" if i % 2 else "r3.b", f"m{i}".encode())
        for i in range(5):
            await publish_acked(nc, "r1.x", f"one{i}".encode())
        for name in ("D1", "D2"):
            cfg = {"durable_name": name, "ack_policy": "explicit"}
            body = {"stream_name": "R3", "config": cfg}
            reply = await api_request(nc, f"$JS.API.CONSUMER.DURABLE.CREATE.R3.{name}", body)
            assert "error" not in reply, reply
        assert await take_and_ack(nc, "R3", "D1", 5) == [1, 2, 3, 4, 5]
        await nc.close()
        await trio.stop("n3")
        nc = await nats.connect(trio.url("n1"))
        purge = {"filter": "r3.a", "keep": 2}
        assert (await api_request(nc, "$JS.API.STREAM.PURGE.R3", purge))["purged"] == 8
        assert (await api_request(nc, "$JS.API.STREAM.MSG.DELETE.R3", {"seq": 19}))["success"]
        assert (await api_request(nc, "$JS.API.CONSUMER.DELETE.R3.D2", None))["success"]
        for i in range(21, 26):
            await publish_acked(nc, "r3.b", f"m{i}".encode())
        assert await take_and_ack(nc, "R3", "D1", 3) == [6, 8, 10]
        await nc.close()
        await trio.stop_all()
        with tarfile.open(out, "w:gz") as tar:
            for name in ("n1", "n2", "n3"):
                tar.add(Path(tmp) / name, arcname=name)


if __name__ == "__main__":
    asyncio.run(make(Path(sys.argv[1])))
