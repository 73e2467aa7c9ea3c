"""Streaming reads (``readStream.format("jetstream")``) and writes, with checkpoints."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client
from pyspark.sql import DataFrame, SparkSession

from natsd_spark.options import parse_read_options
from natsd_spark.source import JetStreamStreamReader

from .conftest import ServerProc, fetch_all, make_stream, publish, run_js


def stream_df(spark: SparkSession, srv: ServerProc, stream: str, **opts: Any) -> DataFrame:
    r = spark.readStream.format("jetstream").option("servers", srv.url).option("stream", stream)
    for k, v in opts.items():
        r = r.option(k, str(v))
    return r.load()


def run_available_now(df: DataFrame, out: Path, fmt: str = "parquet", **opts: str) -> list[int]:
    """Run the query to the end of what is available; the rows per micro-batch."""
    w = df.writeStream.format(fmt).option("checkpointLocation", str(out / "ck"))
    if fmt == "parquet":
        w = w.option("path", str(out / "data"))
    for k, v in opts.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    try:
        q.awaitTermination(120)
    except Exception as e:  # StreamingQueryException: surface the source's message
        raise RuntimeError(str(e)) from e
    if q.isActive:
        q.stop()
        raise RuntimeError("query did not finish within 120 s")
    return [int(p["numInputRows"]) for p in q.recentProgress if p["numInputRows"]]


def test_available_now_twice_exactly_once(spark: SparkSession, server: ServerProc) -> None:
    """Stop after what is there, publish more, restart from the checkpoint: each message once."""
    make_stream(server.url, "ST", ["st.>"])
    publish(server.url, [(f"st.{i % 2}", f"a{i}".encode(), None) for i in range(25)])
    out = Path(tempfile.mkdtemp())
    df = stream_df(spark, server, "ST", startingOffsets="earliest", maxMessagesPerTrigger=10)
    assert run_available_now(df, out) == [10, 10, 5]
    publish(server.url, [(f"st.{i % 2}", f"b{i}".encode(), None) for i in range(15)])
    assert run_available_now(df, out) == [10, 5]
    rows = spark.read.parquet(str(out / "data")).select("seq", "data").collect()
    assert sorted(r.seq for r in rows) == list(range(1, 41))
    assert sorted(bytes(r.data) for r in rows) == sorted(
        [f"a{i}".encode() for i in range(25)] + [f"b{i}".encode() for i in range(15)])
    assert run_available_now(df, out) == []  # nothing new: no batch


def test_filter_and_latest_start(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "SL", ["sl.>"])
    publish(srv.url, [("sl.old", b"x", None)] * 5)
    out = Path(tempfile.mkdtemp())
    df = stream_df(spark, srv, "SL", subjects="sl.new")  # startingOffsets defaults to latest
    assert run_available_now(df, out) == []
    publish(srv.url, [("sl.new", b"n", None), ("sl.old", b"o", None), ("sl.new", b"m", None)])
    assert run_available_now(df, out) == [2]
    assert sorted(r.seq for r in spark.read.parquet(str(out / "data")).collect()) == [6, 8]


def test_initial_offset_is_stable(natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "IO", ["io.>"])
    publish(srv.url, [("io.a", b"1", None)] * 3)
    r = JetStreamStreamReader(parse_read_options(
        {"servers": srv.url, "stream": "IO", "startingOffsets": "latest"}, streaming=True))
    first = r.initialOffset()
    publish(srv.url, [("io.a", b"2", None)] * 3)
    assert r.initialOffset() == first == {"seq": 4}
    # An empty micro-batch plans no partitions; Spark then hands read() InputPartition(None).
    assert list(r.partitions({"seq": 4}, {"seq": 4})) == []
    from pyspark.sql.datasource import InputPartition

    assert list(r.read(InputPartition(None))) == []


def test_fail_on_data_loss(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "DL", ["dl.>"], max_msgs=5)
    publish(srv.url, [("dl.a", b"x", None)] * 3)
    out = Path(tempfile.mkdtemp())
    df = stream_df(spark, srv, "DL", startingOffsets="earliest")
    assert run_available_now(df, out) == [3]
    publish(srv.url, [("dl.a", b"y", None)] * 10)  # seqs 4..13; limits keep 9..13
    with pytest.raises(RuntimeError, match=r"no longer holds sequences 4\.\.8"):
        run_available_now(df, out)
    lossy = stream_df(spark, srv, "DL", startingOffsets="earliest", failOnDataLoss="false")
    assert run_available_now(lossy, out) == [5]


def test_fail_on_data_loss_by_max_age(spark: SparkSession, natsd_server: ServerProc) -> None:
    """Messages aged out by max_age between micro-batches are data loss too. max_age is
    switched on only while the unread messages age out, so the reads never race it."""
    srv = natsd_server

    def set_max_age(seconds: float) -> None:
        async def go(nc: Client) -> None:
            await nc.jetstream().update_stream(name="DA", subjects=["da.>"], max_age=seconds)

        run_js(srv.url, go)

    make_stream(srv.url, "DA", ["da.>"])
    publish(srv.url, [("da.a", b"x", None)] * 3)
    out = Path(tempfile.mkdtemp())
    df = stream_df(spark, srv, "DA", startingOffsets="earliest")
    assert run_available_now(df, out) == [3]
    publish(srv.url, [("da.a", b"y", None)] * 4)  # seqs 4..7, never read
    set_max_age(0.5)
    deadline = time.monotonic() + 10
    while fetch_all(srv.url, "DA") and time.monotonic() < deadline:
        time.sleep(0.1)
    set_max_age(0)
    publish(srv.url, [("da.a", b"z", None)] * 2)  # seqs 8..9
    with pytest.raises(RuntimeError, match=r"no longer holds sequences 4\.\.7"):
        run_available_now(df, out)
    lossy = stream_df(spark, srv, "DA", startingOffsets="earliest", failOnDataLoss="false")
    assert run_available_now(lossy, out) == [2]


def test_stream_to_stream_write(spark: SparkSession, server: ServerProc) -> None:
    """jetstream -> jetstream: ids from query id + batch id, so the output has no duplicates."""
    make_stream(server.url, "SRC", ["src.>"])
    make_stream(server.url, "DST", ["dst.>"], duplicate_window=60.0)
    publish(server.url, [(f"src.{i}", f"d{i}".encode(), None) for i in range(12)])
    out = Path(tempfile.mkdtemp())
    df = stream_df(spark, server, "SRC", startingOffsets="earliest", maxMessagesPerTrigger=5)
    mapped = df.selectExpr("concat('dst.', subject) AS subject", "data")
    opts = {"servers": server.url, "stream": "DST"}
    assert run_available_now(mapped, out, fmt="jetstream", **opts) == [5, 5, 2]
    time.sleep(0.1)
    publish(server.url, [("src.late", b"late", None)])
    assert run_available_now(mapped, out, fmt="jetstream", **opts) == [1]
    stored = fetch_all(server.url, "DST")
    assert [(s, d) for _, s, d, _ in stored] == [
        (f"dst.src.{i}", f"d{i}".encode()) for i in range(12)] + [("dst.src.late", b"late")]
    ids = [(h or {})["Nats-Msg-Id"] for *_, h in stored]
    assert len(set(ids)) == 13
