"""Accounts: separate subject spaces. Every connection belongs to exactly one.

Each account owns its own Sublist, so subjects never cross accounts unless a later
export/import wires them together. JetStream namespaces and limits hang off the account
(``jetstream_limits`` is carried here from config for the engine to read).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from natsd.router.sublist import Sublist
from natsd.router.subscription import Sink, Subscription

__all__ = ["GLOBAL_ACCOUNT", "SYSTEM_ACCOUNT", "Account", "Forward"]

GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"

# (subject, reply, tail, size, hlen, psubs, qsubs, publisher) -> local deliveries, or -1 when
# nobody in the cluster has interest. Set by the cluster mesh while routes are up.
Forward = Callable[
    [
        bytes,
        bytes | None,
        bytes,
        int,
        int,
        list[Subscription],
        list[list[Subscription]],
        Sink | None,
    ],
    int,
]


@dataclass(eq=False)
class Account:
    name: str
    sublist: Sublist[Subscription] = field(default_factory=Sublist)
    clients: dict[int, Sink] = field(default_factory=dict)
    jetstream_limits: dict[str, Any] | None = None
    # None unless a route is up: the publish path's whole "has routes" check.
    forward: Forward | None = None
    msgs_in: int = 0
    bytes_in: int = 0
    msgs_out: int = 0
    bytes_out: int = 0

    @property
    def num_subscriptions(self) -> int:
        return len(self.sublist)
