"""etcd-io/raft v3.7.0 quorum/majority_test.go and quorum/quick_test.go."""

from __future__ import annotations

import random

import pytest
from test_quorum_scripts import alternative_majority_committed_index

from natsd.raft.quorum import (
    MAX_INDEX,
    JointConfig,
    MajorityConfig,
    MapAckIndexer,
    VoteLost,
    VotePending,
    VoteWon,
    index_str,
)

M3 = MajorityConfig([1, 2, 3])


HEADER = "       idx\n"


@pytest.mark.parametrize(
    ("indexer", "rows"),
    [
        # different commit index for each voter
        (
            {1: 101, 2: 102, 3: 103},
            [">      101    (id=1)", "x>     102    (id=2)", "xx>    103    (id=3)"],
        ),
        # same commit index for all voters
        (
            {1: 100, 2: 100, 3: 100},
            [">      100    (id=1)", ">      100    (id=2)", ">      100    (id=3)"],
        ),
        # same commit index for part of the voters
        (
            {1: 100, 2: 102, 3: 102},
            [">      100    (id=1)", "x>     102    (id=2)", "x>     102    (id=3)"],
        ),
        # missing some commit indexes
        (
            {1: 101, 3: 103},
            ["x>     101    (id=1)", "?        0    (id=2)", "xx>    103    (id=3)"],
        ),
    ],
)
def test_describe(indexer: dict[int, int], rows: list[str]) -> None:
    assert M3.describe(MapAckIndexer(indexer)) == HEADER + "".join(r + "\n" for r in rows)


def test_formatting() -> None:
    assert index_str(MAX_INDEX) == "∞"
    assert index_str(12) == "12"
    assert str(MajorityConfig([0x1F, 2])) == "(2 1f)"
    assert str(JointConfig(MajorityConfig([1, 2]), MajorityConfig())) == "(1 2)"
    assert str(JointConfig(MajorityConfig([1]), MajorityConfig([2, 3]))) == "(1)&&(2 3)"
    assert [str(v) for v in (VotePending, VoteLost, VoteWon)] == [
        "VotePending",
        "VoteLost",
        "VoteWon",
    ]
    assert MajorityConfig().describe(MapAckIndexer()) == "<empty majority quorum>"


def test_empty_configs() -> None:
    # The empty half of a joint quorum defers to the other half.
    assert MajorityConfig().committed_index(MapAckIndexer()) == MAX_INDEX
    assert MajorityConfig().vote_result({}) == VoteWon
    joint = JointConfig(MajorityConfig([1, 2, 3]), MajorityConfig())
    assert joint.committed_index(MapAckIndexer({1: 5, 2: 7})) == 5
    assert joint.vote_result({1: True}) == VotePending
    assert joint.vote_result({1: False, 2: False}) == VoteLost


def _small_rand_idx_map(rng: random.Random) -> dict[int, int]:
    """smallRandIdxMap: a reasonably sized map of ids to commit indexes."""
    size = 10
    n = rng.randrange(size)
    ids = rng.sample(range(2 * n), n)
    return {i: rng.randrange(n) for i in ids}


def test_quick_majority_commit() -> None:
    """TestQuick: CommittedIndex agrees with a "dumb" alternative, on seeded random inputs
    (Go runs 50000 with testing/quick; the generator is the same)."""
    rng = random.Random(17)
    for _ in range(20000):
        c = MajorityConfig(_small_rand_idx_map(rng))
        lookup = MapAckIndexer(_small_rand_idx_map(rng))
        assert c.committed_index(lookup) == alternative_majority_committed_index(c, lookup), (
            c,
            lookup.m,
        )
