"""Mirrors on one server, against nats-server: a mirror copies its origin at the origin's
sequences and times (deleted origin messages become deleted sequences), takes no publishes,
reports its ``mirror`` block in STREAM.INFO (``active`` compared as "set or not"), starts at
``opt_start_seq``, keeps only ``filter_subject``, renames through ``subject_transforms``,
waits for an origin that does not exist yet (the error in its block), refuses a mirror
update and a cycle, and becomes a stream of its own when the update leaves ``mirror`` out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import NO_RESPONDERS, JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 5.0


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


def _block(out: Any) -> Any:
    """A create/info answer with its mirror block's ``active`` as "has the feed heard from
    the origin" (nanoseconds since differ)."""
    if isinstance(out, dict) and isinstance(out.get("mirror"), dict):
        m = dict(out["mirror"])
        m["active"] = m.get("active", -1) >= 0
        out = {**out, "mirror": m}
    return out


async def _info(js: JsRecorder, label: str, stream: str, body: Any = None) -> Any:
    out = await js.req(label, f"STREAM.INFO.{stream}", body, record=False, timeout=T)
    js.note(label, _block(out))
    return out


async def _until(js: JsRecorder, stream: str, last_seq: int, wait: float = 5.0) -> None:
    """Until ``stream`` holds ``last_seq`` (the copy is asynchronous on both servers)."""
    for _ in range(int(wait / 0.05)):
        out = await js.req("poll", f"STREAM.INFO.{stream}", record=False, timeout=T)
        if isinstance(out, dict) and out.get("state", {}).get("last_seq", 0) >= last_seq:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} did not reach {last_seq}")


async def test_a_mirror_copies_its_origin(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        origin = {"name": "P", "subjects": ["p.>"], "allow_direct": True}
        await js.req("origin", "STREAM.CREATE.P", origin, timeout=T)
        for i in range(5):
            await js.pub(f"pub {i}", "p.a", f"x{i}".encode(), {"Nats-Msg-Id": f"id{i}"}, timeout=T)
        out = await js.req("mirror", "STREAM.CREATE.M", {"name": "M", "mirror": {"name": "P"}},
                           record=False, timeout=T)  # fmt: skip
        js.note("mirror", _block(out))
        await _until(js, "M", 5)
        await _info(js, "info", "M")
        for i in range(5, 9):
            await js.pub(f"pub {i}", "p.b", f"y{i}".encode(), timeout=T)
        await js.req("delete 7", "STREAM.MSG.DELETE.P", {"seq": 7, "no_erase": True}, timeout=T)
        await js.pub("pub 9", "p.b", b"z", timeout=T)
        await _until(js, "M", 10)
        await _info(js, "info after", "M", {"deleted_details": True})
        # a mirror made now finds 7 gone: its sequence is deleted there too
        await js.req("mirror 2", "STREAM.CREATE.M2", {"name": "M2", "mirror": {"name": "P"}},
                     record=False, timeout=T)  # fmt: skip
        await _until(js, "M2", 10)
        await _info(js, "info deleted", "M2", {"deleted_details": True})
        for seq in (1, 3, 8, 10):
            await js.req(f"get {seq}", "STREAM.MSG.GET.M", {"seq": seq}, timeout=T)
        await js.req("get 7", "STREAM.MSG.GET.M", {"seq": 7}, timeout=T)
        js.note("no responders", str(await js.raw_request("M", b"x", timeout=T)))
        await js.req("self", "STREAM.CREATE.X", {"name": "X", "mirror": {"name": "X"}}, timeout=T)
        await js.req("chain", "STREAM.CREATE.Y", {"name": "Y", "mirror": {"name": "M"}},
                     record=False, timeout=T)  # fmt: skip
        await js.req("cycle", "STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "Y"}}, timeout=T)
        await js.req("update", "STREAM.UPDATE.M", {"name": "M", "mirror": {"name": "Q"}},
                     timeout=T)  # fmt: skip
        await js.req(
            "subjects",
            "STREAM.UPDATE.M",
            {"name": "M", "mirror": {"name": "P"}, "subjects": ["m.>"]},
            timeout=T,
        )
        await js.req(
            "small",
            "STREAM.CREATE.S",
            {"name": "S", "mirror": {"name": "P"}, "max_msg_size": 10},
            timeout=T,
        )
        await js.req("big origin", "STREAM.UPDATE.P", {**origin, "max_msg_size": 100}, timeout=T)
        await js.req(
            "smaller",
            "STREAM.CREATE.S2",
            {"name": "S2", "mirror": {"name": "P"}, "max_msg_size": 10},
            timeout=T,
        )
        await js.req("del Y", "STREAM.DELETE.Y", timeout=T)
        cfg = (await js.req("cfg", "STREAM.INFO.M", record=False, timeout=T))["config"]
        del cfg["mirror"]
        await js.req("promote", "STREAM.UPDATE.M", cfg, timeout=T)
        await js.pub("own publish", "M", b"mine", timeout=T)
        await js.pub("origin publish", "p.c", b"after", timeout=T)
        await asyncio.sleep(0.5)
        await js.state("promoted state", "M")

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["info"]["state"]["messages"] == 5
    assert answers["info deleted"]["state"]["deleted"] == [7]
    assert answers["mirror"]["mirror"] == {"name": "P", "lag": 0, "active": False}
    assert answers["promoted state"]["last_seq"] == 11
    assert answers["no responders"] == NO_RESPONDERS
    assert_same(ref, impl)


async def test_start_filter_and_transforms(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("origin", "STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]}, timeout=T)
        for i in range(8):
            await js.pub(f"pub {i}", f"o.{i % 2}", f"m{i}".encode(), timeout=T)
        mirrors = {
            "FROM4": {"name": "O", "opt_start_seq": 4},
            "ODD": {"name": "O", "filter_subject": "o.1"},
            "RENAMED": {
                "name": "O",
                "subject_transforms": [{"src": "o.*", "dest": "r.{{wildcard(1)}}"}],
            },
        }
        for name, m in mirrors.items():
            out = await js.req(f"create {name}", f"STREAM.CREATE.{name}",
                               {"name": name, "mirror": m}, record=False, timeout=T)  # fmt: skip
            js.note(f"create {name}", _block(out))
        for name in mirrors:
            await _until(js, name, 8)
            await _info(js, f"info {name}", name, {"subjects_filter": ">"})
        await js.pub("one more", "o.1", b"last", timeout=T)
        for name in mirrors:
            await _until(js, name, 9)
            await js.req(f"last {name}", f"STREAM.MSG.GET.{name}", {"seq": 9}, timeout=T)
            await js.req(f"first {name}", f"STREAM.MSG.GET.{name}", {"seq": 2}, timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["info FROM4"]["state"]["first_seq"] == 4
    assert answers["info ODD"]["state"]["messages"] == 4
    assert set(answers["info RENAMED"]["state"]["subjects"]) == {"r.0", "r.1"}
    assert_same(ref, impl)


async def test_an_origin_made_after_its_mirror(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        cfg = {"name": "LATE", "mirror": {"name": "NEW"}}
        out = await js.req("mirror", "STREAM.CREATE.LATE", cfg, record=False, timeout=T)
        js.note("mirror", _block(out))
        await asyncio.sleep(1.0)
        await _info(js, "no origin", "LATE")
        await js.req("origin", "STREAM.CREATE.NEW", {"name": "NEW", "subjects": ["n.>"]}, timeout=T)
        await js.pub("pub", "n.a", b"hello", timeout=T)
        # nats-server asks again 2 s after the failure plus its 10 s backoff
        await _until(js, "LATE", 1, wait=20.0)
        await _info(js, "copied", "LATE")

    ref, impl = await run_scenario(js_pair, sc, timeout=90)
    answers = dict(ref)
    assert answers["no origin"]["mirror"]["error"]["err_code"] == 10059
    assert "error" not in answers["copied"]["mirror"]
    assert_same(ref, impl)


async def test_a_mirror_direct_mirror_answers_its_origins_gets(js_pair: ServerPair) -> None:
    """``mirror_direct`` (set from the origin's ``allow_direct``): once caught up, the
    mirror answers direct gets sent to its origin, beside the origin (each answer says
    which stream it comes from), and a direct get by its own name needs its own
    ``allow_direct``."""

    async def sc(js: JsRecorder) -> None:
        origin = {"name": "KV_O", "subjects": ["$KV.O.>"], "allow_direct": True}
        await js.req("origin", "STREAM.CREATE.KV_O", origin, timeout=T)
        await js.pub("put", "$KV.O.k1", b"v1", timeout=T)
        cfg = {"name": "KV_M", "mirror": {"name": "KV_O"}}
        out = await js.req("mirror", "STREAM.CREATE.KV_M", cfg, record=False, timeout=T)
        js.note("mirror_direct", out["config"]["mirror_direct"])
        await _until(js, "KV_M", 1)
        await js.pub("put 2", "$KV.O.k1", b"v2", timeout=T)
        await _until(js, "KV_M", 2)
        answered: set[str] = set()
        values: set[bytes] = set()
        for _ in range(40):
            m = await js.raw_request("$JS.API.DIRECT.GET.KV_O.$KV.O.k1", b"", timeout=T)
            answered.add((m.headers or {}).get("Nats-Stream", ""))
            values.add(m.data)
        js.note("answered by", sorted(answered))
        js.note("values", sorted(v.decode() for v in values))
        m = await js.raw_request("$JS.API.DIRECT.GET.KV_M.$KV.O.k1", b"", timeout=T)
        js.note("own name", str(m))

    ref, impl = await run_scenario(js_pair, sc, timeout=60)
    answers = dict(ref)
    assert answers["answered by"] == ["KV_M", "KV_O"]
    assert answers["values"] == ["v2"]
    assert answers["own name"] == NO_RESPONDERS
    assert_same(ref, impl)
