"""The consumer side of a schedule: a durable pull consumer of the replicated stream, with
explicit acks, read through the faults, and its checks.

The rules are the real-process fault suite's (tests/faults/workload.AckingConsumer):

* every message is acknowledged with ack-sync (``+ACK`` as a request: the leader answers
  once the consumer state that records the ack is committed). A delivery that answers a
  pull sent *after* that message's ack-sync was answered is a violation: an acknowledged
  message came back. Each pull has its own inbox, so a delivery is known to answer it; the
  order of "ack answered" and "pull sent" is the order of events on the virtual loop. A
  message delivered again before its ack was confirmed is at-least-once, and fine;
* every delivery of a sequence carries the same payload, and at the end it is the payload
  every replica holds at that sequence (nothing delivered that the stream does not hold);
* nothing published and acknowledged is lost to the consumer: once the publishers are done
  and the replicas converged, the consumer takes and confirms every message the stream
  holds (or, for the few whose ack-sync answer was lost with a leader, the consumer's info
  says its ack floor covers the stream with nothing pending: committed, never redelivered);
* then the consumer's state on every replica (the leader's running consumer, the passive
  ones the followers hold from the committed state) has the same ``delivered`` and
  ``ack_floor``.

Its random choices (batch sizes, expiries, timeouts, which server it connects to) come from a
generator of its own, so the world's generator draws what it drew before the consumer
existed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

import orjson

from natsd.jetstream.engine import find_consumer
from sim.client import NoResponders, SimClient
from sim.world import CONSUMER, STREAM, JsWorld, SimFailure

__all__ = ["CONSUMER", "SimConsumer"]

ACK_WAIT = 2.0  # seconds: a delivered message not acknowledged comes again after this


@dataclass
class SimConsumer:
    w: JsWorld
    rng: random.Random
    # stream sequence -> the payload of its first delivery
    delivered: dict[int, bytes] = field(default_factory=dict)
    # stream sequence -> the event mark of its first ack-sync answer
    confirmed: dict[int, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    deliveries: int = 0
    pulls: int = 0
    stopping: bool = False
    marks: itertools.count[int] = field(default_factory=itertools.count)
    client: SimClient | None = None

    stream: str = STREAM

    async def connect(self) -> SimClient:
        if self.client is None or self.client.closed:
            self.client = await self.w.client("cons", rng=self.rng)
        return self.client

    async def create(self) -> None:
        """The durable consumer, created through whichever server; retried until the leader
        answers (a create of the same config again is a success)."""
        cfg = {
            "durable_name": CONSUMER,
            "ack_policy": "explicit",
            "ack_wait": int(ACK_WAIT * 1e9),
            "max_ack_pending": 1000,
        }
        body = {"stream_name": self.stream, "config": cfg}
        subject = f"$JS.API.CONSUMER.CREATE.{self.stream}.{CONSUMER}"
        for _ in range(30):
            c = await self.connect()
            try:
                r = await self.w.api(c, subject, body)
            except (TimeoutError, NoResponders, ConnectionError):
                await asyncio.sleep(0.2)
                continue
            if "error" not in r:
                self.w.say(f"consumer {CONSUMER} created")
                return
            self.w.say(f"consumer create: {r['error']}")
            await asyncio.sleep(0.2)
        raise self.w.failure("the consumer could not be created")

    # ---------------------------------------------------------------- the reader
    async def run(self) -> None:
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{CONSUMER}"
        loop = asyncio.get_running_loop()
        while not self.stopping:
            batch = self.rng.randint(10, 100)
            expires = self.rng.uniform(0.2, 1.0)
            request = b'{"batch":%d,"expires":%d}' % (batch, int(expires * 1e9))
            try:
                c = await self.connect()
                mark = next(self.marks)
                self.pulls += 1
                got = await c.pull(subject, request, batch, expires + 0.5)
            except ConnectionError:
                await asyncio.sleep(self.rng.uniform(0.01, 0.1))
                continue
            taken = []
            for d in got:
                if not d.reply:  # a status: expired (408), or refused
                    if not d.hdr.startswith(b"NATS/1.0 408"):
                        await asyncio.sleep(0.1)
                    continue
                taken.append((d.reply, self._take(d.reply, d.data, mark, loop.time())))
            if taken:
                # the batch's ack-syncs written at once (the leader answers them all when
                # the state that records them is committed)
                answers = await c.requests(
                    [(r, b"+ACK") for r, _ in taken], self.rng.uniform(0.5, 2.0)
                )
                for (_r, seq), a in zip(taken, answers, strict=True):
                    if isinstance(a, bytes):
                        self.confirmed.setdefault(seq, next(self.marks))
            # a reader that takes its messages in bursts (a live tail costs a replicated
            # consumer state every STATE_FLUSH_DELAY)
            await asyncio.sleep(self.rng.uniform(0.0, 0.5))

    def _take(self, reply: str, data: bytes, mark: int, now: float) -> int:
        # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
        toks = reply.split(".")
        if len(toks) != 9 or toks[2] != self.stream or toks[3] != CONSUMER:
            self.violations.append(f"a delivery with the reply subject {reply!r}")
            return 0
        seq = int(toks[5])
        self.deliveries += 1
        at = self.confirmed.get(seq)
        if at is not None and at < mark:
            self.violations.append(
                f"seq {seq} delivered at {now:.3f} for a pull sent after its ack-sync was "
                f"answered ({reply})"
            )
        first = self.delivered.setdefault(seq, data)
        if first != data:
            self.violations.append(
                f"seq {seq} delivered at {now:.3f} with another payload than before "
                f"({data[:40]!r} against {first[:40]!r})"
            )
        return seq

    # ---------------------------------------------------------------- the checks
    async def info(self) -> dict[str, Any] | None:
        try:
            c = await self.connect()
            return await self.w.api(c, f"$JS.API.CONSUMER.INFO.{self.stream}.{CONSUMER}")
        except (TimeoutError, NoResponders, ConnectionError):
            return None

    async def drain(self, task: asyncio.Future[None], stored: dict[int, bytes]) -> None:
        """After the publishers are done and the replicas converged (``stored``: the
        stream's messages, sequence -> payload): the consumer takes and confirms every one,
        then stops; then the rules above."""
        w = self.w
        last = max(stored, default=0)
        deadline = w.loop.time() + 60.0
        while not stored.keys() <= self.confirmed.keys():
            if task.done():
                task.result()  # its exception
                raise w.failure("the consumer stopped")
            if stored.keys() <= self.delivered.keys():
                info = await self.info()
                if (
                    info is not None
                    and "error" not in info
                    and info["ack_floor"]["stream_seq"] >= last
                    and info["num_ack_pending"] == 0
                ):
                    break  # an ack-sync answer lost with a leader, its ack committed
            if w.loop.time() > deadline:
                missing = sorted(stored.keys() - self.confirmed.keys())
                raise w.failure(
                    f"consumer {CONSUMER}: {len(missing)} messages never confirmed (first "
                    f"{missing[:10]}; delivered {len(self.delivered)} of {len(stored)}); "
                    f"info {json.dumps(await self.info())[:600]}"
                )
            await asyncio.sleep(0.2)
        self.stopping = True
        task.cancel()  # (its pull in flight, if any, would only wait for its expiry)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if self.client is not None:
            self.client.close()
        if self.violations:
            raise w.failure(f"consumer {CONSUMER}: {self.violations[:5]}")
        extra = sorted(self.delivered.keys() - stored.keys())
        if extra:
            raise w.failure(f"consumer {CONSUMER} delivered what the stream never held: {extra}")
        wrong = [s for s, data in self.delivered.items() if stored[s] != data]
        if wrong:
            raise w.failure(f"consumer {CONSUMER} delivered other payloads than stored: {wrong}")
        w.say(
            f"consumer {CONSUMER}: {self.deliveries} deliveries of {len(self.delivered)} "
            f"messages in {self.pulls} pulls, {len(self.confirmed)} ack-syncs answered"
        )

    def states(self, peers: list[str]) -> dict[str, tuple[Any, Any, bool] | None]:
        """Each peer's consumer: (delivered, ack_floor, passive), None where it has none."""
        out: dict[str, tuple[Any, Any, bool] | None] = {}
        for n in peers:
            s = self.w.stream(n)
            c = find_consumer(s, CONSUMER) if s is not None else None
            if c is None:
                out[n] = None
                continue
            doc = orjson.loads(c.state_doc())
            out[n] = (doc["delivered"], doc["ack_floor"], bool(c.passive))
        return out

    async def check_replicas(self, peers: list[str]) -> None:
        """The consumer's state on every peer agrees with its leader's: running on the
        stream's leader, passive on the others, all at the same delivered and ack floor."""

        def agree() -> bool:
            st = self.states(peers)
            if any(v is None for v in st.values()):
                return False
            running = [n for n, v in st.items() if v is not None and not v[2]]
            views = {json.dumps(v[:2]) for v in st.values() if v is not None}
            return running == [self.w.stream_leader()] and len(views) == 1

        try:
            await self.w.until(agree, 10.0, "consumer state on the replicas agrees")
        except SimFailure as e:
            raise SimFailure(f"{e}: {self.states(peers)}") from None
