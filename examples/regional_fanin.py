"""Regional fan-in: two regional streams sourced into one stream, read by Spark as one table.

    .venv/bin/python examples/regional_fanin.py                  # embedded natsd, 2 x 2000 sales
    .venv/bin/python examples/regional_fanin.py --servers nats://127.0.0.1:4222 --sales 500

1. Creates one stream per region, ``SALES_EU`` on ``sales.eu.>`` and ``SALES_US`` on
   ``sales.us.>`` (as each region's own servers would hold them), and publishes ``--sales``
   sale events into each: a JSON document ``{"store", "sku", "amount"}`` on
   ``sales.<region>.<store>``.
2. Creates ``SALES_ALL`` with ``sources`` on both (as ``nats stream add SALES_ALL --source
   SALES_EU --source SALES_US``): the server copies every regional message into it, once,
   each with a ``Nats-Stream-Source`` header naming the regional stream and sequence it
   came from. Regional messages published later are copied as they arrive.
3. Reads ``SALES_ALL`` with ``spark.read.format("jetstream")`` (headers included) and
   aggregates it: revenue and sales per region and store, and how many rows came from each
   regional stream (from ``Nats-Stream-Source``).
4. Checks the aggregates against what was published, prints them, exits 1 if they differ.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from collections import defaultdict
from decimal import Decimal
from typing import Any

from _common import add_server_args, server_url, source_options, spark_session, with_nats
from nats.aio.client import Client
from pyspark.sql import functions as F

REGIONS = {"eu": ("paris", "berlin", "madrid"), "us": ("boston", "denver")}
ALL = "SALES_ALL"


def stream_of(region: str) -> str:
    return f"SALES_{region.upper()}"


async def publish_sales(
    nc: Client, per_region: int, seed: int
) -> dict[tuple[str, str], list[Any]]:
    """The regional streams, filled; what was published per (region, store): [count, sum]."""
    js = nc.jetstream()
    for region in REGIONS:
        await js.add_stream(name=stream_of(region), subjects=[f"sales.{region}.>"],
                            storage="file")
    rnd = random.Random(seed)
    want: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, Decimal(0)])
    acks = []
    for region, stores in REGIONS.items():
        for _ in range(per_region):
            store = rnd.choice(stores)
            amount = Decimal(rnd.randrange(100, 50_000)) / 100
            doc = {"store": store, "sku": f"sku-{rnd.randrange(40):02d}", "amount": str(amount)}
            acks.append(await js.publish_async(f"sales.{region}.{store}",
                                               json.dumps(doc).encode()))  # fmt: skip
            want[(region, store)][0] += 1
            want[(region, store)][1] += amount
            if len(acks) >= 500:
                await asyncio.gather(*acks)
                acks = []
    await asyncio.gather(*acks)
    return want


async def fan_in(nc: Client, total: int, wait: float = 60.0) -> int:
    """``SALES_ALL`` sourcing both regions; waits until it holds every regional message."""
    js = nc.jetstream()
    cfg = {"name": ALL, "storage": "file",
           "sources": [{"name": stream_of(r)} for r in REGIONS]}  # fmt: skip
    msg = await nc.request(f"$JS.API.STREAM.CREATE.{ALL}", json.dumps(cfg).encode(), timeout=5)
    answer = json.loads(msg.data)
    if "error" in answer:
        raise RuntimeError(f"creating {ALL}: {answer['error']}")
    deadline = time.monotonic() + wait
    while True:
        held = int((await js.stream_info(ALL)).state.messages)
        if held >= total or time.monotonic() > deadline:
            return held
        await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_server_args(p)
    p.add_argument("--sales", type=int, default=2000, help="sales published per region")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        return run(args, stack.enter_context(server_url(args)))


def run(args: argparse.Namespace, url: str) -> int:
    want = with_nats(url, lambda nc: publish_sales(nc, args.sales, args.seed))
    total = args.sales * len(REGIONS)
    held = with_nats(url, lambda nc: fan_in(nc, total))
    print(f"{ALL} sources {', '.join(stream_of(r) for r in REGIONS)}: {held} of {total} "
          f"regional messages copied")  # fmt: skip
    spark = spark_session("regional-fanin")
    try:
        sales = (spark.read.format("jetstream").options(**source_options(url))
                 .option("stream", ALL).option("includeHeaders", "true").load())
        doc = F.from_json(F.col("data").cast("string"), "store string, sku string, amount string")
        rows = (sales.withColumn("doc", doc)
                .withColumn("region", F.split("subject", r"\.").getItem(1))
                # (headers map to lists of values: a header may repeat)
                .withColumn("origin", F.split(F.col("headers")["Nats-Stream-Source"][0], " ")
                            .getItem(0))
                .select("region", "doc.store", F.col("doc.amount").cast("decimal(12,2)")
                        .alias("amount"), "origin"))
        per_store = (rows.groupBy("region", "store")
                     .agg(F.count("*").alias("sales"), F.sum("amount").alias("revenue"))
                     .orderBy("region", "store").collect())
        per_origin = {r["origin"]: r["n"] for r in
                      rows.groupBy("origin").agg(F.count("*").alias("n")).collect()}
    finally:
        spark.stop()
    print(f"\n{'region':<8}{'store':<10}{'sales':>8}{'revenue':>14}")
    got: dict[tuple[str, str], list[Any]] = {}
    for r in per_store:
        got[(r["region"], r["store"])] = [int(r["sales"]), Decimal(r["revenue"])]
        print(f"{r['region']:<8}{r['store']:<10}{r['sales']:>8}{r['revenue']:>14}")
    print(f"\nrows by Nats-Stream-Source origin: {dict(sorted(per_origin.items()))}")
    problems = []
    if held != total:
        problems.append(f"{ALL} holds {held} messages, {total} were published")
    if got != dict(want):
        problems.append(f"aggregates differ from what was published: {got} != {dict(want)}")
    if per_origin != {stream_of(r): args.sales for r in REGIONS}:
        problems.append(f"rows per origin stream: {per_origin}")
    for p in problems:
        print(f"CHECK FAILED: {p}")
    if problems:
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
