"""Helpers shared by ``nats kv`` and ``nats object``: listing the buckets behind streams."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .conn import JsApi
from .output import confirm, console, human_bytes, human_since, human_time, print_json


async def list_buckets(
    api: JsApi, a: argparse.Namespace, prefix: str, empty: str
) -> list[dict[str, Any]] | None:
    """The streams named ``<prefix><bucket>``, sorted by name; prints and returns None for
    ``--json``, ``--names`` or when there are none (``empty`` is the message then)."""
    infos = [
        i
        for i in await api.paged("STREAM.LIST", "streams")
        if str(i["config"]["name"]).startswith(prefix)
    ]
    infos.sort(key=lambda i: str(i["config"]["name"]))
    names = [str(i["config"]["name"])[len(prefix) :] for i in infos]
    if a.json:
        print_json(names)
        return None
    if a.names:
        for n in names:
            console.print(n, markup=False)
        return None
    if not infos:
        console.print(empty)
        return None
    return infos


def bucket_row(i: dict[str, Any], prefix: str, *counts: str) -> tuple[Any, ...]:
    """One row of a bucket table: name, description, created, size, ``counts``, last update."""
    st = i.get("state") or {}
    last = st.get("last_ts") if st.get("last_seq") else None
    return (
        str(i["config"]["name"])[len(prefix) :],
        i["config"].get("description", ""),
        human_time(i.get("created")),
        human_bytes(st.get("bytes")),
        *counts,
        f"{human_since(last)} ago" if last else "never",
    )


def config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``-  key: old`` / ``+  key: new`` lines for every top-level key that differs."""
    lines: list[str] = []
    for k in sorted(set(old) | set(new)):
        ov, nv = old.get(k), new.get(k)
        if ov != nv:
            if k in old:
                lines.append(f"-  {k}: {json.dumps(ov)}")
            if k in new:
                lines.append(f"+  {k}: {json.dumps(nv)}")
    return lines


def confirm_edit(
    old: dict[str, Any], new: dict[str, Any], a: argparse.Namespace, what: str
) -> bool:
    """Show the differences of an edit; True when it should go ahead (there are some, it is
    not ``--dry-run`` and the user confirmed ``Really edit <what>``)."""
    diff = config_diff(old, new)
    if not diff:
        console.print("No difference in configuration")
        return False
    console.print("Differences (-old +new):")
    for line in diff:
        console.print(line, markup=False)
    console.print()
    if a.dry_run:
        return False
    return confirm(f"Really edit {what}", a.force)
