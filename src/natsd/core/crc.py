"""crc32 of a stored record: zlib's polynomial and values, computed by zlib-ng for long
buffers.

Every record of the file store and of the node WAL ends with a crc32 over it; it is
computed on every write and checked on every read, and a store's open checks every record
it holds, so for a large stream this is most of the restart time. zlib's crc32 runs at
about 1 GB/s on this machine, zlib-ng's (SIMD, carry-less multiply) at 7-10 GB/s, but each
call costs about 0.2 us more, so buffers shorter than ``LONG`` keep zlib's. The values are
the same (the formats on disk do not change). Without the ``zlib-ng`` package (no wheel
for the platform) zlib's does it all.
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["LONG", "crc32"]

try:
    from zlib_ng.zlib_ng import crc32 as _ng_crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; kept for odd platforms
    _ng_crc32 = zlib.crc32

_zlib_crc32: Final = zlib.crc32
# From this many bytes on zlib-ng's crc32 is the faster (measured: 200 B 0.20 us with zlib,
# 0.43 us with zlib-ng; 8 KB 8.2 us and 0.8 us).
LONG: Final = 512


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """``zlib.crc32(data, value)``, by zlib-ng when ``data`` is long."""
    if len(data) >= LONG:
        return _ng_crc32(data, value)
    return _zlib_crc32(data, value)
