"""Filtered reads stop at the first match, in the compiled build too.

mypyc builds a generator expression eagerly, so ``load_next_msg`` with a filter once walked
every sequence from ``start`` to the end of the stream on each call: a consumer filtered on
the one subject of a 100k-message file stream delivered a few thousand messages a minute.
Reading 2,000 consecutive messages must touch about 2,000 entries, not 2,000 x 100,000; the
timeout turns the quadratic walk (tens of seconds) into a failure while the linear one takes
milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

N = 100_000


def _stores(tmp_path: Path) -> list[StreamStore]:
    return [FileStore(tmp_path / "fs", StoreConfig(name="S")), MemoryStore(StoreConfig(name="S"))]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("filter", ["a.b", "a.*", "a.>", ">"])
def test_consecutive_filtered_reads_are_linear(tmp_path: Path, filter: str) -> None:
    for store in _stores(tmp_path):
        for i in range(N):
            store.store_msg("a.b" if i % 1000 else "a.c", None, b"x", 0)
        seq, got = N // 2, 0
        while got < 2_000:
            m = store.load_next_msg(filter, seq)
            assert m is not None
            assert m.seq >= seq
            seq, got = m.seq + 1, got + 1
        # The reads skipped exactly the a.c messages a literal filter excludes.
        expected_last = N // 2 + 2_000 - 1
        if filter == "a.b":
            expected_last += sum(1 for s in range(N // 2, seq) if (s - 1) % 1000 == 0)
        assert seq - 1 == expected_last
        store.stop()
