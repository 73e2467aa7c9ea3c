"""``nats``: a command line for NATS and JetStream, compatible with the Go ``nats`` CLI.

A client only: it talks to a server (natsd or nats-server) over the network with nats-py and
imports nothing from the natsd server packages (``tests/unit/test_layers.py`` checks this).
"""

from __future__ import annotations

__all__: list[str] = []
