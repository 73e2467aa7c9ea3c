"""Direct consumers (``"direct": true``), what a mirror or a source asks of its origin
stream, against nats-server: made and answered like other push consumers, but neither
listed (CONSUMER.NAMES / LIST) nor counted in STREAM.INFO's ``consumer_count`` (the
account's ``consumers`` does count it); CONSUMER.INFO still finds one by name. A direct
consumer must be push and ephemeral (nats-server's errors)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

T = 5.0
DIRECT = {"name": "MIRRORC", "deliver_policy": "all", "ack_policy": "none",
          "ack_wait": 79200000000000, "max_deliver": 1, "replay_policy": "instant",
          "flow_control": True, "deliver_subject": "$JS.M.abcdefgh",
          "idle_heartbeat": 1000000000, "inactive_threshold": 10000000000, "num_replicas": 0,
          "direct": True}  # fmt: skip


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def test_a_direct_consumer_is_neither_listed_nor_counted(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.start()
        await js.req("create", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, timeout=T)
        await js.pubs("pubs", "p.a", 3)
        sub = await js.nc.subscribe(DIRECT["deliver_subject"])
        await js.req("direct", "CONSUMER.CREATE.P.MIRRORC",
                     {"stream_name": "P", "config": DIRECT}, timeout=T)  # fmt: skip
        got = [await sub.next_msg(timeout=T) for _ in range(3)]
        js.note("delivered", [(m.subject, m.data.decode(), m.reply.split(".")[5]) for m in got])
        await sub.unsubscribe()
        await js.req("durable", "CONSUMER.CREATE.P.D",
                     {"stream_name": "P", "config": {"durable_name": "D"}}, timeout=T)  # fmt: skip
        await js.req("names", "CONSUMER.NAMES.P", {}, timeout=T)
        await js.req("list", "CONSUMER.LIST.P", {}, timeout=T)
        await js.req("stream info", "STREAM.INFO.P", timeout=T)
        await js.req("account", "INFO", timeout=T)
        info = await js.req("direct info", "CONSUMER.INFO.P.MIRRORC", timeout=T, record=False)
        js.note("direct info", {k: info.get(k) for k in ("name", "config", "num_pending")})
        durable = {**DIRECT, "name": "", "durable_name": "X"}
        await js.req("durable direct", "CONSUMER.CREATE.P.X",
                     {"stream_name": "P", "config": durable}, timeout=T)  # fmt: skip
        pull = {k: v for k, v in DIRECT.items()
                if k not in ("deliver_subject", "flow_control", "idle_heartbeat")}  # fmt: skip
        await js.req("pull direct", "CONSUMER.CREATE.P.MIRRORC",
                     {"stream_name": "P", "config": pull}, timeout=T)  # fmt: skip
        await js.req("del", "STREAM.DELETE.P", record=False, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=60)
    answers = dict(ref)
    assert answers["names"]["consumers"] == ["D"]
    assert answers["stream info"]["state"]["consumer_count"] == 1
    assert answers["direct info"]["name"] == "MIRRORC"
    assert [seq for _s, _d, seq in answers["delivered"]] == ["1", "2", "3"]
    assert_same(ref, impl)
