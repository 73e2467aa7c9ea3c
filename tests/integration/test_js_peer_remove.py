"""``STREAM.PEER.REMOVE`` (and ``EVACUATE``), ``SERVER.REMOVE`` and ``SERVER.EVACUATE`` on
natsd clusters, in process, driven by nats-py.

The removed server leaves the stream's replicas and a free server takes its place
(nats-server's jsStreamRemapPeerRequest); the group changes its membership by Raft
configuration changes (``jetstream/cluster/membership``): the newcomer joins as a
learner, catches up from the leader's store, and becomes a voter as the old one leaves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, take_and_ack, until
from embedded_cluster import api_request as _req
from embedded_cluster import replica_leader as _leader
from nats.aio.client import Client as NATS

from natsd.cluster.group import raft_id
from natsd.jetstream.cluster import streams as cluster_streams
from natsd.router.publish import publish
from natsd.router.subscription import Subscription

pytestmark = pytest.mark.timeout(120)

RTYPE = "io.nats.jetstream.api.v1.stream_remove_peer_response"


@pytest.fixture
async def quad(tmp_path: Path) -> AsyncIterator[EmbeddedJsCluster]:
    t = EmbeddedJsCluster(tmp_path, size=4)
    try:
        await t.start_all()
        yield t
    finally:
        await t.stop_all()


def _peers(t: EmbeddedJsCluster, stream: str) -> list[str]:
    srv = t.servers[t.leader()]
    a = srv.js_cluster.meta.stream("$G", stream)
    assert a is not None
    return list(a.peers)


def _contents(t: EmbeddedJsCluster, name: str, stream: str) -> list[tuple[int, str, bytes]]:
    js = t.servers[name].jetstream
    assert js is not None
    s = js.accounts["$G"].streams.get(stream)
    if s is None:
        return []
    st = s.store.state()
    out = []
    for seq in range(st.first_seq, st.last_seq + 1):
        m = s.store.load_msg(seq)
        if m is not None:
            out.append((m.seq, m.subject, bytes(m.data)))
    return out


def _placed_on(t: EmbeddedJsCluster, name: str, stream: str) -> bool:
    """Does ``name``'s own meta state place a replica of ``stream`` on it?"""
    a = t.servers[name].js_cluster.meta.stream("$G", stream)
    return a is not None and name in a.peers


def _voters(t: EmbeddedJsCluster, stream: str) -> set[int]:
    """The voters of the stream group's configuration, as its leader applied it."""
    lead = _leader(t, stream)
    if not lead:
        return set()
    (m,) = t.servers[lead].js_cluster.stream_groups.members.values()
    cs = m.group.conf
    return set() if cs.voters_outgoing or cs.learners else set(cs.voters)


async def _publish_n(nc: NATS, stream: str, n: int, start: int) -> None:
    for i in range(start, start + n):
        for _ in range(100):
            try:
                await nc.request(f"{stream.lower()}.x", b"m%d" % i, timeout=1,
                                 headers={"Nats-Msg-Id": f"{stream}-{i}"})  # fmt: skip
                break
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                await asyncio.sleep(0.05)


def _hold_membership_walk(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Hold every stream group's membership walk still (as a newcomer's slow catch-up holds
    it) while the returned flag is true."""
    held = [True]
    walk = cluster_streams.next_change
    monkeypatch.setattr(cluster_streams, "next_change", lambda *a: None if held[0] else walk(*a))
    return held


async def _r3_with_20_messages(t: EmbeddedJsCluster, nc: NATS, name: str) -> tuple[str, str, str]:
    """An R3 stream ``name`` holding 20 messages; its leader and its two followers."""
    cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": 3}
    assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
    await until(lambda: _leader(t, name) != "")
    await _publish_n(nc, name, 20, 0)
    lead = _leader(t, name)
    b, c = [p for p in _peers(t, name) if p != lead]
    return lead, b, c


async def _moved(t: EmbeddedJsCluster, stream: str, gone: str, count: int) -> list[str]:
    """Wait until ``gone`` holds nothing of ``stream`` and the three replicas hold the same
    ``count`` messages, with a group of exactly those three voters; returns them."""
    await until(lambda: gone not in _peers(t, stream))  # (answered once proposed)
    peers = _peers(t, stream)
    assert len(peers) == 3
    await until(lambda: stream not in t.streams(gone), timeout=30)
    await until(lambda: _voters(t, stream) == {raft_id(p) for p in peers}, timeout=30)
    await until(lambda: all(len(_contents(t, p, stream)) == count for p in peers), timeout=30)
    ref = _contents(t, peers[0], stream)
    assert all(_contents(t, p, stream) == ref for p in peers)
    return peers


async def test_a_removed_peer_is_replaced_by_a_free_server(quad: EmbeddedJsCluster) -> None:
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "P", "subjects": ["p.>"], "num_replicas": 3, "storage": "file"}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.P", cfg)
        await until(lambda: _leader(quad, "P") != "")
        durable = {"stream_name": "P", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await _req(nc, "$JS.API.CONSUMER.CREATE.P.D", durable)
        await _publish_n(nc, "P", 100, 0)
        before = _peers(quad, "P")
        (free,) = [n for n in quad.names if n not in before]
        lead = _leader(quad, "P")
        victim = next(p for p in before if p != lead)
        # a follower out; the free server in
        resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.P", {"peer": victim})
        assert resp == {"type": RTYPE, "success": True}
        after = await _moved(quad, "P", victim, 100)
        assert free in after
        # the newcomer has the durable consumer as committed
        js = quad.servers[free].jetstream
        assert js is not None
        assert "D" in js.accounts["$G"].streams["P"].consumers
        await _publish_n(nc, "P", 20, 100)
        # now the leader itself, by its peer id: the server just freed takes its place
        lead = _leader(quad, "P")
        pid = quad.servers[lead].js_cluster.stream_groups.cluster_block(
            quad.servers[lead].jetstream.accounts["$G"].streams["P"], "x"
        )
        assert pid["leader"] == lead
        resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.P", {"peer": lead})
        assert resp == {"type": RTYPE, "success": True}
        after = await _moved(quad, "P", lead, 120)
        assert victim in after
        info = await _req(nc, "$JS.API.STREAM.INFO.P")
        assert info["state"]["messages"] == 120, info
        assert sorted(
            [info["cluster"]["leader"]] + [r["name"] for r in info["cluster"]["replicas"]]
        ) == sorted(after)
    finally:
        await nc.close()


@pytest.mark.parametrize("verb", ["REMOVE", "EVACUATE"])
async def test_peer_remove_refusals(quad: EmbeddedJsCluster, verb: str) -> None:
    """The same checks and errors for both verbs, as nats-server's jsStreamRemapPeerRequest."""
    rtype = f"io.nats.jetstream.api.v1.stream_{verb.lower()}_peer_response"
    nc = await nats.connect(quad.url("n2"))
    try:
        cfg = {"name": "Q", "subjects": ["q.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.Q", cfg)
        one = {"name": "ONE", "subjects": ["one.>"], "num_replicas": 1}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.ONE", one)
        peers = _peers(quad, "Q")
        (free,) = [n for n in quad.names if n not in peers]

        async def err(stream: str, body: Any) -> Any:
            resp = await _req(nc, f"$JS.API.STREAM.PEER.{verb}.{stream}", body)
            assert resp["type"] == rtype, resp
            return resp["error"]["err_code"]

        assert await err("Q", None) == 10003  # empty request
        assert await err("Q", {"peer": ""}) == 10003
        assert await err("Q", {"peer": free}) == 10040  # not a member
        assert await err("NOPE", {"peer": peers[0]}) == 10059  # stream not found
        assert await err("ONE", {"peer": _peers(quad, "ONE")[0]}) == 10075
        # the one server without a replica of Q is down: no replacement, refused as
        # nats-server does (it keeps the replica count)
        await quad.stop(free)
        assert await err("Q", {"peer": peers[0]}) == 10075
        assert _peers(quad, "Q") == peers
    finally:
        await nc.close()


def _holders(t: EmbeddedJsCluster, stream: str) -> list[str]:
    return sorted(n for n in t.servers if stream in t.streams(n))


async def test_scaling_a_stream_between_r1_and_r3(quad: EmbeddedJsCluster) -> None:
    """An update of ``num_replicas``: R1 to R3 gives the stream's one server a group that
    two placed servers join (they copy the stream from its store), R3 to R1 keeps the first
    peer, which runs the stream unreplicated again once the others have left."""
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "S", "subjects": ["s.>"], "num_replicas": 1, "storage": "file"}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S", cfg)
        durable = {"stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await _req(nc, "$JS.API.CONSUMER.CREATE.S.D", durable)
        await _publish_n(nc, "S", 50, 0)
        (home,) = _peers(quad, "S")
        up = await _req(nc, "$JS.API.STREAM.UPDATE.S", {**cfg, "num_replicas": 3})
        assert up.get("config", {}).get("num_replicas") == 3, up
        await until(lambda: len(_peers(quad, "S")) == 3)
        peers = _peers(quad, "S")
        assert peers[0] == home
        await until(lambda: _voters(quad, "S") == {raft_id(p) for p in peers}, timeout=30)
        await _publish_n(nc, "S", 10, 50)
        await until(lambda: all(len(_contents(quad, p, "S")) == 60 for p in peers), timeout=30)
        ref = _contents(quad, home, "S")
        assert all(_contents(quad, p, "S") == ref for p in peers)
        info = await _req(nc, "$JS.API.STREAM.INFO.S")
        assert len(info["cluster"]["replicas"]) == 2, info
        for p in peers:
            js = quad.servers[p].jetstream
            assert js is not None and "D" in js.accounts["$G"].streams["S"].consumers
        # and back to one replica: the first peer keeps it
        down = await _req(nc, "$JS.API.STREAM.UPDATE.S", {**cfg, "num_replicas": 1})
        assert down.get("config", {}).get("num_replicas") == 1, down
        await until(lambda: _holders(quad, "S") == [home], timeout=30)

        def unreplicated() -> bool:
            js = quad.servers[home].jetstream
            assert js is not None
            return js.accounts["$G"].streams["S"].replica is None

        await until(unreplicated, timeout=30)
        await _publish_n(nc, "S", 5, 60)
        assert [m[0] for m in _contents(quad, home, "S")] == list(range(1, 66))
        info = await _req(nc, "$JS.API.STREAM.INFO.S")
        assert info["state"]["messages"] == 65 and "replicas" not in info["cluster"], info
        # its durable consumer runs on, unreplicated, and keeps its state across a restart
        assert await take_and_ack(nc, "S", "D", 3) == [1, 2, 3]
    finally:
        await nc.close()
    # it comes back from a restart as an R1 stream with everything
    await quad.stop(home)
    await quad.start(home)
    nc = await nats.connect(quad.url(home))
    try:
        await until(lambda: len(_contents(quad, home, "S")) == 65)
        await _publish_n(nc, "S", 1, 65)
        assert [m[0] for m in _contents(quad, home, "S")] == list(range(1, 67))
        assert await take_and_ack(nc, "S", "D", 1) == [4]
    finally:
        await nc.close()


async def _system_request(
    t: EmbeddedJsCluster, via: str, subject: str, body: Any
) -> dict[str, Any]:
    """A request in the system account, published on server ``via`` (as a system user's
    client would; the routes carry it to the meta leader), and its answer."""
    srv = t.servers[via]
    system = srv.accounts[srv.system_account_name]
    got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    inbox = b"_INBOX.sysreq." + via.encode()

    def on_reply(sub: Any, subj: bytes, reply: Any, hdr: Any, payload: bytes) -> None:
        if not got.done():
            got.set_result(payload)

    sub = Subscription(inbox, None, b"sysreq", callback=on_reply)
    system.sublist.insert(sub)
    try:
        data = b"" if body is None else json.dumps(body).encode()
        publish(system.sublist, subject.encode(), inbox, None, data)
        out: dict[str, Any] = json.loads(await asyncio.wait_for(got, 5))
        return out
    finally:
        system.sublist.remove(sub)


async def test_server_remove(quad: EmbeddedJsCluster) -> None:
    """``$JS.API.SERVER.REMOVE`` takes a server out of the meta group for good: its stream
    replicas move to the free server, it is never placed on again; nats-server's refusals."""
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "V", "subjects": ["v.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.V", cfg)
        await until(lambda: _leader(quad, "V") != "")
        await _publish_n(nc, "V", 30, 0)
        before = _peers(quad, "V")
        (free,) = [n for n in quad.names if n not in before]
        gone = next(p for p in before if p != quad.leader())
        via = next(n for n in quad.names if n != gone)
        rtype = "io.nats.jetstream.api.v1.meta_server_remove_response"
        bad = await _system_request(quad, via, "$JS.API.SERVER.REMOVE", {"server": "n9"})
        assert bad == {
            "type": rtype,
            "error": {
                "code": 400,
                "err_code": 10044,
                "description": "server is not a member of the cluster",
            },
        }
        ok = await _system_request(quad, via, "$JS.API.SERVER.REMOVE", {"server": gone})
        assert ok == {"type": rtype, "success": True}
        after = await _moved(quad, "V", gone, 30)
        assert free in after
        lead = quad.leader()
        meta = quad.servers[lead].js_cluster
        assert raft_id(gone) not in meta.group.conf.voters
        assert gone not in meta.meta.servers
        # never placed on again, and a second removal is refused
        again = await _system_request(quad, via, "$JS.API.SERVER.REMOVE", {"server": gone})
        assert again["error"]["err_code"] == 10044, again
        r = await _req(nc, "$JS.API.STREAM.CREATE.W", {"name": "W", "num_replicas": 3})
        assert "error" not in r, r
        assert gone not in _peers(quad, "W")
        await _publish_n(nc, "V", 5, 30)
        # (acknowledged once a majority holds them: this replica may apply them just after)
        await until(lambda: len(_contents(quad, after[0], "V")) == 35)
    finally:
        await nc.close()


async def test_stream_peer_evacuate_moves_the_replica(quad: EmbeddedJsCluster) -> None:
    """``STREAM.PEER.EVACUATE``: the replica moves to the free server (natsd migrates first
    for both verbs: the newcomer catches up before the evacuated replica leaves)."""
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "E", "subjects": ["e.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.E", cfg)
        await until(lambda: _leader(quad, "E") != "")
        await _publish_n(nc, "E", 40, 0)
        before = _peers(quad, "E")
        (free,) = [n for n in quad.names if n not in before]
        resp = await _req(nc, "$JS.API.STREAM.PEER.EVACUATE.E", {"peer": before[1]})
        assert resp == {"type": "io.nats.jetstream.api.v1.stream_evacuate_peer_response",
                        "success": True}  # fmt: skip
        after = await _moved(quad, "E", before[1], 40)
        assert free in after
    finally:
        await nc.close()


async def test_server_evacuate(quad: EmbeddedJsCluster) -> None:
    """``$JS.API.SERVER.EVACUATE`` (nats-server 2.15): the server's replicas move to free
    servers and it stays a member of the meta group, placeable again. A server holding an
    R1 stream is refused (10075) before anything moves: natsd cannot move an R1 stream."""
    rtype = "io.nats.jetstream.api.v1.meta_server_remove_response"
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "X", "subjects": ["x.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.X", cfg)
        await until(lambda: _leader(quad, "X") != "")
        await _publish_n(nc, "X", 25, 0)
        before = _peers(quad, "X")
        (free,) = [n for n in quad.names if n not in before]
        gone = before[2]
        via = next(n for n in quad.names if n != gone)
        bad = await _system_request(quad, via, "$JS.API.SERVER.EVACUATE", {"server": "n9"})
        assert bad["type"] == rtype and bad["error"]["err_code"] == 10044, bad
        # a server holding an R1 stream: refused, nothing moves
        one = {"name": "ONE", "subjects": ["one.>"], "num_replicas": 1}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.ONE", one)
        (holder,) = _peers(quad, "ONE")
        refused = await _system_request(
            quad, via if via != holder else gone, "$JS.API.SERVER.EVACUATE", {"server": holder}
        )
        assert refused["type"] == rtype and refused["error"]["err_code"] == 10075, refused
        assert _peers(quad, "X") == before
        assert "error" not in await _req(nc, "$JS.API.STREAM.DELETE.ONE")
        await until(lambda: quad.servers[quad.leader()].js_cluster.meta.stream("$G", "ONE") is None)
        ok = await _system_request(quad, via, "$JS.API.SERVER.EVACUATE", {"server": gone})
        assert ok == {"type": rtype, "success": True}
        after = await _moved(quad, "X", gone, 25)
        assert free in after
        meta = quad.servers[quad.leader()].js_cluster
        assert raft_id(gone) in meta.group.conf.voters and gone in meta.meta.servers
    finally:
        await nc.close()


async def test_a_removed_voter_stays_until_its_replacement_takes_over_and_can_be_put_back(
    quad: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A removed replica whose replacement cannot catch up (it is down) stays a voter of
    its group, its copy kept, however long that takes (``cluster/membership.py``: leaving while
    the group counts it could cost the group its majority). Put back (its replacement
    removed in turn), it carries on with its copy."""
    monkeypatch.setattr(cluster_streams, "LEAVE_AFTER", 1.0)
    nc = await nats.connect(quad.url("n1"))
    try:
        cfg = {"name": "B", "subjects": ["b.>"], "num_replicas": 3}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.B", cfg)
        await until(lambda: _leader(quad, "B") != "")
        await _publish_n(nc, "B", 30, 0)
        peers = _peers(quad, "B")
        (free,) = [n for n in quad.names if n not in peers]
        out = next(p for p in peers if p != _leader(quad, "B") and p != "n1")
        resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.B", {"peer": out})
        assert resp == {"type": RTYPE, "success": True}
        await quad.stop(free)  # the replacement cannot catch up: no swap
        await asyncio.sleep(3)  # three times LEAVE_AFTER
        assert len(_contents(quad, out, "B")) == 30
        lead = _leader(quad, "B")
        (m,) = quad.servers[lead].js_cluster.stream_groups.members.values()
        assert raft_id(out) in m.group.conf.voters
        # the replacement is removed in turn: the only free server is the one that waited
        resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.B", {"peer": free})
        assert resp == {"type": RTYPE, "success": True}, resp
        await until(lambda: out in _peers(quad, "B"))
        await _publish_n(nc, "B", 5, 30)
        await until(lambda: len(_contents(quad, out, "B")) == 35, timeout=30)
        lead = _leader(quad, "B")
        assert _contents(quad, out, "B") == _contents(quad, lead, "B")
    finally:
        await nc.close()


async def test_two_overlapping_moves_keep_the_group_s_majority(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3 on {a, b, c} of five servers: c is removed, and b too before c's replacement has
    caught up (the group's membership walk is held still here, as a slow catch-up holds it).
    The group then needs a joint change to {a, d, e} that two of {a, b, c} must commit: b
    and c must still be there, so neither leaves before the swap removes it; b, down when
    the swap commits, learns of its removal from a member once back. Leaving after
    a timeout instead, as natsd did, lost the group's majority for good (the fault soak's
    seed 1044104139)."""
    monkeypatch.setattr(cluster_streams, "LEAVE_AFTER", 1.0)
    held = _hold_membership_walk(monkeypatch)
    t = EmbeddedJsCluster(tmp_path, size=5)
    await t.start_all()
    nc = await nats.connect(t.url("n1"))
    try:
        lead, b, c = await _r3_with_20_messages(t, nc, "W")
        for srv in t.servers.values():  # replacements among the free servers: d and e
            cl = srv.js_cluster
            cl.place_one = lambda a, ex, f=cl.place_one: f(a, ex | {b, c})  # type: ignore
        for gone in (c, b):
            resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.W", {"peer": gone})
            assert resp == {"type": RTYPE, "success": True}, resp
            await until(lambda gone=gone: gone not in _peers(t, "W"))
        after = _peers(t, "W")
        assert lead in after and b not in after and c not in after
        await asyncio.sleep(3)  # three times LEAVE_AFTER: b and c are voters still
        assert len(_contents(t, b, "W")) == 20 and len(_contents(t, c, "W")) == 20
        # b is cut off when the swap commits, so it never sees that commit: once the link is
        # back, a member tells it (its vote requests reach members whose configuration lacks
        # it); b knows it was removed (its meta group applied that) but not that it is out
        await until(lambda: not _placed_on(t, b, "W"))
        cut = [True]
        for name, srv in t.servers.items():
            host = srv.js_cluster.raft.host
            host._send = lambda to, f, s=host._send, me=name: (  # type: ignore[method-assign]
                None if cut[0] and (me == b or to == raft_id(b)) else s(to, f)
            )
        held[0] = False
        await _publish_n(nc, "W", 10, 20)
        await until(lambda: _voters(t, "W") == {raft_id(p) for p in after}, timeout=30)
        await until(lambda: "W" not in t.streams(c), timeout=30)
        assert "W" in t.streams(b)
        cut[0] = False
        await until(lambda: "W" not in t.streams(b), timeout=30)
        await until(lambda: all(len(_contents(t, p, "W")) == 30 for p in after), timeout=30)
        ref = _contents(t, after[0], "W")
        assert all(_contents(t, p, "W") == ref for p in after)
    finally:
        await nc.close()
        await t.stop_all()


async def test_a_removed_voter_restarted_before_the_swap_rejoins_its_group(
    quad: EmbeddedJsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R3 on {a, b, c}: c is removed, and restarts before the swap (the membership walk is
    held still, as a slow catch-up holds it). Its group still counts it, so it rejoins as
    a voter rather than sitting unassigned on disk: with b down too, a and c still commit.
    Once the swap is done it learns it is out and deletes its copy."""
    held = _hold_membership_walk(monkeypatch)
    nc = await nats.connect(quad.url("n1"))
    try:
        _, b, c = await _r3_with_20_messages(quad, nc, "R")
        resp = await _req(nc, "$JS.API.STREAM.PEER.REMOVE.R", {"peer": c})
        assert resp == {"type": RTYPE, "success": True}, resp
        await until(lambda: not _placed_on(quad, c, "R"))
        await quad.stop(c)
        await quad.start(c)
        await until(lambda: len(quad.servers[c].js_cluster.stream_groups.members) == 1)
        await quad.stop(b)
        via = next(n for n in quad.names if n not in (b, c))
        nc2 = await nats.connect(quad.url(via))
        try:
            await _publish_n(nc2, "R", 10, 20)  # acknowledged by a and c
            # (c applies them once it hears of their commit, a moment after the acks)
            await until(lambda: len(_contents(quad, c, "R")) == 30)
        finally:
            await nc2.close()
        await quad.start(b)
        held[0] = False
        after = _peers(quad, "R")
        await until(lambda: _voters(quad, "R") == {raft_id(p) for p in after}, timeout=30)
        await until(lambda: "R" not in quad.streams(c), timeout=30)
        await until(lambda: all(len(_contents(quad, p, "R")) == 30 for p in after), timeout=30)
    finally:
        await nc.close()
