"""The wire format between two nodes' GroupHosts: peer frames, and the send times that
appends, heartbeats and their answers carry.

A frame to a peer is ``[u8 version]`` then, per message, ``[u16 group length][group]
[u32 length][message]`` (``raft.codec`` for the message); a turn sends one frame per peer
holding every group's messages for it.

The lease's pairing of answers with requests (``group.has_lease``): a leader's appends and
heartbeats carry SENT and its send time (little-endian signed nanoseconds on the host's
clock) as their context; a follower's answers to that leader, in that term, carry back the
latest such time it had received when it answered. A leader credits an answer with the time
it carries, never with the time it arrived: answers read after a pause (SIGSTOP) speak of
requests sent before it. (etcd's followers echo a heartbeat's context anyway; no ReadIndex
runs here, whose heartbeats carry a context of their own and are left as they are.)

Pure: bytes in, bytes out. A frame from a peer is as untrusted as a client's line.
"""

from __future__ import annotations

import struct
from typing import Final

from natsd.raft.codec import CodecError, decode_message, encode_message
from natsd.raft.types import Message

__all__ = [
    "FRAME_TARGET",
    "FRAME_VERSION",
    "SENT",
    "FrameError",
    "decode_frame",
    "frame_part",
    "sent_at",
    "sent_context",
]

FRAME_VERSION: Final = 1
# A peer frame closes once it holds this much: routes take payloads up to 64 MB, and a turn
# in which many groups catch a replica up (up to max_size_per_msg each) must not reach that.
# A single message larger than this still goes, alone.
FRAME_TARGET: Final = 4 << 20
SENT: Final = b"sent"
_SENT_AT: Final = struct.Struct("<q")
_SENT_LEN: Final = len(SENT) + _SENT_AT.size
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")


class FrameError(ValueError):
    """A peer frame that does not decode (the peer is as untrusted as a client)."""


def sent_context(at_ns: int) -> bytes:
    """The context that stamps a request (or an answer) with a send time."""
    return SENT + _SENT_AT.pack(at_ns)


def sent_at(context: bytes) -> int:
    """The send time (ns) a SENT context carries; -1 for any other context."""
    if len(context) != _SENT_LEN or not context.startswith(SENT):
        return -1
    (at,) = _SENT_AT.unpack_from(context, len(SENT))
    return int(at) if at >= 0 else -1


def frame_part(name: bytes, m: Message) -> bytes:
    body = encode_message(m)
    return b"".join((_U16.pack(len(name)), name, _U32.pack(len(body)), body))


def decode_frame(frame: bytes) -> list[tuple[bytes, Message]]:
    """Every (group, message) of a peer frame; FrameError if anything does not check out."""
    if not frame or frame[0] != FRAME_VERSION:
        raise FrameError("unknown raft frame version")
    out: list[tuple[bytes, Message]] = []
    pos, end = 1, len(frame)
    try:
        while pos < end:
            (glen,) = _U16.unpack_from(frame, pos)
            pos += 2
            name = frame[pos : pos + glen]
            pos += glen
            (mlen,) = _U32.unpack_from(frame, pos)
            pos += 4
            if not name or pos + mlen > end:
                raise FrameError("truncated raft frame")
            out.append((bytes(name), decode_message(frame[pos : pos + mlen])))
            pos += mlen
    except (struct.error, CodecError) as e:
        raise FrameError(f"bad raft frame: {e}") from None
    return out
