"""Embedded natsd JetStream clusters for tests: three servers on the test's event loop, each
listing all three in ``cluster.routes``, and optionally an ``edge`` server without JetStream
that joins by the same routes (its clients reach JetStream only through the others, so a
client there is never on the server that owns a stream)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from ports import free_ports

from natsd.config.cluster import parse_go_url
from natsd.config.options import ClusterOptions
from natsd.server import Server

CLUSTER = "jsc"
# the message ids of publish_acked (unique within a test run)
_publish_ids = itertools.count(1)
EDGE = "edge"


def spawn_natsd(conf: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """``python -m natsd -c conf`` in its own session, output appended to ``log_path`` (the
    compiled modules when the test runs with them on PYTHONPATH)."""
    with open(log_path, "ab") as logf:
        return subprocess.Popen(
            [sys.executable, "-m", "natsd", "-c", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=logf,
            start_new_session=True,
            env={**os.environ},
        )


async def api_request(
    nc: Any, subject: str, body: Any = None, timeout: float = 5.0
) -> dict[str, Any]:
    """A JetStream API request with a JSON body; its JSON answer."""
    data = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request(subject, data, timeout=timeout)
    out: dict[str, Any] = json.loads(msg.data)
    return out


async def until(cond: Callable[[], Any], timeout: float = 15.0) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not cond():
        if loop.time() - t0 > timeout:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)
    return loop.time() - t0


class EmbeddedJsCluster:
    """Three JetStream servers n1..n3 (``size`` of them: n1..n<size>), and ``edge`` when
    asked, on loopback: natsd ``Server`` objects on the test's event loop. Clients' ports are
    the kernel's choice, or (``fixed_ports``) fixed, so that a restarted server comes back
    where its clients reconnect. A subclass gives a server more options (``options``: a
    disk model, say). The clusters of processes are ``proc_cluster.ProcCluster``."""

    def __init__(
        self, tmp: Path, edge: bool = False, size: int = 3, fixed_ports: bool = False,
        **server_kw: Any,
    ) -> None:  # fmt: skip
        self.tmp = tmp
        self.server_kw = server_kw  # more options for every server
        self.names = [f"n{i}" for i in range(1, size + 1)]
        self.cports = free_ports(size + 1)
        self.client_ports = free_ports(size + 1) if fixed_ports else [0] * (size + 1)
        self.servers: dict[str, Server] = {}
        self.with_edge = edge

    def options(self, name: str) -> dict[str, Any]:
        """Server ``name``'s own options, over ``server_kw``."""
        return {"jetstream": True, "store_dir": str(self.tmp / name)}

    @property
    def urls(self) -> list[str]:
        """The JetStream servers' client URLs (fixed ports only: a port 0 has none yet)."""
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports[: len(self.names)]]

    async def start(self, name: str) -> Server:
        size = len(self.names)
        routes = [parse_go_url(f"nats-route://127.0.0.1:{p}") for p in self.cports[:size]]
        i = size if name == EDGE else self.names.index(name)
        c = ClusterOptions(name=CLUSTER, host="127.0.0.1", port=self.cports[i], routes=routes)
        kw: dict[str, Any] = dict(self.server_kw)
        if name != EDGE:
            kw |= self.options(name)
        srv = Server(host="127.0.0.1", port=self.client_ports[i], server_name=name, cluster=c,
                     http_port=-1, **kw)  # fmt: skip
        await srv.start()
        self.servers[name] = srv
        return srv

    async def start_all(self) -> None:
        names = [*self.names, EDGE] if self.with_edge else self.names
        await asyncio.gather(*(self.start(n) for n in names))
        await self.ready()

    async def ready(self) -> None:
        """A meta leader, and every JetStream server's row in the server table."""
        await until(lambda: self.leader() != "")
        await until(
            lambda: all(
                len(s.js_cluster.meta.servers) == len(self.names)
                for s in self.servers.values()
                if s.js_cluster is not None
            )
        )

    async def stop(self, name: str) -> None:
        await self.servers.pop(name).shutdown()

    async def stop_all(self) -> None:
        for n in list(self.servers):
            await self.stop(n)

    def url(self, name: str) -> str:
        return f"nats://127.0.0.1:{self.servers[name].port}"

    def leader(self) -> str:
        for name, s in self.servers.items():
            if s.js_cluster is not None and s.js_cluster.is_leader():
                return name
        return ""

    def streams(self, name: str) -> set[str]:
        js = self.servers[name].jetstream
        return {s for ja in js.accounts.values() for s in ja.streams} if js else set()


def replica_leader(trio: EmbeddedJsCluster, stream: str) -> str:
    """The server whose replica of replicated stream ``stream`` takes publishes ("": none)."""
    for name, srv in trio.servers.items():
        js = srv.jetstream
        s = js.accounts["$G"].streams.get(stream) if js is not None else None
        if s is not None and s.replica is not None and s.replica.leading:
            return name
    return ""


async def take_and_ack(nc: Any, stream: str, consumer: str, n: int) -> list[int]:
    """Pull ``n`` messages from a durable consumer and ack-sync each; their sequences."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    req = json.dumps({"batch": n, "expires": 2 * 10**9}).encode()
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}", req, reply=inbox)
    seqs = []
    try:
        while len(seqs) < n:
            msg = await sub.next_msg(timeout=5)
            assert msg.reply, msg.headers
            seqs.append(int(msg.reply.split(".")[5]))
            await nc.request(msg.reply, b"+ACK", timeout=5)
    finally:
        await sub.unsubscribe()
    return seqs


async def publish_acked(
    nc: NATS, subject: str, data: bytes, headers: dict[str, str] | None = None, within: float = 10
) -> dict[str, Any]:
    """A publish acknowledged by the stream, retried while the stream has no leader (no
    responders, or a leader that went away before answering). A publish without headers
    carries a message id of its own, as a client that retries must: an answer later than
    the request's second (a loop stall) is no loss, and the retry would otherwise store the
    message twice (a stream then holds one more than the test published). The retry's
    ``duplicate`` answer is then the first attempt's PubAck."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    own_id = headers is None
    if own_id:
        headers = {"Nats-Msg-Id": f"publish-acked-{next(_publish_ids)}"}
    while True:
        try:
            msg = await nc.request(subject, data, timeout=1.0, headers=headers)
            out: dict[str, Any] = json.loads(msg.data)
            if own_id:
                out.pop("duplicate", None)
            return out
        except (NoRespondersError, NatsTimeoutError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.05)


def stream_contents(
    trio: EmbeddedJsCluster, name: str, stream: str
) -> list[tuple[int, str, bytes, int]]:
    js = trio.servers[name].jetstream
    assert js is not None
    s = js.accounts["$G"].streams.get(stream) if "$G" in js.accounts else None
    if s is None:
        return []  # (not there yet: a restarted server creates it as its log replays)
    return [(seq, subj, data, ts) for seq, subj, data, ts, _hdr in store_messages(s.store)]


def store_messages(store: Any) -> list[tuple[int, str, bytes, int, bytes]]:
    """Every message a stream store holds: (sequence, subject, data, timestamp, headers)."""
    st = store.state()
    out = []
    for seq in range(st.first_seq, st.last_seq + 1):
        m = store.load_msg(seq)
        if m is not None:
            out.append((m.seq, m.subject, bytes(m.data), m.ts, bytes(m.hdr or b"")))
    return out


def log_first(trio: EmbeddedJsCluster, name: str) -> int:
    """The first index the stream group's log still holds on server ``name``."""
    groups = trio.servers[name].js_cluster.stream_groups
    (m,) = groups.members.values()
    return int(m.group.storage.first_index())


async def stream_with(
    trio: EmbeddedJsCluster,
    cfg: dict[str, Any],
    subject: str,
    payloads: list[bytes],
    via: str = "n1",
) -> None:
    """Create the stream ``cfg`` through server ``via`` and publish ``payloads`` on
    ``subject``, each acknowledged."""
    nc = await nats.connect(trio.url(via))
    try:
        reply = await api_request(nc, f"$JS.API.STREAM.CREATE.{cfg['name']}", cfg)
        assert "error" not in reply, reply
        for data in payloads:
            await publish_acked(nc, subject, data)
    finally:
        await nc.close()
