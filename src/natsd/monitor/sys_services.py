"""The system account's request services, as nats-server answers them (``server/events.go``):
what the Go ``nats`` command line's ``server ls``, ``server report``, ``server check`` and
``server request`` ask, and what natsd's own ``nats server`` commands ask.

Each server subscribes, in the system account, to

* ``$SYS.REQ.SERVER.PING`` (the older STATSZ), ``$SYS.REQ.SERVER.PING.<EP>`` (every server
  answers: on a cluster the subscriptions reach every server over the routes) and
  ``$SYS.REQ.SERVER.<server id>.<EP>`` for the endpoints in ``SERVER_ENDPOINTS``;
* ``$SYS.REQ.ACCOUNT.<account>.<EP>`` for ``ACCOUNT_ENDPOINTS``.

An endpoint natsd does not serve has no subscription, so its request gets no-responders,
as nats-server's unknown ones do. The request body is the endpoint's options with
nats-server's ``EventFilterOptions`` (``server_name``, ``cluster``, ``host``, ``tags``,
``domain``, ``exact_match``): a server the filter does not name stays silent. The answer
is ``{"server": ServerInfo, "data": ...}`` (STATSZ: ``{"server", "statsz"}``, IDZ: the bare
name, host and id), every ServerInfo with the server's next ``seq`` and the time it is sent.
A body that is not a JSON object gets error 400; an endpoint's own error (an unknown
account) error 500 with ``"data": null``; JSZ with ``leader_only`` off the meta leader is
not answered. The data is what the HTTP endpoints show (``z.py``).

Events, published in the system account when someone there listens: a client's
``$SYS.ACCOUNT.<acc>.CONNECT`` and ``.DISCONNECT`` (nats-server's ``client_connect`` /
``client_disconnect`` advisories, with the client's figures and the reason it left), the
server's ``$SYS.SERVER.<id>.STATSZ`` (after 250 ms, then at doubling intervals up to every
10 s, as nats-server; also when ``$SYS.REQ.SERVER.PING`` arrives without a reply subject),
``.LAMEDUCK`` and ``.SHUTDOWN`` (the bare ServerInfo).

``$SYS.REQ.ACCOUNT.PING.STATZ`` (each server with connections in the accounts asked for
answers) and ``$SYS.REQ.ACCOUNT.<acc>.CONNS`` (nats-server's AccountNumConns, from the
servers with connections in it); the AccountNumConns events ``$SYS.SERVER.ACCOUNT.<acc>.CONNS``
and ``$SYS.ACCOUNT.<acc>.SERVER.CONNS`` at each connect and disconnect, and every 30 s while
the account has connections.

In every account, as the service imports nats-server gives each: ``$SYS.REQ.USER.INFO``
(the requesting connection's user, account and permissions; the server it is connected to
answers), and ``$SYS.REQ.SERVER.PING.CONNZ``, ``$SYS.REQ.ACCOUNT.PING.CONNZ`` and
``$SYS.REQ.ACCOUNT.PING.STATZ`` (``ACCOUNT_IMPORTS``: every server answers for that
account alone).

Not served (no-responders): PROFILEZ, EXPVARZ and IPQUEUESZ, nats-server's Go runtime
internals.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.core.clock import rfc3339
from natsd.core.ids import Nuid
from natsd.core.scheduler import Cancellable
from natsd.monitor import z
from natsd.monitor.source import MonitorSource
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.version import SERVER_VERSION

__all__ = ["ACCOUNT_ENDPOINTS", "ACCOUNT_IMPORTS", "SERVER_ENDPOINTS", "SysServices"]

SERVER_ENDPOINTS: Final = (
    "IDZ", "STATSZ", "VARZ", "SUBSZ", "CONNZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ",
    "JSZ", "HEALTHZ", "RAFTZ",
)  # fmt: skip
ACCOUNT_ENDPOINTS: Final = ("CONNZ", "SUBSZ", "LEAFZ", "JSZ", "INFO", "STATZ", "CONNS")
# The service imports nats-server gives every other account: (subject there, endpoint of
# ``$SYS.REQ.ACCOUNT.<that account>.<EP>`` it reaches)
ACCOUNT_IMPORTS: Final = (
    (b"$SYS.REQ.SERVER.PING.CONNZ", "CONNZ"),
    (b"$SYS.REQ.ACCOUNT.PING.CONNZ", "CONNZ"),
    (b"$SYS.REQ.ACCOUNT.PING.STATZ", "STATZ"),
)

log: Final = logging.getLogger("natsd")
_PREFIX: Final = b"$SYS.REQ.SERVER."
_USER_INFO: Final = b"$SYS.REQ.USER.INFO"
_ACCOUNT: Final = b"$SYS.REQ.ACCOUNT."
_JETSTREAM_FLAG: Final = 1  # ServerInfo.flags: JetStream enabled
# nats-server's statsz timer: 250 ms after start, doubling up to statsHBInterval
_STATSZ_FIRST: Final = 0.25
_STATSZ_EVERY: Final = 10.0
# nats-server's eventsHBInterval: an account's CONNS event again while it has connections
_CONNS_EVERY: Final = 30.0


class _Skip(Exception):
    """Not for this server: no answer at all (nats-server's errSkipZreq / a filter)."""


class SysServices:
    """The ``$SYS.REQ`` services of one server, in its system account."""

    def __init__(
        self,
        server: MonitorSource,
        system: Account,
        publisher: Callable[[], Any] = lambda: None,
    ) -> None:
        self._server = server
        self._system = system
        # the client whose publish is being delivered now (USER.INFO answers about it)
        self._publisher = publisher
        self._user_info: dict[str, tuple[Account, Subscription]] = {}
        self._imports: list[tuple[Account, Subscription]] = []
        self._seq = 0
        self._subs: list[Subscription] = []
        self._cpu_at = (time.monotonic(), _cpu_seconds())
        self._nuid = Nuid()
        self._statsz_every = _STATSZ_FIRST
        self._statsz_timer: Cancellable | None = None
        self._conns_timer: Cancellable | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        sid = self._server.server_id.encode()
        subjects: list[tuple[bytes, Callable[..., None]]] = [
            (b"$SYS.REQ.SERVER.PING", self._on_ping)
        ]
        for ep in SERVER_ENDPOINTS:
            subjects.append((_PREFIX + b"PING." + ep.encode(), self._on_server))
            subjects.append((_PREFIX + sid + b"." + ep.encode(), self._on_server))
        for ep in ACCOUNT_ENDPOINTS:
            subjects.append((_ACCOUNT + b"*." + ep.encode(), self._on_account))
        subjects.append((_ACCOUNT + b"PING.STATZ", self._on_account_ping))
        for i, (subject, cb) in enumerate(subjects):
            sub = Subscription(subject, None, b"sys-%d" % i, callback=cb)
            self._system.sublist.insert(sub)
            self._subs.append(sub)
        loop = asyncio.get_running_loop()
        self._statsz_timer = loop.call_later(self._statsz_every, self._statsz_tick)
        self._conns_timer = loop.call_later(_CONNS_EVERY, self._conns_tick)
        for acct in list(self._server.accounts.values()):
            self.account_added(acct)

    def account_added(self, acct: Account) -> None:
        """``$SYS.REQ.USER.INFO`` in ``acct``, as the service import nats-server gives every
        account (the system account too): quiet, each server answers its own clients."""
        if acct.name in self._user_info:
            return
        sub = Subscription(_USER_INFO, None, b"sys-user-info", callback=self._on_user_info)
        acct.sublist.insert(sub, quiet=True)
        self._user_info[acct.name] = (acct, sub)
        if acct is self._system:
            return
        # the CONNZ and STATZ imports: every server answers for its own connections, so
        # the interest crosses the routes
        for i, (subject, ep) in enumerate(ACCOUNT_IMPORTS):
            # (the callback knows its account and endpoint: no lookup per request)
            answer = functools.partial(self._on_import, acct, ep)
            imp = Subscription(subject, None, b"sys-import-%d" % i, callback=answer)
            acct.sublist.insert(imp)
            self._imports.append((acct, imp))

    def account_removed(self, acct: Account) -> None:
        """``acct`` was deleted (a reload no longer configures it): its USER.INFO service
        and imports go with it (an account of that name added again later gets its own)."""
        entry = self._user_info.pop(acct.name, None)
        if entry is not None:
            entry[0].sublist.remove(entry[1])
        kept = []
        for owner, sub in self._imports:
            if owner is acct:
                acct.sublist.remove(sub)
            else:
                kept.append((owner, sub))
        self._imports = kept

    def stop(self) -> None:
        for sub in self._subs:
            self._system.sublist.remove(sub)
        self._subs.clear()
        for acct, sub in (*self._user_info.values(), *self._imports):
            acct.sublist.remove(sub)
        self._user_info.clear()
        self._imports.clear()
        for timer in (self._statsz_timer, self._conns_timer):
            if timer is not None:
                timer.cancel()
        self._statsz_timer = self._conns_timer = None

    # ------------------------------------------------------------------ events
    def _listened(self, subject: bytes) -> bool:
        return self._system.sublist.has_interest(subject)

    def _statsz_tick(self) -> None:
        self.publish_statsz()
        self._statsz_every = min(self._statsz_every * 2, _STATSZ_EVERY)
        self._statsz_timer = asyncio.get_running_loop().call_later(
            self._statsz_every, self._statsz_tick
        )

    def publish_statsz(self) -> None:
        subject = b"$SYS.SERVER." + self._server.server_id.encode() + b".STATSZ"
        if self._listened(subject):
            self._send(subject, {"server": self.server_info(), "statsz": self.statsz()})

    def server_event(self, kind: str) -> None:
        """``$SYS.SERVER.<id>.LAMEDUCK`` / ``.SHUTDOWN``: the bare ServerInfo."""
        subject = f"$SYS.SERVER.{self._server.server_id}.{kind}".encode()
        if self._listened(subject):
            self._send(subject, self.server_info())

    def _conns_tick(self) -> None:
        for acct in list(self._server.accounts.values()):
            if acct.clients:
                self.publish_conns(acct)
        self._conns_timer = asyncio.get_running_loop().call_later(_CONNS_EVERY, self._conns_tick)

    def publish_conns(self, acct: Account, leaving: object = None) -> None:
        """nats-server's AccountNumConns event, on both its subjects: at each connect and
        disconnect in ``acct``, and every 30 s while it has connections here."""
        subjects = [
            f"$SYS.SERVER.ACCOUNT.{acct.name}.CONNS".encode(),
            f"$SYS.ACCOUNT.{acct.name}.SERVER.CONNS".encode(),
        ]
        listened = [subject for subject in subjects if self._listened(subject)]
        if listened:
            # (one event on both subjects: the same id, each with its own ServerInfo)
            typed = self._typed("io.nats.server.advisory.v1.account_connections")
            stat = z.account_stat(acct, leaving)
            for subject in listened:
                self._send(subject, {**typed, "server": self.server_info(), **stat})

    def _num_conns(self, acct: Account) -> dict[str, Any]:
        return {
            **self._typed("io.nats.server.advisory.v1.account_connections"),
            "server": self.server_info(),
            **z.account_stat(acct),
        }

    def client_connected(self, c: Any) -> None:
        self.publish_conns(c.account)
        subject = f"$SYS.ACCOUNT.{c.account.name}.CONNECT".encode()
        if self._listened(subject):
            self._send(subject, {
                **self._typed("io.nats.server.advisory.v1.client_connect"),
                "server": self.server_info(),
                "client": _client_info(c, stopped=False),
            })  # fmt: skip

    def client_disconnected(self, c: Any, reason: str) -> None:
        self.publish_conns(c.account, leaving=c)
        subject = f"$SYS.ACCOUNT.{c.account.name}.DISCONNECT".encode()
        if self._listened(subject):
            self._send(subject, {
                **self._typed("io.nats.server.advisory.v1.client_disconnect"),
                "server": self.server_info(),
                "client": _client_info(c, stopped=True),
                # (what the client sent the server, and what it was sent)
                "sent": {"msgs": c.msgs_in, "bytes": c.bytes_in},
                "received": {"msgs": c.msgs_out, "bytes": c.bytes_out},
                "reason": reason,
            })  # fmt: skip

    def _typed(self, kind: str) -> dict[str, Any]:
        return {"type": kind, "id": self._nuid.next(), "timestamp": rfc3339(time.time_ns())}

    # ------------------------------------------------------------------ answers
    def server_info(self) -> dict[str, Any]:
        """nats-server's ServerInfo, with the next ``seq`` and the time now."""
        s = self._server
        o = s.options
        self._seq += 1
        info: dict[str, Any] = {
            "name": s.server_name,
            "host": o.host or "0.0.0.0",
            "id": s.server_id,
        }
        cluster = s.cluster_usage(subs=False)
        if cluster is not None:
            info["cluster"] = cluster.name
        if s.jetstream_enabled and o.js.domain:
            info["domain"] = o.js.domain
        info["ver"] = SERVER_VERSION
        if o.server_tags:
            info["tags"] = list(o.server_tags)
        info["jetstream"] = s.jetstream_enabled
        info["flags"] = _JETSTREAM_FLAG if s.jetstream_enabled else 0
        info["seq"] = self._seq
        info["time"] = rfc3339(time.time_ns())
        return info

    def _send(self, reply: bytes | None, doc: dict[str, Any], to: Account | None = None) -> None:
        """``doc`` to ``reply`` in the system account (or in ``to``: the account a request
        came from through its imports)."""
        if reply:
            account = to or self._system
            publish(account.sublist, reply, None, None, orjson.dumps(doc))

    def _error(self, reply: bytes | None, code: int, text: str, to: Account | None = None) -> None:
        """An error answer: a bad body's (400) has no ``data``; an endpoint's (500) has
        ``"data": null``, as nats-server's typed nil."""
        doc: dict[str, Any] = {"server": self.server_info()}
        if code != 400:
            doc["data"] = None
        doc["error"] = {"code": code, "description": text}
        self._send(reply, doc, to)

    def _request(
        self, reply: bytes | None, data: bytes, to: Account | None = None
    ) -> dict[str, Any] | None:
        """A request's options when it is for this server; None when it is not (a filter
        naming another) or its body is no JSON object (then answered with error 400)."""
        opts = _options(data)
        if opts is None:
            self._error(reply, 400, "invalid request body", to)
            return None
        return opts if self._for_me(opts) else None

    def _on_ping(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if not reply:  # (nats-server: a ping without a reply asks for the broadcast)
            self.publish_statsz()
            return
        self._on_server(sub, _PREFIX + b"PING.STATSZ", reply, hdr, data)

    def _on_server(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        ep = subject.rsplit(b".", 1)[-1].decode()
        if ep == "IDZ":  # (no filter, no ServerInfo)
            s = self._server
            host = s.options.host or "0.0.0.0"
            self._send(reply, {"name": s.server_name, "host": host, "id": s.server_id})
            return
        opts = self._request(reply, data)
        if opts is None:
            return
        try:
            if ep == "STATSZ":
                self._send(reply, {"server": self.server_info(), "statsz": self.statsz()})
                return
            out = self._server_data(ep, opts)
        except _Skip:
            return
        except z.ZError as e:
            self._error(reply, 500, e.text)
            return
        except Exception as e:  # (a figure read mid-change; never an error of the publisher's)
            log.warning("$SYS.REQ %s: %s", ep, e, exc_info=True)
            self._error(reply, 500, f"{ep}: {e}")
            return
        self._send(reply, {"server": self.server_info(), "data": out})

    def _on_account(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        toks = subject.decode(errors="replace").split(".")
        if len(toks) != 5:
            return
        acc, ep = toks[3], toks[4]
        if ep == "CONNS":
            self._on_conns(acc, reply, data)
            return
        opts = self._request(reply, data)
        if opts is None:
            return
        self._answer_account(acc, ep, opts, reply)

    def _answer_account(
        self,
        acc: str,
        ep: str,
        opts: dict[str, Any],
        reply: bytes | None,
        to: Account | None = None,
    ) -> None:
        """The answer of ``$SYS.REQ.ACCOUNT.<acc>.<ep>``, sent in the system account (or
        in ``to``, the account whose import the request came through)."""
        try:
            out = self._account_data(acc, ep, opts)
        except _Skip:
            return
        except z.ZError as e:
            self._error(reply, 500, e.text, to)
            return
        except Exception as e:  # (as _on_server)
            log.warning("$SYS.REQ.ACCOUNT %s: %s", ep, e, exc_info=True)
            self._error(reply, 500, f"{ep}: {e}", to)
            return
        self._send(reply, {"server": self.server_info(), "data": out}, to)

    def _on_account_ping(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """``$SYS.REQ.ACCOUNT.PING.STATZ``: the accounts the body names (all when none)
        that have connections here (``include_unused``: all); no answer when none has."""
        opts = self._request(reply, data)
        if opts is None:
            return
        out = self._statz(opts, None)
        if out is not None:
            self._send(reply, {"server": self.server_info(), "data": out})

    def _on_import(
        self,
        owner: Account,
        ep: str,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        """A request in ``owner`` through one of ``ACCOUNT_IMPORTS``: answered as its
        ``$SYS.REQ.ACCOUNT.<owner>.<ep>``, for that account only, in that account."""
        opts = self._request(reply, data, to=owner)
        if opts is not None:
            self._answer_account(owner.name, ep, opts, reply, to=owner)

    def _on_conns(self, acc: str, reply: bytes | None, data: bytes) -> None:
        """nats-server's ``connsRequest``: the account's AccountNumConns event to
        ``reply``, from a server with connections in it (the others stay silent)."""
        if data.strip():
            body = _options(data)
            if body is None or body.get("acc", acc) != acc:
                return
        acct = self._server.accounts.get(acc)
        if acct is not None and acct.clients:
            self._send(reply, self._num_conns(acct))

    def _statz(self, opts: dict[str, Any], acc: str | None) -> dict[str, Any] | None:
        names = [acc] if acc is not None else opts.get("accounts")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            names = None
        unused = bool(opts.get("include_unused"))
        out = z.accstatz(self._server, accounts=names, include_unused=unused)
        return out if out["account_statz"] or unused else None

    def _on_user_info(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """nats-server's ``userInfoReq``: the requesting connection's user, account and
        permissions, answered in its account. Only a client's own publish is answered
        (the publisher is known only while its read is processed)."""
        c = self._publisher()
        if not reply or c is None:
            return
        acc = c.account.name
        info: dict[str, Any] = {"user": c.user, "account": acc, "account_name": acc}
        perms = _public_permissions(getattr(c, "permissions", None))
        if perms:
            info["permissions"] = perms
        doc = {"server": self.server_info(), "data": info}
        publish(c.account.sublist, reply, None, None, orjson.dumps(doc))

    # ------------------------------------------------------------------ filters
    def _for_me(self, opts: dict[str, Any]) -> bool:
        """nats-server's ``filterRequest``: a filter naming another server (by name, host,
        cluster: substrings unless ``exact_match``; tags: all of them; the domain)."""
        s = self._server
        exact = bool(opts.get("exact_match"))
        cluster = s.cluster_usage(subs=False)
        mine = {
            "server_name": s.server_name,
            "host": s.options.host or "0.0.0.0",
            "cluster": cluster.name if cluster is not None else "",
        }
        for key, have in mine.items():
            want = opts.get(key)
            if isinstance(want, str) and want:
                if (want != have) if exact else (want not in have):
                    return False
        tags = opts.get("tags")
        if isinstance(tags, list) and tags:
            held = {t.lower() for t in s.options.server_tags}
            if not all(isinstance(t, str) and t.lower() in held for t in tags):
                return False
        domain = opts.get("domain")
        return not (isinstance(domain, str) and domain and domain != s.options.js.domain)

    # ------------------------------------------------------------------ data
    def _server_data(self, ep: str, o: dict[str, Any]) -> dict[str, Any]:
        s = self._server
        if ep == "VARZ":
            return z.varz(s)
        if ep == "CONNZ":
            sort = str(o.get("sort") or "cid")
            if sort not in z.CONNZ_SORTS:
                raise z.ZError(500, f"invalid sorting option: {sort}")
            return z.connz(s, offset=_int(o, "offset", 0), limit=_int(o, "limit", 1024),
                           subs=bool(o.get("subscriptions") or o.get("subscriptions_detail")),
                           auth=bool(o.get("auth")), sort=sort,
                           account=str(o.get("acc") or ""))  # fmt: skip
        if ep == "SUBSZ":
            test = o.get("test")
            return z.subsz(s, subs=bool(o.get("subscriptions")), offset=_int(o, "offset", 0),
                           limit=_int(o, "limit", 1024),
                           test=test if isinstance(test, str) and test else None,
                           account=str(o.get("account") or ""))  # fmt: skip
        if ep == "ROUTEZ":
            return z.routez(s, subs=bool(o.get("subscriptions") or o.get("subscriptions_detail")))
        if ep == "GATEWAYZ":  # (natsd has no gateways)
            return {"server_id": s.server_id, "now": rfc3339(time.time_ns()),
                    "outbound_gateways": {}, "inbound_gateways": {}}  # fmt: skip
        if ep == "LEAFZ":  # (natsd has no leaf nodes)
            return _leafz(s)
        if ep == "ACCOUNTZ":
            return z.accountz(s, acc=str(o.get("account") or ""))
        if ep == "JSZ":
            try:
                return z.jsz(s, accounts=bool(o.get("accounts")), streams=bool(o.get("streams")),
                             consumers=bool(o.get("consumer")), config=bool(o.get("config")),
                             leader_only=bool(o.get("leader_only")),
                             account=str(o.get("account") or ""), offset=_int(o, "offset", 0),
                             limit=_int(o, "limit", 0), raft=bool(o.get("raft")),
                             stream_leader_only=bool(o.get("stream_leader_only")))  # fmt: skip
            except z.ZError as e:
                if e.status == 400:  # not the leader: nats-server's errSkipZreq
                    raise _Skip() from None
                raise
        if ep == "HEALTHZ":
            try:
                return z.healthz(s, js_only=bool(o.get("js-enabled-only")))
            except z.ZError as e:
                # (unhealthy is told in the data, with the HTTP status nats-server uses)
                return {"status": "unavailable", "status_code": e.status, "error": e.text}
        if ep == "RAFTZ":
            try:
                return z.raftz(s, acc=str(o.get("account") or ""), group=str(o.get("group") or ""))
            except z.ZError:
                return {}  # (no Raft groups: a standalone server's is empty)
        raise _Skip()

    def _account_data(self, acc: str, ep: str, o: dict[str, Any]) -> dict[str, Any]:
        s = self._server
        if ep == "CONNZ":
            return z.connz(s, offset=_int(o, "offset", 0), limit=_int(o, "limit", 1024),
                           subs=bool(o.get("subscriptions") or o.get("subscriptions_detail")),
                           auth=bool(o.get("auth")), account=acc)  # fmt: skip
        if ep == "SUBSZ":
            return z.subsz(s, subs=True, offset=_int(o, "offset", 0),
                           limit=_int(o, "limit", 1024), account=acc)  # fmt: skip
        if ep == "LEAFZ":
            return _leafz(s)
        if ep == "INFO":
            if acc not in s.accounts:
                raise z.ZError(500, f"Account {acc} does not exist")
            return dict(z.accountz(s, acc=acc)["account_detail"])
        if ep == "STATZ":
            if acc == "PING":  # ($SYS.REQ.ACCOUNT.PING.STATZ has its own subscription)
                raise _Skip()
            out = self._statz(o, acc)
            if out is None:
                raise _Skip()
            return out
        if ep == "JSZ":
            doc = z.jsz(s, streams=bool(o.get("streams")), account=acc)
            details = doc.get("account_details") or []
            if not details:
                raise z.ZError(500, f'account "{acc}" not found')
            return dict(details[0])
        raise z.ZError(500, f"unknown endpoint {ep}")

    def statsz(self) -> dict[str, Any]:
        """nats-server's ServerStats."""
        s = self._server
        mi, bi, mo, bo = s.totals()
        cluster = s.cluster_usage(subs=False)
        routes = cluster.routes if cluster is not None else []
        rin_m = sum(r.in_msgs for r in routes)
        rin_b = sum(r.in_bytes for r in routes)
        rout_m = sum(r.out_msgs for r in routes)
        rout_b = sum(r.out_bytes for r in routes)
        out: dict[str, Any] = {
            "start": rfc3339(int(s.start_time * 1e9)),
            "mem": z.rss(),
            "cores": os.cpu_count() or 1,
            "cpu": self._cpu_percent(),
            "connections": len(s.clients),
            "total_connections": s.total_connections,
            "active_accounts": sum(1 for a in s.accounts.values() if a.clients),
            "subscriptions": s.num_subscriptions(),
            "sent": {"msgs": mo + rout_m, "bytes": bo + rout_b},
            "sent_to_clients": {"msgs": mo, "bytes": bo},
            "received": {"msgs": mi + rin_m, "bytes": bi + rin_b},
            "received_from_clients": {"msgs": mi, "bytes": bi},
            "slow_consumers": s.slow_consumers,
        }
        if s.stale_connections:
            out["stale_connections"] = s.stale_connections
        if routes:
            out["routes"] = [
                {
                    "rid": r.rid,
                    "name": r.remote_name,
                    "sent": {"msgs": r.out_msgs, "bytes": r.out_bytes},
                    "received": {"msgs": r.in_msgs, "bytes": r.in_bytes},
                    "pending": r.pending_size,
                }
                for r in routes
            ]
        out["active_servers"] = len(routes) + 1
        if s.jetstream_enabled:
            o = s.options.js
            js: dict[str, Any] = {
                "config": {
                    "max_memory": o.max_memory,
                    "max_storage": o.max_file,
                    "sync_interval": int((o.sync_interval or 0) * 1e9),
                },
                "stats": z.jetstream_stats(s.jetstream_usage(streams=False) or []),
            }
            if o.domain:
                js["config"]["domain"] = o.domain
            meta = s.jetstream_meta()
            if meta is not None:
                js["meta"] = meta
            out["jetstream"] = js
        return out

    def _cpu_percent(self) -> float:
        """The server process's CPU use since the last STATSZ, in percent of one core."""
        now, cpu = time.monotonic(), _cpu_seconds()
        then, was = self._cpu_at
        self._cpu_at = (now, cpu)
        wall = now - then
        return round(100.0 * (cpu - was) / wall, 2) if wall > 0 else 0.0


def _client_info(c: Any, stopped: bool) -> dict[str, Any]:
    """nats-server's ClientInfo of a client connection (its omitempty rules)."""
    out: dict[str, Any] = {"start": rfc3339(int(c.start * 1e9)), "host": c.ip, "id": c.cid,
                           "acc": c.account.name}  # fmt: skip
    for key, value in (("user", c.user), ("name", c.name), ("lang", c.lang), ("ver", c.version)):
        if value:
            out[key] = value
    if stopped:
        if c.rtt:
            out["rtt"] = int(c.rtt * 1e9)
        out["stop"] = rfc3339(time.time_ns())
    out["name_tag"] = c.account.name
    out["kind"] = "Client"
    out["client_type"] = "nats"
    return out


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _leafz(s: MonitorSource) -> dict[str, Any]:
    return {"server_id": s.server_id, "now": rfc3339(time.time_ns()), "leafnodes": 0, "leafs": []}


def _options(data: bytes) -> dict[str, Any] | None:
    """The request's options (an empty body: none); None when it is not a JSON object."""
    if not data.strip():
        return {}
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _int(o: dict[str, Any], key: str, default: int) -> int:
    v = o.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default


def _public_permissions(perms: Any) -> dict[str, Any]:
    """nats-server's ``publicPermissions``: the allow and deny lists a connection has
    (empty parts left out), and its ``allow_responses`` as ``responses``."""
    out: dict[str, Any] = {}
    if perms is None:
        return out
    for kind in ("publish", "subscribe"):
        ps = getattr(perms, kind, None)
        part = {k: list(v) for k in ("allow", "deny") if (v := getattr(ps, k, None))}
        if part:
            out[kind] = part
    resp = getattr(perms, "allow_responses", None)
    if resp is not None:
        out["responses"] = {"max": resp.max_msgs, "ttl": int(resp.expires * 1e9)}
    return out
