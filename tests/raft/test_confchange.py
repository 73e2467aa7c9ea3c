"""etcd-io/raft v3.7.0 confchange/quick_test.go and confchange/restore_test.go, as seeded
property tests (Go's testing/quick draws from the same generators)."""

from __future__ import annotations

import random

import pytest

from natsd.raft.confchange import Changer, ConfChangeError, describe, restore
from natsd.raft.tracker import Config, Progress, ProgressTracker
from natsd.raft.types import (
    ConfChangeAddLearnerNode,
    ConfChangeAddNode,
    ConfChangeRemoveNode,
    ConfChangeSingle,
    ConfChangeType,
    ConfState,
    conf_changes_from_string,
)


def _run_with_simple(c: Changer, ccs: list[ConfChangeSingle]) -> None:
    for cc in ccs:
        c.tracker.config, c.tracker.progress = c.simple([cc])


def _run_with_joint(c: Changer, ccs: list[ConfChangeSingle]) -> None:
    cfg, trk = c.enter_joint(False, ccs)
    # Also do this with autoLeave on, just to check that we'd get the same result.
    cfg2a, trk2a = c.enter_joint(True, ccs)
    cfg2a.auto_leave = False
    assert cfg == cfg2a
    assert trk == trk2a
    c.tracker.config, c.tracker.progress = cfg, trk
    cfg2b, trk2b = c.leave_joint()
    # Reset back to the main branch with autoLeave=false.
    c.tracker.config, c.tracker.progress = cfg, trk
    cfg, trk = c.leave_joint()
    assert cfg == cfg2b
    assert trk == trk2b
    c.tracker.config, c.tracker.progress = cfg, trk


def _gen_changes(rng: random.Random) -> list[ConfChangeSingle]:
    """confChanges.Generate. NodeId one is never touched (ids are 2..10), to avoid voterless
    configs."""
    out = []
    for _ in range(1 + rng.randrange(9)):
        node = 1 + (1 + rng.randrange(9))
        out.append(ConfChangeSingle(ConfChangeType(rng.randrange(4)), node))
    return out


def _gen_initial(rng: random.Random) -> list[ConfChangeSingle]:
    """initialChanges.Generate: node one is in the initial config and always a voter."""
    out = [ConfChangeSingle(ConfChangeAddNode, 1)]
    for _ in range(1 + rng.randrange(5)):
        out.append(ConfChangeSingle(ConfChangeAddNode, 1 + rng.randrange(5)))
    return out


def _changer_after(
    setup: list[ConfChangeSingle], ccs: list[ConfChangeSingle], joint: bool
) -> Changer:
    c = Changer(ProgressTracker(10, 0), 10)
    _run_with_simple(c, setup)
    if joint:
        _run_with_joint(c, ccs)
    else:
        _run_with_simple(c, ccs)
    return c


def test_conf_change_quick() -> None:
    """Simple and joint config changes arrive at the same result."""
    rng = random.Random(17)
    for _ in range(1000):
        setup, ccs = _gen_initial(rng), _gen_changes(rng)
        c1 = _changer_after(setup, ccs, joint=False)
        c2 = _changer_after(setup, ccs, joint=True)
        why = f"setup: {describe(setup)}\nccs: {describe(ccs)}"
        assert c1.tracker.config == c2.tracker.config, why
        assert c1.tracker.progress == c2.tracker.progress, why
        assert c1.last_index == c2.last_index


def test_describe() -> None:
    ccs = conf_changes_from_string("v1 l2 r3 u4")
    assert describe(ccs) == (
        "ConfChangeAddNode(1) ConfChangeAddLearnerNode(2) ConfChangeRemoveNode(3) "
        "ConfChangeUpdateNode(4)"
    )


def _rnd_conf_state(rng: random.Random) -> ConfState:
    """rndConfChange.Generate: a random (valid, never empty) ConfState."""
    cs = ConfState()
    n_voters = 1 + rng.randrange(5)
    n_learners = rng.randrange(5)
    # The number of voters that are in the outgoing config but not in the incoming one.
    n_removed_voters = rng.randrange(3)
    # Voters, learners, and removed voters must not overlap.
    total = 2 * (n_voters + n_learners + n_removed_voters)
    ids = [i + 1 for i in rng.sample(range(total), total)]
    cs.voters = ids[:n_voters]
    ids = ids[n_voters:]
    if n_learners > 0:
        cs.learners = ids[:n_learners]
        ids = ids[n_learners:]
    # Roll the dice on how many of the incoming voters were also previously voters.
    n_outgoing_retained = rng.randrange(n_voters + 1)
    if n_outgoing_retained > 0 or n_removed_voters > 0:
        cs.voters_outgoing = cs.voters[:n_outgoing_retained] + ids[:n_removed_voters]
    # Only outgoing voters that are not also incoming voters can be in LearnersNext (they
    # represent demotions).
    if n_removed_voters > 0:
        n_learners_next = rng.randrange(n_removed_voters + 1)
        if n_learners_next > 0:
            cs.learners_next = ids[:n_learners_next]
    cs.auto_leave = len(cs.voters_outgoing) > 0 and rng.randrange(2) == 1
    return cs


def _restore_round_trip(cs: ConfState) -> None:
    chg = Changer(ProgressTracker(20, 0), 10)
    cfg, trk = restore(chg, cs)
    chg.tracker.config, chg.tracker.progress = cfg, trk
    want = ConfState(
        sorted(cs.voters),
        sorted(cs.learners),
        sorted(cs.voters_outgoing),
        sorted(cs.learners_next),
        cs.auto_leave,
    )
    cs2 = chg.tracker.conf_state()
    assert want == cs2
    assert cs.equivalent(cs2) is None
    assert cs2.equivalent(cs) is None


@pytest.mark.parametrize(
    "cs",
    [
        ConfState(),
        ConfState(voters=[1, 2, 3]),
        ConfState(voters=[1, 2, 3], learners=[4, 5, 6]),
        ConfState(voters=[1, 2, 3], learners=[5], voters_outgoing=[1, 2, 4, 6], learners_next=[4]),
    ],
)
def test_restore_unit(cs: ConfState) -> None:
    _restore_round_trip(cs)


def test_restore_quick() -> None:
    rng = random.Random(17)
    for _ in range(1000):
        _restore_round_trip(_rnd_conf_state(rng))


def test_restore_leaves_the_callers_tracker_alone() -> None:
    trk = ProgressTracker(20, 0)
    cfg, prs = restore(Changer(trk, 10), ConfState(voters=[1, 2], voters_outgoing=[2, 3]))
    assert str(cfg) == "voters=(1 2)&&(2 3)"
    assert sorted(prs) == [1, 2, 3]
    assert trk.config == Config() and trk.progress == {}


def test_errors_leave_the_tracker_unchanged() -> None:
    c = Changer(ProgressTracker(10, 0), 1)
    with pytest.raises(ConfChangeError, match="removed all voters"):
        c.simple([ConfChangeSingle(ConfChangeAddLearnerNode, 1)])
    with pytest.raises(ConfChangeError, match="can't make a zero-voter config joint"):
        c.enter_joint(False, [])
    c.tracker.config, c.tracker.progress = c.simple([ConfChangeSingle(ConfChangeAddNode, 1)])
    before = (str(c.tracker.config), dict(c.tracker.progress))
    with pytest.raises(ConfChangeError, match="more than one voter changed"):
        c.simple(conf_changes_from_string("v2 v3"))
    with pytest.raises(ConfChangeError, match="can't leave a non-joint config"):
        c.leave_joint()
    with pytest.raises(ConfChangeError, match="removed all voters"):
        c.enter_joint(True, [ConfChangeSingle(ConfChangeRemoveNode, 1)])
    assert (str(c.tracker.config), dict(c.tracker.progress)) == before


def test_check_invariants_catch_a_broken_config() -> None:
    trk = ProgressTracker(10, 0)
    trk.config.voters.incoming.add(1)
    with pytest.raises(ConfChangeError, match="no progress for 1"):
        Changer(trk, 1).simple([])
    trk.progress[1] = Progress(next=1)
    trk.config.learners = {1}
    with pytest.raises(ConfChangeError, match="1 is in Learners and Voters\\[0\\]"):
        Changer(trk, 1).simple([])
