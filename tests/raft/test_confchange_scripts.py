"""etcd-io/raft v3.7.0 confchange/datadriven_test.go: the confchange scripts, byte for byte.

The commands are ``simple`` (a simple conf change, no joint consensus), ``enter-joint``
(optionally ``autoleave=true``) and ``leave-joint``. The first two take a list of changes
as input: ``vn`` (make n a voter), ``ln`` (make n a learner), ``rn`` (remove n) and ``un``
(update n). The output is the resulting configuration and progress map, or the error.
The Changer's LastIndex goes up by one with every command.
"""

from __future__ import annotations

from pathlib import Path

from datadriven import TestData, run_test

from natsd.raft.confchange import Changer, ConfChangeError
from natsd.raft.tracker import ProgressTracker, progress_map_str
from natsd.raft.types import conf_changes_from_string

SCRIPT_SUBDIR = "confchange/testdata"


def test_confchange_script(script: Path) -> None:
    c = Changer(ProgressTracker(10, 0), 0)  # LastIndex incremented with each cmd

    def handle(d: TestData) -> str:
        try:
            return _run(c, d)
        finally:
            c.last_index += 1

    assert run_test(script, handle) > 0


def _run(c: Changer, d: TestData) -> str:
    try:
        ccs = conf_changes_from_string(d.input)
    except ValueError as e:
        # The Go harness parses the tokens itself with the same messages.
        return str(e)
    try:
        if d.cmd == "simple":
            cfg, trk = c.simple(ccs)
        elif d.cmd == "enter-joint":
            auto_leave = False
            if len(d.cmd_args) > 0:
                auto_leave = d.scan_bool("autoleave")
            cfg, trk = c.enter_joint(auto_leave, ccs)
        elif d.cmd == "leave-joint":
            if len(ccs) > 0:
                raise ConfChangeError("this command takes no input")
            cfg, trk = c.leave_joint()
        else:
            return "unknown command"
    except ConfChangeError as e:
        return f"{e}\n"
    c.tracker.config, c.tracker.progress = cfg, trk
    return f"{c.tracker.config}\n{progress_map_str(c.tracker.progress)}"
