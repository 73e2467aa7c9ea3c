"""Catch-up from a leader's store (``jetstream/cluster/catchup``), between two stores in
one process: the wire format, a peer's bad input, and a whole transfer in small batches
(reconcile what the replica had, copy what it missed, never past the snapshot)."""

from __future__ import annotations

import asyncio
import random

import pytest

from natsd.core.scheduler import SYSTEM_CLOCK
from natsd.jetstream.cluster import catchup as cc
from natsd.jetstream.cluster.catchup import (
    CatchUp,
    CatchupError,
    Transfer,
    decode_packet,
    decode_snapshot,
    encode_msgs,
    encode_request,
    encode_runs,
    encode_snapshot,
)
from natsd.raft.types import Message, MessageType, Snapshot, SnapshotMetadata
from natsd.router.account import Account
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

GROUP = b"S:$G:C:1"
SOURCE, REPLICA, STRANGER = 0x11, 0x22, 0x33


def _store() -> MemoryStore:
    return MemoryStore(StoreConfig(name="C", subjects=["c.>"]))


def _contents(store: StreamStore, upto: int) -> list[tuple[int, str, bytes | None, bytes, int]]:
    out = []
    for seq in range(1, upto + 1):
        m = store.load_msg(seq)
        if m is not None:
            out.append((m.seq, m.subject, m.hdr, bytes(m.data), m.ts))
    return out


def test_snapshot_round_trip_and_refusals() -> None:
    consumers = {"D": (b'{"config":{}}', b'{"ack_floor":{"stream_seq":3}}')}
    snap = decode_snapshot(encode_snapshot(4, 90, consumers))
    assert (snap.first_seq, snap.last_seq, snap.consumers) == (4, 90, consumers)
    assert snap.sources == {}
    positions = {"A > >": (17, "ID"), "B b.> >": (3, "")}
    snap = decode_snapshot(encode_snapshot(4, 90, {}, positions))
    assert snap.sources == positions
    bads = [
        b"",
        b"[]",
        b'{"v":2}',
        b'{"v":1,"first_seq":1}',
        b'{"v":1,"first_seq":-1,"last_seq":2}',
        b'{"v":1,"first_seq":1,"last_seq":2,"consumers":{"D":1}}',
        b'{"v":1,"first_seq":1,"last_seq":2,"sources":{"A > >":[0,""]}}',
        b'{"v":1,"first_seq":1,"last_seq":2,"sources":{"A > >":[3]}}',
        b'{"v":1,"first_seq":1,"last_seq":2,"sources":{"A > >":["3",""]}}',
        b'{"v":1,"first_seq":1,"last_seq":2,"sources":[1,2]}',
    ]
    for bad in bads:
        with pytest.raises(CatchupError):
            decode_snapshot(bad)


def test_packets_round_trip() -> None:
    p = decode_packet(encode_request(SOURCE, GROUP, 5, 90, 40, 77))
    assert (p.kind, p.sender, p.group, p.a, p.b, p.c) == (cc.K_REQ, SOURCE, GROUP, 5, 90, 40)
    assert p.index == 77
    p = decode_packet(encode_runs(SOURCE, GROUP, 1, 20, 2, [2, 3, 4, 9, 11, 12]))
    assert p.runs == [(2, 4), (9, 9), (11, 12)]
    src = _store()
    src.store_msg("c.a", b"NATS/1.0\r\nA: B\r\n\r\n", b"x" * 10)
    src.store_msg("c.\u00e9", None, b"")
    msgs = src.load_range(1, 10)
    p = decode_packet(encode_msgs(SOURCE, GROUP, 1, 2, 1, msgs))
    assert [(m.seq, m.subject, m.hdr, m.data, m.ts) for m in p.msgs] == [
        (m.seq, m.subject, m.hdr, m.data, m.ts) for m in msgs
    ]


def test_bad_input_from_a_peer_is_counted_and_dropped() -> None:
    good = encode_msgs(SOURCE, GROUP, 1, 2, 1, [])
    rng = random.Random(3)
    samples = [b"", b"\x01", b"\x02" + good[1:], good + b"x", good[:-1]]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(60))) for _ in range(300)]
    full = _store()
    full.store_msg("c.a", None, b"payload")
    whole = encode_msgs(SOURCE, GROUP, 1, 1, 1, full.load_range(1, 1))
    samples += [whole[:i] for i in range(len(whole))]
    refused = 0
    for b in samples:
        try:
            decode_packet(b)
        except CatchupError:
            refused += 1
    assert refused >= len(samples) - 5
    # through the subscription: counted, nothing raised, nothing started
    node = CatchUp(
        REPLICA, Account("$SYS"), lambda g, who, index: None, lambda t: None, SYSTEM_CLOCK
    )
    for b in samples:
        node._on_msg(node._sub, b"", None, None, b)
    assert node.bad == refused and not node.transfers


def _snap_msg(frm: int, index: int, first: int, last: int, term: int = 2) -> Message:
    meta = SnapshotMetadata(index=index, term=term)
    snap = Snapshot(data=encode_snapshot(first, last, {}), metadata=meta)
    return Message(type=MessageType.MsgSnap, from_=frm, to=REPLICA, term=term, snapshot=snap)


async def test_a_replica_catches_up_in_batches_and_never_past_the_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cc, "BATCH_BYTES", 2000)
    monkeypatch.setattr(cc, "RUN_SCAN", 17)
    system = Account("$SYS")
    src = _store()
    rep = _store()
    rng = random.Random(11)
    for i in range(1, 1001):
        hdr = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % i if i % 7 == 0 else None
        src.store_msg(f"c.{i % 5}", hdr, b"m%d" % i * rng.randrange(1, 40))
        if i <= 600:
            m = src.load_msg(i)
            assert m is not None
            rep.store_raw(m.subject, m.hdr, m.data, m.seq, m.ts, m.ttl)
    # what the replica missed: the source removed some of what it holds, and moved its first
    src.compact(40)
    for seq in rng.sample(range(40, 1001), 300):
        src.remove_msg(seq)
    finished: list[Transfer] = []
    source = CatchUp(
        SOURCE,
        system,
        lambda g, who, index: src if who == REPLICA else None,
        finished.append,
        SYSTEM_CLOCK,
    )
    replica = CatchUp(REPLICA, system, lambda g, who, index: None, finished.append, SYSTEM_CLOCK)
    source.start()
    replica.start()
    # the snapshot stands for the store up to 950; the source has taken more since
    assert replica.offer(GROUP, rep, _snap_msg(SOURCE, 500, 40, 950))
    assert len(finished) == 1 and finished[0].held.snapshot.metadata.index == 500  # type: ignore[union-attr]
    assert _contents(rep, 1000) == _contents(src, 950)
    assert rep.last_seq() == 950
    assert source.served > 10  # in batches
    assert replica.completed == 1 and not replica.transfers
    assert source.bad == replica.bad == 0


async def test_a_stranger_is_not_served() -> None:
    system = Account("$SYS")
    src = _store()
    src.store_msg("c.a", None, b"secret")
    finished: list[Transfer] = []
    source = CatchUp(
        SOURCE,
        system,
        lambda g, who, index: src if who == REPLICA else None,
        finished.append,
        SYSTEM_CLOCK,
    )
    stranger = CatchUp(STRANGER, system, lambda g, who, index: None, finished.append, SYSTEM_CLOCK)
    source.start()
    stranger.start()
    mine = _store()
    assert stranger.offer(GROUP, mine, _snap_msg(SOURCE, 5, 1, 1))
    assert not finished and mine.last_seq() == 0
    assert GROUP in stranger.transfers  # it asks again later, maybe elsewhere


async def test_a_source_behind_the_snapshot_is_not_taken_for_a_gap() -> None:
    """A source (a new leader still applying) whose store ends before the snapshot's last
    sequence answers what it holds; the replica waits for the rest instead of taking the
    missing sequences as deleted."""
    system = Account("$SYS")
    src = _store()
    for i in range(1, 301):
        src.store_msg("c.a", None, b"%d" % i)
    finished: list[Transfer] = []
    source = CatchUp(SOURCE, system, lambda g, who, index: src, finished.append, SYSTEM_CLOCK)
    replica = CatchUp(REPLICA, system, lambda g, who, index: None, finished.append, SYSTEM_CLOCK)
    source.start()
    replica.start()
    rep = _store()
    assert replica.offer(GROUP, rep, _snap_msg(SOURCE, 50, 1, 500))
    assert not finished and rep.last_seq() == 300
    for i in range(301, 601):
        src.store_msg("c.a", None, b"%d" % i)
    loop = asyncio.get_running_loop()
    replica.tick(loop.time() + 10)
    assert len(finished) == 1
    assert _contents(rep, 600) == _contents(src, 500)


async def test_a_new_leaders_older_snapshot_replaces_the_held_one() -> None:
    """A snapshot held from a leader of term 2 while a new leader (term 3) that compacted
    less sends its own: Raft would drop the term-2 one when it is stepped, so the transfer
    aims for the new leader's and steps that one."""
    system = Account("$SYS")
    src = _store()
    for i in range(1, 401):
        src.store_msg("c.a", None, b"%d" % i)
    finished: list[Transfer] = []
    new_leader = CatchUp(STRANGER, system, lambda g, who, index: src, finished.append, SYSTEM_CLOCK)
    replica = CatchUp(REPLICA, system, lambda g, who, index: None, finished.append, SYSTEM_CLOCK)
    new_leader.start()
    replica.start()
    rep = _store()
    # the old leader (SOURCE) is gone: nothing answers for its snapshot
    assert replica.offer(GROUP, rep, _snap_msg(SOURCE, 500, 1, 950, term=2))
    assert not finished and GROUP in replica.transfers
    assert replica.offer(GROUP, rep, _snap_msg(STRANGER, 300, 1, 400, term=3))
    assert len(finished) == 1
    held = finished[0].held
    assert held is not None and (held.term, held.from_) == (3, STRANGER)
    assert _contents(rep, 400) == _contents(src, 400)
