"""Unit tests for natsd.config.reload (what a configuration reload may change) and for the
``--signal`` command of natsd.main. The refusal texts are nats-server's (reload.go)."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path

import pytest

from natsd import main as cli
from natsd.config.options import AccountConfig, JetStreamConfig, ServerOptions
from natsd.config.reload import ReloadError, go_value, plan_reload
from natsd.security.auth import User

DEFAULT_DIR = "/srv/data"


def _plan(old: ServerOptions, new: ServerOptions, js: bool = False):  # type: ignore[no-untyped-def]
    return plan_reload(old, new, jetstream_enabled=js, default_store_dir=DEFAULT_DIR)


def test_nothing_changed_is_an_empty_plan() -> None:
    plan = _plan(ServerOptions(), ServerOptions())
    assert plan.notices == [] and not plan.limits and not plan.logging


@pytest.mark.parametrize(
    ("change", "notice", "flag"),
    [
        ({"max_payload": 2000}, "Reloaded: max_payload = 2000", "limits"),
        ({"max_control_line": 2048}, "Reloaded: max_control_line = 2048", "limits"),
        ({"ping_interval": 30.0}, "Reloaded: ping_interval = 30s", "limits"),
        ({"ping_max": 3}, "Reloaded: ping_max = 3", "limits"),
        ({"write_deadline": 3.0}, "Reloaded: write_deadline = 3s", "limits"),
        ({"auth_timeout": 3.0}, "Reloaded: authorization timeout = 3", "limits"),
        ({"max_connections": 5}, "Reloaded: max_connections = 5", "max_connections"),
        ({"debug": True}, "Reloaded: debug = true", "logging"),
        ({"trace": True}, "Reloaded: trace = true", "logging"),
        ({"log_file": "/tmp/x.log"}, "Reloaded: log_file = /tmp/x.log", "logging"),
        ({"pid_file": "/tmp/x.pid"}, "Reloaded: pid_file = /tmp/x.pid", "pid_file"),
        ({"token": "s3cr3t"}, "Reloaded: authorization token", None),
        ({"users": [User("a", "pw", "$G")]}, "Reloaded: authorization users", None),
    ],
)
def test_reloadable_options(change: dict[str, object], notice: str, flag: str | None) -> None:
    plan = _plan(ServerOptions(), replace(ServerOptions(), **change))
    assert plan.notices == [notice]
    if flag is not None:
        assert getattr(plan, flag) is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"port": 4223}, "config reload not supported for Port: old=4222, new=4223"),
        ({"host": "127.0.0.1"}, "config reload not supported for Host: old=0.0.0.0, new=127.0.0.1"),
        ({"server_name": "foo"}, "config reload not supported for ServerName: old=, new=foo"),
        ({"http_port": 8222}, "config reload not supported for HTTPPort: old=0, new=8222"),
        ({"max_subs": 10}, "config reload not supported for MaxSubs: old=0, new=10"),
        (
            {"max_pending": 1 << 27},
            f"config reload not supported for MaxPending: old={1 << 26}, new={1 << 27}",
        ),
        (
            {"lame_duck_duration": 40.0},
            "config reload not supported for LameDuckDuration: old=0s, new=40s",
        ),
        (
            {"lame_duck_grace_period": 5.0},
            "config reload not supported for LameDuckGracePeriod: old=10s, new=5s",
        ),
        ({"jetstream": True}, "config reload not supported for JetStream: old=false, new=true"),
        ({"no_auth_user": "a"}, "config reload not supported for NoAuthUser: old=, new=a"),
    ],
)
def test_refused_options(change: dict[str, object], message: str) -> None:
    with pytest.raises(ReloadError) as e:
        _plan(ServerOptions(), replace(ServerOptions(), **change))
    assert str(e.value) == message


def test_refusal_is_whole_even_after_reloadable_changes() -> None:
    new = replace(ServerOptions(), max_payload=2000, debug=True, port=1)
    with pytest.raises(ReloadError, match="Port"):
        _plan(ServerOptions(), new)


def test_random_port_keeps_the_running_port() -> None:
    old = replace(ServerOptions(), port=4333)
    new = replace(ServerOptions(), port=0)
    assert _plan(old, new).notices == []
    assert new.port == 4333


def test_no_auth_user_may_go_with_its_user() -> None:
    old = replace(ServerOptions(), no_auth_user="a", users=[User("a", "", "$G")])
    _plan(old, replace(ServerOptions(), users=[User("b", "", "$G")]))
    with pytest.raises(ReloadError, match="NoAuthUser: old=a, new="):
        _plan(old, replace(ServerOptions(), users=[User("a", "", "$G")]))


def _js(**kw: object) -> ServerOptions:
    # A running server's options hold the directory it stores in (the default when unset).
    kw.setdefault("store_dir", DEFAULT_DIR)
    return replace(ServerOptions(), jetstream=True, js=JetStreamConfig(**kw))  # type: ignore[arg-type]


def test_jetstream_store_dir() -> None:
    # The default directory in use matches an unset store_dir.
    _plan(_js(), _js(store_dir=""), js=True)
    _plan(_js(store_dir="/a"), _js(store_dir="/a"), js=True)
    with pytest.raises(ReloadError, match=r"^config reload not supported for jetstream storage"):
        _plan(_js(store_dir="/a"), _js(store_dir="/b"), js=True)


def test_jetstream_limits_may_only_grow() -> None:
    plan = _plan(_js(max_memory=100, max_file=100), _js(max_memory=200, max_file=300), js=True)
    assert (plan.js_max_memory, plan.js_max_store) == (200, 300)
    with pytest.raises(ReloadError, match="decreasing jetstream max memory and store"):
        _plan(_js(max_file=100), _js(max_file=50), js=True)
    with pytest.raises(ReloadError, match="for jetstream max memory and max store"):
        _plan(_js(max_file=100), _js(max_file=-1), js=True)
    with pytest.raises(ReloadError, match="jetstream dynamic max memory and store"):
        _plan(_js(), _js(max_file=100), js=True)


@pytest.mark.parametrize(
    ("change", "name"),
    [({"domain": "x"}, "JetStreamDomain"), ({"sync_always": True}, "SyncAlways")],
)
def test_jetstream_refused(change: dict[str, object], name: str) -> None:
    with pytest.raises(ReloadError, match=f"for {name}:"):
        _plan(_js(), _js(**change), js=True)


def test_accounts() -> None:
    old = replace(ServerOptions(), accounts={"A": AccountConfig("A", {"max_memory": 1})})
    new = replace(
        ServerOptions(),
        accounts={"A": AccountConfig("A", {"max_memory": 1}), "B": AccountConfig("B")},
    )
    plan = _plan(old, new)
    assert [a.name for a in plan.new_accounts] == ["B"]
    assert plan.notices == ["Reloaded: accounts"]
    changed = replace(ServerOptions(), accounts={"A": AccountConfig("A", {"max_memory": 2})})
    with pytest.raises(ReloadError, match="JetStream limits of account 'A'"):
        _plan(old, changed)
    with pytest.raises(ReloadError, match="removing JetStream account 'A'"):
        _plan(old, ServerOptions())


def test_an_option_the_planner_does_not_know_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # A field added to ServerOptions later is refused until someone decides it reloads.
    import dataclasses

    fields = (*dataclasses.fields(ServerOptions), _FakeField("brand_new"))
    monkeypatch.setattr("natsd.config.reload.dataclasses.fields", lambda _: fields)
    old, new = ServerOptions(), ServerOptions()
    object.__setattr__(old, "brand_new", 1)
    object.__setattr__(new, "brand_new", 2)
    with pytest.raises(ReloadError, match="config reload not supported for BrandNew: old=1, new=2"):
        _plan(old, new)


class _FakeField:
    def __init__(self, name: str) -> None:
        self.name = name


def test_go_value() -> None:
    assert go_value("debug", True) == "true"
    assert go_value("ping_interval", 120.0) == "2m0s"
    assert go_value("write_deadline", 0.5) == "500ms"
    assert go_value("auth_timeout", 0.5) == "0.5"
    assert go_value("auth_timeout", 2.0) == "2"


# ---------------------------------------------------------------- --signal


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr("natsd.main.os.kill", lambda pid, sig: sent.append((pid, sig)))
    return sent


@pytest.mark.parametrize(
    ("command", "sig"),
    [
        ("stop", signal.SIGKILL),
        ("quit", signal.SIGINT),
        ("reopen", signal.SIGUSR1),
        ("reload", signal.SIGHUP),
        ("ldm", signal.SIGUSR2),
        ("term", signal.SIGTERM),
    ],
)
def test_signal_commands(command: str, sig: int, kills: list[tuple[int, int]]) -> None:
    cli.send_signal(f"{command}=4321")
    assert kills == [(4321, sig)]


def test_signal_pid_file(tmp_path: Path, kills: list[tuple[int, int]]) -> None:
    f = tmp_path / "natsd.pid"
    f.write_text("777\n")
    cli.send_signal(f"reload={f}")
    assert kills == [(777, signal.SIGHUP)]


def test_signal_finds_the_one_natsd(
    monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]]
) -> None:
    monkeypatch.setattr(cli, "_natsd_pids", lambda: [55])
    cli.send_signal("reopen")
    assert kills == [(55, signal.SIGUSR1)]
    monkeypatch.setattr(cli, "_natsd_pids", lambda: [55, 66])
    with pytest.raises(cli.SignalError, match="multiple natsd processes running:\n55\n66"):
        cli.send_signal("reopen")
    monkeypatch.setattr(cli, "_natsd_pids", lambda: [])
    with pytest.raises(cli.SignalError, match="no natsd processes running"):
        cli.send_signal("reopen")


def test_signal_pid_glob(monkeypatch: pytest.MonkeyPatch, kills: list[tuple[int, int]]) -> None:
    monkeypatch.setattr(cli, "_natsd_pids", lambda: [120, 125, 130])
    cli.send_signal("term=12*")
    assert kills == [(120, signal.SIGTERM), (125, signal.SIGTERM)]


@pytest.mark.parametrize(
    ("argv", "natsd"),
    [
        ([b"/venv/bin/natsd", b"-c", b"x"], True),
        ([b"/usr/bin/python3.11", b"-m", b"natsd", b"-p", b"1"], True),
        ([b"python", b"/venv/bin/natsd"], True),
        ([b"python", b"-m", b"pytest", b"natsd"], False),
        ([b"nats-server", b"-c", b"natsd"], False),
        ([b"/usr/bin/bash", b"natsd"], False),
        ([b""], False),
    ],
)
def test_is_natsd(argv: list[bytes], natsd: bool) -> None:
    assert cli._is_natsd(argv) is natsd
