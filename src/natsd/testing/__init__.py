"""Testing your application with natsd: a real NATS server with JetStream, in process.

- :class:`ThreadedServer`: a natsd server on its own thread and loop (sync and async test
  suites alike), with time a test moves forward (:meth:`ThreadedServer.advance`) and disk
  faults (``faults=True``: :class:`FaultyDisk`, :meth:`ThreadedServer.power_loss`).
- :class:`TestClock`: the clock and scheduler JetStream runs on (``natsd.Server(clock=,
  scheduler=)`` for a server on the test's own loop).
- :func:`cluster`: servers joined by routes, JetStream clustered.
- The pytest plugin (``natsd.testing.plugin``, registered through the ``pytest11`` entry
  point): fixtures ``natsd_server``, ``natsd_session_server``, ``natsd_factory``,
  ``natsd_client`` and ``natsd_cluster``.
"""

from natsd.testing.clock import TestClock
from natsd.testing.faults import Crash, FaultyDisk
from natsd.testing.threaded import ThreadedCluster, ThreadedServer, cluster

__all__ = ["Crash", "FaultyDisk", "TestClock", "ThreadedCluster", "ThreadedServer", "cluster"]
