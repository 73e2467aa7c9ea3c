"""etcd-io/raft v3.7.0 interaction_test.go: the interaction scripts (``testdata/*.txt``),
byte for byte, each run on a fresh InteractionEnv (``interaction_env``/``interaction_handlers``,
the port of rafttest's). The output of every directive is what the raft group printed
(Ready contents, messages, log lines at the script's log level) and must be etcd's to the
byte. A raft group is built with ``add-nodes`` and driven with ``campaign``, ``propose``,
``propose-conf-change``, ``tick-*``, ``deliver-msgs``, ``process-ready``, ``stabilize``...
"""

from __future__ import annotations

from pathlib import Path

import pytest
from datadriven import TestData, run_test
from interaction_env import InteractionEnv, InteractionOpts
from interaction_handlers import handle

from natsd.raft.rawnode import RawNode

SCRIPT_SUBDIR = "testdata"


def set_randomized_election_timeout(rn: RawNode, v: int) -> None:
    """raft_test.go's SetRandomizedElectionTimeout: fixes the node's randomized election
    timeout (until its next reset) so that a script's ticks are deterministic."""
    rn.raft.randomized_election_timeout = v


def test_interaction_script(script: Path) -> None:
    env = InteractionEnv(
        InteractionOpts(set_randomized_election_timeout=set_randomized_election_timeout)
    )

    def f(d: TestData) -> str:
        return handle(env, d)

    assert run_test(script, f) > 0


# natsd's own scripts in the same format (tests/raft/testdata): histories upstream's scripts
# do not build, such as the Raft paper's Figure 8. Their expected output is this port's (there
# is no upstream output to compare with); it must not change.
NATSD_SCRIPTS = sorted((Path(__file__).parent / "testdata").glob("*.txt"))


@pytest.mark.parametrize("natsd_script", NATSD_SCRIPTS, ids=[p.stem for p in NATSD_SCRIPTS])
def test_natsd_interaction_script(natsd_script: Path) -> None:
    test_interaction_script(natsd_script)


def test_natsd_scripts_exist() -> None:
    assert [p.stem for p in NATSD_SCRIPTS] == ["figure8"]
