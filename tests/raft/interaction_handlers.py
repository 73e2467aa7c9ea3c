"""Ports etcd-io/raft v3.7.0 rafttest/interaction_env_handler*.go (Apache-2.0): the script
side of the interaction env, :func:`handle` (Go's ``InteractionEnv.Handle``) and the
parsing of each directive's arguments.

Errors in the script itself (a bad argument: Go's ``t.Fatal``) raise DataDrivenError and
fail the test; errors from the raft nodes and the storage are written to the output, as
upstream does.
"""

from __future__ import annotations

from collections.abc import Callable

from datadriven import DataDrivenError, TestData, parse_bool, parse_int, parse_uint
from interaction_env import (
    ENV_ERRORS,
    ConfigStub,
    EnvError,
    InteractionEnv,
    Recipient,
)

from natsd.raft.read_only import ReadOnlyOption
from natsd.raft.types import (
    ConfChange,
    ConfChangeI,
    ConfChangeTransition,
    ConfChangeV2,
    MessageType,
    Snapshot,
    conf_changes_from_string,
)


def handle(env: InteractionEnv, d: TestData) -> str:
    """The entry point for data-driven interaction testing: runs one directive and returns
    its output ("ok" for none). The highest log level (NONE) suppresses all output, that
    of the handlers included, but errors are always reported."""
    env.output.reset()
    err: str | None = None
    h = _HANDLERS.get(d.cmd)
    try:
        if h is None:
            err = "unknown command"
        else:
            h(env, d)
    except ENV_ERRORS as e:
        err = str(e)
    if err is not None:
        if env.output.quiet():
            return err
        env.output.write(err)
    if env.output.length() == 0:
        return "ok"
    return env.output.string()


def first_as_int(d: TestData) -> int:
    if not d.cmd_args:
        raise d.fatal("missing node argument")
    return parse_int(d.cmd_args[0].key)


def first_as_node_idx(d: TestData) -> int:
    return first_as_int(d) - 1


def node_idxs(d: TestData) -> list[int]:
    """The node indexes (id - 1) of the arguments without values."""
    return [parse_int(a.key) - 1 for a in d.cmd_args if len(a.vals) == 0]


def _breakpoint(env: InteractionEnv, d: TestData) -> None:
    """A place to set a debugger breakpoint from a script (`_breakpoint:` directive)."""


def handle_add_nodes(env: InteractionEnv, d: TestData) -> None:
    """add-nodes <number-of-nodes-to-add> voters=(1 2 3) learners=(4 5) index=2 content=foo
    async-storage-writes=true ..."""
    n = first_as_int(d)
    snap = Snapshot()
    cs = snap.metadata.conf_state
    cfg = ConfigStub()
    for arg in d.cmd_args[1:]:
        for i in range(len(arg.vals)):
            k = arg.key
            if k == "voters":
                cs.voters.append(arg.scan_uint(i))
            elif k == "learners":
                cs.learners.append(arg.scan_uint(i))
            elif k == "inflight":
                cfg.max_inflight_msgs = arg.scan_int(i)
            elif k == "index":
                snap.metadata.index = arg.scan_uint(i)
                cfg.applied = snap.metadata.index
            elif k == "content":
                snap.data = arg.scan_str(i).encode()
            elif k == "async-storage-writes":
                cfg.async_storage_writes = arg.scan_bool(i)
            elif k == "prevote":
                cfg.pre_vote = arg.scan_bool(i)
            elif k == "checkquorum":
                cfg.check_quorum = arg.scan_bool(i)
            elif k == "max-committed-size-per-ready":
                cfg.max_committed_size_per_ready = arg.scan_uint(i)
            elif k == "disable-conf-change-validation":
                cfg.disable_conf_change_validation = arg.scan_bool(i)
            elif k == "read-only":
                v = arg.vals[i]
                if v == "safe":
                    cfg.read_only_option = ReadOnlyOption.ReadOnlySafe
                elif v == "lease-based":
                    cfg.read_only_option = ReadOnlyOption.ReadOnlyLeaseBased
                else:
                    raise EnvError(f'invalid read-only option "{v}"')
            elif k == "step-down-on-removal":
                cfg.step_down_on_removal = arg.scan_bool(i)
            elif k == "max-size-per-msg":
                # natsd's addition, for its own scripts (tests/raft/testdata): upstream's
                # add-nodes always uses an unlimited size.
                cfg.max_size_per_msg = arg.scan_uint(i)
    env.add_nodes(n, cfg, snap)


def handle_campaign(env: InteractionEnv, d: TestData) -> None:
    """campaign <id-of-candidate>"""
    env.campaign(first_as_node_idx(d))


def handle_compact(env: InteractionEnv, d: TestData) -> None:
    """compact <id> <new-first-index>"""
    idx = first_as_node_idx(d)
    try:
        new_first_index = parse_uint(d.cmd_args[1].key)
    except DataDrivenError as e:
        raise EnvError(str(e)) from None  # Go returns the strconv error
    env.compact(idx, new_first_index)


def handle_deliver_msgs(env: InteractionEnv, d: TestData) -> None:
    """deliver-msgs <id> type=MsgApp drop=(2,3): deliver the messages for the given
    recipients (of the given type), dropping those to the drop recipients."""
    typ = -1
    rs: list[Recipient] = []
    for arg in d.cmd_args:
        if len(arg.vals) == 0:
            rs.append(Recipient(parse_uint(arg.key)))
        for i in range(len(arg.vals)):
            if arg.key == "drop":
                id = arg.scan_uint(i)
                if any(r.id == id for r in rs):
                    raise d.fatal(f"can't both deliver and drop msgs to {id}")
                rs.append(Recipient(id, drop=True))
            elif arg.key == "type":
                s = arg.scan_str(i)
                if s not in MessageType.__members__:
                    raise d.fatal(f"unknown message type {s}")
                typ = MessageType[s]
    if env.deliver_msgs(typ, rs) == 0:
        env.output.write("no messages\n")


def handle_forget_leader(env: InteractionEnv, d: TestData) -> None:
    """forget-leader <id>"""
    env.forget_leader(first_as_node_idx(d))


def handle_log_level(env: InteractionEnv, d: TestData) -> None:
    """log-level WARN. NONE disables all output, including from the harness (but errors)."""
    env.log_level(d.cmd_args[0].key)


def _each_node(env: InteractionEnv, d: TestData, what: str, f: Callable[[int], None]) -> None:
    idxs = node_idxs(d)
    for idx in idxs:
        if len(idxs) > 1:
            env.output.write(f"> {idx + 1} {what}\n")
            env.with_indent(f, idx)
        else:
            f(idx)


def handle_process_append_thread(env: InteractionEnv, d: TestData) -> None:
    """process-append-thread 3"""
    _each_node(env, d, "processing append thread", env.process_append_thread)


def handle_process_apply_thread(env: InteractionEnv, d: TestData) -> None:
    """process-apply-thread 3"""
    _each_node(env, d, "processing apply thread", env.process_apply_thread)


def handle_process_ready(env: InteractionEnv, d: TestData) -> None:
    """process-ready 3"""
    _each_node(env, d, "handling Ready", env.process_ready)


def handle_propose(env: InteractionEnv, d: TestData) -> None:
    """propose 1 foo"""
    idx = first_as_node_idx(d)
    if len(d.cmd_args) != 2 or len(d.cmd_args[1].vals) > 0:
        raise d.fatal(f"expected exactly one key with no vals: {d.cmd_args[1:]}")
    env.propose(idx, d.cmd_args[1].key.encode())


def handle_propose_conf_change(env: InteractionEnv, d: TestData) -> None:
    """propose-conf-change node_id [v1=<bool>] [transition=<string>], with the changes
    (ConfChangesFromString format, e.g. ``v1 v3 l4 r5``) as input. v1 makes one change at
    a time (false by default); transition is auto (the default), explicit or implicit."""
    idx = first_as_node_idx(d)
    v1 = False
    transition = ConfChangeTransition.ConfChangeTransitionAuto
    for arg in d.cmd_args[1:]:
        for val in arg.vals:
            if arg.key == "v1":
                try:
                    v1 = parse_bool(val)
                except DataDrivenError as e:
                    raise EnvError(str(e)) from None  # Go returns the strconv error
            elif arg.key == "transition":
                if val == "auto":
                    transition = ConfChangeTransition.ConfChangeTransitionAuto
                elif val == "implicit":
                    transition = ConfChangeTransition.ConfChangeTransitionJointImplicit
                elif val == "explicit":
                    transition = ConfChangeTransition.ConfChangeTransitionJointExplicit
                else:
                    raise EnvError(f"unknown transition {val}")
            else:
                raise EnvError(f"unknown command {arg.key}")
    ccs = conf_changes_from_string(d.input)
    c: ConfChangeI
    if v1:
        if len(ccs) > 1 or transition != ConfChangeTransition.ConfChangeTransitionAuto:
            raise EnvError("v1 conf change can only have one operation and no transition")
        c = ConfChange(type=ccs[0].type, node_id=ccs[0].node_id)
    else:
        c = ConfChangeV2(transition=transition, changes=ccs)
    env.propose_conf_change(idx, c)


def handle_raft_log(env: InteractionEnv, d: TestData) -> None:
    """raft-log 3"""
    env.raft_log(first_as_node_idx(d))


def handle_raft_state(env: InteractionEnv, d: TestData) -> None:
    """raft-state: each node's state (leading, following, ...) from its own view."""
    env.raft_state()


def handle_report_unreachable(env: InteractionEnv, d: TestData) -> None:
    """report-unreachable 1 2: calls <1st>.ReportUnreachable(<2nd>)."""
    sl = node_idxs(d)
    if len(sl) != 2:
        raise EnvError(
            "must specify exactly two node indexes: node on which to report, and reported node"
        )
    env.report_unreachable(sl[0], sl[1])


def handle_send_snapshot(env: InteractionEnv, d: TestData) -> None:
    """send-snapshot 1 3: queues (does not deliver) a snapshot from the 1st to the 2nd."""
    idxs = node_idxs(d)
    if len(idxs) != 2:
        raise d.fatal(f"expected 2 node indexes, got {len(idxs)}")
    try:
        env.send_snapshot(idxs[0], idxs[1])
    except ENV_ERRORS:
        pass  # Go's Handle drops this handler's error


def handle_set_randomized_election_timeout(env: InteractionEnv, d: TestData) -> None:
    """set-randomized-election-timeout 1 timeout=5 (reset when the node changes state)."""
    idx = first_as_node_idx(d)
    timeout = d.scan_int("timeout")
    if timeout == 0:
        raise d.fatal("timeout must not be zero")
    fn = env.options.set_randomized_election_timeout
    if fn is None:
        raise d.fatal("no SetRandomizedElectionTimeout in the env's options")
    fn(env.nodes[idx].raw_node, timeout)


def handle_stabilize(env: InteractionEnv, d: TestData) -> None:
    """stabilize 1 4 [log-level=none]: deliver messages to and handle the Ready of the given
    nodes (all if none are given) until no more work is to be done."""
    idxs = node_idxs(d)  # skips key=value args
    old = env.output.lvl
    try:
        for arg in d.cmd_args:
            for i in range(len(arg.vals)):
                if arg.key == "log-level":
                    env.log_level(arg.scan_str(i))
        env.stabilize(idxs)
    finally:
        env.output.lvl = old


def handle_status(env: InteractionEnv, d: TestData) -> None:
    """status 5"""
    env.status(first_as_node_idx(d))


def handle_tick_election(env: InteractionEnv, d: TestData) -> None:
    """tick-election 3: an election timeout's worth of ticks (beware the randomized
    timeout)."""
    idx = first_as_node_idx(d)
    env.tick(idx, env.nodes[idx].config.election_tick)


def handle_tick_heartbeat(env: InteractionEnv, d: TestData) -> None:
    """tick-heartbeat 3"""
    idx = first_as_node_idx(d)
    env.tick(idx, env.nodes[idx].config.heartbeat_tick)


def handle_transfer_leadership(env: InteractionEnv, d: TestData) -> None:
    """transfer-leadership from=1 to=4"""
    from_ = d.scan_uint("from")
    to = d.scan_uint("to")
    if from_ == 0 or from_ > len(env.nodes):
        raise d.fatal('expected valid "from" argument')
    if to == 0 or to > len(env.nodes):
        raise d.fatal('expected valid "to" argument')
    env.transfer_leadership(from_, to)


_HANDLERS: dict[str, Callable[[InteractionEnv, TestData], None]] = {
    "_breakpoint": _breakpoint,
    "add-nodes": handle_add_nodes,
    "campaign": handle_campaign,
    "compact": handle_compact,
    "deliver-msgs": handle_deliver_msgs,
    "process-ready": handle_process_ready,
    "process-append-thread": handle_process_append_thread,
    "process-apply-thread": handle_process_apply_thread,
    "log-level": handle_log_level,
    "raft-log": handle_raft_log,
    "raft-state": handle_raft_state,
    "set-randomized-election-timeout": handle_set_randomized_election_timeout,
    "stabilize": handle_stabilize,
    "status": handle_status,
    "tick-election": handle_tick_election,
    "tick-heartbeat": handle_tick_heartbeat,
    "transfer-leadership": handle_transfer_leadership,
    "forget-leader": handle_forget_leader,
    "send-snapshot": handle_send_snapshot,
    "propose": handle_propose,
    "propose-conf-change": handle_propose_conf_change,
    "report-unreachable": handle_report_unreachable,
}
