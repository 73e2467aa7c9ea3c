"""The rest of natsd's cost curve, beside nats-server: consumers, connections, KV, stream growth.

Every server (``natsd``: ``python -m natsd`` as installed, compiled; the reference
``nats-server``) is started fresh for each measurement (``-js -sd <fresh dir> -a 127.0.0.1
-p <free port>``); VmRSS is read from the server process's /proc/<pid>/status, 1 s
(``--settle``) after the work. Restart to ready is SIGTERM, exit, start on the same directory,
and the time from spawn until the named request answers. Sections (``--only-section``):

``consumers``  An R1 file stream on ``c.>`` with M messages (``--consumer-msgs``, 128 B); for
    each C of ``--consumers``: the time to create C durable pull consumers (explicit ack, one
    request after the other), VmRSS increase per consumer, restart to ready (until
    CONSUMER.INFO of the last consumer answers), then the aggregate rate of consuming: each
    consumer fetches (``--batch``) and acks all M messages, all concurrently on one
    connection. Deliveries are capped (``--consume-max``, ``--consume-time``): when C x M is
    over the cap only the first consumers consume; the table says how many.
``connections``  For each N of ``--connections``: N idle client connections opened with raw
    sockets (``CONNECT {"verbose":false}`` + PING, wait for PONG): time to open all, VmRSS
    increase per connection, then a core pub/sub rate (one nats-py publisher, one
    subscriber, ``--pubsub-msgs`` of 128 B) while the N connections stay open. The bench
    raises its RLIMIT_NOFILE to the hard limit; the servers inherit it.
``kv``  A file KV bucket (history 1) filled with K distinct keys (``--kv-keys``) by pipelined
    puts (``js.publish_async``): the put rate, VmRSS when full, restart to ready (until
    STREAM.INFO of KV_<bucket> reports K messages), VmRSS after restart, and the rate of
    ``--kv-gets`` sequential ``kv.get`` of random keys.
``growth``  One R1 file stream filled to each size of ``--growth-sizes``; at each size the
    JetStream async publish rate of the next ``--growth-step`` messages and the pull+ack
    consume rate of ``--growth-step`` messages from the start of the stream (a new durable
    consumer each time), and VmRSS.

One table per section (rows = figures, columns = servers, then natsd/nats-server). All
clients are one nats-py process, so rates are often bounded by the client, which compresses
the ratios. ``--json FILE`` writes every raw figure.

    .venv/bin/python bench/curve.py
    .venv/bin/python bench/curve.py --kv-keys 1M --json curve.json
    .venv/bin/python bench/curve.py --only-section consumers,kv --only natsd
    .venv/bin/python bench/curve.py --consumers 1,10 --consumer-msgs 2000 --connections 200 \\
        --kv-keys 5000 --growth-sizes 1k,10k
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import resource
import shlex
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, StorageType
from scale import (
    MB,
    Kind,
    Server,
    _git,
    _ratio,
    _version,
    connect,
    kinds,
    log,
    parse_size,
    parse_sizes,
    ratio_pairs,
    run_in_workdir,
    src_digest,
    table,
    wait_info,
)

SECTIONS = ["consumers", "connections", "kv", "growth"]
PAYLOAD = b"x" * 128
ACK_CHUNK = 10_000  # publish_async futures collected per chunk
BUCKET = "CURVE"
RAW_OPEN_WINDOW = 256  # raw connections being opened at once

# unit in the label's last parentheses -> cell format; "#" is a count, shown without a ratio
FORMATS = {"s": "{:,.3f}", "msg/s": "{:,.0f}", "op/s": "{:,.0f}", "MB": "{:,.1f}", "B": "{:,.0f}"}


@dataclass
class Result:
    """The figures of one section on one server (labels carry their unit)."""

    section: str
    server: str
    figures: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # row prefix -> error
    notes: list[str] = field(default_factory=list)
    started: str = ""
    src_start: str = ""
    src_end: str = ""


class Live:
    """A server on its own store directory plus one nats-py connection to it."""

    def __init__(self, kind: Kind, work: Path, tag: str, args: Any) -> None:
        self.kind, self.args = kind, args
        self.store = work / f"{kind.name}-{tag}"
        self.log_file = work / f"{kind.name}-{tag}.log"
        self.store.mkdir()
        self.srv: Server | None = None
        self.nc: Client | None = None

    @property
    def server(self) -> Server:
        assert self.srv is not None
        return self.srv

    @property
    def js(self) -> JetStreamContext:
        assert self.nc is not None
        return self.nc.jetstream(timeout=self.args.api_timeout)

    async def start(self) -> None:
        self.srv = Server(self.kind, self.store, self.log_file)
        deadline = time.monotonic() + self.args.timeout
        await wait_info(self.srv, deadline)
        self.nc = await connect(self.srv, deadline)

    async def client(self) -> Client:
        return await connect(self.server, time.monotonic() + self.args.timeout)

    async def rss(self) -> int:
        """VmRSS of the server process, ``--settle`` s from now."""
        await asyncio.sleep(self.args.settle)
        self.server.check_alive()
        return self.server.status()["VmRSS"]

    async def restart(self, ready: Callable[[JetStreamContext], Awaitable[bool]]) -> float:
        """Stop, start on the same directory; spawn -> the first time ``ready`` is true (s)."""
        await self._close_nc()
        self.server.stop(self.args.timeout)
        self.srv = None
        await self.start()
        assert self.nc is not None
        js = self.nc.jetstream(timeout=2)
        deadline = time.monotonic() + self.args.timeout
        while True:
            try:
                if await ready(js):
                    return self.server.since_spawn()
            except (TimeoutError, nats.errors.Error):
                pass  # no JetStream answer yet, or the asset not loaded yet
            self.server.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"not ready {self.args.timeout:.0f} s after restart")
            await asyncio.sleep(0.01)

    async def _close_nc(self) -> None:
        if self.nc is not None:
            try:
                await asyncio.wait_for(self.nc.close(), 10)
            except (TimeoutError, nats.errors.Error, OSError):
                pass
            self.nc = None

    async def close(self) -> None:
        await self._close_nc()
        if self.srv is not None:
            try:
                self.srv.stop(30)
            except RuntimeError:
                pass  # killed by stop()
            self.srv = None
        shutil.rmtree(self.store, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Shared steps


async def publish_many(
    js: JetStreamContext, subject_of: Callable[[int], str], count: int, args: Any
) -> float:
    """Publish ``count`` messages with PubAcks pipelined; the seconds until all are acked."""
    t0 = time.perf_counter()
    if hasattr(js, "publish_async"):
        prev: list[asyncio.Future[Any]] = []
        chunk: list[asyncio.Future[Any]] = []
        for i in range(count):
            chunk.append(await js.publish_async(subject_of(i), PAYLOAD, wait_stall=args.stall))
            if len(chunk) >= ACK_CHUNK:
                await _acked(prev, args.stall)
                prev, chunk = chunk, []
        await _acked(prev, args.stall)
        await _acked(chunk, args.stall)
    else:  # an older nats-py: windows of concurrent js.publish
        for lo in range(0, count, 1000):
            hi = min(count, lo + 1000)
            puts = [
                asyncio.ensure_future(js.publish(subject_of(i), PAYLOAD)) for i in range(lo, hi)
            ]
            await _acked(puts, args.stall)
    return time.perf_counter() - t0


async def _acked(futures: Sequence[asyncio.Future[Any]], timeout: float) -> None:
    if not futures:
        return
    try:
        done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
    except TimeoutError:
        raise TimeoutError(f"PubAcks missing {timeout:.0f} s after publishing") from None
    errors = [d for d in done if isinstance(d, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(futures)} publishes failed: {errors[0]!r}")


async def stream_count(js: JetStreamContext, stream: str) -> int:
    return int((await js.stream_info(stream)).state.messages)


async def consume(
    js: JetStreamContext, stream: str, durable: str, want: int, args: Any, deadline: float
) -> int:
    """Fetch and ack up to ``want`` messages of a durable pull consumer; how many it got."""
    sub = await js.pull_subscribe_bind(durable=durable, stream=stream)
    got = 0
    try:
        while got < want:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msgs = await sub.fetch(batch=min(args.batch, want - got), timeout=min(5, left))
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            for m in msgs:
                await m.ack()
            got += len(msgs)
    finally:
        await sub.unsubscribe()
    return got


async def add_pull_consumer(js: JetStreamContext, stream: str, name: str) -> None:
    await js.add_consumer(stream, durable_name=name, ack_policy=AckPolicy.EXPLICIT)


# ---------------------------------------------------------------------------------------------
# Sections


async def sec_consumers(kind: Kind, work: Path, args: Any, res: Result) -> None:
    m = args.consumer_msgs
    for c in args.consumers:
        pre = f"C={c:,}"
        live = Live(kind, work, f"consumers-{c}", args)
        try:
            await live.start()
            js = live.js
            await js.add_stream(
                name="CONS", subjects=["c.>"], storage=StorageType.FILE, num_replicas=1
            )
            await publish_many(js, lambda _: "c.x", m, args)
            rss0 = await live.rss()
            names = [f"d{i:05d}" for i in range(c)]
            t0 = time.perf_counter()
            for name in names:
                await add_pull_consumer(js, "CONS", name)
            create_s = time.perf_counter() - t0
            rss1 = await live.rss()
            res.figures[f"{pre}: create all (s)"] = create_s
            res.figures[f"{pre}: VmRSS with consumers (MB)"] = rss1 / MB
            res.figures[f"{pre}: VmRSS increase per consumer (B)"] = (rss1 - rss0) / c

            async def last_answers(js2: JetStreamContext, last: str = names[-1]) -> bool:
                await js2.consumer_info("CONS", last)
                return True

            res.figures[f"{pre}: restart to ready (s)"] = await live.restart(last_answers)
            n_consume = max(1, min(c, args.consume_max // m))
            js = live.js
            deadline = time.monotonic() + args.consume_time
            t0 = time.perf_counter()
            counts = await asyncio.gather(
                *(consume(js, "CONS", name, m, args, deadline) for name in names[:n_consume])
            )
            assert live.nc is not None
            await live.nc.flush()
            elapsed = time.perf_counter() - t0
            res.figures[f"{pre}: consumers that consumed (#)"] = n_consume
            res.figures[f"{pre}: deliveries (#)"] = sum(counts)
            res.figures[f"{pre}: consume+ack, all consumers (msg/s)"] = sum(counts) / elapsed
            if sum(counts) < n_consume * m:
                res.notes.append(
                    f"{pre}: stopped after {args.consume_time:.0f} s with {sum(counts):,} of "
                    f"{n_consume * m:,} deliveries"
                )
            log(
                f"  {kind.name} consumers {pre}: created in {create_s:.2f} s, consumed "
                f"{sum(counts):,} in {elapsed:.1f} s"
            )
        except Exception as e:
            _fail(res, pre, e)
        finally:
            await live.close()


async def open_raw(port: int, count: int, timeout: float) -> tuple[list[Any], str]:
    """``count`` idle connections: CONNECT + PING, PONG read. The writers, and the error."""
    writers: list[asyncio.StreamWriter] = []
    hello = b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n'

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writers.append(writer)
        line = await reader.readline()
        if not line.startswith(b"INFO "):
            raise RuntimeError(f"expected INFO, got {line[:60]!r}")
        writer.write(hello)
        while True:
            line = await reader.readline()
            if line.startswith(b"PONG"):
                return
            if not line or line.startswith(b"-ERR"):
                raise RuntimeError(f"no PONG: {line[:80]!r}")

    error = ""
    for lo in range(0, count, RAW_OPEN_WINDOW):
        batch = [one() for _ in range(min(RAW_OPEN_WINDOW, count - lo))]
        try:
            await asyncio.wait_for(asyncio.gather(*batch), timeout)
        except Exception as e:
            error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            break
    return writers, error


async def close_raw(writers: list[Any]) -> None:
    for w in writers:
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


async def pubsub_rate(live: Live, n: int, timeout: float) -> tuple[float, int]:
    """Core publish -> subscriber rate of ``n`` messages over two connections; (msg/s, got)."""
    sub_nc, pub_nc = await live.client(), await live.client()
    got = 0
    done = asyncio.Event()

    async def on_msg(_: Msg) -> None:
        nonlocal got
        got += 1
        if got == n:
            done.set()

    try:
        await sub_nc.subscribe("ps.x", cb=on_msg, pending_msgs_limit=n + 1)
        await sub_nc.flush()
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            await pub_nc.publish("ps.x", PAYLOAD)
            if i % 10_000 == 0:
                await pub_nc.flush()
        await pub_nc.flush()
        try:
            await asyncio.wait_for(done.wait(), timeout)
        except TimeoutError:
            pass
        return got / (time.perf_counter() - t0), got
    finally:
        await sub_nc.close()
        await pub_nc.close()


async def sec_connections(kind: Kind, work: Path, args: Any, res: Result) -> None:
    for n in args.connections:
        pre = f"N={n:,}"
        live = Live(kind, work, f"conns-{n}", args)
        writers: list[Any] = []
        try:
            await live.start()
            rss0 = await live.rss()
            t0 = time.perf_counter()
            writers, error = await open_raw(live.server.port, n, args.stall)
            open_s = time.perf_counter() - t0
            res.figures[f"{pre}: connections opened (#)"] = len(writers)
            if error:
                raise RuntimeError(f"{len(writers):,} of {n:,} connections opened, then {error}")
            rss1 = await live.rss()
            res.figures[f"{pre}: open all (s)"] = open_s
            res.figures[f"{pre}: VmRSS with connections (MB)"] = rss1 / MB
            res.figures[f"{pre}: VmRSS increase per connection (B)"] = (rss1 - rss0) / n
            rate, got = await pubsub_rate(live, args.pubsub_msgs, args.stall)
            res.figures[f"{pre}: core pub/sub while open (msg/s)"] = rate
            if got < args.pubsub_msgs:
                res.notes.append(f"{pre}: the subscriber got {got:,} of {args.pubsub_msgs:,}")
            log(
                f"  {kind.name} connections {pre}: opened in {open_s:.2f} s, "
                f"pub/sub {rate:,.0f} msg/s"
            )
        except Exception as e:
            _fail(res, pre, e)
        finally:
            await close_raw(writers)
            await live.close()


async def sec_kv(kind: Kind, work: Path, args: Any, res: Result) -> None:
    k: int = args.kv_keys
    pre = f"K={k:,}"
    live = Live(kind, work, "kv", args)
    try:
        await live.start()
        js = live.js
        await js.create_key_value(bucket=BUCKET, history=1, storage=StorageType.FILE)
        put_s = await publish_many(js, lambda i: f"$KV.{BUCKET}.k{i:08d}", k, args)
        res.figures[f"{pre}: put rate, pipelined (msg/s)"] = k / put_s
        if (count := await stream_count(js, f"KV_{BUCKET}")) != k:
            raise RuntimeError(f"the bucket's stream holds {count:,} messages, not {k:,}")
        res.figures[f"{pre}: VmRSS full (MB)"] = await live.rss() / MB

        async def all_there(js2: JetStreamContext) -> bool:
            return await stream_count(js2, f"KV_{BUCKET}") == k

        res.figures[f"{pre}: restart to ready (s)"] = await live.restart(all_there)
        res.figures[f"{pre}: VmRSS after restart (MB)"] = await live.rss() / MB
        kv = await live.js.key_value(BUCKET)
        rng = random.Random(1)
        keys = [f"k{rng.randrange(k):08d}" for _ in range(args.kv_gets)]
        t0 = time.perf_counter()
        for key in keys:
            entry = await kv.get(key)
            if entry.value != PAYLOAD:
                raise RuntimeError(f"kv.get({key}) returned {entry.value!r:.60}")
        get_s = time.perf_counter() - t0
        res.figures[f"{pre}: random kv.get, sequential (op/s)"] = len(keys) / get_s
        log(f"  {kind.name} kv {pre}: put {k / put_s:,.0f}/s, get {len(keys) / get_s:,.0f}/s")
    except Exception as e:
        _fail(res, pre, e)
    finally:
        await live.close()


async def sec_growth(kind: Kind, work: Path, args: Any, res: Result) -> None:
    step = args.growth_step
    live = Live(kind, work, "growth", args)
    try:
        await live.start()
        js = live.js
        await js.add_stream(name="GROW", subjects=["g.>"], storage=StorageType.FILE)
        count = 0
        for size in args.growth_sizes:
            pre = f"N={size:,}"
            try:
                if count < size:
                    await publish_many(js, lambda _: "g.x", size - count, args)
                count = await stream_count(js, "GROW")
                res.figures[f"{pre}: messages before the step (#)"] = count
                res.figures[f"{pre}: VmRSS (MB)"] = await live.rss() / MB
                pub_s = await publish_many(js, lambda _: "g.x", step, args)
                res.figures[f"{pre}: publish next {step:,}, async (msg/s)"] = step / pub_s
                count = await stream_count(js, "GROW")
                name = f"grow{size}"
                await add_pull_consumer(js, "GROW", name)
                t0 = time.perf_counter()
                deadline = time.monotonic() + args.consume_time
                got = await consume(js, "GROW", name, step, args, deadline)
                assert live.nc is not None
                await live.nc.flush()
                con_s = time.perf_counter() - t0
                await js.delete_consumer("GROW", name)
                res.figures[f"{pre}: pull+ack {step:,} from the start (msg/s)"] = got / con_s
                if got < step:
                    res.notes.append(f"{pre}: consumed {got:,} of {step:,} in the time limit")
                log(
                    f"  {kind.name} growth {pre}: publish {step / pub_s:,.0f}/s, "
                    f"consume {got / con_s:,.0f}/s"
                )
            except Exception as e:
                _fail(res, pre, e)
                live.server.check_alive()
    except Exception as e:
        _fail(res, "growth", e)
    finally:
        await live.close()


SECTION_FUNCS: dict[str, Callable[[Kind, Path, Any, Result], Awaitable[None]]] = {
    "consumers": sec_consumers,
    "connections": sec_connections,
    "kv": sec_kv,
    "growth": sec_growth,
}

TITLES = {
    "consumers": "consumers: {consumer_msgs:,} msgs in an R1 file stream, C durable pull consumers",
    "connections": "connections: N idle raw clients, then core pub/sub of {pubsub_msgs:,} x 128 B",
    "kv": "kv: file bucket, history 1, K keys of 128 B, {kv_gets:,} random gets",
    "growth": "growth: one R1 file stream; rates of the next {growth_step:,} at each size",
}


def _fail(res: Result, prefix: str, e: BaseException) -> None:
    text = f"{type(e).__name__}: {e}".strip().rstrip(":")
    res.failed[prefix] = text
    log(f"  {res.server} {res.section} {prefix}: FAIL {text}")


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(label: str, value: float) -> str:
    unit = label.rpartition("(")[2].rstrip(")")
    return FORMATS.get(unit, "{:,.0f}").format(value)


def section_table(
    section: str, names: list[str], results: dict[tuple[str, str], Result], args: Any
) -> str:
    mine = {n: results[(section, n)] for n in names if (section, n) in results}
    labels: list[str] = []
    for res in mine.values():
        labels += [lab for lab in res.figures if lab not in labels]
    pairs = ratio_pairs(names)
    header = ["", *names, *(f"{a}/{b}" for a, b in pairs)]
    rows = []
    for lab in labels:
        cells = [lab]
        for n in names:
            r = mine.get(n)
            if r is not None and lab in r.figures:
                cells.append(_fmt(lab, r.figures[lab]))
            elif r is not None and any(lab.startswith(p + ":") for p in r.failed):
                cells.append("FAIL")
            else:
                cells.append("-")
        for a, b in pairs:
            ra, rb = mine.get(a), mine.get(b)
            if ra and rb and lab in ra.figures and lab in rb.figures and "(#)" not in lab:
                cells.append(_ratio(ra.figures[lab], rb.figures[lab]))
            else:
                cells.append("-")
        rows.append(cells)
    lines = [f"{section.upper()}  " + TITLES[section].format(**vars(args))]
    lines.append(table(header, rows) if rows else "  (no figures)")
    for n, r in mine.items():
        lines += [f"  {n}: FAIL {p}: {err}" for p, err in r.failed.items()]
        lines += [f"  {n}: note: {note}" for note in r.notes]
        if n.startswith("natsd") and r.src_start != r.src_end:
            lines.append(f"  {n}: natsd's sources changed during this section")
    return "\n".join(lines)


def save(path: str | None, meta: dict[str, Any], results: list[Result]) -> None:
    if not path:
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump({**meta, "results": [asdict(r) for r in results]}, f, indent=2)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Main


def raise_nofile(want: int) -> str:
    """Raise this process's RLIMIT_NOFILE (inherited by the servers) to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, want)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as e:
            return f"RLIMIT_NOFILE stays {soft} ({e})"
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    note = f"RLIMIT_NOFILE {soft}"
    if soft != resource.RLIM_INFINITY and soft < want:
        note += f" (below the {want:,} the largest --connections needs: expect a FAIL)"
    return note


async def amain(args: Any, work: Path) -> int:
    ks = kinds(args)
    for k in ks:
        k.version, k.notes = _version(k)
    names = [k.name for k in ks]
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": _git("describe", "--always", "--dirty"),
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "src_digest": src_digest(),
        "nofile": raise_nofile(max(args.connections, default=0) + 1000),
        "args": {k: v for k, v in vars(args).items() if k not in ("json",)},
        "servers": {k.name: {"cmd": k.cmd, "version": k.version, "notes": k.notes} for k in ks},
    }
    print(f"cost curve, the rest: {meta['date']}, commit {meta['commit']}, {meta['machine']}")
    print(f"natsd sources sha256: {meta['src_digest']}; {meta['nofile']}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in ks:
        print(f"  {k.name:12s} {shlex.join(k.cmd)}: {k.version}")
        if k.name == "natsd" and "pure" in k.version.split("(")[-1]:
            print(f"  note: the natsd column runs pure Python ({k.notes or 'no compiled modules'})")
    print("ratio = natsd / nats-server: rates higher is better, times and memory lower is better")
    print(flush=True)
    results: dict[tuple[str, str], Result] = {}
    failed = False
    for section in args.only_section:
        for k in ks:
            res = Result(section, k.name, started=time.strftime("%H:%M:%S"))
            res.src_start = src_digest()
            t0 = time.perf_counter()
            await SECTION_FUNCS[section](k, work, args, res)
            res.src_end = src_digest()
            res.figures[f"section wall time ({section}) (s)"] = time.perf_counter() - t0
            failed = failed or bool(res.failed)
            results[(section, k.name)] = res
            save(args.json, meta, list(results.values()))
        print(section_table(section, names, results, args))
        print(flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if failed else 0


def _sections(text: str) -> list[str]:
    out = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in out if s not in SECTIONS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown section(s) {bad}; known: {SECTIONS}")
    return [s for s in SECTIONS if s in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    arg = ap.add_argument
    arg("--only-section", type=_sections, default=SECTIONS, help=f"of {','.join(SECTIONS)}")
    arg("--only", choices=["natsd", "nats-server"], help="one server kind only")
    arg("--json", help="write every raw figure to this file")
    arg("--natsd-cmd", help="natsd command (shell-split; default: python -m natsd)")
    arg("--nats-server-cmd", help="nats-server command (default: next to python)")
    arg("--consumers", type=parse_sizes, default=[1, 100, 1000], help="C values (1,100,1000)")
    arg("--consumer-msgs", type=parse_size, default=10_000, help="M (default 10k)")
    arg("--consume-max", type=parse_size, default=1_000_000, help="deliveries per C (1M)")
    arg("--consume-time", type=float, default=60.0, help="limit of one consume run (s, 60)")
    arg("--batch", type=int, default=100, help="fetch batch (default 100)")
    arg("--connections", type=parse_sizes, default=[1000, 10_000], help="N values (1k,10k)")
    arg("--pubsub-msgs", type=parse_size, default=200_000, help="core pub/sub msgs (200k)")
    arg("--kv-keys", type=parse_size, default=100_000, help="K (default 100k; full run 1M)")
    arg("--kv-gets", type=parse_size, default=10_000, help="random gets (default 10k)")
    arg("--growth-sizes", type=parse_sizes, default=[10_000, 100_000, 1_000_000])
    arg("--growth-step", type=parse_size, default=20_000, help="msgs per rate (20k)")
    arg("--settle", type=float, default=1.0, help="s before reading VmRSS")
    arg("--stall", type=float, default=60.0, help="limit of a wait for acks/PONGs/msgs (s)")
    arg("--timeout", type=float, default=600.0, help="limit of a start/restart/stop (s)")
    arg("--api-timeout", type=float, default=30.0, help="JetStream API request limit (s)")
    arg("--store-dir", help="parent of the store directories (default: temp dir)")
    ap.set_defaults(pure=False, pure_max=None)  # for scale.kinds
    return run_in_workdir(ap.parse_args(), amain, "natsd-curve-")


if __name__ == "__main__":
    sys.exit(main())
