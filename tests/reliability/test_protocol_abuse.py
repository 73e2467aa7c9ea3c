"""Protocol abuse (issue 7, fault 5).

Parser, sans-I/O (Hypothesis): random bytes, generated frames and mutated frames, fed whole,
split in two at every split point, fed one byte at a time and split at random points. The
parser never raises (its only error report is an ``OP_ERR`` event with one of the documented
texts, always the last event), and the same events come out however the bytes are split.
Inputs: ``PARSER_INPUTS`` below, 200,000 in all (3,000 examples checked at every split point
and byte by byte, 197,000 mutants at random split points). The split-dependence bugs found
are pinned by strict xfail tests and tolerated, in exactly their shape, by the oracle
(parser_fuzz.py) so the fuzzers keep looking for others.

Over sockets, natsd against the reference nats-server (same bytes to both):

* exact limits: control-line arguments of 4096 / 4097 bytes, payloads of max_payload /
  max_payload + 1, over-long PING/INFO/CONNECT lines, whole and split before the newline:
  the same ``-ERR`` lines and the same close/no-close verdict;
* ABUSE_CONNS connections send random and mutated frames (ABUSE_FRAMES frames processed in
  all; 1M in the soak tier): natsd never dies, its RSS stays within baseline + 64 MiB, and a
  well-behaved nats-py client (its own process) keeps doing request/reply alongside;
* random JSON to ``$JS.API.>`` (names with ``../``, absolute paths, NUL, huge numbers, deep
  nesting): natsd stays up and answers, and no file appears outside its store directory;
* hostile stream/consumer names one by one: answered as nats-server answers them, the
  connection survives, nothing is created outside the store.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats.errors
import pytest
from components import require_nats_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.msg import Msg

from natsd.protocol.parser import OP_CONNECT, OP_ERR, OP_PING, OP_UNSUB, Parser

from .helpers import ServerProc, close_quietly, connect
from .parser_fuzz import (
    check_events,
    feed_chunks,
    frame_streams,
    frames,
    limits,
    mutate,
    random_frame,
    raw_bytes,
    same_events,
    split_at,
    split_comparable,
)

# ============================================================== parser (sans-I/O)
EVERY_SPLIT_EXAMPLES = 1500  # x2 strategies; each checked at every split point + bytewise
BATCH_EXAMPLES = 1970  # each example: MUTANTS_PER_EXAMPLE inputs
MUTANTS_PER_EXAMPLE = 100
PARSER_INPUTS = 2 * EVERY_SPLIT_EXAMPLES + BATCH_EXAMPLES * MUTANTS_PER_EXAMPLE  # 200,000

FUZZ = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    database=None,
)


def _every_split(lim: tuple[int, int], data: bytes) -> None:
    whole = feed_chunks(lim, [data])
    check_events(whole)
    if not split_comparable(data):
        for i in range(1, len(data)):
            check_events(feed_chunks(lim, [data[:i], data[i:]]))
        return
    for i in range(1, len(data)):
        assert same_events(whole, feed_chunks(lim, [data[:i], data[i:]])), (lim, data, i)
    bytewise = feed_chunks(lim, [data[i : i + 1] for i in range(len(data))])
    assert same_events(whole, bytewise), (lim, data, "bytewise")


@settings(FUZZ, max_examples=EVERY_SPLIT_EXAMPLES)
@given(limits, frame_streams(max_frames=3))
def test_parser_frames_every_split_point(lim: tuple[int, int], data: bytes) -> None:
    _every_split(lim, data)


@settings(FUZZ, max_examples=EVERY_SPLIT_EXAMPLES)
@given(limits, raw_bytes)
def test_parser_random_bytes_every_split_point(lim: tuple[int, int], data: bytes) -> None:
    _every_split(lim, data)


@settings(FUZZ, max_examples=BATCH_EXAMPLES)
@given(limits, st.integers(0, 2**64))
def test_parser_mutant_batches(lim: tuple[int, int], seed: int) -> None:
    """MUTANTS_PER_EXAMPLE inputs per example: generated frames, most of them mutated, fed
    whole and in 2..6 chunks cut at random points (every 10th one byte at a time). The
    frames come from a seeded ``random.Random`` (Hypothesis picks the seed): drawing every
    byte through Hypothesis would cost ten times more per input."""
    rng = random.Random(seed)
    for k in range(MUTANTS_PER_EXAMPLE):
        data = frames(rng, rng.randrange(1, 6))
        if rng.random() < 0.8:
            data = mutate(data, rng)
        whole = feed_chunks(lim, [data])
        check_events(whole)
        pts = [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 6))]
        if not split_comparable(data):
            check_events(feed_chunks(lim, split_at(data, pts)))
            continue
        assert same_events(whole, feed_chunks(lim, split_at(data, pts))), (lim, data, pts)
        if k % 10 == 0:
            assert same_events(whole, feed_chunks(lim, [bytes([c]) for c in data])), (lim, data)


@pytest.mark.parametrize(
    ("data", "op"),
    [
        (b"PING" + b"x" * 5000 + b"\r\n", OP_PING),
        (b"UNSUB " + b"9" * 4094 + b" 1\r\n", OP_UNSUB),
        (b"UNSUB " + b"9" * 4095 + b" 1\r\n", OP_ERR),
        (b"CONNECT\t{" + b" " * 4000 + b"}\r\n", OP_CONNECT),
        (b"CONNECT\t{" + b" " * 4100 + b"}\r\n", OP_ERR),
    ],
    ids=["PING+junk", "UNSUB at limit", "UNSUB past limit", "CONNECT tab", "CONNECT too long"],
)
def test_parser_pending_line_limit_is_split_independent(data: bytes, op: int) -> None:
    """The same bytes, whole and cut just before the newline, give the same events: args
    past max_control_line are refused either way (nats-server), PING junk never."""
    whole = Parser().feed(data)
    assert whole and whole[0][0] == op, whole
    p = Parser()
    split = p.feed(data[:-1]) + p.feed(data[-1:])
    assert split == whole




def test_parser_stray_cr_in_pub_is_split_independent() -> None:
    data = b"SUB\tx 1\r\nPUB a r\r 2\r\nhi\r\n"
    whole = Parser().feed(data)
    p = Parser()
    split = p.feed(data[:12]) + p.feed(data[12:])  # the PUB line in a read without a tab
    assert split == whole




def test_parser_bare_connect_error_is_split_independent() -> None:
    data = b"CONNECT\r\n"
    whole = Parser().feed(data)
    p = Parser()
    split = p.feed(data[:-1]) + p.feed(data[-1:])
    assert split == whole


# ============================================================== over sockets
def _server_args(store: Path | None = None) -> list[str]:
    args = ["-a", "127.0.0.1", "-p", "-1"]
    if store is not None:
        args += ["-js", "-sd", str(store)]
    return args


def raw_verdict(port: int, payload: bytes, split: int | None = None) -> tuple[list[str], bool]:
    """Send CONNECT + ``payload`` + PING; return (the -ERR lines, whether the server closed).

    With ``split`` the payload goes in two writes 100 ms apart, cut at that offset. A thread
    writes while this one reads, so an -ERR sent before the server closes is not lost to the
    reset that closing with unread input causes. Reads until PONG (no close) or EOF."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        buf = b""
        while b"\r\n" not in buf:
            buf += sock.recv(4096)
        data = b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n'
        parts = [data + payload + b"PING\r\n"]
        if split is not None:
            parts = [data + payload[:split], payload[split:] + b"PING\r\n"]

        def send() -> None:
            for i, part in enumerate(parts):
                if i:
                    time.sleep(0.1)
                try:
                    sock.sendall(part)
                except OSError:
                    return

        writer = threading.Thread(target=send, daemon=True)
        writer.start()
        out = b""
        closed = False
        while b"PONG\r\n" not in out:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, OSError):
                chunk = b""
            if not chunk:
                closed = True
                break
            out += chunk
        writer.join(5)
        return [ln.decode() for ln in out.split(b"\r\n") if ln.startswith(b"-ERR")], closed
    finally:
        sock.close()


def _limit_cases() -> list[tuple[str, bytes]]:
    mp = 1024 * 1024
    hdr = b"NATS/1.0\r\nA: b\r\n\r\n"
    cases: list[tuple[str, bytes]] = []
    for n in (4096, 4097):
        subj = "s" * (n - 2)  # "SUB <subj> 1": the arguments are n bytes
        cases.append((f"SUB args {n}", f"SUB {subj} 1\r\n".encode()))
        subj = "p" * (n - 2)  # "PUB <subj> 0"
        cases.append((f"PUB args {n}", f"PUB {subj} 0\r\n\r\n".encode()))
        subj = "h" * (n - 2 - 2 * len(str(len(hdr))))  # "HPUB <subj> 16 16"
        cases.append(
            (f"HPUB args {n}", f"HPUB {subj} {len(hdr)} {len(hdr)}\r\n".encode() + hdr + b"\r\n")
        )
        sid = "9" * (n - 2)  # "UNSUB <sid> 1"
        cases.append((f"UNSUB args {n}", f"UNSUB {sid} 1\r\n".encode()))
    for size in (mp, mp + 1):
        cases.append((f"PUB payload {size}", b"PUB big %d\r\n" % size + b"x" * size + b"\r\n"))
        body = b"y" * (size - len(hdr))
        cases.append(
            (f"HPUB total {size}", b"HPUB big %d %d\r\n" % (len(hdr), size) + hdr + body + b"\r\n")
        )
    # Lines whose verb takes no arguments, or free-form ones, longer than the limit.
    cases.append(("PING + 5000 bytes", b"PING" + b"x" * 5000 + b"\r\n"))
    cases.append(("INFO 5000 bytes", b"INFO {" + b" " * 5000 + b"}\r\n"))
    cases.append(("CONNECT 5000 bytes", b'CONNECT {"name":"' + b"n" * 5000 + b'"}\r\n'))
    return cases


LIMIT_CASES = dict(_limit_cases())


def _limit_params() -> list[Any]:
    out = []
    for name in LIMIT_CASES:
        for split in (False, True):
            out.append(pytest.param(name, split, id=f"{name}{' split' * split}"))
    return out


@contextlib.contextmanager
def _started_pair(tmp: Path, jetstream: bool) -> Iterator[tuple[ServerProc, ServerProc]]:
    """(nats-server, natsd), each in its own directory under ``tmp`` (with a store when
    ``jetstream``), ready; stopped on exit. Needs nats-server (components rule)."""
    binary = require_nats_server()
    procs: list[ServerProc] = []
    try:
        for name, exe in (("nats-server", binary), ("natsd", None)):
            d = tmp / name
            d.mkdir()
            args = _server_args(d / "store" if jetstream else None)
            procs.append(ServerProc(d, args, binary=exe, name=name).start())
        ref, impl = procs
        asyncio.run(_wait_both(ref, impl))
        yield ref, impl
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(scope="module")
def server_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """(nats-server port, natsd port), default limits, started once for the module."""
    with _started_pair(tmp_path_factory.mktemp("pair"), jetstream=False) as (ref, impl):
        yield ref.port, impl.port
        assert impl.alive(), "natsd died"


async def _wait_both(a: ServerProc, b: ServerProc) -> None:
    await asyncio.gather(a.wait_ready(), b.wait_ready())


@pytest.mark.differential
@pytest.mark.parametrize(("name", "split"), _limit_params())
def test_exact_limits_match_nats_server(
    name: str, split: bool, server_pair: tuple[int, int]
) -> None:
    """The same bytes to both servers: the same -ERR lines and the same close verdict. With
    ``split`` the bytes go in two writes cut just before the control line's newline."""
    payload = LIMIT_CASES[name]
    cut = payload.index(b"\n") if split else None
    ref_port, impl_port = server_pair
    want = raw_verdict(ref_port, payload, cut)
    got = raw_verdict(impl_port, payload, cut)
    assert got == want, f"{name}: nats-server {want}, natsd {got}"


# ============================================================== many abusive connections
ABUSE_CONNS = 100
# Frames natsd processed in all, over ABUSE_CONNS connections. natsd takes ~10-20k frames/s
# of this mix on a loaded 2-core machine, so CI runs 300k (~30-60 s); the soak tier runs the
# issue's 1M. ABUSE_FRAMES=... overrides the CI figure.
ABUSE_FRAMES = int(os.environ.get("ABUSE_FRAMES", 300_000))
SOAK_ABUSE_FRAMES = 1_000_000
ABUSE_TIME_CAP = 150.0  # seconds; the test fails if the frames are not all processed by then
CHUNK_FRAMES = 50
MUTATED_CHUNK = 0.02  # share of chunks whose last frame is mutated (usually fatal)
RSS_SLACK = 64 * 1024 * 1024


@dataclass
class AbuseStats:
    frames: int = 0
    chunks: int = 0
    mutated: int = 0
    connections: int = 0
    closed_by_server: int = 0
    rss: list[int] = field(default_factory=list)


SYNC_EVERY = 20  # chunks between PING/PONG round trips: frames count once natsd took them


def _abuser_chunks(idx: int) -> tuple[list[bytes], list[int]]:
    """40 chunks of CHUNK_FRAMES valid frames for connection ``idx`` and the PINGs in each
    (counted with natsd's own parser, which must accept every chunk)."""
    rng = random.Random(idx)
    prefix = f"c{idx}."
    chunks: list[bytes] = []
    pings: list[int] = []
    while len(chunks) < 40:
        data = b"".join(random_frame(rng, prefix) for _ in range(CHUNK_FRAMES))
        events = Parser().feed(data)
        if any(ev[0] == OP_ERR for ev in events):
            continue
        chunks.append(data)
        pings.append(sum(1 for ev in events if ev[0] == OP_PING))
    return chunks, pings


async def _abuser(port: int, idx: int, quota: int, stats: AbuseStats, deadline: float) -> None:
    """Write valid chunks, and now and then a mutated one (after which the connection is
    dropped and a new one made). Every SYNC_EVERY chunks, PING and wait for every PONG owed,
    so frames are counted only once natsd has processed them."""
    rng = random.Random(-idx)
    chunks, pings = _abuser_chunks(idx)
    sent = 0
    while sent < quota and time.monotonic() < deadline:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        stats.connections += 1
        pongs = [0]
        tail = [b""]

        async def read_all(
            r: asyncio.StreamReader = reader, pongs: list[int] = pongs, tail: list[bytes] = tail
        ) -> None:
            with contextlib.suppress(Exception):
                while chunk := await r.read(1 << 16):
                    both = tail[0] + chunk
                    pongs[0] += both.count(b"PONG\r\n") - tail[0].count(b"PONG\r\n")
                    tail[0] = chunk[-5:]

        rtask = asyncio.create_task(read_all())
        owed = 0
        pending = 0
        try:
            writer.write(b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\n')
            n = 0
            while sent < quota and time.monotonic() < deadline and not rtask.done():
                n += 1
                if rng.random() < MUTATED_CHUNK:
                    data = rng.choice(chunks)
                    writer.write(data[:-200] + mutate(data[-200:], rng))
                    await writer.drain()
                    stats.mutated += 1
                    stats.frames += CHUNK_FRAMES
                    sent += CHUNK_FRAMES
                    # Give natsd a moment to reject it, then drop the connection anyway.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(rtask), 0.2)
                    break
                i = rng.randrange(len(chunks))
                writer.write(chunks[i])
                owed += pings[i]
                pending += CHUNK_FRAMES
                if n % SYNC_EVERY == 0:
                    writer.write(b"PING\r\n")
                    owed += 1
                    await writer.drain()
                    t_end = time.monotonic() + 60
                    while pongs[0] < owed and not rtask.done():
                        assert time.monotonic() < t_end, f"conn {idx}: no PONG in 60s"
                        await asyncio.sleep(0.005)
                    if pongs[0] >= owed:
                        stats.frames += pending
                        sent += pending
                        stats.chunks += SYNC_EVERY
                    pending = 0
        except (ConnectionError, OSError):
            pass
        finally:
            if rtask.done():
                stats.closed_by_server += 1
            writer.close()
            rtask.cancel()
            with contextlib.suppress(BaseException):
                await rtask


class GoodClient:
    """rr_client.py in its own process: request/reply latencies measured outside this loop."""

    def __init__(self, url: str, seconds: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("rr_client.py")), url, str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    async def ready(self) -> None:
        assert self.proc.stdout is not None
        line = await asyncio.to_thread(self.proc.stdout.readline)
        assert line.strip() == b"ready", line

    async def result(self) -> tuple[list[float], int]:
        """Stop it (close its stdin) and collect (latencies, failures)."""
        out, _ = await asyncio.to_thread(self.proc.communicate, b"", 120)
        res = json.loads(out.strip().splitlines()[-1])
        self.errors: list[str] = list(res["errors"])
        return [float(x) for x in res["latencies"]], int(res["failures"])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class LatencyBudgetExceeded(AssertionError):
    """The well-behaved client's p99 exceeded LATENCY_BUDGET, its worst WORST_CASE, or a
    request failed."""


# The issue: "the event loop never stalls over 100 ms, well-behaved clients alongside keep
# their latency". A request/reply round trip over 100 ms means natsd's loop stalled that long.
# Bounded at the 99th percentile: on a shared 2-core machine one round trip can wait for the
# scheduler whatever natsd does (about 30 ms p99 / 32 ms max when idle). A single stall of
# WORST_CASE still fails.
LATENCY_BUDGET = 0.1
WORST_CASE = 1.0
# This failed before connection/fairness.py (each read parsed whole: request/reply p99 0.7-2 s
# with 100 flooding connections) and before the Sublist stopped scanning its whole cache on
# every wildcard SUB/UNSUB.


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_abusive_connections(tmp_path: Path, procs: list[ServerProc]) -> None:
    """ABUSE_CONNS connections write ABUSE_FRAMES random/mutated frames; natsd survives,
    stays within baseline RSS + 64 MiB, and request/reply alongside keeps working."""
    await _abusive_connections(tmp_path, procs, ABUSE_FRAMES, ABUSE_TIME_CAP)


@pytest.mark.soak
@pytest.mark.timeout(900)
async def test_abusive_connections_1m(tmp_path: Path, procs: list[ServerProc]) -> None:
    """The issue's figure: 1M frames over ABUSE_CONNS connections."""
    await _abusive_connections(tmp_path, procs, SOAK_ABUSE_FRAMES, 600.0)


async def _abusive_connections(
    tmp_path: Path, procs: list[ServerProc], frames: int, cap: float
) -> None:
    sp = ServerProc(tmp_path, _server_args())
    procs.append(sp.start())
    await sp.wait_ready()
    stats = AbuseStats()
    stop = asyncio.Event()
    good = GoodClient(sp.url, cap + 2)
    try:
        await good.ready()
        await asyncio.sleep(0.5)
        baseline = sp.rss()
        await _abuse(sp, stats, stop, baseline, good, frames, cap)
    finally:
        good.kill()


async def _abuse(
    sp: ServerProc,
    stats: AbuseStats,
    stop: asyncio.Event,
    baseline: int,
    good: GoodClient,
    frames: int,
    cap: float,
) -> None:
    async def sample() -> None:
        while not stop.is_set():
            assert sp.alive(), "natsd died"
            stats.rss.append(sp.rss())
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    t0 = time.monotonic()
    deadline = t0 + cap
    quota = frames // ABUSE_CONNS
    await asyncio.gather(*(_abuser(sp.port, i, quota, stats, deadline) for i in range(ABUSE_CONNS)))
    elapsed = time.monotonic() - t0
    await asyncio.sleep(0.5)
    stop.set()
    await sampler
    lat, failures = await good.result()
    assert sp.alive(), f"natsd died:\n{sp.current_log()[-3000:]}"
    assert lat, failures
    lat.sort()
    p50, p99, worst = lat[len(lat) // 2], lat[int(len(lat) * 0.99)], lat[-1]
    peak = max(stats.rss)
    print(
        f"\nabuse: {stats.frames} frames in {stats.chunks} chunks ({stats.mutated} mutated) over "
        f"{stats.connections} connections ({stats.closed_by_server} closed by natsd) in "
        f"{elapsed:.1f}s; RSS baseline {baseline / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB; "
        f"request/reply {len(lat)} ok, {failures} failed, p50 {p50 * 1e3:.1f} ms "
        f"p99 {p99 * 1e3:.1f} ms max {worst * 1e3:.1f} ms"
    )
    assert stats.frames >= frames, f"only {stats.frames} frames in {cap}s"
    assert stats.closed_by_server > 0  # the mutations did reach the parser's error paths
    assert peak <= baseline + RSS_SLACK, (baseline, peak)
    assert len(lat) > 100
    if failures or p99 > LATENCY_BUDGET or worst > WORST_CASE:
        raise LatencyBudgetExceeded(
            f"{failures} requests failed {good.errors[:5]}; p50 {p50 * 1e3:.1f} ms, p99 "
            f"{p99 * 1e3:.1f} ms (budget {LATENCY_BUDGET * 1e3:.0f} ms), max "
            f"{worst * 1e3:.1f} ms (budget {WORST_CASE * 1e3:.0f} ms)"
        )


# ============================================================== random JSON to $JS.API
JS_REQUESTS = 4000


def _evil_names(marker: str) -> list[str]:
    """Stream/consumer names that try to leave the store: ../, absolute paths, NUL, ..."""
    names = [f"{'../' * k}{marker}-up{k}" for k in range(1, 9)]
    names += [f"/tmp/{marker}-abs", f"..\\\\{marker}", f"{marker}\x00nul", "..", ".", "", " "]
    names += [f"%2e%2e%2f{marker}", f"{marker}/../../../../x", "~", "*", ">", "a" * 300]
    return names


def _subject_tokens(marker: str) -> list[str]:
    # A subject token cannot hold '.', ' ' or be empty; these are the ones that can.
    return ["S", f"/tmp/{marker}-tok", f"{marker}/x", "..%2f", "*", ">", "\x00", "~", "a" * 300]


def _junk_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.randrange(12)
    if r == 0:
        return rng.choice([10**30, -(10**30), 2**63, 2**64, -1, 0, 1.5e308, -0.0, 10**400])
    if r == 1:
        return rng.choice(["", "\x00", "../../etc", "a" * 10000, "\ud7ff", "1h", "-1"])
    if r == 2 and depth < 4:
        return [_junk_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if r == 3 and depth < 4:
        return {rng.choice(KEYS): _junk_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return rng.choice([None, True, False, 0, 1, -1, "x", 2**31, 1 << 53, 3.7])


KEYS = [
    "name",
    "subjects",
    "max_msgs",
    "max_bytes",
    "max_age",
    "storage",
    "num_replicas",
    "durable_name",
    "deliver_subject",
    "ack_policy",
    "ack_wait",
    "max_deliver",
    "filter_subject",
    "config",
    "stream_name",
    "seq",
    "batch",
    "last_by_subj",
    "next_by_subj",
    "max_msg_size",
    "duplicate_window",
    "discard",
    "retention",
    "sources",
    "mirror",
    "placement",
    "metadata",
    "offset",
    "limit",
    "subject",
    "keep",
    "filter",
    "deliver_policy",
    "opt_start_seq",
    "opt_start_time",
    "backoff",
    "no_erase",
    "priority_groups",
    "pause_until",
    "template_owner",
]

API = [
    "INFO",
    "STREAM.CREATE.{s}",
    "STREAM.UPDATE.{s}",
    "STREAM.INFO.{s}",
    "STREAM.DELETE.{s}",
    "STREAM.PURGE.{s}",
    "STREAM.NAMES",
    "STREAM.LIST",
    "STREAM.MSG.GET.{s}",
    "STREAM.MSG.DELETE.{s}",
    "STREAM.SNAPSHOT.{s}",
    "STREAM.RESTORE.{s}",
    "CONSUMER.CREATE.{s}",
    "CONSUMER.CREATE.{s}.{c}",
    "CONSUMER.CREATE.{s}.{c}.{s}",
    "CONSUMER.DURABLE.CREATE.{s}.{c}",
    "CONSUMER.INFO.{s}.{c}",
    "CONSUMER.DELETE.{s}.{c}",
    "CONSUMER.NAMES.{s}",
    "CONSUMER.LIST.{s}",
    "CONSUMER.MSG.NEXT.{s}.{c}",
    "CONSUMER.PAUSE.{s}.{c}",
    "CONSUMER.UNPIN.{s}.{c}",
    "DIRECT.GET.{s}",
    "DIRECT.GET.{s}.{c}",
    "ACCOUNT.PURGE.{s}",
    "STREAM.PEER.REMOVE.{s}",
    "META.LEADER.STEPDOWN",
    "NOPE.{s}",
]


def _js_request(rng: random.Random, marker: str) -> tuple[str, bytes]:
    tokens = _subject_tokens(marker)
    names = _evil_names(marker)
    stok, ctok = rng.choice(tokens), rng.choice(tokens)
    subject = "$JS.API." + rng.choice(API).format(s=stok, c=ctok)
    # Half the time the body names what the subject names, so the request gets past the
    # subject/body name check.
    matched = rng.random() < 0.5
    r = rng.randrange(6)
    if r == 0:
        body = rng.randbytes(rng.randrange(64))
    elif r == 1:
        depth = rng.choice([50, 1000, 100_000])
        body = (b"[" * depth + b"]" * depth) if rng.random() < 0.5 else b'{"a":' * depth
    elif r == 2:
        body = json.dumps(_junk_value(rng)).encode()
    else:
        cfg: dict[str, Any] = {"name": rng.choice(names), "subjects": [f"{marker}.>"]}
        for _ in range(rng.randrange(4)):
            cfg[rng.choice(KEYS)] = _junk_value(rng)
        if rng.random() < 0.3:
            cfg["durable_name"] = ctok if matched else rng.choice(names)
        if matched:
            cfg["name"] = stok
        if rng.random() < 0.3:
            cfg = {"stream_name": stok if matched else rng.choice(names), "config": cfg}
        text = json.dumps(cfg)
        if rng.random() < 0.2:
            text = text.replace("1e+400", "1e400")
        body = text.encode()
    return subject, body


def _tree(root: Path) -> set[str]:
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            out.add(os.path.join(dirpath, n))
    return out


@pytest.mark.timeout(180)
async def test_random_json_to_js_api(tmp_path: Path, procs: list[ServerProc]) -> None:
    """JS_REQUESTS random requests to $JS.API.>: natsd stays up, keeps answering, and
    creates nothing outside its store directory."""
    marker = f"natsd-escape-{os.getpid()}-{random.randrange(1 << 30)}"
    store = tmp_path / "store"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    watched = tmp_path.parent  # this session's pytest temp root: the store's neighbours
    sp = ServerProc(cwd, _server_args(store))
    procs.append(sp.start())
    await sp.wait_ready()
    before = _tree(watched)
    nc = await connect(sp.url)
    rng = random.Random(1234)
    replies = 0
    try:
        inbox = nc.new_inbox()
        got = asyncio.Event()
        counter = [0]

        async def on_reply(msg: Msg) -> None:
            counter[0] += 1
            got.set()

        await nc.subscribe(inbox + ".*", cb=on_reply)
        for i in range(JS_REQUESTS):
            subject, body = _js_request(rng, marker)
            with contextlib.suppress(nats.errors.Error):
                await nc.publish(subject, body, reply=f"{inbox}.{i}")
            if i % 100 == 99:
                await nc.flush(timeout=10)
                assert sp.alive(), f"natsd died after request {i}:\n{sp.current_log()[-3000:]}"
        await nc.flush(timeout=10)
        await asyncio.sleep(1.0)
        replies = counter[0]
        # Still serving JetStream: a sane stream works end to end.
        js = nc.jetstream()
        await js.add_stream(name="SANE", subjects=["sane.>"])
        ack = await js.publish("sane.1", b"ok")
        assert (await js.get_msg("SANE", ack.seq)).data == b"ok"
    finally:
        await close_quietly(nc)
    assert sp.alive()
    after = _tree(watched)
    escaped = sorted(p for p in after - before if not p.startswith(str(store)))
    escaped = [p for p in escaped if not p.startswith(str(cwd / "natsd.log"))]
    assert not escaped, escaped
    assert not list(Path("/tmp").glob(f"{marker}*"))
    stream_dir = store / "jetstream" / "$G" / "streams" / "x"
    for name in _evil_names(marker):
        target = os.path.normpath(stream_dir.parent / name.replace("\x00", ""))
        if not target.startswith(str(store)):
            assert not os.path.exists(target), target
    log = sp.current_log()
    assert "Traceback" not in log, log[log.index("Traceback") - 500 :][:4000]
    assert replies > JS_REQUESTS // 2, replies
    print(f"\njs api fuzz: {JS_REQUESTS} requests, {replies} replies, 0 files outside the store")


# ============================================================== evil names, one by one
EVIL_TOKENS = ["\x00", "a\x00b", "~", "a\\b", "/tmp/natsd-evil", "x\x7f", "a" * 300, "%2e%2e"]


def _evil_params() -> list[Any]:
    out = []
    for kind in ("stream", "consumer"):
        for tok in EVIL_TOKENS:
            out.append(pytest.param(kind, tok, id=f"{kind}-{tok[:12]!r}"))
    return out


@pytest.fixture(scope="module")
def js_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProc, ServerProc]]:
    """(nats-server, natsd) with JetStream, for the whole module."""
    with _started_pair(tmp_path_factory.mktemp("jspair"), jetstream=True) as pair:
        yield pair


async def _evil_request(url: str, kind: str, tok: str) -> tuple[bool, bool]:
    """(got an error reply, connection still usable) for a create with name == token."""
    nc = await connect(url)
    try:
        js = nc.jetstream()
        with contextlib.suppress(Exception):
            await js.add_stream(name="S", subjects=["s.>"])
        body: dict[str, Any]
        if kind == "stream":
            subject = f"$JS.API.STREAM.CREATE.{tok}"
            body = {"name": tok, "subjects": [f"evil{len(tok)}.>"]}
        else:
            subject = f"$JS.API.CONSUMER.CREATE.S.{tok}"
            body = {"stream_name": "S", "config": {"durable_name": tok, "name": tok}}
        try:
            rep = await nc.request(subject, json.dumps(body).encode(), timeout=3)
        except nats.errors.NoRespondersError:
            return True, nc.is_connected
        except (nats.errors.Error, TimeoutError):
            return False, False
        err = "error" in json.loads(rep.data)
        await nc.flush(timeout=3)
        return err, nc.is_connected
    finally:
        await close_quietly(nc)


@pytest.mark.differential
@pytest.mark.parametrize(("kind", "tok"), _evil_params())
async def test_evil_names_answered_like_nats_server(
    kind: str, tok: str, js_pair: tuple[ServerProc, ServerProc]
) -> None:
    """A stream/consumer create whose name (in subject and body) is hostile gets an answer
    (refused where nats-server refuses), the connection survives, and the name creates
    nothing outside the store."""
    ref, impl = js_pair
    log_start = len(impl.current_log())
    want = await _evil_request(ref.url, kind, tok)
    got = await _evil_request(impl.url, kind, tok)
    new_log = impl.current_log()[log_start:]
    assert got[1], f"natsd dropped the connection (reply: {got}):\n{new_log[-1500:]}"
    assert got == want, f"nats-server (error, connected) = {want}, natsd {got}"
    assert impl.alive()
    assert "Traceback" not in new_log, new_log[-1500:]
    store = impl.workdir / "store"
    outside = sorted(p for p in _tree(impl.workdir) if not p.startswith(str(store)))
    assert all(p.endswith("natsd.log") for p in outside), outside
    assert not Path("/tmp/natsd-evil").exists()
