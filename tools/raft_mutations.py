"""Issue 17's mutation check: plant each of five Raft bugs in turn in a checkout's
``src/natsd/raft``, run etcd's scripts, the simulator and the rest of ``tests/raft``, and
say which catch it. The source is restored after each plant.

    .venv/bin/python tools/raft_mutations.py /path/to/a/worktree   # exit 0: all caught

Run it on a worktree, not on the checkout being edited: a plant is in place while its
tests run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# (name, file under src/natsd/raft, the code as it is, the code with the bug)
PLANTS = [
    (
        "vote granted without the log check",
        "election.py",
        "    if can_vote and r.raft_log.is_up_to_date(cand_last_id):",
        "    if can_vote:",
    ),
    (
        "commit counted on an entry from a previous term",
        "core.py",
        "        return self.raft_log.maybe_commit(EntryID(self.term, self.trk.committed()))",
        "        idx = self.trk.committed()\n"
        "        term = self.raft_log.zero_term_on_out_of_bounds(idx)\n"
        "        return self.raft_log.maybe_commit(EntryID(term, idx))",
    ),
    (
        "a message sent before its entries are persisted",
        "core.py",
        "            self.msgs_after_append.append(m)\n        else:",
        "            self.msgs.append(m)\n        else:",
    ),
    (
        "no probe after a rejected append",
        "leader.py",
        "            if pr.state == StateReplicate:\n"
        "                pr.become_probe()\n"
        "            send_append(r, m.from_)",
        "            send_append(r, m.from_)",
    ),
    (
        "the PreVote term bump",
        "core.py",
        "            if m.type == MessageType.MsgPreVote:\n"
        "                # Never change our term in response to a PreVote\n"
        "                pass\n"
        "            elif",
        "            if False:\n                pass\n            elif",
    ),
]

TARGETS = [
    ("scripts", "tests/raft/test_interaction_scripts.py"),
    ("simulator", "tests/raft/test_raft_simulation.py"),
    ("unit tests", "tests/raft"),
]


def verdict(root: Path, label: str, target: str) -> str:
    cmd = [str(root / ".venv/bin/python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += [target, "-m", "not soak", "-x", "--timeout", "60"]
    env = {"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=1200)
    if not r.returncode:
        return f"{label}: pass"
    failed = re.findall(r"^FAILED (\S+)", r.stdout, re.M)
    what = failed[0].split("::")[-1][:60] if failed else f"rc={r.returncode}"
    return f"{label}: FAIL {what}"


def main() -> int:
    root = Path(sys.argv[1])
    ok = True
    for name, f, old, new in PLANTS:
        p = root / "src/natsd/raft" / f
        src = p.read_text()
        if src.count(old) != 1:
            print(f"!! {name}: pattern not found once in {f}")
            ok = False
            continue
        p.write_text(src.replace(old, new))
        try:
            verdicts = [verdict(root, label, target) for label, target in TARGETS]
        finally:
            p.write_text(src)
        caught = any("FAIL" in v for v in verdicts[:2])  # a script or the simulator
        ok &= caught
        print(f"{'caught' if caught else 'MISSED'}: {name}: " + "; ".join(verdicts), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
