"""Rough cross-server pub→sub: a two-server cluster of nats-server, then of natsd, on loopback;
a raw-socket subscriber on server B, a raw-socket publisher on server A; msgs/s at the
subscriber. One process drives both sockets, so on a small shared machine the numbers swing
(±30% run to run): repeat it, compare medians. Not yet part of ``bench/bench.py``.

    PYTHONPATH=build/mypyc .venv/bin/python bench/cluster_xserver.py -n 300000
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from differential.harness import ServerProcess, free_port, start_server

SUBJECT = b"bench.x"


def cluster(kind: str, tmp: Path) -> list[ServerProcess]:
    ports = [free_port() for _ in range(2)]
    routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in ports)
    out = []
    for i, p in enumerate(ports):
        conf = tmp / f"{kind}-{i}.conf"
        conf.write_text(f"cluster {{ name: bench, listen: 127.0.0.1:{p}, routes: [{routes}] }}\n")
        out.append(start_server(kind, config_path=conf, log_dir=tmp))
    return out


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    s.recv(4096)
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    buf = b""
    while b"PONG" not in buf:
        buf += s.recv(4096)
    return s


def run(kind: str, n: int, size: int) -> tuple[float, int]:
    tmp = Path(tempfile.mkdtemp(prefix="xserver-"))
    a, b = cluster(kind, tmp)
    try:
        sub = connect(b.port)
        sub.sendall(b"SUB %s 1\r\n" % SUBJECT)
        pub = connect(a.port)
        frame = b"PUB %s %d\r\n%s\r\n" % (SUBJECT, size, b"p" * size)
        msg_len = len(b"MSG %s 1 %d\r\n" % (SUBJECT, size)) + size + 2
        # Until the routes are up and the interest crossed: probe, then drain.
        sub.settimeout(0.05)
        while True:
            pub.sendall(frame)
            try:
                if sub.recv(65536):
                    break
            except TimeoutError:
                pass
        sub.settimeout(0.5)
        try:
            while sub.recv(1 << 20):
                pass
        except TimeoutError:
            pass
        sub.settimeout(10)
        batch = 500
        chunk = frame * batch

        def publish() -> None:
            for _ in range(n // batch):
                pub.sendall(chunk)

        want = (n // batch) * batch * msg_len
        got = 0
        t0 = time.perf_counter()
        th = threading.Thread(target=publish)
        th.start()
        while got < want:
            try:
                d = sub.recv(1 << 20)
            except TimeoutError:
                break
            if not d:
                break
            got += len(d)
        dt = time.perf_counter() - t0
        th.join()
        return got // msg_len / dt, got // msg_len
    finally:
        a.stop()
        b.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("-n", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    rates = {}
    for kind in ("nats-server", "natsd"):
        rate, got = run(kind, args.n, args.size)
        rates[kind] = rate
        print(f"{kind:12s} {rate:12,.0f} msg/s at the subscriber ({got} of {args.n})")
    print(f"natsd / nats-server: {rates['natsd'] / rates['nats-server']:.2f}")


if __name__ == "__main__":
    main()
