"""Differential tests of what Key-Value and Object Store clients rely on (nats-server vs natsd).

* The ``KV_<bucket>`` / ``OBJ_<bucket>`` stream configurations the clients create, as they
  send them: nats-py (through its own API), nats.js v2 (``js.views.kv``/``js.views.os``, the
  request bodies captured from the library) and the Go client (ADR-8 / ADR-20 defaults);
  the answers to creating them again (same or other configuration), updating and deleting.
* The direct-get answers the clients read keys, revisions and object metadata with:
  ``DIRECT.GET.<stream>.<subject>`` (last by subject), ``{"seq"}`` (a revision),
  ``next_by_subj``, ``multi_last``/batches (watch-like reads), on values, delete and purge
  markers, missing keys, and the ``STREAM.MSG.GET`` equivalents; the status answers
  (404/408/503) included.
* The consumers KV/Object Store watchers create (ordered push consumers with
  ``last_per_subject``/``new``/``headers_only``): create answers and what they deliver.

Object Store data is written the way the clients write it (chunks on ``$O.<b>.C.<nuid>``,
a JSON meta message with ``Nats-Rollup: sub`` on ``$O.<b>.M.<base64url(name)>``) with fixed
nuids and payloads, so both servers store byte-identical messages.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import API, JsRecorder, js_server_pair, parse_header_block, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

SECOND = 1_000_000_000


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def check(pair: ServerPair, scenario: Any, timeout: float = 20.0) -> None:
    ref, impl = await run_scenario(pair, scenario, timeout=timeout)
    assert_same(ref, impl)


# ------------------------------------------------------------------ client configurations
#: nats.js v2 (2.29) ``js.views.kv("A")`` and a bucket with every option (captured).
NATSJS_KV = {
    "name": "KV_JSA",
    "retention": "limits",
    "max_msgs_per_subject": 1,
    "max_bytes": -1,
    "max_msg_size": -1,
    "storage": "file",
    "subjects": ["$KV.JSA.>"],
    "discard": "new",
    "allow_direct": True,
    "num_replicas": 1,
    "allow_rollup_hdrs": True,
}
NATSJS_KV_FULL = {
    "name": "KV_JSB",
    "retention": "limits",
    "max_msgs_per_subject": 5,
    "max_bytes": 1000000,
    "max_msg_size": 1024,
    "storage": "memory",
    "republish": {"src": ">", "dest": "rp.>"},
    "description": "d",
    "subjects": ["$KV.JSB.>"],
    "discard": "new",
    "allow_direct": True,
    "num_replicas": 1,
    "max_age": 60 * SECOND,
    "allow_rollup_hdrs": True,
    "compression": "s2",
    "metadata": {"owner": "team"},
}
#: nats.js v2 ``js.views.os("O")`` / with description, ttl and max_bytes (captured).
NATSJS_OS = {
    "max_age": 0,
    "name": "OBJ_JSO",
    "num_replicas": 1,
    "allow_direct": True,
    "allow_rollup_hdrs": True,
    "discard": "new",
    "subjects": ["$O.JSO.C.>", "$O.JSO.M.>"],
}
NATSJS_OS_FULL = {
    "max_age": 60 * SECOND,
    "description": "x",
    "max_bytes": 1000000,
    "name": "OBJ_JSP",
    "num_replicas": 1,
    "allow_direct": True,
    "allow_rollup_hdrs": True,
    "discard": "new",
    "subjects": ["$O.JSP.C.>", "$O.JSP.M.>"],
}
#: The Go client's CreateKeyValue (ADR-8 defaults, limit markers on) and CreateObjectStore.
GO_KV = {
    "name": "KV_GO",
    "description": "",
    "subjects": ["$KV.GO.>"],
    "retention": "limits",
    "max_consumers": -1,
    "max_msgs": -1,
    "max_bytes": -1,
    "discard": "new",
    "max_age": 0,
    "max_msgs_per_subject": 10,
    "max_msg_size": -1,
    "storage": "file",
    "num_replicas": 1,
    "duplicate_window": 120 * SECOND,
    "allow_direct": True,
    "allow_rollup_hdrs": True,
    "deny_delete": True,
    "deny_purge": False,
    "sealed": False,
    "mirror_direct": False,
    "compression": "none",
    "allow_msg_ttl": True,
    "subject_delete_marker_ttl": 5 * SECOND,
}
GO_OS = {
    "name": "OBJ_GO",
    "description": "",
    "subjects": ["$O.GO.C.>", "$O.GO.M.>"],
    "max_age": 0,
    "max_bytes": -1,
    "storage": "file",
    "num_replicas": 1,
    "discard": "new",
    "allow_rollup_hdrs": True,
    "allow_direct": True,
    "compression": "none",
    "max_msgs": -1,
    "max_consumers": -1,
}


async def test_client_stream_configs(js_pair: ServerPair) -> None:
    """Every client's bucket stream: create, info, create again (same / other config),
    update, and delete answers."""

    async def scenario(js: JsRecorder) -> None:
        for cfg in (NATSJS_KV, NATSJS_KV_FULL, NATSJS_OS, NATSJS_OS_FULL, GO_KV, GO_OS):
            name = str(cfg["name"])
            await js.req(f"create {name}", f"STREAM.CREATE.{name}", cfg)
            await js.req(f"create {name} again", f"STREAM.CREATE.{name}", cfg)
            await js.req(f"info {name}", f"STREAM.INFO.{name}")
        other = dict(NATSJS_KV, max_msgs_per_subject=7)
        await js.req("create with another history", "STREAM.CREATE.KV_JSA", other)
        await js.req("update history", "STREAM.UPDATE.KV_JSA", other)
        changed = dict(GO_KV, subject_delete_marker_ttl=0, allow_msg_ttl=True)
        await js.req("update: markers off", "STREAM.UPDATE.KV_GO", changed)
        await js.req("update: history", "STREAM.UPDATE.KV_GO", dict(GO_KV, max_msgs_per_subject=3))
        await js.req(
            "update: deny_delete off", "STREAM.UPDATE.KV_GO", dict(GO_KV, deny_delete=False)
        )
        sealed = dict(GO_OS, sealed=True)
        await js.req("seal object store", "STREAM.UPDATE.OBJ_GO", sealed)
        await js.pub("put into sealed", "$O.GO.M.eA==", b"{}")
        await js.req("kv names", "STREAM.NAMES", {"subject": "$KV.*.>"})
        for cfg in (NATSJS_KV, GO_KV):
            await js.req(f"delete {cfg['name']}", f"STREAM.DELETE.{cfg['name']}")
        await js.req("names after delete", "STREAM.NAMES")

    await check(js_pair, scenario)


async def test_nats_py_bucket_configs(js_pair: ServerPair) -> None:
    """nats-py's create_key_value / create_object_store, with their options."""
    from nats.js.api import KeyValueConfig, RePublish, StorageType

    async def scenario(js: JsRecorder) -> None:
        ctx = js.nc.jetstream(timeout=3)
        await ctx.create_key_value(bucket="PY")
        await ctx.create_key_value(
            KeyValueConfig(
                bucket="PYFULL",
                description="all options",
                max_value_size=2048,
                history=12,
                ttl=30,
                max_bytes=1 << 20,
                storage=StorageType.MEMORY,
                republish=RePublish(src="$KV.PYFULL.>", dest="out.>", headers_only=True),
                direct=True,
                limit_marker_ttl=2,
            )
        )
        await ctx.create_object_store("PYOBJ", description="objects", ttl=120, max_bytes=1 << 24)
        for name in ("KV_PY", "KV_PYFULL", "OBJ_PYOBJ"):
            await js.req(f"info {name}", f"STREAM.INFO.{name}")
        await js.req("account", "INFO")

    await check(js_pair, scenario)


# ------------------------------------------------------------------ KV direct gets
async def _kv_data(js: JsRecorder, bucket: str = "D", direct: bool = True) -> None:
    """Revisions: 1 a=1, 2 b=1, 3 a=2, 4 c.x=1, 5 b DEL, 6 c.y=1, 7 d=1, 8 d PURGE,
    9 e (empty value), 10 a=3."""
    await js.req(
        "create",
        f"STREAM.CREATE.KV_{bucket}",
        dict(GO_KV, name=f"KV_{bucket}", subjects=[f"$KV.{bucket}.>"], allow_direct=direct),
    )
    p = f"$KV.{bucket}."
    await js.pub("put a", p + "a", b"1")
    await js.pub("put b", p + "b", b"1")
    await js.pub("put a 2", p + "a", b"2", {"Nats-Expected-Last-Subject-Sequence": "1"})
    await js.pub("put c.x", p + "c.x", b"1")
    await js.pub("del b", p + "b", b"", {"KV-Operation": "DEL"})
    await js.pub("put c.y", p + "c.y", b"1", {"Nats-Expected-Last-Subject-Sequence": "0"})
    await js.pub("put d", p + "d", b"1")
    await js.pub("purge d", p + "d", b"", {"KV-Operation": "PURGE", "Nats-Rollup": "sub"})
    await js.pub("put e empty", p + "e", b"")
    await js.pub("put a 3", p + "a", b"3")
    await js.pub("create a fails", p + "a", b"x", {"Nats-Expected-Last-Subject-Sequence": "0"})
    await js.pub("update a stale", p + "a", b"x", {"Nats-Expected-Last-Subject-Sequence": "3"})
    await js.pub("delete with TTL refused", p + "z", b"", {"Nats-TTL": "0s"})


async def test_kv_direct_get_answers(js_pair: ServerPair) -> None:
    async def scenario(js: JsRecorder) -> None:
        await _kv_data(js)
        s = "KV_D"
        for key in ("a", "b", "c.x", "d", "e", "missing", "c.*", "c.>"):
            await js.direct(f"last {key}", f"{s}.$KV.D.{key}")
        for seq in (1, 2, 3, 5, 7, 8, 9, 10, 11, 0):
            await js.direct(f"revision {seq}", s, {"seq": seq})
        await js.direct("last_by_subj body", s, {"last_by_subj": "$KV.D.a"})
        await js.direct("next_by_subj", s, {"next_by_subj": "$KV.D.c.*", "seq": 5})
        await js.direct("next_by_subj none", s, {"next_by_subj": "$KV.D.zz"})
        await js.direct("subject form with max_bytes", f"{s}.$KV.D.a", {"max_bytes": 10})
        await js.direct("subject form with seq refused", f"{s}.$KV.D.a", {"seq": 1})
        await js.direct("empty body", s, b"")
        await js.direct("missing stream", "KV_NOPE.$KV.NOPE.a")
        # STREAM.MSG.GET, used when the bucket does not allow direct (and by nats.js's
        # object store info).
        for body in (
            {"last_by_subj": "$KV.D.a"},
            {"last_by_subj": "$KV.D.b"},
            {"last_by_subj": "$KV.D.nope"},
            {"seq": 2},
            {"seq": 8},
            {"next_by_subj": "$KV.D.c.>", "seq": 1},
        ):
            await js.req(f"msg get {body}", f"STREAM.MSG.GET.{s}", body)
        await js.state("state", s)

    await check(js_pair, scenario)


async def test_kv_direct_get_not_allowed(js_pair: ServerPair) -> None:
    async def scenario(js: JsRecorder) -> None:
        await _kv_data(js, "N", direct=False)
        await js.direct("direct on a non-direct bucket", "KV_N.$KV.N.a")
        await js.req("msg get", "STREAM.MSG.GET.KV_N", {"last_by_subj": "$KV.N.a"})

    await check(js_pair, scenario)


async def _multi(js: JsRecorder, label: str, subject: str, body: dict[str, Any]) -> None:
    """A multi-reply direct get recorded reply by reply until the EOB status."""
    nc = js.nc
    raw: list[bytes | None] = []
    orig = nc._process_msg
    inbox = nc.new_inbox()

    async def process_msg(sid: int, subj: bytes, reply: bytes, data: bytes, headers: bytes):  # type: ignore[no-untyped-def]
        if subj.decode() == inbox:
            raw.append(headers or None)
        return await orig(sid, subj, reply, data, headers)

    nc._process_msg = process_msg
    sub = await nc.subscribe(inbox)
    await nc.publish(f"{API}.DIRECT.GET.{subject}", json.dumps(body).encode(), reply=inbox)
    out: list[Any] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1.0)
            except TimeoutError:
                if js.reference:  # nats-server always ends with an EOB status
                    raise TimeoutError(f"{label}: no EOB after {out}") from None
                out.append("<timeout>")
                break
            status, hdrs = parse_header_block(raw[len(out)] if len(raw) > len(out) else None)
            out.append({"status": status, "headers": hdrs, "payload": msg.data.decode()})
            if status != "NATS/1.0":
                break
    finally:
        nc._process_msg = orig
        await sub.unsubscribe()
    js.note(label, out)


async def test_kv_batch_and_multi_last_answers(js_pair: ServerPair) -> None:
    """What watch-like reads and nats.js's ``direct.getBatch`` (multi_last) get back."""

    async def scenario(js: JsRecorder) -> None:
        await _kv_data(js)
        await _multi(js, "multi_last all keys", "KV_D", {"multi_last": ["$KV.D.>"]})
        await _multi(js, "multi_last two keys", "KV_D", {"multi_last": ["$KV.D.a", "$KV.D.b"]})
        await _multi(
            js, "multi_last up_to_seq", "KV_D", {"multi_last": ["$KV.D.>"], "up_to_seq": 5}
        )
        await _multi(js, "multi_last batch 2", "KV_D", {"multi_last": ["$KV.D.>"], "batch": 2})
        await _multi(js, "multi_last none", "KV_D", {"multi_last": ["$KV.D.zz"]})
        await _multi(js, "batch from 3", "KV_D", {"seq": 3, "batch": 4})
        await _multi(js, "batch next_by_subj", "KV_D", {"next_by_subj": "$KV.D.a", "batch": 5})

    await check(js_pair, scenario)


async def test_kv_markers_and_ttl_answers(js_pair: ServerPair) -> None:
    """Per-key TTL (Nats-TTL) and limit markers as direct get and stream state show them."""

    async def scenario(js: JsRecorder) -> None:
        cfg = dict(GO_KV, name="KV_T", subjects=["$KV.T.>"], subject_delete_marker_ttl=SECOND)
        await js.req("create", "STREAM.CREATE.KV_T", cfg)
        await js.pub("put keep", "$KV.T.keep", b"k")
        await js.pub(
            "create short ttl",
            "$KV.T.s",
            b"s",
            {"Nats-TTL": "1s", "Nats-Expected-Last-Subject-Sequence": "0"},
        )
        await js.pub("ttl never", "$KV.T.n", b"n", {"Nats-TTL": "never"})
        await js.pub(
            "purge with ttl",
            "$KV.T.p",
            b"",
            {"KV-Operation": "PURGE", "Nats-Rollup": "sub", "Nats-TTL": "5"},
        )
        await js.pub("bad ttl", "$KV.T.x", b"", {"Nats-TTL": "-3"})
        await js.direct("short before", "KV_T.$KV.T.s")
        await js.direct("never", "KV_T.$KV.T.n")
        await js.direct("purge marker", "KV_T.$KV.T.p")
        deadline = asyncio.get_running_loop().time() + 8
        while True:
            r = await js.direct("poll", "KV_T.$KV.T.s")
            js.log.pop()
            hdrs = dict(r["headers"]) if isinstance(r, dict) else {}
            if "Nats-Marker-Reason" in hdrs:
                break
            assert asyncio.get_running_loop().time() < deadline, r
            await asyncio.sleep(0.1)
        await js.direct("marker for s", "KV_T.$KV.T.s")
        await js.direct("marker by seq", "KV_T", {"seq": 6})
        await js.state("state", "KV_T")

    await check(js_pair, scenario)


# ------------------------------------------------------------------ object store
def _meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def _info(bucket: str, name: str, nuid: str, data: bytes, chunks: int, **extra: Any) -> bytes:
    digest = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
    doc = {
        "name": name,
        "bucket": bucket,
        "nuid": nuid,
        "size": len(data),
        "mtime": "2024-01-01T00:00:00Z",
        "chunks": chunks,
        "digest": digest,
        "options": {"max_chunk_size": 1000},
    }
    doc.update(extra)
    return json.dumps(doc).encode()


async def _put_object(js: JsRecorder, bucket: str, name: str, nuid: str, data: bytes) -> None:
    chunks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    for i, c in enumerate(chunks):
        await js.pub(f"chunk {name} {i}", f"$O.{bucket}.C.{nuid}", c)
    await js.pub(
        f"meta {name}",
        _meta_subject(bucket, name),
        _info(bucket, name, nuid, data, len(chunks)),
        {"Nats-Rollup": "sub"},
    )


async def test_object_store_answers(js_pair: ServerPair) -> None:
    async def scenario(js: JsRecorder) -> None:
        await js.req("create", "STREAM.CREATE.OBJ_GO", GO_OS)
        data = bytes(range(256)) * 10  # 2560 bytes: 3 chunks of <= 1000
        await _put_object(js, "GO", "a.txt", "NUIDA", data)
        await _put_object(js, "GO", "empty", "NUIDE", b"")
        await _put_object(js, "GO", "b", "NUIDB", b"bee")
        # Replace b (new nuid, old chunks purged as the clients do).
        await _put_object(js, "GO", "b", "NUIDB2", b"bee two")
        await js.req("purge old chunks", "STREAM.PURGE.OBJ_GO", {"filter": "$O.GO.C.NUIDB"})
        # Delete a.txt: a deleted meta, then its chunks purged.
        await js.pub(
            "delete meta",
            _meta_subject("GO", "a.txt"),
            _info("GO", "a.txt", "NUIDA", b"", 0, deleted=True),
            {"Nats-Rollup": "sub"},
        )
        await js.req("purge a chunks", "STREAM.PURGE.OBJ_GO", {"filter": "$O.GO.C.NUIDA"})
        for name in ("a.txt", "empty", "b", "missing"):
            await js.direct(f"meta {name}", f"OBJ_GO.{_meta_subject('GO', name)}")
            await js.req(
                f"msg get meta {name}",
                "STREAM.MSG.GET.OBJ_GO",
                {"last_by_subj": _meta_subject("GO", name)},
            )
        await js.direct("first chunk of b", "OBJ_GO", {"next_by_subj": "$O.GO.C.NUIDB2"})
        await js.direct("last meta of all", "OBJ_GO", {"last_by_subj": "$O.GO.M.>"})
        await _multi(js, "all metas", "OBJ_GO", {"multi_last": ["$O.GO.M.>"]})
        await js.req("subjects", "STREAM.INFO.OBJ_GO", {"subjects_filter": ">"})

    await check(js_pair, scenario)


async def test_object_store_through_nats_py(js_pair: ServerPair) -> None:
    """nats-py's put/get/list/delete on both servers: the same infos, data and state."""
    from nats.js.api import ObjectMeta, ObjectMetaOptions

    def info_view(i: Any) -> Any:
        return [i.name, i.bucket, i.size, i.chunks, i.digest, bool(i.deleted), i.description]

    async def scenario(js: JsRecorder) -> None:
        ctx = js.nc.jetstream(timeout=3)
        obs = await ctx.create_object_store("PY")
        opts = ObjectMetaOptions(max_chunk_size=4096)
        for name, size in (("zero", 0), ("one", 100), ("many", 20_000)):
            data = bytes(i % 251 for i in range(size))
            info = await obs.put(name, data, meta=ObjectMeta(name=name, options=opts))
            js.note(f"put {name}", info_view(info))
            res = await obs.get(name)
            js.note(f"get {name}", [res.data == data, info_view(res.info)])
        await obs.update_meta("one", ObjectMeta(name="one", description="described"))
        js.note("info one", info_view(await obs.get_info("one")))
        await obs.delete("many")
        js.note("list", [info_view(i) for i in await obs.list()])
        await js.state("state", "OBJ_PY")

    await check(js_pair, scenario)


# ------------------------------------------------------------------ watcher consumers
_ACK = re.compile(r"^(\$JS\.ACK\.[^.]+\.[^.]+\.\d+\.\d+\.\d+\.)\d+\.(\d+)$")


async def _watch(
    js: JsRecorder,
    label: str,
    cfg: dict[str, Any],
    expect: int,
    later: tuple[tuple[str, bytes, dict[str, str] | None], ...] = (),
) -> None:
    """Create a push consumer on a fixed deliver subject, then publish ``later``; record the
    create answer and the first ``expect`` deliveries (subject, reply with the timestamp
    masked, headers, data). When messages are published after the create, the pending count
    a delivery carries depends on whether the next publish was stored before the delivery
    left (a race on both servers: nats-server delivers from its own goroutine), so it is
    masked too."""
    nc = js.nc
    deliver = f"_WATCH.{label.replace(' ', '_')}"
    got: list[Any] = []
    done = asyncio.Event()

    async def cb(msg: Any) -> None:
        pending = "<pending>" if later else r"\2"
        reply = _ACK.sub(r"\1<ts>." + pending, msg.reply or "")
        hdrs = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Time-Stamp"}
        got.append([msg.subject, reply, hdrs, msg.data.decode()])
        if len(got) >= expect:
            done.set()

    sub = await nc.subscribe(deliver, cb=cb)
    name = cfg.get("name", "W")
    filt = cfg.get("filter_subject", "")
    body = {"stream_name": "KV_D", "config": dict(cfg, deliver_subject=deliver), "action": "create"}
    subject = f"CONSUMER.CREATE.KV_D.{name}" + (f".{filt}" if filt else "")
    r = await js.req(f"{label}: create", subject, body)
    if isinstance(r, dict):
        r.pop("delivered", None)
    for subj, data, hdrs in later:
        await js.pub(f"{label}: publish {subj}", subj, data, hdrs)
    if expect:
        try:
            await asyncio.wait_for(done.wait(), 3)
        except TimeoutError:
            pass
    else:
        await asyncio.sleep(0.3)
    js.note(f"{label}: deliveries", got)
    info = await js.req(f"{label}: info", f"CONSUMER.INFO.KV_D.{name}", record=False)
    if isinstance(info, dict) and isinstance(info.get("delivered"), dict):
        info["delivered"].pop("last_active", None)
    js.note(f"{label}: info", info)
    await js.req(f"{label}: delete", f"CONSUMER.DELETE.KV_D.{name}")
    await sub.unsubscribe()


WATCH_BASE = {
    "ack_policy": "none",
    "ack_wait": 79200 * SECOND,
    "replay_policy": "instant",
    "flow_control": True,
    "idle_heartbeat": 5 * SECOND,
    "max_deliver": 1,
    "mem_storage": True,
    "num_replicas": 1,
}


async def test_kv_watcher_consumers(js_pair: ServerPair) -> None:
    async def scenario(js: JsRecorder) -> None:
        await _kv_data(js)
        await _watch(
            js,
            "last values",
            dict(
                WATCH_BASE,
                name="W1",
                deliver_policy="last_per_subject",
                filter_subject="$KV.D.>",
                headers_only=False,
            ),
            6,
        )
        await _watch(
            js,
            "history of a",
            dict(WATCH_BASE, name="W2", deliver_policy="all", filter_subject="$KV.D.a"),
            3,
        )
        await _watch(
            js,
            "keys headers only",
            dict(
                WATCH_BASE,
                name="W3",
                deliver_policy="last_per_subject",
                filter_subject="$KV.D.>",
                headers_only=True,
            ),
            6,
        )
        await _watch(
            js,
            "several keys",
            dict(
                WATCH_BASE,
                name="W4",
                deliver_policy="last_per_subject",
                filter_subjects=["$KV.D.a", "$KV.D.c.*"],
            ),
            3,
        )
        await _watch(
            js,
            "updates only",
            dict(WATCH_BASE, name="W5", deliver_policy="new", filter_subject="$KV.D.>"),
            2,
            (("$KV.D.z", b"new", None), ("$KV.D.a", b"", {"KV-Operation": "DEL"})),
        )
        await _watch(
            js,
            "resume from revision",
            dict(
                WATCH_BASE,
                name="W6",
                deliver_policy="by_start_sequence",
                opt_start_seq=8,
                filter_subject="$KV.D.>",
            ),
            5,
        )

    await check(js_pair, scenario)


# ------------------------------------------------------------------ republish
async def test_kv_republish_headers(js_pair: ServerPair) -> None:
    """Republished KV writes: ``Nats-Last-Sequence`` is the key's previous revision (looked
    up before the write, so a history of 1 still reports the revision it replaces), 0 for a
    new key or after a purge of the key."""

    async def scenario(js: JsRecorder) -> None:
        got: list[Any] = []

        async def cb(msg: Any) -> None:
            hdrs = {k: v for k, v in (msg.headers or {}).items() if k != "Nats-Time-Stamp"}
            got.append([msg.subject, hdrs, msg.data.decode()])

        sub = await js.nc.subscribe("rp.>", cb=cb)
        cfg = dict(
            GO_KV,
            name="KV_R",
            subjects=["$KV.R.>"],
            max_msgs_per_subject=1,
            republish={"src": "$KV.R.>", "dest": "rp.>"},
        )
        await js.req("create", "STREAM.CREATE.KV_R", cfg)
        await js.pub("put a", "$KV.R.a", b"1")
        await js.pub("put b", "$KV.R.b", b"1")
        await js.pub("put a again", "$KV.R.a", b"2")
        await js.pub("purge a", "$KV.R.a", b"", {"KV-Operation": "PURGE", "Nats-Rollup": "sub"})
        await js.pub("put a after purge marker", "$KV.R.a", b"3")
        await js.req("purge subject a", "STREAM.PURGE.KV_R", {"filter": "$KV.R.a"})
        await js.pub("put a after purge", "$KV.R.a", b"4")
        await js.pub("delete b", "$KV.R.b", b"", {"KV-Operation": "DEL"})
        await js.nc.flush()
        for _ in range(50):
            if len(got) >= 7:
                break
            await asyncio.sleep(0.02)
        await sub.unsubscribe()
        js.note("republished", got)

    await check(js_pair, scenario)
