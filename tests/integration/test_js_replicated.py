"""Replicated (R3) streams on a three-server natsd cluster, in process, driven by nats-py.

Design-clustering §4.5: the stream's Raft group leader takes publishes, every replica
stores the committed entries, a PubAck means a majority holds the message in its node
log. These tests look inside the servers to compare the replicas' stores message by
message, stop the leader to see the next publish go through a new one, and restart the
whole cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import nats
import pytest
from embedded_cluster import (
    CLUSTER,
    EmbeddedJsCluster,
    stream_with,
    take_and_ack,
    until,
)
from embedded_cluster import api_request as _req
from embedded_cluster import log_first as _log_first
from embedded_cluster import publish_acked as _publish
from embedded_cluster import replica_leader as _leader
from embedded_cluster import stream_contents as _contents
from nats.errors import NoRespondersError, TimeoutError

from natscli.backup import DATA_FILE, restore_from_directory, snapshot_to_directory
from natscli.conn import ApiError, ConnOptions, JsApi
from natsd.cluster.group import raft_id
from natsd.core.s2 import FrameReader
from natsd.jetstream.backup.restore import ArchiveCheck
from natsd.jetstream.cluster import driver as cluster_mod
from natsd.jetstream.cluster import restore as restore_mod
from natsd.jetstream.stream.entries import encode_msg
from natsd.monitor.metrics import render_metrics
from natsd.protocol.natsarc import EntryReader
from natsd.raft.state import RaftError

pytestmark = pytest.mark.timeout(120)


async def _backed_up(
    nc: Any, url: str, stream: str, tmp: Path
) -> list[tuple[int, str, bytes, int]]:
    """A backup of ``stream`` made with ``nats stream backup``'s client code, read back
    with natsd's archive reader: its messages as ``stream_contents`` lists them. It is
    restored to the cluster as another stream, which answers with the same state."""
    api = JsApi(nc, ConnOptions(servers=[url], timeout=10.0))
    await snapshot_to_directory(nc, api, stream, tmp / stream)
    check = ArchiveCheck(1 << 20)
    frames, entries = FrameReader(), EntryReader(1 << 20)
    out = []
    raw = (tmp / stream / DATA_FILE).read_bytes()
    check.feed(raw)
    check.finish()
    for block in frames.feed(raw):
        for e in entries.feed(block):
            if e.seq:
                out.append((e.seq, e.name.decode(), e.body[e.hdr_size :], e.ts))
    other = tmp / "other"
    other.mkdir()
    meta = json.loads((tmp / stream / "backup.json").read_text())
    meta["config"]["name"] = meta["config"]["name"] + "2"
    meta["config"]["subjects"] = ["other.>"]
    (other / "backup.json").write_text(json.dumps(meta))
    (other / DATA_FILE).write_bytes(raw)
    done = await restore_from_directory(nc, api, other)
    assert done["config"]["name"] == stream + "2"
    assert done["state"]["messages"] == len(out)
    assert done["state"]["last_seq"] == meta["state"]["last_seq"]
    return out


async def test_r3_stream_replicates_every_publish(trio: EmbeddedJsCluster, tmp_path: Path) -> None:
    nc = await nats.connect(trio.url("n2"))
    try:
        cfg = {"name": "R", "subjects": ["r.>"], "num_replicas": 3, "duplicate_window": 60 * 10**9}
        created = await _req(nc, "$JS.API.STREAM.CREATE.R", cfg)
        assert "error" not in created, created
        assert created["config"]["num_replicas"] == 3
        assert created["cluster"]["name"] == CLUSTER
        # every server holds a replica; one leads
        await until(lambda: all("R" in trio.streams(n) for n in trio.names))
        await until(lambda: _leader(trio, "R") != "")
        acks = [await _publish(nc, f"r.{i % 3}", b"m%d" % i) for i in range(30)]
        assert [a["seq"] for a in acks] == list(range(1, 31))
        # a retry with the same Nats-Msg-Id is answered as a duplicate, not stored again
        first = await _publish(nc, "r.x", b"once", {"Nats-Msg-Id": "id-1"})
        again = await _publish(nc, "r.x", b"once", {"Nats-Msg-Id": "id-1"})
        assert again == {"stream": "R", "seq": first["seq"], "duplicate": True}
        # expected-last-sequence is checked against the replicated state
        bad = await _publish(nc, "r.y", b"e", {"Nats-Expected-Last-Sequence": "5"})
        assert bad["error"]["err_code"] == 10071, bad
        good = await _publish(nc, "r.y", b"e", {"Nats-Expected-Last-Sequence": "31"})
        assert good["seq"] == 32
        # every replica ends with the same store, message for message (timestamps too)
        await until(lambda: all(len(_contents(trio, n, "R")) == 32 for n in trio.names))
        ref = _contents(trio, "n1", "R")
        assert ref == _contents(trio, "n2", "R") == _contents(trio, "n3", "R")
        # the info, from any server, names the leader and the two other replicas
        lead = _leader(trio, "R")
        for n in trio.names:
            c = await nats.connect(trio.url(n))
            try:
                info = await _req(c, "$JS.API.STREAM.INFO.R")
            finally:
                await c.close()
            assert info["state"]["messages"] == 32
            cl = info["cluster"]
            assert cl["name"] == CLUSTER and cl["leader"] == lead
            assert cl["raft_group"].startswith("S-R3F-") and cl["system_account"] is True
            assert "leader_since" in cl
            assert sorted(r["name"] for r in cl["replicas"]) == sorted(
                x for x in trio.names if x != lead
            )
        # the leader's /metrics has each follower's lag and currency (a follower reports none)
        for n in trio.names:
            text = render_metrics(trio.servers[n], {})[0].decode()
            current = [
                x.split('replica="')[1].split('"')[0]
                for x in text.splitlines()
                if x.startswith("jetstream_stream_replica_current{") and 'stream="R"' in x
            ]
            assert sorted(current) == (
                sorted(x for x in trio.names if x != lead) if n == lead else []
            )
        # purges and deletes go through the group: every replica does the same
        purge = await _req(nc, "$JS.API.STREAM.PURGE.R", {"filter": "r.0"})
        assert purge == {
            "type": "io.nats.jetstream.api.v1.stream_purge_response",
            "success": True,
            "purged": 10,
        }
        gone = await _req(nc, "$JS.API.STREAM.MSG.DELETE.R", {"seq": 2})
        assert gone == {
            "type": "io.nats.jetstream.api.v1.stream_msg_delete_response",
            "success": True,
        }
        miss = await _req(nc, "$JS.API.STREAM.MSG.DELETE.R", {"seq": 2})
        assert miss["error"]["err_code"] == 10057, miss  # the same error as standalone
        after = await _publish(nc, "r.z", b"z", {"Nats-Expected-Last-Subject-Sequence": "0"})
        assert after["seq"] == 33
        await until(lambda: all(len(_contents(trio, n, "R")) == 22 for n in trio.names))
        ref = _contents(trio, "n1", "R")
        assert ref == _contents(trio, "n2", "R") == _contents(trio, "n3", "R")
        assert 2 not in [seq for seq, *_ in ref]
        # a backup comes from the leader, holding what the group committed
        assert await _backed_up(nc, trio.url("n1"), "R", tmp_path) == ref
        got = await _req(nc, "$JS.API.STREAM.MSG.GET.R", {"seq": 5})
        assert got["message"]["subject"] == "r.1"
    finally:
        await nc.close()


async def test_r3_leader_loss_and_whole_cluster_restart(trio: EmbeddedJsCluster) -> None:
    cfg = {"name": "F", "subjects": ["f.>"], "num_replicas": 3, "storage": "file"}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.F", cfg)
        for i in range(10):
            assert (await _publish(nc, "f.a", b"%d" % i))["seq"] == i + 1
    finally:
        await nc.close()
    old = _leader(trio, "F")
    assert old
    await trio.stop(old)
    left = [n for n in trio.names if n != old]
    nc = await nats.connect(trio.url(left[0]))
    try:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ack = await _publish(nc, "f.a", b"after", within=15)
        gap = loop.time() - t0
        assert ack["seq"] == 11, ack
        assert _leader(trio, "F") in left
        assert gap < 5.0, gap  # an election 1-2 s after the leader went quiet
        for i in range(4):
            assert (await _publish(nc, "f.b", b"x%d" % i))["seq"] == 12 + i
    finally:
        await nc.close()
    # the old leader comes back as a follower and catches up from the log
    await trio.start(old)
    await until(lambda: len(_contents(trio, old, "F")) == 15, timeout=20)
    assert _contents(trio, old, "F") == _contents(trio, left[0], "F")
    # the whole cluster restarts: every replica holds all 15, and publishes continue
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await until(lambda: _leader(trio, "F") != "", timeout=20)
    nc = await nats.connect(trio.url("n3"))
    try:
        assert (await _publish(nc, "f.c", b"later"))["seq"] == 16
        info = await _req(nc, "$JS.API.STREAM.INFO.F")
        assert info["state"]["messages"] == 16
    finally:
        await nc.close()
    await until(lambda: all(len(_contents(trio, n, "F")) == 16 for n in trio.names))
    ref = _contents(trio, "n1", "F")
    assert ref == _contents(trio, "n2", "F") == _contents(trio, "n3", "F")


async def test_r3_stream_delete_and_stepdown(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n3"))
    try:
        cfg = {"name": "D", "subjects": ["d.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.D", cfg)
        await _publish(nc, "d.a", b"1")
        old = _leader(trio, "D")
        elected = await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.D")
        await nc.flush()
        down = await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.D")
        assert down == {
            "type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
            "success": True,
        }
        await until(lambda: _leader(trio, "D") not in ("", old))
        adv = json.loads((await elected.next_msg(timeout=5)).data)
        assert adv["type"] == "io.nats.jetstream.advisory.v1.stream_leader_elected"
        assert adv["stream"] == "D" and adv["leader"] == _leader(trio, "D")
        assert "account" not in adv  # (the system account's copy names it)
        assert sorted(r["name"] for r in adv["replicas"]) == trio.names
        ack2 = await _publish(nc, "d.a", b"2")
        assert ack2.get("seq") == 2, ack2
        gone = await _req(nc, "$JS.API.STREAM.DELETE.D")
        assert gone == {"type": "io.nats.jetstream.api.v1.stream_delete_response", "success": True}
        await until(lambda: all("D" not in trio.streams(n) for n in trio.names))
        # created again: a new group, empty
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.D", cfg)
        assert (await _publish(nc, "d.a", b"new"))["seq"] == 1
    finally:
        await nc.close()


def _asflr(trio: EmbeddedJsCluster, name: str, stream: str, consumer: str) -> int:
    js = trio.servers[name].jetstream
    assert js is not None
    c = js.accounts["$G"].streams[stream].consumers.get(consumer)
    return -1 if c is None else int(c.acks.asflr)  # type: ignore[union-attr]


async def test_r3_log_is_compacted_past_an_away_replica_which_catches_up_from_the_store(
    trio: EmbeddedJsCluster,
) -> None:
    """Design-clustering §4.6: the leader keeps its log short even while a replica is away;
    back, the replica gets a snapshot and copies what it stands for from the leader's store
    (messages it missed; deletions of messages it had; the consumer's committed state)."""
    for srv in trio.servers.values():
        srv.js_cluster.stream_groups.compact_every = 20
    cfg = {"name": "C", "subjects": ["c.>"], "num_replicas": 3, "storage": "file"}
    durable = {"stream_name": "C", "config": {"durable_name": "D", "ack_policy": "explicit"}}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", cfg)
        for i in range(60):
            await _publish(nc, "c.a", b"%d" % i, {"Nats-Msg-Id": f"a{i}"})
        assert "error" not in await _req(nc, "$JS.API.CONSUMER.CREATE.C.D", durable)
        assert await take_and_ack(nc, "C", "D", 5) == [1, 2, 3, 4, 5]
        # every replica dropped its log up to an index all of them had
        await until(lambda: all(_log_first(trio, n) > 20 for n in trio.names))
    finally:
        await nc.close()
    lead = _leader(trio, "C")
    away = next(n for n in trio.names if n != lead)
    await until(lambda: _asflr(trio, away, "C", "D") == 5)
    (m,) = trio.servers[away].js_cluster.stream_groups.members.values()
    held = m.group.node.last_index()  # as far as its log went
    await trio.stop(away)
    nc = await nats.connect(trio.url(lead))
    try:
        for i in range(150):
            await _publish(nc, "c.b", b"%d" % i, {"Nats-Msg-Id": f"b{i}"})
        # while it is away: messages it holds are deleted, and the consumer moves on
        for seq in (7, 8, 30):
            gone = await _req(nc, "$JS.API.STREAM.MSG.DELETE.C", {"seq": seq})
            assert gone.get("success") is True, gone
        assert await take_and_ack(nc, "C", "D", 4) == [6, 9, 10, 11]
        # the replica that is away no longer holds compaction back
        await until(lambda: all(_log_first(trio, n) > held + 1 for n in trio.servers))
    finally:
        await nc.close()
    srv = await trio.start(away)
    srv.js_cluster.stream_groups.compact_every = 20
    ref = _contents(trio, lead, "C")
    assert len(ref) == 207
    await until(lambda: _contents(trio, away, "C") == ref, timeout=20)
    assert srv.js_cluster.stream_groups.catchup.completed >= 1
    assert srv.js_cluster.stream_groups.catchup.copied >= 100
    await until(lambda: _asflr(trio, away, "C", "D") == 11)
    # its dedup window came with the messages: a retry is a duplicate on any leader
    nc = await nats.connect(trio.url(away))
    try:
        await until(lambda: _log_first(trio, away) > held + 1)
        resp = await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.C")
        assert resp.get("success") is True, resp
        again = await _publish(nc, "c.b", b"149", {"Nats-Msg-Id": "b149"})
        assert again.get("duplicate") is True, again
        for i in range(40):
            await _publish(nc, "c.c", b"%d" % i)
    finally:
        await nc.close()
    # a restart replays only the log after the compaction, on top of the synced store
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await until(lambda: _leader(trio, "C") != "", timeout=20)
    await until(lambda: all(len(_contents(trio, n, "C")) == 247 for n in trio.names))
    ref = _contents(trio, "n1", "C")
    assert ref == _contents(trio, "n2", "C") == _contents(trio, "n3", "C")
    assert [seq for seq, *_ in ref] == [s for s in range(1, 251) if s not in (7, 8, 30)]
    assert all(_asflr(trio, n, "C", "D") == 11 for n in trio.names)


async def _retry(fn: Any, within: float = 15.0) -> Any:
    """``fn()`` until it stops failing for want of a stream leader (an election after a
    leader left, or the first one)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await fn()
        except Exception:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_kv_and_object_store_on_r3_buckets(trio: EmbeddedJsCluster) -> None:
    """nats-py's KV and Object Store, unchanged, on R3 buckets: writes replicated, reads and
    watchers served by the leader (watchers are ephemeral ordered consumers), and the
    bucket usable again through a new leader after the old one stops."""
    nc = await nats.connect(trio.url("n2"))
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(bucket="CFG", history=3, replicas=3)
        await until(lambda: _leader(trio, "KV_CFG") != "")
        assert await _retry(lambda: kv.put("a", b"1")) == 1
        assert await kv.put("a", b"2") == 2
        assert await kv.create("b", b"x") == 3
        with pytest.raises(nats.js.errors.KeyWrongLastSequenceError):
            await kv.create("b", b"again")
        assert await kv.update("b", b"y", last=3) == 4
        assert (await kv.get("a")).value == b"2"
        assert [e.value for e in await kv.history("a")] == [b"1", b"2"]
        await kv.delete("b")
        assert sorted(await kv.keys()) == ["a"]
        watcher = await kv.watchall(include_history=False)
        first = await watcher.updates(timeout=5)
        assert (first.key, first.value) == ("a", b"2")
        while await watcher.updates(timeout=5) is not None:
            pass  # the initial values end with None
        await kv.put("c", b"3")
        live = await watcher.updates(timeout=5)
        assert (live.key, live.value) == ("c", b"3")
        await watcher.stop()
        obs = await js.create_object_store(bucket="FILES", config=None, replicas=3)
        blob = bytes(range(256)) * 1000
        await _retry(lambda: obs.put("blob", blob))
        assert (await obs.get("blob")).data == blob
        info = await js.stream_info("KV_CFG")
        assert info.config.num_replicas == 3
        lead = _leader(trio, "KV_CFG")
    finally:
        await nc.close()
    # the bucket's leader stops: the next put goes through a new one, nothing is lost
    await trio.stop(lead)
    other = next(n for n in trio.names if n != lead)
    nc = await nats.connect(trio.url(other))
    try:
        kv = await _retry(lambda: nc.jetstream().key_value("CFG"))
        assert await _retry(lambda: kv.put("a", b"after")) == 7
        assert (await kv.get("c")).value == b"3"
        assert [e.value for e in await kv.history("a")] == [b"1", b"2", b"after"]
    finally:
        await nc.close()


async def test_r3_purge_is_not_replayed_over_later_messages(trio: EmbeddedJsCluster) -> None:
    """A restart applies the log after the last compaction again: a purge in it must not
    remove the messages stored after it (every replica keeps 6 and 7)."""
    cfg = {"name": "P", "subjects": ["p.>"], "num_replicas": 3, "storage": "file"}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.P", cfg)
        for i in range(5):
            await _publish(nc, "p.a", b"%d" % i)
        purged = await _req(nc, "$JS.API.STREAM.PURGE.P")
        assert purged["purged"] == 5
        assert (await _publish(nc, "p.b", b"6"))["seq"] == 6
        assert (await _publish(nc, "p.b", b"7"))["seq"] == 7
    finally:
        await nc.close()
    await until(lambda: all(len(_contents(trio, n, "P")) == 2 for n in trio.names))
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await until(lambda: _leader(trio, "P") != "", timeout=20)
    for n in trio.names:
        assert [seq for seq, *_ in _contents(trio, n, "P")] == [6, 7], n


async def test_catch_up_larger_than_the_client_max_payload(tmp_path: Path) -> None:
    """A replica that was away is caught up by appends far larger than the clients'
    ``max_payload``: routes do not apply the clients' limit (nats-server's have none), or
    every catch-up frame would close the route with 'maximum payload exceeded'."""
    t = EmbeddedJsCluster(tmp_path, max_payload=4096)
    await t.start_all()
    try:
        cfg = {"name": "B", "subjects": ["b"], "num_replicas": 3, "storage": "file"}
        nc = await nats.connect(t.url("n1"))
        try:
            assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.B", cfg)
            await _publish(nc, "b", b"first")
            await until(lambda: all(len(_contents(t, n, "B")) == 1 for n in t.names))
            lead = _leader(t, "B")
            away = next(n for n in t.names if n != lead)
            await t.stop(away)
            nc2 = await nats.connect(t.url(lead))
            for i in range(60):
                assert (await _publish(nc2, "b", bytes([i]) * 3000))["seq"] == i + 2
            await nc2.close()
        finally:
            await nc.close()
        await t.start(away)
        await until(lambda: len(_contents(t, away, "B")) == 61, timeout=20)
        assert _contents(t, away, "B") == _contents(t, lead, "B")
    finally:
        await t.stop_all()


async def test_leaderless_r3_stream_info_answered_by_its_replica(trio: EmbeddedJsCluster) -> None:
    """Two of three servers gone: the stream has no leader, and its remaining replica
    answers STREAM.INFO from its own store, with no leader in the cluster block and every
    peer listed (nats-server's isGroupLeaderless), instead of leaving it unanswered."""
    cfg = {"name": "L", "subjects": ["l"], "num_replicas": 3, "storage": "file"}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.L", cfg)
        for i in range(3):
            await _publish(nc, "l", b"%d" % i)
        await until(lambda: all(len(_contents(trio, n, "L")) == 3 for n in trio.names))
    finally:
        await nc.close()
    for srv in trio.servers.values():
        srv.js_cluster.stream_groups.leaderless_after = 0.5
    await trio.stop("n2")
    await trio.stop("n3")
    nc = await nats.connect(trio.url("n1"))
    try:
        # n1 may have led the group: it answers as leader until CheckQuorum steps it down
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:
            info = await _retry(lambda: _req(nc, "$JS.API.STREAM.INFO.L", timeout=1.0))
            if "leader" not in info["cluster"] or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert info["state"]["messages"] == 3 and info["state"]["last_seq"] == 3
        cl = info["cluster"]
        assert "leader" not in cl and cl["name"] == CLUSTER
        assert sorted(r["name"] for r in cl["replicas"]) == ["n1", "n2", "n3"]
    finally:
        await nc.close()


async def test_replicated_purge_counted_and_audited_once(trio: EmbeddedJsCluster) -> None:
    """Every replica runs a purge through the group, but it was one client request: only
    the replica that proposed it counts it in the API stats and sends its audit advisory."""
    cfg = {"name": "P", "subjects": ["p"], "num_replicas": 3, "storage": "file"}
    nc = await nats.connect(trio.url("n1"))
    audits: list[bytes] = []

    async def on_audit(msg: Any) -> None:
        audits.append(msg.data)

    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.P", cfg)
        for i in range(3):
            await _publish(nc, "p", b"%d" % i)
        await until(lambda: all(len(_contents(trio, n, "P")) == 3 for n in trio.names))
        await nc.subscribe("$JS.EVENT.ADVISORY.API", cb=on_audit)
        await nc.flush()

        def totals() -> list[int]:
            return [s.jetstream.accounts["$G"].api.total for s in trio.servers.values()]

        before = totals()
        assert (await _req(nc, "$JS.API.STREAM.PURGE.P"))["purged"] == 3
        await until(lambda: all(len(_contents(trio, n, "P")) == 0 for n in trio.names))
        await asyncio.sleep(0.3)
        assert sum(totals()) - sum(before) == 1
        purges = [a for a in audits if b"STREAM.PURGE" in a]
        assert len(purges) == 1, purges
    finally:
        await nc.close()


@pytest.mark.parametrize("how", ["shutdown", "lame_duck"])
async def test_a_stopping_server_hands_its_leaderships_over(
    trio: EmbeddedJsCluster, how: str
) -> None:
    """As nats-server's lame duck mode (transferRaftLeaders), and on shutdown too: a server
    that leads a stream's group and the meta group moves both to a live member before it
    stops, so the others lead at once instead of after an election timeout."""
    meta = trio.leader()
    others = [n for n in trio.names if n != meta]
    nc = await nats.connect(trio.url(others[0]))
    try:
        cfg = {"name": "H", "subjects": ["h.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.H", cfg)
        await _publish(nc, "h.a", b"1")
        if _leader(trio, "H") != meta:
            await _req(nc, "$JS.API.STREAM.LEADER.STEPDOWN.H", {"placement": {"preferred": meta}})
            await until(lambda: _leader(trio, "H") == meta)
        srv = trio.servers[meta]
        replica = srv.jetstream.accounts["$G"].streams["H"].replica
        groups = [replica.group.group, srv.js_cluster.group]  # (its StreamReplica's Raft group)
        assert all(g is not None and g.leader == raft_id(meta) for g in groups)
        terms = [g.node.term() for g in groups]
        if how == "shutdown":
            await trio.stop(meta)
        else:
            stopping = asyncio.create_task(srv.lame_duck())
            await until(lambda: srv._jetstream_stopped)
        # Handed over, not elected: the stopped server's groups had moved to a newer term
        # before it stopped, which only the transferee's campaign gives a leader that is
        # still running (the others never miss its heartbeats long enough to campaign on
        # their own); it then follows, whether or not the new leader's first append had
        # reached it yet.
        for g, term in zip(groups, terms, strict=True):
            assert g.node.term() > term and g.leader != raft_id(meta)

        def led_by_others() -> bool:
            # (a lame duck server's stopped replica keeps its last view: ask the others)
            rest = {n: trio.servers[n] for n in others}
            stream = any(
                s.jetstream.accounts["$G"].streams["H"].replica.leading for s in rest.values()
            )
            return stream and any(s.js_cluster.is_leader() for s in rest.values())

        await until(led_by_others)
        ack = await _publish(nc, "h.a", b"2")
        assert ack == {"stream": "H", "seq": 2}
        if how == "lame_duck":
            await trio.stop(meta)
            await stopping
    finally:
        await nc.close()


async def _stepdown_under_load(trio: EmbeddedJsCluster, rnd: int) -> list[int]:
    """One stepdown of T's leader while eight publishers on the leader's own server keep
    publishing (each publish in flight at the transfer meets the old leader); returns the
    sequences acknowledged, asserting none timed out."""
    lead = _leader(trio, "T")
    nc = await nats.connect(trio.url(lead))
    admin = await nats.connect(trio.url(lead))
    stop = asyncio.Event()
    acks: list[int] = []
    late: list[str] = []

    async def feed(k: int) -> None:
        i = 0
        while not stop.is_set():
            mid = f"{rnd}-{k}-{i}"
            try:
                msg = await nc.request("t.a", b"x", timeout=0.4, headers={"Nats-Msg-Id": mid})
                doc = json.loads(msg.data)
                assert "error" not in doc and not doc.get("duplicate"), doc
                acks.append(doc["seq"])
            except NoRespondersError:
                # between the old leader's unsubscribe and the new one's interest reaching
                # this server (nats-server has the same window): a client retries
                await asyncio.sleep(0.005)
                continue
            except TimeoutError:
                late.append(mid)
            i += 1

    try:
        feeds = [asyncio.create_task(feed(k)) for k in range(8)]
        await until(lambda: len(acks) > 50)
        # Publishes right behind the stepdown request, in the same write: the leader reads
        # them while its transfer is under way (a transfer takes a round trip or two, so
        # the feeds' publishes meet one only now and then), and passes them on.
        step = asyncio.ensure_future(_req(admin, "$JS.API.STREAM.LEADER.STEPDOWN.T"))
        behind = [
            asyncio.ensure_future(
                admin.request("t.b", b"y", timeout=0.4, headers={"Nats-Msg-Id": f"{rnd}-b{j}"})
            )
            for j in range(4)
        ]
        resp = await step
        assert resp.get("success") is True, resp
        for j, f in enumerate(behind):
            try:
                doc = json.loads((await f).data)
            except TimeoutError:
                late.append(f"{rnd}-b{j}")
                continue
            assert "error" not in doc and not doc.get("duplicate"), doc
            acks.append(doc["seq"])
        await until(lambda: _leader(trio, "T") not in ("", lead))
        n = len(acks)
        await until(lambda: len(acks) > n + 50)
        stop.set()
        await asyncio.gather(*feeds)
    finally:
        await nc.close()
        await admin.close()
    assert late == []
    return acks


async def test_publishes_during_a_leadership_transfer_are_answered_at_once(
    trio: EmbeddedJsCluster,
) -> None:
    """A stepdown hands the stream's leadership over while clients keep publishing
    through the old leader's server: every publish gets its PubAck within 0.4 s (the old
    leader passes on to the new leader what reached it during the transfer, and answers
    what it proposed once that commits), so no client waits out a timeout, and nothing is
    lost or stored twice."""
    cfg = {"name": "T", "subjects": ["t.>"], "num_replicas": 3, "duplicate_window": 60 * 10**9}
    setup = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(setup, "$JS.API.STREAM.CREATE.T", cfg)
        await _publish(setup, "t.a", b"0")
    finally:
        await setup.close()
    acked = [1]
    for rnd in range(3):
        acked += await _stepdown_under_load(trio, rnd)
    assert sorted(acked) == list(range(1, len(acked) + 1))  # each once, none missing
    passed = sum(s.js_cluster.stream_groups.relay.passed for s in trio.servers.values())
    assert passed >= 3 * 4  # at least the publishes sent behind each stepdown
    await until(lambda: all(len(_contents(trio, n, "T")) == len(acked) for n in trio.names))
    ref = _contents(trio, "n1", "T")
    assert ref == _contents(trio, "n2", "T") == _contents(trio, "n3", "T")


async def test_r3_stream_update_applies_on_every_replica(trio: EmbeddedJsCluster) -> None:
    """A config update of a replicated stream reaches every replica (each applies the meta
    group's update with more than one replica allowed) and its new limit holds on all."""
    nc = await nats.connect(trio.url("n2"))
    try:
        cfg = {"name": "U", "subjects": ["u.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.U", cfg)
        for i in range(10):
            await _publish(nc, "u.a", b"%d" % i)
        updated = await _req(nc, "$JS.API.STREAM.UPDATE.U", {**cfg, "max_msgs": 4})
        assert updated.get("config", {}).get("max_msgs") == 4, updated
        for i in range(3):
            await _publish(nc, "u.a", b"after %d" % i)

        def limited(name: str) -> bool:
            js = trio.servers[name].jetstream
            assert js is not None
            s = js.accounts["$G"].streams["U"]
            return s.cfg.max_msgs == 4 and [m[0] for m in _contents(trio, name, "U")] == [
                10,
                11,
                12,
                13,
            ]

        await until(lambda: all(limited(n) for n in trio.names))
    finally:
        await nc.close()


async def test_memory_r3_replica_refills_its_store_after_a_restart(trio: EmbeddedJsCluster) -> None:
    """A memory stream's replica comes back from a restart with an empty store and a log
    compacted past most of the messages: it fetches what its snapshot stands for from the
    other replicas before it applies its log again (CatchUp.repair), so it ends identical,
    and it does not lead meanwhile."""
    for srv in trio.servers.values():
        srv.js_cluster.stream_groups.compact_every = 20
    cfg = {"name": "M", "subjects": ["m.>"], "num_replicas": 3, "storage": "memory"}
    await stream_with(trio, cfg, "m.a", [b"%d" % i for i in range(100)])
    await until(lambda: all(_log_first(trio, n) > 40 for n in trio.names))
    lead = _leader(trio, "M")
    away = next(n for n in trio.names if n != lead)
    await trio.stop(away)
    srv = await trio.start(away)
    srv.js_cluster.stream_groups.compact_every = 20
    ref = _contents(trio, lead, "M")
    assert len(ref) == 100
    await until(lambda: _contents(trio, away, "M") == ref, timeout=20)
    assert srv.js_cluster.stream_groups.catchup.completed == 1
    # and it takes its part again: the next publishes reach it too
    nc = await nats.connect(trio.url(away))
    try:
        for i in range(5):
            await _publish(nc, "m.b", b"%d" % i)
    finally:
        await nc.close()
    await until(lambda: _contents(trio, away, "M") == _contents(trio, lead, "M"))
    assert len(_contents(trio, away, "M")) == 105


async def test_a_follower_never_forwards_a_stream_proposal(trio: EmbeddedJsCluster) -> None:
    """A stream entry carries the sequence its leader gave it, so a replica that has just
    lost leadership must not pass its queued proposals on to the new leader (Raft's
    proposal forwarding): they would commit with sequences the new leader gives out again,
    and a retried message id would be stored twice (the fault soak caught that). The
    follower refuses them (ErrProposalDropped); the stream passes the publishes on itself
    (cluster/relay.py)."""
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "F", "subjects": ["f.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.F", cfg)
        await _publish(nc, "f.a", b"1")
    finally:
        await nc.close()
    lead = _leader(trio, "F")
    follower = next(n for n in trio.names if n != lead)
    groups = trio.servers[follower].js_cluster.stream_groups
    (name,) = groups.members
    entry = encode_msg(groups.raft.host.id, 2, 1, 0, "f.a", b"", None, "", "", b"x")
    with pytest.raises(RaftError):
        groups.raft.propose_batch(name, [entry])
    await asyncio.sleep(0.5)
    assert [seq for seq, *_ in _contents(trio, lead, "F")] == [1]


async def test_a_leader_out_of_touch_with_its_group_stops_serving_within_its_lease(
    trio: EmbeddedJsCluster,
) -> None:
    """A leader cut off from its group believes it leads until its check-quorum runs, one
    to two election timeouts later; meanwhile another leader may be elected and see acks
    committed. The fault soak caught the old leader, just reconnected, answering a pull with
    messages whose ack-sync the new leader had answered. So a leader without an answer from
    a majority for ``LEASE`` (0.5 s) answers no request and stops its consumers."""
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "L", "subjects": ["l.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.L", cfg)
        await until(lambda: _leader(trio, "L") != "")
        durable = {"stream_name": "L", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await _req(nc, "$JS.API.CONSUMER.CREATE.L.D", durable)
        for i in range(5):
            await _publish(nc, "l.x", b"%d" % i)
    finally:
        await nc.close()
    lead = _leader(trio, "L")
    js = trio.servers[lead].jetstream
    assert js is not None
    s = js.accounts["$G"].streams["L"]
    groups = trio.servers[lead].js_cluster.stream_groups
    await until(lambda: groups.leads(s) and not s.consumers["D"].passive)
    for f in [n for n in trio.names if n != lead]:
        await trio.stop(f)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await until(lambda: not groups.leads(s) and s.consumers["D"].passive, timeout=5)
    # well before a new leader could have been elected elsewhere (1 s after the
    # followers last heard from it; they stopped before t0)
    assert loop.time() - t0 < 0.8


async def test_the_wal_stays_bounded_beside_quiet_groups(
    trio: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One WAL holds every group of a node, and a segment goes only once no group needs
    it: the meta group and an idle stream, a few entries each above their compaction
    points in the oldest segments, kept every later segment while a busy stream wrote (the
    fault soak's WALs grew to 5 GB). Past WAL_SEGMENTS_MAX the groups holding the oldest
    segment compact and log their state again, and the WAL stays bounded, also when the
    meta log ends with a new leader's empty entry; a restarted server recovers both
    streams from it."""
    monkeypatch.setattr(cluster_mod, "WAL_SEGMENTS_MAX", 4)
    for srv in trio.servers.values():
        srv.js_cluster.raft.host.wal.segment_size = 128 << 10
    nc = await nats.connect(trio.url("n1"))
    try:
        for name in ("IDLE", "BUSY"):
            cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": 3}
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            await until(lambda name=name: _leader(trio, name) != "")
        for i in range(3):
            await _publish(nc, "idle.x", b"%d" % i)
        # a new meta leader: the meta log now ends with its empty entry, which applies
        # nothing to the meta state (compacting only up to the last entry that did left it
        # in the log, and its segment with every later one stayed)
        lead = trio.leader()
        jsc = trio.servers[lead].js_cluster
        assert jsc.group is not None
        jsc.group.node.transfer_leader(jsc.stepdown_target(b""))
        jsc.raft.kick()
        await until(lambda: trio.leader() not in ("", lead))
        wals = [srv.js_cluster.raft.host.wal for srv in trio.servers.values()]
        # twice: the second time the quiet groups have compacted once already and have
        # nothing new to compact, but their state records pin a segment again
        for rnd in range(2):
            began = [w.segments[-1].number for w in wals]
            for i in range(250):
                await _publish(nc, "busy.x", b"%04d" % (rnd * 250 + i) + b"x" * 4000)
            assert all(w.segments[-1].number - b > 6 for w, b in zip(wals, began, strict=True))
            # checked every second (never during a WAL sync)
            await until(lambda: all(len(w.segments) <= 6 for w in wals), timeout=15)
    finally:
        await nc.close()
    victim = next(n for n in trio.names if n != _leader(trio, "BUSY"))
    await trio.stop(victim)
    await trio.start(victim)
    for name in ("IDLE", "BUSY"):
        n = 3 if name == "IDLE" else 500
        await until(lambda name=name, n=n: len(_contents(trio, victim, name)) == n, timeout=30)
        lead = _leader(trio, name)
        assert _contents(trio, victim, name) == _contents(trio, lead, name)


async def test_no_puback_before_a_majority_holds_the_message(trio: EmbeddedJsCluster) -> None:
    """A PubAck says the message is in the node logs of a majority: a leader whose Raft
    frames reach no follower proposes a publish it is sent (it still holds its lease) but
    never answers it. ``make mutants`` plants a leader that answers at propose time."""
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "Q", "subjects": ["q.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.Q", cfg)
        assert (await _publish(nc, "q.a", b"1"))["seq"] == 1
    finally:
        await nc.close()
    lead = _leader(trio, "Q")
    host = trio.servers[lead].js_cluster.raft.host
    send = host._send
    nc = await nats.connect(trio.url(lead))
    try:
        host._send = lambda to, frame: None  # type: ignore[method-assign]
        with pytest.raises(TimeoutError):
            await nc.request("q.a", b"2", timeout=1.0)
    finally:
        host._send = send  # type: ignore[method-assign]
        await nc.close()


async def test_a_new_leader_knows_the_message_ids_it_applied_as_a_follower(
    trio: EmbeddedJsCluster,
) -> None:
    """Every replica keeps the Nats-Msg-Id window of the entries it applies, so a publish
    retried after the leader changed is answered as a duplicate by the new leader, not
    stored again (``make mutants`` plants a follower that skips it)."""
    cfg = {"name": "D", "subjects": ["d.>"], "num_replicas": 3, "duplicate_window": 60 * 10**9}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.D", cfg)
        first = await _publish(nc, "d.a", b"once", {"Nats-Msg-Id": "id-1"})
        assert first["seq"] == 1, first
    finally:
        await nc.close()
    await until(lambda: all(len(_contents(trio, n, "D")) == 1 for n in trio.names))
    old = _leader(trio, "D")
    await trio.stop(old)
    left = [n for n in trio.names if n != old]
    nc = await nats.connect(trio.url(left[0]))
    try:
        again = await _publish(nc, "d.a", b"once", {"Nats-Msg-Id": "id-1"}, within=15)
        assert _leader(trio, "D") in left
        assert again == {"stream": "D", "seq": 1, "duplicate": True}, again
    finally:
        await nc.close()
    assert all(len(_contents(trio, n, "D")) == 1 for n in left)


# ---------------------------------------------------------------------- restore on a cluster


def _consumer_state(trio: EmbeddedJsCluster, name: str, stream: str, consumer: str) -> Any:
    js = trio.servers[name].jetstream
    assert js is not None
    s = js.accounts["$G"].streams.get(stream)
    c = s.consumers.get(consumer) if s is not None else None
    if c is None:
        return None
    st = json.loads(c.state_doc())
    return (st["delivered"]["stream_seq"], st["ack_floor"]["stream_seq"])


async def _backup_and_delete(
    trio: EmbeddedJsCluster, nc: Any, name: str, tmp: Path
) -> tuple[JsApi, list[tuple[int, str, bytes, int]]]:
    """``name``'s backup in ``tmp / name``, its contents, and the stream deleted."""
    api = JsApi(nc, ConnOptions(servers=[trio.url("n1")], timeout=10.0))
    await snapshot_to_directory(nc, api, name, tmp / name)
    holder = _leader(trio, name) or next(n for n in trio.names if name in trio.streams(n))
    want = _contents(trio, holder, name)
    gone = await _req(nc, f"$JS.API.STREAM.DELETE.{name}")
    assert gone.get("success") is True, gone
    await until(lambda: all(name not in trio.streams(n) for n in trio.names))
    return api, want


async def test_r3_stream_restored_on_the_cluster_with_its_consumer(
    trio: EmbeddedJsCluster, tmp_path: Path
) -> None:
    """A backup of an R3 stream with a durable consumer part-way through, restored as R3:
    every replica holds the same messages and the consumer's state, a new leader after the
    restorer stops serves the same, and publishes go on from the next sequence."""
    nc = await nats.connect(trio.url("n2"))
    try:
        cfg = {"name": "B", "subjects": ["b.>"], "num_replicas": 3, "storage": "file",
               "allow_direct": True}  # fmt: skip
        await stream_with(trio, cfg, "b.x", [b"m%d" % i for i in range(20)], via="n2")
        assert (await _req(nc, "$JS.API.STREAM.MSG.DELETE.B", {"seq": 4}))["success"]
        dcfg = {"durable_name": "D", "ack_policy": "explicit"}
        made = await _req(nc, "$JS.API.CONSUMER.DURABLE.CREATE.B.D", {"stream_name": "B",
                                                                      "config": dcfg})
        assert "error" not in made, made
        assert await take_and_ack(nc, "B", "D", 6) == [1, 2, 3, 5, 6, 7]
        lead = _leader(trio, "B")
        await until(lambda: _consumer_state(trio, lead, "B", "D") == (7, 7))
        api, want = await _backup_and_delete(trio, nc, "B", tmp_path)
        assert len(want) == 19

        done = await restore_from_directory(nc, api, tmp_path / "B")
        assert done["type"] == "io.nats.jetstream.api.v1.stream_create_response"
        assert done["config"]["num_replicas"] == 3
        assert done["state"]["messages"] == 19 and done["state"]["last_seq"] == 20
        # the replicas that answer direct gets (any current one) answer from the restored
        # messages from the first moment: one joining the group serves none before its
        # catch-up is done
        for _ in range(40):
            m = await nc.request("$JS.API.DIRECT.GET.B", b'{"seq": 20}', timeout=2)
            assert not m.headers or "Status" not in m.headers, m.headers
            await asyncio.sleep(0.002)
        # every server holds the same messages (sequence, subject, data, time), and the
        # consumer with the state it was backed up with
        await until(lambda: all(_contents(trio, n, "B") == want for n in trio.names))
        await until(lambda: all(_consumer_state(trio, n, "B", "D") == (7, 7)
                                for n in trio.names))  # fmt: skip
        await until(lambda: _leader(trio, "B") != "")
        info = await _req(nc, "$JS.API.CONSUMER.INFO.B.D")
        assert info["delivered"]["stream_seq"] == 7 and info["ack_floor"]["stream_seq"] == 7
        assert info["num_pending"] == 13, info
        restorer = _leader(trio, "B")
        # every replica is a voter of the group by now
        await until(lambda: all(len(trio.servers[n].js_cluster.stream_groups.members) == 1
                                for n in trio.names))  # fmt: skip
        groups = [
            r.group
            for n in trio.names
            for r in trio.servers[n].js_cluster.stream_groups.members.values()
        ]
        # (each replica knows itself a voter: one that has not applied its promotion yet
        # would not stand for election when the restorer stops)
        await until(lambda: all(len(g.conf.voters) == 3 and not g.conf.learners
                                for g in groups))  # fmt: skip
        # the others joined the group the restorer founded, and caught up from its store
        for n in trio.names:
            if n != restorer:
                catchup = trio.servers[n].js_cluster.stream_groups.catchup
                assert catchup.completed >= 1 and catchup.copied >= 19, n
    finally:
        await nc.close()
    # the restorer (the group's leader) stops: a new leader serves the same
    await trio.stop(restorer)
    left = [n for n in trio.names if n != restorer]
    nc = await nats.connect(trio.url(left[0]))
    try:
        ack = await _publish(nc, "b.y", b"after", within=15)
        assert ack["seq"] == 21, ack
        assert _leader(trio, "B") in left
        info = await _req(nc, "$JS.API.CONSUMER.INFO.B.D")
        assert info["delivered"]["stream_seq"] == 7 and info["ack_floor"]["stream_seq"] == 7
        assert await take_and_ack(nc, "B", "D", 2) == [8, 9]
        got = await _req(nc, "$JS.API.STREAM.MSG.GET.B", {"seq": 5})
        assert got["message"]["subject"] == "b.x"
        for n in left:
            assert _contents(trio, n, "B")[:19] == want
    finally:
        await nc.close()


async def test_r1_stream_restored_on_the_cluster(trio: EmbeddedJsCluster, tmp_path: Path) -> None:
    nc = await nats.connect(trio.url("n3"))
    try:
        cfg = {"name": "S", "subjects": ["s.>"], "storage": "memory"}
        await stream_with(trio, cfg, "s.a", [b"x%d" % i for i in range(5)], via="n3")
        made = await _req(nc, "$JS.API.CONSUMER.DURABLE.CREATE.S.C", {"stream_name": "S",
                          "config": {"durable_name": "C", "ack_policy": "explicit"}})
        assert "error" not in made, made
        assert await take_and_ack(nc, "S", "C", 2) == [1, 2]
        api, want = await _backup_and_delete(trio, nc, "S", tmp_path)
        # a restore of a name in use is refused before any chunk, as nats-server does
        again = await _req(nc, "$JS.API.STREAM.CREATE.S", cfg)
        assert "error" not in again, again
        meta = json.loads((tmp_path / "S" / "backup.json").read_text())
        refused = await _req(nc, "$JS.API.STREAM.RESTORE.S", meta)
        assert refused["error"]["err_code"] == 10130, refused
        assert (await _req(nc, "$JS.API.STREAM.DELETE.S")).get("success") is True
        await until(lambda: all("S" not in trio.streams(n) for n in trio.names))

        done = await restore_from_directory(nc, api, tmp_path / "S")
        assert done["state"]["messages"] == 5
        holders = [n for n in trio.names if "S" in trio.streams(n)]
        assert len(holders) == 1 and _contents(trio, holders[0], "S") == want
        info = await _req(nc, "$JS.API.CONSUMER.INFO.S.C")
        assert info["ack_floor"]["stream_seq"] == 2 and info["num_pending"] == 3, info
        assert (await _publish(nc, "s.b", b"next"))["seq"] == 6
        assert await take_and_ack(nc, "S", "C", 4) == [3, 4, 5, 6]
    finally:
        await nc.close()


async def test_a_damaged_archive_restored_on_the_cluster_leaves_no_stream(
    trio: EmbeddedJsCluster, tmp_path: Path
) -> None:
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "X", "subjects": ["x.>"], "num_replicas": 3}
        await stream_with(trio, cfg, "x.a", [b"y" * 200 for _ in range(30)])
        api, _want = await _backup_and_delete(trio, nc, "X", tmp_path)
        data = tmp_path / "X" / DATA_FILE
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF  # a flipped bit: the chunk's CRC does not match
        data.write_bytes(bytes(raw))
        with pytest.raises(ApiError) as e:
            await restore_from_directory(nc, api, tmp_path / "X")
        assert e.value.err_code == 10062, e.value  # refused at the damaged chunk
        truncated = tmp_path / "T"
        truncated.mkdir()
        meta = json.loads((tmp_path / "X" / "backup.json").read_text())
        (truncated / "backup.json").write_text(json.dumps(meta))
        (truncated / DATA_FILE).write_bytes(bytes(raw[: len(raw) // 3]))
        with pytest.raises(ApiError) as e:
            await restore_from_directory(nc, api, truncated)
        assert e.value.err_code == 10062 and "truncated" in e.value.description, e.value
        await asyncio.sleep(0.5)
        for n in trio.names:
            assert "X" not in trio.streams(n)
            assert trio.servers[n].js_cluster.meta.stream("$G", "X") is None
        names = await _req(nc, "$JS.API.STREAM.NAMES")
        assert not names.get("streams"), names
    finally:
        await nc.close()


async def test_a_restore_cut_short_by_a_restart_of_its_server_leaves_no_stream(
    trio: EmbeddedJsCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server that received the archive stops after building the stream and before the
    meta group has it as restored (its client never answered): restarted, it deletes what
    it built and withdraws the assignment; no server keeps a stream, and the backup can be
    restored again."""
    nc = await nats.connect(trio.url("n1"))
    try:
        cfg = {"name": "K", "subjects": ["k.>"], "num_replicas": 3, "storage": "file"}
        await stream_with(trio, cfg, "k.a", [b"k%d" % i for i in range(10)])
        api, want = await _backup_and_delete(trio, nc, "K", tmp_path)
        restorer = trio.leader()
        # (the restorer never asks for ``restored``: as if it stopped right after building)
        monkeypatch.setattr(restore_mod.ClusterRestores, "_ask", lambda *_a: None)
        task = asyncio.create_task(restore_from_directory(nc, api, tmp_path / "K"))

        def built() -> bool:
            a = trio.servers[restorer].js_cluster.meta.stream("$G", "K")
            return a is not None and a.restoring and "K" in trio.streams(restorer)

        await until(built)
        assert all("K" not in trio.streams(n) for n in trio.names if n != restorer)
        task.cancel()  # (its answer would come once restored, never)
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        await nc.close()
    await trio.stop(restorer)
    monkeypatch.undo()  # (once stopped: that run would ask for ``restored`` at its next tick)
    await trio.start(restorer)

    def gone() -> bool:
        return all(
            "K" not in trio.streams(n) and trio.servers[n].js_cluster.meta.stream("$G", "K") is None
            for n in trio.names
        )

    await until(gone, timeout=20)
    nc = await nats.connect(trio.url(restorer))
    try:
        api = JsApi(nc, ConnOptions(servers=[trio.url(restorer)], timeout=10.0))
        done = await restore_from_directory(nc, api, tmp_path / "K")
        assert done["state"]["messages"] == 10
        await until(lambda: all(_contents(trio, n, "K") == want for n in trio.names))
    finally:
        await nc.close()
