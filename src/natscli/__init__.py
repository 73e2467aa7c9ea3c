"""``nats``: a command line for NATS and JetStream, compatible with the Go ``nats`` CLI.

A client only: it talks to a server (natsd or nats-server) over the network with nats-py and
imports nothing from the natsd server package, which imports nothing of it either
(``tests/unit/test_layers.py`` checks both). A top-level package of the natsd distribution,
named after the Go CLI's repository; not ``nats``, which is nats-py's package.
"""

from __future__ import annotations

__all__: list[str] = []
