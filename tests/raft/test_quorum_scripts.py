"""etcd-io/raft v3.7.0 quorum/datadriven_test.go: the quorum scripts, byte for byte.

The commands are ``committed`` (CommittedIndex) and ``vote`` (VoteResult). The configuration
is ``cfg`` (the majority config) and optionally ``cfgj`` (joint to the first; ``cfgj=zero``
makes a joint config with an empty second half); the inputs are ``idx`` (a committed index
per voter, in the order of (cfg, cfgj) without repetition, ``_`` for none) and ``votes``
(``y``, ``n`` or ``_``). The harness also checks results that must not change (swapping the
halves of a joint quorum, joining a majority with itself or with the empty one, lowering an
index that is already below the committed one) and prints any difference.
"""

from __future__ import annotations

from pathlib import Path

from datadriven import DataDrivenError, TestData, run_test

from natsd.raft.quorum import (
    MAX_INDEX,
    AckedIndexer,
    JointConfig,
    MajorityConfig,
    MapAckIndexer,
    index_str,
)

SCRIPT_SUBDIR = "quorum/testdata"


def alternative_majority_committed_index(c: MajorityConfig, lookup: AckedIndexer) -> int:
    """quick_test.go's alternativeMajorityCommittedIndex: a "dumb" CommittedIndex."""
    if len(c) == 0:
        return MAX_INDEX
    id_to_idx: dict[int, int] = {}
    for i in c:
        idx, ok = lookup.acked_index(i)
        if ok:
            id_to_idx[i] = idx
    # A map from index to voters who have acked that or any higher index.
    idx_to_votes = dict.fromkeys(id_to_idx.values(), 0)
    for idx in id_to_idx.values():
        for idy in idx_to_votes:
            if idy > idx:
                continue
            idx_to_votes[idy] += 1
    # The maximum index that has achieved quorum.
    q = len(c) // 2 + 1
    max_quorum_idx = 0
    for idx, n in idx_to_votes.items():
        if n >= q and idx > max_quorum_idx:
            max_quorum_idx = idx
    return max_quorum_idx


def _go_map_set(ids: set[int]) -> str:
    """fmt's %v of a map[uint64]struct{}: keys sorted."""
    return "map[" + " ".join(f"{i}:{{}}" for i in sorted(ids)) + "]"


def _make_lookuper(idxs: list[int], ids: list[int], idsj: list[int]) -> MapAckIndexer:
    m: dict[int, int] = {}
    p = 0  # next to consume from idxs
    for i in ids + idsj:
        if i in m:
            continue
        if p < len(idxs):
            # NB: this creates zero entries for placeholders that we remove later. The upshot
            # of doing it that way is to avoid having to specify placeholders multiple times
            # when omitting voters present in both halves of a joint config.
            m[i] = idxs[p]
            p += 1
    # Zero entries are created by _ placeholders; "no entry" is different from "zero entry".
    return MapAckIndexer({i: v for i, v in m.items() if v != 0})


def _overlay(c: MajorityConfig, lookup: AckedIndexer, voter: int, idx: int) -> MapAckIndexer:
    ll: dict[int, int] = {}
    for iid in c:
        if iid == voter:
            ll[iid] = idx
        else:
            v, ok = lookup.acked_index(iid)
            if ok:
                ll[iid] = v
    return MapAckIndexer(ll)


def handle(d: TestData) -> str:
    # Two majority configs. The first one is always used (though it may be empty) and the
    # second one is used iff joint is true.
    joint = False
    ids: list[int] = []
    idsj: list[int] = []
    idxs: list[int] = []
    # Votes: like idxs except the only values used are 1 (voted against) and 2 (voted for).
    votes: list[int] = []
    for arg in d.cmd_args:
        for i in range(len(arg.vals)):
            if arg.key == "cfg":
                ids.append(arg.scan_uint(i))
            elif arg.key == "cfgj":
                joint = True
                if arg.vals[i] == "zero":
                    if len(arg.vals) != 1:
                        raise d.fatal("cannot mix 'zero' into configuration")
                else:
                    idsj.append(arg.scan_uint(i))
            elif arg.key == "idx":
                n = 0
                # Register placeholders as zeroes.
                if arg.vals[i] != "_":
                    n = arg.scan_uint(i)
                    if n == 0:
                        # A restriction caused by the above special-casing for _.
                        raise d.fatal("cannot use 0 as idx")
                idxs.append(n)
            elif arg.key == "votes":
                s = arg.scan_str(i)
                if s == "y":
                    votes.append(2)
                elif s == "n":
                    votes.append(1)
                elif s == "_":
                    votes.append(0)
                else:
                    raise d.fatal(f"unknown vote: {s}")
            else:
                raise d.fatal(f"unknown arg {arg.key}")

    c = MajorityConfig(ids)
    cj = MajorityConfig(idsj)

    inp = votes if d.cmd == "vote" else idxs
    voters = JointConfig(c, cj).ids()
    if len(voters) != len(inp):
        return (
            f"error: mismatched input (explicit or _) for voters {_go_map_set(voters)}: "
            f"[{' '.join(index_str(v) for v in inp)}]"
        )

    buf: list[str] = []
    if d.cmd == "committed":
        lookup = _make_lookuper(idxs, ids, idsj)
        # Branch based on whether this is a majority or joint quorum test case.
        if not joint:
            idx = c.committed_index(lookup)
            buf.append(c.describe(lookup))
            # These alternative computations should return the same result. If not, print
            # to the output.
            a_idx = alternative_majority_committed_index(c, lookup)
            if a_idx != idx:
                buf.append(f"{index_str(a_idx)} <-- via alternative computation\n")
            # Joining a majority with the empty majority should give same result.
            a_idx = JointConfig(c, MajorityConfig()).committed_index(lookup)
            if a_idx != idx:
                buf.append(f"{index_str(a_idx)} <-- via zero-joint quorum\n")
            # Joining a majority with itself should give same result.
            a_idx = JointConfig(c, c).committed_index(lookup)
            if a_idx != idx:
                buf.append(f"{index_str(a_idx)} <-- via self-joint quorum\n")
            for voter in c:
                iidx, _ = lookup.acked_index(voter)
                if idx > iidx > 0:
                    # If the committed index was definitely above the currently inspected
                    # idx, the result shouldn't change if we lower it further.
                    lo = _overlay(c, lookup, voter, iidx - 1)
                    a_idx = c.committed_index(lo)
                    if a_idx != idx:
                        buf.append(f"{index_str(a_idx)} <-- overlaying {voter}->{iidx}")
                    lo = _overlay(c, lookup, voter, 0)
                    a_idx = c.committed_index(lo)
                    if a_idx != idx:
                        buf.append(f"{index_str(a_idx)} <-- overlaying {voter}->0")
            buf.append(f"{index_str(idx)}\n")
        else:
            cc = JointConfig(c, cj)
            buf.append(cc.describe(lookup))
            idx = cc.committed_index(lookup)
            # Interchanging the majorities shouldn't make a difference. If it does, print.
            a_idx = JointConfig(cj, c).committed_index(lookup)
            if a_idx != idx:
                buf.append(f"{index_str(a_idx)} <-- via symmetry\n")
            buf.append(f"{index_str(idx)}\n")
    elif d.cmd == "vote":
        ll = _make_lookuper(votes, ids, idsj)
        vl = {i: v != 1 for i, v in ll.m.items()}  # NB: 1 == false, 2 == true
        if not joint:
            # Test a majority quorum.
            buf.append(f"{c.vote_result(vl)}\n")
        else:
            # Run a joint quorum test case.
            r = JointConfig(c, cj).vote_result(vl)
            # Interchanging the majorities shouldn't make a difference. If it does, print.
            ar = JointConfig(cj, c).vote_result(vl)
            if ar != r:
                buf.append(f"{ar} <-- via symmetry\n")
            buf.append(f"{r}\n")
    else:
        raise DataDrivenError(f"unknown command: {d.cmd}")
    return "".join(buf)


def test_quorum_script(script: Path) -> None:
    assert run_test(script, handle) > 0
