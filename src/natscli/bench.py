"""``nats bench``: quick load tests. ``pub``, ``sub``, ``request``/``reply``, ``js pub`` and
``js fetch``, each with ``--clients`` connections in this process.

This is a Python client on nats-py, so its absolute numbers measure the client as much as the
server; use it to compare servers or settings, and ``make bench`` to measure natsd itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .conn import ApiError, Session, connect
from .output import (
    CliError,
    console,
    human_bytes,
    human_count,
    human_duration,
    info,
    parse_size,
    print_json,
    progress_bar,
)
from .pubsub import require_consumers
from .stream import STORAGE

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]


@dataclass
class Sample:
    msgs: int
    size: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.msgs / self.seconds if self.seconds > 0 else 0.0


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    b = sub.add_parser("bench", help="Benchmark utility", parents=parents)
    bs = b.add_subparsers(dest="bench_cmd", metavar="COMMAND", required=True)

    def common(p: argparse.ArgumentParser, with_size: bool = True) -> None:
        p.add_argument("subject", nargs="?", default="bench", help="Subject (default bench)")
        p.add_argument("--msgs", type=int, default=100_000, help="Messages per client")
        if with_size:
            p.add_argument("--size", default="128", help="Message size (e.g. 128, 1KB)")
        p.add_argument("--clients", type=int, default=1, help="Concurrent clients")
        p.add_argument("--no-progress", action="store_true", help="No progress bar")
        p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    def cmd(parent: Any, name: str, fn: Handler, help: str) -> Any:
        p = parent.add_parser(name, help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd(bs, "pub", bench_pub, "Publish messages as fast as possible")
    common(p)

    p = cmd(bs, "sub", bench_sub, "Receive messages and report the rate")
    common(p, with_size=False)

    p = cmd(bs, "request", bench_request, "Send requests one at a time, report latency")
    common(p)

    p = cmd(bs, "reply", bench_reply, "Answer requests (for bench request)")
    common(p, with_size=False)

    js = bs.add_parser("js", help="JetStream benchmarks", parents=parents)
    jss = js.add_subparsers(dest="bench_js_cmd", metavar="COMMAND", required=True)
    p = cmd(jss, "pub", bench_js_pub, "Publish to a stream with acknowledgements")
    common(p)
    p.add_argument("--stream", default="benchstream", help="Stream (default benchstream)")
    p.add_argument("--create", action="store_true", help="Create (or reset) the stream")
    p.add_argument("--storage", choices=sorted(STORAGE), default="file", help="Storage")
    p.add_argument(
        "--batch", type=int, default=100, help="Publishes in flight per client (1: sync)"
    )
    p.add_argument("--purge", action="store_true", help="Purge the stream first")

    p = cmd(jss, "fetch", bench_js_fetch, "Fetch a stream's messages with a pull consumer")
    common(p, with_size=False)
    p.add_argument("--stream", default="benchstream", help="Stream (default benchstream)")
    p.add_argument("--batch", type=int, default=500, help="Fetch batch size")
    p.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True, help="Acknowledge")


def _report(
    kind: str, samples: list[Sample], a: argparse.Namespace, latencies: list[float] | None = None
) -> None:
    total_msgs = sum(x.msgs for x in samples)
    wall = max((x.seconds for x in samples), default=0.0)
    size = samples[0].size if samples else 0
    rate = total_msgs / wall if wall else 0.0
    out: dict[str, Any] = {
        "kind": kind,
        "clients": len(samples),
        "msgs": total_msgs,
        "size": size,
        "seconds": round(wall, 6),
        "msgs_per_sec": round(rate, 1),
        "bytes_per_sec": round(rate * size, 1),
        "per_client": [round(x.rate, 1) for x in samples],
    }
    if latencies:
        lat = sorted(latencies)
        out["latency_us"] = {
            "p50": round(lat[len(lat) // 2] * 1e6, 1),
            "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6, 1),
            "max": round(lat[-1] * 1e6, 1),
        }
    if a.json:
        print_json(out)
        return
    avg = human_duration(wall / total_msgs * 1e9) if total_msgs else "-"
    console.print(
        f"{kind} stats: {human_count(rate)} msgs/sec ~ {human_bytes(rate * size)}/sec ~ {avg}",
        markup=False,
    )
    if len(samples) > 1:
        for i, x in enumerate(samples, 1):
            console.print(
                f" [{i}] {human_count(x.rate)} msgs/sec ~ {human_bytes(x.rate * size)}/sec "
                f"({human_count(x.msgs)} msgs)",
                markup=False,
            )
        rates = [x.rate for x in samples]
        console.print(
            f" min {human_count(min(rates))} | avg {human_count(statistics.mean(rates))} | "
            f"max {human_count(max(rates))} | stddev {human_count(statistics.pstdev(rates))} msgs",
            markup=False,
        )
    if latencies:
        lu = out["latency_us"]
        console.print(
            f" latency p50 {lu['p50']}µs p99 {lu['p99']}µs max {lu['max']}µs", markup=False
        )


async def _clients(s: Session, n: int) -> list[Client]:
    if n < 1:
        raise CliError("--clients must be at least 1")
    return [await connect(s.opts) for _ in range(n)]


async def _close(ncs: list[Client]) -> None:
    for nc in ncs:
        try:
            await nc.drain()
        except Exception:
            await nc.close()


async def bench_pub(s: Session, a: argparse.Namespace) -> None:
    size = max(parse_size(a.size), 0)
    payload = b"x" * size
    ncs = await _clients(s, a.clients)
    total = a.msgs * a.clients
    if not a.json:
        info(
            f"Starting Core NATS publisher benchmark [subject={a.subject}, "
            f"clients={a.clients}, msgs={human_count(total)}, size={human_bytes(size)}]"
        )
    with progress_bar(
        total, "Publishing", enabled=not a.no_progress and not a.json, unit="msgs"
    ) as bar:
        task = bar.add_task("Publishing", total=total)

        async def run(nc: Client) -> Sample:
            t0 = time.perf_counter()
            for i in range(a.msgs):
                await nc.publish(a.subject, payload)
                if i % 1000 == 999:
                    bar.advance(task, 1000)
                    await asyncio.sleep(0)
            await nc.flush(timeout=60)
            bar.advance(task, a.msgs % 1000)
            return Sample(a.msgs, size, time.perf_counter() - t0)

        samples = await asyncio.gather(*(run(nc) for nc in ncs))
    await _close(ncs)
    _report("NATS Pub", list(samples), a)


async def bench_sub(s: Session, a: argparse.Namespace) -> None:
    ncs = await _clients(s, a.clients)
    total = a.msgs * a.clients
    done = [asyncio.Event() for _ in ncs]
    counts = [0] * len(ncs)
    sizes = [0] * len(ncs)
    starts = [0.0] * len(ncs)
    ends = [0.0] * len(ncs)
    with progress_bar(
        total, "Receiving", enabled=not a.no_progress and not a.json, unit="msgs"
    ) as bar:
        task = bar.add_task("Receiving", total=total)

        def make_cb(i: int) -> Callable[[Msg], Any]:
            async def cb(m: Msg) -> None:
                if counts[i] == 0:
                    starts[i] = time.perf_counter()
                    sizes[i] = len(m.data)
                counts[i] += 1
                if counts[i] % 1000 == 0:
                    bar.advance(task, 1000)
                if counts[i] == a.msgs:
                    ends[i] = time.perf_counter()
                    done[i].set()

            return cb

        for i, nc in enumerate(ncs):
            await nc.subscribe(
                a.subject, cb=make_cb(i), pending_msgs_limit=-1, pending_bytes_limit=-1
            )
            await nc.flush()
        if not a.json:
            info(
                f"Waiting for {human_count(a.msgs)} messages on {a.subject} "
                f"in each of {a.clients} subscribers"
            )
        await asyncio.gather(*(d.wait() for d in done))
    await _close(ncs)
    samples = [Sample(counts[i], sizes[i], ends[i] - starts[i]) for i in range(len(ncs))]
    _report("NATS Sub", samples, a)


async def bench_reply(s: Session, a: argparse.Namespace) -> None:
    ncs = await _clients(s, a.clients)
    left = [a.msgs * a.clients]
    done = asyncio.Event()

    async def cb(m: Msg) -> None:
        if m.reply:
            await m.respond(m.data)
        left[0] -= 1
        if left[0] <= 0:
            done.set()

    for nc in ncs:
        await nc.subscribe(a.subject, queue="bench-reply", cb=cb)
        await nc.flush()
    if not a.json:
        info(f"Answering {human_count(a.msgs * a.clients)} requests on {a.subject}")
    await done.wait()
    await _close(ncs)


async def bench_request(s: Session, a: argparse.Namespace) -> None:
    size = max(parse_size(a.size), 0)
    payload = b"x" * size
    ncs = await _clients(s, a.clients)
    lat: list[float] = []
    total = a.msgs * a.clients
    with progress_bar(
        total, "Requesting", enabled=not a.no_progress and not a.json, unit="msgs"
    ) as bar:
        task = bar.add_task("Requesting", total=total)

        async def run(nc: Client) -> Sample:
            t0 = time.perf_counter()
            for _ in range(a.msgs):
                t = time.perf_counter()
                try:
                    await nc.request(a.subject, payload, timeout=s.opts.timeout)
                except Exception as e:
                    raise CliError(
                        f"request failed: {e or type(e).__name__} (is `nats bench reply` running?)"
                    ) from e
                lat.append(time.perf_counter() - t)
                bar.advance(task)
            return Sample(a.msgs, size, time.perf_counter() - t0)

        samples = await asyncio.gather(*(run(nc) for nc in ncs))
    await _close(ncs)
    _report("NATS Request", list(samples), a, lat)


async def bench_js_pub(s: Session, a: argparse.Namespace) -> None:
    size = max(parse_size(a.size), 0)
    payload = b"x" * size
    api = await s.api()
    if a.create:
        try:
            await api.request(f"STREAM.DELETE.{a.stream}")
        except ApiError:
            pass
        await api.request(
            f"STREAM.CREATE.{a.stream}",
            {
                "name": a.stream,
                "subjects": [a.subject],
                "storage": STORAGE[a.storage],
                "num_replicas": 1,
            },
        )
    elif a.purge:
        await api.request(f"STREAM.PURGE.{a.stream}")
    ncs = await _clients(s, a.clients)
    total = a.msgs * a.clients
    if not a.json:
        info(
            f"Starting JetStream publisher benchmark [stream={a.stream}, subject={a.subject}, "
            f"clients={a.clients}, msgs={human_count(total)}, size={human_bytes(size)}, "
            f"batch={a.batch}]"
        )
    window = max(a.batch, 1)
    lat: list[float] = []
    with progress_bar(
        total, "Publishing", enabled=not a.no_progress and not a.json, unit="msgs"
    ) as bar:
        task = bar.add_task("Publishing", total=total)

        async def one(nc: Client) -> None:
            t = time.perf_counter()
            r = await nc.request(a.subject, payload, timeout=max(s.opts.timeout, 10.0))
            if b'"error"' in r.data:
                err = json.loads(r.data).get("error") or {}
                raise CliError(f"publish failed: {err.get('description')} ({err.get('err_code')})")
            if not r.data:
                raise CliError(f"publish to {a.subject} was not acknowledged (no stream?)")
            lat.append(time.perf_counter() - t)
            bar.advance(task)

        async def run(nc: Client) -> Sample:
            t0 = time.perf_counter()
            await one(nc)  # sets up the reply subscription before pipelining
            pending: set[asyncio.Task[None]] = set()
            for _ in range(a.msgs - 1):
                pending.add(asyncio.create_task(one(nc)))
                if len(pending) >= window:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for d in done:
                        d.result()
            if pending:
                await asyncio.gather(*pending)
            return Sample(a.msgs, size, time.perf_counter() - t0)

        try:
            samples = await asyncio.gather(*(run(nc) for nc in ncs))
        except Exception as e:
            if isinstance(e, CliError):
                raise
            raise CliError(f"publish failed: {e or type(e).__name__}") from e
    await _close(ncs)
    _report("JetStream Pub", list(samples), a, lat if window == 1 else None)


async def bench_js_fetch(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await require_consumers(s, a.stream)
    name = f"natscli-bench-{int(time.time() * 1000) % 10**9}"
    cfg = {
        "durable_name": name,
        "ack_policy": "explicit" if a.ack else "none",
        "deliver_policy": "all",
        "max_ack_pending": -1 if not a.ack else 100_000,
        "inactive_threshold": 60 * 10**9,
    }
    await api.request(
        f"CONSUMER.CREATE.{a.stream}.{name}",
        {"stream_name": a.stream, "config": cfg, "action": "create"},
    )
    ncs = await _clients(s, a.clients)
    total = a.msgs * a.clients
    try:
        with progress_bar(
            total, "Fetching", enabled=not a.no_progress and not a.json, unit="msgs"
        ) as bar:
            task = bar.add_task("Fetching", total=total)

            async def run(nc: Client) -> Sample:
                js = nc.jetstream(prefix=api.prefix, timeout=s.opts.timeout)
                psub = await js.pull_subscribe_bind(durable=name, stream=a.stream)
                got = 0
                size = 0
                t0 = time.perf_counter()
                while got < a.msgs:
                    try:
                        msgs = await psub.fetch(min(a.batch, a.msgs - got), timeout=s.opts.timeout)
                    except Exception as e:
                        raise CliError(
                            f"fetch failed after {got} messages: {e or type(e).__name__}"
                        ) from e
                    for m in msgs:
                        size = len(m.data)
                        if a.ack:
                            await m.ack()
                    got += len(msgs)
                    bar.advance(task, len(msgs))
                await nc.flush()
                return Sample(got, size, time.perf_counter() - t0)

            samples = await asyncio.gather(*(run(nc) for nc in ncs))
    finally:
        await _close(ncs)
        try:
            await api.request(f"CONSUMER.DELETE.{a.stream}.{name}")
        except CliError:
            pass
    _report("JetStream Fetch", list(samples), a)
