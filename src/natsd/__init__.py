"""natsd: a NATS server with JetStream, written in Python."""

from natsd.options import ServerOptions
from natsd.server import Server
from natsd.version import __version__

__all__ = ["Server", "ServerOptions", "__version__"]
