"""``nats kv``: add, put, get, del, purge, create, update, ls, watch, history, info, rm.

Buckets are streams named ``KV_<bucket>`` on ``$KV.<bucket>.>`` (the layout every NATS client
uses). put/get/del go straight to the stream (publish, DIRECT.GET or MSG.GET); ls of keys,
watch and history use an ordered consumer through nats-py's KeyValue, as the Go CLI does.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import re
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

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
)
from .pubsub import require_consumers
from .stream import STORAGE, decode_headers, get_message

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]

_BUCKET = re.compile(r"^[a-zA-Z0-9_-]+$")
_KEY = re.compile(r"^[-/_=.a-zA-Z0-9]+$")


def _check_bucket(b: str) -> None:
    if not _BUCKET.match(b):
        raise CliError(f"invalid bucket name {b!r} (letters, digits, '-' and '_')")


def _check_key(k: str) -> None:
    if not _KEY.match(k) or k.startswith(".") or k.endswith("."):
        raise CliError(f"invalid key {k!r}")


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    kv = sub.add_parser("kv", help="Key-Value store", parents=parents)
    ks = kv.add_subparsers(dest="kv_cmd", metavar="COMMAND", required=True)

    def cmd(name: str, fn: Handler, help: str, aliases: list[str] | None = None) -> Any:
        p = ks.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd("add", kv_add, "Add a bucket", ["new"])
    p.add_argument("bucket", help="Bucket name")
    p.add_argument("--history", type=int, default=1, help="How many values to keep per key")
    p.add_argument("--ttl", default="", help="How long values are kept (e.g. 1h)")
    p.add_argument("--replicas", type=int, default=1, help="Replicas")
    p.add_argument("--max-value-size", default="-1", help="Maximum size of a value")
    p.add_argument("--max-bucket-size", default="-1", help="Maximum size of the bucket")
    p.add_argument("--storage", choices=sorted(STORAGE), default="file", help="Storage backend")
    p.add_argument("--description", default="", help="Description")
    p.add_argument("--compress", action="store_true", help="Compress the stored data")
    p.add_argument("--marker-ttl", help="Keep delete markers this long (enables per-key TTLs)")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("put", kv_put, "Put a value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?", help="The value (stdin when not given)")

    p = cmd("create", kv_create, "Put a value only if the key does not exist")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?", help="The value (stdin when not given)")

    p = cmd("update", kv_update, "Update a key if its revision is the given one")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("value", nargs="?", help="The value (stdin when not given)")
    p.add_argument("revision", type=int, nargs="?", help="The expected last revision")

    p = cmd("get", kv_get, "Get a value")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("--revision", type=int, help="Get a specific revision")
    p.add_argument("--raw", action="store_true", help="Show only the value")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("del", kv_del, "Delete a key", ["rm-key"])
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("-f", "--force", action="store_true", help="Delete without prompting")

    p = cmd("purge", kv_purge, "Delete a key and its history")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("-f", "--force", action="store_true", help="Purge without prompting")

    p = cmd("ls", kv_ls, "List buckets, or the keys of a bucket", ["list"])
    p.add_argument("bucket", nargs="?", help="List the keys of this bucket")
    p.add_argument("-n", "--names", action="store_true", help="Show just the names")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("watch", kv_watch, "Watch a bucket or keys for changes")
    p.add_argument("bucket")
    p.add_argument("key", nargs="?", default=">", help="Key or wildcard (default all)")
    p.add_argument("--count", type=int, default=0, help="Exit after this many updates")
    p.add_argument("--wait", help="Exit after this long, e.g. 10s")

    p = cmd("history", kv_history, "History of a key")
    p.add_argument("bucket")
    p.add_argument("key")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("info", kv_info, "Bucket information", ["status"])
    p.add_argument("bucket")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("rm", kv_rm, "Remove a bucket")
    p.add_argument("bucket")
    p.add_argument("-f", "--force", action="store_true", help="Remove without prompting")


def _value(v: str | None) -> bytes:
    if v is not None:
        return v.encode()
    return sys.stdin.buffer.read()


async def _bucket_info(api: JsApi, bucket: str) -> dict[str, Any]:
    _check_bucket(bucket)
    try:
        return await api.request(f"STREAM.INFO.KV_{bucket}")
    except ApiError as e:
        if e.err_code == 10059:
            raise CliError(f"bucket {bucket} not found") from e
        raise


async def kv_add(s: Session, a: argparse.Namespace) -> None:
    _check_bucket(a.bucket)
    if not 1 <= a.history <= 64:
        raise CliError("--history must be between 1 and 64")
    ttl = parse_duration(a.ttl) if a.ttl else 0
    dupe = 2 * 60 * 10**9
    if 0 < ttl < dupe:
        dupe = ttl
    cfg: dict[str, Any] = {
        "name": f"KV_{a.bucket}",
        "subjects": [f"$KV.{a.bucket}.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": parse_size(a.max_bucket_size),
        "max_age": ttl,
        "max_msgs_per_subject": a.history,
        "max_msg_size": parse_size(a.max_value_size),
        "storage": STORAGE[a.storage],
        "discard": "new",
        "num_replicas": a.replicas,
        "duplicate_window": dupe,
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "deny_purge": False,
        "allow_direct": True,
        "mirror_direct": False,
    }
    if a.description:
        cfg["description"] = a.description
    if a.compress:
        cfg["compression"] = "s2"
    if a.marker_ttl:
        cfg["allow_msg_ttl"] = True
        cfg["subject_delete_marker_ttl"] = parse_duration(a.marker_ttl)
    api = await s.api()
    try:
        info = await api.request(f"STREAM.CREATE.KV_{a.bucket}", cfg)
    except ApiError as e:
        raise CliError(f"could not create bucket {a.bucket}: {e}") from e
    if a.json:
        print_json(info)
        return
    show_bucket(a.bucket, info)


async def _publish(
    s: Session, subject: str, data: bytes, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    nc = await s.nc()
    try:
        r = await nc.request(subject, data, timeout=s.opts.timeout, headers=headers)
    except NoRespondersError as e:
        raise CliError("bucket not found (no stream listens on its subjects)") from e
    except NatsTimeout as e:
        raise CliError("no acknowledgement from the server") from e
    ack: dict[str, Any] = json.loads(r.data)
    err = ack.get("error")
    if isinstance(err, dict):
        raise ApiError(
            int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description"))
        )
    return ack


def _key_subject(bucket: str, key: str) -> str:
    _check_bucket(bucket)
    _check_key(key)
    return f"$KV.{bucket}.{key}"


async def kv_put(s: Session, a: argparse.Namespace) -> None:
    subj = _key_subject(a.bucket, a.key)
    data = _value(a.value)
    await _bucket_info(await s.api(), a.bucket)
    await _publish(s, subj, data)
    console.file.write(data.decode(errors="replace") + "\n")


async def kv_create(s: Session, a: argparse.Namespace) -> None:
    subj = _key_subject(a.bucket, a.key)
    data = _value(a.value)
    api = await s.api()
    await _bucket_info(api, a.bucket)
    last = await _last_entry(api, a.bucket, a.key)
    expected = "0"
    if last is not None and _op(last) in ("DEL", "PURGE"):
        expected = str(last["seq"])
    try:
        await _publish(s, subj, data, {"Nats-Expected-Last-Subject-Sequence": expected})
    except ApiError as e:
        if e.err_code == 10071:
            raise CliError(f"key {a.key} exists") from e
        raise
    console.file.write(data.decode(errors="replace") + "\n")


async def kv_update(s: Session, a: argparse.Namespace) -> None:
    subj = _key_subject(a.bucket, a.key)
    if a.revision is None:
        raise CliError("the expected revision is required")
    data = _value(a.value)
    try:
        await _publish(s, subj, data, {"Nats-Expected-Last-Subject-Sequence": str(a.revision)})
    except ApiError as e:
        if e.err_code == 10071:
            raise CliError(f"revision {a.revision} is not the latest of {a.key}: {e}") from e
        raise
    console.file.write(data.decode(errors="replace") + "\n")


def _op(m: dict[str, Any]) -> str:
    for k, v in decode_headers(m.get("hdrs")):
        if k.lower() == "kv-operation":
            return v.upper()
        if k.lower() == "nats-marker-reason":
            return "PURGE" if v in ("MaxAge", "Purge") else "DEL"
    return "PUT"


async def _last_entry(api: JsApi, bucket: str, key: str) -> dict[str, Any] | None:
    return await get_message(api, f"KV_{bucket}", {"last_by_subj": f"$KV.{bucket}.{key}"})


async def kv_get(s: Session, a: argparse.Namespace) -> None:
    _key_subject(a.bucket, a.key)
    api = await s.api()
    await _bucket_info(api, a.bucket)
    if a.revision:
        m = await get_message(api, f"KV_{a.bucket}", {"seq": a.revision})
        if m is not None and m.get("subject") != f"$KV.{a.bucket}.{a.key}":
            m = None
    else:
        m = await _last_entry(api, a.bucket, a.key)
    if m is None or _op(m) != "PUT":
        raise CliError(f"key not found: {a.key}")
    value = base64.b64decode(m.get("data") or "")
    if a.json:
        print_json(
            {
                "bucket": a.bucket,
                "key": a.key,
                "value": value.decode(errors="replace"),
                "revision": m.get("seq"),
                "created": m.get("time"),
                "operation": "PUT",
            }
        )
        return
    if a.raw:
        sys.stdout.buffer.write(value)
        sys.stdout.buffer.write(b"\n")
        return
    console.print(
        f"{a.bucket} > {a.key} revision: {m.get('seq')} created @ {human_time(m.get('time'))}",
        markup=False,
    )
    console.print()
    console.file.write(value.decode(errors="replace") + "\n")


async def kv_del(s: Session, a: argparse.Namespace) -> None:
    subj = _key_subject(a.bucket, a.key)
    if not confirm(f"Delete key {a.bucket} > {a.key}", a.force):
        return
    await _bucket_info(await s.api(), a.bucket)
    await _publish(s, subj, b"", {"KV-Operation": "DEL"})


async def kv_purge(s: Session, a: argparse.Namespace) -> None:
    subj = _key_subject(a.bucket, a.key)
    if not confirm(f"Purge key {a.bucket} > {a.key}", a.force):
        return
    await _bucket_info(await s.api(), a.bucket)
    await _publish(s, subj, b"", {"KV-Operation": "PURGE", "Nats-Rollup": "sub"})


async def _kv_handle(s: Session, bucket: str) -> Any:
    api = await s.api()
    await _bucket_info(api, bucket)
    await require_consumers(s, f"KV_{bucket}")
    nc = await s.nc()
    js = nc.jetstream(prefix=api.prefix, timeout=s.opts.timeout)
    return await js.key_value(bucket)


async def kv_ls(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    if a.bucket:
        kv = await _kv_handle(s, a.bucket)
        try:
            keys = sorted(await kv.keys())
        except Exception as e:
            if type(e).__name__ == "NoKeysError":
                keys = []
            else:
                raise
        if a.json:
            print_json(keys)
            return
        if not keys:
            console.print(f"No keys found in bucket {a.bucket}")
            return
        for k in keys:
            console.print(k, markup=False)
        return
    infos = await list_buckets(api, a, "KV_", "No Key-Value buckets found")
    if infos is None:
        return
    rows = [
        bucket_row(i, "KV_", human_count((i.get("state") or {}).get("messages"))) for i in infos
    ]
    print_table(
        "Key-Value Buckets",
        ["Bucket", "Description", "Created", "Size", "Values", "Last Update"],
        rows,
        right=[3, 4],
    )


def _fmt_created(created: Any) -> str:
    if isinstance(created, datetime):
        return created.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(created, (int, float)) and created:
        return datetime.fromtimestamp(created / 1e9).strftime("%Y-%m-%d %H:%M:%S")
    return str(created or "")


async def kv_watch(s: Session, a: argparse.Namespace) -> None:
    kv = await _kv_handle(s, a.bucket)
    watcher = await kv.watch(a.key)
    info(f"Watching {a.bucket} > {a.key}")
    n = 0
    deadline = parse_duration(a.wait) / 1e9 if a.wait else None
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline if deadline else None
    try:
        while True:
            left = None if end is None else end - loop.time()
            if left is not None and left <= 0:
                break
            try:
                e = await watcher.updates(timeout=left if left is not None else 3600 * 24 * 365)
            except (NatsTimeout, TimeoutError):
                if end is not None:
                    break
                continue
            if e is None:
                continue
            op = e.operation or "PUT"
            ts = _fmt_created(e.created)
            if op == "PUT":
                val = (e.value or b"").decode(errors="replace")
                console.print(f"[{ts}] {op} {a.bucket} > {e.key}: {val}", markup=False)
            else:
                console.print(f"[{ts}] {op} {a.bucket} > {e.key}", markup=False)
            console.file.flush()
            n += 1
            if a.count and n >= a.count:
                break
    finally:
        await watcher.stop()


async def kv_history(s: Session, a: argparse.Namespace) -> None:
    _key_subject(a.bucket, a.key)
    kv = await _kv_handle(s, a.bucket)
    try:
        entries = await kv.history(a.key)
    except Exception as e:
        if type(e).__name__ == "NoKeysError":
            raise CliError(f"key not found: {a.key}") from e
        raise
    if a.json:
        print_json(
            [
                {
                    "bucket": a.bucket,
                    "key": ent.key,
                    "revision": ent.revision,
                    "operation": ent.operation or "PUT",
                    "created": _fmt_created(ent.created),
                    "value": (ent.value or b"").decode(errors="replace"),
                }
                for ent in entries
            ]
        )
        return
    rows = []
    for ent in entries:
        val = (ent.value or b"").decode(errors="replace")
        rows.append(
            (
                ent.key,
                human_count(ent.revision),
                ent.operation or "PUT",
                _fmt_created(ent.created),
                human_count(len(ent.value or b"")),
                val if len(val) <= 40 else val[:37] + "...",
            )
        )
    print_table(
        f"History for {a.bucket} > {a.key}",
        ["Key", "Revision", "Op", "Created", "Length", "Value"],
        rows,
        right=[1, 4],
    )


def show_bucket(bucket: str, info: dict[str, Any]) -> None:
    cfg = info.get("config") or {}
    st = info.get("state") or {}
    max_age = cfg.get("max_age") or 0
    print_section(
        f"Information for Key-Value Store Bucket {bucket} "
        f"created {human_time(info.get('created'))}",
        [],
    )
    pairs: list[tuple[str, Any]] = [
        ("Bucket Name", bucket),
        ("History Kept", cfg.get("max_msgs_per_subject")),
        ("Values Stored", human_count(st.get("messages"))),
        ("Compressed", "true" if cfg.get("compression") == "s2" else "false"),
        ("Backing Store Kind", "JetStream"),
        ("Bucket Size", human_bytes(st.get("bytes"))),
        ("Maximum Bucket Size", limit(cfg.get("max_bytes"), human_bytes)),
        ("Maximum Value Size", limit(cfg.get("max_msg_size"), human_bytes)),
        ("Maximum Age", human_duration(max_age) if max_age else "unlimited"),
        ("JetStream Stream", cfg.get("name")),
        ("Storage", str(cfg.get("storage", "file")).capitalize()),
    ]
    if cfg.get("description"):
        pairs.insert(1, ("Description", cfg["description"]))
    print_section("Configuration:", pairs)


async def kv_info(s: Session, a: argparse.Namespace) -> None:
    info = await _bucket_info(await s.api(), a.bucket)
    if a.json:
        print_json(info)
        return
    show_bucket(a.bucket, info)


async def kv_rm(s: Session, a: argparse.Namespace) -> None:
    _check_bucket(a.bucket)
    if not confirm(f"Really delete Key-Value bucket {a.bucket}", a.force):
        return
    api = await s.api()
    try:
        await api.request(f"STREAM.DELETE.KV_{a.bucket}")
    except ApiError as e:
        raise CliError(f"could not remove bucket {a.bucket}: {e}") from e
