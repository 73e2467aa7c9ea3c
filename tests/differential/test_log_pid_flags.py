"""The console command's ``-l`` (log file) and ``-P`` (pid file) flags, against nats-server.

Both servers started with ``-l <file> -P <file>``: the pid file holds the process id as
plain digits, the log goes to the file and nothing to stdout/stderr, start-up and shutdown
are logged there.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import require_nats_server

from .harness import ServerProcess, start_server

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

KINDS = ["nats-server", "natsd"]


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="natsd-logpid-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _start(kind: str, d: Path) -> tuple[ServerProcess, Path, Path]:
    if kind == "nats-server":
        require_nats_server()
    log, pid = d / f"{kind}.log", d / f"{kind}.pid"
    return start_server(kind, ["-l", str(log), "-P", str(pid)], log_dir=d), log, pid


def _wait_for(path: Path, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        assert time.monotonic() < deadline, f"{text!r} not in {path}:\n{content}"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", KINDS)
def test_log_and_pid_files(kind: str, workdir: Path) -> None:
    server, log, pid = _start(kind, workdir)
    try:
        assert pid.read_text() == str(server.proc.pid)
        text = _wait_for(log, "Server is ready")
        assert "Listening for client connections on" in text
    finally:
        server.stop()
    assert server.proc.returncode == 0
    _wait_for(log, "Server Exiting..")
    # Everything went to the log file: nothing on stdout/stderr.
    assert server.log() == ""


def test_pid_file_after_exit(workdir: Path) -> None:
    kept = {}
    for kind in KINDS:
        server, _log, pid = _start(kind, workdir)
        server.stop()
        kept[kind] = pid.exists()
    assert kept["nats-server"] is True
    assert kept["natsd"] == kept["nats-server"]
