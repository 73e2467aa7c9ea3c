"""The console's front-end libraries are npm's files, unmodified: each vendored copy in
``src/natsd/monitor/console_page/vendor`` equals its file in the package
``console/package-lock.json`` pins (installed by ``make node-modules``; ``make
console-vendor`` refreshes the copies)."""

from __future__ import annotations

from pathlib import Path

import pytest
from components import ROOT, require_component

VENDOR = ROOT / "src" / "natsd" / "monitor" / "console_page" / "vendor"
PACKAGES = ROOT / "console" / "node_modules"
COPIES = {
    "htm-preact-standalone.module.js": "htm/preact/standalone.module.js",
    "uPlot.esm.js": "uplot/dist/uPlot.esm.js",
    "uPlot.min.css": "uplot/dist/uPlot.min.css",
    "LICENSE-htm": "htm/LICENSE",
    "LICENSE-preact": "preact/LICENSE",
    "LICENSE-uplot": "uplot/LICENSE",
}


@pytest.mark.parametrize("copy", sorted(COPIES))
def test_vendored_file_is_the_package_s(copy: str) -> None:
    original = PACKAGES / COPIES[copy]
    require_component(
        "the console's npm packages",
        original.is_file(),
        f"no {original} (run `make node-modules`: npm ci in console/)",
    )
    assert (VENDOR / copy).read_bytes() == original.read_bytes()


def test_nothing_else_is_vendored() -> None:
    assert {p.name for p in VENDOR.iterdir()} == set(COPIES)


def test_the_console_serves_each_vendored_library() -> None:
    from natsd.monitor import console

    served = {k.removeprefix("vendor/") for k in console._FILES if k.startswith("vendor/")}
    assert served == {c for c in COPIES if not c.startswith("LICENSE")}
    assert all((Path(VENDOR.parent) / k).is_file() for k in console._FILES)
