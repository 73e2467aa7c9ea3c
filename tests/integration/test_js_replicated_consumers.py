"""Durable consumers of replicated (R3) streams on a three-server natsd cluster, in process,
driven by nats-py (design-clustering §4.5, ``jetstream/cluster/consumers``).

The consumer shares its stream's Raft group: the leader runs it, the other replicas hold
its config and committed state, and a new leader continues from that state, so nothing
whose ack-sync was answered is delivered again. These tests look inside the servers to see
the passive copies, stop the leader, and restart the whole cluster.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, until
from embedded_cluster import api_request as _req
from embedded_cluster import replica_leader as _leader
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError, TimeoutError

from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.stream.entries import OP_CONSUMER, OP_CSTATE, EntryError, encode_fields

pytestmark = pytest.mark.timeout(120)

STREAM = {"name": "C", "subjects": ["c.>"], "num_replicas": 3}
DURABLE = {
    "stream_name": "C",
    "config": {"durable_name": "D", "ack_policy": "explicit", "ack_wait": 2 * 10**9},
}


def _consumer(trio: EmbeddedJsCluster, server: str, stream: str, name: str) -> Consumer | None:
    js = trio.servers[server].jetstream
    s = js.accounts["$G"].streams.get(stream) if js is not None else None
    c = s.consumers.get(name) if s is not None else None
    return c if isinstance(c, Consumer) else None


async def _api(nc: NATS, subject: str, body: Any = None, within: float = 15) -> dict[str, Any]:
    """An API request retried while the stream has no leader to answer it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await _req(nc, subject, body)
        except (NoRespondersError, TimeoutError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def _fill(nc: NATS, n: int) -> None:
    for i in range(n):
        ack = json.loads((await nc.request(f"c.{i % 2}", b"m%d" % i, timeout=5)).data)
        assert ack["seq"] == i + 1, ack


async def _fetch(nc: NATS, batch: int, expires: float = 1.0) -> list[Any]:
    """One pull request for ``batch`` messages: (stream seq, reply subject) of each."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    req = {"batch": batch, "expires": int(expires * 1e9)}
    await nc.publish("$JS.API.CONSUMER.MSG.NEXT.C.D", json.dumps(req).encode(), reply=inbox)
    out = []
    try:
        while len(out) < batch:
            msg = await sub.next_msg(timeout=expires + 1)
            if not msg.reply:  # a status (408 request expired)
                break
            seq = int(msg.reply.split(".")[5])
            out.append((seq, msg.reply))
    except TimeoutError:
        pass
    finally:
        await sub.unsubscribe()
    return out


async def test_durable_consumer_on_every_replica_and_through_leader_loss(
    trio: EmbeddedJsCluster,
) -> None:
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        await _fill(nc, 20)
        created = await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", DURABLE)
        assert created["name"] == "D" and created["config"]["durable_name"] == "D", created
        assert created["cluster"]["leader"] == _leader(trio, "C")
        # committed before it was answered: every replica holds it, the followers passive
        lead = _leader(trio, "C")
        for n in trio.names:
            c = _consumer(trio, n, "C", "D")
            assert c is not None and c.passive == (n != lead), n
        # five taken and confirmed with ack-sync (answered once committed), five taken only
        got = await _fetch(nc, 10)
        assert [s for s, _ in got] == list(range(1, 11))
        for _seq, reply in got[:5]:
            await nc.request(reply, b"+ACK", timeout=5)
        await until(
            lambda: all(
                (c := _consumer(trio, n, "C", "D")) is not None and c.acks.asflr == 5
                for n in trio.names
            )
        )
        info = await _req(nc, "$JS.API.CONSUMER.INFO.C.D")
        assert info["ack_floor"]["stream_seq"] == 5 and info["num_ack_pending"] == 5, info
    finally:
        await nc.close()
    await trio.stop(lead)
    left = [n for n in trio.names if n != lead]
    nc = await nats.connect(trio.url(left[0]))
    try:
        await until(lambda: _leader(trio, "C") in left, timeout=20)
        new = _leader(trio, "C")
        assert not _consumer(trio, new, "C", "D").passive  # type: ignore[union-attr]
        info = await _api(nc, "$JS.API.CONSUMER.INFO.C.D")
        assert info["ack_floor"]["stream_seq"] == 5, info
        assert info["cluster"]["leader"] == new
        # the new leader delivers the rest: 6-10 again (not acknowledged), then 11-20
        seen: list[int] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(set(seen)) < 15 and loop.time() < deadline:
            for seq, reply in await _fetch(nc, 15):
                seen.append(seq)
                await nc.publish(reply, b"+ACK")
        assert sorted(set(seen)) == list(range(6, 21)), seen
        assert not [s for s in seen if s <= 5]  # nothing confirmed comes back
    finally:
        await nc.close()
    # the old leader comes back with the consumer, passive from its restore on (a live
    # copy would answer pulls and ack-syncs from a stale state until it joins the group),
    # and takes the state
    await trio.start(lead)
    c = _consumer(trio, lead, "C", "D")
    assert c is not None and c.passive
    await until(
        lambda: (
            (c := _consumer(trio, lead, "C", "D")) is not None and c.passive and c.acks.asflr == 20
        ),
        timeout=20,
    )


async def test_durable_consumer_survives_whole_cluster_restart(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n2"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        await _fill(nc, 6)
        assert "error" not in await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", DURABLE)
        for _seq, reply in await _fetch(nc, 4):
            await nc.request(reply, b"+ACK", timeout=5)
    finally:
        await nc.close()
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await until(lambda: _leader(trio, "C") != "", timeout=20)
    lead = _leader(trio, "C")
    assert all(
        (c := _consumer(trio, n, "C", "D")) is not None and c.passive == (n != lead)
        for n in trio.names
    )
    nc = await nats.connect(trio.url("n3"))
    try:
        info = await _api(nc, "$JS.API.CONSUMER.INFO.C.D")
        assert info["ack_floor"]["stream_seq"] == 4 and info["num_pending"] == 2, info
        assert [s for s, _ in await _fetch(nc, 5)] == [5, 6]
    finally:
        await nc.close()


async def test_durable_consumer_update_delete_and_refusals(trio: EmbeddedJsCluster) -> None:
    nc = await nats.connect(trio.url("n3"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        assert "error" not in await _api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.C.D", DURABLE)
        # an update reaches every replica's copy
        upd = {"stream_name": "C", "config": {**DURABLE["config"], "max_deliver": 7}}  # type: ignore[dict-item]
        changed = await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", upd)
        assert changed["config"]["max_deliver"] == 7, changed
        await until(
            lambda: all(
                (c := _consumer(trio, n, "C", "D")) is not None and c.cfg.max_deliver == 7
                for n in trio.names
            )
        )
        # a refused request changes nothing anywhere
        bad = {"stream_name": "C", "config": {**DURABLE["config"], "deliver_policy": "new"}}  # type: ignore[dict-item]
        refused = await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", bad)
        assert refused["error"]["err_code"] == 10012, refused
        too_many = {"stream_name": "C", "config": {"durable_name": "E", "num_replicas": 5}}
        assert (await _api(nc, "$JS.API.CONSUMER.CREATE.C.E", too_many))["error"][
            "err_code"
        ] == 10126
        # a pause and a reset reach every replica's copy (answered once committed: the
        # followers apply them as they learn the commit, a moment later)
        until_ts = "2100-01-01T00:00:00Z"
        pause = await _api(nc, "$JS.API.CONSUMER.PAUSE.C.D", {"pause_until": until_ts})
        assert pause["paused"] is True and pause["pause_until"] == until_ts, pause
        await until(
            lambda: all(
                (c := _consumer(trio, n, "C", "D")) is not None and c.cfg.pause_until == until_ts
                for n in trio.names
            )
        )
        await _fill(nc, 5)
        reset = await _api(nc, "$JS.API.CONSUMER.RESET.C.D", {"seq": 3})
        assert reset["reset_seq"] == 3 and reset["delivered"]["stream_seq"] == 2, reset
        await until(
            lambda: all(
                (c := _consumer(trio, n, "C", "D")) is not None and c.acks.asflr == 2
                for n in trio.names
            )
        )
        resume = await _api(nc, "$JS.API.CONSUMER.PAUSE.C.D", {})
        assert resume["paused"] is False, resume
        # a backup is made by the leader (its store holds what the group committed)
        snap = await _api(nc, "$JS.API.STREAM.SNAPSHOT.C", {"deliver_subject": "snap.x"})
        assert snap["config"]["name"] == "C" and snap["state"]["consumer_count"] >= 1, snap
        # a consumer leader stepdown moves the stream's group, which the consumer shares
        old = _leader(trio, "C")
        down = await _api(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.C.D")
        assert down == {
            "type": "io.nats.jetstream.api.v1.consumer_leader_stepdown_response",
            "success": True,
        }
        await until(lambda: _leader(trio, "C") not in ("", old))
        await until(lambda: not _consumer(trio, _leader(trio, "C"), "C", "D").passive)  # type: ignore[union-attr]
        gone = await _api(nc, "$JS.API.CONSUMER.DELETE.C.D")
        assert gone == {
            "type": "io.nats.jetstream.api.v1.consumer_delete_response",
            "success": True,
        }
        await until(lambda: all(_consumer(trio, n, "C", "D") is None for n in trio.names))
        # an ephemeral consumer still lives on the leader alone
        eph = await _api(nc, "$JS.API.CONSUMER.CREATE.C", {"stream_name": "C", "config": {}})
        assert "error" not in eph, eph
        holders = [n for n in trio.names if _consumer(trio, n, "C", eph["name"]) is not None]
        assert holders == [_leader(trio, "C")]
        # a stream with a durable consumer deletes like any other
        assert "error" not in await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", DURABLE)
        gone = await _api(nc, "$JS.API.STREAM.DELETE.C")
        assert gone == {"type": "io.nats.jetstream.api.v1.stream_delete_response", "success": True}
        await until(lambda: all("C" not in trio.streams(n) for n in trio.names))
    finally:
        await nc.close()


async def test_deleted_durable_consumer_stays_deleted_after_restart(
    trio: EmbeddedJsCluster,
) -> None:
    """The log replays the consumer's creation after a restart; its delete replays too, even
    with messages stored after it (which makes a purge's replay a no-op)."""
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        assert "error" not in await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", DURABLE)
        gone = await _api(nc, "$JS.API.CONSUMER.DELETE.C.D")
        assert gone.get("success") is True, gone
        await _fill(nc, 3)
    finally:
        await nc.close()
    await until(lambda: all(_consumer(trio, n, "C", "D") is None for n in trio.names))
    for n in list(trio.servers):
        await trio.stop(n)
    await asyncio.gather(*(trio.start(n) for n in trio.names))
    await until(lambda: _leader(trio, "C") != "", timeout=20)
    await asyncio.sleep(0.5)
    assert all(_consumer(trio, n, "C", "D") is None for n in trio.names)
    nc = await nats.connect(trio.url("n2"))
    try:
        names = await _api(nc, "$JS.API.CONSUMER.NAMES.C")
        assert names["consumers"] == [], names
    finally:
        await nc.close()


async def test_durable_push_consumer_through_leader_loss(trio: EmbeddedJsCluster) -> None:
    """A push consumer's deliveries resume on the new leader, from the committed state."""
    nc = await nats.connect(trio.url("n1"))
    got: list[int] = []
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        lead = _leader(trio, "C")
        other = next(n for n in trio.names if n != lead)
        sub_nc = await nats.connect(trio.url(other))
        acked: asyncio.Queue[int] = asyncio.Queue()

        async def on_msg(msg: Any) -> None:
            seq = int(msg.reply.split(".")[5])
            got.append(seq)
            try:
                await sub_nc.request(msg.reply, b"+ACK", timeout=5)
                await acked.put(seq)
            except (TimeoutError, NoRespondersError):
                pass

        await sub_nc.subscribe("push.D", cb=on_msg)
        await sub_nc.flush()
        push = {"stream_name": "C", "config": {**DURABLE["config"], "deliver_subject": "push.D"}}  # type: ignore[dict-item]
        assert "error" not in await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", push)
        await _fill(nc, 5)
        first = sorted([await asyncio.wait_for(acked.get(), 10) for _ in range(5)])
        assert first == [1, 2, 3, 4, 5], first
    finally:
        await nc.close()
    await trio.stop(lead)
    nc = await nats.connect(trio.url(other))
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        for i in range(5, 10):  # published through the new leader
            while True:
                try:
                    # (a message id: a retry after a late answer is not stored twice)
                    hdrs = {"Nats-Msg-Id": f"c{i}"}
                    ack = json.loads((await nc.request(f"c.{i}", b"m", 1, headers=hdrs)).data)
                    if "seq" in ack:
                        break
                except (NoRespondersError, TimeoutError):
                    pass
                assert loop.time() < deadline, "no new leader took the publishes"
                await asyncio.sleep(0.1)
        confirmed = sorted([await asyncio.wait_for(acked.get(), 20) for _ in range(5)])
        assert confirmed == [6, 7, 8, 9, 10], confirmed
        # the five acknowledged before the leader went were not delivered again
        assert sorted(got) == list(range(1, 11)), got
    finally:
        await nc.close()
        await sub_nc.close()


def _seqs(trio: EmbeddedJsCluster, server: str, stream: str) -> list[int]:
    js = trio.servers[server].jetstream
    assert js is not None
    store = js.accounts["$G"].streams[stream].store
    st = store.state()
    return [s for s in range(st.first_seq, st.last_seq + 1) if store.load_msg(s) is not None]


async def test_workqueue_and_interest_retention_on_every_replica(trio: EmbeddedJsCluster) -> None:
    """An acknowledged message leaves a workqueue stream, and an interest stream once every
    consumer acknowledged it, on every replica: the removal follows the committed consumer
    state, so all stores stay identical."""
    nc = await nats.connect(trio.url("n2"))
    try:
        wq = {"name": "Q", "subjects": ["q.>"], "num_replicas": 3, "retention": "workqueue"}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.Q", wq)
        it = {"name": "I", "subjects": ["i.>"], "num_replicas": 3, "retention": "interest"}
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.I", it)
        await until(lambda: _leader(trio, "Q") != "" and _leader(trio, "I") != "")
        cfg = {"ack_policy": "explicit", "ack_wait": 2 * 10**9}
        for stream, name in (("Q", "W"), ("I", "A"), ("I", "B")):
            body = {"stream_name": stream, "config": {**cfg, "durable_name": name}}
            created = await _api(nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", body)
            assert "error" not in created, created
        # an ephemeral consumer would hold interest on the leader alone: still refused
        eph = await _api(nc, "$JS.API.CONSUMER.CREATE.I", {"stream_name": "I", "config": {}})
        assert eph["error"]["err_code"] == 10036, eph
        for i in range(6):
            for subj in (f"q.{i}", f"i.{i}"):
                ack = json.loads((await nc.request(subj, b"m", timeout=5)).data)
                assert ack["seq"] == i + 1, ack

        async def take(stream: str, name: str, n: int) -> list[int]:
            inbox = nc.new_inbox()
            sub = await nc.subscribe(inbox)
            req = json.dumps({"batch": n, "expires": 2 * 10**9}).encode()
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", req, reply=inbox)
            seqs = []
            for _ in range(n):
                m = await sub.next_msg(timeout=5)
                seqs.append(int(m.reply.split(".")[5]))
                await nc.request(m.reply, b"+ACK", timeout=5)
            await sub.unsubscribe()
            return seqs

        assert await take("Q", "W", 4) == [1, 2, 3, 4]
        await until(lambda: all(_seqs(trio, n, "Q") == [5, 6] for n in trio.names))
        assert await take("I", "A", 4) == [1, 2, 3, 4]
        await asyncio.sleep(0.3)  # B still needs them everywhere
        assert all(_seqs(trio, n, "I") == [1, 2, 3, 4, 5, 6] for n in trio.names)
        assert await take("I", "B", 2) == [1, 2]
        await until(lambda: all(_seqs(trio, n, "I") == [3, 4, 5, 6] for n in trio.names))
        # a consumer deleted: what only it still held goes, on every replica
        assert (await _api(nc, "$JS.API.CONSUMER.DELETE.I.B")).get("success") is True
        await until(lambda: all(_seqs(trio, n, "I") == [5, 6] for n in trio.names))
        info = await _api(nc, "$JS.API.STREAM.INFO.Q")
        assert info["state"]["messages"] == 2, info
    finally:
        await nc.close()


async def test_uncommitted_consumer_leaves_nothing_behind(trio: EmbeddedJsCluster) -> None:
    """A create the group never commits (its leader lost the proposal) is not answered and
    leaves nothing on any disk: the consumer cannot come back after a restart on one
    replica only, holding interest there."""
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
        lead = _leader(trio, "C")
        groups = trio.servers[lead].js_cluster.stream_groups
        (m,) = groups.members.values()
        rc = m.consumers
        assert rc is not None
        rc._propose = lambda _entry: False  # type: ignore[method-assign]
        with pytest.raises(TimeoutError):
            await nc.request(
                "$JS.API.CONSUMER.CREATE.C.D", json.dumps(DURABLE).encode(), timeout=1.0
            )
        assert _consumer(trio, lead, "C", "D") is not None  # live on the leader only
        for n in trio.names:
            assert not list((trio.tmp / n).rglob("obs/D/meta.json")), n
    finally:
        await nc.close()
    await trio.stop(lead)
    await trio.start(lead)
    await until(lambda: _leader(trio, "C") != "", timeout=20)
    assert all(_consumer(trio, n, "C", "D") is None for n in trio.names)


async def test_damaged_consumer_entries_are_refused_not_raised(trio: EmbeddedJsCluster) -> None:
    """A consumer entry that does not parse is an EntryError (logged, the log goes on),
    whatever is wrong inside it."""
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
        await until(lambda: _leader(trio, "C") != "")
    finally:
        await nc.close()
    (m,) = trio.servers["n2"].js_cluster.stream_groups.members.values()
    rc = m.consumers
    assert rc is not None
    bad = [
        encode_fields(OP_CONSUMER, 1, [b"D", b"not json", b"", b"", b""]),
        encode_fields(OP_CONSUMER, 1, [b"D", b"{}", b"", b"", b""]),
        encode_fields(OP_CONSUMER, 1, [b"D", b'{"config": 5}', b"", b"", b""]),
        encode_fields(OP_CONSUMER, 1, [b"\xff", b"{}", b"", b"", b""]),
        encode_fields(OP_CSTATE, 1, [b"D"]),
        encode_fields(9, 1, []),
        b"\x01\x04",
    ]
    for entry in bad:
        with pytest.raises(EntryError):
            rc.apply(entry)
    assert _consumer(trio, "n2", "C", "D") is None


async def _with_durable(trio: EmbeddedJsCluster, nc: NATS, n: int) -> str:
    """Stream C with ``n`` messages and durable D; returns the stream's leader."""
    assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.C", STREAM)
    await until(lambda: _leader(trio, "C") != "")
    await _fill(nc, n)
    await _api(nc, "$JS.API.CONSUMER.CREATE.C.D", DURABLE)
    return _leader(trio, "C")


async def _take_all(nc: NATS, seqs: set[int], within: float = 20) -> list[int]:
    """Pull until every sequence of ``seqs`` has been delivered and its ack-sync answered;
    returns every sequence delivered on the way."""
    seen: list[int] = []
    confirmed: set[int] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not seqs <= confirmed and loop.time() < deadline:
        for seq, reply in await _fetch(nc, 20):
            seen.append(seq)
            try:
                await nc.request(reply, b"+ACK", timeout=5)
                confirmed.add(seq)
            except TimeoutError:
                pass
    assert seqs <= confirmed, (sorted(confirmed), seen)
    return seen


async def test_a_leader_whose_proposal_is_dropped_holds_its_consumers_passive(
    trio: EmbeddedJsCluster,
) -> None:
    """A leader whose proposal the engine drops (here: during a leadership transfer) stops
    leading the way a lost election does: its consumers are held passive, and take every
    state committed after. Left running, a consumer missed those states, and once its
    replica led again it delivered from where it had stopped, acknowledged messages
    included (the R3 fault suite found it: a whole run of messages delivered again after
    their ack-syncs were answered)."""
    nc = await nats.connect(trio.url("n1"))
    try:
        lead = await _with_durable(trio, nc, 20)
        got = await _fetch(nc, 10)
        assert [s for s, _ in got] == list(range(1, 11))
        for _seq, reply in got[:5]:
            await nc.request(reply, b"+ACK", timeout=5)
        srv = trio.servers[lead]
        groups = srv.js_cluster.stream_groups
        stream = srv.jetstream.accounts["$G"].streams["C"]
        c = _consumer(trio, lead, "C", "D")
        assert c is not None and not c.passive
        # a transfer under way: the engine drops every proposal until it ends, this
        # consumer's state among them
        assert groups.stepdown(stream)
        assert c.saver.flush(durable=True)
        await until(lambda: _leader(trio, "C") not in ("", lead), timeout=20)
        held = _consumer(trio, lead, "C", "D")
        assert held is not None and held.passive
        # the new leader: 6-10 again (never acknowledged), then 11-20, all confirmed
        seen = await _take_all(nc, set(range(6, 21)))
        assert not [s for s in seen if s <= 5], seen
        await until(
            lambda: (h := _consumer(trio, lead, "C", "D")) is not None and h.acks.asflr == 20
        )
        # the old leader leads again: from the committed state, so nothing comes back
        now = _leader(trio, "C")
        s2 = trio.servers[now].jetstream.accounts["$G"].streams["C"]
        assert trio.servers[now].js_cluster.stream_groups.stepdown(
            s2, among={srv.js_cluster.raft.host.id}
        )
        await until(lambda: _leader(trio, "C") == lead, timeout=20)
        assert await _fetch(nc, 10) == []
        info = await _api(nc, "$JS.API.CONSUMER.INFO.C.D")
        assert info["ack_floor"]["stream_seq"] == 20 and info["num_ack_pending"] == 0, info
    finally:
        await nc.close()


async def test_a_consumer_found_running_at_activation_restarts_from_committed_state(
    trio: EmbeddedJsCluster,
) -> None:
    """The guard behind the test above: a replica that comes to lead and finds a consumer
    already running does not trust it (it may have missed committed states), and runs it
    again from the state the group committed."""
    nc = await nats.connect(trio.url("n1"))
    try:
        lead = await _with_durable(trio, nc, 10)
        (m,) = trio.servers[lead].js_cluster.stream_groups.members.values()
        rc = m.consumers
        assert rc is not None
        own = rc._propose
        rc._propose = lambda _entry: False  # type: ignore[method-assign]
        # five delivered that the group never records
        assert [s for s, _ in await _fetch(nc, 5)] == [1, 2, 3, 4, 5]
        running = _consumer(trio, lead, "C", "D")
        assert running is not None and running.acks.st_ds == 5
        rc.activate()
        again = _consumer(trio, lead, "C", "D")
        assert again is not None and again is not running and not again.passive
        assert running.closed and again.acks.st_ds == 0
        rc._propose = own  # type: ignore[method-assign]
        assert [s for s, _ in await _fetch(nc, 3)] == [1, 2, 3]
    finally:
        await nc.close()
