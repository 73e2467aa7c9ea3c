"""A consumer's saved config and state: when they are written, and ack-sync replies.

File consumers save their config (``save_meta``) when it is set, and their state through
the catalog a little after it changes (``STATE_FLUSH_DELAY``) and when the server stops;
``JetStream.restore`` hands the saved state back to ``Consumer.start``. What the state says
is the ack tracker's (``AckTracker.state_doc`` / ``restore``); when it is written is this
part's.

Rules kept here (:class:`StateSaver`):

* ``dirty``, the flush timer and the waiting ack-sync replies are written only here. Any
  part marks the state dirty (``mark_dirty``, on the delivery and ack paths: a flag test
  when already dirty); the first mark arms one flush ``STATE_FLUSH_DELAY`` later.
* An ack-sync reply of a file consumer goes out only once a save covering the ack is on
  disk (saved and directory-synced): a confirmed ack never comes back after a crash. Acks
  arriving in one loop turn share one save.
* After ``stop()`` no timer is armed and no reply is confirmed. Memory consumers never
  write; their replies go out at once.
* A durable consumer of a replicated stream, on the stream's leader, replicates
  (``replicate_through``, until ``stop_replicating``): its state goes through the
  stream's Raft group instead of to disk (every replica, this one included, saves it
  when the entry applies), and its ack-sync replies travel with the entry and go out
  once it is committed.

Everything runs on the event loop; the writes are the consumer's only blocking calls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import orjson

from natsd.core.scheduler import Cancellable, Scheduler
from natsd.jetstream.config.consumer_config import ConsumerConfig
from natsd.jetstream.stream.stream import Stream
from natsd.router.publish import publish

__all__ = ["STATE_FLUSH_DELAY", "Replicate", "StateSaver"]

log: Final = logging.getLogger("natsd")

STATE_FLUSH_DELAY: Final = 0.1  # seconds between a state change and its write (file consumers)

# (the state document, the ack-sync replies it confirms) -> whether the group took it
Replicate = Callable[[bytes, list[bytes]], bool]


class StateSaver:
    """When consumer ``name``'s state is written (``persist``: a file consumer)."""

    def __init__(self, stream: Stream, name: str, persist: bool, doc: Callable[[], bytes]) -> None:
        self._stream = stream
        self._name = name
        self._sched: Scheduler = stream.scheduler
        self.persist = persist
        self._doc = doc  # the state to write, built when it is written
        self.dirty = False
        self._stopped = False
        self._flush_tmr: Cancellable | None = None
        # Ack-sync replies waiting for the save that records their acks.
        self._sync_replies: list[bytes] = []
        # a replicated stream's leader's (module docstring); None: saved here
        self._replicate: Replicate | None = None

    def replicate_through(self, replicate: Replicate) -> None:
        """From now on the state goes through the stream's group: ``replicate`` proposes it
        (on the leader of a replicated stream, ``cluster/consumers.py``)."""
        self._replicate = replicate

    def stop_replicating(self) -> None:
        """The stream runs unreplicated again (its last other replica left): saved here."""
        self._replicate = None

    def mark_dirty(self) -> None:
        if self.dirty:
            return
        self.dirty = True
        if self.persist and not self._stopped and self._flush_tmr is None:
            self._flush_tmr = self._sched.call_later(STATE_FLUSH_DELAY, self.flush)

    def flush(self, durable: bool = False) -> bool:
        """Save the state if it changed (``durable``: also when it did not, and fsync the
        directory too). False when the save failed."""
        self._flush_tmr = None
        if not self.dirty and not durable:
            return True
        self.dirty = False
        if self._replicate is not None:
            if not self._replicate(self._doc(), []):
                self.dirty = True
                return False
            return True
        if not self.persist or self._stream.replica is not None:
            # a replicated stream's consumer reaches disk only as committed (cluster/consumers.py)
            return True
        stream = self._stream
        ctx = stream.ctx
        try:
            ctx.catalog.save_consumer_state(
                ctx.account_name, stream.name, self._name, "file", self._doc(), durable
            )
        except OSError as e:
            log.error("consumer %s > %s: cannot save state: %s", stream.name, self._name, e)
            self.dirty = True
            return False
        return True

    def ack_reply(self, reply: bytes) -> None:
        """Answer an ack-sync, for a file consumer once the state recording the ack is on
        disk (see the module docstring)."""
        if not self.persist and self._replicate is None:
            publish(self._stream.sublist, reply, None, None, b"")
            return
        if not self._sync_replies:
            self._sched.call_soon(self._flush_for_replies)
        self._sync_replies.append(reply)

    def _flush_for_replies(self) -> None:
        replies, self._sync_replies = self._sync_replies, []
        if self._replicate is not None:
            if not self._stopped:
                # answered by the replica that proposed it, once the entry commits
                self.dirty = False
                self._replicate(self._doc(), replies)
            return
        if self._stopped or not self.flush(durable=True):
            return  # not recorded: no confirmation; the client's retry finds the state
        sublist = self._stream.sublist
        for r in replies:
            publish(sublist, r, None, None, b"")

    def save_meta(self, created_ns: int, cfg: ConsumerConfig) -> None:
        """Persist the consumer's name, creation time and config (file consumers only): at
        creation, on config updates and pauses. Raises OSError when the catalog cannot. A
        replicated stream's consumer is saved when its group commits it (cluster/consumers.py),
        so a leader that fails before the commit leaves nothing on disk to come back."""
        if not self.persist or self._stream.replica is not None:
            return
        meta = orjson.dumps({"name": self._name, "created": created_ns, "config": cfg.to_json()})
        stream = self._stream
        ctx = stream.ctx
        ctx.catalog.save_consumer(ctx.account_name, stream.name, self._name, "file", meta)

    def stop(self) -> None:
        """No more timers or confirmations (the caller flushed first if it wanted to)."""
        self._stopped = True
        if self._flush_tmr is not None:
            self._flush_tmr.cancel()
            self._flush_tmr = None
