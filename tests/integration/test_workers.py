"""``natsd --workers N``: a supervisor and N server processes on one client port, as processes
on loopback (the supervisor's /healthz names each worker and its pid)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import socket
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from ports import free_port, free_port_run

from .conftest import ServerProcess, http_get, only_natsd, wait_for

pytestmark = only_natsd


class Workers:
    """A running ``natsd --workers N`` and the ports it was given."""

    def __init__(self, sp: ServerProcess, port: int, mport: int) -> None:
        self.sp = sp
        self.port = port
        self.mport = mport
        self.url = f"nats://127.0.0.1:{port}"

    async def health(self) -> tuple[int, dict[str, Any]]:
        status, _, body = await asyncio.to_thread(
            http_get, f"http://127.0.0.1:{self.mport}/healthz", 3.0
        )
        return status, json.loads(body)

    async def wait_healthy(self, timeout: float = 20.0) -> dict[str, Any]:
        async def ok() -> dict[str, Any] | None:
            assert self.sp.proc is not None and self.sp.proc.poll() is None, self.sp.log()
            try:
                status, body = await self.health()
            except OSError:
                return None
            return body if status == 200 else None

        return dict(await wait_for(ok, timeout, 0.1, what=lambda: self.sp.log()[-3000:]))

    async def wait_js_ready(self) -> None:
        """Until every worker's /healthz says its JetStream is current."""

        async def js_ready() -> bool:
            for mport in (self.mport + 1, self.mport + 2):
                status, _, _ = await asyncio.to_thread(
                    http_get, f"http://127.0.0.1:{mport}/healthz", 3.0
                )
                if status != 200:
                    return False
            return True

        await wait_for(js_ready, 20, 0.1, what=lambda: self.sp.log()[-3000:])

    async def pids(self) -> dict[str, int]:
        body = await self.wait_healthy()
        return {w["name"]: w["pid"] for w in body["workers"]}


@pytest.fixture
async def workers(
    spawn: Callable[..., ServerProcess],
) -> Callable[..., Awaitable[Workers]]:
    async def _start(n: int | None = 2, *extra: str) -> Workers:
        """``n`` None: the count comes from a configuration file in ``extra``."""
        # Monitor ports P..P+N below the ephemeral range: a kernel-picked P can have P+1
        # taken by an outgoing connection's local port (seen in CI: worker 1 failed to bind).
        port, mport = free_port(), free_port_run((n or 4) + 1)
        count = [] if n is None else ["--workers", str(n)]
        sp = spawn(*count, "-a", "127.0.0.1", "-p", str(port), "-m", str(mport),
                   "--http_host", "127.0.0.1", "-n", "wk", *extra)  # fmt: skip
        w = Workers(sp, port, mport)
        await w.wait_healthy()
        return w

    return _start


async def on_each_worker(
    connect: Callable[..., Awaitable[NATS]], url: str, names: set[str]
) -> dict[str, NATS]:
    """Connect until every worker in ``names`` has one of our connections (the kernel spreads
    new connections over the listeners by a hash of the addresses)."""
    out: dict[str, NATS] = {}
    for _ in range(64):
        nc = await connect(url)
        out.setdefault(nc._server_info["server_name"], nc)
        if set(out) == names:
            return out
    raise AssertionError(f"64 connections reached only {sorted(out)}")


async def routed(pub: NATS, sub: NATS, subject: str) -> list[bytes]:
    """Subscribe on ``sub``, then publish on ``pub`` until the interest has crossed the route
    (the first message arrives); returns what the subscription received, probes dropped."""
    got: list[bytes] = []
    ready = asyncio.Event()

    async def cb(msg: Any) -> None:
        if msg.data == b"probe":
            ready.set()
        else:
            got.append(msg.data)

    await sub.subscribe(subject, cb=cb)
    await sub.flush()
    for _ in range(200):
        await pub.publish(subject, b"probe")
        await pub.flush()
        try:
            await asyncio.wait_for(ready.wait(), 0.05)
            return got
        except TimeoutError:
            continue
    raise AssertionError(f"{subject}: no message crossed the route")


NAMES = {"wk-w1", "wk-w2"}


async def test_clients_on_both_workers_see_one_server(workers, connect) -> None:
    w = await workers(2)
    body = await w.wait_healthy()
    assert body["status"] == "ok"
    assert [x["name"] for x in body["workers"]] == ["wk-w1", "wk-w2"]
    assert all(x["status"] == "ok" and x["pid"] > 0 for x in body["workers"])
    await wait_for(lambda: "All 2 workers are ready" in w.sp.log(), what="the ready line")
    conns = await on_each_worker(connect, w.url, NAMES)
    a, b = conns["wk-w1"], conns["wk-w2"]
    # Each worker monitors on http_port + i and knows the other by route.
    for i, name in enumerate(sorted(NAMES), start=1):
        status, _, varz = await asyncio.to_thread(
            http_get, f"http://127.0.0.1:{w.mport + i}/varz", 3.0
        )
        assert status == 200 and json.loads(varz)["server_name"] == name

    # pub/sub from w2 to w1
    got = await routed(b, a, "x.cross")
    for i in range(20):
        await b.publish("x.cross", str(i).encode())
    await b.flush()
    await wait_for(lambda: len(got) == 20, what=lambda: f"{len(got)} of 20")
    assert got == [str(i).encode() for i in range(20)]

    # request/reply: the responder on w1, the requester on w2
    async def reply(msg: Any) -> None:
        await msg.respond(b"re:" + msg.data)

    await a.subscribe("svc", cb=reply)
    await routed(b, a, "svc.ready")  # a's interest in svc has crossed with svc.ready's
    resp = await b.request("svc", b"ping", timeout=3)
    assert resp.data == b"re:ping"

    # a queue group with a member on each worker: every message delivered exactly once
    qgot: list[bytes] = []

    async def member(msg: Any) -> None:
        qgot.append(msg.data)

    await a.subscribe("q", queue="g", cb=member)
    await b.subscribe("q", queue="g", cb=member)
    await routed(a, b, "q.ready")
    await routed(b, a, "q.ready2")
    for i in range(50):
        await a.publish("q", f"a{i}".encode())
        await b.publish("q", f"b{i}".encode())
    await a.flush()
    await b.flush()
    await wait_for(lambda: len(qgot) >= 100, what=lambda: f"{len(qgot)} of 100")
    await asyncio.sleep(0.1)  # a duplicate would arrive now
    assert sorted(qgot) == sorted(
        [f"a{i}".encode() for i in range(50)] + [f"b{i}".encode() for i in range(50)]
    )


async def test_killed_worker_is_restarted_and_sigterm_stops_all(workers, connect) -> None:
    w = await workers(2)
    before = await w.pids()
    assert set(before) == NAMES
    os.kill(before["wk-w1"], signal.SIGKILL)

    async def back() -> dict[str, Any] | None:
        status, body = await w.health()
        ws = {x["name"]: x for x in body["workers"]}
        one = ws["wk-w1"]
        if status == 200 and one["pid"] not in (None, before["wk-w1"]):
            return ws
        return None

    ws = await wait_for(back, 20, 0.1, what=lambda: w.sp.log()[-3000:])
    assert ws["wk-w1"]["restarts"] == 1
    assert ws["wk-w2"]["pid"] == before["wk-w2"]  # the other kept running
    assert "Worker wk-w1 (pid" in w.sp.log() and "signal SIGKILL; restarting" in w.sp.log()

    # The new wk-w1 rejoined: messages cross between it and wk-w2.
    conns = await on_each_worker(connect, w.url, NAMES)
    got = await routed(conns["wk-w2"], conns["wk-w1"], "after.restart")
    await conns["wk-w2"].publish("after.restart", b"hello")
    await conns["wk-w2"].flush()
    await wait_for(lambda: got == [b"hello"], what=lambda: str(got))

    pids = [ws["wk-w1"]["pid"], ws["wk-w2"]["pid"]]
    w.sp.signal(signal.SIGTERM)
    assert await w.sp.wait_exit(20) == 0
    for pid in pids:  # reaped by the supervisor: no orphans left
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_supervisor_killed_takes_its_workers(workers) -> None:
    w = await workers(2)
    pids = list((await w.pids()).values())
    w.sp.signal(signal.SIGKILL)
    await w.sp.wait_exit(5)

    def gone() -> bool:
        out = True
        for pid in pids:
            try:
                os.kill(pid, 0)
                # Exited but not reaped yet (init reaps it): a zombie counts as gone.
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                out = out and state == "Z"
            except (ProcessLookupError, FileNotFoundError):
                pass
        return out

    await wait_for(gone, 15, 0.05, what="the workers to exit after their supervisor")


async def test_jetstream_streams_spread_over_the_workers(workers, connect, tmp_dir) -> None:
    """With JetStream the workers form a meta group and place streams across themselves
    (fewest streams first, so four streams split two and two); a stream is usable from a
    connection on either worker, and a killed worker comes back with its streams."""
    w = await workers(2, "-js", "-sd", tmp_dir)

    await w.wait_js_ready()
    conns = await on_each_worker(connect, w.url, NAMES)
    a, b = conns["wk-w1"], conns["wk-w2"]
    owners = {}
    for i in range(4):
        body = json.dumps({"name": f"S{i}", "subjects": [f"s{i}.>"]}).encode()
        r = json.loads((await a.request(f"$JS.API.STREAM.CREATE.S{i}", body, timeout=5)).data)
        assert "error" not in r, r
        owners[f"S{i}"] = r["cluster"]["leader"]
    assert sorted(owners.values()) == ["wk-w1", "wk-w1", "wk-w2", "wk-w2"]
    for i in range(4):
        for k, nc in enumerate((a, b)):
            ack = json.loads((await nc.request(f"s{i}.x", b"m", timeout=5)).data)
            assert ack == {"stream": f"S{i}", "seq": k + 1}
    before = await w.pids()
    os.kill(before["wk-w2"], signal.SIGKILL)

    async def back() -> bool:
        try:
            r = json.loads((await a.request("$JS.API.STREAM.INFO." + mine, b"", timeout=1)).data)
        except Exception:
            return False
        return r.get("state", {}).get("messages") == 2

    mine = next(s for s, o in owners.items() if o == "wk-w2")
    await wait_for(back, 30, 0.2, what=lambda: w.sp.log()[-3000:])


async def test_worker_config_error_stops_the_supervisor(spawn, tmp_dir) -> None:
    # Accepted by the configuration reader, refused when a worker builds its server.
    conf = Path(tmp_dir) / "bad.conf"
    conf.write_text(
        textwrap.dedent("""
        lame_duck_duration: "1s"
        lame_duck_grace_period: "2s"
    """)
    )
    sp = spawn("--workers", "2", "-p", str(free_port()), "-c", str(conf))
    assert await sp.wait_exit(20) == 1
    text = sp.log()
    assert "lame duck grace period (2s) should be strictly lower" in text
    assert "refused its configuration; stopping" in text
    assert "restarting" not in text  # a configuration error is not restarted


async def test_bad_key_with_workers_exits_with_the_error(spawn, tmp_dir) -> None:
    conf = Path(tmp_dir) / "bad.conf"
    conf.write_text("workers: 2\nno_such_key: 1\n")
    sp = spawn("-c", str(conf), "-p", str(free_port()))
    assert await sp.wait_exit(20) == 1
    assert 'unknown field "no_such_key"' in sp.log()


async def test_sighup_reloads_every_worker(workers, tmp_dir) -> None:
    conf = Path(tmp_dir) / "w.conf"
    conf.write_text("workers: 2\nmax_payload: 2048\n")
    w = await workers(None, "-c", str(conf))

    async def payloads() -> list[int]:
        out = []
        for i in (1, 2):
            _, _, body = await asyncio.to_thread(
                http_get, f"http://127.0.0.1:{w.mport + i}/varz", 3.0
            )
            out.append(json.loads(body)["max_payload"])
        return out

    assert await payloads() == [2048, 2048]
    conf.write_text("workers: 2\nmax_payload: 4096\n")
    w.sp.signal(signal.SIGHUP)

    async def reloaded() -> bool:
        return await payloads() == [4096, 4096]

    await wait_for(reloaded, 10, 0.1, what="both workers to reload")

    # Changing the number of workers needs a restart: the whole reload is refused.
    conf.write_text("max_payload: 8192\nworkers: 3\n")
    w.sp.signal(signal.SIGHUP)
    await wait_for(
        lambda: "config reload not supported for Workers: old=2, new=3" in w.sp.log(),
        what="the refusal",
    )
    assert await payloads() == [4096, 4096]


async def test_port_taken_by_another_process_stops_instead_of_looping(spawn) -> None:
    with socket.socket() as other:  # a listener without SO_REUSEPORT
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        sp = spawn("--workers", "2", "-a", "127.0.0.1", "-p", str(port))
        assert await sp.wait_exit(20) == 1
    text = sp.log()
    assert "address already in use" in text
    assert "failed to start (code 1); stopping" in text
    assert "restarting" not in text


def _raw_on(port: int, server: str) -> socket.socket:
    """A raw client socket that the kernel put on worker ``server``."""
    for _ in range(64):
        s = socket.create_connection(("127.0.0.1", port))
        info = b""
        while b"\r\n" not in info:
            info += s.recv(4096)
        if json.loads(info[5 : info.index(b"\r\n")])["server_name"] == server:
            s.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            buf = b""
            while b"PONG" not in buf:
                buf += s.recv(4096)
            return s
        s.close()
    raise AssertionError(f"64 connections did not reach {server}")


def _feed(port: int, server: str, k: str, stop: Any, count: Any) -> None:
    """A feed process: ``feed.<k>`` messages 0, 1, ... on worker ``server``, 20 a
    millisecond until ``stop``; ``count`` is how many went out (all of them, at the end)."""
    s = _raw_on(port, server)
    n = 0
    while not stop.is_set():
        s.sendall(b"".join(b"PUB feed.%s %d\r\n%d\r\n" % (k.encode(), len(str(i)), i)
                           for i in range(n, n + 20)))  # fmt: skip
        n += 20
        count.value = n
        time.sleep(0.001)
    s.sendall(b"PING\r\n")
    buf = b""
    while b"PONG" not in buf:
        buf += s.recv(4096)
    s.close()


async def _connz_names(w: Workers, i: int) -> set[str]:
    _, _, body = await asyncio.to_thread(
        http_get, f"http://127.0.0.1:{w.mport + i}/connz?limit=1000", 3.0
    )
    return {c.get("name", "") for c in json.loads(body)["connections"]}


async def test_connection_moves_to_the_worker_it_publishes_to(workers, connect, tmp_dir) -> None:
    """A connection whose publishes all go to a stream on the other worker is moved there
    (its socket, passed between the workers): the client sees nothing. Its PubAcks, its
    subscription's messages from a publisher running throughout, and its requests after the
    move all arrive exactly once and in order."""
    w = await workers(2, "-js", "-sd", tmp_dir)

    await w.wait_js_ready()
    conns = await on_each_worker(connect, w.url, NAMES)
    body = json.dumps({"name": "S", "subjects": ["s.>"]}).encode()
    r = json.loads((await conns["wk-w1"].request("$JS.API.STREAM.CREATE.S", body, timeout=5)).data)
    assert "error" not in r, r
    owner = r["cluster"]["leader"]
    other = next(n for n in NAMES if n != owner)
    # The mover: a named connection on the worker that does not own the stream.
    for _ in range(64):
        mover = await connect(w.url, name="mover")
        if mover._server_info["server_name"] == other:
            break
        await mover.close()
    assert mover._server_info["server_name"] == other
    # Two feeds the mover subscribes to (one wildcard subscription), one published on each
    # worker; a bystander on each worker subscribes to the feed published on the other, so
    # each worker routes its feed to the other all along, the mover's own interest aside.
    feeders = {"t": conns[owner], "s": conns[other]}
    seen: dict[str, list[int]] = {"t": [], "s": []}
    for k, nc in feeders.items():
        await routed(nc, mover, f"probe.{k}")
    bystanders = {k: 0 for k in feeders}

    async def on_feed(msg: Any) -> None:
        seen[msg.subject[-1]].append(int(msg.data))

    async def on_bystander(msg: Any) -> None:
        bystanders[msg.subject[-1]] += 1

    await mover.subscribe("feed.*", cb=on_feed)
    await mover.flush()
    await feeders["t"].subscribe("feed.s", cb=on_bystander)
    await feeders["s"].subscribe("feed.t", cb=on_bystander)
    for k, nc in feeders.items():
        await nc.flush()
        await routed(nc, mover, f"probe2.{k}")  # the feeds' interest has crossed too
    # Each feed: its own process and socket on its worker, 20 messages a millisecond, so
    # every step of the move has messages in flight from both sides.
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    counts = {k: ctx.Value("q", 0) for k in feeders}
    procs = {k: ctx.Process(target=_feed, args=(w.port, nc._server_info["server_name"], k,
                                                stop, counts[k]))
             for k, nc in feeders.items()}  # fmt: skip
    for proc in procs.values():
        proc.start()
    await wait_for(lambda: all(c.value > 0 for c in counts.values()), 20, 0.05)
    js = mover.jetstream()
    seqs: list[int] = []
    for _ in range(8):
        acks = await asyncio.gather(*(js.publish("s.x", b"%d" % i) for i in range(100)))
        seqs += [a.seq for a in acks]
    moved = await _connz_names(w, int(owner[-1]))
    assert "mover" in moved, (owner, moved, w.sp.log()[-2000:])
    assert "mover" not in await _connz_names(w, int(other[-1]))
    # After the move: requests, a new subscription, more publishes.
    for _ in range(100):
        seqs.append((await js.publish("s.x", b"after")).seq)
    assert seqs == list(range(1, 901))
    stop.set()
    for proc in procs.values():
        await asyncio.to_thread(proc.join, 10)
        assert proc.exitcode == 0
    sent = {k: c.value for k, c in counts.items()}
    await mover.flush()

    def all_in() -> bool:
        return all(len(seen[k]) >= sent[k] for k in sent)

    await wait_for(all_in, 5, 0.05, what=lambda: ({k: len(v) for k, v in seen.items()}, sent))
    await asyncio.sleep(0.2)  # (a duplicate would arrive after the last message)
    for k in sent:
        assert seen[k] == list(range(sent[k])), f"feed {k} lost, doubled or reordered messages"
        assert sent[k] > 100
    info = json.loads((await mover.request("$JS.API.STREAM.INFO.S", b"", timeout=5)).data)
    assert info["state"]["messages"] == 900


async def test_connection_with_a_queue_subscription_stays(workers, connect, tmp_dir) -> None:
    """Queue subscriptions do not move (their weights would need the same exchange): such a
    connection keeps publishing through the route, and every publish is acknowledged."""
    w = await workers(2, "-js", "-sd", tmp_dir)
    conns = await on_each_worker(connect, w.url, NAMES)
    body = json.dumps({"name": "Q", "subjects": ["q.>"]}).encode()

    async def created() -> dict[str, Any] | None:
        r = json.loads((await conns["wk-w1"].request("$JS.API.STREAM.CREATE.Q", body, 5)).data)
        return r if "error" not in r else None

    r = await wait_for(created, 20, 0.2)
    other = next(n for n in NAMES if n != r["cluster"]["leader"])
    for _ in range(64):
        nc = await connect(w.url, name="stayer")
        if nc._server_info["server_name"] == other:
            break
        await nc.close()
    await nc.subscribe("work", queue="g")
    js = nc.jetstream()
    seqs = []
    for _ in range(4):
        seqs += [
            a.seq for a in await asyncio.gather(*(js.publish("q.x", b"m") for _ in range(100)))
        ]
    assert seqs == list(range(1, 401))
    assert "stayer" in await _connz_names(w, int(other[-1]))
