"""The console on the monitoring port: ``/console``, a page in the browser showing the
servers and their routes, the streams with their replicas and leaders, the consumers with
their lag, message rates over time, and a stream's messages.

Read-only: the page reads two JSON endpoints here and nothing else.

* ``/console/api/cluster``: every server's VARZ, ROUTEZ and JSZ (streams, consumers,
  configs), asked through the system account's services (``$SYS.REQ.SERVER.PING.<EP>``,
  each server answering for itself), shaped into one view by ``cluster_view``. A stream's
  figures and consumers are its leader's. The console on any server of a cluster shows
  the whole cluster.
* ``/console/api/messages``: a page of a stream's messages, read with the account's
  ``$JS.API.STREAM.MSG.GET`` (``next_by_subj``), as a client reads them.

The page (``console_page/index.html``, ``console_page/app.js``) is built on htm + Preact and draws
its charts with uPlot, both vendored unmodified from npm (``console/package.json`` pins
them; ``make console-vendor`` copies them; a test checks the copies). The monitoring
port has no authentication, as nats-server's has none: whoever reaches it reads what the
console shows, messages included, so it belongs on a trusted network (as the other
monitoring endpoints, which tell every connection's address and subscriptions).
"""

from __future__ import annotations

import base64
import time
from importlib import resources
from typing import Any, Final

import orjson
from aiohttp import web

from natsd.monitor import requests as internal
from natsd.monitor.source import MonitorSource

__all__ = ["Console", "cluster_view", "message_row"]

# The page's files: name -> content type (only these are served).
_FILES: Final = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "console.css": "text/css",
    "vendor/htm-preact-standalone.module.js": "text/javascript",
    "vendor/uPlot.esm.js": "text/javascript",
    "vendor/uPlot.min.css": "text/css",
}
# How long the console waits for the other servers' answers (it stops waiting once every
# server it has a route to has answered).
_GATHER_TIMEOUT: Final = 1.0
_MSG_TIMEOUT: Final = 5.0
# A page of messages, and how much of each payload the page shows.
MAX_PAGE: Final = 100
PREVIEW: Final = 4096


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _answers(raw: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for body in raw:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("data"), dict) and "server" in doc:
            out.append(doc)
    return out


def _consumer_row(c: dict[str, Any]) -> dict[str, Any]:
    cfg = c.get("config") or {}
    return {
        "name": c.get("name", ""),
        "durable": bool(cfg.get("durable_name")),
        "ack_policy": cfg.get("ack_policy", ""),
        "pull": not cfg.get("deliver_subject"),
        "num_pending": c.get("num_pending", 0),
        "num_ack_pending": c.get("num_ack_pending", 0),
        "num_redelivered": c.get("num_redelivered", 0),
        "num_waiting": c.get("num_waiting", 0),
        "delivered": (c.get("delivered") or {}).get("stream_seq", 0),
        "ack_floor": (c.get("ack_floor") or {}).get("stream_seq", 0),
        "last_active": (c.get("delivered") or {}).get("last_active", ""),
    }


def cluster_view(
    this: str,
    varz: list[dict[str, Any]],
    routez: list[dict[str, Any]],
    jsz: list[dict[str, Any]],
) -> dict[str, Any]:
    """One view of the servers' answers (each ``{"server": ServerInfo, "data": ...}``):
    servers by name with their routes, and each stream once, as its leader reports it
    (a server that is not the leader only fills in a stream no leader answered for)."""
    routes: dict[str, list[dict[str, Any]]] = {}
    for doc in routez:
        routes[doc["server"].get("name", "")] = [
            {
                "remote_name": r.get("remote_name", ""),
                "remote_id": r.get("remote_id", ""),
                "rtt": r.get("rtt", ""),
                "in_msgs": r.get("in_msgs", 0),
                "out_msgs": r.get("out_msgs", 0),
                "pending_size": r.get("pending_size", 0),
            }
            for r in doc["data"].get("routes") or []
        ]
    meta: dict[str, Any] = {}
    for doc in jsz:
        if doc["server"].get("name") == this and doc["data"].get("meta_cluster"):
            meta = doc["data"]["meta_cluster"]
    servers = []
    for doc in sorted(varz, key=lambda d: str(d["server"].get("name", ""))):
        v = doc["data"]
        name = doc["server"].get("name", "")
        servers.append({
            "name": name,
            "id": v.get("server_id", ""),
            "cluster": (v.get("cluster") or {}).get("name", ""),
            "version": v.get("version", ""),
            "uptime": v.get("uptime", ""),
            "connections": v.get("connections", 0),
            "subscriptions": v.get("subscriptions", 0),
            "in_msgs": v.get("in_msgs", 0),
            "out_msgs": v.get("out_msgs", 0),
            "in_bytes": v.get("in_bytes", 0),
            "out_bytes": v.get("out_bytes", 0),
            "mem": v.get("mem", 0),
            "cpu": v.get("cpu", 0),
            "jetstream": bool(doc["server"].get("jetstream")),
            "meta_leader": meta.get("leader") == name,
            "routes": routes.get(name, []),
        })  # fmt: skip
    streams: dict[tuple[str, str], tuple[bool, dict[str, Any]]] = {}
    for doc in jsz:
        name = doc["server"].get("name", "")
        for acc in doc["data"].get("account_details") or []:
            for sd in acc.get("stream_detail") or []:
                key = (acc.get("name", ""), sd.get("name", ""))
                cl = sd.get("cluster") or {}
                leads = cl.get("leader") == name
                if key in streams and (streams[key][0] or not leads):
                    continue
                cfg = sd.get("config") or {}
                state = sd.get("state") or {}
                streams[key] = (leads, {
                    "account": key[0],
                    "name": key[1],
                    "leader": cl.get("leader", ""),
                    "replicas": [
                        {"name": r.get("name", ""), "current": bool(r.get("current")),
                         "lag": r.get("lag", 0), "active": r.get("active", 0)}
                        for r in cl.get("replicas") or []
                    ],
                    "subjects": cfg.get("subjects") or [],
                    "storage": cfg.get("storage", ""),
                    "retention": cfg.get("retention", ""),
                    "num_replicas": cfg.get("num_replicas", 1),
                    "messages": state.get("messages", 0),
                    "bytes": state.get("bytes", 0),
                    "first_seq": state.get("first_seq", 0),
                    "last_seq": state.get("last_seq", 0),
                    "consumer_count": state.get("consumer_count", 0),
                    "consumers": [_consumer_row(c) for c in sd.get("consumer_detail") or []],
                })  # fmt: skip
    return {
        "server": this,
        "time": time.time(),
        "meta": meta,
        "servers": servers,
        "streams": [v for _, v in sorted(streams.values(), key=lambda x: (x[1]["account"],
                                                                          x[1]["name"]))],
    }  # fmt: skip


def _headers_text(hdrs: bytes) -> str:
    """The header lines, without the bare ``NATS/1.0`` line every header block starts with
    (a status line with a code stays)."""
    lines = hdrs.decode(errors="replace").strip().split("\r\n")
    if lines and lines[0].strip() == "NATS/1.0":
        lines = lines[1:]
    return "\n".join(lines)


def message_row(msg: dict[str, Any]) -> dict[str, Any]:
    """A ``STREAM.MSG.GET`` message as the browser lists it: headers and payload as text
    (the payload's first ``PREVIEW`` bytes; binary shown as base64)."""
    raw = base64.b64decode(msg.get("data") or "")
    hdrs = base64.b64decode(msg.get("hdrs") or "")
    preview = raw[:PREVIEW]
    try:
        text, binary = preview.decode(), False
    except UnicodeDecodeError:
        text, binary = base64.b64encode(preview).decode(), True
    return {
        "seq": msg.get("seq", 0),
        "subject": msg.get("subject", ""),
        "time": msg.get("time", ""),
        "size": len(raw),
        "headers": _headers_text(hdrs),
        "data": text,
        "binary": binary,
        "truncated": len(raw) > PREVIEW,
    }


class Console:
    """The console's routes on the monitoring server's aiohttp application."""

    def __init__(self, server: MonitorSource) -> None:
        self.server = server

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/console", self.index)
        app.router.add_get("/console/", self.index)
        app.router.add_get("/console/api/cluster", self.cluster)
        app.router.add_get("/console/api/messages", self.messages)
        app.router.add_get("/console/{path:.+}", self.static)

    @staticmethod
    def _file(path: str) -> web.Response:
        ctype = _FILES.get(path)
        if ctype is None:
            raise web.HTTPNotFound()
        page = resources.files("natsd.monitor").joinpath("console_page")
        body = page.joinpath(*path.split("/")).read_bytes()
        resp = web.Response(body=body, content_type=ctype)
        resp.headers["Cache-Control"] = "no-cache"
        return resp

    async def index(self, request: web.Request) -> web.Response:
        return self._file("index.html")

    async def static(self, request: web.Request) -> web.Response:
        return self._file(request.match_info["path"])

    async def cluster(self, request: web.Request) -> web.Response:
        s = self.server
        system = s.accounts.get(s.system_account_name)
        if system is None:
            return _json({"error": "no system account"}, 503)
        cl = s.cluster_usage(subs=False)
        want = 1 + (len(cl.routes) if cl is not None else 0)
        opts = {"accounts": True, "streams": True, "consumer": True, "config": True}

        async def ask(ep: str, body: dict[str, Any]) -> list[dict[str, Any]]:
            subject = b"$SYS.REQ.SERVER.PING." + ep.encode()
            raw = await internal.gather(system, subject, orjson.dumps(body),
                               timeout=_GATHER_TIMEOUT, want=want)  # fmt: skip
            return _answers(raw)

        varz = await ask("VARZ", {})
        routez = await ask("ROUTEZ", {})
        jsz = await ask("JSZ", opts) if s.jetstream_enabled else []
        return _json(cluster_view(s.server_name, varz, routez, jsz))

    async def messages(self, request: web.Request) -> web.Response:
        q = request.query
        account, stream = q.get("account", ""), q.get("stream", "")
        acc = self.server.accounts.get(account)
        if acc is None or not stream or not self.server.jetstream_enabled:
            return _json({"error": f"no stream {stream!r} in account {account!r}"}, 404)
        try:
            seq = max(1, int(q.get("start", "") or 1))
            count = min(MAX_PAGE, max(1, int(q.get("count", "") or 25)))
        except ValueError:
            return _json({"error": "start and count are numbers"}, 400)
        subject = q.get("subject", "") or ">"
        api = b"$JS.API.STREAM.MSG.GET." + stream.encode()
        rows: list[dict[str, Any]] = []
        while len(rows) < count:
            body = orjson.dumps({"seq": seq, "next_by_subj": subject})
            try:
                doc = orjson.loads(await internal.request(acc, api, body, timeout=_MSG_TIMEOUT))
            except TimeoutError:
                return _json({"error": "the stream did not answer", "messages": rows}, 504)
            err = doc.get("error")
            if err is not None:
                if err.get("err_code") == 10037:  # no message found: the end
                    break
                return _json({"error": err.get("description", ""), "messages": rows},
                             404 if err.get("code") == 404 else 400)  # fmt: skip
            row = message_row(doc.get("message") or {})
            rows.append(row)
            seq = int(row["seq"]) + 1
        return _json({"account": account, "stream": stream, "messages": rows, "next": seq})
