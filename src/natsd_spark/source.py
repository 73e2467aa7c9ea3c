"""``JetStreamDataSource``: JetStream streams as a Spark data source (batch and streaming).

Register it once per session, then use format ``"jetstream"``::

    from natsd_spark import JetStreamDataSource
    spark.dataSource.register(JetStreamDataSource)
    df = spark.read.format("jetstream").option("servers", "nats://127.0.0.1:4222") \\
        .option("stream", "ORDERS").load()

Who runs what: ``schema``/``reader``/``writer`` and ``partitions``/offset methods run on the
driver; ``read``/``write`` run in Python workers on the executors. Planning resolves offsets
to stream sequences once, on the driver, so every task of a query sees the same ranges. Each
``read``/``write`` call opens its own connection (``client.Session``) and closes it.

Partitions are half-open sequence ranges ``[lo, hi)``: at least ``minPartitions`` of them,
and none wider than ``maxPartitionSize`` sequences. A range is read with direct-get batches
(``fetchBatch`` sequences per request, ``fetchDepth`` requests in flight; see
``directget.py``, which parses the replies off the wire into column lists) and each batch
becomes one Arrow record batch: Arrow converts subjects to strings and parses the RFC 3339
time stamps, so the per-row Python work is the wire parsing alone.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from natsd_spark.client import (
    FastPublisher,
    JetStreamError,
    Publisher,
    Session,
    StoredMessage,
    subject_matches,
)
from natsd_spark.directget import Columns, DirectRangeReader, RawReplies, parse_user_headers
from natsd_spark.options import (
    ReadOptions,
    WriteOptions,
    parse_include_headers,
    parse_read_options,
    parse_write_options,
)

__all__ = ["JetStreamDataSource", "SeqRange", "plan_ranges"]

_log = logging.getLogger("natsd_spark")

BASE_SCHEMA = "stream string, seq long, subject string, data binary"
HEADERS_FIELD = "headers map<string,array<string>>"
TIME_FIELD = "timestamp timestamp"
#: Smallest Arrow record batch handed to Spark (smaller direct-get batches are merged).
ARROW_MIN_ROWS = 4096
ARROW_ROWS = ARROW_MIN_ROWS  # the old name


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("stream", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("subject", pa.string()),
        pa.field("data", pa.binary()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.map_(pa.string(), pa.list_(pa.string()))))
    fields.append(pa.field("timestamp", pa.timestamp("us", tz="UTC")))
    return pa.schema(fields)


class SeqRange(InputPartition):
    """Stream sequences ``lo <= seq < hi`` (picklable)."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__((lo, hi))
        self.lo = lo
        self.hi = hi

    def __repr__(self) -> str:
        return f"SeqRange({self.lo}, {self.hi})"


def plan_ranges(lo: int, hi: int, min_partitions: int, max_size: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` into contiguous ranges: >= min_partitions, each <= max_size."""
    span = hi - lo
    if span <= 0:
        return []
    n = max(min_partitions, math.ceil(span / max_size))
    n = min(n, span)
    step, extra = divmod(span, n)
    out, cur = [], lo
    for i in range(n):
        nxt = cur + step + (1 if i < extra else 0)
        out.append((cur, nxt))
        cur = nxt
    return out


def _micros(rfc3339: str) -> int | None:
    """``2026-11-22T13:39:56.123456789Z`` as microseconds since the epoch (UTC)."""
    if not rfc3339:
        return None
    text = rfc3339.replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    frac = ""
    tz = ""
    if dot:
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, tz = rest[:i], rest[i:]
    else:
        # no fraction: the zone follows the seconds
        for sep in ("+", "-"):
            j = head.rfind(sep)
            if j > 10:
                head, tz = head[:j], head[j:]
                break
    dt = datetime.fromisoformat(head + (tz or "+00:00"))
    return int(dt.timestamp()) * 1_000_000 + int((frac + "000000")[:6])


# ---------------------------------------------------------------------- reading
def _read_range(opts: ReadOptions, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
    """Every message of ``[lo, hi)`` matching the filter, as Arrow record batches."""
    schema = _arrow_schema(opts.include_headers)
    filters = opts.subjects
    server_filter = filters[0] if len(filters) == 1 and filters[0] != ">" else ""
    local_filters = filters if len(filters) > 1 else ()
    with Session(opts.conn) as s:
        if not s.stream_info(opts.stream).allow_direct:
            yield from _read_range_msg_get(s, opts, lo, hi, server_filter, local_filters,
                                           schema)
            return
        reader = DirectRangeReader(
            s.client, RawReplies(s.client), opts.stream, lo, hi, server_filter,
            opts.fetch_batch, depth=opts.fetch_depth, timeout=opts.conn.timeout,
            with_headers=opts.include_headers)
        pending = Columns(opts.include_headers)
        while True:
            cols = s.run(reader.next())
            if cols is None:
                break
            if local_filters:
                cols = _filter_columns(cols, local_filters)
            if not len(cols):
                continue
            if not len(pending) and len(cols) >= ARROW_MIN_ROWS:
                yield _columns_to_arrow(opts, cols, schema)
                continue
            pending.extend(cols)
            if len(pending) >= ARROW_MIN_ROWS:
                yield _columns_to_arrow(opts, pending, schema)
                pending = Columns(opts.include_headers)
        if len(pending):
            yield _columns_to_arrow(opts, pending, schema)


def _filter_columns(cols: Columns, filters: Sequence[str]) -> Columns:
    out = Columns(cols.headers is not None)
    for i, subj in enumerate(cols.subjects):
        text = subj.decode("utf-8", "replace")
        if any(subject_matches(f, text) for f in filters):
            out.seqs.append(cols.seqs[i])
            out.subjects.append(subj)
            out.data.append(cols.data[i])
            out.times.append(cols.times[i])
            if out.headers is not None and cols.headers is not None:
                out.headers.append(cols.headers[i])
    return out


def _columns_to_arrow(opts: ReadOptions, cols: Columns, schema: pa.Schema) -> pa.RecordBatch:
    """Columns of raw bytes as one record batch (string/time conversion done by Arrow)."""
    n = len(cols)
    arrays: list[pa.Array] = [
        pa.repeat(pa.scalar(opts.stream, pa.string()), n),
        pa.array(cols.seqs, pa.int64()),
        pa.array(cols.subjects, pa.binary()).cast(pa.string()),
        pa.array(cols.data, pa.binary()),
    ]
    if opts.include_headers:
        raw = cols.headers or []
        arrays.append(pa.array([parse_user_headers(h) for h in raw],
                               pa.map_(pa.string(), pa.list_(pa.string()))))
    # RFC 3339 with nanoseconds and a zone; Arrow parses it, then truncates to micros.
    times = pa.array(cols.times, pa.binary()).cast(pa.string())
    arrays.append(times.cast(pa.timestamp("ns", tz="UTC")).cast(
        pa.timestamp("us", tz="UTC"), safe=False))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _read_range_msg_get(
    s: Session, opts: ReadOptions, lo: int, hi: int, server_filter: str,
    local_filters: Sequence[str], schema: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    """Streams without ``allow_direct``: STREAM.MSG.GET one message at a time (slow)."""
    cur = max(lo, 1)
    rows: list[StoredMessage] = []
    while cur < hi:
        chunk, cur = s.run(s.read_chunk(opts.stream, cur, hi, server_filter, 1, False))
        if local_filters:
            chunk = [m for m in chunk if any(subject_matches(f, m.subject)
                                             for f in local_filters)]
        rows.extend(chunk)
        if len(rows) >= ARROW_MIN_ROWS:
            yield _to_arrow(opts, rows, schema)
            rows = []
    if rows:
        yield _to_arrow(opts, rows, schema)


def _to_arrow(opts: ReadOptions, rows: list[StoredMessage], schema: pa.Schema) -> pa.RecordBatch:
    cols: list[Any] = [
        [opts.stream] * len(rows),
        [m.seq for m in rows],
        [m.subject for m in rows],
        [m.data for m in rows],
    ]
    if opts.include_headers:
        cols.append([
            [(k, [v]) for k, v in m.headers.items()] if m.headers else None for m in rows
        ])
    cols.append([_micros(m.time) for m in rows])
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema)


def _range_of(partition: InputPartition) -> tuple[int, int] | None:
    value = partition.value
    if value is None:  # Spark's stand-in for an empty partition list
        return None
    lo, hi = value
    return int(lo), int(hi)


class JetStreamReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        with Session(o.conn) as s:
            info = s.stream_info(o.stream)
            lo = max(s.resolve(o.starting, info), info.first_seq, 1)
            hi = s.resolve(o.ending, info)
        hi = min(hi, info.last_seq + 1)  # nothing beyond what the stream holds now
        ranges = plan_ranges(lo, hi, o.min_partitions, o.max_partition_size)
        if not ranges:
            return [SeqRange(lo, lo)]
        return [SeqRange(a, b) for a, b in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r = _range_of(partition)
        if r is None or r[0] >= r[1]:
            return iter(())
        return _read_range(self.opts, *r)


class JetStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"seq": N}``: the next stream sequence to read (0 = "from the start")."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._initial: dict[str, int] | None = None
        self._target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        # Called more than once: resolve once and answer the same every time.
        if self._initial is None:
            o = self.opts
            if o.starting.kind == "earliest":
                self._initial = {"seq": 0}
            elif o.starting.kind == "seq":
                self._initial = {"seq": o.starting.seq}
            else:
                with Session(o.conn) as s:
                    info = s.stream_info(o.stream)
                    self._initial = {"seq": s.resolve(o.starting, info)}
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with Session(self.opts.conn) as s:
            self._target = s.stream_info(self.opts.stream).last_seq + 1

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        cur = int(start["seq"])
        with Session(self.opts.conn) as s:
            info = s.stream_info(self.opts.stream)
        if 0 < cur < info.first_seq:
            msg = (f"jetstream: stream {self.opts.stream!r} no longer holds sequences "
                   f"{cur}..{info.first_seq - 1} (removed by limits or deletes before this "
                   f"query read them)")
            if self.opts.fail_on_data_loss:
                raise JetStreamError(msg + "; set failOnDataLoss=false to skip them")
            _log.warning("%s; skipped (failOnDataLoss=false)", msg)
        end = info.last_seq + 1
        if self._target is not None:
            end = min(end, self._target)
        if isinstance(limit, ReadMaxRows):
            end = min(end, max(cur, 1) + limit.max_rows)
        if end <= max(cur, 1):
            return {"seq": cur}
        return {"seq": end}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        lo, hi = max(int(start["seq"]), 1), int(end["seq"])
        o = self.opts
        return [SeqRange(a, b) for a, b in plan_ranges(lo, hi, o.min_partitions,
                                                      o.max_partition_size)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        r = _range_of(partition)
        if r is None or r[0] >= r[1]:
            return iter(())
        return _read_range(self.opts, *r)

    def commit(self, end: dict[str, int]) -> None:
        # Nothing to do: offsets live in Spark's checkpoint, not in the server.
        return None


# ---------------------------------------------------------------------- writing
@dataclass
class PublishCommit(WriterCommitMessage):
    partition: int
    published: int
    duplicates: int | None  # (None: fast batches, whose answers do not count them)


def _rows(batch: pa.RecordBatch) -> Iterator[tuple[str, bytes, Any, str | None]]:
    names = batch.schema.names
    subj = batch.column(names.index("subject")).to_pylist()
    data = batch.column(names.index("data")).to_pylist()
    hdrs = batch.column(names.index("headers")).to_pylist() if "headers" in names else None
    mids = batch.column(names.index("msg_id")).to_pylist() if "msg_id" in names else None
    for i in range(batch.num_rows):
        yield (subj[i], data[i], hdrs[i] if hdrs else None, mids[i] if mids else None)


def _headers(raw: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    if raw is None:
        return out
    items = raw.items() if isinstance(raw, dict) else raw
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, list):
            vals = [x for x in v if x is not None]
            if len(vals) > 1:
                raise ValueError(
                    f"jetstream: header {k!r} has {len(vals)} values; nats-py publishes one "
                    "value per header")
            if not vals:
                continue
            v = vals[0]
        out[str(k)] = str(v)
    return out


def _publish_partition(
    opts: WriteOptions, id_prefix: str, batches: Iterator[pa.RecordBatch]
) -> PublishCommit:
    ctx = TaskContext.get()
    part = ctx.partitionId() if ctx is not None else 0

    async def publish_all(pub: Publisher | FastPublisher) -> None:
        # One coroutine for the whole partition: the loop is entered once, not per row.
        await pub.start()
        row = 0
        for batch in batches:
            for subject, data, hdrs, mid in _rows(batch):
                if subject is None:
                    raise ValueError(f"jetstream: row {row} of partition {part} has no subject")
                payload = data.encode() if isinstance(data, str) else (data or b"")
                headers = _headers(hdrs)
                headers["Nats-Msg-Id"] = mid if mid is not None else f"{id_prefix}:{part}:{row}"
                await pub.publish(subject, payload, headers)
                row += 1
        await pub.finish()

    with Session(opts.conn) as s:
        pub: Publisher | FastPublisher
        if opts.use_fast and opts.stream is not None:
            pub = FastPublisher(s, opts.stream, opts.max_pending_acks)
        else:
            pub = Publisher(s, opts.max_pending_acks, opts.stream)
        s.run(publish_all(pub))
        return PublishCommit(part, pub.published, pub.duplicates)


def resolve_fast_batch(opts: WriteOptions) -> WriteOptions:
    """On the driver: whether this write goes as fast-ingest batches. They need the target
    stream (the ``stream`` option: a batch belongs to one stream) to have ``allow_batched``;
    ``fastBatch=true`` refuses the write otherwise, ``auto`` publishes with a PubAck each."""
    if opts.fast_batch == "false":
        return opts
    if opts.stream is None:
        if opts.fast_batch == "true":
            raise ValueError(
                "jetstream option 'fastBatch' true needs the 'stream' option (a fast batch "
                "goes to one stream)")
        return opts
    try:
        with Session(opts.conn) as s:
            info = s.stream_info(opts.stream)
    except JetStreamError:
        if opts.fast_batch == "true":
            raise
        return opts  # (the publishes say what is wrong)
    if info.allow_batched:
        return replace(opts, use_fast=True)
    if opts.fast_batch == "true":
        raise ValueError(
            f"jetstream option 'fastBatch' is true but stream {opts.stream!r} does not allow "
            "batched publishes (allow_batched)")
    return opts


_WRITE_TYPES = {
    "subject": ("string",),
    "data": ("binary", "string"),
    "msg_id": ("string",),
    "headers": ("map<string,string>", "map<string,array<string>>"),
}


def _check_columns(schema: StructType) -> None:
    names = {f.name for f in schema.fields}
    for f in schema.fields:
        allowed = _WRITE_TYPES.get(f.name)
        if allowed and f.dataType.simpleString() not in allowed:
            raise ValueError(
                f"jetstream: column {f.name!r} must be {' or '.join(allowed)}, "
                f"not {f.dataType.simpleString()}")
    missing = {"subject", "data"} - names
    if missing:
        raise ValueError(
            f"jetstream writes need columns 'subject' and 'data'; missing {sorted(missing)} "
            f"(have {sorted(names)})")
    extra = names - {"subject", "data", "headers", "msg_id"}
    if extra:
        raise ValueError(
            f"jetstream writes take columns subject, data, headers, msg_id; "
            f"unexpected {sorted(extra)}")


class JetStreamWriter(DataSourceArrowWriter):
    """Batch write. Message ids: ``<writeId>:<partition>:<row>`` or the ``msg_id`` column.

    ``writeId`` defaults to a fresh id per write, so retried tasks of one job are
    deduplicated; give ``writeId`` to make a re-run of the same job idempotent too.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.write_id = opts.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        return _publish_partition(self.opts, self.write_id, iterator)


class JetStreamStreamWriter(DataSourceStreamArrowWriter):
    """Streaming write. Message ids: ``<queryId>:<batchId>:<partition>:<row>``.

    The query id (stable across restarts from a checkpoint) and the batch id come from the
    task's local properties, so a retried micro-batch publishes the same ids.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PublishCommit:
        ctx = TaskContext.get()
        query = ctx.getLocalProperty("sql.streaming.queryId") if ctx else None
        batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx else None
        if query is None or batch is None:
            raise JetStreamError("jetstream: streaming write without a query/batch id")
        prefix = f"{self.opts.write_id or query}:{batch}"
        return _publish_partition(self.opts, prefix, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None


# ---------------------------------------------------------------------- the source
class JetStreamDataSource(DataSource):
    """Spark data source ``jetstream`` over a NATS JetStream stream (natsd or nats-server)."""

    @classmethod
    def name(cls) -> str:
        return "jetstream"

    def schema(self) -> str:
        include = parse_include_headers(self.options)
        cols = [BASE_SCHEMA]
        if include:
            cols.append(HEADERS_FIELD)
        cols.append(TIME_FIELD)
        return ", ".join(cols)

    def reader(self, schema: StructType) -> DataSourceReader:
        return JetStreamReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return JetStreamStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise ValueError(
                "jetstream: save mode 'overwrite' is not supported; a stream is append-only "
                "(use mode('append'))")
        _check_columns(schema)
        return JetStreamWriter(resolve_fast_batch(parse_write_options(self.options)))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        if overwrite:
            raise ValueError("jetstream: output mode 'complete' is not supported; use append")
        _check_columns(schema)
        return JetStreamStreamWriter(resolve_fast_batch(parse_write_options(self.options)))
