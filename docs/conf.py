"""Sphinx configuration of natsd's documentation site (``make docs``: warnings are errors).

The pages are Markdown (MyST). ``reference/`` is generated at each build by
``gen_pages.py`` from the code that decides what it describes."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "src"))
sys.path.insert(0, str(DOCS))

import gen_pages  # noqa: E402

gen_pages.write(DOCS)

project = "natsd"
author = "the natsd authors"
copyright = "the natsd authors"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "natsd"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
suppress_warnings: list[str] = []
