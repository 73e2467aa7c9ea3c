"""Configuration reload and lame duck mode on an embedded server (``Server.reload``,
``Server.lame_duck``), for what the process tests in test_signals.py do not reach: accounts,
tokens, max_connections, JetStream, /varz. Expected behaviour is nats-server's reload.go
and lameDuckMode."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import nats
import pytest

import natsd
from natsd.config import load_config
from natsd.config.options import AccountConfig, ServerOptions
from natsd.config.reload import ReloadError
from natsd.security.auth import User

from .conftest import get_json


def _opts(**kw: Any) -> ServerOptions:
    return replace(ServerOptions(), **{"host": "127.0.0.1", "port": 0, **kw})


@pytest.fixture
async def started() -> AsyncIterator[list[natsd.Server]]:
    servers: list[natsd.Server] = []
    yield servers
    for s in servers:
        await s.shutdown()


async def _start(servers: list[natsd.Server], opts: ServerOptions) -> natsd.Server:
    srv = natsd.Server(opts)
    await srv.start()
    servers.append(srv)
    return srv


class Conn:
    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.errors: list[str] = []
        self.nc: Any = None

    async def open(self, url: str, **kw: Any) -> Conn:
        async def on_closed() -> None:
            self.closed.set()

        async def on_error(e: Exception) -> None:
            self.errors.append(str(e))

        self.nc = await nats.connect(
            url,
            allow_reconnect=False,
            connect_timeout=5,
            closed_cb=on_closed,
            error_cb=on_error,
            **kw,
        )
        return self

    async def close(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.nc.close(), 5)


async def test_user_moved_to_another_account_is_disconnected(started: list[Any]) -> None:
    srv = await _start(
        started,
        _opts(
            users=[User("u", "pw", "A"), User("v", "pw", "A")], accounts={"A": AccountConfig("A")}
        ),
    )
    u = await Conn().open(srv.client_url, user="u", password="pw")
    v = await Conn().open(srv.client_url, user="v", password="pw")
    try:
        srv.reload(
            _opts(
                users=[User("u", "pw", "B"), User("v", "pw", "A")],
                accounts={"A": AccountConfig("A"), "B": AccountConfig("B")},
            )
        )
        await asyncio.wait_for(u.closed.wait(), 5)
        assert not v.closed.is_set()
        # It reconnects into its new account: subjects no longer cross to account A.
        u2 = await Conn().open(srv.client_url, user="u", password="pw")
        sub = await v.nc.subscribe("x")
        await v.nc.flush()
        await u2.nc.publish("x", b"1")
        await u2.nc.flush()
        await u2.nc.flush()
        with pytest.raises(nats.errors.TimeoutError):
            await sub.next_msg(timeout=0.2)
        assert [c.account.name for c in srv.clients.values()] == ["A", "B"]
        await u2.close()
    finally:
        await u.close()
        await v.close()


async def test_removed_account_is_dropped(started: list[Any]) -> None:
    srv = await _start(
        started, _opts(users=[User("u", "pw", "A")], accounts={"A": AccountConfig("A")})
    )
    srv.reload(_opts(users=[User("w", "pw", "C")], accounts={"C": AccountConfig("C")}))
    assert "A" not in srv.accounts and "C" in srv.accounts


async def test_an_account_removed_and_added_again_gets_the_system_services(
    started: list[Any],
) -> None:
    """The services every account imports from the system account (``$SYS.REQ.USER.INFO``,
    the CONNZ/STATZ pings) go with a removed account, and come again with an account of
    the same name added by a later reload (they were kept for the old one, and the new one
    got none: its users' requests had no responders)."""
    a = _opts(users=[User("u", "pw", "A")], accounts={"A": AccountConfig("A")})
    srv = await _start(started, a)
    services = srv.sys_services
    assert services is not None
    srv.reload(_opts(users=[User("w", "pw", "C")], accounts={"C": AccountConfig("C")}))
    assert "A" not in srv.accounts
    assert all(acct.name != "A" for acct, _sub in services._imports)
    srv.reload(a)
    nc = await nats.connect(srv.client_url, user="u", password="pw")
    try:
        info = json.loads((await nc.request("$SYS.REQ.USER.INFO", b"", timeout=2)).data)
        assert info["data"]["account"] == "A", info
        connz = json.loads((await nc.request("$SYS.REQ.SERVER.PING.CONNZ", b"", timeout=2)).data)
        assert connz["data"]["num_connections"] == 1, connz
    finally:
        await nc.close()


async def test_token_change_is_an_authorization_violation(started: list[Any]) -> None:
    srv = await _start(started, _opts(token="one"))
    c = await Conn().open(srv.client_url, token="one")
    try:
        srv.reload(_opts(token="two"))
        await asyncio.wait_for(c.closed.wait(), 5)
        assert type(c.nc.last_error).__name__ == "AuthorizationError"
        c2 = await Conn().open(srv.client_url, token="two")
        await c2.close()
    finally:
        await c.close()


async def test_auth_added_by_reload_disconnects_anonymous_clients(started: list[Any]) -> None:
    srv = await _start(started, _opts())
    c = await Conn().open(srv.client_url)
    try:
        srv.reload(_opts(users=[User("u", "pw", "$G")]))
        await asyncio.wait_for(c.closed.wait(), 5)
        assert type(c.nc.last_error).__name__ == "AuthorizationError"
        assert srv.auth_required
    finally:
        await c.close()


async def test_lower_max_connections_closes_the_excess(started: list[Any]) -> None:
    srv = await _start(started, _opts())
    conns = [await Conn().open(srv.client_url) for _ in range(3)]
    try:
        srv.reload(_opts(max_connections=1))
        await asyncio.wait_for(_until(lambda: sum(c.closed.is_set() for c in conns) == 2), 5)
        assert len(srv.clients) == 1
        with pytest.raises(Exception):  # noqa: B017 - nats-py's error type varies by version
            await nats.connect(srv.client_url, allow_reconnect=False, connect_timeout=2)
    finally:
        for c in conns:
            await c.close()


async def _until(pred: Any) -> None:
    while not pred():
        await asyncio.sleep(0.01)


async def test_failed_reload_changes_nothing(started: list[Any]) -> None:
    srv = await _start(started, _opts(max_payload=1000, users=[User("u", "pw", "$G")]))
    before = srv.options
    with pytest.raises(ReloadError, match="Host"):
        srv.reload(_opts(max_payload=2000, host="0.0.0.0"))
    with pytest.raises(ValueError, match=r"max_payload .* cannot be higher than max_pending"):
        srv.reload(_opts(max_payload=2000, max_pending=1000))
    with pytest.raises(ValueError, match='no_auth_user: "nobody" not present'):
        srv.reload(_opts(no_auth_user="nobody", users=[User("u", "pw", "$G")]))
    assert srv.options is before and srv.limits.max_payload == 1000
    assert srv.auth.users.keys() == {"u"}


async def test_reload_without_a_file(started: list[Any]) -> None:
    srv = await _start(started, _opts())
    with pytest.raises(ReloadError, match="can only reload config when a file is provided"):
        srv.reload_config()


async def test_reload_from_the_file_updates_varz(started: list[Any], tmp_path: Path) -> None:
    conf = tmp_path / "s.conf"
    base = "host: 127.0.0.1\nport: -1\nhttp: 127.0.0.1:-1\n"
    conf.write_text(base + "max_payload: 1000\n")
    srv = await _start(started, load_config(str(conf))[0])
    varz = await get_json(srv.monitor_url + "/varz")
    conf.write_text(base + "max_payload: 3000\n")
    srv.reload_config()
    after = await get_json(srv.monitor_url + "/varz")
    assert after["max_payload"] == 3000
    assert after["config_load_time"] > varz["config_load_time"]


async def test_jetstream_reload(started: list[Any], tmp_path: Path) -> None:
    js = replace(ServerOptions().js, store_dir=str(tmp_path), max_file=1 << 20)
    srv = await _start(started, _opts(jetstream=True, js=js))
    same = replace(js)
    srv.reload(_opts(jetstream=True, js=same))
    srv.reload(_opts(jetstream=True, js=replace(js, max_file=1 << 21)))
    assert srv.jetstream.max_store == 1 << 21
    with pytest.raises(ReloadError, match="jetstream storage directory"):
        srv.reload(_opts(jetstream=True, js=replace(js, store_dir=str(tmp_path / "other"))))
    with pytest.raises(ReloadError, match="JetStream: old=true, new=false"):
        srv.reload(_opts())


async def test_lame_duck_with_jetstream(started: list[Any], tmp_path: Path) -> None:
    js = replace(ServerOptions().js, store_dir=str(tmp_path), domain="D")
    opts = _opts(jetstream=True, js=js, lame_duck_duration=5.0, lame_duck_grace_period=2.0)
    srv = await _start(started, opts)
    ldm = asyncio.Event()
    closed = asyncio.Event()

    async def on_ldm() -> None:
        ldm.set()

    async def on_closed() -> None:
        closed.set()

    nc = await nats.connect(
        srv.client_url, allow_reconnect=False, lame_duck_mode_cb=on_ldm, closed_cb=on_closed
    )
    try:
        await nc.jetstream().add_stream(name="S", subjects=["s.>"])
        await nc.jetstream().publish("s.1", b"x")
        task = asyncio.create_task(srv.lame_duck())
        await asyncio.wait_for(ldm.wait(), 5)
        # JetStream stopped when lame duck mode began; as in nats-server, API requests in
        # the grace period go unanswered (they used to reach the closed stores).
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.API.STREAM.INFO.S", b"", timeout=0.5)
        # ... through the domain prefix too.
        with pytest.raises(nats.errors.TimeoutError):
            await nc.request("$JS.D.API.STREAM.INFO.S", b"", timeout=0.5)
        await asyncio.wait_for(task, 15)
        await asyncio.wait_for(closed.wait(), 5)
        await srv.wait_stopped()
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
    # The stream survived the lame duck shutdown.
    again = await _start(started, replace(opts))
    nc = await nats.connect(again.client_url)
    try:
        info = await nc.jetstream().stream_info("S")
        assert info.state.messages == 1
    finally:
        await nc.close()


async def test_lame_duck_without_clients_shuts_down_at_once(started: list[Any]) -> None:
    srv = await _start(started, _opts(lame_duck_grace_period=30.0, lame_duck_duration=60.0))
    await asyncio.wait_for(srv.lame_duck(), 5)
    await srv.wait_stopped()


def test_grace_period_must_be_below_duration() -> None:
    with pytest.raises(
        ValueError,
        match=r"lame duck grace period \(10s\) should be strictly"
        r" lower than lame duck duration \(5s\)",
    ):
        natsd.Server(_opts(lame_duck_duration=5.0))
