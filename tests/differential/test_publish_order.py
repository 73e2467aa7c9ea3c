"""The order of a JetStream publish's checks, compared with nats-server.

nats-server checks a publish against the stream's ``max_msg_size`` first, then the publish
headers, then the duplicate window, then ``Nats-Expected-Last-Msg-Id`` and ``Nats-Rollup``
(case-insensitive), then limits and an invalid ``Nats-TTL``. The order is visible to
clients: a retried publish whose
first copy was stored must be answered as a duplicate even though its
``Nats-Expected-Last-Msg-Id`` no longer holds (the first copy changed the last id), or an
exactly-once publisher sees an error for a message that is safely stored. A ``no_ack``
stream answers nothing at all, errors included.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import TIMEOUT, JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 10.0  # per request: generous, the machine may be loaded (a timeout is a failure)
SILENT = 0.5  # how long an answer nats-server never sends is waited for


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def _order(js: JsRecorder) -> None:
    cfg = {"name": "O", "subjects": ["o.>"], "max_msg_size": 64, "allow_rollup_hdrs": True}
    await js.req("create", "STREAM.CREATE.O", cfg, timeout=T)
    await js.pub("m1", "o.a", "x", {"Nats-Msg-Id": "m1"}, timeout=T)
    await js.pub(
        "m2 after m1",
        "o.a",
        "x",
        {"Nats-Msg-Id": "m2", "Nats-Expected-Last-Msg-Id": "m1"},
        timeout=T,
    )
    # The retry: its expected last id (m1) no longer holds, but it is a duplicate first.
    await js.pub(
        "m2 retried",
        "o.a",
        "x",
        {"Nats-Msg-Id": "m2", "Nats-Expected-Last-Msg-Id": "m1"},
        timeout=T,
    )
    await js.pub(
        "wrong last id, new msg",
        "o.a",
        "x",
        {"Nats-Msg-Id": "m3", "Nats-Expected-Last-Msg-Id": "m1"},
        timeout=T,
    )
    big = "y" * 100
    await js.pub("too big, wrong stream", "o.a", big, {"Nats-Expected-Stream": "X"}, timeout=T)
    await js.pub("too big, duplicate", "o.a", big, {"Nats-Msg-Id": "m1"}, timeout=T)
    await js.pub("too big, bad rollup", "o.a", big, {"Nats-Rollup": "bogus"}, timeout=T)
    await js.pub("too big, bad ttl", "o.a", big, {"Nats-TTL": "bogus"}, timeout=T)
    await js.pub("rollup in capitals", "o.a", "x", {"Nats-Rollup": "SUB"}, timeout=T)
    await js.pub("rollup sub", "o.a", "x", {"Nats-Rollup": "sub"}, timeout=T)
    await js.req("info", "STREAM.INFO.O", timeout=T)

    await js.req(
        "create no_ack",
        "STREAM.CREATE.N",
        {"name": "N", "subjects": ["n"], "no_ack": True},
        timeout=T,
    )
    for label, headers in [
        ("no_ack ok", {"Nats-Msg-Id": "a"}),
        ("no_ack duplicate", {"Nats-Msg-Id": "a"}),
        ("no_ack wrong stream", {"Nats-Expected-Stream": "X"}),
        ("no_ack incr", {"Nats-Incr": "1"}),
    ]:
        await js.pub(label, "n", "x", headers, timeout=SILENT, expect_silence=True)
    await js.req("info no_ack", "STREAM.INFO.N", timeout=T)


async def test_publish_check_order(js_pair: ServerPair) -> None:
    ref, impl = await run_scenario(js_pair, _order, timeout=60)
    answers = dict(ref)
    # The reference really answers this way (no vacuous pass).
    assert answers["m2 retried"] == {"stream": "O", "seq": 2, "duplicate": True}
    assert answers["wrong last id, new msg"]["error"]["err_code"] == 10070
    for label in ("wrong stream", "duplicate", "bad rollup", "bad ttl"):
        assert answers[f"too big, {label}"]["error"]["err_code"] == 10054, label
    assert answers["rollup in capitals"] == {"stream": "O", "seq": 3}
    for label in ("no_ack ok", "no_ack duplicate", "no_ack wrong stream", "no_ack incr"):
        assert answers[label] == TIMEOUT, label
    assert answers["info no_ack"]["state"]["messages"] == 1
    assert_same(ref, impl)
