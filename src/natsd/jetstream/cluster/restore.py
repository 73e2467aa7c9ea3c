"""A stream restored from a backup on a cluster (``$JS.API.STREAM.RESTORE``), placed and
replicated through the meta group, as nats-server's ``jsClusteredStreamRestoreRequest``
places it with a ``Restore`` marker in its assignment.

The server that took the archive (the meta leader when the request came, ``api/backup.py``)
has spooled it and checked it whole before anything here runs: a damaged archive never
gets this far. Then, on that server (the *restorer*):

1. ``begin`` proposes a ``stream`` meta entry with ``restore`` naming it, the peers placed
   as for a create, itself first (``MetaRequests.restore_peers``). Every server's meta state
   now holds the stream as *restoring*; the other replicas create nothing yet.
2. When the entry applies here (``applied_restore``), the restorer builds the stream from
   the spool (``backup/restore.py``: store, messages, consumers with their state), makes it
   durable, and holds it out of service: no subscription on its subjects, its consumers
   passive. It proposes ``restored`` (again every ``ASK_EVERY`` until it applies).
3. When ``restored`` applies (``applied_restored``) the restorer opens the stream: an R1
   stream subscribes and runs its consumers; a replicated stream's Raft group is founded by
   the restorer alone, which leads it at once, and each other replica creates the stream
   empty and joins the group: the leader adds them by configuration changes and they catch
   up from its store, consumers included (``membership.py``, ``catchup.py``), exactly as
   when an R1 stream is scaled up. Only then is the client answered, with the stream's info
   (nats-server's final restore answer). A replica that finds no group in its log later
   (a restart before it applied ``restored``) knows from ``restore`` whether it founds the
   group or joins it (``LocalStreams.reconcile``).

Why the restorer founds the group alone: a group created with every peer as voter could
elect an empty replica whose log is as long as the restorer's, and the restored messages
would be lost or diverge; a joining replica has no vote until it has caught up.

Nothing is left half-made. A failure while building removes what was built and withdraws
the assignment (a ``delete`` entry). A restorer restarted while its assignment is still
restoring (its build cut short, its client never answered) deletes what it built and
withdraws it (``LocalStreams.reconcile`` -> ``abandoned``). The meta leader withdraws an
assignment still restoring ``ABANDON_AFTER`` after it was made (its restorer went away for
good). A restore whose entry never applies (a lost proposal) is answered with an error
after ``PLACE_WITHIN``, and withdrawn should it apply later.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Final

import orjson

from natsd.cluster.meta import MetaState, StreamAssignment, encode_op
from natsd.core.scheduler import Clock
from natsd.jetstream.backup.restore import ArchiveCheck, restore_stream
from natsd.jetstream.cluster.streams import StreamGroups
from natsd.jetstream.config.stream_config import parse_stream_config
from natsd.jetstream.config.stream_types import StreamConfig
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.engine import JetStream, JsAccount, add_stream, delete_stream
from natsd.jetstream.stream.stream import Stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.storage.store import StoreError

__all__ = ["ABANDON_AFTER", "ClusterRestores", "RestoreDone"]

log: Final = logging.getLogger("natsd")

# A restore whose meta entry has not applied this long after it was proposed is answered
# with an error (seconds).
PLACE_WITHIN: Final = 10.0
# The restorer asks for ``restored`` again this often until it applies (seconds).
ASK_EVERY: Final = 1.0
# The meta leader withdraws an assignment still restoring this long after it was made.
ABANDON_AFTER: Final = 60.0

# The restore's outcome, for its client: the stream, or why there is none.
RestoreDone = Callable[[Stream | ApiError], None]


@dataclass(slots=True)
class _Pending:
    """One restore under way on this server (the restorer)."""

    ja: JsAccount
    cfg: StreamConfig
    created: int
    spool: IO[bytes] | None
    check: ArchiveCheck
    max_body: int
    done: RestoreDone
    deadline: float  # (loop time) the restore entry should have applied by then
    built: bool = False  # the stream is built here, ``restored`` asked for
    asked_at: float = 0.0
    # restored, its group founded here: answered once this server leads it
    opened: Stream | None = None

    def close_spool(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None


class ClusterRestores:
    """The restores this server is the restorer of, and what the restore entries mean
    here (module docstring). ``LocalStreams`` hands it the entries; ``JsCluster`` ticks it."""

    def __init__(
        self,
        engine: JetStream,
        server_name: str,
        groups: StreamGroups,
        meta: Callable[[], MetaState],
        propose: Callable[[bytes], bool],
        clock: Clock,
    ) -> None:
        self.engine = engine
        self.server_name = server_name
        self.groups = groups
        self.meta = meta
        self.propose = propose
        self.clock = clock
        self._pending: dict[tuple[str, str], _Pending] = {}
        # (account, stream) -> (its creation time, loop time of the last delete proposed):
        # assignments this server withdraws, until they are gone
        self._withdrawing: dict[tuple[str, str], tuple[int, float]] = {}

    # ---------------------------------------------------------------- the restorer
    def begin(
        self,
        ja: JsAccount,
        cfg: StreamConfig,
        peers: list[str],
        spool: IO[bytes],
        check: ArchiveCheck,
        max_body: int,
        done: RestoreDone,
    ) -> None:
        """Propose the checked archive's stream, placed on ``peers`` (this server first);
        ``done`` is called once with the outcome. Takes ``spool`` over (closes it). Raises
        the ApiError the client gets when it cannot even be proposed."""
        key = (ja.account.name, cfg.name)
        if key in self._pending:
            spool.close()
            raise E.JSStreamNameExistRestoreFailedErr()
        created = self.clock.time_ns()
        op = encode_op(
            "stream",
            account=ja.account.name,
            config=cfg.to_json(),
            created=created,
            peers=peers,
            restore=self.server_name,
            reply="",
            origin=self.server_name,
        )
        if not self.propose(op):
            spool.close()
            raise E.JSClusterNotAvailErr()
        deadline = self.clock.monotonic() + PLACE_WITHIN
        self._pending[key] = _Pending(ja, cfg, created, spool, check, max_body, done, deadline)
        log.info("JetStream cluster: restore of %s/%s proposed, placed on %s",
                 ja.account.name, cfg.name, ", ".join(peers))  # fmt: skip

    def applied_restore(self, ja: JsAccount, a: StreamAssignment) -> None:
        """The restore entry applied (not as a replay): the restorer builds the stream;
        the other replicas wait for ``restored``."""
        if a.restore != self.server_name:
            return
        p = self._pending.get((a.account, a.name))
        if p is None or p.created != a.created or p.built:
            # given up on here (it took too long), or this server restarted since
            log.warning("JetStream cluster: restore of %s/%s is not under way here;"
                        " withdrawn", a.account, a.name)  # fmt: skip
            self.withdraw(a)
            return
        self._build(p, a)

    def _build(self, p: _Pending, a: StreamAssignment) -> None:
        ja = p.ja
        assert p.spool is not None
        try:
            stream = restore_stream(ja, p.cfg, p.spool, p.check, p.max_body, created=a.created)
        except (ApiError, ValueError) as e:
            err = e if isinstance(e, ApiError) else E.JSStreamRestoreErrF(err=str(e))
            self._finish(a.account, a.name, err)
            self.withdraw(a)
            return
        try:
            _hold(stream)
        except (StoreError, OSError) as e:
            _drop(ja, stream)
            self._finish(a.account, a.name, E.JSStreamRestoreErrF(err=str(e) or type(e).__name__))
            self.withdraw(a)
            return
        p.close_spool()
        p.built = True
        self._ask(p, a.account, a.name)

    def _ask(self, p: _Pending, account: str, name: str) -> None:
        p.asked_at = self.clock.monotonic()
        self.propose(encode_op("restored", account=account, stream=name, created=p.created))

    def applied_restored(self, ja: JsAccount, a: StreamAssignment) -> None:
        """``restored`` applied (not as a replay): the restorer opens the stream and
        answers; every other replica creates it empty and joins its group."""
        if a.restore == self.server_name:
            self.opened(ja, a)
            return
        if len(a.peers) < 2:
            return
        try:
            cfg = parse_stream_config(a.config, name_in_subject=None)
            stream = ja.streams.get(a.name)
            if stream is None:
                stream = add_stream(ja, cfg, created=a.created)
            self.groups.attach(ja, stream, a, joining=True)
        except (ApiError, StoreError, OSError) as e:
            # (its group's leader finds it missing, and replaces it or waits)
            log.error("JetStream cluster: replica of restored stream %s/%s not created: %s",
                      a.account, a.name, e)  # fmt: skip

    def opened(self, ja: JsAccount, a: StreamAssignment) -> None:
        """On the restorer, ``a`` is restored: put its stream into service (an R1 stream
        subscribes, a replicated one founds its group) and answer the client, if it waits
        here."""
        p = self._pending.pop((a.account, a.name), None)
        if p is not None:
            p.close_spool()
        stream = ja.streams.get(a.name)
        if stream is None or stream.created_ns != a.created:
            log.error("JetStream cluster: restored stream %s/%s is missing here; withdrawn",
                      a.account, a.name)  # fmt: skip
            if p is not None:
                p.done(E.JSStreamRestoreErrF(err="the restored stream was lost"))
            self.withdraw(a)
            return
        if len(a.peers) > 1:
            self.groups.attach(ja, stream, a, founders=[self.server_name])
        elif stream.replica is None:
            stream.subscribe()
            _run(stream)
        log.info("JetStream cluster: stream %s/%s restored", a.account, a.name)
        if p is None:
            return
        if len(a.peers) > 1 and not self.groups.leads(stream):
            # answered once it leads its group (a Raft turn away): the client may publish
            # as soon as it is answered (``tick``)
            p.opened, p.deadline = stream, self.clock.monotonic() + PLACE_WITHIN
            self._pending[(a.account, a.name)] = p
            return
        p.done(stream)

    def waiting(self, a: StreamAssignment) -> bool:
        """Is ``a``'s restore under way here, its client waiting?"""
        p = self._pending.get((a.account, a.name))
        return p is not None and p.created == a.created and p.opened is None

    def deleted(self, a: StreamAssignment) -> None:
        """The stream's assignment was deleted (withdrawn, or deleted by a client while it
        was being restored): a restore still waiting here fails."""
        p = self._pending.get((a.account, a.name))
        if p is not None and p.created == a.created:
            self._finish(a.account, a.name, E.JSStreamRestoreErrF(err="it was withdrawn"))

    def abandoned(self, ja: JsAccount, a: StreamAssignment) -> None:
        """Reconciling after a restart (or a meta snapshot): ``a`` is still restoring.
        Built or half built here by a run that is over (its client was never answered):
        what is here goes and the assignment is withdrawn. A restore under way in this run
        that missed its entry (the snapshot stood for it) builds now."""
        p = self._pending.get((a.account, a.name))
        if p is not None and p.created == a.created:
            if not p.built:
                self._build(p, a)
            return
        local = ja.streams.get(a.name)
        if local is not None:
            log.warning("JetStream cluster: restore of %s/%s was cut short; what was built"
                        " of it is deleted", a.account, a.name)  # fmt: skip
            _drop(ja, local)
        self.withdraw(a)

    def withdraw(self, a: StreamAssignment) -> None:
        """Propose ``a``'s delete, and again every ``ASK_EVERY`` while the meta state
        still holds it (a restarted server may know no meta leader yet)."""
        key = (a.account, a.name)
        self._withdrawing[key] = (a.created, self.clock.monotonic())
        self.propose(encode_op("delete", account=a.account, stream=a.name, reply="",
                               origin=self.server_name))  # fmt: skip

    def _finish(self, account: str, name: str, err: ApiError) -> None:
        p = self._pending.pop((account, name), None)
        if p is None:
            return
        p.close_spool()
        local = p.ja.streams.get(name)
        if p.built and local is not None and local.created_ns == p.created:
            _drop(p.ja, local)
        p.done(err)

    # ---------------------------------------------------------------- every 100 ms
    def tick(self, now: float, meta_leader: bool) -> None:
        """Answer a restore whose entry never applied; ask again for ``restored``; as the
        meta leader, withdraw restores abandoned by their restorer."""
        for (account, name), p in list(self._pending.items()):
            a = self.meta().stream(account, name)
            if p.opened is not None:
                if a is None or a.created != p.created:
                    self._finish(account, name, E.JSStreamRestoreErrF(err="it was deleted"))
                elif self.groups.leads(p.opened) or now >= p.deadline:
                    del self._pending[(account, name)]
                    p.done(p.opened)
            elif p.built:
                if a is None or a.created != p.created:
                    # withdrawn, and this server learnt it from a meta snapshot
                    self._finish(account, name, E.JSStreamRestoreErrF(err="it was withdrawn"))
                elif now - p.asked_at >= ASK_EVERY:
                    self._ask(p, account, name)
            elif now >= p.deadline:
                self._pending.pop((account, name), None)
                p.close_spool()
                err = (
                    E.JSStreamNameExistRestoreFailedErr()
                    if a is not None and a.created != p.created
                    else E.JSStreamRestoreErrF(err="the meta group did not place the stream")
                )
                p.done(err)
        for key, (created, at) in list(self._withdrawing.items()):
            a = self.meta().stream(*key)
            if a is None or a.created != created:
                del self._withdrawing[key]
            elif now - at >= ASK_EVERY:
                self.withdraw(a)
        if not meta_leader:
            return
        wall = self.clock.time_ns()
        for acc in self.meta().streams.values():
            for a in acc.values():
                key = (a.account, a.name)
                if a.restoring and wall - a.created >= ABANDON_AFTER * 1e9:
                    if key not in self._withdrawing:
                        log.warning("JetStream cluster: restore of %s/%s by %s abandoned;"
                                    " withdrawn", a.account, a.name, a.restore)  # fmt: skip
                        self.withdraw(a)

    def stop(self) -> None:
        for p in self._pending.values():
            p.close_spool()
        self._pending.clear()


def _hold(stream: Stream) -> None:
    """A stream just built from a backup, out of service until it is restored: its store
    and its consumers' state durable, no subscription on its subjects, its consumers
    passive (nothing delivered from a stream the cluster may yet withdraw)."""
    stream.unsubscribe()
    for c in list(stream.consumers.values()):
        if not isinstance(c, Consumer) or c.passive:
            continue
        if c.persist and not c.saver.flush(durable=True):
            raise OSError(f"consumer {c.name}: state not saved")
        state = orjson.loads(c.state_doc())
        c.stop(deleted=False)
        stream.detach(c)
        held = Consumer(stream, c.name, c.cfg, c.created_ns, c.persist)
        held.start_passive(state)
        stream.attach(held)


def _run(stream: Stream) -> None:
    """An R1 stream restored: its consumers run from the state they were held with."""
    for c in list(stream.consumers.values()):
        if not isinstance(c, Consumer) or not c.passive:
            continue
        live = Consumer(stream, c.name, c.cfg, c.created_ns, c.persist)
        live.start(orjson.loads(c.state_doc()))
        stream.attach(live)


def _drop(ja: JsAccount, stream: Stream) -> None:
    try:
        delete_stream(ja, stream)
    except (StoreError, OSError) as e:
        log.error("JetStream cluster: stream %s/%s not deleted: %s", ja.account.name,
                  stream.name, e)  # fmt: skip
