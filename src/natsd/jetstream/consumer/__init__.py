"""JetStream consumers: ``Consumer`` (``consumer``), a composition of parts that own their
state: ack tracking and redelivery (``ack``), the delivery strategy (``delivery``: pull in
``pull`` with the wait queue of ``waiting`` and the priority groups of ``priority``, push in
``push``), pause / replay / rate limit (``pacing``), when state is saved (``state``),
advisories (``advisory``), the shared cursor and doorbell (``shared``); where delivery starts
(``seq``).

A consumer reads its stream through ``stream.Stream`` and reaches everything above through
the stream's ``StreamContext``; it is one of the stream's ``StreamListener``s. It imports
``stream``, ``config`` and ``wire`` below it inside ``jetstream``; never the engine or the API.
"""

from natsd.jetstream.consumer.consumer import Consumer

__all__ = ["Consumer"]
