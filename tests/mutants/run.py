"""Mutation check of the fault suite: plant known bugs, one at a time, and prove the tests
catch every one (``make mutants``).

A fault suite that never fails proves nothing. This runner takes the table ``MUTANTS`` below:
each entry is one small textual edit of one source file (``old`` -> ``new``, ``old`` must
occur exactly once in that file) that plants a bug the suite exists to catch: a commit on a
minority, a WAL sync that does not sync, a PubAck before its entry commits, a follower that
ignores the consumer state it is sent, a leader lease that never expires, a catch-up that
drops a batch, a WAL whose directories a power loss can take, and a few more.

How a run goes:

1. **Baseline.** ``src/`` is copied to a temporary directory (without compiled extension
   modules and caches) and the kill suite runs against the copy, unmutated. It must pass:
   a failure there would be reported as a catch of every mutant, so the runner stops
   (exit 2) instead.
2. **Each mutant.** A fresh copy of ``src/`` gets the mutant's edit (the real sources are
   never touched) and the same kill suite runs against it with ``-x``: the first failing
   test stops the run and is the mutant's catcher. The mutated module is checked to be the
   one that loads (``natsd`` from the copy, the ``.py`` source: ``NATSD_PURE=1``, and the
   copy holds no extension module anyway).
3. ``caught N of M``; the exit status is 1 unless every mutant was caught.

The kill suite (``KILL_SUITE``) is one fixed list of pytest selections, the same for every
mutant, cheapest and deterministic first: the seeded in-process Raft/WAL power-loss
simulation and unit tests (seconds), then the deterministic cluster tier (``SIM_SCHEDULES``
seeds of tests/sim: whole servers on virtual time, a third of a second each), then
in-process cluster tests (a few seconds each), then one short real-process fault run with a
fixed seed. The tests run from this
repository's ``tests/`` with ``PYTHONPATH`` set to the copy's ``src``; the server processes
the fault run starts inherit it, so they run the mutant too. Every mutant of the table is
caught before the last tier today (the baseline runs it whole); the real-process run is the
net for a mutant the cheaper tiers miss (``lease-forever`` fails it too). A whole run takes
about two and a half minutes, most of it the baseline and the in-process catches.

A mutant whose ``old`` text is not found exactly once makes the runner fail before anything
runs: the code moved, and the table must follow it (``tests/mutants/test_table.py`` checks
this in the ordinary suite, in well under a second).

Usage (from the repository root)::

    python tests/mutants/run.py               # baseline, then every mutant
    python tests/mutants/run.py --list        # the table
    python tests/mutants/run.py -m wal-no-fsync -m lease-forever   # some mutants only
    python tests/mutants/run.py --no-baseline # skip step 1 (exploring; never in CI)
    python tests/mutants/run.py --show ID     # the mutant as a diff
    python tests/mutants/run.py --keep        # keep the copies and each run's pytest log

A missed mutant is a finding: the suite has a hole there. Add a focused test that catches
it (and, if it is cheap, to ``KILL_SUITE``) rather than weakening the mutant.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str  # relative to src/
    old: str
    new: str
    breaks: str  # the promise the edit breaks


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "quorum-of-one",
        "natsd/raft/quorum.py",
        "        return srt[n - (n // 2 + 1)]\n",
        "        return srt[n - 1]\n",
        "the commit index is the highest match of any voter (the leader's own): entries "
        "commit on a minority",
    ),
    Mutant(
        "wal-no-fsync",
        "natsd/storage/wal.py",
        "            self.io.fdatasync(self._fd)\n            self.dirty = False\n",
        "            self.dirty = False\n",
        "Wal.sync makes nothing durable: votes, terms and acknowledged entries are lost "
        "with the power",
    ),
    Mutant(
        "puback-at-propose",
        "natsd/jetstream/stream/stream.py",
        "        rep.clseq = seq\n        rep.inflight += 1\n        if msg_id:\n",
        "        rep.clseq = seq\n        rep.inflight += 1\n"
        "        if reply and not self.cfg.no_ack:\n"
        '            publish(self.sublist, reply, None, None, self._ack_head + b"%d}" % seq)\n'
        "        if msg_id:\n",
        "a replicated stream's leader sends the PubAck when it proposes the message, before "
        "the entry commits",
    ),
    Mutant(
        "passive-ignores-cstate",
        "natsd/jetstream/cluster/consumers.py",
        "            if c is not None and c.passive:\n"
        "                c.set_state(orjson.loads(state))\n",
        "            if c is not None and c.passive:\n                pass\n",
        "a follower's passive consumer does not take the replicated consumer state (CSTATE): "
        "a new leader delivers acknowledged messages again",
    ),
    Mutant(
        "lease-forever",
        "natsd/cluster/group.py",
        "    return majority(cs.voters) and majority(cs.voters_outgoing)\n",
        "    return True\n",
        "has_lease is always true: a leader cut off from its group (or resumed after "
        "SIGSTOP) goes on serving as leader",
    ),
    Mutant(
        "catchup-drops-a-batch",
        "natsd/jetstream/cluster/catchup.py",
        "                for m in p.msgs:\n",
        "                for m in p.msgs if p.a != t.have_last + 1 else ():\n",
        "a replica catching up from the leader's store drops the first batch of messages "
        "(and records the gap as deleted)",
    ),
    Mutant(
        "follower-forgets-msg-ids",
        "natsd/jetstream/stream/stream.py",
        "        if e.msg_id:\n            self._dedup[e.msg_id] = (e.seq, e.ts)\n",
        "        if e.msg_id and leading:\n            self._dedup[e.msg_id] = (e.seq, e.ts)\n",
        "a follower applying a MSG entry does not record its Nats-Msg-Id in the dedup "
        "window: once it leads, a retried publish is stored twice",
    ),
    Mutant(
        "commit-old-term",
        "natsd/raft/log.py",
        "        if at.term != 0 and at.index > self.committed and self.match_term(at):\n",
        "        if at.term != 0 and at.index > self.committed:\n",
        "a leader commits by counting replicas of an entry from an earlier term (Raft "
        "paper figure 8): a committed entry can be overwritten",
    ),
    Mutant(
        "wal-dir-not-durable",
        "natsd/storage/wal.py",
        "        io.makedirs_durable(directory)\n",
        # the code before the fix: only the innermost new directory made durable
        "        if io.makedirs(directory):\n"
        '            io.fsync_dir(os.path.dirname(directory.rstrip(os.sep)) or ".")\n',
        "the node WAL's new directories are not made durable in their parents: a power "
        "loss can take the whole log, acknowledged entries included (found by the "
        "deterministic tier, seed 51)",
    ),
    Mutant(
        "leader-loops-on-lost-log",
        "natsd/cluster/group.py",
        "                    self._lost_unsaid(name, g, m)\n",
        "                    pass\n",
        "a leader whose follower lost its log unawares sends it the same append again at "
        "once, for ever (found by the deterministic tier, seed 51)",
    ),
    Mutant(
        "replay-skips-side-effects",
        "natsd/jetstream/stream/stream.py",
        "            self._applied_again(e)\n",
        "",
        "a replayed entry whose message the store holds does not purge again what its "
        "schedule's firing purged: after a power loss a new leader fires that schedule "
        "again (found by the deterministic tier, seed 122 with message schedules)",
    ),
)

_REPLICATED = "tests/integration/test_js_replicated.py"
_CONSUMERS = "tests/integration/test_js_replicated_consumers.py"

# The kill suite: the same pytest selections, in this order, for the baseline and for every
# mutant (run with -x). Deterministic and cheap first, real processes last.
KILL_SUITE: tuple[tuple[str, str], ...] = (
    # deterministic, in-process: Raft conformance, the node log, catch-up, and the seeded
    # power-loss simulation of GroupHosts on a fault-injecting disk (seconds in all)
    ("deterministic", "tests/raft/test_quorum.py"),
    ("deterministic", "tests/raft/test_raft_paper.py"),
    ("deterministic", "tests/unit/test_group_host.py"),
    ("deterministic", "tests/unit/test_catchup.py"),
    ("deterministic", "tests/storage/test_group_power_loss.py::test_power_loss_seeds[0]"),
    ("deterministic", "tests/storage/test_wal.py"),
    # the deterministic cluster tier: whole servers on virtual time, SIM_SCHEDULES seeds
    # (tests/sim; about a third of a second each). Alone as the kill suite it catches seven
    # of the ten: not commit-old-term, nor the two that seed 51 found (wal-dir-not-durable
    # is caught by that seed's own test, not among these)
    ("simulated", "tests/sim/test_sim_cluster.py::test_schedule"),
    (
        "simulated",
        "tests/sim/test_sim_cluster.py::test_seed_122_fires_no_schedule_twice_after_a_power_loss",
    ),
    # in-process three-server clusters: a few seconds each
    (
        "in-process",
        f"{_REPLICATED}::test_a_leader_out_of_touch_with_its_group_stops_serving_within_its_lease",
    ),
    (
        "in-process",
        f"{_REPLICATED}::test_no_puback_before_a_majority_holds_the_message",
    ),
    (
        "in-process",
        f"{_CONSUMERS}::test_durable_consumer_on_every_replica_and_through_leader_loss",
    ),
    (
        "in-process",
        f"{_REPLICATED}::test_a_new_leader_knows_the_message_ids_it_applied_as_a_follower",
    ),
    # real processes: one fault cycle (a SIGSTOP'd leader) with the fixed seed
    # (faults.run.FIXED_SEED)
    ("real-process", "tests/faults/test_r3_faults.py::test_r3_leader_paused_with_its_answers_held"),
)

# Environment variables that would change what the kill suite runs (seeds, budgets) or which
# build it loads: the runner fixes them.
_CLEARED = (
    "NATSD_FAULT_SEED",
    "NATSD_FAULT_CYCLES",
    "NATSD_FAULT_EPOCH",
    "NATSD_PL_SEED",
    "NATSD_PL_CUTS",
    "NATSD_EXPECT_COMPILED",
    "NATSD_SIM_SCHEDULES",
    "PYTEST_ADDOPTS",
)
# How many seeds of the deterministic cluster tier each run of the kill suite takes.
SIM_SCHEDULES = 24
_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)")
RUN_TIMEOUT = 900.0  # one pytest run (pytest-timeout bounds each test well below this)


class TableError(Exception):
    """A mutant's ``old`` text is not found exactly once: the table must be updated."""


def mutated_text(m: Mutant, src: Path = SRC) -> str:
    """The mutant's file with its edit applied (TableError unless ``old`` occurs once)."""
    path = src / m.file
    if not path.is_file():
        raise TableError(f"{m.id}: {m.file} does not exist under {src}")
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise TableError(
            f"{m.id}: the text to replace occurs {n} times in {m.file} (must be exactly once:"
            f" the code moved, update tests/mutants/run.py):\n{m.old}"
        )
    return text.replace(m.old, m.new)


def check_table(mutants: tuple[Mutant, ...] = MUTANTS) -> None:
    """Every mutant applies (its ``old`` text once, and the edit changes something), ids
    are unique, and every selection of the kill suite names a test that exists."""
    ids = [m.id for m in mutants]
    if len(set(ids)) != len(ids):
        raise TableError(f"duplicate mutant ids: {ids}")
    for m in mutants:
        if mutated_text(m) == (SRC / m.file).read_text():
            raise TableError(f"{m.id}: the edit changes nothing")
    for _tier, sel in KILL_SUITE:
        path, _, test = sel.partition("::")
        if not (ROOT / path).is_file():
            raise TableError(f"kill suite: {path} does not exist")
        name = test.partition("[")[0]
        text = (ROOT / path).read_text()
        if name and not re.search(rf"^(async )?def {re.escape(name)}\(", text, re.M):
            raise TableError(f"kill suite: no test {name} in {path}")


def copy_src(dest: Path, mutant: Mutant | None, pristine: Path | None = None) -> Path:
    """``src/`` copied to ``dest/src`` (its sources only: no extension modules, so the
    mutated ``.py`` is what loads), with the mutant's edit. From ``pristine`` (an earlier
    unmutated copy) when given, with the bytecode the baseline compiled there: the edited
    file's new mtime and size invalidate its own."""
    out = dest / "src"
    if pristine is not None:
        shutil.copytree(pristine, out)
    else:
        shutil.copytree(
            SRC,
            out,
            ignore=shutil.ignore_patterns(
                "__pycache__", "*.so", "*.pyd", "*.pyc", "hotpath.sha256", "*.egg-info"
            ),
        )
    if mutant is not None:
        target = out / mutant.file
        target.write_text(mutated_text(mutant))
        for pyc in (target.parent / "__pycache__").glob(target.stem + ".*.pyc"):
            pyc.unlink()
    return out


def _env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["PYTHONPATH"] = str(src)
    env["NATSD_PURE"] = "1"
    env["NATSD_SIM_SCHEDULES"] = str(SIM_SCHEDULES)
    return env


def _module(rel: str) -> str:
    return rel.removesuffix(".py").replace("/", ".")


def check_loads(src: Path, mutant: Mutant | None) -> None:
    """natsd (and the mutated module) load from the copy, as Python source."""
    mod = _module(mutant.file) if mutant else "natsd"
    code = f"import importlib; print(importlib.import_module({mod!r}).__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(src),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    where = out.stdout.strip()
    if out.returncode != 0 or not where.startswith(str(src)) or not where.endswith(".py"):
        raise RuntimeError(f"{mod} does not load from the copy {src}: {where!r} {out.stderr}")


@dataclass
class Outcome:
    failed: str  # the first failing test ("" when all passed)
    seconds: float
    output: str
    status: int


def run_suite(src: Path, log: Path, stop_first: bool = True) -> Outcome:
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
    if stop_first:
        cmd.append("-x")
    cmd += [sel for _tier, sel in KILL_SUITE]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            env=_env(src),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        output, status = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        output = (out.decode(errors="replace") if isinstance(out, bytes) else out) + "\nTIMEOUT"
        status = -1
    seconds = time.monotonic() - t0
    log.write_text(output)
    if status in (3, 4, 5):
        # internal error, usage error (a selection not found), nothing collected
        raise RuntimeError(f"pytest could not run the kill suite (exit {status}):\n{output}")
    failed = ""
    if status != 0:
        for line in output.splitlines():
            m = _SUMMARY.match(line)
            if m:
                failed = m.group(2)
                break
        else:
            failed = "timeout" if status == -1 else f"(pytest exit {status}; see {log})"
    return Outcome(failed, seconds, output, status)


def tier_of(test: str) -> str:
    for tier, sel in KILL_SUITE:
        if test == sel or test.startswith(sel + "::") or test.startswith(sel + "["):
            return tier
    return "?"


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--mutant", action="append", default=[], help="run only this id")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--show", metavar="ID", help="print the mutant as a diff and exit")
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    ap.add_argument("--keep", action="store_true", help="keep the copies and logs")
    args = ap.parse_args(argv)

    try:
        check_table()
    except TableError as e:
        print(f"mutants: {e}", file=sys.stderr)
        return 2
    if args.list:
        for m in MUTANTS:
            print(f"{m.id:24} {m.file:40} {m.breaks}")
        return 0
    if args.show:
        (m,) = [m for m in MUTANTS if m.id == args.show] or [None]
        if m is None:
            print(f"no mutant {args.show}", file=sys.stderr)
            return 2
        old = (SRC / m.file).read_text().splitlines(keepends=True)
        new = mutated_text(m).splitlines(keepends=True)
        sys.stdout.writelines(difflib.unified_diff(old, new, f"a/src/{m.file}", f"b/src/{m.file}"))
        return 0
    chosen = [m for m in MUTANTS if not args.mutant or m.id in args.mutant]
    unknown = set(args.mutant) - {m.id for m in MUTANTS}
    if unknown:
        print(f"no such mutants: {sorted(unknown)}", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="natsd-mutants-"))
    t_start = time.monotonic()
    print(f"mutants: kill suite of {len(KILL_SUITE)} selections, {len(chosen)} mutants", flush=True)
    try:
        pristine = copy_src(work / "pristine", None)
        if not args.no_baseline:
            src = pristine
            check_loads(src, None)
            base = run_suite(src, work / "baseline.log", stop_first=True)
            if base.status != 0:
                print(_tail(base.output, 60))
                print(
                    f"mutants: the UNMUTATED code fails the kill suite ({base.failed}, "
                    f"{base.seconds:.0f}s): no mutant can be judged",
                    flush=True,
                )
                return 2
            print(f"  baseline                 passes          {base.seconds:6.1f}s", flush=True)
        caught = 0
        rows = []
        for m in chosen:
            src = copy_src(work / m.id, m, pristine)
            check_loads(src, m)
            out = run_suite(src, work / f"{m.id}.log")
            ok = bool(out.failed)
            caught += ok
            what = f"caught by {out.failed} [{tier_of(out.failed)}]" if ok else "MISSED"
            print(f"  {m.id:24} {what}  {out.seconds:6.1f}s", flush=True)
            rows.append((m, out))
            if not args.keep:
                shutil.rmtree(work / m.id, ignore_errors=True)
        total = time.monotonic() - t_start
        missed = [m for m, out in rows if not out.failed]
        for m in missed:
            print(f"\nMISSED {m.id} ({m.file}): {m.breaks}")
        print(f"\ncaught {caught} of {len(chosen)} ({total:.0f}s)", flush=True)
        return 0 if caught == len(chosen) else 1
    finally:
        if args.keep:
            print(f"mutants: copies and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
