"""Where streams live: the interface the engine uses to create, list and drop stores.

The engine never chooses a storage class or touches the store directory; the server hands
it a StreamCatalog (``disk_catalog.DiskCatalog``) that knows both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from natsd.storage.store import StoreConfig, StreamStore

__all__ = ["StreamCatalog", "StreamRecord"]


@dataclass(slots=True)
class StreamRecord:
    """A persisted stream found at start-up: its account, name and saved metadata."""

    account: str
    name: str
    meta: bytes
    store: StreamStore


class StreamCatalog(ABC):
    @abstractmethod
    def load(self) -> list[StreamRecord]:
        """Open every persisted stream (file storage) with its saved metadata."""

    @abstractmethod
    def create(
        self, account: str, name: str, storage: str, cfg: StoreConfig, meta: bytes
    ) -> StreamStore:
        """Create the store for a new stream (``storage`` is "file" or "memory") and
        durably record its metadata."""

    @abstractmethod
    def save_meta(self, account: str, name: str, storage: str, meta: bytes) -> None:
        """Durably replace a stream's metadata (config updates)."""

    @abstractmethod
    def remove(self, account: str, name: str, storage: str, store: StreamStore) -> None:
        """Delete a stream's data and metadata."""
