"""The test harness of upstream's raft_test.go (etcd-io/raft v3.7.0, Apache-2.0): test
configs and storages (newTestConfig, newTestMemoryStorage with withPeers / withLearners,
newTestRaft), the message plumbing on a raft (readMessages, advanceMessagesAfterAppend,
nextEnts) and the ``network`` of state machines with send / drop / cut / isolate / ignore /
recover. Shared by the raft, paper, snapshot and rawnode tests."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from natsd.raft.core import NO_LIMIT, Config, Raft, StateLeader, new_raft
from natsd.raft.log import RaftLog
from natsd.raft.rawnode import RawNode, new_raw_node
from natsd.raft.state import RaftError
from natsd.raft.storage import MemoryStorage, Storage
from natsd.raft.tracker import Progress, ProgressTracker
from natsd.raft.types import Entry, HardState, Message, MessageType

StorageOpt = Callable[[MemoryStorage], None]


def with_peers(*peers: int) -> StorageOpt:
    def opt(ms: MemoryStorage) -> None:
        ms.snap.metadata.conf_state.voters = list(peers)

    return opt


def with_learners(*learners: int) -> StorageOpt:
    def opt(ms: MemoryStorage) -> None:
        ms.snap.metadata.conf_state.learners = list(learners)

    return opt


def new_test_memory_storage(*opts: StorageOpt) -> MemoryStorage:
    ms = MemoryStorage()
    for o in opts:
        o(ms)
    return ms


def new_test_config(id: int, election: int, heartbeat: int, storage: Storage) -> Config:
    return Config(
        id=id,
        election_tick=election,
        heartbeat_tick=heartbeat,
        storage=storage,
        max_size_per_msg=NO_LIMIT,
        max_inflight_msgs=256,
    )


def new_test_raft(id: int, election: int, heartbeat: int, storage: Storage) -> Raft:
    return new_raft(new_test_config(id, election, heartbeat, storage))


def new_test_raw_node(id: int, election: int, heartbeat: int, storage: Storage) -> RawNode:
    return new_raw_node(new_test_config(id, election, heartbeat, storage))


def pre_vote_config(c: Config) -> None:
    c.pre_vote = True


def set_randomized_election_timeout(r: Raft, v: int) -> None:
    r.randomized_election_timeout = v


def take_messages_after_append(r: Raft) -> list[Message]:
    msgs = r.msgs_after_append
    r.msgs_after_append = []
    return msgs


def step_or_send(r: Raft, msgs: list[Message]) -> None:
    for m in msgs:
        if m.to == r.id:
            r.step(m)
        else:
            r.msgs.append(m)


def advance_messages_after_append(r: Raft) -> None:
    while True:
        msgs = take_messages_after_append(r)
        if not msgs:
            break
        step_or_send(r, msgs)


def read_messages(r: Raft) -> list[Message]:
    advance_messages_after_append(r)
    msgs = r.msgs
    r.msgs = []
    return msgs


def next_ents(r: Raft, s: MemoryStorage) -> list[Entry]:
    # Append unstable entries.
    s.append(r.raft_log.next_unstable_ents())
    r.raft_log.stable_to(r.raft_log.last_entry_id())
    # Run post-append steps.
    advance_messages_after_append(r)
    # Return committed entries.
    ents = r.raft_log.next_committed_ents(True)
    r.raft_log.applied_to(r.raft_log.committed, 0)
    return ents


def must_append_entry(r: Raft, *ents: Entry) -> None:
    if not r.append_entry(list(ents)):
        raise AssertionError("entry unexpectedly dropped")


def expect_one_message(r: Raft) -> Message:
    msgs = read_messages(r)
    assert len(msgs) == 1, f"expect one message, got {msgs}"
    return msgs[0]


def ents_with_config(config_func: Callable[[Config], None] | None, *terms: int) -> Raft:
    storage = MemoryStorage()
    for i, term in enumerate(terms):
        storage.append([Entry(index=i + 1, term=term)])
    cfg = new_test_config(1, 5, 1, storage)
    if config_func is not None:
        config_func(cfg)
    sm = new_raft(cfg)
    sm.reset(terms[-1])
    return sm


def voted_with_config(config_func: Callable[[Config], None] | None, vote: int, term: int) -> Raft:
    """A raft with Vote and Term set to the given value but no log entries (it voted in the
    given term but has not received any logs)."""
    storage = MemoryStorage()
    storage.set_hard_state(HardState(vote=vote, term=term))
    cfg = new_test_config(1, 5, 1, storage)
    if config_func is not None:
        config_func(cfg)
    sm = new_raft(cfg)
    sm.reset(term)
    return sm


def ids_by_size(size: int) -> list[int]:
    return [1 + i for i in range(size)]


class StateMachine(Protocol):
    def step(self, m: Message) -> None: ...


class BlackHole:
    """blackHole: a peer that drops everything (nopStepper)."""

    def step(self, m: Message) -> None:
        pass


NOP_STEPPER = BlackHole()


class Network:
    """network: peers connected by a lossy, filterable in-memory transport."""

    def __init__(
        self, config_func: Callable[[Config], None] | None, peers: list[Raft | BlackHole | None]
    ) -> None:
        """newNetworkWithConfig: a None peer becomes a new raft; a Raft gets its id and a
        tracker of all the peers (learners kept); the addresses are [1, n]."""
        size = len(peers)
        peer_addrs = ids_by_size(size)
        self.peers: dict[int, Raft | BlackHole] = {}
        self.storage: dict[int, MemoryStorage] = {}
        self.dropm: dict[tuple[int, int], float] = {}
        self.ignorem: set[MessageType] = set()
        # msg_hook is called for each message sent. It may inspect the message and return
        # true to send it or false to drop it.
        self.msg_hook: Callable[[Message], bool] | None = None
        self.rng = random.Random(0)
        for j, p in enumerate(peers):
            id = peer_addrs[j]
            if p is None:
                self.storage[id] = new_test_memory_storage(with_peers(*peer_addrs))
                cfg = new_test_config(id, 10, 1, self.storage[id])
                if config_func is not None:
                    config_func(cfg)
                self.peers[id] = new_raft(cfg)
            elif isinstance(p, Raft):
                learners = set(p.trk.config.learners or ())
                p.id = id
                p.trk = ProgressTracker(p.trk.max_inflight, p.trk.max_inflight_bytes)
                if learners:
                    p.trk.config.learners = set()
                for i in range(size):
                    pr = Progress()
                    if peer_addrs[i] in learners:
                        pr.is_learner = True
                        assert p.trk.config.learners is not None
                        p.trk.config.learners.add(peer_addrs[i])
                    else:
                        p.trk.config.voters.incoming.add(peer_addrs[i])
                    p.trk.progress[peer_addrs[i]] = pr
                p.reset(p.term)
                self.peers[id] = p
            else:
                self.peers[id] = p

    def send(self, *msgs: Message) -> None:
        queue = list(msgs)
        while queue:
            m = queue.pop(0)
            p = self.peers[m.to]
            if isinstance(p, Raft):
                try:
                    p.step(m)
                except RaftError:  # Go ignores Step's error here
                    pass
                advance_messages_after_append(p)
                queue.extend(self.filter(read_messages(p)))
            else:
                p.step(m)

    def drop(self, from_: int, to: int, perc: float) -> None:
        self.dropm[(from_, to)] = perc

    def cut(self, one: int, other: int) -> None:
        self.drop(one, other, 2.0)  # always drop
        self.drop(other, one, 2.0)  # always drop

    def isolate(self, id: int) -> None:
        for i in range(len(self.peers)):
            nid = i + 1
            if nid != id:
                self.drop(id, nid, 1.0)  # always drop
                self.drop(nid, id, 1.0)  # always drop

    def ignore(self, t: MessageType) -> None:
        self.ignorem.add(t)

    def recover(self) -> None:
        self.dropm = {}
        self.ignorem = set()

    def filter(self, msgs: list[Message]) -> list[Message]:
        mm: list[Message] = []
        for m in msgs:
            if m.type in self.ignorem:
                continue
            if m.type == MessageType.MsgHup:
                # hups never go over the network, so don't drop them but panic
                raise AssertionError("unexpected msgHup")
            perc = self.dropm.get((m.from_, m.to), 0.0)
            if self.rng.random() < perc:
                continue
            if self.msg_hook is not None and not self.msg_hook(m):
                continue
            mm.append(m)
        return mm


def new_network(*peers: Raft | BlackHole | None) -> Network:
    return Network(None, list(peers))


def new_network_with_config(
    config_func: Callable[[Config], None] | None, *peers: Raft | BlackHole | None
) -> Network:
    return Network(config_func, list(peers))


def raft_of(nw: Network, id: int) -> Raft:
    p = nw.peers[id]
    assert isinstance(p, Raft)
    return p


def ltoa(log: RaftLog) -> tuple[int, int, int, list[Entry]]:
    """diff_test.go's ltoa, as a comparable value: last index, applied, applying, entries."""
    return (log.last_index(), log.applied, log.applying, log.all_entries())


def sort_messages(msgs: list[Message]) -> list[Message]:
    """messageSlice's order: by to, then type, then from."""
    return sorted(msgs, key=lambda m: (m.to, int(m.type), m.from_))


def accept_and_reply(m: Message) -> Message:
    assert m.type == MessageType.MsgApp, "type should be MsgApp"
    return Message(
        from_=m.to,
        to=m.from_,
        term=m.term,
        type=MessageType.MsgAppResp,
        index=m.index + len(m.entries),
    )


def commit_noop_entry(r: Raft, s: MemoryStorage) -> None:
    assert r.state == StateLeader, "it should only be used when it is the leader"
    r.bcast_append()
    # simulate the response of MsgApp
    for m in read_messages(r):
        assert m.type == MessageType.MsgApp and len(m.entries) == 1 and m.entries[0].data == b"", (
            "not a message to append noop entry"
        )
        r.step(accept_and_reply(m))
    # ignore further messages to refresh followers' commit index
    read_messages(r)
    s.append(r.raft_log.next_unstable_ents())
    r.raft_log.applied_to(r.raft_log.committed, 0)
    r.raft_log.stable_to(r.raft_log.last_entry_id())
