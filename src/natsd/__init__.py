"""natsd: a NATS server with JetStream, written in Python.

``Server`` and ``ServerOptions`` are imported on first use (PEP 562): this file runs before
any submodule, and ``natsd -h``/``-t``/``--signal`` or a unit test of ``natsd.core`` must not
pay for loading the whole server (asyncio, aiohttp, the stores, ~100 ms).

The client products in this distribution are separate top-level packages that never import
the server and that the server never imports: ``natscli`` (the ``nats`` command line) and
``natsd_spark`` (the Spark connector).
"""

from typing import TYPE_CHECKING, Any

from natsd import hotpath

# Before any other natsd module loads: compiled or pure (NATSD_PURE=1, or a stale build).
hotpath.choose()

from natsd.version import __version__  # noqa: E402

if TYPE_CHECKING:
    from natsd.config.options import ServerOptions
    from natsd.server import Server

__all__ = ["Server", "ServerOptions", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Server":
        from natsd.server import Server

        return Server
    if name == "ServerOptions":
        from natsd.config.options import ServerOptions

        return ServerOptions
    raise AttributeError(f"module 'natsd' has no attribute {name!r}")
