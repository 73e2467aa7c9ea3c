"""natsd: a NATS server with JetStream, written in Python.

``Server`` and ``ServerOptions`` are imported on first use: the ``nats`` command line lives
in this package too (``natsd.natscli``) and must not pay for loading the whole server.
"""

from typing import TYPE_CHECKING, Any

from natsd.version import __version__

if TYPE_CHECKING:
    from natsd.options import ServerOptions
    from natsd.server import Server

__all__ = ["Server", "ServerOptions", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Server":
        from natsd.server import Server

        return Server
    if name == "ServerOptions":
        from natsd.options import ServerOptions

        return ServerOptions
    raise AttributeError(f"module 'natsd' has no attribute {name!r}")
