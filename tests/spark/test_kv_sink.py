"""The KV sink (``format("jetstream-kv")``), checked through nats-py's own KV API."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats.js.errors
import pyarrow as pa
import pytest
from nats.aio.client import Client
from ports import free_port
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

from natsd_spark import JetStreamKVDataSource
from natsd_spark.kv_sink import KVWriter, invalid_key_reason, parse_kv_write_options

from .conftest import ServerProc, make_stream, publish, run_js


@pytest.fixture(scope="module", autouse=True)
def _register(spark: SparkSession) -> None:
    spark.dataSource.register(JetStreamKVDataSource)


def kv_writer(df: DataFrame, srv: ServerProc, bucket: str, **opts: Any) -> DataFrameWriter:
    w = df.write.format("jetstream-kv").option("servers", srv.url).option("bucket", bucket)
    for k, v in opts.items():
        w = w.option(k, str(v))
    return w


def kv_state(url: str, bucket: str, keys: list[str]) -> dict[str, Any]:
    """key -> value bytes, or the delete marker's operation ("DEL"/"PURGE"), or None."""

    async def go(nc: Client) -> dict[str, Any]:
        kv = await nc.jetstream().key_value(bucket)
        out: dict[str, Any] = {}
        for k in keys:
            try:
                # nats-py hands an empty value over as None
                out[k] = (await kv.get(k)).value or b""
            except nats.js.errors.KeyNotFoundError as e:
                out[k] = e.op
        return out

    return run_js(url, go)


def kv_history(url: str, bucket: str, key: str) -> list[tuple[str | None, bytes | None]]:
    async def go(nc: Client) -> list[tuple[str | None, bytes | None]]:
        kv = await nc.jetstream().key_value(bucket)
        # empty values come back as b"" or None depending on the nats-py call: use None
        return [(e.operation, e.value or None) for e in await kv.history(key)]

    return run_js(url, go)


def make_bucket(url: str, bucket: str, history: int = 1) -> None:
    async def go(nc: Client) -> None:
        js = nc.jetstream()
        try:
            await js.delete_key_value(bucket)
        except nats.js.errors.NotFoundError:
            pass
        await js.create_key_value(bucket=bucket, history=history)

    run_js(url, go)


def test_put_delete_purge(spark: SparkSession, server: ServerProc) -> None:
    """Puts, binary values, DEL markers for null values, purge mode; read by nats-py."""
    make_bucket(server.url, "MV", history=5)
    rows = [(f"user.{i}", f"v{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)
    kv_writer(df, server, "MV").mode("append").save()
    keys = [k for k, _ in rows]
    assert kv_state(server.url, "MV", keys) == {k: v.encode() for k, v in rows}

    changes = spark.createDataFrame(
        [("user.1", bytearray(b"\x00\xff")), ("user.2", None), ("a/b=c_d-e", bytearray(b""))],
        "key string, value binary",
    ).coalesce(1)
    kv_writer(changes, server, "MV").mode("append").save()
    got = kv_state(server.url, "MV", ["user.1", "user.2", "a/b=c_d-e", "user.3"])
    assert got == {"user.1": b"\x00\xff", "user.2": "DEL", "a/b=c_d-e": b"", "user.3": b"v3"}
    assert kv_history(server.url, "MV", "user.2") == [(None, b"v2"), ("DEL", None)]

    purge = spark.createDataFrame([("user.1", None)], "key string, value string")
    kv_writer(purge, server, "MV", nullValues="purge").mode("append").save()
    # A purge rolls the key's history up to the marker alone.
    assert kv_history(server.url, "MV", "user.1") == [("PURGE", None)]


def test_create_bucket_and_missing_bucket(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    df = spark.createDataFrame([("k", "1")], "key string, value string")
    with pytest.raises(Exception, match=r"bucket 'NEW' does not exist.*createBucket=true"):
        kv_writer(df, srv, "NEW").mode("append").save()
    kv_writer(df, srv, "NEW", createBucket="true", history=3).mode("append").save()
    kv_writer(df.selectExpr("key", "'2' AS value"), srv, "NEW", createBucket="true").mode(
        "append"
    ).save()

    async def status(nc: Client) -> tuple[int, int]:
        st = await (await nc.jetstream().key_value("NEW")).status()
        return st.history, st.values

    assert run_js(srv.url, status) == (3, 2)
    assert kv_state(srv.url, "NEW", ["k"]) == {"k": b"2"}


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("has space", "only hold letters"),
        (".lead", "start or end"),
        ("trail.", "start or end"),
        ("a..b", "'..'"),
        ("wild.*", "only hold letters"),
        ("", "empty"),
        (None, "null"),
    ],
)
def test_invalid_key_reason(key: str | None, reason: str) -> None:
    why = invalid_key_reason(key)
    assert why is not None and reason in why
    assert invalid_key_reason("ok.key-1/x_y=z") is None


def test_invalid_key_fails_the_write(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_bucket(srv.url, "BADKEY")
    df = spark.createDataFrame([("fine", "1"), ("not fine", "2")], "key string, value string")
    with pytest.raises(Exception, match=r"invalid key 'not fine' in row 1 of partition 0"):
        kv_writer(df.coalesce(1), srv, "BADKEY").mode("append").save()
    # The batch is checked before any of it is written.
    assert kv_state(srv.url, "BADKEY", ["fine"]) == {"fine": None}
    nulls = spark.createDataFrame([("k", None)], "key string, value string")
    with pytest.raises(Exception, match="null value and option nullValues is 'error'"):
        kv_writer(nulls, srv, "BADKEY", nullValues="error").mode("append").save()


@pytest.mark.parametrize(
    ("opts", "schema", "message"),
    [
        ({}, "key string, value string", "option 'bucket' is required"),
        ({"bucket": "a.b"}, "key string, value string", "invalid bucket name 'a.b'"),
        ({"bucket": "B", "history": "65"}, "key string, value string", "must be <= 64"),
        ({"bucket": "B", "nullValues": "skip"}, "key string, value string", "'nullValues'"),
        ({"bucket": "B", "stream": "X"}, "key string, value string", "unknown jetstream-kv"),
        ({"bucket": "B"}, "key string, value int", "'value' must be binary or string"),
        ({"bucket": "B"}, "k string, value string", "need columns 'key' and 'value'"),
        ({"bucket": "B"}, "key string, value string, x int", r"unexpected \['x'\]"),
    ],
)
def test_bad_options_and_columns(
    spark: SparkSession,
    natsd_server: ServerProc,
    opts: dict[str, str],
    schema: str,
    message: str,
) -> None:
    n = len(schema.split(","))
    df = spark.createDataFrame([tuple(["1"] * n)], schema.replace("int", "string")).selectExpr(
        *[f"CAST({c.split()[0]} AS {c.split()[1]})" for c in schema.split(", ")]
    )
    w = df.write.format("jetstream-kv").option("servers", natsd_server.url)
    for k, v in opts.items():
        w = w.option(k, v)
    with pytest.raises(Exception, match=message):
        w.mode("append").save()


def test_save_modes(spark: SparkSession, natsd_server: ServerProc) -> None:
    make_bucket(natsd_server.url, "MODES")
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    with pytest.raises(Exception, match=r"'overwrite' is not supported.*mode\('append'\)"):
        kv_writer(df, natsd_server, "MODES").mode("overwrite").save()
    with pytest.raises(Exception, match='cannot be written in the "ErrorIfExists" mode'):
        kv_writer(df, natsd_server, "MODES").save()  # Spark refuses before asking us


def test_retried_write_does_not_rewind(natsd_server: ServerProc) -> None:
    """A retried task repeats its message ids, so it cannot put an older value back."""
    srv = natsd_server
    make_bucket(srv.url, "RETRY", history=10)
    opts = {"servers": srv.url, "bucket": "RETRY", "maxPendingAcks": "4"}
    first = KVWriter(parse_kv_write_options(opts))
    batch = pa.RecordBatch.from_pydict(
        {"key": [f"k{i}" for i in range(20)], "value": [b"old"] * 20}
    )
    assert first.write(iter([batch])).puts == 20
    newer = pa.RecordBatch.from_pydict({"key": ["k3"], "value": [b"new"]})
    KVWriter(parse_kv_write_options(opts)).write(iter([newer]))
    retry = first.write(iter([batch]))  # the same write id: every put is a duplicate
    assert (retry.puts, retry.duplicates) == (20, 20)
    state = kv_state(srv.url, "RETRY", ["k2", "k3"])
    assert state == {"k2": b"old", "k3": b"new"}
    assert len(kv_history(srv.url, "RETRY", "k3")) == 2


def test_stream_to_kv_latest_per_subject(spark: SparkSession, server: ServerProc) -> None:
    """readStream jetstream -> writeStream jetstream-kv: a last-value-per-subject view."""
    make_stream(server.url, "DEV", ["dev.>"])
    make_bucket(server.url, "LATEST")
    publish(server.url, [(f"dev.{i % 4}", f"r{i}".encode(), None) for i in range(20)])
    ck = Path(tempfile.mkdtemp())

    def run() -> list[int]:
        df = (
            spark.readStream.format("jetstream")
            .option("servers", server.url)
            .option("stream", "DEV")
            .option("startingOffsets", "earliest")
            .load()
            # one partition keeps each subject's puts in stream order
            .coalesce(1)
            .selectExpr("subject AS key", "data AS value")
        )
        q = (
            df.writeStream.format("jetstream-kv")
            .option("servers", server.url)
            .option("bucket", "LATEST")
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert not q.isActive and q.exception() is None
        return [int(p["numInputRows"]) for p in q.recentProgress if p["numInputRows"]]

    assert run() == [20]
    keys = [f"dev.{i}" for i in range(4)]
    assert kv_state(server.url, "LATEST", keys) == {
        f"dev.{j}": f"r{16 + j}".encode() for j in range(4)
    }
    publish(server.url, [("dev.1", b"later", None)])
    assert run() == [1]  # resumed from the checkpoint: only the new message
    assert kv_state(server.url, "LATEST", ["dev.1"]) == {"dev.1": b"later"}
    assert len(kv_history(server.url, "LATEST", "dev.1")) == 1  # history=1 bucket


def test_complete_mode_is_refused(spark: SparkSession, natsd_server: ServerProc) -> None:
    srv = natsd_server
    make_stream(srv.url, "AGG", ["agg.>"])
    make_bucket(srv.url, "AGGKV")
    publish(srv.url, [("agg.a", b"1", None)])
    counts = (
        spark.readStream.format("jetstream")
        .option("servers", srv.url)
        .option("stream", "AGG")
        .option("startingOffsets", "earliest")
        .load()
        .groupBy("subject")
        .count()
        .selectExpr("subject AS key", "CAST(count AS STRING) AS value")
    )
    q = (
        counts.writeStream.format("jetstream-kv")
        .option("servers", srv.url)
        .option("bucket", "AGGKV")
        .outputMode("complete")
        .option("checkpointLocation", tempfile.mkdtemp())
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="output mode 'complete' is not supported"):
        q.awaitTermination(120)


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    """A natsd that wants user ``spark`` / password ``s3cret``; its URL without credentials."""
    port = free_port()
    store = tempfile.mkdtemp(prefix="kv-auth-")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "natsd",
            "-js",
            "-sd",
            store,
            "-p",
            str(port),
            "-a",
            "127.0.0.1",
            "--user",
            "spark",
            "--pass",
            "s3cret",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "natsd did not start"
            time.sleep(0.1)
    yield f"nats://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def test_credentials(spark: SparkSession, auth_url: str) -> None:
    df = spark.createDataFrame([("k", "v")], "key string, value string")

    def write(**opts: str) -> None:
        w = df.write.format("jetstream-kv").option("servers", auth_url).option("bucket", "AUTH")
        for k, v in opts.items():
            w = w.option(k, v)
        w.option("createBucket", "true").mode("append").save()

    with pytest.raises(Exception, match="cannot connect"):
        write(user="spark", password="wrong")
    with pytest.raises(Exception, match="'user' and 'password' must be given together"):
        write(user="spark")
    write(user="spark", password="s3cret")

    async def get(nc: Client) -> bytes | None:
        return (await (await nc.jetstream().key_value("AUTH")).get("k")).value

    url = auth_url.replace("nats://", "nats://spark:s3cret@")
    assert run_js(url, get) == b"v"
