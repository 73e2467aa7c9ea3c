"""Differential tests of JetStream consumers: the same consumer API requests, pull
requests, acks and push deliveries go to nats-server and natsd over a raw NATS
connection; the normalised logs must be equal (see :mod:`.consumer_scenarios`).

Self-check: ``NATSD_DIFF_IMPL=nats-server pytest tests/differential/test_consumers.py``
runs nats-server on both sides; every scenario must then pass (it proves the scenario is
deterministic after normalisation). Each test also asserts a few key values of the
nats-server log directly, so the expectations are readable here. With
``NATSD_DIFF_DUMP=<dir>`` the nats-server log of every scenario is written to
``<dir>/<test id>.json`` (handy to see what natsd has to produce).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .consumer_scenarios import (
    ConsumerRecorder,
    assert_same,
    consumer_server_pair,
    dump_log,
    entry,
    frame_records,
    run_scenario,
)
from .harness import ServerPair

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

SEC = 1_000_000_000
MS = 1_000_000


@pytest.fixture(scope="module")
def cpair() -> Iterator[ServerPair]:
    """nats-server and natsd with ``-js -sd <own tmp dir>``, shared by the module; every
    scenario starts and ends by deleting all streams (and so all consumers)."""
    require_nats_server()
    with consumer_server_pair() as pair:
        yield pair


async def check(pair: ServerPair, scenario: Any) -> list[tuple[str, Any]]:
    """Run ``scenario`` on both servers, assert the logs are equal, return the
    nats-server log (for direct assertions)."""
    ref, impl = await run_scenario(pair, scenario)
    dump_log(ref)
    assert_same(ref, impl)
    return ref


def err_code(resp: Any) -> int | None:
    return resp.get("error", {}).get("err_code") if isinstance(resp, dict) else None


def statuses(frames: list[dict[str, Any]]) -> list[str]:
    return [f.get("status", "") for f in frames]


def rfc3339_ns(ts: str) -> int:
    """Unix nanoseconds of an RFC 3339 UTC timestamp with up to 9 fractional digits."""
    base, _, frac = ts.rstrip("Z").partition(".")
    secs = datetime.datetime.fromisoformat(base).replace(tzinfo=datetime.UTC).timestamp()
    return int(secs) * 1_000_000_000 + int((frac or "0").ljust(9, "0")[:9])


# ====================================================================== create / info
async def test_create_defaults_and_info(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 3)
        await c.create("durable pull", "S", {"durable_name": "D", "ack_policy": "explicit"})
        await c.req(
            "legacy durable create",
            "CONSUMER.DURABLE.CREATE.S.LEG",
            {"stream_name": "S", "config": {"durable_name": "LEG"}},
        )
        await c.create("named ephemeral", "S", {"name": "EPH", "inactive_threshold": 60 * SEC})
        await c.stream("E")  # alone on its stream: generated names sort randomly
        await c.create("unnamed ephemeral", "E", {"ack_policy": "explicit"})
        await c.create(
            "durable push",
            "S",
            {"durable_name": "P", "deliver_subject": "dlv.none", "ack_policy": "explicit"},
        )
        await c.create("ack all", "S", {"durable_name": "AA", "ack_policy": "all"})
        await c.info("info", "S", "D", counters=False)
        await c.req("names", "CONSUMER.NAMES.S")
        await c.req("list", "CONSUMER.LIST.S")
        await c.req("names E", "CONSUMER.NAMES.E")
        await c.req("account info", "INFO", keys=("consumers", "streams"))
        await c.state("stream state", "S")

    log = await check(cpair, sc)
    d = entry(log, "durable pull")
    assert d["type"] == "io.nats.jetstream.api.v1.consumer_create_response"
    assert d["config"]["ack_wait"] == 30 * SEC and d["config"]["max_ack_pending"] == 1000
    assert d["config"]["max_waiting"] == 512 and d["config"]["max_deliver"] == -1
    assert d["num_pending"] == 3
    eph = entry(log, "unnamed ephemeral")
    assert eph["name"] == "<ephemeral1>"
    assert eph["config"]["inactive_threshold"] == 5 * SEC
    assert "max_waiting" not in entry(log, "durable push")["config"]
    assert "ack_wait" not in entry(log, "legacy durable create")["config"]
    assert entry(log, "names")["consumers"] == ["AA", "D", "EPH", "LEG", "P"]


async def test_create_every_field(cpair: ServerPair) -> None:
    pull = {
        "durable_name": "PULL",
        "description": "every pull field",
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": 2,
        "ack_policy": "explicit",
        "ack_wait": 10 * SEC,
        "max_deliver": 5,
        "backoff": [1 * SEC, 2 * SEC],
        "filter_subjects": ["s.a", "s.b"],
        "replay_policy": "instant",
        "sample_freq": "50%",
        "max_waiting": 20,
        "max_ack_pending": 30,
        "headers_only": True,
        "max_batch": 10,
        "max_expires": 30 * SEC,
        "max_bytes": 4096,
        "inactive_threshold": 60 * SEC,
        "num_replicas": 1,
        "mem_storage": True,
        "metadata": {"owner": "tests"},
    }
    push = {
        "durable_name": "PUSH",
        "deliver_subject": "dlv.push",
        "deliver_group": "grp",
        "deliver_policy": "last_per_subject",
        "filter_subject": "s.*",
        "ack_policy": "all",
        "ack_wait": 5 * SEC,
        "max_deliver": 3,
        "rate_limit_bps": 1_000_000,
        "replay_policy": "original",
        "max_ack_pending": 10,
        "flow_control": True,
        "idle_heartbeat": 5 * SEC,
        "headers_only": False,
    }

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create("pull", "S", pull)
        await c.create("push", "S", push)
        await c.info("pull info", "S", "PULL", counters=False)
        await c.info("push info", "S", "PUSH", counters=False)

    log = await check(cpair, sc)
    cfg = entry(log, "pull")["config"]
    assert cfg["ack_wait"] == 1 * SEC  # the first backoff value overrides ack_wait
    assert cfg["filter_subjects"] == ["s.a", "s.b"] and cfg["mem_storage"] is True
    assert entry(log, "push")["config"]["rate_limit_bps"] == 1_000_000


async def test_create_subject_forms(cpair: ServerPair) -> None:
    def body(**cfg: Any) -> dict[str, Any]:
        return {"stream_name": "S", "config": cfg}

    keys = ("name", "config")

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.req(
            "filter in subject",
            "CONSUMER.CREATE.S.F1.s.a",
            body(name="F1", filter_subject="s.a"),
            keys=keys,
        )
        await c.req("filter only in subject", "CONSUMER.CREATE.S.F2.s.b", body(name="F2"))
        await c.req(
            "filter mismatch", "CONSUMER.CREATE.S.F3.s.a", body(name="F3", filter_subject="s.b")
        )
        await c.req(
            "filter in subject + filters",
            "CONSUMER.CREATE.S.F4.s.a",
            body(name="F4", filter_subjects=["s.a"]),
        )
        await c.req(
            "wildcard filter in subject",
            "CONSUMER.CREATE.S.F5.s.*",
            body(name="F5", filter_subject="s.*"),
            keys=keys,
        )
        await c.req(
            "multi-token filter",
            "CONSUMER.CREATE.S.F6.s.x.>",
            body(durable_name="F6", filter_subject="s.x.>"),
            keys=keys,
        )
        await c.req(
            "config name differs from subject",
            "CONSUMER.CREATE.S.X",
            body(name="Y", inactive_threshold=60 * SEC),
            keys=keys,
        )
        await c.req("durable differs from subject", "CONSUMER.CREATE.S.X2", body(durable_name="Y2"))
        await c.req(
            "name only in subject",
            "CONSUMER.CREATE.S.X3",
            body(inactive_threshold=60 * SEC),
            keys=keys,
        )
        await c.req(
            "stream mismatch", "CONSUMER.CREATE.S.Z", {"stream_name": "T", "config": {"name": "Z"}}
        )
        await c.req("no stream_name", "CONSUMER.CREATE.S.Z", {"config": {"name": "Z"}})
        await c.req(
            "unknown stream",
            "CONSUMER.CREATE.NOPE.Z",
            {"stream_name": "NOPE", "config": {"name": "Z"}},
        )
        await c.req("no config", "CONSUMER.CREATE.S.Z", {"stream_name": "S"}, keys=keys)
        await c.req("empty body", "CONSUMER.CREATE.S.Z2", b"")
        await c.req("bad json", "CONSUMER.CREATE.S.Z2", b"{")
        await c.req("json array", "CONSUMER.CREATE.S.Z2", b"[]")
        await c.req("ephemeral subject with durable", "CONSUMER.CREATE.S", body(durable_name="Q"))
        await c.req(
            "durable create", "CONSUMER.DURABLE.CREATE.S.D", body(durable_name="D"), keys=keys
        )
        await c.req(
            "durable create without durable_name", "CONSUMER.DURABLE.CREATE.S.D2", body(name="D2")
        )
        await c.req(
            "durable create mismatch", "CONSUMER.DURABLE.CREATE.S.D3", body(durable_name="D4")
        )
        # Names before the unanswered requests below: F1/F5/Z are ephemerals with the
        # default 5 s inactive threshold.
        await c.req("names", "CONSUMER.NAMES.S")
        await c.req(
            "durable create no name token",
            "CONSUMER.DURABLE.CREATE.S",
            body(durable_name="D4"),
            timeout=0.5,
        )
        await c.req("create no stream token", "CONSUMER.CREATE", body(name="N"), timeout=0.5)

    log = await check(cpair, sc)
    assert entry(log, "filter in subject")["config"]["filter_subject"] == "s.a"
    assert err_code(entry(log, "filter only in subject")) == 10131
    assert err_code(entry(log, "filter in subject + filters")) == 10137
    assert entry(log, "config name differs from subject")["name"] == "X"
    assert err_code(entry(log, "durable differs from subject")) == 10017
    assert err_code(entry(log, "stream mismatch")) == 10056
    assert err_code(entry(log, "unknown stream")) == 10059
    assert err_code(entry(log, "ephemeral subject with durable")) == 10020
    assert err_code(entry(log, "durable create without durable_name")) == 10018
    assert entry(log, "durable create no name token") == "<timeout>"


#: Bad consumer names, sent in the config of CONSUMER.CREATE.<stream> (no name token) and
#: as the name token of CONSUMER.CREATE / CONSUMER.DURABLE.CREATE.
BAD_NAMES = ["a.b", "a*", "a>", "a/b", "a\\b", "a b", "a\tb", "x" * 256]


@pytest.mark.parametrize("name", [pytest.param(n, id=repr(n)[:12]) for n in BAD_NAMES])
async def test_create_bad_names(cpair: ServerPair, name: str) -> None:
    """Each form on its own (anything created is deleted before the next one)."""
    in_subject = " " not in name and "\t" not in name and "." not in name

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        body = {"stream_name": "S", "config": {"durable_name": name}}
        forms: list[tuple[str, str, dict[str, Any]]] = [
            ("durable in body", "CONSUMER.CREATE.S", body),
            ("name in body", "CONSUMER.CREATE.S", {"stream_name": "S", "config": {"name": name}}),
        ]
        if in_subject:
            forms += [
                (
                    "name in subject",
                    f"CONSUMER.CREATE.S.{name}",
                    {"stream_name": "S", "config": {"name": name}},
                ),
                ("durable in subject", f"CONSUMER.CREATE.S.{name}", body),
                ("legacy durable", f"CONSUMER.DURABLE.CREATE.S.{name}", body),
            ]
        for label, subject, req in forms:
            await c.req(label, subject, req, keys=("name", "error"))
            await c.req(f"names after {label}", "CONSUMER.NAMES.S", keys=("consumers",))
            if in_subject:
                await c.raw(f"CONSUMER.DELETE.S.{name}")

    log = await check(cpair, sc)
    assert err_code(entry(log, "durable in body")) == 10020
    if len(name) < 256:
        assert entry(log, "names after name in body")["consumers"] == []


#: (id, consumer config, stream config overrides): each is created on stream S (subjects
#: ``s.>``) and the response recorded.
CREATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("name durable mismatch", {"name": "A", "durable_name": "B"}, {}),
    ("filter not in stream", {"filter_subject": "other"}, {}),
    ("filter invalid", {"filter_subject": "s..a"}, {}),
    ("filters overlap", {"filter_subjects": ["s.a", "s.*"]}, {}),
    ("filters duplicate", {"filter_subjects": ["s.a", "s.a"]}, {}),
    ("filters empty string", {"filter_subjects": [""]}, {}),
    ("filter and filters", {"filter_subject": "s.a", "filter_subjects": ["s.b"]}, {}),
    ("filters one outside stream", {"filter_subjects": ["s.a", "zzz"]}, {}),
    ("by_start_sequence without seq", {"deliver_policy": "by_start_sequence"}, {}),
    ("all with opt_start_seq", {"opt_start_seq": 3}, {}),
    ("all with opt_start_time", {"opt_start_time": "2020-01-01T00:00:00Z"}, {}),
    ("last with opt_start_seq", {"deliver_policy": "last", "opt_start_seq": 3}, {}),
    ("by_start_time without time", {"deliver_policy": "by_start_time"}, {}),
    (
        "by_start_time with seq",
        {
            "deliver_policy": "by_start_time",
            "opt_start_time": "2020-01-01T00:00:00Z",
            "opt_start_seq": 2,
        },
        {},
    ),
    (
        "by_start_sequence with time",
        {
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": 1,
            "opt_start_time": "2020-01-01T00:00:00Z",
        },
        {},
    ),
    ("new with opt_start_seq", {"deliver_policy": "new", "opt_start_seq": 2}, {}),
    ("last_per_subject without filter", {"deliver_policy": "last_per_subject"}, {}),
    (
        "last_per_subject with seq",
        {"deliver_policy": "last_per_subject", "filter_subject": "s.a", "opt_start_seq": 1},
        {},
    ),
    ("bad opt_start_time", {"deliver_policy": "by_start_time", "opt_start_time": "yesterday"}, {}),
    ("max_waiting on push", {"deliver_subject": "dlv", "max_waiting": 10}, {}),
    (
        "ack none with max_ack_pending push",
        {"deliver_subject": "dlv", "ack_policy": "none", "max_ack_pending": 10},
        {},
    ),
    ("ack none with max_ack_pending pull", {"ack_policy": "none", "max_ack_pending": 10}, {}),
    ("heartbeat on pull", {"idle_heartbeat": 1 * SEC}, {}),
    ("heartbeat too small push", {"deliver_subject": "dlv", "idle_heartbeat": 50 * MS}, {}),
    ("flow control without heartbeat", {"deliver_subject": "dlv", "flow_control": True}, {}),
    ("flow control on pull", {"flow_control": True}, {}),
    ("flow control on pull with heartbeat", {"flow_control": True, "idle_heartbeat": SEC}, {}),
    (
        "backoff longer than max_deliver",
        {"ack_policy": "explicit", "backoff": [SEC, 2 * SEC], "max_deliver": 1},
        {},
    ),
    (
        "backoff equal to max_deliver",
        {"ack_policy": "explicit", "backoff": [SEC, 2 * SEC], "max_deliver": 2},
        {},
    ),
    ("backoff without max_deliver", {"ack_policy": "explicit", "backoff": [SEC]}, {}),
    ("backoff negative", {"ack_policy": "explicit", "backoff": [-1]}, {}),
    ("ack_wait negative", {"ack_wait": -1}, {}),
    ("max_deliver zero and negative", {"ack_policy": "explicit", "max_deliver": -5}, {}),
    ("max_waiting negative", {"max_waiting": -5}, {}),
    ("max_batch negative", {"max_batch": -5}, {}),
    ("max_expires too small", {"max_expires": 1000}, {}),
    ("max_ack_pending -1", {"ack_policy": "explicit", "max_ack_pending": -1}, {}),
    ("max_ack_pending below -1", {"ack_policy": "explicit", "max_ack_pending": -7}, {}),
    ("priority overflow without groups", {"priority_policy": "overflow"}, {}),
    ("priority pinned", {"priority_policy": "pinned_client", "priority_groups": ["A"]}, {}),
    ("priority prioritized", {"priority_policy": "prioritized", "priority_groups": ["A", "B"]}, {}),
    (
        "priority on push",
        {"deliver_subject": "dlv", "priority_policy": "overflow", "priority_groups": ["A"]},
        {},
    ),
    ("priority bad group", {"priority_policy": "overflow", "priority_groups": ["a.b"]}, {}),
    ("priority group too long", {"priority_policy": "overflow", "priority_groups": ["g" * 17]}, {}),
    ("priority empty group", {"priority_policy": "overflow", "priority_groups": [""]}, {}),
    ("priority groups without policy", {"priority_groups": ["A"]}, {}),
    ("priority_timeout without policy", {"priority_timeout": SEC}, {}),
    ("priority policy bogus", {"priority_policy": "bogus", "priority_groups": ["A"]}, {}),
    ("deliver subject wildcard", {"deliver_subject": "d.*"}, {}),
    ("deliver subject invalid", {"deliver_subject": "d..x"}, {}),
    ("deliver subject forms a cycle", {"deliver_subject": "s.x"}, {}),
    ("deliver group without subject", {"deliver_group": "g"}, {}),
    ("rate limit on pull", {"rate_limit_bps": 1000}, {}),
    ("description too long", {"description": "d" * 4097}, {}),
    ("metadata too big", {"metadata": {"k": "v" * (128 * 1024)}}, {}),
    ("replicas 3", {"num_replicas": 3}, {}),
    ("replicas negative", {"num_replicas": -1}, {}),
    ("sample_freq bad", {"sample_freq": "abc"}, {}),
    ("sample_freq percent", {"sample_freq": "100%"}, {}),
    ("direct on pull", {"direct": True}, {}),
    ("ack_policy bogus", {"ack_policy": "bogus"}, {}),
    ("deliver_policy bogus", {"deliver_policy": "bogus"}, {}),
    ("replay_policy bogus", {"replay_policy": "bogus"}, {}),
    ("ack_policy wrong type", {"ack_policy": 1}, {}),
    ("ack_wait as string", {"ack_wait": "1s"}, {}),
    ("unknown field", {"bogus_field": 1}, {}),
    (
        "max_ack_pending above stream limit",
        {"ack_policy": "explicit", "max_ack_pending": 100},
        {"consumer_limits": {"max_ack_pending": 50}},
    ),
    (
        "inherits stream consumer limits",
        {"ack_policy": "explicit"},
        {"consumer_limits": {"max_ack_pending": 50, "inactive_threshold": 10 * SEC}},
    ),
    (
        "inactive_threshold above stream limit",
        {"inactive_threshold": 20 * SEC},
        {"consumer_limits": {"inactive_threshold": 10 * SEC}},
    ),
    ("workqueue ack all", {"ack_policy": "all"}, {"retention": "workqueue"}),
    ("workqueue ack none pull", {"ack_policy": "none"}, {"retention": "workqueue"}),
    (
        "workqueue ack none push",
        {"ack_policy": "none", "deliver_subject": "dlv"},
        {"retention": "workqueue"},
    ),
    (
        "workqueue deliver new",
        {"ack_policy": "explicit", "deliver_policy": "new"},
        {"retention": "workqueue"},
    ),
    ("workqueue explicit", {"ack_policy": "explicit"}, {"retention": "workqueue"}),
    ("interest ack none", {"ack_policy": "none"}, {"retention": "interest"}),
]


@pytest.mark.parametrize(
    ("cfg", "stream_cfg"), [pytest.param(c, s, id=i) for i, c, s in CREATE_CASES]
)
async def test_create_config_checks(
    cpair: ServerPair, cfg: dict[str, Any], stream_cfg: dict[str, Any]
) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S", **stream_cfg)
        name = cfg.get("name") or "C"
        full = {"durable_name": name, **cfg} if "name" not in cfg else cfg
        await c.create("create", "S", full, subject="CONSUMER.CREATE.S." + name)
        await c.req("names", "CONSUMER.NAMES.S", keys=("consumers",))
        await c.raw(f"CONSUMER.DELETE.S.{name}")
        # The same config as an unnamed ephemeral (alone on the stream: generated names
        # sort randomly).
        await c.create(
            "ephemeral",
            "S",
            {k: v for k, v in cfg.items() if k not in ("durable_name", "name")},
            subject="CONSUMER.CREATE.S",
        )
        await c.req("names after ephemeral", "CONSUMER.NAMES.S", keys=("consumers",))

    log = await check(cpair, sc)
    assert entry(log, "create")["type"] == "io.nats.jetstream.api.v1.consumer_create_response"


async def test_create_error_codes_summary(cpair: ServerPair) -> None:
    """A few of the error codes above, asserted directly for readability."""

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("overlap", "S", {"durable_name": "C", "filter_subjects": ["s.a", "s.*"]})
        await c.create("by seq", "S", {"durable_name": "C", "deliver_policy": "by_start_sequence"})
        await c.create(
            "push max_waiting", "S", {"durable_name": "C", "deliver_subject": "d", "max_waiting": 1}
        )
        await c.create("pull hb", "S", {"durable_name": "C", "idle_heartbeat": SEC})
        await c.create(
            "fc no hb", "S", {"durable_name": "C", "deliver_subject": "d", "flow_control": True}
        )
        await c.create(
            "backoff", "S", {"durable_name": "C", "backoff": [SEC, SEC], "max_deliver": 1}
        )
        await c.create(
            "filter outside", "S", {"durable_name": "C", "filter_subject": "zzz"}, keys=("name",)
        )

    log = await check(cpair, sc)
    assert err_code(entry(log, "overlap")) == 10138
    assert err_code(entry(log, "by seq")) == 10094
    assert err_code(entry(log, "push max_waiting")) == 10080
    assert err_code(entry(log, "pull hb")) == 10088
    assert err_code(entry(log, "fc no hb")) == 10108
    assert err_code(entry(log, "backoff")) == 10116
    # nats-server accepts a filter that matches none of the stream's subjects.
    assert entry(log, "filter outside") == {"name": "C"}


async def test_workqueue_consumer_rules(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("WQ", retention="workqueue")
        ok = ("name",)
        await c.create(
            "first filtered",
            "WQ",
            {"durable_name": "W1", "ack_policy": "explicit", "filter_subject": "wq.a"},
            keys=ok,
        )
        await c.create("second unfiltered", "WQ", {"durable_name": "W2", "ack_policy": "explicit"})
        await c.create(
            "overlapping",
            "WQ",
            {"durable_name": "W2", "ack_policy": "explicit", "filter_subject": "wq.*"},
        )
        await c.create(
            "overlapping multi",
            "WQ",
            {"durable_name": "W2", "ack_policy": "explicit", "filter_subjects": ["wq.b", "wq.a"]},
        )
        await c.create(
            "distinct",
            "WQ",
            {"durable_name": "W2", "ack_policy": "explicit", "filter_subject": "wq.b"},
            keys=ok,
        )
        await c.create(
            "update to overlap",
            "WQ",
            {"durable_name": "W2", "ack_policy": "explicit", "filter_subject": "wq.a"},
        )
        await c.create(
            "ephemeral overlap", "WQ", {"ack_policy": "explicit", "filter_subject": "wq.a"}
        )
        await c.create(
            "same consumer again",
            "WQ",
            {"durable_name": "W1", "ack_policy": "explicit", "filter_subject": "wq.a"},
            keys=ok,
        )
        await c.create(
            "push distinct",
            "WQ",
            {
                "durable_name": "W3",
                "ack_policy": "explicit",
                "filter_subject": "wq.c",
                "deliver_subject": "dlv.wq",
            },
            keys=ok,
        )
        await c.req("names", "CONSUMER.NAMES.WQ")
        await c.req("delete W1", "CONSUMER.DELETE.WQ.W1")
        await c.create(
            "after delete",
            "WQ",
            {"durable_name": "W4", "ack_policy": "explicit", "filter_subject": "wq.>"},
        )

        await c.stream("WQ2", retention="workqueue")
        await c.create(
            "unfiltered first", "WQ2", {"durable_name": "U1", "ack_policy": "explicit"}, keys=ok
        )
        await c.create(
            "filtered second",
            "WQ2",
            {"durable_name": "U2", "ack_policy": "explicit", "filter_subject": "wq2.a"},
        )

    log = await check(cpair, sc)
    assert err_code(entry(log, "second unfiltered")) == 10099
    assert err_code(entry(log, "overlapping")) == 10100
    assert err_code(entry(log, "update to overlap")) == 10100
    assert entry(log, "distinct") == {"name": "W2"}


#: (id, changed fields): each is applied to an existing consumer created with BASE.
UPDATE_BASE = {
    "durable_name": "U",
    "ack_policy": "explicit",
    "filter_subject": "s.a",
    "max_waiting": 10,
}
UPDATES: list[tuple[str, dict[str, Any]]] = [
    ("identical", {}),
    ("description", {"description": "new"}),
    ("ack_wait", {"ack_wait": 5 * SEC}),
    ("max_deliver", {"max_deliver": 5}),
    ("max_ack_pending", {"max_ack_pending": 7}),
    ("backoff", {"backoff": [SEC], "max_deliver": 3}),
    ("metadata", {"metadata": {"a": "b"}}),
    ("filter_subject", {"filter_subject": "s.b"}),
    ("filter_subjects", {"filter_subject": "", "filter_subjects": ["s.a", "s.b"]}),
    ("no filter", {"filter_subject": ""}),
    ("max_waiting", {"max_waiting": 20}),
    ("max_waiting default", {"max_waiting": 0}),
    ("headers_only", {"headers_only": True}),
    ("sample_freq", {"sample_freq": "50%"}),
    ("inactive_threshold", {"inactive_threshold": 10 * SEC}),
    ("max_batch", {"max_batch": 5}),
    ("max_expires", {"max_expires": 5 * SEC}),
    ("max_bytes", {"max_bytes": 1000}),
    ("deliver_policy", {"deliver_policy": "new"}),
    ("opt_start_seq", {"deliver_policy": "by_start_sequence", "opt_start_seq": 2}),
    ("ack_policy", {"ack_policy": "all"}),
    ("replay_policy", {"replay_policy": "original"}),
    ("pull to push", {"deliver_subject": "dlv.x", "max_waiting": 0}),
    ("mem_storage", {"mem_storage": True}),
    ("num_replicas", {"num_replicas": 1}),
    ("name mismatch", {"name": "OTHER"}),
    ("priority policy", {"priority_policy": "overflow", "priority_groups": ["A"]}),
    ("pause_until", {"pause_until": "2099-01-01T00:00:00Z"}),
    ("invalid change", {"deliver_policy": "by_start_sequence"}),
]


@pytest.mark.parametrize("change", [pytest.param(ch, id=i) for i, ch in UPDATES])
async def test_update_existing_consumer(cpair: ServerPair, change: dict[str, Any]) -> None:
    keys = ("config",)

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create("base", "S", UPDATE_BASE, keys=())
        new = {**UPDATE_BASE, **change}
        await c.create("action create", "S", new, action="create", keys=keys)
        await c.create("action update", "S", new, action="update", keys=keys)
        await c.create("create or update", "S", new, keys=keys)
        await c.info("info", "S", "U", counters=False)

    log = await check(cpair, sc)
    assert entry(log, "base") == {}


async def test_update_push_consumer(cpair: ServerPair) -> None:
    base = {"durable_name": "P", "deliver_subject": "dlv.a", "ack_policy": "explicit"}
    keys = ("config",)

    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("base", "S", base, keys=())
        await c.create("new deliver subject", "S", {**base, "deliver_subject": "dlv.b"}, keys=keys)
        await c.create("push to pull", "S", {**base, "deliver_subject": ""}, keys=keys)
        await c.create("add heartbeat", "S", {**base, "idle_heartbeat": SEC}, keys=keys)
        await c.create(
            "add flow control",
            "S",
            {**base, "idle_heartbeat": SEC, "flow_control": True},
            keys=keys,
        )
        await c.create("rate limit", "S", {**base, "rate_limit_bps": 1000}, keys=keys)
        await c.create("deliver group", "S", {**base, "deliver_group": "g"}, keys=keys)
        await c.create(
            "legacy durable create again",
            "S",
            base,
            subject="CONSUMER.DURABLE.CREATE.S.P",
            keys=keys,
        )

    await check(cpair, sc)


async def test_update_missing_and_bad_action(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("update missing", "S", {"durable_name": "U"}, action="update")
        await c.create("bogus action", "S", {"durable_name": "U"}, action="bogus")
        await c.create("create action", "S", {"durable_name": "U"}, action="create", keys=("name",))
        await c.create(
            "create again same", "S", {"durable_name": "U"}, action="create", keys=("name",)
        )
        await c.create(
            "create again other", "S", {"durable_name": "U", "description": "x"}, action="create"
        )
        await c.create(
            "empty action",
            "S",
            {"durable_name": "U", "description": "y"},
            action="",
            keys=("name",),
        )
        await c.create("ephemeral update", "S", {"ack_policy": "explicit"}, action="update")

    log = await check(cpair, sc)
    assert err_code(entry(log, "update missing")) == 10149
    assert err_code(entry(log, "create again other")) == 10148


async def test_max_consumers(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S", max_consumers=2)
        await c.create("first", "S", {"durable_name": "A"}, keys=("name",))
        await c.create("ephemeral", "S", {"inactive_threshold": 60 * SEC}, keys=("name",))
        await c.create("third", "S", {"durable_name": "C"})
        await c.create("existing again", "S", {"durable_name": "A"}, keys=("name",))
        await c.create(
            "update existing", "S", {"durable_name": "A", "description": "d"}, keys=("name",)
        )
        await c.req("delete", "CONSUMER.DELETE.S.A")
        await c.create("after delete", "S", {"durable_name": "C"}, keys=("name",))
        await c.state("state", "S")

    log = await check(cpair, sc)
    assert err_code(entry(log, "third")) == 10026


async def test_names_list_paging_and_errors(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.stream("EMPTY")
        for name in ("b", "A", "c2", "c10", "_x"):
            await c.create(f"create {name}", "S", {"durable_name": name}, keys=())
        await c.req("names", "CONSUMER.NAMES.S")
        await c.req("names offset", "CONSUMER.NAMES.S", {"offset": 2})
        await c.req("names offset past end", "CONSUMER.NAMES.S", {"offset": 100})
        await c.req("names negative offset", "CONSUMER.NAMES.S", {"offset": -1})
        await c.req("names empty object", "CONSUMER.NAMES.S", {})
        await c.req("names bad json", "CONSUMER.NAMES.S", b"{")
        await c.req("names empty stream", "CONSUMER.NAMES.EMPTY")
        await c.req("names missing stream", "CONSUMER.NAMES.NOPE")
        await c.req("names no stream token", "CONSUMER.NAMES", timeout=0.5)
        await c.req("list", "CONSUMER.LIST.S", keys=("total", "offset", "limit"))
        await c.req("list offset", "CONSUMER.LIST.S", {"offset": 4})
        await c.req("list empty stream", "CONSUMER.LIST.EMPTY")
        await c.req("list bad json", "CONSUMER.LIST.S", b"{")
        await c.req("list missing stream", "CONSUMER.LIST.NOPE")

    log = await check(cpair, sc)
    assert entry(log, "names")["consumers"] == ["A", "_x", "b", "c10", "c2"]
    assert entry(log, "names")["limit"] == 1024
    assert entry(log, "list")["limit"] == 256
    assert entry(log, "names empty stream")["consumers"] == []


async def test_info_and_delete_errors(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("create", "S", {"durable_name": "D"}, keys=())
        await c.req("info missing consumer", "CONSUMER.INFO.S.NOPE")
        await c.req("info missing stream", "CONSUMER.INFO.NOPE.D")
        await c.req("info with body", "CONSUMER.INFO.S.D", b"{}", keys=("name",))
        await c.req("info with junk body", "CONSUMER.INFO.S.D", b"junk", keys=("name",))
        await c.req("info no consumer token", "CONSUMER.INFO.S", timeout=0.5)
        await c.req("delete missing stream", "CONSUMER.DELETE.NOPE.D")
        await c.req("delete no consumer token", "CONSUMER.DELETE.S", timeout=0.5)
        await c.req("delete with body", "CONSUMER.DELETE.S.D", b"{}")
        await c.req("delete again", "CONSUMER.DELETE.S.D")
        await c.req("info after delete", "CONSUMER.INFO.S.D")
        await c.create("recreate", "S", {"durable_name": "D"}, keys=("name", "delivered"))
        await c.req("delete stream", "STREAM.DELETE.S")
        await c.req("info after stream delete", "CONSUMER.INFO.S.D")

    log = await check(cpair, sc)
    assert err_code(entry(log, "info missing consumer")) == 10014
    assert err_code(entry(log, "info missing stream")) == 10059
    assert entry(log, "delete with body")["success"] is True


async def test_consumer_advisories(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.*.S.*")
        await c.create("create", "S", {"durable_name": "D"}, keys=())
        await c.create("update", "S", {"durable_name": "D", "description": "x"}, keys=())
        await c.req("delete", "CONSUMER.DELETE.S.D")
        await c.advisories("advisories", adv, 2)

    log = await check(cpair, sc)
    subjects = [s for s, _ in entry(log, "advisories")]
    assert subjects == [
        "$JS.EVENT.ADVISORY.CONSUMER.CREATED.S.D",
        "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.D",
    ]


# ====================================================================== pause
async def test_pause_and_resume(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create("create", "S", {"durable_name": "A", "ack_policy": "explicit"}, keys=())
        await c.req("pause", "CONSUMER.PAUSE.S.A", {"pause_until": "2099-01-01T00:00:00Z"})
        await c.info("paused info", "S", "A", counters=False)
        await c.fetch("paused no_wait fetch", "S", "A", {"batch": 1, "no_wait": True}, 1)
        await c.fetch("paused expiring fetch", "S", "A", {"batch": 1, "expires": 200 * MS}, 1)
        await c.req("resume", "CONSUMER.PAUSE.S.A", {})
        await c.info("resumed info", "S", "A", counters=False)
        await c.fetch("resumed fetch", "S", "A", {"batch": 1, "no_wait": True}, 1)
        await c.req("resume empty body", "CONSUMER.PAUSE.S.A")
        await c.req(
            "pause in the past", "CONSUMER.PAUSE.S.A", {"pause_until": "2001-01-01T00:00:00Z"}
        )
        await c.req(
            "pause missing consumer",
            "CONSUMER.PAUSE.S.NOPE",
            {"pause_until": "2099-01-01T00:00:00Z"},
        )
        await c.req(
            "pause missing stream", "CONSUMER.PAUSE.NOPE.A", {"pause_until": "2099-01-01T00:00:00Z"}
        )
        await c.req("pause bad json", "CONSUMER.PAUSE.S.A", b"{")
        await c.req("pause bad time", "CONSUMER.PAUSE.S.A", {"pause_until": "tomorrow"})
        await c.create(
            "create paused",
            "S",
            {"durable_name": "PZ", "pause_until": "2099-01-01T00:00:00Z"},
            keys=("config", "paused", "pause_remaining"),
        )
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.S.*")
        await c.req(
            "pause PZ again", "CONSUMER.PAUSE.S.PZ", {"pause_until": "2098-01-01T00:00:00Z"}
        )
        await c.req("unpause PZ", "CONSUMER.PAUSE.S.PZ", {})
        await c.advisories("pause advisories", adv, 2)

    log = await check(cpair, sc)
    assert entry(log, "pause")["paused"] is True
    assert statuses(entry(log, "paused no_wait fetch")) == ["404 No Messages"]
    assert statuses(entry(log, "paused expiring fetch")) == ["408 Request Timeout"]
    assert entry(log, "resume") == {
        "type": "io.nats.jetstream.api.v1.consumer_pause_response",
        "paused": False,
        "pause_until": "0001-01-01T00:00:00Z",
    }


# ====================================================================== reset
async def test_reset(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 5)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        fs = await c.fetch("fetch", "S", "D", {"batch": 3}, 3)
        await c.ack("ack first", fs[0])
        await c.req("reset", "CONSUMER.RESET.S.D")
        await c.fetch("after reset", "S", "D", {"batch": 5, "no_wait": True}, 6, until_status=True)
        await c.req("reset to seq 4", "CONSUMER.RESET.S.D", {"seq": 4})
        await c.fetch(
            "after reset to 4", "S", "D", {"batch": 5, "no_wait": True}, 6, until_status=True
        )
        await c.req("reset seq 0", "CONSUMER.RESET.S.D", {"seq": 0})
        await c.req("reset past the end", "CONSUMER.RESET.S.D", {"seq": 100})
        await c.req("reset bad json", "CONSUMER.RESET.S.D", b"{")
        await c.create(
            "bounded",
            "S",
            {"durable_name": "B", "deliver_policy": "by_start_sequence", "opt_start_seq": 3},
            keys=(),
        )
        await c.req("reset below start seq", "CONSUMER.RESET.S.B", {"seq": 2})
        await c.req("reset within bounds", "CONSUMER.RESET.S.B", {"seq": 4})
        await c.create("last", "S", {"durable_name": "L", "deliver_policy": "last"}, keys=())
        await c.req("reset deliver last to a seq", "CONSUMER.RESET.S.L", {"seq": 2})
        await c.req("reset deliver last", "CONSUMER.RESET.S.L")
        await c.req("leader stepdown (standalone)", "CONSUMER.LEADER.STEPDOWN.S.D")
        # nats-server does not answer these two.
        await c.req("reset missing consumer", "CONSUMER.RESET.S.NOPE", timeout=0.5)
        await c.req("reset missing stream", "CONSUMER.RESET.NOPE.D", timeout=0.5)

    log = await check(cpair, sc)
    reset = entry(log, "reset")
    assert reset["type"] == "io.nats.jetstream.api.v1.consumer_reset_response"
    assert reset["reset_seq"] == 2
    assert reset["delivered"] == {"consumer_seq": 0, "stream_seq": 1}
    assert err_code(entry(log, "reset below start seq")) == 10204
    assert entry(log, "reset missing consumer") == "<timeout>"


# ====================================================================== priority groups
async def test_priority_groups(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 4)
        pg = {"ack_policy": "explicit", "priority_groups": ["G"]}
        await c.create(
            "overflow",
            "S",
            {"durable_name": "O", "priority_policy": "overflow", **pg},
            keys=("config",),
        )
        await c.fetch("no group", "S", "O", {"batch": 1, "no_wait": True}, 1)
        await c.fetch("unknown group", "S", "O", {"batch": 1, "no_wait": True, "group": "X"}, 1)
        await c.fetch(
            "min_pending unmet",
            "S",
            "O",
            {"batch": 1, "no_wait": True, "group": "G", "min_pending": 10},
            1,
        )
        await c.fetch(
            "min_pending met",
            "S",
            "O",
            {"batch": 1, "no_wait": True, "group": "G", "min_pending": 2},
            1,
        )
        await c.fetch(
            "min_ack_pending unmet",
            "S",
            "O",
            {"batch": 1, "no_wait": True, "group": "G", "min_ack_pending": 5},
            1,
        )
        await c.fetch(
            "min_ack_pending met",
            "S",
            "O",
            {"batch": 1, "no_wait": True, "group": "G", "min_ack_pending": 1},
            1,
        )

        await c.create(
            "pinned",
            "S",
            {"durable_name": "P", "priority_policy": "pinned_client", **pg},
            keys=("config",),
        )
        first = await c.fetch(
            "pinned first", "S", "P", {"batch": 1, "group": "G", "expires": 300 * MS}, 1
        )
        pin = first[0].header("Nats-Pin-Id") if first else None
        c.alias(pin or "", "<pin id>")
        await c.fetch(
            "pinned other client", "S", "P", {"batch": 1, "group": "G", "no_wait": True}, 1
        )
        await c.fetch(
            "pinned with id", "S", "P", {"batch": 1, "group": "G", "no_wait": True, "id": pin}, 1
        )
        await c.fetch(
            "pinned wrong id",
            "S",
            "P",
            {"batch": 1, "group": "G", "no_wait": True, "id": "bogus"},
            1,
        )
        await c.req("pinned info", "CONSUMER.INFO.S.P", keys=("priority_groups",))
        await c.req("unpin", "CONSUMER.UNPIN.S.P", {"group": "G"})
        await c.req("unpin unknown group", "CONSUMER.UNPIN.S.P", {"group": "X"})
        await c.req("unpin no group", "CONSUMER.UNPIN.S.P", {})
        await c.req("unpin bad json", "CONSUMER.UNPIN.S.P", b"{")
        await c.req("unpin missing consumer", "CONSUMER.UNPIN.S.NOPE", {"group": "G"})
        await c.req("unpin not pinned consumer", "CONSUMER.UNPIN.S.O", {"group": "G"})
        await c.req("unpinned info", "CONSUMER.INFO.S.P", keys=("priority_groups",))

        await c.create(
            "prioritized",
            "S",
            {"durable_name": "PR", "priority_policy": "prioritized", **pg},
            keys=("config",),
        )
        await c.fetch(
            "priority 1", "S", "PR", {"batch": 1, "group": "G", "priority": 1, "no_wait": True}, 1
        )
        await c.fetch(
            "priority out of range",
            "S",
            "PR",
            {"batch": 1, "group": "G", "priority": 20, "no_wait": True},
            1,
        )

    log = await check(cpair, sc)
    assert statuses(entry(log, "no group")) == ["400 Bad Request - Priority Group missing"]
    assert statuses(entry(log, "unknown group")) == ["400 Bad Request - Invalid Priority Group"]
    assert statuses(entry(log, "pinned wrong id")) == ["423 Nats-Pin-Id mismatch"]
    assert entry(log, "pinned first")[0]["headers"] == [["Nats-Pin-Id", "<pin id>"]]


# ====================================================================== pull requests
async def test_pull_batch_and_reply_subjects(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 3)
        await c.pub("s.b", "with headers", {"X-Test": "1", "X-Other": "two words"})
        await c.pub("s.c", "")
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        got = await c.fetch("batch 2", "S", "D", {"batch": 2}, 2)
        got += await c.fetch("batch 3", "S", "D", {"batch": 3}, 3)
        await c.info("info", "S", "D")
        # The <ts> token of the ack subject is the message's stream timestamp (ns).
        same = []
        for seq, f in enumerate(got, 1):
            stored = await c.raw("STREAM.MSG.GET.S", {"seq": seq})
            same.append(f.reply.split(".")[7] == str(rfc3339_ns(stored["message"]["time"])))
        c.note("ts token is the stored timestamp", same)
        await c.fetch("empty body = batch 1", "S", "D", "", 1, timeout=0.5)

    log = await check(cpair, sc)
    assert entry(log, "ts token is the stored timestamp") == [True] * 5
    first = entry(log, "batch 2")
    assert first[0] == {"subject": "s.a", "reply": "$JS.ACK.S.D.1.1.1.<ts>.4", "data": "m1"}
    assert entry(log, "batch 3")[1]["headers"] == [["X-Test", "1"], ["X-Other", "two words"]]
    assert entry(log, "info")["num_ack_pending"] == 5


async def test_pull_no_wait(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        await c.fetch("empty stream", "S", "D", {"batch": 1, "no_wait": True}, 1)
        await c.pubs("s.a", 2)
        # nats-server signals the consumer on another goroutine: seen answering 404 here
        await c.await_pending("S", "D", 2)
        await c.fetch("partial batch", "S", "D", {"batch": 5, "no_wait": True}, 3)
        await c.fetch("all delivered", "S", "D", {"batch": 5, "no_wait": True}, 1)
        await c.fetch(
            "no_wait + expires", "S", "D", {"batch": 1, "no_wait": True, "expires": 100 * MS}, 1
        )
        await c.info("info", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "empty stream") == [{"subject": "_I.1", "status": "404 No Messages"}]
    assert statuses(entry(log, "partial batch")) == ["", "", "404 No Messages"]
    assert statuses(entry(log, "no_wait + expires")) == ["408 Request Timeout"]


async def test_pull_expires(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 1)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        await c.fetch("expires partial", "S", "D", {"batch": 5, "expires": 300 * MS}, 2)
        await c.fetch(
            "expires empty", "S", "D", {"batch": 3, "expires": 200 * MS, "max_bytes": 100}, 1
        )
        await c.fetch("expires tiny", "S", "D", {"batch": 1, "expires": 1}, 1)
        await c.info("info", "S", "D")

    log = await check(cpair, sc)
    partial = entry(log, "expires partial")
    assert partial[1] == {
        "subject": "_I.1",
        "status": "408 Request Timeout",
        "headers": [["Nats-Pending-Messages", "4"], ["Nats-Pending-Bytes", "0"]],
    }
    assert entry(log, "expires empty")[0]["headers"] == [
        ["Nats-Pending-Messages", "3"],
        ["Nats-Pending-Bytes", "100"],
    ]


async def test_pull_waiting_request_served_by_publish(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        inbox = c.sub("_W")
        c.pull("S", "D", {"batch": 2, "expires": 5 * SEC}, "_W")
        await c.await_waiting("S", "D", 1)
        await c.info("waiting", "S", "D")
        await c.pub("s.a", "later")
        await c.frames("first publish", inbox, 1)
        await c.info("still waiting", "S", "D")
        await c.pub("s.b", "later2")
        await c.frames("second publish", inbox, 1)
        await c.info("done", "S", "D")
        await c.pub("s.c", "not delivered")
        await c.quiet("nothing more", inbox, 0.2)
        await c.info("pending", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "waiting")["num_waiting"] == 1
    assert entry(log, "done")["num_waiting"] == 0
    assert entry(log, "nothing more") == []


async def test_pull_max_bytes(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 3)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        await c.fetch("too small", "S", "D", {"batch": 2, "max_bytes": 10}, 1)
        await c.fetch(
            "too small no_wait", "S", "D", {"batch": 2, "max_bytes": 10, "no_wait": True}, 1
        )
        await c.fetch("fits one", "S", "D", {"batch": 3, "max_bytes": 60}, 2)
        await c.fetch("fits two", "S", "D", {"batch": 3, "max_bytes": 120, "no_wait": True}, 3)
        await c.info("info", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "too small") == [
        {
            "subject": "_I.1",
            "status": "409 Message Size Exceeds MaxBytes",
            "headers": [["Nats-Pending-Messages", "2"], ["Nats-Pending-Bytes", "10"]],
        }
    ]


async def test_pull_request_limits(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create(
            "create",
            "S",
            {
                "durable_name": "D",
                "ack_policy": "explicit",
                "max_batch": 5,
                "max_expires": 2 * SEC,
                "max_bytes": 1000,
            },
            keys=(),
        )
        await c.fetch("batch above max_batch", "S", "D", {"batch": 6}, 1)
        await c.fetch("expires above max_expires", "S", "D", {"batch": 1, "expires": 3 * SEC}, 1)
        await c.fetch("max_bytes above limit", "S", "D", {"batch": 1, "max_bytes": 2000}, 1)
        await c.fetch("within limits", "S", "D", {"batch": 5, "expires": SEC, "max_bytes": 1000}, 2)
        await c.info("info", "S", "D")

    log = await check(cpair, sc)
    assert statuses(entry(log, "batch above max_batch")) == ["409 Exceeded MaxRequestBatch of 5"]
    assert statuses(entry(log, "expires above max_expires")) == [
        "409 Exceeded MaxRequestExpires of 2s"
    ]
    assert statuses(entry(log, "max_bytes above limit")) == [
        "409 Exceeded MaxRequestMaxBytes of 1000"
    ]


async def test_pull_max_waiting(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create(
            "create",
            "S",
            {"durable_name": "D", "ack_policy": "explicit", "max_waiting": 2},
            keys=(),
        )
        inboxes = [c.sub(f"_W{i}") for i in range(4)]
        for i in range(3):
            c.pull("S", "D", {"batch": 1, "expires": 10 * SEC}, f"_W{i}")
        await c.frames("third request", inboxes[2], 1)
        await c.info("info", "S", "D")
        await c.pubs("s.a", 2)
        # (the pending count in the first delivery's ack subject says whether the second
        # message was stored before it went out: timing, on either server)
        for label, inbox in (("first request", inboxes[0]), ("second request", inboxes[1])):
            got = await c.frames(label, inbox, 1, record=False)
            c.log.append((label, [_no_pending(r) for r in frame_records(got, False)]))
        c.pull("S", "D", {"batch": 1, "no_wait": True}, "_W3")
        await c.frames("no_wait after", inboxes[3], 1)
        await c.info("info after", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "third request") == [{"subject": "_W2", "status": "409 Exceeded MaxWaiting"}]
    assert entry(log, "info")["num_waiting"] == 2


async def test_pull_idle_heartbeat(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "none"}, keys=())
        await c.fetch(
            "heartbeat too large",
            "S",
            "D",
            {"batch": 1, "expires": SEC, "idle_heartbeat": 600 * MS},
            1,
        )
        await c.fetch(
            "heartbeat without expires", "S", "D", {"batch": 1, "idle_heartbeat": 100 * MS}, 1
        )
        inbox = c.sub("_HB")
        c.pull("S", "D", {"batch": 5, "expires": 2 * SEC, "idle_heartbeat": 200 * MS}, "_HB")
        await c.frames("messages then heartbeat", inbox, 3)
        await c.pub("s.b", "late")
        await c.messages("delivered after publish", inbox, 1)

    log = await check(cpair, sc)
    assert entry(log, "messages then heartbeat")[2] == {
        "subject": "_HB",
        "status": "100 Idle Heartbeat",
        "headers": [["Nats-Last-Consumer", "2"], ["Nats-Last-Stream", "2"]],
    }
    assert statuses(entry(log, "heartbeat too large")) == [
        "400 Bad Request - heartbeat value too large"
    ]


async def test_pull_consumer_deleted_while_waiting(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        inbox = c.sub("_W")
        c.pull("S", "D", {"batch": 3, "expires": 10 * SEC}, "_W")
        await c.await_waiting("S", "D", 1)
        await c.req("delete", "CONSUMER.DELETE.S.D")
        await c.frames("waiting request", inbox, 1)
        await c.create("recreate", "S", {"durable_name": "E", "ack_policy": "explicit"}, keys=())
        inbox2 = c.sub("_W2")
        c.pull("S", "E", {"batch": 3, "expires": 10 * SEC}, "_W2")
        await c.await_waiting("S", "E", 1)
        await c.req("delete stream", "STREAM.DELETE.S")
        await c.frames("waiting request on stream delete", inbox2, 1)

    log = await check(cpair, sc)
    assert entry(log, "waiting request") == [{"subject": "_W", "status": "409 Consumer Deleted"}]


async def test_pull_bad_requests(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 3)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "none"}, keys=())
        await c.create("push", "S", {"durable_name": "P", "deliver_subject": "dlv.none"}, keys=())
        await c.fetch("bad json", "S", "D", "{", 1)
        await c.fetch("json array", "S", "D", "[1]", 1)
        await c.fetch("unknown consumer", "S", "NOPE", {"batch": 1}, 1)
        await c.fetch("unknown stream", "NOPE", "D", {"batch": 1}, 1)
        await c.fetch("push consumer", "S", "P", {"batch": 1}, 1)
        await c.fetch("batch 0", "S", "D", {"batch": 0, "no_wait": True}, 1)
        await c.fetch("batch negative", "S", "D", {"batch": -1, "no_wait": True}, 1)
        await c.fetch("expires negative", "S", "D", {"batch": 1, "expires": -1, "no_wait": True}, 1)
        await c.fetch("unknown field", "S", "D", {"batch": 1, "no_wait": True, "bogus": 1}, 1)

    log = await check(cpair, sc)
    assert statuses(entry(log, "bad json")) == ["400 Bad Request - unexpected end of JSON input"]
    assert entry(log, "unknown consumer") == [
        {
            "subject": "_I.4",
            "status": "503",
            "headers": [["Nats-Subject", "$JS.API.CONSUMER.MSG.NEXT.S.NOPE"]],
        }
    ]
    assert statuses(entry(log, "push consumer")) == ["409 Consumer is push based"]


async def test_pull_ack_none_and_info_counters(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 4)
        await c.create("create", "S", {"durable_name": "N", "ack_policy": "none"}, keys=())
        await c.fetch("fetch", "S", "N", {"batch": 3}, 3)
        await c.info("info", "S", "N")
        await c.ack("ack on ack none", "$JS.ACK.S.N.1.1.1.0.3", "+ACK")
        await c.info("info after ack", "S", "N")

    log = await check(cpair, sc)
    info = entry(log, "info")
    assert info["ack_floor"]["stream_seq"] == 3 and info["num_ack_pending"] == 0
    assert info["num_pending"] == 1


async def test_max_ack_pending_pull(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 5)
        await c.create(
            "create",
            "S",
            {"durable_name": "D", "ack_policy": "explicit", "max_ack_pending": 2},
            keys=(),
        )
        got = await c.fetch(
            "limited by max_ack_pending", "S", "D", {"batch": 5, "expires": 300 * MS}, 3
        )
        # At the limit a no_wait request gets no answer at all from nats-server.
        await c.fetch("no_wait at limit", "S", "D", {"batch": 1, "no_wait": True}, 1, timeout=0.5)
        await c.info("info", "S", "D")
        await c.ack("ack first", got[0])
        await c.fetch("one more after ack", "S", "D", {"batch": 5, "no_wait": True}, 2, timeout=0.5)
        await c.info("info after", "S", "D")

    log = await check(cpair, sc)
    assert statuses(entry(log, "limited by max_ack_pending")) == ["", "", "408 Request Timeout"]


# ====================================================================== deliver policies
async def test_deliver_policies(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        for subj in ["s.a", "s.b", "s.a", "s.c", "s.b"]:
            await c.pub(subj, subj)
        m = await c.raw("STREAM.MSG.GET.S", {"seq": 3})
        t3 = m["message"]["time"]
        c.alias(t3, "<time of seq 3>")
        policies: list[tuple[str, dict[str, Any]]] = [
            ("all", {"deliver_policy": "all"}),
            ("last", {"deliver_policy": "last"}),
            ("new", {"deliver_policy": "new"}),
            ("by_start_sequence", {"deliver_policy": "by_start_sequence", "opt_start_seq": 4}),
            (
                "by_start_sequence past end",
                {"deliver_policy": "by_start_sequence", "opt_start_seq": 40},
            ),
            ("by_start_time", {"deliver_policy": "by_start_time", "opt_start_time": t3}),
            (
                "by_start_time past",
                {"deliver_policy": "by_start_time", "opt_start_time": "2000-01-01T00:00:00Z"},
            ),
            (
                "by_start_time future",
                {"deliver_policy": "by_start_time", "opt_start_time": "2099-01-01T00:00:00Z"},
            ),
            ("last_per_subject", {"deliver_policy": "last_per_subject", "filter_subject": "s.*"}),
            (
                "last_per_subject multi",
                {"deliver_policy": "last_per_subject", "filter_subjects": ["s.a", "s.c"]},
            ),
            ("last filtered", {"deliver_policy": "last", "filter_subject": "s.a"}),
            ("multiple filters", {"filter_subjects": ["s.c", "s.a"]}),
            ("filter matches nothing", {"filter_subject": "s.zzz"}),
        ]
        for i, (label, cfg) in enumerate(policies):
            name = f"C{i}"
            await c.create(
                label,
                "S",
                {"durable_name": name, "ack_policy": "none", **cfg},
                keys=("config", "num_pending", "delivered"),
            )
            await c.fetch(
                f"{label} fetch", "S", name, {"batch": 10, "no_wait": True}, 11, until_status=True
            )
        await c.pub("s.z", "new msg")
        await c.fetch(
            "new fetch after publish",
            "S",
            "C2",
            {"batch": 10, "no_wait": True},
            11,
            until_status=True,
        )

    log = await check(cpair, sc)
    assert [f.get("data") for f in entry(log, "last_per_subject fetch")] == [
        "s.a",
        "s.c",
        "s.b",
        None,
    ]
    assert entry(log, "by_start_time")["delivered"] == {"consumer_seq": 0, "stream_seq": 2}


# ====================================================================== acks
async def test_ack_kinds(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 7)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.*.S.D")
        fs = await c.fetch("fetch", "S", "D", {"batch": 7}, 7)
        await c.ack("+ACK sync", fs[0])
        await c.ack("+ACK again", fs[0])
        await c.ack("-NAK sync", fs[1], "-NAK")
        await c.ack("-NAK delay sync", fs[2], '-NAK {"delay": 5000000000}')
        await c.ack("+WPI sync", fs[3], "+WPI")
        await c.ack("+TERM reason sync", fs[4], "+TERM bad message")
        await c.ack("+OK sync", fs[5], "+OK")
        await c.ack("empty payload sync", fs[6], "")
        await c.info("info", "S", "D")
        await c.advisories("advisories", adv, 3)
        await c.fetch("nak'd redelivered", "S", "D", {"batch": 2, "no_wait": True}, 2)
        await c.info("info after redelivery", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "+ACK sync") == {}  # empty reply
    info = entry(log, "info")
    # Pending: m2 (nak'd), m3 (nak'd with delay), m4 (in progress).
    assert info["ack_floor"]["stream_seq"] == 1 and info["num_ack_pending"] == 3
    subjects = [s for s, _ in entry(log, "advisories")]
    assert subjects == [
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.D",
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.D",
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.D",
    ]
    assert entry(log, "advisories")[2][1]["reason"] == "bad message"


async def test_ack_fire_and_forget_and_unknown(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 4)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        fs = await c.fetch("fetch", "S", "D", {"batch": 4}, 4)
        await c.ack(None, fs[1])
        await c.ack(None, fs[3], "+TERM")
        await c.info("acks out of order", "S", "D")
        await c.ack(None, fs[0])
        await c.info("floor moves", "S", "D")
        # nats-server does not answer an ack for a sequence it does not know.
        await c.ack("unknown sequence sync", "$JS.ACK.S.D.1.99.99.0.0", "+ACK", timeout=0.5)
        await c.ack("garbage ack", fs[2], "+WHAT")
        await c.info("after garbage", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "floor moves")["ack_floor"]["stream_seq"] == 2


async def test_ack_next(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 5)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        fs = await c.fetch("fetch", "S", "D", {"batch": 1}, 1)
        nxt = c.sub("_NXT")
        c.conn.pub(fs[0].reply, "+NXT", reply="_NXT")
        got = await c.frames("+NXT delivers next to reply", nxt, 1)
        c.conn.pub(got[0].reply, '+NXT {"batch": 2}', reply="_NXT")
        got = await c.frames("+NXT batch 2", nxt, 2)
        c.conn.pub(got[1].reply, "+NXT 5", reply="_NXT")
        await c.frames("+NXT plain number", nxt, 1)
        await c.info("info", "S", "D")

    log = await check(cpair, sc)
    assert entry(log, "+NXT delivers next to reply")[0]["data"] == "m2"


async def test_ack_sampling_metric(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        metrics = c.sub("$JS.EVENT.METRIC.CONSUMER.ACK.S.*")
        cfg = {"durable_name": "D", "ack_policy": "explicit", "sample_freq": "100%"}
        await c.create("create", "S", cfg, keys=())
        await c.create("unsampled", "S", {"durable_name": "U", "ack_policy": "explicit"}, keys=())
        fs = await c.fetch("fetch", "S", "D", {"batch": 2}, 2)
        fs += await c.fetch("fetch unsampled", "S", "U", {"batch": 1}, 1)
        await c.ack(None, fs[1], "-NAK")
        await c.ack("ack", fs[0])
        await c.ack("ack unsampled", fs[2])
        await c.advisories("ack metrics", metrics, 2, timeout=1)

    log = await check(cpair, sc)
    (metric,) = entry(log, "ack metrics")
    assert metric == [
        "$JS.EVENT.METRIC.CONSUMER.ACK.S.D",
        {
            "type": "io.nats.jetstream.metric.v1.consumer_ack",
            "id": "<id>",
            "timestamp": "<timestamp>",
            "stream": "S",
            "consumer": "D",
            "consumer_seq": 1,
            "stream_seq": 1,
            "ack_time": "<ack_time>",
            "deliveries": 1,
        },
    ]


async def test_ack_all_policy(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 6)
        await c.create("create", "S", {"durable_name": "A", "ack_policy": "all"}, keys=())
        fs = await c.fetch("fetch", "S", "A", {"batch": 6}, 6)
        await c.ack("ack third", fs[2])
        await c.info("floor at 3", "S", "A")
        await c.ack("nak fifth", fs[4], "-NAK")
        await c.info("after nak", "S", "A")
        await c.ack("ack second (below floor)", fs[1])
        await c.info("unchanged", "S", "A")
        await c.fetch("redelivered", "S", "A", {"batch": 6, "no_wait": True}, 2)
        await c.ack("term sixth", fs[5], "+TERM")
        await c.info("after term", "S", "A")
        await c.ack("ack fourth", fs[3])
        await c.info("after ack fourth", "S", "A")

    log = await check(cpair, sc)
    floor = entry(log, "floor at 3")
    assert floor["ack_floor"] == {
        "consumer_seq": 3,
        "stream_seq": 3,
        "last_active": "<last_active>",
    }
    assert floor["num_ack_pending"] == 3


# ====================================================================== redelivery
async def test_redelivery_after_ack_wait(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create(
            "create",
            "S",
            {"durable_name": "R", "ack_policy": "explicit", "ack_wait": 400 * MS},
            keys=(),
        )
        inbox = c.sub("_P")
        c.pull("S", "R", {"batch": 3, "expires": 3 * SEC}, "_P")
        first = await c.frames("first delivery", inbox, 2)
        await c.ack(None, first[0])
        await c.frames("redelivery of the unacked one", inbox, 1)
        await c.info("info", "S", "R")

    log = await check(cpair, sc)
    redelivered = entry(log, "redelivery of the unacked one")
    assert redelivered == [{"subject": "s.a", "reply": "$JS.ACK.S.R.2.2.3.<ts>.0", "data": "m2"}]
    assert entry(log, "info")["num_redelivered"] == 1


async def test_max_deliver_advisory(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.R")
        await c.create(
            "create",
            "S",
            {"durable_name": "R", "ack_policy": "explicit", "ack_wait": 300 * MS, "max_deliver": 2},
            keys=(),
        )
        inbox = c.sub("_P")
        c.pull("S", "R", {"batch": 10, "expires": 1500 * MS}, "_P")
        await c.frames("first", inbox, 2)
        await c.frames("second", inbox, 2)
        await c.advisories("max deliveries advisories", adv, 2)
        await c.info("info", "S", "R")
        await c.frames("request expires", inbox, 1)

    log = await check(cpair, sc)
    advs = entry(log, "max deliveries advisories")
    assert advs[0] == [
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.R",
        {
            "type": "io.nats.jetstream.advisory.v1.max_deliver",
            "id": "<id>",
            "timestamp": "<timestamp>",
            "stream": "S",
            "consumer": "R",
            "stream_seq": 1,
            "deliveries": 2,
        },
    ]
    assert entry(log, "info")["num_ack_pending"] == 0


async def test_backoff_redelivery(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 1)
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.B")
        await c.create(
            "create",
            "S",
            {
                "durable_name": "B",
                "ack_policy": "explicit",
                "backoff": [200 * MS, 400 * MS],
                "max_deliver": 3,
            },
            keys=("config",),
        )
        inbox = c.sub("_B")
        c.pull("S", "B", {"batch": 5, "expires": 3 * SEC}, "_B")
        for i in range(3):
            await c.frames(f"delivery {i + 1}", inbox, 1)
        await c.advisories("advisory", adv, 1)
        await c.info("info", "S", "B")

    log = await check(cpair, sc)
    assert entry(log, "create")["config"]["ack_wait"] == 200 * MS
    assert entry(log, "delivery 3")[0]["reply"] == "$JS.ACK.S.B.3.1.3.<ts>.0"


async def test_nak_with_delay(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.create("create", "S", {"durable_name": "D", "ack_policy": "explicit"}, keys=())
        inbox = c.sub("_P")
        c.pull("S", "D", {"batch": 4, "expires": 3 * SEC}, "_P")
        fs = await c.frames("first", inbox, 2)
        await c.ack(None, fs[0], '-NAK {"delay": 300000000}')
        await c.ack(None, fs[1], "-NAK 300ms")
        await c.frames("redelivered after delay", inbox, 2)
        await c.info("info", "S", "D")

    await check(cpair, sc)


@pytest.mark.slow
async def test_in_progress_extends_ack_wait(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 1)
        await c.create(
            "create", "S", {"durable_name": "D", "ack_policy": "explicit", "ack_wait": SEC}, keys=()
        )
        inbox = c.sub("_P")
        c.pull("S", "D", {"batch": 2, "expires": 4 * SEC}, "_P")
        fs = await c.frames("first", inbox, 1)
        await asyncio.sleep(0.5)
        await c.ack(None, fs[0], "+WPI")
        await c.quiet("nothing at original deadline", inbox, 0.7)
        await c.frames("redelivered after extension", inbox, 1)

    log = await check(cpair, sc)
    assert entry(log, "nothing at original deadline") == []


# ====================================================================== retention
async def test_workqueue_retention(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("WQ", retention="workqueue")
        await c.create(
            "W1",
            "WQ",
            {"durable_name": "W1", "ack_policy": "explicit", "filter_subject": "wq.a"},
            keys=(),
        )
        await c.create(
            "W2",
            "WQ",
            {"durable_name": "W2", "ack_policy": "explicit", "filter_subject": "wq.b"},
            keys=(),
        )
        for subj in ["wq.a", "wq.a", "wq.b", "wq.c"]:
            await c.pub(subj)
        await c.state("published", "WQ")
        fs = await c.fetch("W1 fetch", "WQ", "W1", {"batch": 2}, 2)
        await c.ack("ack", fs[0])
        await c.ack("term", fs[1], "+TERM")
        await c.state("after ack + term", "WQ")
        fs = await c.fetch("W2 fetch", "WQ", "W2", {"batch": 1}, 1)
        await c.ack("nak", fs[0], "-NAK")
        await c.state("after nak", "WQ")
        await c.info("W2 info", "WQ", "W2")
        await c.req("delete W2", "CONSUMER.DELETE.WQ.W2")
        await c.state("after delete", "WQ")

    log = await check(cpair, sc)
    assert entry(log, "after ack + term") == {
        "messages": 2,
        "first_seq": 3,
        "last_seq": 4,
        "consumer_count": 2,
    }


async def test_interest_retention(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("IN", retention="interest")
        await c.pub("in.a")
        await c.state("no consumers", "IN")
        await c.create(
            "I1", "IN", {"durable_name": "I1", "ack_policy": "explicit"}, keys=("num_pending",)
        )
        await c.create(
            "I2",
            "IN",
            {"durable_name": "I2", "ack_policy": "explicit", "filter_subject": "in.a"},
            keys=("num_pending",),
        )
        await c.create(
            "I3",
            "IN",
            {"durable_name": "I3", "ack_policy": "none", "filter_subject": "in.b"},
            keys=("num_pending",),
        )
        await c.pubs("in.a", 2)
        await c.pub("in.b")
        await c.state("published", "IN")
        fs = await c.fetch("I1 fetch", "IN", "I1", {"batch": 3}, 3)
        for i, f in enumerate(fs):
            await c.ack(f"I1 ack {i}", f)
        await c.state("after I1 acks", "IN")
        fs = await c.fetch("I2 fetch", "IN", "I2", {"batch": 2}, 2)
        await c.ack("I2 ack", fs[0])
        await c.state("after I2 ack", "IN")
        await c.fetch("I3 fetch", "IN", "I3", {"batch": 1}, 1)
        await c.state("after ack-none delivery", "IN")
        await c.req("delete I2", "CONSUMER.DELETE.IN.I2")
        await c.state("after deleting I2", "IN")

    log = await check(cpair, sc)
    assert entry(log, "after I1 acks")["messages"] == 3
    assert entry(log, "after deleting I2")["messages"] == 0


# ====================================================================== push consumers
async def test_push_delivery_and_idle_heartbeat(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        dlv = c.sub("dlv.p")
        await c.create(
            "create",
            "S",
            {
                "durable_name": "P",
                "deliver_subject": "dlv.p",
                "ack_policy": "explicit",
                "idle_heartbeat": 200 * MS,
            },
            keys=("config", "push_bound"),
        )
        await c.frames("messages then heartbeat", dlv, 3, dedupe=True)
        await c.info("info", "S", "P", counters=False)
        await c.pub("s.b", "live")
        fs = await c.messages("live message", dlv, 1)
        await c.ack("ack", fs[0])
        await c.info("after ack", "S", "P")

    log = await check(cpair, sc)
    assert entry(log, "messages then heartbeat")[2] == {
        "subject": "dlv.p",
        "status": "100 Idle Heartbeat",
        "headers": [["Nats-Last-Consumer", "2"], ["Nats-Last-Stream", "2"]],
    }
    assert entry(log, "create")["push_bound"] is True


async def test_push_flow_control(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("F", subjects=["f"])
        for _ in range(3):
            await c.pub("f", "x" * 900_000)
        dlv = c.sub("dlv.fc")
        await c.create(
            "create",
            "F",
            {
                "durable_name": "FC",
                "deliver_subject": "dlv.fc",
                "ack_policy": "none",
                "idle_heartbeat": 300 * MS,
                "flow_control": True,
            },
            keys=(),
        )
        fs = await c.frames("deliveries", dlv, 5, record=False)
        c.note("frames", [[f.subject, f.status, f.reply, len(f.data)] for f in fs])
        fc = [f for f in fs if f.status == "100 FlowControl Request"]
        stalled = [
            f.header("Nats-Consumer-Stalled") for f in fs if f.status == "100 Idle Heartbeat"
        ]
        c.note(
            "stalled header names the flow control subject",
            stalled[:1] == [fc[0].reply] if fc else None,
        )
        if fc:
            c.conn.pub(fc[0].reply, b"")
        await c.conn.ping()
        await c.pub("f", "y")
        await c.messages("delivered after flow control reply", dlv, 1)

    log = await check(cpair, sc)
    frames = entry(log, "frames")
    assert frames[2] == ["dlv.fc", "100 FlowControl Request", "$JS.FC.F.FC.<id>", 0]
    assert frames[4][1] == "100 Idle Heartbeat"
    assert entry(log, "stalled header names the flow control subject") is True


async def test_push_queue_group_and_headers_only(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 2)
        await c.pub("s.b", "hdrs", {"X-A": "1"})
        q = c.sub("dlv.q", "grp")
        await c.create(
            "create",
            "S",
            {
                "durable_name": "Q",
                "deliver_subject": "dlv.q",
                "deliver_group": "grp",
                "ack_policy": "none",
                "headers_only": True,
            },
            keys=("config", "push_bound"),
        )
        await c.frames("headers only", q, 3)
        await c.info("info", "S", "Q")

    log = await check(cpair, sc)
    assert entry(log, "headers only")[2]["headers"] == [["X-A", "1"], ["Nats-Msg-Size", "4"]]


async def test_push_without_interest_and_ephemeral(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 3)
        await c.create(
            "no interest",
            "S",
            {"durable_name": "NOI", "deliver_subject": "dlv.none"},
            keys=("push_bound", "num_pending"),
        )
        await c.info("no interest info", "S", "NOI")
        sub = c.sub("dlv.eph")
        await c.create(
            "ephemeral push",
            "S",
            {"deliver_subject": "dlv.eph"},
            keys=("name", "config", "push_bound"),
        )
        await c.frames("ephemeral deliveries", sub, 3)
        late = c.sub("dlv.late")
        await c.create(
            "durable, interest later",
            "S",
            {"durable_name": "LATE", "deliver_subject": "dlv.late", "ack_policy": "explicit"},
            keys=(),
        )
        await c.frames("late interest deliveries", late, 3)
        await c.req("names", "CONSUMER.NAMES.S", keys=("total",))

    log = await check(cpair, sc)
    assert "push_bound" not in entry(log, "no interest")
    assert entry(log, "ephemeral push")["push_bound"] is True


async def test_push_max_ack_pending(cpair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("S")
        await c.pubs("s.a", 4)
        dlv = c.sub("dlv.m")
        await c.create(
            "create",
            "S",
            {
                "durable_name": "M",
                "deliver_subject": "dlv.m",
                "ack_policy": "explicit",
                "max_ack_pending": 2,
            },
            keys=(),
        )
        fs = await c.frames("first two", dlv, 2)
        await c.quiet("held back", dlv, 0.2)
        await c.info("info", "S", "M")
        await c.ack("ack", fs[0])
        await c.frames("one more after ack", dlv, 1)
        await c.info("info after", "S", "M")

    log = await check(cpair, sc)
    assert entry(log, "held back") == []


# ====================================================================== file storage
async def test_file_stream_consumer(cpair: ServerPair) -> None:
    # The only scenario on a file stream; its name is used nowhere else (see
    # ConsumerRecorder.stream for the nats-server re-create race this avoids).
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("FILESTREAM", subjects=["fs.>"], storage="file")
        await c.pubs("fs.a", 3)
        await c.create("durable", "FILESTREAM", {"durable_name": "D", "ack_policy": "explicit"})
        fs = await c.fetch("fetch", "FILESTREAM", "D", {"batch": 2}, 2)
        await c.ack("ack", fs[0])
        await c.ack("nak", fs[1], "-NAK")
        await c.fetch("redelivered + rest", "FILESTREAM", "D", {"batch": 3, "no_wait": True}, 3)
        await c.info("info", "FILESTREAM", "D", counters=False)
        await c.create("memory consumer", "FILESTREAM", {"durable_name": "M", "mem_storage": True})
        await c.req("list", "CONSUMER.LIST.FILESTREAM")

    log = await check(cpair, sc)
    assert entry(log, "info")["num_ack_pending"] == 2


def _no_pending(record: Any) -> Any:
    """A frame record with the timestamp and pending count of its ack subject masked."""
    reply = record.get("reply") if isinstance(record, dict) else None
    if isinstance(reply, str) and reply.startswith("$JS.ACK."):
        return {**record, "reply": reply.rsplit(".", 2)[0] + ".<ts>.<pending>"}
    return record
