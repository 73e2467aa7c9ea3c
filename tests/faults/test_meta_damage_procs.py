"""The meta group under damage, as real ``natsd`` processes on loopback: the two cases of
``test_meta_damage.py`` (three embedded servers) that matter most, on the fault suite's
cluster of processes (``proc_cluster.ProcCluster``) driven by nats-py over sockets.

Each case builds the cluster as the embedded test does: an R3 stream created through the
meta leader (its first replica, so it leads the stream's group too: the healthy server
``H``), then an R1 stream on each server, each with MSGS messages and a durable consumer.
The servers stop with SIGTERM (a clean close), H last, so the damaged servers' logs end with
meta records; the damage is done to the stopped servers' node WALs by
``test_meta_damage.damage`` (the same records, the same seed); the servers start again.

* **minority**, ``snapshot``: the meta log is compacted first (a process cannot be told to,
  so the meta group is given META_COMPACT stream updates and every server compacts by
  itself), one more R1 stream created after it; then bits flipped in the latest meta
  snapshot of one follower. After the restart the damaged server logs an error saying what
  is damaged, repairs from the leader (it logs so, and its /healthz says it is current),
  every server keeps every stream it held (messages, consumer), every stream takes a
  publish at the next sequence and every replica holds it.
* **majority**, ``truncate``: the WAL cut inside the meta entries record of the last stream
  created on both followers. The damaged servers start first, H once they have been up
  2.2 s (longer than the longest election timeout); each damaged server logs one error
  saying what is damaged and naming the rejoin tool, and no server names a meta leader
  while they are damaged (watched until H has been up 2.2 s too). Then the operator does
  what the error says: stops one damaged server, runs the command the error names
  (``python -m natsd.jetstream.cluster.rejoin STORE_DIR``, as a subprocess, ``python``
  being this interpreter), and starts the server again: H becomes the meta leader and the
  cluster recovers with nothing lost.

In both, no stream is set aside: the test waits ORPHANS_AFTER (the driver's 5 s: a process
cannot be patched as the embedded test does) past the moment every server was current with
the meta leader, and then looks for set-aside directories and log lines.

What a process does not show, and so is not checked here as the embedded test checks it:
each server's own meta state (``_meta_streams``: there is no /raftz or meta dump; /jsz
lists the streams the server holds, which is checked), and the consumers' names (/jsz gives
each replica's ``consumer_count``; ``CONSUMER.INFO ... D`` is asked through the cluster).

The seed (``NATSD_FAULT_SEED`` replays) chooses the bits and the cut; it is printed first.
"""

from __future__ import annotations

import asyncio
import random
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from embedded_cluster import api_request as req
from embedded_cluster import publish_acked
from proc_cluster import ProcCluster, ServerProc

from faults.run import FIXED_SEED, fault_seed
from faults.test_meta_damage import MSGS, R3, damage
from natsd.jetstream.cluster.driver import META_COMPACT, ORPHANS_AFTER

pytestmark = pytest.mark.timeout(90)

_t0 = [0.0]


def _phase(what: str) -> None:
    """How long the case has run, at each of its steps (the whole file's budget is 40 s)."""
    print(f"[{time.monotonic() - _t0[0]:5.1f} s] {what}")


# a server's streams, as /jsz shows them: name -> state (messages, sequences, consumers)
Held = dict[str, dict[str, Any]]


async def _poll(what: str, check: Callable[[], Awaitable[Any]], c: ProcCluster,
                timeout: float = 20.0) -> Any:  # fmt: skip
    """``check()`` until it returns something truthy; the servers' logs when it never does."""
    deadline = time.monotonic() + timeout
    while True:
        out = await check()
        if out:
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s (last: {out!r})\n{c.logs()}")
        await asyncio.sleep(0.1)


async def _get(p: ServerProc, path: str) -> dict[str, Any] | None:
    return await asyncio.to_thread(p.get, path)


async def _held(p: ServerProc) -> Held | None:
    """The streams this server holds (its replicas), from its /jsz; None: no answer."""
    doc = await _get(p, "/jsz?accounts=true&streams=true")
    if doc is None:
        return None
    out: Held = {}
    for acc in doc.get("account_details") or []:
        for sd in acc.get("stream_detail") or []:
            out[sd["name"]] = sd["state"]
    return out


async def _leader_seen(p: ServerProc) -> str:
    return await asyncio.to_thread(p.seen_leader)


async def _healthy(p: ServerProc) -> bool:
    return await _get(p, "/healthz") == {"status": "ok"}


def _log_from(p: ServerProc, at: int) -> str:
    with open(p.log_path, "rb") as f:
        f.seek(at)
        return f.read().decode(errors="replace")


def _log_size(p: ServerProc) -> int:
    return p.log_path.stat().st_size if p.log_path.exists() else 0


def _meta_errors(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "[ERR]" in ln and "meta group" in ln]


def _set_aside(tmp: Path, c: ProcCluster) -> list[str]:
    dirs = [str(p) for p in sorted(tmp.rglob("set-aside/*"))]
    # (the damage error's own text says that nothing is set aside: these are the set-aside's)
    lines = [ln for p in c for ln in p.log_tail(1 << 30).splitlines()
             if "files here are set aside" in ln or "could not be set aside" in ln]  # fmt: skip
    return dirs + lines


async def _stream(c: ProcCluster, via: str, name: str, replicas: int) -> None:
    """A stream created through ``via`` (an R1 stream is placed there), with MSGS messages
    and a durable consumer D."""
    nc = await nats.connect(c[via].url)
    try:
        cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": replicas}
        out = await req(nc, f"$JS.API.STREAM.CREATE.{name}", cfg, timeout=10)
        assert "error" not in out, out
        if replicas == 1:
            assert out["cluster"]["leader"] == via, out
        for i in range(MSGS):
            ack = await publish_acked(nc, f"{name.lower()}.x", b"%d" % i)
            assert ack.get("seq") == i + 1, (name, ack)
        durable = {"stream_name": name, "config": {"durable_name": "D", "ack_policy": "explicit"}}
        out = await req(nc, f"$JS.API.CONSUMER.CREATE.{name}.D", durable, timeout=10)
        assert "error" not in out, out
    finally:
        await nc.close()


async def _r3_leader(nc: Any) -> str:
    try:
        info = await req(nc, f"$JS.API.STREAM.INFO.{R3}", timeout=2)
    except Exception:  # no responders or a timeout while it elects
        return ""
    return str((info.get("cluster") or {}).get("leader") or "")


async def _compact_meta(c: ProcCluster, via: str) -> None:
    """Give the meta group META_COMPACT stream updates (of the R1 stream on ``via``), so that
    every server compacts its meta log into a SNAPSHOT record (``driver._maybe_compact``, on
    the next usage tick), and wait until each has."""
    name = f"A{via}"
    nc = await nats.connect(c[via].url)
    try:
        base = {"name": name, "subjects": [f"{name.lower()}.>"], "num_replicas": 1}
        for start in range(0, META_COMPACT + 4, 65):
            outs = await asyncio.gather(*(
                req(nc, f"$JS.API.STREAM.UPDATE.{name}", {**base, "description": f"u{i}"},
                    timeout=20)
                for i in range(start, min(start + 65, META_COMPACT + 4))
            ))  # fmt: skip
            bad = [o for o in outs if "error" in o]
            assert not bad, bad[:3]
    finally:
        await nc.close()

    async def compacted() -> bool:
        # (the followers had the entries before the leader answered: a follower that did
        # not compact holds them all, > META_COMPACT; one that did, the few after it)
        for p in c:
            doc = await _get(p, "/jsz")
            snap = ((doc or {}).get("meta_cluster") or {}).get("snapshot") or {}
            if snap.get("pending_entries", META_COMPACT) >= 64:
                return False
        return True

    await _poll("every server compacted its meta log", compacted, c)


async def _populate(c: ProcCluster, compact: bool) -> tuple[str, list[str]]:
    """The streams of the module docstring; returns H (the meta leader, which leads the R3
    stream too) and the two other servers."""
    h = await c.meta_leader()
    others = [n for n in c.names if n != h]
    _phase(f"meta leader {h}")
    await _stream(c, h, R3, 3)
    nc = await nats.connect(c[h].url)
    try:
        lead = await _poll("the R3 stream has a leader", lambda: _r3_leader(nc), c)
        for _ in range(6):  # (created through H, H is its first replica and campaigns at once)
            if lead == h:
                break
            await req(nc, f"$JS.API.STREAM.LEADER.STEPDOWN.{R3}", timeout=5)
            await asyncio.sleep(0.5)
            lead = await _poll("the R3 stream has a leader", lambda: _r3_leader(nc), c)
        assert lead == h, f"the R3 stream is led by {lead}, not by the meta leader {h}"
    finally:
        await nc.close()
    # the consumer's first state is flushed (STATE_FLUSH_DELAY) before what follows, so that
    # nothing more of the R3 group is written after the last meta entries
    await asyncio.sleep(0.5)
    for name in c.names:
        await _stream(c, name, f"A{name}", 1)
    if compact:
        await _compact_meta(c, h)
        _phase("meta log compacted on every server")
        await _stream(c, others[0], f"B{others[0]}", 1)  # and an entry after the snapshot
    return h, others


async def _before(c: ProcCluster) -> dict[str, Held]:
    """What every server holds once the R3 replicas have converged."""

    async def converged() -> dict[str, Held] | None:
        held = {p.name: await _held(p) for p in c}
        if any(h is None or R3 not in h for h in held.values()):
            return None
        if len({str(h[R3]) for h in held.values() if h is not None}) != 1:
            return None
        return held  # type: ignore[return-value]

    out: dict[str, Held] = await _poll("the R3 replicas converged", converged, c, timeout=15)
    return out


async def _check_intact(c: ProcCluster, before: dict[str, Held]) -> None:
    for name, streams in before.items():
        p = c[name]

        async def same(p: ServerProc = p, streams: Held = streams) -> bool:
            return await _held(p) == streams

        await _poll(f"{name} holds every stream it held, as it was", same, c)


async def _publish_everywhere(c: ProcCluster, before: dict[str, Held], via: str) -> None:
    """Every stream takes a publish again, at the sequence after its last message, every
    replica holds it, and its durable consumer is there."""
    streams = sorted({s for held in before.values() for s in held})
    nc = await nats.connect(c[via].url)
    try:
        for s in streams:
            ack = await publish_acked(nc, f"{s.lower()}.x", b"after", within=20)
            assert ack.get("seq") == MSGS + 1, (s, ack)
            info = await req(nc, f"$JS.API.CONSUMER.INFO.{s}.D", timeout=5)
            assert "error" not in info and info.get("name") == "D", (s, info)
    finally:
        await nc.close()
    for name, held in before.items():
        p = c[name]

        async def all_there(p: ServerProc = p, held: Held = held) -> bool:
            now = await _held(p)
            return now is not None and all(
                s in now and now[s]["last_seq"] == MSGS + 1 and now[s]["messages"] == MSGS + 1
                and now[s]["consumer_count"] == held[s]["consumer_count"]
                for s in held
            )  # fmt: skip

        await _poll(f"every replica on {name} took the publish", all_there, c)


async def _stop(c: ProcCluster, order: list[str]) -> None:
    for name in order:
        await asyncio.to_thread(c[name].stop)


async def _all_current(c: ProcCluster, leader: str) -> float:
    """Every server names ``leader`` and says (/healthz) it is current with it; the time
    it was so."""

    async def current() -> bool:
        for p in c:
            if await _leader_seen(p) != leader or not await _healthy(p):
                return False
        return True

    await _poll(f"every server current with meta leader {leader}", current, c)
    return time.monotonic()


async def _no_orphan_set_aside(tmp: Path, c: ProcCluster, since: float) -> None:
    """The orphan check has run on every server (ORPHANS_AFTER after it was current) and set
    nothing aside."""
    await asyncio.sleep(max(0.0, since + ORPHANS_AFTER + 0.5 - time.monotonic()))
    assert _set_aside(tmp, c) == [], c.logs()


async def _setup(tmp: Path, compact: bool) -> tuple[ProcCluster, random.Random, str, list[str],
                                                   dict[str, Held]]:  # fmt: skip
    _t0[0] = time.monotonic()
    seed = fault_seed(FIXED_SEED)
    print(f"seed={seed} (replay: NATSD_FAULT_SEED={seed})")
    c = ProcCluster(tmp, 3, cluster_name="fc", proxied=True)
    await c.start()
    try:
        h, others = await _populate(c, compact)
        before = await _before(c)
        _phase("populated")
    except BaseException:
        await c.close()
        raise
    print("healthy server (meta and R3 leader):", h)
    return c, random.Random(seed), h, others, before


async def _publishes_and_sets_nothing_aside(
    tmp_path: Path, c: ProcCluster, before: Any, leader: str, current_at: Any
) -> None:
    """The end of both cases: every stream takes a publish, and after the driver's wait
    nothing was set aside."""
    await _publish_everywhere(c, before, leader)
    _phase("intact, and every stream took a publish")
    await _no_orphan_set_aside(tmp_path, c, current_at)
    _phase("nothing set aside")


async def test_meta_snapshot_damaged_on_a_minority_is_repaired_from_the_leader(
    tmp_path: Path,
) -> None:
    c, rng, h, others, before = await _setup(tmp_path, compact=True)
    victim = others[1]
    try:
        await _stop(c, [victim, others[0], h])
        print(victim, damage(c[victim].store_dir, "snapshot", rng))
        at = {p.name: _log_size(p) for p in c}
        _phase("stopped and damaged")
        for p in c:
            p.start()
        assert await c.meta_leader() in (h, others[0]), c.logs()

        async def repaired() -> bool:
            return "the meta group is repaired" in _log_from(c[victim], at[victim])

        await _poll(f"{victim} says its meta group is repaired", repaired, c)
        current_at = await _all_current(c, await c.meta_leader())
        _phase("repaired: every server current with the meta leader")
        await _check_intact(c, before)
        errors = {p.name: _meta_errors(_log_from(p, at[p.name])) for p in c}
        assert errors[victim] and all("are damaged" in e for e in errors[victim]), errors
        assert "snapshot record" in errors[victim][0], errors[victim][0]
        assert all(not errors[n] for n in (h, others[0])), errors
        print(errors[victim][0])
        await _publishes_and_sets_nothing_aside(tmp_path, c, before, h, current_at)
    finally:
        await c.close()


async def test_meta_wal_cut_short_on_a_majority_is_refused_until_the_operator_rejoins(
    tmp_path: Path,
) -> None:
    c, rng, h, damaged, before = await _setup(tmp_path, compact=False)
    try:
        await _stop(c, [*damaged, h])
        for name in damaged:
            print(name, damage(c[name].store_dir, "truncate", rng))
        at = {p.name: _log_size(p) for p in c}
        _phase("stopped and damaged")
        # the damaged servers come back first, the healthy one a while later; no server may
        # name a meta leader meanwhile. Each window is timed from when the servers in it
        # are up and routed to each other (a process takes a second or more to start), each
        # longer than the longest election timeout (2 s): the damaged ones alone (before the
        # fix they elected one of themselves), then with the healthy one (which asks for
        # votes, and must get none)
        leaders: set[str] = set()

        async def watch(up: list[str], seconds: float) -> None:
            async def routed() -> bool:
                for n in up:
                    doc = await _get(c[n], "/routez")
                    if (doc or {}).get("num_routes", 0) < len(up) - 1:
                        return False
                    leaders.add(await _leader_seen(c[n]))
                return True

            await _poll(f"{up} up and routed", routed, c)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for n in up:
                    leaders.add(await _leader_seen(c[n]))
                await asyncio.sleep(0.2)

        for name in damaged:
            c[name].start()
        await watch(damaged, 2.2)
        c[h].start()
        await watch(c.names, 2.2)
        _phase("no meta leader while the majority is damaged")
        assert leaders == {""}, f"a meta leader was elected: {leaders}\n{c.logs()}"
        assert _set_aside(tmp_path, c) == [], c.logs()
        for name in c.names:
            assert await _held(c[name]) == before[name], (name, c.logs())
        errors = {p.name: _meta_errors(_log_from(p, at[p.name])) for p in c}
        for name in damaged:
            assert len(errors[name]) == 1, (name, errors)
            e = errors[name][0]
            assert "are damaged" in e and "natsd.jetstream.cluster.rejoin" in e, e
        assert errors[h] == [], errors
        print(errors[damaged[0]][0])

        # what the error says to do: stop one damaged server, drop its meta records with the
        # command the error names, start it again
        op = c[damaged[0]]
        await asyncio.to_thread(op.stop)
        m = re.search(r"`(python -m natsd\.jetstream\.cluster\.rejoin [^`]+)`", errors[op.name][0])
        assert m, errors[op.name][0]
        argv = shlex.split(m.group(1))
        assert argv[-1] == str(op.store_dir), (argv, op.store_dir)
        done = await asyncio.to_thread(
            subprocess.run, [sys.executable, *argv[1:]], capture_output=True, text=True,
            timeout=30,
        )  # fmt: skip
        print("$", m.group(1), "->", done.returncode, done.stdout.strip(), done.stderr.strip())
        assert done.returncode == 0 and "meta group records dropped" in done.stdout, done
        _phase("rejoin tool run")
        op.start()
        assert await c.meta_leader() == h, c.logs()
        current_at = await _all_current(c, h)
        _phase("recovered: every server current with the meta leader")
        await _check_intact(c, before)
        await _publishes_and_sets_nothing_aside(tmp_path, c, before, h, current_at)
    finally:
        await c.close()
