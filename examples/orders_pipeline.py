"""Orders pipeline: JSON orders on ``orders.>`` -> Spark Structured Streaming -> KV + a stream.

    .venv/bin/python examples/orders_pipeline.py                  # embedded natsd, 2000 orders
    .venv/bin/python examples/orders_pipeline.py --orders 200 --servers nats://127.0.0.1:4222

1. Creates the stream ``ORDERS`` on ``orders.>`` (file storage, limits retention, 24 h max
   age, as ``nats stream add ORDERS --subjects "orders.>" ...``) and publishes order events:
   every order is ``created``, most are then ``paid`` and ``shipped``, some ``cancelled``;
   each event is a JSON document on ``orders.<status>`` with an event time ``ts`` spread
   over the last ``--minutes`` minutes.
2. Runs two streaming queries over ``readStream.format("jetstream")`` with
   ``Trigger.AvailableNow`` (they process what is there, then stop):

   - *stats*: per minute (event time) and status, the number of events and the revenue
     (sum of ``amount``). ``outputMode("update")`` + ``foreachBatch``: each micro-batch's
     changed aggregates are put into the KV bucket ``order_stats`` (key
     ``<yyyyMMddHHmm>.<status>``) and published to the stream ``ORDER_STATS``
     (``stats.orders.<yyyyMMddHHmm>.<status>``, a changelog of the aggregates). Both batch
     writes take a ``writeId`` made of the query id and batch id, so a retried micro-batch
     is deduplicated rather than applied twice.
   - *status view*: ``writeStream.format("jetstream-kv")`` straight from the events: the KV
     bucket ``order_status`` holds each order's latest state under ``order.<id>`` (its
     history keeps the previous states).
3. Checks the results through nats-py's KV API against a batch recomputation of the same
   aggregates (``spark.read.format("jetstream")`` over the same sequences) and against what
   was published, prints a summary, and exits 1 if anything disagrees.

``--checkpoint DIR`` keeps the queries' checkpoints: run again with the same directory (and
``--servers``) and the queries resume where they stopped, adding only the new orders.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import nats.js.errors
from _common import add_server_args, server_url, source_options, spark_session, with_nats
from nats.aio.client import Client
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

ORDER_SCHEMA = ("order_id string, customer string, status string, amount decimal(10,2), "
                "currency string, ts string")
STATUSES = ("created", "paid", "shipped", "cancelled")
STATS_BUCKET, STATUS_BUCKET, STATS_STREAM = "order_stats", "order_status", "ORDER_STATS"


# ---------------------------------------------------------------------- the order generator
@dataclass(frozen=True)
class Event:
    order_id: str
    customer: str
    status: str
    amount: Decimal
    ts: datetime

    def subject(self) -> str:
        return f"orders.{self.status}"

    def payload(self) -> bytes:
        return json.dumps({
            "order_id": self.order_id, "customer": self.customer, "status": self.status,
            "amount": str(self.amount), "currency": "EUR",
            "ts": self.ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }).encode()


def generate(n: int, minutes: int, seed: int, run: str) -> list[Event]:
    """``n`` orders' lifecycles, in event-time order (as a real feed would publish them)."""
    rnd = random.Random(seed)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes)
    events: list[Event] = []
    for i in range(n):
        oid, cust = f"{run}-{i:06d}", f"c{rnd.randrange(1, 200):03d}"
        amount = Decimal(rnd.randrange(500, 25_000)) / 100
        t = start + timedelta(seconds=rnd.uniform(0, minutes * 60 - 90))
        events.append(Event(oid, cust, "created", amount, t))
        if rnd.random() < 0.85:
            t += timedelta(seconds=rnd.uniform(1, 30))
            events.append(Event(oid, cust, "paid", amount, t))
            if rnd.random() < 0.9:
                events.append(Event(oid, cust, "shipped", amount,
                                    t + timedelta(seconds=rnd.uniform(5, 55))))
                continue
        events.append(Event(oid, cust, "cancelled", amount, t + timedelta(seconds=5)))
    events.sort(key=lambda e: e.ts)
    return events


async def prepare(nc: Client) -> int:
    """Create the streams if missing; the next sequence ORDERS will assign."""
    js = nc.jetstream()
    try:
        info = await js.stream_info("ORDERS")
    except nats.js.errors.NotFoundError:
        info = await js.add_stream(name="ORDERS", subjects=["orders.>"], storage="file",
                                   retention="limits", max_age=24 * 3600.0, allow_direct=True)
    try:
        await js.stream_info(STATS_STREAM)
    except nats.js.errors.NotFoundError:
        await js.add_stream(name=STATS_STREAM, subjects=["stats.orders.>"], storage="file",
                            duplicate_window=120.0, allow_direct=True)
    return int(info.state.last_seq) + 1


async def publish(nc: Client, events: list[Event]) -> int:
    """Publish with JetStream acks, at most 256 outstanding; the last sequence."""
    js = nc.jetstream()
    window: list[asyncio.Future[Any]] = []
    last = 0
    for e in events:
        window.append(await js.publish_async(e.subject(), e.payload()))
        if len(window) >= 256:
            last = max(last, (await window.pop(0)).seq)
    for f in window:
        last = max(last, (await f).seq)
    return last


# ---------------------------------------------------------------------- the Spark side
def parse_orders(raw: DataFrame) -> DataFrame:
    o = F.from_json(F.col("data").cast("string"), ORDER_SCHEMA).alias("o")
    return (raw.select("seq", o).select("seq", "o.*")
            .withColumn("ts", F.col("ts").cast("timestamp")))


def per_minute(events: DataFrame) -> DataFrame:
    return (events.groupBy(F.window("ts", "1 minute").alias("w"), "status")
            .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("revenue")))


def stats_rows(stats: DataFrame) -> DataFrame:
    """``minute`` (yyyyMMddHHmm), status, orders, revenue, and the JSON document."""
    minute = F.date_format("w.start", "yyyyMMddHHmm")
    doc = F.to_json(F.struct(
        F.date_format("w.start", "yyyy-MM-dd'T'HH:mm'Z'").alias("minute"), "status", "orders",
        F.col("revenue").cast("string").alias("revenue")))
    return stats.select(minute.alias("minute"), "status", "orders", "revenue", doc.alias("doc"))


def run_queries(spark: SparkSession, url: str, start_seq: int, ck: Path, batch: int) -> None:
    raw = (spark.readStream.format("jetstream").options(**source_options(url))
           .option("stream", "ORDERS").option("subjects", "orders.>")
           .option("startingOffsets", str(start_seq))  # ignored once a checkpoint exists
           .option("maxMessagesPerTrigger", str(batch)).load())
    events = parse_orders(raw)

    # Spark writes the query id into the checkpoint before the first batch; together with
    # the batch id it makes the writes of a re-run micro-batch carry the same message ids.
    def write_stats(df: DataFrame, batch_id: int) -> None:
        query_id = json.loads((ck / "stats" / "metadata").read_text())["id"]
        rows = stats_rows(df).persist()  # used twice; compute the aggregation once
        try:
            (rows.select(F.concat_ws(".", "minute", "status").alias("key"),
                         F.col("doc").alias("value"))
             .write.format("jetstream-kv").options(**source_options(url))
             .option("bucket", STATS_BUCKET).option("createBucket", "true")
             .option("history", "5").option("writeId", f"{query_id}:{batch_id}")
             .mode("append").save())
            (rows.select(F.concat_ws(".", F.lit("stats.orders"), "minute", "status")
                         .alias("subject"), F.col("doc").alias("data"))
             .write.format("jetstream").options(**source_options(url))
             .option("stream", STATS_STREAM).option("writeId", f"{query_id}:{batch_id}")
             .mode("append").save())
        finally:
            rows.unpersist()

    # The watermark lets Spark drop the state of minutes that can no longer change. Spark
    # then follows each micro-batch by a "no-data" batch that only evicts state; this
    # session turns those off (spark.sql.streaming.noDataMicroBatches.enabled), as in update
    # mode they would publish nothing and cost a Spark job each.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    stats_q = (per_minute(events.withWatermark("ts", "10 minutes"))
               .writeStream.queryName("order_stats").outputMode("update")
               .foreachBatch(write_stats)
               .option("checkpointLocation", str(ck / "stats"))
               .trigger(availableNow=True).start())

    # A micro-batch below maxPartitionSize (100,000) is one source partition read in stream
    # order, and the sink puts a partition's rows in order: each order's latest event wins.
    status_q = (events.select(
        F.concat(F.lit("order."), "order_id").alias("key"),
        F.to_json(F.struct("status", F.col("amount").cast("string").alias("amount"),
                           F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("ts"),
                           "seq")).alias("value"))
        .writeStream.queryName("order_status").format("jetstream-kv")
        .options(**source_options(url)).option("bucket", STATUS_BUCKET)
        .option("createBucket", "true").option("history", "5")
        .option("checkpointLocation", str(ck / "status"))
        .trigger(availableNow=True).start())
    for q in (stats_q, status_q):
        q.awaitTermination()
        progress = q.recentProgress
        batches = [p for p in progress if p["numInputRows"]]
        took = sum(int(p["durationMs"].get("triggerExecution", 0)) for p in progress) / 1000
        print(f"query {q.name}: {len(batches)} micro-batch(es), "
              f"{sum(int(p['numInputRows']) for p in batches)} events, {took:.1f} s")


# ---------------------------------------------------------------------- checks and summary
async def read_bucket(nc: Client, bucket: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    kv = await nc.jetstream().key_value(bucket)
    out: dict[str, dict[str, Any]] = {}
    for k in keys:
        try:
            entry = await kv.get(k)
        except nats.js.errors.KeyNotFoundError:
            continue
        out[k] = json.loads(entry.value or b"{}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_server_args(p)
    p.add_argument("--orders", type=int, default=2000, help="orders to generate (default 2000)")
    p.add_argument("--minutes", type=int, default=5, help="event-time span in minutes")
    p.add_argument("--batch", type=int, default=1000, help="maxMessagesPerTrigger")
    p.add_argument("--checkpoint", help="checkpoint directory (default: a fresh temp dir)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.checkpoint:
            ck = Path(args.checkpoint)
        else:  # removed at the end: a fresh query each run
            ck = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="orders-ck-")))
        return pipeline(args, ck, stack.enter_context(server_url(args)))


def pipeline(args: argparse.Namespace, ck: Path, url: str) -> int:
    run = uuid.uuid4().hex[:6]
    start_seq = with_nats(url, prepare)
    events = generate(args.orders, max(2, args.minutes), args.seed, run)
    last_seq = with_nats(url, lambda nc: publish(nc, events))
    print(f"published {len(events)} events of {args.orders} orders to orders.> "
          f"(ORDERS seq {start_seq}..{last_seq})")
    # The first run with a checkpoint directory fixes where its queries start.
    first = ck / "first-seq"
    if not first.exists():
        ck.mkdir(parents=True, exist_ok=True)
        first.write_text(str(start_seq))
    origin = int(first.read_text())

    spark = spark_session("orders-pipeline")
    try:
        run_queries(spark, url, origin, ck, args.batch)
        # The reference: the same aggregation as a batch job over the same sequences.
        batch = (spark.read.format("jetstream").options(**source_options(url))
                 .option("stream", "ORDERS").option("startingOffsets", str(origin))
                 .option("endingOffsets", str(last_seq + 1)).load())
        expected = {
            f"{r.minute}.{r.status}": (int(r.orders), Decimal(r.revenue))
            for r in stats_rows(per_minute(parse_orders(batch))).collect()}
    finally:
        spark.stop()

    order_keys = sorted({f"order.{e.order_id}" for e in events})
    stats = with_nats(url, lambda nc: read_bucket(nc, STATS_BUCKET, sorted(expected)))
    status = with_nats(url, lambda nc: read_bucket(nc, STATUS_BUCKET, order_keys))

    async def stream_count(nc: Client) -> int:
        return int((await nc.jetstream().stream_info(STATS_STREAM)).state.messages)

    changelog = with_nats(url, stream_count)

    # ------------------------------------------------------------------ report
    problems: list[str] = []
    print(f"\nper-minute stats in KV bucket {STATS_BUCKET!r} ({len(stats)} keys):")
    print(f"  {'minute (UTC)':<17} {'status':<10} {'events':>7} {'revenue':>12}")
    totals: dict[str, list[Any]] = {s: [0, Decimal(0)] for s in STATUSES}
    for key in sorted(expected):
        want = expected[key]
        got = stats.get(key)
        if got is None:
            problems.append(f"{key}: missing from bucket {STATS_BUCKET}")
            continue
        have = (int(got["orders"]), Decimal(got["revenue"]))
        if have != want:
            problems.append(f"{key}: KV has {have}, batch recomputation {want}")
        totals[got["status"]][0] += have[0]
        totals[got["status"]][1] += have[1]
        print(f"  {got['minute'][:16].replace('T', ' '):<17} {got['status']:<10} "
              f"{have[0]:>7} {have[1]:>12}")
    print("\ntotals per status (KV" + (", since this checkpoint's first run" if args.checkpoint
                                       else "") + ") vs published by this run:")
    published = Counter(e.status for e in events)
    for s in STATUSES:
        rev = sum((e.amount for e in events if e.status == s), Decimal(0))
        print(f"  {s:<10} events {totals[s][0]:>6} (published {published[s]:>6})   "
              f"revenue {totals[s][1]:>12} (published {rev:>12})")
        if args.checkpoint is None and (totals[s][0], totals[s][1]) != (published[s], rev):
            problems.append(f"status {s}: KV totals differ from what was published")

    final = {}
    for e in events:  # events are in time order: the last one is the order's state
        final[f"order.{e.order_id}"] = e.status
    wrong = [k for k, st in final.items() if status.get(k, {}).get("status") != st]
    by_status = Counter(v["status"] for v in status.values())
    print(f"\norder status view in KV bucket {STATUS_BUCKET!r}: {len(status)} orders "
          f"({', '.join(f'{s} {by_status[s]}' for s in STATUSES if by_status[s])}); "
          f"{len(wrong)} not at their latest state")
    if wrong:
        problems.append(f"{len(wrong)} orders not at their latest state, e.g. {wrong[:3]}")
    print(f"stream {STATS_STREAM}: {changelog} aggregate updates (stats.orders.>)")

    if problems:
        print("\nCHECKS FAILED:\n  " + "\n  ".join(problems[:20]))
        return 1
    print("\nall checks passed: KV matches the batch recomputation and the published orders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
