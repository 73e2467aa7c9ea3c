"""JetStream consumers: ``Consumer`` (``consumer``) and the modules that work on it: acks and
redelivery (``ack``), pull requests (``pull``), push delivery (``push``), priority groups
(``priority``), where delivery starts (``seq``), info and persisted state (``state``),
advisories (``advisory``).

A consumer reads its stream through ``stream.Stream`` and reaches everything above through
the stream's ``StreamContext``; it is one of the stream's ``StreamListener``s. It imports
``stream``, ``config`` and ``wire`` below it inside ``jetstream``; never the engine or the API.
"""

from natsd.jetstream.consumer.consumer import Consumer

__all__ = ["Consumer"]
