"""``natsd --workers 2`` against one natsd process: aggregate publish over 4 connections.

Core NATS by default; with ``--js`` each connection creates its own file stream (4 streams,
which the workers' meta group places over them) and publishes to it, waiting for PubAcks
with ``WINDOW`` publishes in flight: the issue 18 measure (target >= 1.3x on 2 cores).

Each publisher is its own process (raw sockets, pipelined ``PUB`` frames in 64 KiB writes,
then ``PING`` and wait for the ``PONG``, so every message was parsed by the server). The
connections land where the kernel's SO_REUSEPORT hash puts them; the spread (connections per
worker, from each INFO's server_name) is printed with each run. With 2 workers a connection
that publishes only to the other worker's stream is then moved there (cluster/handoff.py).
No subscribers: this measures what the workers spread, the parsing; routed traffic pays a hop
(see the README's --workers limits). On a 2-core machine the publishers share the CPUs.

    .venv/bin/python bench/micro_workers.py                  # pure Python
    .venv/bin/python bench/micro_workers.py -n 400000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
# --js: publishes in flight per connection before waiting for PubAcks, by default the
# clients' own default for async publish (nats-py's publish_async_max_pending and nats.go's
# PublishAsyncMaxPending are both 4000)
WINDOW = 4000


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def publisher(port: int, n: int, size: int, start: Any, out: Any) -> None:
    s = socket.create_connection((HOST, port))
    info = b""
    while b"\r\n" not in info:
        info += s.recv(4096)
    name = json.loads(info.split(b"\r\n")[0][5:])["server_name"]
    s.sendall(CONNECT + b"PING\r\n")
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += s.recv(4096)
    frame = b"PUB bench.w %d\r\n%s\r\n" % (size, b"x" * size)
    per = max(1, 65536 // len(frame))
    chunk = frame * per
    start.wait()
    t0, c0 = time.monotonic(), time.process_time()
    sent = 0
    while sent < n:
        k = min(per, n - sent)
        s.sendall(chunk if k == per else frame * k)
        sent += k
    s.sendall(b"PING\r\n")
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += s.recv(65536)
    out.put((name, t0, time.monotonic(), time.process_time() - c0))
    s.close()


def js_publisher(
    port: int, n: int, size: int, start: Any, out: Any, stream: int, window: int
) -> None:
    """JetStream async publish to stream ``stream`` (subject ``w.<stream>``): ``window``
    publishes in flight, each PubAck read back before more go out."""
    s = socket.create_connection((HOST, port))
    info = b""
    while b"\r\n" not in info:
        info += s.recv(4096)
    name = json.loads(info.split(b"\r\n")[0][5:])["server_name"]
    inbox = b"_INBOX.b%d" % stream
    s.sendall(CONNECT + b"SUB " + inbox + b".* 1\r\nPING\r\n")
    buf = b""
    while b"PONG\r\n" not in buf:
        buf += s.recv(4096)
    # the publisher creates its own stream, as an application would (on a JetStream
    # cluster the stream then goes to this connection's server when the servers are equal)
    body = json.dumps({"name": f"S{stream}", "subjects": [f"w.{stream}"]}).encode()
    create = b"PUB $JS.API.STREAM.CREATE.S%d %s.c %d\r\n%s\r\n" % (stream, inbox, len(body), body)
    deadline = time.monotonic() + 30
    s.settimeout(1.0)  # no answer until the workers' meta group has a leader
    while True:
        s.sendall(create)
        buf = b""
        try:
            while not (b"MSG " + inbox in buf and buf.endswith(b"}\r\n")):
                buf += s.recv(65536)
        except TimeoutError:
            buf = b'"error" (no answer yet)'
        if b'"error"' not in buf:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"stream S{stream} not created: {buf!r}")
        time.sleep(0.2)
    s.settimeout(None)
    frame = b"PUB w.%d %s.a %d\r\n%s\r\n" % (stream, inbox, size, b"x" * size)
    start.wait()
    t0, c0 = time.monotonic(), time.process_time()
    sent = acked = 0
    pending = b""
    while acked < n:
        k = min(window - (sent - acked), n - sent)
        if k > 0:
            s.sendall(frame * k)
            sent += k
        data = s.recv(1 << 20)
        if not data:
            raise SystemExit("connection closed")
        pending += data
        acked += pending.count(b"MSG ")
        pending = pending[pending.rfind(b"\r\n") + 2 :] if b"MSG " in pending else pending
        if b"-ERR" in data:
            raise SystemExit(data.decode(errors="replace"))
    out.put((name, t0, time.monotonic(), time.process_time() - c0))
    s.close()


def start_server(
    args: argparse.Namespace, workers: int, log: Path
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = [sys.executable, "-m", "natsd", "-a", HOST, "-p", str(port)]
    if args.js:
        cmd += ["-js", "-sd", str(log.parent / f"store-w{workers}")]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    logf = open(log, "wb")  # noqa: SIM115 - the child's stderr
    proc = subprocess.Popen(cmd, stdout=logf, stderr=logf, start_new_session=True)
    ready = f"All {workers} workers are ready" if workers > 1 else "Server is ready"
    deadline = time.monotonic() + 30
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start:\n{log.read_text()}")
        time.sleep(0.05)
    return proc, port


def cpu_seconds(root: int) -> float:
    """User+system CPU of ``root`` and its children (the workers), from /proc."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(entry) == root or int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def one_run(port: int, args: argparse.Namespace) -> tuple[float, float, Counter[str]]:
    """(aggregate msg/s, the publishers' CPU per message in us, connections per server)."""
    start = mp.Event()
    out: Any = mp.Queue()
    if args.js:
        procs = [
            mp.Process(
                target=js_publisher, args=(port, args.n, args.size, start, out, i, args.window)
            )
            for i in range(args.conns)
        ]
    else:
        procs = [
            mp.Process(target=publisher, args=(port, args.n, args.size, start, out))
            for _ in range(args.conns)
        ]
    for p in procs:
        p.start()
    time.sleep(0.5)  # every publisher connected and waiting
    start.set()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(10)
    t0 = min(r[1] for r in results)
    t1 = max(r[2] for r in results)
    total = args.conns * args.n
    pub_us = sum(r[3] for r in results) * 1e6 / total
    return total / (t1 - t0), pub_us, Counter(r[0] for r in results)


def measure(workers: int, args: argparse.Namespace, tmp: Path) -> list[float]:
    proc, port = start_server(args, workers, tmp / f"natsd-w{workers}.log")
    rates = []
    try:
        for i in range(args.repeat + 1):
            cpu0 = cpu_seconds(proc.pid)
            rate, pub_us, spread = one_run(port, args)
            cpu_us = (cpu_seconds(proc.pid) - cpu0) * 1e6 / (args.conns * args.n)
            label = "warm-up" if i == 0 else f"run {i}"
            where = ", ".join(f"{k[-6:]}: {v}" for k, v in sorted(spread.items()))
            print(
                f"  workers={workers} {label}: {rate:,.0f} msg/s, CPU us/msg: server {cpu_us:.2f},"
                f" publishers {pub_us:.2f}"
                f"  (connections per server: {where})",
                flush=True,
            )
            if i:
                rates.append(rate)
    finally:
        proc.terminate()
        proc.wait(20)
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200_000, help="messages per connection")
    ap.add_argument("--size", type=int, default=16, help="payload bytes")
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--js",
        action="store_true",
        help="JetStream: one stream per connection, async publish with PubAcks (file store)",
    )
    ap.add_argument(
        "--window", type=int, default=WINDOW, help="--js: publishes in flight per connection"
    )
    args = ap.parse_args()
    print(
        f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, "
        f"{args.conns} connections x {args.n} x {args.size} B"
        + (f", {args.window} publishes in flight each" if args.js else "")
    )
    with tempfile.TemporaryDirectory(prefix="natsd-workers-bench-") as d:
        one = statistics.median(measure(1, args, Path(d)))
        many = statistics.median(measure(args.workers, args, Path(d)))
    print(f"one process:        {one:,.0f} msg/s (median)")
    print(f"--workers {args.workers}:        {many:,.0f} msg/s (median)")
    print(f"ratio:              {many / one:.2f}x")


if __name__ == "__main__":
    main()
