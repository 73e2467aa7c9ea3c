"""Sources on one server, against nats-server: a stream fed by two origins (one filtered,
one through transforms) stores each origin message once, as a message of its own with the
``Nats-Stream-Source`` header (its sixth field, the origin's identity, a hash of its
creation time, compared as "there"), reports its ``sources`` blocks (sorted by name;
``active`` as "set or not"), applies its own duplicate window, adds and drops sources on
update, waits for an origin that does not exist yet, and gives nats-server's errors for
bad source configs and for a client's Nats-Stream-Source header."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 5.0


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def _blocks(out: Any) -> Any:
    """A create/info answer with its sources sorted by name (nats-server's order is its
    map's) and ``active`` as "has the feed heard from the origin"."""
    if isinstance(out, dict) and isinstance(out.get("sources"), list):
        blocks = []
        for s in out["sources"]:
            s = dict(s)
            s["active"] = s.get("active", -1) >= 0
            blocks.append(s)
        out = {**out, "sources": sorted(blocks, key=lambda b: (b["name"], str(b)))}
    return out


def _shown(out: Any) -> Any:
    return _blocks(out)


async def _info(js: JsRecorder, label: str, stream: str) -> Any:
    out = await js.req(label, f"STREAM.INFO.{stream}", record=False, timeout=T)
    js.note(label, _shown(out))
    return out


async def _until(js: JsRecorder, stream: str, msgs: int, wait: float = 5.0) -> None:
    for _ in range(int(wait / 0.05)):
        out = await js.req("poll", f"STREAM.INFO.{stream}", record=False, timeout=T)
        if isinstance(out, dict) and out.get("state", {}).get("messages", 0) >= msgs:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} did not reach {msgs} messages")


async def _active(js: JsRecorder, stream: str, wait: float = 5.0) -> None:
    """Until every source of ``stream`` has its consumer."""
    for _ in range(int(wait / 0.05)):
        out = await js.req("poll", f"STREAM.INFO.{stream}", record=False, timeout=T)
        blocks = out.get("sources", []) if isinstance(out, dict) else []
        if blocks and all(b.get("active", -1) >= 0 for b in blocks):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the sources of {stream} did not start")


async def _messages(js: JsRecorder, label: str, stream: str, last: int) -> None:
    """Each message of ``stream``: subject, data and headers (Nats-Stream-Source's origin
    identity, which depends on when the origin was made, as "<identity>")."""
    out = []
    for seq in range(1, last + 1):
        got = await js.req("get", f"STREAM.MSG.GET.{stream}", {"seq": seq}, record=False,
                           timeout=T)  # fmt: skip
        m = got.get("message") if isinstance(got, dict) else None
        if not isinstance(m, dict):
            out.append(got)
            continue
        hdrs = []
        raw = base64.b64decode(m.get("hdrs", "")).decode() if m.get("hdrs") else ""
        for line in raw.split("\r\n")[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            v = v.strip()
            if k == "Nats-Stream-Source":
                fields = v.split(" ")
                if len(fields) == 6 and len(fields[5]) == 8:
                    fields[5] = "<identity>"
                v = " ".join(fields)
            hdrs.append((k, v))
        data = base64.b64decode(m.get("data", "")).decode()
        out.append({"seq": m["seq"], "subject": m["subject"], "data": data, "hdrs": hdrs})
    js.note(label, out)


async def test_two_origins_fan_in(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("A", "STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]}, timeout=T)
        b = {"name": "B", "subjects": ["b.>"], "allow_msg_ttl": True}
        await js.req("B", "STREAM.CREATE.B", b, timeout=T)
        cfg = {
            "name": "S",
            "duplicate_window": 60_000_000_000,
            "sources": [
                {"name": "A", "filter_subject": "a.keep.>"},
                {"name": "B", "subject_transforms": [{"src": "b.*", "dest": "s.{{wildcard(1)}}"}]},
            ],
        }
        out = await js.req("create", "STREAM.CREATE.S", cfg, record=False, timeout=T)
        js.note("create", _shown(out))
        await _active(js, "S")
        await js.pub("a1", "a.keep.1", b"one", {"Nats-Msg-Id": "m1", "X-App": "v"}, timeout=T)
        await js.pub("a2", "a.drop", b"dropped", timeout=T)
        await js.pub("a3", "a.keep.2", b"two", {"Nats-Expected-Last-Sequence": "2"}, timeout=T)
        await _until(js, "S", 2)
        await js.pub("b1", "b.x", b"three", {"Nats-Msg-Id": "m1"}, timeout=T)  # a duplicate
        await js.pub("b2", "b.y", b"four", {"Nats-TTL": "1h"}, timeout=T)
        await _until(js, "S", 3)
        await asyncio.sleep(0.3)
        await _info(js, "info", "S")
        await _messages(js, "messages", "S", 3)
        await js.req("purge A", "STREAM.PURGE.A", timeout=T)
        await js.pub("a4", "a.keep.3", b"five", timeout=T)
        await _until(js, "S", 4)
        await _messages(js, "after purge", "S", 4)
        # a copy of a copy names only the stream it came from
        chain = {"name": "C", "sources": [{"name": "S"}]}
        await js.req("chain", "STREAM.CREATE.C", chain, record=False, timeout=T)
        await _until(js, "C", 4)
        await _messages(js, "chained", "C", 4)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert [m["subject"] for m in answers["messages"]] == ["a.keep.1", "a.keep.2", "s.y"]
    assert answers["messages"][0]["hdrs"][-1] == (
        "Nats-Stream-Source", "A 1 a.keep.> > a.keep.1 <identity>"
    )
    assert_same(ref, impl)


async def test_update_and_errors(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        a = {"name": "A", "subjects": ["a.>"], "max_msg_size": 100}
        await js.req("A", "STREAM.CREATE.A", a, timeout=T)
        await js.req("B", "STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"]}, timeout=T)
        await js.pub("a1", "a.x", b"1", timeout=T)
        await js.pub("b1", "b.x", b"1", timeout=T)
        cfg = {"name": "S", "subjects": ["s.>"], "sources": [{"name": "A"}]}
        out = await js.req("create", "STREAM.CREATE.S", cfg, record=False, timeout=T)
        js.note("create", _shown(out))
        await _until(js, "S", 1)
        out = await js.req("to B", "STREAM.UPDATE.S", {**cfg, "sources": [{"name": "B"}]},
                           record=False, timeout=T)  # fmt: skip
        js.note("to B", _shown(out))
        await _until(js, "S", 2)
        await js.pub("a2", "a.x", b"2", timeout=T)
        await js.pub("own", "s.x", b"mine", timeout=T)
        await asyncio.sleep(0.3)
        await _messages(js, "messages", "S", 3)
        out = await js.req("none", "STREAM.UPDATE.S", {**cfg, "sources": []}, record=False,
                           timeout=T)  # fmt: skip
        js.note("none", _shown(out))
        bad = {
            "small": {"name": "X", "max_msg_size": 10, "sources": [{"name": "A"}]},
            "self": {"name": "X", "sources": [{"name": "X"}]},
            "dup": {"name": "X", "sources": [{"name": "A"}, {"name": "A"}]},
            "bad name": {"name": "X", "sources": [{"name": "a.b"}]},
            "filter and transforms": {"name": "X", "sources": [{
                "name": "A", "filter_subject": "a.x",
                "subject_transforms": [{"src": "a.>", "dest": "x.>"}]}]},
            "overlap": {"name": "X", "sources": [{"name": "A", "subject_transforms": [
                {"src": ">", "dest": ">"}, {"src": "a.>", "dest": "x.>"}]}]},
            "schedules": {"name": "X", "allow_msg_schedules": True, "sources": [{"name": "A"}]},
        }  # fmt: skip
        for label, body in bad.items():
            await js.req(label, "STREAM.CREATE.X", body, timeout=T)
        await js.req("Y", "STREAM.CREATE.Y", {"name": "Y", "sources": [{"name": "A"}]},
                     record=False, timeout=T)  # fmt: skip
        await js.req("cycle", "STREAM.UPDATE.A", {**a, "sources": [{"name": "Y"}]}, timeout=T)
        await js.pub("header", "a.x", b"x", {"Nats-Stream-Source": "A 1 > > a.x"}, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["small"]["error"]["err_code"] == 10046
    assert answers["cycle"]["error"]["description"] == "detected cycle"
    assert_same(ref, impl)


async def test_an_origin_made_after_its_source(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        cfg = {"name": "LATE", "sources": [{"name": "NEW"}]}
        out = await js.req("source", "STREAM.CREATE.LATE", cfg, record=False, timeout=T)
        js.note("source", _shown(out))
        await asyncio.sleep(1.0)
        await _info(js, "no origin", "LATE")
        await js.req("origin", "STREAM.CREATE.NEW", {"name": "NEW", "subjects": ["n.>"]}, timeout=T)
        await js.pub("pub", "n.a", b"hello", timeout=T)
        await _until(js, "LATE", 1, wait=20.0)
        await _info(js, "copied", "LATE")

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["no origin"]["sources"][0]["error"]["err_code"] == 10059
    assert "error" not in answers["copied"]["sources"][0]
    assert_same(ref, impl)


async def test_counters_aggregate_through_sources(js_pair: ServerPair) -> None:
    """A counter stream sourcing two counter streams adds what each origin subject's value
    moved by (Nats-Counter-Sources keeps the values last seen), its own increments beside."""

    async def sc(js: JsRecorder) -> None:
        for name in ("C1", "C2"):
            cfg = {"name": name, "subjects": [f"{name.lower()}.>"], "allow_msg_counter": True}
            await js.req(name, f"STREAM.CREATE.{name}", cfg, timeout=T)
        agg = {
            "name": "AGG", "subjects": ["agg.>"], "allow_msg_counter": True,
            "sources": [
                {"name": "C1", "subject_transforms": [{"src": "c1.>", "dest": "agg.>"}]},
                {"name": "C2", "subject_transforms": [{"src": "c2.>", "dest": "agg.>"}]},
            ],
        }  # fmt: skip
        out = await js.req("AGG", "STREAM.CREATE.AGG", agg, record=False, timeout=T)
        js.note("AGG", _shown(out))
        await _active(js, "AGG")
        n = 0
        for subject, by in (("c1.x", 5), ("c2.x", 7), ("c1.x", -2), ("c1.y", 1), ("c2.x", 10)):
            await js.pub(f"incr {subject} {by}", subject, b"", {"Nats-Incr": str(by)}, timeout=T)
            n += 1
            await _until(js, "AGG", n)
        await js.pub("own", "agg.x", b"", {"Nats-Incr": "100"}, timeout=T)
        await _messages(js, "aggregated", "AGG", n + 1)
        await js.req("last x", "STREAM.MSG.GET.AGG", {"last_by_subj": "agg.x"}, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["own"]["val"] == "120"  # 5 + 7 - 2 + 10, then its own 100
    assert_same(ref, impl)


async def test_an_origin_deleted_and_made_again(js_pair: ServerPair) -> None:
    """The origin's identity changes with it: the source's next consumer request names the
    old one, is refused, and the source copies the new origin from its start."""

    async def sc(js: JsRecorder) -> None:
        a = {"name": "A", "subjects": ["a.>"]}
        await js.req("A", "STREAM.CREATE.A", a, timeout=T)
        out = await js.req("S", "STREAM.CREATE.S", {"name": "S", "sources": [{"name": "A"}]},
                           record=False, timeout=T)  # fmt: skip
        js.note("S", _shown(out))
        await _active(js, "S")
        for i in range(2):
            await js.pub(f"old {i}", "a.old", f"o{i}".encode(), timeout=T)
        await _until(js, "S", 2)
        await js.req("delete A", "STREAM.DELETE.A", timeout=T)
        await js.req("A again", "STREAM.CREATE.A", a, timeout=T)
        for i in range(3):
            await js.pub(f"new {i}", "a.new", f"n{i}".encode(), timeout=T)
        await _until(js, "S", 5, wait=40.0)
        await _messages(js, "copied", "S", 5)
        await _info(js, "info", "S")

    ref, impl = await run_scenario(js_pair, sc, timeout=110)
    answers = dict(ref)
    assert [m["data"] for m in answers["copied"]] == ["o0", "o1", "n0", "n1", "n2"]
    assert_same(ref, impl)
