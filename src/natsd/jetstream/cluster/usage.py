"""Each server's JetStream usage, for the meta leader's ``$JS.API.INFO`` on a cluster.

A stream's bytes and consumers live on the stream's server, so the account info the meta
leader answers is a sum over servers. Every server publishes its usage per account in the
system account every ``USAGE_INTERVAL`` seconds (``$NATSD.JS.USAGE.REPORT``), and before it
answers the meta leader polls every live server (``$NATSD.JS.USAGE.POLL``) and waits for the
answers (at most ``USAGE_WAIT``): a purge or delete a stream's server has answered is then
already counted in the account info that follows it.

Ownership: the ``JsCluster`` owns one ``UsageBook``; reports are data from peers and are as
untrusted as a client's (junk is dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import orjson

from natsd.jetstream.cluster.gather import gather
from natsd.jetstream.engine import JetStream
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription

__all__ = ["USAGE_INTERVAL", "USAGE_POLL", "USAGE_SUBJECT", "USAGE_WAIT", "UsageBook"]

USAGE_SUBJECT: Final = b"$NATSD.JS.USAGE.REPORT"
USAGE_INTERVAL: Final = 1.0
USAGE_POLL: Final = b"$NATSD.JS.USAGE.POLL"
USAGE_WAIT: Final = 1.0


class UsageBook:
    """The last usage report of every server, and this server's own."""

    def __init__(
        self,
        engine: JetStream,
        system: Account,
        server_name: str,
        alive: Callable[[], list[str]],
        member: Callable[[str], bool],
    ) -> None:
        self.engine = engine
        self.system = system
        self.server_name = server_name
        self._alive = alive  # the servers expected to answer a poll
        self._member = member  # whether a name is one of the meta group's servers
        # server -> (loop time, {account: [memory, storage, consumers]})
        self.reports: dict[str, tuple[float, dict[str, list[int]]]] = {}
        self._sub = Subscription(b"$NATSD.JS.USAGE.*", None, b"js-usage", callback=self._on_message)

    def start(self) -> None:
        self.system.sublist.insert(self._sub)

    def stop(self) -> None:
        self.system.sublist.remove(self._sub)

    def doc(self) -> bytes:
        accounts: dict[str, list[int]] = {}
        for name, ja in self.engine.accounts.items():
            mem, store = self.engine.usage(ja)
            consumers = sum(s.consumer_count for s in ja.streams.values())
            accounts[name] = [mem, store, consumers]
        return orjson.dumps({"server": self.server_name, "accounts": accounts})

    def report(self) -> None:
        publish(self.system.sublist, USAGE_SUBJECT, None, None, self.doc())

    def _on_message(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if subject == USAGE_POLL:
            if reply:
                publish(self.system.sublist, reply, None, None, self.doc())
            return
        self.record(data)

    def record(self, data: bytes) -> str:
        """Keep a server's usage report; returns the server's name ("" for junk or for a
        server that is not a member: a peer is as untrusted as a client, and the book
        holds one report per member, never more)."""
        try:
            doc = orjson.loads(data)
            server = doc["server"]
            accounts = {str(k): [int(x) for x in v][:3] for k, v in dict(doc["accounts"]).items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return ""
        if not isinstance(server, str) or not self._member(server) or len(accounts) > 100_000:
            return ""
        self.reports[server] = (self.engine.clock.monotonic(), accounts)
        return server

    async def refresh(self) -> None:
        """Ask every live JetStream server for its usage now and wait for the answers (at
        most USAGE_WAIT): a request answered by a stream's server (a purge, a delete) is
        then counted in the account info that follows it."""
        self.record(self.doc())
        want = set(self._alive()) - {self.server_name}
        if not want:
            return
        got: set[str] = set()

        def on_reply(token: bytes, data: bytes) -> bool:
            got.add(self.record(data))
            return want <= got

        sl = self.system.sublist

        def send(inbox: bytes) -> None:
            publish(sl, USAGE_POLL, inbox + b".u", None, b"")

        await gather(sl, send, on_reply, USAGE_WAIT)

    def account(self, account: str) -> tuple[int, int, int]:
        """(memory, storage, consumers) of ``account`` summed over the servers' reports."""
        mem = store = consumers = 0
        for _, accounts in self.reports.values():
            u = accounts.get(account)
            if u is not None and len(u) == 3:
                mem, store, consumers = mem + u[0], store + u[1], consumers + u[2]
        return mem, store, consumers
