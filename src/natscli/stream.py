"""``nats stream``: add, edit, info, state, ls, rm, purge, get, rmm, view, subjects, copy."""

from __future__ import annotations

import argparse
import base64
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import backup
from .common import confirm_edit
from .conn import ApiError, JsApi, Session
from .output import (
    CliError,
    ask,
    ask_choice,
    ask_int,
    confirm,
    console,
    human_bytes,
    human_count,
    human_duration,
    human_since,
    human_time,
    interactive,
    limit,
    parse_duration,
    parse_size,
    parse_time,
    print_json,
    print_section,
    print_table,
)

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]

RETENTION = {
    "limits": "limits",
    "interest": "interest",
    "work": "workqueue",
    "workq": "workqueue",
    "workqueue": "workqueue",
}
STORAGE = {"file": "file", "f": "file", "memory": "memory", "m": "memory", "mem": "memory"}
_TITLE = {"limits": "Limits", "interest": "Interest", "workqueue": "WorkQueue"}


def split_subjects(values: list[str] | None) -> list[str]:
    """``--subjects a,b --subjects "c d"`` -> ``[a, b, c, d]`` (as the Go CLI splits them)."""
    out: list[str] = []
    for v in values or []:
        out.extend(s for s in re.split(r"[,\s]+", v) if s)
    return out


def _metadata(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep:
            k, sep, val = v.partition(":")
        if not sep or not k:
            raise CliError(f"invalid metadata {v!r}, expected key=value")
        out[k] = val
    return out


# --------------------------------------------------------------------------- flags
def _create_flags(p: argparse.ArgumentParser, edit: bool) -> None:
    bo = argparse.BooleanOptionalAction
    p.add_argument("--subjects", action="append", help="Subjects that are consumed by the stream")
    p.add_argument("--description", help="A contextual description for the stream")
    if not edit:
        p.add_argument("--storage", choices=sorted(STORAGE), help="Storage backend (file, memory)")
    p.add_argument("--compression", choices=["none", "s2"], help="Compression (file storage)")
    p.add_argument("--replicas", type=int, help="How many replicas of the data to keep")
    p.add_argument("--tag", action="append", dest="tags", help="Placement tag (repeatable)")
    p.add_argument("--cluster", help="Place the stream on a specific cluster")
    p.add_argument("--ack", action=bo, default=None, help="Acknowledge publishes (default true)")
    p.add_argument("--retention", choices=sorted(RETENTION), help="Retention policy")
    p.add_argument("--discard", choices=["new", "old"], help="Discard policy")
    p.add_argument("--discard-per-subject", action=bo, default=None, help="Discard new per subject")
    if not edit:
        p.add_argument("--first-sequence", type=int, help="Starting sequence")
    p.add_argument("--max-age", help="Maximum age of messages to keep (e.g. 24h, 7d, 1y)")
    p.add_argument("--max-bytes", help="Maximum bytes to keep (e.g. 1GB, 256MiB, -1)")
    p.add_argument("--max-consumers", type=int, help="Maximum number of consumers")
    p.add_argument("--max-msg-size", help="Maximum size of one message")
    p.add_argument("--max-msgs", type=int, help="Maximum number of messages to keep")
    p.add_argument("--max-msgs-per-subject", type=int, help="Maximum messages per subject")
    p.add_argument("--dupe-window", help="Duplicate tracking window (e.g. 2m)")
    p.add_argument("--mirror", help="Mirror another stream")
    p.add_argument("--source", action="append", dest="sources", help="Source another stream")
    p.add_argument("--allow-rollup", action=bo, default=None, help="Allow roll-up headers")
    p.add_argument("--deny-delete", action=bo, default=None, help="Deny message deletes")
    p.add_argument("--deny-purge", action=bo, default=None, help="Deny purges")
    p.add_argument("--allow-direct", action=bo, default=None, help="Allow direct get (default)")
    p.add_argument("--allow-mirror-direct", action=bo, default=None, help="Direct get on mirrors")
    p.add_argument("--allow-msg-ttl", action=bo, default=None, help="Allow per-message TTLs")
    p.add_argument("--subject-del-markers-ttl", help="How long delete markers persist")
    p.add_argument("--transform-source", help="Subject transform source")
    p.add_argument("--transform-destination", help="Subject transform destination")
    p.add_argument("--metadata", action="append", help="Metadata key=value (repeatable)")
    p.add_argument("--republish-source", help="Republish messages matching this subject")
    p.add_argument("--republish-destination", help="Republish destination")
    p.add_argument("--republish-headers", action="store_true", default=None, help="Headers only")
    if edit:
        p.add_argument("--no-republish", action="store_true", help="Remove republish config")
        p.add_argument("--no-transform", action="store_true", help="Remove subject transform")
    p.add_argument("--config", help="JSON file to read the configuration from")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    st = sub.add_parser(
        "stream", aliases=["str", "st", "s"], help="JetStream stream management", parents=parents
    )
    ss = st.add_subparsers(dest="stream_cmd", metavar="COMMAND", required=True)

    def cmd(name: str, fn: Handler, help: str, aliases: list[str] | None = None) -> Any:
        p = ss.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd("add", stream_add, "Create a new stream", ["create", "new"])
    p.add_argument("stream", nargs="?", help="Stream name")
    _create_flags(p, edit=False)
    p.add_argument("--output", help="Save the configuration to a file instead of creating")
    p.add_argument("--defaults", action="store_true", help="Accept default values for all prompts")

    p = cmd("edit", stream_edit, "Edit an existing stream", ["update"])
    p.add_argument("stream", help="Stream name")
    _create_flags(p, edit=True)
    p.add_argument("-f", "--force", action="store_true", help="Edit without prompting")
    p.add_argument("--dry-run", action="store_true", help="Only show the differences")

    p = cmd("info", stream_info, "Stream information", ["nfo", "i"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    p.add_argument("--state", action="store_true", help="Show only the stream state")

    p = cmd("state", stream_state, "Stream state")
    p.add_argument("stream", help="Stream name")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("ls", stream_ls, "List streams", ["list", "l"])
    p.add_argument("--subject", help="Only streams with subjects matching this one")
    p.add_argument("-n", "--names", action="store_true", help="Show just the stream names")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    p.add_argument("-a", "--all", action="store_true", help="Include system streams (KV, OBJ)")

    p = cmd("rm", stream_rm, "Remove a stream", ["delete", "del"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("-f", "--force", action="store_true", help="Remove without prompting")

    p = cmd("purge", stream_purge, "Remove messages from a stream")
    p.add_argument("stream", help="Stream name")
    p.add_argument("-f", "--force", action="store_true", help="Purge without prompting")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    p.add_argument("--subject", help="Purge only this subject")
    p.add_argument("--seq", type=int, help="Purge up to, not including, this sequence")
    p.add_argument("--keep", type=int, help="Keep this many messages")

    p = cmd("get", stream_get, "Retrieve a message from a stream")
    p.add_argument("stream", help="Stream name")
    p.add_argument("id", nargs="?", type=int, help="Message sequence")
    p.add_argument("-S", "--last-for", help="The last message for a subject")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    p.add_argument("-r", "--raw", action="store_true", help="Show only the message body")

    p = cmd("rmm", stream_rmm, "Remove one message from a stream")
    p.add_argument("stream", help="Stream name")
    p.add_argument("id", type=int, help="Message sequence")
    p.add_argument("-f", "--force", action="store_true", help="Remove without prompting")
    p.add_argument("--erase", action="store_true", help="Overwrite the message on disk")

    p = cmd("view", stream_view, "View messages in a stream")
    p.add_argument("stream", help="Stream name")
    p.add_argument("size", nargs="?", type=int, default=10, help="Page size (default 10)")
    p.add_argument("--id", type=int, help="Start at this sequence")
    p.add_argument("--since", help="Messages received since a duration ago, e.g. 1h")
    p.add_argument("--subject", help="Only messages on this subject")
    p.add_argument("--raw", action="store_true", help="Show only the message bodies")

    p = cmd("subjects", stream_subjects, "Subjects held in a stream", ["subj"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("filter", nargs="?", default=">", help="Limit to subjects matching this")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    p.add_argument("--names", action="store_true", help="List only the subjects")

    backup.register_stream(cmd)

    p = cmd("copy", stream_copy, "Create a stream from another's configuration", ["cp"])
    p.add_argument("stream", help="Source stream")
    p.add_argument("destination", help="New stream")
    _create_flags(p, edit=False)


# --------------------------------------------------------------------------- config
def _apply_flags(cfg: dict[str, Any], a: argparse.Namespace, edit: bool) -> None:
    """Everything the user set on the command line, onto ``cfg`` (API field names)."""
    subjects = split_subjects(a.subjects)
    if subjects:
        cfg["subjects"] = subjects
    if a.description is not None:
        cfg["description"] = a.description
    if not edit and getattr(a, "storage", None):
        cfg["storage"] = STORAGE[a.storage]
    if a.compression:
        cfg["compression"] = a.compression
    if a.replicas is not None:
        cfg["num_replicas"] = a.replicas
    if a.tags or a.cluster:
        pl = dict(cfg.get("placement") or {})
        if a.tags:
            pl["tags"] = a.tags
        if a.cluster:
            pl["cluster"] = a.cluster
        cfg["placement"] = pl
    if a.ack is not None:
        cfg["no_ack"] = not a.ack
    if a.retention:
        cfg["retention"] = RETENTION[a.retention]
    if a.discard:
        cfg["discard"] = a.discard
    if a.discard_per_subject is not None:
        cfg["discard_new_per_subject"] = a.discard_per_subject
        if a.discard_per_subject:
            cfg["discard"] = "new"
    if not edit and getattr(a, "first_sequence", None):
        cfg["first_seq"] = a.first_sequence
    if a.max_age is not None:
        cfg["max_age"] = parse_duration(a.max_age)
    if a.max_bytes is not None:
        cfg["max_bytes"] = parse_size(a.max_bytes)
    if a.max_consumers is not None:
        cfg["max_consumers"] = a.max_consumers
    if a.max_msg_size is not None:
        cfg["max_msg_size"] = parse_size(a.max_msg_size)
    if a.max_msgs is not None:
        cfg["max_msgs"] = a.max_msgs if a.max_msgs != 0 else -1
    if a.max_msgs_per_subject is not None:
        cfg["max_msgs_per_subject"] = a.max_msgs_per_subject if a.max_msgs_per_subject else -1
    if a.dupe_window is not None:
        cfg["duplicate_window"] = parse_duration(a.dupe_window)
    if a.mirror:
        cfg["mirror"] = {"name": a.mirror}
    if a.sources:
        cfg["sources"] = [{"name": s} for s in a.sources]
    for flag, key in (
        ("allow_rollup", "allow_rollup_hdrs"),
        ("deny_delete", "deny_delete"),
        ("deny_purge", "deny_purge"),
        ("allow_direct", "allow_direct"),
        ("allow_mirror_direct", "mirror_direct"),
        ("allow_msg_ttl", "allow_msg_ttl"),
    ):
        v = getattr(a, flag)
        if v is not None:
            cfg[key] = v
    if a.subject_del_markers_ttl is not None:
        cfg["subject_delete_marker_ttl"] = parse_duration(a.subject_del_markers_ttl)
    if a.transform_source or a.transform_destination:
        cfg["subject_transform"] = {
            "src": a.transform_source or "",
            "dest": a.transform_destination or "",
        }
    if edit and getattr(a, "no_transform", False):
        cfg.pop("subject_transform", None)
    if a.metadata:
        cfg["metadata"] = _metadata(a.metadata)
    if a.republish_source or a.republish_destination:
        rp: dict[str, Any] = {
            "src": a.republish_source or ">",
            "dest": a.republish_destination or "",
        }
        if a.republish_headers:
            rp["headers_only"] = True
        cfg["republish"] = rp
    if edit and getattr(a, "no_republish", False):
        cfg.pop("republish", None)


def _load_config_file(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"could not read configuration {path}: {e}") from e
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]  # the output of ``nats stream info --json``
    if not isinstance(data, dict):
        raise CliError(f"{path} does not hold a stream configuration")
    return data


def _prompted_config(name: str, a: argparse.Namespace) -> dict[str, Any]:
    """The Go CLI's questions, asked only for values not given (none with --defaults or
    without a terminal, where the defaults are used)."""
    d = bool(a.defaults)
    cfg: dict[str, Any] = {"name": name}
    subjects = split_subjects(a.subjects)
    if not subjects and not a.mirror and not a.sources:
        subjects = split_subjects([ask("Subjects", name, d)])
    if subjects:
        cfg["subjects"] = subjects
    cfg["storage"] = STORAGE[a.storage or ask_choice("Storage", ["file", "memory"], "file", d)]
    cfg["num_replicas"] = a.replicas if a.replicas is not None else ask_int("Replication", 1, d)
    cfg["retention"] = RETENTION[
        a.retention
        or ask_choice("Retention Policy", ["limits", "interest", "workqueue"], "limits", d)
    ]
    cfg["discard"] = a.discard or ask_choice("Discard Policy", ["old", "new"], "old", d)

    def num(v: int | None, q: str) -> int:
        if v is not None and v != 0:
            return v
        return ask_int(q, -1, d)

    cfg["max_msgs"] = num(a.max_msgs, "Stream Messages Limit")
    cfg["max_msgs_per_subject"] = num(a.max_msgs_per_subject, "Per Subject Messages Limit")
    cfg["max_bytes"] = parse_size(
        a.max_bytes if a.max_bytes is not None else ask("Total Stream Size", "-1", d)
    )
    max_age = a.max_age if a.max_age is not None else ask("Message TTL", "", d)
    cfg["max_age"] = parse_duration(max_age)
    cfg["max_msg_size"] = parse_size(
        a.max_msg_size if a.max_msg_size is not None else ask("Max Message Size", "-1", d)
    )
    if a.dupe_window is None and not a.mirror:
        dw = 120 * 10**9
        if 0 < cfg["max_age"] < dw:
            dw = cfg["max_age"]
        cfg["duplicate_window"] = parse_duration(
            ask("Duplicate tracking time window", human_duration(dw), d)
        )
    cfg["max_consumers"] = a.max_consumers if a.max_consumers is not None else -1
    cfg["allow_direct"] = True if a.allow_direct is None else a.allow_direct
    _apply_flags(cfg, a, edit=False)
    return cfg


# --------------------------------------------------------------------------- actions
async def stream_add(s: Session, a: argparse.Namespace) -> None:
    if a.config:
        cfg = _load_config_file(a.config)
        _apply_flags(cfg, a, edit=False)
        if a.stream:
            cfg["name"] = a.stream
    else:
        name = a.stream or ask("Stream Name", "", a.defaults)
        if not name:
            raise CliError("a stream name is required")
        cfg = _prompted_config(name, a)
    if not cfg.get("name"):
        raise CliError("a stream name is required")
    if a.output:
        Path(a.output).write_text(json.dumps(cfg, indent=2) + "\n")
        return
    await _create(await s.api(), cfg["name"], cfg, a)


async def _create(api: JsApi, name: str, cfg: dict[str, Any], a: argparse.Namespace) -> None:
    """STREAM.CREATE ``name`` and show the new Stream (or its JSON with ``--json``)."""
    try:
        info = await api.request(f"STREAM.CREATE.{name}", cfg)
    except ApiError as e:
        raise CliError(f"could not create Stream: {e}") from e
    if a.json:
        print_json(info)
        return
    console.print(f"Stream {name} was created")
    console.print()
    show_stream_info(info)


async def stream_copy(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    src = await api.request(f"STREAM.INFO.{a.stream}")
    cfg = dict(src["config"])
    cfg["name"] = a.destination
    _apply_flags(cfg, a, edit=False)
    await _create(api, a.destination, cfg, a)


async def stream_edit(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    try:
        cur = await api.request(f"STREAM.INFO.{a.stream}")
    except ApiError as e:
        raise CliError(f"could not load Stream {a.stream}: {e}") from e
    old = dict(cur["config"])
    if a.config:
        new = _load_config_file(a.config)
        new["name"] = a.stream
    else:
        new = json.loads(json.dumps(old))
    _apply_flags(new, a, edit=True)
    if not confirm_edit(old, new, a, f"Stream {a.stream}"):
        return
    try:
        info = await api.request(f"STREAM.UPDATE.{a.stream}", new)
    except ApiError as e:
        raise CliError(f"could not edit Stream {a.stream}: {e}") from e
    if a.json:
        print_json(info)
        return
    console.print(f"Stream {a.stream} was updated")
    console.print()
    show_stream_info(info)


async def load_stream(api: JsApi, name: str, **req: Any) -> dict[str, Any]:
    try:
        return await api.request(f"STREAM.INFO.{name}", req or None)
    except ApiError as e:
        raise CliError(f"could not load Stream {name}: {e}") from e


async def stream_info(s: Session, a: argparse.Namespace) -> None:
    info = await load_stream(await s.api(), a.stream)
    if a.json:
        print_json(info.get("state") if a.state else info)
        return
    show_stream_info(info, state_only=a.state)


async def stream_state(s: Session, a: argparse.Namespace) -> None:
    a.state = True
    await stream_info(s, a)


def _yes(v: Any) -> str:
    return "true" if v else "false"


def show_stream_info(info: dict[str, Any], state_only: bool = False) -> None:
    cfg: dict[str, Any] = info.get("config") or {}
    st: dict[str, Any] = info.get("state") or {}
    name = cfg.get("name", "")
    if not state_only:
        title = f"Information for Stream {name} created {human_time(info.get('created'))}"
        pairs: list[tuple[str, Any]] = []
        if cfg.get("description"):
            pairs.append(("Description", cfg["description"]))
        if cfg.get("subjects"):
            pairs.append(("Subjects", ", ".join(cfg["subjects"])))
        pairs.append(("Replicas", cfg.get("num_replicas", 1)))
        pairs.append(("Storage", str(cfg.get("storage", "file")).capitalize()))
        if cfg.get("compression") not in (None, "none"):
            pairs.append(("Compression", cfg["compression"]))
        if cfg.get("first_seq", 0) > 1:
            pairs.append(("First Sequence", cfg["first_seq"]))
        print_section(title, pairs)

        opts: list[tuple[str, Any]] = [
            ("Retention", _TITLE.get(cfg.get("retention", ""), cfg.get("retention"))),
            ("Acknowledgments", _yes(not cfg.get("no_ack"))),
            ("Discard Policy", str(cfg.get("discard", "old")).capitalize()),
            ("Duplicate Window", human_duration(cfg.get("duplicate_window"))),
            ("Direct Get", _yes(cfg.get("allow_direct"))),
            ("Allows Msg Delete", _yes(not cfg.get("deny_delete"))),
            ("Allows Purge", _yes(not cfg.get("deny_purge"))),
            ("Allows Per-Message TTL", _yes(cfg.get("allow_msg_ttl"))),
            ("Allows Rollups", _yes(cfg.get("allow_rollup_hdrs"))),
        ]
        if cfg.get("subject_delete_marker_ttl"):
            opts.append(
                ("Subject Delete Markers TTL", human_duration(cfg["subject_delete_marker_ttl"]))
            )
        if cfg.get("republish"):
            rp = cfg["republish"]
            opts.append(("Republishing", f"{rp.get('src', '>')} to {rp.get('dest', '')}"))
        print_section("Options:", opts)

        max_age = cfg.get("max_age") or 0
        print_section(
            "Limits:",
            [
                ("Maximum Messages", limit(cfg.get("max_msgs"))),
                ("Maximum Per Subject", limit(cfg.get("max_msgs_per_subject"))),
                ("Maximum Bytes", limit(cfg.get("max_bytes"), human_bytes)),
                ("Maximum Age", human_duration(max_age) if max_age else "unlimited"),
                ("Maximum Message Size", limit(cfg.get("max_msg_size"), human_bytes)),
                ("Maximum Consumers", limit(cfg.get("max_consumers"))),
            ],
        )
    cluster = info.get("cluster") or {}
    if cluster.get("name"):
        print_section("Cluster Information:", cluster_pairs(cluster, info.get("ts")))
    first = st.get("first_seq", 0)
    last = st.get("last_seq", 0)
    spairs: list[tuple[str, Any]] = [
        ("Messages", human_count(st.get("messages"))),
        ("Bytes", human_bytes(st.get("bytes"))),
        (
            "First Sequence",
            f"{human_count(first)} @ {human_time(st.get('first_ts'))}" if first else "0",
        ),
        (
            "Last Sequence",
            f"{human_count(last)} @ {human_time(st.get('last_ts'))}" if last else "0",
        ),
    ]
    if st.get("num_deleted"):
        spairs.append(("Deleted Messages", human_count(st["num_deleted"])))
    spairs.append(("Active Consumers", human_count(st.get("consumer_count"))))
    if st.get("num_subjects"):
        spairs.append(("Number of Subjects", human_count(st["num_subjects"])))
    lost = st.get("lost") or {}
    if lost:
        spairs.append(
            ("Lost Messages", f"{len(lost.get('msgs') or [])} ({human_bytes(lost.get('bytes'))})")
        )
    print_section(f"State for Stream {name}:" if state_only else "State:", spairs)


def cluster_pairs(cluster: dict[str, Any], ts: str | None) -> list[tuple[str, Any]]:
    """The Go CLI's "Cluster Information" rows: the group, its leader (and for how long),
    each replica as ``name, current|outdated[, OFFLINE], seen <d> ago[, <n> operations
    behind]``."""
    pairs: list[tuple[str, Any]] = [("Name", cluster["name"])]
    if cluster.get("raft_group"):
        pairs.append(("Cluster Group", cluster["raft_group"]))
    leader = cluster.get("leader", "")
    since, now = parse_time(cluster.get("leader_since")), parse_time(ts)
    if since is not None:
        ref = now or datetime.now(UTC)
        leader = f"{leader} ({human_duration((ref - since).total_seconds() * 1e9)})"
    pairs.append(("Leader", leader))
    for r in cluster.get("replicas") or []:
        state = [str(r.get("name", "")), "current" if r.get("current") else "outdated"]
        if r.get("offline"):
            state.append("OFFLINE")
        active = int(r.get("active") or 0)
        state.append(f"seen {human_duration(active)} ago" if active > 0 else "not seen")
        lag = int(r.get("lag") or 0)
        if lag > 1:
            state.append(f"{human_count(lag)} operations behind")
        elif lag == 1:
            state.append("1 operation behind")
        pairs.append(("Replica", ", ".join(state)))
    return pairs


async def stream_ls(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    payload: dict[str, Any] = {}
    if a.subject:
        payload["subject"] = a.subject
    infos = await api.paged("STREAM.LIST", "streams", payload)
    if not a.all:
        infos = [i for i in infos if not str(i["config"]["name"]).startswith(("KV_", "OBJ_"))]
    infos.sort(key=lambda i: str(i["config"]["name"]))
    names = [i["config"]["name"] for i in infos]
    if a.json:
        print_json(names)
        return
    if a.names:
        for n in names:
            console.print(n, markup=False, highlight=False)
        return
    if not infos:
        console.print("No Streams defined")
        return
    rows = []
    for i in infos:
        st = i.get("state") or {}
        last = st.get("last_ts") if st.get("last_seq") else None
        rows.append(
            (
                i["config"]["name"],
                i["config"].get("description", ""),
                human_time(i.get("created")),
                human_count(st.get("messages")),
                human_bytes(st.get("bytes")),
                human_since(last) if last else "never",
            )
        )
    print_table(
        "Streams",
        ["Name", "Description", "Created", "Messages", "Size", "Last Message"],
        rows,
        right=[3, 4],
    )


async def stream_rm(s: Session, a: argparse.Namespace) -> None:
    if not confirm(f"Really delete Stream {a.stream}", a.force):
        return
    api = await s.api()
    try:
        await api.request(f"STREAM.DELETE.{a.stream}")
    except ApiError as e:
        raise CliError(f"could not remove Stream {a.stream}: {e}") from e


async def stream_purge(s: Session, a: argparse.Namespace) -> None:
    what = f" subject {a.subject}" if a.subject else ""
    if not confirm(f"Really purge Stream {a.stream}{what}", a.force):
        return
    req: dict[str, Any] = {}
    if a.subject:
        req["filter"] = a.subject
    if a.seq:
        req["seq"] = a.seq
    if a.keep:
        req["keep"] = a.keep
    api = await s.api()
    try:
        resp = await api.request(f"STREAM.PURGE.{a.stream}", req or None)
    except ApiError as e:
        raise CliError(f"could not purge Stream {a.stream}: {e}") from e
    if a.json:
        print_json(resp)
        return
    console.print(f"Purged {human_count(resp.get('purged'))} messages from {a.stream}")
    console.print()
    show_stream_info(await load_stream(api, a.stream))


async def get_message(api: JsApi, stream: str, req: dict[str, Any]) -> dict[str, Any] | None:
    """STREAM.MSG.GET; ``None`` when there is no such message."""
    try:
        resp = await api.request(f"STREAM.MSG.GET.{stream}", req)
    except ApiError as e:
        if e.err_code == 10037 or (e.code == 404 and "message" in e.description):
            return None
        raise
    msg = resp.get("message")
    return msg if isinstance(msg, dict) else None


def decode_headers(raw: str | None) -> list[tuple[str, str]]:
    """``hdrs`` (base64 ``NATS/1.0`` block) as (name, value) pairs."""
    if not raw:
        return []
    text = base64.b64decode(raw).decode(errors="replace")
    out: list[tuple[str, str]] = []
    for line in text.split("\r\n")[1:]:
        if not line:
            continue
        k, _, v = line.partition(":")
        out.append((k.strip(), v.strip()))
    return out


def _print_stored(stream: str, m: dict[str, Any], raw: bool = False) -> None:
    data = base64.b64decode(m.get("data") or "")
    if raw:
        console.file.write(data.decode(errors="replace") + "\n")
        return
    console.print(
        f"Item: {stream}#{m.get('seq')} received {human_time(m.get('time'))} "
        f"on Subject {m.get('subject')}",
        markup=False,
    )
    console.print()
    hdrs = decode_headers(m.get("hdrs"))
    if hdrs:
        console.print("Headers:")
        for k, v in hdrs:
            console.print(f"  {k}: {v}", markup=False)
        console.print()
    console.file.write(data.decode(errors="replace") + "\n")
    console.print()


async def stream_get(s: Session, a: argparse.Namespace) -> None:
    if a.id is None and not a.last_for:
        raise CliError("give a message sequence or --last-for SUBJECT")
    api = await s.api()
    req: dict[str, Any] = {"last_by_subj": a.last_for} if a.last_for else {"seq": a.id}
    try:
        m = await get_message(api, a.stream, req)
    except ApiError as e:
        raise CliError(f"could not retrieve {a.stream}#{a.id or a.last_for}: {e}") from e
    if m is None:
        raise CliError(f"could not retrieve {a.stream}#{a.id or a.last_for}: no message found")
    if a.json:
        print_json(m)
        return
    _print_stored(a.stream, m, raw=a.raw)


async def stream_rmm(s: Session, a: argparse.Namespace) -> None:
    if not confirm(f"Really remove message {a.id} from Stream {a.stream}", a.force):
        return
    api = await s.api()
    req: dict[str, Any] = {"seq": a.id}
    if not a.erase:
        req["no_erase"] = True
    try:
        await api.request(f"STREAM.MSG.DELETE.{a.stream}", req)
    except ApiError as e:
        raise CliError(f"could not remove message {a.id}: {e}") from e


async def stream_view(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    info = await load_stream(api, a.stream)
    st = info.get("state") or {}
    seq = max(int(a.id or st.get("first_seq") or 1), 1)
    filt = a.subject or ">"
    since_ns = parse_duration(a.since) if a.since else 0
    if since_ns:
        start = datetime.now(UTC).timestamp() - since_ns / 1e9
        req0 = {"start_time": datetime.fromtimestamp(start, UTC).isoformat().replace("+00:00", "Z")}
        # STREAM.MSG.GET has no time lookup; DIRECT.GET does on streams that allow it.
        if info["config"].get("allow_direct"):
            msg = await s.nc()
            r = await msg.request(api.subject(f"DIRECT.GET.{a.stream}"), json.dumps(req0).encode())
            if r.headers and r.headers.get("Nats-Sequence"):
                seq = int(r.headers["Nats-Sequence"])
    size = max(1, min(a.size, 25)) if interactive() else max(1, a.size)
    last = int(st.get("last_seq") or 0)
    shown = 0
    while seq <= last:
        m = await get_message(api, a.stream, {"seq": seq, "next_by_subj": filt})
        if m is None:
            break
        _print_view(m, a.raw)
        seq = int(m["seq"]) + 1
        shown += 1
        if shown % size == 0 and seq <= last:
            if not interactive() or ask("Next Page? (y/n)", "y").lower() not in ("y", "yes"):
                break
    if shown == 0:
        console.print(f"No messages in {a.stream}" + (f" on {a.subject}" if a.subject else ""))


def _print_view(m: dict[str, Any], raw: bool) -> None:
    data = base64.b64decode(m.get("data") or "").decode(errors="replace")
    if raw:
        console.file.write(data + "\n")
        return
    console.print(
        f"[{m.get('seq')}] Subject: {m.get('subject')} Received: {human_time(m.get('time'))}",
        markup=False,
    )
    for k, v in decode_headers(m.get("hdrs")):
        console.print(f"  {k}: {v}", markup=False)
    console.print()
    console.file.write(data + "\n")
    console.print()


async def stream_subjects(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    info = await load_stream(api, a.stream, subjects_filter=a.filter)
    subjects: dict[str, int] = (info.get("state") or {}).get("subjects") or {}
    if a.json:
        print_json(subjects)
        return
    if not subjects:
        console.print(f"No subjects found matching {a.filter}")
        return
    if a.names:
        for k in sorted(subjects):
            console.print(k, markup=False)
        return
    rows = sorted(subjects.items(), key=lambda kv: (-kv[1], kv[0]))
    print_table(
        f"{len(rows)} Subjects in stream {a.stream}",
        ["Subject", "Count"],
        [(k, human_count(v)) for k, v in rows],
        right=[1],
    )
