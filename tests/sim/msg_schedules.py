"""Message schedules in the deterministic tier: a second R3 stream, ``SCH``
(``allow_msg_schedules``), beside the checked one, with a publisher that sends an ``@at``
schedule 0.5 to 2 virtual seconds ahead on a subject of its own every few tenths of a
second, and after each a ``Nats-Rollup: sub`` message on one of three subjects, each retried
with its ``Nats-Msg-Id`` until acknowledged, through the faults.

Checked once every fault has healed, every schedule's time has passed and the replicas
converged: the replicas hold the same messages; no schedule is left (each fired and purged
itself); each rolled-up subject holds one message; every ``@at`` schedule fired at most
once, each acknowledged one exactly once, and nothing fired that was not scheduled. A
firing proposed by a leader that lost the leadership before it committed may be made again
by the next leader (nats-server's at-least-once), but one that committed must never be made
again: the next leader applies it before it leads, and the firing purges its schedule.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from embedded_cluster import store_messages

from sim.client import SimClient
from sim.world import JsWorld, SimFailure

__all__ = ["SCHED_STREAM", "SchedulePublisher"]

SCHED_STREAM = "SCH"


def _at(w: JsWorld, ahead: float) -> str:
    ns = w.clock.time_ns() + int(ahead * 1e9)
    secs, rest = divmod(ns, 10**9)
    return "@at " + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rest // 10**6:03d}Z"


class SchedulePublisher:
    """The ``@at`` schedules of one run, and what fired (``check``)."""

    def __init__(self, w: JsWorld, rng: random.Random) -> None:
        self.w = w
        self.rng = rng
        self.sent: set[int] = set()
        self.acked: set[int] = set()
        self.last_at = 0.0  # the loop time of the latest schedule's firing
        self.fired = 0

    def stream(self, name: str) -> Any:
        return self.w.stream(name, SCHED_STREAM)

    async def create(self) -> None:
        cfg = {"name": SCHED_STREAM, "subjects": ["sch.>"], "num_replicas": 3,
               "allow_msg_schedules": True, "allow_rollup_hdrs": True}  # fmt: skip
        await self.w.create_stream("sched-admin", cfg)

    async def run(self) -> None:
        w, rng = self.w, self.rng
        c: SimClient | None = None
        n = 0
        while w.publishing:
            n += 1
            self.sent.add(n)
            ahead = rng.uniform(0.5, 2.0)
            hdr = {"Nats-Schedule": _at(w, ahead), "Nats-Schedule-Target": f"sch.tgt.{n}",
                   "Nats-Msg-Id": f"at-{n}"}  # fmt: skip
            self.last_at = max(self.last_at, w.loop.time() + ahead)
            c, reply = await w.publish_answered(c, "sched", f"sch.at.{n}", b"s", hdr, rng, rng)
            if reply is not None:
                self.acked.add(n)
            # and a rollup of one of three subjects: each ends up holding its last one only
            roll = {"Nats-Rollup": "sub", "Nats-Msg-Id": f"roll-{n}"}
            subject = f"sch.roll.{n % 3}"
            c, _ = await w.publish_answered(c, "sched", subject, b"%d" % n, roll, rng, rng)
            await asyncio.sleep(rng.uniform(0.1, 0.4))
        if c is not None:
            c.close()

    def _contents(self, name: str) -> list[tuple[int, str, bytes, int, bytes]]:
        s = self.stream(name)
        return [] if s is None else store_messages(s.store)

    def _done(self, peers: list[str]) -> bool:
        """Every replica holds the same messages, and no schedule is left."""
        first = self._contents(peers[0])
        if any(subj.startswith("sch.at.") for _seq, subj, *_ in first):
            return False
        return all(self._contents(n) == first for n in peers[1:])

    async def check(self, peers: list[str]) -> None:
        w = self.w
        wait = max(0.0, self.last_at - w.loop.time()) + 20.0
        try:
            await w.until(lambda: self._done(peers), wait, "")
        except SimFailure:
            left = {n: [subj for _seq, subj, *_ in self._contents(n) if subj.startswith("sch.at.")]
                    for n in peers}  # fmt: skip
            sizes = {n: len(self._contents(n)) for n in peers}
            raise SimFailure(
                f"seed {w.seed}: {SCHED_STREAM} within {wait:.1f}s: schedules"
                f" left {left}, messages {sizes}"
            ) from None
        fired: dict[int, int] = {}
        for _seq, subj, *_ in self._contents(peers[0]):
            if subj.startswith("sch.tgt."):
                n = int(subj.rsplit(".", 1)[1])
                fired[n] = fired.get(n, 0) + 1
        rolls: dict[str, int] = {}
        for _seq, subj, *_ in self._contents(peers[0]):
            if subj.startswith("sch.roll."):
                rolls[subj] = rolls.get(subj, 0) + 1
        if any(k != 1 for k in rolls.values()):
            raise SimFailure(
                f"seed {w.seed}: rolled-up subjects hold more than their last: {rolls}"
            )
        twice = {n: k for n, k in fired.items() if k > 1}
        if twice:
            raise SimFailure(f"seed {w.seed}: @at schedules fired more than once: {twice}")
        missing = sorted(self.acked - set(fired))
        if missing:
            raise SimFailure(f"seed {w.seed}: acknowledged @at schedules never fired: {missing}")
        if not set(fired) <= self.sent:
            raise SimFailure(f"seed {w.seed}: fired what nobody scheduled")
        self.fired = len(fired)
        w.say(f"{SCHED_STREAM}: {len(self.acked)} schedules acknowledged, {len(fired)} fired once")
