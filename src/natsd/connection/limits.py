"""Per-connection limits, with nats-server's defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConnectionLimits"]


@dataclass(frozen=True)
class ConnectionLimits:
    max_payload: int = 1024 * 1024
    max_control_line: int = 4096
    # nats-server MAX_PENDING_SIZE: outbound bytes queued for one client before it is cut off.
    max_pending: int = 64 * 1024 * 1024
    max_subs: int = 0
    ping_interval: float = 120.0
    ping_max: int = 2
    auth_timeout: float = 2.0
    write_deadline: float = 10.0
