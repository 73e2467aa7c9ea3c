"""Pure encoders for nats-server's route protocol: each returns the bytes nats-server writes.

The layouts are those of nats-server's ``route.go`` (``ConProto``, ``InfoProto``,
``addRouteSubOrUnsubProtoToBuf``) and ``client.go`` (``msgHeaderForRouteOrLeaf``) for a route
that is not pooled and not pinned to an account, so the account is always in the protocol.
``route_parser`` is the other direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

__all__ = [
    "ROUTE_OK",
    "ROUTE_PING",
    "ROUTE_PONG",
    "encode_route_connect",
    "encode_route_err",
    "encode_route_hmsg",
    "encode_route_info",
    "encode_route_rmsg",
    "encode_rs_minus",
    "encode_rs_plus",
]

ROUTE_PING: Final = b"PING\r\n"
ROUTE_PONG: Final = b"PONG\r\n"
ROUTE_OK: Final = b"+OK\r\n"


def encode_route_info(info: dict[str, Any]) -> bytes:
    # generateInfoJSON joins "INFO", the JSON and CRLF with spaces: a space before CRLF.
    return b"INFO " + orjson.dumps(info) + b" \r\n"


def encode_route_connect(connect: dict[str, Any]) -> bytes:
    # ConProto = "CONNECT %s\r\n": no space before CRLF.
    return b"CONNECT " + orjson.dumps(connect) + b"\r\n"


def encode_route_err(message: str) -> bytes:
    return b"-ERR '" + message.encode() + b"'\r\n"


def encode_rs_plus(
    account: bytes, subject: bytes, queue: bytes | None = None, weight: int = 1
) -> bytes:
    if queue:
        return b"RS+ %s %s %s %d\r\n" % (account, subject, queue, weight)
    return b"RS+ " + account + b" " + subject + b"\r\n"


def encode_rs_minus(account: bytes, subject: bytes, queue: bytes | None = None) -> bytes:
    if queue:
        return b"RS- " + account + b" " + subject + b" " + queue + b"\r\n"
    return b"RS- " + account + b" " + subject + b"\r\n"


def _routing(reply: bytes | None, queues: Sequence[bytes] | None) -> bytes:
    """What goes between the subject and the size: ``+ <reply> <q>... ``, ``| <q>... ``,
    ``<reply> `` or nothing (nats-server ends every queue name with a space)."""
    if queues:
        qs = b" ".join(queues) + b" "
        if reply:
            return b"+ " + reply + b" " + qs
        return b"| " + qs
    if reply:
        return reply + b" "
    return b""


def encode_route_rmsg(
    account: bytes,
    subject: bytes,
    reply: bytes | None,
    queues: Sequence[bytes] | None,
    payload: bytes,
) -> bytes:
    return (
        b"RMSG %s %s %s%d\r\n" % (account, subject, _routing(reply, queues), len(payload))
        + payload
        + b"\r\n"
    )


def encode_route_hmsg(
    account: bytes,
    subject: bytes,
    reply: bytes | None,
    queues: Sequence[bytes] | None,
    headers: bytes,
    payload: bytes,
) -> bytes:
    hl = len(headers)
    return (
        b"HMSG %s %s %s%d %d\r\n"
        % (account, subject, _routing(reply, queues), hl, hl + len(payload))
        + headers
        + payload
        + b"\r\n"
    )
