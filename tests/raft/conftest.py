"""Where the Raft conformance scripts are: $NATSD_RAFT_SCRIPTS, else the project's shared
folder ``shared/raft-conformance``, found in the nearest ancestor of the repository that has
it (``/work/main/../shared`` for the main checkout, and the same folder for a worktree under
``/work/wt/*``, whose parent has no ``shared``).

Under NATSD_EXPECT_COMPILED the engine's modules must be the mypyc-compiled ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from datadriven import script_files

import natsd.raft.codec
import natsd.raft.confchange
import natsd.raft.config
import natsd.raft.core
import natsd.raft.describe
import natsd.raft.election
import natsd.raft.follower
import natsd.raft.leader
import natsd.raft.log
import natsd.raft.log_unstable
import natsd.raft.logger
import natsd.raft.quorum
import natsd.raft.rawnode
import natsd.raft.read_only
import natsd.raft.state
import natsd.raft.status
import natsd.raft.storage
import natsd.raft.tracker
import natsd.raft.types

REPO = Path(__file__).resolve().parents[2]
MACHINE_SHARED = Path("/work/shared/raft-conformance")


def scripts_dir() -> Path:
    env = os.environ.get("NATSD_RAFT_SCRIPTS")
    if env:
        return Path(env)
    for parent in REPO.parents:
        candidate = parent / "shared" / "raft-conformance"
        if candidate.is_dir():
            return candidate
    # A clone elsewhere on this machine (CI clones main into a fresh directory).
    if MACHINE_SHARED.is_dir():
        return MACHINE_SHARED
    # Where it would be for the main checkout; the tests then fail saying it is missing.
    return REPO.parent / "shared" / "raft-conformance"


SCRIPTS = scripts_dir()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``script`` runs once per file of its module's ``SCRIPT_SUBDIR`` (one
    pytest item per script, named after it, as datadriven.Walk names its subtests)."""
    if "script" not in metafunc.fixturenames:
        return
    sub = getattr(metafunc.module, "SCRIPT_SUBDIR")  # noqa: B009 (a module constant)
    files = script_files(SCRIPTS / sub)
    if not files:
        raise FileNotFoundError(f"no scripts in {SCRIPTS / sub}")
    metafunc.parametrize("script", files, ids=[p.stem for p in files])


if os.environ.get("NATSD_EXPECT_COMPILED"):
    for _mod in (
        natsd.raft.types,
        natsd.raft.quorum,
        natsd.raft.tracker,
        natsd.raft.confchange,
        natsd.raft.logger,
        natsd.raft.codec,
        natsd.raft.describe,
        natsd.raft.log_unstable,
        natsd.raft.storage,
        natsd.raft.log,
        natsd.raft.state,
        natsd.raft.read_only,
        natsd.raft.config,
        natsd.raft.election,
        natsd.raft.leader,
        natsd.raft.follower,
        natsd.raft.core,
        natsd.raft.status,
        natsd.raft.rawnode,
    ):
        assert (_mod.__file__ or "").endswith(".so"), f"{_mod.__name__} is not compiled"
