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


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_one_read_serves_many_and_a_removal_ahead_is_seen(kind: str) -> None:
    with _store(kind) as store:
        ahead = ReadAhead()
        for i in range(100):
            store.store_msg("s.x", None, b"%d" % i)
        assert ahead.next_msg(store, 1).seq == 1  # type: ignore[union-attr]
        # What the first read took is served from memory: a removal the read-ahead is not
        # told of (the stream always tells it) would go unseen, which shows it...
        store.remove_msg(5)
        got = [ahead.next_msg(store, s) for s in range(2, 7)]
        assert [m.seq for m in got if m] == [2, 3, 4, 5, 6]
        # ...and one it is told of is seen at once.
        store.remove_msg(8)
        ahead.removed(8)
        assert ahead.next_msg(store, 7).seq == 7  # type: ignore[union-attr]
        assert ahead.next_msg(store, 8).seq == 9  # type: ignore[union-attr]
        # past what it read, it reads again
        assert ahead.next_msg(store, AHEAD_MSGS + 20).seq == AHEAD_MSGS + 20  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_what_was_handed_out_and_then_removed_is_not_handed_out_again(kind: str) -> None:
    with _store(kind) as store:
        ahead = ReadAhead()
        for i in range(20):
            store.store_msg("s.x", None, b"%d" % i)
        assert [ahead.next_msg(store, s).seq for s in range(1, 6)] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]
        store.remove_msg(5)
        ahead.removed(5)
        assert ahead.next_msg(store, 5).seq == 6  # type: ignore[union-attr]  # put back, gone
        assert ahead.next_msg(store, 2).seq == 2  # type: ignore[union-attr]  # moved back
