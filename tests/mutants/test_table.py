"""The mutant table of ``make mutants`` (``tests/mutants/run.py``) still fits the code: every
mutant's text to replace occurs exactly once in its file, and every test the kill suite
selects exists. Cheap, so a moved line is noticed in the ordinary suite, not only when the
mutants run."""

from __future__ import annotations

import pytest

from mutants.run import KILL_SUITE, MUTANTS, Mutant, TableError, check_table, mutated_text


def test_every_mutant_applies_and_every_kill_suite_test_exists() -> None:
    check_table()
    assert len(MUTANTS) >= 6
    assert {tier for tier, _ in KILL_SUITE} == {
        "deterministic",
        "simulated",
        "in-process",
        "real-process",
    }


def test_a_mutant_whose_text_moved_is_refused() -> None:
    gone = Mutant("gone", "natsd/raft/quorum.py", "no such line\n", "x\n", "nothing")
    with pytest.raises(TableError, match="occurs 0 times"):
        mutated_text(gone)
    twice = Mutant("twice", "natsd/raft/quorum.py", "return", "x", "nothing")
    with pytest.raises(TableError, match="must be exactly once"):
        mutated_text(twice)
