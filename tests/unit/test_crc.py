"""``core.crc.crc32`` gives zlib's values, whichever implementation computes them: records
written before it (zlib's) must check, and a single flipped bit is still corrected from
the crc32 polynomial (``filestore_format._correct_single_bit``)."""

from __future__ import annotations

import os
import zlib

import pytest

from natsd.core import crc


@pytest.mark.parametrize("n", [0, 1, 31, crc.LONG - 1, crc.LONG, crc.LONG + 1, 8192, 1 << 20])
def test_crc32_is_zlibs(n: int) -> None:
    data = os.urandom(n)
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(bytearray(data)) == zlib.crc32(data)
    assert crc.crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
    # chained: a crc carried over from a first part
    head = zlib.crc32(b"head")
    assert crc.crc32(data, head) == zlib.crc32(b"head" + data)


def test_long_records_use_zlib_ng() -> None:
    """zlib-ng is a dependency: without it long records fall back to zlib's slower crc32."""
    from zlib_ng import zlib_ng

    assert crc._ng_crc32 is zlib_ng.crc32
