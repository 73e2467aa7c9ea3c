"""The JetStream API: ``$JS.API.>`` requests decoded, handed to the engine's verbs or to a
stream / consumer, and answered as nats-server answers them.

``dispatch`` (the subscriptions and the route table), ``streams`` / ``consumers`` /
``account`` (the handlers), ``direct`` (DIRECT.GET), ``standalone`` (requests only a cluster
or a later natsd serves), ``domain`` (the ``$JS.<domain>.API`` mappings). The top rank inside
``jetstream``: it may import the engine and everything below; nothing in ``jetstream``
imports it. The server wires ``subscribe_api`` into the engine.
"""

from natsd.jetstream.api.dispatch import subscribe_api

__all__ = ["subscribe_api"]
