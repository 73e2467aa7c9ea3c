"""Go's ``strconv.Quote`` (what ``%q`` prints), for the places natsd reproduces Go's text
byte for byte: configuration and route errors worded as nats-server's, and the Raft
engine's log lines and descriptions (etcd's)."""

from __future__ import annotations

__all__ = ["go_quote"]

_HEX = "0123456789abcdef"
# Bytes that Go's strconv.Quote copies through unchanged: printable ASCII but `"` and `\`.
_PLAIN = bytes(b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C))
_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x0B: "\\v",
    0x22: '\\"',
    0x5C: "\\\\",
}


def _decode_rune(b: bytes, i: int, n: int) -> tuple[int, int]:
    """Go's utf8.DecodeRune at b[i:]: (rune, width), or (-1, 1) where the bytes are not valid
    UTF-8 (overlong forms, surrogates and values past U+10FFFF included)."""
    x = b[i]
    if 0xC2 <= x <= 0xDF:
        need, lo, hi, r = 1, 0x80, 0xBF, x & 0x1F
    elif 0xE0 <= x <= 0xEF:
        need, r = 2, x & 0x0F
        lo, hi = (0xA0, 0xBF) if x == 0xE0 else (0x80, 0x9F) if x == 0xED else (0x80, 0xBF)
    elif 0xF0 <= x <= 0xF4:
        need, r = 3, x & 0x07
        lo, hi = (0x90, 0xBF) if x == 0xF0 else (0x80, 0x8F) if x == 0xF4 else (0x80, 0xBF)
    else:
        return -1, 1
    if i + need >= n:
        return -1, 1
    c = b[i + 1]
    if c < lo or c > hi:
        return -1, 1
    r = (r << 6) | (c & 0x3F)
    for k in range(2, need + 1):
        c = b[i + k]
        if c < 0x80 or c > 0xBF:
            return -1, 1
        r = (r << 6) | (c & 0x3F)
    return r, need + 1


def go_quote(data: bytes | str) -> str:
    """Go's ``strconv.Quote`` (what ``%q`` prints for a string or []byte): a double-quoted
    literal with \\a \\b \\f \\n \\r \\t \\v \\\\ \\", \\xNN for bytes that are not valid UTF-8
    and for other control bytes, \\uNNNN / \\UNNNNNNNN for runes that are not printable
    (unicode.IsPrint, which is Python's str.isprintable: letters, marks, numbers,
    punctuation, symbols and the ASCII space; Python's Unicode tables may be a version
    older than Go's, which only matters for characters assigned since)."""
    b = data.encode() if isinstance(data, str) else bytes(data)
    if not b.translate(None, _PLAIN):
        return '"' + b.decode("ascii") + '"'
    out: list[str] = ['"']
    i = 0
    n = len(b)
    while i < n:
        x = b[i]
        if x < 0x80:
            i += 1
            if 0x20 <= x < 0x7F and x != 0x22 and x != 0x5C:
                out.append(chr(x))
            elif x in _ESCAPES:
                out.append(_ESCAPES[x])
            else:
                out.append("\\x" + _HEX[x >> 4] + _HEX[x & 0xF])
            continue
        r, w = _decode_rune(b, i, n)
        if r < 0:
            out.append("\\x" + _HEX[x >> 4] + _HEX[x & 0xF])
            i += 1
            continue
        i += w
        c = chr(r)
        if c.isprintable():
            out.append(c)
        elif r < 0x10000:
            out.append(f"\\u{r:04x}")
        else:
            out.append(f"\\U{r:08x}")
    out.append('"')
    return "".join(out)
