"""How ``nats consumer add/edit`` build a consumer configuration: flags first, then the Go
CLI's questions (``prepareConfig``) for what the flags left open, or their defaults with
``--defaults`` or without a terminal."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .output import CliError, ask, ask_bool, ask_choice, ask_int, parse_duration
from .stream import split_subjects

__all__ = [
    "ACK_POLICIES",
    "apply_editable",
    "load_config_file",
    "pause_until",
    "prepare_config",
    "set_start_policy",
]

ACK_POLICIES = {"none", "all", "explicit"}


def set_start_policy(cfg: dict[str, Any], policy: str) -> None:
    if not policy:
        return
    if policy == "all":
        cfg["deliver_policy"] = "all"
    elif policy == "last":
        cfg["deliver_policy"] = "last"
    elif policy in ("new", "next"):
        cfg["deliver_policy"] = "new"
    elif policy in ("subject", "last_per_subject"):
        cfg["deliver_policy"] = "last_per_subject"
    elif re.fullmatch(r"\d+", policy):
        cfg["deliver_policy"] = "by_start_sequence"
        cfg["opt_start_seq"] = int(policy)
    else:
        try:
            d = parse_duration(policy)
        except CliError as e:
            raise CliError(
                f"invalid start policy {policy!r} (all, new, last, subject, 1h, 42)"
            ) from e
        start = datetime.now(UTC).timestamp() - d / 1e9
        cfg["deliver_policy"] = "by_start_time"
        cfg["opt_start_time"] = (
            datetime.fromtimestamp(start, UTC).isoformat().replace("+00:00", "Z")
        )


def backoff(a: argparse.Namespace) -> list[int] | None:
    if a.backoff in (None, "none"):
        return None
    steps = max(1, a.backoff_steps)
    lo, hi = parse_duration(a.backoff_min), parse_duration(a.backoff_max)
    if steps == 1:
        return [lo]
    return [lo + (hi - lo) * i // (steps - 1) for i in range(steps)]


def metadata(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep:
            k, sep, val = v.partition(":")
        if not sep or not k:
            raise CliError(f"invalid metadata {v!r}, expected key=value")
        out[k] = val
    return out


def apply_editable(cfg: dict[str, Any], a: argparse.Namespace) -> None:
    """Flags that both ``add`` and ``edit`` take, when given."""
    if a.description is not None:
        cfg["description"] = a.description
    filters = split_subjects(a.filter)
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
        cfg.pop("filter_subjects", None)
    elif len(filters) > 1:
        cfg["filter_subjects"] = filters
        cfg.pop("filter_subject", None)
    if a.headers_only is not None:
        cfg["headers_only"] = a.headers_only
    if a.max_deliver is not None:
        cfg["max_deliver"] = a.max_deliver
    if a.max_pending is not None:
        cfg["max_ack_pending"] = a.max_pending
    if a.max_pull_batch:
        cfg["max_batch"] = a.max_pull_batch
    if a.max_pull_expire:
        cfg["max_expires"] = parse_duration(a.max_pull_expire)
    if a.max_pull_bytes:
        cfg["max_bytes"] = a.max_pull_bytes
    if a.sample is not None and a.sample >= 0:
        if a.sample > 100:
            raise CliError("sample percent is not between 0 and 100")
        cfg["sample_freq"] = f"{a.sample}%" if a.sample else ""
    if a.target:
        cfg["deliver_subject"] = a.target
    if a.wait:
        cfg["ack_wait"] = parse_duration(a.wait)
    if a.inactive_threshold:
        cfg["inactive_threshold"] = parse_duration(a.inactive_threshold)
    if a.replicas:
        cfg["num_replicas"] = a.replicas
    if a.metadata:
        cfg["metadata"] = metadata(a.metadata)
    bo = backoff(a)
    if bo is not None:
        cfg["backoff"] = bo
        if cfg.get("max_deliver", -1) in (-1, 0):
            cfg["max_deliver"] = len(bo) + 1


def prepare_config(a: argparse.Namespace) -> dict[str, Any]:
    d = bool(a.defaults)
    cfg: dict[str, Any] = {"ack_policy": "explicit", "replay_policy": "instant"}
    if a.description:
        cfg["description"] = a.description
    name = a.consumer or ""
    if not name and not a.ephemeral:
        name = ask("Consumer name", "", d)
        if not name:
            raise CliError("a consumer name is required")
    if a.ephemeral:
        if name:
            cfg["name"] = name
    else:
        if re.search(r"[.*>]", name):
            raise CliError("durable name can not contain '.', '*', '>'")
        cfg["durable_name"] = name
    target = a.target or ""
    if not a.pull and not target:
        target = ask("Delivery target (empty for Pull Consumers)", "", d)
    if target:
        cfg["deliver_subject"] = target
    group = a.deliver_group
    if target and group is None:
        group = ask("Delivery Queue Group", "", d)
    if target and group:
        cfg["deliver_group"] = group
    set_start_policy(
        cfg, a.deliver or ask("Start policy (all, new, last, subject, 1h, msg sequence)", "all", d)
    )
    ack = a.ack or ask_choice(
        "Acknowledgment policy",
        ["explicit", "all", "none"],
        "explicit" if not target else "none",
        d,
    )
    cfg["ack_policy"] = ack
    replay = a.replay or ask_choice("Replay policy", ["instant", "original"], "instant", d)
    cfg["replay_policy"] = replay
    if a.wait:
        cfg["ack_wait"] = parse_duration(a.wait)
    filters = split_subjects(a.filter)
    if not filters and not d:
        filters = split_subjects([ask("Filter Stream by subjects (blank for all)", "", d)])
    if len(filters) == 1:
        cfg["filter_subject"] = filters[0]
    elif filters:
        cfg["filter_subjects"] = filters
    if cfg.get("deliver_policy") == "last_per_subject" and not filters:
        cfg["filter_subject"] = ">"
    max_deliver = a.max_deliver
    if max_deliver is None and ack != "none":
        max_deliver = ask_int("Maximum Allowed Deliveries", -1, d)
    if ack == "none":
        max_deliver = -1
    max_pending = a.max_pending
    if max_pending is None and ack != "none":
        max_pending = ask_int("Maximum Acknowledgments Pending", 0, d)
    if target:
        hb = a.heartbeat
        if hb is None:
            hb = ask("Idle Heartbeat", "0s", d)
        if hb not in ("-1", ""):
            cfg["idle_heartbeat"] = parse_duration(hb)
        fc = a.flow_control
        if fc is None:
            fc = ask_bool("Enable Flow Control, ie --flow-control", False, d)
        cfg["flow_control"] = fc
    elif a.heartbeat not in (None, "-1", ""):
        raise CliError("pull consumers do not support idle heartbeats")
    hdrs = a.headers_only
    if hdrs is None:
        hdrs = ask_bool("Deliver headers only without bodies", False, d)
    cfg["headers_only"] = hdrs
    bo = backoff(a)
    if bo is None and ack != "none" and a.backoff is None and not d:
        if ask_bool("Add a Retry Backoff Policy", False, d):
            a.backoff = "linear"
            bo = backoff(a)
    if bo:
        cfg["backoff"] = bo
        if max_deliver in (None, -1):
            max_deliver = len(bo) + 1
    cfg["max_ack_pending"] = max_pending or 0
    if a.inactive_threshold:
        cfg["inactive_threshold"] = parse_duration(a.inactive_threshold)
    if a.max_pull_batch:
        cfg["max_batch"] = a.max_pull_batch
    if a.max_pull_expire:
        cfg["max_expires"] = parse_duration(a.max_pull_expire)
    if a.max_pull_bytes:
        cfg["max_bytes"] = a.max_pull_bytes
    if not target and a.max_waiting:
        cfg["max_waiting"] = a.max_waiting
    if max_deliver and ack != "none":
        cfg["max_deliver"] = max_deliver
    if a.bps:
        if not target:
            raise CliError("rate limits are only possible on Push consumers")
        cfg["rate_limit_bps"] = a.bps
    if a.sample:
        if not 0 <= a.sample <= 100:
            raise CliError("sample percent is not between 0 and 100")
        cfg["sample_freq"] = str(a.sample)
    if a.replicas:
        cfg["num_replicas"] = a.replicas
    if a.memory:
        cfg["mem_storage"] = True
    if a.metadata:
        cfg["metadata"] = metadata(a.metadata)
    if a.pause:
        cfg["pause_until"] = pause_until(a.pause)
    return cfg


def pause_until(text: str) -> str:
    try:
        when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").astimezone(UTC)
    except ValueError:
        when = datetime.fromtimestamp(
            datetime.now(UTC).timestamp() + parse_duration(text) / 1e9, UTC
        )
    return when.isoformat().replace("+00:00", "Z")


def load_config_file(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CliError(f"could not read configuration {path}: {e}") from e
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict):
        raise CliError(f"{path} does not hold a consumer configuration")
    return data
