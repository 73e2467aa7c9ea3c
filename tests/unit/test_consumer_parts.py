"""The parts of a JetStream consumer, each on its own: no engine, no consumer, a memory
stream, a virtual clock and scheduler (``natsd.core.scheduler``).

Each test builds only the part it checks (and the few parts it is handed) and asserts what
the part's module docstring promises: who writes what, which timer it owns, and that its
``stop()`` cancels that timer.
"""

from __future__ import annotations

from typing import Any

from natsd.core.scheduler import VirtualClock, VirtualScheduler
from natsd.jetstream.config.consumer_config import AckPolicy, ConsumerConfig, PriorityPolicy
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.consumer.ack import AckTracker
from natsd.jetstream.consumer.advisory import Advisories
from natsd.jetstream.consumer.pacing import Pacing
from natsd.jetstream.consumer.priority import CYCLE, OK, PINNED, Priority
from natsd.jetstream.consumer.pull import PullDelivery
from natsd.jetstream.consumer.push import PushDelivery
from natsd.jetstream.consumer.shared import Cursor, Doorbell
from natsd.jetstream.consumer.state import STATE_FLUSH_DELAY, StateSaver
from natsd.jetstream.consumer.waiting import NextRequest, WaitingRequest
from natsd.jetstream.stream.commit import Committer
from natsd.jetstream.stream.stream import Stream
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription
from natsd.storage.catalog import StreamCatalog, StreamRecord
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

S = 1_000_000_000


class _Ctx:
    """The StreamContext a lone stream needs: time, timers, a sublist, advisories kept."""

    def __init__(self) -> None:
        self.clock = VirtualClock()
        self.scheduler = VirtualScheduler(self.clock)
        self.sublist: Sublist[Subscription] = Sublist()
        self.committer = Committer(self.scheduler, 0.0, False)
        self.catalog: Any = None
        self.account_name = "A"
        self.domain = ""
        self.advisories: list[tuple[str, dict[str, Any]]] = []

    def send(self, subject: bytes, payload: bytes, hdr: bytes | None = None) -> None:
        pass

    def advise(
        self, subject: str, typ: str, body: dict[str, Any], system_too: bool = False
    ) -> None:
        self.advisories.append((subject, body))

    def limits_set(self) -> bool:
        return False

    def storage_exceeded(self, memory: bool, subject: str, hdr: bytes | None, data: bytes) -> Any:
        return None


class _Listener:
    name = "C"
    filters: list[str] = []
    filter_all = True

    def on_stored(self, seq: int, subject: str) -> None: ...
    def on_removed(self, seq: int, subject: str) -> None: ...
    def on_bulk_removed(self) -> None: ...
    def need_ack(self, seq: int, subject: str) -> bool:
        return True

    def purge(self, sseq: int, slseq: int, wider: bool) -> None: ...
    def stop(self, *, deleted: bool, advisory: bool = True) -> None: ...


class Parts:
    """A stream with ``n`` stored messages and the shared pieces parts are handed."""

    def __init__(self, cfg: ConsumerConfig, n: int = 5) -> None:
        self.ctx = _Ctx()
        self.sched = self.ctx.scheduler
        store = MemoryStore(StoreConfig(name="S"))
        for i in range(1, n + 1):
            store.store_raw("s.x", None, b"m%d" % i, i, self.ctx.clock.time_ns())
        self.stream = Stream(self.ctx, StreamConfig(name="S", subjects=["s.>"]), store, 0)
        self.cfg = cfg
        self.cur = Cursor()
        self.runs = 0
        self.bell = Doorbell(self.sched, self._run)
        self.adv = Advisories(self.stream, "C")
        self.saver = StateSaver(self.stream, "C", False, lambda: b"{}")

    def _run(self) -> None:
        self.bell.answered()
        self.runs += 1

    def tracker(self) -> AckTracker:
        acks = AckTracker(
            self.cfg, self.cur, self.stream, _Listener(), self.adv, self.saver, self.bell
        )
        acks.start_at(1)
        return acks

    def deliver(self, acks: AckTracker, seq: int) -> int:
        """What the consumer's loop does for one new message: move the cursor, track it."""
        dseq = self.cur.dseq
        self.cur.dseq += 1
        self.cur.sseq = seq + 1
        acks.delivered(dseq, seq, 1, 0)
        return dseq


def _explicit(**kw: Any) -> ConsumerConfig:
    return ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, ack_wait=30 * S, **kw)


def test_doorbell_schedules_one_run_per_turn_and_none_after_stop() -> None:
    p = Parts(_explicit())
    p.bell.ring()
    p.bell.ring()
    p.sched.run_ready()
    assert p.runs == 1
    p.bell.ring()
    p.bell.stop()
    p.sched.run_ready()
    assert p.runs == 2  # rung before stop: that run was already scheduled
    p.bell.ring()
    p.sched.run_ready()
    assert p.runs == 2


def test_ack_floor_moves_only_over_contiguous_acks() -> None:
    p = Parts(_explicit())
    acks = p.tracker()
    for seq in (1, 2, 3):
        p.deliver(acks, seq)
    assert sorted(acks.pending) == [1, 2, 3]
    assert acks.ack(2, 2, 1, b"", False) is False  # limits retention: no reply from here
    assert (acks.adflr, acks.asflr) == (0, 0)
    acks.ack(1, 1, 1, b"", False)
    assert (acks.adflr, acks.asflr) == (2, 2)
    acks.ack(3, 3, 1, b"", False)
    assert acks.pending == {}
    assert (acks.adflr, acks.asflr) == (3, 3)
    assert (acks.st_fc, acks.st_fs) == (3, 3)


def test_ack_wait_timer_queues_redelivery_and_rings_the_bell() -> None:
    p = Parts(_explicit())
    acks = p.tracker()
    p.deliver(acks, 1)
    p.deliver(acks, 2)
    acks.ack(2, 2, 1, b"", False)
    p.sched.advance(29)
    assert list(acks.rdq) == [] and p.runs == 0
    p.sched.advance(1.1)
    assert list(acks.rdq) == [1]
    assert p.runs == 1
    got = acks.next_redelivery()
    assert got is not None and got[0].seq == 1 and got[1] == 2  # second delivery


def test_max_deliver_drops_the_message_and_advises() -> None:
    p = Parts(_explicit(max_deliver=2))
    acks = p.tracker()
    p.deliver(acks, 1)
    acks.nak(1, 1, 1, b"-NAK")
    got = acks.next_redelivery()
    assert got is not None and got[1] == 2
    acks.delivered(2, 1, 2, 0)
    acks.nak(1, 2, 2, b"-NAK")
    assert acks.next_redelivery() is None  # a third delivery would pass max_deliver
    assert acks.pending == {}
    subjects = [s for s, _ in p.ctx.advisories]
    assert "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C" in subjects


def test_ack_tracker_stop_cancels_its_timer() -> None:
    p = Parts(_explicit())
    acks = p.tracker()
    p.deliver(acks, 1)
    assert [h for h in p.sched.pending() if not h.cancelled]
    acks.stop()
    assert not [h for h in p.sched.pending() if not h.cancelled]
    p.sched.advance(60)
    assert list(acks.rdq) == []


def test_purge_below_returns_where_the_cursor_goes() -> None:
    p = Parts(_explicit())
    acks = p.tracker()
    for seq in (1, 2, 3):
        p.deliver(acks, seq)
    p.cur.dseq = 1  # a cursor behind the acknowledged deliveries (after a restore)
    assert acks.purge_below(3, False) == 2
    assert sorted(acks.pending) == [3]
    assert acks.asflr == 2


def test_priority_pin_expires_after_priority_timeout() -> None:
    cfg = ConsumerConfig(
        durable_name="C",
        ack_policy=AckPolicy.EXPLICIT,
        priority_groups=["g"],
        priority_policy=PriorityPolicy.PINNED_CLIENT,
        priority_timeout=5 * S,
    )
    p = Parts(cfg)
    prio = Priority(cfg, p.cur, p.tracker(), p.stream, p.adv, p.bell)
    first = WaitingRequest(b"r1", NextRequest(group="g"), 0.0)
    assert prio.serve_check(first, True) == PINNED
    assert prio.pin_id and first.pin_id == prio.pin_id
    other = WaitingRequest(b"r2", NextRequest(group="g"), 0.0)
    assert prio.serve_check(other, False) == CYCLE
    mine = WaitingRequest(b"r3", NextRequest(group="g", pin_id=prio.pin_id), 0.0)
    assert prio.serve_check(mine, False) == OK
    p.sched.advance(5.1)
    assert prio.pin_id == ""
    kinds = [s.split(".")[4] for s, _ in p.ctx.advisories]
    assert kinds == ["PINNED", "UNPINNED"]


def test_pacing_pause_timer_rings_and_stop_cancels() -> None:
    p = Parts(_explicit())
    until = "2030-01-01T00:00:10Z"
    pacing = Pacing(_explicit(pause_until=until), p.stream, p.adv, p.bell)
    pacing.start()
    assert pacing.is_paused()
    p.sched.advance_to_ns(pacing.paused_until() + 1)
    assert not pacing.is_paused()
    assert p.runs == 1
    pacing2 = Pacing(_explicit(pause_until="2030-01-01T00:00:20Z"), p.stream, p.adv, p.bell)
    pacing2.start()
    pacing2.stop()
    p.sched.advance(60)
    assert p.runs == 1


def test_pull_request_expires_with_408_and_delete_answers_409() -> None:
    p = Parts(ConsumerConfig(durable_name="C", ack_policy=AckPolicy.EXPLICIT, max_waiting=8))
    got: list[tuple[bytes, bytes | None]] = []

    def sink(
        sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        got.append((subject, hdr))

    p.ctx.sublist.insert(Subscription(b"r.>", None, b"1", callback=sink))
    deleted: list[bool] = []
    pull = PullDelivery(
        p.cfg, p.cur, p.tracker(), p.stream, p.bell, p.adv, lambda: deleted.append(True)
    )
    pull.configure(p.cfg, 0.0)
    pull.start()
    pull.request(b"r.1", b'{"batch":2,"expires":1000000000}')
    pull.request(b"r.2", b'{"batch":1}')
    assert pull.ready() and len(pull.waiting) == 2
    pull.idle(True)  # arms the expiry timer
    p.sched.advance(1.1)
    assert got[0][0] == b"r.1" and got[0][1] is not None and b"408 Request Timeout" in got[0][1]
    assert len(pull.waiting) == 1
    pull.stop(True)
    assert got[-1][0] == b"r.2" and b"409 Consumer Deleted" in (got[-1][1] or b"")
    assert not [h for h in p.sched.pending() if not h.cancelled]
    assert deleted == []


class _Catalog(StreamCatalog):
    """Records consumer state saves; ``fail`` makes them raise as a full disk would."""

    def __init__(self) -> None:
        self.saves: list[tuple[bytes, bool]] = []
        self.fail = False

    def load(self) -> list[StreamRecord]:
        return []

    def create(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError

    def save_meta(self, account: str, name: str, storage: str, meta: bytes) -> None:
        pass

    def remove(self, account: str, name: str, storage: str, store: StreamStore) -> None:
        pass

    def save_consumer(
        self, account: str, stream: str, consumer: str, storage: str, meta: bytes
    ) -> None:
        pass

    def save_consumer_state(
        self,
        account: str,
        stream: str,
        consumer: str,
        storage: str,
        state: bytes,
        durable: bool = False,
    ) -> None:
        if self.fail:
            raise OSError("disk full")
        self.saves.append((state, durable))

    def remove_consumer(self, account: str, stream: str, consumer: str, storage: str) -> None:
        pass


def _replies(p: Parts, subject: bytes) -> list[bytes]:
    got: list[bytes] = []

    def sink(
        sub: Subscription, subj: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        got.append(subj)

    p.ctx.sublist.insert(Subscription(subject, None, b"9", callback=sink))
    return got


def test_state_saver_writes_once_per_flush_delay_and_confirms_after_a_save() -> None:
    p = Parts(_explicit())
    cat = _Catalog()
    p.ctx.catalog = cat
    saver = StateSaver(p.stream, "C", True, lambda: b'{"n":1}')
    saver.mark_dirty()
    saver.mark_dirty()
    p.sched.advance(STATE_FLUSH_DELAY + 0.01)
    assert cat.saves == [(b'{"n":1}', False)]
    assert not saver.dirty
    got = _replies(p, b"ack.r")
    saver.ack_reply(b"ack.r")
    saver.ack_reply(b"ack.r")
    assert got == []  # not before the durable save
    p.sched.run_ready()
    assert cat.saves[-1] == (b'{"n":1}', True) and len(cat.saves) == 2  # one save for both
    assert got == [b"ack.r", b"ack.r"]
    cat.fail = True
    saver.ack_reply(b"ack.r")
    p.sched.run_ready()
    assert len(got) == 2  # the save failed: no confirmation
    saver.mark_dirty()
    saver.stop()
    assert not [h for h in p.sched.pending() if not h.cancelled]


def test_push_inactivity_flow_control_and_stop() -> None:
    cfg = ConsumerConfig(
        durable_name="P",
        ack_policy=AckPolicy.EXPLICIT,
        deliver_subject="d.x",
        flow_control=True,
        idle_heartbeat=5 * S,
    )
    p = Parts(cfg)
    deleted: list[bool] = []
    push = PushDelivery(
        cfg, p.cur, p.tracker(), p.stream, p.bell, "P", lambda: deleted.append(True)
    )
    push.configure(cfg, 10.0)
    push.start()
    assert not push.ready()
    p.sched.advance(5)
    got = _replies(p, b"d.x")  # the subscriber comes: the watcher notices it
    p.sched.advance(0.2)
    assert push.ready() and p.runs == 1
    p.sched.advance(10)
    assert deleted == []  # bound: the inactivity timer was stopped
    assert got[-1:] == [b"d.x"]  # an idle heartbeat
    half = push.maxpb // 2 + 1
    push.send(b"d.x", b"s.x", 1, b"ack", None, b"x", half)
    assert push.fcid.startswith(b"$JS.FC.S.P.")
    assert push.can_take()
    push.send(b"d.x", b"s.x", 2, b"ack", None, b"x", push.maxpb)
    assert not push.can_take()  # a full window outstanding
    window = push.maxpb
    push._on_flow_control(push.fcid, None)  # the client's answer
    assert push.can_take() and push.fcid == b"" and push.maxpb == 2 * window
    push.stop(False)
    assert not [h for h in p.sched.pending() if not h.cancelled]
    assert not p.ctx.sublist.has_interest(b"$JS.FC.S.P.abcd")
