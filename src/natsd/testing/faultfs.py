"""A ``FileIO`` that simulates power loss (issue 7, fault 2; public since issue 20).

``FaultFS(root)`` performs every operation on the real disk (so the store under test runs
normally) and keeps, beside it, a model of what a power loss would leave:

- per file: its *durable* content (as of its last fsync/fdatasync) and the writes and
  truncations made since, in order;
- per directory: its *durable* entries (name -> file or directory, as of its last fsync).
  Files and directories created, renamed or unlinked since are not durable.

``crash_at=N`` makes the N-th mutating operation (write, pwrite, ftruncate, fsync,
fdatasync, open with O_CREAT/O_TRUNC, rename, unlink, mkdir, rmdir) raise ``Crash`` instead
of happening, and every operation after it too: the process "lost power" there.

``materialize(dest, rng, torn)`` writes the disk a power loss could leave into ``dest``:
the durable directory entries only, each file with its durable content, and (``torn``) for
each file a random prefix of the unsynced operations applied, the last of them possibly
cut short (a torn write). The test then opens ``dest`` with the normal (os) file layer.

``unsynced(under)`` lists what is not durable below a directory right now: a file with
writes not yet fsynced, or a name (file or directory, or one of its parents) whose creation
or rename was not followed by an fsync of its directory. Called when an ack is sent, any
entry is a violation of the durability contract.

``fail_errno`` (e.g. ``errno.ENOSPC``, a full disk) makes the operations named in
``fail_ops`` ("write": write/pwrite, "sync": fsync/fdatasync) raise ``OSError`` without
doing anything, until it is set back to None (space returns).

Threads: a server fsyncs on a worker thread while its event loop writes and a test takes
crash images; every method that reads or changes the model holds one lock (``_locked``).
The real ``os`` calls inside are quick, and there is no real fsync.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from natsd.storage.fileio import FileIO, StrPath

__all__ = ["Crash", "FaultFS"]


class Crash(BaseException):
    """The power went out (a BaseException so that no ``except Exception`` swallows it)."""


_ids = itertools.count(1)
F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    @functools.wraps(method)
    def wrapper(self: FaultFS, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class _File:
    __slots__ = ("durable", "id", "pending")

    def __init__(self, durable: bytes = b"") -> None:
        self.id = next(_ids)
        self.durable = bytearray(durable)
        # ("w", offset, data) or ("t", size), in the order they happened
        self.pending: list[tuple[Any, ...]] = []

    def sync(self) -> None:
        for op in self.pending:
            _apply(self.durable, op)
        self.pending.clear()


class _Dir:
    __slots__ = ("durable", "id")

    def __init__(self) -> None:
        self.id = next(_ids)
        self.durable: dict[str, _File | _Dir] = {}


def _apply(buf: bytearray, op: tuple[Any, ...]) -> None:
    if op[0] == "w":
        off, data = op[1], op[2]
        if len(buf) < off:
            buf.extend(b"\0" * (off - len(buf)))
        buf[off : off + len(data)] = data
    else:
        del buf[op[1] :]
        if len(buf) < op[1]:
            buf.extend(b"\0" * (op[1] - len(buf)))


class FaultFS(FileIO):
    def __init__(self, root: StrPath, crash_at: int = 0) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.crash_at = crash_at
        self.ops = 0
        self.crashed = False
        self.nodes: dict[str, _File | _Dir] = {}  # current namespace (mirrors the disk)
        self.fds: dict[int, _File | _Dir] = {}
        self.fail_errno: int | None = None
        self.fail_ops: frozenset[str] = frozenset({"write", "sync"})
        self.lock = threading.RLock()
        self._snapshot()

    # ------------------------------------------------------------------ model helpers
    def _snapshot(self) -> None:
        """Everything already on disk under root counts as durable."""
        rootd = _Dir()
        self.nodes[self.root] = rootd
        for dirpath, dirnames, filenames in os.walk(self.root):
            d = self.nodes[dirpath]
            assert isinstance(d, _Dir)
            for n in dirnames:
                sub = _Dir()
                self.nodes[os.path.join(dirpath, n)] = sub
                d.durable[n] = sub
            for n in filenames:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    node = _File(f.read())
                self.nodes[p] = node
                d.durable[n] = node

    def _p(self, path: StrPath) -> str:
        return os.path.abspath(os.fspath(path))

    def _tick(self) -> None:
        if self.crashed:
            raise Crash("after power loss")
        self.ops += 1
        if self.crash_at and self.ops >= self.crash_at:
            self.crashed = True
            raise Crash(f"power loss at operation {self.ops}")

    def _injected(self, op: str) -> None:
        err = self.fail_errno
        if err is not None and op in self.fail_ops:
            raise OSError(err, os.strerror(err))

    def _file(self, fd: int) -> _File | None:
        node = self.fds.get(fd)
        return node if isinstance(node, _File) else None

    # ------------------------------------------------------------------ primitives
    @_locked
    def open(self, path: StrPath, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:  # type: ignore[override]
        p = self._p(path)
        mutating = bool(flags & (os.O_CREAT | os.O_TRUNC))
        if mutating:
            self._tick()
        elif self.crashed:
            raise Crash("after power loss")
        existed = os.path.exists(p)
        fd = os.open(p, flags, mode)
        node = self.nodes.get(p)
        if node is None or not existed:
            node = _Dir() if os.path.isdir(p) else _File()
            self.nodes[p] = node
        elif flags & os.O_TRUNC and isinstance(node, _File):
            node.pending.append(("t", 0))
        self.fds[fd] = node
        return fd

    @_locked
    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)
        os.close(fd)

    @_locked
    def dup(self, fd: int) -> int:
        if self.crashed:
            raise Crash("after power loss")
        nfd = os.dup(fd)
        node = self.fds.get(fd)
        if node is not None:
            self.fds[nfd] = node
        return nfd

    @_locked
    def write(self, fd: int, data: Any) -> int:
        self._injected("write")
        self._tick()
        off = os.lseek(fd, 0, os.SEEK_CUR)
        n = os.write(fd, data)
        node = self._file(fd)
        if node is not None and n > 0:
            node.pending.append(("w", off, bytes(data[:n])))
        return n

    @_locked
    def pwrite(self, fd: int, data: Any, offset: int) -> int:
        self._injected("write")
        self._tick()
        n = os.pwrite(fd, data, offset)
        node = self._file(fd)
        if node is not None and n > 0:
            node.pending.append(("w", offset, bytes(data[:n])))
        return n

    @_locked
    def ftruncate(self, fd: int, length: int) -> None:
        self._tick()
        os.ftruncate(fd, length)
        node = self._file(fd)
        if node is not None:
            node.pending.append(("t", length))

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        if self.crashed:
            raise Crash("after power loss")
        return os.pread(fd, n, offset)

    @_locked
    def _sync_fd(self, fd: int) -> None:
        self._injected("sync")
        self._tick()
        node = self.fds.get(fd)
        # No real fsync: the model decides what survives, and the real one costs ms.
        if isinstance(node, _File):
            node.sync()
        elif isinstance(node, _Dir):
            path = next(p for p, n in self.nodes.items() if n is node)
            node.durable = {}
            for name in os.listdir(path):
                child = self.nodes.get(os.path.join(path, name))
                if child is not None:
                    node.durable[name] = child

    def fsync(self, fd: int) -> None:  # type: ignore[override]
        self._sync_fd(fd)

    def fdatasync(self, fd: int) -> None:  # type: ignore[override]
        self._sync_fd(fd)

    @_locked
    def replace(self, src: StrPath, dst: StrPath, **_kw: Any) -> None:  # type: ignore[override]
        self._tick()
        s, d = self._p(src), self._p(dst)
        os.replace(s, d)
        node = self.nodes.pop(s, None)
        if node is not None:
            self.nodes[d] = node

    @_locked
    def unlink(self, path: StrPath, **_kw: Any) -> None:  # type: ignore[override]
        self._tick()
        p = self._p(path)
        os.unlink(p)
        self.nodes.pop(p, None)

    @_locked
    def mkdir(self, path: StrPath, mode: int = 0o777, **_kw: Any) -> None:  # type: ignore[override]
        self._tick()
        p = self._p(path)
        os.mkdir(p, mode)
        self.nodes[p] = _Dir()

    @_locked
    def rmdir(self, path: StrPath, **_kw: Any) -> None:  # type: ignore[override]
        self._tick()
        p = self._p(path)
        os.rmdir(p)
        self.nodes.pop(p, None)

    def listdir(self, path: StrPath = ".") -> list[str]:  # type: ignore[override]
        if self.crashed:
            raise Crash("after power loss")
        return os.listdir(path)

    # ------------------------------------------------------------------ checks
    def _durably_linked(self, path: str) -> bool:
        node = self.nodes.get(path)
        while path != self.root:
            parent = os.path.dirname(path)
            pnode = self.nodes.get(parent)
            if not isinstance(pnode, _Dir) or pnode.durable.get(os.path.basename(path)) is not node:
                return False
            path, node = parent, pnode
        return True

    @_locked
    def unsynced(self, under: StrPath, skip: tuple[str, ...] = ()) -> list[str]:
        """What below ``under`` a power loss right now could lose (see the module doc)."""
        base = self._p(under)
        out: list[str] = []
        for p, node in self.nodes.items():
            if not (p == base or p.startswith(base + os.sep)):
                continue
            if os.path.basename(p) in skip:
                continue
            if isinstance(node, _File) and node.pending:
                out.append(f"{p}: {len(node.pending)} writes not fsynced")
            if not self._durably_linked(p):
                out.append(f"{p}: name not durable (directory not fsynced)")
        return out

    # ------------------------------------------------------------------ the crash image
    @_locked
    def materialize(self, dest: StrPath, rng: random.Random, torn: bool) -> None:
        """Write what a power loss now could leave on disk into ``dest`` (created)."""
        d = os.fspath(dest)
        root = self.nodes[self.root]
        assert isinstance(root, _Dir)
        os.makedirs(d)
        self._emit(root, d, rng, torn)

    def _emit(self, node: _Dir, dest: str, rng: random.Random, torn: bool) -> None:
        # in name order: the entries come from listdir, and a seeded image must not
        # depend on the order the disk lists them in
        for name, child in sorted(node.durable.items()):
            p = os.path.join(dest, name)
            if isinstance(child, _Dir):
                os.mkdir(p)
                self._emit(child, p, rng, torn)
                continue
            data = bytearray(child.durable)
            if torn and child.pending:
                k = rng.randint(0, len(child.pending))
                for op in child.pending[:k]:
                    _apply(data, op)
                if k < len(child.pending) and child.pending[k][0] == "w":
                    _o, off, wdata = child.pending[k]
                    cut = rng.randint(0, len(wdata))
                    if cut:
                        _apply(data, ("w", off, wdata[:cut]))
            with open(p, "wb") as f:
                f.write(data)
