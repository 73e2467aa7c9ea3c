"""The data source on a real multi-process Spark cluster, not ``local[*]``.

A standalone master and two workers (one core each) are started from the pyspark
installation (``bin/spark-class``) on 127.0.0.1; the driver (this process) connects with
``spark://``, so ``read``/``write`` run in Python workers forked by two separate executor
JVMs, which must import ``natsd_spark`` themselves (``PYSPARK_PYTHON`` = the venv's python).
Every JVM is started in its own process group and killed with it when the module ends,
whatever happened: test failure, SIGTERM, interpreter exit (executors and their Python
workers are in the worker's group). About 75 s (mostly JVM start-up) on 2 cores.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from components import require_java
from ports import free_port
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from natsd_spark import JetStreamDataSource

from .conftest import ServerProc, fetch_all, make_stream, publish

pytestmark = pytest.mark.slow

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


class SparkCluster:
    """A standalone master and ``workers`` workers; ``stop()`` kills every JVM."""

    def __init__(self, workers: int = 2) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="spark-cluster-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        self.env.update(
            {
                "SPARK_HOME": str(SPARK_HOME),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m",
                "SPARK_LOG_DIR": str(self.dir),
                "SPARK_WORKER_DIR": str(self.dir / "work"),
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        try:
            self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(free_port()),
            )
            self._wait_port(self.port, "master")
            for i in range(workers):
                self._start(
                    f"worker{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    self.url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "768m",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(self.dir / f"work{i}"),
                )
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, cls: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - owned by the process
        try:
            proc = subprocess.Popen(
                [str(SPARK_CLASS), cls, *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        finally:
            log.close()
        self.procs.append(proc)

    def _wait_port(self, port: int, what: str, timeout: float = 40.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"spark {what} exited:\n{self.logs()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=0.5),
            ):
                return
            time.sleep(0.2)
        raise RuntimeError(f"spark {what} not listening after {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for f in sorted(self.dir.glob("*.log")):
            out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-1500:])
        return "\n".join(out)

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in self.procs if p.poll() is None]
            for p in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, sig)
            deadline = time.monotonic() + 10
            for p in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.1, deadline - time.monotonic()))
        # Executors and their Python workers live in the workers' process groups.
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.procs = []  # a second stop() (atexit) touches nothing


@pytest.fixture(scope="module")
def cluster() -> Iterator[SparkCluster]:
    require_java()
    c = SparkCluster(workers=2)
    # Also on SIGTERM (a CI timeout) or an interpreter exit that skips the teardown.
    atexit.register(c.stop)
    prev = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: object) -> None:
        c.stop()
        signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        yield c
    finally:
        signal.signal(signal.SIGTERM, prev if prev is not None else signal.SIG_DFL)
        c.stop()
        atexit.unregister(c.stop)


@pytest.fixture(scope="module")
def cluster_spark(cluster: SparkCluster) -> Iterator[SparkSession]:
    from pyspark import SparkContext

    # Another module's local session must be gone: getOrCreate would hand it back.
    assert SparkContext._active_spark_context is None, "a Spark session is still active"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master(cluster.url)
        .appName("natsd-spark-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    try:
        session.sparkContext.setLogLevel("ERROR")
        session.dataSource.register(JetStreamDataSource)
        # Wait for both executors (the driver is listed too).
        tracker = session.sparkContext._jsc.sc().statusTracker()
        deadline = time.monotonic() + 60
        while len(tracker.getExecutorInfos()) < 3:
            if time.monotonic() > deadline:
                raise RuntimeError(f"executors did not register:\n{cluster.logs()}")
            time.sleep(0.25)
        yield session
    finally:
        session.stop()


def test_cluster_round_trip(
    cluster: SparkCluster, cluster_spark: SparkSession, natsd_server: ServerProc
) -> None:
    """Read a stream on two executors, transform, write to another stream, read it back."""
    spark, srv = cluster_spark, natsd_server
    assert spark.sparkContext.master == cluster.url
    make_stream(srv.url, "CSRC", ["csrc.>"])
    make_stream(srv.url, "CDST", ["cdst.>"], duplicate_window=60.0)
    msgs = [
        (f"csrc.{i % 4}", f"m{i}".encode() * (1 + i % 3), {"n": str(i)} if i % 5 == 0 else None)
        for i in range(600)
    ]
    publish(srv.url, msgs)

    src = (
        spark.read.format("jetstream")
        .option("servers", srv.url)
        .option("stream", "CSRC")
        .option("minPartitions", 4)
        .option("includeHeaders", "true")
        .load()
    )
    assert src.rdd.getNumPartitions() == 4
    out = src.select(
        F.concat(F.lit("cdst."), F.element_at(F.split("subject", r"\."), 2)).alias("subject"),
        F.concat(F.col("data"), F.lit(b"!")).alias("data"),
        F.concat(F.lit("c-"), F.col("seq").cast("string")).alias("msg_id"),
    )
    out.write.format("jetstream").option("servers", srv.url).option("stream", "CDST").mode(
        "append"
    ).save()

    stored = fetch_all(srv.url, "CDST")
    assert len(stored) == 600
    want = sorted((f"cdst.{i % 4}", d + b"!", f"c-{i + 1}") for i, (_, d, _) in enumerate(msgs))
    assert sorted((s, d, (h or {})["Nats-Msg-Id"]) for _, s, d, h in stored) == want

    back = (
        spark.read.format("jetstream")
        .option("servers", srv.url)
        .option("stream", "CDST")
        .option("minPartitions", 3)
        .load()
    )
    rows = (
        back.groupBy("subject")
        .agg(F.count("*").alias("n"), F.sum(F.length("data")).alias("size"))
        .collect()
    )
    sizes = {f"cdst.{k}": 0 for k in range(4)}
    for i, (_, d, _) in enumerate(msgs):
        sizes[f"cdst.{i % 4}"] += len(d) + 1
    assert sorted((r.subject, r.n, r.size) for r in rows) == [
        (k, 150, v) for k, v in sorted(sizes.items())
    ]


def test_two_executors_run_python(cluster_spark: SparkSession) -> None:
    """Python tasks really run in two executor JVMs (one pyspark daemon each)."""
    sc = cluster_spark.sparkContext
    assert len(sc._jsc.sc().statusTracker().getExecutorInfos()) == 3  # driver + 2

    def daemon_pid(_it: Iterator[object]) -> Iterator[int]:
        # A closure, so cloudpickle ships it by value (the test module is not importable
        # on the executors).
        import os
        import time

        time.sleep(0.3)  # keep both executors busy so the tasks spread over them
        yield os.getppid()  # the executor's pyspark daemon: one per executor JVM

    daemons = set(sc.parallelize(range(6), 6).mapPartitions(daemon_pid).collect())
    assert len(daemons) == 2
