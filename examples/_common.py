"""Shared plumbing for the example pipelines: a server to talk to, a Spark session, nats-py.

Each example runs with one command. Without ``--servers`` it starts its own natsd as a
subprocess (``python -m natsd -js -sd <tmpdir> -p <free port>``), exactly as a user would
start a server, and stops it at the end; with ``--servers`` it uses that server (natsd or
nats-server) and leaves it running. ``--tls-ca``, ``--tls-cert``, ``--tls-key`` and
``--tls-first`` reach a TLS-only server: Spark gets them as the data source's options
(``tlsCaFile``, ``tlsCertFile``, ``tlsKeyFile``, ``tlsFirst``), nats-py as a TLS context.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import nats
from nats.aio.client import Client
from pyspark.sql import SparkSession

from natsd_spark import JetStreamDataSource, JetStreamKVDataSource

T = TypeVar("T")

# The data source's TLS options for this run (server_url sets them from the flags).
_TLS: dict[str, str] = {}


def add_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--servers", help="NATS URL(s) of a JetStream server; default: start an "
                   "embedded natsd for this run")
    p.add_argument("--keep-server", action="store_true",
                   help="leave the embedded server's store directory in place (printed)")
    p.add_argument("--tls-ca", help="CA file to trust (a TLS server)")
    p.add_argument("--tls-cert", help="client certificate file (a server that verifies)")
    p.add_argument("--tls-key", help="the client certificate's private key file")
    p.add_argument("--tls-first", action="store_true", help="TLS handshake before INFO")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def embedded_natsd(keep: bool = False) -> Iterator[str]:
    """Start ``python -m natsd`` with JetStream on a free port; yield its URL."""
    store = tempfile.mkdtemp(prefix="natsd-example-")
    port = _free_port()
    log_path = Path(store) / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "natsd", "-js", "-sd", store, "-p", str(port),
             "-a", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"natsd exited at start:\n{log_path.read_text()[-2000:]}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("natsd did not start within 30 s") from None
                    time.sleep(0.1)
            print(f"started embedded natsd on nats://127.0.0.1:{port} (store {store})")
            yield f"nats://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if keep:
                print(f"kept the server's store directory {store}")
            else:
                shutil.rmtree(store, ignore_errors=True)


@contextlib.contextmanager
def server_url(args: argparse.Namespace) -> Iterator[str]:
    for flag, option in (("tls_ca", "tlsCaFile"), ("tls_cert", "tlsCertFile"),
                         ("tls_key", "tlsKeyFile")):
        if getattr(args, flag, None):
            _TLS[option] = str(getattr(args, flag))
    if getattr(args, "tls_first", False):
        _TLS["tlsFirst"] = "true"
    if args.servers:
        yield str(args.servers)
    else:
        with embedded_natsd(keep=bool(args.keep_server)) as url:
            yield url


def spark_session(app: str, cores: int = 2) -> SparkSession:
    """A local session sized for a laptop, with both JetStream data sources registered."""
    # Spark's Python workers must run this interpreter, where natsd_spark is importable.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(f"local[{cores}]").appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # small data: a few shuffle partitions instead of 200 empty tasks per stage
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(JetStreamDataSource)
    spark.dataSource.register(JetStreamKVDataSource)
    return spark


def source_options(url: str) -> dict[str, str]:
    """The jetstream data source's connection options: the URL and the TLS files."""
    return {"servers": url, **_TLS}


def _nats_tls() -> dict[str, object]:
    if not _TLS:
        return {}
    ctx = ssl.create_default_context(cafile=_TLS.get("tlsCaFile"))
    if "tlsCertFile" in _TLS:
        ctx.load_cert_chain(_TLS["tlsCertFile"], _TLS.get("tlsKeyFile"))
    return {"tls": ctx, "tls_handshake_first": _TLS.get("tlsFirst") == "true"}


def with_nats(url: str, fn: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``fn(nc)`` on a fresh nats-py connection (the examples' own client side)."""

    async def main() -> T:
        nc = await nats.connect(url, **_nats_tls())
        try:
            return await fn(nc)
        finally:
            await nc.close()

    return asyncio.run(main())
