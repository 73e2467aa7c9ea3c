"""Key-Value buckets through nats-py's own KV API (ADR-8), unchanged, over real sockets.

Bucket create/bind/update/delete/status, put/get (latest and by revision, direct and
through STREAM.MSG.GET), create (fails if the key exists), update with an expected revision
(CAS), delete and purge markers (``KV-Operation``), history, keys, watch (last values,
history, ignore deletes, headers only, updates only), per-bucket TTL, per-key TTL
(``Nats-TTL``) and limit markers (``subject_delete_marker_ttl``), republish and the
last-per-subject consumers the watchers use.

``NATSD_IT_TARGET=nats-server`` runs the very same tests against the Go server (how every
expectation here was checked); otherwise an embedded natsd serves them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors as jse
import pytest
from embedded_cluster import EDGE, EmbeddedJsCluster
from nats.aio.client import Client as NATS
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    KeyValueConfig,
    RePublish,
    StorageType,
)

import natsd

from .conftest import REAL, ServerProcess, wait_for

pytestmark = pytest.mark.timeout(60)

KV_OP = "KV-Operation"


# --------------------------------------------------------------------------- fixtures
# The cluster variant is natsd's; against nats-server (NATSD_IT_TARGET) the single server
# runs, and nats-server clusters are in tests/differential/test_js_cluster_reference.py.
@pytest.fixture(params=["single"] if REAL else ["single", "cluster"])
async def js_url(
    request: pytest.FixtureRequest, spawn: Callable[..., ServerProcess], tmp_dir: str
) -> AsyncIterator[str]:
    """URL of a fresh JetStream server: nats-server (NATSD_IT_TARGET) or an embedded natsd;
    with natsd each test also runs against a three-server JetStream cluster, its client on
    a fourth server without JetStream, so every bucket lives on another server (issue 18)."""
    store = os.path.join(tmp_dir, "jetstream")
    if request.param == "cluster":
        cluster = EmbeddedJsCluster(Path(store), edge=True)
        try:
            await cluster.start_all()
            yield cluster.url(EDGE)
        finally:
            await cluster.stop_all()
        return
    if REAL:
        sp = await spawn("-js", "-sd", store, "-a", "127.0.0.1", "-p", "-1").wait_ready()
        yield f"nats://127.0.0.1:{sp.port}"
        return
    async with natsd.Server(port=0, host="127.0.0.1", jetstream=True, store_dir=store) as srv:
        yield srv.client_url


@pytest.fixture
async def nc(connect: Callable[..., Awaitable[NATS]], js_url: str) -> NATS:
    return await connect(js_url)


@pytest.fixture
def js(nc: NATS) -> Any:
    return nc.jetstream(timeout=3)


async def msg_at(js: Any, stream: str, seq: int) -> Any:
    """The stored message at ``seq`` through STREAM.MSG.GET (headers parsed)."""
    return await js.get_msg(stream, seq=seq)


async def drain_watch(w: Any, timeout: float = 2.0) -> list[Any]:
    """Entries of a watcher up to (not including) its initial ``None`` marker."""
    out = []
    while True:
        e = await w.updates(timeout=timeout)
        if e is None:
            return out
        out.append(e)


def ops(entries: list[Any]) -> list[tuple[str, int, bytes, str | None]]:
    return [(e.key, e.revision, e.value, e.operation) for e in entries]


# --------------------------------------------------------------------------- buckets
@pytest.mark.parametrize("storage", [StorageType.FILE, StorageType.MEMORY])
async def test_bucket_create_config_and_status(js: Any, storage: StorageType) -> None:
    kv = await js.create_key_value(
        bucket="CFG",
        description="settings",
        history=5,
        ttl=3600,
        max_value_size=1024,
        max_bytes=1 << 20,
        storage=storage,
        direct=True,
    )
    si = await js.stream_info("KV_CFG")
    c = si.config
    assert c.name == "KV_CFG" and c.subjects == ["$KV.CFG.>"]
    assert c.description == "settings"
    assert c.max_msgs_per_subject == 5 and c.max_msgs == -1
    assert c.max_age == 3600 and c.duplicate_window == 120
    assert c.max_msg_size == 1024 and c.max_bytes == 1 << 20
    assert c.discard == "new" and c.deny_delete is True and c.deny_purge is False
    assert c.allow_rollup_hdrs is True and c.allow_direct is True
    assert c.allow_msg_ttl is True and c.storage == storage
    assert c.max_consumers == -1 and c.num_replicas == 1
    st = await kv.status()
    assert (st.bucket, st.values, st.history, st.ttl) == ("CFG", 0, 5, 3600)
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    await kv.put("a", b"3")
    st = await kv.status()
    assert st.values == 3


async def test_bucket_short_ttl_shortens_duplicate_window(js: Any) -> None:
    await js.create_key_value(bucket="SHORT", ttl=30)
    c = (await js.stream_info("KV_SHORT")).config
    assert c.max_age == 30 and c.duplicate_window == 30


async def test_bucket_bind_recreate_update_delete(js: Any) -> None:
    with pytest.raises(jse.BucketNotFoundError):
        await js.key_value("B")
    await js.create_key_value(bucket="B", history=2)
    kv = await js.key_value("B")
    await kv.put("k", b"v")
    # The same configuration again is fine (nats-server answers with the existing stream).
    kv2 = await js.create_key_value(bucket="B", history=2)
    assert (await kv2.get("k")).value == b"v"
    # A different one is refused: stream name already in use.
    with pytest.raises(jse.BadRequestError) as ei:
        await js.create_key_value(bucket="B", history=3)
    assert ei.value.err_code == 10058
    # Update the bucket (what the Go client's UpdateKeyValue does: update the stream).
    cfg = (await js.stream_info("KV_B")).config
    cfg.max_msgs_per_subject = 10
    cfg.description = "more history"
    await js.update_stream(cfg)
    st = await kv.status()
    assert st.history == 10 and st.stream_info.config.description == "more history"
    for i in range(12):
        await kv.put("k", str(i).encode())
    assert len(await kv.history("k")) == 10
    assert await js.delete_key_value("B") is True
    with pytest.raises(jse.BucketNotFoundError):
        await js.key_value("B")
    with pytest.raises(jse.NotFoundError):
        await js.delete_key_value("B")


async def test_bind_to_non_kv_stream_is_bad_bucket(js: Any) -> None:
    await js.add_stream(name="KV_PLAIN", subjects=["plain.>"])
    with pytest.raises(jse.BadBucketError):
        await js.key_value("PLAIN")


# --------------------------------------------------------------------------- put / get
@pytest.mark.parametrize("direct", [True, False])
async def test_put_get_latest_and_by_revision(nc: NATS, js: Any, direct: bool) -> None:
    kv = await js.create_key_value(bucket="PG", history=3, direct=direct)
    assert (await js.stream_info("KV_PG")).config.allow_direct is direct
    seen: list[str] = []

    async def spy(msg: Any) -> None:
        seen.append(msg.subject)

    # The client reads through DIRECT.GET exactly when the stream allows it.
    spy_sub = await nc.subscribe("$JS.API.>", cb=spy)
    assert await kv.put("color", b"blue") == 1
    assert await kv.put("size", b"XL") == 2
    assert await kv.put("color", b"green") == 3
    e = await kv.get("color")
    assert (e.bucket, e.key, e.value, e.revision, e.operation) == (
        "PG",
        "color",
        b"green",
        3,
        None,
    )
    assert (await kv.get("color", revision=1)).value == b"blue"
    assert (await kv.get("size", revision=2)).value == b"XL"
    # A revision of another key is not this key.
    with pytest.raises(jse.KeyNotFoundError):
        await kv.get("color", revision=2)
    with pytest.raises(jse.KeyNotFoundError):
        await kv.get("missing")
    with pytest.raises(jse.KeyNotFoundError):
        await kv.get("color", revision=99)
    # Keys with dots, dashes, slashes, equals and underscores.
    for key in ("a.b.c", "with-dash", "x/y", "k=v", "_under"):
        await kv.put(key, key.encode())
        assert (await kv.get(key)).value == key.encode()
    # Empty value and a binary value survive unchanged.
    await kv.put("empty", b"")
    assert (await kv.get("empty")).value is None  # nats-py's reading of an empty payload
    blob = bytes(range(256)) * 4
    await kv.put("bin", blob)
    assert (await kv.get("bin")).value == blob
    await nc.flush()
    await spy_sub.unsubscribe()
    directs = [s for s in seen if s.startswith("$JS.API.DIRECT.GET.KV_PG")]
    gets = [s for s in seen if s == "$JS.API.STREAM.MSG.GET.KV_PG"]
    if direct:
        assert "$JS.API.DIRECT.GET.KV_PG.$KV.PG.color" in directs and not gets
    else:
        assert gets and not directs


async def test_history_limit_drops_old_revisions(js: Any) -> None:
    kv = await js.create_key_value(bucket="H1")  # history 1
    await kv.put("k", b"1")
    await kv.put("k", b"2")
    with pytest.raises(jse.KeyNotFoundError):
        await kv.get("k", revision=1)
    assert (await kv.get("k")).revision == 2
    assert (await kv.status()).values == 1


# --------------------------------------------------------------------------- create / update
@pytest.mark.parametrize("direct", [True, False])
async def test_create_and_update_with_expected_revision(js: Any, direct: bool) -> None:
    kv = await js.create_key_value(bucket="CAS", history=10, direct=direct)
    assert await kv.create("k", b"1") == 1
    with pytest.raises(jse.KeyWrongLastSequenceError) as ei:
        await kv.create("k", b"again")
    assert ei.value.description == "wrong last sequence: 1"
    assert await kv.update("k", b"2", last=1) == 2
    with pytest.raises(jse.KeyWrongLastSequenceError) as ei:
        await kv.update("k", b"stale", last=1)
    assert ei.value.description == "wrong last sequence: 2"
    # Another key's revision does not count for this one.
    await kv.put("other", b"o")
    assert await kv.update("k", b"3", last=2) == 4
    with pytest.raises(jse.KeyWrongLastSequenceError) as ei:
        await kv.update("nokey", b"x", last=3)
    assert ei.value.description == "wrong last sequence: 0"
    # The raw PubAck error the client maps: 400 / 10071.
    with pytest.raises(jse.APIError) as ai:
        await js.publish("$KV.CAS.k", b"raw", headers={"Nats-Expected-Last-Subject-Sequence": "1"})
    assert (ai.value.code, ai.value.err_code) == (400, 10071)
    assert ai.value.description == "wrong last sequence: 4"
    # create succeeds again once the key was deleted, and once it was purged.
    await kv.delete("k")
    assert await kv.create("k", b"after delete") == 6
    await kv.purge("k")
    assert await kv.create("k", b"after purge") == 8
    assert (await kv.get("k")).value == b"after purge"
    assert [e.revision for e in await kv.history("k")] == [7, 8]


# --------------------------------------------------------------------------- delete / purge
async def test_delete_and_purge_markers(js: Any) -> None:
    kv = await js.create_key_value(bucket="DP", history=10, direct=True)
    for v in (b"1", b"2", b"3"):
        await kv.put("a", v)
    await kv.put("b", b"b")
    await kv.delete("a")
    m = await msg_at(js, "KV_DP", 5)
    assert m.subject == "$KV.DP.a" and m.data is None
    assert m.headers == {KV_OP: "DEL"}
    with pytest.raises(jse.KeyNotFoundError) as ei:
        await kv.get("a")
    assert ei.value.op == "DEL" and ei.value.entry.revision == 5
    # Direct get returns the marker itself, headers and all.
    d = await js.get_msg("KV_DP", subject="$KV.DP.a", direct=True)
    assert d.headers[KV_OP] == "DEL" and d.headers["Nats-Sequence"] == "5"
    assert d.headers["Nats-Stream"] == "KV_DP" and d.headers["Nats-Subject"] == "$KV.DP.a"
    assert "Nats-Time-Stamp" in d.headers
    hist = await kv.history("a")
    assert [(e.revision, e.value, e.operation) for e in hist] == [
        (1, b"1", None),
        (2, b"2", None),
        (3, b"3", None),
        (5, b"", "DEL"),
    ]
    # delete with an expected revision (CAS).
    with pytest.raises(jse.APIError) as ai:
        await kv.delete("b", last=1)
    assert ai.value.err_code == 10071 and ai.value.description == "wrong last sequence: 4"
    assert await kv.delete("b", last=4) is True
    # purge: a PURGE marker with a subject rollup; older revisions are gone.
    await kv.put("a", b"4")
    await kv.purge("a")
    m = await msg_at(js, "KV_DP", 8)
    assert m.headers == {KV_OP: "PURGE", "Nats-Rollup": "sub"}
    assert [(e.revision, e.operation) for e in await kv.history("a")] == [(8, "PURGE")]
    st = (await js.stream_info("KV_DP")).state
    assert (st.messages, st.first_seq, st.last_seq) == (3, 4, 8)
    with pytest.raises(jse.KeyNotFoundError) as ei:
        await kv.get("a")
    assert ei.value.op == "PURGE"
    # Deletes and purges keep their markers until purge_deletes removes them.
    await kv.put("c", b"c")
    await kv.purge_deletes(olderthan=0)
    st = (await js.stream_info("KV_DP")).state
    assert (st.messages, st.last_seq) == (1, 9)
    assert await kv.keys() == ["c"]


async def test_purge_deletes_keeps_recent_markers(js: Any) -> None:
    kv = await js.create_key_value(bucket="PDK", history=5)
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.delete("a")
    await kv.purge_deletes()  # markers younger than 30 minutes stay, their history goes
    st = (await js.stream_info("KV_PDK")).state
    assert (st.messages, st.first_seq) == (1, 3)
    assert [e.operation for e in await kv.history("a")] == ["DEL"]


async def test_value_too_large_and_bucket_full(js: Any) -> None:
    kv = await js.create_key_value(bucket="LIM", max_value_size=100, max_bytes=600)
    await kv.put("ok", b"x" * 50)
    with pytest.raises(jse.APIError) as ai:
        await kv.put("big", b"x" * 200)
    assert (ai.value.code, ai.value.err_code) == (400, 10054)
    with pytest.raises(jse.APIError) as ai:
        for i in range(20):
            await kv.put(f"k{i}", b"y" * 90)
    assert ai.value.err_code == 10077
    assert "maximum bytes exceeded" in (ai.value.description or "")


# --------------------------------------------------------------------------- history / keys
async def test_history_entries(js: Any) -> None:
    kv = await js.create_key_value(bucket="HIST", history=3)
    for i in range(1, 6):
        await kv.put("k", str(i).encode())
    await kv.put("other", b"o")
    hist = await kv.history("k")
    assert [(e.revision, e.value, e.delta) for e in hist] == [
        (3, b"3", 2),
        (4, b"4", 1),
        (5, b"5", 0),
    ]
    assert all(e.created is not None and e.bucket == "HIST" for e in hist)
    with pytest.raises(jse.NoKeysError):
        await kv.history("nothing")


async def test_keys_and_filters(js: Any) -> None:
    kv = await js.create_key_value(bucket="KEYS", history=4)
    with pytest.raises(jse.NoKeysError):
        await kv.keys()
    for key in ("a", "b.c", "b.d", "x", "a", "x.y.z"):
        await kv.put(key, key.encode())
    await kv.delete("x")
    await kv.purge("x.y.z")
    # Ordered by the revision of each key's last entry; deleted and purged keys left out.
    assert await kv.keys() == ["b.c", "b.d", "a"]
    assert sorted(await kv.keys(filters=["b."])) == ["b.c", "b.d"]
    with pytest.raises(jse.NoKeysError):
        await kv.keys(filters=["zzz"])
    # A watch on a key pattern is a consumer filtered on that subject.
    w = await kv.watch("b.*")
    assert [e.key for e in await drain_watch(w)] == ["b.c", "b.d"]
    await w.stop()


# --------------------------------------------------------------------------- watch
async def test_watch_last_values_then_updates(js: Any) -> None:
    kv = await js.create_key_value(bucket="W", history=5)
    await kv.put("a", b"1")
    await kv.put("b", b"1")
    await kv.put("a", b"2")
    await kv.delete("b")
    w = await kv.watchall()
    first = await drain_watch(w)
    assert ops(first) == [("a", 3, b"2", None), ("b", 4, b"", "DEL")]
    assert [e.delta for e in first] == [1, 0]
    await kv.put("c", b"new")
    await kv.delete("a")
    await kv.purge("c")
    live = [await w.updates(timeout=2) for _ in range(3)]
    assert ops(live) == [("c", 5, b"new", None), ("a", 6, b"", "DEL"), ("c", 7, b"", "PURGE")]
    with pytest.raises(nats.errors.TimeoutError):
        await w.updates(timeout=0.3)
    await w.stop()


async def test_watch_empty_bucket_signals_at_once(js: Any) -> None:
    kv = await js.create_key_value(bucket="WE")
    w = await kv.watchall()
    assert await w.updates(timeout=2) is None
    await kv.put("k", b"v")
    e = await w.updates(timeout=2)
    assert (e.key, e.value, e.revision, e.delta) == ("k", b"v", 1, 0)
    await w.stop()


async def test_watch_history_ignore_deletes_meta_only(js: Any) -> None:
    kv = await js.create_key_value(bucket="WH", history=5)
    await kv.put("a", b"1")
    await kv.put("a", b"2")
    await kv.put("b", b"1")
    await kv.delete("b")
    w = await kv.watch("a", include_history=True)
    assert ops(await drain_watch(w)) == [("a", 1, b"1", None), ("a", 2, b"2", None)]
    await w.stop()
    w = await kv.watchall(include_history=True, ignore_deletes=True)
    assert ops(await drain_watch(w)) == [
        ("a", 1, b"1", None),
        ("a", 2, b"2", None),
        ("b", 3, b"1", None),
    ]
    await kv.delete("a")
    await kv.put("b", b"2")
    e = await w.updates(timeout=2)
    assert (e.key, e.revision, e.value) == ("b", 6, b"2")  # the delete was skipped
    await w.stop()
    # Headers only: values come without their payload.
    w = await kv.watchall(meta_only=True)
    entries = await drain_watch(w)
    assert [(e.key, e.value, e.operation) for e in entries] == [("a", b"", "DEL"), ("b", b"", None)]
    await w.stop()


async def test_watch_updates_only_is_deliver_new(js: Any) -> None:
    """What updates-only watchers (Go, nats.js) ask for: an ordered consumer from now on."""
    kv = await js.create_key_value(bucket="WU", history=5)
    await kv.put("old", b"1")
    got: asyncio.Queue[Any] = asyncio.Queue()

    async def cb(msg: Any) -> None:
        await got.put(msg)

    sub = await js.subscribe(
        "$KV.WU.>", cb=cb, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW
    )
    info = await sub.consumer_info()
    assert info.num_pending == 0 and info.config.deliver_policy == DeliverPolicy.NEW
    await kv.put("new", b"2")
    await kv.delete("old")
    m1 = await asyncio.wait_for(got.get(), 2)
    m2 = await asyncio.wait_for(got.get(), 2)
    assert (m1.subject, m1.data, m1.metadata.sequence.stream) == ("$KV.WU.new", b"2", 2)
    assert (m2.subject, (m2.headers or {}).get(KV_OP)) == ("$KV.WU.old", "DEL")
    await sub.unsubscribe()


async def test_last_per_subject_consumers(js: Any) -> None:
    kv = await js.create_key_value(bucket="LPS", history=5)
    for key, v in (("a", "1"), ("b.x", "1"), ("a", "2"), ("c", "1"), ("b.y", "1"), ("c", "2")):
        await kv.put(key, v.encode())
    await kv.delete("b.x")
    psub = await js.pull_subscribe(
        "$KV.LPS.>",
        durable="LAST",
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, ack_policy=AckPolicy.NONE
        ),
    )
    info = await psub.consumer_info()
    assert info.num_pending == 4
    msgs = await psub.fetch(10, timeout=1)
    assert [(m.subject, m.metadata.sequence.stream) for m in msgs] == [
        ("$KV.LPS.a", 3),
        ("$KV.LPS.b.y", 5),
        ("$KV.LPS.c", 6),
        ("$KV.LPS.b.x", 7),
    ]
    assert [m.metadata.num_pending for m in msgs] == [3, 2, 1, 0]
    # Several filters (nats-server 2.10+), as multi-key watchers use.
    psub2 = await js.pull_subscribe_bind(
        durable=(
            await js.add_consumer(
                "KV_LPS",
                ConsumerConfig(
                    durable_name="MULTI",
                    deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                    ack_policy=AckPolicy.NONE,
                    filter_subjects=["$KV.LPS.a", "$KV.LPS.c"],
                ),
            )
        ).name,
        stream="KV_LPS",
    )
    msgs = await psub2.fetch(10, timeout=1)
    assert [(m.subject, m.data) for m in msgs] == [("$KV.LPS.a", b"2"), ("$KV.LPS.c", b"2")]


# --------------------------------------------------------------------------- TTLs
async def test_bucket_ttl_expires_values(js: Any) -> None:
    kv = await js.create_key_value(bucket="TTL", ttl=1, history=3)
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    assert (await kv.status()).values == 2

    async def gone() -> bool:
        return (await kv.status()).values == 0

    await wait_for(gone, timeout=4, interval=0.1, what="values to expire")
    with pytest.raises(jse.KeyNotFoundError):
        await kv.get("a")
    # Expiry leaves no marker without limit_marker_ttl.
    with pytest.raises(jse.NoKeysError):
        await kv.keys()


async def test_per_key_ttl(js: Any) -> None:
    kv = await js.create_key_value(bucket="KTTL", history=2)
    await kv.put("keep", b"k")
    t0 = time.monotonic()
    rev = await kv.create("short", b"s", msg_ttl=1)
    m = await msg_at(js, "KV_KTTL", rev)
    assert m.headers == {"Nats-TTL": "1", "Nats-Expected-Last-Subject-Sequence": "0"}
    assert (await kv.get("short")).value == b"s"

    async def expired() -> bool:
        try:
            await kv.get("short")
        except jse.KeyNotFoundError:
            return True
        return False

    await wait_for(expired, timeout=4, interval=0.1, what="the key to expire")
    assert time.monotonic() - t0 >= 0.9
    assert (await kv.get("keep")).value == b"k"
    assert (await kv.status()).values == 1
    # A purge marker with a TTL goes away too, leaving nothing of the key.
    await kv.put("p", b"1")
    await kv.purge("p", msg_ttl=1)

    async def purged_away() -> bool:
        return (await kv.status()).values == 1

    await wait_for(purged_away, timeout=4, interval=0.1, what="the purge marker to expire")
    assert await kv.keys() == ["keep"]


async def test_per_key_ttl_needs_a_valid_value(js: Any) -> None:
    await js.create_key_value(bucket="BADTTL")
    with pytest.raises(jse.APIError) as ai:
        await js.publish("$KV.BADTTL.k", b"v", headers={"Nats-TTL": "soon"})
    assert ai.value.err_code == 10165


async def test_limit_markers(js: Any) -> None:
    """limit_marker_ttl: a key removed by its TTL or the bucket's max_age leaves a marker
    (``Nats-Marker-Reason: MaxAge``) that watchers see as a PURGE."""
    kv = await js.create_key_value(
        KeyValueConfig(bucket="LM", history=3, ttl=1, limit_marker_ttl=2)
    )
    c = (await js.stream_info("KV_LM")).config
    assert c.subject_delete_marker_ttl == 2 and c.allow_msg_ttl is True
    w = await kv.watchall()
    assert await w.updates(timeout=2) is None
    await kv.put("k", b"v")
    e = await w.updates(timeout=2)
    assert (e.key, e.revision, e.operation) == ("k", 1, None)
    marker = await w.updates(timeout=4)
    assert (marker.key, marker.revision, marker.value, marker.operation) == (
        "k",
        2,
        b"",
        "PURGE",
    )
    m = await msg_at(js, "KV_LM", 2)
    assert m.headers == {"Nats-Marker-Reason": "MaxAge", "Nats-TTL": "2s", "Nats-Rollup": "sub"}
    # nats-py's get() reads only KV-Operation: the marker comes back as an empty entry.
    e = await kv.get("k")
    assert (e.revision, e.value) == (2, None)
    # A per-key TTL shorter than the marker TTL is raised to it (stored header too).
    rev = await kv.create("short", b"s", msg_ttl=1)
    assert (await msg_at(js, "KV_LM", rev)).headers["Nats-TTL"] == "2"
    await w.stop()


# --------------------------------------------------------------------------- republish
@pytest.mark.parametrize("headers_only", [False, True])
async def test_republish(nc: NATS, js: Any, headers_only: bool) -> None:
    got: asyncio.Queue[Any] = asyncio.Queue()

    async def cb(msg: Any) -> None:
        await got.put(msg)

    await nc.subscribe("repub.>", cb=cb)
    kv = await js.create_key_value(
        bucket="RP",
        history=3,
        republish=RePublish(src="$KV.RP.>", dest="repub.>", headers_only=headers_only),
    )
    rp = (await js.stream_info("KV_RP")).config.republish
    assert (rp.src, rp.dest, bool(rp.headers_only)) == ("$KV.RP.>", "repub.>", headers_only)
    await kv.put("a", b"one")
    await kv.put("b", b"two")
    await kv.put("a", b"three")
    await kv.delete("b")
    msgs = [await asyncio.wait_for(got.get(), 2) for _ in range(4)]
    assert [m.subject for m in msgs] == ["repub.a", "repub.b", "repub.a", "repub.b"]
    if headers_only:
        assert [m.data for m in msgs] == [b"", b"", b"", b""]
        assert [m.headers["Nats-Msg-Size"] for m in msgs] == ["3", "3", "5", "0"]
    else:
        assert [m.data for m in msgs] == [b"one", b"two", b"three", b""]
    h = msgs[2].headers
    assert (h["Nats-Stream"], h["Nats-Subject"], h["Nats-Sequence"]) == ("KV_RP", "$KV.RP.a", "3")
    # The previous revision of the same key (not the stream's previous message).
    assert h["Nats-Last-Sequence"] == "1"
    assert msgs[0].headers["Nats-Last-Sequence"] == "0"
    assert msgs[1].headers["Nats-Last-Sequence"] == "0"
    assert msgs[3].headers["Nats-Last-Sequence"] == "2"
    assert "Nats-Time-Stamp" in h
    assert msgs[3].headers[KV_OP] == "DEL"
