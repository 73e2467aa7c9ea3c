"""RaftService's loop side (cluster/raft_service.py) on a virtual scheduler: what leaves for
the sockets when a turn finishes, the delay of held commit notices, and a turn run at once
by a caller that gathered the proposals (``turn_now``).

The host is a stand-in with the few members the service uses (the service is plain Python
and calls them by name), so each turn's work is what the test says it is."""

from __future__ import annotations

from typing import Any

from natsd.cluster.raft_service import COMMIT_NOTICE_DELAY, RaftService
from natsd.core.scheduler import VirtualScheduler
from natsd.router.account import Account


class _Wal:
    def __init__(self) -> None:
        self.dirty = False
        self.syncs = 0

    def sync(self) -> None:
        self.syncs += 1
        self.dirty = False


class _Ready:
    entries = [b"entry"]


class _Host:
    """What ``prepare`` returns and holds is set by the test before each turn."""

    id = 1

    def __init__(self) -> None:
        self.wal = _Wal()
        self.needs_sync = False
        self.held: dict[tuple[bytes, int], bytes] = {}
        self.hold_commit_notices = False
        self.work: list[Any] = []
        self.hold_next: dict[tuple[bytes, int], bytes] = {}
        self.log: list[str] = []
        self.sent_held = 0

    def prepare(self) -> list[Any]:
        self.log.append("prepare")
        self.held = dict(self.hold_next)
        work, self.work = self.work, []
        return work

    def finish(self, work: list[Any]) -> None:
        self.log.append("finish")

    def send_held(self) -> None:
        self.sent_held += 1
        self.held = {}


def _service() -> tuple[RaftService, _Host, VirtualScheduler, list[str]]:
    sched = VirtualScheduler()
    host = _Host()
    flushed: list[str] = []

    def flush_out() -> None:
        host.log.append("flush_out")
        flushed.append("x")

    svc = RaftService(host, Account("$SYS"), scheduler=sched, flush_out=flush_out)  # type: ignore[arg-type]
    svc.running = True  # (not started: no subscription, no tick timer)
    return svc, host, sched, flushed


def test_what_a_finished_turn_sent_leaves_before_the_loop_reads_again() -> None:
    """A turn's answers (a follower's append responses, a leader's PubAcks) are written out
    right after ``finish``, on the inline-sync path and on the no-sync path alike."""
    svc, host, sched, _ = _service()
    # a small turn with entries to sync: the early frames go out before the sync, what
    # finish sent goes out after it
    host.work = [(None, _Ready())]
    host.wal.dirty = True
    host.needs_sync = True
    svc.kick()
    sched.run_ready()
    # (and the kick after it: a turn for what the applies brought, here nothing)
    assert host.log == ["prepare", "flush_out", "finish", "flush_out", "prepare"]
    assert host.wal.syncs == 1
    # a turn that only applies (a commit index alone needs no sync)
    host.log.clear()
    host.work = [(None, _Ready())]
    host.needs_sync = False
    svc.kick()
    sched.run_ready()
    assert host.log == ["prepare", "finish", "flush_out", "prepare"]
    assert host.wal.syncs == 1


def test_held_notices_wait_their_full_delay_from_when_they_were_held() -> None:
    """A notice held, then carried by an append before its delay ran out, leaves no timer
    behind: the next notice held waits its own full delay, not the rest of the first."""
    svc, host, sched, _ = _service()
    host.hold_next = {(b"G", 2): b"n1"}
    svc.kick()
    sched.run_ready()
    assert host.held and sched.next_due_ns() is not None
    # 1.5 ms later an append with entries went to member 2: nothing is held any more
    sched.advance(COMMIT_NOTICE_DELAY * 0.75)
    host.hold_next = {}
    svc.kick()
    sched.run_ready()
    assert not host.held
    assert sched.next_due_ns() is None  # (the timer went with the notice)
    # the next commit's notice is held now: it waits the whole delay again
    host.hold_next = {(b"G", 2): b"n2"}
    svc.kick()
    sched.run_ready()
    sched.advance(COMMIT_NOTICE_DELAY * 0.75)
    assert host.sent_held == 0
    sched.advance(COMMIT_NOTICE_DELAY * 0.5)
    assert host.sent_held == 1


def test_turn_now_runs_the_kicked_turn_once_at_once() -> None:
    svc, host, sched, _ = _service()
    svc.kick()
    svc.kick()
    svc.turn_now()
    assert host.log == ["prepare"]
    assert sched.run_ready() == 0  # the scheduled turn was cancelled
    assert host.log == ["prepare"]
    svc.turn_now()  # nothing was kicked: no turn
    assert host.log == ["prepare"]
    svc.kick()
    sched.run_ready()
    assert host.log == ["prepare", "prepare"]
