"""Power loss (issue 7, fault 2): 500 simulated crashes of the file store and its catalog.

Every case runs a random workload against ``DiskCatalog`` + ``FileStore`` on a ``FaultFS``
(``faultfs.py``): appends of mixed sizes (0 B .. 6 KiB, with and without headers, over tiny
and larger blocks), single removals, erasures, subject purges, compactions, full purges, the
odd truncate, stream metadata updates, and consumer-state saves. The power goes out at a
random mutating I/O operation (or at the end). The disk a power loss could leave is then
written out (unsynced writes dropped, or kept up to a random point with the last one torn;
directory entries not fsynced reverted) and opened with the normal ``os`` file layer.

Default sync (fsync before ack, what the engine's Committer does): an ack is sent once
``flush()`` and ``sync()`` returned. Pass: every acknowledged message is there,
byte-identical; every acknowledged removal stuck; nothing present that was never stored or
with other bytes; sequences never go back; no data reported lost; the durably saved
consumer state (or a later one) and the stream metadata are there; and at every ack the
fault layer finds nothing below the stream directory that is not yet durable (a new block
file or renamed file whose directory was not fsynced is a violation).

Lazy sync (``sync_interval``): the ack is sent after ``flush()``, fsync every few commits.
Pass: what was synced is all there; of the rest only a suffix is missing, never a hole;
and when anything acknowledged is missing, recovery says the shutdown was unclean.

``python tests/reliability/test_power_loss.py [cases]`` prints the figures for
docs/durability.md. ``NATSD_POWER_LOSS_CASES`` scales the CI run (default 500).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from natsd.storage.disk_catalog import DiskCatalog
from natsd.storage.store import StoreConfig, StoreError

try:
    from .faultfs import Crash, FaultFS
except ImportError:  # run as a script, or without the package __init__
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from faultfs import Crash, FaultFS  # type: ignore[no-redef]

ACCOUNT = "$G"
STREAM = "S"
CONSUMER = "C"
SUBJECTS = ["a", "b.x", "b.y", "c.long.subject.name"]
HDR = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n"
CASES = int(os.environ.get("NATSD_POWER_LOSS_CASES", "500"))
LAZY_SHARE = 0.3  # of the cases run with a lazy sync interval
CHUNK = 50


@dataclass
class Model:
    stored: dict[int, tuple[str, bytes | None, bytes]] = field(default_factory=dict)
    live: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)  # PubAck sent
    durable: set[int] = field(default_factory=set)  # a completed sync covered it
    removed_any: set[int] = field(default_factory=set)  # a removal was attempted
    removed_durable: set[int] = field(default_factory=set)  # ...and a sync covered it
    flushed: set[int] = field(default_factory=set)
    removed_flushed: set[int] = field(default_factory=set)
    unflushed: list[int] = field(default_factory=list)
    removed_unflushed: set[int] = field(default_factory=set)
    max_durable_seq: int = 0
    states: list[bytes] = field(default_factory=list)
    durable_state: int = -1  # index into states of the last save that fsynced the dir
    metas: list[bytes] = field(default_factory=list)
    meta_durable: int = -1
    created: bool = False
    consumer_created: bool = False
    violations: list[str] = field(default_factory=list)
    # Contents of sequences a truncate gave back; a crash inside truncate may keep them.
    ghosts: dict[int, list[tuple[str, bytes | None, bytes]]] = field(default_factory=dict)
    in_truncate: bool = False
    truncate_keep: int = 0  # (the sequence a truncate under way keeps the store to)


@dataclass
class Result:
    seed: int
    lazy: bool
    crashed_at: int
    ops: int
    acked: int
    acked_lost: int
    durable_lost: int
    suffix_lost: int
    holes: int
    problems: list[str]


def payload(rng: random.Random, seq_hint: int) -> bytes:
    r = rng.random()
    if r < 0.1:
        n = 0
    elif r < 0.7:
        n = rng.randint(1, 200)
    elif r < 0.95:
        n = rng.randint(200, 2000)
    else:
        n = rng.randint(2000, 6000)
    return (b"%d:" % seq_hint + rng.randbytes(n))[: max(n, 1)] if n else b""


def _meta(i: int) -> bytes:
    return b'{"config":{"name":"S","subjects":[">"]},"created":%d,"rev":%d}' % (1000 + i, i)


def run_case(seed: int, lazy: bool, base: Path) -> Result:
    rng = random.Random(seed)
    root = base / f"c{seed}"
    root.mkdir()
    # How far the workload gets: crash points spread over the whole run.
    fs = FaultFS(root, crash_at=rng.randint(1, 420))
    m = Model()
    block_size = rng.choice([256, 700, 2048, 16384])
    msgs_dir = root / "jetstream" / ACCOUNT / "streams" / STREAM
    commits = 0

    def ack_check(extra: Path | None = None, skip: tuple[str, ...] = ()) -> None:
        bad = [] if lazy else fs.unsynced(msgs_dir / "msgs")
        bad += [
            b
            for b in fs.unsynced(msgs_dir, skip=(*skip, "state.json"))
            if "obs" not in b and (not lazy or f"{os.sep}msgs" not in b)
        ]
        if extra is not None:
            bad += fs.unsynced(extra)
        for b in bad:
            m.violations.append(f"at ack: {b}")

    def commit() -> None:
        nonlocal commits
        commits += 1
        store.flush()
        m.flushed.update(m.unflushed)
        m.removed_flushed |= m.removed_unflushed
        pending = list(m.unflushed)
        m.unflushed.clear()
        m.removed_unflushed.clear()
        if lazy:
            m.acked.update(pending)  # acked after the write, fsync on a timer
            if rng.random() < 0.25:
                store.sync()
                m.durable |= m.flushed
                m.removed_durable |= m.removed_flushed
                m.max_durable_seq = max([m.max_durable_seq, *m.flushed])
        else:
            store.sync()
            m.durable |= m.flushed
            m.removed_durable |= m.removed_flushed
            m.max_durable_seq = max([m.max_durable_seq, *m.flushed])
            m.acked.update(pending)
            ack_check()

    def remove(seqs: set[int]) -> None:
        m.live -= seqs
        m.removed_any |= seqs
        m.removed_unflushed |= seqs

    try:
        cat = DiskCatalog(root, block_size=block_size, io=fs)
        m.metas.append(_meta(0))
        store = cat.create(ACCOUNT, STREAM, "file", StoreConfig(name=STREAM), _meta(0))
        m.created = True
        m.meta_durable = 0
        ack_check()
        cat.save_consumer(ACCOUNT, STREAM, CONSUMER, "file", b'{"config":{"durable_name":"C"}}')
        m.consumer_created = True
        ack_check(msgs_dir / "obs")
        for step in range(rng.randint(10, 90)):
            r = rng.random()
            if r < 0.62:
                for _ in range(rng.choice([1, 1, 1, 2, 3, 8])):
                    subj = rng.choice(SUBJECTS)
                    data = payload(rng, step)
                    hdr = HDR % step if rng.random() < 0.3 else None
                    seq, _ts = store.store_msg(subj, hdr, data)
                    m.stored[seq] = (subj, hdr, data)
                    m.live.add(seq)
                    m.unflushed.append(seq)
                commit()
            elif r < 0.70 and m.live:
                seq = rng.choice(sorted(m.live))
                if rng.random() < 0.2:
                    store.erase_msg(seq)
                else:
                    store.remove_msg(seq)
                remove({seq})
                commit()
            elif r < 0.74 and m.live:
                subj = rng.choice(SUBJECTS)
                store.purge_ex(subj, 0, 0)
                remove({s for s in m.live if m.stored[s][0] == subj})
                commit()
            elif r < 0.78 and m.live:
                upto = rng.choice(sorted(m.live)) + rng.randint(0, 2)
                store.compact(upto)
                remove({s for s in m.live if s < upto})
                commit()
            elif r < 0.80:
                store.purge()
                remove(set(m.live))
                commit()
            elif r < 0.82 and m.live:
                # Truncate gives the sequences above ``keep`` back: they will be reused.
                keep = rng.choice(sorted(m.live))
                for s in [s for s in m.stored if s > keep]:
                    m.ghosts.setdefault(s, []).append(m.stored.pop(s))
                    for st in (m.live, m.acked, m.durable, m.removed_any, m.removed_durable):
                        st.discard(s)
                    m.flushed.discard(s)
                    m.removed_flushed.discard(s)
                    m.removed_unflushed.discard(s)
                m.unflushed = [s for s in m.unflushed if s <= keep]
                m.in_truncate = True
                m.truncate_keep = keep
                store.truncate(keep)  # synchronous and durable when it returns
                m.in_truncate = False
                m.max_durable_seq = min(m.max_durable_seq, keep)
                commit()
            elif r < 0.85:
                i = len(m.metas)
                m.metas.append(_meta(i))
                cat.save_meta(ACCOUNT, STREAM, "file", _meta(i))
                m.meta_durable = i
                ack_check()
            else:
                doc = b'{"delivered":{"consumer_seq":%d,"stream_seq":%d},"n":%d}' % (
                    step,
                    max(m.stored, default=0),
                    len(m.states),
                )
                durable = rng.random() < 0.4
                m.states.append(doc)
                cat.save_consumer_state(ACCOUNT, STREAM, CONSUMER, "file", doc, durable)
                if durable:
                    m.durable_state = len(m.states) - 1
                    ack_check(msgs_dir / "obs" / CONSUMER, skip=("meta.json.tmp",))
        fs.crashed = True  # the power goes out at the end
        crashed_at = 0
    except Crash:
        crashed_at = fs.ops
    finally:
        for fd in list(fs.fds):
            try:
                os.close(fd)
            except OSError:
                pass
    torn = rng.random() < 0.5
    image = base / f"img{seed}"
    fs.materialize(image, rng, torn)
    shutil.rmtree(root)
    try:
        return check(seed, lazy, image, m, fs.ops, crashed_at)
    finally:
        shutil.rmtree(image, ignore_errors=True)


def check(seed: int, lazy: bool, image: Path, m: Model, ops: int, crashed_at: int) -> Result:
    problems = list(m.violations)
    cat = DiskCatalog(image)
    recs = cat.load()
    res = Result(seed, lazy, crashed_at, ops, len(m.acked), 0, 0, 0, 0, problems)
    if not m.created:
        if m.acked:
            problems.append("acked before the stream existed")
        for r in recs:
            r.store.stop()
        return res
    if len(recs) != 1 or recs[0].name != STREAM:
        problems.append(f"stream not found after crash: {[r.name for r in recs]}")
        return res
    rec = recs[0]
    store = rec.store
    try:
        if rec.meta not in m.metas[max(m.meta_durable, 0) :]:
            problems.append(f"stream meta {rec.meta!r} is not the last durable one or later")
        st = store.state()
        present: dict[int, tuple[str, bytes | None, bytes]] = {}
        for seq in range(max(st.first_seq, 1), st.last_seq + 1):
            msg = store.load_msg(seq)
            if msg is not None:
                present[seq] = (msg.subject, msg.hdr, msg.data)
        for seq, got in present.items():
            want = m.stored.get(seq)
            if m.in_truncate and got in m.ghosts.get(seq, []):
                continue  # the power went out inside truncate: it may not have finished
            if want is None:
                problems.append(f"seq {seq} present but never stored")
            elif got != want:
                problems.append(f"seq {seq} corrupt: {got[:2]} vs {want[:2]}")
        # (the power went out inside a truncate: it may have finished, giving back the
        # sequences above what it keeps)
        floor = min(m.max_durable_seq, m.truncate_keep) if m.in_truncate else m.max_durable_seq
        if st.last_seq < floor:
            problems.append(f"last_seq {st.last_seq} < durable {floor}: reuse")
        keep = [s for s in sorted(m.stored) if s not in m.removed_any]
        missing = [s for s in keep if s not in present]
        res.durable_lost = sum(1 for s in missing if s in m.durable)
        res.acked_lost = sum(1 for s in missing if s in m.acked)
        for s in m.removed_durable:
            if s in present:
                problems.append(f"seq {s} removed durably but back after the crash")
        if res.durable_lost:
            problems.append(f"{res.durable_lost} synced messages lost: {missing[:10]}")
        if not lazy and res.acked_lost:
            problems.append(f"{res.acked_lost} acked messages lost: {missing[:10]}")
        # Only a suffix may be missing: once one kept message is gone, all later ones are.
        if missing:
            first_missing = missing[0]
            holes = [s for s in keep if s > first_missing and s in present]
            res.holes = len(holes)
            res.suffix_lost = len(missing)
            if holes:
                problems.append(f"hole: seq {first_missing} missing but {holes[:5]} present")
        if st.lost is not None and (st.lost.msgs or st.lost.bytes) and not lazy:
            problems.append(f"recovery reports lost data after a power loss: {st.lost}")
        if lazy and res.acked_lost:
            report = getattr(store, "recovery_report", [])
            if not any(r.startswith("unclean shutdown") or "lost" in r for r in report):
                problems.append("acked messages missing but recovery reported nothing")
        # Consumer: the durably saved state or a later one.
        if m.consumer_created:
            cons = {c.name: c for c in rec.consumers}
            c = cons.get(CONSUMER)
            if c is None:
                problems.append("consumer lost")
            elif c.state is None:
                if m.durable_state >= 0:
                    problems.append("durably saved consumer state lost")
            elif c.state not in m.states[max(m.durable_state, 0) :]:
                problems.append(f"consumer state {c.state!r} older than the durable save")
        # The store goes on: new sequences never reuse an acknowledged one.
        seq, _ = store.store_msg("after", None, b"after")
        if seq <= max(m.acked | {0}) and not lazy:
            problems.append(f"new message got seq {seq}, an acked sequence")
        store.flush()
        store.sync()
    except StoreError as e:
        problems.append(f"store error after recovery: {e}")
    finally:
        store.stop()
    return res


def _seeds() -> list[tuple[int, bool]]:
    out = []
    for i in range(CASES):
        lazy = (i % 10) < LAZY_SHARE * 10
        out.append((7_000_000 + i, lazy))
    return out


@contextlib.contextmanager
def scratch(fallback: Path | None = None) -> Iterator[Path]:
    """A scratch directory, in RAM when there is a tmpfs: the crash images are reopened with
    the real file layer, whose fsyncs would otherwise dominate the run time."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        d = tempfile.mkdtemp(prefix="natsd-powerloss-", dir=shm)
        try:
            yield Path(d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    elif fallback is not None:
        yield fallback
    else:
        with tempfile.TemporaryDirectory() as d:
            yield Path(d)


@pytest.mark.parametrize("chunk", range((CASES + CHUNK - 1) // CHUNK))
def test_power_loss(chunk: int, tmp_path: Path) -> None:
    with scratch(tmp_path) as base:
        results = [
            run_case(seed, lazy, base)
            for seed, lazy in _seeds()[chunk * CHUNK : (chunk + 1) * CHUNK]
        ]
    bad = [(r.seed, r.lazy, r.crashed_at, r.problems) for r in results if r.problems]
    assert not bad, bad[:5]
    assert sum(r.acked_lost for r in results if not r.lazy) == 0


def main() -> None:
    global CASES
    CASES = int(sys.argv[1]) if len(sys.argv) > 1 else CASES
    t0 = time.monotonic()
    with scratch() as d:
        results = [run_case(seed, lazy, d) for seed, lazy in _seeds()]
    dt = time.monotonic() - t0
    for lazy in (False, True):
        rs = [r for r in results if r.lazy == lazy]
        if not rs:
            continue
        name = "lazy sync_interval" if lazy else "default (fsync before ack)"
        print(
            f"{name}: {len(rs)} crashes ({sum(1 for r in rs if r.crashed_at)} mid-workload, "
            f"{sum(1 for r in rs if not r.crashed_at)} at the end), "
            f"{sum(r.acked for r in rs)} acked msgs, {sum(r.acked_lost for r in rs)} acked lost "
            f"(in {sum(1 for r in rs if r.acked_lost)} cases), "
            f"{sum(r.durable_lost for r in rs)} synced lost, {sum(r.holes for r in rs)} holes, "
            f"{sum(1 for r in rs if r.problems)} failing cases"
        )
        for r in rs:
            if r.problems:
                print("  seed", r.seed, r.problems[:3])
    print(f"{len(results)} cases in {dt:.1f}s")


if __name__ == "__main__":
    main()


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_power_loss_soak() -> None:
    """``make soak``: 5,000 more crashes (different seeds), same pass criteria."""
    bad = []
    with scratch() as base:
        for i in range(5_000):
            r = run_case(9_000_000 + i, i % 10 < 3, base)
            if r.problems:
                bad.append((r.seed, r.lazy, r.problems[:3]))
    assert not bad, bad[:5]
