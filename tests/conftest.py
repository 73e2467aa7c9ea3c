"""Suite-wide checks.

``make test-compiled`` runs the suite with NATSD_EXPECT_COMPILED=1 on the compiled install
(``make compile``); this guard makes sure those runs really exercise the mypyc-compiled
modules, not their Python sources (``make test``'s first tier sets NATSD_PURE=1 for those).
"""

from __future__ import annotations

import os

# Imported while the process is young: otherwise hypothesis's pytest plugin imports it in
# its end-of-run summary, when pytest rewrites (parses) it, and after the compiled run's
# long serial step CPython 3.11 failed that parse with "SystemError: AST constructor
# recursion depth mismatch", ending a run whose tests had all passed.
import hypothesis  # noqa: F401

import natsd.cluster.group
import natsd.connection.client
import natsd.protocol.parser
import natsd.storage.wal


def pytest_report_header() -> str:
    kind = "compiled" if natsd.protocol.parser.__file__.endswith(".so") else "pure Python"
    return f"natsd hot path: {kind} ({natsd.protocol.parser.__file__})"


if os.environ.get("NATSD_EXPECT_COMPILED"):
    for mod in (
        natsd.protocol.parser,
        natsd.connection.client,
        natsd.storage.wal,
        natsd.cluster.group,
    ):
        assert (mod.__file__ or "").endswith(".so"), f"{mod.__name__} is not compiled"
