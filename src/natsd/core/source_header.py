"""The ``Nats-Stream-Source`` header a sourced message carries, read: which source of which
origin stream it came from, at which origin sequence (nats-server's ``streamAndSeq``).

Pure: the sourcing stream reads it to find where each source is (``jetstream/stream``), and
the stores keep, per source, the newest one they hold (``storage/sources_index``)."""

from __future__ import annotations

from typing import Final

from natsd.core.headers import slice_header

__all__ = ["HDR_LINE", "H_STREAM_SOURCE_B", "parse_source_header", "source_of"]

H_STREAM_SOURCE_B: Final = b"Nats-Stream-Source"
HDR_LINE: Final = b"Nats-Stream-Source:"
_MAX_DIGITS: Final = 20  # (a uint64's; a longer number is no sequence)


def _seq(text: str) -> int:
    """The sequence in ``text``, or -1 when it is not a plain number of a uint64's size."""
    return int(text) if text.isdigit() and text.isascii() and len(text) <= _MAX_DIGITS else -1


def parse_source_header(value: bytes) -> tuple[str, str, int, str] | None:
    """(iname, stream, origin seq, origin identity) of a ``Nats-Stream-Source`` value;
    iname is "" for the two-field form of servers before 2.10 and for the legacy form (a
    whole ack reply), the identity "" before 2.15. None when it is neither."""
    text = value.decode(errors="replace").strip()
    if text.startswith("$JS.ACK."):
        toks = text.split(".")
        if len(toks) < 9:
            return None
        stream, seq_text = (toks[2], toks[5]) if len(toks) == 9 else (toks[4], toks[7])
        seq = _seq(seq_text)
        return ("", stream, seq, "") if seq >= 0 else None
    fields = text.split(" ")
    if len(fields) >= 4:
        seq = _seq(fields[1])
        if seq < 0:
            return None
        ident = fields[5] if len(fields) >= 6 else ""
        return f"{fields[0]} {fields[2]} {fields[3]}", fields[0], seq, ident
    if len(fields) == 2:
        seq = _seq(fields[1])
        return ("", fields[0], seq, "") if seq >= 0 else None
    return None


def source_of(hdr: bytes | None) -> tuple[str, str, int, str] | None:
    """``parse_source_header`` of a message's ``Nats-Stream-Source``; None when its headers
    have none (found without parsing them) or it does not parse."""
    if not hdr or HDR_LINE not in hdr:
        return None
    value = slice_header(hdr, H_STREAM_SOURCE_B)
    return parse_source_header(value) if value else None
