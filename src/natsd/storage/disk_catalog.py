"""The catalog over ``<store_dir>/jetstream/<account>/streams/<name>/``.

Each file stream's directory holds ``meta.json`` (the stream's config as the engine wrote
it) and the FileStore's blocks. Metadata is replaced atomically (write, fsync, rename,
fsync the directory) so a crash leaves either the old or the new config, never a torn one.
Memory streams live only in memory, as in nats-server.

Consumers of a file stream live in ``<stream>/obs/<consumer>/``: ``meta.json`` (config and
creation time) and ``state.json`` (delivered / ack floor / pending / redelivered), each
replaced atomically like the stream's ``meta.json``.

Damage. Every JSON file written here carries a crc32 of its content as a leading
``"_crc32"`` key (still valid JSON; readers ignore the key), so a flipped bit that leaves the
JSON parseable is still caught. Metadata (stream and consumer ``meta.json``) is also kept in
``meta.json.bak``, written after the main copy. At load:

- a damaged ``meta.json`` is replaced by its backup when that one checks out (logged);
  otherwise the stream or consumer is reported and left untouched on disk, never deleted;
- a damaged or unreadable ``state.json`` is kept aside as ``state.json.damaged`` and the
  consumer restarts from a safe position: nothing acknowledged, everything redelivered from
  the stream's first message (at-least-once; no message is skipped).

All disk access goes through a ``FileIO`` (``fileio``), the same one the file stores get.
"""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from natsd.storage.catalog import ConsumerRecord, StreamCatalog, StreamRecord
from natsd.storage.fileio import DEFAULT_IO, FileIO
from natsd.storage.filestore import FileStore
from natsd.storage.memstore import MemoryStore
from natsd.storage.store import StoreConfig, StoreError, StreamStore

__all__ = ["SAFE_CONSUMER_STATE", "DiskCatalog", "seal", "unseal"]

log = logging.getLogger("natsd")

META = "meta.json"
CONSUMERS = "obs"
# streams set aside (a replica of a deleted stream found when one of that name comes
# back): beside the streams directory, never loaded
SET_ASIDE = "set-aside"
CONSUMER_STATE = "state.json"
BACKUP = ".bak"
DAMAGED = ".damaged"
# What a consumer whose state is lost restarts from: nothing delivered, nothing acked, so
# every message still in the stream is (re)delivered and none is skipped.
SAFE_CONSUMER_STATE = (
    b'{"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0}}'
)
_SEAL = b'{"_crc32":"'


def seal(doc: bytes) -> bytes:
    """``doc`` (a JSON object) with a leading ``"_crc32"`` key holding its crc32."""
    if not doc.startswith(b"{"):
        return doc
    rest = doc[1:].lstrip()
    head = _SEAL + b"%08x" % zlib.crc32(doc) + b'"'
    return head + (b"}" if rest.startswith(b"}") else b"," + rest)


def unseal(raw: bytes) -> tuple[bytes, bool]:
    """(original document, intact). A document without the key (written by an older
    natsd) is taken as intact when it parses as a JSON object."""
    n = len(_SEAL) + 9
    if raw.startswith(_SEAL) and len(raw) > n and raw[n - 1 : n] == b'"':
        try:
            crc = int(raw[len(_SEAL) : n - 1], 16)
        except ValueError:
            return raw, False
        tail = raw[n:]
        if tail == b"}":
            doc = b"{}"
        elif tail.startswith(b","):
            doc = b"{" + tail[1:]
        else:
            return raw, False
        return doc, zlib.crc32(doc) == crc
    if len(raw) >= len(_SEAL):
        head = raw[: len(_SEAL)]
        if sum(bin(a ^ b).count("1") for a, b in zip(head, _SEAL, strict=True)) <= 4:
            return raw, False  # a sealed document whose seal itself is damaged
    try:
        import orjson

        return raw, isinstance(orjson.loads(raw), dict)
    except ValueError:
        return raw, False


def _safe_name(name: str) -> str:
    # Names are validated by the engine; this is a second fence against path tricks.
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise ValueError(f"unsafe name {name!r}")
    return name


class DiskCatalog(StreamCatalog):
    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        block_size: int | None = None,
        io: FileIO = DEFAULT_IO,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.io = io
        self.now_ns = now_ns  # the stores' wall clock
        self.root = Path(store_dir) / "jetstream"
        self._mkdirs(self.root)
        self.block_size = block_size

    def _mkdirs(self, path: Path) -> bool:
        """Create ``path`` and its missing parents, each made durable in its parent."""
        return self.io.makedirs_durable(path)

    def _subdirs(self, path: Path) -> list[Path]:
        try:
            names = self.io.listdir(path)
        except OSError:
            return []
        return [path / n for n in sorted(names) if self.io.isdir(path / n)]

    def _read_json(self, path: Path, what: str) -> bytes:
        """A metadata file's document, falling back to its backup when it is damaged.
        Raises OSError (missing or unreadable) or ValueError (damaged, no good backup)."""
        io = self.io
        try:
            raw = io.read_file(path)
        except FileNotFoundError:
            raw = None
        except OSError as e:
            log.error("%s: cannot read %s: %s", what, path.name, e)
            raw = None
        if raw is not None:
            doc, ok = unseal(raw)
            if ok:
                return doc
            log.error("%s: %s is damaged (checksum mismatch or bad JSON)", what, path.name)
        try:
            bdoc, bok = unseal(io.read_file(str(path) + BACKUP))
        except OSError:
            bdoc, bok = b"", False
        if bok:
            log.warning("%s: using the backup copy of %s", what, path.name)
            return bdoc
        if raw is None:
            raise FileNotFoundError(f"{path.name} missing and no usable backup")
        raise ValueError(f"{path.name} damaged and no usable backup; left untouched")

    def _dir(self, account: str, name: str) -> Path:
        return self.root / _safe_name(account) / "streams" / _safe_name(name)

    def _open_file_store(self, path: Path, cfg: StoreConfig) -> FileStore:
        if self.block_size:
            return FileStore(path, cfg, block_size=self.block_size, io=self.io,
                             now_ns=self.now_ns)  # fmt: skip
        return FileStore(path, cfg, io=self.io, now_ns=self.now_ns)

    def load(self) -> list[StreamRecord]:
        out: list[StreamRecord] = []
        if not self.io.isdir(self.root):
            return out
        for acct_dir in self._subdirs(self.root):
            streams = acct_dir / "streams"
            if not self.io.isdir(streams):
                continue
            for sdir in self._subdirs(streams):
                what = f"stream {acct_dir.name}/{sdir.name}"
                try:
                    meta = self._read_json(sdir / META, what)
                except (OSError, ValueError) as e:
                    # Never delete anything on our own: report and leave the files alone.
                    log.error("%s: cannot read %s: %s; left untouched", what, META, e)
                    continue
                try:
                    store = self._reopen(sdir, meta)
                except (StoreError, OSError) as e:
                    # The server still starts; this stream waits, untouched, for a person.
                    log.error("%s: cannot open its message store: %s; left untouched", what, e)
                    continue
                rec = StreamRecord(acct_dir.name, sdir.name, meta, store)
                rec.consumers = self._load_consumers(sdir, acct_dir.name)
                out.append(rec)
        return out

    def _load_consumers(self, sdir: Path, account: str) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        odir = sdir / CONSUMERS
        if not self.io.isdir(odir):
            return out
        for cdir in self._subdirs(odir):
            what = f"consumer {account}/{sdir.name}/{cdir.name}"
            try:
                meta = self._read_json(cdir / META, what)
            except (OSError, ValueError) as e:
                log.error("%s: cannot read %s: %s; left untouched", what, META, e)
                continue
            out.append(ConsumerRecord(cdir.name, meta, self._read_state(cdir, what)))
        return out

    def _read_state(self, cdir: Path, what: str) -> bytes | None:
        io = self.io
        path = cdir / CONSUMER_STATE
        try:
            raw = io.read_file(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.error("%s: cannot read %s (%s)", what, CONSUMER_STATE, e)
            raw = None
        if raw is not None:
            doc, ok = unseal(raw)
            if ok:
                return doc
            # Keep the damaged bytes for inspection (never delete), out of the way of saves.
            try:
                io.write_file_atomic(str(path) + DAMAGED, raw)
            except OSError:
                pass
        log.error(
            "%s: %s is damaged; kept as %s%s, consumer reset to redeliver every message "
            "from the start of the stream (nothing acknowledged)",
            what,
            CONSUMER_STATE,
            CONSUMER_STATE,
            DAMAGED,
        )
        return SAFE_CONSUMER_STATE

    def _reopen(self, sdir: Path, meta: bytes) -> StreamStore:
        # The engine re-applies the real limits from meta via update_config() once parsed.
        return self._open_file_store(sdir, StoreConfig(name=sdir.name))

    def create(
        self, account: str, name: str, storage: str, cfg: StoreConfig, meta: bytes
    ) -> StreamStore:
        if storage == "memory":
            return MemoryStore(cfg, self.now_ns)
        path = self._dir(account, name)
        self._mkdirs(path)
        self._write_meta(path, meta)
        return self._open_file_store(path, cfg)

    def save_meta(self, account: str, name: str, storage: str, meta: bytes) -> None:
        if storage == "memory":
            return
        self._write_meta(self._dir(account, name), meta)

    def _write_meta(self, path: Path, meta: bytes, name: str = META, sync_dir: bool = True) -> None:
        data = seal(meta)
        self.io.write_file_atomic(str(path / name), data, sync_dir=sync_dir)
        if name == META:
            # The backup second: while it is being replaced the main copy is already good.
            self.io.write_file_atomic(str(path / (name + BACKUP)), data, sync_dir=sync_dir)

    # ------------------------------------------------------------------ consumers
    def _consumer_dir(self, account: str, stream: str, consumer: str) -> Path:
        return self._dir(account, stream) / CONSUMERS / _safe_name(consumer)

    def save_consumer(
        self, account: str, stream: str, consumer: str, storage: str, meta: bytes
    ) -> None:
        if storage == "memory":
            return
        path = self._consumer_dir(account, stream, consumer)
        self._mkdirs(path)
        self._write_meta(path, meta)

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
        if not self.io.isdir(path):
            return  # deleted meanwhile
        # The state is rewritten often: its content is fsynced, and unless ``durable`` the
        # rename rides the next directory sync (after a crash the previous state, or this
        # one, is there).
        self._write_meta(path, state, CONSUMER_STATE, sync_dir=durable)

    def remove_consumer(self, account: str, stream: str, consumer: str, storage: str) -> None:
        if storage == "memory":
            return
        path = self._consumer_dir(account, stream, consumer)
        if not self.io.exists(path):
            return
        self.io.rmtree(path)
        if self.io.isdir(path.parent):
            self.io.fsync_dir(path.parent)

    def set_aside(self, account: str, name: str, storage: str) -> str:
        """``<root>/<account>/set-aside/<stream>.<ns>``: beside ``streams``, so ``load``
        does not open it; an operator may inspect, restore or delete it."""
        if storage == "memory":
            return ""
        path = self._dir(account, name)
        dest = self.root / _safe_name(account) / SET_ASIDE / f"{_safe_name(name)}.{time.time_ns()}"
        self._mkdirs(dest.parent)
        self.io.replace(path, dest)
        self.io.fsync_dir(path.parent)
        self.io.fsync_dir(dest.parent)
        return str(dest)

    def remove(self, account: str, name: str, storage: str, store: StreamStore) -> None:
        store.delete()
        if storage == "memory":
            return
        path = self._dir(account, name)
        self.io.rmtree(path)
        if self.io.isdir(path.parent):
            self.io.fsync_dir(path.parent)
