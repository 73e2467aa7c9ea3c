"""Monitoring over HTTP with nats-server's endpoint names and JSON field names.

Served by aiohttp on the server's event loop. Each endpoint turns its query into the
options of its builder in ``z.py`` (the same builders answer the system account's
``$SYS.REQ`` services), which reads only through ``MonitorSource``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from natsd.monitor import z
from natsd.monitor.console import Console
from natsd.monitor.metrics import render_metrics
from natsd.monitor.source import MonitorSource
from natsd.version import __version__

__all__ = ["MonitorServer"]


def _json(data: Any) -> web.Response:
    return web.Response(
        body=orjson.dumps(data, option=orjson.OPT_INDENT_2), content_type="application/json"
    )


def _answer(build: Callable[[], dict[str, Any]]) -> web.Response:
    try:
        return _json(build())
    except z.ZError as e:
        if e.status == 503:  # /healthz: JSON with the reason
            body = orjson.dumps({"status": "unavailable", "error": e.text})
            return web.Response(status=503, body=body, content_type="application/json")
        return web.Response(status=e.status, text=e.text)


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _flag(q: Any, name: str, *extra: str) -> bool:
    """A boolean query parameter as nats-server reads one (Go's ``strconv.ParseBool``, and
    the ``extra`` words that mean true); anything else is refused with its 400 text."""
    v = q.get(name, "")
    if v == "" or v in _FALSE:
        return False
    if v in _TRUE or v in extra:
        return True
    why = f'strconv.ParseBool: parsing "{v}": invalid syntax'
    raise z.ZError(400, f"Error decoding boolean for '{name}': {why}")


def _int(q: Any, name: str, default: int) -> int:
    """An integer query parameter as nats-server reads one (``strconv.Atoi``: digits with
    an optional sign); absent, ``default``; anything else is refused with its 400 text."""
    v = q.get(name, "")
    if v == "":
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", v):
        why = f'strconv.Atoi: parsing "{v}": invalid syntax'
        raise z.ZError(400, f"Error decoding int for '{name}': {why}")
    return int(v)


class MonitorServer:
    def __init__(self, server: MonitorSource) -> None:
        self.server = server
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/", self.root)
        app.router.add_get("/varz", self.varz)
        app.router.add_get("/connz", self.connz)
        app.router.add_get("/routez", self.routez)
        app.router.add_get("/subsz", self.subsz)
        app.router.add_get("/subscriptionsz", self.subsz)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/accountz", self.accountz)
        app.router.add_get("/accstatz", self.accstatz)
        app.router.add_get("/jsz", self.jsz)
        app.router.add_get("/raftz", self.raftz)
        app.router.add_get("/metrics", self.metrics)
        Console(server).add_routes(app)
        self.app = app

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> int:
        """Serve on ``host:port`` (0: a free port), over TLS with ``ssl_context``; returns
        the port."""
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host or None, port, reuse_address=True, ssl_context=ssl_context)
        await site.start()
        self._runner = runner
        addrs = runner.addresses
        return int(addrs[0][1]) if addrs else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def root(self, request: web.Request) -> web.Response:
        links = "".join(
            f'<a href="/{p}">{p}</a><br/>'
            for p in (
                "varz",
                "connz",
                "routez",
                "subsz",
                "accountz",
                "accstatz",
                "jsz",
                "raftz",
                "healthz",
                "metrics",
                "console",
            )
        )
        return web.Response(
            text=f"<html><body>natsd {__version__}<br/>{links}</body></html>",
            content_type="text/html",
        )

    def varz_data(self) -> dict[str, Any]:
        return z.varz(self.server)

    async def varz(self, request: web.Request) -> web.Response:
        return _answer(self.varz_data)

    async def routez(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(lambda: z.routez(self.server, subs=_flag(q, "subs", "detail")))

    async def connz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(
            lambda: z.connz(
                self.server,
                offset=_int(q, "offset", 0),
                limit=_int(q, "limit", 1024),
                subs=_flag(q, "subs", "detail"),
                auth=_flag(q, "auth"),
                sort=q.get("sort", "cid"),
                account=q.get("acc", ""),
            )
        )

    async def subsz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(
            lambda: z.subsz(
                self.server,
                subs=_flag(q, "subs", "detail"),
                offset=_int(q, "offset", 0),
                limit=_int(q, "limit", 1024),
                test=q.get("test"),
                account=q.get("acc", ""),
            )
        )

    async def accountz(self, request: web.Request) -> web.Response:
        return _answer(lambda: z.accountz(self.server, acc=request.query.get("acc", "")))

    async def accstatz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(lambda: z.accstatz(self.server, include_unused=_flag(q, "unused")))

    async def jsz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(
            lambda: z.jsz(
                self.server,
                accounts=_flag(q, "accounts"),
                streams=_flag(q, "streams"),
                consumers=_flag(q, "consumers"),
                config=_flag(q, "config"),
                leader_only=_flag(q, "leader-only"),
                account=q.get("acc", ""),
                offset=_int(q, "offset", 0),
                limit=_int(q, "limit", 0),
                raft=_flag(q, "raft"),
                stream_leader_only=_flag(q, "stream-leader-only"),
            )
        )

    async def raftz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(lambda: z.raftz(self.server, acc=q.get("acc", ""), group=q.get("group", "")))

    async def healthz(self, request: web.Request) -> web.Response:
        q = request.query
        return _answer(lambda: z.healthz(self.server, js_only=_flag(q, "js-enabled-only")))

    async def metrics(self, request: web.Request) -> web.Response:
        body, ctype = render_metrics(self.server, self.varz_data())
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = ctype
        return resp
