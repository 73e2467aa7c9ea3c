"""The consumer's read-ahead answers exactly what ``load_next_msg("", start)`` would, on both
stores, whatever is appended or removed (one message, limits, purge, compact) between reads,
and however the cursor moves (forward, the one message put back, anywhere)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from natsd.jetstream.consumer.readahead import AHEAD_MSGS, ReadAhead
from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 90)),
        st.tuples(st.just("remove"), st.integers(-4, 8)),  # near the cursor
        st.tuples(st.just("purge"), st.integers(0, 200)),
        st.tuples(st.just("compact"), st.integers(0, 200)),
        st.tuples(st.just("read"), st.integers(1, 6)),
        st.tuples(st.just("back"), st.just(0)),
        st.tuples(st.just("jump"), st.integers(-12, 12)),  # the cursor moved by that much
    ),
    max_size=60,
)


@contextmanager
def _store(kind: str) -> Iterator[StreamStore]:
    cfg = StoreConfig(name="S", subjects=["s.>"], max_msgs=150)
    if kind == "memory":
        yield MemoryStore(cfg)
        return
    with tempfile.TemporaryDirectory() as d:
        fs = FileStore(d, cfg, block_size=2048)
        try:
            yield fs
        finally:
            fs.stop()


@pytest.mark.parametrize("kind", ["memory", "file"])
@settings(max_examples=300, deadline=None, derandomize=True)
@given(ops=OPS)
def test_read_ahead_answers_as_the_store_does(kind: str, ops: list[tuple[str, int]]) -> None:
    with _store(kind) as store:
        ahead = ReadAhead()

        def on_update(msgs: int, _nbytes: int, seq: int, _subject: str) -> None:
            # what Stream._on_store_update and Consumer.on_removed/on_bulk_removed do
            if msgs < 0:
                ahead.removed(seq) if seq else ahead.drop()

        store.register_updates(on_update)
        cursor = 1
        last: int | None = None
        n = 0
        for op, arg in ops:
            if op == "append":
                for _ in range(arg):
                    n += 1
                    store.store_msg(f"s.{n % 7}", None, b"%d" % n)
            elif op == "remove":
                store.remove_msg(cursor + arg)
            elif op == "purge" and arg % 5 == 0:
                store.purge()
            elif op == "compact":
                store.compact(arg)
            elif op == "back" and last is not None:
                cursor = last  # the delivery loop puts the last message back
            elif op == "jump":
                cursor = max(cursor + arg, 1)
            elif op == "read":
                for _ in range(arg):
                    want = store.load_next_msg("", cursor)
                    got = ahead.next_msg(store, cursor)
                    assert (got and (got.seq, got.data)) == (want and (want.seq, want.data))
                    if got is None:
                        break
                    last = got.seq
                    cursor = got.seq + 1


def _seq(ahead: ReadAhead, store: StreamStore, start: int) -> int:
    m = ahead.next_msg(store, start)
    return m.seq if m is not None else 0


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_one_read_serves_many_and_a_removal_ahead_is_seen(kind: str) -> None:
    with _store(kind) as store:
        ahead = ReadAhead()
        for i in range(100):
            store.store_msg("s.x", None, b"%d" % i)
        assert _seq(ahead, store, 1) == 1
        # What the first read took is served from memory: a removal the read-ahead is not
        # told of (the stream always tells it) would go unseen, which shows it...
        store.remove_msg(5)
        assert [_seq(ahead, store, s) for s in range(2, 7)] == [2, 3, 4, 5, 6]
        # ...and one it is told of is seen at once.
        store.remove_msg(8)
        ahead.removed(8)
        assert [_seq(ahead, store, 7), _seq(ahead, store, 8)] == [7, 9]
        # what it handed out and was then removed is not handed out again (put back) ...
        ahead.removed(9)
        store.remove_msg(9)
        assert _seq(ahead, store, 9) == 10
        # ... a cursor moved back further reads again, and so does one past what it read
        assert _seq(ahead, store, 2) == 2
        assert _seq(ahead, store, AHEAD_MSGS + 20) == AHEAD_MSGS + 20
