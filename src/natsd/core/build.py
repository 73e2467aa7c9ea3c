"""Which build of natsd is running: the mypyc-compiled hot modules, or pure Python.

``natsd --version`` and ``/varz`` (``natsd_build``) say it, since the two differ two to
four times in speed. ``natsd.core.subjects`` is one of the compiled modules: loaded from an
extension module, the rest of the hot path is compiled too (they are built together).
"""

from __future__ import annotations

from typing import Final

from natsd.core import subjects as _probe

__all__ = ["BUILD", "COMPILED"]

COMPILED: Final = not str(_probe.__file__ or "").endswith(".py")
BUILD: Final = "compiled" if COMPILED else "pure"
