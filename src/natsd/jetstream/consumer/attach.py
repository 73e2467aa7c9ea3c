"""How consumers and their stream affect each other.

* registration: ``Stream.consumers`` / ``Stream.consumer_count`` and the store's update
  callback, through which consumers hear about removed messages (limits, deletes, expiry)
  like nats-server's ``decStreamPending``;
* retention: a workqueue stream drops a message once its consumer acked it; an interest
  stream once no consumer still needs it (``ackMsg`` / ``noInterest``), and keeps nothing
  no consumer matches;
* stream purge and delete, consumer delete (with interest cleanup), shutdown.

All on the event loop.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from natsd.core.filters import subject_matches
from natsd.jetstream.config.stream_types import RetentionPolicy
from natsd.jetstream.config.subject_mapping import subject_is_subset_match

if TYPE_CHECKING:
    from natsd.jetstream.consumer.consumer import Consumer
    from natsd.jetstream.stream.stream import Stream

__all__ = [
    "ack_msg",
    "attach",
    "check_interest",
    "cleanup_no_interest",
    "delete_consumer",
    "detach",
    "partition_unique",
    "stream_deleted",
    "stream_purged",
    "stream_stopped",
]

# Policy members compared per message, bound once: on Python 3.11 `RetentionPolicy.LIMITS`
# is a call to EnumType.__getattr__ (~70 ns); a module global is one dict lookup.
_LIMITS: Final = RetentionPolicy.LIMITS
_WORKQUEUE: Final = RetentionPolicy.WORKQUEUE
_INTEREST: Final = RetentionPolicy.INTEREST

log = logging.getLogger("natsd")


def attach(stream: Stream, c: Consumer) -> None:
    if not stream.consumers:
        _register_updates(stream)
    stream.consumers[c.name] = c
    stream.consumer_count = len(stream.consumers)


def detach(stream: Stream, c: Consumer) -> None:
    if stream.consumers.get(c.name) is c:
        del stream.consumers[c.name]
    stream.consumer_count = len(stream.consumers)
    if not stream.consumers:
        stream.store.register_updates(None)


def _register_updates(stream: Stream) -> None:
    def on_update(msgs: int, nbytes: int, seq: int, subject: str) -> None:
        if msgs >= 0:
            return
        consumers = list(stream.consumers.values())
        if seq:
            for c in consumers:
                c.on_removed(seq, subject)
        else:
            # A bulk removal (purge, compact, truncate): counts are recomputed.
            for c in consumers:
                c.npc = c._calc_num_pending()

    stream.store.register_updates(on_update)


# ---------------------------------------------------------------------- retention
def ack_msg(stream: Stream, c: Consumer | None, seq: int) -> bool:
    """``ackMsg``: a consumer acked ``seq``; remove it when retention says so."""
    retention = stream.cfg.retention
    if retention == _LIMITS:
        return False
    store = stream.store
    if retention == _WORKQUEUE:
        return store.remove_msg(seq)
    m = store.load_msg(seq)
    if m is None:
        return False
    for o in stream.consumers.values():
        if o is not c and o.need_ack(seq, m.subject):
            return False
    return store.remove_msg(seq)


def check_interest(stream: Stream, seq: int, subject: str) -> None:
    """Interest retention: a message no consumer is interested in is not kept."""
    for c in stream.consumers.values():
        if c.need_ack(seq, subject):
            return
    stream.store.remove_msg(seq)


def cleanup_no_interest(stream: Stream, c: Consumer, ignore: bool) -> None:
    """``cleanupNoInterestMessages``: after a consumer of an interest stream went away (or
    changed its filters), drop the messages nobody needs any more."""
    store = stream.store
    if not stream.consumers:
        store.purge()
        return
    st = store.state()
    seq = max(c.asflr, st.first_seq)
    while True:
        m = store.load_next_msg("", seq)
        if m is None:
            break
        seq = m.seq
        if not any(
            o.need_ack(seq, m.subject) for o in stream.consumers.values() if not (ignore and o is c)
        ):
            store.remove_msg(seq)
        seq += 1


def partition_unique(stream: Stream, name: str, filters: list[str]) -> bool:
    """``partitionUnique``: no other consumer of a workqueue stream overlaps ``filters``."""
    for part in filters:
        for n, o in stream.consumers.items():
            if n == name:
                continue
            if o.filter_all:
                return False
            for f in o.filters:
                if subject_is_subset_match(part, f) or subject_is_subset_match(f, part):
                    return False
    return True


# ---------------------------------------------------------------------- lifecycle
def delete_consumer(stream: Stream, c: Consumer, advisory: bool = True) -> None:
    """Delete a consumer: stop it (``409 Consumer Deleted`` to waiting pulls), forget its
    files, and with interest retention drop what only it still held."""
    c.stop(deleted=True, advisory=advisory)
    detach(stream, c)
    ja = stream.account
    if c.persist:
        try:
            ja.engine.catalog.remove_consumer(ja.account.name, stream.name, c.name, "file")
        except OSError as e:
            log.error("consumer %s > %s: cannot remove files: %s", stream.name, c.name, e)
    if stream.cfg.retention == _INTEREST:
        cleanup_no_interest(stream, c, True)


def stream_deleted(stream: Stream) -> None:
    """The stream is being deleted: its consumers go with it (no advisories)."""
    for c in list(stream.consumers.values()):
        c.stop(deleted=True, advisory=False)
    stream.consumers.clear()
    stream.consumer_count = 0
    stream.store.register_updates(None)


def stream_stopped(stream: Stream) -> None:
    """Server shutdown: consumers save their state and stop."""
    for c in list(stream.consumers.values()):
        c.stop(deleted=False)


def stream_purged(stream: Stream, subject: str, seq: int, keep: int) -> None:
    """``stream.purge``: move each affected consumer past what was purged."""
    if not stream.consumers:
        return
    store = stream.store
    st = store.state()
    fseq, lseq = st.first_seq, st.last_seq
    if subject:
        fs = store.filtered_state(fseq, subject)
        fseq = fs.first
    for c in list(stream.consumers.values()):
        start = fseq
        do = not subject or _equal_or_subset(c, subject)
        wider = False
        if not do and subject and _filtered_match(c, subject):
            do, wider = True, True
            start = st.first_seq
        if do:
            c.purge(start, lseq, wider)


def _equal_or_subset(c: Consumer, subject: str) -> bool:
    """``isEqualOrSubsetMatch``: a filter equal to, or within, the purged subject."""
    return any(f == subject or subject_is_subset_match(f, subject) for f in c.filters)


def _filtered_match(c: Consumer, subject: str) -> bool:
    """``isFilteredMatch`` of the purge subject against the consumer's filters."""
    if c.filter_all:
        return True
    return any(f == subject or subject_matches(subject, f) for f in c.filters) or any(
        subject_is_subset_match(subject, f) for f in c.filters
    )
