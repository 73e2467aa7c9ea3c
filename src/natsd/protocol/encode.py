"""Pure encoders for server-to-client frames. Each returns the bytes to write."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["OK", "PING", "PONG", "encode_err", "encode_hmsg", "encode_info", "encode_msg"]

OK = b"+OK\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"


def encode_info(info: dict[str, Any]) -> bytes:
    # nats-server writes "INFO {...} \r\n" with a trailing space; clients accept both.
    return b"INFO " + orjson.dumps(info) + b" \r\n"


def encode_err(message: str) -> bytes:
    return b"-ERR '" + message.encode() + b"'\r\n"


def encode_msg(subject: bytes, sid: bytes, reply: bytes | None, payload: bytes) -> bytes:
    if reply:
        head = b"MSG %s %s %s %d\r\n" % (subject, sid, reply, len(payload))
    else:
        head = b"MSG %s %s %d\r\n" % (subject, sid, len(payload))
    return head + payload + b"\r\n"


def encode_hmsg(
    subject: bytes, sid: bytes, reply: bytes | None, headers: bytes, payload: bytes
) -> bytes:
    hl = len(headers)
    tl = hl + len(payload)
    if reply:
        head = b"HMSG %s %s %s %d %d\r\n" % (subject, sid, reply, hl, tl)
    else:
        head = b"HMSG %s %s %d %d\r\n" % (subject, sid, hl, tl)
    return head + headers + payload + b"\r\n"
