"""The README is the front door: short, and about the product as it is (no work log)."""

from __future__ import annotations

import re

from components import ROOT

PAGES = [ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")]


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) < 300


def test_no_page_names_an_issue() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in PAGES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\b[Ii]ssue \d+", line)
    ]
    assert not found, f"the history belongs in the changelog and commits: {found}"


def test_the_readme_points_at_pages_that_exist() -> None:
    named = re.findall(r"`(docs/[\w./-]+\.md)`", (ROOT / "README.md").read_text())
    assert named and all((ROOT / n).is_file() for n in named), named
