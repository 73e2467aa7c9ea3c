"""PySpark data source for NATS JetStream (``natsd[spark]``).

A client of any JetStream server: it imports nats-py, pyspark, pyarrow and the standard
library only, never the natsd server (``tests/unit/test_layers.py`` checks this).
"""

from natsd.spark.source import JetStreamDataSource

__all__ = ["JetStreamDataSource"]
