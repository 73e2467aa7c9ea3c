"""``nats server ping/info/check`` and ``nats account info``."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from . import backup, server_report
from .conn import ApiError, Session, connect
from .output import (
    CliError,
    console,
    human_bytes,
    human_count,
    human_duration,
    limit,
    parse_duration,
    print_json,
    print_section,
    print_table,
)

__all__ = ["register"]

Handler = Callable[[Session, argparse.Namespace], Any]

NAGIOS = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}


def register(sub: Any, parents: list[argparse.ArgumentParser]) -> None:
    srv = sub.add_parser("server", aliases=["sv"], help="Server information", parents=parents)
    ss = srv.add_subparsers(dest="server_cmd", metavar="COMMAND", required=True)

    def cmd(
        parent: Any, name: str, fn: Handler, help: str, aliases: list[str] | None = None
    ) -> Any:
        p = parent.add_parser(name, aliases=aliases or [], help=help, parents=parents)
        p.set_defaults(func=fn)
        return p

    p = cmd(ss, "ping", server_ping, "Ping the servers")
    p.add_argument("--count", type=int, default=0, help="Expect this many servers")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")

    p = cmd(ss, "info", server_info, "Show the connected server's INFO")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    server_report.register(ss, cmd, parents)

    chk = ss.add_parser("check", help="Health checks (Nagios exit codes)", parents=parents)
    cs = chk.add_subparsers(dest="check_cmd", metavar="CHECK", required=True)
    fmt = {"choices": ["nagios", "json", "text"], "default": "nagios", "help": "Output format"}

    p = cmd(cs, "connection", check_connection, "Check connection, RTT and a request", ["conn"])
    p.add_argument("--connect-warn", default="500ms", help="Warning threshold for connecting")
    p.add_argument("--connect-critical", default="1s", help="Critical threshold for connecting")
    p.add_argument("--rtt-warn", default="500ms", help="Warning threshold for the RTT")
    p.add_argument("--rtt-critical", default="1s", help="Critical threshold for the RTT")
    p.add_argument("--req-warn", default="500ms", help="Warning threshold for a request")
    p.add_argument("--req-critical", default="1s", help="Critical threshold for a request")
    p.add_argument("--format", **fmt)

    p = cmd(cs, "jetstream", check_jetstream, "Check JetStream account usage", ["js"])
    p.add_argument("--mem-warn", type=int, default=75, help="Memory use warning percentage")
    p.add_argument("--mem-critical", type=int, default=90, help="Memory use critical percentage")
    p.add_argument("--store-warn", type=int, default=75, help="File use warning percentage")
    p.add_argument("--store-critical", type=int, default=90, help="File use critical percentage")
    p.add_argument("--format", **fmt)

    p = cmd(cs, "stream", check_stream, "Check a stream's message count and lag")
    p.add_argument("--stream", required=True, help="The stream to check")
    p.add_argument("--msgs-warn", type=int, default=0, help="Warn with fewer messages than this")
    p.add_argument("--msgs-critical", type=int, default=0, help="Critical below this count")
    p.add_argument("--format", **fmt)

    acc = sub.add_parser("account", aliases=["a"], help="Account information", parents=parents)
    acs = acc.add_subparsers(dest="account_cmd", metavar="COMMAND", required=True)
    p = cmd(acs, "info", account_info, "Account information")
    p.add_argument("-j", "--json", action="store_true", help="Produce JSON output")
    backup.register_account(lambda *a, **k: cmd(acs, *a, **k))


def _server_info(nc: Client) -> dict[str, Any]:
    si: Any = getattr(nc, "_server_info", {})
    return dict(si) if isinstance(si, dict) else {}


async def _collect(nc: Client, subject: str, wait: float) -> list[Msg]:
    """Scatter-gather: replies until ``wait`` passes without one (100 ms after the last)."""
    got: list[Msg] = []
    inbox = nc.new_inbox()
    arrived = asyncio.Event()

    async def cb(m: Msg) -> None:
        got.append(m)
        arrived.set()

    sub = await nc.subscribe(inbox, cb=cb)
    await nc.publish(subject, b"", reply=inbox)
    await nc.flush()
    left = wait
    while True:
        arrived.clear()
        try:
            await asyncio.wait_for(arrived.wait(), left)
        except TimeoutError:
            break
        left = 0.1
    await sub.unsubscribe()
    return [m for m in got if m.data]


async def server_ping(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    start = time.monotonic()
    replies = await _collect(nc, "$SYS.REQ.SERVER.PING", min(s.opts.timeout, 0.5))
    rows: list[dict[str, Any]] = []
    for m in replies:
        try:
            d = json.loads(m.data)
        except ValueError:
            continue
        srv = d.get("server") or {}
        rows.append({"name": srv.get("name", "?"), "id": srv.get("id"), "rtt": None})
    if rows:
        elapsed = time.monotonic() - start
        for r in rows:
            r["rtt"] = elapsed
    else:
        # Without system account access, ping the connected server.
        rtt = await nc.rtt()
        si = _server_info(nc)
        rows.append(
            {
                "name": si.get("server_name") or si.get("server_id"),
                "id": si.get("server_id"),
                "rtt": rtt,
            }
        )
    if a.json:
        print_json(rows)
    else:
        for r in rows:
            console.print(
                f"{r['name']:<30} rtt={human_duration(float(r['rtt']) * 1e9)}", markup=False
            )
        console.print()
        console.print(f"---- ping statistics ----\n{len(rows)} replies", markup=False)
    if a.count and len(rows) != a.count:
        raise CliError(f"expected {a.count} servers, {len(rows)} answered")


async def server_info(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    si = _server_info(nc)
    if a.json:
        print_json(si)
        return
    pairs: list[tuple[str, Any]] = [
        ("Name", si.get("server_name", "")),
        ("ID", si.get("server_id", "")),
        ("Version", si.get("version", "")),
        ("Go", si.get("go", "")),
        ("Host", f"{si.get('host', '')}:{si.get('port', '')}"),
        ("JetStream", "yes" if si.get("jetstream") else "no"),
        ("Headers", "yes" if si.get("headers") else "no"),
        ("Maximum Payload", human_bytes(si.get("max_payload"))),
        ("Auth Required", "yes" if si.get("auth_required") else "no"),
        ("Protocol", si.get("proto", "")),
    ]
    print_section(f"Server information for {si.get('server_name', '')}", pairs)


def _report(fmt: str, name: str, status: int, checks: list[str], perf: dict[str, Any]) -> None:
    if fmt == "json":
        print_json({"check": name, "status": NAGIOS[status], "checks": checks, "perf": perf})
    elif fmt == "text":
        console.print(f"{name}: {NAGIOS[status]}", markup=False)
        for c in checks:
            console.print(f"  {c}", markup=False)
    else:
        pd = " ".join(f"{k}={v}" for k, v in perf.items())
        console.print(
            f"{NAGIOS[status]} {name} {' '.join(checks)} | {pd}".rstrip(" |"), markup=False
        )


class CheckFailed(Exception):
    """A check's status other than OK; ``main`` exits with the Nagios code."""

    def __init__(self, status: int) -> None:
        super().__init__(NAGIOS[status])
        self.status = status


def _threshold(v: float, warn: float, crit: float, label: str, unit: str = "s") -> tuple[int, str]:
    shown = human_duration(v * 1e9) if unit == "s" else f"{v:.0f}{unit}"
    if crit and v >= crit:
        return 2, f"CRIT:{label} {shown}"
    if warn and v >= warn:
        return 1, f"WARN:{label} {shown}"
    return 0, f"OK:{label} {shown}"


async def check_connection(s: Session, a: argparse.Namespace) -> None:
    name = "Connection"
    start = time.monotonic()
    try:
        nc = await connect(s.opts)
    except CliError as e:
        _report(a.format, name, 2, [f"CRIT:{e}"], {})
        raise CheckFailed(2) from e
    connect_t = time.monotonic() - start
    try:
        rtt = await nc.rtt()
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox, cb=None)
        t0 = time.monotonic()
        await nc.publish(inbox, b"ping")
        await sub.next_msg(timeout=s.opts.timeout)
        req_t = time.monotonic() - t0
        await sub.unsubscribe()
    finally:
        await nc.close()
    results = [
        _threshold(
            connect_t,
            parse_duration(a.connect_warn) / 1e9,
            parse_duration(a.connect_critical) / 1e9,
            "connect time",
        ),
        _threshold(
            rtt, parse_duration(a.rtt_warn) / 1e9, parse_duration(a.rtt_critical) / 1e9, "rtt time"
        ),
        _threshold(
            req_t,
            parse_duration(a.req_warn) / 1e9,
            parse_duration(a.req_critical) / 1e9,
            "round trip",
        ),
    ]
    status = max(r[0] for r in results)
    perf = {
        "connect_time": f"{connect_t:.4f}s",
        "rtt": f"{rtt:.4f}s",
        "request_time": f"{req_t:.4f}s",
    }
    _report(a.format, name, status, [r[1] for r in results], perf)
    if status:
        raise CheckFailed(status)


async def check_jetstream(s: Session, a: argparse.Namespace) -> None:
    name = "JetStream"
    api = await s.api()
    try:
        acct = await api.request("INFO")
    except CliError as e:
        _report(a.format, name, 2, [f"CRIT:{e}"], {})
        raise CheckFailed(2) from e
    lim = acct.get("limits") or {}
    checks: list[str] = []
    status = 0
    for kind, used_key, lim_key, warn, crit in (
        ("memory", "memory", "max_memory", a.mem_warn, a.mem_critical),
        ("storage", "storage", "max_storage", a.store_warn, a.store_critical),
    ):
        mx = int(lim.get(lim_key, -1) or -1)
        used = int(acct.get(used_key, 0) or 0)
        if mx > 0:
            pct = used * 100 / mx
            st, text = _threshold(pct, warn, crit, f"{kind} use", unit="%")
            status = max(status, st)
            checks.append(text)
    checks.append(f"{acct.get('streams', 0)} streams {acct.get('consumers', 0)} consumers")
    perf = {
        "memory": f"{acct.get('memory', 0)}B",
        "storage": f"{acct.get('storage', 0)}B",
        "streams": acct.get("streams", 0),
        "consumers": acct.get("consumers", 0),
    }
    _report(a.format, name, status, checks, perf)
    if status:
        raise CheckFailed(status)


async def check_stream(s: Session, a: argparse.Namespace) -> None:
    name = f"Stream {a.stream}"
    api = await s.api()
    try:
        nfo = await api.request(f"STREAM.INFO.{a.stream}")
    except CliError as e:
        _report(a.format, name, 2, [f"CRIT:{e}"], {})
        raise CheckFailed(2) from e
    msgs = int((nfo.get("state") or {}).get("messages", 0))
    status = 0
    text = f"OK:{msgs} messages"
    if a.msgs_critical and msgs < a.msgs_critical:
        status, text = 2, f"CRIT:{msgs} messages below {a.msgs_critical}"
    elif a.msgs_warn and msgs < a.msgs_warn:
        status, text = 1, f"WARN:{msgs} messages below {a.msgs_warn}"
    _report(a.format, name, status, [text], {"messages": msgs})
    if status:
        raise CheckFailed(status)


async def account_info(s: Session, a: argparse.Namespace) -> None:
    nc = await s.nc()
    si = _server_info(nc)
    user_info: dict[str, Any] = {}
    try:
        r = await nc.request("$SYS.REQ.USER.INFO", b"", timeout=min(s.opts.timeout, 0.5))
        d = json.loads(r.data)
        if isinstance(d.get("data"), dict):
            user_info = d["data"]
    except Exception:
        pass
    js: dict[str, Any] | None = None
    js_error = ""
    try:
        js = await (await s.api()).request("INFO")
    except ApiError as e:
        js_error = str(e)
    except CliError as e:
        js_error = str(e)
    if a.json:
        print_json({"server": si, "user": user_info, "jetstream": js})
        return
    rtt = await nc.rtt()
    url = nc.connected_url
    pairs: list[tuple[str, Any]] = [
        ("User", user_info.get("user", "")),
        ("Account", user_info.get("account", "")),
        ("Client ID", si.get("client_id", "")),
        ("Client IP", si.get("client_ip", "")),
        ("RTT", human_duration(rtt * 1e9)),
        ("Headers Supported", "true" if si.get("headers") else "false"),
        ("Maximum Payload", human_bytes(si.get("max_payload"))),
        ("Connected URL", url.geturl() if url else ""),
        ("Connected Address", f"{si.get('host', '')}:{si.get('port', '')}"),
        ("Connected Server ID", si.get("server_id", "")),
        ("Connected Server Name", si.get("server_name", "")),
        ("Connected Server Version", si.get("version", "")),
        ("TLS Connection", "yes" if si.get("tls_required") else "no"),
    ]
    print_section("Account Information", pairs)
    if js is None:
        console.print(f"JetStream Account Information: not available ({js_error})", markup=False)
        console.print()
        return
    lim = js.get("limits") or {}
    console.print("JetStream Account Information:")
    console.print()
    api_stats = js.get("api") or {}
    print_section(
        "Account Usage:",
        [
            ("Storage", human_bytes(js.get("storage"))),
            ("Memory", human_bytes(js.get("memory"))),
            ("Streams", human_count(js.get("streams"))),
            ("Consumers", human_count(js.get("consumers"))),
            ("API Requests", human_count(api_stats.get("total"))),
            ("API Errors", human_count(api_stats.get("errors"))),
        ],
    )
    print_table(
        "Account Limits",
        ["Limit", "Used", "Maximum"],
        [
            ("Memory", human_bytes(js.get("memory")), limit(lim.get("max_memory"), human_bytes)),
            ("Storage", human_bytes(js.get("storage")), limit(lim.get("max_storage"), human_bytes)),
            ("Streams", human_count(js.get("streams")), limit(lim.get("max_streams"))),
            ("Consumers", human_count(js.get("consumers")), limit(lim.get("max_consumers"))),
            ("Ack Pending per Consumer", "", limit(lim.get("max_ack_pending"))),
            ("Bytes per Stream required", "", "true" if lim.get("max_bytes_required") else "false"),
        ],
        right=[1, 2],
    )
