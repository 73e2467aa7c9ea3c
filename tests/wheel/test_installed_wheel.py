"""natsd as a user installs it: ``pip install natsd-*.whl`` into a fresh virtual
environment (``make wheel-smoke`` builds the wheel the way pip builds it, isolated). The
server runs compiled, from site-packages; the pytest plugin serves this suite; and an
edited module of the install, or ``NATSD_PURE=1``, runs pure Python instead (issue 20)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

from nats.aio.client import Client
from nats.js.api import StreamConfig

import natsd
from natsd.core.build import BUILD

# tests/wheel runs apart from the suite (its own rootdir, no root conftest.py putting tests/
# on sys.path): the suite's port helper comes from tests/ by path. tests/ holds no natsd
# sources, so the package under test stays the installed one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ports import free_port

SITE = Path(sysconfig.get_paths()["platlib"]).resolve()
BIN = Path(sys.executable).parent


def test_the_installed_package_is_compiled() -> None:
    assert Path(natsd.__file__).resolve().is_relative_to(SITE)
    assert BUILD == "compiled"
    for name in ("core/subjects", "protocol/parser", "cluster/group", "storage/filestore"):
        assert any(Path(natsd.__file__).parent.glob(f"{name}.*.so")), name
    out = subprocess.run([BIN / "natsd", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith(", compiled)"), out


async def test_the_natsd_command_serves_jetstream(tmp_path: Path) -> None:
    port, http = free_port(), free_port()
    cmd = [BIN / "natsd", "-js", "-sd", str(tmp_path), "-a", "127.0.0.1", "-p", str(port),
           "-m", str(http)]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http}/varz", timeout=1) as r:
                    varz = json.load(r)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "natsd did not start"
                time.sleep(0.05)
        assert varz["natsd_build"] == "compiled"
        nc = Client()
        await nc.connect(f"nats://127.0.0.1:{port}")
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="S", subjects=["s.>"]))
        for i in range(100):
            await js.publish("s.x", b"%d" % i)
        msg = await js.get_msg("S", 100)
        assert msg.data == b"99"
        await nc.close()
        # the console's page and vendored libraries are in the wheel
        for path in ("console", "console/app.js", "console/vendor/uPlot.esm.js"):
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/{path}", timeout=5) as r:
                assert r.status == 200 and len(r.read()) > 100, path
    finally:
        proc.terminate()
        proc.wait(10)


async def test_the_plugin_s_client_fixture(natsd_client: Client) -> None:
    js = natsd_client.jetstream()
    await js.add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"]))
    ack = await js.publish("orders.1", b"one")
    assert (ack.stream, ack.seq) == ("ORDERS", 1)


def _build_of(pythonpath: Path | None, **env: str) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k != "NATSD_PURE"} | env
    if pythonpath is not None:
        e["PYTHONPATH"] = str(pythonpath)
    code = "from natsd.core.build import BUILD; import natsd.protocol.parser as p; " \
           "print(BUILD, p.__file__)"  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)


def test_natsd_pure_runs_the_python_sources() -> None:
    out = _build_of(None, NATSD_PURE="1")
    build, path = out.stdout.split()
    assert build == "pure" and path.endswith("parser.py"), out


def test_an_edited_compiled_module_runs_pure_and_says_so(tmp_path: Path) -> None:
    # a copy of the install whose parser.py no longer matches what was compiled
    shutil.copytree(SITE / "natsd", tmp_path / "natsd")
    for lib in SITE.glob("natsd_hotpath__mypyc*"):
        shutil.copy(lib, tmp_path)
    assert _build_of(tmp_path).stdout.split()[0] == "compiled"
    with (tmp_path / "natsd" / "protocol" / "parser.py").open("a") as f:
        f.write("\n# edited\n")
    out = _build_of(tmp_path)
    build, path = out.stdout.split()
    assert build == "pure" and path == str(tmp_path / "natsd" / "protocol" / "parser.py"), out
    assert "do not match their sources (natsd/protocol/parser.py)" in out.stderr
