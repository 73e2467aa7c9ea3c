"""``jetstream { domain: HUB }``: clients reach the API through ``$JS.HUB.API.>``.

nats-server maps ``$JS.HUB.API.{INFO,STREAM.>,CONSUMER.>,DIRECT.>,...}`` to ``$JS.API...``
and ``$JS.HUB.API.$KV.>`` / ``$OBJ.>`` to ``$KV.>`` / ``$OBJ.>`` in every JetStream account.
The same nats-py code (``nc.jetstream(domain="HUB")``: stream add, publish, pull consumer
fetch, KV) runs against both servers and must see the same results, including the domain in
PubAcks and in ``$JS.API.INFO``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, ServerProcess, run_client, start_server
from .js_scenarios import NO_RESPONDERS, JsRecorder, norm
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 10.0  # per request: generous, the machine may be loaded (a timeout is a failure)


@pytest.fixture(scope="module")
def domain_pair() -> Iterator[ServerPair]:
    require_nats_server()
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-domain-"))
    started: list[ServerProcess] = []
    try:
        for kind in ("nats-server", "natsd"):
            conf = tmp / f"{kind}.conf"
            conf.write_text(f'jetstream {{ store_dir: "{tmp / kind}", domain: HUB }}\n')
            started.append(start_server(kind, config_path=conf, log_dir=tmp))
        yield ServerPair(started[0], started[1])
    finally:
        for s in started:
            s.stop()


async def _through_domain(nc: Any) -> list[tuple[str, Any]]:
    js = nc.jetstream(domain="HUB", timeout=T)
    out: list[tuple[str, Any]] = []
    info = await js.add_stream(name="D", subjects=["d.>"])
    out.append(("add stream", info.config.name))
    ack = await js.publish("d.1", b"one")
    out.append(("puback", [ack.stream, ack.seq, ack.domain]))
    psub = await js.pull_subscribe("d.>", durable="C", stream="D")
    msgs = await psub.fetch(1, timeout=T)
    out.append(("fetch", [(m.subject, m.data, m.metadata.sequence.stream) for m in msgs]))
    await msgs[0].ack_sync()
    ci = await js.consumer_info("D", "C")
    out.append(("consumer", [ci.name, ci.num_ack_pending, ci.delivered.stream_seq]))
    si = await js.stream_info("D")
    out.append(("stream", [si.state.messages, si.state.last_seq]))
    acct = await js.account_info()
    out.append(("account info domain", acct.domain))

    kv = await js.create_key_value(bucket="K", history=2)
    await kv.put("a", b"1")
    out.append(("kv get", (await kv.get("a")).value))
    # A KV put through the domain prefix, as nats.go does with a domain.
    msg = await nc.request("$JS.HUB.API.$KV.K.b", b"2", timeout=T)
    out.append(("kv put through domain", norm(json.loads(msg.data))))
    out.append(("kv get b", (await kv.get("b")).value))
    out.append(("kv keys", sorted(await kv.keys())))

    rec = JsRecorder(nc)
    await rec.req("raw info", "$JS.HUB.API.INFO", timeout=T)
    await rec.req("raw stream names", "$JS.HUB.API.STREAM.NAMES", timeout=T)
    await rec.req("unprefixed info", "$JS.API.INFO", timeout=T)
    # Only nats-server's mapped verbs exist under the prefix; another domain has nothing.
    await rec.req("unmapped verb", "$JS.HUB.API.FOO", timeout=T)
    await rec.req("other domain", "$JS.ELSEWHERE.API.INFO", timeout=T)
    await rec.req("$OBJ without stream", "$JS.HUB.API.$OBJ.x", timeout=T)
    out += rec.log
    for name in ("D", "KV_K"):
        await js.delete_stream(name)
    return out


async def test_client_with_domain(domain_pair: ServerPair) -> None:
    ref = await run_client(domain_pair.ref, _through_domain, capture_errors=False, timeout=60)
    impl = await run_client(domain_pair.impl, _through_domain, capture_errors=False, timeout=60)
    answers = dict(ref)
    assert answers["puback"] == ["D", 1, "HUB"]
    assert answers["account info domain"] == "HUB"
    assert answers["raw info"]["domain"] == "HUB"
    assert answers["unmapped verb"] == answers["other domain"] == NO_RESPONDERS
    assert answers["$OBJ without stream"] == NO_RESPONDERS
    assert_same(ref, impl)
