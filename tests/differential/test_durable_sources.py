"""Sources and mirrors fed by a durable consumer of the user's (ADR-60's ``consumer: {name,
deliver_subject}``), against nats-server: the copying stream resets that consumer instead of
making one, takes what it delivers, acknowledges it through the flow control answers (a
workqueue origin drains), reports the consumer's error when it does not acknowledge by flow
control, and gives nats-server's errors for bad consumer configs. nats.py's own
``test_stream_source_with_consumer`` (the config echoed) is the first case."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import nats
import orjson
import pytest
from components import require_nats_server

from .harness import ServerPair, ServerProcess
from .js_scenarios import js_server_pair

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def _req(nc: Any, subject: str, body: Any = None) -> Any:
    m = await nc.request(subject, orjson.dumps(body) if body is not None else b"", timeout=5)
    return orjson.loads(m.data)


def _fc_consumer(name: str, deliver: str, ack: str = "flow_control") -> dict[str, Any]:
    return {
        "durable_name": name,
        "name": name,
        "deliver_subject": deliver,
        "ack_policy": ack,
        "flow_control": True,
        "idle_heartbeat": 1_000_000_000,
    }


def _blocks(info: dict[str, Any]) -> Any:
    out = [{k: v for k, v in b.items() if k != "active"} for b in info.get("sources", [])]
    m = info.get("mirror")
    return out, ({k: v for k, v in m.items() if k != "active"} if m else None)


async def _until(nc: Any, want: dict[str, int]) -> dict[str, int]:
    got: dict[str, int] = {}
    for _ in range(100):
        got = {n: (await _req(nc, f"$JS.API.STREAM.INFO.{n}"))["state"]["messages"] for n in want}
        if got == want:
            break
        await asyncio.sleep(0.05)
    return got


async def _durable(server: ServerProcess) -> dict[str, Any]:
    nc = await nats.connect(server.url, allow_reconnect=False)
    out: dict[str, Any] = {}
    await _req(nc, "$JS.API.STREAM.CREATE.UP", {"name": "UP", "subjects": ["up.>"],
                                                "retention": "workqueue"})  # fmt: skip
    await _req(nc, "$JS.API.CONSUMER.CREATE.UP.C",
               {"stream_name": "UP", "config": _fc_consumer("C", "deliver.c")})  # fmt: skip
    for i in range(5):
        await nc.publish(f"up.{i}", b"m%d" % i)
    await nc.flush()
    made = await _req(nc, "$JS.API.STREAM.CREATE.DOWN", {
        "name": "DOWN", "sources": [{"name": "UP", "consumer": {"name": "C",
                                                                 "deliver_subject": "deliver.c"}}],
    })  # fmt: skip
    out["echoed"] = (made.get("error"), made.get("config", {}).get("sources"))
    for i in range(5, 8):
        await nc.publish(f"up.{i}", b"m%d" % i)
    await nc.flush()
    out["counts"] = await _until(nc, {"DOWN": 8, "UP": 0})
    out["DOWN blocks"] = _blocks(await _req(nc, "$JS.API.STREAM.INFO.DOWN"))
    ci = await _req(nc, "$JS.API.CONSUMER.INFO.UP.C")
    out["consumer"] = (ci["delivered"]["stream_seq"], ci["ack_floor"]["stream_seq"],
                       ci["num_ack_pending"])  # fmt: skip
    msgs = []
    for seq in range(1, 9):
        m = (await _req(nc, "$JS.API.STREAM.MSG.GET.DOWN", {"seq": seq}))["message"]
        msgs.append(m["subject"])
    out["DOWN messages"] = msgs
    # a mirror fed the same way from a limits origin
    await _req(nc, "$JS.API.STREAM.CREATE.LIM", {"name": "LIM", "subjects": ["lim.>"]})
    await _req(nc, "$JS.API.CONSUMER.CREATE.LIM.M",
               {"stream_name": "LIM", "config": _fc_consumer("M", "deliver.m")})  # fmt: skip
    for i in range(4):
        await nc.publish(f"lim.{i}", b"l%d" % i)
    await nc.flush()
    made = await _req(nc, "$JS.API.STREAM.CREATE.MIR", {
        "name": "MIR", "mirror": {"name": "LIM", "consumer": {"name": "M",
                                                              "deliver_subject": "deliver.m"}},
    })  # fmt: skip
    out["mirror made"] = made.get("error")
    out["mirror counts"] = await _until(nc, {"MIR": 4, "LIM": 4})
    out["MIR blocks"] = _blocks(await _req(nc, "$JS.API.STREAM.INFO.MIR"))
    # consumers that acknowledge otherwise are refused by the copies, which say so
    await _req(nc, "$JS.API.STREAM.CREATE.X", {"name": "X", "subjects": ["x.>"]})
    explicit = _fc_consumer("E", "deliver.e", "explicit")
    await _req(nc, "$JS.API.CONSUMER.CREATE.X.E", {"stream_name": "X", "config": explicit})
    await _req(nc, "$JS.API.STREAM.CREATE.XS", {
        "name": "XS", "sources": [{"name": "X", "consumer": {"name": "E",
                                                               "deliver_subject": "deliver.e"}}],
    })  # fmt: skip
    await _req(nc, "$JS.API.STREAM.CREATE.XM", {
        "name": "XM", "mirror": {"name": "X", "consumer": {"name": "E",
                                                            "deliver_subject": "deliver.e"}},
    })  # fmt: skip
    errs: dict[str, Any] = {}
    for _ in range(60):
        xs = await _req(nc, "$JS.API.STREAM.INFO.XS")
        xm = await _req(nc, "$JS.API.STREAM.INFO.XM")
        errs = {"XS": [b.get("error") for b in xs.get("sources", [])],
                "XM": xm.get("mirror", {}).get("error")}  # fmt: skip
        if errs["XS"] != [None] and errs["XM"] is not None:
            break
        await asyncio.sleep(0.05)
    out["refusals"] = errs
    await nc.close()
    return out


def test_a_durable_consumer_feeds_a_source_and_a_mirror(js_pair: ServerPair) -> None:
    ref = asyncio.run(_durable(js_pair.ref))
    impl = asyncio.run(_durable(js_pair.impl))
    assert ref["counts"] == {"DOWN": 8, "UP": 0}
    assert ref["refusals"]["XM"]["err_code"] == 10214
    assert impl == ref


BAD = {
    "filtered": {"filter_subject": "up.1"},
    "start sequence": {"opt_start_seq": 3},
    "wildcard deliver": {"consumer": {"name": "C", "deliver_subject": "d.*"}},
    "bad name": {"consumer": {"name": "C.x", "deliver_subject": "d"}},
}


async def _bad(server: ServerProcess) -> dict[str, Any]:
    nc = await nats.connect(server.url, allow_reconnect=False)
    out: dict[str, Any] = {}
    await _req(nc, "$JS.API.STREAM.CREATE.BU", {"name": "BU", "subjects": ["bu.>"]})
    for label, extra in BAD.items():
        src = {"name": "BU", "consumer": {"name": "C", "deliver_subject": "d"}, **extra}
        for kind in ("sources", "mirror"):
            cfg: dict[str, Any] = {"name": "BAD"}
            cfg[kind] = [src] if kind == "sources" else src
            r = await _req(nc, "$JS.API.STREAM.CREATE.BAD", cfg)
            out[f"{label} {kind}"] = r.get("error")
            await _req(nc, "$JS.API.STREAM.DELETE.BAD")
    dup = {"name": "BAD", "sources": [
        {"name": "BU", "consumer": {"name": "C", "deliver_subject": "d1"}, "subject_transforms":
         [{"src": "bu.1", "dest": "a.1"}]},
        {"name": "BU", "consumer": {"name": "C", "deliver_subject": "d2"}, "subject_transforms":
         [{"src": "bu.2", "dest": "a.2"}]},
    ]}  # fmt: skip
    out["same consumer twice"] = (await _req(nc, "$JS.API.STREAM.CREATE.BAD", dup)).get("error")
    await nc.close()
    return out


def test_bad_durable_consumer_configs(js_pair: ServerPair) -> None:
    ref = asyncio.run(_bad(js_pair.ref))
    impl = asyncio.run(_bad(js_pair.impl))
    assert ref["filtered sources"]["err_code"] == 10215
    assert impl == ref


async def _upgraded(server: ServerProcess) -> dict[str, Any]:
    """A mirror and a sourcing stream of a workqueue origin, and a source of a limits one:
    the workqueue origin makes each copy's consumer a durable flow-control one under the
    copy's stable name (its config and metadata compared), the limits origin an ephemeral
    one; the workqueue drains as the copies acknowledge."""
    nc = await nats.connect(server.url, allow_reconnect=False)
    out: dict[str, Any] = {}
    await _req(nc, "$JS.API.STREAM.CREATE.WQ", {"name": "WQ", "subjects": ["wq.>"],
                                                "retention": "workqueue"})  # fmt: skip
    await _req(nc, "$JS.API.STREAM.CREATE.LM", {"name": "LM", "subjects": ["lm.>"]})
    for i in range(5):
        await nc.publish(f"wq.{i}", b"w%d" % i)
        await nc.publish(f"lm.{i}", b"l%d" % i)
    await nc.flush()
    await _req(nc, "$JS.API.STREAM.CREATE.CS", {"name": "CS", "sources": [
        {"name": "WQ"}, {"name": "LM", "filter_subject": "lm.1"}]})  # fmt: skip
    await _req(nc, "$JS.API.STREAM.CREATE.CM", {"name": "CM", "mirror": {"name": "WQ"}})
    out["counts"] = await _until(nc, {"CS": 6, "CM": 5, "WQ": 0})
    for stream in ("WQ", "LM"):
        listed = (await _req(nc, f"$JS.API.CONSUMER.LIST.{stream}")).get("consumers") or []
        keys = ("durable_name", "ack_policy", "max_deliver", "sourcing", "direct",
                "deliver_policy", "max_ack_pending", "metadata", "flow_control")  # fmt: skip
        out[f"{stream} consumers"] = sorted(
            (c["name"], {k: c["config"].get(k) for k in keys}) for c in listed
        )
    # a mirror promoted and a sourcing stream deleted take their origin consumers along
    info = await _req(nc, "$JS.API.STREAM.INFO.CM")
    promoted = {k: v for k, v in info["config"].items() if k != "mirror"}
    out["promoted"] = (await _req(nc, "$JS.API.STREAM.UPDATE.CM", promoted)).get("error")
    await _req(nc, "$JS.API.STREAM.DELETE.CS")
    names: Any = None
    for _ in range(50):
        names = (await _req(nc, "$JS.API.CONSUMER.NAMES.WQ")).get("consumers")
        if not names:
            break
        await asyncio.sleep(0.05)
    out["left on WQ"] = names
    await nc.close()
    return out


def test_a_workqueue_origin_keeps_durable_consumers_for_its_copies(js_pair: ServerPair) -> None:
    ref = asyncio.run(_upgraded(js_pair.ref))
    impl = asyncio.run(_upgraded(js_pair.impl))
    assert ref["counts"] == {"CS": 6, "CM": 5, "WQ": 0}
    assert next(n for n, _ in ref["WQ consumers"]).startswith("JS_MIRROR_")
    assert not ref["left on WQ"]
    assert impl == ref
