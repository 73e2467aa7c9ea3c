"""What a client sees of JetStream on a three-server cluster, pinned against nats-server.

The values were captured from the pinned nats-server (v2.15.1) and are asserted here for every
kind in ``KINDS``; a kind is a server implementation whose three-server cluster must show the
same thing (natsd joins the list once it runs JetStream clustered). Server names are
``<kind>-<i>`` and each server carries the tag ``n:<i>``, so a test pins a stream to a server
with ``placement.tags`` and names the expected owner without depending on random placement.
Clients connect to server 2 unless a test says otherwise, which is never the stream's server.

The reference notes with the full captured JSON live outside the repository (ref18.md of the
issue 18 work); the asserts below are the parts a client depends on.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from proc_cluster import ProcCluster, ServerProc, js_request, peer_hash, running

pytestmark = pytest.mark.timeout(120)

KINDS = ["nats-server", "natsd"]
CLUSTER_NAME = "jsc"
TAGS = (["n:0"], ["n:1"], ["n:2"])
NO_PEERS = "no suitable peers for placement"
UNAVAILABLE = {
    "code": 503,
    "err_code": 10008,
    "description": "JetStream system temporarily unavailable",
}


@pytest.fixture(scope="module", params=KINDS)
def shared(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcCluster]:
    """One cluster per kind for the tests that leave every server running."""
    with running(_cluster(request.param, tmp_path_factory.mktemp("jsc"))) as c:
        yield c


@pytest.fixture(params=KINDS)
def own(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProcCluster]:
    """A cluster of its own, for a test that kills servers."""
    with running(_cluster(request.param, tmp_path)) as c:
        yield c


def _cluster(kind: str, tmp: Path) -> ProcCluster:
    """Three servers of ``kind`` named ``<kind>-<i>`` and tagged ``n:<i>``, with accounts
    ``A`` (JetStream) and ``SYS``."""
    names = [f"{kind}-{i}" for i in range(3)]
    return ProcCluster(tmp, 3, kinds=kind, names=names, tags=TAGS, auth=True,
                       system_account=True, cluster_name=CLUSTER_NAME)  # fmt: skip


def _leader(c: ProcCluster) -> ServerProc:
    """The server every live server names as meta leader (waits for agreement)."""
    return c[asyncio.run(c.meta_leader())]


def _stream(name: str, on: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "subjects": [f"{name}.>"], "placement": {"tags": [f"n:{on}"]}, **extra}


async def _no_answer(nc: NATS, subject: str, body: Any = b"", wait: float = 2.0) -> bool:
    """True when nobody answers the request within ``wait`` seconds (but someone listens)."""
    try:
        await js_request(nc, subject, body, timeout=wait)
    except nats.errors.TimeoutError:
        return True
    return False


def _kind(c: ProcCluster) -> str:
    return c[0].kind


def test_r1_stream_cluster_block_and_routing(shared: ProcCluster) -> None:
    """An R1 stream on server 0, created, read, fed and consumed through servers 1 and 2."""
    owner = f"{_kind(shared)}-0"
    block = {"name": CLUSTER_NAME, "leader": owner}

    async def run() -> None:
        nc2, nc1 = await shared.connect(2), await shared.connect(1)
        try:
            info = await js_request(nc2, "$JS.API.INFO")
            assert info["type"] == "io.nats.jetstream.api.v1.account_info_response"
            # Account info is the standalone document: nothing about the cluster.
            assert not {"cluster", "domain", "meta_leader", "error"} & set(info)

            created = await js_request(nc2, "$JS.API.STREAM.CREATE.ROUTED", _stream("ROUTED", 0))
            assert created["did_create"] is True
            assert created["config"]["placement"] == {"tags": ["n:0"]}
            assert created["cluster"] == block

            got = await js_request(nc1, "$JS.API.STREAM.INFO.ROUTED")
            assert got["type"] == "io.nats.jetstream.api.v1.stream_info_response"
            assert got["cluster"] == block

            names = await js_request(nc2, "$JS.API.STREAM.NAMES")
            assert "ROUTED" in names["streams"]
            listed = await js_request(nc2, "$JS.API.STREAM.LIST")
            entry = next(s for s in listed["streams"] if s["config"]["name"] == "ROUTED")
            assert entry["cluster"] == block
            assert "missing" not in listed

            # Publishes through servers that do not hold the stream: a plain PubAck.
            ack = json.loads((await nc1.request("ROUTED.a", b"1", timeout=5)).data)
            assert ack == {"stream": "ROUTED", "seq": 1}
            hdr = {"Nats-Msg-Id": "m1"}
            ack = json.loads((await nc2.request("ROUTED.b", b"2", headers=hdr, timeout=5)).data)
            assert ack == {"stream": "ROUTED", "seq": 2}
            ack = json.loads((await nc2.request("ROUTED.b", b"2", headers=hdr, timeout=5)).data)
            assert ack == {"stream": "ROUTED", "seq": 2, "duplicate": True}

            cfg = {
                "stream_name": "ROUTED",
                "config": {"durable_name": "C", "ack_policy": "explicit"},
            }
            con = await js_request(nc2, "$JS.API.CONSUMER.CREATE.ROUTED.C", cfg)
            assert con["cluster"] == block
            assert con["num_pending"] == 2
            con = await js_request(nc1, "$JS.API.CONSUMER.INFO.ROUTED.C")
            assert con["type"] == "io.nats.jetstream.api.v1.consumer_info_response"
            assert con["cluster"] == block

            # A pull from server 1 is served by the consumer on server 0.
            inbox = nc1.new_inbox()
            sub = await nc1.subscribe(inbox)
            await nc1.flush()
            await nc1.publish(
                "$JS.API.CONSUMER.MSG.NEXT.ROUTED.C", b'{"batch":1,"expires":2000000000}', inbox
            )
            msg: Msg = await sub.next_msg(timeout=5)
            assert (msg.subject, msg.data) == ("ROUTED.a", b"1")
            assert msg.reply.startswith("$JS.ACK.ROUTED.C.1.1.1.")

            # R1 stepdowns are accepted as no-ops.
            down = await js_request(nc2, "$JS.API.STREAM.LEADER.STEPDOWN.ROUTED")
            assert down == {
                "type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
                "success": True,
            }
            down = await js_request(nc2, "$JS.API.CONSUMER.LEADER.STEPDOWN.ROUTED.C")
            assert down == {
                "type": "io.nats.jetstream.api.v1.consumer_leader_stepdown_response",
                "success": True,
            }

            deleted = await js_request(nc2, "$JS.API.STREAM.DELETE.ROUTED")
            assert deleted == {
                "type": "io.nats.jetstream.api.v1.stream_delete_response",
                "success": True,
            }
            again = await js_request(nc2, "$JS.API.STREAM.DELETE.ROUTED")
            assert again["error"] == {
                "code": 404,
                "err_code": 10059,
                "description": "stream not found",
            }
        finally:
            await nc1.close()
            await nc2.close()

    asyncio.run(run())


async def _stream_leader(nc: NATS, name: str, timeout: float = 15.0) -> dict[str, Any]:
    """STREAM.INFO once the stream's group has a leader (natsd answers a create before its
    group has elected one; nats-server after)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            info: dict[str, Any] = await js_request(nc, f"$JS.API.STREAM.INFO.{name}", timeout=1)
            if "leader" in info.get("cluster", {}):
                return info
        except nats.errors.TimeoutError:
            pass
        assert loop.time() < deadline, f"no leader for {name}"
        await asyncio.sleep(0.1)


async def _pub(nc: NATS, subject: str, data: bytes, timeout: float = 10.0) -> dict[str, Any]:
    """A publish acknowledged by the stream (retried while its leader is not ready), with a
    message id of its own: a retry after a late answer is answered as a duplicate of the
    first, not stored twice (the answer is then the first's PubAck)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    hdrs = {"Nats-Msg-Id": f"{subject}:{data.hex()}"}
    while True:
        try:
            msg = await nc.request(subject, data, timeout=1, headers=hdrs)
            ack: dict[str, Any] = json.loads(msg.data)
            ack.pop("duplicate", None)
            return ack
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            assert loop.time() < deadline, f"{subject} not acknowledged"
            await asyncio.sleep(0.05)


def test_r3_stream(shared: ProcCluster) -> None:
    """An R3 stream: its cluster block, publishes through any server, purge, message
    delete and a leader stepdown, as nats-server answers them."""
    names = {s.name for s in shared}

    async def run() -> None:
        nc2, nc1 = await shared.connect(2), await shared.connect(1)
        try:
            body = {"name": "REP", "subjects": ["rep.>"], "num_replicas": 3}
            created = await js_request(nc2, "$JS.API.STREAM.CREATE.REP", body)
            assert created["did_create"] is True and created["config"]["num_replicas"] == 3
            info = await _stream_leader(nc1, "REP")
            block = info["cluster"]
            assert set(block) == {
                "name",
                "raft_group",
                "leader",
                "leader_since",
                "system_account",
                "traffic_account",
                "replicas",
            }
            assert block["name"] == CLUSTER_NAME and block["leader"] in names
            assert re.fullmatch(r"S-R3F-[0-9A-Za-z]{8}", block["raft_group"]), block
            assert block["system_account"] is True
            reps = block["replicas"]
            assert sorted(r["name"] for r in reps) == sorted(names - {block["leader"]})
            for r in reps:
                assert {"name", "current", "active", "peer"} <= set(r)
                assert r["peer"] == peer_hash(r["name"])
            acks = [await _pub(nc1 if i % 2 else nc2, f"rep.{i % 2}", b"%d" % i) for i in range(6)]
            assert acks == [{"stream": "REP", "seq": i + 1} for i in range(6)]
            purged = await js_request(nc2, "$JS.API.STREAM.PURGE.REP", {"filter": "rep.0"})
            assert purged == {
                "type": "io.nats.jetstream.api.v1.stream_purge_response",
                "success": True,
                "purged": 3,
            }
            deleted = await js_request(nc1, "$JS.API.STREAM.MSG.DELETE.REP", {"seq": 2})
            assert deleted == {
                "type": "io.nats.jetstream.api.v1.stream_msg_delete_response",
                "success": True,
            }
            info = await js_request(nc1, "$JS.API.STREAM.INFO.REP")
            assert (info["state"]["messages"], info["state"]["last_seq"]) == (2, 6)
            old = info["cluster"]["leader"]
            down = await js_request(nc2, "$JS.API.STREAM.LEADER.STEPDOWN.REP")
            assert down == {
                "type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
                "success": True,
            }
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while (await _stream_leader(nc1, "REP"))["cluster"]["leader"] == old:
                assert loop.time() < deadline, "the leader did not change"
                await asyncio.sleep(0.1)
            assert (await _pub(nc1, "rep.1", b"after"))["seq"] == 7
            gone = await js_request(nc2, "$JS.API.STREAM.DELETE.REP")
            assert gone == {
                "type": "io.nats.jetstream.api.v1.stream_delete_response",
                "success": True,
            }
        finally:
            await nc1.close()
            await nc2.close()

    asyncio.run(run())


def test_r3_durable_consumer(shared: ProcCluster) -> None:
    """A durable pull consumer of an R3 stream: created, fetched from, acknowledged with
    ack-sync, stepped down and deleted through another server, as nats-server answers."""
    names = {s.name for s in shared}

    async def run() -> None:
        nc = await shared.connect(2)
        try:
            body = {"name": "RDC", "subjects": ["rdc.>"], "num_replicas": 3}
            assert "error" not in await js_request(nc, "$JS.API.STREAM.CREATE.RDC", body)
            await _stream_leader(nc, "RDC")
            for i in range(4):
                assert (await _pub(nc, "rdc.a", b"%d" % i))["seq"] == i + 1
            durable = {
                "stream_name": "RDC",
                "config": {"durable_name": "D", "ack_policy": "explicit"},
            }
            created = await js_request(nc, "$JS.API.CONSUMER.CREATE.RDC.D", durable)
            assert created["type"] == "io.nats.jetstream.api.v1.consumer_create_response"
            assert created["name"] == "D" and created["num_pending"] == 4, created
            block = created["cluster"]
            assert block["name"] == CLUSTER_NAME and block["leader"] in names, block
            assert sorted(r["name"] for r in block["replicas"]) == sorted(names - {block["leader"]})
            got = await _pull(nc, "RDC", "D", 2)
            assert [m.data for m in got] == [b"0", b"1"]
            assert (await nc.request(got[0].reply, b"+ACK", timeout=5)).data == b""
            info = await js_request(nc, "$JS.API.CONSUMER.INFO.RDC.D")
            assert info["ack_floor"] == {"consumer_seq": 1, "stream_seq": 1} | (
                {"last_active": info["ack_floor"]["last_active"]}
                if "last_active" in info["ack_floor"]
                else {}
            ), info
            assert (info["num_ack_pending"], info["num_pending"]) == (1, 2), info
            old = info["cluster"]["leader"]
            down = await js_request(nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.RDC.D")
            assert down == {
                "type": "io.nats.jetstream.api.v1.consumer_leader_stepdown_response",
                "success": True,
            }
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 15
            while True:  # a new consumer leader, with the state
                try:
                    info = await js_request(nc, "$JS.API.CONSUMER.INFO.RDC.D", timeout=1)
                    if info.get("cluster", {}).get("leader") not in (None, old):
                        break
                except nats.errors.TimeoutError:
                    pass
                assert loop.time() < deadline, "no new consumer leader after the stepdown"
                await asyncio.sleep(0.2)
            assert info["ack_floor"]["stream_seq"] == 1, info
            gone = await js_request(nc, "$JS.API.CONSUMER.DELETE.RDC.D")
            assert gone == {
                "type": "io.nats.jetstream.api.v1.consumer_delete_response",
                "success": True,
            }
            assert "error" not in await js_request(nc, "$JS.API.STREAM.DELETE.RDC")
        finally:
            await nc.close()

    asyncio.run(run())


def test_r3_workqueue_consumer(shared: ProcCluster) -> None:
    """A workqueue R3 stream: what its durable consumer acknowledges leaves the stream, and
    the stream info through another server says so, as nats-server answers."""

    async def run() -> None:
        nc = await shared.connect(2)
        try:
            body = {"name": "RWQ", "subjects": ["rwq.>"], "num_replicas": 3,
                    "retention": "workqueue"}  # fmt: skip
            assert "error" not in await js_request(nc, "$JS.API.STREAM.CREATE.RWQ", body)
            await _stream_leader(nc, "RWQ")
            cfg = {"durable_name": "W", "ack_policy": "explicit"}
            created = await js_request(
                nc, "$JS.API.CONSUMER.CREATE.RWQ.W", {"stream_name": "RWQ", "config": cfg}
            )
            assert created["name"] == "W", created
            for i in range(5):
                assert (await _pub(nc, "rwq.a", b"%d" % i))["seq"] == i + 1
            for m in await _pull(nc, "RWQ", "W", 3):
                assert (await nc.request(m.reply, b"+ACK", timeout=5)).data == b""
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while True:
                info = await js_request(nc, "$JS.API.STREAM.INFO.RWQ")
                st = info["state"]
                if st["messages"] == 2:
                    break
                assert loop.time() < deadline, st
                await asyncio.sleep(0.1)
            assert (st["first_seq"], st["last_seq"], st["consumer_count"]) == (4, 5, 1), st
            # a second consumer with an overlapping filter: nats-server's error
            dup = await js_request(
                nc,
                "$JS.API.CONSUMER.CREATE.RWQ.X",
                {"stream_name": "RWQ", "config": {"durable_name": "X", "ack_policy": "explicit"}},
            )
            assert dup["error"]["err_code"] == 10099, dup
            assert "error" not in await js_request(nc, "$JS.API.STREAM.DELETE.RWQ")
        finally:
            await nc.close()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("request_body", "description"),
    [
        ({"num_replicas": 5}, NO_PEERS),
        ({"placement": {"tags": ["nope"]}}, f"{NO_PEERS}, tags not matched ['nope']"),
        # Several unmatched tags come in either order (nats-server keeps them in a Go map).
        (
            {"placement": {"tags": ["n:2", "n:1"]}},
            {
                f"{NO_PEERS}, tags not matched ['n:1', 'n:2']",
                f"{NO_PEERS}, tags not matched ['n:2', 'n:1']",
            },
        ),
        ({"placement": {"cluster": "elsewhere"}}, NO_PEERS),
    ],
    ids=["R5", "unknown-tag", "two-servers-tags", "unknown-cluster"],
)
def test_placement_errors(
    shared: ProcCluster, request_body: dict[str, Any], description: str
) -> None:
    async def run() -> dict[str, Any]:
        nc = await shared.connect(2)
        try:
            body = {"name": "NOPLACE", "subjects": ["noplace"], **request_body}
            answer: dict[str, Any] = await js_request(nc, "$JS.API.STREAM.CREATE.NOPLACE", body)
            return answer
        finally:
            await nc.close()

    answer = asyncio.run(run())
    allowed = description if isinstance(description, set) else {description}
    assert answer["type"] == "io.nats.jetstream.api.v1.stream_create_response"
    assert set(answer) == {"type", "error"}
    assert answer["error"]["description"] in allowed, answer
    assert (answer["error"]["code"], answer["error"]["err_code"]) == (400, 10005)


def test_placement_tags_are_case_insensitive(shared: ProcCluster) -> None:
    async def run() -> dict[str, Any]:
        nc = await shared.connect(2)
        try:
            body = {"name": "UPPER", "subjects": ["upper"], "placement": {"tags": ["N:1"]}}
            answer: dict[str, Any] = await js_request(nc, "$JS.API.STREAM.CREATE.UPPER", body)
            await js_request(nc, "$JS.API.STREAM.DELETE.UPPER")
            return answer
        finally:
            await nc.close()

    assert asyncio.run(run())["cluster"] == {"name": CLUSTER_NAME, "leader": f"{_kind(shared)}-1"}


def test_jsz_meta_cluster_and_healthz(shared: ProcCluster) -> None:
    leader = _leader(shared)
    follower = next(s for s in shared if s is not leader)
    for s in shared:
        meta = s.jsz()["meta_cluster"]
        assert set(meta) == {
            "name",
            "leader",
            "peer",
            "replicas",
            "cluster_size",
            "quorum_needed",
            "pending",
            "pending_requests",
            "pending_infos",
            "snapshot",
        }
        assert (meta["name"], meta["leader"]) == (CLUSTER_NAME, leader.name)
        # ``peer`` is the leader's id, whichever server answers.
        assert meta["peer"] == peer_hash(leader.name)
        assert (meta["cluster_size"], meta["quorum_needed"]) == (3, 2)
        # The other two servers, each with its peer id; never the answering server itself.
        assert sorted((r["name"], r["peer"]) for r in meta["replicas"]) == sorted(
            (o.name, peer_hash(o.name)) for o in shared if o is not s
        )
        assert s.http("/healthz") == (200, {"status": "ok"})
        assert s.http("/healthz?js-enabled-only=true") == (200, {"status": "ok"})
    assert follower.http("/jsz?leader-only=true") == (400, "filtered response: not leader")
    status, body = leader.http("/jsz?leader-only=true")
    assert status == 200 and body["meta_cluster"]["leader"] == leader.name


def test_jsz_stream_leader_only_and_raft_groups(shared: ProcCluster) -> None:
    """``/jsz?stream-leader-only=true``: an R3 stream is listed by its leader alone;
    ``raft=true``: each replica's detail names the stream's Raft group, and the servers'
    ``streams_leader`` counts add up to one leader per stream."""

    async def run() -> dict[str, Any]:
        nc = await shared.connect(2)
        try:
            body = {"name": "JZ", "subjects": ["jz.>"], "num_replicas": 3}
            await js_request(nc, "$JS.API.STREAM.CREATE.JZ", body)
            info = await _stream_leader(nc, "JZ")
            for s in shared:  # (every replica has applied the stream)

                async def listed(s: ServerProc = s) -> bool:
                    return _jz(s, "streams=true") is not None

                await _until(f"JZ on {s.name}", listed)
            names = await js_request(nc, "$JS.API.STREAM.NAMES", {})
            return {"leader": info["cluster"]["leader"], "streams": len(names["streams"])}
        finally:
            await nc.close()

    try:
        seen = asyncio.run(run())
        group = None
        led = 0
        for s in shared:
            mine = _jz(s, "streams=true&stream-leader-only=true")
            assert (mine is not None) == (s.name == seen["leader"]), s.name
            detail = _jz(s, "streams=true&raft=true")
            assert detail is not None
            group = group or detail["stream_raft_group"]
            assert detail["stream_raft_group"] == group
            assert re.fullmatch(r"S-R3F-[0-9A-Za-z]{8}", group), group
            assert "stream_raft_group" not in (_jz(s, "streams=true") or {})
            led += s.jsz("acc=A&streams=true&raft=true").get("streams_leader", 0)
        assert led == seen["streams"]
    finally:
        asyncio.run(_delete(shared, "JZ"))


def _jz(s: ServerProc, query: str) -> dict[str, Any] | None:
    """Stream JZ's detail in account A's /jsz with ``query`` (None when not listed)."""
    doc = s.jsz(f"acc=A&{query}")
    for d in doc.get("account_details") or []:
        for sd in d.get("stream_detail") or []:
            if sd["name"] == "JZ":
                return dict(sd)
    return None


async def _delete(c: ProcCluster, name: str) -> None:
    nc = await c.connect(2)
    try:
        await js_request(nc, f"$JS.API.STREAM.DELETE.{name}")
    finally:
        await nc.close()


def test_meta_leader_stepdown_needs_the_system_account(shared: ProcCluster) -> None:
    before = _leader(shared)
    asker = next(s for s in shared if s is not before).index

    async def run() -> dict[str, Any]:
        nc = await shared.connect(asker)
        sysc = await shared.connect(asker, system=True)
        try:
            # An ordinary account gets no answer at all, not an error document.
            assert await _no_answer(nc, "$JS.API.META.LEADER.STEPDOWN")
            assert shared[await shared.meta_leader()] is before
            answer: dict[str, Any] = await js_request(sysc, "$JS.API.META.LEADER.STEPDOWN")
            return answer
        finally:
            await nc.close()
            await sysc.close()

    ok = {"type": "io.nats.jetstream.api.v1.meta_leader_stepdown_response", "success": True}
    assert asyncio.run(run()) == ok
    # The hand-over takes a moment (the new leader campaigns once caught up): right after
    # the answer every server may still name the old one, so wait for a new agreed leader.
    # A transfer that does not complete in time is abandoned (the old leader goes on, as
    # Raft's leader transfer does): on a loaded machine that happens, and a second
    # stepdown is asked then.
    for attempt in range(3):
        deadline = time.monotonic() + 10
        while _leader(shared) is before and time.monotonic() < deadline:
            time.sleep(0.1)
        if _leader(shared) is not before:
            break
        assert attempt < 2, "the meta leader did not change"

        async def again() -> dict[str, Any]:
            sysc = await shared.connect(asker, system=True)
            try:
                return dict(await js_request(sysc, "$JS.API.META.LEADER.STEPDOWN"))
            finally:
                await sysc.close()

        assert asyncio.run(again()) == ok
    asyncio.run(shared.wait_js_ready())


async def _pull(nc: NATS, stream: str, consumer: str, batch: int) -> list[Msg]:
    """A pull of ``batch`` messages that are there to take. The request is sent again when
    nothing at all comes back: the consumer was just created, and its leader's interest in
    pull requests may not have crossed the routes to the client's server yet (nats-server
    drops such a request silently); a request that had arrived would be answered at once."""
    sub = await nc.subscribe(nc.new_inbox())
    body = json.dumps({"batch": batch, "expires": 2 * 10**9}).encode()
    try:
        for _attempt in range(5):
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", body, sub.subject)
            try:
                first = await sub.next_msg(timeout=1.5)
            except nats.errors.TimeoutError:
                continue
            return [first] + [await sub.next_msg(timeout=10) for _ in range(batch - 1)]
        raise AssertionError(f"no answer to a pull from {stream}.{consumer}")
    finally:
        await sub.unsubscribe()


async def _until(what: str, check: Any, timeout: float = 30.0) -> Any:
    """Poll the coroutine function ``check`` until it returns something truthy."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = await check()
        if got:
            return got
        if loop.time() > end:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.2)


def test_losing_servers(own: ProcCluster) -> None:
    """The stream's server dies and comes back; then the meta leader dies; then two of three."""
    kind = _kind(own)
    leader = _leader(own)
    # The stream's server and the client's server are both meta followers.
    owner, client = (s for s in own if s is not leader)
    stream = _stream("LOST", owner.index)

    async def run() -> None:
        nc = await own.connect(client.index)
        sysc = await own.connect(client.index, system=True)
        elected: list[dict[str, Any]] = []

        async def on_elected(m: Msg) -> None:
            elected.append(json.loads(m.data))

        await sysc.subscribe("$JS.EVENT.ADVISORY.DOMAIN.LEADER_ELECTED", cb=on_elected)
        await sysc.flush()
        try:
            created = await js_request(nc, "$JS.API.STREAM.CREATE.LOST", stream)
            assert created["cluster"]["leader"] == owner.name
            # nats-server answers the create before the stream's interest has crossed the
            # route to the client's server: a publish at once may find no responders
            # (no responders: nothing was stored, so the retry stores it once)
            for i in range(3):
                await _until("stored", lambda i=i: _stored(nc, "LOST.x", b"%d" % i))

            # The R1 stream's server is gone: its subjects have no responders, its info no
            # answer, and the lists name it as missing while the meta layer still counts it.
            owner.kill()
            await _until("no responders", lambda: _no_responders(nc, "LOST.x"))
            assert await _no_answer(nc, "$JS.API.STREAM.INFO.LOST")
            # The list waits for the dead server's part, as long as seconds.
            listed = await js_request(nc, "$JS.API.STREAM.LIST", timeout=15)
            assert listed["missing"] == ["LOST"]
            assert (await js_request(nc, "$JS.API.STREAM.NAMES"))["streams"] == ["LOST"]
            assert (await js_request(nc, "$JS.API.INFO"))["streams"] == 1
            assert client.http("/healthz") == (200, {"status": "ok"})

            owner.start()
            back = await _until("stream back", lambda: _info(nc, "LOST"))
            assert back["state"]["messages"] == 3
            assert back["cluster"] == {"name": CLUSTER_NAME, "leader": owner.name}

            # kill -9 of the meta leader: creates work again through the client's server,
            # and the system account hears who leads now (by peer id).
            leader.kill()
            await _until("create after failover", lambda: _created(nc, "AFTER"))
            new_leader = own[await own.meta_leader()]
            assert new_leader is not leader
            await _until("leader advisory", lambda: _true(bool(elected)))
            assert elected[-1]["type"] == "io.nats.jetstream.advisory.v1.domain_leader_elected"
            assert elected[-1]["leader"] == peer_hash(new_leader.name)
            assert elected[-1]["cluster"] == CLUSTER_NAME
            leader.start()
            await own.wait_js_ready()
            # The old leader is back as a follower of the new one.
            assert own[await own.meta_leader()] is new_leader

            # Two of three gone: no meta leader, 10008 for what needs one, /healthz 503.
            for s in own:
                if s is not client:
                    s.kill()
            await _until("10008", lambda: _unavailable(nc))
            assert await js_request(nc, "$JS.API.STREAM.CREATE.Q", {"name": "Q"}) == {
                "type": "io.nats.jetstream.api.v1.stream_create_response",
                "error": UNAVAILABLE,
            }
            assert client.http("/healthz") == (
                503,
                {
                    "status": "unavailable",
                    "error": "JetStream has not established contact with a meta leader",
                },
            )
            assert client.http("/healthz?js-enabled-only=true") == (200, {"status": "ok"})
            meta = client.jsz()["meta_cluster"]
            assert "leader" not in meta and "peer" not in meta
            assert sorted(r["name"] for r in meta["replicas"]) == [f"{kind}-{i}" for i in range(3)]
        finally:
            await nc.close()
            await sysc.close()

    asyncio.run(run())


async def _true(value: bool) -> bool:
    return value


async def _stored(nc: NATS, subject: str, data: bytes) -> bool:
    """Publish ``data`` and wait for its PubAck; False when nobody listens (yet)."""
    try:
        await nc.request(subject, data, timeout=5)
    except nats.errors.NoRespondersError:
        return False
    return True


async def _no_responders(nc: NATS, subject: str) -> bool:
    try:
        await nc.request(subject, b"", timeout=2)
    except nats.errors.NoRespondersError:
        return True
    except nats.errors.TimeoutError:
        return False
    return False


async def _info(nc: NATS, stream: str) -> dict[str, Any] | None:
    try:
        got: dict[str, Any] = await js_request(nc, f"$JS.API.STREAM.INFO.{stream}", timeout=1)
    except nats.errors.TimeoutError:
        return None
    return None if "error" in got else got


async def _created(nc: NATS, stream: str) -> bool:
    try:
        got = await js_request(nc, f"$JS.API.STREAM.CREATE.{stream}", {"name": stream}, timeout=1)
    except nats.errors.TimeoutError:
        return False
    return "error" not in got


async def _unavailable(nc: NATS) -> bool:
    try:
        got = await js_request(nc, "$JS.API.INFO", timeout=1)
    except nats.errors.TimeoutError:
        return False
    return bool(got.get("error") == UNAVAILABLE)


@pytest.mark.parametrize("verb", ["REMOVE", "EVACUATE"])
def test_r3_peer_remove_refusals(shared: ProcCluster, verb: str) -> None:
    """``STREAM.PEER.REMOVE`` where it cannot be done: on three servers an R3 stream's
    peer has no free server to take its place, and nats-server refuses rather than shrink
    the stream (as natsd does); a bad request, a server that is not a peer, a missing
    stream. ``EVACUATE`` (nats-server 2.15) gives the same answers in its own type."""
    names = sorted(s.name for s in shared)

    async def run() -> None:
        nc = await shared.connect(2)
        try:
            body = {"name": "PR", "subjects": ["pr.>"], "num_replicas": 3}
            assert "error" not in await js_request(nc, "$JS.API.STREAM.CREATE.PR", body)
            await _stream_leader(nc, "PR")
            rtype = f"io.nats.jetstream.api.v1.stream_{verb.lower()}_peer_response"

            async def remove(stream: str, req: Any) -> dict[str, Any]:
                out = await js_request(nc, f"$JS.API.STREAM.PEER.{verb}.{stream}", req)
                assert out["type"] == rtype, out
                return dict(out["error"])

            bad = {"code": 400, "err_code": 10003, "description": "bad request"}
            assert await remove("PR", b"") == bad
            assert await remove("PR", {"peer": ""}) == bad
            assert await remove("PR", {"peer": "nobody"}) == {
                "code": 400,
                "err_code": 10040,
                "description": "peer not a member",
            }
            assert await remove("NOPE", {"peer": names[0]}) == {
                "code": 404,
                "err_code": 10059,
                "description": "stream not found",
            }
            assert await remove("PR", {"peer": names[0]}) == {
                "code": 503,
                "err_code": 10075,
                "description": "peer remap failed",
            }
            info = await js_request(nc, "$JS.API.STREAM.INFO.PR")
            block = info["cluster"]
            assert sorted([block["leader"]] + [r["name"] for r in block["replicas"]]) == names
            assert "error" not in await js_request(nc, "$JS.API.STREAM.DELETE.PR")
        finally:
            await nc.close()

    asyncio.run(run())


_RAFTZ_KEYS = {
    "id", "state", "size", "quorum_needed", "committed", "applied", "leader",
    "ever_had_leader", "term", "pterm", "pindex", "system_account", "traffic_account",
    "wal", "peers",
}  # fmt: skip


def test_raftz_shows_the_meta_and_stream_groups(shared: ProcCluster) -> None:
    """/raftz (nats-server 2.11+): the meta group under the system account as ``_meta_``, a
    stream's group under the stream's account by its ``raft_group``; one leader per group
    that every member names; the ``acc`` and ``group`` filters."""
    meta_leader = _leader(shared)

    async def run() -> tuple[str, str, list[dict[str, Any]], list[Any]]:
        nc = await shared.connect(2)
        try:
            body = {"name": "RZ", "subjects": ["rz.>"], "num_replicas": 3}
            await js_request(nc, "$JS.API.STREAM.CREATE.RZ", body)
            info = await _stream_leader(nc, "RZ")
            for i in range(5):
                await _pub(nc, "rz.x", b"%d" % i)
            group, leader = info["cluster"]["raft_group"], info["cluster"]["leader"]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while True:  # until every member has applied what the leader committed
                docs = [await asyncio.to_thread(s.http, "/raftz?acc=A") for s in shared]
                rows = [d[1].get("A", {}).get(group, {}) for d in docs]
                if all(r and r["applied"] == r["committed"] for r in rows) and (
                    len({r["committed"] for r in rows}) == 1
                ):
                    break
                assert loop.time() < deadline, docs
                await asyncio.sleep(0.1)
            metas = [await asyncio.to_thread(s.http, "/raftz") for s in shared]
            filtered = [
                await asyncio.to_thread(shared[0].http, q)
                for q in (f"/raftz?acc=A&group={group}", "/raftz?group=NOPE", "/raftz?acc=NONE")
            ]
            await js_request(nc, "$JS.API.STREAM.DELETE.RZ")
            return group, leader, [d[1] for d in docs] + [m[1] for m in metas], filtered
        finally:
            await nc.close()

    group, leader, docs, filtered = asyncio.run(run())
    streams, metas = docs[:3], docs[3:]
    for kind, rows, lead in (
        ("stream", [d["A"][group] for d in streams], leader),
        ("meta", [d["SYS"]["_meta_"] for d in metas], meta_leader.name),
    ):
        for d in streams if kind == "stream" else metas:
            assert set(d) == ({"A"} if kind == "stream" else {"SYS"}), kind
        for s, row in zip(shared, rows, strict=True):
            assert set(row) >= _RAFTZ_KEYS, (kind, sorted(row))
            assert row["id"] == peer_hash(s.name)
            assert row["state"] == ("LEADER" if s.name == lead else "FOLLOWER"), (kind, row)
            assert row["leader"] == peer_hash(lead)
            # (etcd's Raft, natsd's, records a vote only where one was cast this term)
            assert row.get("voted_for", row["leader"]) in {peer_hash(o.name) for o in shared}
            assert ("leader_since" in row) == (s.name == lead)
            assert (row["size"], row["quorum_needed"]) == (3, 2)
            assert row["system_account"] is True and row["traffic_account"] == "SYS"
            assert row["ever_had_leader"] is True
            assert row["pindex"] >= row["committed"] >= row["applied"] > 0
            assert row["wal"]["last_seq"] == row["pindex"]
            assert row["wal"]["consumer_count"] == 0
            # the other members by peer id; the leader knows how far each got and when it
            # last heard from it, a follower only when it last heard from the leader
            assert set(row["peers"]) == {peer_hash(o.name) for o in shared if o is not s}
            for o in shared:
                if o is s:
                    continue
                p = row["peers"][peer_hash(o.name)]
                keys = {"name", "known"}
                if s.name == lead:
                    keys |= {"last_replicated_index", "last_seen"}
                    assert 0 < p["last_replicated_index"] <= row["pindex"]
                elif o.name == lead:
                    keys.add("last_seen")
                assert (set(p), p["name"], p["known"]) == (keys, o.name, True), (kind, s.name, p)
        assert len({r["term"] for r in rows}) == 1, kind
    assert filtered[0][0] == 200 and list(filtered[0][1]["A"]) == [group]
    assert filtered[1:] == [(200, {}), (200, {})]
