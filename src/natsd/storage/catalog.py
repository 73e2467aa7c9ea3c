"""Where streams live: the interface the engine uses to create, list and drop stores.

The engine never chooses a storage class or touches the store directory; the server hands
it a StreamCatalog (``disk_catalog.DiskCatalog``) that knows both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from natsd.storage.store import StoreConfig, StreamStore

__all__ = ["ConsumerRecord", "StreamCatalog", "StreamRecord"]


@dataclass(slots=True)
class ConsumerRecord:
    """A persisted consumer of a stream: its name, saved metadata and last saved state
    (``None`` when no state was ever written)."""

    name: str
    meta: bytes
    state: bytes | None


@dataclass(slots=True)
class StreamRecord:
    """A persisted stream found at start-up: its account, name and saved metadata."""

    account: str
    name: str
    meta: bytes
    store: StreamStore
    consumers: list[ConsumerRecord] = field(default_factory=list)


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

    def set_aside(self, account: str, name: str, storage: str) -> str:
        """Move a closed stream's files out of the way, where loading no longer finds
        them, deleting nothing; returns where they went ("" when nothing is persisted: a
        memory stream). A catalog that persists streams must override this."""
        if storage == "memory":
            return ""
        raise NotImplementedError(f"{type(self).__name__} cannot set a stream aside")

    # ------------------------------------------------------------------ consumers
    # Consumers of file streams are persisted next to their stream; memory streams (and
    # memory consumers, which the engine never passes here) live only in memory. The
    # defaults keep catalogs that do not persist anything working.
    def save_consumer(
        self, account: str, stream: str, consumer: str, storage: str, meta: bytes
    ) -> None:
        """Durably record a consumer's metadata (config and creation time)."""
        return None

    def save_consumer_state(
        self,
        account: str,
        stream: str,
        consumer: str,
        storage: str,
        state: bytes,
        durable: bool = False,
    ) -> None:
        """Replace a consumer's delivery/ack state atomically. The content is always
        fsynced; ``durable`` also fsyncs the directory so the new file survives a crash
        (needed before an ack-sync is answered)."""
        return None

    def remove_consumer(self, account: str, stream: str, consumer: str, storage: str) -> None:
        """Delete a consumer's metadata and state."""
        return None
