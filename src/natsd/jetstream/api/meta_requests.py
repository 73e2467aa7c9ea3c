"""The requests the meta leader answers (``JsCluster.route`` sends them here): account info,
and the stream create / update / delete / names / list that only it may decide.

A create, update or delete is checked here against the meta state (the whole cluster's
streams, not this server's), then proposed to the meta group with the request's reply
subject; the server that applies it as the owner answers (``JsCluster._apply``). What fails
a check is answered here at once, with nats-server's error.

A create that finds too few servers while some server of the mesh has no row in the server
table yet (a meta group that has just formed: nats-server knows its peers from their routes,
natsd from their rows, which follow the election by a round trip) waits for the rows, up to
``ROWS_WAIT``, and is placed then, rather than answered 10005 on a cluster coming up whole.

``STREAM.LIST`` needs every stream's state, which lives on its owner: the leader asks each
owner (``$JS.API.STREAM.INFO.<s>`` on a private inbox) and answers with what came back within
``LIST_TIMEOUT``; streams that did not answer are named in ``missing``, as nats-server does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final, Protocol

import orjson

from natsd.cluster.group import peer_hash
from natsd.cluster.meta import MetaState, NoPeers, PendingPlacements, StreamAssignment, encode_op
from natsd.core.scheduler import Clock
from natsd.jetstream.answer import ERROR_EXTRAS
from natsd.jetstream.api.streams import (
    LIST_LIMIT,
    LIST_REQUEST,
    NAMES_LIMIT,
    NAMES_REQUEST,
    check_origins,
    optional_request,
)
from natsd.jetstream.cluster.gather import gather
from natsd.jetstream.cluster.servers import remap_op
from natsd.jetstream.cluster.usage import UsageBook
from natsd.jetstream.config.account_limits import check_stream_create, check_stream_update
from natsd.jetstream.config.stream_config import (
    check_update,
    parse_stream_config,
    parse_stream_config_json,
)
from natsd.jetstream.config.stream_types import StorageType, StreamConfig
from natsd.jetstream.config.subject_mapping import overlaps
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.api_level import level_refused
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gotyped import StructT, is_empty_request
from natsd.router.publish import publish
from natsd.version import API_LEVEL

__all__ = ["LIST_TIMEOUT", "MetaHost", "MetaRequests"]

LIST_TIMEOUT: Final = 2.0
# How long a create waits for the servers' rows before it is refused for want of peers.
ROWS_WAIT: Final = 3.0


class _RowsPending(Exception):
    """Placement found too few servers while some have no row yet: ask again later."""


class MetaHost(Protocol):
    """What the handlers need of the server's clustered JetStream (``JsCluster``)."""

    meta: MetaState
    pending: PendingPlacements
    server_name: str
    usage: UsageBook
    clock: Clock  # the engine's (virtual in a simulation)

    def cluster_name(self) -> str: ...

    def propose(self, data: bytes) -> bool: ...

    def place(
        self,
        replicas: int,
        tags: list[str],
        max_bytes: int,
        memory: bool,
        prefer: str = "",
        exclude: set[str] | None = None,
    ) -> list[str]: ...

    def place_one(self, a: StreamAssignment, exclude: set[str]) -> str: ...

    def requester(self, ja: JsAccount, reply: str) -> str: ...

    def respond(self, ja: JsAccount, reply: str, rtype: str, body: dict[str, Any]) -> bytes: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def rows_pending(self) -> bool: ...

    def alive(self) -> list[str]: ...


# verb tokens -> (response type, number of argument tokens), as dispatch's table
_VERBS: Final[dict[tuple[str, ...], tuple[str, int]]] = {
    ("INFO",): ("account_info_response", 0),
    ("STREAM", "CREATE"): ("stream_create_response", 1),
    ("STREAM", "UPDATE"): ("stream_update_response", 1),
    ("STREAM", "DELETE"): ("stream_delete_response", 1),
    ("STREAM", "NAMES"): ("stream_names_response", 0),
    ("STREAM", "LIST"): ("stream_list_response", 0),
    ("STREAM", "PEER"): ("stream_remove_peer_response", 2),
}


class MetaRequests:
    def __init__(self, cluster: MetaHost) -> None:
        self.c = cluster

    def handle(
        self,
        ja: JsAccount,
        verb: list[str],
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
        subject: bytes,
        wait: bool = True,
    ) -> None:
        key = tuple(verb[:1]) if verb[:1] == ["INFO"] else tuple(verb[:2])
        hit = _VERBS.get(key)
        if not reply or hit is None or len(verb) != len(key) + hit[1]:
            return  # no answer to give, or no subscription in nats-server would match
        rtype = hit[0]
        if key == ("STREAM", "PEER") and verb[2] != "REMOVE":
            rtype = "stream_evacuate_peer_response" if verb[2] == "EVACUATE" else ""
            if not rtype:
                return
        rep = reply.decode(errors="replace")
        try:
            # as dispatch does for every routed request, before its handler runs
            if hdr is not None and level_refused(hdr):
                raise E.JSRequiredApiLevelErr()
            if key == ("INFO",):
                self.c.spawn(self._account_info(ja, rep, subject, data))
                return
            if key == ("STREAM", "NAMES"):
                body = self.names(ja, data)
            elif key == ("STREAM", "LIST"):
                self.c.spawn(self._list(ja, data, rep, subject))
                return
            else:
                if key == ("STREAM", "CREATE"):
                    try:
                        self.create(ja, verb[2], data, rep, wait)
                    except _RowsPending:
                        again = lambda: self.handle(ja, verb, reply, hdr, data, subject, False)  # noqa: E731
                        self.c.spawn(self._when_rows(again))
                        return
                elif key == ("STREAM", "UPDATE"):
                    self.update(ja, verb[2], data, rep)
                elif key == ("STREAM", "PEER"):
                    # REMOVE and EVACUATE both move the peer's replica to a free server
                    # (a natsd group always migrates first: cluster/membership.py)
                    body = self.remove_peer(ja, verb[3], data)
                    ja.api.total += 1
                    self._answer(ja, rep, rtype, body, subject, data)
                    return
                else:
                    self.delete(ja, verb[2], data, rep)
                ja.api.total += 1
                return  # the stream's server answers once the meta group applied it
            ja.api.total += 1
        except ApiError as e:
            ja.api.total += 1
            ja.api.errors += 1
            body = {"error": e.to_json()}
            body.update(ERROR_EXTRAS.get(rtype, {}))
        self._answer(ja, rep, rtype, body, subject, data)

    async def _when_rows(self, again: Callable[[], None]) -> None:
        clock = self.c.clock
        deadline = clock.monotonic() + ROWS_WAIT
        while self.c.rows_pending() and clock.monotonic() < deadline:
            await asyncio.sleep(0.05)
        again()

    def _answer(
        self,
        ja: JsAccount,
        reply: str,
        rtype: str,
        body: dict[str, Any],
        subject: bytes,
        data: bytes,
    ) -> None:
        out = self.c.respond(ja, reply, rtype, body)
        ja.engine.api_audit(ja, subject, data, out)

    # ---------------------------------------------------------------- account
    async def _account_info(self, ja: JsAccount, reply: str, subject: bytes, data: bytes) -> None:
        await self.c.usage.refresh()
        body = self.account_info(ja)  # the totals exclude this request, as nats-server's
        ja.api.total += 1
        self._answer(ja, reply, "account_info_response", body, subject, data)

    def account_info(self, ja: JsAccount) -> dict[str, Any]:
        name = ja.account.name
        mem, store, consumers = self.c.usage.account(name)
        rmem = rstore = 0
        for a in self.c.meta.account_streams(name):
            mb = a.config.get("max_bytes", -1)
            if isinstance(mb, int) and mb > 0:
                if a.config.get("storage") == "memory":
                    rmem += mb
                else:
                    rstore += mb
        out: dict[str, Any] = {
            "memory": mem,
            "storage": store,
            "reserved_memory": rmem,
            "reserved_storage": rstore,
            "streams": len(self.c.meta.account_streams(name)),
            "consumers": consumers,
            "limits": ja.limits.to_json(),
        }
        if ja.engine.domain:
            out["domain"] = ja.engine.domain
        out["api"] = {"level": API_LEVEL, "total": ja.api.total, "errors": ja.api.errors}
        return out

    # ---------------------------------------------------------------- create / update
    def _lookup(self, ja: JsAccount) -> Callable[[str], StreamConfig | None]:
        """The config of an account's stream by name, from the meta group's assignments
        (for the checks of a mirror's or a source's origin)."""

        def config_of(name: str) -> StreamConfig | None:
            a = self.c.meta.stream(ja.account.name, name)
            return parse_stream_config(a.config, name_in_subject=None) if a is not None else None

        return config_of

    def _configs(self, ja: JsAccount) -> list[StreamConfig]:
        return [
            parse_stream_config(a.config, name_in_subject=None)
            for a in self.c.meta.account_streams(ja.account.name)
        ]

    def _check_overlap(self, ja: JsAccount, cfg: StreamConfig) -> None:
        copy = cfg.mirror is not None or bool(cfg.sources)
        mine = cfg.subjects or ([] if copy else [cfg.name])
        for a in self.c.meta.account_streams(ja.account.name):
            c = a.config
            theirs = c.get("subjects") or ([] if c.get("mirror") or c.get("sources") else [a.name])
            if a.name != cfg.name and overlaps(mine, theirs):
                raise E.JSStreamSubjectOverlapErr()

    def _limits(self, ja: JsAccount) -> tuple[list[StreamConfig], int, int]:
        """The account's streams across the cluster, and no server-wide limit: as in
        nats-server's clustered limits check, the account's limits apply here and each
        server's own room is placement's to judge (10005 "insufficient storage")."""
        return self._configs(ja), -1, 0

    def create(self, ja: JsAccount, name: str, data: bytes, reply: str, wait: bool = False) -> None:
        cfg = parse_stream_config_json(
            data or b"{}", name_in_subject=name, limits=ja.limits, clustered=True,
            allow_mirrors=True, allow_sources=True,
        )  # fmt: skip
        if cfg.mirror is not None or cfg.sources:
            check_origins(self._lookup(ja), cfg)
        existing = self.c.meta.stream(ja.account.name, cfg.name)
        if existing is not None:
            if existing.config != cfg.to_json() or existing.restoring:
                raise E.JSStreamNameExistErr()
            peers = existing.peers  # the same config again: its owner answers with its info
        else:
            check_stream_create(ja.limits, cfg, *self._limits(ja))
            self._check_overlap(ja, cfg)
            pl = cfg.placement
            if pl is not None and pl.cluster and pl.cluster != self.c.cluster_name():
                raise E.JSClusterNoPeersErrF(err="no suitable peers for placement")
            try:
                peers = self.c.place(
                    cfg.num_replicas,
                    list(pl.tags) if pl is not None else [],
                    cfg.max_bytes,
                    cfg.storage == StorageType.MEMORY,
                    prefer=self.c.requester(ja, reply),
                )
            except NoPeers as e:
                if wait and self.c.rows_pending():
                    raise _RowsPending from None
                raise E.JSClusterNoPeersErrF(err=str(e)) from None
        op = encode_op(
            "stream",
            account=ja.account.name,
            config=cfg.to_json(),
            created=ja.engine.clock.time_ns(),
            peers=peers,
            reply=reply,
            origin=self.c.server_name,
        )
        if not self.c.propose(op):
            raise E.JSClusterNotAvailErr()
        if existing is None:
            self.c.pending.add(ja.account.name, cfg.name, peers, self.c.clock.monotonic())

    def restore_peers(self, ja: JsAccount, cfg: StreamConfig, final: bool) -> list[str]:
        """Where a stream restored from a backup goes, checked as nats-server's
        ``jsClusteredStreamRestoreRequest`` checks it (the account's limits across the
        cluster, the name unused, placement): this server first, which receives the archive
        and builds the stream (``cluster/restore.py``), then as many others as its
        ``num_replicas`` asks, placed as for a create. ``final``: the archive has arrived,
        and the stream is about to be proposed (its subjects are checked too, as a
        standalone restore checks them when it makes the stream)."""
        check_stream_create(ja.limits, cfg, *self._limits(ja))
        if self.c.meta.stream(ja.account.name, cfg.name) is not None:
            raise E.JSStreamNameExistRestoreFailedErr()
        if final:
            self._check_overlap(ja, cfg)
        pl = cfg.placement
        if pl is not None and pl.cluster and pl.cluster != self.c.cluster_name():
            raise E.JSClusterNoPeersErrF(err="no suitable peers for placement")
        me = self.c.server_name
        tags = list(pl.tags) if pl is not None else []
        memory = cfg.storage == StorageType.MEMORY
        try:
            # (this server, if it is eligible itself)
            self.c.place(1, tags, cfg.max_bytes, memory, exclude=set(self.c.alive()) - {me})
            others = self.c.place(cfg.num_replicas - 1, tags, cfg.max_bytes, memory,
                                  exclude={me}) if cfg.num_replicas > 1 else []  # fmt: skip
        except NoPeers as e:
            raise E.JSClusterNoPeersErrF(err=str(e)) from None
        return [me, *others]

    def update(self, ja: JsAccount, name: str, data: bytes, reply: str) -> None:
        cfg = parse_stream_config_json(
            data or b"{}", name_in_subject=name, action="update", limits=ja.limits,
            allow_sources=True,
        )  # fmt: skip
        if cfg.mirror is not None or cfg.sources:
            check_origins(self._lookup(ja), cfg)
        existing = self.c.meta.stream(ja.account.name, cfg.name)
        if existing is None or existing.restoring:
            raise E.JSStreamNotFoundErr()  # (a restore's stream exists once it is restored)
        old = parse_stream_config(existing.config, name_in_subject=None)
        cfg = check_update(old, cfg, clustered=True)
        check_stream_update(ja.limits, old, cfg, *self._limits(ja))
        self._check_overlap(ja, cfg)
        peers = existing.peers
        if cfg.num_replicas != old.num_replicas:
            peers = self._rescaled(existing.peers, cfg)
        op = encode_op(
            "stream",
            account=ja.account.name,
            config=cfg.to_json(),
            peers=peers,
            remap=peers != existing.peers,
            reply=reply,
            origin=self.c.server_name,
        )
        if not self.c.propose(op):
            raise E.JSClusterNotAvailErr()

    def _rescaled(self, peers: list[str], cfg: StreamConfig) -> list[str]:
        """The peers of a stream whose ``num_replicas`` an update changes: more servers
        placed as for a new stream (10005 when too few), or the first ones kept (the
        group's leader hands over first when it is not among them). The group follows by
        configuration changes (``cluster/membership.py``): an R1 stream gets a group of its one
        server, which the newcomers join; a group shrunk to one server ends, and the stream
        is R1 again."""
        want = cfg.num_replicas
        if want < len(peers):
            return peers[:want]
        pl = cfg.placement
        try:
            extra = self.c.place(
                want - len(peers),
                list(pl.tags) if pl is not None else [],
                cfg.max_bytes,
                cfg.storage == StorageType.MEMORY,
                exclude=set(peers),
            )
        except NoPeers as e:
            raise E.JSClusterNoPeersErrF(err=str(e)) from None
        return [*peers, *extra]

    def remove_peer(self, ja: JsAccount, name: str, data: bytes) -> dict[str, Any]:
        """``STREAM.PEER.REMOVE`` and ``STREAM.PEER.EVACUATE``, as nats-server's
        jsStreamRemapPeerRequest (the same checks and errors for both): the peer (a
        server name, or its peer id) leaves the stream's replicas and a server that holds
        none of them takes its place; with no such server the removal is refused (10075),
        as nats-server requires the replica count to stay. The new assignment goes through
        the meta group; the stream's group then changes its membership by Raft
        configuration changes (the new server joins as a learner, catches up from the
        leader's store, and becomes a voter as the old one leaves: ``cluster/membership.py``).
        Answered once proposed, as nats-server does. nats-server's REMOVE drops the peer at
        once and its EVACUATE migrates first; natsd always migrates first, which keeps the
        replica count while the newcomer catches up. An R1 stream is refused (10075) where
        nats-server moves it: natsd moves a stream through its Raft group only."""
        if is_empty_request(data):
            raise E.JSBadRequestErr()
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise E.JSInvalidJSONErr(err=str(e)) from None
        peer = doc.get("peer") if isinstance(doc, dict) else None
        if not isinstance(peer, str) or not peer:
            raise E.JSBadRequestErr()
        existing = self.c.meta.stream(ja.account.name, name)
        if existing is None or existing.restoring:
            raise E.JSStreamNotFoundErr()
        server = peer if peer in existing.peers else ""
        if not server:
            server = next((p for p in existing.peers if peer_hash(p) == peer), "")
        if not server:
            raise E.JSClusterPeerNotMemberErr()
        if len(existing.peers) < 2:
            raise E.JSPeerRemapErr()  # an R1 stream has no group to hand its data over
        try:
            new = self.c.place_one(existing, set(existing.peers))
        except NoPeers:
            raise E.JSPeerRemapErr() from None
        peers = [new if p == server else p for p in existing.peers]
        if not self.c.propose(remap_op(existing, peers, self.c.server_name)):
            raise E.JSClusterNotAvailErr()
        return {"success": True}

    def delete(self, ja: JsAccount, name: str, data: bytes, reply: str) -> None:
        if not is_empty_request(data):
            raise E.JSNotEmptyRequestErr()
        if self.c.meta.stream(ja.account.name, name) is None:
            raise E.JSStreamNotFoundErr()
        op = encode_op(
            "delete", account=ja.account.name, stream=name, reply=reply, origin=self.c.server_name
        )
        if not self.c.propose(op):
            raise E.JSClusterNotAvailErr()

    # ---------------------------------------------------------------- names / list
    def _page(
        self, ja: JsAccount, data: bytes, schema: StructT, limit: int
    ) -> tuple[list[str], dict[str, Any]]:
        r = optional_request(data, schema)
        names = [
            a.name
            for a in self.c.meta.account_streams(ja.account.name)
            if not r["subject"] or overlaps([r["subject"]], a.config.get("subjects") or [a.name])
        ]
        offset = min(max(r["offset"], 0), len(names))
        paging = {"total": len(names), "offset": offset, "limit": limit}
        return names[offset : offset + limit], paging

    def names(self, ja: JsAccount, data: bytes) -> dict[str, Any]:
        page, out = self._page(ja, data, NAMES_REQUEST, NAMES_LIMIT)
        out["streams"] = page or None
        return out

    async def _list(self, ja: JsAccount, data: bytes, reply: str, subject: bytes) -> None:
        """Each listed stream's info from its server (``STREAM.INFO``), those that did not
        answer within LIST_TIMEOUT named in ``missing``."""
        try:
            page, out = self._page(ja, data, LIST_REQUEST, LIST_LIMIT)
        except ApiError as e:
            ja.api.total += 1
            ja.api.errors += 1
            body = {"error": e.to_json(), **ERROR_EXTRAS["stream_list_response"]}
            self._answer(ja, reply, "stream_list_response", body, subject, data)
            return
        ja.api.total += 1
        infos: dict[str, dict[str, Any]] = {}
        sl = ja.account.sublist

        def send(inbox: bytes) -> None:
            for name in page:
                publish(sl, f"$JS.API.STREAM.INFO.{name}".encode(),
                        inbox + b"." + name.encode(), None, b"")  # fmt: skip

        def on_info(token: bytes, body: bytes) -> bool:
            name = token.decode(errors="replace")
            if name in page and name not in infos:
                try:
                    doc = orjson.loads(body)
                except orjson.JSONDecodeError:
                    doc = None
                if isinstance(doc, dict) and "error" not in doc:
                    for k in ("type", "total", "offset", "limit"):
                        doc.pop(k, None)
                    infos[name] = doc
            return len(infos) == len(page)

        if page:
            await gather(sl, send, on_info, LIST_TIMEOUT)
        out["streams"] = [infos[n] for n in page if n in infos]
        missing = [n for n in page if n not in infos]
        if missing:
            out["missing"] = missing
        self._answer(ja, reply, "stream_list_response", out, subject, data)
