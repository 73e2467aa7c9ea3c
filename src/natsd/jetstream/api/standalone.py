"""``$JS.API`` requests a standalone natsd can only refuse, answered as nats-server answers.

* Cluster requests. A standalone nats-server answers stream and consumer leader step-down,
  stream peer remove / evacuate and stream cancel-move with ``JSClusterRequiredErr``
  (503 / 10010), before it looks at ``Nats-Required-Api-Level``. It does not answer
  ``META.LEADER.STEPDOWN``, ``META.RESCUE``, ``SERVER.REMOVE``, ``SERVER.EVACUATE`` or
  ``ACCOUNT.*`` at all (those are system-account requests it only serves in a cluster, and
  ``apiDispatch`` drops them for client accounts), so neither does natsd: they are not in
  the route table.
"""

from __future__ import annotations

from typing import Any

from natsd.jetstream.engine import JsAccount
from natsd.jetstream.wire import errors as E

__all__ = ["cluster_required"]


def cluster_required(ja: JsAccount, args: list[str], data: bytes) -> dict[str, Any]:
    """Every request only a JetStream cluster can serve."""
    raise E.JSClusterRequiredErr()
