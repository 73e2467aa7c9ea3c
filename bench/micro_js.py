"""In-process micro-benchmark of natsd's JetStream publish path, without sockets.

An embedded Server with JetStream gets one client connection over a transport that only
collects what is written; the script feeds pipelined ``PUB <subject> <inbox>.<n>`` frames in
64 KiB reads (as the kernel would hand them over) and measures server CPU per message from
the first read until every PubAck has been written. It isolates the Python cost of parsing,
routing, storing and acknowledging from the network and the load generator, so profiles and
before/after comparisons are stable on a busy machine.

    NATSD_PURE=1 .venv/bin/python bench/micro_js.py --storage memory -n 200000   # pure
    .venv/bin/python bench/micro_js.py --storage file   # compiled
    .venv/bin/python bench/micro_js.py --profile /tmp/js.prof                  # cProfile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from natsd.server import Server, tune_gc


class CollectingTransport:
    """The parts of asyncio.Transport that ClientConnection uses; counts what is written."""

    def __init__(self) -> None:
        self.written = 0
        self.chunks: list[bytes] = []
        self.keep = False
        self.closed = False
        self.paused = False  # reading paused by the server's fairness (connection/fairness.py)

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        self.written += len(data)
        if self.keep:
            self.chunks.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


async def feed(client: Any, t: CollectingTransport, reads: list[bytes]) -> None:
    """Hand ``reads`` to the connection as a socket would: one per loop turn (so the flusher
    and the committer run between them), waiting while the server has paused reading."""
    for r in reads:
        client.data_received(r)
        await asyncio.sleep(0)
        while t.paused:
            await asyncio.sleep(0)


def cpu_result(storage: str, n: int, wall: float, cpu: float, **extra: Any) -> dict[str, Any]:
    """The JSON line every micro benchmark prints: server CPU per message."""
    return {
        "storage": storage,
        "msgs": n,
        **extra,
        "wall_s": round(wall, 3),
        "cpu_us_per_msg": round(cpu / n * 1e6, 2),
        "msgs_per_s_cpu": round(n / cpu),
    }


def frames(
    n: int, subject: bytes, inbox: bytes, payload: bytes, chunk: int, keys: int = 0
) -> list[bytes]:
    """Pipelined PUB frames in reads of ``chunk`` bytes; with ``keys``, subjects cycle
    through ``<subject>.<k>`` for k < keys (KV-style puts)."""
    return in_reads(
        (
            b"PUB %s %s.%d %d\r\n%s\r\n"
            % (b"%s.%d" % (subject, i % keys) if keys else subject, inbox, i, len(payload), payload)
            for i in range(n)
        ),
        chunk,
    )


def in_reads(frames: Iterable[bytes], chunk: int) -> list[bytes]:
    """``frames`` joined into reads of at least ``chunk`` bytes (the last may be shorter)."""
    out: list[bytes] = []
    buf: list[bytes] = []
    size = 0
    for f in frames:
        buf.append(f)
        size += len(f)
        if size >= chunk:
            out.append(b"".join(buf))
            buf, size = [], 0
    if buf:
        out.append(b"".join(buf))
    return out


def new_client(
    srv: Any, args: argparse.Namespace, keep: bool = False
) -> tuple[Any, CollectingTransport]:
    """One in-process client of ``srv`` over a :class:`CollectingTransport` (after
    ``tune_gc()`` when ``--gc tuned``, as the CLI does)."""
    if args.gc == "tuned":
        tune_gc()
    client = srv._new_client()
    t = CollectingTransport()
    t.keep = keep
    client.connection_made(t)
    return client, t


class Measured:
    """Wall and process CPU time of the measured part, under cProfile when ``--profile``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.path = args.profile
        self.prof = cProfile.Profile() if args.profile else None
        # Under `valgrind --tool=callgrind --instr-atstart=no`: count instructions of the
        # measured part only (a figure that does not move with a busy machine's noise).
        self.callgrind = args.callgrind
        if self.callgrind:
            _callgrind("on")
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        if self.prof:
            self.prof.enable()

    def stop(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds) since the start; writes the profile if any."""
        if self.prof:
            self.prof.disable()
            self.prof.dump_stats(self.path)
        if self.callgrind:
            _callgrind("off")
        return time.perf_counter() - self.t0, time.process_time() - self.c0


def _callgrind(state: str) -> None:
    subprocess.run(
        ["callgrind_control", "--instr=" + state, str(os.getpid())],
        check=True,
        stdout=subprocess.DEVNULL,
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        kw: dict[str, Any] = {"port": -1, "jetstream": True, "store_dir": d}
        if args.lazy:
            kw["sync_interval"] = 60.0
        async with Server(**kw) as srv:
            client, t = new_client(srv, args)
            cfg: dict[str, Any] = {
                "name": "BENCH",
                "subjects": ["bench.js.>" if args.keys else "bench.js"],
                "storage": args.storage,
            }
            if args.keys:
                # What a KV bucket is: one value per key, new values replace old ones.
                cfg.update(max_msgs_per_subject=1, discard="new", allow_rollup_hdrs=True)
            setup = (
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'
                b"SUB _INBOX.api 1\r\nSUB _INBOX.ack.* 2\r\n"
                b"PUB $JS.API.STREAM.CREATE.BENCH _INBOX.api %d\r\n%s\r\n"
                % (len(json.dumps(cfg)), json.dumps(cfg).encode())
            )
            t.keep = True
            client.data_received(setup)
            await asyncio.sleep(0.05)
            created = b"".join(t.chunks)
            if b'"error"' in created:
                raise SystemExit(f"stream create failed: {created[:300]!r}")
            t.keep = False
            payload = b"x" * args.size
            reads = frames(args.n, b"bench.js", b"_INBOX.ack", payload, 65536, args.keys)
            start_written = t.written
            ack_len = len(b'MSG _INBOX.ack.0 2 25\r\n{"stream":"BENCH","seq":1}\r\n')
            clock = Measured(args)
            await feed(client, t, reads)
            # Wait until (roughly) every ack has been written.
            deadline = time.monotonic() + 60
            want = args.n * (ack_len - 2)
            while t.written - start_written < want and time.monotonic() < deadline:
                await asyncio.sleep(0.0005)
            wall, cpu = clock.stop()
            client.close()
    return cpu_result(args.storage, args.n, wall, cpu)


def main() -> None:
    ap = micro_args(__doc__, storage="memory", n=200_000)
    ap.add_argument("--keys", type=int, default=0, help="KV-style: N keys, 1 value each")
    ap.add_argument("--lazy", action="store_true", help="file store with a lazy sync_interval")
    run_main(ap.parse_args(), run)


def micro_args(doc: str | None, storage: str, n: int) -> argparse.ArgumentParser:
    """The options every micro benchmark takes: --storage, -n, --size, --gc, --profile."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--storage", choices=("memory", "file"), default=storage)
    ap.add_argument("-n", type=int, default=n)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument(
        "--gc",
        choices=("tuned", "default", "off"),
        default="tuned",
        help="tuned: natsd's tune_gc() as the CLI applies it; off: an upper bound",
    )
    ap.add_argument("--profile", default="", help="write a cProfile of the measured part here")
    ap.add_argument(
        "--callgrind",
        action="store_true",
        help="run under `valgrind --tool=callgrind --instr-atstart=no`: instrument only"
        " the measured part",
    )
    return ap


def run_main(
    args: argparse.Namespace, body: Callable[[argparse.Namespace], Awaitable[Any]]
) -> None:
    """uvloop if installed, ``--gc off`` honoured, then print ``body(args)``'s result as JSON."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    if args.gc == "off":
        gc.disable()
    print(json.dumps(asyncio.run(body(args))))


if __name__ == "__main__":
    main()
