"""JetStream on a three-server natsd cluster, in process, driven by nats-py over real sockets.

Each server lists all three in ``cluster.routes`` (itself included), so the meta group forms
as soon as the mesh is complete (design-clustering §4.4). Clients connect to a server other
than the stream's: the request is answered by the meta leader or the stream's server over
the routes, and publishes reach the stream's server the same way.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest
from embedded_cluster import (
    CLUSTER,
    EmbeddedJsCluster,
    until,
)
from embedded_cluster import api_request as _req

from natsd.server import Server

pytestmark = pytest.mark.timeout(90)
_until = until


async def test_stream_lives_on_one_server_and_is_used_from_all(trio: EmbeddedJsCluster) -> None:
    ncs = [await nats.connect(trio.url(n)) for n in trio.names]
    try:
        created = await _req(
            ncs[1], "$JS.API.STREAM.CREATE.ORDERS", {"name": "ORDERS", "subjects": ["orders.>"]}
        )
        assert "error" not in created, created
        owner = created["cluster"]["leader"]
        assert owner in trio.names
        assert created["cluster"]["name"] == CLUSTER
        assert created["did_create"] is True
        assert created["config"]["num_replicas"] == 1
        # only the owner holds it
        holders = [n for n, s in trio.servers.items() if "ORDERS" in _streams(s)]
        assert holders == [owner]
        # publish from every server, including those that do not own it
        for i, nc in enumerate(ncs):
            ack = json.loads((await nc.request(f"orders.{i}", b"x%d" % i, timeout=5)).data)
            assert ack == {"stream": "ORDERS", "seq": i + 1}
        for nc in ncs:
            info = await _req(nc, "$JS.API.STREAM.INFO.ORDERS")
            assert info["state"]["messages"] == 3
            assert info["cluster"] == {"name": CLUSTER, "leader": owner}
            names = await _req(nc, "$JS.API.STREAM.NAMES")
            assert names["streams"] == ["ORDERS"] and names["total"] == 1
        listed = await _req(ncs[2], "$JS.API.STREAM.LIST")
        assert [s["config"]["name"] for s in listed["streams"]] == ["ORDERS"]
        assert listed["streams"][0]["state"]["messages"] == 3
        assert "missing" not in listed
        # a consumer on it, from a server that does not own it
        other = next(i for i, n in enumerate(trio.names) if n != owner)
        js = ncs[other].jetstream()
        sub = await js.pull_subscribe("orders.>", durable="proc", stream="ORDERS")
        msgs = await sub.fetch(3, timeout=5)
        assert [m.data for m in msgs] == [b"x0", b"x1", b"x2"]
        for m in msgs:
            await m.ack_sync()
        cinfo = await _req(ncs[other], "$JS.API.CONSUMER.INFO.ORDERS.proc")
        assert cinfo["cluster"] == {"name": CLUSTER, "leader": owner}
        assert cinfo["ack_floor"]["stream_seq"] == 3
        # account info sums the owner's usage (reported once a second)
        await asyncio.sleep(1.2)
        acct = await _req(ncs[0], "$JS.API.INFO")
        assert acct["streams"] == 1 and acct["consumers"] == 1 and acct["storage"] > 0
        # unknown streams: one "not found" answer, from the meta leader
        missing = await _req(ncs[0], "$JS.API.STREAM.INFO.NOPE")
        assert missing["error"]["err_code"] == 10059
        # delete through yet another server
        deleted = await _req(ncs[2], "$JS.API.STREAM.DELETE.ORDERS")
        assert deleted == {
            "type": "io.nats.jetstream.api.v1.stream_delete_response",
            "success": True,
        }
        await _until(lambda: all("ORDERS" not in _streams(s) for s in trio.servers.values()))
        names = await _req(ncs[0], "$JS.API.STREAM.NAMES")
        assert names["streams"] is None and names["total"] == 0
    finally:
        for nc in ncs:
            await nc.close()


def _streams(s: Server) -> set[str]:
    return {name for ja in s.jetstream.accounts.values() for name in ja.streams}


async def test_cluster_errors(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n2"))
    try:
        r5 = await _req(nc, "$JS.API.STREAM.CREATE.R5", {"name": "R5", "num_replicas": 5})
        assert r5["error"]["err_code"] == 10005, r5  # more replicas than servers
        tags = await _req(
            nc, "$JS.API.STREAM.CREATE.T", {"name": "T", "placement": {"tags": ["ssd"]}}
        )
        assert tags["error"]["err_code"] == 10005
        ok = await _req(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
        assert "error" not in ok
        overlap = await _req(nc, "$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["a.b"]})
        assert overlap["error"]["err_code"] == 10065
        again = await _req(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
        assert "error" not in again and again["cluster"] == ok["cluster"]
        other = await _req(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["x.>"]})
        assert other["error"]["err_code"] == 10058
        upd = await _req(
            nc, "$JS.API.STREAM.UPDATE.A", {"name": "A", "subjects": ["a.>"], "max_msgs": 5}
        )
        assert "error" not in upd and upd["config"]["max_msgs"] == 5
        # the meta leader checks Nats-Required-Api-Level as dispatch does: refused, not made
        body = json.dumps({"name": "LVL"}).encode()
        hdr = {"Nats-Required-Api-Level": "99"}
        lvl = json.loads((await nc.request("$JS.API.STREAM.CREATE.LVL", body, 5, headers=hdr)).data)
        assert lvl["error"]["err_code"] == 10185
        for verb in ("NAMES", "INFO"):
            subj = "$JS.API.STREAM.NAMES" if verb == "NAMES" else "$JS.API.INFO"
            got = json.loads((await nc.request(subj, b"", 5, headers=hdr)).data)
            assert got["error"]["err_code"] == 10185, got
        names = await _req(nc, "$JS.API.STREAM.NAMES")
        assert "LVL" not in names["streams"]
    finally:
        await nc.close()


async def test_meta_leader_loss_and_whole_cluster_restart(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n1"))
    created = await _req(nc, "$JS.API.STREAM.CREATE.S1", {"name": "S1", "subjects": ["s1"]})
    owner = created["cluster"]["leader"]
    for i in range(5):
        await nc.request("s1", b"%d" % i, timeout=5)
    # a durable consumer that has taken and acknowledged two of them
    durable = {"stream_name": "S1", "config": {"durable_name": "D", "ack_policy": "explicit"}}
    assert "error" not in await _req(nc, "$JS.API.CONSUMER.CREATE.S1.D", durable)
    sub = await nc.jetstream().pull_subscribe_bind("D", "S1")
    for m in await sub.fetch(2, timeout=5):
        await m.ack_sync()
    await nc.close()
    old = trio.leader()
    await trio.stop(old)
    left = [n for n in trio.names if n != old]
    await _until(lambda: trio.leader() in left, timeout=10)
    nc = await nats.connect(trio.url(left[0]))
    try:
        made = await _req(nc, "$JS.API.STREAM.CREATE.S2", {"name": "S2", "subjects": ["s2"]})
        assert "error" not in made, made
    finally:
        await nc.close()
    await trio.start(old)
    await _until(lambda: "S2" in trio.servers[old].js_cluster.meta.streams.get("$G", {}))
    # the whole cluster restarts: streams, messages and placement come back
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await _until(lambda: trio.leader() != "")
    nc = await nats.connect(trio.url(left[1]))
    try:
        info = await _req(nc, "$JS.API.STREAM.INFO.S1")
        assert info["state"]["messages"] == 5
        assert info["cluster"]["leader"] == owner
        names = await _req(nc, "$JS.API.STREAM.NAMES")
        assert sorted(names["streams"]) == ["S1", "S2"]
        cinfo = await _req(nc, "$JS.API.CONSUMER.INFO.S1.D")
        assert cinfo["ack_floor"]["stream_seq"] == 2 and cinfo["num_pending"] == 3
        assert cinfo["cluster"]["leader"] == owner
    finally:
        await nc.close()


async def test_meta_log_is_compacted_and_a_late_server_catches_up_by_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import natsd.jetstream.cluster.driver as jsc

    monkeypatch.setattr(jsc, "META_COMPACT", 8)
    t = EmbeddedJsCluster(tmp_path)
    try:
        await t.start_all()
        late = next(n for n in t.names if n != t.leader())
        await t.stop(late)
        nc = await nats.connect(t.url(t.leader()))
        try:
            for i in range(12):
                r = await _req(nc, f"$JS.API.STREAM.CREATE.C{i}", {"name": f"C{i}"})
                assert "error" not in r, r
            await _req(nc, "$JS.API.STREAM.DELETE.C0")
        finally:
            await nc.close()
        leader = t.servers[t.leader()].js_cluster
        # the leader compacted: its log starts after a snapshot of the meta state
        await until(lambda: leader.group.storage.first_index() > 8, timeout=10)
        await t.start(late)
        back = t.servers[late].js_cluster
        # the log it missed is gone, so it came up to date by the leader's snapshot
        await until(lambda: back.meta.snapshot() == leader.meta.snapshot(), timeout=15)
        assert sorted(a.name for a in back.meta.account_streams("$G")) == sorted(
            f"C{i}" for i in range(1, 12)
        )
        # a whole restart restores each server from its own snapshot and log
        await t.stop_all()
        await asyncio.gather(*(t.start(n) for n in t.names))
        await t.ready()
        await until(lambda: len({s.js_cluster.meta.applied for s in t.servers.values()}) == 1)
        names = {
            n: sorted(a.name for a in s.js_cluster.meta.account_streams("$G"))
            for n, s in t.servers.items()
        }
        assert all(v == sorted(f"C{i}" for i in range(1, 12)) for v in names.values()), names
    finally:
        await t.stop_all()


async def test_a_stream_goes_to_its_creators_server_among_equals(trio: EmbeddedJsCluster) -> None:
    """Placement's tie-break: the server the creating client is on (found by who subscribes
    to the request's reply subject), so a client that creates its own stream gets a local
    one when the servers are equally loaded."""
    placed = {}
    for name, via in (("A", "n2"), ("B", "n3"), ("C", "n2")):
        nc = await nats.connect(trio.url(via))
        try:
            r = await _req(nc, f"$JS.API.STREAM.CREATE.{name}", {"name": name})
            placed[name] = r["cluster"]["leader"]
        finally:
            await nc.close()
    # A and B go where their creators are; C goes to n1, which has fewer streams than n2
    assert placed == {"A": "n2", "B": "n3", "C": "n1"}


async def test_meta_stepdown_targets(trio: EmbeddedJsCluster) -> None:
    """META.LEADER.STEPDOWN's choice of the next leader, with nats-server's refusals."""
    from natsd.jetstream.wire.errors import ApiError

    lead = trio.leader()
    jsc = trio.servers[lead].js_cluster
    await until(lambda: all(now - t < 0.5 for now, t in _heard(trio, lead)))
    for body, why in (
        (b'{"placement":{"preferred":"n9"}}', 'preferred server "n9" not known'),
        (
            b'{"placement":{"preferred":"%s"}}' % lead.encode(),
            f'preferred server "{lead}" is already leader',
        ),
        (b'{"placement":{"tags":["gpu"]}}', "no suitable peers for placement"),
        (b"{nope", None),
    ):
        try:
            jsc.stepdown_target(body)
        except ApiError as e:
            assert why is None or e.to_json()["description"] == why, e.to_json()
        else:
            raise AssertionError(f"{body!r} was accepted")
    other = next(n for n in trio.names if n != lead)
    assert (
        jsc.name_of(jsc.stepdown_target(b'{"placement":{"preferred":"%s"}}' % other.encode()))
        == other
    )
    assert jsc.name_of(jsc.stepdown_target(b"")) in set(trio.names) - {lead}


def _heard(trio: EmbeddedJsCluster, lead: str) -> list[tuple[float, float]]:
    jsc = trio.servers[lead].js_cluster
    now = asyncio.get_running_loop().time()
    return [(now, t) for t in jsc.raft.last_heard.values()] or [(now, -1.0)]


async def test_requests_for_a_new_r3_stream_wait_for_its_leader(trio: EmbeddedJsCluster) -> None:
    """A consumer made right after its R3 stream, as clients do (nats.py's add_stream then
    add_consumer): the group has no leader yet, so its replicas hold the request and the one
    that comes to lead answers it, once; the same for a purge and a message get."""
    nc = await nats.connect(trio.url("n2"))
    try:
        for ret in ("limits", "workqueue"):
            name = f"NEW_{ret}"
            cfg = {"name": name, "subjects": [f"{name}.>"], "retention": ret, "num_replicas": 3}
            assert "error" not in await _req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg)
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            c = {"stream_name": name, "config": {"durable_name": "C", "name": "C",
                                                 "ack_policy": "explicit", "num_replicas": 3}}
            await nc.publish(f"$JS.API.CONSUMER.CREATE.{name}.C", json.dumps(c).encode(),
                             reply=inbox)  # fmt: skip
            first = json.loads((await sub.next_msg(timeout=10)).data)
            assert first.get("name") == "C" and "error" not in first, first
            with pytest.raises(nats.errors.TimeoutError):
                await sub.next_msg(timeout=0.5)  # answered once
            await sub.unsubscribe()
            purged = await _req(nc, f"$JS.API.STREAM.PURGE.{name}")
            assert purged.get("success") is True, purged
    finally:
        await nc.close()
