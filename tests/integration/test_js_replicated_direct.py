"""DIRECT.GET on a replicated stream is answered by every current replica, as nats-server
does (its ``subscribeToDirect`` queue group "_sys_"): each request by one of them, so reads
of an R3 stream (KV gets, Spark's partitioned scans) spread over its servers.

In process, three servers; a counter wraps each replica's direct-get subscription to see
which server answered.
"""

from __future__ import annotations

import json
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, stream_with, until
from embedded_cluster import replica_leader as _leader
from embedded_cluster import stream_contents as _contents
from nats.errors import NoRespondersError

pytestmark = pytest.mark.timeout(120)


def _stream(trio: EmbeddedJsCluster, name: str, stream: str) -> Any:
    js = trio.servers[name].jetstream
    assert js is not None
    return js.accounts["$G"].streams.get(stream)


def _count_answers(trio: EmbeddedJsCluster, stream: str) -> dict[str, list[int]]:
    """Per server, a one-element counter of the direct gets its replica answered."""
    counts: dict[str, list[int]] = {}
    for n in trio.names:
        s = _stream(trio, n, stream)
        counts[n] = c = [0]
        for sub in s.direct_subs:
            inner = sub.callback

            def counted(*a: Any, _inner: Any = inner, _c: list[int] = c) -> None:
                _c[0] += 1
                _inner(*a)

            sub.callback = counted
    return counts


async def test_every_current_replica_answers_direct_gets(trio: EmbeddedJsCluster) -> None:
    cfg = {"name": "D", "subjects": ["d.>"], "num_replicas": 3, "allow_direct": True}
    payloads = [b"m%03d" % i for i in range(30)]
    await stream_with(trio, cfg, "d.x", payloads)
    await until(lambda: _leader(trio, "D") != "")
    await until(lambda: all(len(_contents(trio, n, "D")) == 30 for n in trio.names))
    await until(lambda: all(_stream(trio, n, "D").direct_subs for n in trio.names))
    counts = _count_answers(trio, "D")
    nc = await nats.connect(trio.url("n1"))
    try:
        for i in range(240):
            seq = i % 30 + 1
            msg = await nc.request("$JS.API.DIRECT.GET.D", json.dumps({"seq": seq}).encode())
            assert msg.data == payloads[seq - 1]
            assert msg.headers is not None and msg.headers["Nats-Sequence"] == str(seq)
        # the body-less form (every KV get): last message on a subject
        msg = await nc.request("$JS.API.DIRECT.GET.D.d.x", b"")
        assert msg.data == payloads[-1]
    finally:
        await nc.close()
    answered = {n: c[0] for n, c in counts.items()}
    assert sum(answered.values()) == 241, answered  # each request answered once
    lead = _leader(trio, "D")
    assert sum(v for n, v in answered.items() if n != lead) > 0, answered
    assert sum(1 for v in answered.values() if v) >= 2, answered


async def test_a_stream_without_allow_direct_has_no_replica_answering(
    trio: EmbeddedJsCluster,
) -> None:
    cfg = {"name": "N", "subjects": ["n.>"], "num_replicas": 3, "allow_direct": False}
    await stream_with(trio, cfg, "n.x", [b"a"])
    await until(lambda: _leader(trio, "N") != "")
    for n in trio.names:
        assert not _stream(trio, n, "N").direct_subs
    nc = await nats.connect(trio.url("n2"))
    try:
        with pytest.raises(NoRespondersError):
            # as nats-server, which does not listen: the no-responders status
            await nc.request("$JS.API.DIRECT.GET.N", b'{"seq":1}', timeout=5)
        # turning it on by an update: every replica starts answering
        upd = {**cfg, "allow_direct": True}
        r = await nc.request("$JS.API.STREAM.UPDATE.N", json.dumps(upd).encode(), timeout=5)
        assert "error" not in json.loads(r.data), r.data
        await until(lambda: all(_stream(trio, n, "N").direct_subs for n in trio.names))
        msg = await nc.request("$JS.API.DIRECT.GET.N", b'{"seq":1}', timeout=5)
        assert msg.data == b"a"
        # and off again: none does
        r = await nc.request("$JS.API.STREAM.UPDATE.N", json.dumps(cfg).encode(), timeout=5)
        assert "error" not in json.loads(r.data), r.data
        await until(lambda: not any(_stream(trio, n, "N").direct_subs for n in trio.names))
    finally:
        await nc.close()


async def test_direct_gets_keep_working_when_the_leader_stops(trio: EmbeddedJsCluster) -> None:
    cfg = {"name": "F", "subjects": ["f.>"], "num_replicas": 3, "allow_direct": True}
    await stream_with(trio, cfg, "f.x", [b"one", b"two"])
    await until(lambda: _leader(trio, "F") != "")
    await until(lambda: all(_stream(trio, n, "F").direct_subs for n in trio.names))
    lead = _leader(trio, "F")
    other = next(n for n in trio.names if n != lead)
    await trio.stop(lead)
    nc = await nats.connect(trio.url(other))
    try:
        for _ in range(20):
            msg = await nc.request("$JS.API.DIRECT.GET.F", b'{"seq":2}', timeout=5)
            assert msg.data == b"two"
    finally:
        await nc.close()
