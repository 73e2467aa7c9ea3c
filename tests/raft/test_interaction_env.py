"""The interaction env's own behaviour where etcd's scripts do not reach: its error outputs
(written as Go's rafttest writes them), the log-level filter of its logger, the indenting of
nested output. The expected texts follow rafttest's Go source (interaction_env*.go)."""

from __future__ import annotations

import pytest
from datadriven import DataDrivenError, TestData, run_text
from interaction_env import InteractionEnv, RedirectLogger
from interaction_handlers import handle

from natsd.raft.logger import RaftPanic


def run_script(text: str) -> int:
    env = InteractionEnv()

    def f(d: TestData) -> str:
        return handle(env, d)

    n, _ = run_text("inline", text, f)
    return n


def test_errors_are_output_even_under_none() -> None:
    script = """
frobnicate 1
----
unknown command

log-level warning
----
log levels must be either of [DEBUG INFO WARN ERROR FATAL NONE]

log-level none
----
ok

add-nodes 1 voters=(1) index=1
----
index must be specified as > 1 due to bootstrap

add-nodes 1 read-only=sometimes
----
invalid read-only option "sometimes"

stabilize log-level=loud
----
log levels must be either of [DEBUG INFO WARN ERROR FATAL NONE]
"""
    assert run_script(script) == 6


# The description of the snapshot of test_handler_errors_and_empty_outputs' nodes.
SNAP = (
    "  Snapshot: Index:2 Term:1 ConfState:Voters:[1 2] VotersOutgoing:[] Learners:[] "
    "LearnersNext:[] AutoLeave:false"
)


def test_handler_errors_and_empty_outputs() -> None:
    script = f"""
log-level none
----
ok

add-nodes 2 voters=(1,2) index=2
----
ok

log-level info
----
ok

raft-log 1
----
log is empty: first index=3, last index=2

compact 1 x
----
strconv.ParseUint: parsing "x": invalid syntax

compact 1 2
----
requested index is unavailable due to compaction

propose 1 foo
----
INFO 1 no leader at term 0; dropping proposal
raft proposal dropped

propose-conf-change 1 v1=true
v2 v3
----
v1 conf change can only have one operation and no transition

propose-conf-change 1 v1=maybe
v2
----
strconv.ParseBool: parsing "maybe": invalid syntax

propose-conf-change 1 transition=sideways
v2
----
unknown transition sideways

propose-conf-change 1 colour=blue
v2
----
unknown command colour

propose-conf-change 1
x
----
unknown token x

report-unreachable 1
----
must specify exactly two node indexes: node on which to report, and reported node

deliver-msgs 1 2
----
no messages

process-append-thread 1
----
no append work to perform

process-apply-thread 1 2
----
> 1 processing apply thread
  no apply work to perform
> 2 processing apply thread
  no apply work to perform

status 1
----
ok

raft-state
----
1: StateFollower (Voter) Term:0 Lead:0
2: StateFollower (Voter) Term:0 Lead:0

send-snapshot 1 2
----
1->2 MsgSnap Term:0 Log:0/0
{SNAP}

deliver-msgs drop=(2)
----
dropped: 1->2 MsgSnap Term:0 Log:0/0
{SNAP}
"""
    assert run_script(script) == 20


def test_script_errors_fail_the_test() -> None:
    """Go's t.Fatal: a malformed directive is an error of the script, not an output."""
    text = """
log-level none
----
ok

add-nodes 1
----
ok

deliver-msgs 1 drop=(1)
----
ok
"""
    with pytest.raises(DataDrivenError, match="can't both deliver and drop msgs to 1"):
        run_script(text)
    with pytest.raises(DataDrivenError, match="unknown message type MsgNope"):
        run_script("deliver-msgs 1 type=MsgNope\n----\nok\n")
    with pytest.raises(DataDrivenError, match="expected exactly one key with no vals"):
        run_script("log-level none\n----\nok\n\nadd-nodes 1\n----\nok\n\npropose 1 a b\n----\nok\n")


def test_redirect_logger_levels_and_format() -> None:
    log = RedirectLogger()
    log.lvl = 1  # INFO
    log.debugf("hidden %d", 1)
    log.info("a", 1, 2)  # Fprintln: a space between every operand
    log.infof("x=%d y=%s", 3, "z")  # a newline is added
    log.warningf("done\n")  # not doubled
    log.errorf("")  # an empty format adds no newline
    assert log.string() == "INFO a 1 2\nINFO x=3 y=z\nWARN done\nERROR "
    log.reset()
    with pytest.raises(RaftPanic, match=r"^bad 7$"):
        log.panicf("bad %d", 7)
    assert log.string() == "FATAL bad 7\n"
    log.reset()
    log.lvl = 5  # NONE: nothing at all, the handlers' writes included
    log.errorf("e")
    log.write("x")
    assert log.quiet()
    assert log.length() == 0


def test_with_indent_flushes_on_error() -> None:
    """Go's withIndent writes the nested output before the error surfaces."""
    env = InteractionEnv()
    env.output.write("top\n")

    def work() -> None:
        env.output.write("one\ntwo")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        env.with_indent(work)
    assert env.output.string() == "top\n  one\n  two\n"
