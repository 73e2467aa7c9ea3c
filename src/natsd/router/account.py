"""Accounts: separate subject spaces. Every connection belongs to exactly one.

Each account owns its own Sublist, so subjects never cross accounts unless a later
export/import wires them together. JetStream namespaces and limits hang off the account
(``jetstream_limits`` is carried here from config for the engine to read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription

__all__ = ["GLOBAL_ACCOUNT", "SYSTEM_ACCOUNT", "Account"]

GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"


@dataclass(eq=False)
class Account:
    name: str
    sublist: Sublist[Subscription] = field(default_factory=Sublist)
    clients: dict[int, Sink] = field(default_factory=dict)
    jetstream_limits: dict[str, Any] | None = None
    msgs_in: int = 0
    bytes_in: int = 0
    msgs_out: int = 0
    bytes_out: int = 0
    # its clients closed as slow consumers (nats-server's per-account figure)
    slow_consumers: int = 0

    @property
    def num_subscriptions(self) -> int:
        return len(self.sublist)
