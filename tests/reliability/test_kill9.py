"""kill -9 under load (issue 7, fault 1).

natsd runs as a subprocess with a file stream. In each cycle, PUBLISHERS nats-py connections
publish at a steady rate (one publish in flight per publisher, so stream order is send order)
with mixed payload sizes (16 B .. 64 KiB, log-uniform) and a ``Nats-Msg-Id``; a pull consumer
fetches and acknowledges each message with ``ack_sync`` (an ack counts as *confirmed* once
the server answered it). At a random moment the server gets SIGKILL; it is restarted on the
same store directory and checked:

* the checker (``checker.py``) finds 0 acked messages lost, 0 corrupt, nothing unexpected,
  duplicated, out of order or at another sequence than its PubAck named;
* the stream and its consumer still exist (nats-server #6888 forgot whole streams);
* the consumer's ack floor is at least the highest sequence below which every ack was
  confirmed, and its delivered sequence at least every confirmed sequence;
* a confirmed ack never comes back: no message whose ack was confirmed is delivered again
  (``ack_wait`` is short so redeliveries of unconfirmed ones do happen within the test).

Cycles run in chains on one store (CHAIN cycles, then a fresh store), so state accumulates
over several crashes while the drain after each restart stays small. CI: 50 cycles;
soak (``make soak``): 1,000.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from ports import free_port

from .checker import History, Outcome, check, drain, make_payload, msg_id, random_size
from .helpers import ServerProc, close_quietly, connect

STREAM = "REL"
CONSUMER = "C"
PUBLISHERS = 4
RATE = 60.0  # publishes per second per publisher
CHAIN = 10  # cycles per store directory
ACK_WAIT = 2.0


@dataclass
class ConsumerLog:
    """What the pull consumer saw and what the server confirmed."""

    confirmed: dict[int, float] = field(default_factory=dict)  # stream seq -> confirm time
    regressions: list[str] = field(default_factory=list)
    delivered: int = 0

    def floor(self) -> int:
        """Highest s such that the acks of 1..s were all confirmed."""
        s = 0
        while s + 1 in self.confirmed:
            s += 1
        return s


@dataclass
class Chain:
    store: Path
    history: History = field(default_factory=History)
    consumer: ConsumerLog = field(default_factory=ConsumerLog)
    counters: list[int] = field(default_factory=lambda: [0] * PUBLISHERS)
    cycles: int = 0
    acked: int = 0
    lost: int = 0


async def publisher(
    nc: NATS, pid: int, chain: Chain, rng: random.Random, stop: asyncio.Event
) -> None:
    js = nc.jetstream()
    period = 1.0 / RATE
    next_at = time.monotonic()
    while not stop.is_set():
        counter = chain.counters[pid]
        chain.counters[pid] += 1
        data = make_payload(pid, counter, random_size(rng), rng)
        outcome, seq = Outcome.UNKNOWN, None
        try:
            ack = await js.publish(
                f"rel.{pid}", data, timeout=2.0, headers={"Nats-Msg-Id": msg_id(pid, counter)}
            )
            outcome, seq = Outcome.ACKED, ack.seq
        except nats.errors.NoRespondersError:
            outcome = Outcome.FAILED  # nothing was listening: not stored
        except nats.js.errors.APIError:
            outcome = Outcome.FAILED  # an error PubAck: the server refused it
        except (Exception, asyncio.CancelledError):
            outcome = Outcome.UNKNOWN  # timeout, connection lost, cancelled mid-flight
            chain.history.record(pid, counter, outcome, seq)
            return
        chain.history.record(pid, counter, outcome, seq)
        next_at += period
        delay = next_at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            next_at = time.monotonic()


async def consumer(nc: NATS, log: ConsumerLog, stop: asyncio.Event) -> None:
    js = nc.jetstream()
    psub = await js.pull_subscribe_bind(durable=CONSUMER, stream=STREAM)
    while not stop.is_set():
        try:
            msgs = await psub.fetch(batch=16, timeout=0.3)
        except nats.errors.TimeoutError:
            continue
        except Exception:
            return
        for msg in msgs:
            seq = msg.metadata.sequence.stream
            log.delivered += 1
            confirmed_at = log.confirmed.get(seq)
            # A confirmed ack must never be delivered again (allow for a redelivery that
            # the server sent before it processed the ack: ack_wait is ACK_WAIT).
            if confirmed_at is not None and time.monotonic() - confirmed_at > ACK_WAIT:
                log.regressions.append(
                    f"seq {seq} redelivered (delivery {msg.metadata.num_delivered}) "
                    f"{time.monotonic() - confirmed_at:.2f}s after its ack was confirmed"
                )
            try:
                await msg.ack_sync(timeout=1.0)
            except Exception:
                return  # the server is gone (or slow): stop, so confirmed acks stay in order
            log.confirmed.setdefault(seq, time.monotonic())


async def setup_or_verify(nc: NATS, chain: Chain) -> None:
    """First cycle: create the stream and consumer. Later: check what survived the kill."""
    js = nc.jetstream()
    if chain.cycles == 0:
        await js.add_stream(
            StreamConfig(
                name=STREAM,
                subjects=["rel.>"],
                storage=StorageType.FILE,
                allow_direct=True,
            )
        )
        await js.add_consumer(
            STREAM,
            ConsumerConfig(durable_name=CONSUMER, ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT),
        )
        return
    info = await js.stream_info(STREAM)  # raises if the stream was forgotten
    assert info.config.subjects == ["rel.>"]
    stored = await drain(nc, STREAM)
    rep = check(chain.history, stored)
    assert rep.ok, f"cycle {chain.cycles} in {chain.store}:\n{rep.summary()}"
    assert info.state.messages == len(stored), (info.state, len(stored))
    chain.acked = rep.acked
    ci = await js.consumer_info(STREAM, CONSUMER)
    log = chain.consumer
    floor = log.floor()
    assert ci.ack_floor is not None and ci.delivered is not None
    assert ci.ack_floor.stream_seq >= floor, (
        f"cycle {chain.cycles}: ack floor {ci.ack_floor.stream_seq} regressed below "
        f"{floor}, every ack up to which was confirmed"
    )
    top = max(log.confirmed, default=0)
    assert ci.delivered.stream_seq >= top, (ci.delivered, top)
    assert not log.regressions, log.regressions


async def run_cycle(chain: Chain, rng: random.Random, port: int) -> None:
    sp = ServerProc(
        chain.store, ["-js", "-sd", str(chain.store / "data"), "-a", "127.0.0.1", "-p", str(port)]
    )
    sp.start()
    try:
        await sp.wait_ready()
        admin = await connect(sp.url)
        try:
            await setup_or_verify(admin, chain)
        finally:
            await close_quietly(admin)
        pubs = [await connect(sp.url) for _ in range(PUBLISHERS)]
        cons = await connect(sp.url)
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(publisher(nc, i, chain, random.Random(rng.random()), stop))
            for i, nc in enumerate(pubs)
        ]
        tasks.append(asyncio.create_task(consumer(cons, chain.consumer, stop)))
        await asyncio.sleep(rng.uniform(0.2, 1.5))
        sp.kill9()  # SIGKILL while publishes and acks are in flight
        stop.set()
        await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for nc in [*pubs, cons]:
            await close_quietly(nc, 1.0)
        chain.cycles += 1
    finally:
        sp.stop()


async def final_check(chain: Chain, port: int) -> None:
    sp = ServerProc(
        chain.store, ["-js", "-sd", str(chain.store / "data"), "-a", "127.0.0.1", "-p", str(port)]
    )
    sp.start()
    try:
        await sp.wait_ready()
        nc = await connect(sp.url)
        try:
            await setup_or_verify(nc, chain)
        finally:
            await close_quietly(nc)
    finally:
        sp.stop()


async def run_chains(tmp: Path, cycles: int, seed: int) -> list[Chain]:
    rng = random.Random(seed)
    chains: list[Chain] = []
    port = free_port()
    while sum(c.cycles for c in chains) < cycles:
        chain = Chain(tmp / f"chain{len(chains)}")
        chain.store.mkdir()
        chains.append(chain)
        for _ in range(min(CHAIN, cycles - sum(c.cycles for c in chains))):
            await run_cycle(chain, rng, port)
        await final_check(chain, port)
        shutil.rmtree(chain.store / "data")  # passed: free the disk (a failure keeps it)
    return chains


def _summary(chains: list[Chain]) -> str:
    acked = sum(c.history.count(Outcome.ACKED) for c in chains)
    unknown = sum(c.history.count(Outcome.UNKNOWN) for c in chains)
    failed = sum(c.history.count(Outcome.FAILED) for c in chains)
    confirmed = sum(len(c.consumer.confirmed) for c in chains)
    cycles = sum(c.cycles for c in chains)
    return (
        f"{cycles} kill -9 cycles: {acked} publishes acked, {unknown} unknown, {failed} failed; "
        f"{confirmed} consumer acks confirmed; 0 acked lost, 0 corrupt, 0 ack regressions"
    )


@pytest.mark.timeout(420)
async def test_kill9_ci(tmp_path: Path) -> None:
    """CI tier: 50 kill -9 cycles (5 chains of 10) under load."""
    seed = random.randrange(1 << 30)
    chains = await run_chains(tmp_path, 50, seed)
    assert sum(c.cycles for c in chains) == 50
    acked = sum(c.history.count(Outcome.ACKED) for c in chains)
    assert acked > 50 * PUBLISHERS, f"too little load to mean anything (seed {seed})"
    assert sum(len(c.consumer.confirmed) for c in chains) > 50
    print(_summary(chains), f"(seed {seed})")


@pytest.mark.soak
@pytest.mark.timeout(3 * 3600)
async def test_kill9_soak(tmp_path: Path) -> None:
    """Soak tier: 1,000 kill -9 cycles (100 chains of 10)."""
    seed = random.randrange(1 << 30)
    chains = await run_chains(tmp_path, 1000, seed)
    assert sum(c.cycles for c in chains) == 1000
    print(_summary(chains), f"(seed {seed})")


# ------------------------------------------------------------------ restart to ready
STORE_BYTES = 100 * 1024 * 1024


async def _fill_store(url: str, rng: random.Random) -> tuple[int, int]:
    nc = await connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name=STREAM, subjects=["rel.>"], storage=StorageType.FILE))
        total = n = 0
        while total < STORE_BYTES:
            futs = []
            for _ in range(256):
                data = rng.randbytes(random_size(rng))
                total += len(data)
                n += 1
                futs.append(await js.publish_async(f"rel.{n % 8}", data))
            await asyncio.gather(*futs)
        info = await js.stream_info(STREAM)
        assert info.state.messages == n
        return n, info.state.bytes
    finally:
        await close_quietly(nc)


async def _ready_time(sp: ServerProc, port: int, timeout: float = 30.0) -> float:
    """Seconds from process start until a STREAM.INFO request succeeds."""
    sp.start()
    t0 = sp.started_at
    while True:
        assert time.monotonic() - t0 < timeout, "never became ready"
        try:
            # Probe with a bare socket: a refused nats-py connect waits reconnect_time_wait.
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            nc = await nats.connect(
                f"nats://127.0.0.1:{port}",
                allow_reconnect=False,
                connect_timeout=1,
                reconnect_time_wait=0,
            )
        except Exception:
            await asyncio.sleep(0.005)
            continue
        try:
            info = await nc.jetstream().stream_info(STREAM)
            elapsed = time.monotonic() - t0
            assert info.state.messages > 0
            return elapsed
        except Exception:
            await asyncio.sleep(0.005)
        finally:
            await close_quietly(nc)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_restart_to_ready_100mb(tmp_path: Path) -> None:
    """A ~100 MB store, killed with SIGKILL, is serving STREAM.INFO within 2 s of exec.

    Three restarts: the median meets the 2 s target (about 0.35 s when the machine is idle)
    and none takes over 6 s; a single run on a loaded 2-core machine can wait for the CPU."""
    port = free_port()
    args = ["-js", "-sd", str(tmp_path / "data"), "-a", "127.0.0.1", "-p", str(port)]
    sp = ServerProc(tmp_path, args)
    sp.start()
    try:
        await sp.wait_ready()
        n, nbytes = await _fill_store(sp.url, random.Random(7))
        assert nbytes >= STORE_BYTES
        sp.kill9()
        times = []
        for _ in range(3):
            times.append(await _ready_time(sp, port))
            sp.kill9()
        print(f"restart to ready, {n} msgs / {nbytes / 2**20:.0f} MiB: {times}")
        assert sorted(times)[1] < 2.0, times
        assert max(times) < 6.0, times
    finally:
        sp.stop()
