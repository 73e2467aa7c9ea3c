"""What every fault run shares: the publishers, the stream, waiting for the replicas, and the
checks of what the replicas hold (issue 19's fault suite; see ``faults/run.py``)."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from nats.aio.client import Client as NATS
from reliability.checker import (
    History,
    Outcome,
    StoredMsg,
    check,
    drain,
    make_payload,
    msg_id,
    random_size,
)

from natsd.core.headers import parse_headers
from natsd.storage.disk_catalog import DiskCatalog

STREAM = "F"


async def quiet_close(nc: NATS) -> None:
    try:
        await asyncio.wait_for(nc.close(), 3)
    except Exception:  # a connection torn down by the faults
        pass


async def quiet_error(_e: Exception) -> None:
    """nats-py's error callback: connection errors are what the faults cause."""


@dataclass
class Publisher:
    """Publishes ``f.<pid>`` in order; each publish is retried with the same ``Nats-Msg-Id``
    until it is acknowledged (or, once stopping, until ``give_up_at``: then *unknown*).
    ``gate`` (when given) is waited for before each publish: a test closes it to have every
    publisher idle at a known point."""

    pid: int
    nc: NATS
    history: History
    ack_times: list[float]
    gate: asyncio.Event | None = None
    acked: int = 0
    busy: bool = False
    stopping: bool = False
    give_up_at: float = 0.0

    async def run(self, rng: random.Random) -> None:
        counter = 0
        subject = f"f.{self.pid}"
        while not self.stopping:
            if self.gate is not None:
                await self.gate.wait()
            self.busy = True
            payload = make_payload(self.pid, counter, random_size(rng), rng)
            seq = await self._until_acked(subject, payload, msg_id(self.pid, counter))
            self.busy = False
            if seq is None:
                self.history.record(self.pid, counter, Outcome.UNKNOWN)
                return
            self.history.record(self.pid, counter, Outcome.ACKED, seq)
            self.acked += 1
            self.ack_times.append(time.monotonic())
            counter += 1

    async def _until_acked(self, subject: str, payload: bytes, mid: str) -> int | None:
        while True:
            if self.stopping and time.monotonic() > self.give_up_at:
                return None
            try:
                m = await self.nc.request(subject, payload, timeout=1.0,
                                          headers={"Nats-Msg-Id": mid})  # fmt: skip
                ack = json.loads(m.data)
                if "error" not in ack:
                    return int(ack["seq"])
            except Exception:  # no responders, a timeout, a connection lost to a fault
                pass
            await asyncio.sleep(0.05)


TRACE_DEST = "trace.f"


@dataclass
class Tracer:
    """Publishes trace-only messages into the stream (``f.trace``, each with a
    ``Nats-Msg-Id`` of its own) through the faults. A trace-only message is checked by the
    stream's leader and never stored or proposed: a replica holding one fails
    ``check_stores`` (its payload is in no publisher's history). Counts the trace events
    that came back with the stream's ``js`` event, so a run shows the path was taken."""

    nc: NATS
    sent: int = 0
    traced: int = 0
    stopping: bool = False

    async def run(self) -> None:
        async def on_trace(m: Any) -> None:
            # (a leader paused and resumed checks them too until it learns it was deposed:
            # Raft's check-quorum; two js events for one message are not counted apart)
            if any(ev.get("type") == "js" for ev in json.loads(m.data).get("events", [])):
                self.traced += 1

        await self.nc.subscribe(TRACE_DEST, cb=on_trace)
        while not self.stopping:
            headers = {"Nats-Trace-Dest": TRACE_DEST, "Nats-Trace-Only": "true",
                       "Nats-Msg-Id": f"trace-{self.sent}"}  # fmt: skip
            try:
                await self.nc.publish("f.trace", b"trace only", headers=headers)
                self.sent += 1
            except Exception:  # a connection lost to a fault
                pass
            await asyncio.sleep(0.05)


COUNTER_STREAM = "FC"


@dataclass
class CounterPublisher:
    """Increments ``fc.n`` on a counter stream (``allow_msg_counter``, as replicated as the
    run's stream) through the faults, each increment with a ``Nats-Msg-Id`` of its own and
    retried until acknowledged (or, once stopping, until ``give_up_at``). ``check_counter``
    then reads the stream back through the cluster."""

    nc: NATS
    sent: dict[str, int] = field(default_factory=dict)  # msg id -> increment
    acked: dict[str, int] = field(default_factory=dict)
    stopping: bool = False
    give_up_at: float = 0.0

    async def run(self, rng: random.Random) -> None:
        n = 0
        while not self.stopping:
            mid, by = f"c-{n}", rng.randint(-5, 20)
            self.sent[mid] = by
            headers = {"Nats-Incr": str(by), "Nats-Msg-Id": mid}
            if await until_acked(self.nc, "fc.n", b"", headers, self.trying):
                self.acked[mid] = by
            n += 1

    def trying(self) -> bool:
        return not self.stopping or time.monotonic() < self.give_up_at

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopping = True
        self.give_up_at = time.monotonic() + 10
        await asyncio.wait_for(task, 30)


async def until_acked(
    nc: NATS, subject: str, data: bytes, headers: dict[str, str], trying: Callable[[], bool]
) -> bool:
    """A JetStream publish sent again (same headers, so the same Nats-Msg-Id) until it is
    acknowledged, or ``trying`` says to give up."""
    while trying():
        try:
            m = await nc.request(subject, data, timeout=1.0, headers=headers)
            if "error" not in json.loads(m.data):
                return True
        except Exception:  # no responders, a timeout, a connection lost to a fault
            pass
        await asyncio.sleep(0.05)
    return False


async def create_feature_stream(
    nc: NATS, name: str, subjects: list[str], replicas: int, **fields: Any
) -> None:
    """One of the streams a feature's publisher writes into: a file stream as replicated as
    the run's stream, with the feature's fields (``allow_msg_counter=True``, ...)."""
    cfg = {"name": name, "subjects": subjects, "num_replicas": replicas, "storage": "file",
           **fields}  # fmt: skip
    await api(nc, f"$JS.API.STREAM.CREATE.{name}", cfg, 30)


async def create_counter_stream(nc: NATS, replicas: int) -> None:
    await create_feature_stream(nc, COUNTER_STREAM, ["fc.>"], replicas, allow_msg_counter=True)


async def check_counter(nc: NATS, pub: CounterPublisher) -> str:
    """The counter stream's messages, read through the cluster: one chain (each value the
    one before plus its own increment, never a broken or repeated link), every acknowledged
    increment stored once, nothing stored that was not sent, and the last value the sum of
    the stored increments: the acknowledged ones and those whose answer a fault lost."""
    info = await api(nc, f"$JS.API.STREAM.INFO.{COUNTER_STREAM}", None, 60)
    state = info["state"]
    value, ids = 0, []
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        m = await api(nc, f"$JS.API.STREAM.MSG.GET.{COUNTER_STREAM}", {"seq": seq}, 60,
                      done=(10037,))  # fmt: skip
        assert "message" in m, f"counter message {seq} missing: {m}"
        _, _, h = parse_headers(base64.b64decode(m["message"]["hdrs"]))
        by, mid = int(h["Nats-Incr"][0]), h["Nats-Msg-Id"][0]
        stored = int(json.loads(base64.b64decode(m["message"]["data"]))["val"])
        assert stored == value + by, f"seq {seq}: {stored} after {value} with {by:+d}"
        value = stored
        ids.append(mid)
    assert len(ids) == len(set(ids)), "an increment stored twice"
    assert set(pub.acked) <= set(ids), f"acknowledged, not stored: {set(pub.acked) - set(ids)}"
    assert set(ids) <= set(pub.sent), "stored what nobody sent"
    assert value == sum(pub.sent[i] for i in ids)
    lost_answers = len(set(ids) - set(pub.acked))
    return (f"counter {COUNTER_STREAM}: {len(pub.acked)} increments acknowledged "
            f"({lost_answers} more stored, answers lost), value {value}, one chain")  # fmt: skip


BATCH_STREAM = "FB"


@dataclass
class BatchPublisher:
    """Publishes atomic batches of 2 to 5 messages into ``FB`` (``allow_atomic`` and
    ``compression: s2``, as replicated as the run's stream) through the faults, every
    message with a ``Nats-Msg-Id`` of its own and a payload that compresses
    (``batch_part``): a batch is sent again from its first message until its commit is
    acknowledged, or refused because its ids are stored (its first commit went through and
    the answer was lost). ``check_batches`` then reads the stream back."""

    nc: NATS
    sizes: dict[str, int] = field(default_factory=dict)  # batch id -> messages
    acked: set[str] = field(default_factory=set)
    stopping: bool = False
    give_up_at: float = 0.0

    async def run(self, rng: random.Random) -> None:
        n = 0
        while not self.stopping:
            bid, size = f"ab-{n}", rng.randint(2, 5)
            self.sizes[bid] = size
            while not self.stopping or time.monotonic() < self.give_up_at:
                if await self._send(bid, size):
                    break
                await asyncio.sleep(0.05)
            n += 1

    async def _send(self, bid: str, size: int) -> bool:
        for i in range(1, size + 1):
            headers = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i),
                       "Nats-Msg-Id": f"{bid}-{i}"}  # fmt: skip
            if i == size:
                headers["Nats-Batch-Commit"] = "1"
            try:
                m = await self.nc.request(
                    f"fb.{bid}", batch_part(bid, i), timeout=1.0, headers=headers
                )
            except Exception:  # no responders, a timeout, a connection lost to a fault
                return False
            if i < size:
                if m.data:
                    return False  # an error (a leader change dropped the batch): again
                continue
            ack = json.loads(m.data)
            if "error" not in ack:
                self.acked.add(bid)
                return True
            # its ids are in the duplicate window: stored by an attempt whose answer was lost
            return bool(ack["error"].get("err_code") == 10201)
        return False

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopping = True
        self.give_up_at = time.monotonic() + 10
        await asyncio.wait_for(task, 30)


def batch_part(bid: str, i: int) -> bytes:
    """Message ``i`` of batch ``bid``: long and repetitive, so the stream stores it
    compressed."""
    return (b"batch %s part %d; " % (bid.encode(), i)) * 12


async def create_batch_stream(nc: NATS, replicas: int) -> None:
    await create_feature_stream(
        nc, BATCH_STREAM, ["fb.>"], replicas, allow_atomic=True, compression="s2"
    )


async def check_batches(nc: NATS, pub: BatchPublisher) -> str:
    """The batch stream's messages, read through the cluster: each stored batch whole and
    in one piece (its messages 1..n at consecutive sequences), stored once, every
    acknowledged batch among them."""
    info = await api(nc, f"$JS.API.STREAM.INFO.{BATCH_STREAM}", None, 60)
    state = info["state"]
    runs: list[tuple[str, list[int]]] = []
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        m = await api(nc, f"$JS.API.STREAM.MSG.GET.{BATCH_STREAM}", {"seq": seq}, 60)
        _, _, h = parse_headers(base64.b64decode(m["message"]["hdrs"]))
        bid, i = h["Nats-Batch-Id"][0], int(h["Nats-Batch-Sequence"][0])
        data = base64.b64decode(m["message"]["data"])
        assert data == batch_part(bid, i), f"seq {seq}: payload {data[:40]!r}..."
        if runs and runs[-1][0] == bid:
            runs[-1][1].append(i)
        else:
            runs.append((bid, [i]))
    ids = [bid for bid, _ in runs]
    assert len(ids) == len(set(ids)), "a batch stored twice, or in pieces"
    for bid, parts in runs:
        assert parts == list(range(1, pub.sizes[bid] + 1)), f"batch {bid} stored as {parts}"
    assert pub.acked <= set(ids), f"acknowledged, not stored: {pub.acked - set(ids)}"
    return (f"batches {BATCH_STREAM}: {len(pub.acked)} acknowledged, {len(ids)} stored, "
            f"each whole, its payloads as sent (stored compressed)")  # fmt: skip


SCHEDULE_STREAM = "FS"


def _at(seconds: float) -> str:
    t = time.time() + seconds
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return f"@at {when}.{int(t % 1 * 1000):03d}Z"


@dataclass
class SchedulePublisher:
    """Message schedules in ``FS`` (``allow_msg_schedules``, as replicated as the run's
    stream) through the faults: one ``@every 1s`` schedule for the whole run, and an ``@at``
    schedule 1 to 2 seconds ahead on a subject of its own every few tenths of a second, each
    retried with its ``Nats-Msg-Id`` until acknowledged. ``check_schedules`` then reads what
    fired back through the cluster."""

    nc: NATS
    sent: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)
    stopping: bool = False
    give_up_at: float = 0.0

    def trying(self) -> bool:
        return not self.stopping or time.monotonic() < self.give_up_at

    async def _publish(self, subject: str, headers: dict[str, str]) -> bool:
        return await until_acked(self.nc, subject, b"s", headers, self.trying)

    async def run(self, rng: random.Random) -> None:
        every = {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "fs.tgt.every",
                 "Nats-Msg-Id": "every"}  # fmt: skip
        await self._publish("fs.sch.every", every)
        n = 0
        while not self.stopping:
            self.sent.add(n)
            headers = {
                "Nats-Schedule": _at(rng.uniform(1.0, 2.0)),
                "Nats-Schedule-Target": f"fs.tgt.at.{n}",
                "Nats-Msg-Id": f"at-{n}",
            }
            if await self._publish(f"fs.sch.at.{n}", headers):
                self.acked.add(n)
            n += 1
            await asyncio.sleep(rng.uniform(0.1, 0.5))

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopping = True
        self.give_up_at = time.monotonic() + 10
        await asyncio.wait_for(task, 30)


async def create_schedule_stream(nc: NATS, replicas: int) -> None:
    await create_feature_stream(nc, SCHEDULE_STREAM, ["fs.>"], replicas, allow_msg_schedules=True)


async def _subjects(nc: NATS, filt: str) -> dict[str, int]:
    info = await api(nc, f"$JS.API.STREAM.INFO.{SCHEDULE_STREAM}", {"subjects_filter": filt}, 60)
    return dict(info["state"].get("subjects") or {})


async def check_schedules(nc: NATS, pub: SchedulePublisher) -> str:
    """What the schedules produced, read through the cluster once every ``@at`` time has
    passed: every stored ``@at`` schedule fired exactly once and purged itself (each
    acknowledged one among them), and the ``@every`` schedule produced each planned time
    once (its ``Nats-Schedule-Next`` values strictly increase)."""
    deadline = time.monotonic() + 30
    while await _subjects(nc, "fs.sch.at.>") and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    left = await _subjects(nc, "fs.sch.at.>")
    assert not left, f"@at schedules never fired: {sorted(left)[:10]}"
    fired = {int(s.rsplit(".", 1)[1]): k for s, k in (await _subjects(nc, "fs.tgt.at.>")).items()}
    twice = {n: k for n, k in fired.items() if k != 1}
    assert not twice, f"@at schedules fired more than once: {twice}"
    assert pub.acked <= set(fired), f"acknowledged, never fired: {sorted(pub.acked - set(fired))}"
    assert set(fired) <= pub.sent, "fired what nobody scheduled"
    info = await api(nc, f"$JS.API.STREAM.INFO.{SCHEDULE_STREAM}", None, 60)
    nexts: list[str] = []
    seq = info["state"]["first_seq"]
    while True:
        m = await api(nc, f"$JS.API.STREAM.MSG.GET.{SCHEDULE_STREAM}",
                      {"seq": seq, "next_by_subj": "fs.tgt.every"}, 60, done=(10037,))  # fmt: skip
        if "message" not in m:
            break
        _, _, h = parse_headers(base64.b64decode(m["message"]["hdrs"]))
        nexts.append(h["Nats-Schedule-Next"][0])
        seq = m["message"]["seq"] + 1
    assert nexts, "the @every schedule never fired"
    assert nexts == sorted(set(nexts)), f"an @every time produced twice: {nexts}"
    return (
        f"schedules {SCHEDULE_STREAM}: {len(pub.acked)} @at acknowledged, {len(fired)} fired "
        f"once each; @every fired {len(nexts)} times, each planned time once"
    )


FAST_STREAM = "FF"


@dataclass
class FastPublisher:
    """Fast-ingest batches (``allow_batched``, as replicated as the run's stream) through
    the faults: batches of 5 to 30 messages, each on a subject of its own with its batch
    sequence as payload, in ``fail`` gap mode (a lost message ends the batch), paced by the
    flow acks; a batch no answer comes back for is given up. ``check_fast`` then reads the
    stream back through the cluster."""

    nc: NATS
    finals: dict[str, int] = field(default_factory=dict)  # batch id -> count in its PubAck
    sent: dict[str, int] = field(default_factory=dict)  # batch id -> messages sent
    stopping: bool = False

    async def run(self, rng: random.Random) -> None:
        n = 0
        while not self.stopping:
            await self._batch(f"fb{n}", rng.randint(5, 30), rng.choice((2, 5, 10)))
            n += 1
            await asyncio.sleep(0.05)

    async def _batch(self, bid: str, size: int, flow: int) -> None:
        acked = [0]
        final: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on(m: Any) -> None:
            try:
                a = json.loads(m.data)
            except ValueError:
                return
            if a.get("type") == "ack":
                acked[0] = max(acked[0], int(a["seq"]))
            elif "count" in a and not final.done():
                final.set_result(int(a["count"]))
            elif "error" in a and "type" not in a and not final.done():
                final.set_result(0)

        try:
            sub = await self.nc.subscribe(f"ff.r.{bid}.>", cb=on)
            for seq in range(1, size + 1):
                deadline = time.monotonic() + 3
                while seq - acked[0] > 2 * flow and not final.done():
                    if time.monotonic() > deadline:
                        return  # no answer: given up
                    await asyncio.sleep(0.02)
                if final.done():
                    break
                op = 0 if seq == 1 else 2 if seq == size else 1
                reply = f"ff.r.{bid}.{flow}.fail.{seq}.{op}.$FI"
                await self.nc.publish(f"ff.m.{bid}", b"%d" % seq, reply=reply)
                self.sent[bid] = seq
            self.finals[bid] = await asyncio.wait_for(final, 5)
        except Exception:  # a timeout, a connection lost to a fault: given up
            pass
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopping = True
        await asyncio.wait_for(task, 30)


async def create_fast_stream(nc: NATS, replicas: int) -> None:
    """The stream, and a plain publish on ``ff.w`` answered: its group has a leader before
    the first batch (a batch sent to nobody is only given up)."""
    await create_feature_stream(nc, FAST_STREAM, ["ff.m.>", "ff.w"], replicas, allow_batched=True)
    await until_acked(nc, "ff.w", b"", {}, _within(30.0))


def _within(seconds: float) -> Callable[[], bool]:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() < deadline


async def check_fast(nc: NATS, pub: FastPublisher) -> str:
    """The fast batches' messages, read through the cluster: every batch holds messages
    1..k of what was sent, each once and in order; a batch that got its PubAck holds
    exactly the ``count`` it says."""
    info = await api(nc, f"$JS.API.STREAM.INFO.{FAST_STREAM}", None, 60)
    state = info["state"]
    held: dict[str, list[int]] = {}
    first = max(1, state["first_seq"]) if state["messages"] else state["last_seq"] + 1
    for seq in range(first, state["last_seq"] + 1):
        m = await api(nc, f"$JS.API.STREAM.MSG.GET.{FAST_STREAM}", {"seq": seq}, 60,
                      done=(10037,))  # fmt: skip
        subject = m.get("message", {}).get("subject", "")
        if not subject.startswith("ff.m."):
            continue  # deleted, or the warm-up publish
        bid = subject.rsplit(".", 1)[1]
        held.setdefault(bid, []).append(int(base64.b64decode(m["message"]["data"])))
    for bid, seqs in held.items():
        assert seqs == list(range(1, len(seqs) + 1)), (
            f"batch {bid} holds {seqs} (sent {pub.sent.get(bid)}, PubAck {pub.finals.get(bid)})"
        )
        assert len(seqs) <= pub.sent.get(bid, 0), f"batch {bid}: more than was sent"
    for bid, count in pub.finals.items():
        got = len(held.get(bid, []))
        assert got == count, f"batch {bid}: PubAck count {count}, {got} stored"
    return (
        f"fast batches {FAST_STREAM}: {len(pub.sent)} started, {len(pub.finals)} answered, "
        f"each stored as its PubAck says, every batch a run 1..k"
    )


async def stop_publishers(pubs: list[Publisher], tasks: list[asyncio.Task[None]]) -> None:
    for p in pubs:
        p.stopping = True
        p.give_up_at = time.monotonic() + 10
    await asyncio.wait_for(asyncio.gather(*tasks), 30)


async def close_clients(
    pubs: list[Publisher], tasks: list[asyncio.Task[None]], admin: NATS
) -> None:
    for t in tasks:
        t.cancel()
    for p in pubs:
        await quiet_close(p.nc)
    await quiet_close(admin)


async def check_through_cluster(nc: NATS, history: History) -> set[int]:
    """Every message read back through the cluster (DIRECT.GET) and checked; returns the
    sequences the stream holds."""
    stored = await drain(nc, STREAM)
    rep = check(history, stored)
    assert rep.ok, f"through the cluster: {rep.summary()}"
    return {m.seq for m in stored}


async def finish(
    pubs: list[Publisher],
    tasks: list[asyncio.Task[None]],
    admin: NATS,
    states: Callable[[], Awaitable[list[dict[str, Any] | None]]],
    logs: Callable[[], str],
    consumer: AckingConsumer | None = None,
) -> None:
    """The end of a run: publishers stopped, replicas converged, the stream read back
    through the cluster and checked against what the publishers recorded, and the consumer
    (when there is one) drained and checked (``drain_consumer``)."""
    await stop_publishers(pubs, tasks)
    await converge(states, logs)
    history = pubs[0].history
    stored = await check_through_cluster(admin, history)
    if consumer is not None:
        await drain_consumer(consumer, stored, logs=logs)


async def stream_leader(nc: NATS) -> str:
    try:
        m = await nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=1.0)
        info: dict[str, Any] = json.loads(m.data)
        return str(info.get("cluster", {}).get("leader", ""))
    except Exception:  # no leader at the moment
        return ""


async def probe_leader(nc: NATS, server: str, window: float) -> list[dict[str, Any]]:
    """``STREAM.INFO`` of the stream through ``nc``, a connection to ``server`` whose routes
    are all cut or held back (so only ``server`` can answer), every 50 ms for ``window``
    seconds: the answers ``server`` gave as the stream's leader. A server that has had no
    word from its followers since before it was stopped must give none (has_lease)."""
    subject = f"$JS.API.STREAM.INFO.{STREAM}"

    async def ask() -> dict[str, Any] | None:
        try:
            m = await nc.request(subject, b"", timeout=0.3)
        except Exception:  # unanswered: as it must be
            return None
        out: dict[str, Any] = json.loads(m.data)
        return out

    asks = []
    end = time.monotonic() + window
    while time.monotonic() < end:
        asks.append(asyncio.create_task(ask()))
        await asyncio.sleep(0.05)
    answers = await asyncio.gather(*asks)
    return [a for a in answers if a and a.get("cluster", {}).get("leader") == server]


async def api(
    nc: NATS,
    subject: str,
    body: dict[str, Any] | None,
    timeout: float,
    done: tuple[int, ...] = (),
) -> Any:
    """A JetStream API request retried until it succeeds (or ``timeout`` passes); an
    error whose ``err_code`` is in ``done`` counts as success (a retry that finds the work
    done: its first attempt succeeded and the answer was lost)."""
    data = json.dumps(body).encode() if body is not None else b""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            m = await nc.request(subject, data, timeout=2)
            last = json.loads(m.data)
            if "error" not in last or last["error"].get("err_code") in done:
                return last
        except Exception as e:  # the group is still electing
            last = e
        await asyncio.sleep(0.2)
    raise AssertionError(f"{subject}: {last!r}")


async def create_stream(nc: NATS, replicas: int) -> None:
    cfg = {"name": STREAM, "subjects": ["f.>"], "num_replicas": replicas, "storage": "file",
           "allow_direct": True}  # fmt: skip
    await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", cfg, 30)


# The slowest rate at which a replica copies the stream from the leader's store, in bytes per
# second: a newcomer copied 3.3 GB in about 50 s on a 2-core machine running five servers.
COPY_RATE: Final = 20e6


class Progress:
    """A wait's deadline that allows for the data to copy and moves while the thing waited
    for progresses: a replica catching up copies a stream that grows through the run
    (gigabytes after a few hundred cycles), so a fixed timeout would fail a slow copy rather
    than a stalled one. Fails after ``stall`` seconds without progress, and no sooner than
    ``stall`` plus the time to copy the stream at COPY_RATE (``copying``); after ``limit``
    in all."""

    def __init__(self, stall: float, limit: float = 1800.0) -> None:
        now = time.monotonic()
        self.start = now
        self.stall = stall
        self.deadline = now + stall
        self.end = now + limit
        self.best: float | None = None

    def copying(self, nbytes: int) -> None:
        self.deadline = max(self.deadline, self.start + self.stall + nbytes / COPY_RATE)

    def left(self, remaining: float | None) -> bool:
        """``remaining``: how far from done (smaller is better; None: unknown). False once
        the wait has stalled or run out."""
        now = time.monotonic()
        if remaining is not None and (self.best is None or remaining < self.best):
            self.best = remaining
            self.deadline = max(self.deadline, now + self.stall)
        return now < min(self.deadline, self.end)


async def wait_healthy(
    nc: NATS, replicas: int, logs: Callable[[], str], timeout: float = 60.0
) -> None:
    """Until the leader reports every other replica online, heard from within the last
    second and at most a few entries behind; fails after ``timeout`` seconds in which the
    laggards' lag did not shrink (and not before the stream could have been copied)."""
    wait = Progress(timeout)
    last: Any = None
    remaining: float | None = None
    while wait.left(remaining):
        remaining = None
        try:
            m = await nc.request(f"$JS.API.STREAM.INFO.{STREAM}", b"", timeout=1.0)
            info = json.loads(m.data)
            wait.copying(info.get("state", {}).get("bytes", 0))
            last = info.get("cluster", {})
            reps = last.get("replicas") or []
            if (
                last.get("leader")
                and len(reps) == replicas - 1
                and all(
                    not r.get("offline") and r.get("active", 1e10) < 1e9 and r.get("lag", 0) <= 64
                    for r in reps
                )
            ):
                return
            if last.get("leader") and len(reps) == replicas - 1:
                remaining = sum(r.get("lag", 0) for r in reps)
        except Exception as e:  # no leader at the moment
            last = e
        await asyncio.sleep(0.1)
    raise AssertionError(f"replicas not current after {timeout} s without progress: {last!r}\n"
                         f"{logs()}")  # fmt: skip


async def converge(
    states: Callable[[], Awaitable[list[dict[str, Any] | None]]],
    logs: Callable[[], str],
    timeout: float = 60.0,
) -> None:
    """Until every replica reports the same state, twice in a row."""
    deadline = time.monotonic() + timeout
    prev: list[Any] = []
    while True:
        keys = [
            None if not s else (s["messages"], s["bytes"], s["first_seq"], s["last_seq"])
            for s in await states()
        ]
        if None not in keys and len(set(keys)) == 1 and keys == prev:
            return
        prev = keys
        if time.monotonic() > deadline:
            raise AssertionError(f"replicas did not converge: {keys}\n{logs()}")
        await asyncio.sleep(0.3)


def _stored(seq: int, subject: str, hdr: bytes | None, data: bytes) -> StoredMsg:
    mid = None
    if hdr:
        _, _, h = parse_headers(hdr)
        mid = (h.get("Nats-Msg-Id") or [None])[0]
    return StoredMsg(seq, subject, data, mid)


def holds_stream(store_dir: Path) -> bool:
    """Does this (stopped) server's store hold the stream?"""
    recs = DiskCatalog(store_dir).load()
    for r in recs:
        r.store.stop()
    return any(r.name == STREAM for r in recs)


def check_stores(history: History, store_dirs: Iterable[tuple[str, Path]]) -> int:
    """Each server's store, opened offline after its server stopped: checked against
    ``history``, and all identical (sequence, subject, headers, data, timestamp). Returns
    how many messages each holds."""
    contents: dict[str, list[tuple[int, str, bytes | None, bytes, int]]] = {}
    for name, store_dir in store_dirs:
        recs = [r for r in DiskCatalog(store_dir).load() if r.name == STREAM]
        assert len(recs) == 1, f"{name}: stream {STREAM} not on disk"
        store = recs[0].store
        try:
            st = store.state()
            msgs = store.load_range(st.first_seq, st.msgs + 1) if st.msgs else []
        finally:
            store.stop()
        contents[name] = [(m.seq, m.subject, m.hdr, m.data, m.ts) for m in msgs]
        rep = check(history, [_stored(m.seq, m.subject, m.hdr, m.data) for m in msgs])
        assert rep.ok, f"replica {name}: {rep.summary()}"
    first_name, first = next(iter(contents.items()))
    for name, msgs in contents.items():
        assert msgs == first, f"replica {name} differs from {first_name}"
    return len(first)


CONSUMER = "W"
BATCH = 200  # messages per pull request


@dataclass
class AckingConsumer:
    """A durable pull consumer of the stream, taking every message and acknowledging it with
    ack-sync, through faults (issue 19: "consumers with acks").

    It records every stream sequence delivered, and when each ack-sync was answered
    (``confirmed``). A delivery is a *violation* when it answers a pull request sent after
    that message's ack-sync was answered: an acknowledged message came back (each pull has
    its own inbox, so a delivery is known to answer it). A message delivered again before
    its ack is confirmed is at-least-once, and fine; an ack-sync that gets no answer leaves
    the message to be delivered again after ``ack_wait``."""

    nc: NATS
    delivered: set[int] = field(default_factory=set)
    confirmed: dict[int, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    # at the first violation: the consumer's info as its leader then told it (who delivered)
    leader_then: str = ""
    deliveries: int = 0
    stopping: bool = False

    async def run(self) -> None:
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{CONSUMER}"
        request = b'{"batch":%d,"expires":1000000000}' % BATCH
        while not self.stopping:
            replies: list[str] = []
            pulled_at = time.time_ns()
            try:
                # each pull on its own inbox: what arrives there was sent for this request
                inbox = self.nc.new_inbox()
                sub = await self.nc.subscribe(inbox)
                try:
                    await self.nc.publish(subject, request, reply=inbox)
                    while len(replies) < BATCH:
                        m = await sub.next_msg(timeout=2.0)
                        if not m.reply:  # a status: the request expired (408) or was refused
                            if (m.headers or {}).get("Status") != "408":
                                await asyncio.sleep(0.1)  # no leader to take it (503) yet
                            break
                        replies.append(m.reply)
                finally:
                    await sub.unsubscribe()
            except Exception:  # a timeout, a lost connection: pull again
                await asyncio.sleep(0.05)
            # the batch's ack-syncs in flight together (each answered once committed)
            await asyncio.gather(*(self._take(r, pulled_at) for r in replies))

    async def _info(self) -> str:
        try:
            m = await self.nc.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{CONSUMER}", b"", 2)
            return f"{time.monotonic():.2f} {m.data[:1500]!r}"
        except Exception as e:  # no leader answers
            return repr(e)

    async def _take(self, reply: str, pulled_at: int) -> None:
        # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
        seq = int(reply.split(".")[5])
        self.deliveries += 1
        at = self.confirmed.get(seq)
        if at is not None and at < pulled_at:
            self.violations.append(
                f"seq {seq} delivered at {time.monotonic():.2f} for a pull sent after its "
                f"ack-sync ({reply})"
            )
            if len(self.violations) == 1:
                self.leader_then = await self._info()
        self.delivered.add(seq)
        try:
            await self.nc.request(reply, b"+ACK", timeout=2.0)
        except Exception:  # not confirmed: it comes again after ack_wait
            return
        self.confirmed.setdefault(seq, time.time_ns())


async def create_consumer(nc: NATS) -> None:
    cfg = {"durable_name": CONSUMER, "ack_policy": "explicit", "ack_wait": 3 * 10**9,
           "max_ack_pending": 2000}  # fmt: skip
    await api(nc, f"$JS.API.CONSUMER.CREATE.{STREAM}.{CONSUMER}",
              {"stream_name": STREAM, "config": cfg}, 30)  # fmt: skip


async def _all_acked(nc: NATS, last: int) -> bool:
    """The consumer's committed ack floor covers ``last`` with nothing pending."""
    try:
        m = await nc.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{CONSUMER}", b"", 2)
        info = json.loads(m.data)
        return bool(info["ack_floor"]["stream_seq"] >= last and info["num_ack_pending"] == 0)
    except Exception:  # no leader answers yet
        return False


async def drain_consumer(
    c: AckingConsumer,
    stored: set[int],
    timeout: float = 90.0,
    logs: Callable[[], str] | None = None,
) -> None:
    """After the last fault: until the consumer has taken and confirmed every message the
    stream holds; then check that none came back after its ack-sync was answered."""
    deadline = time.monotonic() + timeout
    while not stored <= c.confirmed.keys():
        if stored <= c.delivered and await _all_acked(c.nc, max(stored, default=0)):
            break  # an ack-sync lost with a leader, its ack committed: not delivered again
        if time.monotonic() > deadline:
            missing = sorted(stored - c.confirmed.keys())
            try:
                m = await c.nc.request(f"$JS.API.CONSUMER.INFO.{STREAM}.{CONSUMER}", b"", 2)
                info: Any = m.data[:1500]
            except Exception as e:  # no leader answers
                info = e
            raise AssertionError(
                f"consumer info: {info!r}\n"
                f"consumer {CONSUMER}: {len(missing)} messages never confirmed "
                f"(first {missing[:10]}; delivered {len(c.delivered)} of {len(stored)})"
            )
        await asyncio.sleep(0.2)
    c.stopping = True
    assert not c.violations, (
        f"acknowledged messages delivered again: {c.violations[:10]}\n"
        f"consumer info at the first: {c.leader_then}\n{logs() if logs else ''}"
    )
    extra = sorted(c.delivered - stored)
    assert not extra, f"delivered what the stream never held: {extra[:10]}"
