"""Which build of the hot-path modules loads: the mypyc-compiled one, or their Python sources.

The package's build (setup.py) compiles natsd's typed hot modules into extension modules that
sit beside their sources, and Python's import prefers an extension module. ``choose()`` runs
from ``natsd/__init__.py``, before any other natsd module loads, and loads the sources instead:

- when ``NATSD_PURE=1``: the pure-Python path stays tested and benchmarked on the same
  install (``make test`` runs its first tier so);
- when a compiled module's source no longer matches the digest the build recorded
  (``hotpath.sha256``): an edited module of an editable install must never run as its stale
  compiled twin. natsd says so on stderr and runs pure until it is rebuilt.

``natsd.core.build`` reports the outcome (``natsd --version``, ``/varz``).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["PURE_ENV", "choose", "stale_modules"]

PURE_ENV = "NATSD_PURE"
HERE = Path(__file__).resolve().parent
DIGEST = HERE / "hotpath.sha256"


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds a natsd module's ``.py`` source where an extension module of that name exists."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("natsd.") or path is None:
            return None
        name = fullname.rpartition(".")[2]
        for entry in path:
            source = Path(entry) / f"{name}.py"
            if source.is_file() and _has_extension(Path(entry), name):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def _has_extension(directory: Path, name: str) -> bool:
    return any((directory / f"{name}{s}").exists() for s in importlib.machinery.EXTENSION_SUFFIXES)


def stale_modules(package: Path = HERE) -> list[str]:
    """The compiled modules of ``package`` (the natsd directory) whose source differs from
    what the build compiled: none when nothing was compiled."""
    if not _has_extension(package / "core", "subjects"):
        return []
    try:
        lines = (package / DIGEST.name).read_text().splitlines()
    except OSError:
        return []
    stale = []
    for line in lines:
        digest, _, rel = line.partition("  ")
        source = package.parent / rel
        try:
            same = hashlib.sha256(source.read_bytes()).hexdigest() == digest
        except OSError:
            same = False
        if not same:
            stale.append(rel)
    return stale


def choose() -> None:
    """Load the Python sources instead of the compiled modules when asked to or when stale."""
    if any(f is _FINDER for f in sys.meta_path):
        return
    if os.environ.get(PURE_ENV, "").lower() in ("1", "true", "yes"):
        sys.meta_path.insert(0, _FINDER)
        return
    stale = stale_modules()
    if stale:
        shown = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
        print(
            f"natsd: the compiled modules do not match their sources ({shown}); running "
            "pure Python. Rebuild them: make compile, or pip install -e .",
            file=sys.stderr,
        )
        sys.meta_path.insert(0, _FINDER)


_FINDER = _SourcesFirst()
