"""The stream side of JetStream: ``Stream`` (config, store, publish path, retention), group
commit (``commit``), the publish-header checks (``headers``), store look-ups
(``queries.seq_from_time``), and the two seams (``context``): ``StreamContext``, what a
stream needs from the engine, and ``StreamListener``, what a consumer offers a stream.

Imports ``config`` and ``wire`` below it inside ``jetstream``; never ``consumer``, the
engine or the API.
"""

from natsd.jetstream.stream.context import StreamContext, StreamListener
from natsd.jetstream.stream.stream import Stream

__all__ = ["Stream", "StreamContext", "StreamListener"]
