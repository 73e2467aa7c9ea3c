"""``--workers`` / ``workers:``: parsing, the checks, and the command line each worker gets
(tests/integration/test_workers.py runs them)."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path
from typing import Any

import pytest

import natsd.main
import natsd.workers
from natsd.config.apply import apply_config
from natsd.config.flags import build_options, parse_args
from natsd.config.options import ServerOptions
from natsd.config.parse import parse
from natsd.config.policy import ConfigError
from natsd.workers import WorkerPlan, check_plan, plan_workers


def opts_of(*argv: str) -> ServerOptions:
    return build_options(parse_args(list(argv)))[0]


def test_default_is_one_plain_server() -> None:
    assert opts_of().workers == 1
    assert opts_of().reuse_port is False


@pytest.mark.parametrize("argv", [["--workers", "3"], ["--workers=3"], ["-workers", "3"]])
def test_workers_flag(argv: list[str]) -> None:
    assert opts_of(*argv).workers == 3


@pytest.mark.parametrize("n", ["0", "-1"])
def test_workers_below_one_is_refused(n: str) -> None:
    with pytest.raises(ValueError, match=f"workers must be at least 1, got {n}"):
        opts_of("--workers", n)


def test_workers_config_key(tmp_path: Path) -> None:
    conf = tmp_path / "n.conf"
    conf.write_text("workers: 4\n")
    assert opts_of("-c", str(conf)).workers == 4
    # The flag wins over the file, as every flag does.
    assert opts_of("-c", str(conf), "--workers", "2").workers == 2


@pytest.mark.parametrize(
    ("text", "error"),
    [("workers: 0", "workers must be at least 1, got 0"), ("workers: two", "expected a number")],
)
def test_workers_config_key_is_checked(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        apply_config(ServerOptions(), parse(text))


def test_reuse_port_flag() -> None:
    assert opts_of("--reuse_port").reuse_port is True


def test_help_documents_workers() -> None:
    from natsd.config.flags import USAGE

    assert "--workers <n>" in USAGE and "workers: n" in USAGE


def ports() -> Any:
    counter = itertools.count(7001)
    return lambda host: next(counter)


def plan_of(*argv: str) -> WorkerPlan:
    return plan_workers(list(argv), opts_of(*argv), ports())


def test_plan_gives_each_worker_its_name_ports_and_the_route_list() -> None:
    plan = plan_of("-p", "4333", "-m", "8300", "-n", "box", "--workers", "3")
    assert (plan.port, plan.name, plan.cluster_name) == (4333, "box", "box-workers")
    assert (plan.http_port, [w.index for w in plan.workers]) == (8300, [1, 2, 3])
    routes = [f"nats-route://127.0.0.1:{p}" for p in (7001, 7002, 7003)]
    for w in plan.workers:
        o = opts_of(*w.args)
        assert o.server_name == f"box-w{w.index}" == w.name
        assert (o.port, o.reuse_port, o.workers, o.pid_file) == (4333, True, 1, "")
        assert o.http_port == 8300 + w.index == w.monitor_port
        assert (o.cluster.host, o.cluster.port) == ("127.0.0.1", 7000 + w.index)
        assert o.cluster.name == "box-workers"
        # Every worker gets the whole list, itself included (the mesh drops that one).
        assert [r.raw for r in o.cluster.routes] == routes
        assert o.js.store_dir == ""


def test_plan_defaults_a_stable_name_and_picks_a_port_for_a_random_one() -> None:
    plan = plan_of("--workers", "2", "-p", "-1")
    assert plan.port == 7001  # picked once: every worker listens on it
    host = socket.gethostname().split(".")[0]
    assert plan.name == f"{host}-7001"
    assert [w.name for w in plan.workers] == [f"{host}-7001-w1", f"{host}-7001-w2"]
    assert plan.http_port == 0 and all(w.monitor_port == 0 for w in plan.workers)


def test_plan_uses_the_configured_cluster(tmp_path: Path) -> None:
    conf = tmp_path / "n.conf"
    conf.write_text(
        'cluster { name: prod, listen: "0.0.0.0:6222", routes: ["nats-route://10.0.0.9:6222"],'
        " authorization { user: ru, password: rp } }\n"
    )
    plan = plan_of("-c", str(conf), "--workers", "2", "-p", "4222")
    assert plan.cluster_name == "prod"
    o = opts_of(*plan.workers[1].args)
    # w1 on the configured port (what other machines' routes name), w2 on the next one.
    assert (o.cluster.host, o.cluster.port, o.cluster.name) == ("0.0.0.0", 6223, "prod")
    assert (o.cluster.username, o.cluster.password) == ("ru", "rp")
    assert [r.raw for r in o.cluster.routes] == [
        "nats-route://ru:rp@127.0.0.1:6222",
        "nats-route://ru:rp@127.0.0.1:6223",
        "nats-route://10.0.0.9:6222",
    ]


def test_plan_gives_each_worker_its_store_dir(tmp_path: Path) -> None:
    plan = plan_of("--workers", "2", "-sd", str(tmp_path))
    assert [opts_of(*w.args).js.store_dir for w in plan.workers] == [
        str(tmp_path / "w1"),
        str(tmp_path / "w2"),
    ]
    # JetStream without a store_dir: ./data, one directory per worker, never a shared one.
    plan = plan_of("--workers", "2", "-js")
    args = plan.workers[0].args
    assert args[args.index("-sd") + 1] == os.path.abspath("data/w1")


def test_jetstream_workers_form_a_jetstream_cluster() -> None:
    plan = plan_of("--workers", "2", "-js", "-n", "box", "-p", "4222")
    check_plan(plan)  # each worker's server accepts its options
    opts = [opts_of(*w.args) for w in plan.workers]
    assert [o.server_name for o in opts] == ["box-w1", "box-w2"]
    assert all(o.jetstream and o.cluster.name for o in opts)
    # every worker lists every worker's route: the meta group forms from them
    assert all(len(o.cluster.routes) == 2 for o in opts)


def test_cluster_advertise_is_refused() -> None:
    argv = ["--workers", "2", "--cluster", "nats://127.0.0.1:6222", "--cluster_advertise", "h:1"]
    with pytest.raises(ValueError, match="cluster advertise cannot be used with --workers"):
        plan_workers(argv, opts_of(*argv), ports())


def test_main_supervises_only_above_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(natsd.main, "run", lambda *a: calls.append("run") or 0)
    monkeypatch.setattr(natsd.main, "supervise", lambda *a: calls.append("supervise") or 0)
    assert natsd.main.main(["--workers", "1", "-p", "4999"]) == 0
    assert natsd.main.main(["--workers", "2", "-p", "4999"]) == 0
    assert calls == ["run", "supervise"]


def test_a_worker_reports_config_errors_with_their_own_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert natsd.main.main(["--workers", "0"]) == 1  # as nats-server
    monkeypatch.setenv(natsd.workers.WORKER_ENV, "box-w1")
    assert natsd.main.main(["--workers", "0"]) == natsd.workers.EXIT_CONFIG
    assert natsd.main.main(["--no_such_flag"]) == natsd.workers.EXIT_CONFIG
