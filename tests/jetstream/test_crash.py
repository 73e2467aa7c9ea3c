"""File-stream persistence when natsd dies: SIGKILL mid-flood, damaged and truncated blocks.

natsd runs as a real process (``python -m natsd -js -sd DIR``) so it can be killed with
SIGKILL; nats-py publishes and reads back. Every message is self-describing: its subject
is ``crash.<publisher>.<counter>`` and its payload (0..4 KiB) and optional header are a
pure function of (publisher, counter), so any message read back can be checked
byte-for-byte without remembering what was sent. Payloads long enough carry
(publisher, counter, length) and a hash of the rest, as a recognisable prefix.

What must hold after a crash (natsd fsyncs before each PubAck by default):

- every acknowledged message is there, at the sequence its PubAck named, byte-identical;
- every message there is a valid one (no corrupt, no duplicated, no reordered payloads),
  acknowledged or not;
- the stream state agrees with what can be read, and sequences go on after the last one.

The on-disk layout is discovered from the directory: the stream's data lives under
``<store>/jetstream/$G/streams/<name>/``; the block files are taken to be the files with the
same suffix as the largest file there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import StorageType
from nats.js.errors import NotFoundError
from ports import free_port

NATSD = [sys.executable, "-m", "natsd"]
STREAM = "CRASH"
SUBJECTS = ["crash.>"]
READY = "Server is ready"
READY_TIMEOUT = 30.0
PUB_TIMEOUT = 5.0
KILL_GRACE = 0.3
GET_CONCURRENCY = 200
MAX_PAYLOAD = 4096
_PREFIX = struct.Struct(">IQI")  # publisher, counter, length
_HASH_LEN = 16


# ----------------------------------------------------------------------------- messages
def _size(pid: int, counter: int) -> int:
    h = hashlib.blake2b(b"size:%d:%d" % (pid, counter), digest_size=8).digest()
    r = int.from_bytes(h, "big")
    kind = r % 8
    if kind == 0:
        return 0
    if kind == 1:
        return (r >> 8) % 32  # tiny: shorter than the self-describing prefix
    return (r >> 8) % (MAX_PAYLOAD + 1)


def expected_payload(pid: int, counter: int) -> bytes:
    """The payload of message (pid, counter): prefix + hash of the filler + filler."""
    n = _size(pid, counter)
    seed = hashlib.blake2b(b"fill:%d:%d" % (pid, counter)).digest()
    reps = n // len(seed) + 1
    filler = (seed * reps)[: max(0, n - _PREFIX.size - _HASH_LEN)]
    digest = hashlib.blake2b(filler, digest_size=_HASH_LEN).digest()
    return (_PREFIX.pack(pid, counter, n) + digest + filler)[:n]


def expected_headers(pid: int, counter: int) -> dict[str, str] | None:
    if (pid * 7 + counter) % 5:
        return None
    return {"X-Crash": f"{pid}.{counter}"}


def subject(pid: int, counter: int) -> str:
    return f"crash.{pid}.{counter}"


def check_payload(data: bytes) -> str | None:
    """Self-check of a payload alone (prefix and hash); None when fine."""
    if len(data) < _PREFIX.size + _HASH_LEN:
        return None  # too short to describe itself; compared by value instead
    pid, counter, n = _PREFIX.unpack_from(data)
    if n != len(data):
        return f"length field {n} != {len(data)}"
    body = data[_PREFIX.size + _HASH_LEN :]
    if hashlib.blake2b(body, digest_size=_HASH_LEN).digest() != data[_PREFIX.size :][:_HASH_LEN]:
        return "hash mismatch"
    if data != expected_payload(pid, counter):
        return "content mismatch"
    return None


# ----------------------------------------------------------------------------- process
class NatsdProcess:
    """natsd as a child process with its stderr in a log file; one instance per start."""

    def __init__(self, store: Path, port: int, log_path: Path) -> None:
        self.store = store
        self.port = port
        self.log_path = log_path
        self.url = f"nats://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> NatsdProcess:
        with open(self.log_path, "ab") as logf:
            logf.write(b"==== start\n")
            logf.flush()
            self._mark = logf.tell()
            self.proc = subprocess.Popen(
                [*NATSD, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)],
                stdout=logf,
                stderr=subprocess.STDOUT,
            )
        return self

    def log(self) -> str:
        """The log of this start only."""
        with open(self.log_path, "rb") as f:
            f.seek(self._mark)
            return f.read().decode(errors="replace")

    async def wait_ready(self) -> NatsdProcess:
        assert self.proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        while READY not in self.log():
            if self.proc.poll() is not None:
                pytest.fail(f"natsd exited {self.proc.returncode} at start:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"natsd not ready after {READY_TIMEOUT}s:\n{self.log()}")
            await asyncio.sleep(0.02)
        return self

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(10) == -signal.SIGKILL

    def stop(self) -> None:
        """Clean shutdown (SIGTERM), killing it if it hangs."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"natsd did not stop on SIGTERM:\n{self.log()}")
            assert rc == 0, f"natsd exited {rc} on SIGTERM:\n{self.log()}"

    def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@dataclass
class RestartedServer:
    """One store dir and port, restarted as many times as a test likes."""

    store: Path
    port: int
    log_path: Path
    procs: list[NatsdProcess] = field(default_factory=list)

    async def start(self) -> NatsdProcess:
        p = NatsdProcess(self.store, self.port, self.log_path).start()
        self.procs.append(p)
        return await p.wait_ready()


@pytest.fixture
def restarted(tmp_path: Path) -> Iterator[RestartedServer]:
    c = RestartedServer(tmp_path / "store", free_port(), tmp_path / "natsd.log")
    try:
        yield c
    finally:
        for p in c.procs:
            p.ensure_dead()


async def _noop_cb(*_: Any) -> None:
    return None


@contextlib.asynccontextmanager
async def connect(url: str) -> AsyncIterator[Any]:
    nc = await nats.connect(
        url,
        allow_reconnect=False,
        connect_timeout=5,
        error_cb=_noop_cb,
        disconnected_cb=_noop_cb,
        closed_cb=_noop_cb,
    )
    try:
        yield nc
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


def stream_dir(store: Path) -> Path:
    d = store / "jetstream" / "$G" / "streams" / STREAM
    assert d.is_dir(), f"no stream directory at {d}; store holds {sorted(store.rglob('*'))}"
    return d


def block_files(store: Path) -> list[Path]:
    """The stream's block files, oldest first: files with the largest file's suffix."""
    files = [p for p in stream_dir(store).rglob("*") if p.is_file()]
    assert files, "stream directory is empty"
    largest = max(files, key=lambda p: p.stat().st_size)
    blocks = [p for p in files if p.suffix == largest.suffix and p.parent == largest.parent]
    # Blocks are named by their first sequence; sort numerically where the names allow.
    return sorted(blocks, key=lambda p: (len(p.stem), p.stem))


# ----------------------------------------------------------------------------- flood
@dataclass
class Acked:
    """Every PubAck received: (publisher, counter) -> sequence."""

    seqs: dict[tuple[int, int], int] = field(default_factory=dict)

    def by_seq(self) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for key, seq in self.seqs.items():
            assert seq not in out, f"seq {seq} acknowledged twice: {out[seq]} and {key}"
            out[seq] = key
        return out


async def publisher(
    js: Any, pid: int, acked: Acked, stop: asyncio.Event, killed: asyncio.Event
) -> None:
    counter = 0
    while not stop.is_set():
        counter += 1
        try:
            ack = await js.publish(
                subject(pid, counter),
                expected_payload(pid, counter),
                timeout=PUB_TIMEOUT,
                headers=expected_headers(pid, counter),
            )
        except (Exception, asyncio.CancelledError) as e:
            # Once the server is killed the message is simply unacked; before that, any
            # failure is a server error the test must not swallow.
            if not killed.is_set():
                raise AssertionError(f"publish {pid}.{counter} failed before the kill") from e
            return
        assert ack.stream == STREAM and not ack.duplicate, ack
        acked.seqs[(pid, counter)] = ack.seq


async def flood_and_kill(
    srv: NatsdProcess, acked: Acked, pids: list[int], rng: random.Random, min_acks: int
) -> int:
    """Publish from len(pids) tasks, SIGKILL the server at a random moment; acks received."""
    before = len(acked.seqs)
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        stop, killed = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(publisher(js, pid, acked, stop, killed)) for pid in pids]
        # Let the flood get going, then wait a random time and pull the plug.
        deadline = time.monotonic() + 20
        while len(acked.seqs) - before < min_acks:
            assert time.monotonic() < deadline, "flood made no progress"
            for t in tasks:
                if t.done():
                    t.result()  # raises what went wrong
            await asyncio.sleep(0.005)
        await asyncio.sleep(rng.uniform(0.0, 0.6))
        for t in tasks:
            if t.done():
                t.result()
        killed.set()
        srv.kill9()
        # Acks already on their way (socket and nats-py buffers) may still be delivered and
        # count too; nothing new can come from a dead server, so a short grace suffices
        # (nats-py would otherwise leave the requests in flight until their timeout).
        stop.set()
        done, pending = await asyncio.wait(tasks, timeout=KILL_GRACE)
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            if t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
    return len(acked.seqs) - before


# ----------------------------------------------------------------------------- read back
async def read_stream(js: Any, seqs: range) -> dict[int, Any]:
    """seq -> RawStreamMsg for every seq in ``seqs`` that the server returns."""
    out: dict[int, Any] = {}

    async def get(seq: int) -> None:
        try:
            out[seq] = await js.get_msg(STREAM, seq)
        except NotFoundError:
            pass

    todo = list(seqs)
    for i in range(0, len(todo), GET_CONCURRENCY):
        await asyncio.gather(*(get(s) for s in todo[i : i + GET_CONCURRENCY]))
    return out


def msg_problem(m: Any) -> str | None:
    """Why stored message ``m`` is not a valid flood message, or None."""
    parts = (m.subject or "").split(".")
    if len(parts) != 3 or parts[0] != "crash" or not parts[1].isdigit() or not parts[2].isdigit():
        return f"unexpected subject {m.subject!r}"
    pid, counter = int(parts[1]), int(parts[2])
    data = m.data or b""
    why = check_payload(data)
    if why is not None:
        return f"{m.subject}: corrupt payload ({why}, {len(data)} bytes)"
    if data != expected_payload(pid, counter):
        return f"{m.subject}: payload differs ({len(data)} bytes)"
    want = expected_headers(pid, counter)
    got = {k: v for k, v in (m.headers or {}).items() if not k.startswith("Nats-")} or None
    if got != want:
        return f"{m.subject}: headers {got} != {want}"
    return None


async def verify(srv: NatsdProcess, acked: Acked, from_seq: int = 1) -> tuple[Any, dict[int, Any]]:
    """Check the stream against the acks; returns (stream info, messages read)."""
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        si = await js.stream_info(STREAM)
        st = si.state
        by_seq = acked.by_seq()
        max_acked = max(by_seq, default=0)
        assert st.last_seq >= max_acked, (
            f"last_seq {st.last_seq} < highest acked seq {max_acked}\n{srv.log()}"
        )
        assert not st.lost or not (st.lost.msgs or st.lost.bytes), f"lost data: {st.lost}"
        msgs = await read_stream(js, range(max(from_seq, st.first_seq), st.last_seq + 1))
        problems: list[str] = []
        # Acked messages: present, at their sequence, byte-identical.
        for seq, (pid, counter) in sorted(by_seq.items()):
            if seq < from_seq:
                continue
            m = msgs.get(seq)
            if m is None:
                problems.append(f"acked seq {seq} ({pid}.{counter}) missing")
            elif m.subject != subject(pid, counter):
                problems.append(f"acked seq {seq}: {m.subject} instead of {pid}.{counter}")
        # Everything present: valid, unique, each publisher's messages in counter order.
        seen: dict[tuple[int, int], int] = {}
        last_of: dict[int, tuple[int, int]] = {}
        for seq, m in sorted(msgs.items()):
            why = msg_problem(m)
            if why is not None:
                problems.append(f"seq {seq}: {why}")
                continue
            _, p, c = m.subject.split(".")
            key = (int(p), int(c))
            if key in seen:
                problems.append(f"seq {seq}: duplicate of seq {seen[key]} ({m.subject})")
            seen[key] = seq
            prev = last_of.get(key[0])
            if prev is not None and prev[1] >= key[1]:
                problems.append(f"seq {seq}: {m.subject} after counter {prev[1]} (seq {prev[0]})")
            last_of[key[0]] = (seq, key[1])
        if from_seq <= st.first_seq:
            if len(msgs) != st.messages:
                problems.append(f"state.messages {st.messages} but {len(msgs)} readable")
        assert not problems, (
            f"{len(problems)} problems (first 20):\n"
            + "\n".join(problems[:20])
            + f"\nstate: {st}\nlog:\n{srv.log()[-4000:]}"
        )
        return si, msgs


async def create_stream(srv: NatsdProcess) -> None:
    async with connect(srv.url) as nc:
        await nc.jetstream().add_stream(name=STREAM, subjects=SUBJECTS, storage=StorageType.FILE)


async def publish_more(srv: NatsdProcess, acked: Acked, pid: int, n: int) -> None:
    """Publish n more messages (one publisher, sequential) and record the acks."""
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        for counter in range(1, n + 1):
            ack = await js.publish(
                subject(pid, counter),
                expected_payload(pid, counter),
                headers=expected_headers(pid, counter),
                timeout=PUB_TIMEOUT,
            )
            acked.seqs[(pid, counter)] = ack.seq


# ----------------------------------------------------------------------------- kill -9
async def run_crash_cycles(
    restarted: RestartedServer, cycles: int, seed: int, full_every: int
) -> None:
    print(f"crash cycles: seed={seed}")  # shown by pytest when the test fails
    rng = random.Random(seed)
    acked = Acked()
    srv = await restarted.start()
    await create_stream(srv)
    total_unacked_present = 0
    for cycle in range(cycles):
        first_new = (max(acked.by_seq(), default=0)) + 1
        pids = [cycle * 100 + i for i in range(rng.randint(4, 8))]
        got = await flood_and_kill(srv, acked, pids, rng, min_acks=rng.randint(20, 400))
        assert got > 0
        srv = await restarted.start()
        # Every cycle checks what it published; every full_every-th cycle (and the last)
        # re-reads the whole stream, so early messages are also checked after later crashes.
        full = (cycle + 1) % full_every == 0 or cycle == cycles - 1
        si, msgs = await verify(srv, acked, from_seq=1 if full else first_new)
        by_seq = acked.by_seq()
        total_unacked_present += sum(1 for s in msgs if s >= first_new and s not in by_seq)
        # Sequences go on after the last stored one, whatever was lost.
        await publish_more(srv, acked, pid=cycle * 100 + 99, n=3)
        last = max(acked.by_seq())
        assert last == si.state.last_seq + 3, (last, si.state)
    print(f"{cycles} crashes: {len(acked.seqs)} acked, {total_unacked_present} unacked found")
    await verify(srv, acked)
    srv.stop()
    # A clean restart after all that still has everything.
    srv = await restarted.start()
    await verify(srv, acked)
    srv.stop()


@pytest.mark.timeout(60)
async def test_kill9_mid_flood_keeps_every_acked_message(restarted: RestartedServer) -> None:
    await run_crash_cycles(restarted, cycles=3, seed=random.randrange(1 << 30), full_every=1)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_kill9_mid_flood_many_cycles(restarted: RestartedServer) -> None:
    # 20 on the compiled build (make test-compiled), 12 in the pure-Python tier (the same
    # recovery code about 1.3x slower), with a fresh seed each run; NATSD_CRASH_CYCLES sets
    # more for a soak (30 cost 111 s of CI compiled, 146 s pure)
    cycles = int(os.environ.get("NATSD_CRASH_CYCLES", 12 if os.environ.get("NATSD_PURE") else 20))
    await run_crash_cycles(restarted, cycles=cycles, seed=random.randrange(1 << 30), full_every=5)


# ----------------------------------------------------------------------------- damaged blocks
FILL_PUBLISHERS = 8
FILL_ROUND = 125  # messages per publisher per round
FILL_CAP = 64 * 1024 * 1024  # stop filling here even if the store never starts a 2nd block


@dataclass
class Template:
    """A cleanly stopped store holding a stream of at least two blocks, and its acks."""

    store: Path
    acked: Acked
    n: int


async def _fill_template(root: Path) -> Template:
    c = RestartedServer(root / "store", free_port(), root / "natsd.log")
    try:
        srv = await c.start()
        await create_stream(srv)
        acked = Acked()
        counter = 0
        async with connect(srv.url) as nc:
            js = nc.jetstream()

            async def pub(pid: int, first: int) -> None:
                for cnt in range(first, first + FILL_ROUND):
                    ack = await js.publish(
                        subject(pid, cnt),
                        expected_payload(pid, cnt),
                        headers=expected_headers(pid, cnt),
                        timeout=PUB_TIMEOUT,
                    )
                    acked.seqs[(pid, cnt)] = ack.seq

            while True:
                await asyncio.gather(*(pub(p, counter + 1) for p in range(1, 1 + FILL_PUBLISHERS)))
                counter += FILL_ROUND
                blocks = block_files(c.store)
                if len(blocks) >= 2 or sum(b.stat().st_size for b in blocks) > FILL_CAP:
                    break
        srv.stop()
        n = len(acked.seqs)
        assert sorted(acked.by_seq()) == list(range(1, n + 1))
        return Template(c.store, acked, n)
    finally:
        for p in c.procs:
            p.ensure_dead()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("crash-template")
    # A module-scoped fixture has no event loop of its own here: fill on a private one.
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, _fill_template(root)).result()


async def _damaged_copy(template: Template, restarted: RestartedServer, how: str) -> list[Path]:
    """Copy the template store for this test; "sigkill" also leaves it as a crash would
    (started once and killed: no clean-shutdown state). Returns the block files."""
    shutil.copytree(template.store, restarted.store)
    if how == "sigkill":
        (await restarted.start()).kill9()
    blocks = block_files(restarted.store)
    assert len(blocks) >= 2, f"expected several blocks, got {blocks}"
    return blocks


def _reported_in_log(log: str, seq: int) -> bool:
    pat = re.compile(rf"\b{seq}\b")
    return any("lost" in line and pat.search(line) for line in log.splitlines())


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_flipped_byte_loses_exactly_one_message(
    template: Template, restarted: RestartedServer, how: str
) -> None:
    n, by_seq = template.n, template.acked.by_seq()
    blocks = await _damaged_copy(template, restarted, how)
    target = max(blocks, key=lambda p: p.stat().st_size)
    size = target.stat().st_size
    with open(target, "r+b") as f:
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0xFF]))

    srv = await restarted.start()
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        si = await js.stream_info(STREAM)
        msgs = await read_stream(js, range(1, n + 1))
    missing = sorted(set(range(1, n + 1)) - set(msgs))
    assert len(missing) == 1, f"missing {missing[:20]}; log:\n{srv.log()}"
    bad = [f"seq {s}: {w}" for s, m in msgs.items() if (w := msg_problem(m)) is not None]
    assert not bad, bad[:10]
    wrong = [s for s, m in msgs.items() if m.subject != subject(*by_seq[s])]
    assert not wrong, wrong[:10]
    assert si.state.messages == n - 1, si.state
    assert si.state.last_seq == n, si.state
    # The loss is reported, in the stream state or in the log; a report must be exact.
    lost = si.state.lost
    if lost is not None and (lost.msgs or lost.bytes):
        assert lost.msgs == missing, f"state.lost {lost}; missing {missing}"
        assert lost.bytes and lost.bytes > 0, lost
    else:
        assert _reported_in_log(srv.log(), missing[0]), f"loss not reported:\n{srv.log()}"
    # The stream goes on after its last sequence.
    acked = Acked()
    await publish_more(srv, acked, pid=99, n=2)
    assert sorted(acked.by_seq()) == [n + 1, n + 2]
    srv.stop()


@pytest.mark.parametrize("cut", [7, 3000])
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_truncated_last_block_keeps_earlier_messages(
    template: Template, restarted: RestartedServer, how: str, cut: int
) -> None:
    n, by_seq = template.n, template.acked.by_seq()
    blocks = await _damaged_copy(template, restarted, how)
    last = blocks[-1]
    size = last.stat().st_size
    assert size > cut
    os.truncate(last, size - cut)

    srv = await restarted.start()
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        si = await js.stream_info(STREAM)
        msgs = await read_stream(js, range(1, n + 1))
    # What survives is a prefix, byte-identical, and the cut took only what lay in it.
    k = len(msgs)
    gone = sorted(set(range(1, n + 1)) - set(msgs))
    assert sorted(msgs) == list(range(1, k + 1)), f"not a prefix; missing {gone}"
    assert k < n, "truncating the last block lost nothing"
    bad = [f"seq {s}: {w}" for s, m in msgs.items() if (w := msg_problem(m)) is not None]
    assert not bad, bad[:10]
    assert all(m.subject == subject(*by_seq[s]) for s, m in msgs.items())
    # Records k+2..n lay wholly inside the cut (k+1 straddled it): their bytes fit in it.
    whole = sum(
        len(expected_payload(*by_seq[s])) + len(subject(*by_seq[s])) for s in range(k + 2, n + 1)
    )
    assert whole <= cut, f"lost {n - k} messages ({whole} bytes of content) to a {cut}-byte cut"
    assert si.state.messages == k, si.state
    # New messages get sequences after every surviving one.
    async with connect(srv.url) as nc:
        ack = await nc.jetstream().publish("crash.3.1", expected_payload(3, 1))
    assert ack.seq > k, (ack, si.state)
    srv.stop()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_truncated_earlier_block_reports_every_lost_message(
    template: Template, restarted: RestartedServer, how: str
) -> None:
    n, by_seq = template.n, template.acked.by_seq()
    blocks = await _damaged_copy(template, restarted, how)
    first = blocks[0]
    os.truncate(first, first.stat().st_size - 5000)

    srv = await restarted.start()
    async with connect(srv.url) as nc:
        js = nc.jetstream()
        si = await js.stream_info(STREAM)
        msgs = await read_stream(js, range(1, n + 1))
    missing = sorted(set(range(1, n + 1)) - set(msgs))
    assert missing, "cutting 5000 bytes off a block lost nothing"
    # Only the end of the first block is gone; the later blocks are whole.
    assert missing == list(range(missing[0], missing[-1] + 1)), missing
    assert missing[-1] + 1 in msgs and missing[-1] < n, (missing, si.state)
    bad = [f"seq {s}: {w}" for s, m in msgs.items() if (w := msg_problem(m)) is not None]
    assert not bad, bad[:10]
    assert all(m.subject == subject(*by_seq[s]) for s, m in msgs.items())
    assert si.state.messages == n - len(missing) and si.state.last_seq == n, si.state
    # Every one of them was acknowledged after an fsync: losing them must be reported.
    lost = si.state.lost
    assert lost is not None and lost.msgs == missing, f"state.lost {lost}; missing {missing}"
    srv.stop()
