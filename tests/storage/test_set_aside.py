"""``DiskCatalog.set_aside``: a stream's files moved out of the way, deleting nothing (a
replica of a deleted stream found when a new stream of that name is placed on the server,
``jetstream/cluster/local``)."""

from __future__ import annotations

import json
from pathlib import Path

from natsd.storage.disk_catalog import DiskCatalog
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig

META = json.dumps({"config": {"name": "S"}, "created": 1}).encode()


def test_a_stream_set_aside_is_kept_whole_and_no_longer_loaded(tmp_path: Path) -> None:
    cat = DiskCatalog(tmp_path)
    store = cat.create("$G", "S", "file", StoreConfig(name="S"), META)
    for i in range(20):
        store.store_msg("s.x", None, b"%d" % i)
    cat.save_consumer("$G", "S", "C", "file", b'{"name": "C"}')
    store.stop()

    where = Path(cat.set_aside("$G", "S", "file"))
    assert where.parent == tmp_path / "jetstream" / "$G" / "set-aside"
    assert where.name.startswith("S.")
    assert not (tmp_path / "jetstream" / "$G" / "streams" / "S").exists()
    assert DiskCatalog(tmp_path).load() == []
    # a new stream of the name starts empty
    fresh = DiskCatalog(tmp_path).create("$G", "S", "file", StoreConfig(name="S"), META)
    assert fresh.state().msgs == 0
    fresh.stop()
    # and the old one is all there: an operator can move it back and load it
    kept = tmp_path / "kept"
    (kept / "jetstream" / "$G" / "streams").mkdir(parents=True)
    where.rename(kept / "jetstream" / "$G" / "streams" / "S")
    recs = DiskCatalog(kept).load()
    assert [r.name for r in recs] == ["S"]
    assert recs[0].store.state().msgs == 20
    assert [c.name for c in recs[0].consumers] == ["C"]
    recs[0].store.stop()


def test_a_memory_stream_has_nothing_to_set_aside(tmp_path: Path) -> None:
    cat = DiskCatalog(tmp_path)
    store = cat.create("$G", "M", "memory", StoreConfig(name="M"), META)
    assert isinstance(store, MemoryStore)
    assert cat.set_aside("$G", "M", "memory") == ""
