"""The command line and configuration files, checked over the network."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import nats.errors
import pytest
from ports import free_port

from .conftest import (
    LISTEN_RE,
    RawClient,
    get_json,
    only_natsd,
    server_cmd,
)


def write(tmp_dir: str, name: str, text: str) -> str:
    path = os.path.join(tmp_dir, name)
    Path(path).write_text(textwrap.dedent(text))
    return path


async def test_config_file_settings_take_effect(tmp_dir, spawn, connect) -> None:
    port, mport = free_port(), free_port()
    conf = write(
        tmp_dir,
        "server.conf",
        f"""
        # nats-server syntax: comments, = and : separators, quoted and bare strings
        listen: 127.0.0.1:{port}
        http_port = {mport}
        max_payload: 2048
        authorization {{
          users = [
            {{ user: alice, password: "alice-pw" }}
            {{ user: bob, password: bob-pw }}
          ]
        }}
    """,
    )
    sp = await spawn("-c", conf).wait_ready()
    assert sp.port == port
    assert f"127.0.0.1:{port}" in sp.log()

    raw = await RawClient.open(port)
    assert raw.info["max_payload"] == 2048
    assert raw.info["auth_required"] is True
    raw.close()

    nc = await connect(f"nats://127.0.0.1:{port}", user="alice", password="alice-pw")
    assert nc.max_payload == 2048
    sub = await nc.subscribe("cfg")
    await nc.publish("cfg", b"x" * 2048)
    assert len((await sub.next_msg(timeout=2)).data) == 2048
    with pytest.raises(nats.errors.MaxPayloadError):
        await nc.publish("cfg", b"x" * 2049)
    await connect(f"nats://127.0.0.1:{port}", user="bob", password="bob-pw")
    with pytest.raises(nats.errors.Error) as ei:
        await connect(f"nats://127.0.0.1:{port}")
    assert "Authorization Violation" in str(ei.value)

    varz = await get_json(f"http://127.0.0.1:{mport}/varz")
    assert varz["max_payload"] == 2048
    assert varz["port"] == port
    assert varz["auth_required"] is True


async def test_config_accounts_and_no_auth_user(tmp_dir, spawn, connect) -> None:
    conf = write(
        tmp_dir,
        "accounts.conf",
        """
        listen: "127.0.0.1:-1"
        accounts {
          SALES: { users: [ {user: s1, password: p}, {user: s2, password: p} ] }
          OPS: { users = [ {user: o1, password: p} ] }
        }
        no_auth_user: s1
    """,
    )
    sp = await spawn("-c", conf).wait_ready()
    url = f"nats://127.0.0.1:{sp.port}"
    anon = await connect(url)
    s2 = await connect(url, user="s2", password="p")
    o1 = await connect(url, user="o1", password="p")
    sub_s2 = await s2.subscribe("news")
    sub_o1 = await o1.subscribe("news")
    await s2.flush()
    await o1.flush()
    await anon.publish("news", b"for sales")
    await anon.flush()
    assert (await sub_s2.next_msg(timeout=2)).data == b"for sales"
    await o1.flush()
    await asyncio.sleep(0.05)
    assert sub_o1.pending_msgs == 0


async def test_config_permissions(tmp_dir, spawn, connect) -> None:
    conf = write(
        tmp_dir,
        "perms.conf",
        """
        listen: "127.0.0.1:-1"
        authorization {
          users = [
            { user: ro, password: ro, permissions: { publish: { deny: ">" }, subscribe: "data.>" } }
            { user: rw, password: rw }
          ]
        }
    """,
    )
    sp = await spawn("-c", conf).wait_ready()
    url = f"nats://127.0.0.1:{sp.port}"
    ro = await connect(url, user="ro", password="ro")
    rw = await connect(url, user="rw", password="rw")
    sub = await ro.subscribe("data.x")
    await ro.flush()
    await ro.publish("data.x", b"nope")
    await ro.flush()
    await rw.publish("data.x", b"yes")
    await rw.flush()
    assert (await sub.next_msg(timeout=2)).data == b"yes"
    await asyncio.sleep(0.05)
    assert sub.pending_msgs == 0
    assert any("permissions violation for publish" in str(e).lower() for e in ro.test_errors)


async def test_flags_override_config(tmp_dir, spawn) -> None:
    port, mport = free_port(), free_port()
    conf = write(
        tmp_dir,
        "base.conf",
        f"""
        listen: 127.0.0.1:{free_port()}
        http_port: {free_port()}
        max_payload: 4096
    """,
    )
    sp = await spawn("-c", conf, "-p", str(port), "-m", str(mport)).wait_ready()
    assert sp.port == port
    raw = await RawClient.open(port)
    assert raw.info["max_payload"] == 4096
    raw.close()
    varz = await get_json(f"http://127.0.0.1:{mport}/varz")
    assert varz["port"] == port


@only_natsd
async def test_cosmetic_config_key_warns_but_starts(tmp_dir, spawn, connect) -> None:
    conf = write(
        tmp_dir,
        "cosmetic.conf",
        """
        listen: "127.0.0.1:-1"
        logtime: false
    """,
    )
    sp = await spawn("-c", conf).wait_ready()
    log = sp.log()
    warn = [ln for ln in log.splitlines() if "logtime" in ln]
    assert warn, log
    assert "[WRN]" in warn[0] and "has no effect in natsd" in warn[0]
    nc = await connect(f"nats://127.0.0.1:{sp.port}")
    await nc.flush()
    assert nc.is_connected


async def test_unknown_config_key_is_refused(tmp_dir) -> None:
    """nats-server and natsd both refuse a key nats-server does not know, and never start."""
    conf = write(tmp_dir, "unknown.conf", "port: -1\nsome_future_option: 42\n")
    res = await asyncio.to_thread(
        subprocess.run, [*server_cmd(), "-c", conf], capture_output=True, timeout=30
    )
    assert res.returncode == 1
    assert b'unknown field "some_future_option"' in res.stderr


@only_natsd
async def test_unsupported_config_key_is_refused_at_startup(tmp_dir) -> None:
    """A key nats-server honours and natsd cannot (here websockets: natsd would not listen
    for them) stops natsd with one line naming it, instead of a server that looks fine."""
    conf = write(tmp_dir, "ws.conf", "port: -1\nwebsocket { port: 8080 }\n")
    res = await asyncio.to_thread(
        subprocess.run, [*server_cmd(), "-c", conf], capture_output=True, timeout=30
    )
    assert res.returncode == 1
    assert res.stderr.decode().splitlines() == [
        f'natsd: {conf}:2: config key "websocket" is not supported by natsd yet'
    ]


async def test_missing_tls_files_stop_the_server_naming_them(tmp_dir) -> None:
    """nats-server's own words for a certificate that is not there, at start-up."""
    conf = write(tmp_dir, "tls.conf", 'port: -1\ntls { cert_file: "c.pem", key_file: "k.pem" }\n')
    res = await asyncio.to_thread(
        subprocess.run, [*server_cmd(), "-c", conf], capture_output=True, timeout=30
    )
    assert res.returncode == 1
    assert res.stderr.decode().splitlines() == [
        f"natsd: {conf}:2: error parsing X509 certificate/key pair: open c.pem: no such file"
        " or directory"
    ]


async def test_max_payload_above_max_pending_is_refused(tmp_dir) -> None:
    conf = write(
        tmp_dir,
        "bad.conf",
        """
        listen: "127.0.0.1:-1"
        max_pending: 262144
    """,
    )
    proc = await asyncio.create_subprocess_exec(
        *server_cmd(),
        "-c",
        conf,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), 1.5)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail("server started with max_payload > max_pending")
    assert proc.returncode == 1
    assert b"max_payload (1048576) cannot be higher than max_pending (262144)" in err


async def test_random_port(spawn, connect) -> None:
    sp = await spawn("-a", "127.0.0.1", "--port", "-1").wait_ready()
    m = LISTEN_RE.search(sp.log())
    assert m is not None
    port = int(m.group(2))
    assert port > 0 and port != 4222
    nc = await connect(f"nats://127.0.0.1:{port}")
    await nc.flush()
    # A second one gets another port.
    sp2 = await spawn("-a", "127.0.0.1", "-p", "-1").wait_ready()
    assert sp2.port != port


async def test_user_pass_flags(spawn, connect) -> None:
    sp = await spawn("-a", "127.0.0.1", "-p", "-1", "--user", "admin", "--pass", "pw").wait_ready()
    url = f"nats://127.0.0.1:{sp.port}"
    nc = await connect(url, user="admin", password="pw")
    await nc.flush()
    with pytest.raises(nats.errors.Error) as ei:
        await connect(url, user="admin", password="wrong")
    assert "Authorization Violation" in str(ei.value)


async def test_auth_token_flag(spawn, connect) -> None:
    sp = await spawn("-a", "127.0.0.1", "-p", "-1", "--auth", "s3cr3t").wait_ready()
    url = f"nats://127.0.0.1:{sp.port}"
    nc = await connect(url, token="s3cr3t")
    await nc.flush()
    with pytest.raises(nats.errors.Error) as ei:
        await connect(url)
    assert "Authorization Violation" in str(ei.value)


async def test_monitor_port_flag(spawn) -> None:
    mport = free_port()
    sp = await spawn("-a", "127.0.0.1", "-p", "-1", "-m", str(mport)).wait_ready()
    varz = await get_json(f"http://127.0.0.1:{mport}/varz")
    assert varz["port"] == sp.port
    assert varz["http_port"] == mport


async def test_bad_flag_exits_nonzero(tmp_dir) -> None:
    res = await asyncio.to_thread(
        subprocess.run, [*server_cmd(), "--no-such-flag"], capture_output=True, timeout=10
    )
    # nats-server prints usage and exits 0 here; natsd exits 1. Either way it does not run.
    assert b"flag provided but not defined: -no-such-flag" in res.stderr


async def test_missing_config_file_exits_nonzero(tmp_dir) -> None:
    res = await asyncio.to_thread(
        subprocess.run,
        [*server_cmd(), "-c", os.path.join(tmp_dir, "absent.conf")],
        capture_output=True,
        timeout=10,
    )
    assert res.returncode != 0


@only_natsd
async def test_unread_stderr_pipe_never_blocks_the_server(tmp_dir) -> None:
    """Harnesses read a server's stderr only until "Server is ready". With -D every connection
    logs two lines; the pipe (64 KiB) fills after a few hundred and the server must keep
    serving rather than block on the write."""
    port = free_port()
    proc = subprocess.Popen(
        [*server_cmd(), "-a", "127.0.0.1", "-p", str(port), "-D"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_dir,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.recv(4096)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)

        async def one(i: int) -> None:
            c = await RawClient.open(port)
            await c.connect(name=f"churn-{i}-" + "x" * 64)
            c.close()
            await c.writer.wait_closed()

        t0 = time.monotonic()
        for batch in range(50):
            await asyncio.wait_for(asyncio.gather(*(one(batch * 10 + k) for k in range(10))), 5)
        churn = time.monotonic() - t0

        # Still responsive, and fast about it.
        c = await RawClient.open(port)
        await c.connect()
        t1 = time.monotonic()
        await c.send("SUB alive 1\r\nPUB alive 2\r\nok\r\nPING\r\n")
        data = await c.expect(b"PONG\r\n", timeout=2)
        assert data == b"MSG alive 1 2\r\nok\r\nPONG\r\n"
        assert time.monotonic() - t1 < 1.0
        c.close()
        assert proc.poll() is None
        assert churn < 30, churn
    finally:
        proc.kill()
        proc.wait(5)
        assert proc.stderr is not None
        proc.stderr.close()


async def test_version_flag(tmp_dir) -> None:
    res = await asyncio.to_thread(
        subprocess.run, [*server_cmd(), "--version"], capture_output=True, timeout=10
    )
    assert res.returncode == 0
    assert re.search(rb"v\d+\.\d+\.\d+", res.stdout + res.stderr)
