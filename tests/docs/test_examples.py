"""Every code block of the README and the site that is a command or a program runs here, as
a reader would run it, so a snippet that stops working fails the suite.

The rules a page's fenced blocks follow:

* Every block names its language. ``sh`` and ``python`` blocks are commands and programs:
  they run, in the page's order, each in a fresh ``bash -euo pipefail`` or ``python``, with
  ``.venv/bin`` first on PATH, from a scratch directory that holds the repository's files
  (a ``./data`` made there is thrown away). Anything else (``text`` for output and
  layouts, ``conf`` for configuration files, ``json``) is shown, not run.
* An HTML comment just before a block changes how it runs (readers never see it):
  ``<!-- example: background wait=URL,... -->`` starts the block and leaves it running
  until the page's last block has run, once each URL answers (``tcp://host:port`` accepts
  a connection, ``http://...`` answers 200); ``<!-- example: skip REASON -->`` does not
  run it (for commands that run for minutes: the reason is listed, and the test holds
  their number down).
* A block fails the page when it exits non-zero or runs past ``TIMEOUT`` seconds.

Runs in ``make test``'s compiled tier (``make install``, which a page runs, is then done
already; on a checkout without the compile it compiles). Needs ports 4222-4225, 6222-6224
and 8222-8225 free, as the pages use nats-server's usual ports.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from components import ROOT

TIMEOUT = 420
RUNNABLE = {"sh", "python"}
SHOWN = {"text", "conf", "json", "{toctree}", "{include}"}
# Pages whose examples run (the generated reference pages have none).
PAGES = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
# Blocks that may be skipped at most, over all pages (long benchmark and soak runs).
MAX_SKIPPED = 12
_FENCE = re.compile(r"^(`{3,})([^\n`]*)$")
_DIRECTIVE = re.compile(r"<!--\s*example:\s*(\w+)\s*(.*?)\s*-->")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mode: str = "run"  # run, background, skip, pytest
    arg: str = ""


def blocks(page: Path) -> list[Block]:
    out: list[Block] = []
    lines = page.read_text().split("\n")
    i = 0
    directive: tuple[str, str] | None = None
    while i < len(lines):
        m = _FENCE.match(lines[i])
        d = _DIRECTIVE.fullmatch(lines[i].strip())
        if d is not None:
            directive = (d.group(1), d.group(2))
            i += 1
            continue
        if m is None:
            if lines[i].strip():
                directive = None
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence):
            j += 1
        b = Block(page, i + 1, info.split()[0] if info else "", "\n".join(lines[i + 1 : j]))
        if directive is not None:
            b.mode, b.arg = directive
        out.append(b)
        directive = None
        i = j + 1
    return out


def test_every_block_names_its_language() -> None:
    bad = [
        f"{b.page.relative_to(ROOT)}:{b.line}"
        for p in PAGES
        for b in blocks(p)
        if b.lang not in RUNNABLE | SHOWN
    ]
    assert not bad, (
        "these blocks name no language or an unknown one: `sh`/`python` run, "
        f"`text`/`conf`/`json` are shown: {bad}"
    )


def test_skipped_blocks_are_few_and_say_why() -> None:
    skipped = [b for p in PAGES for b in blocks(p) if b.mode == "skip"]
    assert all(len(b.arg) >= 10 for b in skipped), [(b.page, b.line) for b in skipped]
    assert len(skipped) <= MAX_SKIPPED, [f"{b.page.name}:{b.line} {b.arg}" for b in skipped]
    modes = {b.mode for p in PAGES for b in blocks(p)}
    assert modes <= {"run", "background", "skip", "pytest"}, modes


def _scratch(tmp: Path) -> Path:
    """A directory that holds the repository's files (links), not its ./data."""
    work = tmp / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in ("data", ".git"):
            (work / entry.name).symlink_to(entry)
    return work


def _ready(url: str) -> bool:
    if url.startswith("tcp://"):
        host, _, port = url[6:].rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            return False
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return int(r.status) == 200
    except OSError:
        return False


def _wait(urls: list[str], proc: subprocess.Popen[bytes], where: str) -> None:
    deadline = time.monotonic() + 60
    while not all(_ready(u) for u in urls):
        assert proc.poll() is None, f"{where}: the background block exited ({proc.returncode})"
        assert time.monotonic() < deadline, f"{where}: not ready within 60 s: {urls}"
        time.sleep(0.1)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NATSD_PURE", None)  # (the pages run natsd as installed)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _argv(b: Block, work: Path) -> list[str]:
    python = str(ROOT / ".venv" / "bin" / "python")
    if b.mode == "pytest":
        tests = work.parent / f"tests{b.line}"
        tests.mkdir()
        (tests / f"test_block{b.line}.py").write_text(b.code + "\n")
        return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                str(tests), str(tests)]  # fmt: skip
    if b.lang == "python":
        script = work.parent / f"block{b.line}.py"
        script.write_text(b.code + "\n")
        return [python, str(script)]
    return ["bash", "-euo", "pipefail", "-c", b.code]


def _ports_free(page: Path, within: float = 30.0) -> None:
    """The ports the page names are free (a previous page's servers may still be
    shutting down: waits ``within`` seconds for them)."""
    text = page.read_text()
    deadline = time.monotonic() + within
    for port in sorted({int(p) for p in re.findall(r"127\.0\.0\.1:(\d{4})\b", text)}):
        while True:
            with socket.socket() as s:
                in_use = s.connect_ex(("127.0.0.1", port)) == 0
            if not in_use:
                break
            assert time.monotonic() < deadline, f"port {port} is in use: {page.name} needs it"
            time.sleep(0.1)


def _group_gone(pgid: int, within: float = 20.0) -> None:
    """Every process of a background block's group has exited (a server the block started
    shuts down after its shell): SIGKILL for what is left after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.killpg(pgid, signal.SIGKILL)
            return
        time.sleep(0.1)


def _runnable_pages() -> list[Path]:
    return [p for p in PAGES if any(b.lang in RUNNABLE for b in blocks(p))]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", _runnable_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    _ports_free(page)
    work = _scratch(tmp_path)
    env = _env()
    background: list[subprocess.Popen[bytes]] = []
    try:
        for b in blocks(page):
            if b.lang not in RUNNABLE or b.mode == "skip":
                continue
            where = f"{page.relative_to(ROOT)}:{b.line}"
            argv = _argv(b, work)
            if b.mode == "background":
                log = open(tmp_path / f"background{b.line}.log", "wb")  # noqa: SIM115
                proc = subprocess.Popen(
                    argv, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
                background.append(proc)
                urls = [u for u in re.sub(r"^wait=", "", b.arg).split(",") if u]
                _wait(urls, proc, where)
                continue
            done = subprocess.run(argv, cwd=work, env=env, capture_output=True, timeout=TIMEOUT)
            out = (done.stdout + done.stderr).decode(errors="replace")
            sys.stdout.write(f"--- {where}\n{out[-4000:]}\n")
            assert done.returncode == 0, f"{where} exited {done.returncode}:\n{out[-4000:]}"
    finally:
        for proc in background:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in background:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            _group_gone(proc.pid)
        shutil.rmtree(work / "data", ignore_errors=True)
        _ports_free(page)  # (its servers gone before the next page starts its own)
