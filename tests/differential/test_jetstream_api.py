"""Differential tests of the JetStream stream API: the same requests, publishes and
direct gets go to nats-server and natsd; the normalised responses must be equal.

Each test is a scenario (see :mod:`.js_scenarios`): a list of ``(label, response)``
pairs per server. Volatile values (timestamps, cluster, server ids, ``_nats.*``
metadata, ``api.level``) are normalised; account ``api`` counters are relative to the
start of the scenario, except in :func:`test_account_info_api_counters_fresh_server`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, xfail
from .js_scenarios import JsRecorder, js_server_pair, parse_header_block, run_scenario

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    """nats-server and natsd with ``-js -sd <own tmp dir>``, shared by the module;
    every scenario starts and ends by deleting all streams."""
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


@pytest.fixture
def js_fresh_pair() -> Iterator[ServerPair]:
    """A brand-new JetStream pair (for absolute account counters)."""
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` (nats-server) and ``b`` (natsd) differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                out.append(f"{path}.{k}: nats-server={a[k]!r} natsd=<absent>")
            elif k not in a:
                out.append(f"{path}.{k}: nats-server=<absent> natsd={b[k]!r}")
            else:
                out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path or '.'}: nats-server={a!r} natsd={b!r}"]


def assert_same(ref: Any, impl: Any) -> None:
    """Equality of two scenario logs, with a per-label list of differing paths."""
    if isinstance(ref, list) and isinstance(impl, list):
        lines = []
        for (label, a), (_, b) in zip(ref, impl, strict=False):
            lines += [f"[{label}] {d}" for d in _diff(a, b)]
        if len(ref) != len(impl):
            lines.append(f"log lengths differ: {len(ref)} != {len(impl)}")
        assert impl == ref, "differences:\n" + "\n".join(lines)
    assert impl == ref


async def check(pair: ServerPair, scenario: Any, *, api_counters: bool = False) -> None:
    ref, impl = await run_scenario(pair, scenario, api_counters=api_counters)
    assert_same(ref, impl)


# ====================================================================== account info
async def test_account_info_api_counters_fresh_server(js_fresh_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("first info", "INFO")
        await js.req("second info", "INFO")
        await js.req("info missing stream", "STREAM.INFO.NOPE")
        await js.req("info after error", "INFO")

    # fresh: no reset()/start() requests before, so the counters are absolute.
    ref, impl = await run_scenario(js_fresh_pair, sc, api_counters=True, fresh=True)
    assert_same(ref, impl)


async def test_account_info_api_counters_per_request_kind(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"]})
        await js.req("after create", "INFO")
        await js.pub("pub", "c.1", "x")
        await js.req("after publish", "INFO")
        await js.req("stream info", "STREAM.INFO.C")
        await js.req("after stream info", "INFO")
        await js.req("names", "STREAM.NAMES")
        await js.req("list", "STREAM.LIST")
        await js.req("after names/list", "INFO")
        await js.req("msg get missing", "STREAM.MSG.GET.C", {"seq": 9})
        await js.req("after msg get missing", "INFO")
        await js.req("update", "STREAM.UPDATE.C", {"name": "C", "subjects": ["c.>"]})
        await js.req("after update", "INFO")
        await js.req("msg delete", "STREAM.MSG.DELETE.C", {"seq": 1})
        await js.req("after msg delete", "INFO")
        await js.req("purge", "STREAM.PURGE.C")
        await js.req("after purge", "INFO")
        await js.req("bad create", "STREAM.CREATE.X", b"{")
        await js.req("after bad create", "INFO")
        await js.req("create exists", "STREAM.CREATE.C", {"name": "C", "subjects": ["other"]})
        await js.req("after create exists", "INFO")
        await js.req("delete", "STREAM.DELETE.C")
        await js.req("after delete", "INFO")
        await js.req("delete missing", "STREAM.DELETE.C")
        await js.req("after delete missing", "INFO")

    await check(js_pair, sc, api_counters=True)


async def test_account_info_api_counters_msg_get(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.C", {"name": "C", "subjects": ["c.>"]})
        await js.pub("pub", "c.1", "x")
        await js.req("before msg get", "INFO")
        await js.req("msg get", "STREAM.MSG.GET.C", {"seq": 1})
        await js.req("after msg get", "INFO")

    await check(js_pair, sc, api_counters=True)


async def test_account_info_byte_counts(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("empty", "INFO")
        await js.req("create file", "STREAM.CREATE.F", {"name": "F", "subjects": ["f.>"]})
        await js.req(
            "create mem",
            "STREAM.CREATE.M",
            {"name": "M", "subjects": ["m.>"], "storage": "memory"},
        )
        await js.req("two empty streams", "INFO")
        await js.pub("f1", "f.a", "hello")
        await js.pub("f2", "f.long.subject.name", "x" * 100, {"X-Hdr": "value"})
        await js.pub("f3", "f.a", "")
        await js.req("file msgs", "INFO")
        await js.pub("m1", "m.a", "hello")
        await js.pub("m2", "m.long.subject.name", "x" * 100, {"X-Hdr": "value"})
        await js.pub("m3", "m.a", "")
        await js.req("file + mem msgs", "INFO")
        await js.state("F state", "F")
        await js.state("M state", "M")
        await js.req("delete f msg", "STREAM.MSG.DELETE.F", {"seq": 2})
        await js.req("delete m msg", "STREAM.MSG.DELETE.M", {"seq": 2, "no_erase": True})
        await js.req("after msg deletes", "INFO")
        await js.pub("f4 big", "f.b", "y" * 2000, {"A": "1", "B": "2"})
        await js.pub("m4 big", "m.b", "y" * 2000, {"A": "1", "B": "2"})
        await js.req("after big msgs", "INFO")
        await js.req("purge M", "STREAM.PURGE.M")
        await js.req("after purge M", "INFO")
        await js.req("purge F filter", "STREAM.PURGE.F", {"filter": "f.a"})
        await js.req("after purge F filter", "INFO")
        await js.req("delete F", "STREAM.DELETE.F")
        await js.req("after delete F", "INFO")
        await js.req("delete M", "STREAM.DELETE.M")
        await js.req("after delete M", "INFO")

    await check(js_pair, sc)


# ====================================================================== create
@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_create_defaults(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create", "STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"], "storage": storage}
        )
        await js.req("info", "STREAM.INFO.D")
        await js.req("no subjects", "STREAM.CREATE.NOSUBJ", {"name": "NOSUBJ", "storage": storage})
        await js.pub("publish to name", "NOSUBJ", "x")
        await js.req("name from subject only", "STREAM.CREATE.ONLY", {"storage": storage})
        await js.req(
            "zero values",
            "STREAM.CREATE.Z",
            {
                "name": "Z",
                "subjects": ["z"],
                "storage": storage,
                "num_replicas": 0,
                "max_msgs": 0,
                "max_bytes": 0,
                "max_msg_size": 0,
                "max_msgs_per_subject": 0,
                "max_consumers": 0,
                "duplicate_window": 0,
            },
        )
        await js.req("account", "INFO")

    await check(js_pair, sc)


EVERY_FIELD = {
    "name": "ALL",
    "description": "every field",
    "subjects": ["all.>", "every.*"],
    "retention": "limits",
    "max_consumers": 10,
    "max_msgs": 1000,
    "max_bytes": 1_000_000,
    "max_age": 3_600_000_000_000,
    "max_msgs_per_subject": 5,
    "max_msg_size": 4096,
    "discard": "new",
    "discard_new_per_subject": True,
    "storage": "memory",
    "num_replicas": 1,
    "no_ack": False,
    "duplicate_window": 60_000_000_000,
    "compression": "none",
    "first_seq": 100,
    "subject_transform": {"src": "all.>", "dest": "moved.>"},
    "republish": {"src": "every.*", "dest": "repub.{{wildcard(1)}}", "headers_only": True},
    "allow_direct": True,
    "mirror_direct": False,
    "sealed": False,
    "deny_delete": True,
    "deny_purge": True,
    "allow_rollup_hdrs": False,
    "consumer_limits": {"inactive_threshold": 5_000_000_000, "max_ack_pending": 100},
    "metadata": {"owner": "tests", "k": "v"},
    "allow_msg_ttl": True,
    "subject_delete_marker_ttl": 60_000_000_000,
}


async def test_create_every_field(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.ALL", EVERY_FIELD)
        await js.req("info", "STREAM.INFO.ALL")
        await js.pub("pub every", "every.y", "b")
        await js.req("get every", "STREAM.MSG.GET.ALL", {"seq": 100})
        await js.req("list", "STREAM.LIST")

    await check(js_pair, sc)


# Counters, atomic / fast batch publish, schedules and async persistence: nats-server
# accepts them, natsd refuses them (test_stream_features.py compares those answers).
NEWER_FEATURES: list[tuple[str, dict[str, Any]]] = [
    ("persist default", {"persist_mode": "default"}),
    ("placement", {"placement": {"tags": ["a"]}}),
    ("msg ttl + markers", {"allow_msg_ttl": True, "subject_delete_marker_ttl": 1_000_000_000}),
    (
        "user metadata with _nats keys",
        {"metadata": {"_nats.ver": "9", "_nats.req.level": "7", "x": "y"}},
    ),
]


@pytest.mark.parametrize("extra", [pytest.param(e, id=i) for i, e in NEWER_FEATURES])
async def test_create_newer_config_fields(js_pair: ServerPair, extra: dict[str, Any]) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.NF", {"name": "NF", "subjects": ["nf"], **extra})
        await js.req("info", "STREAM.INFO.NF")

    await check(js_pair, sc)


async def test_create_republish_delivers(js_pair: ServerPair) -> None:
    cfg = {
        "name": "RP",
        "subjects": ["rp.*"],
        "republish": {"src": "rp.*", "dest": "out.{{wildcard(1)}}"},
    }

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.RP", cfg)
        sub = await js.nc.subscribe("out.>")
        await js.pub("pub", "rp.a", "payload", {"X-Mine": "1"})
        try:
            msg = await sub.next_msg(timeout=1)
        except Exception as e:
            js.note("republished", type(e).__name__)
        else:
            raw = js._raw_headers.get(msg.subject)
            js.note("republished", [msg.subject, parse_header_block(raw), msg.data.decode()])
        await sub.unsubscribe()

    await check(js_pair, sc)


async def test_create_subject_transform_applied(js_pair: ServerPair) -> None:
    cfg = {
        "name": "TR",
        "subjects": ["all.>"],
        "subject_transform": {"src": "all.>", "dest": "moved.>"},
    }

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.TR", cfg)
        await js.pub("pub transformed", "all.x", "a")
        await js.req("get transformed", "STREAM.MSG.GET.TR", {"seq": 1})
        await js.state("state", "TR")

    await check(js_pair, sc)


async def test_create_compression_and_retention(js_pair: ServerPair) -> None:
    # s2 on a file stream: nats-server compresses, natsd refuses (test_stream_features.py).
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "s2 memory",
            "STREAM.CREATE.S2M",
            {"name": "S2M", "subjects": ["s2m"], "compression": "s2", "storage": "memory"},
        )
        await js.req(
            "workqueue",
            "STREAM.CREATE.WQ",
            {"name": "WQ", "subjects": ["wq.*"], "retention": "workqueue"},
        )
        await js.pubs("workqueue pubs", "wq.a", 2)
        await js.state("workqueue state", "WQ")
        await js.req(
            "interest",
            "STREAM.CREATE.INT",
            {"name": "INT", "subjects": ["int.*"], "retention": "interest", "storage": "memory"},
        )

    await check(js_pair, sc)


async def test_interest_retention_without_consumers(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "interest",
            "STREAM.CREATE.INT",
            {"name": "INT", "subjects": ["int.*"], "retention": "interest"},
        )
        await js.pub("publish", "int.a", "x")
        await js.state("state", "INT")

    await check(js_pair, sc)


async def test_no_ack_stream(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "no_ack",
            "STREAM.CREATE.NOACK",
            {"name": "NOACK", "subjects": ["noack"], "no_ack": True},
        )
        # no_ack: nats-server stores the message and sends no PubAck.
        await js.pub("publish", "noack", "x", timeout=0.3, expect_silence=True)
        await js.state("state", "NOACK")

    await check(js_pair, sc)


async def test_create_identical_twice(js_pair: ServerPair) -> None:
    cfg = {"name": "TWICE", "subjects": ["twice.>"], "max_msgs": 10}

    async def sc(js: JsRecorder) -> None:
        await js.req("first", "STREAM.CREATE.TWICE", cfg)
        await js.pub("pub", "twice.a", "x")
        await js.req("identical", "STREAM.CREATE.TWICE", cfg)
        await js.req(
            "identical with defaults spelled out",
            "STREAM.CREATE.TWICE",
            {**cfg, "storage": "file", "retention": "limits", "max_bytes": -1},
        )

    await check(js_pair, sc)


async def test_create_conflicting(js_pair: ServerPair) -> None:
    cfg = {"name": "TWICE", "subjects": ["twice.>"], "max_msgs": 10}

    async def sc(js: JsRecorder) -> None:
        await js.req("first", "STREAM.CREATE.TWICE", cfg)
        await js.pub("pub", "twice.a", "x")
        await js.req("conflicting max_msgs", "STREAM.CREATE.TWICE", {**cfg, "max_msgs": 11})
        await js.req("conflicting storage", "STREAM.CREATE.TWICE", {**cfg, "storage": "memory"})
        await js.req("conflicting subjects", "STREAM.CREATE.TWICE", {**cfg, "subjects": ["t2"]})
        await js.req("conflicting metadata", "STREAM.CREATE.TWICE", {**cfg, "metadata": {"a": "b"}})
        await js.req("still", "STREAM.INFO.TWICE")

    await check(js_pair, sc)


async def test_create_overlapping_subjects(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("A", "STREAM.CREATE.A", {"name": "A", "subjects": ["foo.*", "bar.>"]})
        await js.req("B literal in A", "STREAM.CREATE.B", {"name": "B", "subjects": ["foo.x"]})
        await js.req("B wider", "STREAM.CREATE.B", {"name": "B", "subjects": [">"]})
        await js.req("B partial", "STREAM.CREATE.B", {"name": "B", "subjects": ["*.x"]})
        await js.req("B deep", "STREAM.CREATE.B", {"name": "B", "subjects": ["bar.a.b.c"]})
        await js.req("B disjoint", "STREAM.CREATE.B", {"name": "B", "subjects": ["foo.x.y"]})
        await js.req("C name-as-subject", "STREAM.CREATE.C", {"name": "C"})
        await js.req("D overlaps C's name", "STREAM.CREATE.D", {"name": "D", "subjects": ["C"]})
        await js.req(
            "E overlaps itself", "STREAM.CREATE.E", {"name": "E", "subjects": ["e.*", "e.x"]}
        )
        await js.req("E duplicate", "STREAM.CREATE.E", {"name": "E", "subjects": ["e", "e"]})
        await js.req("names", "STREAM.NAMES")

    await check(js_pair, sc)


INVALID_CREATES: list[tuple[str, str, Any]] = [
    ("empty body", "STREAM.CREATE.X", b""),
    ("invalid json", "STREAM.CREATE.X", b"{not json"),
    ("json array", "STREAM.CREATE.X", b"[1,2]"),
    ("name mismatch", "STREAM.CREATE.X", {"name": "Y", "subjects": ["x"]}),
    ("name with space", "STREAM.CREATE.X", {"name": "a b"}),
    ("wildcard name", "STREAM.CREATE.*", {"name": "*"}),
    ("path separator", "STREAM.CREATE.a/b", {"name": "a/b"}),
    ("name too long", "STREAM.CREATE." + "N" * 300, {"name": "N" * 300}),
    ("unknown field", "STREAM.CREATE.X", {"name": "X", "bogus_field": 1}),
    ("wrong type", "STREAM.CREATE.X", {"name": "X", "max_msgs": "ten"}),
    ("bad storage", "STREAM.CREATE.X", {"name": "X", "storage": "disk"}),
    ("bad retention", "STREAM.CREATE.X", {"name": "X", "retention": "forever"}),
    ("bad discard", "STREAM.CREATE.X", {"name": "X", "discard": "middle"}),
    ("bad compression", "STREAM.CREATE.X", {"name": "X", "compression": "zip"}),
    ("replicas 3", "STREAM.CREATE.X", {"name": "X", "num_replicas": 3}),
    ("replicas 6", "STREAM.CREATE.X", {"name": "X", "num_replicas": 6}),
    ("replicas negative", "STREAM.CREATE.X", {"name": "X", "num_replicas": -1}),
    ("negative max_age", "STREAM.CREATE.X", {"name": "X", "max_age": -5}),
    (
        "dup window > max_age",
        "STREAM.CREATE.X",
        {"name": "X", "max_age": 1_000_000_000, "duplicate_window": 2_000_000_000},
    ),
    ("invalid subject", "STREAM.CREATE.X", {"name": "X", "subjects": ["a..b"]}),
    ("empty subject", "STREAM.CREATE.X", {"name": "X", "subjects": [""]}),
    ("api subject", "STREAM.CREATE.X", {"name": "X", "subjects": ["$JS.API.>"]}),
    ("sealed on create", "STREAM.CREATE.X", {"name": "X", "sealed": True}),
    ("mirror_direct without mirror", "STREAM.CREATE.X", {"name": "X", "mirror_direct": True}),
    (
        "discard_new_per_subject without discard new",
        "STREAM.CREATE.X",
        {"name": "X", "max_msgs_per_subject": 1, "discard_new_per_subject": True},
    ),
    (
        "discard_new_per_subject without per-subject limit",
        "STREAM.CREATE.X",
        {"name": "X", "discard": "new", "discard_new_per_subject": True},
    ),
    (
        "delete marker ttl without msg ttl",
        "STREAM.CREATE.X",
        {"name": "X", "subject_delete_marker_ttl": 5_000_000_000},
    ),
    (
        "delete marker ttl too small",
        "STREAM.CREATE.X",
        {"name": "X", "allow_msg_ttl": True, "subject_delete_marker_ttl": 1000},
    ),
    (
        "rollup with deny_purge",
        "STREAM.CREATE.X",
        {"name": "X", "allow_rollup_hdrs": True, "deny_purge": True},
    ),
    (
        "republish cycle",
        "STREAM.CREATE.X",
        {"name": "X", "subjects": ["rp.>"], "republish": {"src": ">", "dest": "rp.out"}},
    ),
    (
        "bad subject transform",
        "STREAM.CREATE.X",
        {"name": "X", "subjects": ["t.*"], "subject_transform": {"src": "t.*", "dest": "{{x}}"}},
    ),
    ("max_msg_size too big", "STREAM.CREATE.X", {"name": "X", "max_msg_size": 2_000_000}),
    ("description too long", "STREAM.CREATE.X", {"name": "X", "description": "d" * 5000}),
    ("metadata not strings", "STREAM.CREATE.X", {"name": "X", "metadata": {"a": 1}}),
    (
        "mirror with subjects",
        "STREAM.CREATE.X",
        {"name": "X", "subjects": ["m"], "mirror": {"name": "O"}},
    ),
]


@pytest.mark.parametrize(
    "subject,body", [pytest.param(s, b, id=i) for i, s, b in INVALID_CREATES]
)
async def test_create_invalid(js_pair: ServerPair, subject: str, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", subject, body, timeout=1.0)
        await js.req("names", "STREAM.NAMES")

    await check(js_pair, sc)


async def test_create_dotted_name_is_not_answered(js_pair: ServerPair) -> None:
    """``STREAM.CREATE.a.b`` matches no API subject (``STREAM.CREATE.*``): nats-server stays
    silent and creates nothing."""

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.a.b", {"name": "a.b"}, timeout=1.0,
                     expect_silence=True)
        await js.req("names", "STREAM.NAMES")

    await check(js_pair, sc)


# ====================================================================== update
async def test_update_allowed_changes(js_pair: ServerPair) -> None:
    base = {"name": "U", "subjects": ["u.>"], "max_msgs": 10, "storage": "memory"}

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.U", base)
        await js.pubs("pubs", "u.a", 5)
        cfg = dict(base)
        for label, change in [
            ("subjects", {"subjects": ["u.>", "uu.*"]}),
            ("description", {"description": "now described"}),
            ("max_msgs shrink", {"max_msgs": 3}),
            ("max_bytes", {"max_bytes": 100_000}),
            ("max_age", {"max_age": 3_600_000_000_000}),
            ("discard new", {"discard": "new"}),
            ("max_msgs_per_subject", {"max_msgs_per_subject": 2}),
            ("deny_delete", {"deny_delete": True}),
            ("allow_rollup_hdrs", {"allow_rollup_hdrs": True}),
            ("allow_direct", {"allow_direct": True}),
            ("metadata", {"metadata": {"a": "b"}}),
            ("duplicate_window", {"duplicate_window": 30_000_000_000}),
            ("allow_msg_ttl", {"allow_msg_ttl": True}),
            ("max_msg_size", {"max_msg_size": 512}),
            ("republish", {"republish": {"src": "u.>", "dest": "urp.>"}}),
            # (s2 compression: natsd refuses it on a file stream, see test_stream_features)
        ]:
            cfg.update(change)
            await js.req(f"update {label}", "STREAM.UPDATE.U", cfg)
        await js.req("info", "STREAM.INFO.U")
        await js.pub("publish to new subject", "uu.x", "y")
        await js.req("update identical", "STREAM.UPDATE.U", cfg)
        await js.req("update without subjects", "STREAM.UPDATE.U", {**cfg, "subjects": []})

    await check(js_pair, sc)


async def test_update_refused_changes(js_pair: ServerPair) -> None:
    base = {
        "name": "R",
        "subjects": ["r.>"],
        "deny_delete": True,
        "deny_purge": True,
        "allow_msg_ttl": True,
    }

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.R", base)
        await js.req("other", "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        for label, subject, body in [
            ("storage", "STREAM.UPDATE.R", {**base, "storage": "memory"}),
            ("retention", "STREAM.UPDATE.R", {**base, "retention": "workqueue"}),
            ("max_consumers", "STREAM.UPDATE.R", {**base, "max_consumers": 5}),
            ("deny_delete off", "STREAM.UPDATE.R", {**base, "deny_delete": False}),
            ("deny_purge off", "STREAM.UPDATE.R", {**base, "deny_purge": False}),
            ("allow_msg_ttl off", "STREAM.UPDATE.R", {**base, "allow_msg_ttl": False}),
            ("first_seq", "STREAM.UPDATE.R", {**base, "first_seq": 10}),
            ("overlap other", "STREAM.UPDATE.R", {**base, "subjects": ["r.>", "o.x"]}),
            ("name mismatch", "STREAM.UPDATE.R", {**base, "name": "Z"}),
            ("missing stream", "STREAM.UPDATE.MISSING", {"name": "MISSING"}),
            ("invalid json", "STREAM.UPDATE.R", b"{"),
            ("empty body", "STREAM.UPDATE.R", b""),
            ("invalid config", "STREAM.UPDATE.R", {**base, "max_age": -1}),
            ("replicas", "STREAM.UPDATE.R", {**base, "num_replicas": 3}),
            ("mirror", "STREAM.UPDATE.R", {**base, "subjects": [], "mirror": {"name": "O"}}),
        ]:
            await js.req(f"update {label}", subject, body)
        await js.req("unchanged", "STREAM.INFO.R")

    await check(js_pair, sc)


async def test_update_seal(js_pair: ServerPair) -> None:
    base = {"name": "SEAL", "subjects": ["seal.>"], "allow_direct": True}

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.SEAL", base)
        await js.pubs("pubs", "seal.a", 3)
        await js.req("seal", "STREAM.UPDATE.SEAL", {**base, "sealed": True})
        await js.pub("publish to sealed", "seal.a", "x")
        await js.pub("publish to sealed with msg id", "seal.a", "x", {"Nats-Msg-Id": "1"})
        await js.req("unseal", "STREAM.UPDATE.SEAL", {**base, "sealed": False})
        await js.req("change sealed", "STREAM.UPDATE.SEAL", {**base, "sealed": True, "max_msgs": 1})
        await js.req("msg get still works", "STREAM.MSG.GET.SEAL", {"seq": 2})
        await js.direct("direct get still works", "SEAL", {"seq": 3})
        await js.req("info", "STREAM.INFO.SEAL")
        await js.req("delete sealed stream", "STREAM.DELETE.SEAL")

    await check(js_pair, sc)


async def test_sealed_purge_and_msg_delete(js_pair: ServerPair) -> None:
    base = {"name": "SEAL", "subjects": ["seal.>"]}

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.SEAL", base)
        await js.pubs("pubs", "seal.a", 3)
        await js.req("seal", "STREAM.UPDATE.SEAL", {**base, "sealed": True})
        await js.req("purge sealed", "STREAM.PURGE.SEAL")
        await js.req("msg delete sealed", "STREAM.MSG.DELETE.SEAL", {"seq": 1})

    await check(js_pair, sc)


async def test_update_limits_applied_to_existing_messages(js_pair: ServerPair) -> None:
    base = {"name": "LIM", "subjects": ["lim.*"]}

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.LIM", base)
        for i in range(4):
            await js.pubs(f"pubs {i}", f"lim.{i}", 3)
        await js.req(
            "max_msgs_per_subject 2", "STREAM.UPDATE.LIM", {**base, "max_msgs_per_subject": 2}
        )
        await js.state("after per-subject", "LIM")
        await js.req(
            "max_msgs 5",
            "STREAM.UPDATE.LIM",
            {**base, "max_msgs_per_subject": 2, "max_msgs": 5},
        )
        await js.state("after max_msgs", "LIM")
        await js.req(
            "max_bytes 100",
            "STREAM.UPDATE.LIM",
            {**base, "max_msgs_per_subject": 2, "max_msgs": 5, "max_bytes": 100},
        )
        await js.state("after max_bytes", "LIM")

    await check(js_pair, sc)


# ====================================================================== info
async def _info_stream(js: JsRecorder) -> None:
    await js.req("create", "STREAM.CREATE.I", {"name": "I", "subjects": ["i.>"]})
    for subj in ["i.a", "i.b", "i.a", "i.c.d", "i.a", "i.b", "i.e"]:
        await js.pub(f"pub {subj}", subj, "data")
    for seq in (2, 4, 5):
        await js.req(f"delete {seq}", "STREAM.MSG.DELETE.I", {"seq": seq})


async def test_stream_info_deleted_details(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _info_stream(js)
        await js.req("plain", "STREAM.INFO.I")
        await js.req("empty body object", "STREAM.INFO.I", {})
        await js.req("deleted_details", "STREAM.INFO.I", {"deleted_details": True})
        await js.req("deleted_details false", "STREAM.INFO.I", {"deleted_details": False})
        await js.req("subjects none", "STREAM.INFO.I", {"subjects_filter": "zzz"})
        await js.req("missing stream", "STREAM.INFO.NOPE")
        await js.req("missing stream with body", "STREAM.INFO.NOPE", {"deleted_details": True})

    await check(js_pair, sc)


async def test_stream_info_subjects_filter(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _info_stream(js)
        await js.req("subjects all", "STREAM.INFO.I", {"subjects_filter": ">"})
        await js.req("subjects i.*", "STREAM.INFO.I", {"subjects_filter": "i.*"})
        await js.req("subjects literal", "STREAM.INFO.I", {"subjects_filter": "i.a"})
        await js.req("both", "STREAM.INFO.I", {"deleted_details": True, "subjects_filter": "i.>"})

    await check(js_pair, sc)


async def test_stream_info_subjects_filter_content(js_pair: ServerPair) -> None:
    """The ``state.subjects`` map itself (paging fields compared elsewhere)."""

    async def sc(js: JsRecorder) -> None:
        await _info_stream(js)
        for label, flt in [("all", ">"), ("i.*", "i.*"), ("literal", "i.a"), ("none", "zz")]:
            info = await js.req(label, "STREAM.INFO.I", {"subjects_filter": flt}, record=False)
            js.note(label, info.get("state"))

    await check(js_pair, sc)


INFO_BODIES: list[tuple[str, Any]] = [
    ("deleted_details as number", {"deleted_details": 1}),
    ("subjects_filter as number", {"subjects_filter": 5}),
    ("offset as string", {"offset": "a"}),
    ("unknown field", {"bogus": 1}),
    ("unknown field in a second document", b'{} {"bogus": 1}'),
    ("array body", b"[1]"),
    ("trailing garbage", b"{}}"),
    # Only a body starting with { or [ is decoded.
    ("string body", b'"x"'),
    ("number body", b"5"),
    ("not json, not an object", b"nul"),
    ("keys ignore case", {"DELETED_DETAILS": True, "Subjects_Filter": "i.a"}),
    ("null fields", {"deleted_details": None, "subjects_filter": None}),
    ("two documents merge", b'{"deleted_details": true} {"subjects_filter": "i.a"}'),
]


async def test_stream_info_request_bodies(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _info_stream(js)
        for label, body in INFO_BODIES:
            await js.req(label, "STREAM.INFO.I", body)

    await check(js_pair, sc)


async def test_stream_info_subjects_paging(js_pair: ServerPair) -> None:
    """``offset`` pages through the sorted ``state.subjects`` (3 subjects here)."""

    async def sc(js: JsRecorder) -> None:
        await _info_stream(js)
        for label, body in [
            ("offset 1", {"subjects_filter": ">", "offset": 1}),
            ("offset 2", {"subjects_filter": "i.>", "offset": 2}),
            ("offset == total", {"subjects_filter": ">", "offset": 3}),
            ("offset past the end", {"subjects_filter": ">", "offset": 10}),
            ("negative offset", {"subjects_filter": ">", "offset": -1}),
            ("literal filter", {"subjects_filter": "i.a", "offset": 1}),
            ("no filter", {"offset": 1}),
            ("filter matching nothing", {"subjects_filter": "zz", "offset": 1}),
            (
                "with deleted details",
                {"deleted_details": True, "subjects_filter": ">", "offset": 1},
            ),
        ]:
            await js.req(label, "STREAM.INFO.I", body)

    await check(js_pair, sc)


# ====================================================================== names / list
async def _three_streams(js: JsRecorder) -> None:
    await js.req("K1", "STREAM.CREATE.K1", {"name": "K1", "subjects": ["k.one.>"]})
    await js.req(
        "K2", "STREAM.CREATE.K2", {"name": "K2", "subjects": ["k.two"], "storage": "memory"}
    )
    await js.req("A0", "STREAM.CREATE.A0", {"name": "A0", "subjects": ["other"]})
    await js.pub("pub", "k.two", "x")


async def test_names_and_list(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("names empty", "STREAM.NAMES")
        await js.req("list empty", "STREAM.LIST")
        await _three_streams(js)
        await js.req("names", "STREAM.NAMES")
        await js.req("names empty object", "STREAM.NAMES", {})
        await js.req("names subject k.>", "STREAM.NAMES", {"subject": "k.>"})
        await js.req("names subject literal", "STREAM.NAMES", {"subject": "k.one.x"})
        await js.req("names subject none", "STREAM.NAMES", {"subject": "nomatch"})
        await js.req("names offset 1", "STREAM.NAMES", {"offset": 1})
        await js.req("names offset 2 + subject", "STREAM.NAMES", {"offset": 1, "subject": "k.>"})
        await js.req("list", "STREAM.LIST")
        await js.req("list subject", "STREAM.LIST", {"subject": "k.two"})
        await js.req("list subject none", "STREAM.LIST", {"subject": "nomatch"})
        await js.req("list offset 2", "STREAM.LIST", {"offset": 2})

    await check(js_pair, sc)


@pytest.mark.parametrize("verb", ["NAMES", "LIST"])
async def test_names_list_offset_past_end(js_pair: ServerPair, verb: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _three_streams(js)
        await js.req("offset == total", f"STREAM.{verb}", {"offset": 3})
        await js.req("offset past end", f"STREAM.{verb}", {"offset": 10})

    await check(js_pair, sc)


@pytest.mark.parametrize("verb", ["NAMES", "LIST"])
async def test_names_list_invalid_json(js_pair: ServerPair, verb: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("invalid json", f"STREAM.{verb}", b"{")

    await check(js_pair, sc)


PAGING_BODIES: list[tuple[str, Any]] = [
    ("offset as string", {"offset": "1"}),
    ("offset 1.5", b'{"offset": 1.5}'),
    ("offset 1.0", b'{"offset": 1.0}'),
    ("offset in exponent form", b'{"offset": 1e0}'),
    ("offset overflows int", b'{"offset": 9223372036854775808}'),
    ("subject as number", {"subject": 5}),
    ("unknown field", {"bogus": 1}),
    ("array body", b"[]"),
    ("trailing garbage", b"{}x"),
    # Only a body starting with { or [ (after JSON white space) is decoded.
    ("number body", b"5"),
    ("string body", b'"x"'),
    ("null body", b"null"),
    ("not json, not an object", b"nul"),
    ("vertical tab before an array", b"\x0b[]"),
    ("keys ignore case", {"OFFSET": 1, "Subject": "k.>"}),
    ("key spelt with a long s", '{"\u017fubject": "k.>"}'.encode()),
    ("null fields", {"offset": None, "subject": None}),
    ("two documents merge", b'{"offset": 1} {"subject": "k.>"}'),
]


@pytest.mark.parametrize("verb", ["NAMES", "LIST"])
@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in PAGING_BODIES])
async def test_names_list_request_bodies(js_pair: ServerPair, verb: str, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await _three_streams(js)
        await js.req("request", f"STREAM.{verb}", body)

    await check(js_pair, sc)


@pytest.mark.parametrize("verb", ["NAMES", "LIST"])
async def test_consumer_names_list_request_bodies(js_pair: ServerPair, verb: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.CN", {"name": "CN", "subjects": ["cn"]})
        for name in ("D1", "D2"):
            await js.req(
                name,
                f"CONSUMER.DURABLE.CREATE.CN.{name}",
                {"stream_name": "CN", "config": {"durable_name": name, "ack_policy": "explicit"}},
            )
        for label, body in [
            ("offset", {"offset": 1}),
            ("subject is not a field here", {"subject": "cn"}),
            ("offset as string", {"offset": "1"}),
            ("array body", b"[]"),
            ("tab before an array", b"\t[]"),
            ("vertical tab before an array", b"\x0b[]"),
            ("number body", b"5"),
        ]:
            await js.req(label, f"CONSUMER.{verb}.CN", body)

    await check(js_pair, sc)


# ====================================================================== delete
async def test_delete_stream(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.DEL", {"name": "DEL", "subjects": ["del"]})
        await js.pub("pub", "del", "x")
        await js.req("delete", "STREAM.DELETE.DEL")
        await js.req("delete again", "STREAM.DELETE.DEL")
        await js.req("info deleted", "STREAM.INFO.DEL")
        await js.pub("pub after delete", "del", "x", timeout=0.3)
        await js.req("delete missing", "STREAM.DELETE.NEVER")
        await js.req("recreate", "STREAM.CREATE.DEL", {"name": "DEL", "subjects": ["del"]})
        await js.state("recreated empty", "DEL")
        await js.req("account", "INFO")

    await check(js_pair, sc)


STREAM_DELETE_BODIES: list[tuple[str, Any]] = [
    ("empty object", {}),
    ("padded empty object", b"\t{}\n"),
    # isEmptyRequest: anything but nothing or one empty object is refused (10038).
    ("white space", b"  "),
    ("null", b"null"),
    ("object", {"x": 1}),
    ("array", b"[]"),
    ("two empty objects", b"{} {}"),
    ("invalid json", b"{"),
    ("vertical tab", b"\x0b{}"),
]


@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in STREAM_DELETE_BODIES])
async def test_delete_stream_with_body(js_pair: ServerPair, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.DB", {"name": "DB", "subjects": ["db"]})
        await js.pub("pub", "db", "x")
        await js.req("delete", "STREAM.DELETE.DB", body)
        await js.req("info after", "STREAM.INFO.DB")
        await js.req("delete missing stream", "STREAM.DELETE.NOPE", body)

    await check(js_pair, sc)


async def test_request_checked_before_stream(js_pair: ServerPair) -> None:
    """nats-server decodes and checks a request body before it looks at the stream: a bad
    body wins over a missing, sealed or deny_* stream."""

    async def sc(js: JsRecorder) -> None:
        await js.req("create SL", "STREAM.CREATE.SL", {"name": "SL", "subjects": ["sl"]})
        await js.pubs("pubs SL", "sl", 2)
        await js.req("seal", "STREAM.UPDATE.SL", {"name": "SL", "subjects": ["sl"], "sealed": True})
        await js.req(
            "create DN",
            "STREAM.CREATE.DN",
            {"name": "DN", "subjects": ["dn"], "deny_purge": True, "deny_delete": True},
        )
        await js.pubs("pubs DN", "dn", 2)
        for name in ("NOPE", "SL", "DN"):
            for label, verb, body in [
                ("purge bad body", "PURGE", {"filter": 5}),
                ("purge seq+keep", "PURGE", {"seq": 1, "keep": 1}),
                ("purge invalid json", "PURGE", b"{"),
                ("msg delete bad body", "MSG.DELETE", {"seq": -1}),
                ("msg delete empty", "MSG.DELETE", b""),
                ("msg delete {}", "MSG.DELETE", {}),
                ("msg delete null", "MSG.DELETE", b"null"),
                ("msg get bad body", "MSG.GET", b"5"),
                ("msg get nothing selected", "MSG.GET", {}),
                ("msg get batch", "MSG.GET", {"seq": 1, "batch": 1}),
                ("info bad body", "INFO", {"bogus": 1}),
                ("info invalid json", "INFO", b"["),
                ("delete with body", "DELETE", {"x": 1}),
            ]:
                await js.req(f"{name} {label}", f"STREAM.{verb}.{name}", body)
        await js.state("SL", "SL")
        await js.state("DN", "DN")

    await check(js_pair, sc)


@pytest.mark.parametrize("verb", ["DELETE", "INFO"])
async def test_missing_stream_token(js_pair: ServerPair, verb: str) -> None:
    """No stream name token: no API subscription matches, nats-server does not answer."""

    async def sc(js: JsRecorder) -> None:
        await js.req("no name", f"STREAM.{verb}", timeout=0.3, expect_silence=True)

    await check(js_pair, sc)


# ====================================================================== purge
async def _purge_stream(js: JsRecorder, storage: str = "file") -> None:
    await js.req(
        "create", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.*"], "storage": storage}
    )
    for subj in ["p.a", "p.b", "p.a", "p.c", "p.a", "p.b", "p.a", "p.c"]:
        await js.pub(f"pub {subj}", subj, "payload")


PURGES: list[tuple[str, Any]] = [
    ("all", b""),
    ("all empty object", {}),
    ("filter", {"filter": "p.a"}),
    ("filter wildcard", {"filter": "p.*"}),
    ("filter no match", {"filter": "p.zzz"}),
    ("seq", {"seq": 5}),
    ("seq past end", {"seq": 100}),
    ("keep", {"keep": 3}),
    ("keep more than present", {"keep": 100}),
    ("filter+keep", {"filter": "p.a", "keep": 1}),
    ("filter+seq", {"filter": "p.b", "seq": 6}),
    # Only a body starting with { or [ is decoded; anything else purges everything.
    ("null body", b"null"),
    ("number body", b"5"),
    ("not json but not an object", b"nul"),
    ("white space", b"  "),
    ("keys ignore case", {"FILTER": "p.a", "Keep": 1}),
    ("two documents merge", b'{"seq": 5} {"filter": "p.a"}'),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in PURGES])
async def test_purge(js_pair: ServerPair, body: Any, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _purge_stream(js, storage)
        await js.req("purge", "STREAM.PURGE.P", body)
        await js.req("info", "STREAM.INFO.P", {"deleted_details": True})
        for subj in ("p.a", "p.b", "p.c"):
            await js.req(f"last {subj}", "STREAM.MSG.GET.P", {"last_by_subj": subj})
        await js.pub("pub after", "p.a", "again")
        await js.req("account", "INFO")

    await check(js_pair, sc)


PURGE_ERRORS: list[tuple[str, str, Any, str | None]] = [
    (
        "seq+keep",
        "STREAM.PURGE.P",
        {"seq": 3, "keep": 1},
        None,
    ),
    (
        "invalid json",
        "STREAM.PURGE.P",
        b"{",
        None,
    ),
    ("bad filter type", "STREAM.PURGE.P", {"filter": 5}, None),
    ("negative seq", "STREAM.PURGE.P", {"seq": -1}, None),
    ("float seq", "STREAM.PURGE.P", b'{"seq": 1.5}', None),
    ("keep as string", "STREAM.PURGE.P", {"keep": "1"}, None),
    ("unknown field", "STREAM.PURGE.P", {"bogus": 1}, None),
    ("unknown field in a second document", "STREAM.PURGE.P", b'{} {"bogus": 1}', None),
    ("array body", "STREAM.PURGE.P", b"[]", None),
    ("trailing garbage", "STREAM.PURGE.P", b"{}x", None),
    ("seq+keep in two documents", "STREAM.PURGE.P", b'{"seq": 1} {"keep": 1}', None),
    ("missing stream", "STREAM.PURGE.NOPE", b"", None),
    ("missing stream, bad body", "STREAM.PURGE.NOPE", {"filter": 5}, None),
    ("missing stream, seq+keep", "STREAM.PURGE.NOPE", {"seq": 1, "keep": 1}, None),
]


@pytest.mark.parametrize(
    "subject,body",
    [pytest.param(s, b, id=i, marks=[xfail(r)] if r else []) for i, s, b, r in PURGE_ERRORS],
)
async def test_purge_errors(js_pair: ServerPair, subject: str, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await _purge_stream(js)
        await js.req("purge", subject, body)
        await js.state("state", "P")

    await check(js_pair, sc)


async def test_purge_misc(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create", "STREAM.CREATE.PM", {"name": "PM", "subjects": ["pm"], "storage": "memory"}
        )
        await js.req("purge empty", "STREAM.PURGE.PM")
        await js.pubs("pubs", "pm", 4)
        await js.req("purge twice 1", "STREAM.PURGE.PM")
        await js.req("purge twice 2", "STREAM.PURGE.PM")
        await js.state("state", "PM")
        await js.pubs("pubs again", "pm", 2)
        await js.req("purge keep 1", "STREAM.PURGE.PM", {"keep": 1})
        await js.state("state after keep", "PM")
        await js.req("purge seq 1 (below first)", "STREAM.PURGE.PM", {"seq": 1})
        await js.state("state after low seq", "PM")

    await check(js_pair, sc)


# ====================================================================== msg get
async def _get_stream(
    js: JsRecorder, name: str = "G", direct: bool = False, storage: str = "file"
) -> None:
    subj = name.lower()
    await js.req(
        "create",
        f"STREAM.CREATE.{name}",
        {"name": name, "subjects": [f"{subj}.>"], "allow_direct": direct, "storage": storage},
    )
    await js.pub("1", f"{subj}.a", "one")
    await js.pub("2", f"{subj}.b", "two", {"X-A": "1", "X-B": "b value"})
    await js.pub("3", f"{subj}.a", "", {"Nats-Msg-Id": "m3"})
    await js.pub("4", f"{subj}.c.d", "four")
    await js.pub("5", f"{subj}.b", "five")
    await js.req("delete 1", f"STREAM.MSG.DELETE.{name}", {"seq": 1})


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_msg_get(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _get_stream(js, storage=storage)
        for label, body in [
            ("seq 2 with headers", {"seq": 2}),
            ("seq 3 empty payload", {"seq": 3}),
            ("seq 4", {"seq": 4}),
            ("deleted seq", {"seq": 1}),
            ("seq past end", {"seq": 99}),
            ("last_by_subj", {"last_by_subj": "g.a"}),
            ("last_by_subj wildcard", {"last_by_subj": "g.>"}),
            ("last_by_subj missing", {"last_by_subj": "g.zzz"}),
            ("next_by_subj", {"next_by_subj": "g.a"}),
            ("next_by_subj from seq", {"next_by_subj": "g.b", "seq": 3}),
            ("next_by_subj wildcard from seq", {"next_by_subj": "g.*", "seq": 4}),
            ("next_by_subj past", {"next_by_subj": "g.a", "seq": 4}),
            ("empty object", {}),
            ("empty body", b""),
            ("seq and last_by_subj", {"seq": 1, "last_by_subj": "g.a"}),
            ("next and last", {"next_by_subj": "g.a", "last_by_subj": "g.a"}),
            ("seq 0", {"seq": 0}),
            ("null body", b"null"),
            ("keys ignore case", {"SEQ": 2}),
            ("no_hdr", {"seq": 2, "no_hdr": True}),
            ("no_hdr false", {"seq": 2, "no_hdr": False}),
            ("last_by_subj no_hdr", {"last_by_subj": "g.b", "no_hdr": True}),
            ("negative batch and max_bytes", {"seq": 2, "batch": -1, "max_bytes": -1}),
            (
                "multi_last and up_to_seq are ignored",
                {"seq": 2, "multi_last": ["g.a"], "up_to_seq": 3},
            ),
            ("multi_last alone", {"multi_last": ["g.a"]}),
            ("two documents merge", b'{"seq": 3} {"next_by_subj": "g.b"}'),
            ("two documents conflict", b'{"seq": 2} {"last_by_subj": "g.a"}'),
        ]:
            await js.req(label, "STREAM.MSG.GET.G", body)
        await js.req("missing stream", "STREAM.MSG.GET.NOPE", {"seq": 1})

    await check(js_pair, sc)


MSG_GET_BAD: list[tuple[str, Any]] = [
    ("invalid json", b"{"),
    ("trailing garbage", b"{}x"),
    ("negative seq", {"seq": -1}),
    ("seq as string", {"seq": "1"}),
    ("seq in exponent form", b'{"seq": 1e2}'),
    ("unknown field", {"seq": 2, "bogus": True}),
    ("unknown field in a second document", b'{"seq": 2} {"bogus": 1}'),
    ("number body", b"5"),
    ("string body", b'"x"'),
    ("array body", b"[]"),
    ("last_by_subj as number", {"last_by_subj": 5}),
    ("next_by_subj as bool", {"next_by_subj": True}),
    ("no_hdr as number", {"seq": 2, "no_hdr": 1}),
    ("multi_last element", {"seq": 2, "multi_last": [1]}),
    ("up_to_seq negative", {"seq": 2, "up_to_seq": -1}),
    ("batch", {"seq": 2, "batch": 2}),
    ("max_bytes", {"seq": 2, "max_bytes": 10}),
    ("seq and start_time", {"seq": 2, "start_time": "2000-01-01T00:00:00Z"}),
    ("start_time and last_by_subj", {"last_by_subj": "g.a", "start_time": "2000-01-01T00:00:00Z"}),
    ("next and last", {"next_by_subj": "g.a", "last_by_subj": "g.b"}),
    # Go's time.Parse texts (shared with stream and consumer configs).
    ("start_time not a time", {"start_time": "bad"}),
    ("start_time month", {"start_time": "2020-13-01T00:00:00Z"}),
    ("start_time day of month", {"start_time": "2021-02-29T00:00:00Z"}),
    ("start_time hour", {"start_time": "2020-01-01T24:00:00Z"}),
    ("start_time minute", {"start_time": "2020-01-01T00:60:00Z"}),
    ("start_time second", {"start_time": "2020-01-01T00:00:60Z"}),
    ("start_time zone hour", {"start_time": "2020-01-01T00:00:00+25:00"}),
    ("start_time zone minute wins", {"start_time": "2020-01-01T00:00:00+25:61"}),
    ("start_time extra text", {"start_time": "2020-01-01T00:00:00Zabc"}),
    ("start_time month before extra text", {"start_time": "2020-13-01T00:00:00Zx"}),
    ("start_time lower-case t", {"start_time": "2020-01-01t00:00:00Z"}),
    ("up_to_time not a time", {"seq": 2, "up_to_time": "x"}),
]


@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in MSG_GET_BAD])
async def test_msg_get_bad_request(js_pair: ServerPair, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await _get_stream(js)
        await js.req("get", "STREAM.MSG.GET.G", body)

    await check(js_pair, sc)


START_TIMES: list[tuple[str, dict[str, Any]]] = [
    ("past", {"start_time": "2000-01-01T00:00:00Z"}),
    ("past, next_by_subj", {"start_time": "2000-01-01T00:00:00Z", "next_by_subj": "s.b"}),
    ("past, zone offset", {"start_time": "2000-01-01T00:00:00+01:00"}),
    ("one-digit hour", {"start_time": "2000-01-01T1:00:00Z"}),
    ("comma before the fraction", {"start_time": "2000-01-01T00:00:00,5Z"}),
    ("zone offset of 60 minutes", {"start_time": "2000-01-01T00:00:00+01:60"}),
    ("year 1", {"start_time": "0001-01-01T00:00:00Z"}),
    ("future", {"start_time": "2100-01-01T00:00:00Z"}),
    ("future, next_by_subj", {"start_time": "2100-01-01T00:00:00Z", "next_by_subj": "s.b"}),
    # Past 2262 Go's UnixNano wraps around to a time before the first message.
    ("far future wraps", {"start_time": "2999-01-01T00:00:00Z"}),
    (
        "far future wraps, next_by_subj",
        {"start_time": "2999-01-01T00:00:00Z", "next_by_subj": "s.b"},
    ),
    ("null start_time", {"start_time": None, "seq": 3}),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_msg_get_start_time(js_pair: ServerPair, storage: str) -> None:
    """MSG.GET and DIRECT.GET by ``start_time`` (timestamps of stored messages vary, so
    only times far from them)."""

    async def sc(js: JsRecorder) -> None:
        await _get_stream(js, "S", direct=True, storage=storage)
        for label, body in START_TIMES:
            await js.req(f"msg get {label}", "STREAM.MSG.GET.S", body)
            await js.direct(f"direct get {label}", "S", body)

    await check(js_pair, sc)


async def test_msg_get_payload_round_trip(js_pair: ServerPair) -> None:
    """Non-ASCII payloads and header values survive storage identically."""

    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.RT",
            {"name": "RT", "subjects": ["rt"], "storage": "memory", "allow_direct": True},
        )
        await js.pub("utf8", "rt", "héllo wörld ✓")
        await js.pub("crlf in payload", "rt", "line1\r\nline2\r\n")
        await js.pub("multi-value header", "rt", "x", {"X-Multi": "a, b", "x-lower": "c"})
        for seq in (1, 2, 3):
            await js.req(f"get {seq}", "STREAM.MSG.GET.RT", {"seq": seq})
            await js.direct(f"direct {seq}", "RT", {"seq": seq})
        await js.req("account", "INFO")

    await check(js_pair, sc)


# ====================================================================== msg delete
async def _md_stream(js: JsRecorder) -> None:
    await js.req("create", "STREAM.CREATE.MD", {"name": "MD", "subjects": ["md.*"]})
    for i in range(6):
        await js.pub(f"pub {i}", f"md.{i % 2}", f"data {i}")


async def test_msg_delete(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await _md_stream(js)
        for label, body in [
            ("erase 2", {"seq": 2}),
            ("no_erase 3", {"seq": 3, "no_erase": True}),
            ("erase first", {"seq": 1}),
            ("erase last", {"seq": 6}),
            ("no seq", {}),
            ("empty body", b""),
        ]:
            await js.req(label, "STREAM.MSG.DELETE.MD", body)
        await js.req("info", "STREAM.INFO.MD", {"deleted_details": True})
        await js.req("missing stream", "STREAM.MSG.DELETE.NOPE", {"seq": 1})
        await js.pub("pub after deletes", "md.0", "x")
        await js.req("info after pub", "STREAM.INFO.MD", {"deleted_details": True})
        await js.req("get deleted", "STREAM.MSG.GET.MD", {"seq": 2})

    await check(js_pair, sc)


MSG_DELETE_ERRORS: list[tuple[str, Any]] = [
    ("interior already deleted", {"seq": 4}),
    ("below first seq", {"seq": 1}),
    ("past end", {"seq": 50}),
    ("seq 0", {"seq": 0}),
    ("negative", {"seq": -3}),
    ("invalid json", b"{"),
    ("seq as string", {"seq": "3"}),
    ("float seq", b'{"seq": 3.0}'),
    ("uint64 overflow", b'{"seq": 18446744073709551616}'),
    ("largest uint64", {"seq": 18446744073709551615}),
    ("unknown field", {"seq": 3, "bogus": 1}),
    ("no_erase as number", {"seq": 3, "no_erase": 1}),
    ("array body", b"[]"),
    ("number body", b"5"),
    # Only an empty body or {} is "bad request"; these decode to sequence 0.
    ("null body", b"null"),
    ("white space", b"  "),
    ("two empty documents", b"{} {}"),
    ("seq null", {"seq": None}),
    ("padded empty object", b" {} "),
    ("keys ignore case", {"SEQ": 3, "No_Erase": True}),
    ("two documents merge", b'{"seq": 3} {"no_erase": true}'),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize("body", [pytest.param(b, id=i) for i, b in MSG_DELETE_ERRORS])
async def test_msg_delete_errors(js_pair: ServerPair, storage: str, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.MD",
            {"name": "MD", "subjects": ["md.*"], "storage": storage},
        )
        for i in range(6):
            await js.pub(f"pub {i}", f"md.{i % 2}", f"data {i}")
        for seq in (2, 1, 4):
            await js.req(f"erase {seq}", "STREAM.MSG.DELETE.MD", {"seq": seq})
        await js.req("delete", "STREAM.MSG.DELETE.MD", body)

    await check(js_pair, sc)


# ====================================================================== publish headers
async def test_pub_expected_headers(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.E", {"name": "E", "subjects": ["e.*"]})
        cases: list[tuple[str, str, dict[str, str]]] = [
            ("expected last seq 0 on empty", "e.a", {"Nats-Expected-Last-Sequence": "0"}),
            ("expected stream ok", "e.a", {"Nats-Expected-Stream": "E"}),
            ("expected stream wrong", "e.a", {"Nats-Expected-Stream": "OTHER"}),
            ("expected last seq ok", "e.b", {"Nats-Expected-Last-Sequence": "2"}),
            ("expected last seq wrong", "e.b", {"Nats-Expected-Last-Sequence": "1"}),
            ("expected last seq not a number", "e.b", {"Nats-Expected-Last-Sequence": "abc"}),
            ("expected subj seq ok", "e.a", {"Nats-Expected-Last-Subject-Sequence": "2"}),
            ("expected subj seq wrong", "e.a", {"Nats-Expected-Last-Subject-Sequence": "1"}),
            (
                "expected subj seq 0 new subject",
                "e.new",
                {"Nats-Expected-Last-Subject-Sequence": "0"},
            ),
            (
                "expected subj seq 0 existing",
                "e.a",
                {"Nats-Expected-Last-Subject-Sequence": "0"},
            ),
            (
                "expected subj seq with subject",
                "e.c",
                {
                    "Nats-Expected-Last-Subject-Sequence": "3",
                    "Nats-Expected-Last-Subject-Sequence-Subject": "e.b",
                },
            ),
            (
                "expected subj seq with wildcard subject",
                "e.c",
                {
                    "Nats-Expected-Last-Subject-Sequence": "6",
                    "Nats-Expected-Last-Subject-Sequence-Subject": "e.*",
                },
            ),
            (
                "all expectations ok",
                "e.a",
                {
                    "Nats-Expected-Stream": "E",
                    "Nats-Expected-Last-Sequence": "7",
                    "Nats-Expected-Last-Subject-Sequence": "5",
                },
            ),
            (
                "stream wrong and seq wrong",
                "e.a",
                {"Nats-Expected-Stream": "X", "Nats-Expected-Last-Sequence": "1"},
            ),
            ("msg id", "e.a", {"Nats-Msg-Id": "id-1"}),
            ("dup", "e.a", {"Nats-Msg-Id": "id-1"}),
            (
                "dup, expected stream wrong",
                "e.a",
                {"Nats-Msg-Id": "id-1", "Nats-Expected-Stream": "X"},
            ),
            ("unrelated header", "e.a", {"X-Custom": "1"}),
        ]
        for label, subj, hdrs in cases:
            await js.pub(label, subj, label, hdrs)
        await js.req("info", "STREAM.INFO.E")

    await check(js_pair, sc)


async def test_pub_expected_last_msg_id(js_pair: ServerPair) -> None:
    """Every stored message carries a Nats-Msg-Id (see the reset test for the other case)."""

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.E", {"name": "E", "subjects": ["e.*"]})
        await js.pub("expected on empty", "e.a", "x", {"Nats-Expected-Last-Msg-Id": "z"})
        await js.pub("msg id", "e.a", "x", {"Nats-Msg-Id": "id-1"})
        await js.pub(
            "msg id + expected ok",
            "e.a",
            "x",
            {"Nats-Msg-Id": "id-2", "Nats-Expected-Last-Msg-Id": "id-1"},
        )
        await js.pub(
            "msg id + expected wrong",
            "e.a",
            "x",
            {"Nats-Msg-Id": "id-3", "Nats-Expected-Last-Msg-Id": "id-1"},
        )
        await js.pub("expected wrong, no id", "e.a", "x", {"Nats-Expected-Last-Msg-Id": "q"})
        await js.pub("dup of id-1", "e.a", "x", {"Nats-Msg-Id": "id-1"})
        await js.state("state", "E")

    await check(js_pair, sc)


async def test_pub_expected_last_msg_id_reset(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.E", {"name": "E", "subjects": ["e.*"]})
        await js.pub("msg id", "e.a", "x", {"Nats-Msg-Id": "id-1"})
        await js.pub("no msg id", "e.a", "x")
        await js.pub("expected old id", "e.a", "x", {"Nats-Expected-Last-Msg-Id": "id-1"})
        await js.pub("expected empty id", "e.a", "x", {"Nats-Expected-Last-Msg-Id": ""})
        await js.state("state", "E")

    await check(js_pair, sc)


async def test_pub_duplicate_with_failed_expectation(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.E", {"name": "E", "subjects": ["e.*"]})
        await js.pub("msg id", "e.a", "x", {"Nats-Msg-Id": "id-1"})
        await js.pub("other", "e.a", "y")
        await js.pub(
            "dup with wrong expected last seq",
            "e.a",
            "x",
            {"Nats-Msg-Id": "id-1", "Nats-Expected-Last-Sequence": "1"},
        )
        await js.pub(
            "dup with wrong expected subject seq",
            "e.a",
            "x",
            {"Nats-Msg-Id": "id-1", "Nats-Expected-Last-Subject-Sequence": "1"},
        )

    await check(js_pair, sc)


async def test_pub_no_reply_and_non_stream_subject(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.NR", {"name": "NR", "subjects": ["nr.>"]})
        await js.nc.publish("nr.a", b"fire and forget")
        await js.nc.publish("nr.b", b"with headers", headers={"Nats-Msg-Id": "x"})
        await js.nc.flush()
        await asyncio.sleep(0.05)
        await js.state("state", "NR")
        await js.pub("dup of unacked", "nr.c", "z", {"Nats-Msg-Id": "x"})
        await js.pub("not a stream subject", "zz.top", "x", timeout=0.3)

    await check(js_pair, sc)


async def test_dedup_window(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.DW",
            {"name": "DW", "subjects": ["dw"], "duplicate_window": 500_000_000},
        )
        await js.pub("m1", "dw", "a", {"Nats-Msg-Id": "m1"})
        await js.pub("m1 dup", "dw", "b", {"Nats-Msg-Id": "m1"})
        await js.pub("m2", "dw", "c", {"Nats-Msg-Id": "m2"})
        await js.pub("m1 dup again", "dw", "d", {"Nats-Msg-Id": "m1"})
        await js.pub("no id", "dw", "e")
        await js.pub("empty id", "dw", "f", {"Nats-Msg-Id": ""})
        await js.pub("empty id again", "dw", "g", {"Nats-Msg-Id": ""})
        await js.req("purge", "STREAM.PURGE.DW")
        await js.pub("m2 dup after purge", "dw", "h", {"Nats-Msg-Id": "m2"})
        await asyncio.sleep(1.2)
        await js.pub("m1 after window", "dw", "i", {"Nats-Msg-Id": "m1"})
        await js.pub("m1 dup of new", "dw", "j", {"Nats-Msg-Id": "m1"})
        await js.state("state", "DW")
        await js.req(
            "create without dedup",
            "STREAM.CREATE.NODUP",
            {"name": "NODUP", "subjects": ["nodup"], "duplicate_window": 0},
        )
        await js.pub("n1", "nodup", "a", {"Nats-Msg-Id": "n"})
        await js.pub("n1 again", "nodup", "a", {"Nats-Msg-Id": "n"})

    await check(js_pair, sc)


async def test_rollup(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("no rollup stream", "STREAM.CREATE.NRU", {"name": "NRU", "subjects": ["nru"]})
        await js.pub("rollup not permitted", "nru", "x", {"Nats-Rollup": "sub"})
        await js.req(
            "create",
            "STREAM.CREATE.RU",
            {"name": "RU", "subjects": ["ru.*"], "allow_rollup_hdrs": True},
        )
        for i in range(6):
            await js.pub(f"pub {i}", f"ru.{'ab'[i % 2]}", f"v{i}")
        await js.pub("rollup sub", "ru.a", "rolled a", {"Nats-Rollup": "sub"})
        await js.req("info after sub", "STREAM.INFO.RU", {"deleted_details": True})
        await js.req("last a", "STREAM.MSG.GET.RU", {"last_by_subj": "ru.a"})
        await js.req("first", "STREAM.MSG.GET.RU", {"next_by_subj": ">"})
        await js.pub("rollup all", "ru.c", "rolled all", {"Nats-Rollup": "all"})
        await js.req("info after all", "STREAM.INFO.RU", {"deleted_details": True})
        await js.pub("after rollup", "ru.b", "later")
        await js.pub("rollup sub on new subject", "ru.d", "d", {"Nats-Rollup": "sub"})
        await js.state("final", "RU")
        await js.req("account", "INFO")

    await check(js_pair, sc)


async def test_rollup_invalid_value(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.RU",
            {"name": "RU", "subjects": ["ru.*"], "allow_rollup_hdrs": True},
        )
        await js.pub("rollup invalid", "ru.a", "x", {"Nats-Rollup": "bogus"})

    await check(js_pair, sc)


async def test_rollup_upper_case(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.RU",
            {"name": "RU", "subjects": ["ru.*"], "allow_rollup_hdrs": True},
        )
        await js.pubs("pubs", "ru.a", 3)
        await js.pub("rollup SUB", "ru.a", "x", {"Nats-Rollup": "SUB"})
        await js.state("state", "RU")

    await check(js_pair, sc)


async def test_msg_ttl(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "no ttl stream",
            "STREAM.CREATE.NT",
            {"name": "NT", "subjects": ["nt"], "allow_direct": True},
        )
        await js.pub("ttl refused", "nt", "x", {"Nats-TTL": "10s"})
        await js.state("nothing stored", "NT")
        await js.req(
            "create",
            "STREAM.CREATE.TTL",
            {"name": "TTL", "subjects": ["ttl.*"], "allow_msg_ttl": True, "allow_direct": True},
        )
        for label, value in [
            ("seconds", "60"),
            ("duration", "1m"),
            ("never", "never"),
            ("hours", "2h"),
            ("zero", "0"),
            ("negative", "-1"),
            ("garbage", "soon"),
            ("sub-second", "500ms"),
            ("mixed duration", "1h30m"),
        ]:
            await js.pub(f"ttl {label}", "ttl.a", label, {"Nats-TTL": value})
        await js.state("state", "TTL")
        await js.direct("direct get 1", "TTL", {"seq": 1})
        await js.req("msg get 2", "STREAM.MSG.GET.TTL", {"seq": 2})

    await check(js_pair, sc)


async def test_msg_ttl_invalid_on_disabled_stream(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.NT", {"name": "NT", "subjects": ["nt"]})
        await js.pub("invalid ttl", "nt", "x", {"Nats-TTL": "bogus"})

    await check(js_pair, sc)


async def test_msg_ttl_empty_value(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.TTL",
            {"name": "TTL", "subjects": ["ttl.*"], "allow_msg_ttl": True},
        )
        await js.pub("ttl empty", "ttl.a", "x", {"Nats-TTL": ""})

    await check(js_pair, sc)


async def test_msg_ttl_raised_to_delete_marker_ttl(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.TTL",
            {
                "name": "TTL",
                "subjects": ["ttl.*"],
                "allow_msg_ttl": True,
                "subject_delete_marker_ttl": 60_000_000_000,
            },
        )
        await js.pub("ttl 10s", "ttl.a", "x", {"Nats-TTL": "10s"})
        await js.req("stored headers", "STREAM.MSG.GET.TTL", {"seq": 1})

    await check(js_pair, sc)


async def test_discard_new_limits(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "max_msgs",
            "STREAM.CREATE.DN1",
            {"name": "DN1", "subjects": ["dn1"], "max_msgs": 2, "discard": "new"},
        )
        await js.pubs("fill", "dn1", 2)
        await js.pub("over max_msgs", "dn1", "x")
        await js.pub("over max_msgs with id", "dn1", "x", {"Nats-Msg-Id": "q"})
        await js.pub("over max_msgs with id again", "dn1", "x", {"Nats-Msg-Id": "q"})
        await js.state("dn1", "DN1")
        await js.req(
            "max_bytes",
            "STREAM.CREATE.DN2",
            {
                "name": "DN2",
                "subjects": ["dn2"],
                "max_bytes": 120,
                "discard": "new",
                "storage": "memory",
            },
        )
        await js.pub("fits", "dn2", "a" * 40)
        await js.pub("fits 2", "dn2", "a" * 40)
        await js.pub("over max_bytes", "dn2", "a" * 40)
        await js.pub("small still fits?", "dn2", "")
        await js.state("dn2", "DN2")
        await js.req(
            "per subject",
            "STREAM.CREATE.DN3",
            {
                "name": "DN3",
                "subjects": ["dn3.*"],
                "max_msgs_per_subject": 1,
                "discard": "new",
                "discard_new_per_subject": True,
            },
        )
        await js.pub("a", "dn3.a", "1")
        await js.pub("b", "dn3.b", "1")
        await js.pub("a again", "dn3.a", "2")
        await js.state("dn3", "DN3")
        await js.req(
            "per subject without discard_new_per_subject",
            "STREAM.CREATE.DN4",
            {"name": "DN4", "subjects": ["dn4.*"], "max_msgs_per_subject": 1, "discard": "new"},
        )
        await js.pub("x", "dn4.x", "1")
        await js.pub("x again replaces", "dn4.x", "2")
        await js.state("dn4", "DN4")
        await js.req(
            "discard old",
            "STREAM.CREATE.DO",
            {"name": "DO", "subjects": ["do.*"], "max_msgs": 2, "max_msgs_per_subject": 3},
        )
        await js.pubs("fill old", "do.a", 5)
        await js.state("do", "DO")
        await js.req(
            "discard old bytes",
            "STREAM.CREATE.DOB",
            {"name": "DOB", "subjects": ["dob"], "max_bytes": 200, "storage": "memory"},
        )
        await js.pubs("fill old bytes", "dob", 6, "z" * 30)
        await js.state("dob", "DOB")

    await check(js_pair, sc)


async def test_max_msg_size(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.MS",
            {"name": "MS", "subjects": ["ms"], "max_msg_size": 10},
        )
        await js.pub("exact", "ms", "x" * 10)
        await js.pub("too big", "ms", "x" * 11)
        await js.pub("headers count?", "ms", "x" * 5, {"X-Long-Header": "y" * 20})
        await js.state("state", "MS")

    await check(js_pair, sc)


async def test_deny_delete(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.DENY",
            {"name": "DENY", "subjects": ["deny"], "deny_delete": True},
        )
        await js.pubs("pubs", "deny", 3)
        await js.req("msg delete", "STREAM.MSG.DELETE.DENY", {"seq": 1})
        await js.req("msg delete no_erase", "STREAM.MSG.DELETE.DENY", {"seq": 1, "no_erase": True})
        await js.req("purge allowed", "STREAM.PURGE.DENY")
        await js.req("stream delete allowed", "STREAM.DELETE.DENY")

    await check(js_pair, sc)


async def test_deny_purge(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "create",
            "STREAM.CREATE.DENY",
            {"name": "DENY", "subjects": ["deny"], "deny_purge": True},
        )
        await js.pubs("pubs", "deny", 3)
        await js.req("purge", "STREAM.PURGE.DENY")
        await js.req("purge filter", "STREAM.PURGE.DENY", {"filter": "deny"})

    await check(js_pair, sc)


# ====================================================================== direct get
@pytest.mark.parametrize("storage", ["file", "memory"])
async def test_direct_get(js_pair: ServerPair, storage: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await _get_stream(js, "DG", direct=True, storage=storage)
        for label, body in [
            ("seq 2 with headers", {"seq": 2}),
            ("seq 3 msg id, empty payload", {"seq": 3}),
            ("seq 4", {"seq": 4}),
            ("deleted seq", {"seq": 1}),
            ("seq past end", {"seq": 50}),
            ("last_by_subj", {"last_by_subj": "dg.a"}),
            ("last_by_subj wildcard", {"last_by_subj": "dg.*"}),
            ("last_by_subj missing", {"last_by_subj": "dg.nope"}),
            ("next_by_subj", {"next_by_subj": "dg.a"}),
            ("next_by_subj from seq", {"next_by_subj": "dg.>", "seq": 3}),
            ("next_by_subj none left", {"next_by_subj": "dg.a", "seq": 4}),
            ("seq and last", {"seq": 1, "last_by_subj": "dg.a"}),
        ]:
            await js.direct(label, "DG", body)
        await js.direct("subject form", "DG.dg.a")
        await js.direct("subject form multi token", "DG.dg.c.d")
        await js.direct("subject form wildcard", "DG.dg.*")
        await js.direct("subject form missing", "DG.dg.zzz")

    await check(js_pair, sc)


DIRECT_BAD: list[tuple[str, str, Any, str | None]] = [
    (
        "empty object",
        "DG",
        {},
        None,
    ),
    (
        "empty body",
        "DG",
        b"",
        None,
    ),
    (
        "invalid json",
        "DG",
        b"{",
        None,
    ),
    (
        "subject form with body",
        "DG.dg.b",
        {"seq": 1},
        None,
    ),
]


@pytest.mark.parametrize(
    "subject,body",
    [pytest.param(s, b, id=i, marks=[xfail(r)] if r else []) for i, s, b, r in DIRECT_BAD],
)
async def test_direct_get_bad_request(js_pair: ServerPair, subject: str, body: Any) -> None:
    async def sc(js: JsRecorder) -> None:
        await _get_stream(js, "DG", direct=True)
        await js.direct("direct", subject, body)

    await check(js_pair, sc)


@pytest.mark.parametrize("stream", ["ND", "NOSUCH"])
async def test_direct_get_unavailable(js_pair: ServerPair, stream: str) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.ND", {"name": "ND", "subjects": ["nd"]})
        await js.pub("pub", "nd", "x")
        await js.direct("direct", stream, {"seq": 1}, timeout=0.5)

    await check(js_pair, sc)


async def test_direct_get_after_enabling(js_pair: ServerPair) -> None:
    base = {"name": "DE", "subjects": ["de"]}

    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.DE", base)
        await js.pub("pub", "de", "x", {"H": "v"})
        await js.req("enable direct", "STREAM.UPDATE.DE", {**base, "allow_direct": True})
        await js.direct("direct", "DE", {"seq": 1})
        await js.direct("direct last", "DE.de")

    await check(js_pair, sc)


# ====================================================================== misc API
async def test_unknown_api_subject(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        # No API subscription matches either: nats-server does not answer.
        await js.req("unknown verb", "STREAM.FROBNICATE.X", b"{}", timeout=0.3,
                     expect_silence=True)
        await js.req("unknown top level", "NOPE", b"", timeout=0.3, expect_silence=True)

    await check(js_pair, sc)
