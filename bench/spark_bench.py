"""Spark connector benchmark: ``format("jetstream")`` against natsd and nats-server.

One run starts both servers (as bench/bench.py does: natsd as installed, compiled by
``make compile`` unless ``NATSD_PURE=1``; the reference nats-server from the venv) and one
Spark session, then measures, per server, in rows/s:

* **read -> count()**: ``spark.read.format("jetstream")`` of a stream pre-filled with
  ``--messages`` messages of ``--size`` bytes (raw-socket publisher, every PubAck
  checked), into ``count()``;
* **read -> parquet**: the same read written to Parquet;
* **write**: a DataFrame of ``--messages`` rows (subject, ``--size``-byte data) written
  with ``format("jetstream")`` into an empty file stream (every PubAck checked);
* **write, allow_batched**: the same into a stream with ``allow_batched``, which the
  connector writes as fast-ingest batches (one per task, the final PubAck checked);
* **nats-py consumer** (reference): one nats-py client draining the same stream, two ways:
  an ordered push consumer (``js.subscribe(ordered_consumer=True)`` with a callback) and a
  durable pull consumer (``fetch`` of ``--fetch`` messages, ``ack_policy: none``); the
  target compares the read with the faster of the two.

and once per run, server-independent references on the same rows:

* **parquet read**: Spark reading the Parquet files written above, every column
  materialised (``write.format("noop")``; ``count()`` would only read metadata);
* **parquet write**: the write's DataFrame written as Parquet.
* **python source, no I/O**: a Python data source with the connector's schema, partitions
  and batch size that yields the same pre-built Arrow batch over and over, into
  ``count()``: what Spark's Python data source path itself costs here, the ceiling for any
  Python source (the connector included) on this machine.

Runs of the reads into ``count()``, of the writes (into the stream purged after each; one
smaller write warms the path first), of the ordered consumer and of the references repeat
``--repeat`` times and the best is reported.

The table ends with the ratios the connector aims for: read / nats-py consumer (target
>= 1.5) and read / parquet read (target >= 0.3).

    .venv/bin/python bench/spark_bench.py                      # 1,000,000 messages
    .venv/bin/python bench/spark_bench.py --messages 100000    # quick run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from natsbench.consumerload import prefill
from natsbench.jsload import api_error, js_api
from natsbench.servers import IMPL, REF, Server, make_js_servers

from natsd_spark.options import ReadOptions
from natsd_spark.source import plan_ranges

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
READ_STREAM, READ_SUBJECT = "SPARKBENCH", "sparkbench.data"
WRITE_STREAM, WRITE_SUBJECT = "SPARKWRITE", "sparkwrite.data"
FAST_STREAM, FAST_SUBJECT = "SPARKFAST", "sparkfast.data"
TARGET_CONSUMER = 1.5
TARGET_PARQUET = 0.3
#: the connector's direct-get batch (and so Arrow batch) size, for the no-I/O source
FETCH_BATCH = ReadOptions.__dataclass_fields__["fetch_batch"].default


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000, help="rows (default 1,000,000)")
    p.add_argument("--size", type=int, default=128, help="payload bytes (default 128)")
    p.add_argument("--servers", default=f"{IMPL},{REF}", help="comma list: natsd,nats-server")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--min-partitions", type=int, default=2,
                   help="minPartitions of the reads (default 2; the source also splits at "
                   "--max-partition-size)")
    p.add_argument("--max-partition-size", type=int, default=100_000)
    p.add_argument("--write-partitions", type=int, default=2,
                   help="partitions of the DataFrame written (default 2)")
    p.add_argument("--fetch", type=int, default=1000, help="nats-py consumer fetch batch")
    p.add_argument("--natsd-cmd", default="", help="command starting natsd (default: venv "
                   "python -m natsd: the installed build)")
    p.add_argument("--nats-server-cmd", default="", help="command starting nats-server")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of read -> count() and of the ordered consumer; the best is "
                   "reported, so the two sides of the read target get the same treatment "
                   "(default 3)")
    p.add_argument("--warmup", type=int, default=4,
                   help="reads of the no-I/O Python source before any server, to warm the "
                   "JVM (default 4)")
    return p.parse_args(argv)


def spark_write(spark: Any, srv: Server, stream: str, subject: str, payload: bytearray,
                partitions: int, rows: int) -> float:
    """Seconds for ``format("jetstream")`` to write ``rows`` rows into ``stream`` (checked
    stored, then purged)."""
    from pyspark.sql import functions as F

    wdf = spark.range(0, rows, 1, partitions).select(
        F.lit(subject).alias("subject"), F.lit(payload).alias("data"))
    dt, _ = timed(lambda: wdf.write.format("jetstream")
                  .option("servers", f"nats://127.0.0.1:{srv.port}").option("stream", stream)
                  .mode("append").save())
    stored = stream_msgs(srv, stream)
    if stored != rows:
        raise RuntimeError(f"{stream} stored {stored} != {rows}")
    api(srv, f"$JS.API.STREAM.PURGE.{stream}")
    return dt


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


# ------------------------------------------------------------------ server helpers
def natsd_command(a: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if a.natsd_cmd:
        return a.natsd_cmd.split(), env
    # the installed build (compiled by ``make compile``; NATSD_PURE=1 for the pure one)
    env["PYTHONPATH"] = str(REPO / "src")
    return [sys.executable, "-m", "natsd"], env


def api(srv: Server, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = js_api(srv.port, subject, body, timeout=30.0)
    err = api_error(doc)
    if err:
        raise RuntimeError(f"{srv.name}: {subject}: {err}")
    return doc


def make_stream(srv: Server, name: str, subject: str, **extra: Any) -> None:
    api(srv, f"$JS.API.STREAM.CREATE.{name}", {
        "name": name, "subjects": [subject], "storage": "file", "allow_direct": True,
        "num_replicas": 1, "retention": "limits", "discard": "old", **extra,
    })


def stream_msgs(srv: Server, name: str) -> int:
    return int(api(srv, f"$JS.API.STREAM.INFO.{name}")["state"]["messages"])


def consumer_drain(url: str, stream: str, subject: str, n: int, batch: int,
                   kind: str) -> float:
    """Seconds for one nats-py client to receive ``n`` messages of ``stream``.

    ``ordered``: ``js.subscribe(ordered_consumer=True)`` with a callback (an ordered push
    consumer: flow control, no acks; the faster of the two). ``fetch``: a durable pull
    consumer without a filter or acks, ``fetch(batch)`` in a loop.
    """
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    async def ordered(nc: Any) -> float:
        js = nc.jetstream()
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        got = 0

        async def cb(_msg: Any) -> None:
            nonlocal got
            got += 1
            if got == n and not done.done():
                done.set_result(None)

        t0 = time.monotonic()
        # Filter ">" (all): natsd's consumers stall on a literal filter over 100k+ messages
        # of one subject in a file stream (a server problem, reported in issue 6).
        sub = await js.subscribe(">", stream=stream, cb=cb, ordered_consumer=True,
                                 pending_msgs_limit=4 * n + 1000)
        await asyncio.wait_for(done, timeout=max(60.0, n / 1000))
        dt = time.monotonic() - t0
        await sub.unsubscribe()
        return dt

    async def fetch(nc: Any) -> float:
        js = nc.jetstream()
        await js.add_consumer(stream, ConsumerConfig(
            durable_name="drain", ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL))
        psub = await js.pull_subscribe_bind("drain", stream)
        got = 0
        t0 = time.monotonic()
        while got < n:
            msgs = await psub.fetch(min(batch, n - got), timeout=30)
            got += len(msgs)
        dt = time.monotonic() - t0
        await psub.unsubscribe()
        return dt

    async def go() -> float:
        nc = await nats.connect(url)
        try:
            return await (ordered(nc) if kind == "ordered" else fetch(nc))
        finally:
            await nc.close()

    return asyncio.run(go())


# ------------------------------------------------------------------ spark
def register_ceiling_source(spark: Any, rows: int, size: int, parts: list[tuple[int, int]],
                            batch_rows: int) -> str:
    """Register the no-I/O Python data source (see the module doc); returns its name.

    Defined in a function so cloudpickle ships the classes to the workers by value (this
    file is not importable there)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from natsd_spark.source import SeqRange

    class Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [SeqRange(lo, hi) for lo, hi in parts]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            span = partition.hi - partition.lo  # type: ignore[attr-defined]
            full = pa.RecordBatch.from_arrays([
                pa.repeat(pa.scalar(READ_STREAM, pa.string()), batch_rows),
                pa.array(range(batch_rows), pa.int64()),
                pa.array([READ_SUBJECT] * batch_rows, pa.string()),
                pa.array([b"x" * size] * batch_rows, pa.binary()),
                pa.array([1_700_000_000_000_000] * batch_rows, pa.timestamp("us", tz="UTC")),
            ], names=["stream", "seq", "subject", "data", "timestamp"])
            for start in range(0, span, batch_rows):
                yield full.slice(0, min(batch_rows, span - start))

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "jetstream-bench-ceiling"

        def schema(self) -> str:
            return "stream string, seq long, subject string, data binary, timestamp timestamp"

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    assert sum(hi - lo for lo, hi in parts) == rows
    spark.dataSource.register(Ceiling)
    return Ceiling.name()


def spark_session(master: str) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from natsd_spark import JetStreamDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("natsd-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(JetStreamDataSource)
    return spark


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise SystemExit(128 + signum)  # run the finally blocks: servers and Spark stopped


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    n, size = a.messages, a.size
    names = [s.strip() for s in a.servers.split(",") if s.strip()]
    for s in names:
        if s not in (IMPL, REF):
            raise SystemExit(f"unknown server {s!r} (natsd, nats-server)")
    work = Path(tempfile.mkdtemp(prefix="natsd-spark-bench-"))
    impl_cmd, impl_env = natsd_command(a)
    ref_cmd = a.nats_server_cmd.split() if a.nats_server_cmd else [str(VENV_BIN / REF)]
    servers = make_js_servers(names, ref_cmd, impl_cmd, impl_env, "-js -sd {store}", work,
                              work / "store")
    print(f"spark_bench: {n:,} messages of {size} bytes, master {a.master}, "
          f"reads minPartitions={a.min_partitions} maxPartitionSize={a.max_partition_size}, "
          f"writes in {a.write_partitions} partitions; work dir {work}", flush=True)
    from pyspark.sql import functions as F

    spark = spark_session(a.master)
    res: dict[str, dict[str, float]] = {s.name: {} for s in servers}
    ref: dict[str, float] = {}
    parquet_dir = work / "parquet"
    try:
        # Warm the JVM's Python-source path (Arrow batches -> rows) before any server is
        # measured: cold, the first server's reads ran ~20 % slower than after a few reads,
        # which favoured whichever server went second.
        ceiling = register_ceiling_source(
            spark, n, size, plan_ranges(1, n + 1, a.min_partitions, a.max_partition_size),
            FETCH_BATCH)
        for _ in range(max(0, a.warmup)):
            spark.read.format(ceiling).load().count()
        for srv in servers:
            srv.start()
            url = f"nats://127.0.0.1:{srv.port}"
            print(f"\n{srv.name} {srv.version} on {url}", flush=True)
            try:
                make_stream(srv, READ_STREAM, READ_SUBJECT)
                dt, _ = timed(lambda srv=srv: prefill(srv.port, READ_SUBJECT, size, n, 4000,
                                                      time.monotonic() + 600, 60))
                print(f"  prefill {n:,} msgs: {n / dt:,.0f} msgs/s", flush=True)

                def reader(srv: Server = srv, ending: int = 0) -> Any:
                    r = (spark.read.format("jetstream")
                         .option("servers", f"nats://127.0.0.1:{srv.port}")
                         .option("stream", READ_STREAM)
                         .option("minPartitions", a.min_partitions)
                         .option("maxPartitionSize", a.max_partition_size))
                    if ending:
                        r = r.option("endingOffsets", ending)
                    return r.load()

                # warm-up: the JVM, the planning and reading Python workers, their imports,
                # and the Parquet writer's code (else the first server's read -> parquet
                # pays for its JIT compilation)
                reader(ending=min(n, 20_000) + 1).count()
                reader(ending=min(n, 100_000) + 1).write.mode("overwrite").parquet(
                    str(work / "warm-up"))
                for _ in range(max(1, a.repeat)):
                    dt, cnt = timed(lambda: reader().count())
                    if cnt != n:
                        raise RuntimeError(f"read count {cnt} != {n}")
                    res[srv.name]["read"] = max(res[srv.name].get("read", 0.0), n / dt)
                    print(f"  read -> count():   {n / dt:12,.0f} rows/s ({dt:.1f} s)",
                          flush=True)

                out = parquet_dir / srv.name
                dt, _ = timed(lambda out=out: reader().write.mode("overwrite").parquet(
                    str(out)))
                res[srv.name]["read_parquet"] = n / dt
                print(f"  read -> parquet:   {n / dt:12,.0f} rows/s ({dt:.1f} s)", flush=True)
                if spark.read.parquet(str(out)).count() != n:
                    raise RuntimeError("parquet output has the wrong row count")

                for kind in ("ordered", "fetch"):
                    # fetch is ~10x slower than the rest: once is enough to show it.
                    for _ in range(max(1, a.repeat) if kind == "ordered" else 1):
                        dt = consumer_drain(url, READ_STREAM, READ_SUBJECT, n, a.fetch, kind)
                        res[srv.name][kind] = max(res[srv.name].get(kind, 0.0), n / dt)
                        print(f"  nats-py {kind + ':':9s} {n / dt:12,.0f} msgs/s ({dt:.1f} s)",
                              flush=True)

                payload = bytearray(b"x" * size)
                for key, stream, subject, extra in (
                    ("write", WRITE_STREAM, WRITE_SUBJECT, {}),
                    ("write_fast", FAST_STREAM, FAST_SUBJECT, {"allow_batched": True}),
                ):
                    make_stream(srv, stream, subject, **extra)
                    write = partial(spark_write, spark, srv, stream, subject, payload,
                                    a.write_partitions)
                    # warm-up: the JVM's and the workers' write path (else the first server
                    # measured pays for its compilation: ~15 % in one run)
                    write(min(n, 100_000))
                    for _ in range(max(1, a.repeat)):
                        dt = write(n)
                        res[srv.name][key] = max(res[srv.name].get(key, 0.0), n / dt)
                        print(f"  {key + ':':18s} {n / dt:12,.0f} rows/s ({dt:.1f} s)",
                              flush=True)
            finally:
                srv.stop()

        # Server-independent references on the same rows.
        src = next(iter(parquet_dir.iterdir()))
        spark.read.parquet(str(src)).limit(1000).write.format("noop").mode("overwrite").save()
        print(flush=True)
        for _ in range(max(1, a.repeat)):
            dt, _ = timed(lambda: spark.read.parquet(str(src)).write.format("noop")
                          .mode("overwrite").save())
            ref["parquet_read"] = max(ref.get("parquet_read", 0.0), n / dt)
            print(f"parquet read (noop sink): {n / dt:12,.0f} rows/s ({dt:.1f} s)", flush=True)
        for _ in range(max(1, a.repeat)):
            dt, cnt = timed(lambda: spark.read.format(ceiling).load().count())
            if cnt != n:
                raise RuntimeError(f"ceiling source count {cnt} != {n}")
            ref["ceiling"] = max(ref.get("ceiling", 0.0), n / dt)
            print(f"python source, no I/O:    {n / dt:12,.0f} rows/s ({dt:.1f} s)", flush=True)
        payload = bytearray(b"x" * size)
        wdf = spark.range(0, n, 1, a.write_partitions).select(
            F.lit(WRITE_SUBJECT).alias("subject"), F.lit(payload).alias("data"))
        dt, _ = timed(lambda: wdf.write.mode("overwrite").parquet(str(work / "pq-write")))
        ref["parquet_write"] = n / dt
        print(f"parquet write:            {n / dt:12,.0f} rows/s ({dt:.1f} s)", flush=True)
    finally:
        spark.stop()
        for srv in servers:
            srv.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_table(a, names, res, ref)
    return 0


def print_table(a: argparse.Namespace, names: list[str], res: dict[str, dict[str, float]],
                ref: dict[str, float]) -> None:
    rows: list[list[str]] = []
    pr, pw = ref.get("parquet_read", 0.0), ref.get("parquet_write", 0.0)

    def num(v: float | None) -> str:
        return f"{v:,.0f}" if v else "-"

    def ratio(x: float | None, y: float | None) -> str:
        return f"{x / y:.2f}" if x and y else "-"

    both = IMPL in names and REF in names
    head = ["rows/s", *names] + (["natsd/nats-server"] if both else [])
    for key, label in (("read", "spark read -> count()"),
                       ("read_parquet", "spark read -> parquet"),
                       ("write", "spark write -> stream"),
                       ("write_fast", "spark write -> stream, allow_batched"),
                       ("ordered", "ref: nats-py ordered consumer"),
                       ("fetch", "ref: nats-py pull fetch")):
        vals = [res[s].get(key) for s in names]
        row = [label, *map(num, vals)]
        if both:
            row.append(ratio(res[IMPL].get(key), res[REF].get(key)))
        rows.append(row)
    rows.append(["ref: spark parquet read", *[num(pr)] * len(names)] + (["-"] if both else []))
    rows.append(["ref: spark parquet write", *[num(pw)] * len(names)] + (["-"] if both else []))
    rows.append(["ref: python source, no I/O", *[num(ref.get("ceiling"))] * len(names)]
                + (["-"] if both else []))
    rows.append([""] * len(head))
    rows.append([f"read / best nats-py consumer (target >= {TARGET_CONSUMER})",
                 *[ratio(res[s].get("read"), max(res[s].get("ordered", 0.0),
                                                res[s].get("fetch", 0.0))) for s in names]]
                + ([""] if both else []))
    rows.append([f"read / parquet read (target >= {TARGET_PARQUET})",
                 *[ratio(res[s].get("read"), pr) for s in names]] + ([""] if both else []))
    rows.append(["read / python source, no I/O",
                 *[ratio(res[s].get("read"), ref.get("ceiling")) for s in names]]
                + ([""] if both else []))
    rows.append(["read->parquet / parquet read",
                 *[ratio(res[s].get("read_parquet"), pr) for s in names]]
                + ([""] if both else []))
    rows.append(["write / parquet write",
                 *[ratio(res[s].get("write"), pw) for s in names]] + ([""] if both else []))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"\n{a.messages:,} messages x {a.size} B, master {a.master}")
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                    for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))


if __name__ == "__main__":
    raise SystemExit(main())
