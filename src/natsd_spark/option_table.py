"""Every option of the Spark formats, in one table: the parsers accept exactly these names
(any other is refused as unknown) and the reference page of the documentation is generated
from it (``docs/gen_pages.py``), so the two cannot drift apart.

``formats`` says where an option applies: ``read`` (``spark.read``/``readStream`` of
``jetstream``), ``write`` (``df.write``/``writeStream`` of ``jetstream``), ``kv`` (the
``jetstream-kv`` sink); ``connect`` options apply to all three.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OPTIONS", "SPARK_PASSED", "Option", "keys_for"]


@dataclass(frozen=True)
class Option:
    name: str  # as users write it (matched in any case)
    formats: tuple[str, ...]
    default: str
    text: str


_C = ("connect",)
OPTIONS: tuple[Option, ...] = (
    Option("servers", _C, "nats://127.0.0.1:4222",
           "Server URLs, comma-separated (`host:port` means `nats://host:port`)."),
    Option("user", _C, "", "User name; with `password`."),
    Option("password", _C, "", "Password; with `user`."),
    Option("token", _C, "", "Authentication token (not with `user`)."),
    Option("timeout", _C, "10", "Seconds to wait for the connection and each API answer."),
    Option("tlsCaFile", _C, "", "CA certificates (PEM) that verify the server."),
    Option("tlsCertFile", _C, "", "Client certificate (PEM); with `tlsKeyFile`."),
    Option("tlsKeyFile", _C, "", "Client key (PEM); with `tlsCertFile`."),
    Option("tlsFirst", _C, "false", "TLS before the server's INFO (`handshake_first`)."),
    Option("nkeySeedFile", _C, "", "A user nkey seed (`SU...`) to sign the connection with."),
    Option("credsFile", _C, "", "A credentials file (JWT and seed)."),
    Option("stream", ("read", "write"), "",
           "Read: the stream to read (required). Write: a stream the subjects must land in "
           "(enables fast batches when it allows them)."),
    Option("subjects", ("read",), "", "Subject filters, comma-separated, wildcards allowed."),
    Option("startingOffsets", ("read",), "earliest (batch), latest (streaming)",
           "`earliest`, `latest`, a stream sequence or an RFC 3339 time (inclusive)."),
    Option("endingOffsets", ("read",), "latest",
           "Batch only: `latest`, a stream sequence or an RFC 3339 time (exclusive)."),
    Option("minPartitions", ("read",), "1", "Partitions at least (sequence ranges)."),
    Option("maxPartitionSize", ("read",), "100000", "Sequences per partition at most."),
    Option("maxMessagesPerTrigger", ("read",), "",
           "Streaming only: messages per micro-batch at most."),
    Option("includeHeaders", ("read",), "false", "Add the `headers` column."),
    Option("fetchBatch", ("read",), "10000", "Messages per direct-get batch request."),
    Option("fetchDepth", ("read",), "2", "Batch requests in flight per partition."),
    Option("failOnDataLoss", ("read",), "true",
           "Streaming: fail when messages the query has not read are gone from the stream."),
    Option("writeId", ("write", "kv"), "a fresh id per write",
           "The prefix of each message's `Nats-Msg-Id`: give one to make re-running a job "
           "idempotent."),
    Option("maxPendingAcks", ("write", "kv"), "4096 (write), 256 (kv)",
           "Publishes awaiting their PubAck at most (fast batches: messages beyond the "
           "last flow answer)."),
    Option("fastBatch", ("write",), "auto",
           "`auto` (fast-ingest batches when `stream` allows them), `true` (required), "
           "`false` (a PubAck each)."),
    Option("bucket", ("kv",), "", "The KV bucket to put into (required)."),
    Option("createBucket", ("kv",), "false", "Create the bucket when it does not exist."),
    Option("history", ("kv",), "1", "History of a bucket this sink creates (at most 64)."),
    Option("nullValues", ("kv",), "delete",
           "What a null `value` does: `delete` (a DEL marker), `purge`, `error`."),
)  # fmt: skip

# What Spark itself passes to a source or a sink: accepted, not options of ours.
SPARK_PASSED: dict[str, frozenset[str]] = {
    "read": frozenset({"path"}),
    "write": frozenset({"path", "checkpointlocation", "queryname"}),
    "kv": frozenset({"path", "checkpointlocation", "queryname"}),
}


def keys_for(fmt: str) -> frozenset[str]:
    """The lower-case names a format accepts (``read``, ``write``, ``kv``; ``connect``:
    the connection options alone): its options, the connection options and what Spark
    passes."""
    mine = frozenset(o.name.lower() for o in OPTIONS if fmt in o.formats or "connect" in o.formats)
    return mine | SPARK_PASSED.get(fmt, frozenset())
