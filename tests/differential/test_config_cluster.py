"""Bad cluster configurations through nats-server and natsd: the same error text.

``nats-server -t`` reports what its config parser finds (``parseCluster``); the checks it
makes when it creates the server (``validateOptions``) and on its flags run only without
``-t``, so those cases start nats-server for real (it exits at once). natsd makes every
check under both, then refuses a cluster that passes them (routes are not wired yet).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_config_cases import FLAG_ERRORS, PARSE_ERRORS, VALIDATION_ERRORS
from components import require_nats_server

pytestmark = pytest.mark.differential

NATSD = [sys.executable, "-m", "natsd"]
# "nats-server: f.conf:1:10: msg" / "natsd: f.conf:1: msg" -> "msg"
_PREFIX = re.compile(r"^(nats-server|natsd): (\S+?:\d+(:\d+)?: )?")


def message(stderr: str) -> str:
    """The first error line without the program and the position (nats-server adds a
    column; natsd names the line only)."""
    first = next(line for line in stderr.splitlines() if line.strip())
    return _PREFIX.sub("", first)


def run(cmd: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=30)


def write(tmp_path: Path, text: str) -> str:
    conf = tmp_path / "f.conf"
    conf.write_text(text + "\n")
    return str(conf)


@pytest.mark.parametrize(("text", "error"), PARSE_ERRORS, ids=[e for _, e in PARSE_ERRORS])
def test_config_parse_errors_match_nats_server_t(text: str, error: str, tmp_path: Path) -> None:
    conf = write(tmp_path, text)
    ref = run([require_nats_server()], "-c", conf, "-t")
    impl = run(NATSD, "-c", conf, "-t")
    assert (ref.returncode, impl.returncode) == (1, 1), (ref.stderr, impl.stderr)
    assert message(ref.stderr) == error, ref.stderr
    assert message(impl.stderr) == error, impl.stderr


@pytest.mark.parametrize(
    ("text", "error"), VALIDATION_ERRORS, ids=[e for _, e in VALIDATION_ERRORS]
)
def test_start_up_errors_match_nats_server(text: str, error: str, tmp_path: Path) -> None:
    conf = write(tmp_path, text + f'\nstore_dir: "{tmp_path / "js"}"')
    ref = run([require_nats_server()], "-c", conf, "-p", "-1")
    impl = run(NATSD, "-c", conf, "-p", "-1")
    assert (ref.returncode, impl.returncode) == (1, 1), (ref.stderr, impl.stderr)
    assert message(ref.stderr) == error, ref.stderr
    assert message(impl.stderr) == error, impl.stderr


@pytest.mark.parametrize(("flags", "error"), FLAG_ERRORS, ids=[e for _, e in FLAG_ERRORS])
def test_flag_errors_match_nats_server(flags: list[str], error: str) -> None:
    ref = run([require_nats_server()], "-p", "-1", *flags)
    impl = run(NATSD, "-p", "-1", *flags)
    assert (ref.returncode, impl.returncode) == (1, 1), (ref.stderr, impl.stderr)
    assert message(ref.stderr) == error, ref.stderr
    assert message(impl.stderr) == error, impl.stderr


def test_a_valid_cluster_passes_nats_server_and_natsd(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        "server_name: s1\ncluster {\n  name: c1\n  listen: 127.0.0.1:-1\n"
        '  routes: ["nats-route://u:p@127.0.0.1:6222", "nats://127.0.0.1:6223"]\n'
        "  authorization { user: u, password: p, timeout: 1 }\n"
        "  pool_size: 1, compression: accept, no_advertise: true, connect_retries: 2\n}",
    )
    ref = run([require_nats_server()], "-c", conf, "-t")
    assert ref.returncode == 0, ref.stderr
    impl = run(NATSD, "-c", conf, "-t")
    assert impl.returncode == 0, impl.stderr
