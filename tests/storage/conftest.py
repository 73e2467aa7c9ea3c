"""Store factories for the StreamStore contract suite.

Every test taking ``kit`` runs once per implementation: memory and file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore, file_msg_size, mem_msg_size

SizeFn = Callable[[str, bytes | None, bytes], int]


@dataclass
class StoreKit:
    """How to build (and, for persistent stores, reopen) one kind of store."""

    kind: str
    size: SizeFn  # the bytes one message counts toward state().bytes
    _build: Callable[[StoreConfig, Path | None], StreamStore]
    _tmp: Path | None = None
    _dirs: dict[int, Path] = field(default_factory=dict)
    _open: list[StreamStore] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=itertools.count)

    @property
    def persistent(self) -> bool:
        return self._tmp is not None

    def make(self, cfg: StoreConfig | None = None) -> StreamStore:
        """A new, empty store (its own directory for file stores)."""
        cfg = cfg if cfg is not None else StoreConfig(name="S")
        d = None
        if self._tmp is not None:
            d = self._tmp / f"store{next(self._ids)}"
        store = self._build(cfg, d)
        if d is not None:
            self._dirs[id(store)] = d
        self._open.append(store)
        return store

    def reopen(self, store: StreamStore) -> StreamStore:
        """Stop a persistent store and open its directory again (restart)."""
        assert self._tmp is not None, "only persistent stores can be reopened"
        d = self._dirs.pop(id(store))
        cfg = store.config
        store.stop()
        fresh = self._build(cfg, d)
        self._dirs[id(fresh)] = d
        self._open.append(fresh)
        return fresh

    def close_all(self) -> None:
        for s in self._open:
            try:
                s.stop()
            except Exception:
                pass
        self._open.clear()


def _memory_kit(tmp_path: Path) -> StoreKit:
    return StoreKit("memory", mem_msg_size, lambda cfg, _d: MemoryStore(cfg))


def _file_kit(tmp_path: Path) -> StoreKit:
    file_store = FileStore

    def build(cfg: StoreConfig, d: Path | None) -> StreamStore:
        assert d is not None
        store: StreamStore = file_store(d, cfg)
        return store

    return StoreKit("file", file_msg_size, build, _tmp=tmp_path)


KITS: dict[str, Callable[[Path], StoreKit]] = {"memory": _memory_kit, "file": _file_kit}


@pytest.fixture(params=sorted(KITS))
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreKit]:
    k = KITS[request.param](tmp_path)
    yield k
    k.close_all()


def damage(report: list[str]) -> list[str]:
    """A recovery report without the "unclean shutdown" note every crash leaves (the note
    says the store was not stopped cleanly; damage lines say what was found wrong)."""
    return [r for r in report if not r.startswith("unclean shutdown")]
