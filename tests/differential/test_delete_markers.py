"""Differential tests of subject delete markers (nats-server vs natsd).

A stream with ``subject_delete_marker_ttl`` gets a marker message on a subject whose last
message was removed by ``max_age`` or by its own ``Nats-TTL``: no payload, headers
``Nats-Marker-Reason: MaxAge``, ``Nats-TTL: <marker ttl>``, ``Nats-Rollup: sub``. The
marker expires by its TTL and leaves nothing behind; API deletes, purges and max_msgs leave
no marker. Expiry runs on timers in both servers, so the scenarios wait for a state (polling)
instead of sleeping a fixed time, and record snapshots only at points where both servers
must agree. Each test waits for real expiry (about 2-3 s).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, run_client_both
from .js_scenarios import JsRecorder, js_server_pair, reset, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.slow, pytest.mark.timeout(60)]

SECOND = 1_000_000_000
WAIT = 8.0  # upper bound for one expiry step under load


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def _state(js: JsRecorder, stream: str) -> dict[str, Any]:
    info = await js.req("state", f"STREAM.INFO.{stream}", record=False)
    st: dict[str, Any] = info["state"]
    return st


async def _msg(js: JsRecorder, stream: str, seq: int) -> Any:
    """A stored message as (subject, seq, headers, payload), or the error code."""
    r = await js.req("get", f"STREAM.MSG.GET.{stream}", {"seq": seq}, record=False)
    if "message" not in r:
        return r.get("error", {}).get("err_code")
    m = r["message"]
    return [
        m["subject"],
        m["seq"],
        base64.b64decode(m.get("hdrs", "")).decode(),
        base64.b64decode(m.get("data", "")).decode(),
    ]


async def _snapshot(js: JsRecorder, label: str, stream: str) -> None:
    st = await _state(js, stream)
    msgs = [await _msg(js, stream, s) for s in range(st["first_seq"], st["last_seq"] + 1)]
    js.note(
        label,
        {
            "messages": st["messages"],
            "first_seq": st["first_seq"],
            "last_seq": st["last_seq"],
            "num_subjects": st.get("num_subjects", 0),
            "stored": [m for m in msgs if isinstance(m, list)],
        },
    )


async def _wait(
    js: JsRecorder, label: str, stream: str, cond: Callable[[dict[str, Any]], bool]
) -> None:
    """Poll the stream state until ``cond`` holds; records whether it did."""
    deadline = time.monotonic() + WAIT
    ok = False
    while time.monotonic() < deadline:
        if cond(await _state(js, stream)):
            ok = True
            break
        await asyncio.sleep(0.05)
    js.note(label, ok)


def _cfg(name: str, storage: str, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": name,
        "subjects": [f"{name.lower()}.>"],
        "storage": storage,
        "allow_msg_ttl": True,
        "allow_rollup_hdrs": True,
        "subject_delete_marker_ttl": SECOND,
    }
    cfg.update(extra)
    return cfg


STORES = [("F", "file"), ("M", "memory")]


async def test_markers_after_max_age(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        for suffix, storage in STORES:
            name = "A" + suffix
            p = name.lower()
            await js.req("create", f"STREAM.CREATE.{name}", _cfg(name, storage, max_age=SECOND))
            await js.pub("a1", f"{p}.a", "1")
            await js.pub("a2", f"{p}.a", "2")
            await js.pub("b", f"{p}.b", "3", {"X-Hdr": "v"})
            await js.pub("c deleted by the API", f"{p}.c", "4")
            await js.pub("d purged", f"{p}.d", "5")
            await js.pub("e never expires", f"{p}.e", "6", {"Nats-TTL": "never"})
            await js.req("delete c", f"STREAM.MSG.DELETE.{name}", {"seq": 4})
            await js.req("purge d", f"STREAM.PURGE.{name}", {"filter": f"{p}.d"})
            await _snapshot(js, f"{storage} before expiry", name)
        for suffix, storage in STORES:
            name = "A" + suffix
            # Messages 1-3 expire; markers for a and b follow at 7 and 8.
            await _wait(js, f"{storage} markers placed", name, lambda st: st["last_seq"] >= 8)
            await _snapshot(js, f"{storage} markers", name)
        for suffix, storage in STORES:
            name = "A" + suffix
            await _wait(js, f"{storage} markers expired", name, lambda st: st["messages"] == 1)
            await asyncio.sleep(0.6)  # a marker's expiry must not place another marker
            await _snapshot(js, f"{storage} after markers expired", name)

    ref, impl = await run_scenario(js_pair, sc, timeout=40)
    assert_same(ref, impl)


async def test_markers_after_message_ttl(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        for suffix, storage in STORES:
            name = "T" + suffix
            p = name.lower()
            await js.req("create", f"STREAM.CREATE.{name}", _cfg(name, storage))
            await js.pub("a ttl 1s", f"{p}.a", "1", {"Nats-TTL": "1s"})
            await js.pub("b ttl 2", f"{p}.b", "2", {"Nats-TTL": "2"})
            await js.pub("c no ttl", f"{p}.c", "3")
            await js.pub("d ttl 1s", f"{p}.d", "4", {"Nats-TTL": "1s"})
            await js.pub("d again, no ttl", f"{p}.d", "5")
        for suffix, storage in STORES:
            name = "T" + suffix
            # a and the first d expire (maybe in different passes); only a was the last
            # message on its subject.
            await _wait(
                js,
                f"{storage} a's marker",
                name,
                lambda st: st["last_seq"] >= 6 and st["messages"] == 4,
            )
            js.note(f"{storage} seq 6", await _msg(js, name, 6))
            js.note(f"{storage} seq 4 gone", await _msg(js, name, 4))
        for suffix, storage in STORES:
            name = "T" + suffix
            await _wait(js, f"{storage} b's marker", name, lambda st: st["last_seq"] >= 7)
            js.note(f"{storage} seq 7", await _msg(js, name, 7))
        for suffix, storage in STORES:
            name = "T" + suffix
            await _wait(js, f"{storage} markers expired", name, lambda st: st["messages"] == 2)
            await asyncio.sleep(0.6)
            await _snapshot(js, f"{storage} after markers expired", name)

    ref, impl = await run_scenario(js_pair, sc, timeout=40)
    assert_same(ref, impl)


async def test_kv_get_sees_marker(js_pair: ServerPair) -> None:
    """A KV bucket with a marker TTL through nats-py: get sees the value, then the marker
    (nats-py's get returns it as an entry without a value), then nothing."""
    import nats.js.errors

    async def fn(nc: Any) -> Any:
        await reset(nc)
        js = nc.jetstream()
        cfg = {
            "name": "KV_K",
            "subjects": ["$KV.K.>"],
            "max_msgs_per_subject": 1,
            "max_age": SECOND,
            "allow_rollup_hdrs": True,
            "allow_direct": True,
            "allow_msg_ttl": True,
            "subject_delete_marker_ttl": SECOND,
            "discard": "new",
        }
        await nc.request("$JS.API.STREAM.CREATE.KV_K", json.dumps(cfg).encode(), timeout=2)
        kv = await js.key_value("K")
        out: list[Any] = [await kv.put("k", b"v")]
        deadline = time.monotonic() + WAIT
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                e = await kv.get("k")
                state = f"value {e.value!r} op={e.operation}"
            except nats.js.errors.KeyDeletedError as err:
                state = f"deleted op={err.op}"
            except nats.js.errors.KeyNotFoundError:
                state = "not found"
            if not seen or seen[-1] != state:
                seen.append(state)
            if state == "not found":
                break
            await asyncio.sleep(0.05)
        out.append(seen)
        await reset(nc)
        return out

    ref, impl = await run_client_both(js_pair, fn, reference_must_succeed=True)
    assert impl == ref
    assert len(ref[1]) == 3 and ref[1][-1] == "not found", ref


async def test_a_short_ttl_is_raised_to_the_marker_ttl(js_pair: ServerPair) -> None:
    """A message TTL below the marker TTL is stored raised to it (its ``Nats-TTL`` header
    rewritten), except with one message per subject, where no marker can be missed."""

    async def sc(js: JsRecorder) -> None:
        for name, extra in (("RA", {}), ("RO", {"max_msgs_per_subject": 1})):
            p = name.lower()
            cfg = _cfg(name, "file", subject_delete_marker_ttl=5 * SECOND, **extra)
            await js.req(f"create {name}", f"STREAM.CREATE.{name}", cfg)
            await js.pub(f"{name} ttl 1s", f"{p}.a", "1", {"Nats-TTL": "1s", "X": "y"})
            await js.pub(f"{name} ttl 9", f"{p}.b", "2", {"Nats-TTL": "9"})
            js.note(f"{name} seq 1", await _msg(js, name, 1))
            js.note(f"{name} seq 2", await _msg(js, name, 2))

    ref, impl = await run_scenario(js_pair, sc, timeout=40)
    assert_same(ref, impl)
