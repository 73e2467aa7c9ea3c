"""GroupHost (cluster/group.py): Raft groups over the node WAL, three nodes in one process on
a hand-driven network (frames queued per peer, delivered between turns, ticks by hand).

Checked: a group elects a leader and every node applies the same entries in order; several
groups on a node share one WAL sync per turn and one frame per peer per turn (plus one for
the requests a leader sends while its WAL syncs); no append or vote response leaves a node
before the WAL holds what it promises; a node restarted from its WAL (crash: the RawNode
and memory are thrown away) rejoins and catches up without re-applying what it had; compaction
frees WAL segments and a lagging node is brought back by snapshot; bad frames are refused;
the leader's lease counts an answer from the send time it carries back, not from its arrival
(answers held back past the lease, as a paused leader reads them, are stale), and a forged
time or a garbled one counts for nothing.
"""

from __future__ import annotations

import random
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from natsd.cluster.frames import (
    FRAME_TARGET,
    FRAME_VERSION,
    SENT,
    FrameError,
    decode_frame,
    frame_part,
    sent_context,
)
from natsd.cluster.group import (
    GroupHost,
    _contiguous,
    has_lease,
    raft_id,
)
from natsd.raft.state import StateType
from natsd.raft.types import Entry, Message, MessageType
from natsd.storage.wal import Wal

NAMES = ("n1", "n2", "n3")
PROMISES = {MessageType.MsgAppResp, MessageType.MsgVoteResp, MessageType.MsgPreVoteResp}
# every Net a test made, its WALs closed after the test (each WAL holds file descriptors)
_NETS: list[Net] = []


@pytest.fixture(autouse=True)
def _close_wals() -> Iterator[None]:
    yield
    for net in _NETS:
        for h in net.hosts.values():
            h.wal.close()
    _NETS.clear()


class Net:
    def __init__(self, tmp: Path, segment_size: int = 1 << 20, now: float | None = None) -> None:
        self.tmp = tmp
        # virtual seconds: every host's clock (None: the real monotonic clock)
        self.now = now
        self.segment_size = segment_size
        self.ids = {n: raft_id(n) for n in NAMES}
        self.by_id = {v: k for k, v in self.ids.items()}
        self.queue: list[tuple[str, bytes]] = []
        self.down: set[str] = set()
        # nodes whose frames are held back (in ``held``, in order) rather than delivered
        self.holding: set[str] = set()
        self.held: list[tuple[str, bytes]] = []
        self.hosts: dict[str, GroupHost] = {}
        self.applied: dict[str, dict[bytes, list[tuple[int, bytes]]]] = {n: {} for n in NAMES}
        self.frames_per_turn: list[int] = []
        self.early = 0  # frames sent before their node's WAL sync
        _NETS.append(self)
        for n in NAMES:
            self.start(n)

    def start(self, name: str) -> GroupHost:
        wal = Wal.open(str(self.tmp / name), segment_size=self.segment_size)

        def send(peer: int, frame: bytes, src: str = name) -> None:
            host = self.hosts[src]
            # the durability rule: what a message promises is on disk before it leaves
            # (append and vote responses); requests may go out before (etcd's msgs), and
            # so may anything while the WAL holds nothing but a new commit index (etcd's
            # MustSync: a response then speaks of entries an earlier turn synced)
            if (host.wal.dirty or host.wal._buf) and host.needs_sync:
                promises = [m.type for _, m in decode_frame(frame) if m.type in PROMISES]
                assert not promises, f"{promises} sent before the WAL sync"
                self.early += 1
            if peer in self.by_id:  # (to a node id no server has: lost, as on routes)
                self.queue.append((self.by_id[peer], frame))

        kw = {} if self.now is None else {"clock": self.clock}
        h = GroupHost(self.ids[name], wal, send, rand=random.Random(name).randrange, **kw)
        self.hosts[name] = h
        self.down.discard(name)
        return h

    def clock(self) -> float:
        assert self.now is not None
        return self.now

    def crash(self, name: str) -> None:
        """Power stays on but the process dies: unsynced WAL writes would be lost (there
        are none between turns), the RawNodes and memory are."""
        self.hosts[name].wal.close()
        del self.hosts[name]
        self.down.add(name)

    def collector(self, node: str, group: bytes):  # type: ignore[no-untyped-def]
        box = self.applied[node].setdefault(group, [])

        def apply(index: int, data: bytes) -> None:
            box.append((index, data))

        return apply

    def create(self, group: bytes) -> None:
        voters = sorted(self.ids.values())
        for n, h in self.hosts.items():
            h.create(group, voters, self.collector(n, group))

    def step(self, ticks: int = 0) -> None:
        for _ in range(ticks):
            for h in self.hosts.values():
                h.tick()
        before = sum(h.frames_sent for h in self.hosts.values())
        for h in list(self.hosts.values()):
            h.turn()
        self.frames_per_turn.append(sum(h.frames_sent for h in self.hosts.values()) - before)
        q, self.queue = self.queue, []
        for dest, frame in q:
            if dest in self.holding:
                self.held.append((dest, frame))
            elif dest in self.hosts:
                self.hosts[dest].receive(frame)

    def settle(self, rounds: int = 200, ticks: int = 0) -> None:
        for _ in range(rounds):
            self.step(ticks)
            if not self.queue and not any(
                g.node.has_ready() for h in self.hosts.values() for g in h.groups.values()
            ):
                return

    def led_with(self, group: bytes, datas: list[bytes]) -> tuple[str, str]:
        """A new group whose elected leader proposed ``datas``, settled: (leader, a
        follower)."""
        self.create(group)
        lead = self.leader(group)
        for d in datas:
            self.hosts[lead].propose(group, d)
        self.settle()
        return lead, next(n for n in NAMES if n != lead)

    def leader(self, group: bytes) -> str:
        for _ in range(200):
            self.step(ticks=1)
            leads = {h.groups[group].leader for h in self.hosts.values()}
            if len(leads) == 1 and 0 not in leads:
                return self.by_id[leads.pop()]
        raise AssertionError(f"no leader for {group!r}")


def test_a_group_elects_and_every_node_applies_the_same(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    for i in range(50):
        net.hosts[lead].propose(b"G", b"m%d" % i)
    net.settle()
    want = [b"m%d" % i for i in range(50)]
    for n in NAMES:
        assert [d for _, d in net.applied[n][b"G"]] == want, n
    idx = [i for i, _ in net.applied["n1"][b"G"]]
    assert idx == sorted(set(idx))
    # the leader's appends went out while its own WAL write was still unsynced
    assert net.early > 0


def test_groups_share_one_sync_and_one_frame_per_peer_per_turn(tmp_path: Path) -> None:
    net = Net(tmp_path)
    groups = [b"A", b"B", b"C", b"D"]
    for g in groups:
        net.create(g)
    leads = {g: net.leader(g) for g in groups}
    net.settle()
    syncs = {n: h.wal.syncs for n, h in net.hosts.items()}
    # one proposal per group, all on the leaders, then one turn everywhere
    for g in groups:
        net.hosts[leads[g]].propose(g, b"x")
    net.frames_per_turn.clear()
    net.step()
    for n, h in net.hosts.items():
        assert h.wal.syncs - syncs[n] <= 1, f"{n}: one sync covers every group's appends"
    # each node sends at most one frame to each of its two peers in a turn
    assert net.frames_per_turn[0] <= 3 * 2
    parts = decode_frame(b"\x01")  # an empty frame is valid
    assert parts == []
    net.settle()
    for g in groups:
        assert all(net.applied[n][g] and net.applied[n][g][-1][1] == b"x" for n in NAMES)


def test_a_crashed_node_restarts_from_its_wal_and_catches_up(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    for i in range(20):
        net.hosts[lead].propose(b"G", b"a%d" % i)
    net.settle()
    victim = next(n for n in NAMES if n != lead)
    had = list(net.applied[victim][b"G"])
    net.crash(victim)
    for i in range(20):
        net.hosts[lead].propose(b"G", b"b%d" % i)
    net.settle()
    h = net.start(victim)
    # its state machine kept what it had applied: start after it
    h.restore(b"G", net.collector(victim, b"G"), applied=had[-1][0])
    net.settle(rounds=300, ticks=1)
    want = [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(20)]
    assert [d for _, d in net.applied[victim][b"G"]] == want
    assert [d for _, d in net.applied[lead][b"G"]] == want


def test_the_whole_cluster_restarts_with_its_terms_votes_and_log(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    for i in range(10):
        net.hosts[lead].propose(b"G", b"%d" % i)
    net.settle()
    terms = {n: h.groups[b"G"].node.basic_status().term for n, h in net.hosts.items()}
    for n in NAMES:
        net.crash(n)
    for n in NAMES:
        net.applied[n][b"G"] = []
        net.start(n).restore(b"G", net.collector(n, b"G"))
    for n, h in net.hosts.items():
        assert h.groups[b"G"].node.basic_status().term == terms[n]
    lead = net.leader(b"G")
    net.hosts[lead].propose(b"G", b"after")
    net.settle()
    for n in NAMES:
        # nothing was compacted: the state machines are rebuilt from the whole log
        assert [d for _, d in net.applied[n][b"G"]] == [b"%d" % i for i in range(10)] + [b"after"]


def test_compaction_frees_segments_and_a_lagging_node_gets_a_snapshot(tmp_path: Path) -> None:
    net = Net(tmp_path, segment_size=4096)
    net.create(b"G")
    lead = net.leader(b"G")
    lagger = next(n for n in NAMES if n != lead)
    net.crash(lagger)
    for i in range(300):
        net.hosts[lead].propose(b"G", b"v%03d" % i)
        if i % 20 == 19:
            net.settle()
    net.settle()
    for n, h in net.hosts.items():
        seg_before = len(h.wal.segments)
        g = h.groups[b"G"]
        h.compact(b"G", g.applied, b"state@%d" % g.applied)
        assert len(h.wal.segments) < seg_before, f"{n}: compaction freed WAL segments"
    h = net.start(lagger)
    got: list[tuple[int, bytes]] = []
    installed: list[tuple[int, bytes]] = []
    h.restore(b"G", lambda i, d: got.append((i, d)), install=lambda i, d: installed.append((i, d)))
    net.settle(rounds=300, ticks=1)
    g = h.groups[b"G"]
    # the log it needed is gone on the leader: it was sent the snapshot instead, and the
    # state machine was handed it before any entry after it
    assert g.storage.snapshot().data.startswith(b"state@")
    assert len(installed) == 1 and installed[0][1] == g.storage.snapshot().data
    assert all(i > installed[0][0] for i, _ in got)
    assert g.applied == net.hosts[lead].groups[b"G"].applied


def test_a_lost_snapshot_is_sent_again(tmp_path: Path) -> None:
    """The transport does not report losses: a snapshot dropped on the way must not leave
    the peer paused for as long as the leader lasts (found by test_group_power_loss.py)."""
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    lagger = next(n for n in NAMES if n != lead)
    net.crash(lagger)
    for i in range(30):
        net.hosts[lead].propose(b"G", b"%d" % i)
    net.settle()
    for h in net.hosts.values():
        g = h.groups[b"G"]
        h.compact(b"G", g.applied, _encode(net.applied[_name(net, h)][b"G"]))
    h = net.start(lagger)
    state: list[tuple[int, bytes]] = []

    def install(index: int, data: bytes) -> None:
        state[:] = _decode(data)

    h.restore(b"G", lambda i, d: state.append((i, d)), install=install)
    dropped = 0
    for _ in range(300):
        for x in net.hosts.values():
            x.tick()
            x.turn()
        q, net.queue = net.queue, []
        for dest, frame in q:
            if any(m.type == MessageType.MsgSnap for _, m in decode_frame(frame)) and not dropped:
                dropped += 1  # the first snapshot never arrives
                continue
            net.hosts[dest].receive(frame)
        if [d for _, d in state] == [b"%d" % i for i in range(30)]:
            break
    assert dropped == 1
    assert [d for _, d in state] == [b"%d" % i for i in range(30)]


def _name(net: Net, h: GroupHost) -> str:
    return next(n for n, x in net.hosts.items() if x is h)


def _encode(state: list[tuple[int, bytes]]) -> bytes:
    return b";".join(b"%d=%s" % (i, d) for i, d in state)


def _decode(data: bytes) -> list[tuple[int, bytes]]:
    return [(int(i), d) for i, d in (p.split(b"=", 1) for p in data.split(b";"))] if data else []


def test_a_snapshot_whose_hard_state_was_lost_restores(tmp_path: Path) -> None:
    """Power loss kept a snapshot record but not the hard state written after it (found by
    tests/storage/test_group_power_loss.py): the node restarts with the snapshot committed
    instead of the engine refusing a commit below it."""
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    for i in range(12):
        net.hosts[lead].propose(b"G", b"%d" % i)
    net.settle()
    n1 = net.hosts["n1"]
    g = n1.groups[b"G"]
    at, term = g.applied, g.storage.term(g.applied)
    st = g.node.basic_status().hard_state
    conf = n1.wal.groups[b"G"].snap_conf
    # what the disk kept: an older hard state, then the snapshot, and nothing after it
    n1.wal.append_hard_state(b"G", st.term, st.vote, at - 5)
    n1.wal.append_snapshot(b"G", at, term, conf, b"state@%d" % at)
    net.crash("n1")
    h = net.start("n1")
    g = h.restore(b"G", net.collector("n1", b"G"), at)
    assert (g.node.basic_status().hard_state.commit, g.applied) == (at, at)
    lead = net.leader(b"G")
    net.hosts[lead].propose(b"G", b"after")
    net.settle(rounds=300, ticks=1)
    assert net.applied["n1"][b"G"][-1][1] == b"after"


def test_bad_frames_are_refused_and_step_nothing(tmp_path: Path) -> None:
    net = Net(tmp_path)
    net.create(b"G")
    net.leader(b"G")
    h = net.hosts["n1"]
    for bad in (b"", b"\x02", b"\x01\x05\x00G", b"\x01\x01\x00G\xff\xff\xff\x00", b"\x01\x00\x00"):
        with pytest.raises(FrameError):
            h.receive(bad)
    rng = random.Random(3)
    for _ in range(2000):
        junk = b"\x01" + rng.randbytes(rng.randrange(40))
        try:
            h.receive(junk)
        except FrameError:
            pass
    # still a working member
    lead = net.leader(b"G")
    net.hosts[lead].propose(b"G", b"ok")
    net.settle()
    assert net.applied["n1"][b"G"][-1][1] == b"ok"


def test_only_members_count_as_heard_from(tmp_path: Path) -> None:
    """``last_sender`` (the liveness the Raft service keeps per peer) names members only: a
    peer that sends frames under other node ids cannot grow that table."""
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    h = net.hosts["n1" if lead != "n1" else "n2"]
    term = h.groups[b"G"].node.term()
    for sender in (12345, net.ids[lead]):
        m = Message(type=MessageType.MsgHeartbeat, to=h.id, from_=sender, term=term)
        h.receive(bytes([FRAME_VERSION]) + frame_part(b"G", m))
        assert h.last_sender == (sender if sender == net.ids[lead] else 0)
    h.receive(b"\x01")  # an empty frame: nobody heard
    assert h.last_sender == 0


def test_a_damaged_group_neither_campaigns_nor_votes_until_repaired(tmp_path: Path) -> None:
    """§4.8: a group whose log had damage before its tail may have lost entries it
    acknowledged, so it stays out of elections until a leader has committed past
    everything it had."""
    net = Net(tmp_path)
    lead, victim = net.led_with(b"G", [b"m%d" % i for i in range(10)])
    other = next(n for n in NAMES if n not in (lead, victim))
    had = list(net.applied[victim][b"G"])
    net.crash(victim)
    h = net.start(victim)
    h.wal.groups[b"G"].damaged = True  # as Wal.open marks it
    g = h.restore(b"G", net.collector(victim, b"G"), applied=had[-1][0])
    assert g.damaged
    # the leader dies: the damaged member and one sound one cannot elect anybody
    net.crash(lead)
    for _ in range(300):
        net.step(ticks=1)
        assert (
            not g.node.is_leader() and g.node.basic_status().raft_state == StateType.StateFollower
        )  # it never campaigned
    assert {net.hosts[n].groups[b"G"].leader for n in (victim, other)} == {0}
    # the old leader is back: the two sound members elect, commit, and repair it
    net.start(lead).restore(b"G", net.collector(lead, b"G"), applied=net.applied[lead][b"G"][-1][0])
    new = net.leader(b"G")
    assert new != victim
    net.hosts[new].propose(b"G", b"after")
    net.settle(rounds=300, ticks=1)
    assert not g.damaged
    assert [d for _, d in net.applied[victim][b"G"]][-1] == b"after"


def test_frames_to_a_peer_are_split_at_the_frame_target(tmp_path: Path) -> None:
    """A turn's messages to one peer go in frames of about FRAME_TARGET bytes at most (one
    message larger than that goes alone), every message exactly once and in order."""
    sent: list[tuple[int, bytes]] = []
    h = GroupHost(1, Wal.open(str(tmp_path / "w")), lambda p, f: sent.append((p, f)))
    big = FRAME_TARGET // 3
    msgs = [
        Message(MessageType.MsgApp, to=2, from_=1, index=i,
                entries=[Entry(1, i + 1, data=b"x" * (big if i != 4 else FRAME_TARGET + 10))])
        for i in range(7)
    ]  # fmt: skip
    h._send_frames({2: [frame_part(b"G%d" % m.index, m) for m in msgs]}, [])
    assert len(sent) > 1
    got = [(name, m.index) for _, f in sent for name, m in decode_frame(f)]
    assert got == [(b"G%d" % i, i) for i in range(7)]
    for _, f in sent:
        assert len(f) <= FRAME_TARGET or len(decode_frame(f)) == 1
    assert h.frames_sent == len(sent)
    h.wal.close()


def test_a_damaged_wal_log_is_cut_at_its_first_hole() -> None:
    """The engine's log cannot hold a hole: the entries after one (left by records damage
    removed) are left for the leader to send again; entries the snapshot covers are
    skipped, as their compaction record may be lost."""

    def ents(*idx: int) -> list[tuple[int, int, int, bytes]]:
        return [(i, 1, 0, b"") for i in idx]

    assert _contiguous(ents(2, 3, 4), 1) == ents(2, 3, 4)
    assert _contiguous(ents(2, 3, 5, 6), 1) == ents(2, 3)
    assert _contiguous(ents(3, 4), 1) == []
    assert _contiguous(ents(1, 2, 3, 4), 2) == ents(3, 4)
    assert _contiguous([], 5) == []


LEASE = 0.5  # cluster_streams.LEASE
TICK = 0.1  # raft_service.TICK


def _sent(at: float) -> bytes:
    return sent_context(int(at * 1e9))


def _leased(tmp_path: Path) -> tuple[Net, str, list[str]]:
    """Three nodes on virtual time, a 100 ms tick as the Raft service runs them: a leader
    elected, and its lease held for two seconds of a normal exchange."""
    net = Net(tmp_path, now=1000.0)
    net.create(b"G")
    lead = net.leader(b"G")
    g = net.hosts[lead].groups[b"G"]
    for i in range(20):
        net.now = net.clock() + TICK
        if i % 4 == 0:
            net.hosts[lead].propose(b"G", b"p%d" % i)  # appends too, not only heartbeats
        net.step(ticks=1)
        # once the first heartbeat round is answered, never lost while all answer in time
        assert i < 2 or has_lease(g, net.clock(), LEASE), i
    return net, lead, [n for n in NAMES if n != lead]


def test_a_normal_exchange_keeps_the_lease_and_answers_carry_the_send_time(
    tmp_path: Path,
) -> None:
    net, lead, followers = _leased(tmp_path)
    g = net.hosts[lead].groups[b"G"]
    term = g.node.raft.term
    # what the followers credited: send times, none later than now, none lease-old
    assert g.responded_term == term
    for f in followers:
        assert net.clock() - LEASE < g.responded[net.ids[f]] <= net.clock()
    # every request the leader sends carries its send time; every answer carries one back
    net.now = net.clock() + TICK
    for h in net.hosts.values():
        h.tick()
        h.tick()  # a heartbeat round
    net.hosts[lead].propose(b"G", b"x")
    net.hosts[lead].turn()
    requests = [m for _, f in net.queue for _, m in decode_frame(f)]
    assert {m.type for m in requests} >= {MessageType.MsgApp, MessageType.MsgHeartbeat}
    assert all(m.context == _sent(net.clock()) for m in requests)
    net.step()  # delivered
    net.now = net.clock() + 0.01
    for f in followers:
        net.hosts[f].turn()  # they answer, 10 ms later
    answers = [(d, m) for d, f in net.queue for _, m in decode_frame(f)]
    assert {m.type for d, m in answers if d == lead} >= {
        MessageType.MsgAppResp,
        MessageType.MsgHeartbeatResp,
    }
    assert all(m.context == _sent(net.clock() - 0.01) for d, m in answers if d == lead)


def test_answers_delivered_after_a_pause_do_not_renew_the_lease(tmp_path: Path) -> None:
    """The leader stops (SIGSTOP) just after a heartbeat round and resumes seconds later:
    the followers answered at once, but their answers reach it only after the pause, and
    meanwhile they elected another leader. It still believes it leads (it has heard of no
    higher term yet), but the answers are to requests sent seconds ago: no lease."""
    net, lead, followers = _leased(tmp_path)
    old = net.hosts[lead]
    g = old.groups[b"G"]
    term = g.node.raft.term
    for h in net.hosts.values():
        h.tick()
        h.tick()
    old.propose(b"G", b"last")
    net.holding.add(lead)
    sent_at = net.clock()
    net.step()  # the heartbeats and the append leave, and are delivered
    net.now = net.clock() + 0.005
    for f in followers:
        net.hosts[f].turn()  # answered at once, the answers held back
    # the pause: the leader does nothing; the others elect a leader among themselves, and
    # what they send the paused node is held too
    stopped = net.hosts.pop(lead)
    new = ""
    for _ in range(40):
        net.now = net.clock() + TICK
        net.step(ticks=1)
        leads = {net.hosts[f].groups[b"G"].leader for f in followers}
        if len(leads) == 1 and net.ids[lead] not in leads and 0 not in leads:
            new = net.by_id[leads.pop()]
            break
    assert new in followers
    assert net.hosts[new].groups[b"G"].node.raft.term > term
    net.hosts[lead] = stopped
    net.now = net.clock() + 0.5  # the pause ends
    assert net.clock() - sent_at > 2.0
    # resumed: it reads the answers it was sent before the pause, and nothing else yet
    held, net.held = net.held, []
    net.holding.clear()
    stale = [f for _, f in held if all(m.term == term for _, m in decode_frame(f))]
    answered = [m.type for f in stale for _, m in decode_frame(f)]
    assert MessageType.MsgAppResp in answered and MessageType.MsgHeartbeatResp in answered
    for frame in stale:
        assert stopped.receive(frame)
    assert g.node.raft.state == StateType.StateLeader and g.node.raft.term == term
    assert not has_lease(g, net.clock(), LEASE)
    # then the new leader's word: it follows
    for _, frame in held:
        stopped.receive(frame)
    net.settle(rounds=50, ticks=1)
    assert g.leader == net.ids[new]
    assert g.node.raft.state == StateType.StateFollower


def test_a_forged_or_garbled_send_time_is_not_credited(tmp_path: Path) -> None:
    """A peer is as untrusted as a client: an answer carrying a time the leader's clock
    has not reached, a garbled context, or none at all, extends no lease, and steps
    without harm."""
    net, lead, followers = _leased(tmp_path)
    h = net.hosts[lead]
    g = h.groups[b"G"]
    term = g.node.raft.term
    net.now = net.clock() + 1.0  # a second without a word: no lease
    assert not has_lease(g, net.clock(), LEASE)
    before = dict(g.responded)
    contexts = [
        _sent(net.clock() + 5.0),  # the future
        _sent(net.clock() + 1e-6),
        b"",  # no time at all: the arrival is no proof of anything
        SENT + b"\x00" * 7,  # short
        SENT + b"\x00" * 9,  # long
        b"sEnT" + struct.pack("<q", int(net.clock() * 1e9)),  # not the tag
        struct.pack("<q", int(net.clock() * 1e9)),  # no tag
        SENT + struct.pack("<q", -5),  # before time began
        b"\xff" * 12,
        b"removed",
        b"lost-log",
    ]
    rng = random.Random(7)
    contexts += [rng.randbytes(rng.randrange(1, 20)) for _ in range(50)]
    for ctx in contexts:
        for f in followers:
            for t in (MessageType.MsgHeartbeatResp, MessageType.MsgAppResp):
                m = Message(type=t, to=h.id, from_=net.ids[f], term=term, context=ctx,
                            index=g.node.raft.raft_log.last_index())  # fmt: skip
                h.receive(bytes([FRAME_VERSION]) + frame_part(b"G", m))
                assert not has_lease(g, net.clock(), LEASE), ctx
    assert g.responded == before
    # the leader is unharmed: it leads, and a real answer renews its lease
    assert g.node.raft.state == StateType.StateLeader
    net.settle(rounds=20, ticks=1)
    assert has_lease(g, net.clock(), LEASE)


def test_a_damaged_majority_elects_nobody_until_an_operator_rejoins_one(tmp_path: Path) -> None:
    """Two of three members damaged: they vote for no one, so the sound one cannot be
    elected (and they never campaign). One of them, its log of the group dropped and
    joined again with ``votes_damaged`` (what jetstream/cluster/rejoin.py leads to), votes
    for the sound one; it leads, and repairs both."""
    net = Net(tmp_path)
    net.create(b"G")
    lead = net.leader(b"G")
    for i in range(10):
        net.hosts[lead].propose(b"G", b"m%d" % i)
    net.settle()
    healthy = "n1"
    damaged = ["n2", "n3"]
    for n in NAMES:
        net.crash(n)
    groups = {}
    for n in NAMES:
        h = net.start(n)
        if n in damaged:
            h.wal.groups[b"G"].damaged = True  # as Wal.open marks it
        net.applied[n][b"G"] = []
        groups[n] = h.restore(b"G", net.collector(n, b"G"))
    for _ in range(300):
        net.step(ticks=1)
    assert {g.leader for g in groups.values()} == {0}
    # the operator drops n2's log of the group; it joins again, and may vote
    net.crash("n2")
    h = net.start("n2")
    h.wal.append_drop(b"G")
    net.applied["n2"][b"G"] = []
    g2 = h.join(b"G", net.collector("n2", b"G"), lost=True)
    g2.votes_damaged = True
    assert g2.damaged
    assert net.leader(b"G") == healthy
    net.hosts[healthy].propose(b"G", b"after")
    net.settle(rounds=300, ticks=1)
    assert not g2.damaged and not groups["n3"].damaged
    want = [d for _, d in net.applied[healthy][b"G"]]
    assert [d for _, d in net.applied["n2"][b"G"]] == want and want[-1] == b"after"


def test_a_member_that_lost_its_log_unawares_is_probed_down_not_looped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A follower whose whole WAL vanished (a directory a power loss took: the
    deterministic tier's seed 51) starts the group again as new and rejects the append
    after the entries it had acknowledged, saying nothing of a lost log. etcd's leader,
    probing, sends that same append again at once, for ever; here the leader takes the
    rejection for the lost log it is, brings the match down and the follower catches up."""
    net = Net(tmp_path)
    lead, victim = net.led_with(b"G", [b"a%d" % i for i in range(8)])
    net.crash(victim)
    shutil.rmtree(tmp_path / victim)
    net.applied[victim] = {}
    h = net.start(victim)
    h.create(b"G", sorted(net.ids.values()), net.collector(victim, b"G"))
    # (the leader sends it nothing but heartbeats until there is something new to append)
    net.hosts[lead].propose(b"G", b"a8")
    for _ in range(50):
        net.step(ticks=1)
    # (without the fix: the same append and rejection on every one of the 50 turns, the
    # follower's log never growing)
    assert [d for _, d in net.applied[victim][b"G"]] == [b"a%d" % i for i in range(9)]
    lost = [r for r in caplog.records if "it had acknowledged" in r.getMessage()]
    assert len(lost) == 1, [r.getMessage() for r in caplog.records]


def test_held_commit_notices_go_late_or_not_at_all(tmp_path: Path) -> None:
    """With ``hold_commit_notices`` a leader's append without entries (the new commit
    index after a lone proposal) waits for ``send_held``; an append with entries to the
    same member, which carries the commit too, replaces it; the followers apply either way.
    A prompt proposal (an operation) has its commit told at once."""
    net = Net(tmp_path)
    for h in net.hosts.values():
        h.hold_commit_notices = True
    lead, _ = net.led_with(b"G", [])
    leader = net.hosts[lead]
    leader.send_held()
    net.settle()
    followers = [n for n in NAMES if n != lead]

    def applied(n: str) -> list[bytes]:
        return [d for _, d in net.applied[n][b"G"] if d]

    leader.propose_batch(b"G", [b"one"])
    net.settle()
    assert applied(lead) == [b"one"]
    # committed on the leader; its notice to each follower waits
    assert sorted(to for _, to in leader.held) == sorted(net.ids[n] for n in followers)
    assert all(applied(n) == [] for n in followers)
    # the next proposal's appends carry the commit index: the notices are dropped
    leader.propose_batch(b"G", [b"two"])
    net.step()
    assert not leader.held
    net.settle()
    assert all(applied(n) == [b"one"] for n in followers)
    # sent late, a notice commits the rest on the followers
    assert len(leader.held) == 2
    leader.send_held()
    net.settle()
    assert not leader.held
    for n in NAMES:
        assert applied(n) == [b"one", b"two"], n
    # prompt: told at once, nothing held
    leader.propose_batch(b"G", [b"op"], prompt=True)
    net.settle()
    assert not leader.held
    for n in NAMES:
        assert applied(n) == [b"one", b"two", b"op"], n
    leader.propose(b"G", b"meta")  # (the meta group's way: always prompt)
    net.settle()
    assert not leader.held
    assert all(applied(n)[-1] == b"meta" for n in NAMES)
    # and the next plain proposal waits again
    leader.propose_batch(b"G", [b"three"])
    net.settle()
    assert len(leader.held) == 2
