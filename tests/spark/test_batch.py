"""Batch reads and writes through ``format("jetstream")`` against natsd and nats-server."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from typing import Any

import pyarrow as pa
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from natsd_spark.client import FastPublisher, JetStreamError, Session
from natsd_spark.options import parse_write_options
from natsd_spark.source import JetStreamWriter, resolve_fast_batch

from .conftest import ServerProc, fetch_all, make_stream, publish, run_js


def failing_once(prefix: str) -> Column:
    """The subject of row ``id``: ``<prefix>.<id % 5>``, except row 150 of a task's first
    attempt, which goes to a subject no stream listens on (its publish fails the task)."""

    def subject_of(i):  # type: ignore[no-untyped-def]
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if i == 150 and ctx is not None and ctx.attemptNumber() == 0:
            return "nowhere.fail"
        return f"{prefix}.{i % 5}"

    return F.udf(subject_of, "string", useArrow=False)(F.col("id"))


def load(spark: SparkSession, srv: ServerProc, stream: str, **opts: Any) -> DataFrame:
    r = spark.read.format("jetstream").option("servers", srv.url).option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def seqs(df: DataFrame) -> list[int]:
    return sorted(r.seq for r in df.select("seq").collect())


# --------------------------------------------------------------------------- reads
def test_read_round_trip(spark: SparkSession, server: ServerProc) -> None:
    make_stream(server.url, "RT", ["rt.>"])
    before = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    msgs = [
        (f"rt.{i % 3}.x", f"payload-{i}".encode() * (i % 4), {"k": str(i)} if i % 2 else None)
        for i in range(57)
    ]
    published = publish(server.url, msgs)
    df = load(spark, server, "RT", includeHeaders="true", minPartitions=3, fetchBatch=7)
    assert df.schema.simpleString() == (
        "struct<stream:string,seq:bigint,subject:string,data:binary,"
        "headers:map<string,array<string>>,timestamp:timestamp>"
    )
    rows = sorted(df.collect(), key=lambda r: r.seq)
    assert [r.seq for r in rows] == published
    for (subject, data, hdrs), r in zip(msgs, rows, strict=True):
        assert (r.stream, r.subject, bytes(r.data)) == ("RT", subject, data)
        assert r.headers == ({k: [v] for k, v in hdrs.items()} if hdrs else None)
        ts = r.timestamp.replace(tzinfo=dt.UTC) if r.timestamp.tzinfo is None else r.timestamp
        assert before <= ts <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    # Without includeHeaders there is no headers column.
    assert "headers" not in load(spark, server, "RT").columns


def test_filters_and_offsets(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "FO", ["fo.>"])
    publish(srv.url, [(f"fo.{'a' if i % 2 else 'b'}.{i}", b"x", None) for i in range(1, 41)])
    time.sleep(0.05)
    mid = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    publish(srv.url, [(f"fo.c.{i}", b"y", None) for i in range(41, 51)])
    assert seqs(load(spark, srv, "FO")) == list(range(1, 51))
    assert seqs(load(spark, srv, "FO", subjects="fo.a.*", minPartitions=2)) == list(
        range(1, 41, 2))
    assert seqs(load(spark, srv, "FO", subjects="fo.b.>,fo.c.*")) == list(
        range(2, 41, 2)) + list(range(41, 51))
    assert seqs(load(spark, srv, "FO", startingOffsets=10, endingOffsets=20)) == list(
        range(10, 20))
    assert seqs(load(spark, srv, "FO", startingOffsets="latest")) == []
    assert seqs(load(spark, srv, "FO", startingOffsets=mid.isoformat())) == list(range(41, 51))
    assert seqs(load(spark, srv, "FO", endingOffsets=mid.isoformat(),
                     subjects="fo.a.>")) == list(range(1, 41, 2))
    assert seqs(load(spark, srv, "FO", startingOffsets=45, endingOffsets=1000)) == list(
        range(45, 51))


def test_read_without_direct_get(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "ND", ["nd.>"], allow_direct=False)
    publish(srv.url, [(f"nd.{i}", str(i).encode(), None) for i in range(12)])
    rows = load(spark, srv, "ND", subjects="nd.*", minPartitions=2).collect()
    assert sorted((r.seq, bytes(r.data)) for r in rows) == [
        (i + 1, str(i).encode()) for i in range(12)]


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"stream": "NOPE"}, "stream not found"),
        ({"stream": "RT", "startingOffsets": "yesterday"}, "'startingOffsets' must be"),
        ({"stream": "RT", "bogus": "1"}, "unknown jetstream read option"),
        ({"stream": "RT", "servers": "nats://127.0.0.1:1"}, "cannot connect"),
    ],
)
def test_bad_options(
    spark: SparkSession, natsd_server: ServerProc, opts: dict[str, str], message: str
) -> None:
    make_stream(natsd_server.url, "RT", ["rt.>"])
    r = spark.read.format("jetstream").option("servers", natsd_server.url)
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=message):
        r.load().collect()


# --------------------------------------------------------------------------- writes
def test_write_round_trip_and_rerun(spark: SparkSession, server: ServerProc) -> None:
    make_stream(server.url, "WR", ["wr.>"], duplicate_window=60.0)
    rows = [(f"wr.{i % 4}", f"v{i}", {"h": [str(i)]} if i % 3 == 0 else None)
            for i in range(40)]
    df = spark.createDataFrame(
        rows, "subject string, data string, headers map<string,array<string>>")
    df = df.repartition(3)

    def write() -> None:
        (df.write.format("jetstream").option("servers", server.url).option("writeId", "job-1")
         .option("stream", "WR").mode("append").save())

    write()
    stored = fetch_all(server.url, "WR")
    assert sorted((s, d.decode()) for _, s, d, _ in stored) == sorted((s, d) for s, d, _ in rows)
    ids = {(h or {}).get("Nats-Msg-Id") for *_, h in stored}
    assert len(ids) == 40 and all(i and i.startswith("job-1:") for i in ids)
    hdr = {d.decode(): (h or {}).get("h") for _, _, d, h in stored}
    assert hdr["v3"] == "3" and hdr["v1"] is None
    write()  # the same job again: every message is a duplicate within the window
    assert len(fetch_all(server.url, "WR")) == 40
    # A msg_id column wins over the generated ids; binary data goes through untouched.
    bdf = spark.createDataFrame(
        [("wr.b", bytearray(b"\x00\xff"), "m-1"), ("wr.b", bytearray(b"\x01"), "m-1")],
        "subject string, data binary, msg_id string")
    bdf.coalesce(1).write.format("jetstream").option("servers", server.url).mode("append").save()
    stored = fetch_all(server.url, "WR")
    assert len(stored) == 41 and stored[-1][2] == b"\x00\xff"
    assert (stored[-1][3] or {}).get("Nats-Msg-Id") == "m-1"


def test_write_retried_task_is_deduplicated(
    spark: SparkSession, natsd_server: ServerProc
) -> None:
    """Fail a write task on purpose after it has published; the retry's ids are the same.

    On the first attempt row 150 goes to a subject no stream listens on, so its publish is
    refused and the task fails after rows 0..149 were stored. The retry publishes all 200
    rows again with the same message ids; the stream keeps each once. A plain subscriber
    sees every publish, so it proves the first attempt really published.
    """
    srv = natsd_server
    make_stream(srv.url, "RETRY", ["retry.>"], duplicate_window=60.0)
    seen: list[str] = []
    ready, done = threading.Event(), threading.Event()

    def watch() -> None:
        async def go(nc: Client) -> None:
            async def cb(msg: Msg) -> None:
                seen.append(msg.data.decode())

            await nc.subscribe("retry.>", cb=cb)
            await nc.flush()
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.05)
            await nc.flush()

        run_js(srv.url, go)

    watcher = threading.Thread(target=watch)
    watcher.start()
    ready.wait(10)

    try:
        df = spark.range(0, 200, 1, 1).select(
            failing_once("retry").alias("subject"), F.col("id").cast("string").alias("data"))
        (df.write.format("jetstream").option("servers", srv.url).option("maxPendingAcks", 4)
         .mode("append").save())
        time.sleep(0.3)
    finally:
        done.set()
        watcher.join(10)
    stored = fetch_all(srv.url, "RETRY")
    assert sorted(int(d) for _, _, d, _ in stored) == list(range(200))
    assert len(seen) >= 200 + 146, len(seen)  # the first attempt's rows, published twice
    ids = [(h or {})["Nats-Msg-Id"] for *_, h in stored]
    assert len(set(ids)) == 200


def test_writer_retry_in_process(natsd_server: ServerProc) -> None:
    """The same writer (same write id) run twice: the second run is all duplicates."""
    srv = natsd_server
    make_stream(srv.url, "WP", ["wp.>"], duplicate_window=60.0)
    w = JetStreamWriter(parse_write_options({"servers": srv.url, "maxPendingAcks": "8"}))
    batch = pa.RecordBatch.from_pydict(
        {"subject": [f"wp.{i}" for i in range(100)], "data": [b"d"] * 100})
    first = w.write(iter([batch]))
    second = w.write(iter([batch]))
    assert (first.published, first.duplicates) == (100, 0)
    assert (second.published, second.duplicates) == (100, 100)
    assert len(fetch_all(srv.url, "WP")) == 100


def test_fast_batch_write_round_trip_and_rerun(spark: SparkSession, server: ServerProc) -> None:
    """Into a stream with allow_batched (the ``stream`` option given) each task publishes one
    fast-ingest batch; a rerun of the same job stores nothing twice."""
    make_stream(server.url, "FW", ["fw.>"], duplicate_window=60.0, allow_batched=True)
    rows = [(f"fw.{i % 4}", f"v{i}", {"h": [str(i)]} if i % 3 == 0 else None)
            for i in range(3000)]
    df = spark.createDataFrame(
        rows, "subject string, data string, headers map<string,array<string>>").repartition(3)

    def write() -> None:
        (df.write.format("jetstream").option("servers", server.url).option("writeId", "job-f")
         .option("stream", "FW").mode("append").save())

    write()
    stored = fetch_all(server.url, "FW")
    assert sorted((s, d.decode()) for _, s, d, _ in stored) == sorted((s, d) for s, d, _ in rows)
    assert {(h or {}).get("h") for _, _, d, h in stored if d == b"v3"} == {"3"}
    write()
    assert len(fetch_all(server.url, "FW")) == 3000
    # In process: the writer resolved on the driver publishes fast batches (whose answers
    # do not count duplicates), 1,200 rows in one task, again all duplicates the second time.
    opts = resolve_fast_batch(parse_write_options({"servers": server.url, "stream": "FW"}))
    assert opts.use_fast
    w = JetStreamWriter(opts)
    batch = pa.RecordBatch.from_pydict(
        {"subject": [f"fw.x.{i}" for i in range(1200)], "data": [b"d"] * 1200})
    first = w.write(iter([batch]))
    again = w.write(iter([batch]))
    assert (first.published, first.duplicates, again.published) == (1200, None, 1200)
    assert len(fetch_all(server.url, "FW")) == 4200


def test_fast_batch_retried_task_is_deduplicated(
    spark: SparkSession, natsd_server: ServerProc
) -> None:
    """A fast batch cut by a message nobody takes (row 150 of the first attempt goes to a
    subject no stream listens on: the batch has a gap) fails the task; the retry's batch
    skips what the first stored."""
    srv = natsd_server
    make_stream(srv.url, "FRETRY", ["fretry.>"], duplicate_window=60.0, allow_batched=True)

    df = spark.range(0, 400, 1, 1).select(
        failing_once("fretry").alias("subject"), F.col("id").cast("string").alias("data"))
    (df.write.format("jetstream").option("servers", srv.url).option("stream", "FRETRY")
     .option("fastBatch", "true").mode("append").save())
    stored = fetch_all(srv.url, "FRETRY")
    assert sorted(int(d) for _, _, d, _ in stored) == list(range(400))
    assert len({(h or {})["Nats-Msg-Id"] for *_, h in stored}) == 400


def test_fast_publisher_idle_batches_and_refusals(server: ServerProc) -> None:
    """The fast publisher on its own: a batch idle past ``IDLE`` is committed and the next
    row starts another (each PubAck's count checked); a message the stream refuses (over
    its max_msg_size) ends the batch with the server's error."""
    make_stream(server.url, "FI", ["fi.>"], allow_batched=True, max_msg_size=64)
    batches: list[str] = []
    with Session(parse_write_options({"servers": server.url}).conn) as s:
        pub = FastPublisher(s, "FI")
        pub.IDLE = 0.2

        async def idle_run() -> None:
            await pub.start()
            for i in range(30):
                if i == 10:
                    await asyncio.sleep(0.4)
                await pub.publish("fi.a", b"%d" % i, {"Nats-Msg-Id": f"i{i}"})
                if pub._bid not in batches:
                    batches.append(pub._bid)
            await pub.finish()

        s.run(idle_run())
        assert len(batches) == 2 and pub.published == 30
        bad = FastPublisher(s, "FI")

        async def refused() -> None:
            await bad.start()
            for i in range(5):
                await bad.publish("fi.b", b"x" * (100 if i == 2 else 1), None)
            await bad.finish()

        with pytest.raises(JetStreamError, match="exceeds maximum"):
            s.run(refused())
    assert len(fetch_all(server.url, "FI")) == 32  # the idle run's 30, the refused batch's 2


def test_fast_batch_required_but_not_possible(
    spark: SparkSession, natsd_server: ServerProc
) -> None:
    srv = natsd_server
    make_stream(srv.url, "PLAIN", ["plain.>"])
    df = spark.createDataFrame([("plain.x", "d")], "subject string, data string")
    w = df.write.format("jetstream").option("servers", srv.url).option("fastBatch", "true")
    with pytest.raises(Exception, match="'fastBatch' true needs the 'stream' option"):
        w.mode("append").save()
    with pytest.raises(Exception, match="does not allow batched publishes"):
        w.option("stream", "PLAIN").mode("append").save()
    # auto (the default) publishes with a PubAck each instead
    df.write.format("jetstream").option("servers", srv.url).option("stream", "PLAIN").mode(
        "append").save()
    assert len(fetch_all(srv.url, "PLAIN")) == 1


def test_write_errors(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    df = spark.createDataFrame([("nowhere.x", "d")], "subject string, data string")
    w = df.write.format("jetstream").option("servers", srv.url)
    with pytest.raises(Exception, match="overwrite' is not supported"):
        w.mode("overwrite").save()
    with pytest.raises(Exception, match="no stream listens"):
        w.mode("append").save()
    with pytest.raises(Exception, match="column 'data' must be binary or string, not int"):
        spark.createDataFrame([("x", 1)], "subject string, data int").write.format(
            "jetstream").mode("append").save()
    with pytest.raises(Exception, match="need columns 'subject' and 'data'"):
        spark.createDataFrame([("x",)], "topic string").write.format("jetstream").mode(
            "append").save()


# --------------------------------------------------------------------------- direct-get reader
def test_direct_reader_gaps_cuts_and_filters(server: ServerProc) -> None:
    """Windows over deleted sequences, batches cut short by max_bytes, a filtered cursor."""
    from natsd_spark.client import Session
    from natsd_spark.directget import DirectRangeReader, RawReplies
    from natsd_spark.options import ConnectOptions

    make_stream(server.url, "DG", ["dg.>"])
    msgs = [(f"dg.{'odd' if i % 2 else 'even'}", b"v%d" % i * (1 + i % 7),
             {"h": str(i)} if i % 3 == 0 else None) for i in range(1, 301)]
    publish(server.url, msgs)

    async def delete(nc: Client) -> None:
        js = nc.jetstream()
        for seq in (5, 6, 7, 50, 51, 120, 299):
            await js.delete_msg("DG", seq)

    run_js(server.url, delete)
    live = {i: m for i, m in enumerate(msgs, 1) if i not in (5, 6, 7, 50, 51, 120, 299)}

    def read(lo: int, hi: int, filt: str = "", **kw: Any) -> list[tuple[int, str, bytes]]:
        with Session(ConnectOptions((server.url,), timeout=5.0)) as s:
            r = DirectRangeReader(s.client, RawReplies(s.client), "DG", lo, hi, filt,
                                  kw.pop("batch", 16), with_headers=True, **kw)
            out: list[tuple[int, str, bytes]] = []
            while (cols := s.run(r.next())) is not None:
                out += zip(cols.seqs, [x.decode() for x in cols.subjects], cols.data,
                           strict=True)
                assert cols.headers is not None and len(cols.headers) == len(cols.seqs)
            # the connection still works for ordinary requests afterwards
            assert s.stream_info("DG").messages == len(live)
            return out

    def want(lo: int, hi: int, pred: Any = lambda s: True) -> list[tuple[int, str, bytes]]:
        return [(i, m[0], m[1]) for i, m in live.items() if lo <= i < hi and pred(m[0])]

    assert read(1, 301) == want(1, 301)
    assert read(4, 52, depth=3) == want(4, 52)
    assert read(1, 301, max_bytes=40) == want(1, 301)  # every batch cut after a few replies
    assert read(1, 400, batch=1000) == want(1, 301)  # beyond the end of the stream
    assert read(290, 301, batch=1) == want(290, 301)
    assert read(1, 301, "dg.odd", batch=7) == want(1, 301, lambda s: s == "dg.odd")
    assert read(10, 60, "dg.even", batch=5, max_bytes=30) == want(
        10, 60, lambda s: s == "dg.even")
    assert read(1, 301, "dg.none") == []
