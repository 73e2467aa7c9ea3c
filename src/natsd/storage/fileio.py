"""The file layer: every system call the file store and the disk catalog make on disk.

``FileStore`` (``filestore_io``, ``filestore_recovery``) and ``DiskCatalog`` never call
``os`` for storage I/O themselves; they call the ``FileIO`` they were given (``DEFAULT_IO``
unless a test injects another). The default implementation *is* ``os``: the primitives are
the ``os`` functions themselves, bound as static methods, so a call costs one attribute
lookup and the C call (no Python frame), and behaviour is unchanged.

Why: a fault-injecting subclass (``tests/reliability/faultfs.py``) sees every write, fsync,
rename and unlink, tracks what is durable, and can produce the disk a power loss would
leave, or fail one operation with ENOSPC/EIO. Override any method in a subclass; keep the
signatures (paths are ``str`` or path-like, descriptors are ints).

Composite helpers (``fsync_dir``, ``read_file``, ``write_file_atomic``, ``makedirs``,
``rmtree``) are built from the primitives here, so a subclass that overrides only the
primitives still sees every effect on disk.
"""

from __future__ import annotations

import errno
import os
from typing import Union

__all__ = ["DEFAULT_IO", "O_CLOEXEC", "FileIO", "StrPath"]

StrPath = Union[str, "os.PathLike[str]"]
O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)
_fdatasync = getattr(os, "fdatasync", os.fsync)


class FileIO:
    """Storage system calls. The default forwards to ``os``; see the module docstring."""

    # -------------------------------------------------------------- primitives (os itself)
    open = staticmethod(os.open)
    close = staticmethod(os.close)
    write = staticmethod(os.write)
    pwrite = staticmethod(os.pwrite)
    pread = staticmethod(os.pread)
    lseek = staticmethod(os.lseek)
    ftruncate = staticmethod(os.ftruncate)
    fsync = staticmethod(os.fsync)
    fdatasync = staticmethod(_fdatasync)
    dup = staticmethod(os.dup)
    replace = staticmethod(os.replace)
    unlink = staticmethod(os.unlink)
    rmdir = staticmethod(os.rmdir)
    mkdir = staticmethod(os.mkdir)
    listdir = staticmethod(os.listdir)

    # -------------------------------------------------------------- queries
    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def isdir(self, path: StrPath) -> bool:
        return os.path.isdir(path)

    def exists(self, path: StrPath) -> bool:
        return os.path.exists(path)

    # -------------------------------------------------------------- composites
    def fsync_dir(self, path: StrPath) -> None:
        """fsync a directory, making the names created, renamed or removed in it durable."""
        fd = self.open(path, os.O_RDONLY | O_CLOEXEC)
        try:
            self.fsync(fd)
        finally:
            self.close(fd)

    def makedirs(self, path: StrPath) -> bool:
        """``mkdir -p``; True when ``path`` was created. The caller fsyncs the parents."""
        p = os.fspath(path)
        if self.isdir(p):
            return False
        parent = os.path.dirname(p.rstrip(os.sep))
        if parent and parent != p:
            self.makedirs(parent)
        try:
            self.mkdir(p, 0o755)
        except FileExistsError:
            if not self.isdir(p):
                raise
            return False
        return True

    def makedirs_durable(self, path: StrPath) -> bool:
        """``mkdir -p`` that survives a power loss: every directory it creates is made
        durable in its parent (a directory's new entry is on disk only once the directory
        is fsynced). True when ``path`` was created."""
        made: list[str] = []
        p = os.fspath(path).rstrip(os.sep) or os.sep
        while not self.isdir(p):
            made.append(p)
            parent = os.path.dirname(p)
            if not parent or parent == p:
                break
            p = parent
        if not made or not self.makedirs(path):
            return False
        for d in made:
            self.fsync_dir(os.path.dirname(d) or ".")
        return True

    def read_file(self, path: StrPath) -> bytes:
        fd = self.open(path, os.O_RDONLY | O_CLOEXEC)
        try:
            size = self.fsize(fd)
            parts: list[bytes] = []
            off = 0
            while True:
                chunk = self.pread(fd, max(size - off, 65536), off)
                if not chunk:
                    break
                parts.append(chunk)
                off += len(chunk)
            return b"".join(parts)
        finally:
            self.close(fd)

    def write_all(self, fd: int, data: bytes) -> None:
        total = len(data)
        if not total:
            return
        done = self.write(fd, data)  # (the whole of it, almost always: no view needed)
        if done == total:
            return
        if done <= 0:
            raise OSError(errno.EIO, "write returned 0")
        # An offset loop, not `while view:`: mypyc treats a memoryview as always true.
        with memoryview(data) as view:
            while done < total:
                n = self.write(fd, view[done:])
                if n <= 0:
                    raise OSError(errno.EIO, "write returned 0")
                done += n

    def write_file_atomic(self, path: StrPath, data: bytes, *, sync_dir: bool = True) -> None:
        """Replace ``path`` atomically: write ``path.tmp``, fsync it, rename it over ``path``,
        and (``sync_dir``) fsync the directory so the new name is durable."""
        p = os.fspath(path)
        tmp = p + ".tmp"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | O_CLOEXEC, 0o644)
        try:
            self.write_all(fd, data)
            self.fsync(fd)
        finally:
            self.close(fd)
        self.replace(tmp, p)
        if sync_dir:
            self.fsync_dir(os.path.dirname(p) or ".")

    def rmtree(self, path: StrPath) -> None:
        """Remove a directory tree (best effort, like ``shutil.rmtree(ignore_errors=True)``)."""
        p = os.fspath(path)
        try:
            names = self.listdir(p)
        except OSError:
            return
        for name in names:
            child = os.path.join(p, name)
            if self.isdir(child) and not os.path.islink(child):
                self.rmtree(child)
            else:
                try:
                    self.unlink(child)
                except OSError:
                    pass
        try:
            self.rmdir(p)
        except OSError:
            pass


DEFAULT_IO = FileIO()
