"""``JetStreamKVDataSource``: a Spark sink writing rows into a NATS KV bucket.

Register it beside the stream source, then write with format ``"jetstream-kv"``::

    from natsd_spark import JetStreamKVDataSource
    spark.dataSource.register(JetStreamKVDataSource)
    (df.selectExpr("key", "value").write.format("jetstream-kv")
       .option("servers", "nats://127.0.0.1:4222").option("bucket", "totals")
       .mode("append").save())

Columns: ``key`` (string) and ``value`` (binary or string). Each row is a KV put, i.e. a
JetStream publish to ``$KV.<bucket>.<key>`` with the value as payload, exactly what the
clients' ``kv.put`` sends, so any KV client (nats-py, nats.js, the ``nats`` CLI) reads it.

A null ``value`` deletes the key: by default a ``KV-Operation: DEL`` marker (what
``kv.delete`` sends; the key's history is kept, ``get`` answers "deleted"). Option
``nullValues``: ``delete`` (default), ``purge`` (a ``KV-Operation: PURGE`` marker with
``Nats-Rollup: sub``, which also drops the key's history, like ``kv.purge``) or ``error``
(a null value fails the task).

Options: ``servers``, ``bucket`` (required), ``user``/``password``/``token``, ``timeout``
(as the ``jetstream`` source), ``createBucket`` (create the bucket when missing, with
``history`` values per key, default 1; an existing bucket is used as it is),
``maxPendingAcks`` (the window of publishes awaiting a PubAck, default 256) and ``writeId``
(see below).

Save modes: only append (as the ``jetstream`` writer); ``overwrite`` and the streaming
``complete`` mode are refused, since nothing would delete the keys a full rewrite leaves out.
Spark itself refuses ``update`` mode for Python data source sinks ("does not support Update
mode"), so a streaming aggregation reaches a bucket through ``foreachBatch`` with
``outputMode("update")`` and a batch write per micro-batch, whose ``writeId`` is derived from
the query id and batch id (``examples/orders_pipeline.py`` does this): a put is an upsert,
so each micro-batch's changed rows are exactly what the bucket needs.

Retries: every put carries a ``Nats-Msg-Id`` built like the stream writer's (``<writeId or a
fresh id>:<partition>:<row>`` for batch writes, ``<queryId>:<batchId>:<partition>:<row>``
for streaming), so a retried task is deduplicated within the bucket's duplicate window
(2 minutes for buckets made by the clients) instead of re-putting an older value over a
newer one written in between.

Who runs what: ``writer``/``streamWriter`` run on the driver and check (or create) the
bucket once; ``write`` runs in the executors' Python workers, one connection per task.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from natsd_spark.client import JetStreamError, Publisher, Session
from natsd_spark.option_table import keys_for
from natsd_spark.options import (
    ConnectOptions,
    bool_option,
    get_option,
    int_option,
    parse_connect,
)

__all__ = [
    "JetStreamKVDataSource",
    "KVStreamWriter",
    "KVWriteOptions",
    "KVWriter",
    "invalid_key_reason",
    "parse_kv_write_options",
]

#: The clients' rules (nats-py ``kv.py``, nats.go ``kv.go``): these characters, not empty,
#: not starting or ending with ``.``; ``..`` would make an empty subject token.
_KEY_RE = re.compile(r"^[-/_=.a-zA-Z0-9]+$")
_BUCKET_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_NULL_MODES = ("delete", "purge", "error")
_MAX_HISTORY = 64  # nats-server's limit on KV history


@dataclass(frozen=True)
class KVWriteOptions:
    """Options of a KV write (picklable: sent to the executors)."""

    conn: ConnectOptions
    bucket: str
    create_bucket: bool = False
    history: int = 1
    max_pending_acks: int = 256
    write_id: str | None = None
    null_values: str = "delete"

    @property
    def stream(self) -> str:
        return f"KV_{self.bucket}"


def parse_kv_write_options(opts: Mapping[str, str]) -> KVWriteOptions:
    """Options of ``format("jetstream-kv")``; a ``ValueError`` names any bad one."""
    known = keys_for("kv")
    unknown = sorted(k for k in opts if k.lower() not in known)
    if unknown:
        raise ValueError(f"unknown jetstream-kv write option(s): {', '.join(unknown)}")
    bucket = get_option(opts, "bucket")
    if not bucket:
        raise ValueError("jetstream-kv option 'bucket' is required")
    if not _BUCKET_RE.match(bucket):
        raise ValueError(
            f"jetstream-kv option 'bucket': invalid bucket name {bucket!r} (letters, digits, "
            "'-' and '_' only)")
    history = int_option(opts, "history", 1, 1)
    if history > _MAX_HISTORY:
        raise ValueError(f"jetstream-kv option 'history' must be <= {_MAX_HISTORY}, "
                         f"got {history}")
    write_id = get_option(opts, "writeId")
    if write_id is not None and not write_id.strip():
        raise ValueError("jetstream-kv option 'writeId' must not be empty")
    null_values = (get_option(opts, "nullValues") or "delete").strip().lower()
    if null_values not in _NULL_MODES:
        raise ValueError(
            f"jetstream-kv option 'nullValues' must be one of {', '.join(_NULL_MODES)}, "
            f"got {null_values!r}")
    return KVWriteOptions(
        conn=parse_connect(opts),
        bucket=bucket,
        create_bucket=bool_option(opts, "createBucket", False),
        history=history,
        max_pending_acks=int_option(opts, "maxPendingAcks", 256, 1),
        write_id=write_id,
        null_values=null_values,
    )


def invalid_key_reason(key: object) -> str | None:
    """Why ``key`` cannot be a KV key, or None when it can."""
    if key is None:
        return "the key is null"
    if not isinstance(key, str):
        return f"the key is a {type(key).__name__}, not a string"
    if not key:
        return "the key is empty"
    if not _KEY_RE.match(key):
        return "keys may only hold letters, digits and - / _ = ."
    if key[0] == "." or key[-1] == ".":
        return "keys may not start or end with '.'"
    if ".." in key:
        return "keys may not contain '..' (an empty subject token)"
    return None


# ---------------------------------------------------------------------- driver side
def ensure_bucket(opts: KVWriteOptions) -> None:
    """Check the bucket exists on the driver (or create it), before any task runs."""
    with Session(opts.conn) as s:
        js = s.client.jetstream(timeout=opts.conn.timeout)

        async def go() -> None:
            try:
                await js.stream_info(opts.stream)
                return
            except nats.js.errors.NotFoundError:
                if not opts.create_bucket:
                    raise JetStreamError(
                        f"jetstream-kv: bucket {opts.bucket!r} does not exist (no stream "
                        f"{opts.stream}); create it or set option createBucket=true"
                    ) from None
            # nats-py builds the same stream config as every KV client (rollups allowed,
            # discard new, history as max_msgs_per_subject, a 2 minute duplicate window).
            await js.create_key_value(bucket=opts.bucket, history=opts.history)

        try:
            s.run(go())
        except nats.errors.Error as e:
            raise JetStreamError(f"jetstream-kv: bucket {opts.bucket!r}: {e}") from e


_TYPES = {"key": ("string",), "value": ("binary", "string")}


def check_kv_columns(schema: StructType) -> None:
    names = [f.name for f in schema.fields]
    for f in schema.fields:
        allowed = _TYPES.get(f.name)
        if allowed and f.dataType.simpleString() not in allowed:
            raise ValueError(
                f"jetstream-kv: column {f.name!r} must be {' or '.join(allowed)}, "
                f"not {f.dataType.simpleString()}")
    missing = sorted({"key", "value"} - set(names))
    if missing:
        raise ValueError(
            f"jetstream-kv writes need columns 'key' and 'value'; missing {missing} "
            f"(have {sorted(names)})")
    extra = sorted(set(names) - {"key", "value"})
    if extra:
        raise ValueError(f"jetstream-kv writes take columns key and value; unexpected {extra}")


# ---------------------------------------------------------------------- executor side
@dataclass
class KVCommit(WriterCommitMessage):
    partition: int
    puts: int
    deletes: int
    duplicates: int


def _columns(batch: pa.RecordBatch) -> tuple[list[Any], list[Any]]:
    names = batch.schema.names
    return (batch.column(names.index("key")).to_pylist(),
            batch.column(names.index("value")).to_pylist())


def write_partition(
    opts: KVWriteOptions, id_prefix: str, batches: Iterator[pa.RecordBatch]
) -> KVCommit:
    """Put every row of one task's partition; raises on the first refused put."""
    ctx = TaskContext.get()
    part = ctx.partitionId() if ctx is not None else 0
    prefix = f"$KV.{opts.bucket}."
    counts = {"puts": 0, "deletes": 0}

    async def put_all(pub: Publisher) -> None:
        # One coroutine per partition: the event loop is entered once, not once per row.
        await pub.start()
        row = 0
        for batch in batches:
            keys, values = _columns(batch)
            # Check the whole Arrow batch first, so a bad key fails the task before any of
            # its batch is written, with the row named.
            for i, key in enumerate(keys):
                why = invalid_key_reason(key)
                if why is not None:
                    raise ValueError(
                        f"jetstream-kv: invalid key {key!r} in row {row + i} of partition "
                        f"{part}: {why}")
                if values[i] is None and opts.null_values == "error":
                    raise ValueError(
                        f"jetstream-kv: key {key!r} (row {row + i} of partition {part}) has "
                        "a null value and option nullValues is 'error'")
            for key, value in zip(keys, values, strict=True):
                headers = {"Nats-Msg-Id": f"{id_prefix}:{part}:{row}"}
                if value is None:
                    headers["KV-Operation"] = "DEL" if opts.null_values == "delete" else "PURGE"
                    if opts.null_values == "purge":
                        headers["Nats-Rollup"] = "sub"
                    payload = b""
                    counts["deletes"] += 1
                else:
                    payload = value.encode() if isinstance(value, str) else value
                    counts["puts"] += 1
                await pub.publish(prefix + key, payload, headers)
                row += 1
        await pub.finish()

    with Session(opts.conn) as s:
        # The ack must come from the bucket's stream: anything else means the subject was
        # captured by some other stream and the bucket never saw the put.
        pub = Publisher(s, opts.max_pending_acks, opts.stream)
        s.run(put_all(pub))
        return KVCommit(part, counts["puts"], counts["deletes"], pub.duplicates)


class KVWriter(DataSourceArrowWriter):
    """Batch write; message ids ``<writeId>:<partition>:<row>`` (fresh writeId by default)."""

    def __init__(self, opts: KVWriteOptions) -> None:
        self.opts = opts
        self.write_id = opts.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KVCommit:
        return write_partition(self.opts, self.write_id, iterator)


class KVStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write; message ids ``<queryId>:<batchId>:<partition>:<row>``.

    The query id survives restarts from a checkpoint, so a re-run micro-batch repeats its ids.
    """

    def __init__(self, opts: KVWriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KVCommit:
        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        if query is None or batch is None:
            raise JetStreamError("jetstream-kv: streaming write without a query/batch id")
        return write_partition(self.opts, f"{self.opts.write_id or query}:{batch}", iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Each put was acknowledged by the server before its task finished.
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Puts cannot be taken back; the retry's message ids make them harmless.
        return None


class JetStreamKVDataSource(DataSource):
    """Spark sink ``jetstream-kv``: rows ``(key, value)`` become puts into a KV bucket."""

    @classmethod
    def name(cls) -> str:
        return "jetstream-kv"

    def schema(self) -> str:
        return "key string, value binary"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise ValueError(
                "jetstream-kv: save mode 'overwrite' is not supported; puts are upserts and "
                "nothing would delete the keys left out (use mode('append'))")
        check_kv_columns(schema)
        opts = parse_kv_write_options(self.options)
        ensure_bucket(opts)
        return KVWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        if overwrite:
            raise ValueError(
                "jetstream-kv: output mode 'complete' is not supported; use 'append', or for "
                "aggregations outputMode('update') with foreachBatch and a batch write")
        check_kv_columns(schema)
        opts = parse_kv_write_options(self.options)
        ensure_bucket(opts)
        return KVStreamWriter(opts)
