"""PySpark data sources for NATS JetStream (``natsd[spark]``).

- ``JetStreamDataSource``: format ``jetstream``, read and write streams.
- ``JetStreamKVDataSource``: format ``jetstream-kv``, write rows into a KV bucket.

A client of any JetStream server: it imports nats-py, pyspark, pyarrow and the standard
library only, never the natsd server, which imports nothing of it either
(``tests/unit/test_layers.py`` checks both). A top-level package of the natsd distribution, so
Spark's Python workers import only the connector.
"""

from natsd_spark.kv_sink import JetStreamKVDataSource
from natsd_spark.source import JetStreamDataSource

__all__ = ["JetStreamDataSource", "JetStreamKVDataSource"]
