"""Sans-I/O NATS client protocol: a parser (bytes in, events out) and pure encoders."""

from natsd.protocol.parser import (
    OP_CONNECT,
    OP_ERR,
    OP_HPUB,
    OP_PING,
    OP_PONG,
    OP_PUB,
    OP_SUB,
    OP_UNSUB,
    Event,
    Parser,
)

__all__ = [
    "OP_CONNECT",
    "OP_ERR",
    "OP_HPUB",
    "OP_PING",
    "OP_PONG",
    "OP_PUB",
    "OP_SUB",
    "OP_UNSUB",
    "Event",
    "Parser",
]
