"""The ``NATS/1.0`` header block: parse and encode.

A block is ``NATS/1.0[ status[ description]]\\r\\n`` followed by ``Key: value\\r\\n`` lines and
a blank line. Keys keep their case (nats-server and the clients are case-sensitive on read).
"""

from __future__ import annotations

__all__ = ["HeaderError", "encode_headers", "parse_headers", "status_headers"]

_PREFIX = b"NATS/1.0"


class HeaderError(ValueError):
    """The peer sent a header block that is not ``NATS/1.0``."""


def parse_headers(block: bytes) -> tuple[int | None, str, dict[str, list[str]]]:
    """Return (status, description, headers) of a header block."""
    if not block.startswith(_PREFIX):
        raise HeaderError("header block must start with NATS/1.0")
    lines = block.split(b"\r\n")
    first = lines[0][len(_PREFIX) :].strip()
    status: int | None = None
    desc = ""
    if first:
        code, _, rest = first.partition(b" ")
        if not code.isdigit():
            raise HeaderError("bad status in header block")
        status = int(code)
        desc = rest.decode("utf-8", "replace").strip()
    out: dict[str, list[str]] = {}
    for raw in lines[1:]:
        if not raw:
            continue
        key, sep, value = raw.partition(b":")
        if not sep or not key.strip():
            raise HeaderError("malformed header line")
        out.setdefault(key.decode("utf-8", "replace").strip(), []).append(
            value.decode("utf-8", "replace").strip()
        )
    return status, desc, out


def encode_headers(
    headers: dict[str, list[str]] | None = None,
    status: int | None = None,
    description: str = "",
) -> bytes:
    parts = [_PREFIX]
    if status is not None:
        parts.append(b" %d" % status)
        if description:
            parts.append(b" " + description.encode())
    parts.append(b"\r\n")
    if headers:
        for k, vals in headers.items():
            for v in vals:
                parts.append(f"{k}: {v}\r\n".encode())
    parts.append(b"\r\n")
    return b"".join(parts)


def status_headers(status: int, description: str = "", **extra: str) -> bytes:
    hdrs = {k.replace("_", "-"): [v] for k, v in extra.items()}
    return encode_headers(hdrs, status, description)
