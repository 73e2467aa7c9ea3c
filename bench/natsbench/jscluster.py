"""The ``jscluster`` group's servers: one column = a standalone JetStream server plus a
three-server JetStream cluster, all started with the column's command (natsd or nats-server).

Every server reads a nats-server config file (both servers read them), so the standalone one
and the cluster members have the same JetStream settings (each server's defaults; only
``store_dir`` is set) and differ only in the ``cluster {}`` block:

    server_name: c1
    http_port: <free>
    jetstream { store_dir: "<root>/c1" }
    cluster { name: benchjs, listen: 127.0.0.1:<free>, routes: [<all three>] }

The client port comes from ``-a 127.0.0.1 -p PORT`` as for every bench server. The cluster
is ready when every member's ``/jsz`` names the same ``meta_cluster.leader`` and a probe
stream can be created (natsd may know its leader a moment before the API answers) and
deleted. Which member owns a stream is read from STREAM.INFO's ``cluster.leader``.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsload import api_error, js_api, next_msgs
from .loadgen import BenchError, StreamParser, _recv_some, new_inbox
from .servers import HOST, Server, ServerStartError, free_port

JS_CLUSTER_NAME = "benchjs"
MEMBERS = ("c1", "c2", "c3")
STANDALONE = "s0"
#: headers + no_responders: a publish nobody is subscribed to gets a 503 status message
NR_CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'


def _conf(name: str, store: Path, http: int, cluster: str = "") -> str:
    return (
        f"server_name: {name}\nhttp_port: {http}\n"
        f"jetstream {{ store_dir: {json.dumps(str(store))} }}\n{cluster}"
    )


def jsz_leader(http_port: int) -> str:
    """The meta leader this server's ``/jsz`` names ('' when none or not answering)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/jsz", timeout=1.0) as r:
            doc = json.loads(r.read())
    except (OSError, ValueError):
        return ""
    meta = doc.get("meta_cluster") if isinstance(doc, dict) else None
    leader = meta.get("leader") if isinstance(meta, dict) else None
    return str(leader) if leader else ""


@dataclass
class NodeGroup(Server):
    """Several servers seen as one by ``Run.go``: alive when all are, CPU summed."""

    members: list[Server] = field(default_factory=list)

    def alive(self) -> bool:
        return all(m.alive() for m in self.members)

    def cpu_seconds(self) -> float:
        return sum(m.cpu_seconds() for m in self.members)


@dataclass
class JsClusterColumn(Server):
    """A standalone JetStream server and a three-server JetStream cluster (one column).

    ``port`` is the standalone server's client port; ``members`` maps each cluster member's
    ``server_name`` to its ``Server``; ``root`` holds the config files and store directories.
    """

    root: Path = Path()
    standalone: Server | None = None
    members: dict[str, Server] = field(default_factory=dict)
    http: dict[str, int] = field(default_factory=dict)
    meta_leader: str = ""

    def _start_once(self, timeout: float) -> None:
        self.starts += 1
        self.root.mkdir(parents=True, exist_ok=True)
        stem = self.log_stem or self.name
        sconf = self.root / f"{STANDALONE}.conf"
        sconf.write_text(_conf(STANDALONE, self.root / STANDALONE, free_port()))
        self.standalone = Server(
            self.name, [*self.cmd, "-c", str(sconf)], self.log_dir, self.env,
            store_dir=self.root / STANDALONE, log_stem=f"{stem}-standalone",
        )  # fmt: skip
        cports = {n: free_port() for n in MEMBERS}
        self.http = {n: free_port() for n in MEMBERS}
        routes = ", ".join(f'"nats-route://{HOST}:{p}"' for p in cports.values())
        self.members = {}
        for n in MEMBERS:
            cl = (
                f"cluster {{ name: {JS_CLUSTER_NAME}, listen: {json.dumps(f'{HOST}:{cports[n]}')},"
                f" routes: [{routes}] }}\n"
            )
            conf = self.root / f"{n}.conf"
            conf.write_text(_conf(n, self.root / n, self.http[n], cl))
            self.members[n] = Server(
                self.name, [*self.cmd, "-c", str(conf)], self.log_dir, self.env,
                store_dir=self.root / n, log_stem=f"{stem}-{n}",
            )  # fmt: skip
        self.standalone.start(timeout, attempts=1)
        self.port, self.info = self.standalone.port, self.standalone.info
        for m in self.members.values():
            m.start(timeout, attempts=1)
        self._wait_ready(time.monotonic() + timeout)

    def _wait_ready(self, deadline: float) -> None:
        """Meta leader agreed by all members, then a probe stream created and deleted."""
        while True:
            seen = {jsz_leader(self.http[n]) for n in MEMBERS}
            if len(seen) == 1 and "" not in seen:
                self.meta_leader = seen.pop()
                break
            if time.monotonic() > deadline or not self.alive():
                raise ServerStartError(
                    f"{self.name}: no meta leader agreed by all members (saw {sorted(seen)});"
                    " log tail:\n" + self.log_tail()
                )
            time.sleep(0.1)
        probe = f"PROBE_{uuid.uuid4().hex[:8]}"
        body = {"name": probe, "subjects": [f"probe.{probe}"], "storage": "file"}
        last = ""
        while True:
            for n in MEMBERS:  # natsd: the API may answer a moment after the leader is known
                try:
                    doc = js_api(self.members[n].port, f"$JS.API.STREAM.CREATE.{probe}", body, 2.0)
                    err = api_error(doc)
                except (BenchError, OSError) as exc:
                    err = f"{type(exc).__name__}: {exc}"
                if err is None:
                    doc = js_api(self.members[n].port, f"$JS.API.STREAM.DELETE.{probe}", None, 5.0)
                    if (err := api_error(doc)) is not None:
                        raise ServerStartError(f"{self.name}: probe stream delete failed: {err}")
                    return
                last = err
            if time.monotonic() > deadline or not self.alive():
                raise ServerStartError(
                    f"{self.name}: the cluster does not create streams: {last}; log tail:\n"
                    + self.log_tail()
                )
            time.sleep(0.1)

    def group(self) -> NodeGroup:
        """The three cluster members as one server (for ``Run.go``: alive, CPU)."""
        return NodeGroup(self.name, self.cmd, self.log_dir, members=list(self.members.values()))

    def owner(self, stream: str, timeout: float) -> tuple[str, dict[str, Any]]:
        """The member that owns ``stream`` (STREAM.INFO ``cluster.leader``) and the info."""
        any_port = next(iter(self.members.values())).port
        doc = js_api(any_port, f"$JS.API.STREAM.INFO.{stream}", None, timeout)
        if (err := api_error(doc)) is not None:
            raise BenchError(f"stream info failed: {err}")
        leader = (doc.get("cluster") or {}).get("leader")
        if leader not in self.members:
            raise BenchError(f"stream info names no member as leader: {doc.get('cluster')!r}")
        return str(leader), doc

    def other(self, owner: str) -> str:
        """A member that does not own the stream; not the meta leader when there is a choice
        (so the publisher's server does no API work of its own)."""
        rest = [n for n in MEMBERS if n != owner]
        plain = [n for n in rest if n != self.meta_leader]
        return (plain or rest)[0]

    def _all(self) -> list[Server]:
        return [s for s in (self.standalone, *self.members.values()) if s is not None]

    def cpu_seconds(self) -> float:
        return sum(s.cpu_seconds() for s in self._all())

    def alive(self) -> bool:
        return self.standalone is not None and all(s.alive() for s in self._all())

    def stop(self, timeout: float = 5.0) -> None:
        for s in self._all():
            s.stop(timeout)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(f"  ({s.log_stem})\n{s.log_tail(lines)}" for s in self._all())


def wait_interest(port: int, subject: str, deadline: float) -> int:
    """Publish one message on ``subject`` through ``port`` until the stream acknowledges it.

    A server learns of the owner's subscription over the route a moment after the create;
    until then a publish would be dropped silently. With ``no_responders`` the server answers
    503 instead, and nothing was stored, so the probe is retried. Returns the acked sequence
    (the stream then holds exactly this one message).
    """
    inbox = new_inbox()
    sock = socket.create_connection((HOST, port), timeout=2.0)
    with sock:
        buf = b""
        while b"\r\n" not in buf:
            buf += _recv_some(sock, deadline)
        if not buf.startswith(b"INFO "):
            raise BenchError(f"expected INFO, got {buf[:80]!r}")
        parser = StreamParser()
        parser.feed(buf.split(b"\r\n", 1)[1])
        sock.sendall(NR_CONNECT + f"SUB {inbox} 1\r\n".encode())
        while True:
            sock.sendall(b"PUB %s %s 5\r\nprobe\r\n" % (subject.encode(), inbox.encode()))
            msgs = next_msgs(sock, parser, deadline)
            body = msgs[0].payload
            if body.startswith(b"NATS/1.0 503"):
                if time.monotonic() > deadline:
                    raise BenchError(f"no interest in {subject} on port {port}")
                time.sleep(0.02)
                continue
            try:
                return int(json.loads(body)["seq"])
            except (ValueError, KeyError, TypeError) as exc:
                raise BenchError(f"probe publish: not a PubAck: {body[:200]!r}") from exc
