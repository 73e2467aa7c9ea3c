"""TLS beside plain text, natsd beside nats-server, in one run (issue 34's measure).

Four servers on loopback: nats-server and natsd, each once in plain text and once with
``tls {}`` (the same certificates, made for the run by trustme). Two loads, each run against
all four:

- **pub->sub**: a subscriber process counts ``-n`` messages of ``--size`` bytes that one
  publisher process sends as fast as the socket takes them; msgs/s from the first PUB to
  the last byte at the subscriber.
- **js async publish**: one process publishes ``--js-n`` messages to a memory stream with up
  to ``--window`` PubAcks outstanding; msgs/s from the first PUB to the last PubAck.
  (Memory storage: the run measures the connection, not the disk.)

The clients speak the protocol over raw sockets (wrapped by ``ssl`` for TLS) in processes
of their own, the same for every server. Printed: msgs/s per server, natsd/nats-server
for plain and for TLS, and what TLS costs each (TLS / plain).

    .venv/bin/python bench/micro_tls.py                 # 500k core msgs, 100k JS msgs
    .venv/bin/python bench/micro_tls.py --repeat 3 --json bench/results/tls.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trustme

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, name: str, cmd: list[str], conf: str, tmp: Path) -> None:
        self.name = name
        self.port = _free_port()
        path = tmp / f"{name}.conf"
        store = tmp / f"{name}-js"
        sd = json.dumps(str(store))
        js = f"jetstream {{ store_dir: {sd} }}\n"
        path.write_text(f"host: {HOST}\nport: {self.port}\n{js}{conf}")
        self.log = open(tmp / f"{name}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([*cmd, "-c", str(path)], stdout=self.log,
                                     stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5) as s:
                    s.settimeout(1)
                    if s.recv(10).startswith(b"INFO"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: {(tmp / f'{name}.log').read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _connect(port: int, ca: str | None, extra: bytes = b"") -> socket.socket | ssl.SSLSocket:
    """INFO, the TLS upgrade when ``ca``, CONNECT + ``extra`` + PING, PONG."""
    sock: socket.socket | ssl.SSLSocket = socket.create_connection((HOST, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while b"\r\n" not in buf:
        buf += sock.recv(4096)
    if ca is not None:
        ctx = ssl.create_default_context(cafile=ca)
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
    sock.sendall(CONNECT + extra + b"PING\r\n")
    got = b""
    while b"PONG\r\n" not in got:
        got += sock.recv(4096)
    return sock


def _subscriber(port: int, ca: str | None, n: int, size: int, ready: Any, done: Any) -> None:
    sock = _connect(port, ca, b"SUB tls.bench 1\r\n")
    frame = len(b"MSG tls.bench 1 %d\r\n" % size) + size + 2
    want = n * frame
    ready.set()
    got = 0
    buf = bytearray(1 << 20)
    while got < want:
        k = sock.recv_into(buf)
        if not k:
            break
        got += k
    done.put(time.perf_counter())
    sock.close()


def _publisher(port: int, ca: str | None, n: int, size: int, start: Any) -> None:
    sock = _connect(port, ca)
    frame = b"PUB tls.bench %d\r\n" % size + b"x" * size + b"\r\n"
    per = max(1, 65536 // len(frame))
    chunk = frame * per
    start.put(time.perf_counter())
    sent = 0
    while sent < n:
        k = min(per, n - sent)
        sock.sendall(chunk if k == per else frame * k)
        sent += k
    sock.sendall(b"PING\r\n")
    got = b""
    while b"PONG\r\n" not in got:
        got += sock.recv(4096)
    sock.close()


def core_run(port: int, ca: str | None, n: int, size: int) -> float:
    ctx = mp.get_context("spawn")
    ready, done, start = ctx.Event(), ctx.Queue(), ctx.Queue()
    sub = ctx.Process(target=_subscriber, args=(port, ca, n, size, ready, done))
    sub.start()
    if not ready.wait(30):
        raise RuntimeError("subscriber did not connect")
    time.sleep(0.1)
    pub = ctx.Process(target=_publisher, args=(port, ca, n, size, start))
    pub.start()
    t0 = start.get(timeout=60)
    t1 = done.get(timeout=300)
    pub.join(60)
    sub.join(60)
    return n / (t1 - t0)


def _js_publisher(port: int, ca: str | None, n: int, size: int, window: int, out: Any) -> None:
    sock = _connect(port, ca, b"SUB _INBOX.tls.* 1\r\n")
    stream = b'{"name":"TLSB","subjects":["tlsb.>"],"storage":"memory"}'
    create = b"PUB $JS.API.STREAM.CREATE.TLSB _INBOX.tls.c %d\r\n%s\r\n"
    sock.sendall(create % (len(stream), stream))
    buf = b""
    while b"\r\n" not in buf or b"MSG" not in buf:
        buf += sock.recv(65536)
    time.sleep(0.05)
    payload = b"x" * size
    frames = [b"PUB tlsb.x _INBOX.tls.%d %d\r\n%s\r\n" % (i, size, payload) for i in range(64)]
    sent = acked = 0
    pending = b""
    t0 = time.perf_counter()
    while acked < n:
        room = min(window - (sent - acked), n - sent)
        if room > 0:
            sock.sendall(b"".join(frames[(sent + i) % 64] for i in range(room)))
            sent += room
        data = sock.recv(1 << 20)
        if not data:
            raise RuntimeError("server closed")
        pending += data
        # each PubAck is one MSG frame; count complete ones
        while True:
            i = pending.find(b"MSG ")
            if i < 0:
                break
            eol = pending.find(b"\r\n", i)
            if eol < 0:
                break
            size_n = int(pending[i:eol].rsplit(b" ", 1)[1])
            end = eol + 2 + size_n + 2
            if end > len(pending):
                break
            acked += 1
            pending = pending[end:]
    out.put(n / (time.perf_counter() - t0))
    sock.close()


def js_run(port: int, ca: str | None, n: int, size: int, window: int) -> float:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_js_publisher, args=(port, ca, n, size, window, out))
    p.start()
    rate = float(out.get(timeout=300))
    p.join(60)
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=500_000, help="core messages per run")
    ap.add_argument("--size", type=int, default=128, help="payload bytes")
    ap.add_argument("--js-n", type=int, default=100_000, help="JetStream messages per run")
    ap.add_argument("--window", type=int, default=1000, help="PubAcks outstanding")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell (median reported)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--natsd-cmd", default=f"{sys.executable} -m natsd")
    a = ap.parse_args()
    ns_bin = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or "nats-server"
    tmp = Path(tempfile.mkdtemp(prefix="natsd-tls-bench-"))
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    cert, key, ca_file = tmp / "server.pem", tmp / "server-key.pem", tmp / "ca.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    tls = f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\n'
    cmds = {"nats-server": [ns_bin], "natsd": a.natsd_cmd.split()}
    results: dict[str, dict[str, float]] = {}
    servers: list[Server] = []
    try:
        for kind, cmd in cmds.items():
            for mode, conf in (("plain", ""), ("tls", tls)):
                name = f"{kind}-{mode}"
                srv = Server(name, cmd, conf, tmp)
                servers.append(srv)
                cafile = str(ca_file) if mode == "tls" else None
                core = [core_run(srv.port, cafile, a.n, a.size) for _ in range(a.repeat)]
                js = [js_run(srv.port, cafile, a.js_n, a.size, a.window) for _ in range(a.repeat)]
                results[name] = {"core": statistics.median(core), "js": statistics.median(js)}
                print(f"{name:18s} pub->sub {results[name]['core']:>12,.0f} msgs/s   "
                      f"js async pub {results[name]['js']:>10,.0f} msgs/s", flush=True)  # fmt: skip
                srv.stop()
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{'':28s}{'pub->sub':>12s}{'js async pub':>14s}")
    rows = [
        ("natsd / nats-server, plain", "natsd-plain", "nats-server-plain"),
        ("natsd / nats-server, TLS", "natsd-tls", "nats-server-tls"),
        ("TLS / plain, nats-server", "nats-server-tls", "nats-server-plain"),
        ("TLS / plain, natsd", "natsd-tls", "natsd-plain"),
    ]
    for label, num, den in rows:
        c = results[num]["core"] / results[den]["core"]
        j = results[num]["js"] / results[den]["js"]
        print(f"{label:28s}{c:>12.2f}{j:>14.2f}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"args": vars(a), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
