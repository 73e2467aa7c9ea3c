"""The example pipelines in ``examples/``, each run end to end as a user runs it.

Each example is a subprocess with its own Spark session (so these tests do not use the
module's ``spark`` fixture). The orders pipeline runs against the test's natsd so its KV
buckets and streams can be inspected here with nats-py; the Parquet round trip runs as the
README shows it, starting its own embedded natsd.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client

from .conftest import ROOT, ServerProc, run_js

EXAMPLES = ROOT / "examples"


def run_example(script: str, *args: str, cwd: Path, timeout: float = 240) -> str:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
    assert proc.returncode == 0, (
        f"{script} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
        f"--- stderr\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


@pytest.mark.timeout(300)
def test_orders_pipeline(natsd_server: ServerProc, tmp_path: Path) -> None:
    url = natsd_server.url
    out = run_example(
        "orders_pipeline.py",
        "--servers",
        url,
        "--orders",
        "150",
        "--minutes",
        "3",
        "--batch",
        "250",
        cwd=tmp_path,
    )
    assert "all checks passed" in out, out
    # ~430 events at most 250 per micro-batch: the aggregates are updated more than once
    batches = re.search(r"query order_stats: (\d+) micro-batch", out)
    assert batches is not None and int(batches.group(1)) == 2, out

    async def inspect(nc: Client) -> tuple[dict[str, Any], dict[str, str], int, int]:
        js = nc.jetstream()
        stats_kv = await js.key_value("order_stats")
        stats = {k: json.loads((await stats_kv.get(k)).value or b"") for k in await stats_kv.keys()}
        status_kv = await js.key_value("order_status")
        status = {
            k: json.loads((await status_kv.get(k)).value or b"")["status"]
            for k in await status_kv.keys()
        }
        events = (await js.stream_info("ORDERS")).state.messages
        changelog = (await js.stream_info("ORDER_STATS")).state.messages
        return stats, status, events, changelog

    stats, status, events, changelog = run_js(url, inspect)
    # Every order is created exactly once; each event is counted in exactly one minute.
    per_status = Counter[str]()
    for key, doc in stats.items():
        minute, status_name = key.split(".")
        assert doc["status"] == status_name and len(minute) == 12
        per_status[status_name] += int(doc["orders"])
    assert per_status["created"] == 150
    assert sum(per_status.values()) == events
    assert per_status["shipped"] + per_status["cancelled"] == 150  # each order ends once
    # The status view holds every order once, at a final state.
    assert len(status) == 150 and set(status.values()) <= {"shipped", "cancelled"}
    assert changelog >= len(stats)  # a changelog: at least one update per aggregate


@pytest.mark.timeout(300)
def test_parquet_roundtrip_embedded_server(tmp_path: Path) -> None:
    outdir = tmp_path / "lake"
    out = run_example(
        "parquet_roundtrip.py", "--messages", "300", "--out", str(outdir), cwd=tmp_path
    )
    assert "started embedded natsd" in out, out
    assert "counts: stream 300, exported 300, parquet 300, replayed 300" in out, out
    assert "all checks passed" in out, out
    parts = sorted(p.name for p in (outdir / "ORDERS").glob("subject=*"))
    assert parts == [f"subject=orders.{s}" for s in ("cancelled", "created", "paid", "shipped")]
    assert all(len(list(p.glob("date=*"))) == 1 for p in (outdir / "ORDERS").glob("subject=*"))


@pytest.mark.timeout(300)
def test_orders_pipeline_against_a_tls_only_server(tmp_path: Path) -> None:
    """The same pipeline against a natsd that takes TLS clients only and verifies their
    certificates: the driver and every executor connect with the client certificate."""
    import time

    from ports import free_port
    from tlscerts import make_certs

    certs = make_certs(tmp_path / "certs")
    port = free_port()
    conf = tmp_path / "tls.conf"
    conf.write_text(
        f'host: "127.0.0.1"\nport: {port}\njetstream {{ store_dir: "{tmp_path / "js"}" }}\n'
        + certs.tls_block(verify=True)
    )
    log = open(tmp_path / "natsd.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "natsd", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while "Server is ready" not in (tmp_path / "natsd.log").read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, "natsd did not start"
            time.sleep(0.05)
        out = run_example(
            "orders_pipeline.py",
            "--servers",
            f"tls://localhost:{port}",
            "--orders",
            "40",
            "--minutes",
            "2",
            "--batch",
            "500",
            "--tls-ca",
            str(certs.ca),
            "--tls-cert",
            str(certs.alice_cert),
            "--tls-key",
            str(certs.alice_key),
            cwd=tmp_path,
        )
        assert "all checks passed" in out, out
        # Nothing reached the server in plaintext, and every connection showed a certificate.
        text = (tmp_path / "natsd.log").read_text(errors="replace")
        assert "TLS handshake error" not in text, text[-3000:]
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()


@pytest.mark.timeout(300)
def test_regional_fanin(natsd_server: ServerProc, tmp_path: Path) -> None:
    """Two regional streams sourced into one, aggregated by Spark: every sale counted once,
    each row's origin read from its Nats-Stream-Source header."""
    url = natsd_server.url
    out = run_example("regional_fanin.py", "--servers", url, "--sales", "200", cwd=tmp_path)
    assert "SALES_ALL sources SALES_EU, SALES_US: 400 of 400" in out, out
    assert "rows by Nats-Stream-Source origin: {'SALES_EU': 200, 'SALES_US': 200}" in out, out
    assert "all checks passed" in out, out

    async def inspect(nc: Client) -> tuple[int, list[str]]:
        js = nc.jetstream()
        info = await js.stream_info("SALES_ALL")
        return info.state.messages, sorted(s.name for s in info.sources or [])

    assert run_js(url, inspect) == (400, ["SALES_EU", "SALES_US"])
