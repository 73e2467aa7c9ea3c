"""Ports etcd-io/raft v3.7.0 raft_paper_test.go (Apache-2.0): the basic rules of the raft
paper (https://raft.github.io/raft.pdf), section 5, each test checking a few of its
sentences: init a raft, step it through the scenario, check its messages and state."""

from __future__ import annotations

import pytest
from entry_helpers import terms
from raft_harness import (
    NOP_STEPPER,
    accept_and_reply,
    advance_messages_after_append,
    commit_noop_entry,
    ids_by_size,
    ltoa,
    must_append_entry,
    new_network,
    new_test_memory_storage,
    new_test_raft,
    read_messages,
    sort_messages,
    with_peers,
)

from natsd.raft.core import (
    NONE,
    Raft,
    StateCandidate,
    StateFollower,
    StateLeader,
    StateType,
)
from natsd.raft.logger import DiscardLogger, reset_default_logger, set_logger
from natsd.raft.types import Entry, HardState, Message, MessageType

MsgApp = MessageType.MsgApp
MsgAppResp = MessageType.MsgAppResp
MsgHup = MessageType.MsgHup
MsgProp = MessageType.MsgProp
MsgVote = MessageType.MsgVote
MsgVoteResp = MessageType.MsgVoteResp
MsgHeartbeat = MessageType.MsgHeartbeat


def _raft3() -> Raft:
    return new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(1, 2, 3)))


@pytest.fixture
def discard_logs() -> object:
    set_logger(DiscardLogger())
    yield None
    reset_default_logger()


@pytest.mark.parametrize("state", [StateFollower, StateCandidate, StateLeader])
def test_update_term_from_message(state: StateType) -> None:
    """If one server's current term is smaller than the other's, then it updates its current
    term to the larger value. If a candidate or leader discovers that its term is out of
    date, it immediately reverts to follower state. (5.1)"""
    r = _raft3()
    if state == StateFollower:
        r.become_follower(1, 2)
    elif state == StateCandidate:
        r.become_candidate()
    else:
        r.become_candidate()
        r.become_leader()
    r.step(Message(type=MsgApp, term=2))
    assert r.term == 2
    assert r.state == StateFollower


def test_reject_stale_term_message() -> None:
    """If a server receives a request with a stale term number, it rejects the request. Our
    implementation ignores the request instead. (5.1)"""
    called = []

    def fake_step(_r: Raft, _m: Message) -> None:
        called.append(True)

    r = _raft3()
    r.step_func = fake_step
    r.load_state(HardState(term=2))
    r.step(Message(type=MsgApp, term=r.term - 1))
    assert not called


def test_start_as_follower() -> None:
    """When servers start up, they begin as followers. (5.2)"""
    assert _raft3().state == StateFollower


def test_leader_bcast_beat() -> None:
    """If the leader receives a heartbeat tick, it will send a MsgHeartbeat with m.Index = 0,
    m.LogTerm=0 and empty entries as heartbeat to all followers. (5.2)"""
    # heartbeat interval
    hi = 1
    r = new_test_raft(1, 10, hi, new_test_memory_storage(with_peers(1, 2, 3)))
    r.become_candidate()
    r.become_leader()
    for i in range(10):
        must_append_entry(r, Entry(index=i + 1))
    for _ in range(hi):
        r.tick()
    msgs = sort_messages(read_messages(r))
    assert msgs == [
        Message(from_=1, to=2, term=1, type=MsgHeartbeat, commit=0),
        Message(from_=1, to=3, term=1, type=MsgHeartbeat, commit=0),
    ]


@pytest.mark.parametrize("state", [StateFollower, StateCandidate])
def test_nonleader_start_election(state: StateType) -> None:
    """If a follower receives no communication over election timeout, it begins an election
    to choose a new leader. It increments its current term and transitions to candidate
    state. It then votes for itself and issues RequestVote RPCs in parallel to each of the
    other servers in the cluster. (5.2) Also if a candidate fails to obtain a majority, it
    will time out and start a new election by incrementing its term and initiating another
    round of RequestVote RPCs. (5.2)"""
    # election timeout
    et = 10
    r = new_test_raft(1, et, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    if state == StateFollower:
        r.become_follower(1, 2)
    else:
        r.become_candidate()
    for _ in range(1, 2 * et):
        r.tick()
    advance_messages_after_append(r)
    assert r.term == 2
    assert r.state == StateCandidate
    assert r.trk.votes[r.id]
    msgs = sort_messages(read_messages(r))
    assert msgs == [
        Message(from_=1, to=2, term=2, type=MsgVote, index=0, log_term=0),
        Message(from_=1, to=3, term=2, type=MsgVote, index=0, log_term=0),
    ]


@pytest.mark.parametrize(
    ("size", "votes", "state"),
    [
        # win the election when receiving votes from a majority of the servers
        (1, {}, StateLeader),
        (3, {2: True, 3: True}, StateLeader),
        (3, {2: True}, StateLeader),
        (5, {2: True, 3: True, 4: True, 5: True}, StateLeader),
        (5, {2: True, 3: True, 4: True}, StateLeader),
        (5, {2: True, 3: True}, StateLeader),
        # return to follower state if it receives vote denial from a majority
        (3, {2: False, 3: False}, StateFollower),
        (5, {2: False, 3: False, 4: False, 5: False}, StateFollower),
        (5, {2: True, 3: False, 4: False, 5: False}, StateFollower),
        # stay in candidate if it does not obtain the majority
        (3, {}, StateCandidate),
        (5, {2: True}, StateCandidate),
        (5, {2: False, 3: False}, StateCandidate),
        (5, {}, StateCandidate),
    ],
)
def test_leader_election_in_one_round_rpc(
    size: int, votes: dict[int, bool], state: StateType
) -> None:
    """A candidate wins an election if it receives votes from a majority of the servers in
    the full cluster for the same term, and returns to follower state on a majority of
    denials; otherwise it stays a candidate. (5.2)"""
    r = new_test_raft(1, 10, 1, new_test_memory_storage(with_peers(*ids_by_size(size))))
    r.step(Message(from_=1, to=1, type=MsgHup))
    advance_messages_after_append(r)
    for id, vote in votes.items():
        r.step(Message(from_=id, to=1, term=r.term, type=MsgVoteResp, reject=not vote))
    assert r.state == state
    assert r.term == 1


@pytest.mark.parametrize(
    ("vote", "nvote", "wreject"),
    [(NONE, 2, False), (NONE, 3, False), (2, 2, False), (3, 3, False), (2, 3, True), (3, 2, True)],
)
def test_follower_vote(vote: int, nvote: int, wreject: bool) -> None:
    """Each server will vote for at most one candidate in a given term, on a
    first-come-first-served basis. (5.2)"""
    r = _raft3()
    r.load_state(HardState(term=1, vote=vote))
    r.step(Message(from_=nvote, to=1, term=1, type=MsgVote))
    expected = Message(from_=1, to=nvote, term=1, type=MsgVoteResp, reject=wreject)
    assert r.msgs_after_append == [expected]


@pytest.mark.parametrize(
    "m",
    [Message(from_=2, to=1, term=1, type=MsgApp), Message(from_=2, to=1, term=2, type=MsgApp)],
)
def test_candidate_fallback(m: Message) -> None:
    """While waiting for votes, if a candidate receives an AppendEntries RPC from another
    server claiming to be leader whose term is at least as large as the candidate's current
    term, it recognizes the leader as legitimate and returns to follower state. (5.2)"""
    r = _raft3()
    r.step(Message(from_=1, to=1, type=MsgHup))
    assert r.state == StateCandidate
    r.step(m)
    assert r.state == StateFollower
    assert r.term == m.term


@pytest.mark.usefixtures("discard_logs")
@pytest.mark.parametrize("state", [StateFollower, StateCandidate])
def test_nonleader_election_timeout_randomized(state: StateType) -> None:
    """Election timeout for follower or candidate is randomized. (5.2)"""
    et = 10
    r = new_test_raft(1, et, 1, new_test_memory_storage(with_peers(1, 2, 3)))
    timeouts: set[int] = set()
    for _ in range(50 * et):
        if state == StateFollower:
            r.become_follower(r.term + 1, 2)
        else:
            r.become_candidate()
        time = 0
        while len(read_messages(r)) == 0:
            r.tick()
            time += 1
        timeouts.add(time)
    for d in range(et, 2 * et):
        assert d in timeouts, f"timeout in {d} ticks should happen"


@pytest.mark.usefixtures("discard_logs")
@pytest.mark.parametrize("state", [StateFollower, StateCandidate])
def test_nonleaders_election_timeout_nonconflict(state: StateType) -> None:
    """In most cases only a single server (follower or candidate) will time out, which
    reduces the likelihood of split vote in the new election. (5.2)"""
    et = 10
    size = 5
    ids = ids_by_size(size)
    rs = [new_test_raft(i, et, 1, new_test_memory_storage(with_peers(*ids))) for i in ids]
    conflicts = 0
    for _ in range(1000):
        for r in rs:
            if state == StateFollower:
                r.become_follower(r.term + 1, NONE)
            else:
                r.become_candidate()
        timeout_num = 0
        while timeout_num == 0:
            for r in rs:
                r.tick()
                if len(read_messages(r)) > 0:
                    timeout_num += 1
        # several rafts time out at the same tick
        if timeout_num > 1:
            conflicts += 1
    assert conflicts / 1000 <= 0.3


def test_leader_start_replication() -> None:
    """When the leader receives a client request, it appends the command to its log as a new
    entry, then issues AppendEntries RPCs in parallel to each of the other servers to
    replicate the entry. Also, when sending an AppendEntries RPC, the leader includes the
    index and term of the entry in its log that immediately precedes the new entries. (5.3)"""
    s = new_test_memory_storage(with_peers(1, 2, 3))
    r = new_test_raft(1, 10, 1, s)
    r.become_candidate()
    r.become_leader()
    commit_noop_entry(r, s)
    li = r.raft_log.last_index()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"some data")]))
    assert r.raft_log.last_index() == li + 1
    assert r.raft_log.committed == li
    msgs = sort_messages(read_messages(r))
    wents = [Entry(index=li + 1, term=1, data=b"some data")]
    assert msgs == [
        Message(from_=1, to=2, term=1, type=MsgApp, index=li, log_term=1, entries=wents, commit=li),
        Message(from_=1, to=3, term=1, type=MsgApp, index=li, log_term=1, entries=wents, commit=li),
    ]
    assert r.raft_log.next_unstable_ents() == wents


def test_leader_commit_entry() -> None:
    """When the entry has been safely replicated, the leader applies the entry to its state
    machine and returns the result; the leader keeps track of the highest index it knows to
    be committed and includes it in future AppendEntries RPCs. (5.3)"""
    s = new_test_memory_storage(with_peers(1, 2, 3))
    r = new_test_raft(1, 10, 1, s)
    r.become_candidate()
    r.become_leader()
    commit_noop_entry(r, s)
    li = r.raft_log.last_index()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"some data")]))
    for m in read_messages(r):
        r.step(accept_and_reply(m))
    assert r.raft_log.committed == li + 1
    assert r.raft_log.next_committed_ents(True) == [Entry(index=li + 1, term=1, data=b"some data")]
    msgs = sort_messages(read_messages(r))
    assert msgs
    for i, m in enumerate(msgs):
        assert m.to == i + 2
        assert m.type == MsgApp
        assert m.commit == li + 1


@pytest.mark.parametrize(
    ("size", "acceptors", "wack"),
    [
        (1, set(), True),
        (3, set(), False),
        (3, {2}, True),
        (3, {2, 3}, True),
        (5, set(), False),
        (5, {2}, False),
        (5, {2, 3}, True),
        (5, {2, 3, 4}, True),
        (5, {2, 3, 4, 5}, True),
    ],
)
def test_leader_acknowledge_commit(size: int, acceptors: set[int], wack: bool) -> None:
    """A log entry is committed once the leader that created the entry has replicated it on
    a majority of the servers. (5.3)"""
    s = new_test_memory_storage(with_peers(*ids_by_size(size)))
    r = new_test_raft(1, 10, 1, s)
    r.become_candidate()
    r.become_leader()
    commit_noop_entry(r, s)
    li = r.raft_log.last_index()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"some data")]))
    advance_messages_after_append(r)
    for m in list(r.msgs):
        if m.to in acceptors:
            r.step(accept_and_reply(m))
    assert (r.raft_log.committed > li) == wack


@pytest.mark.parametrize(
    "ents",
    [
        [],
        [Entry(term=2, index=1)],
        [Entry(term=1, index=1), Entry(term=2, index=2)],
        [Entry(term=1, index=1)],
    ],
)
def test_leader_commit_preceding_entries(ents: list[Entry]) -> None:
    """When leader commits a log entry, it also commits all preceding entries in the
    leader's log, including entries created by previous leaders. Also, it applies the entry
    to its local state machine (in log order). (5.3)"""
    storage = new_test_memory_storage(with_peers(1, 2, 3))
    storage.append(ents)
    r = new_test_raft(1, 10, 1, storage)
    r.load_state(HardState(term=2))
    r.become_candidate()
    r.become_leader()
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry(data=b"some data")]))
    for m in read_messages(r):
        r.step(accept_and_reply(m))
    li = len(ents)
    want = [*ents, Entry(term=3, index=li + 1), Entry(term=3, index=li + 2, data=b"some data")]
    assert r.raft_log.next_committed_ents(True) == want


@pytest.mark.parametrize(
    ("ents", "commit"),
    [
        ([Entry(term=1, index=1, data=b"some data")], 1),
        (
            [Entry(term=1, index=1, data=b"some data"), Entry(term=1, index=2, data=b"some data2")],
            2,
        ),
        (
            [Entry(term=1, index=1, data=b"some data2"), Entry(term=1, index=2, data=b"some data")],
            2,
        ),
        (
            [Entry(term=1, index=1, data=b"some data"), Entry(term=1, index=2, data=b"some data2")],
            1,
        ),
    ],
)
def test_follower_commit_entry(ents: list[Entry], commit: int) -> None:
    """Once a follower learns that a log entry is committed, it applies the entry to its
    local state machine (in log order). (5.3)"""
    r = _raft3()
    r.become_follower(1, 2)
    r.step(Message(from_=2, to=1, type=MsgApp, term=1, entries=list(ents), commit=commit))
    assert r.raft_log.committed == commit
    assert r.raft_log.next_committed_ents(True) == ents[:commit]


@pytest.mark.parametrize(
    ("term", "index", "windex", "wreject", "wreject_hint", "wlogterm"),
    [
        # match with committed entries
        (0, 0, 1, False, 0, 0),
        (1, 1, 1, False, 0, 0),
        # match with uncommitted entries
        (2, 2, 2, False, 0, 0),
        # unmatch with existing entry
        (1, 2, 2, True, 1, 1),
        # unexisting entry
        (3, 3, 3, True, 2, 2),
    ],
)
def test_follower_check_msg_app(
    term: int, index: int, windex: int, wreject: bool, wreject_hint: int, wlogterm: int
) -> None:
    """If the follower does not find an entry in its log with the same index and term as the
    one in AppendEntries RPC, then it refuses the new entries. Otherwise it replies that it
    accepts the append entries. (5.3)"""
    ents = [Entry(term=1, index=1), Entry(term=2, index=2)]
    storage = new_test_memory_storage(with_peers(1, 2, 3))
    storage.append(ents)
    r = new_test_raft(1, 10, 1, storage)
    r.load_state(HardState(commit=1))
    r.become_follower(2, 2)
    r.step(Message(from_=2, to=1, type=MsgApp, term=2, log_term=term, index=index))
    expected = Message(from_=1, to=2, type=MsgAppResp, term=2, index=windex)
    if wreject:
        expected.reject = True
        expected.reject_hint = wreject_hint
        expected.log_term = wlogterm
    assert read_messages(r) == [expected]


@pytest.mark.parametrize(
    ("index", "term", "ents", "wents", "wunstable"),
    [
        (2, 2, terms(3, 3), terms(1, 1, 2, 3), terms(3, 3)),
        (1, 1, terms(2, 3, 4), terms(1, 1, 3, 4), terms(2, 3, 4)),
        (0, 0, terms(1, 1), terms(1, 1, 2), []),
        (0, 0, terms(1, 3), terms(1, 3), terms(1, 3)),
    ],
)
def test_follower_append_entries(
    index: int, term: int, ents: list[Entry], wents: list[Entry], wunstable: list[Entry]
) -> None:
    """When AppendEntries RPC is valid, the follower will delete the existing conflict entry
    and all that follow it, and append any new entries not already in the log. Also, it
    writes the new entry into stable storage. (5.3)"""
    storage = new_test_memory_storage(with_peers(1, 2, 3))
    storage.append([Entry(term=1, index=1), Entry(term=2, index=2)])
    r = new_test_raft(1, 10, 1, storage)
    r.become_follower(2, 2)
    r.step(Message(from_=2, to=1, type=MsgApp, term=2, log_term=term, index=index, entries=ents))
    assert r.raft_log.all_entries() == wents
    assert r.raft_log.next_unstable_ents() == wunstable


@pytest.mark.parametrize(
    "follower_ents",
    [
        terms(0, 0, 1, 1, 1, 4, 4, 5, 5, 6, 6),
        terms(0, 0, 1, 1, 1, 4, 4),
        terms(0, 0, 1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6),
        terms(0, 0, 1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7),
        terms(0, 0, 1, 1, 1, 4, 4, 4, 4),
        terms(0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3),
    ],
)
def test_leader_sync_follower_log(follower_ents: list[Entry]) -> None:
    """The leader could bring a follower's log into consistency with its own. (5.3,
    figure 7)"""
    ents = terms(0, 0, 1, 1, 1, 4, 4, 5, 5, 6, 6, 6)
    term = 8
    lead_storage = new_test_memory_storage(with_peers(1, 2, 3))
    lead_storage.append(ents)
    lead = new_test_raft(1, 10, 1, lead_storage)
    lead.load_state(HardState(commit=lead.raft_log.last_index(), term=term))
    follower_storage = new_test_memory_storage(with_peers(1, 2, 3))
    follower_storage.append(follower_ents)
    follower = new_test_raft(2, 10, 1, follower_storage)
    follower.load_state(HardState(term=term - 1))
    # It is necessary to have a three-node cluster. The second may have more up-to-date log
    # than the first one, so the first node needs the vote from the third node to become
    # the leader.
    n = new_network(lead, follower, NOP_STEPPER)
    n.send(Message(from_=1, to=1, type=MsgHup))
    # The election occurs in the term after the one we loaded with lead.load_state above.
    n.send(Message(from_=3, to=1, type=MsgVoteResp, term=term + 1))
    n.send(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    assert ltoa(lead.raft_log) == ltoa(follower.raft_log)


@pytest.mark.parametrize(("ents", "wterm"), [(terms(1, 1), 2), (terms(1, 1, 2), 3)])
def test_vote_request(ents: list[Entry], wterm: int) -> None:
    """When a candidate issues RequestVote RPCs, it includes the index and term of the last
    entry in its log. (5.4.1)"""
    r = _raft3()
    r.step(Message(from_=2, to=1, type=MsgApp, term=wterm - 1, log_term=0, index=0, entries=ents))
    read_messages(r)
    for _ in range(1, r.election_timeout * 2):
        r.tick_election()
    msgs = sort_messages(read_messages(r))
    assert len(msgs) == 2
    for i, m in enumerate(msgs):
        assert m.type == MsgVote
        assert m.to == i + 2
        assert m.term == wterm
        assert m.index == ents[-1].index
        assert m.log_term == ents[-1].term


@pytest.mark.parametrize(
    ("ents", "logterm", "index", "wreject"),
    [
        # same logterm
        (terms(1, 1), 1, 1, False),
        (terms(1, 1), 1, 2, False),
        (terms(1, 1, 1), 1, 1, True),
        # candidate higher logterm
        (terms(1, 1), 2, 1, False),
        (terms(1, 1), 2, 2, False),
        (terms(1, 1, 1), 2, 1, False),
        # voter higher logterm
        (terms(1, 2), 1, 1, True),
        (terms(1, 2), 1, 2, True),
        (terms(1, 2, 2), 1, 1, True),
        (terms(1, 1, 1), 1, 1, True),
    ],
)
def test_voter(ents: list[Entry], logterm: int, index: int, wreject: bool) -> None:
    """The voter denies its vote if its own log is more up-to-date than that of the
    candidate. (5.4.1)"""
    storage = new_test_memory_storage(with_peers(1, 2))
    storage.append(ents)
    r = new_test_raft(1, 10, 1, storage)
    r.step(Message(from_=2, to=1, type=MsgVote, term=3, log_term=logterm, index=index))
    msgs = read_messages(r)
    assert len(msgs) == 1
    assert msgs[0].type == MsgVoteResp
    assert msgs[0].reject == wreject


@pytest.mark.parametrize(("index", "wcommit"), [(1, 0), (2, 0), (3, 3)])
def test_leader_only_commits_log_from_current_term(index: int, wcommit: int) -> None:
    """Only log entries from the leader's current term are committed by counting replicas;
    the entries of prior terms are committed indirectly. (5.4.2)"""
    ents = [Entry(term=1, index=1), Entry(term=2, index=2)]
    storage = new_test_memory_storage(with_peers(1, 2))
    storage.append(ents)
    r = new_test_raft(1, 10, 1, storage)
    r.load_state(HardState(term=2))
    # become leader at term 3
    r.become_candidate()
    r.become_leader()
    read_messages(r)
    # propose a entry to current term
    r.step(Message(from_=1, to=1, type=MsgProp, entries=[Entry()]))
    r.step(Message(from_=2, to=1, type=MsgAppResp, term=r.term, index=index))
    advance_messages_after_append(r)
    assert r.raft_log.committed == wcommit
