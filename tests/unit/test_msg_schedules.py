"""Message schedules on virtual time (``jetstream/stream/schedules.py`` in an R1 memory
stream): when each pattern fires (nats-server's 250 ms floor, ``@every``'s rounding to the
second, cron slots, catch-up after a restart), what a firing stores, and every way a
schedule ends (fired ``@at``, deleted, replaced, ended by a plain message, retention), the
leader alone producing, and the table staying the size of the live schedules."""

from __future__ import annotations

from typing import Any

from natsd.core.scheduler import VirtualClock, VirtualScheduler
from natsd.jetstream.config.stream_types import RetentionPolicy, StorageType, StreamConfig
from natsd.jetstream.stream.commit import Committer
from natsd.jetstream.stream.schedule_pattern import format_next
from natsd.jetstream.stream.schedules import MsgSchedules, produced_header
from natsd.jetstream.stream.stream import Stream
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StoredMsg

S = 1_000_000_000
MS = 1_000_000
# 2026-01-01T00:00:00.400Z: not on a whole second, so the rounding shows
START = 1_767_225_600 * S + 400 * MS


class _Ctx:
    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock(START)
        self.scheduler = VirtualScheduler(self.clock)
        self.sublist: Sublist[Subscription] = Sublist()
        self.committer = Committer(self.scheduler, 0.0, False)
        self.catalog: Any = None
        self.account_name = "A"
        self.domain = ""
        self.max_payload = 1 << 20

    def send(self, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        pass

    def advise(
        self, subject: str, typ: str, body: dict[str, Any], system_too: bool = False
    ) -> None:
        pass

    def limits_set(self) -> bool:
        return False

    def storage_exceeded(self, memory: bool, subject: str, hdr: bytes | None, data: bytes) -> Any:
        return None


def _cfg(**kw: Any) -> StreamConfig:
    return StreamConfig(name="F", subjects=["sch.>", "tgt.>", "src.>"], allow_msg_schedules=True,
                        allow_msg_ttl=True, allow_rollup_hdrs=True,
                        storage=StorageType.MEMORY, **kw)  # fmt: skip


class Rig:
    def __init__(
        self, store: MemoryStore | None = None, ctx: _Ctx | None = None, **kw: Any
    ) -> None:
        self.ctx = ctx or _Ctx()
        self.sched = self.ctx.scheduler
        self.store = store or MemoryStore(
            StoreConfig(name="F", allow_msg_ttl=True), self.ctx.clock.time_ns
        )
        self.stream = Stream(self.ctx, _cfg(**kw), self.store, 0)  # type: ignore[arg-type]

    def now(self) -> int:
        return self.ctx.clock.time_ns()

    def pub(self, subject: str, data: bytes = b"x", **headers: str) -> None:
        hdr = None
        if headers:
            lines = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
            hdr = f"NATS/1.0\r\n{lines}\r\n".encode()
        self.stream.process(subject.encode(), None, hdr, data)

    def on(self, subject: str) -> list[StoredMsg]:
        out = []
        seq = 1
        while (m := self.store.load_next_msg(subject, seq)) is not None:
            out.append(m)
            seq = m.seq + 1
        return out

    def times(self, subject: str) -> list[int]:
        """When each message on ``subject`` was stored, in ms after START."""
        return [(m.ts - START) // MS for m in self.on(subject)]

    def advance(self, seconds: float) -> None:
        self.sched.advance(seconds)


def _at(offset_ns: int) -> str:
    return "@at " + format_next(START + offset_ns, None)


def test_at_fires_once_at_its_instant_and_purges_itself() -> None:
    r = Rig()
    r.pub("sch.a", b"payload", Nats_Schedule=_at(3 * S), Nats_Schedule_Target="tgt.a",
          Nats_Schedule_TTL="5s", X_Custom="v1", Nats_Msg_Id="m1", Nats_TTL="1h")  # fmt: skip
    r.advance(2.9)
    assert r.on("tgt.a") == []
    r.advance(0.2)
    (m,) = r.on("tgt.a")
    assert (m.ts - START) // MS == 3000 and m.data == b"payload"
    assert m.hdr == (b"NATS/1.0\r\nX-Custom: v1\r\nNats-Scheduler: sch.a\r\n"
                     b"Nats-Schedule-Next: purge\r\nNats-TTL: 5s\r\n\r\n")  # fmt: skip
    assert r.on("sch.a") == [] and not r.stream._schedules.entries  # type: ignore[union-attr]
    r.advance(5)
    r.stream.expire(r.now())  # (the engine's expiry timer)
    assert r.on("tgt.a") == []  # the Nats-TTL it was given (Nats-Schedule-TTL: 5s)


def test_a_time_already_past_fires_after_the_floor() -> None:
    r = Rig()
    r.pub("sch.b", b"past", Nats_Schedule="@at 2000-01-01T00:00:00Z", Nats_Schedule_Target="tgt.b")
    r.advance(0.2)
    assert r.on("tgt.b") == []
    r.advance(0.1)
    assert r.times("tgt.b") == [250]


def test_every_rounds_to_the_second() -> None:
    r = Rig()
    r.pub("sch.c", b"tick", Nats_Schedule="@every 1s", Nats_Schedule_Target="tgt.c", H="x")
    r.advance(3.7)
    # stored at .400: round -> .000, +1 s; then every whole second
    assert r.times("tgt.c") == [600, 1600, 2600, 3600]
    first = r.on("tgt.c")[0]
    assert first.hdr == (b"NATS/1.0\r\nH: x\r\nNats-Scheduler: sch.c\r\nNats-Schedule-Next: "
                         + format_next(START - 400 * MS + 2 * S, None).encode()
                         + b"\r\n\r\n")  # fmt: skip
    r2 = Rig()
    r2.pub("sch.d", Nats_Schedule="@every 1500ms", Nats_Schedule_Target="tgt.d")
    r2.advance(6)
    # .4 -> 0 + 1.5 = 1.5 (1100 ms after START); round(1.5) = 2 + 1.5 = 3.5; 5.5: every 2 s
    assert r2.times("tgt.d") == [1100, 3100, 5100]


def test_cron_in_a_zone_and_the_floor() -> None:
    r = Rig()
    r.pub("sch.e", Nats_Schedule="*/2 * * * * *", Nats_Schedule_Target="tgt.e",
          Nats_Schedule_Time_Zone="Asia/Tokyo")  # fmt: skip
    r.advance(4)
    # first slot 2 s (1600 ms after START) then 4 s
    assert r.times("tgt.e") == [1600, 3600]
    assert r.on("tgt.e")[0].hdr.endswith(b"+09:00\r\n\r\n")  # type: ignore[union-attr]
    r2 = Rig(ctx=_Ctx(VirtualClock(START + 1_500 * MS)))  # at .900: the slot 2.000 is 100 ms off
    r2.pub("sch.e", Nats_Schedule="*/2 * * * * *", Nats_Schedule_Target="tgt.e")
    r2.advance(0.2)
    assert r2.on("tgt.e") == []
    r2.advance(0.1)
    assert [(m.ts - START) // MS for m in r2.on("tgt.e")] == [1750]  # floor: armed + 250 ms


def test_source_subject_and_rollup() -> None:
    r = Rig()
    r.pub("src.g", b"sample-1", S_Hdr="s1", Nats_Msg_Id="s1")
    r.pub("tgt.g", b"old")
    r.pub("sch.g", b"own", Nats_Schedule="@every 1s", Nats_Schedule_Target="tgt.g",
          Nats_Schedule_Source="src.g", Nats_Schedule_Rollup="sub", Own="o")  # fmt: skip
    r.advance(0.7)
    (m,) = r.on("tgt.g")
    assert m.data == b"sample-1" and m.hdr is not None
    assert m.hdr.startswith(b"NATS/1.0\r\nS-Hdr: s1\r\nNats-Scheduler: sch.g\r\n")
    assert m.hdr.endswith(b"\r\nNats-Rollup: sub\r\n\r\n") and b"Own" not in m.hdr
    r.pub("src.g", b"sample-2")
    r.advance(1)
    assert [m.data for m in r.on("tgt.g")] == [b"sample-2"]


def test_ways_a_schedule_ends() -> None:
    r = Rig()
    r.pub("sch.del", Nats_Schedule="@every 1s", Nats_Schedule_Target="tgt.del")
    r.pub("sch.plain", Nats_Schedule="@every 1s", Nats_Schedule_Target="tgt.plain")
    r.pub("sch.rep", b"first", Nats_Schedule=_at(2 * S), Nats_Schedule_Target="tgt.r1")
    r.pub("sch.rep", b"second", Nats_Schedule=_at(3 * S), Nats_Schedule_Target="tgt.r2")
    r.pub("sch.cancel", Nats_Schedule=_at(2 * S), Nats_Schedule_Target="tgt.cancel")
    r.pub("tgt.x", Nats_Schedule_Next="purge", Nats_Scheduler="sch.cancel")
    r.pub("sch.plain", b"plain")
    r.advance(0.7)
    assert len(r.on("tgt.del")) == 1 and r.on("tgt.plain") == []
    r.store.remove_msg(r.on("sch.del")[0].seq)
    r.advance(5)
    assert len(r.on("tgt.del")) == 1
    assert r.on("tgt.r1") == [] and len(r.on("tgt.r2")) == 1
    assert r.on("tgt.cancel") == [] and r.on("sch.cancel") == []
    assert not r.stream._schedules.entries  # type: ignore[union-attr]


def test_interest_stream_without_consumers_keeps_no_schedule() -> None:
    r = Rig(retention=RetentionPolicy.INTEREST)
    r.pub("sch.i", Nats_Schedule="@at 2000-01-01T00:00:00Z", Nats_Schedule_Target="tgt.i")
    r.advance(2)
    assert r.store.state().last_seq == 1 and r.store.state().msgs == 0


class _Replica:
    """A replica of a stream, as the schedules see it: its store, whether it leads, and
    what it produces (stored at once, as a leader's proposal applies; followers apply
    what the leader stores)."""

    def __init__(self, ctx: _Ctx) -> None:
        self.store = MemoryStore(StoreConfig(name="F"), ctx.clock.time_ns)
        self.leading = False
        self.sched = MsgSchedules(self, ctx.clock, ctx.scheduler)
        self.peers: list[_Replica] = []

    def leads(self) -> bool:
        return self.leading

    def produce(self, subject: str, hdr: bytes, data: bytes, ttl: int, rollup: str) -> bool:
        for r in (self, *self.peers):
            r.apply(subject, hdr, data)
        return True

    def apply(self, subject: str, hdr: bytes | None, data: bytes) -> None:
        seq, ts = self.store.store_msg(subject, hdr, data, 0)
        purge = self.sched.stored(seq, subject, hdr, ts)
        if purge:
            self.store.purge_ex(purge, 0, 0)


def test_only_the_leader_produces_and_a_new_leader_fires_what_is_due() -> None:
    ctx = _Ctx()
    a, b = _Replica(ctx), _Replica(ctx)
    a.peers, b.peers = [b], [a]
    hdr = b"NATS/1.0\r\nNats-Schedule: @every 1s\r\nNats-Schedule-Target: tgt.c\r\n\r\n"
    for r in (a, b):
        r.apply("sch.c", hdr, b"x")
    ctx.scheduler.advance(3)
    # no leader: both replicas hold the firing in flight, nothing is produced
    assert a.sched.inflight == b.sched.inflight == {"sch.c"}
    assert a.store.state().msgs == 1
    b.leading = True
    b.sched.reset()
    ctx.scheduler.advance(0.3)
    # due since 600 ms: fired once, 250 ms after leading; the next time is counted from
    # now (rounded to 4 s, +1 s): the missed ones are not made up
    times = [(m.ts - START) // MS for m in _all(b.store, "tgt.c")]
    assert times == [3250] and [m.seq for m in _all(a.store, "tgt.c")] == [2]
    assert not a.sched.inflight  # the firing, applied, re-armed it on the follower too
    ctx.scheduler.advance(1.4)
    assert [(m.ts - START) // MS for m in _all(b.store, "tgt.c")] == [3250, 4600]
    assert len(_all(a.store, "tgt.c")) == 2


def _all(store: MemoryStore, subject: str) -> list[StoredMsg]:
    out = []
    seq = 1
    while (m := store.load_next_msg(subject, seq)) is not None:
        out.append(m)
        seq = m.seq + 1
    return out


def test_restart_catches_up_once() -> None:
    """A stream opened on a store holding schedules from before: an overdue @at fires at
    once (after the floor), a repeating one at its next slot after now."""
    store = MemoryStore(StoreConfig(name="F"))
    old = START - 3600 * S
    for seq, (subj, pattern, target) in enumerate(
        (("sch.at", "@at 2020-01-01T00:00:00Z", "tgt.at"), ("sch.every", "@every 2s", "tgt.every"),
         ("sch.cron", "*/3 * * * * *", "tgt.cron")), 1):  # fmt: skip
        hdr = f"NATS/1.0\r\nNats-Schedule: {pattern}\r\nNats-Schedule-Target: {target}\r\n\r\n"
        store.store_raw(subj, hdr.encode(), b"x", seq, old)
    store.store_raw("sch.plain", b"NATS/1.0\r\nNats-Schedule: @every 1s\r\n"
                    b"Nats-Schedule-Target: tgt.plain\r\n\r\n", b"x", 4, old)  # fmt: skip
    store.store_raw("sch.plain", None, b"ended", 5, old)
    r = Rig(store=store)
    store._now_ns = r.ctx.clock.time_ns
    r.advance(4)
    assert r.times("tgt.at") == [250]
    # round(.400) = 0 + 2 s: 1600 ms; then 3600
    assert r.times("tgt.every") == [1600, 3600]
    # */3 after now: 3 s (2600 ms after START)
    assert r.times("tgt.cron") == [2600]
    assert r.on("tgt.plain") == []


def test_table_stays_the_size_of_the_live_schedules() -> None:
    r = Rig()
    sch = r.stream._schedules
    assert sch is not None
    for i in range(2000):
        r.pub(f"sch.{i}", Nats_Schedule="@at 2030-01-01T00:00:00Z", Nats_Schedule_Target="tgt.x")
        r.store.remove_msg(r.store.state().last_seq)
    assert len(sch.entries) < 200 and len(sch._heap) < 400


def test_produced_header_strips_as_nats_server() -> None:
    hdr = (b"NATS/1.0\r\nNats-Schedule: @every 1s\r\nnats-schedule-lower: l\r\n"
           b"Nats-Schedule-Whatever: w\r\nNats-Expected-Last-Msg-Id: x\r\nNats-Msg-Id: a\r\n"
           b"Nats-TTL: 1h\r\nNats-Rollup: sub\r\nKeep: k\r\n\r\n")  # fmt: skip
    assert produced_header(hdr, "sch.m", "purge", b"10s", True) == (
        b"NATS/1.0\r\nnats-schedule-lower: l\r\nKeep: k\r\nNats-Scheduler: sch.m\r\n"
        b"Nats-Schedule-Next: purge\r\nNats-TTL: 10s\r\nNats-Rollup: sub\r\n\r\n"
    )
    assert produced_header(None, "s", "purge", None, False) == (
        b"NATS/1.0\r\nNats-Scheduler: s\r\nNats-Schedule-Next: purge\r\n\r\n"
    )
