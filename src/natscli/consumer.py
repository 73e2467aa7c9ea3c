"""``nats consumer``: add, edit, info, ls, rm, next, sub, copy.

Configuration questions follow the Go CLI (``prepareConfig``); with ``--defaults`` or without
a terminal the defaults are taken, so ``nats consumer add ORDERS c --filter x --deliver all
--ack explicit`` with no ``--target`` makes a pull consumer, as the Go CLI's empty answer to
"Delivery target (empty for Pull Consumers)" does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from .common import confirm_edit
from .conn import ApiError, JsApi, Session
from .consumer_config import (
    ACK_POLICIES,
    apply_editable,
    load_config_file,
    prepare_config,
    set_start_policy,
)
from .output import (
    CliError,
    confirm,
    console,
    human_count,
    human_duration,
    human_since,
    human_time,
    parse_duration,
    print_json,
    print_section,
    print_table,
)
from .pubsub import require_consumers

__all__ = ["AckMeta", "parse_ack_subject", "register"]

Handler = Callable[[Session, argparse.Namespace], Any]

_TITLES = {
    "all": "All",
    "last": "Last",
    "new": "New",
    "by_start_sequence": "From Sequence",
    "by_start_time": "From Time",
    "last_per_subject": "Last Per Subject",
    "explicit": "Explicit",
    "none": "None",
    "instant": "Instant",
    "original": "Original",
}


@dataclass
class AckMeta:
    stream: str
    consumer: str
    delivered: int
    stream_seq: int
    consumer_seq: int
    timestamp: int
    pending: int


def parse_ack_subject(reply: str) -> AckMeta | None:
    """The metadata in a ``$JS.ACK`` reply subject (v1 and v2 forms)."""
    t = reply.split(".")
    if len(t) < 9 or t[0] != "$JS" or t[1] != "ACK":
        return None
    if len(t) == 9:
        s = t[2:]
    elif len(t) >= 11:
        s = t[4:11]
    else:
        return None
    try:
        return AckMeta(s[0], s[1], int(s[2]), int(s[3]), int(s[4]), int(s[5]), int(s[6]))
    except (ValueError, IndexError):
        return None


# --------------------------------------------------------------------------- flags
def _create_flags(p: argparse.ArgumentParser, edit: bool) -> None:
    bo = argparse.BooleanOptionalAction
    if not edit:
        p.add_argument("--ack", choices=sorted(ACK_POLICIES), help="Acknowledgment policy")
        p.add_argument("--bps", type=int, help="Rate limit in bits per second (push)")
        p.add_argument("--deliver", help="Start policy (all, new, last, subject, 1h, sequence)")
        p.add_argument("--deliver-group", help="Deliver push messages only to this queue group")
        p.add_argument("--ephemeral", action="store_true", help="Create an ephemeral consumer")
        p.add_argument("--flow-control", action=bo, default=None, help="Push flow control")
        p.add_argument("--heartbeat", help="Idle heartbeat for push consumers (-1 disables)")
        p.add_argument("--max-waiting", type=int, help="Maximum outstanding pulls")
        p.add_argument("--pull", action="store_true", help="Deliver messages in 'pull' mode")
        p.add_argument("--replay", choices=["instant", "original"], help="Replay policy")
        p.add_argument("--memory", action="store_true", help="Keep consumer state in memory")
        p.add_argument("--pause", help="Pause for a duration or until a time")
    p.add_argument("--backoff", choices=["linear", "none"], help="Backoff policy")
    p.add_argument("--backoff-steps", type=int, default=10, help="Backoff steps")
    p.add_argument("--backoff-min", default="1m", help="Shortest backoff")
    p.add_argument("--backoff-max", default="20m", help="Longest backoff")
    p.add_argument("--description", help="A contextual description")
    p.add_argument("--filter", action="append", help="Filter the stream by subjects")
    p.add_argument("--headers-only", action=bo, default=None, help="Deliver only headers")
    p.add_argument("--max-deliver", type=int, help="Maximum deliveries of a message")
    p.add_argument("--max-pending", type=int, help="Maximum pending acks")
    p.add_argument("--max-pull-batch", type=int, help="Maximum pull batch size")
    p.add_argument("--max-pull-expire", help="Maximum pull expiry")
    p.add_argument("--max-pull-bytes", type=int, help="Maximum pull bytes")
    p.add_argument("--sample", type=int, help="Percentage of acks to sample")
    p.add_argument("--target", help="Push delivery target subject")
    p.add_argument("--wait", help="Acknowledgment waiting time, e.g. 30s")
    p.add_argument("--inactive-threshold", help="Idle time before an ephemeral is removed")
    p.add_argument("--replicas", type=int, help="Replica count (default: the stream's)")
    p.add_argument("--metadata", action="append", help="Metadata key=value (repeatable)")
    p.add_argument("--config", help="JSON file to read the configuration from")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    co = sub.add_parser(
        "consumer",
        aliases=["con", "obs", "c"],
        help="JetStream consumer management",
        parents=parents,
    )
    cs = co.add_subparsers(dest="consumer_cmd", metavar="COMMAND", required=True)

    def cmd(name: str, fn: Handler, help: str, aliases: list[str] | None = None) -> Any:
        p = cs.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd("add", consumer_add, "Create a consumer", ["create", "new"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", nargs="?", help="Consumer name")
    _create_flags(p, edit=False)
    p.add_argument("--output", help="Save the configuration to a file instead of creating")
    p.add_argument("--defaults", action="store_true", help="Accept default values for all prompts")

    p = cmd("edit", consumer_edit, "Edit a consumer's configuration", ["update"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Consumer name")
    _create_flags(p, edit=True)
    p.add_argument("-f", "--force", action="store_true", help="Edit without prompting")
    p.add_argument("--dry-run", action="store_true", help="Only show the differences")

    p = cmd("info", consumer_info, "Consumer information", ["nfo"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Consumer name")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("ls", consumer_ls, "List a stream's consumers", ["list"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("-n", "--names", action="store_true", help="Show just the names")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd("rm", consumer_rm, "Remove a consumer", ["delete", "del"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Consumer name")
    p.add_argument("-f", "--force", action="store_true", help="Remove without prompting")

    p = cmd("copy", consumer_copy, "Create a consumer from another's configuration", ["cp"])
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Source consumer")
    p.add_argument("destination", help="New consumer")
    _create_flags(p, edit=False)

    p = cmd("next", consumer_next, "Retrieve messages from a pull consumer")
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Consumer name")
    p.add_argument(
        "--ack", action=argparse.BooleanOptionalAction, default=None, help="Acknowledge (default)"
    )
    p.add_argument("--nak", action="store_true", help="Negatively acknowledge")
    p.add_argument("--term", action="store_true", help="Terminate the message")
    p.add_argument("-r", "--raw", action="store_true", help="Show only the message bodies")
    p.add_argument("--wait", help="Wait up to this long before acknowledging")
    p.add_argument("--count", type=int, default=1, help="Number of messages to fetch")
    p.add_argument("-j", "--json", action="store_true", help="One JSON object per message")

    p = cmd("sub", consumer_sub, "Retrieve messages from a consumer")
    p.add_argument("stream", help="Stream name")
    p.add_argument("consumer", help="Consumer name")
    p.add_argument(
        "--ack", action=argparse.BooleanOptionalAction, default=True, help="Acknowledge (default)"
    )
    p.add_argument("-r", "--raw", action="store_true", help="Show only the message bodies")
    p.add_argument("--deliver-group", help="Queue group of a push consumer")
    p.add_argument("--count", type=int, default=0, help="Exit after this many messages")


async def create_consumer(
    api: JsApi, stream: str, cfg: dict[str, Any], action: str = ""
) -> dict[str, Any]:
    name = cfg.get("durable_name") or cfg.get("name")
    req: dict[str, Any] = {"stream_name": stream, "config": cfg}
    if action:
        req["action"] = action
    subject = f"CONSUMER.CREATE.{stream}.{name}" if name else f"CONSUMER.CREATE.{stream}"
    return await api.request(subject, req)


# --------------------------------------------------------------------------- actions
async def consumer_add(s: Session, a: argparse.Namespace) -> None:
    if a.config:
        cfg = load_config_file(a.config)
        if a.consumer:
            cfg["durable_name"] = a.consumer
    else:
        cfg = prepare_config(a)
    if a.output:
        Path(a.output).write_text(json.dumps(cfg, indent=2) + "\n")
        return
    api = await s.api()
    await require_consumers(s, a.stream)
    try:
        info = await create_consumer(
            api, a.stream, cfg, action="create" if cfg.get("durable_name") else ""
        )
    except ApiError as e:
        raise CliError(f"Consumer creation failed: {e}") from e
    if a.json:
        print_json(info)
        return
    show_consumer_info(info)


async def consumer_copy(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    src = await load_consumer(api, a.stream, a.consumer)
    cfg = dict(src["config"])
    cfg.pop("name", None)
    cfg["durable_name"] = a.destination
    apply_editable(cfg, a)
    if a.pull:
        cfg.pop("deliver_subject", None)
    if a.ack:
        cfg["ack_policy"] = a.ack
    if a.deliver:
        cfg.pop("opt_start_seq", None)
        cfg.pop("opt_start_time", None)
        set_start_policy(cfg, a.deliver)
    if not cfg.get("deliver_subject"):
        for k in ("idle_heartbeat", "flow_control", "deliver_group"):
            cfg.pop(k, None)
    try:
        info = await create_consumer(api, a.stream, cfg, action="create")
    except ApiError as e:
        raise CliError(f"Consumer creation failed: {e}") from e
    if a.json:
        print_json(info)
        return
    show_consumer_info(info)


async def load_consumer(api: JsApi, stream: str, name: str) -> dict[str, Any]:
    try:
        return await api.request(f"CONSUMER.INFO.{stream}.{name}")
    except ApiError as e:
        raise CliError(f"could not load Consumer {stream} > {name}: {e}") from e


async def consumer_edit(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await require_consumers(s, a.stream)
    cur = await load_consumer(api, a.stream, a.consumer)
    old = dict(cur["config"])
    if not old.get("durable_name"):
        raise CliError("only durable consumers can be edited")
    if a.config:
        new = load_config_file(a.config)
        new["durable_name"] = a.consumer
    else:
        new = json.loads(json.dumps(old))
        apply_editable(new, a)
    if not confirm_edit(old, new, a, f"Consumer {a.stream} > {a.consumer}"):
        return
    try:
        info = await create_consumer(api, a.stream, new, action="update")
    except ApiError as e:
        raise CliError(f"could not edit Consumer {a.stream} > {a.consumer}: {e}") from e
    if a.json:
        print_json(info)
        return
    show_consumer_info(info)


async def consumer_info(s: Session, a: argparse.Namespace) -> None:
    await require_consumers(s, a.stream)
    info = await load_consumer(await s.api(), a.stream, a.consumer)
    if a.json:
        print_json(info)
        return
    show_consumer_info(info)


def show_consumer_info(info: dict[str, Any]) -> None:
    cfg: dict[str, Any] = info.get("config") or {}
    name = info.get("name") or cfg.get("durable_name") or cfg.get("name", "")
    stream = info.get("stream_name", "")
    pairs: list[tuple[str, Any]] = [("Name", name)]
    if cfg.get("description"):
        pairs.append(("Description", cfg["description"]))
    if cfg.get("deliver_subject"):
        pairs.append(("Delivery Subject", cfg["deliver_subject"]))
    else:
        pairs.append(("Pull Mode", "true"))
    if cfg.get("filter_subject"):
        pairs.append(("Filter Subject", cfg["filter_subject"]))
    for f in cfg.get("filter_subjects") or []:
        pairs.append(("Filter Subjects", f))
    dp = cfg.get("deliver_policy", "all")
    pairs.append(("Deliver Policy", _TITLES.get(dp, dp)))
    if dp == "by_start_sequence":
        pairs[-1] = ("Deliver Policy", f"From Sequence {cfg.get('opt_start_seq')}")
    elif dp == "by_start_time":
        pairs[-1] = ("Deliver Policy", f"Since {human_time(cfg.get('opt_start_time'))}")
    if cfg.get("deliver_group"):
        pairs.append(("Deliver Queue Group", cfg["deliver_group"]))
    ap = cfg.get("ack_policy", "none")
    pairs.append(("Ack Policy", _TITLES.get(ap, ap)))
    if ap != "none":
        pairs.append(("Ack Wait", human_duration(cfg.get("ack_wait"))))
    rp = cfg.get("replay_policy", "instant")
    pairs.append(("Replay Policy", _TITLES.get(rp, rp)))
    md = cfg.get("max_deliver", -1)
    if md and md > 0:
        pairs.append(("Maximum Deliveries", human_count(md)))
    if cfg.get("sample_freq"):
        pairs.append(("Sampling Rate", cfg["sample_freq"]))
    if cfg.get("rate_limit_bps"):
        pairs.append(("Rate Limit", f"{human_count(cfg['rate_limit_bps'])} bps"))
    if cfg.get("max_ack_pending"):
        pairs.append(("Max Ack Pending", human_count(cfg["max_ack_pending"])))
    if cfg.get("headers_only"):
        pairs.append(("Headers Only", "true"))
    if cfg.get("idle_heartbeat"):
        pairs.append(("Idle Heartbeat", human_duration(cfg["idle_heartbeat"])))
    if cfg.get("deliver_subject"):
        pairs.append(("Flow Control", "true" if cfg.get("flow_control") else "false"))
    else:
        if cfg.get("max_waiting"):
            pairs.append(("Max Waiting Pulls", human_count(cfg["max_waiting"])))
        if cfg.get("max_batch"):
            pairs.append(("Max Pull Batch", human_count(cfg["max_batch"])))
        if cfg.get("max_expires"):
            pairs.append(("Max Pull Expire", human_duration(cfg["max_expires"])))
    if cfg.get("inactive_threshold"):
        pairs.append(("Inactive Threshold", human_duration(cfg["inactive_threshold"])))
    if cfg.get("backoff"):
        pairs.append(("Backoff", ", ".join(human_duration(b) for b in cfg["backoff"])))
    title = f"Information for Consumer {stream} > {name} created {human_time(info.get('created'))}"
    print_section(title, [])
    print_section("Configuration:", pairs)
    dl = info.get("delivered") or {}
    af = info.get("ack_floor") or {}
    state: list[tuple[str, Any]] = [
        (
            "Last Delivered Message",
            f"Consumer sequence: {human_count(dl.get('consumer_seq'))} "
            f"Stream sequence: {human_count(dl.get('stream_seq'))}"
            + (
                f" Last delivery: {human_since(dl.get('last_active'))} ago"
                if dl.get("last_active")
                else ""
            ),
        ),
        (
            "Acknowledgment Floor",
            f"Consumer sequence: {human_count(af.get('consumer_seq'))} "
            f"Stream sequence: {human_count(af.get('stream_seq'))}"
            + (
                f" Last Ack: {human_since(af.get('last_active'))} ago"
                if af.get("last_active")
                else ""
            ),
        ),
        (
            "Outstanding Acks",
            f"{human_count(info.get('num_ack_pending'))}"
            + (
                f" out of maximum {human_count(cfg['max_ack_pending'])}"
                if cfg.get("max_ack_pending")
                else ""
            ),
        ),
        ("Redelivered Messages", human_count(info.get("num_redelivered"))),
        ("Unprocessed Messages", human_count(info.get("num_pending"))),
    ]
    if cfg.get("deliver_subject"):
        state.append(("Active Interest", "Active" if info.get("push_bound") else "No interest"))
    else:
        mw = cfg.get("max_waiting")
        state.append(
            (
                "Waiting Pulls",
                f"{human_count(info.get('num_waiting'))}"
                + (f" of maximum {human_count(mw)}" if mw else ""),
            )
        )
    print_section("State:", state)


async def consumer_ls(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await require_consumers(s, a.stream)
    try:
        infos = await api.paged(f"CONSUMER.LIST.{a.stream}", "consumers")
    except ApiError as e:
        raise CliError(f"could not load Consumers: {e}") from e
    infos.sort(key=lambda i: str(i.get("name")))
    names = [i.get("name") for i in infos]
    if a.json:
        print_json(names)
        return
    if a.names:
        for n in names:
            console.print(str(n), markup=False)
        return
    if not infos:
        console.print("No Consumers defined")
        return
    rows = []
    for i in infos:
        cfg = i.get("config") or {}
        last = (i.get("delivered") or {}).get("last_active")
        rows.append(
            (
                i.get("name"),
                cfg.get("description", ""),
                human_time(i.get("created")),
                human_count(i.get("num_ack_pending")),
                human_count(i.get("num_pending")),
                f"{human_since(last)} ago" if last else "never",
            )
        )
    print_table(
        "Consumers",
        ["Name", "Description", "Created", "Ack Pending", "Unprocessed", "Last Delivery"],
        rows,
        right=[3, 4],
    )


async def consumer_rm(s: Session, a: argparse.Namespace) -> None:
    if not confirm(f"Really delete Consumer {a.stream} > {a.consumer}", a.force):
        return
    api = await s.api()
    await require_consumers(s, a.stream)
    try:
        await api.request(f"CONSUMER.DELETE.{a.stream}.{a.consumer}")
    except ApiError as e:
        raise CliError(f"could not remove Consumer {a.stream} > {a.consumer}: {e}") from e


def _print_js_msg(m: Msg, raw: bool, as_json: bool = False) -> None:
    meta = parse_ack_subject(m.reply or "")
    data = m.data.decode(errors="replace")
    if as_json:
        out: dict[str, Any] = {"subject": m.subject, "data": data, "headers": dict(m.headers or {})}
        if meta:
            out.update(
                stream=meta.stream,
                consumer=meta.consumer,
                delivered=meta.delivered,
                stream_seq=meta.stream_seq,
                consumer_seq=meta.consumer_seq,
                pending=meta.pending,
            )
        console.file.write(json.dumps(out) + "\n")
        return
    if raw:
        console.file.write(data + "\n")
        return
    now = datetime.now().strftime("%H:%M:%S")
    if meta is None:
        console.print(
            f"--- subject: {m.subject}" + (f" reply: {m.reply}" if m.reply else ""), markup=False
        )
    else:
        console.print(
            f"[{now}] subj: {m.subject} / tries: {meta.delivered} / cons seq: {meta.consumer_seq} "
            f"/ str seq: {meta.stream_seq} / pending: {human_count(meta.pending)}",
            markup=False,
        )
    if m.headers:
        console.print()
        console.print("Headers:")
        console.print()
        for k, v in m.headers.items():
            console.print(f"  {k}: {v}", markup=False)
        console.print()
        console.print("Data:")
    console.print()
    console.file.write(data + "\n")


async def _next_one(s: Session, a: argparse.Namespace, stream: str, name: str) -> None:
    nc = await s.nc()
    api = await s.api()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=1)
    expires = max(int(s.opts.timeout * 1e9) - 100_000_000, 100_000_000)
    req = json.dumps({"batch": 1, "expires": expires}).encode()
    await nc.publish(api.subject(f"CONSUMER.MSG.NEXT.{stream}.{name}"), req, reply=inbox)
    try:
        m = await sub.next_msg(timeout=s.opts.timeout)
    except Exception:
        await _fatal_if_not_pull(api, stream, name)
        raise CliError("no message received") from None
    status = (m.headers or {}).get("Status") if not m.data else None
    if status == "503":
        await _fatal_if_not_pull(api, stream, name)
        raise CliError("no responders: the consumer is not available")
    if status in ("404", "408", "409"):
        desc = (m.headers or {}).get("Description", "")
        raise CliError(f"no message received ({status} {desc})".rstrip())
    _print_js_msg(m, a.raw, getattr(a, "json", False))
    if a.term:
        await nc.publish(m.reply, b"+TERM")
        await nc.flush()
        if not a.raw:
            console.print("\nTerminated message")
        return
    if a.ack or a.nak:
        delay = 0.0
        if a.wait:
            delay = random.random() * parse_duration(a.wait) / 1e9
            await asyncio.sleep(delay)
        await nc.publish(m.reply, b"-NAK" if a.nak else b"+ACK")
        await nc.flush()
        if not a.raw and not getattr(a, "json", False):
            neg = "Negative " if a.nak else ""
            after = f" after {human_duration(delay * 1e9)} delay" if delay else ""
            console.print(f"\n{neg}Acknowledged message{after}\n")


async def _fatal_if_not_pull(api: JsApi, stream: str, name: str) -> None:
    info = await load_consumer(api, stream, name)
    if (info.get("config") or {}).get("deliver_subject"):
        raise CliError(f"consumer {name!r} is not a Pull consumer")


async def consumer_next(s: Session, a: argparse.Namespace) -> None:
    if a.term and (a.nak or a.ack):
        raise CliError("can not both Acknowledge and Terminate message")
    if a.ack is None:
        a.ack = not a.term
    await require_consumers(s, a.stream)
    for _ in range(max(a.count, 1)):
        await _next_one(s, a, a.stream, a.consumer)


async def consumer_sub(s: Session, a: argparse.Namespace) -> None:
    api = await s.api()
    await require_consumers(s, a.stream)
    info = await load_consumer(api, a.stream, a.consumer)
    cfg = info.get("config") or {}
    if cfg.get("ack_policy") == "none":
        a.ack = False
    if not cfg.get("deliver_subject"):
        a.nak = a.term = False
        a.wait = None
        for _ in range(max(a.count, 1)):
            await _next_one(s, a, a.stream, a.consumer)
        return
    nc = await s.nc()
    if not a.raw:
        console.print(
            f"Subscribing to topic {cfg['deliver_subject']} "
            f"auto acknowledgment: {str(a.ack).lower()}"
        )
        console.print()
        console.print("Consumer Info:")
        console.print(
            f"  Ack Policy: {_TITLES.get(cfg.get('ack_policy', ''), cfg.get('ack_policy'))}"
        )
        if cfg.get("ack_policy") != "none":
            console.print(f"    Ack Wait: {human_duration(cfg.get('ack_wait'))}")
        console.print()
    done = asyncio.Event()
    n = 0

    async def handler(m: Msg) -> None:
        nonlocal n
        if not m.data and (m.headers or {}).get("Status") == "100":
            stalled = (m.headers or {}).get("Nats-Consumer-Stalled")
            if stalled:
                await nc.publish(stalled, b"")
            elif m.reply:
                await nc.publish(m.reply, b"")
            return
        n += 1
        _print_js_msg(m, a.raw)
        console.file.flush()
        if a.ack and m.reply:
            await nc.publish(m.reply, b"+ACK")
        if a.count and n >= a.count:
            done.set()

    group = a.deliver_group or cfg.get("deliver_group") or ""
    sub = await nc.subscribe(cfg["deliver_subject"], queue=group, cb=handler)
    try:
        await done.wait()
    finally:
        await nc.flush()
        await sub.unsubscribe()
