"""``Nats-Required-Api-Level`` (ADR-44): a request may name the JetStream API level it needs.

nats-server (``errorOnRequiredApiLevel``) refuses a request whose header asks for more than
its level, or whose value is not an integer (``strconv.Atoi`` fails: signs are allowed, spaces
after the value, underscores and out-of-range numbers are not). It reads the header with
``sliceHeader``: the first ``Nats-Required-Api-Level:`` line whose name matches exactly,
spaces after the colon skipped; an empty value counts as no header. The refusal is
``JSRequiredApiLevelErr`` (412 / 10185) on the API and a ``412 Required Api Level`` status on
direct gets and pull requests.

Which requests check it, and where, is the callers' (``api.py``): every ``$JS.API`` handler
first thing, except the requests only a cluster answers, which a standalone server refuses
with 10010 before it looks at the header.
"""

from __future__ import annotations

import re
from typing import Final

from natsd.version import API_LEVEL

__all__ = ["REQUIRED_API_LEVEL", "REQUIRED_API_LEVEL_STATUS", "level_refused", "slice_header"]

REQUIRED_API_LEVEL: Final = b"Nats-Required-Api-Level"
REQUIRED_API_LEVEL_STATUS: Final = b"NATS/1.0 412 Required Api Level\r\n\r\n"
_ATOI: Final = re.compile(rb"[+-]?[0-9]+")
_INT_MAX: Final = 2**63 - 1
_INT_MIN: Final = -(2**63)


def slice_header(hdr: bytes, key: bytes) -> bytes | None:
    """Go ``sliceHeader``: the value of the first ``key`` line (after the status line, the
    name matched exactly), leading spaces skipped, up to the CRLF; ``None`` if absent."""
    offset = 0
    n = len(hdr)
    while True:
        i = hdr.find(key, offset)
        if i < 2:
            return None
        end = i + len(key)
        if hdr[i - 2 : i] != b"\r\n" or end >= n or hdr[end : end + 1] != b":":
            offset = end
            continue
        start = end + 1
        while start < n and hdr[start] == 0x20:
            start += 1
        stop = hdr.find(b"\r\n", start)
        return hdr[start : n if stop < 0 else stop]


def level_refused(hdr: bytes | None) -> bool:
    """Whether nats-server would refuse a request with this header block at natsd's level."""
    if not hdr or REQUIRED_API_LEVEL not in hdr:
        return False
    value = slice_header(hdr, REQUIRED_API_LEVEL)
    if not value:
        return False
    if _ATOI.fullmatch(value) is None:
        return True
    level = int(value)
    return level > _INT_MAX or level < _INT_MIN or level > API_LEVEL
