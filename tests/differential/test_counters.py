"""Message counters (ADR-49: ``allow_msg_counter``, ``Nats-Incr``), nats-server 2.15.1
against natsd: the stream config rules, every publish's PubAck (values, errors in
nats-server's order, duplicates), what is stored (headers kept, ``{"val":...}``,
``Nats-Counter-Sources`` carried over), reads by direct get and MSG.GET, and the value after
a delete and a purge. Raw header blocks (a key in another case, two ``Nats-Incr``, no space
after the colon) go out as they are written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, write_config
from .js_scenarios import JsRecorder, js_server_pair, norm, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

T = 10.0


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair(("-c", str(write_config("max_payload: 2048\n")))) as pair:
        yield pair


async def raw_pub(js: JsRecorder, label: str, subject: str, block: bytes, data: bytes = b"") -> Any:
    """An HPUB with the header block exactly as given; records the PubAck."""
    nc = js.nc
    inbox = nc.new_inbox()
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def on(m: Any) -> None:
        if not fut.done():
            fut.set_result(m)

    sub = await nc.subscribe(inbox, cb=on)
    await nc.flush()
    frame = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
        subject.encode(), inbox.encode(), len(block), len(block) + len(data), block, data,
    )  # fmt: skip
    await nc._send_command(frame)
    await nc._flush_pending()
    try:
        m = await asyncio.wait_for(fut, T)
        out = norm(m.data.decode())
    except TimeoutError:
        out = "<timeout>"
    await sub.unsubscribe()
    js.log.append((label, out))
    return out


def incr(v: str, **more: str) -> dict[str, str]:
    return {"Nats-Incr": v, **more}


async def test_counter_stream_config(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        base = {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True}
        await js.req("create", "STREAM.CREATE.C", base, timeout=T)
        for label, more in (
            ("discard new", {"discard": "new"}),
            (
                "discard new per subject",
                {"discard": "new", "discard_new_per_subject": True, "max_msgs_per_subject": 1},
            ),
            ("ttl", {"allow_msg_ttl": True}),
            ("ttl and discard new", {"allow_msg_ttl": True, "discard": "new"}),
            ("schedules", {"allow_msg_schedules": True}),
            ("interest", {"retention": "interest"}),
            ("workqueue", {"retention": "workqueue"}),
            ("mirror", {"mirror": {"name": "C"}, "subjects": []}),
        ):
            await js.req(label, "STREAM.CREATE.X", {**base, "name": "X", **more}, timeout=T)
        await js.req("counter off", "STREAM.UPDATE.C", {**base, "allow_msg_counter": False},
                     timeout=T)  # fmt: skip
        plain = {k: v for k, v in base.items() if k != "allow_msg_counter"}
        await js.req("counter left out", "STREAM.UPDATE.C", plain, timeout=T)
        await js.req("update ok", "STREAM.UPDATE.C", {**base, "max_msgs_per_subject": 5},
                     timeout=T)  # fmt: skip
        await js.req("plain", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, timeout=T)
        await js.req("counter on", "STREAM.UPDATE.P",
                     {"name": "P", "subjects": ["p.>"], "allow_msg_counter": True},
                     timeout=T)  # fmt: skip
        await js.req("memory, direct, rollup allowed", "STREAM.CREATE.M",
                     {**base, "name": "M", "subjects": ["m.>"], "storage": "memory",
                      "allow_direct": True, "allow_rollup_hdrs": True, "max_msg_size": 37,
                      "max_msgs_per_subject": 1}, timeout=T)  # fmt: skip
        await js.req("info", "STREAM.INFO.C", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    assert ref[0][1]["config"]["metadata"]["_nats.req.level"] == "2"
    assert "error" in ref[1][1] and "error" in ref[8][1]
    assert_same(ref, impl)


async def test_counter_publishes(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.C",
                     {"name": "C", "subjects": ["c.>"], "allow_msg_counter": True,
                      "allow_direct": True}, timeout=T)  # fmt: skip
        await js.req("plain", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, timeout=T)
        for v in ("1", "2", "-3", "+5", "0", "007", "-0", "18446744073709551616",
                  "-36893488147419103232", "9" * 100):  # fmt: skip
            await js.pub(f"incr {v[:12]}", "c.a", b"", incr(v), timeout=T)
        for v in ("abc", "1.5", "1e3", "0x10", "1_000", "--1", "+-1", "+", "-", "1 2"):
            await js.pub(f"invalid {v}", "c.a", b"", incr(v), timeout=T)
        await js.pub("missing: no headers", "c.a", b"x", None, timeout=T)
        await js.pub("missing: other headers", "c.a", b"", {"Foo": "bar"}, timeout=T)
        await js.pub("missing: empty", "c.a", b"", incr(""), timeout=T)
        await js.pub("payload", "c.a", b"data", incr("1"), timeout=T)
        for k in ("Nats-Rollup", "Nats-Expected-Stream", "Nats-Expected-Last-Msg-Id",
                  "Nats-Expected-Last-Subject-Sequence-Subject", "Nats-Expected-Last-Sequence",
                  "Nats-Expected-Last-Subject-Sequence"):  # fmt: skip
            await js.pub(f"with {k}", "c.a", b"", incr("1", **{k: "C"}), timeout=T)
            await js.pub(f"with empty {k}", "c.b", b"", incr("1", **{k: ""}), timeout=T)
        await js.pub("expected seq alone", "c.a", b"", {"Nats-Expected-Last-Sequence": "2"},
                     timeout=T)  # fmt: skip
        await js.pub("rollup alone", "c.a", b"", {"Nats-Rollup": "sub"}, timeout=T)
        await js.pub("expected stream alone", "c.a", b"", {"Nats-Expected-Stream": "C"},
                     timeout=T)  # fmt: skip
        await js.pub("ttl", "c.a", b"", incr("1", **{"Nats-TTL": "5s"}), timeout=T)
        await js.pub("schedule", "c.a", b"", incr("1", **{"Nats-Schedule": "@every 1s"}),
                     timeout=T)  # fmt: skip
        await js.pub("stream source", "c.a", b"", incr("1", **{"Nats-Stream-Source": "O"}),
                     timeout=T)  # fmt: skip
        # dedup: the duplicate's ack has no val, and its increment is not applied
        await js.pub("msg id", "c.d", b"", incr("1", **{"Nats-Msg-Id": "m1"}), timeout=T)
        await js.pub("duplicate", "c.d", b"", incr("50", **{"Nats-Msg-Id": "m1"}), timeout=T)
        await js.pub("duplicate without incr", "c.d", b"", {"Nats-Msg-Id": "m1"}, timeout=T)
        await js.pub("duplicate bad incr", "c.d", b"", incr("x", **{"Nats-Msg-Id": "m1"}),
                     timeout=T)  # fmt: skip
        await js.pub("duplicate payload", "c.d", b"p", incr("1", **{"Nats-Msg-Id": "m1"}),
                     timeout=T)  # fmt: skip
        # on a stream without counters
        await js.pub("disabled", "p.a", b"", incr("1"), timeout=T)
        await js.pub("disabled with payload", "p.a", b"x", incr("1"), timeout=T)
        await js.pub("disabled invalid", "p.a", b"", incr("bogus"), timeout=T)
        await js.pub("disabled empty", "p.a", b"data", incr(""), timeout=T)
        # raw header blocks
        for label, block in (
            ("lower case key", b"NATS/1.0\r\nnats-incr: 1\r\n\r\n"),
            ("upper case key", b"NATS/1.0\r\nNATS-INCR: 1\r\n\r\n"),
            ("two increments", b"NATS/1.0\r\nNats-Incr: 1\r\nNats-Incr: 100\r\n\r\n"),
            ("no space", b"NATS/1.0\r\nNats-Incr:3\r\n\r\n"),
            ("spaces", b"NATS/1.0\r\nNats-Incr:    4\r\n\r\n"),
            ("trailing space", b"NATS/1.0\r\nNats-Incr: 7 \r\n\r\n"),
            ("tab", b"NATS/1.0\r\nNats-Incr: \t5\r\n\r\n"),
            ("other headers kept", b"NATS/1.0\r\nNats-Incr: 10\r\nFoo: bar\r\n\r\n"),
        ):
            await raw_pub(js, label, "c.r", block)
        await js.direct("last of c.r", "C.c.r", timeout=T)
        await js.req("msg get c.a", "STREAM.MSG.GET.C", {"last_by_subj": "c.a"}, timeout=T)
        await js.direct("last of c.b", "C", {"last_by_subj": "c.b"}, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=150)
    acks = dict(ref)
    assert acks["incr 1"] == {"stream": "C", "seq": 1, "val": "1"}
    assert acks["duplicate"] == {"stream": "C", "seq": acks["msg id"]["seq"], "duplicate": True}
    assert acks["payload"]["error"]["err_code"] == 10170
    assert_same(ref, impl)


async def test_counter_sources_header_delete_and_purge(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.C",
                     {"name": "C", "subjects": ["c.>", "in.>"], "allow_msg_counter": True,
                      "allow_direct": True, "subject_transform": {"src": "in.>", "dest": "c.>"},
                      "max_msg_size": 299}, timeout=T)  # fmt: skip
        src = {"Nats-Counter-Sources": '{"O1":{"x":"5"}}'}
        await js.pub("sources given", "c.s", b"", incr("1", **src), timeout=T)
        await js.pub("sources carried", "c.s", b"", incr("1"), timeout=T)
        await js.pub("sources replaced", "c.s", b"",
                     incr("1", **{"Nats-Counter-Sources": '{"Z":{"z":"9"}}'}),
                     timeout=T)  # fmt: skip
        await js.direct("last of c.s", "C.c.s", timeout=T)
        await js.pub("bad sources", "c.t", b"", incr("1", **{"Nats-Counter-Sources": "no"}),
                     timeout=T)  # fmt: skip
        await js.pub("broken by them", "c.t", b"", incr("1"), timeout=T)
        await js.pub("transformed", "in.a", b"", incr("4"), timeout=T)
        await js.pub("transformed again", "in.a", b"", incr("4"), timeout=T)
        for v in ("10", "10", "10"):
            await js.pub(f"to delete {v}", "c.d", b"", incr(v), timeout=T)
        last = await js.req("last", "STREAM.MSG.GET.C", {"last_by_subj": "c.d"}, timeout=T)
        seq = last["message"]["seq"] if isinstance(last, dict) and "message" in last else 0
        await js.req("delete last", "STREAM.MSG.DELETE.C", {"seq": seq}, timeout=T)
        await js.pub("after delete", "c.d", b"", incr("1"), timeout=T)
        await js.req("purge subject", "STREAM.PURGE.C", {"filter": "c.d"}, timeout=T)
        await js.pub("after purge", "c.d", b"", incr("1"), timeout=T)
        await js.pub("before keep", "c.d", b"", incr("4"), timeout=T)
        await js.req("purge keep 1", "STREAM.PURGE.C", {"filter": "c.d", "keep": 1}, timeout=T)
        await js.pub("after keep", "c.d", b"", incr("1"), timeout=T)
        await js.req("purge all", "STREAM.PURGE.C", timeout=T)
        await js.pub("after purge all", "c.s", b"", incr("3"), timeout=T)
        await js.pub("too big for max_msg_size", "c.big", b"", incr("1" * 150), timeout=T)
        # 299 bytes exactly (the limit), then one digit more
        await js.pub("fits max_msg_size", "c.big2", b"", incr("9" * 132), timeout=T)
        await js.pub("grown past max_msg_size", "c.big2", b"", incr("9" * 132), timeout=T)
        await js.req("plain big", "STREAM.CREATE.B",
                     {"name": "B", "subjects": ["b.>"], "allow_msg_counter": True},
                     timeout=T)  # fmt: skip
        await js.pub("under max_payload", "b.a", b"", incr("1" * 990), timeout=T)
        await js.pub("over max_payload", "b.a", b"", incr("1" * 1010), timeout=T)
        await js.req("state", "STREAM.INFO.C", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=150)
    acks = dict(ref)
    assert acks["broken by them"]["error"]["err_code"] == 10172
    assert acks["after purge"]["val"] == "1"
    assert acks["transformed again"]["val"] == "8"
    assert "val" in acks["fits max_msg_size"] and "val" in acks["under max_payload"]
    assert acks["grown past max_msg_size"]["error"]["err_code"] == 10054
    assert acks["over max_payload"]["error"]["err_code"] == 10054
    assert_same(ref, impl)
