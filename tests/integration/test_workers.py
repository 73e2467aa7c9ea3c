"""``natsd --workers N``: a supervisor and N server processes on one client port, as processes
on loopback (the supervisor's /healthz names each worker and its pid)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from embedded_cluster import free_port_run
from nats.aio.client import Client as NATS

from .conftest import ServerProcess, free_port, http_get, only_natsd, wait_for

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

    async def js_ready() -> bool:
        for mport in (w.mport + 1, w.mport + 2):
            status, _, _ = await asyncio.to_thread(
                http_get, f"http://127.0.0.1:{mport}/healthz", 3.0
            )
            if status != 200:
                return False
        return True

    await wait_for(js_ready, 20, 0.1, what=lambda: w.sp.log()[-3000:])
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
