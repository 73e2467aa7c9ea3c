"""``nats server list``, ``server report jetstream|connections`` and ``server request``: the
system account's ``$SYS.REQ.SERVER`` services, asked of every server (or one), as the Go
CLI asks them (jsm.go's ``serverdata``: a ``{}`` body when there are no options, the
answers collected until 300 ms pass without one). They need a user of the system account:
any other gets no responders, which is reported as the Go CLI reports it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from .conn import Session
from .output import (
    CliError,
    console,
    human_bytes,
    human_count,
    human_duration,
    parse_time,
    print_json,
    print_table,
)

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]

# ``nats server request <kind>``: the Go CLI's names for the endpoints
REQUESTS = {
    "variables": "VARZ",
    "connections": "CONNZ",
    "routes": "ROUTEZ",
    "gateways": "GATEWAYZ",
    "leafnodes": "LEAFZ",
    "subscriptions": "SUBSZ",
    "accounts": "ACCOUNTZ",
    "jetstream": "JSZ",
    "raft": "RAFTZ",
    "health": "HEALTHZ",
}
NO_SYSTEM = (
    "server request failed, ensure the account used has system privileges and appropriate"
    " permissions"
)


async def ask(
    nc: Client, subject: str, body: dict[str, Any] | None, timeout: float, expect: int = 0
) -> list[dict[str, Any]]:
    """Every server's answer: until ``expect`` arrived, or 300 ms after the last one (the
    first may take ``timeout``)."""
    inbox = nc.new_inbox()
    got: list[dict[str, Any]] = []
    arrived = asyncio.Event()
    refused: list[Msg] = []

    async def cb(m: Msg) -> None:
        if not m.data and m.headers and m.headers.get("Status") == "503":
            refused.append(m)
        else:
            try:
                doc = json.loads(m.data)
            except ValueError:
                return
            if isinstance(doc, dict):
                got.append(doc)
        arrived.set()

    sub = await nc.subscribe(inbox, cb=cb)
    try:
        await nc.publish(subject, json.dumps(body or {}).encode(), reply=inbox)
        wait = timeout
        while not (expect and len(got) >= expect):
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), wait)
            except TimeoutError:
                break
            if refused:
                raise CliError(NO_SYSTEM)
            wait = 0.3
    finally:
        await sub.unsubscribe()
    if not got and refused:
        raise CliError(NO_SYSTEM)
    return got


def _filters(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if getattr(a, "name", None):
        out["server_name"] = a.name
    if getattr(a, "cluster", None):
        out["cluster"] = a.cluster
    if getattr(a, "tags", None):
        out["tags"] = a.tags
    if out:
        out["exact_match"] = True
    return out


async def server_list(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    start = time.monotonic()
    answers = await ask(nc, "$SYS.REQ.SERVER.PING", _filters(a), s.opts.timeout, a.expect)
    rtt = time.monotonic() - start
    if a.json:
        print_json(answers)
        return
    rows = []
    totals = {"conns": 0, "subs": 0}
    for doc in sorted(answers, key=lambda d: str(d["server"].get("name"))):
        srv, st = doc["server"], doc.get("statsz") or {}
        started = parse_time(st.get("start"))
        uptime = time.time() - started.timestamp() if started else 0.0
        totals["conns"] += int(st.get("connections", 0))
        totals["subs"] += int(st.get("subscriptions", 0))
        rows.append((
            srv.get("name", ""), srv.get("cluster", ""), srv.get("host", ""),
            srv.get("ver", ""), "yes" if srv.get("jetstream") else "no",
            human_count(st.get("connections", 0)), human_count(st.get("subscriptions", 0)),
            len(st.get("routes") or []), f"{float(st.get('cpu', 0)):.1f}",
            human_bytes(st.get("mem", 0)), human_duration(uptime * 1e9),
        ))  # fmt: skip
    print_table(
        f"Server Overview ({len(rows)} servers, {human_duration(rtt * 1e9)})",
        ["Name", "Cluster", "Host", "Version", "JS", "Conns", "Subs", "Routes", "CPU %",
         "Memory", "Uptime"],
        rows, right=(5, 6, 7, 8, 9),
    )  # fmt: skip
    console.print(f"{len(rows)} servers, {totals['conns']} connections, "
                  f"{totals['subs']} subscriptions")  # fmt: skip
    if a.expect and len(rows) != a.expect:
        raise CliError(f"expected {a.expect} servers, {len(rows)} answered")


async def report_jetstream(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    body = {"raft": True, **_filters(a)} if _filters(a) else {"raft": True, "exact_match": True}
    answers = await ask(nc, "$SYS.REQ.SERVER.PING.JSZ", body, s.opts.timeout, a.expect)
    if a.json:
        print_json(answers)
        return
    rows = []
    meta: dict[str, Any] | None = None
    for doc in sorted(answers, key=lambda d: str(d["server"].get("name"))):
        srv, d = doc["server"], doc.get("data") or {}
        if d.get("disabled"):
            continue
        api = d.get("api") or {}
        mc = d.get("meta_cluster")
        if mc and mc.get("leader") == srv.get("name"):
            meta = mc
        rows.append((
            srv.get("name", ""), srv.get("cluster", ""), srv.get("domain", ""),
            human_count(d.get("streams", 0)), human_count(d.get("consumers", 0)),
            human_count(d.get("messages", 0)), human_bytes(d.get("bytes", 0)),
            human_bytes(d.get("memory", 0)), human_bytes(d.get("storage", 0)),
            human_count(api.get("total", 0)), human_count(api.get("errors", 0)),
        ))  # fmt: skip
    print_table(
        "JetStream Summary",
        ["Server", "Cluster", "Domain", "Streams", "Consumers", "Messages", "Bytes", "Memory",
         "File", "API Req", "API Err"],
        rows, right=tuple(range(3, 11)),
    )  # fmt: skip
    if meta is not None:
        reps = [(meta.get("leader", ""), "yes", "true", "0s")]
        for r in meta.get("replicas") or []:
            active = human_duration(float(r.get("active", 0)))
            reps.append((r.get("name", ""), "", str(bool(r.get("current"))).lower(), active))
        print_table("RAFT Meta Group Information", ["Name", "Leader", "Current", "Active"], reps)


async def report_connections(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    body = {"subscriptions": False, "auth": True, "limit": a.top, **_filters(a)}
    answers = await ask(nc, "$SYS.REQ.SERVER.PING.CONNZ", body, s.opts.timeout)
    conns = []
    for doc in answers:
        for c in (doc.get("data") or {}).get("connections") or []:
            conns.append((doc["server"].get("name", ""), c))
    if a.json:
        print_json([c for _, c in conns])
        return
    key = {"subs": "subscriptions", "in-msgs": "in_msgs", "out-msgs": "out_msgs",
           "in-bytes": "in_bytes", "out-bytes": "out_bytes"}[a.sort]  # fmt: skip
    conns.sort(key=lambda sc: -int(sc[1].get(key, 0)))
    rows = [
        (c.get("cid"), c.get("name", ""), srv, c.get("account", ""),
         f"{c.get('ip')}:{c.get('port')}", c.get("uptime", ""),
         human_count(c.get("in_msgs", 0)), human_count(c.get("out_msgs", 0)),
         human_bytes(c.get("in_bytes", 0)), human_bytes(c.get("out_bytes", 0)),
         human_count(c.get("subscriptions", 0)))
        for srv, c in conns[: a.top]
    ]  # fmt: skip
    print_table(
        f"Top {min(a.top, len(conns))} Connections out of {len(conns)} by {a.sort}",
        ["CID", "Name", "Server", "Account", "Address", "Uptime", "In Msgs", "Out Msgs",
         "In Bytes", "Out Bytes", "Subs"],
        rows, right=(6, 7, 8, 9, 10),
    )  # fmt: skip


async def server_request(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    ep = REQUESTS[a.kind]
    subject = f"$SYS.REQ.SERVER.{a.id}.{ep}" if a.id else f"$SYS.REQ.SERVER.PING.{ep}"
    body: dict[str, Any] = {}
    if a.options:
        try:
            body = json.loads(a.options)
        except ValueError as e:
            raise CliError(f"--options is not JSON: {e}") from e
    body.update(_filters(a))
    answers = await ask(nc, subject, body, s.opts.timeout, 1 if a.id else a.expect)
    for doc in answers:
        print_json(doc)


def register(ss: Any, cmd: Callable[..., Any], parents: list[argparse.ArgumentParser]) -> None:
    """``server list``, ``server report`` and ``server request`` (``cmd(parent, name, fn,
    help, aliases)`` adds a subcommand)."""

    def common(p: argparse.ArgumentParser, expect: bool = True) -> None:
        if expect:
            p.add_argument("expect", nargs="?", type=int, default=0,
                           help="How many servers to expect")  # fmt: skip
        p.add_argument("--name", help="Limit to the server of this name")
        p.add_argument("--cluster", help="Limit to servers of a cluster")
        p.add_argument("--tags", action="append", default=[], help="Limit to servers with tags")
        p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd(ss, "list", server_list, "List known servers", ["ls"])
    common(p)
    rep = ss.add_parser("report", help="Report on various server metrics", parents=parents)
    rs = rep.add_subparsers(dest="report_cmd", metavar="REPORT", required=True)
    p = cmd(rs, "jetstream", report_jetstream, "Report on JetStream activity", ["js"])
    common(p)
    p = cmd(rs, "connections", report_connections, "Report on connections", ["conn", "cx"])
    common(p, expect=False)
    p.add_argument("--top", type=int, default=1000, help="How many connections to show")
    p.add_argument("--sort", choices=["subs", "in-msgs", "out-msgs", "in-bytes", "out-bytes"],
                   default="subs", help="Sort key")  # fmt: skip
    p = cmd(ss, "request", server_request, "Request monitoring data from servers", ["req"])
    p.add_argument("kind", choices=sorted(REQUESTS), help="What to ask for")
    p.add_argument("id", nargs="?", default="", help="Ask only this server (its id)")
    p.add_argument("--options", default="", help="The request's options, JSON")
    common(p)
