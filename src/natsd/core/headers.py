"""The ``NATS/1.0`` header block: parse and encode.

A block is ``NATS/1.0[ status[ description]]\\r\\n`` followed by ``Key: value\\r\\n`` lines and
a blank line. Keys keep their case (nats-server and the clients are case-sensitive on read).
"""

from __future__ import annotations

__all__ = [
    "HeaderError",
    "encode_headers",
    "parse_headers",
    "replace_header",
    "set_header",
    "slice_header",
    "status_headers",
]

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


# Header lookups and edits on the raw block, as nats-server makes them (client.go).


def _key_index(hdr: bytes, key: bytes) -> int:
    """nats-server's ``getHeaderKeyIndex``: where the first ``key:`` that starts a line
    begins, or -1."""
    n = len(hdr)
    offset = 0
    while True:
        i = hdr.find(key, offset)
        if i < 2:
            return -1
        if i >= n - 1 or hdr[i - 2 : i] != b"\r\n":
            offset = i + len(key)
            continue
        if i + len(key) >= n:
            return -1
        if hdr[i + len(key)] != 58:  # ':'
            offset = i + len(key)
            continue
        return i


def slice_header(hdr: bytes, key: bytes) -> bytes | None:
    """nats-server's ``sliceHeader``: the value of the first ``key:`` line of ``hdr``,
    leading spaces skipped, up to the CRLF; None when absent."""
    i = _key_index(hdr, key)
    if i < 0:
        return None
    i += len(key) + 1
    n = len(hdr)
    while i < n and hdr[i] == 32:
        i += 1
    end = hdr.find(b"\r\n", i)
    return hdr[i : n if end < 0 else end]


def replace_header(hdr: bytes, key: str, value: bytes) -> bytes:
    """nats-server's ``setHeader``: the value of the first ``key:`` line replaced in place
    (one space after the colon kept), or ``key: value`` added before the blank line that
    ends the block."""
    k = key.encode()
    i = _key_index(hdr, k)
    if i >= 0:
        start = i + len(k) + 1
        if start < len(hdr) and hdr[start] == 32:
            start += 1
        end = hdr.find(b"\r", start)
        if end < 0:
            return hdr  # malformed: as nats-server, left as it is
        return hdr[:start] + value + hdr[end:]
    base = hdr[:-2] if len(hdr) > 2 else b"NATS/1.0\r\n"
    return base + k + b": " + value + b"\r\n\r\n"


def set_header(hdr: bytes, key: str, value: bytes) -> bytes:
    """nats-server's ``removeHeaderIfPresent`` then ``genHeader`` (as its client's
    ``setHeader``): every ``key:`` line (the key as written) dropped, ``key: value``
    appended as the last header."""
    k = key.encode() + b":"
    lines = hdr.split(b"\r\n")
    kept = [ln for ln in lines[1:] if ln and not ln.startswith(k)]
    return b"\r\n".join([lines[0] or b"NATS/1.0", *kept, k + b" " + value]) + b"\r\n\r\n"
