"""Disk faults a test can cause: a full disk, failing fsyncs, a power cut.

``FaultyDisk`` is the power-loss file layer of natsd's own reliability suite
(:class:`~natsd.testing.faultfs.FaultFS`: every operation on the real disk, and beside it a
model of what a power cut would leave) with the switches a user's test needs.
``ThreadedServer(faults=True)`` puts JetStream's files on one (``srv.disk``).
"""

from __future__ import annotations

import errno

from natsd.testing.faultfs import Crash, FaultFS

__all__ = ["Crash", "FaultyDisk"]


class FaultyDisk(FaultFS):
    """JetStream's file layer with faults to switch on and off."""

    def fill(self) -> None:
        """The disk is full: writes and syncs fail with ENOSPC until :meth:`heal`. The
        server refuses publishes with nats-server's storage error and loses nothing it
        acknowledged."""
        self.fail_ops = frozenset({"write", "sync"})
        self.fail_errno = errno.ENOSPC

    def fail_fsync(self, err: int = errno.EIO) -> None:
        """Every fsync fails (EIO by default) until :meth:`heal`; writes still work. As on
        a real disk, after a failed fsync the kernel may have dropped the unsynced pages, so
        the stream refuses further writes until it is reopened (``ThreadedServer.restart``)
        even once healed; what it acknowledged is never lost."""
        self.fail_ops = frozenset({"sync"})
        self.fail_errno = err

    def heal(self) -> None:
        """Space is back, fsyncs work again."""
        self.fail_errno = None

    def cut_power(self) -> None:
        """From now on every operation raises :class:`Crash`: nothing more reaches the
        disk (``ThreadedServer.power_loss`` then restarts on what was durable)."""
        with self.lock:
            self.crashed = True
