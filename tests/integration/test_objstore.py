"""Object Store buckets through nats-py's own Object Store API (ADR-20), unchanged.

Bucket create/bind/status/seal/delete, put and get of objects of 0 bytes, one chunk and
many chunks (a 50 MB one is ``slow``), info, list, delete, replace, links, meta updates,
watch and digest checks (a chunk lost or replaced after the put is caught by the client).

``NATSD_IT_TARGET=nats-server`` runs the very same tests against the Go server; otherwise an
embedded natsd serves them (the ``js_url`` fixture of test_kv.py).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import nats.errors
import nats.js.errors as jse
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import (
    ObjectLink,
    ObjectMeta,
    ObjectMetaOptions,
    StorageType,
)

from .test_kv import js_url  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(60)

CHUNK = 128 * 1024


@pytest.fixture
async def nc(connect: Callable[..., Awaitable[NATS]], js_url: str) -> NATS:  # noqa: F811
    return await connect(js_url)


@pytest.fixture
def js(nc: NATS) -> Any:
    return nc.jetstream(timeout=5)


def digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


async def drain(w: Any, timeout: float = 2.0) -> list[Any]:
    out = []
    while True:
        e = await w.updates(timeout=timeout)
        if e is None:
            return out
        out.append(e)


# --------------------------------------------------------------------------- buckets
@pytest.mark.parametrize("storage", [StorageType.FILE, StorageType.MEMORY])
async def test_bucket_config_status_and_delete(js: Any, storage: StorageType) -> None:
    with pytest.raises(jse.BucketNotFoundError):
        await js.object_store("FILES")
    obs = await js.create_object_store("FILES", description="test files", ttl=3600, storage=storage)
    c = (await js.stream_info("OBJ_FILES")).config
    assert c.name == "OBJ_FILES" and c.subjects == ["$O.FILES.C.>", "$O.FILES.M.>"]
    assert c.description == "test files" and c.max_age == 3600
    assert c.discard == "new" and c.allow_rollup_hdrs is True and c.allow_direct is True
    assert c.max_bytes == -1 and c.storage == storage and c.num_replicas == 1
    assert c.deny_delete is False and c.deny_purge is False
    st = await obs.status()
    assert (st.bucket, st.description, st.ttl, st.storage_type, st.replicas) == (
        "FILES",
        "test files",
        3600,
        storage,
        1,
    )
    assert st.sealed is False and st.size == 0
    await obs.put("a", b"x" * 10)
    assert (await obs.status()).size > 10
    obs2 = await js.object_store("FILES")
    assert (await obs2.get("a")).data == b"x" * 10
    assert await js.delete_object_store("FILES") is True
    with pytest.raises(jse.BucketNotFoundError):
        await js.object_store("FILES")


async def test_seal_refuses_changes(js: Any) -> None:
    obs = await js.create_object_store("SEAL")
    await obs.put("a", b"data")
    await obs.seal()
    st = await obs.status()
    assert st.sealed is True
    assert (await obs.get("a")).data == b"data"
    with pytest.raises(jse.APIError):
        await obs.put("b", b"more")


# --------------------------------------------------------------------------- put / get
@pytest.mark.parametrize(
    "size,chunks",
    [(0, 0), (1, 1), (1000, 1), (CHUNK, 1), (CHUNK + 1, 2), (5 * CHUNK + 17, 6)],
    ids=["empty", "one-byte", "small", "one-full-chunk", "two-chunks", "six-chunks"],
)
async def test_put_get_sizes(js: Any, size: int, chunks: int) -> None:
    obs = await js.create_object_store("SIZES")
    data = os.urandom(size)
    info = await obs.put("blob.bin", data)
    assert (info.name, info.bucket, info.size, info.chunks) == ("blob.bin", "SIZES", size, chunks)
    assert info.digest == digest(data) and info.nuid and not info.deleted
    res = await obs.get("blob.bin")
    assert res.data == data
    assert (res.info.size, res.info.chunks, res.info.digest) == (size, chunks, digest(data))
    # Streamed into a file-like object too.
    sink = io.BytesIO()
    await obs.get("blob.bin", writeinto=sink)
    assert sink.getvalue() == data
    st = (await js.stream_info("OBJ_SIZES")).state
    assert st.messages == chunks + 1  # the chunks and one meta message


async def test_put_small_chunks_and_meta(js: Any) -> None:
    obs = await js.create_object_store("META")
    data = os.urandom(10_000)
    meta = ObjectMeta(
        name="report.pdf",
        description="quarterly report",
        headers={"Content-Type": ["application/pdf"]},
        options=ObjectMetaOptions(max_chunk_size=1024),
    )
    info = await obs.put("", data, meta=meta)
    assert (info.size, info.chunks) == (10_000, 10)
    got = await obs.get_info("report.pdf")
    assert got.description == "quarterly report"
    assert got.headers == {"Content-Type": ["application/pdf"]}
    assert got.options.max_chunk_size == 1024
    assert (got.size, got.chunks, got.digest, got.nuid) == (10_000, 10, digest(data), info.nuid)
    assert (await obs.get("report.pdf")).data == data
    # The meta message is JSON on $O.<bucket>.M.<base64url(name)>, kept by a rollup.
    raw = await js.get_last_msg("OBJ_META", meta_subject("META", "report.pdf"))
    doc = json.loads(raw.data)
    assert doc["name"] == "report.pdf" and doc["chunks"] == 10 and doc["nuid"] == info.nuid
    assert raw.headers == {"Nats-Rollup": "sub"}
    # Direct get of the same (the stream allows direct).
    d = await js.get_msg("OBJ_META", subject=meta_subject("META", "report.pdf"), direct=True)
    assert json.loads(d.data)["digest"] == digest(data)


async def test_replace_purges_old_chunks(js: Any) -> None:
    obs = await js.create_object_store("REPL")
    first = await obs.put("f", os.urandom(3 * CHUNK))
    second = await obs.put("f", b"short")
    assert first.nuid != second.nuid
    assert (await obs.get("f")).data == b"short"
    st = (await js.stream_info("OBJ_REPL")).state
    assert st.messages == 2  # one chunk and one meta; the old chunks and meta are gone


async def test_get_info_and_list(js: Any) -> None:
    obs = await js.create_object_store("LS")
    with pytest.raises(jse.NotFoundError):
        await obs.list()
    with pytest.raises(jse.ObjectNotFoundError):
        await obs.get_info("nope")
    with pytest.raises(jse.ObjectNotFoundError):
        await obs.get("nope")
    for name, data in (("b", b"bb"), ("a", b"a"), ("dir/c.txt", b"ccc"), ("sp ace", b"")):
        await obs.put(name, data)
    infos = await obs.list()
    assert [(i.name, i.size) for i in infos] == [
        ("b", 2),
        ("a", 1),
        ("dir/c.txt", 3),
        ("sp ace", 0),
    ]
    await obs.delete("a")
    assert [i.name for i in await obs.list(ignore_deletes=True)] == ["b", "dir/c.txt", "sp ace"]
    names = [(i.name, bool(i.deleted)) for i in await obs.list()]
    assert names == [("b", False), ("dir/c.txt", False), ("sp ace", False), ("a", True)]


async def test_delete(js: Any) -> None:
    obs = await js.create_object_store("DEL")
    await obs.put("keep", b"k")
    await obs.put("gone", os.urandom(2 * CHUNK))
    await obs.delete("gone")
    with pytest.raises(jse.ObjectNotFoundError):
        await obs.get_info("gone")
    with pytest.raises(jse.ObjectNotFoundError):
        await obs.get("gone")
    info = await obs.get_info("gone", show_deleted=True)
    assert info.deleted is True and (info.size, info.chunks, info.digest) == (0, 0, "")
    # The chunks were purged: keep's chunk + meta, gone's meta.
    st = (await js.stream_info("OBJ_DEL")).state
    assert st.messages == 3
    with pytest.raises(jse.ObjectNotFoundError):
        await obs.delete("gone")
    # A deleted name can be put again.
    await obs.put("gone", b"back")
    assert (await obs.get("gone")).data == b"back"


# --------------------------------------------------------------------------- links / meta
async def test_links(js: Any) -> None:
    src = await js.create_object_store("SRC")
    dst = await js.create_object_store("DST")
    data = os.urandom(CHUNK + 10)
    await src.put("target", data)
    # nats-py has no link helper: a link is an empty object whose meta names the target.
    link = ObjectMeta(
        name="alias",
        options=ObjectMetaOptions(
            link=ObjectLink(bucket="SRC", name="target"), max_chunk_size=CHUNK
        ),
    )
    info = await dst.put("alias", b"", meta=link)
    assert info.is_link() and info.size == 0
    got = await dst.get("alias")
    assert got.data == data and got.info.name == "target" and got.info.bucket == "SRC"
    # A link to a whole bucket cannot be read as an object.
    opts = ObjectMetaOptions(link=ObjectLink(bucket="SRC"), max_chunk_size=CHUNK)
    await dst.put("", b"", meta=ObjectMeta(name="all", options=opts))
    with pytest.raises(jse.LinkIsABucketError):
        await dst.get("all")
    li = await dst.get_info("all")
    assert li.options.link.bucket == "SRC" and not li.options.link.name


async def test_update_meta(js: Any) -> None:
    obs = await js.create_object_store("UPD")
    data = os.urandom(3000)
    before = await obs.put("doc", data)
    await obs.update_meta(
        "doc", ObjectMeta(name="doc", description="now described", headers={"X-A": ["1"]})
    )
    info = await obs.get_info("doc")
    assert info.description == "now described" and info.headers == {"X-A": ["1"]}
    assert (info.nuid, info.size, info.digest) == (before.nuid, 3000, digest(data))
    assert (await obs.get("doc")).data == data
    # Only the latest meta message is kept (rollup on the meta subject).
    st = (await js.stream_info("OBJ_UPD")).state
    assert st.messages == 2
    with pytest.raises(jse.ObjectDeletedError):
        await obs.update_meta("missing", ObjectMeta(name="missing"))


# --------------------------------------------------------------------------- watch
async def test_watch(js: Any) -> None:
    obs = await js.create_object_store("WATCH")
    w = await obs.watch()
    assert await w.updates(timeout=2) is None  # empty bucket: initial marker at once
    await obs.put("a", b"1")
    e = await w.updates(timeout=2)
    assert (e.name, e.size, e.deleted) == ("a", 1, False)
    await obs.delete("a")
    e = await w.updates(timeout=2)
    assert (e.name, e.deleted) == ("a", True)
    await w.stop()
    await obs.put("b", b"22")
    await obs.put("b", b"333")
    # Last values first, then the initial marker.
    w = await obs.watch()
    assert [(i.name, i.size, bool(i.deleted)) for i in await drain(w)] == [
        ("a", 0, True),
        ("b", 3, False),
    ]
    await w.stop()
    # include_history: meta messages are rolled up per object, so the same here.
    w = await obs.watch(include_history=True, ignore_deletes=True)
    assert [(i.name, i.size) for i in await drain(w)] == [("b", 3)]
    await w.stop()
    # updates_only: nothing of the past, no initial marker.
    w = await obs.watch(updates_only=True)
    with pytest.raises(nats.errors.TimeoutError):
        await w.updates(timeout=0.3)
    await obs.put("c", b"c")
    e = await w.updates(timeout=2)
    assert (e.name, e.size) == ("c", 1)
    await w.stop()


# --------------------------------------------------------------------------- digests
async def test_digest_mismatch_is_detected(js: Any) -> None:
    obs = await js.create_object_store("DIG")
    data = os.urandom(3000)
    info = await obs.put("f", data, meta=ObjectMeta(options=ObjectMetaOptions(max_chunk_size=1000)))
    assert info.chunks == 3
    # Chunks are seqs 1..3; swap the middle one for different bytes of the same size.
    await js.delete_msg("OBJ_DIG", 2)
    await js.publish(f"$O.DIG.C.{info.nuid}", os.urandom(1000))
    with pytest.raises(jse.DigestMismatchError):
        await obs.get("f")
    # A lost chunk is caught the same way.
    info = await obs.put("g", data, meta=ObjectMeta(options=ObjectMetaOptions(max_chunk_size=1000)))
    seqs = [m.seq for m in [await js.get_msg("OBJ_DIG", subject=f"$O.DIG.C.{info.nuid}")]]
    await js.delete_msg("OBJ_DIG", seqs[0])
    with pytest.raises(jse.DigestMismatchError):
        await obs.get("g")


@pytest.mark.slow
async def test_put_get_50mb(js: Any) -> None:
    obs = await js.create_object_store("BIG")
    data = os.urandom(50 * 1024 * 1024)
    info = await obs.put("big.bin", data)
    assert (info.size, info.chunks) == (len(data), 400)
    sink = io.BytesIO()
    res = await obs.get("big.bin", writeinto=sink)
    assert sink.getvalue() == data and res.info.digest == digest(data)
    st = (await js.stream_info("OBJ_BIG")).state
    assert st.messages == 401 and st.bytes > len(data)
