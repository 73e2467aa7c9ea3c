"""natsd.hotpath: a compiled module whose source changed since the build is never loaded
(issue 20); the end-to-end checks run on an installed wheel (tests/wheel)."""

from __future__ import annotations

import hashlib
import importlib.machinery
from pathlib import Path

from natsd.hotpath import stale_modules


def _tree(tmp_path: Path, compiled: bool) -> Path:
    pkg = tmp_path / "natsd"
    (pkg / "core").mkdir(parents=True)
    for rel, text in (("natsd/core/subjects.py", "A = 1\n"), ("natsd/router/x.py", "B = 2\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    if compiled:
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        (pkg / "core" / f"subjects{suffix}").write_bytes(b"")
    lines = "".join(
        f"{hashlib.sha256((tmp_path / r).read_bytes()).hexdigest()}  {r}\n"
        for r in ("natsd/core/subjects.py", "natsd/router/x.py")
    )
    (pkg / "hotpath.sha256").write_text(lines)
    return pkg


def test_sources_as_built_are_not_stale(tmp_path: Path) -> None:
    assert stale_modules(_tree(tmp_path, compiled=True)) == []


def test_an_edited_or_removed_source_is_stale(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, compiled=True)
    (tmp_path / "natsd/router/x.py").write_text("B = 3\n")
    assert stale_modules(pkg) == ["natsd/router/x.py"]
    (tmp_path / "natsd/core/subjects.py").unlink()
    assert stale_modules(pkg) == ["natsd/core/subjects.py", "natsd/router/x.py"]


def test_without_compiled_modules_nothing_is_stale(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, compiled=False)
    (tmp_path / "natsd/router/x.py").write_text("B = 3\n")
    assert stale_modules(pkg) == []
