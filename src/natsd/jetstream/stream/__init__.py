"""The stream side of JetStream: ``Stream`` and group commit (``commit``)."""

from natsd.jetstream.stream.stream import Stream

__all__ = ["Stream"]
