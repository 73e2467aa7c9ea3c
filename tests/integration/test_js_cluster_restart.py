"""Replicated streams across restarts: what a server that was away finds when it is back
(a stream deleted meanwhile, a delete it committed and had not applied, streams the meta
group does not know), and a catch-up cut by a restart. Embedded three-server clusters
(``embedded_cluster``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, stream_with, until
from embedded_cluster import api_request as _req
from embedded_cluster import log_first as _log_first
from embedded_cluster import publish_acked as _publish
from embedded_cluster import replica_leader as _leader
from embedded_cluster import stream_contents as _contents
from nats.errors import NoRespondersError, TimeoutError

from natsd.jetstream.cluster import catchup as cluster_catchup
from natsd.jetstream.cluster import driver as cluster_mod
from natsd.jetstream.cluster import replica as cluster_replica
from natsd.server import Server

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("replicas", [1, 3])
async def test_a_stream_deleted_while_a_server_was_down_is_set_aside_there(
    trio: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch, replicas: int
) -> None:
    """A server that was down when a stream placed on it was deleted, and that the meta
    leader then brings up to date with its snapshot (its log was compacted meanwhile), not
    the delete entry: its replica leaves service, as on nats-server, and its files are set
    aside, not deleted. Before, an R1 stream went on taking publishes there, deleted
    everywhere else; an R3 replica's Raft log stayed in the WAL for ever (nothing compacts
    it), and a new stream of the same name adopted the old files, so the deleted messages
    came back in it."""
    monkeypatch.setattr(cluster_mod, "META_COMPACT", 2)
    cfg = {"name": "GONE", "subjects": ["gone.>"], "num_replicas": replicas}
    await stream_with(trio, cfg, "gone.x", [b"%d" % i for i in range(5)])
    a = trio.servers["n1"].js_cluster.meta.stream("$G", "GONE")
    assert a is not None
    if replicas == 1:
        victim = a.peers[0]
    else:
        victim = next(n for n in trio.names if n != _leader(trio, "GONE"))
    other = next(n for n in trio.names if n != victim)
    name = cluster_replica.group_name(a)
    wal = trio.servers[victim].js_cluster.raft.host.wal
    assert (name in wal.groups) == (replicas > 1)
    await until(lambda: len(_contents(trio, victim, "GONE")) == 5)
    await trio.stop(victim)
    nc = await nats.connect(trio.url(other))
    try:
        try:
            assert "error" not in await _req(nc, "$JS.API.STREAM.DELETE.GONE")
        except TimeoutError:
            pass  # the replica that answers is the one away (as on nats-server)
        await until(lambda: trio.servers[other].js_cluster.meta.stream("$G", "GONE") is None)
        for i in range(4):  # meta entries enough for the leader to compact past the delete
            more = {"name": f"O{i}", "subjects": [f"o{i}"]}
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.O{i}", more)
        up = [trio.servers[n] for n in trio.names if n != victim]
        meta_lead = next(s for s in up if s.js_cluster.is_leader())
        g = meta_lead.js_cluster.group
        assert g is not None
        await until(lambda: g.storage.first_index() > g.applied - 2)
    finally:
        await nc.close()
    srv = await trio.start(victim)
    js = srv.jetstream
    assert js is not None
    await until(lambda: srv.js_cluster.meta.stream("$G", "O3") is not None)
    await until(lambda: "GONE" not in js.accounts["$G"].streams)
    assert name not in srv.js_cluster.raft.host.wal.groups
    kept = list((trio.tmp / victim).rglob("set-aside/GONE.*"))
    assert len(kept) == 1, kept
    nc = await nats.connect(trio.url(victim))
    try:
        with pytest.raises(NoRespondersError):
            await nc.request("gone.x", b"late", timeout=2)
        # a stream of the same name created again is a new stream, empty
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.GONE", cfg)
        await _publish(nc, "gone.x", b"again")
    finally:
        await nc.close()
    b = srv.js_cluster.meta.stream("$G", "GONE")
    assert b is not None and b.created != a.created
    for n in b.peers:
        await until(lambda n=n: [c[2] for c in _contents(trio, n, "GONE")] == [b"again"])


async def test_a_catch_up_cut_by_a_restart_resumes_where_it_stopped(
    trio: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica that was away copies what it missed in batches; stopped in the middle of
    the copy and started again, it keeps what it had copied and asks only for the rest."""
    monkeypatch.setattr(cluster_catchup, "BATCH_BYTES", 4 << 10)
    for srv in trio.servers.values():
        srv.js_cluster.stream_groups.compact_every = 20
    cfg = {"name": "R", "subjects": ["r.>"], "num_replicas": 3, "storage": "file"}
    await stream_with(trio, cfg, "r.a", [b"first"])
    lead = _leader(trio, "R")
    away = next(n for n in trio.names if n != lead)
    await until(lambda: len(_contents(trio, away, "R")) == 1)
    held = _log_first(trio, away)
    await trio.stop(away)
    nc = await nats.connect(trio.url(lead))
    try:
        for i in range(400):
            await _publish(nc, "r.b", b"%04d" % i + b"y" * 2000)
        others = [n for n in trio.names if n != away]
        await until(lambda: all(_log_first(trio, n) > held + 100 for n in others))
    finally:
        await nc.close()
    srv = await trio.start(away)
    srv.js_cluster.stream_groups.compact_every = 20
    cu = srv.js_cluster.stream_groups.catchup
    answer = cu._answer

    def until_150(p: Any) -> None:  # the copy stalls at 150 messages (answers dropped)
        if cu.copied < 150:
            answer(p)

    cu._answer = until_150  # type: ignore[method-assign]
    await until(lambda: cu.copied >= 150, timeout=20)
    had = len(_contents(trio, away, "R"))
    await trio.stop(away)
    srv = await trio.start(away)
    ref = _contents(trio, lead, "R")
    assert len(ref) == 401 and 150 <= had < 401
    await until(lambda: _contents(trio, away, "R") == ref, timeout=30)
    again = srv.js_cluster.stream_groups.catchup.copied
    assert again <= 401 - had + 5, f"copied {again} after the restart, with {had} of 401 held"


async def test_a_delete_committed_but_not_applied_before_a_stop_is_applied_at_restart(
    trio: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The meta log replays at restart without redoing what the stores already show; a
    delete entry committed just before the server stopped, and never applied there, must
    still delete the stream (before, its R1 stream stayed in service there)."""
    cfg = {"name": "DEL", "subjects": ["del.>"], "num_replicas": 1}
    await stream_with(trio, cfg, "del.x", [b"1"])
    a = trio.servers["n1"].js_cluster.meta.stream("$G", "DEL")
    assert a is not None
    victim = a.peers[0]
    other = next(n for n in trio.names if n != victim)
    # the server stops before applying the delete it committed (and before its orphan
    # check would set the stream aside)
    local = trio.servers[victim].js_cluster.local
    monkeypatch.setattr(local, "applied_delete", lambda *_: None)
    monkeypatch.setattr(local, "set_aside_orphans", lambda: None)
    nc = await nats.connect(trio.url(other))
    try:
        try:
            await _req(nc, "$JS.API.STREAM.DELETE.DEL")
        except TimeoutError:
            pass  # its server answers, and it did not apply it
    finally:
        await nc.close()
    srv = trio.servers[victim]
    await until(lambda: srv.js_cluster.meta.stream("$G", "DEL") is None)
    js = srv.jetstream
    assert js is not None and "DEL" in js.accounts["$G"].streams
    await trio.stop(victim)
    srv = await trio.start(victim)
    js = srv.jetstream
    assert js is not None
    await until(lambda: "DEL" not in js.accounts["$G"].streams)
    # deleted by the replayed entry, not set aside as an orphan
    assert not list((trio.tmp / victim).rglob("set-aside/DEL.*"))
    nc = await nats.connect(trio.url(victim))
    try:
        with pytest.raises(NoRespondersError):
            await nc.request("del.x", b"late", timeout=2)
    finally:
        await nc.close()


async def _standalone_stream(store: Path, name: str, subject: str, n: int) -> None:
    """An R1 stream of ``n`` messages made on ``store`` by a standalone server."""
    srv = Server(host="127.0.0.1", port=0, jetstream=True, store_dir=str(store), http_port=-1)
    await srv.start()
    try:
        nc = await nats.connect(f"nats://127.0.0.1:{srv.port}")
        try:
            cfg = {"name": name, "subjects": [subject]}
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            for i in range(n):
                await _publish(nc, subject, b"%d" % i)
        finally:
            await nc.close()
    finally:
        await srv.shutdown()


async def _orphan_set_aside(trio: EmbeddedJsCluster, name: str, stream: str, subject: str) -> None:
    """``stream`` leaves service on server ``name`` and its files are kept in set-aside;
    its name is free in the cluster: created again, it is a new stream, empty."""
    await until(lambda: stream not in trio.streams(name))
    kept = list((trio.tmp / name).rglob(f"set-aside/{stream}.*"))
    assert len(kept) == 1, kept
    assert any(p.name.endswith(".blk") for p in kept[0].rglob("*")), list(kept[0].rglob("*"))
    nc = await nats.connect(trio.url(name))
    try:
        with pytest.raises(NoRespondersError):
            await nc.request(subject, b"late", timeout=2)
        names = await _req(nc, "$JS.API.STREAM.NAMES")
        assert stream not in (names.get("streams") or []), names
        cfg = {"name": stream, "subjects": [subject], "num_replicas": 3}
        made = await _req(nc, f"$JS.API.STREAM.CREATE.{stream}", cfg)
        assert made["state"]["messages"] == 0, made
    finally:
        await nc.close()


async def test_streams_from_before_the_cluster_are_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that ran standalone, with streams, and is then started in a cluster: the
    meta group knows none of its streams. nats-server deletes such orphans 30 s after its
    meta recovery; here they leave service and are set aside once the server is current
    with the meta leader. Before, an R1 one went on taking publishes there, acknowledged by
    a stream no other server knew."""
    monkeypatch.setattr(cluster_mod, "ORPHANS_AFTER", 0.2)
    await _standalone_stream(tmp_path / "n1", "OLD", "old.x", 3)
    trio = EmbeddedJsCluster(tmp_path)
    try:
        await trio.start_all()
        await _orphan_set_aside(trio, "n1", "OLD", "old.x")
    finally:
        await trio.stop_all()


async def test_a_stream_the_meta_group_does_not_know_is_set_aside_at_restart(
    trio: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted server whose store holds a stream the meta group's state does not place
    there (here: copied in while it was down) sets it aside once it is current."""
    monkeypatch.setattr(cluster_mod, "ORPHANS_AFTER", 0.2)
    await stream_with(trio, {"name": "KEEP", "subjects": ["keep"], "num_replicas": 3}, "keep",
                      [b"k"])  # fmt: skip
    await trio.stop("n2")
    await _standalone_stream(trio.tmp / "solo", "SOLO", "solo.x", 2)
    streams = Path("jetstream", "$G", "streams")
    shutil.copytree(trio.tmp / "solo" / streams / "SOLO", trio.tmp / "n2" / streams / "SOLO")
    await trio.start("n2")
    await _orphan_set_aside(trio, "n2", "SOLO", "solo.x")
    for n in trio.names:  # the streams the meta group places there stay
        await until(lambda n=n: [c[2] for c in _contents(trio, n, "KEEP")] == [b"k"])
