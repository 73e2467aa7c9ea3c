"""Ports etcd-io/raft v3.7.0 rafttest/interaction_env.go, interaction_env_logger.go and the
environment side of the interaction_env_handler_*.go files (Apache-2.0).

An :class:`InteractionEnv` holds a group of RawNodes over MemoryStorage, the messages in
flight between them and an output buffer that the nodes' logger (:class:`RedirectLogger`)
and the env's own descriptions write into. The script side (parsing the directives of
etcd's ``testdata/*.txt``) is in ``interaction_handlers``.

Go errors are Python exceptions here: an env operation raises what the Go function
returns as an error, and ``interaction_handlers.handle`` writes its text into the output,
as Go's ``Handle`` does. Only the errors of the raft API (:data:`ENV_ERRORS`) are output;
anything else (a RaftPanic, a bug) fails the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

from natsd.raft.codec import CodecError, unmarshal_conf_change, unmarshal_conf_change_v2
from natsd.raft.core import Config, RaftError
from natsd.raft.describe import (
    describe_entries,
    describe_message,
    describe_ready,
    go_quote,
    is_local_msg_target,
)
from natsd.raft.log import NO_LIMIT
from natsd.raft.log_unstable import clone_snapshot
from natsd.raft.logger import RaftPanic, go_sprint, go_sprintf, go_value
from natsd.raft.rawnode import RawNode, new_raw_node
from natsd.raft.read_only import ReadOnlyOption
from natsd.raft.storage import MemoryStorage, Storage, StorageError
from natsd.raft.tracker import progress_map_str
from natsd.raft.types import (
    ConfChangeI,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
    is_empty_hard_state,
    is_empty_snap,
)

T = TypeVar("T")


class EnvError(Exception):
    """An error the env itself returns (Go's errors.New / fmt.Errorf in rafttest)."""


# The errors that Go returns as values (the env's own and the raft API's): the env reports
# them in its output (Handle writes err.Error(); DeliverMsgs prints a Step error and goes
# on). ValueError is what ConfChangesFromString raises.
ENV_ERRORS: tuple[type[Exception], ...] = (
    EnvError,
    RaftError,
    StorageError,
    CodecError,
    ValueError,
)

# math.MaxUint64 and math.MaxInt32 of raftConfigStub.
MAX_UINT64 = 2**64 - 1
MAX_INT32 = 2**31 - 1

LVL_NAMES = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL", "NONE")


def default_entry_formatter(b: bytes) -> str:
    """fmt.Sprintf("%q", b)."""
    return go_quote(b)


class RedirectLogger:
    """The raft Logger that writes into the env's output buffer (Go's strings.Builder) with
    a level filter: 0 = DEBUG, 1 = INFO, 2 = WARN, 3 = ERROR, 4 = FATAL, 5 = NONE. Under
    NONE every write is dropped, the handlers' output included."""

    __slots__ = ("buf", "lvl")

    def __init__(self) -> None:
        self.buf: list[str] = []
        self.lvl = 0

    # The strings.Builder side.
    def quiet(self) -> bool:
        return self.lvl == len(LVL_NAMES) - 1

    def write(self, s: str) -> None:
        if not self.quiet():
            self.buf.append(s)

    def reset(self) -> None:
        self.buf = []

    def string(self) -> str:
        return "".join(self.buf)

    def length(self) -> int:
        return sum(len(s) for s in self.buf)

    # The raft.Logger side.
    def _printf(self, lvl: int, format: str, *args: object) -> None:
        if self.lvl <= lvl:
            self.write(LVL_NAMES[lvl] + " ")
            self.write(go_sprintf(format, *args))
            if len(format) > 0 and format[-1] != "\n":
                self.write("\n")

    def _print(self, lvl: int, *args: object) -> None:
        if self.lvl <= lvl:
            self.write(LVL_NAMES[lvl] + " ")
            # fmt.Fprintln: operands always separated by a space.
            self.write(" ".join(go_value(a) for a in args) + "\n")

    def debug(self, *v: object) -> None:
        self._print(0, *v)

    def debugf(self, format: str, *v: object) -> None:
        self._printf(0, format, *v)

    def info(self, *v: object) -> None:
        self._print(1, *v)

    def infof(self, format: str, *v: object) -> None:
        self._printf(1, format, *v)

    def warning(self, *v: object) -> None:
        self._print(2, *v)

    def warningf(self, format: str, *v: object) -> None:
        self._printf(2, format, *v)

    def error(self, *v: object) -> None:
        self._print(3, *v)

    def errorf(self, format: str, *v: object) -> None:
        self._printf(3, format, *v)

    def fatal(self, *v: object) -> NoReturn:
        self._print(4, *v)
        raise RaftPanic(go_sprint(*v))

    def fatalf(self, format: str, *v: object) -> NoReturn:
        self._printf(4, format, *v)
        raise RaftPanic(go_sprintf(format, *v))

    def panic(self, *v: object) -> NoReturn:
        self._print(4, *v)
        raise RaftPanic(go_sprint(*v))

    def panicf(self, format: str, *v: object) -> NoReturn:
        self._printf(4, format, *v)
        raise RaftPanic(go_sprintf(format, *v))


class SnapOverrideStorage(Storage):
    """snapOverrideStorage: a MemoryStorage whose snapshot() is the node's latest applied
    state (the last snapshot of its History), the way the env's state machine sees it."""

    __slots__ = ("mem", "snapshot_override")

    def __init__(self, mem: MemoryStorage, snapshot_override: Callable[[], Snapshot]) -> None:
        self.mem = mem
        self.snapshot_override = snapshot_override

    def initial_state(self) -> tuple[HardState | None, ConfState]:
        return self.mem.initial_state()

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        return self.mem.entries(lo, hi, max_size)

    def term(self, i: int) -> int:
        return self.mem.term(i)

    def last_index(self) -> int:
        return self.mem.last_index()

    def first_index(self) -> int:
        return self.mem.first_index()

    def snapshot(self) -> Snapshot:
        return self.snapshot_override()

    # The rest of the env's Storage interface.
    def set_hard_state(self, st: HardState) -> None:
        self.mem.set_hard_state(st)

    def apply_snapshot(self, snap: Snapshot) -> None:
        self.mem.apply_snapshot(snap)

    def compact(self, new_first_index: int) -> None:
        self.mem.compact(new_first_index)

    def append(self, entries: list[Entry]) -> None:
        self.mem.append(entries)


class Node:
    """A member of the raft group: its RawNode, storage, config, the work queued for its
    storage threads (async storage writes) and the history of its applied states."""

    __slots__ = ("append_work", "apply_work", "config", "history", "raw_node", "storage")

    def __init__(
        self, raw_node: RawNode, storage: SnapOverrideStorage, config: Config, snap: Snapshot
    ) -> None:
        self.raw_node = raw_node
        self.storage = storage
        self.config = config
        self.append_work: list[Message] = []  # MsgStorageAppend
        self.apply_work: list[Message] = []  # MsgStorageApply
        self.history: list[Snapshot] = [snap]


class ConfigStub:
    """The template of raft.Config that add-nodes fills (raftConfigStub: no limits). The ID,
    storage and logger are set per node."""

    __slots__ = (
        "applied",
        "async_storage_writes",
        "check_quorum",
        "disable_conf_change_validation",
        "election_tick",
        "heartbeat_tick",
        "max_committed_size_per_ready",
        "max_inflight_msgs",
        "max_size_per_msg",
        "pre_vote",
        "read_only_option",
        "step_down_on_removal",
    )

    def __init__(self) -> None:
        self.election_tick = 3
        self.heartbeat_tick = 1
        self.max_size_per_msg = MAX_UINT64
        self.max_inflight_msgs = MAX_INT32
        self.applied = 0
        self.async_storage_writes = False
        self.pre_vote = False
        self.check_quorum = False
        self.max_committed_size_per_ready = 0
        self.disable_conf_change_validation = False
        self.read_only_option = ReadOnlyOption.ReadOnlySafe
        self.step_down_on_removal = False

    def make(self, id: int, storage: Storage, logger: RedirectLogger) -> Config:
        return Config(
            id=id,
            election_tick=self.election_tick,
            heartbeat_tick=self.heartbeat_tick,
            storage=storage,
            applied=self.applied,
            async_storage_writes=self.async_storage_writes,
            max_size_per_msg=self.max_size_per_msg,
            max_committed_size_per_ready=self.max_committed_size_per_ready,
            max_inflight_msgs=self.max_inflight_msgs,
            check_quorum=self.check_quorum,
            pre_vote=self.pre_vote,
            read_only_option=self.read_only_option,
            logger=logger,
            disable_conf_change_validation=self.disable_conf_change_validation,
            step_down_on_removal=self.step_down_on_removal,
        )


class InteractionOpts:
    """InteractionOpts: on_config may adjust each node's Config (not its ID or logger);
    set_randomized_election_timeout is plumbed in from the raft package's tests."""

    __slots__ = ("on_config", "set_randomized_election_timeout")

    def __init__(
        self,
        on_config: Callable[[Config], None] | None = None,
        set_randomized_election_timeout: Callable[[RawNode, int], None] | None = None,
    ) -> None:
        self.on_config = on_config
        self.set_randomized_election_timeout = set_randomized_election_timeout


class Recipient:
    __slots__ = ("drop", "id")

    def __init__(self, id: int, drop: bool = False) -> None:
        self.id = id
        self.drop = drop


def is_local_msg(msg: Message) -> bool:
    """Local messages require reliable delivery: they are never dropped."""
    return msg.from_ == msg.to or is_local_msg_target(msg.from_) or is_local_msg_target(msg.to)


def split_msgs(
    msgs: list[Message], to: int, typ: int, drop: bool
) -> tuple[list[Message], list[Message]]:
    """splitMsgs: the messages for the given recipient of the given type (-1 for all types),
    and the remainder, both in their original order."""
    to_msgs: list[Message] = []
    rmdr: list[Message] = []
    for msg in msgs:
        if msg.to == to and not (drop and is_local_msg(msg)) and (typ < 0 or msg.type == typ):
            to_msgs.append(msg)
        else:
            rmdr.append(msg)
    return to_msgs, rmdr


class InteractionEnv:
    """Facilitates testing of complex interactions between the members of a raft group."""

    __slots__ = ("messages", "nodes", "options", "output")

    def __init__(self, opts: InteractionOpts | None = None) -> None:
        self.options = opts if opts is not None else InteractionOpts()
        self.nodes: list[Node] = []
        self.messages: list[Message] = []  # in-flight messages
        self.output = RedirectLogger()

    def with_indent(self, f: Callable[..., T], *args: object) -> T:
        """Runs f(*args) with a fresh output buffer, then appends what it wrote to the outer buffer
        indented by two spaces (also when f raises: Go's f returns the error after writing)."""
        orig = self.output.buf
        self.output.buf = []
        try:
            return f(*args)
        finally:
            text = "".join(self.output.buf)
            self.output.buf = orig
            # bufio.Scanner's lines: split on \n, no final empty line, one \r dropped.
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            for line in lines:
                orig.append("  " + (line[:-1] if line.endswith("\r") else line) + "\n")

    # add-nodes

    def add_nodes(self, n: int, cfg: ConfigStub, snap: Snapshot) -> None:
        """AddNodes adds n new nodes initialized from the given snapshot (which may be empty),
        using cfg as template. They are assigned consecutive IDs."""
        bootstrap = snap != Snapshot()
        for _ in range(n):
            id = 1 + len(self.nodes)
            s = SnapOverrideStorage(MemoryStorage(), self._snapshot_override(id))
            if bootstrap:
                # NB: this could work with 1, but MemoryStorage doesn't play well with it.
                if snap.metadata.index <= 1:
                    raise EnvError("index must be specified as > 1 due to bootstrap")
                snap.metadata.term = 1
                s.apply_snapshot(snap)
                fi = s.first_index()
                # For MemoryStorage, applying a snapshot also truncates appropriately.
                exp = snap.metadata.index + 1
                if fi != exp:
                    raise EnvError(f"failed to establish first index {exp}; got {fi}")
            c = cfg.make(id, s, self.output)
            if self.options.on_config is not None:
                self.options.on_config(c)
                if c.id != id:
                    raise EnvError("OnConfig must not change the ID")
                if c.logger is not self.output:
                    raise EnvError("OnConfig must not set Logger")
            rn = new_raw_node(c)
            self.nodes.append(Node(rn, s, c, snap))

    def _snapshot_override(self, id: int) -> Callable[[], Snapshot]:
        # When you ask for a snapshot, you get the most recent state of the state machine.
        def snapshot() -> Snapshot:
            return self.nodes[id - 1].history[-1]

        return snapshot

    # campaign, propose, propose-conf-change, forget-leader, report-unreachable,
    # transfer-leadership, tick-*

    def campaign(self, idx: int) -> None:
        self.nodes[idx].raw_node.campaign()

    def propose(self, idx: int, data: bytes) -> None:
        self.nodes[idx].raw_node.propose(data)

    def propose_conf_change(self, idx: int, c: ConfChangeI) -> None:
        self.nodes[idx].raw_node.propose_conf_change(c)

    def forget_leader(self, idx: int) -> None:
        self.nodes[idx].raw_node.forget_leader()

    def report_unreachable(self, idx: int, target: int) -> None:
        self.nodes[idx].raw_node.report_unreachable(self.nodes[target].config.id)

    def transfer_leadership(self, from_: int, to: int) -> None:
        self.nodes[from_ - 1].raw_node.transfer_leader(to)

    def tick(self, idx: int, num: int) -> None:
        for _ in range(num):
            self.nodes[idx].raw_node.tick()

    # compact, raft-log

    def compact(self, idx: int, new_first_index: int) -> None:
        """Truncates the log of the node so that the supplied first index results."""
        self.nodes[idx].storage.compact(new_first_index)
        self.raft_log(idx)

    def raft_log(self, idx: int) -> None:
        """Pretty prints the raft log to the output buffer."""
        s = self.nodes[idx].storage
        fi = s.first_index()
        li = s.last_index()
        if li < fi:
            # What MemoryStorage returns for an empty log.
            self.output.write(f"log is empty: first index={fi}, last index={li}")
            return
        ents = s.entries(fi, li + 1, NO_LIMIT)
        self.output.write(describe_entries(ents, default_entry_formatter))

    # deliver-msgs

    def deliver_msgs(self, typ: int, rs: list[Recipient]) -> int:
        """Delivers or drops (per Recipient) the in-flight messages to the recipients; only
        messages of type typ (-1 for all). Returns the number of messages handled, which
        are removed from the in-flight messages."""
        n = 0
        for r in rs:
            msgs, self.messages = split_msgs(self.messages, r.id, typ, r.drop)
            n += len(msgs)
            for msg in msgs:
                if r.drop:
                    self.output.write("dropped: ")
                self.output.write(describe_message(msg, default_entry_formatter) + "\n")
                if r.drop:
                    # Dropping messages to nodes not instantiated yet is allowed.
                    continue
                to_idx = msg.to - 1
                try:
                    self.nodes[to_idx].raw_node.step(msg)
                except ENV_ERRORS as err:
                    self.output.write(f"{err}\n")
        return n

    # process-ready, process-append-thread, process-apply-thread

    def process_ready(self, idx: int) -> None:
        """Runs Ready handling on the node."""
        n = self.nodes[idx]
        rd = n.raw_node.ready()
        self.output.write(describe_ready(rd, default_entry_formatter))
        if not n.config.async_storage_writes:
            process_append(n, rd.hard_state, rd.entries, rd.snapshot)
            process_apply(n, rd.committed_entries)
        for m in rd.messages:
            if is_local_msg_target(m.to):
                if not n.config.async_storage_writes:
                    raise RaftPanic("unexpected local msg target")
                if m.type == MessageType.MsgStorageAppend:
                    n.append_work.append(m)
                elif m.type == MessageType.MsgStorageApply:
                    n.apply_work.append(m)
                else:
                    raise RaftPanic(f"unexpected message type {go_value(m.type)}")
            else:
                self.messages.append(m)
        if not n.config.async_storage_writes:
            n.raw_node.advance(rd)

    def process_append_thread(self, idx: int) -> None:
        """Processes a single message on the node's "append" thread."""
        n = self.nodes[idx]
        if not n.append_work:
            self.output.write("no append work to perform")
            return
        m = n.append_work.pop(0)
        resps = m.responses
        m.responses = []
        self.output.write("Processing:\n")
        self.output.write(describe_message(m, default_entry_formatter) + "\n")
        st = HardState(term=m.term, vote=m.vote, commit=m.commit)
        cloned = clone_snapshot(m.snapshot) if m.snapshot is not None else Snapshot()
        process_append(n, st, m.entries, cloned)
        self.output.write("Responses:\n")
        for r in resps:
            self.output.write(describe_message(r, default_entry_formatter) + "\n")
        self.messages.extend(resps)

    def process_apply_thread(self, idx: int) -> None:
        """Processes a single message on the node's "apply" thread."""
        n = self.nodes[idx]
        if not n.apply_work:
            self.output.write("no apply work to perform")
            return
        m = n.apply_work.pop(0)
        resps = m.responses
        m.responses = []
        self.output.write("Processing:\n")
        self.output.write(describe_message(m, default_entry_formatter) + "\n")
        process_apply(n, m.entries)
        self.output.write("Responses:\n")
        for r in resps:
            self.output.write(describe_message(r, default_entry_formatter) + "\n")
        self.messages.extend(resps)

    # stabilize

    def stabilize(self, idxs: list[int]) -> None:
        """Repeatedly runs Ready handling on, and message delivery to, the given nodes (all
        if none are given) until reaching a fixed point."""
        nodes = [self.nodes[i] for i in idxs] if idxs else list(self.nodes)
        while True:
            done = True
            for rn in nodes:
                if rn.raw_node.has_ready():
                    idx = rn.config.id - 1
                    self.output.write(f"> {idx + 1} handling Ready\n")
                    self.with_indent(self.process_ready, idx)
                    done = False
            for rn in nodes:
                id = rn.config.id
                # Grab the messages just to see whether to print the header; deliver_msgs
                # does it again.
                msgs, _ = split_msgs(self.messages, id, -1, False)
                if msgs:
                    self.output.write(f"> {id} receiving messages\n")
                    self.with_indent(self.deliver_msgs, -1, [Recipient(id)])
                    done = False
            for rn in nodes:
                idx = rn.config.id - 1
                if rn.append_work:
                    self.output.write(f"> {idx + 1} processing append thread\n")
                    while rn.append_work:
                        self.with_indent(self.process_append_thread, idx)
                    done = False
            for rn in nodes:
                idx = rn.config.id - 1
                if rn.apply_work:
                    self.output.write(f"> {idx + 1} processing apply thread\n")
                    while rn.apply_work:
                        # Go ignores the error of the apply thread here.
                        self.with_indent(self._apply_ignoring_errors, idx)
                    done = False
            if done:
                return

    def _apply_ignoring_errors(self, idx: int) -> None:
        try:
            self.process_apply_thread(idx)
        except ENV_ERRORS:
            pass

    # raft-state, status, send-snapshot, log-level

    def raft_state(self) -> None:
        """The raft state of every node (leading, following, ...), each from its own view."""
        for n in self.nodes:
            st = n.raw_node.status()
            voter = "(Voter)" if st.id in st.config.voters.ids() else "(Non-Voter)"
            self.output.write(
                f"{st.id}: {go_value(st.raft_state)} {voter} Term:{st.term} Lead:{st.lead}\n"
            )

    def status(self, idx: int) -> None:
        """The progress map of the node (empty unless it leads)."""
        st = self.nodes[idx].raw_node.status()
        self.output.write(progress_map_str(dict(st.progress)))

    def send_snapshot(self, from_idx: int, to_idx: int) -> None:
        """Queues (not delivers) a MsgSnap with the sender's latest state."""
        snap = self.nodes[from_idx].storage.snapshot()
        from_, to = from_idx + 1, to_idx + 1
        from_status = self.nodes[from_idx].raw_node.basic_status()
        msg = Message(
            type=MessageType.MsgSnap, term=from_status.term, from_=from_, to=to, snapshot=snap
        )
        self.messages.append(msg)
        self.output.write(describe_message(msg, None))

    def log_level(self, name: str) -> None:
        for i, s in enumerate(LVL_NAMES):
            if s.lower() == name.lower():
                self.output.lvl = i
                return
        raise EnvError(f"log levels must be either of [{' '.join(LVL_NAMES)}]")


def process_append(n: Node, st: HardState | None, ents: list[Entry], snap: Snapshot | None) -> None:
    """The storage write of a Ready or MsgStorageAppend (order of operations not
    necessarily safe, as upstream notes)."""
    s = n.storage
    if st is not None and not is_empty_hard_state(st):
        s.set_hard_state(st)
    if snap is not None and not is_empty_snap(snap):
        if len(ents) > 0:
            raise EnvError("can't apply snapshot and entries at the same time")
        s.apply_snapshot(snap)
        return
    s.append(ents)


def process_apply(n: Node, ents: list[Entry]) -> None:
    """Applies committed entries to the env's state machine, which appends each entry's
    data (or conf change context) to the previous state, recording every state in the
    node's History."""
    for ent in ents:
        cs: ConfState | None = None
        if ent.type == EntryType.EntryConfChange:
            cc = unmarshal_conf_change(ent.data)
            update = cc.context
            cs = n.raw_node.apply_conf_change(cc)
        elif ent.type == EntryType.EntryConfChangeV2:
            cc2 = unmarshal_conf_change_v2(ent.data)
            cs = n.raw_node.apply_conf_change(cc2)
            update = cc2.context
        else:
            update = ent.data
        last_snap = n.history[-1]
        if cs is None:
            cs = last_snap.metadata.conf_state
        snap = Snapshot(
            last_snap.data + update, SnapshotMetadata(cs, index=ent.index, term=ent.term)
        )
        n.history.append(snap)
