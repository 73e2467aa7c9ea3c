"""The catalog over ``<store_dir>/jetstream/<account>/streams/<name>/``.

Each file stream's directory holds ``meta.json`` (the stream's config as the engine wrote
it) and the FileStore's blocks. Metadata is replaced atomically (write, fsync, rename,
fsync the directory) so a crash leaves either the old or the new config, never a torn one.
Memory streams live only in memory, as in nats-server.

Consumers of a file stream live in ``<stream>/obs/<consumer>/``: ``meta.json`` (config and
creation time) and ``state.json`` (delivered / ack floor / pending / redelivered), each
replaced atomically like the stream's ``meta.json``.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from natsd.storage.catalog import ConsumerRecord, StreamCatalog, StreamRecord
from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StreamStore

__all__ = ["DiskCatalog"]

log = logging.getLogger("natsd")

META = "meta.json"
CONSUMERS = "obs"
CONSUMER_STATE = "state.json"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _safe_name(name: str) -> str:
    # Names are validated by the engine; this is a second fence against path tricks.
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"unsafe name {name!r}")
    return name


class DiskCatalog(StreamCatalog):
    def __init__(self, store_dir: str | os.PathLike[str], block_size: int | None = None) -> None:
        self.root = Path(store_dir) / "jetstream"
        self.root.mkdir(parents=True, exist_ok=True)
        self.block_size = block_size

    def _dir(self, account: str, name: str) -> Path:
        return self.root / _safe_name(account) / "streams" / _safe_name(name)

    def _open_file_store(self, path: Path, cfg: StoreConfig) -> FileStore:
        if self.block_size:
            return FileStore(path, cfg, block_size=self.block_size)
        return FileStore(path, cfg)

    def load(self) -> list[StreamRecord]:
        out: list[StreamRecord] = []
        if not self.root.exists():
            return out
        for acct_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            streams = acct_dir / "streams"
            if not streams.is_dir():
                continue
            for sdir in sorted(p for p in streams.iterdir() if p.is_dir()):
                meta_path = sdir / META
                try:
                    meta = meta_path.read_bytes()
                except OSError as e:
                    # Never delete anything on our own: report and leave the files alone.
                    log.error("stream %s/%s: cannot read %s: %s", acct_dir.name, sdir.name, META, e)
                    continue
                rec = StreamRecord(acct_dir.name, sdir.name, meta, self._reopen(sdir, meta))
                rec.consumers = self._load_consumers(sdir, acct_dir.name)
                out.append(rec)
        return out

    def _load_consumers(self, sdir: Path, account: str) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        odir = sdir / CONSUMERS
        if not odir.is_dir():
            return out
        for cdir in sorted(p for p in odir.iterdir() if p.is_dir()):
            try:
                meta = (cdir / META).read_bytes()
            except OSError as e:
                log.error(
                    "consumer %s/%s/%s: cannot read %s: %s", account, sdir.name, cdir.name, META, e
                )
                continue
            try:
                state: bytes | None = (cdir / CONSUMER_STATE).read_bytes()
            except FileNotFoundError:
                state = None
            except OSError as e:
                log.error(
                    "consumer %s/%s/%s: cannot read state: %s", account, sdir.name, cdir.name, e
                )
                state = None
            out.append(ConsumerRecord(cdir.name, meta, state))
        return out

    def _reopen(self, sdir: Path, meta: bytes) -> StreamStore:
        # The engine re-applies the real limits from meta via update_config() once parsed.
        return self._open_file_store(sdir, StoreConfig(name=sdir.name))

    def create(
        self, account: str, name: str, storage: str, cfg: StoreConfig, meta: bytes
    ) -> StreamStore:
        if storage == "memory":
            return MemoryStore(cfg)
        path = self._dir(account, name)
        path.mkdir(parents=True, exist_ok=True)
        self._write_meta(path, meta)
        _fsync_dir(path.parent)
        return self._open_file_store(path, cfg)

    def save_meta(self, account: str, name: str, storage: str, meta: bytes) -> None:
        if storage == "memory":
            return
        self._write_meta(self._dir(account, name), meta)

    def _write_meta(self, path: Path, meta: bytes, name: str = META, sync_dir: bool = True) -> None:
        tmp = path / (name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(meta)
            while view.nbytes:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path / name)
        if sync_dir:
            _fsync_dir(path)

    # ------------------------------------------------------------------ consumers
    def _consumer_dir(self, account: str, stream: str, consumer: str) -> Path:
        return self._dir(account, stream) / CONSUMERS / _safe_name(consumer)

    def save_consumer(
        self, account: str, stream: str, consumer: str, storage: str, meta: bytes
    ) -> None:
        if storage == "memory":
            return
        path = self._consumer_dir(account, stream, consumer)
        new = not path.is_dir()
        path.mkdir(parents=True, exist_ok=True)
        self._write_meta(path, meta)
        if new:
            _fsync_dir(path.parent)

    def save_consumer_state(
        self,
        account: str,
        stream: str,
        consumer: str,
        storage: str,
        state: bytes,
        durable: bool = False,
    ) -> None:
        if storage == "memory":
            return
        path = self._consumer_dir(account, stream, consumer)
        if not path.is_dir():
            return  # deleted meanwhile
        # The state is rewritten often: its content is fsynced, and unless ``durable`` the
        # rename rides the next directory sync (after a crash the previous state, or this
        # one, is there).
        self._write_meta(path, state, CONSUMER_STATE, sync_dir=durable)

    def remove_consumer(self, account: str, stream: str, consumer: str, storage: str) -> None:
        if storage == "memory":
            return
        path = self._consumer_dir(account, stream, consumer)
        if not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        if path.parent.exists():
            _fsync_dir(path.parent)

    def remove(self, account: str, name: str, storage: str, store: StreamStore) -> None:
        store.delete()
        if storage == "memory":
            return
        path = self._dir(account, name)
        shutil.rmtree(path, ignore_errors=True)
        if path.parent.exists():
            _fsync_dir(path.parent)
