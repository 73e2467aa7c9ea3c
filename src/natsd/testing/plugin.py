"""natsd's pytest plugin: a real NATS server with JetStream for your tests, in process.

Registered through the ``pytest11`` entry point, so installing natsd is all it takes. Every
server runs on its own thread (:class:`~natsd.testing.ThreadedServer`), which suits
synchronous and asyncio test suites alike, with JetStream on, its store in a temporary
directory and its client port a free one.

Fixtures:

- ``natsd_server``: a server for one test;
- ``natsd_session_server``: one server for the whole session;
- ``natsd_factory``: ``natsd_factory(config=None, **options)`` starts a server with
  ``natsd.Server``'s options or a configuration file's text (stopped after the test);
- ``natsd_cluster``: three servers joined by routes, JetStream clustered (R1 to R3 streams);
- ``natsd_client``: a nats-py client connected to ``natsd_server`` (an async fixture: needs
  pytest-asyncio, as any async nats-py test does).

A server's :meth:`~natsd.testing.ThreadedServer.advance` moves its JetStream time forward;
``natsd_factory(faults=True)`` gives a server whose ``disk`` fails on demand and which can
lose power (:meth:`~natsd.testing.ThreadedServer.power_loss`).

This module imports natsd's server only when a fixture is used: pytest loads the plugin in
every session of an environment where natsd is installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nats.aio.client import Client

    from natsd.testing.threaded import ThreadedCluster, ThreadedServer

__all__ = [
    "natsd_cluster",
    "natsd_factory",
    "natsd_server",
    "natsd_session_server",
]


def _jetstream_server(store: Any) -> ThreadedServer:
    from natsd.testing.threaded import ThreadedServer

    return ThreadedServer(jetstream=True, store_dir=str(store))


@pytest.fixture
def natsd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    """A natsd server with JetStream for this test (``.url``, ``.advance(seconds)``)."""
    with _jetstream_server(tmp_path_factory.mktemp("natsd")) as srv:
        yield srv


@pytest.fixture(scope="session")
def natsd_session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    """One natsd server with JetStream for the whole test session."""
    with _jetstream_server(tmp_path_factory.mktemp("natsd-session")) as srv:
        yield srv


@pytest.fixture
def natsd_factory(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ThreadedServer]]:
    """``make(config=None, **options)``: a started server. Without a config, JetStream is
    on with a temporary store unless the options say otherwise."""
    from natsd.testing.threaded import ThreadedServer

    started: list[ThreadedServer] = []

    def make(config: str | None = None, **options: Any) -> ThreadedServer:
        if config is None:
            options.setdefault("jetstream", True)
            if options["jetstream"]:
                options.setdefault("store_dir", str(tmp_path_factory.mktemp("natsd")))
        srv = ThreadedServer(config, **options)
        srv.start()
        started.append(srv)
        return srv

    yield make
    for srv in reversed(started):
        srv.stop()


@pytest.fixture
def natsd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    """Three natsd servers joined by routes, JetStream clustered, ready (a meta leader)."""
    from natsd.testing.threaded import ThreadedCluster

    with ThreadedCluster(3, tmp_path_factory.mktemp("natsd-cluster")) as c:
        yield c


try:
    import pytest_asyncio
except ImportError:  # an async fixture needs it; the others do not
    pass
else:

    @pytest_asyncio.fixture
    async def natsd_client(natsd_server: ThreadedServer) -> AsyncIterator[Client]:
        """A nats-py client connected to ``natsd_server``."""
        import nats

        nc = await nats.connect(natsd_server.url)
        try:
            yield nc
        finally:
            await nc.close()

    __all__ += ["natsd_client"]
