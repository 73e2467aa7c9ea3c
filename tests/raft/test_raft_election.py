"""Leader election, ported from etcd-io/raft v3.7.0 raft_test.go (Apache-2.0)."""

from __future__ import annotations

import pytest
from raft_harness import (
    NOP_STEPPER,
    BlackHole,
    ents_with_config,
    new_network_with_config,
    pre_vote_config,
    raft_of,
    voted_with_config,
)

from natsd.raft.core import (
    Config,
    Raft,
    StateCandidate,
    StateFollower,
    StateLeader,
    StatePreCandidate,
    StateType,
)
from natsd.raft.types import Message, MessageType


@pytest.mark.parametrize("pre_vote", [False, True])
def test_leader_election(pre_vote: bool) -> None:
    cfg = pre_vote_config if pre_vote else None
    cand_state = StatePreCandidate if pre_vote else StateCandidate
    cand_term = 0 if pre_vote else 1
    tests: list[tuple[list[Raft | BlackHole | None], StateType, int]] = [
        ([None, None, None], StateLeader, 1),
        ([None, None, NOP_STEPPER], StateLeader, 1),
        ([None, NOP_STEPPER, NOP_STEPPER], cand_state, cand_term),
        ([None, NOP_STEPPER, NOP_STEPPER, None], cand_state, cand_term),
        ([None, NOP_STEPPER, NOP_STEPPER, None, None], StateLeader, 1),
        # three logs further along than 0, but in the same term so rejections are returned
        # instead of the votes being ignored.
        (
            [
                None,
                ents_with_config(cfg, 1),
                ents_with_config(cfg, 1),
                ents_with_config(cfg, 1, 1),
                None,
            ],
            StateFollower,
            1,
        ),
    ]
    for i, (peers, state, exp_term) in enumerate(tests):
        nw = new_network_with_config(cfg, *peers)
        nw.send(Message(from_=1, to=1, type=MessageType.MsgHup))
        sm = raft_of(nw, 1)
        assert sm.state == state, f"#{i}"
        assert sm.term == exp_term, f"#{i}"


def test_leader_election_logs() -> None:
    """The log lines the interaction scripts print come out verbatim."""
    from entry_helpers import CaptureLogger

    lines = CaptureLogger()

    def cfg(c: Config) -> None:
        c.logger = lines

    nw = new_network_with_config(cfg, None, None, None)
    nw.send(Message(from_=1, to=1, type=MessageType.MsgHup))
    assert "INFO 1 became leader at term 1" in lines.lines
    assert "INFO 1 became candidate at term 1" in lines.lines
    assert "INFO 1 [logterm: 0, index: 0] sent MsgVote request to 2 at term 1" in lines.lines
    assert "INFO 1 has received 2 MsgVoteResp votes and 0 vote rejections" in lines.lines


def test_voted_with_config_keeps_vote() -> None:
    sm = voted_with_config(None, 3, 2)
    assert (sm.vote, sm.term, sm.state) == (3, 2, StateFollower)
