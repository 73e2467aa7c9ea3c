"""The requests the meta leader answers (``JsCluster.route`` sends them here): account info,
and the stream create / update / delete / names / list that only it may decide.

A create, update or delete is checked here against the meta state (the whole cluster's
streams, not this server's), then proposed to the meta group with the request's reply
subject; the server that applies it as the owner answers (``JsCluster._apply``). What fails
a check is answered here at once, with nats-server's error.

``STREAM.LIST`` needs every stream's state, which lives on its owner: the leader asks each
owner (``$JS.API.STREAM.INFO.<s>`` on a private inbox) and answers with what came back within
``LIST_TIMEOUT``; streams that did not answer are named in ``missing``, as nats-server does.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

import orjson

from natsd.cluster.meta import NoPeers, encode_op
from natsd.jetstream.api.streams import LIST_LIMIT, NAMES_LIMIT
from natsd.jetstream.config.account_limits import check_stream_create, check_stream_update
from natsd.jetstream.config.stream_config import (
    check_update,
    parse_stream_config,
    parse_stream_config_json,
)
from natsd.jetstream.config.stream_types import StorageType, StreamConfig
from natsd.jetstream.config.subject_mapping import subjects_collide
from natsd.jetstream.engine import JsAccount
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.jetstream.wire.gotyped import INT, STRING, StructT, decode_request, is_empty_request
from natsd.jetstream.wire.gotyped import is_json_object_or_array as _is_json
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.version import API_LEVEL

if TYPE_CHECKING:  # the handlers' owner; it imports this module to build them
    from natsd.jetstream.api.cluster import JsCluster

__all__ = ["LIST_TIMEOUT", "MetaRequests"]

LIST_TIMEOUT: Final = 2.0
_PAGE = StructT(
    "server.JSApiStreamNamesRequest",
    {"offset": ("offset", INT), "subject": ("subject", STRING)},
    lambda: {"offset": 0, "subject": ""},
)
_ERROR_EXTRAS: Final[dict[str, dict[str, Any]]] = {
    "stream_names_response": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "stream_list_response": {"total": 0, "offset": 0, "limit": 0, "streams": []},
}


class MetaRequests:
    def __init__(self, cluster: JsCluster) -> None:
        self.c = cluster

    def handle(
        self,
        ja: JsAccount,
        verb: list[str],
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
        subject: bytes,
    ) -> None:
        if not reply:
            return
        rep = reply.decode(errors="replace")
        head = tuple(verb[:2])
        try:
            if verb == ["INFO"]:
                self.c.spawn(self._account_info(ja, rep))
                return
            elif head == ("STREAM", "CREATE") and len(verb) == 3:
                rtype = "stream_create_response"
                self.create(ja, verb[2], data, rep)
                return  # the owner answers once the meta group applied it
            elif head == ("STREAM", "UPDATE") and len(verb) == 3:
                rtype = "stream_update_response"
                self.update(ja, verb[2], data, rep)
                return
            elif head == ("STREAM", "DELETE") and len(verb) == 3:
                rtype = "stream_delete_response"
                self.delete(ja, verb[2], data, rep)
                return
            elif head == ("STREAM", "NAMES") and len(verb) == 2:
                rtype, body = "stream_names_response", self.names(ja, data)
            elif head == ("STREAM", "LIST") and len(verb) == 2:
                rtype = "stream_list_response"
                self.list(ja, data, rep)
                return
            else:
                return  # wrong number of tokens: no subscription in nats-server matches
            ja.api.total += 1
        except ApiError as e:
            ja.api.total += 1
            ja.api.errors += 1
            body = {"error": e.to_json()}
            body.update(_ERROR_EXTRAS.get(rtype, {}))
        self.c.respond(ja, rep, rtype, body)

    # ---------------------------------------------------------------- account
    async def _account_info(self, ja: JsAccount, reply: str) -> None:
        await self.c.usage.refresh()
        body = self.account_info(ja)  # the totals exclude this request, as nats-server's
        ja.api.total += 1
        self.c.respond(ja, reply, "account_info_response", body)

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
    def _configs(self, ja: JsAccount) -> list[StreamConfig]:
        return [
            parse_stream_config(a.config, name_in_subject=None)
            for a in self.c.meta.account_streams(ja.account.name)
        ]

    def _check_overlap(self, ja: JsAccount, cfg: StreamConfig) -> None:
        mine = cfg.subjects or [cfg.name]
        for a in self.c.meta.account_streams(ja.account.name):
            if a.name == cfg.name:
                continue
            theirs = a.config.get("subjects") or [a.name]
            if any(subjects_collide(x, y) for x in mine for y in theirs):
                raise E.JSStreamSubjectOverlapErr()

    def _limits(self, ja: JsAccount, cfg: StreamConfig) -> tuple[list[StreamConfig], int, int]:
        engine = ja.engine
        memory = cfg.storage == StorageType.MEMORY
        server_max = engine.max_memory if memory else engine.max_store
        return self._configs(ja), server_max, 0

    def create(self, ja: JsAccount, name: str, data: bytes, reply: str) -> None:
        cfg = parse_stream_config_json(
            data or b"{}", name_in_subject=name, limits=ja.limits, clustered=True
        )
        existing = self.c.meta.stream(ja.account.name, cfg.name)
        if existing is not None:
            if existing.config != cfg.to_json():
                raise E.JSStreamNameExistErr()
            peers = existing.peers  # the same config again: its owner answers with its info
        else:
            check_stream_create(ja.limits, cfg, *self._limits(ja, cfg))
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
                raise E.JSClusterNoPeersErrF(err=str(e)) from None
        # after placement, so that more replicas than servers reads as nats-server's 10005
        _refuse_replicas(cfg, E.JSStreamCreateErrF)
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

    def update(self, ja: JsAccount, name: str, data: bytes, reply: str) -> None:
        cfg = parse_stream_config_json(
            data or b"{}", name_in_subject=name, action="update", limits=ja.limits
        )
        existing = self.c.meta.stream(ja.account.name, cfg.name)
        if existing is None:
            raise E.JSStreamNotFoundErr()
        old = parse_stream_config(existing.config, name_in_subject=None)
        cfg = check_update(old, cfg)
        _refuse_replicas(cfg, E.JSStreamUpdateErrF)
        check_stream_update(ja.limits, old, cfg, *self._limits(ja, cfg))
        self._check_overlap(ja, cfg)
        op = encode_op(
            "stream",
            account=ja.account.name,
            config=cfg.to_json(),
            peers=existing.peers,
            reply=reply,
            origin=self.c.server_name,
        )
        if not self.c.propose(op):
            raise E.JSClusterNotAvailErr()

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
    def _page(self, ja: JsAccount, data: bytes, limit: int) -> tuple[list[str], dict[str, Any]]:
        r: dict[str, Any] = decode_request(data, _PAGE) if _is_json(data) else _PAGE.factory()
        names = []
        for a in self.c.meta.account_streams(ja.account.name):
            subjects = a.config.get("subjects") or [a.name]
            if r["subject"] and not any(subjects_collide(r["subject"], s) for s in subjects):
                continue
            names.append(a.name)
        offset = min(max(r["offset"], 0), len(names))
        return names[offset : offset + limit], {
            "total": len(names),
            "offset": offset,
            "limit": limit,
        }

    def names(self, ja: JsAccount, data: bytes) -> dict[str, Any]:
        page, out = self._page(ja, data, NAMES_LIMIT)
        out["streams"] = page or None
        return out

    def list(self, ja: JsAccount, data: bytes, reply: str) -> None:
        page, out = self._page(ja, data, LIST_LIMIT)
        ja.api.total += 1
        infos: dict[str, dict[str, Any]] = {}
        wanted = set(page)
        inbox = f"_INBOX.natsd-list.{self.c._nuid.next()}"
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def on_info(
            sub: Subscription, subject: bytes, rep: bytes | None, hdr: bytes | None, body: bytes
        ) -> None:
            name = subject.decode(errors="replace").rsplit(".", 1)[-1]
            if name not in wanted or name in infos:
                return
            try:
                doc = orjson.loads(body)
            except orjson.JSONDecodeError:
                return
            if not isinstance(doc, dict) or "error" in doc:
                return
            doc.pop("type", None)
            for k in ("total", "offset", "limit"):
                doc.pop(k, None)
            infos[name] = doc
            if len(infos) == len(wanted) and not done.done():
                done.set_result(None)

        sub = Subscription(f"{inbox}.*".encode(), None, b"js-list", callback=on_info)
        sublist = ja.account.sublist
        sublist.insert(sub)
        for name in page:
            publish(sublist, f"$JS.API.STREAM.INFO.{name}".encode(),
                    f"{inbox}.{name}".encode(), None, b"")  # fmt: skip
        if not page:
            done.set_result(None)

        def finish(_: object = None) -> None:
            sublist.remove(sub)
            out["streams"] = [infos[n] for n in page if n in infos]
            missing = [n for n in page if n not in infos]
            if missing:
                out["missing"] = missing
            self.c.respond(ja, reply, "stream_list_response", out)

        async def wait() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(done), LIST_TIMEOUT)
            except TimeoutError:
                pass
            finish()

        self.c.spawn(wait())


def _refuse_replicas(cfg: StreamConfig, err: Any) -> None:
    """Replicated streams come with issue 19; until then a clear refusal, not an R1 stream
    that claims to be R3."""
    if cfg.num_replicas > 1:
        raise err(err="natsd does not replicate streams yet: num_replicas must be 1")
