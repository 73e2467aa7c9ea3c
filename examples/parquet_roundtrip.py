"""Batch export of a stream to Parquet, partitioned by subject and date, and replay back.

    .venv/bin/python examples/parquet_roundtrip.py                 # embedded natsd, 5000 msgs
    .venv/bin/python examples/parquet_roundtrip.py --servers nats://127.0.0.1:4222 \\
        --stream ORDERS --out /tmp/orders-parquet

1. If the source stream (``--stream``, default ``ORDERS`` on ``orders.>``) does not exist,
   creates it and publishes ``--messages`` sample order events (some with headers).
2. Export: ``spark.read.format("jetstream")`` with ``includeHeaders``, a ``date`` column
   from the message timestamp, ``write.partitionBy("subject", "date").parquet(--out)``:
   one directory per subject and day, as a data lake would keep it.
3. Replay: reads the Parquet back and publishes every row to ``--target`` (default
   ``<stream>_REPLAY``, subjects ``replay.>``; subject ``replay.<original subject>``) with
   ``write.format("jetstream")``. Rows are grouped by subject and sorted by the original
   sequence inside each Spark partition, so every subject keeps its order (as Kafka keeps a
   key's order). The message id is ``<stream>:<seq>``: replaying the same export again
   within the target's duplicate window stores nothing twice.
4. Checks: stream messages = exported rows = Parquet rows = replayed messages, and the
   replayed (subject, data, headers) are the originals; prints the counts; exits 1 if not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import nats.js.errors
from _common import add_server_args, server_url, source_options, spark_session, with_nats
from nats.aio.client import Client
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

STATUSES = ("created", "paid", "shipped", "cancelled")


async def ensure_source(nc: Client, stream: str, messages: int, seed: int) -> int:
    """Create and fill the source stream if missing; its message count."""
    js = nc.jetstream()
    try:
        return int((await js.stream_info(stream)).state.messages)
    except nats.js.errors.NotFoundError:
        pass
    subject_root = stream.lower()
    await js.add_stream(name=stream, subjects=[f"{subject_root}.>"], storage="file",
                        allow_direct=True)
    rnd = random.Random(seed)
    window: list[asyncio.Future[Any]] = []
    for i in range(messages):
        status = rnd.choice(STATUSES)
        doc = {"order_id": f"o{i:06d}", "status": status,
               "amount": f"{rnd.randrange(500, 25_000) / 100:.2f}"}
        headers = {"Source": "generator", "Batch": str(i // 100)} if i % 3 == 0 else None
        window.append(await js.publish_async(
            f"{subject_root}.{status}", json.dumps(doc).encode(), headers=headers))
        if len(window) >= 256:
            await window.pop(0)
    for f in window:
        await f
    print(f"created stream {stream} ({subject_root}.>) with {messages} sample messages")
    return messages


async def ensure_target(nc: Client, target: str) -> int:
    js = nc.jetstream()
    try:
        return int((await js.stream_info(target)).state.messages)
    except nats.js.errors.NotFoundError:
        await js.add_stream(name=target, subjects=["replay.>"], storage="file",
                            duplicate_window=300.0, allow_direct=True)
        return 0


def canonical(df: DataFrame) -> DataFrame:
    """(subject, data, headers) in a form that compares exactly (headers as sorted JSON)."""
    hdrs = F.when(F.col("headers").isNull(), F.lit(None)).otherwise(
        F.to_json(F.array_sort(F.map_entries("headers"))))
    return df.select("subject", F.sha2("data", 256).alias("data"), hdrs.alias("headers"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_server_args(p)
    p.add_argument("--stream", default="ORDERS", help="stream to export (default ORDERS)")
    p.add_argument("--target", help="stream to replay into (default <stream>_REPLAY)")
    p.add_argument("--messages", type=int, default=5000,
                   help="sample messages when the source stream must be created")
    p.add_argument("--out", help="keep the Parquet files in this directory (the export "
                   "replaces <out>/<stream>); default: a temporary directory, removed")
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        root = args.out or stack.enter_context(  # removed at the end unless --out is given
            tempfile.TemporaryDirectory(prefix="jetstream-parquet-"))
        return roundtrip(args, Path(root) / args.stream, stack.enter_context(server_url(args)))


def roundtrip(args: argparse.Namespace, out: Path, url: str) -> int:
    target = args.target or f"{args.stream}_REPLAY"
    in_stream = with_nats(url, lambda nc: ensure_source(nc, args.stream, args.messages,
                                                        args.seed))
    before = with_nats(url, lambda nc: ensure_target(nc, target))
    spark = spark_session("parquet-roundtrip")
    try:
        # ---- export
        src = (spark.read.format("jetstream").options(**source_options(url))
               .option("stream", args.stream).option("includeHeaders", "true")
               .option("minPartitions", "2").load())
        exported = src.withColumn("date", F.to_date("timestamp")).persist()
        n_exported = exported.count()
        shutil.rmtree(out, ignore_errors=True)
        exported.write.partitionBy("subject", "date").mode("overwrite").parquet(str(out))
        exported.unpersist()
        parts = sorted(str(d.relative_to(out)) for d in out.glob("subject=*/date=*"))
        files = len(list(out.rglob("*.parquet")))
        print(f"exported {n_exported} messages of stream {args.stream} to {out}: "
              f"{len(parts)} partitions, {files} files")
        for d in parts:
            print(f"  {d}")

        # ---- replay
        lake = spark.read.parquet(str(out))
        n_parquet = lake.count()
        replay = (lake.repartition(2, "subject").sortWithinPartitions("seq")
                  .select(F.concat(F.lit("replay."), "subject").alias("subject"), "data",
                          "headers",
                          F.concat_ws(":", "stream", F.col("seq").cast("string"))
                          .alias("msg_id")))
        replay.write.format("jetstream").options(**source_options(url)).option("stream", target) \
            .mode("append").save()
        after = with_nats(url, lambda nc: ensure_target(nc, target))
        n_replayed = after - before
        print(f"replayed {n_parquet} Parquet rows into stream {target}: {after} messages "
              f"({n_replayed} new)")

        # ---- compare contents: the replayed messages minus the prefix are the originals
        back = (spark.read.format("jetstream").options(**source_options(url))
                .option("stream", target).option("includeHeaders", "true").load()
                .withColumn("subject", F.expr("substring(subject, 8)"))
                .withColumn("headers", F.map_filter(
                    "headers", lambda k, _v: k != "Nats-Msg-Id"))
                .withColumn("headers", F.when(F.size("headers") > 0, F.col("headers"))))
        orig = canonical(lake.withColumn("headers", F.map_filter(
            "headers", lambda k, _v: k != "Nats-Msg-Id")))
        # One shuffle instead of two exceptAll jobs: +1 per original, -1 per replayed
        # copy; a group that does not sum to 0 is a difference.
        diff = (orig.withColumn("n", F.lit(1))
                .unionByName(canonical(back).withColumn("n", F.lit(-1)))
                .groupBy("subject", "data", "headers").agg(F.sum("n").alias("n"))
                .where("n != 0").groupBy().agg(
                    F.coalesce(F.sum(F.when(F.col("n") > 0, F.col("n"))), F.lit(0))
                    .alias("missing"),
                    F.coalesce(F.sum(F.when(F.col("n") < 0, -F.col("n"))), F.lit(0))
                    .alias("extra"))
                .first())
        assert diff is not None
        missing = int(diff["missing"])
        # A target that held messages before this run has more than the originals.
        extra = int(diff["extra"]) if before == 0 else 0
    finally:
        spark.stop()

    counts = {"stream": in_stream, "exported": n_exported, "parquet": n_parquet,
              "replayed": n_replayed}
    print("\ncounts: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    problems = []
    if before:
        # Replaying into a non-empty target: ids already stored within its duplicate
        # window are not stored again, so only the contents check applies.
        print(f"(target {target} held {before} messages before this run)")
        counts.pop("replayed")
    if len(set(counts.values())) != 1:
        problems.append(f"counts differ: {counts}")
    if missing or extra:
        problems.append(f"contents differ: {missing} originals not replayed, {extra} unexpected")
    if problems:
        print("CHECKS FAILED: " + "; ".join(problems))
        return 1
    print("all checks passed: every message went to Parquet and back unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
