"""Atomic batch publish (ADR-50: ``allow_atomic``, ``Nats-Batch-Id`` / ``-Sequence`` /
``-Commit``), nats-server 2.15.1 against natsd on one server: every answer of each message
(the empty answers of staged messages, the commit's PubAck, the errors in nats-server's
order), what is stored, and that a batch that fails stores nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

T = 10.0


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def b(bid: str, seq: int | str, commit: str | None = None, **more: str) -> dict[str, str]:
    h = {"Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(seq), **more}
    if commit is not None:
        h["Nats-Batch-Commit"] = commit
    return h


async def batch(js: JsRecorder, label: str, subject: str, heads: list[dict[str, str]]) -> None:
    for i, h in enumerate(heads):
        await js.pub(f"{label} {i + 1}", subject, b"x", h, timeout=T)


async def state(js: JsRecorder, label: str, stream: str) -> None:
    await js.req(label, f"STREAM.INFO.{stream}", timeout=T)


async def test_atomic_batches(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req(
            "disabled stream", "STREAM.CREATE.NA", {"name": "NA", "subjects": ["na.>"]}, timeout=T
        )
        await js.pub("disabled", "na.a", b"x", b("u", 1, "1"), timeout=T)
        await js.req(
            "enable",
            "STREAM.UPDATE.NA",
            {"name": "NA", "subjects": ["na.>"], "allow_atomic": True},
            timeout=T,
        )
        await js.pub("enabled", "na.a", b"x", b("u", 1, "1"), timeout=T)
        cfg = {"name": "A", "subjects": ["a.>"], "allow_atomic": True, "allow_direct": True}
        await js.req("create", "STREAM.CREATE.A", cfg, timeout=T)
        await js.pub("no sequence", "a.x", b"x", {"Nats-Batch-Id": "s"}, timeout=T)
        await js.pub("sequence abc", "a.x", b"x", b("s", "abc"), timeout=T)
        await js.pub("sequence 0", "a.x", b"x", b("s", 0), timeout=T)
        await js.pub("unknown at 2", "a.x", b"x", b("s", 2), timeout=T)
        await js.pub("id of 64", "a.x", b"x", b("A" * 64, 1, "1"), timeout=T)
        await js.pub("id of 65", "a.x", b"x", b("A" * 65, 1, "1"), timeout=T)
        await batch(js, "three", "a.b", [b("b3", 1), b("b3", 2), b("b3", 3, "1")])
        await batch(js, "gap", "a.g", [b("g", 1), b("g", 3), b("g", 2, "1")])
        await batch(js, "repeat", "a.r", [b("r", 1), b("r", 1)])
        await batch(js, "repeat 2", "a.r", [b("r2", 1), b("r2", 2), b("r2", 2)])
        await batch(js, "commit 2", "a.c", [b("c", 1), b("c", 2, "2")])
        await js.pub("commit true", "a.c", b"x", b("ct", 1, "true"), timeout=T)
        await js.pub("commit empty", "a.c", b"x", b("ce", 1, ""), timeout=T)
        await batch(js, "eob", "a.e", [b("eob", 1), b("eob", 2), b("eob", 3, "eob")])
        await js.direct("eob's last", "A.a.e", timeout=T)
        await js.pub("eob first", "a.e", b"x", b("eo1", 1, "eob"), timeout=T)
        await js.pub("empty id is no batch", "a.p", b"x", {"Nats-Batch-Id": ""}, timeout=T)
        await js.pub("sequence alone", "a.p", b"x", {"Nats-Batch-Sequence": "1"}, timeout=T)
        await state(js, "after the basics", "A")

    ref, impl = await run_scenario(js_pair, sc, timeout=150)
    acks = dict(ref)
    assert acks["three 3"] == {"stream": "A", "seq": 4, "batch": "b3", "count": 3}
    assert acks["three 1"] == {"<raw>": ""}
    assert_same(ref, impl)


async def test_atomic_batch_checks_at_the_commit(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        cfg = {
            "name": "C",
            "subjects": ["c.>"],
            "allow_atomic": True,
            "allow_rollup_hdrs": True,
            "duplicate_window": 60_000_000_000,
        }
        await js.req("create", "STREAM.CREATE.C", cfg, timeout=T)
        await js.pub("m1", "c.a", b"1", {"Nats-Msg-Id": "m1"}, timeout=T)
        await js.pub("m2", "c.a", b"2", {"Nats-Msg-Id": "m2"}, timeout=T)
        await batch(
            js,
            "dup stored",
            "c.b",
            [b("d1", 1, **{"Nats-Msg-Id": "m3"}), b("d1", 2, "1", **{"Nats-Msg-Id": "m1"})],
        )
        await batch(
            js,
            "dup in batch",
            "c.b",
            [b("d2", 1, **{"Nats-Msg-Id": "m4"}), b("d2", 2, "1", **{"Nats-Msg-Id": "m4"})],
        )
        await js.pub("m3 again", "c.a", b"3", {"Nats-Msg-Id": "m3"}, timeout=T)
        await batch(
            js,
            "expected last seq",
            "c.e",
            [b("e1", 1, **{"Nats-Expected-Last-Sequence": "3"}), b("e1", 2, "1")],
        )
        await batch(
            js,
            "expected last seq wrong",
            "c.e",
            [b("e2", 1, **{"Nats-Expected-Last-Sequence": "99"}), b("e2", 2, "1")],
        )
        await batch(
            js,
            "expected last seq on 2",
            "c.e",
            [b("e3", 1), b("e3", 2, "1", **{"Nats-Expected-Last-Sequence": "6"})],
        )
        await batch(
            js,
            "subject seq twice",
            "c.s",
            [
                b("s1", 1, **{"Nats-Expected-Last-Subject-Sequence": "0"}),
                b("s1", 2, "1", **{"Nats-Expected-Last-Subject-Sequence": "0"}),
            ],
        )
        await batch(
            js,
            "subject seq two subjects",
            "c.s",
            [b("s2", 1, **{"Nats-Expected-Last-Subject-Sequence": "0"}), b("s2", 2, "1")],
        )
        await js.pub(
            "subject seq wrong",
            "c.s",
            b"x",
            b("s3", 1, "1", **{"Nats-Expected-Last-Subject-Sequence": "99"}),
            timeout=T,
        )
        await js.pub(
            "subject seq subject alone",
            "c.s",
            b"x",
            b("s4", 1, "1", **{"Nats-Expected-Last-Subject-Sequence-Subject": "c.a"}),
            timeout=T,
        )
        await js.pub(
            "expected stream",
            "c.s",
            b"x",
            b("s5", 1, "1", **{"Nats-Expected-Stream": "OTHER"}),
            timeout=T,
        )
        await js.pub(
            "expected msg id",
            "c.s",
            b"x",
            b("s6", 1, "1", **{"Nats-Expected-Last-Msg-Id": "m1"}),
            timeout=T,
        )
        await js.pub("ttl disabled", "c.t", b"x", b("t1", 1, "1", **{"Nats-TTL": "5s"}), timeout=T)
        await batch(
            js, "rollup sub twice", "c.r", [b("r1", 1), b("r1", 2, "1", **{"Nats-Rollup": "sub"})]
        )
        await batch(
            js, "rollup all on 2", "c.r", [b("r2", 1), b("r2", 2, "1", **{"Nats-Rollup": "all"})]
        )
        await js.pub(
            "rollup foo", "c.r", b"x", b("r3", 1, "1", **{"Nats-Rollup": "foo"}), timeout=T
        )
        await batch(
            js, "rollup sub first", "c.r", [b("r4", 1, **{"Nats-Rollup": "sub"}), b("r4", 2, "1")]
        )
        await js.pub(
            "level too high",
            "c.l",
            b"x",
            b("l1", 1, "1", **{"Nats-Required-Api-Level": "99"}),
            timeout=T,
        )
        await js.pub(
            "source header", "c.l", b"x", b("l2", 1, "1", **{"Nats-Stream-Source": "O"}), timeout=T
        )
        await state(js, "after the checks", "C")
        await js.req(
            "discard new",
            "STREAM.CREATE.D",
            {
                "name": "D",
                "subjects": ["d.>"],
                "allow_atomic": True,
                "discard": "new",
                "max_msgs": 3,
            },
            timeout=T,
        )
        await js.pub("d one", "d.a", b"x", None, timeout=T)
        await batch(js, "over max_msgs", "d.a", [b("x1", 1), b("x1", 2), b("x1", 3, "1")])
        await batch(js, "fits max_msgs", "d.a", [b("x2", 1), b("x2", 2, "1")])
        await state(js, "after discard new", "D")
        await js.req(
            "counters",
            "STREAM.CREATE.K",
            {
                "name": "K",
                "subjects": ["k.>"],
                "allow_atomic": True,
                "allow_msg_counter": True,
                "allow_direct": True,
            },
            timeout=T,
        )
        await js.pub("k 1", "k.a", b"", b("k1", 1, **{"Nats-Incr": "1"}), timeout=T)
        await js.pub("k 2", "k.a", b"", b("k1", 2, **{"Nats-Incr": "2"}), timeout=T)
        await js.pub("k 3", "k.a", b"", b("k1", 3, "1", **{"Nats-Incr": "+10"}), timeout=T)
        await js.direct("k last", "K.k.a", timeout=T)
        await js.pub("k missing", "k.a", b"", b("k2", 1, "1"), timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=150)
    acks: dict[str, Any] = dict(ref)
    assert acks["dup stored 2"]["error"]["err_code"] == 10201
    assert acks["k 3"] == {"stream": "K", "seq": 3, "batch": "k1", "count": 3}
    assert_same(ref, impl)
