"""PySpark data sources for NATS JetStream (``natsd[spark]``).

- ``JetStreamDataSource``: format ``jetstream``, read and write streams.
- ``JetStreamKVDataSource``: format ``jetstream-kv``, write rows into a KV bucket.

A client of any JetStream server: it imports nats-py, pyspark, pyarrow and the standard
library only, never the natsd server (``tests/unit/test_layers.py`` checks this).
"""

from natsd.spark.kv_sink import JetStreamKVDataSource
from natsd.spark.source import JetStreamDataSource

__all__ = ["JetStreamDataSource", "JetStreamKVDataSource"]
