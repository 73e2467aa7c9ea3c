"""The Raft conformance scripts (etcd-io/raft's datadriven files) are a reference component:
``components.raft_scripts_dir()`` says where (``$NATSD_RAFT_SCRIPTS``, else
``../shared/raft-conformance`` relative to the repository root, nothing else). When a
module's ``SCRIPT_SUBDIR`` has no scripts there, its script test fails under CI=true and
skips elsewhere (``components.missing``); the other tests of the module still run.

Under NATSD_EXPECT_COMPILED the engine's modules must be the mypyc-compiled ones."""

from __future__ import annotations

import os
from pathlib import Path

import components
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

SCRIPTS = components.raft_scripts_dir()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``script`` runs once per file of its module's ``SCRIPT_SUBDIR`` (one
    pytest item per script, named after it, as datadriven.Walk names its subtests). Without
    scripts it runs once, as ``scripts-missing``, and the ``script`` fixture fails or skips."""
    if "script" not in metafunc.fixturenames:
        return
    sub = getattr(metafunc.module, "SCRIPT_SUBDIR")  # noqa: B009 (a module constant)
    directory = SCRIPTS / sub
    files = script_files(directory) if directory.is_dir() else []
    if files:
        metafunc.parametrize("script", files, ids=[p.stem for p in files], indirect=True)
    else:
        metafunc.parametrize("script", [directory], ids=["scripts-missing"], indirect=True)


@pytest.fixture
def script(request: pytest.FixtureRequest) -> Path:
    """A script file; for the ``scripts-missing`` placeholder (its directory), fail under
    CI=true and skip elsewhere."""
    path: Path = request.param
    if not path.is_file():
        components.missing(
            "Raft conformance scripts",
            f"no scripts in {path} (put etcd-io/raft's scripts in ../shared/raft-conformance "
            "beside the repository, or set NATSD_RAFT_SCRIPTS)",
        )
    return path


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
