"""Free TCP ports for the servers the tests start: the suite's one helper for them.

- :func:`free_port`: a port the kernel picks (bind to port 0), for a server started once;
- :func:`free_ports`: ``n`` distinct ports below Linux's ephemeral range, for servers whose
  ports stay fixed in their configs across restarts;
- :func:`free_port_run`: the first of ``n`` consecutive free ports (``natsd --workers``).

This file sits in ``tests/`` beside the root conftest.py, which puts ``tests/`` on
``sys.path`` (pytest's default ``prepend`` import mode): import it as ``ports``.
"""

from __future__ import annotations

import random
import socket

__all__ = ["free_port", "free_port_run", "free_ports"]

LOCALHOST = "127.0.0.1"


def free_port(host: str = LOCALHOST) -> int:
    """A port free on ``host`` now, chosen by the kernel (from the ephemeral range)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports below Linux's ephemeral range (32768+): they stay fixed in
    the servers' configs across restarts, so the kernel must not hand one out meanwhile as
    the local port of an outgoing route or client connection."""
    out: list[int] = []
    while len(out) < n:
        port = random.randrange(20000, 32000)
        if port in out:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOCALHOST, port))
            except OSError:
                continue
        out.append(port)
    return out


def free_port_run(n: int) -> int:
    """The first of ``n`` consecutive free ports below the ephemeral range (``natsd --workers
    N -m P`` gives worker i the monitor port P + i, so P..P+N must all stay free)."""
    while True:
        first = random.randrange(20000, 32000 - n)
        try:
            socks = []
            for port in range(first, first + n):
                s = socket.socket()
                socks.append(s)
                s.bind((LOCALHOST, port))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
