"""Ports etcd-io/raft v3.7.0 raft_test.go (Apache-2.0), fifth part: leadership transfer
(to up-to-date and slow followers, after a snapshot, to self and non-members, time outs,
proposals dropped meanwhile, higher-term votes, removed and demoted transferees, second
transfers) and MsgTimeoutNow to a non-member."""

from __future__ import annotations

import pytest
from raft_harness import (
    Network,
    new_network,
    new_test_memory_storage,
    new_test_raft,
    next_ents,
    raft_of,
    set_randomized_election_timeout,
    with_peers,
)

from natsd.raft.core import NONE, Raft, StateFollower, StateLeader, StateType
from natsd.raft.state import ErrProposalDropped
from natsd.raft.types import (
    ConfChange,
    ConfChangeAddLearnerNode,
    ConfChangeRemoveNode,
    ConfChangeSingle,
    ConfChangeV2,
    ConfState,
    Entry,
    Message,
    MessageType,
)

MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp
MsgTransferLeader = MessageType.MsgTransferLeader


def transfer(from_: int, to: int) -> Message:
    return Message(from_=from_, to=to, type=MsgTransferLeader)


def empty_prop() -> Message:
    return Message(from_=1, to=1, type=MsgProp, entries=[Entry()])


def check_leader_transfer_state(r: Raft, state: StateType, lead: int) -> None:
    assert r.state == state
    assert r.lead == lead
    assert r.lead_transferee == NONE


def _elected() -> tuple[Network, Raft]:
    nt = new_network(None, None, None)
    nt.send(Message(from_=1, to=1, type=MsgHup))
    return nt, raft_of(nt, 1)


def test_leader_transfer_to_up_to_date_node() -> None:
    nt, lead = _elected()
    assert lead.lead == 1
    # Transfer leadership to 2.
    nt.send(transfer(2, 1))
    check_leader_transfer_state(lead, StateFollower, 2)
    # After some log replication, transfer leadership back to 1.
    nt.send(empty_prop())
    nt.send(transfer(1, 2))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_to_up_to_date_node_from_follower() -> None:
    """The leader transfer works when the MsgTransferLeader is sent to a follower (which
    forwards it to the leader): the usual case of an application asking any node."""
    nt, lead = _elected()
    assert lead.lead == 1
    # Transfer leadership to 2.
    nt.send(transfer(2, 2))
    check_leader_transfer_state(lead, StateFollower, 2)
    # After some log replication, transfer leadership back to 1.
    nt.send(empty_prop())
    nt.send(transfer(1, 1))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_with_check_quorum() -> None:
    """The leader transfer works even when the transferee's lease has not expired
    (a transfer's vote request carries the CampaignTransfer context)."""
    nt = new_network(None, None, None)
    for i in range(1, 4):
        r = raft_of(nt, i)
        r.check_quorum = True
        set_randomized_election_timeout(r, r.election_timeout + i)
    # Letting peer 2 electionElapsed reach to timeout so that it can vote for peer 1
    f = raft_of(nt, 2)
    for _ in range(f.election_timeout):
        f.tick()
    nt.send(Message(from_=1, to=1, type=MsgHup))
    lead = raft_of(nt, 1)
    assert lead.state == StateLeader
    # Transfer leadership to 2.
    nt.send(transfer(2, 1))
    check_leader_transfer_state(lead, StateFollower, 2)
    # After some log replication, transfer leadership back to 1.
    nt.send(empty_prop())
    nt.send(transfer(1, 2))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_to_slow_follower() -> None:
    nt, lead = _elected()
    nt.isolate(3)
    nt.send(empty_prop())
    nt.recover()
    assert lead.trk.progress[3].match == 1
    # Transfer leadership to 3 when node 3 is lack of log.
    nt.send(transfer(3, 1))
    check_leader_transfer_state(lead, StateFollower, 3)


def test_leader_transfer_after_snapshot() -> None:
    nt, lead = _elected()
    nt.isolate(3)
    nt.send(empty_prop())
    next_ents(lead, nt.storage[1])
    nt.storage[1].create_snapshot(
        lead.raft_log.applied, ConfState(voters=lead.trk.voter_nodes()), b""
    )
    nt.storage[1].compact(lead.raft_log.applied)
    nt.recover()
    assert lead.trk.progress[3].match == 1
    filtered: list[Message] = []

    # Snapshot needs to be applied before sending MsgAppResp.
    def hook(m: Message) -> bool:
        if m.type != MessageType.MsgAppResp or m.from_ != 3 or m.reject:
            return True
        filtered.append(m)
        return False

    nt.msg_hook = hook
    # Transfer leadership to 3 when node 3 is lack of snapshot.
    nt.send(transfer(3, 1))
    assert lead.state == StateLeader
    assert filtered, "follower should report snapshot progress automatically"
    # Apply snapshot and resume progress.
    follower = raft_of(nt, 3)
    snap = follower.raft_log.next_unstable_snapshot()
    assert snap is not None
    nt.storage[3].apply_snapshot(snap)
    follower.applied_snap(snap)
    nt.msg_hook = None
    nt.send(filtered[0])
    check_leader_transfer_state(lead, StateFollower, 3)


def test_leader_transfer_to_self() -> None:
    nt, lead = _elected()
    # Transfer leadership to self, there will be noop.
    nt.send(transfer(1, 1))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_to_non_existing_node() -> None:
    nt, lead = _elected()
    # Transfer leadership to non-existing node, there will be noop.
    nt.send(transfer(4, 1))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_timeout() -> None:
    nt, lead = _elected()
    nt.isolate(3)
    # Transfer leadership to isolated node, wait for timeout.
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    for _ in range(lead.heartbeat_timeout):
        lead.tick()
    assert lead.lead_transferee == 3
    for _ in range(lead.election_timeout - lead.heartbeat_timeout):
        lead.tick()
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_ignore_proposal() -> None:
    s = new_test_memory_storage(with_peers(1, 2, 3))
    r = new_test_raft(1, 10, 1, s)
    nt = new_network(r, None, None)
    nt.send(Message(from_=1, to=1, type=MsgHup))
    nt.isolate(3)
    lead = raft_of(nt, 1)
    next_ents(r, s)  # handle empty entry
    # Transfer leadership to isolated node to let transfer pending, then send proposal.
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    nt.send(empty_prop())
    with pytest.raises(ErrProposalDropped):
        lead.step(empty_prop())
    assert lead.trk.progress[1].match == 1


def test_leader_transfer_receive_higher_term_vote() -> None:
    nt, lead = _elected()
    nt.isolate(3)
    # Transfer leadership to isolated node to let transfer pending.
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    nt.send(Message(from_=2, to=2, type=MsgHup, index=1, term=2))
    check_leader_transfer_state(lead, StateFollower, 2)


def test_leader_transfer_remove_node() -> None:
    nt, lead = _elected()
    nt.ignore(MessageType.MsgTimeoutNow)
    # The leadTransferee is removed when leadship transferring.
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    lead.apply_conf_change(ConfChange(node_id=3, type=ConfChangeRemoveNode).as_v2())
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_demote_node() -> None:
    nt, lead = _elected()
    nt.ignore(MessageType.MsgTimeoutNow)
    # The leadTransferee is demoted when leadship transferring.
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    lead.apply_conf_change(
        ConfChangeV2(
            changes=[
                ConfChangeSingle(type=ConfChangeRemoveNode, node_id=3),
                ConfChangeSingle(type=ConfChangeAddLearnerNode, node_id=3),
            ]
        )
    )
    # Make the Raft group commit the LeaveJoint entry.
    lead.apply_conf_change(ConfChangeV2())
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_back() -> None:
    """The transfer can be aborted by a transfer back to the current leader."""
    nt, lead = _elected()
    nt.isolate(3)
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    # Transfer leadership back to self.
    nt.send(transfer(1, 1))
    check_leader_transfer_state(lead, StateLeader, 1)


def test_leader_transfer_second_transfer_to_another_node() -> None:
    """A second transfer request to another node aborts the first one and starts the new
    one."""
    nt, lead = _elected()
    nt.isolate(3)
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    # Transfer leadership to another node.
    nt.send(transfer(2, 1))
    check_leader_transfer_state(lead, StateFollower, 2)


def test_leader_transfer_second_transfer_to_same_node() -> None:
    """A second transfer request to the same node does not extend the timeout of the
    ongoing one."""
    nt, lead = _elected()
    nt.isolate(3)
    nt.send(transfer(3, 1))
    assert lead.lead_transferee == 3
    for _ in range(lead.heartbeat_timeout):
        lead.tick()
    # Second transfer leadership request to the same node.
    nt.send(transfer(3, 1))
    for _ in range(lead.election_timeout - lead.heartbeat_timeout):
        lead.tick()
    check_leader_transfer_state(lead, StateLeader, 1)


def test_transfer_non_member() -> None:
    """A MsgTimeoutNow arriving at a node that is not a member of the group does not start
    an election that could win with the votes of members."""
    r = new_test_raft(1, 5, 1, new_test_memory_storage(with_peers(2, 3, 4)))
    r.step(Message(from_=2, to=1, type=MessageType.MsgTimeoutNow))
    r.step(Message(from_=2, to=1, type=MessageType.MsgVoteResp))
    r.step(Message(from_=3, to=1, type=MessageType.MsgVoteResp))
    assert r.state == StateFollower
