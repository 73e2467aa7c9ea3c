"""Publishes that reach a stream replica as it stops leading, passed on to the new leader.

Design-clustering §4.7 asks for a gap under 0.5 s when a leadership is handed over (a
stepdown, lame duck, a rolling restart). The leadership itself moves in one round trip; what
made clients wait was the publishes that met the old leader meanwhile: Raft takes no
proposal during a transfer, and after it the old leader no longer leads, so they were
dropped and their clients waited out a request timeout.

Ownership: ``PublishRelay`` (one per server, held by ``StreamGroups``) owns the publishes being
passed on. The replica holds a publish instead of proposing it while its group transfers
its leadership or has just lost it (``Stream.process``); when the replica stops leading,
what it held comes here (``Replica.handed``), and so do the MSG entries of a batch the group
refused (``publishes``). Every ``POLL`` seconds each is sent to the new leader's server
alone, over its route (``Forwarder.send_to``: other subscribers of the subject had it
already), once the new leader takes publishes: its server shows interest in the subject
and this replica's log has committed an entry of the new term (the new leader applies its
first entry before it subscribes). A replica that leads again processes them itself. What is
not passed on within ``FOR`` is dropped, as nats-server drops a publish that reaches a
replica that no longer leads; the client retries with its ``Nats-Msg-Id``. A fast batch's
message is never passed on (it has no such id: its batch sequence tells the new leader
whether it is new, and a copy it had already would be stored twice).

The new leader checks each one as any publish (duplicates included), so a publish passed on
and also retried by its client is stored once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from natsd.cluster.forward import Forwarder
from natsd.cluster.group import RaftGroup
from natsd.core.scheduler import Clock, Scheduler
from natsd.jetstream.stream.entries import OP_MSG, decode_msg, entry_op
from natsd.jetstream.stream.headers import FAST_BATCH_SUFFIX
from natsd.jetstream.stream.replica import Waiting
from natsd.jetstream.stream.stream import Stream

__all__ = ["FOR", "POLL", "PublishRelay", "publishes"]

FOR: Final = 2.0
POLL: Final = 0.002

# The group and stream of a group name, while this server holds it (None: it left)
Lookup = Callable[[bytes], tuple[RaftGroup, Stream] | None]


def publishes(datas: list[bytes]) -> list[Waiting]:
    """The publishes in a batch of entries the group did not take (its MSG entries)."""
    out: list[Waiting] = []
    for d in datas:
        if entry_op(d) == OP_MSG:
            e = decode_msg(d)
            out.append((e.subject.encode(), e.reply or None, e.hdr, e.data))
    return out


def _new_term_committed(g: RaftGroup) -> bool:
    """Has this replica's log committed an entry of its leader's term (the new leader's
    first entry)? Until then, interest in the stream's subjects on the new leader's server
    is not yet the stream's own."""
    return g.node.committed_in_term()


class PublishRelay:
    """The publishes this server's former stream leaders are passing on (module docstring)."""

    def __init__(
        self,
        node_id: int,
        lookup: Lookup,
        name_of: Callable[[int], str],
        clock: Clock,
        scheduler: Scheduler,
    ) -> None:
        self.node_id = node_id
        self.clock = clock
        self.scheduler = scheduler
        self._lookup = lookup
        self._name_of = name_of
        # (group name, publishes, until when)
        self._pending: list[tuple[bytes, list[Waiting], float]] = []
        self._scheduled = False
        self.passed = 0  # publishes passed on (observability, tests)

    def pending(self) -> bool:
        return bool(self._pending)

    def add(self, group: bytes, items: list[Waiting]) -> None:
        # A fast batch's message is not passed on: the new leader may have had it already
        # (both held the stream's interest), and its batch sequence, not a Nats-Msg-Id,
        # says whether it is new; dropped as nats-server drops it, the publisher is told of
        # the gap and its batch ends or goes on by its gap mode.
        items = [w for w in items if w[1] is None or not w[1].endswith(FAST_BATCH_SUFFIX)]
        if not items:
            return
        self._pending.append((group, list(items), self.clock.monotonic() + FOR))
        if not self._scheduled:
            self._scheduled = True
            self.scheduler.call_later(POLL, self._pass_on)

    def _pass_on(self) -> None:
        self._scheduled = False
        now = self.clock.monotonic()
        keep: list[tuple[bytes, list[Waiting], float]] = []
        for group, items, deadline in self._pending:
            found = self._lookup(group)
            if found is None:
                continue  # the stream left this server
            g, stream = found
            rep = stream.replica
            if rep is None:
                continue
            lead = g.node.leader()
            if lead == self.node_id:
                if not rep.leading:
                    keep.append((group, items, deadline))  # until it takes publishes again
                    continue
                for subject, reply, hdr, data in items:
                    stream.process(subject, reply, hdr, data)
                continue
            fwd = stream.sublist.forward
            if lead and isinstance(fwd, Forwarder) and _new_term_committed(g):
                name = self._name_of(lead)
                n = len(items)
                items = [w for w in items if not fwd.send_to(name, *w)]
                self.passed += n - len(items)
            if items and now < deadline:
                keep.append((group, items, deadline))
        self._pending = keep
        if keep:
            self._scheduled = True
            self.scheduler.call_later(POLL, self._pass_on)
