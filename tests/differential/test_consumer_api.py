"""Differential tests of how streams and consumers affect each other: purges, deletes,
limits removing pending messages, retention, durable push re-binding, num_pending under
filters. Same raw-protocol scenarios against nats-server and natsd; the normalised logs
must be equal (helpers in :mod:`.consumer_scenarios`, shared with ``test_consumers``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .consumer_scenarios import (
    ConsumerRecorder,
    assert_same,
    consumer_server_pair,
    entry,
    run_scenario,
)
from .harness import ServerPair

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

SEC = 1_000_000_000


@pytest.fixture(scope="module")
def pair() -> Iterator[ServerPair]:
    require_nats_server()
    with consumer_server_pair() as p:
        yield p


async def check(p: ServerPair, scenario: Any) -> list[tuple[str, Any]]:
    ref, impl = await run_scenario(p, scenario)
    assert_same(ref, impl)
    return ref


EXPLICIT = {"ack_policy": "explicit", "ack_wait": 30 * SEC}


async def test_purge_moves_consumers(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("P")
        await c.pubs("p.a", 3)
        await c.pubs("p.b", 3)
        await c.create("all", "P", {"durable_name": "ALL", **EXPLICIT}, keys=())
        await c.create(
            "a", "P", {"durable_name": "A", "filter_subject": "p.a", **EXPLICIT}, keys=()
        )
        await c.create(
            "b", "P", {"durable_name": "B", "filter_subject": "p.b", **EXPLICIT}, keys=()
        )
        await c.fetch("all fetch", "P", "ALL", {"batch": 2}, 2)
        await c.fetch("a fetch", "P", "A", {"batch": 2}, 2)
        await c.fetch("b fetch", "P", "B", {"batch": 1}, 1)
        await c.req("purge p.a", "STREAM.PURGE.P", {"filter": "p.a"}, keys=("purged",))
        for name in ("ALL", "A", "B"):
            await c.info(f"{name} after filtered purge", "P", name)
        await c.pubs("p.a", 1, data="late")
        await c.await_pending("P", "A", 1)
        await c.fetch(
            "a after purge", "P", "A", {"batch": 5, "no_wait": True}, 6, until_status=True
        )
        await c.req("purge all", "STREAM.PURGE.P", keys=("purged",))
        for name in ("ALL", "A", "B"):
            await c.info(f"{name} after purge", "P", name)
        await c.fetch(
            "b after purge", "P", "B", {"batch": 2, "no_wait": True}, 3, until_status=True
        )

    log = await check(pair, sc)
    assert entry(log, "A after filtered purge")["num_ack_pending"] == 0


async def test_pending_message_removed_by_limits_and_delete(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        adv = c.sub("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>")
        await c.stream("L", max_msgs=3)
        await c.pubs("l.a", 3)
        await c.create("c", "L", {"durable_name": "C", **EXPLICIT}, keys=())
        await c.fetch("fetch", "L", "C", {"batch": 2}, 2)
        await c.info("before", "L", "C")
        await c.pubs("l.a", 1, data="new")
        await c.advisories("limits terminated", adv, 1)
        await c.info("after discard old", "L", "C")
        await c.req("delete pending seq 2", "STREAM.MSG.DELETE.L", {"seq": 2})
        await c.advisories("delete terminated", adv, 1)
        await c.info("after msg delete", "L", "C")
        await c.fetch("rest", "L", "C", {"batch": 5, "no_wait": True}, 6, until_status=True)

    log = await check(pair, sc)
    assert entry(log, "after msg delete")["num_ack_pending"] == 0


async def test_stream_delete_releases_waiting_pulls(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("D")
        await c.create("c", "D", {"durable_name": "C", **EXPLICIT}, keys=())
        sid = c.sub("_W1")
        c.pull("D", "C", {"batch": 3, "expires": 5 * SEC}, "_W1")
        await c.conn.ping()
        await c.req("delete stream", "STREAM.DELETE.D")
        # (nats-server once took over 3 s to release it with the whole suite on 2 cores)
        await c.frames("released", sid, 1, timeout=10.0)
        await c.req("info after", "CONSUMER.INFO.D.C")
        c.pull("D", "C", {"batch": 1}, "_W1")
        await c.frames("no responders", sid, 1)

    await check(pair, sc)


async def test_interest_retention_with_filters(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("IR", retention="interest")
        await c.create("a", "IR", {"durable_name": "A", "filter_subject": "ir.a", **EXPLICIT})
        await c.pubs("ir.b", 2)
        await c.state("unmatched subject dropped", "IR")
        await c.pubs("ir.a", 3)
        await c.create("all", "IR", {"durable_name": "ALL", **EXPLICIT}, keys=())
        await c.state("three kept", "IR")
        fs = await c.fetch("a fetch", "IR", "A", {"batch": 3}, 3)
        await c.ack("ack 1", fs[0])
        await c.state("still wanted by ALL", "IR")
        await c.req("delete ALL", "CONSUMER.DELETE.IR.ALL")
        await c.state("after ALL deleted", "IR")
        await c.ack("ack 2", fs[1], "+TERM")
        await c.state("after term", "IR")
        await c.req("delete A", "CONSUMER.DELETE.IR.A")
        await c.state("no consumers", "IR")

    log = await check(pair, sc)
    assert entry(log, "no consumers")["messages"] == 0


async def test_num_pending_under_filters(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("N")
        for subj in ("n.a", "n.b", "n.a", "n.c", "n.a", "n.b"):
            await c.pub(subj)
        await c.create("multi", "N", {"durable_name": "M", "filter_subjects": ["n.a", "n.c"]})
        await c.create(
            "lps",
            "N",
            {
                "durable_name": "L",
                "deliver_policy": "last_per_subject",
                "filter_subjects": ["n.a", "n.b"],
            },
        )
        await c.create("wild", "N", {"durable_name": "W", "filter_subject": "n.*"}, keys=())
        await c.req("delete seq 3", "STREAM.MSG.DELETE.N", {"seq": 3})
        for name in ("M", "L", "W"):
            await c.info(f"{name} info", "N", name)
        await c.fetch(
            "multi fetch", "N", "M", {"batch": 10, "no_wait": True}, 11, until_status=True
        )
        await c.fetch("lps fetch", "N", "L", {"batch": 10, "no_wait": True}, 11, until_status=True)
        await c.pub("n.b")
        # nats-server counts the new message for each consumer on that consumer's own
        # goroutine: wait until both filtered consumers on n.b have seen it.
        await c.await_pending("N", "L", 1)
        await c.await_pending("N", "W", 6)
        for name in ("M", "L", "W"):
            await c.info(f"{name} info after publish", "N", name)

    log = await check(pair, sc)
    assert entry(log, "M info")["num_pending"] == 3


async def test_durable_push_rebind(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("R")
        await c.pubs("r.a", 2)
        d1 = c.sub("dlv.one")
        cfg = {"durable_name": "P", "deliver_subject": "dlv.one", **EXPLICIT}
        await c.create("create", "R", cfg, keys=("push_bound",))
        await c.messages("first bind", d1, 2)
        await c.create(
            "rebind while bound", "R", {**cfg, "deliver_subject": "dlv.two"}, keys=("config",)
        )
        c.conn.unsub(d1)
        await c.conn.ping()
        await c.info("unbound", "R", "P", counters=False)
        d2 = c.sub("dlv.two")
        await c.create(
            "rebind", "R", {**cfg, "deliver_subject": "dlv.two"}, keys=("push_bound", "config")
        )
        await c.messages("redelivered to the new subject", d2, 2)
        await c.info("after rebind", "R", "P")

    log = await check(pair, sc)
    assert entry(log, "rebind while bound")["error"]["err_code"] == 10013


async def test_ack_wait_update_and_workqueue_acks(pair: ServerPair) -> None:
    async def sc(c: ConsumerRecorder) -> None:
        await c.stream("W", retention="workqueue")
        await c.pubs("w.a", 4)
        await c.create("wq", "W", {"durable_name": "Q", **EXPLICIT}, keys=())
        fs = await c.fetch("fetch", "W", "Q", {"batch": 4}, 4)
        await c.ack("ack 1", fs[0])
        await c.ack("nak 2", fs[1], "-NAK")
        await c.ack("term 3", fs[2], "+TERM")
        await c.ack("progress 4", fs[3], "+WPI")
        await c.state("after acks", "W")
        await c.info("info", "W", "Q")
        await c.fetch("redelivery", "W", "Q", {"batch": 4, "no_wait": True}, 5, until_status=True)

    log = await check(pair, sc)
    assert entry(log, "after acks")["messages"] == 2
