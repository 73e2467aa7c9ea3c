"""The socket-facing steps every connection kind (client, route) takes the same way:
setting up an accepted or dialed socket, ending a transport, and reading its buffer size.

The connection classes own their state and wording; this module owns only what they do to
an asyncio transport, so a fix here (a socket option, the close grace) reaches both.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

from natsd.core.scheduler import Scheduler

__all__ = ["CLOSE_GRACE", "end_transport", "open_transport", "write_buffered"]

# How long a closing connection may take to drain what is queued before it is aborted.
CLOSE_GRACE: Final = 2.0


def open_transport(transport: asyncio.Transport) -> tuple[str, int]:
    """Turn off Nagle (frames are coalesced per loop turn already) and return the peer's
    address, ``("", 0)`` when the transport has none."""
    ip = ""
    port = 0
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        ip, port = str(peer[0]), int(peer[1])
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ip, port


def end_transport(t: asyncio.Transport, flush: bool, scheduler: Scheduler) -> None:
    """Close ``t`` after what it holds is written (``flush``), else drop it at once."""
    if flush and not t.is_closing():
        t.close()
        # A peer that never reads would hold the socket open forever; cut it off.
        scheduler.call_later(CLOSE_GRACE, _abort, t)
    else:
        t.abort()


def write_buffered(t: asyncio.Transport | None) -> int:
    """Bytes the transport holds unwritten (0 once it is closing or gone)."""
    return t.get_write_buffer_size() if t is not None and not t.is_closing() else 0


def _abort(t: asyncio.Transport) -> None:
    with contextlib.suppress(Exception):
        t.abort()
