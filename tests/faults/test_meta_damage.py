"""The meta group under damage: bits flipped in, or the node WAL cut short at, the meta
group's records (its entries, its snapshot) on a minority and on a majority of three
embedded servers (Jepsen's NATS 2.12.1 analysis lost a whole stream to a meta snapshot
damaged on two of five nodes: nats-server#7556).

Each case builds the same cluster: an R3 stream, and an R1 stream on each server, each
with messages and a durable consumer; for the snapshot cases the meta group is compacted
first (its state is then a SNAPSHOT record) and one more R1 stream created after it (an
entry). n1 is made the leader of the meta group and of the R3 stream, and the servers
stop cleanly, n1 last (so the damaged servers' logs end with meta records: their shutdown
moves no leadership). The damage is done to the stopped servers' WALs, the records found
by walking them (as ``test_bitflips_r3`` does for a stream's), and the servers start again:

* ``entries``: bits flipped in the body of the meta entries record of the first stream
  created (records after it check out: damage, not a torn tail);
* ``snapshot``: bits flipped in the body of the latest meta snapshot;
* ``truncate``: the WAL cut inside the meta entries record of the last stream created:
  the meta group's tail is gone, after a clean close;
* ``truncate-deep`` (minority only): the WAL cut inside the meta entries record of the
  first stream created: every later record goes, the R3 stream's group's among them.

What must hold:

* no stream is ever deleted or set aside because of the damage: every server keeps every
  stream it held, its messages and its consumer;
* a minority (one server of three) repairs from the others: it says what is damaged,
  takes the meta state from the leader, ends with the same meta state, and every stream
  takes publishes again;
* a majority (two of three) is refused: each damaged server logs an error saying what is
  damaged and what to do, no meta leader is elected while they are damaged (they vote for
  no one), and none acts on its meta state; the damaged ones start first, the healthy one
  a while later. Then the operator does what the error says: drops one damaged server's
  meta records (``natsd.jetstream.cluster.rejoin``) and starts it again; it votes for the
  healthy server, and every server is repaired from it.

Before the fix: nothing was logged for any case; with bits flipped on a majority the meta
group was left without a leader, silently; cut short on a majority, the damaged servers
elected one of themselves with the short log, and set aside the streams it had lost (the
Jepsen failure). The seed (``NATSD_FAULT_SEED`` replays) chooses the bits and the cuts.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest
from embedded_cluster import EmbeddedJsCluster, publish_acked, replica_leader, until
from embedded_cluster import api_request as req

from faults.run import FIXED_SEED, fault_seed
from natsd.cluster.group import raft_id
from natsd.cluster.meta import META_GROUP
from natsd.jetstream.cluster import driver as driver_mod
from natsd.jetstream.cluster import rejoin
from natsd.storage import wal as walmod

pytestmark = pytest.mark.timeout(90)

R3 = "R3"
MSGS = 10
# a server's streams: name -> (messages, consumers)
Held = dict[str, tuple[int, list[str]]]


@dataclass
class Rec:
    path: Path
    offset: int
    length: int
    kind: int
    group: bytes
    body: bytes


def wal_records(root: Path) -> list[Rec]:
    """Every record of a stopped server's node WAL, in order."""
    out = []
    for seg in sorted((root / "jetstream" / "_cluster" / "wal").glob("*.wal")):
        raw = seg.read_bytes()
        buf = memoryview(raw)
        pos = walmod.SEG_HDR_SIZE
        while pos < len(raw):
            rec = walmod._check_record(buf, pos)
            assert rec is not None, f"{seg}: a record that does not check out at {pos}"
            length, kind, glen = rec
            start = pos + walmod.REC_HDR_SIZE
            group = raw[start : start + glen]
            body = raw[start + glen : pos + length - 4]
            out.append(Rec(seg, pos, length, kind, group, body))
            pos += length
    return out


def damage(root: Path, how: str, rng: random.Random) -> str:
    """Damage the meta group's records in a stopped server's WAL (see the module
    docstring); returns what was done."""
    recs = wal_records(root)
    creates = [r for r in recs if r.group == META_GROUP and r.kind == walmod.ENTRIES
               and b'"op":"stream"' in r.body]  # fmt: skip
    if how == "snapshot":
        target = [r for r in recs if r.group == META_GROUP and r.kind == walmod.SNAPSHOT
                  and b'"streams"' in r.body][-1]  # fmt: skip
    elif how == "truncate":
        target = creates[-1]
        later = {r.group for r in recs if r.offset > target.offset}
        assert later == {META_GROUP}, f"records of other groups after the cut: {later}"
    else:
        target = creates[0]
    data = bytearray(target.path.read_bytes())
    body_at = target.offset + walmod.REC_HDR_SIZE + len(target.group)
    body_end = target.offset + target.length - 4
    if how.startswith("truncate"):
        cut = rng.randrange(target.offset + 1, body_end)
        target.path.write_bytes(bytes(data[:cut]))
        return f"{target.path.name}: cut at byte {cut} of {len(data)}, in a meta entries record"
    flips = rng.randint(1, 3)
    for _ in range(flips):
        k = rng.randrange(body_at, body_end)
        data[k] ^= 1 << rng.randrange(8)
    target.path.write_bytes(bytes(data))
    kind = "snapshot" if how == "snapshot" else "entries"
    return f"{target.path.name}: {flips} bits flipped in the meta {kind} record at {target.offset}"


async def _stream(t: EmbeddedJsCluster, via: str, name: str, replicas: int) -> None:
    """A stream created through ``via`` (an R1 stream is placed there: the requester's
    server comes first among equals), with MSGS messages and a durable consumer."""
    nc = await nats.connect(t.url(via))
    try:
        subject = f"{name.lower()}.x"
        cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": replicas}
        out = await req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg, timeout=10)
        assert "error" not in out, out
        if replicas == 1:
            assert out["cluster"]["leader"] == via, out
        for i in range(MSGS):
            await publish_acked(nc, subject, b"%d" % i)
        durable = {"stream_name": name, "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await req(nc, f"$JS.API.CONSUMER.CREATE.{name}.D", durable)
    finally:
        await nc.close()


async def _lead_from(t: EmbeddedJsCluster, name: str) -> None:
    """Make ``name`` the leader of the meta group and of the R3 stream's group."""
    me = raft_id(name)
    await until(lambda: t.leader() != "" and replica_leader(t, R3) != "")
    jc = t.servers[t.leader()].js_cluster
    if jc.group.node.leader() != me:
        jc.group.node.transfer_leader(me)
        jc.raft.kick()
    await until(lambda: t.leader() == name)
    groups = t.servers[replica_leader(t, R3)].js_cluster.stream_groups
    (m,) = groups.members.values()
    if m.group.node.leader() != me:
        m.group.node.transfer_leader(me)
        groups.raft.kick()
    await until(lambda: replica_leader(t, R3) == name)

    # and every member knows the new leader's first entry committed, and the consumer's
    # first state (STATE_FLUSH_DELAY after its creation): nothing more of either group is
    # written before the servers stop
    await asyncio.sleep(0.5)

    def settled() -> bool:
        servers = [s.js_cluster for s in t.servers.values()]
        metas = {(jc.group.node.committed(), jc.group.node.last_index()) for jc in servers}
        r3s = {
            (x.group.node.committed(), x.group.node.last_index())
            for jc in servers
            for x in jc.stream_groups.members.values()
        }
        return len(metas) == 1 and len(r3s) == 1

    await until(settled)


async def populate(t: EmbeddedJsCluster, compact: bool) -> None:
    await _stream(t, "n1", R3, 3)
    await _lead_from(t, "n1")
    for name in t.names:
        await _stream(t, name, f"A{name}", 1)
    if compact:
        # every server snapshots its meta state: the streams are in the SNAPSHOT record
        for srv in t.servers.values():
            jc = srv.js_cluster
            await until(lambda jc=jc: jc._meta_compact_index() > 0)  # type: ignore[misc]
            jc.raft.host.compact(META_GROUP, jc._meta_compact_index(), jc.meta.snapshot())
        await _stream(t, "n2", "Bn2", 1)  # and an entry after it


def _held(t: EmbeddedJsCluster, name: str) -> Held:
    js = t.servers[name].jetstream
    assert js is not None
    ja = js.accounts["$G"]
    return {n: (s.store.state().msgs, sorted(s.consumers)) for n, s in ja.streams.items()}


def _meta_streams(t: EmbeddedJsCluster, name: str) -> dict[str, list[str]]:
    meta = t.servers[name].js_cluster.meta
    return {n: sorted(a.peers) for n, a in meta.streams.get("$G", {}).items()}


def _set_aside(tmp: Path) -> list[Path]:
    return sorted(tmp.rglob("set-aside/*"))


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.ERROR and "meta group" in r.getMessage()]  # fmt: skip


async def _before(t: EmbeddedJsCluster) -> dict[str, Held]:
    """What every server holds once the R3 replicas have converged."""
    await until(lambda: len({str(_held(t, n).get(R3)) for n in t.names}) == 1, timeout=15)
    return {n: _held(t, n) for n in t.names}


async def _check_intact(t: EmbeddedJsCluster, before: dict[str, Held]) -> None:
    for name, streams in before.items():
        await until(lambda n=name, s=streams: _held(t, n) == s, timeout=20)  # type: ignore[misc]


async def _publish_everywhere(t: EmbeddedJsCluster, before: dict[str, Held]) -> None:
    """Every stream takes a publish again, at the sequence after its last message."""
    nc = await nats.connect(t.url("n1"))
    try:
        for s in sorted({s for streams in before.values() for s in streams}):
            ack = await publish_acked(nc, f"{s.lower()}.x", b"after", within=20)
            assert ack.get("seq") == MSGS + 1, (s, ack)
    finally:
        await nc.close()


async def _stop_all(t: EmbeddedJsCluster) -> None:
    for name in ("n3", "n2", "n1"):
        if name in t.servers:
            await t.stop(name)


async def _setup(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> tuple[EmbeddedJsCluster, random.Random, dict[str, Held], dict[str, list[str]]]:
    # orphans are set aside half a second after the meta state is current (not 5 s), so
    # that a wrong one would show within the test
    monkeypatch.setattr(driver_mod, "ORPHANS_AFTER", 0.5)
    seed = fault_seed(FIXED_SEED)
    print(f"seed={seed} (replay: NATSD_FAULT_SEED={seed})")
    t = EmbeddedJsCluster(tmp)
    await t.start_all()
    await populate(t, compact=how == "snapshot")
    before = await _before(t)
    return t, random.Random(seed), before, _meta_streams(t, "n1")


@pytest.mark.parametrize("how", ["entries", "snapshot", "truncate", "truncate-deep"])
async def test_meta_damage_on_a_minority_is_repaired_from_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    t, rng, before, meta_before = await _setup(tmp_path, monkeypatch, how)
    victim = "n3"
    try:
        await _stop_all(t)
        print(victim, damage(tmp_path / victim, how, rng))
        caplog.clear()
        for name in t.names:
            await t.start(name)
        await until(lambda: t.leader() != "", timeout=20)
        await until(lambda: t.servers[victim].js_cluster._reconciled, timeout=20)
        assert _meta_streams(t, victim) == meta_before
        await asyncio.sleep(1.5)  # the orphan check has run
        assert _set_aside(tmp_path) == []
        await _check_intact(t, before)
        errors = _errors(caplog)
        assert errors and all("are damaged" in e for e in errors), errors
        print(errors[0])
        await _publish_everywhere(t, before)
    finally:
        await _stop_all(t)


@pytest.mark.parametrize("how", ["entries", "snapshot", "truncate"])
async def test_meta_damage_on_a_majority_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    t, rng, before, meta_before = await _setup(tmp_path, monkeypatch, how)
    damaged = ["n2", "n3"]
    try:
        await _stop_all(t)
        for name in damaged:
            print(name, damage(tmp_path / name, how, rng))
        caplog.clear()
        # the damaged servers come back first, the healthy one a while later
        for name in damaged:
            await t.start(name)
        await asyncio.sleep(3.0)
        await t.start("n1")
        await asyncio.sleep(3.0)
        print("meta leader:", t.leader() or "none")
        assert t.leader() == "", "damaged servers elected a meta leader"
        assert _set_aside(tmp_path) == []
        for name in t.names:
            assert _held(t, name) == before[name], name
        errors = _errors(caplog)
        assert len(errors) == 2, errors
        for e in errors:
            assert "are damaged" in e and "natsd.jetstream.cluster.rejoin" in e, e
        print(errors[0])
        # what the error says to do: drop one damaged server's meta records, start it again
        await t.stop("n2")
        print(rejoin.drop_meta(str(tmp_path / "n2")))
        await t.start("n2")
        await until(lambda: t.leader() == "n1", timeout=20)
        for name in t.names:
            await until(lambda n=name: t.servers[n].js_cluster._reconciled, timeout=20)  # type: ignore[misc]
            assert _meta_streams(t, name) == meta_before, name
        await asyncio.sleep(1.5)
        assert _set_aside(tmp_path) == []
        await _check_intact(t, before)
        await _publish_everywhere(t, before)
    finally:
        await _stop_all(t)
