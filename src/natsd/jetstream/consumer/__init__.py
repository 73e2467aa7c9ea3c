"""JetStream consumers: ``Consumer`` and the modules that work on it."""

from natsd.jetstream.consumer.consumer import Consumer

__all__ = ["Consumer"]
