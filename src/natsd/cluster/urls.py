"""When a server runs a cluster, and the client URLs it advertises to clients and peers."""

from __future__ import annotations

import contextlib
import socket

from natsd.config.options import ClusterOptions

__all__ = ["cluster_configured", "own_client_urls"]


def cluster_configured(c: ClusterOptions) -> bool:
    """A cluster block, a cluster flag, or (embedded) a cluster port or routes."""
    return bool(c.origin or c.port or c.routes)


def own_client_urls(host: str, port: int) -> list[str]:
    """What we advertise to clients as our own URL(s): nats-server lists the non-loopback
    addresses of the machine when the client listener is on any address."""
    if host not in ("", "0.0.0.0", "::"):
        return [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    ips: list[str] = []
    with contextlib.suppress(OSError):
        for *_, addr in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            ip = str(addr[0])
            if not ip.startswith("127.") and ip not in ips:
                ips.append(ip)
    return [f"{ip}:{port}" for ip in ips] or [f"127.0.0.1:{port}"]
