"""Raft over the route mesh: a ``GroupHost`` driven by the event loop.

Transport (design-clustering §4.3): a node subscribes, in the system account, to
``$NATSD.RAFT.<its raft id in hex>``; a frame for a peer is published there, and the route
mesh carries it like any message (the peer's subscription is the interest that routes it).
One subscription per node serves every group, so no group needs interest of its own.

Timing: ticks every ``tick`` seconds (100 ms: with ``ELECTION_TICK`` 10 an election starts
1-2 s after a leader goes quiet), and one turn per loop turn in which anything happened (a
frame, a proposal, a tick): ``GroupHost.prepare`` writes every group's Ready to the WAL, the
``fdatasync`` runs on a worker thread (as the stream Committer's does) while the loop serves
clients and steps arriving frames, then ``GroupHost.finish`` sends and applies. One turn is
in flight at a time; whatever arrives meanwhile shares the next turn's sync (group commit).
A turn of one or two entries (a lone publisher's) syncs on the loop thread instead.

Ticks and turns run on the ``Scheduler`` it is given (the server's event loop, not
JetStream's clock, which a test may move) and the lease on that scheduler's clock; only the
fsync hand-off uses the running loop directly: that is I/O, not time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from natsd.cluster.frames import FrameError
from natsd.cluster.group import GroupHost, RaftGroup, raft_id
from natsd.core.scheduler import Cancellable, Scheduler
from natsd.raft.rawnode import Ready
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.wal import Wal

__all__ = ["RaftService", "raft_subject"]

_PREFIX: Final = b"$NATSD.RAFT."
TICK: Final = 0.1
# A turn with at most this many new log entries syncs the WAL inline (see _turn).
INLINE_MAX_ENTRIES: Final = 2
# How long a leader holds an append that only carries a new commit index (see
# GroupHost.hold_commit_notices): a lone publisher's next message comes well within it.
COMMIT_NOTICE_DELAY: Final = 0.002


def raft_subject(node_id: int) -> bytes:
    return _PREFIX + b"%016x" % node_id


class RaftService:
    """Owns the loop side of one node's GroupHost: its subscription, timer and turns."""

    def __init__(
        self,
        host: GroupHost,
        system: Account,
        tick: float = TICK,
        scheduler: Scheduler | None = None,
        flush_out: Callable[[], None] | None = None,
    ) -> None:
        self.host = host
        # writes out what the connections hold for the sockets (the server's Flusher.run)
        self._flush_out = flush_out
        # ticks and turns: the running loop unless given (its clock is the host's)
        self._sched = scheduler
        self.system = system
        self.tick_interval = tick
        self._sub = Subscription(raft_subject(host.id), None, b"raft", callback=self._on_frame)
        self._timer: Cancellable | None = None
        host.hold_commit_notices = True
        self._notice_timer: Cancellable | None = None
        self._subjects: dict[int, bytes] = {}  # peer id -> its subject (raft_subject)
        self._turn_pending: Cancellable | None = None  # a kick's call_soon
        self._in_flight = False  # a prepare() waits for its sync
        self.failed: BaseException | None = None
        self.bad_frames = 0
        self.running = False
        # peer node id -> loop time of its last frame (the "active" of /jsz replicas)
        self.last_heard: dict[int, float] = {}

    @classmethod
    def open(
        cls,
        server_name: str,
        wal: Wal,
        system: Account,
        tick: float = TICK,
        *,
        scheduler: Scheduler | None = None,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[int], int] | None = None,
        flush_out: Callable[[], None] | None = None,
    ) -> RaftService:
        """The service of the server named ``server_name`` (its Raft id), over ``wal``.
        ``scheduler`` runs the ticks and turns and ``clock`` (monotonic seconds, the
        scheduler's) times the lease and the liveness table; ``rand`` draws the randomized
        election timeouts (a deterministic simulation passes a seeded one); ``flush_out``
        writes the connections' pending output (the frames ``prepare`` sent) before a sync
        on the loop thread."""
        box: list[RaftService] = []
        host = GroupHost(
            raft_id(server_name),
            wal,
            lambda peer, frame: box[0].send(peer, frame),
            rand=rand,
            clock=clock,
        )
        box.append(cls(host, system, tick, scheduler, flush_out))
        return box[0]

    @property
    def scheduler(self) -> Scheduler:
        return self._sched if self._sched is not None else asyncio.get_running_loop()

    def start(self) -> None:
        self.system.sublist.insert(self._sub)
        self.running = True
        self._timer = self.scheduler.call_later(self.tick_interval, self._tick)

    def stop(self) -> None:
        self.running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._notice_timer is not None:
            self._notice_timer.cancel()
            self._notice_timer = None
        self.system.sublist.remove(self._sub)

    # the GroupHost's send: a frame to a peer is a message on its subject
    def send(self, peer: int, frame: bytes) -> None:
        subject = self._subjects.get(peer)
        if subject is None:
            subject = self._subjects[peer] = raft_subject(peer)
        publish(self.system.sublist, subject, None, None, frame)

    @property
    def busy(self) -> bool:
        """A turn's WAL sync is under way (nothing else may write the WAL meanwhile)."""
        return self._in_flight

    def propose(self, name: bytes, data: bytes) -> None:
        self.host.propose(name, data)
        self.kick()

    def propose_batch(self, name: bytes, datas: list[bytes], prompt: bool = False) -> None:
        self.host.propose_batch(name, datas, prompt)
        self.kick()

    def kick(self) -> None:
        """Something changed: run a turn before the loop next waits."""
        if self._turn_pending is None and self.running:
            self._turn_pending = self.scheduler.call_soon(self._turn)

    def turn_now(self) -> None:
        """Run the turn a kick asked for here and now: the caller is a loop callback that
        gathered this turn's proposals already (a publish's append then leaves one loop
        iteration earlier)."""
        if self._turn_pending is not None:
            self._turn_pending.cancel()
            self._turn()

    def _turn(self) -> None:
        self._turn_pending = None
        if not self.running or self._in_flight:
            return
        try:
            work = self.host.prepare()
        except BaseException as e:
            # A write to the log failed (the disk): groups whose Ready was taken cannot be
            # stepped again until it is advanced, and what it holds may not be on disk.
            # Stop, as for a failed sync, rather than fail again on every tick.
            self._fail(e)
            raise
        if self.host.held:
            if self._notice_timer is None:
                self._notice_timer = self.scheduler.call_later(COMMIT_NOTICE_DELAY, self._notices)
        elif self._notice_timer is not None:
            # every held notice went out inside an append: the next one held gets its own
            # full delay (a lone publisher's next message then carries it almost always)
            self._notice_timer.cancel()
            self._notice_timer = None
        if not work:
            return
        wal = self.host.wal
        if not wal.dirty or not self.host.needs_sync:
            self.host.finish(work)  # (a commit index alone waits for the next sync)
            self._finished()
            return
        if sum(len(rd.entries) for _, rd in work) <= INLINE_MAX_ENTRIES:
            # A lone publisher (or an election) waits for this sync whatever we do: run on
            # the loop thread it saves two thread hand-offs and the wait for the GIL, about
            # a fifth of an R3 publish's round trip (as the stream Committer does for its
            # small batches). Bigger batches go to the worker, so the loop keeps reading.
            # The frames that may leave before the sync (a leader's appends) are written to
            # the sockets first: the followers' syncs then run beside this one.
            if self._flush_out is not None:
                self._flush_out()
            try:
                wal.sync()
            except BaseException as e:
                self._fail(e)
                return
            self.host.finish(work)
            self._finished()
            return
        self._in_flight = True
        fut = asyncio.get_running_loop().run_in_executor(None, wal.sync)
        fut.add_done_callback(lambda f: self._synced(f, work))

    def _synced(self, fut: asyncio.Future[None], work: list[tuple[RaftGroup, Ready]]) -> None:
        self._in_flight = False
        failed = fut.exception()
        if failed is not None:
            # the log cannot be made durable: nothing it promises may leave; stop this node's
            # groups rather than acknowledge what may be lost
            self._fail(failed)
            return
        if self.running:
            self.host.finish(work)
            self._finished()  # (and what arrived during the sync)

    def _finished(self) -> None:
        """After ``finish``: what it sent (the answers to appends, a leader's PubAcks) goes
        to the sockets now, before the loop reads more (another member's answer would
        otherwise be taken in first and cost a publish that much more wait), and what the
        applies and the frames brought gets a turn."""
        if self._flush_out is not None:
            self._flush_out()
        self.kick()

    def _notices(self) -> None:
        self._notice_timer = None
        if self.running:
            self.host.send_held()

    def _fail(self, e: BaseException) -> None:
        """The node's log failed: every group here stops (``failed`` says why)."""
        self.failed = e
        self.stop()

    def _tick(self) -> None:
        if not self.running:
            return
        self.host.tick()
        self.kick()
        self._timer = self.scheduler.call_later(self.tick_interval, self._tick)

    def _on_frame(
        self,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        payload: bytes,
    ) -> None:
        try:
            self.host.receive(payload)
            if self.host.last_sender:
                self.last_heard[self.host.last_sender] = self.host.clock()
        except FrameError:
            self.bad_frames += 1  # a peer is as untrusted as a client: drop, count
            return
        self.kick()
