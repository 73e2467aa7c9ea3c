"""``nats object``: add, put, get, ls, info, rm, del.

The store layout is the one every NATS client uses: a stream ``OBJ_<bucket>`` holding chunks
on ``$O.<bucket>.C.<nuid>`` and one metadata message per object on
``$O.<bucket>.M.<base64url(name)>`` (rolled up, so only the latest remains), with a SHA-256
digest of the content. Uploads keep a window of chunk publishes in flight; downloads walk the
chunks with STREAM.MSG.GET ``next_by_subj`` (no consumer needed) and check the digest.
Transfers show a progress bar on a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from .common import bucket_row, list_buckets
from .conn import ApiError, JsApi, Session
from .output import (
    CliError,
    confirm,
    console,
    human_bytes,
    human_count,
    human_duration,
    human_time,
    info,
    limit,
    parse_duration,
    parse_size,
    print_json,
    print_section,
    print_table,
    progress_bar,
)
from .pubsub import parse_headers
from .stream import STORAGE, get_message

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]

CHUNK = 128 * 1024
WINDOW = 32


def _enc(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    ob = sub.add_parser("object", aliases=["obj"], help="Object store", parents=parents)
    os_ = ob.add_subparsers(dest="obj_cmd", metavar="COMMAND", required=True)

    def cmd(name: str, fn: Handler, help: str, aliases: list[str] | None = None) -> Any:
        p = os_.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd("add", obj_add, "Add a bucket", ["new"])
    p.add_argument("bucket")
    p.add_argument("--ttl", default="", help="How long objects are kept")
    p.add_argument("--replicas", type=int, default=1, help="Replicas")
    p.add_argument("--storage", choices=sorted(STORAGE), default="file", help="Storage backend")
    p.add_argument("--max-bucket-size", default="-1", help="Maximum size of the bucket")
    p.add_argument("--description", default="", help="Description")
    p.add_argument("--compress", action="store_true", help="Compress the stored data")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("put", obj_put, "Put a file into the store")
    p.add_argument("bucket")
    p.add_argument("file", nargs="?", help="File to store (stdin when not given, needs --name)")
    p.add_argument("--name", help="Object name (default: the file's name)")
    p.add_argument("--description", default="", help="Description")
    p.add_argument("-H", "--header", action="append", help="Header Key:Value (repeatable)")
    p.add_argument("--chunk-size", default="128KiB", help="Chunk size (default 128KiB)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("-f", "--force", action="store_true", help="Replace without prompting")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("get", obj_get, "Get an object")
    p.add_argument("bucket")
    p.add_argument("name")
    p.add_argument("-O", "--output", help="File to write ('-' for stdout; default ./NAME)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("-f", "--force", action="store_true", help="Overwrite without prompting")

    p = cmd("ls", obj_ls, "List buckets, or the objects of a bucket", ["list"])
    p.add_argument("bucket", nargs="?")
    p.add_argument("-n", "--names", action="store_true", help="Show just the names")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("info", obj_info, "Bucket or object information", ["status"])
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("rm", obj_rm, "Remove a bucket, or an object from it", ["del"])
    p.add_argument("bucket")
    p.add_argument("name", nargs="?")
    p.add_argument("-f", "--force", action="store_true", help="Remove without prompting")


async def _bucket(api: JsApi, bucket: str) -> dict[str, Any]:
    try:
        return await api.request(f"STREAM.INFO.OBJ_{bucket}")
    except ApiError as e:
        if e.err_code == 10059:
            raise CliError(f"object store {bucket} not found") from e
        raise


async def obj_add(s: Session, a: argparse.Namespace) -> None:
    cfg: dict[str, Any] = {
        "name": f"OBJ_{a.bucket}",
        "subjects": [f"$O.{a.bucket}.C.>", f"$O.{a.bucket}.M.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": parse_size(a.max_bucket_size),
        "max_age": parse_duration(a.ttl) if a.ttl else 0,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "storage": STORAGE[a.storage],
        "discard": "new",
        "num_replicas": a.replicas,
        "allow_rollup_hdrs": True,
        "allow_direct": True,
    }
    if a.description:
        cfg["description"] = a.description
    if a.compress:
        cfg["compression"] = "s2"
    api = await s.api()
    try:
        nfo = await api.request(f"STREAM.CREATE.OBJ_{a.bucket}", cfg)
    except ApiError as e:
        raise CliError(f"could not create object store {a.bucket}: {e}") from e
    if a.json:
        print_json(nfo)
        return
    show_bucket(a.bucket, nfo)


async def _meta(api: JsApi, bucket: str, name: str) -> dict[str, Any] | None:
    m = await get_message(api, f"OBJ_{bucket}", {"last_by_subj": f"$O.{bucket}.M.{_enc(name)}"})
    if m is None:
        return None
    meta: dict[str, Any] = json.loads(base64.b64decode(m.get("data") or ""))
    if not meta.get("mtime"):
        meta["mtime"] = m.get("time")
    return meta


async def _js_pub(
    s: Session, subject: str, data: bytes, headers: dict[str, str] | None = None
) -> None:
    nc = await s.nc()
    r = await nc.request(subject, data, timeout=max(s.opts.timeout, 10.0), headers=headers)
    ack = json.loads(r.data)
    err = ack.get("error")
    if isinstance(err, dict):
        raise ApiError(
            int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description"))
        )


async def obj_put(s: Session, a: argparse.Namespace) -> None:
    if a.file is None and not a.name:
        raise CliError("--name is required when reading from stdin")
    name = a.name or Path(a.file).name
    chunk_size = parse_size(a.chunk_size)
    if chunk_size <= 0:
        raise CliError("invalid --chunk-size")
    src: BinaryIO
    if a.file is None or a.file == "-":
        src = sys.stdin.buffer
        total: int | None = None
    else:
        try:
            src = open(a.file, "rb")  # noqa: SIM115 (closed below)
        except OSError as e:
            raise CliError(f"could not open {a.file}: {e.strerror}") from e
        total = os.fstat(src.fileno()).st_size
    api = await s.api()
    await _bucket(api, a.bucket)
    old = await _meta(api, a.bucket, name)
    if (
        old is not None
        and not old.get("deleted")
        and not confirm(f"Replace existing object {a.bucket} > {name}", a.force)
    ):
        return
    nuid = secrets.token_hex(11).upper()
    chunk_subj = f"$O.{a.bucket}.C.{nuid}"
    h = hashlib.sha256()
    size = chunks = 0
    start = time.monotonic()
    pending: set[asyncio.Task[None]] = set()
    try:
        with progress_bar(total, f"{name}", enabled=a.progress) as bar:
            task = bar.add_task(f"{name}", total=total)
            while True:
                data = src.read(chunk_size)
                if not data:
                    break
                h.update(data)
                size += len(data)
                chunks += 1
                if chunks == 1:
                    # The first request sets up nats-py's reply subscription; after it, tasks
                    # append their publishes in creation order, so chunks are stored in order.
                    await _js_pub(s, chunk_subj, data)
                else:
                    pending.add(asyncio.create_task(_js_pub(s, chunk_subj, data)))
                bar.advance(task, len(data))
                if len(pending) >= WINDOW:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for d in done:
                        d.result()
            if pending:
                results = await asyncio.gather(*pending, return_exceptions=True)
                pending = set()
                for r in results:
                    if isinstance(r, BaseException):
                        raise r
    except BaseException:
        for t in pending:
            t.cancel()
        try:
            await api.request(f"STREAM.PURGE.OBJ_{a.bucket}", {"filter": chunk_subj})
        except CliError:
            pass
        raise
    finally:
        if src is not sys.stdin.buffer:
            src.close()
    meta: dict[str, Any] = {
        "name": name,
        "description": a.description,
        "options": {"max_chunk_size": chunk_size},
        "bucket": a.bucket,
        "nuid": nuid,
        "size": size,
        "mtime": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "chunks": chunks,
        "digest": "SHA-256=" + base64.urlsafe_b64encode(h.digest()).decode(),
    }
    hdrs = parse_headers(a.header, templates=False)
    if hdrs:
        meta["headers"] = {k: [v] for k, v in hdrs.items()}
    if not meta["description"]:
        del meta["description"]
    await _js_pub(
        s, f"$O.{a.bucket}.M.{_enc(name)}", json.dumps(meta).encode(), {"Nats-Rollup": "sub"}
    )
    if old is not None and old.get("nuid") and not old.get("deleted"):
        await api.request(
            f"STREAM.PURGE.OBJ_{a.bucket}", {"filter": f"$O.{a.bucket}.C.{old['nuid']}"}
        )
    elapsed = time.monotonic() - start
    if a.json:
        print_json(meta)
        return
    if not sys.stderr.isatty() or not a.progress:
        info(f"Stored {human_bytes(size)} in {chunks} chunks in {human_duration(elapsed * 1e9)}")
    show_object(meta)


async def obj_get(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await _bucket(api, a.bucket)
    meta = await _meta(api, a.bucket, a.name)
    if meta is None or meta.get("deleted"):
        raise CliError(f"object {a.bucket} > {a.name} not found")
    link = (meta.get("options") or {}).get("link")
    if link:
        raise CliError(f"{a.name} is a link to {link.get('bucket')} > {link.get('name', '')}")
    out_path = a.output or os.path.basename(a.name) or "object"
    to_stdout = out_path == "-"
    if (
        not to_stdout
        and os.path.exists(out_path)
        and not confirm(f"Replace existing file {out_path}", a.force)
    ):
        return
    total = int(meta.get("size") or 0)
    chunk_subj = f"$O.{a.bucket}.C.{meta['nuid']}"
    h = hashlib.sha256()
    got = 0
    start = time.monotonic()
    tmp = None if to_stdout else f"{out_path}.{secrets.token_hex(4)}.partial"
    dst: BinaryIO = sys.stdout.buffer if to_stdout else open(tmp or "", "wb")  # noqa: SIM115
    ok = False
    try:
        with progress_bar(total, a.name, enabled=a.progress and not to_stdout) as bar:
            task = bar.add_task(a.name, total=total)
            seq = 1
            remaining = int(meta.get("chunks") or 0)
            while remaining > 0:
                m = await get_message(
                    api, f"OBJ_{a.bucket}", {"seq": seq, "next_by_subj": chunk_subj}
                )
                if m is None:
                    break
                data = base64.b64decode(m.get("data") or "")
                h.update(data)
                dst.write(data)
                got += len(data)
                bar.advance(task, len(data))
                seq = int(m["seq"]) + 1
                remaining -= 1
        digest = "SHA-256=" + base64.urlsafe_b64encode(h.digest()).decode()
        if got != total:
            raise CliError(f"object {a.name} is incomplete: got {got} of {total} bytes")
        if meta.get("digest") and digest.lower() != str(meta["digest"]).lower():
            raise CliError(f"object {a.name} is corrupt: digest mismatch")
        ok = True
    finally:
        if not to_stdout:
            dst.close()
            if ok and tmp:
                os.replace(tmp, out_path)
            elif tmp and os.path.exists(tmp):
                os.unlink(tmp)
        else:
            dst.flush()
    if not to_stdout:
        elapsed = time.monotonic() - start
        info(f"Wrote: {human_bytes(got)} to {out_path} in {human_duration(elapsed * 1e9)}")


async def _list_objects(api: JsApi, bucket: str) -> list[dict[str, Any]]:
    nfo = await api.request(f"STREAM.INFO.OBJ_{bucket}", {"subjects_filter": f"$O.{bucket}.M.>"})
    subjects = ((nfo.get("state") or {}).get("subjects")) or {}
    out = []
    for subj in sorted(subjects):
        m = await get_message(api, f"OBJ_{bucket}", {"last_by_subj": subj})
        if m is None:
            continue
        meta = json.loads(base64.b64decode(m.get("data") or ""))
        if meta.get("deleted"):
            continue
        if not meta.get("mtime"):
            meta["mtime"] = m.get("time")
        out.append(meta)
    out.sort(key=lambda x: str(x.get("name")))
    return out


async def obj_ls(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    if a.bucket:
        await _bucket(api, a.bucket)
        objs = await _list_objects(api, a.bucket)
        if a.json:
            print_json(objs)
            return
        if a.names:
            for o in objs:
                console.print(str(o.get("name")), markup=False)
            return
        if not objs:
            console.print(f"No entries found in bucket {a.bucket}")
            return
        print_table(
            "Bucket Contents",
            ["Name", "Size", "Time"],
            [(o.get("name"), human_bytes(o.get("size")), human_time(o.get("mtime"))) for o in objs],
            right=[1],
        )
        return
    infos = await list_buckets(api, a, "OBJ_", "No Object Store buckets found")
    if infos is None:
        return
    rows = [bucket_row(i, "OBJ_") for i in infos]
    print_table(
        "Object Store Buckets",
        ["Bucket", "Description", "Created", "Size", "Last Update"],
        rows,
        right=[3],
    )


def show_object(meta: dict[str, Any]) -> None:
    digest = str(meta.get("digest") or "")
    hexd = ""
    if digest.upper().startswith("SHA-256="):
        try:
            hexd = base64.urlsafe_b64decode(digest[8:]).hex()
        except ValueError:
            hexd = digest
    pairs: list[tuple[str, Any]] = [
        ("Size", human_bytes(meta.get("size"))),
        ("Modification Time", human_time(meta.get("mtime"))),
        ("Chunks", human_count(meta.get("chunks"))),
        ("Digest", f"SHA-256 {hexd}" if hexd else digest),
    ]
    if meta.get("description"):
        pairs.insert(0, ("Description", meta["description"]))
    for k, vals in (meta.get("headers") or {}).items():
        pairs.append((f"Header {k}", ", ".join(vals) if isinstance(vals, list) else vals))
    print_section(f"Object information for {meta.get('bucket')} > {meta.get('name')}", pairs)


def show_bucket(bucket: str, nfo: dict[str, Any]) -> None:
    cfg = nfo.get("config") or {}
    st = nfo.get("state") or {}
    max_age = cfg.get("max_age") or 0
    print_section(f"{bucket} Object Store Status", [])
    pairs: list[tuple[str, Any]] = [
        ("Bucket Name", bucket),
        ("Replicas", cfg.get("num_replicas", 1)),
        ("TTL", human_duration(max_age) if max_age else "unlimited"),
        ("Sealed", "true" if cfg.get("sealed") else "false"),
        ("Size", human_bytes(st.get("bytes"))),
        ("Maximum Bucket Size", limit(cfg.get("max_bytes"), human_bytes)),
        ("Backing Store Kind", "JetStream"),
        ("JetStream Stream", cfg.get("name")),
        ("Storage", str(cfg.get("storage", "file")).capitalize()),
    ]
    if cfg.get("description"):
        pairs.insert(1, ("Description", cfg["description"]))
    print_section(None, pairs)


async def obj_info(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    nfo = await _bucket(api, a.bucket)
    if not a.name:
        if a.json:
            print_json(nfo)
            return
        show_bucket(a.bucket, nfo)
        return
    meta = await _meta(api, a.bucket, a.name)
    if meta is None or meta.get("deleted"):
        raise CliError(f"object {a.bucket} > {a.name} not found")
    if a.json:
        print_json(meta)
        return
    show_object(meta)


async def obj_rm(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await _bucket(api, a.bucket)
    if not a.name:
        if not confirm(f"Delete bucket {a.bucket} and all its objects", a.force):
            return
        await api.request(f"STREAM.DELETE.OBJ_{a.bucket}")
        return
    meta = await _meta(api, a.bucket, a.name)
    if meta is None or meta.get("deleted"):
        raise CliError(f"object {a.bucket} > {a.name} not found")
    if not confirm(f"Delete {human_bytes(meta.get('size'))} from {a.bucket} > {a.name}", a.force):
        return
    gone = dict(meta)
    gone.update(
        deleted=True,
        size=0,
        chunks=0,
        digest="",
        mtime=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    )
    await _js_pub(
        s, f"$O.{a.bucket}.M.{_enc(a.name)}", json.dumps(gone).encode(), {"Nats-Rollup": "sub"}
    )
    if meta.get("nuid"):
        await api.request(
            f"STREAM.PURGE.OBJ_{a.bucket}", {"filter": f"$O.{a.bucket}.C.{meta['nuid']}"}
        )
