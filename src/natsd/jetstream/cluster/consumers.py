"""Durable consumers of replicated streams: they share the stream's Raft group
(design-clustering §4.5).

Ownership: one ``ReplicatedConsumers`` per replicated stream on this server, held by the
stream's member in ``cluster/streams.py``. It owns ``committed``: the durable consumers the
group has committed, each with its committed meta (name, creation time, config) and state.

* The leader runs the durable consumers; every other replica holds them passive
  (``Consumer.start_passive``): config and committed state, nothing running.
* Create, update, pause and reset: the API on the leader checks the request against the
  leader's own consumers (ephemeral ones included, which only the leader has) and changes
  the consumer (``api/replicated.py``); the outcome goes through the group as a typed
  ``CONSUMER`` entry (name, meta, state, reply, response, ``commit``), and the leader
  answers once it is committed. An unpin changes only the leader's runtime (pinned clients), and is
  answered there. Every replica then holds the consumer with that config. Running the
  handler on every replica instead would let their answers differ (ephemeral consumers
  count against ``max_consumers``, push interest differs per server).
* State: where a standalone consumer writes its state document to disk, the leader's
  proposes it as a ``CSTATE`` entry (``StateSaver.replicate``, ``STATE_FLUSH_DELAY`` after a
  change). Every replica saves it when it applies, the passive ones take it, and an
  ack-sync is answered once the entry that records its ack is committed.
* Delete goes through the group as a ``DELETE_CONSUMER`` entry (``cluster/streams.py``):
  every replica deletes the consumer (a passive one sends no advisory); ``prune`` then
  forgets it.
* Leadership: a new leader starts each consumer from the state committed for it
  (``activate``); a replica that stops leading stops its consumers and holds them passive
  from the committed meta and state, and drops one whose ``CONSUMER`` entry never
  committed (``passivate``). Ephemeral consumers end with the leadership, as nats-server's
  R1 ephemerals do.

What a new leader does not know: deliveries and acks after the last committed state (at
most ``STATE_FLUSH_DELAY`` and a commit). Those messages are delivered again, at least
once, as with nats-server; a message whose ack-sync was answered is never among them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import orjson

from natsd.jetstream.config.consumer_config import config_from_stored
from natsd.jetstream.config.stream_types import RetentionPolicy, StorageType
from natsd.jetstream.consumer.consumer import Consumer
from natsd.jetstream.engine import JsAccount, find_consumer
from natsd.jetstream.stream.context import RetentionView
from natsd.jetstream.stream.entries import (
    OP_CONSUMER,
    OP_CSTATE,
    EntryError,
    decode_fields,
    encode_fields,
)
from natsd.jetstream.stream.stream import Stream

__all__ = ["ReplicatedConsumers"]

log: Final = logging.getLogger("natsd")

# name -> (meta document, state document) as committed
Committed = dict[str, tuple[bytes, bytes]]

_LIMITS: Final = RetentionPolicy.LIMITS
_WORKQUEUE: Final = RetentionPolicy.WORKQUEUE


class _View:
    """A consumer's committed state as interest and workqueue retention read it (the
    stream's ``RetentionView``): the same on every replica at the same point of the log."""

    __slots__ = ("asflr", "delivered", "name", "pending", "stream")

    def __init__(self, stream: Stream, name: str, state: bytes) -> None:
        self.stream = stream
        self.name = name
        doc = orjson.loads(state) if state else {}
        self.asflr = int(doc.get("ack_floor", {}).get("stream_seq", 0))
        self.delivered = int(doc.get("delivered", {}).get("stream_seq", 0))
        self.pending = {int(s) for s in doc.get("pending", {})}

    def need_ack(self, seq: int, subject: str) -> bool:
        c = find_consumer(self.stream, self.name)
        if c is not None and not c.matches(subject):
            return False
        if seq <= self.asflr:
            return False
        return seq > self.delivered or seq in self.pending


def _meta(c: Consumer) -> bytes:
    return orjson.dumps({"name": c.name, "created": c.created_ns, "config": c.cfg.to_json()})


class ReplicatedConsumers:
    """The durable consumers of one replicated stream on this replica (module docstring)."""

    def __init__(
        self,
        ja: JsAccount,
        stream: Stream,
        node_id: int,
        propose: Callable[[bytes], bool],
        leading: Callable[[], bool],
    ) -> None:
        self.ja = ja
        self.stream = stream
        self.node_id = node_id
        self._propose = propose
        self._leading = leading
        self.committed: Committed = {}
        # the committed state as retention reads it (interest and workqueue streams)
        self.views: dict[str, _View] = {}
        stream.retention_views = self._views

    def _views(self) -> list[RetentionView]:
        return list(self.views.values())

    # ------------------------------------------------------------------ as leader
    def commit(self, c: Consumer, reply: bytes | None, body: bytes) -> None:
        """The leader's durable consumer ``c`` was created, updated, paused or reset (the
        API checked and did it, ``api/replicated.py``): its config and state go through
        the group as a ``CONSUMER`` entry, and the request is answered with ``body`` once
        it is committed. Not taken (leadership just moved): unanswered, the client retries,
        and this replica drops the uncommitted consumer when it stops leading."""
        self.wire(c)
        fields = [c.name.encode(), _meta(c), c.state_doc(), reply or b"", body]
        self._propose(encode_fields(OP_CONSUMER, self.node_id, fields))

    def wire(self, c: Consumer) -> None:
        """The leader's consumer ``c`` replicates its state through the group."""
        key = c.name.encode()
        node = self.node_id

        def replicate(doc: bytes, replies: list[bytes]) -> bool:
            return self._propose(encode_fields(OP_CSTATE, node, [key, doc, *replies]))

        c.saver.replicate_through(replicate)

    # ------------------------------------------------------------------ every replica
    def apply(self, data: bytes) -> None:
        """A committed ``CONSUMER`` or ``CSTATE`` entry; EntryError for one that does not
        parse (damage, or a peer's bug: logged by the caller, and the log goes on)."""
        try:
            self._apply(data)
        except (orjson.JSONDecodeError, KeyError, ValueError, TypeError, AttributeError) as e:
            raise EntryError(f"bad consumer entry: {type(e).__name__}: {e}") from None

    def _apply(self, data: bytes) -> None:
        op, proposer, f = decode_fields(data)
        mine = proposer == self.node_id and self._leading()
        if op == OP_CONSUMER and len(f) == 5:
            name, meta, state, reply, body = f[0].decode(), f[1], f[2], f[3], f[4]
            self.committed[name] = (meta, state)
            c = find_consumer(self.stream, name)
            if c is None or c.passive:
                self._hold(name, meta, state, c)
            self._save(name, meta, state)
            self.views[name] = _View(self.stream, name, state)
            if self.stream.cfg.retention != _LIMITS:
                # a new consumer, or one reset or refiltered: what nobody needs now goes
                self.stream.cleanup_no_interest(0, None)
            if mine and reply:
                self.ja.engine.send(self.ja, reply, body)
        elif op == OP_CSTATE and len(f) >= 2:
            name, state = f[0].decode(), f[1]
            rec = self.committed.get(name)
            if rec is None:
                return  # deleted since
            self.committed[name] = (rec[0], state)
            c = find_consumer(self.stream, name)
            if c is not None and c.passive:
                c.set_state(orjson.loads(state))
            self._save(name, None, state)
            old = self.views.get(name)
            new = self.views[name] = _View(self.stream, name, state)
            if self.stream.cfg.retention != _LIMITS:
                self._retire(old, new)
            if mine:
                for r in f[2:]:
                    self.ja.engine.send(self.ja, r, b"")
        else:
            raise EntryError(f"bad consumer entry (op {op}, {len(f)} fields)")

    def _retire(self, old: _View | None, new: _View) -> None:
        """Interest and workqueue retention, when a consumer's acks are committed: the
        messages it has now acknowledged leave the stream (a workqueue's at once, an
        interest stream's once no other consumer's committed state needs them)."""
        stream = self.stream
        store = stream.store
        c = find_consumer(stream, new.name)
        workqueue = stream.cfg.retention == _WORKQUEUE
        others = [v for v in self.views.values() if v is not new]
        seq = max((old.asflr if old is not None else 0) + 1, store.state().first_seq)
        while seq <= new.delivered:
            m = store.load_next_msg("", seq)
            if m is None or m.seq > new.delivered:
                break
            seq = m.seq
            if seq not in new.pending and (c is None or c.matches(m.subject)):
                if workqueue or not any(v.need_ack(seq, m.subject) for v in others):
                    store.remove_msg(seq)
            seq += 1

    def _hold(self, name: str, meta: bytes, state: bytes, c: Consumer | None) -> None:
        """Hold consumer ``name`` passive with the committed ``meta`` and ``state``."""
        m = orjson.loads(meta)
        cfg = config_from_stored(m["config"])
        st = orjson.loads(state) if state else None
        if c is not None:
            c.update_config(cfg)
            if st is not None:
                c.set_state(st)
            return
        stream = self.stream
        persist = stream.cfg.storage != StorageType.MEMORY and not cfg.mem_storage
        c = Consumer(stream, name, cfg, int(m.get("created", 0)), persist)
        c.start_passive(st)
        stream.attach(c)

    def _save(self, name: str, meta: bytes | None, state: bytes, durable: bool = False) -> None:
        c = find_consumer(self.stream, name)
        if c is None or not c.persist:
            return
        ctx = self.stream.ctx
        try:
            if meta is not None:
                ctx.catalog.save_consumer(ctx.account_name, self.stream.name, name, "file", meta)
            ctx.catalog.save_consumer_state(
                ctx.account_name, self.stream.name, name, "file", state, durable
            )
        except OSError as e:
            log.error("consumer %s > %s: cannot save state: %s", self.stream.name, name, e)

    def prune(self) -> None:
        """Forget the committed consumers that are gone (a delete applied)."""
        for name in [n for n in self.committed if find_consumer(self.stream, n) is None]:
            del self.committed[name]
            self.views.pop(name, None)

    def install(self, snap: Committed) -> None:
        """A snapshot from the leader (``cluster/catchup.py``) replaces what this replica had
        committed: the consumers it lists are held with its meta and state, the others
        were deleted while this replica was away. Saved durably: the snapshot is about to
        replace the log that would otherwise say so again after a restart."""
        for name in [n for n in self.committed if n not in snap]:
            c = find_consumer(self.stream, name)
            if c is not None and isinstance(c, Consumer) and c.passive:
                c.delete(advisory=False)
            del self.committed[name]
            self.views.pop(name, None)
        for name, (meta, state) in snap.items():
            self.committed[name] = (meta, state)
            c = find_consumer(self.stream, name)
            if c is None or c.passive:
                self._hold(name, meta, state, c)
            self._save(name, meta, state, durable=True)
            self.views[name] = _View(self.stream, name, state)

    def sync(self) -> None:
        """Make every committed state durable (before the log is compacted past it)."""
        for name, (_meta_doc, state) in self.committed.items():
            self._save(name, None, state, durable=True)

    # ------------------------------------------------------------------ leadership
    def adopt(self) -> None:
        """Joining the group: the durable consumers restored from this server's store
        (passive since their restore) are what it last committed; they stay passive until
        this replica leads."""
        for c in list(self.stream.consumers.values()):
            if isinstance(c, Consumer) and not c.cfg.durable_name:
                c.delete(advisory=False)  # an ephemeral one ended with its leader
                continue
            if isinstance(c, Consumer):
                state = c.state_doc()
                self.committed[c.name] = (_meta(c), state)
                self.views[c.name] = _View(self.stream, c.name, state)
        self.passivate()

    def activate(self) -> None:
        """This replica leads: run every durable consumer from its committed state. One
        found running already is not trusted: it ran when this replica last led, and
        missed every state committed since (only a passive consumer takes them)."""
        stream = self.stream
        consumers = stream.consumers.values()
        stale = [c.name for c in consumers if isinstance(c, Consumer) and not c.passive]
        if stale:
            log.error("stream %s: consumers %s were running on a replica that did not lead;"
                      " restarted from their committed state", stream.name, stale)  # fmt: skip
            self.passivate()
        for c in list(stream.consumers.values()):
            if not isinstance(c, Consumer) or not c.passive:
                continue
            live = Consumer(stream, c.name, c.cfg, c.created_ns, c.persist)
            live.start(orjson.loads(c.state_doc()))
            stream.attach(live)  # replaces the passive one
            self.wire(live)

    def passivate(self) -> None:
        """This replica no longer leads: stop the consumers; the durable ones are held
        passive as committed, the rest end (module docstring)."""
        stream = self.stream
        for c in list(stream.consumers.values()):
            if not isinstance(c, Consumer) or c.passive:
                continue
            rec = self.committed.get(c.name) if c.cfg.durable_name else None
            if rec is None:
                if c.cfg.durable_name:
                    log.warning(
                        "consumer %s > %s: created as leader but never committed; dropped",
                        stream.name, c.name,
                    )  # fmt: skip
                c.delete()
                continue
            c.stop(deleted=False)
            stream.detach(c)
            self._hold(c.name, rec[0], rec[1], None)
