"""natsd says which build runs: compiled (mypyc) or pure Python (issue 20)."""

from __future__ import annotations

import os
import subprocess
import sys

from natsd.core.build import BUILD, COMPILED


def test_the_build_is_the_one_the_tier_expects() -> None:
    # make test-compiled sets NATSD_EXPECT_COMPILED=1; make test's pure tier NATSD_PURE=1
    assert bool(os.environ.get("NATSD_EXPECT_COMPILED")) == COMPILED
    assert ("compiled" if COMPILED else "pure") == BUILD


def test_version_says_the_build() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "natsd", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().endswith(f", {BUILD})"), out
