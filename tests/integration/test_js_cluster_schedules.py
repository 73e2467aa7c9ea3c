"""Message schedules on a replicated stream whose replica catches up from the leader's store
(an embedded R3 cluster, nats-py over real sockets): the schedules it copied, and the ones
that fired while it was away, are what its table holds when it comes to lead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import nats
from embedded_cluster import EmbeddedJsCluster, until
from embedded_cluster import api_request as _req
from embedded_cluster import log_first as _log_first
from embedded_cluster import publish_acked as _publish
from embedded_cluster import replica_leader as _leader
from embedded_cluster import stream_contents as _contents

from natsd.cluster.group import raft_id


def _at(seconds: float) -> str:
    t = datetime.now(UTC) + timedelta(seconds=seconds)
    return "@at " + t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _subjects(trio: EmbeddedJsCluster, name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for _seq, subject, _data, _ts in _contents(trio, name, "S"):
        out[subject] = out.get(subject, 0) + 1
    return out


async def test_a_replica_caught_up_from_the_store_fires_the_schedules_it_copied(
    trio: EmbeddedJsCluster,
) -> None:
    """A replica away while a schedule was published, and another one fired, catches up
    from the leader's store (its log was compacted past it): the messages come by copy, not
    through the applies that feed the schedule table, so the table is read again from the
    store. Led by it, the copied ``@at`` schedule fires once; the one that fired while it was
    away does not fire again."""
    for srv in trio.servers.values():
        srv.js_cluster.stream_groups.compact_every = 20
    cfg = {"name": "S", "subjects": ["s.>"], "num_replicas": 3, "allow_msg_schedules": True}
    nc = await nats.connect(trio.url("n1"))
    try:
        assert "error" not in await _req(nc, "$JS.API.STREAM.CREATE.S", cfg)
        await until(lambda: _leader(trio, "S") != "")
        early = {"Nats-Schedule": _at(1.5), "Nats-Schedule-Target": "s.tgt.early"}
        await _publish(nc, "s.sch.early", b"early", early)
        for i in range(30):
            await _publish(nc, "s.x", b"%d" % i)
        await until(lambda: all(len(_contents(trio, n, "S")) == 31 for n in trio.names))
    finally:
        await nc.close()
    lead = _leader(trio, "S")
    away = next(n for n in trio.names if n != lead)
    (m,) = trio.servers[away].js_cluster.stream_groups.members.values()
    held = m.group.node.last_index()
    await trio.stop(away)
    nc = await nats.connect(trio.url(lead))
    try:
        late = {"Nats-Schedule": _at(6), "Nats-Schedule-Target": "s.tgt.late"}
        await _publish(nc, "s.sch.late", b"late", late)
        # the early one fires while the replica is away (and purges its schedule)
        await until(lambda: _subjects(trio, lead).get("s.tgt.early") == 1)
        for i in range(60):
            await _publish(nc, "s.y", b"%d" % i)
        await until(lambda: all(_log_first(trio, n) > held + 1 for n in trio.servers))
    finally:
        await nc.close()
    srv = await trio.start(away)
    srv.js_cluster.stream_groups.compact_every = 20
    await until(lambda: _contents(trio, away, "S") == _contents(trio, lead, "S"), timeout=20)
    assert srv.js_cluster.stream_groups.catchup.completed >= 1
    # the replica that caught up leads before the late schedule's time
    js = trio.servers[lead].jetstream
    assert js is not None
    stream = js.accounts["$G"].streams["S"]
    groups = trio.servers[lead].js_cluster.stream_groups
    assert groups.stepdown(stream, among={raft_id(away)})
    await until(lambda: _leader(trio, "S") == away)
    got = _subjects(trio, away)
    assert "s.tgt.late" not in got and got.get("s.sch.late") == 1, got
    await until(lambda: _subjects(trio, away).get("s.tgt.late") == 1, timeout=15)
    got = _subjects(trio, away)
    # fired once each, and purged their schedules
    assert got.get("s.tgt.early") == 1 and got.get("s.tgt.late") == 1, got
    assert "s.sch.early" not in got and "s.sch.late" not in got, got
    await until(lambda: all(_subjects(trio, n) == got for n in trio.names))
