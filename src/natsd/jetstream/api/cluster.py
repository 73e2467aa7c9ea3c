"""JetStream on a cluster: the meta group, and which server answers which API request.

Design-clustering §4.4. Every JetStream server of the cluster runs the meta group
(``cluster.meta``) on its node's ``RaftService``; its state says where every stream lives.
Every server subscribes to ``$JS.API.>`` as a standalone one does, so every request reaches
every server over the routes, and ``JsCluster.route`` decides which one answers:

============================================  =========================================
request                                       answered by
============================================  =========================================
``INFO``, ``STREAM.CREATE/UPDATE/DELETE``,    the meta leader (creates, updates and
``STREAM.NAMES/LIST``                         deletes go through the meta group)
stream-scoped (``STREAM.INFO``, ``PURGE``,    the server the stream is placed on; the
``MSG.*``, ``CONSUMER.*``, ``DIRECT.GET``)    meta leader for a stream that does not exist
============================================  =========================================

Streams are R1 until replicated streams land (issue 19): a stream lives on one server, which
creates it when the assignment applies and answers the CREATE, and its consumers live with
it (their configs and state in that server's store, as on a standalone server). Only the
owner subscribes to the stream's subjects, so a publish on another server reaches it over
the routes.

Bootstrap: with no meta group in the node log, the servers wait until the mesh holds every
server their ``cluster.routes`` name (self included or not; see ``expected_size``) and then
each creates the group with the same voters, computed from the same server names; nothing
needs to be exchanged. A restart restores the group from the node log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import (
    META_GROUP,
    MetaError,
    MetaOp,
    MetaState,
    ServerRow,
    encode_op,
    place,
)
from natsd.cluster.raft_service import RaftService
from natsd.core.ids import Nuid
from natsd.jetstream.api.cluster_handlers import MetaRequests
from natsd.jetstream.api.dispatch import add_cluster_block, make_api_callback
from natsd.jetstream.api.domain import domain_subscriptions
from natsd.jetstream.config.stream_config import parse_stream_config
from natsd.jetstream.engine import JetStream, JsAccount, add_stream, delete_stream, update_stream
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.state import RaftError
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription
from natsd.storage.store import StoreError

__all__ = ["USAGE_SUBJECT", "JsCluster"]

log = logging.getLogger("natsd")

# Each server's JetStream usage per account, published in the system account every
# USAGE_INTERVAL seconds; the meta leader sums them for $JS.API.INFO.
USAGE_SUBJECT: Final = b"$NATSD.JS.USAGE"
USAGE_INTERVAL: Final = 1.0
# A replica not heard from for this long shows as offline in /jsz.
ALIVE_FOR: Final = 10.0
# A peer whose Raft traffic is older than this gets no new streams (heartbeats come every
# 200 ms, and a new leader is elected 1-2 s after the old one went quiet, so a stopped
# leader is never its successor's first choice).
PLACE_ALIVE: Final = 1.0
_CHECK_INTERVAL: Final = 0.1

_META_VERBS: Final = frozenset(
    {
        ("INFO",),
        ("STREAM", "CREATE"),
        ("STREAM", "UPDATE"),
        ("STREAM", "DELETE"),
        ("STREAM", "NAMES"),
        ("STREAM", "LIST"),
    }
)

OnApi = Callable[[Subscription, bytes, bytes | None, bytes | None, bytes], None]


class JsCluster:
    """One server's part of clustered JetStream: its meta group replica, its server row,
    the routing of API requests, and what applying a meta entry means on this server."""

    def __init__(
        self,
        engine: JetStream,
        raft: RaftService,
        system: Account,
        server_name: str,
        cluster_name: Callable[[], str],
        peers: Callable[[], list[str]],
        expected_size: Callable[[], int],
        tags: list[str],
    ) -> None:
        self.engine = engine
        self.raft = raft
        self.system = system
        self.server_name = server_name
        self.cluster_name = cluster_name
        # names of the servers our routes are connected to, and how many servers (self
        # included) the configured routes name: the bootstrap inputs
        self._peers = peers
        self._expected = expected_size
        self.row = ServerRow(server_name, list(tags), engine.max_memory, engine.max_store)
        self.meta = MetaState()
        self.group: RaftGroup | None = None
        self._replay_until = 0  # meta entries up to here were applied before a restart
        self._reconciled = False
        self._row_proposed_at = -1e9
        self._timer: asyncio.TimerHandle | None = None
        self._usage_at = 0.0
        # server -> (when, {account: [memory, storage, consumers]})
        self.usage: dict[str, tuple[float, dict[str, list[int]]]] = {}
        self._usage_sub = Subscription(USAGE_SUBJECT, None, b"js-usage", callback=self._on_usage)
        self._nuid = Nuid()
        self.tasks: set[asyncio.Task[None]] = set()  # STREAM.LIST gathers under way
        self.requests = MetaRequests(self)
        engine.cluster_info = self.cluster_block

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        wal = self.raft.host.wal
        log_ = wal.groups.get(META_GROUP)
        if log_ is not None:
            self._replay_until = log_.commit
            self.group = self.raft.host.restore(META_GROUP, self._apply)
            log.info("JetStream cluster: meta group restored (%d entries to replay)", log_.commit)
            if self._replay_until <= self.group.applied:
                self._reconcile()
        self.system.sublist.insert(self._usage_sub)
        self.raft.start()
        self._timer = asyncio.get_running_loop().call_later(_CHECK_INTERVAL, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.system.sublist.remove(self._usage_sub)
        self.raft.stop()
        self.raft.host.wal.close()

    def _check(self) -> None:
        """Every 100 ms: bootstrap when the mesh is complete, keep our server row current,
        report our usage."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self.group is None:
            self._maybe_bootstrap()
        elif self.leader_name() and self.meta.servers.get(self.server_name) != self.row:
            if now - self._row_proposed_at > 1.0:
                self._row_proposed_at = now
                self.propose(encode_op("server", **self.row.to_json()))
        if now - self._usage_at >= USAGE_INTERVAL:
            self._usage_at = now
            self._report_usage()
        self._timer = loop.call_later(_CHECK_INTERVAL, self._check)

    def _maybe_bootstrap(self) -> None:
        names = sorted({*self._peers(), self.server_name})
        want = self._expected()
        if len(names) != want:
            return
        self.group = self.raft.host.create(META_GROUP, [raft_id(n) for n in names], self._apply)
        self._reconciled = True
        log.info("JetStream cluster: meta group created with %s", ", ".join(names))
        self.raft.kick()

    # ---------------------------------------------------------------- meta group
    def is_leader(self) -> bool:
        g = self.group
        return g is not None and g.node.raft.lead == self.raft.host.id

    def leader_name(self) -> str:
        g = self.group
        if g is None or not g.node.raft.lead:
            return ""
        return self._name_of(g.node.raft.lead)

    def _name_of(self, node_id: int) -> str:
        for name in (self.server_name, *self._peers(), *self.meta.servers):
            if raft_id(name) == node_id:
                return name
        return ""

    def health(self) -> str:
        """Why this server's JetStream is not current ("" when it is), in nats-server's
        words (/healthz)."""
        if self.group is None or not self.group.node.raft.lead:
            return "JetStream has not established contact with a meta leader"
        if not self._reconciled:
            return "JetStream is still recovering meta layer"
        return ""

    def meta_info(self) -> dict[str, Any]:
        """/jsz ``meta_cluster``: the meta group as this server sees it."""
        g = self.group
        lead = self.leader_name()
        out: dict[str, Any] = {"name": self.cluster_name()}
        if lead:
            out["leader"] = lead
            out["peer"] = peer_hash(lead)
        voters = list(g.conf.voters) if g is not None else []
        now = asyncio.get_running_loop().time()
        progress = g.node.raft.trk.progress if g is not None and self.is_leader() else {}
        last = g.node.raft.raft_log.last_index() if g is not None else 0
        replicas = []
        for vid in voters:
            name = self._name_of(vid)
            if not name or name == lead:
                continue
            heard = self.raft.last_heard.get(vid)
            rep: dict[str, Any] = {"name": name}
            pr = progress.get(vid)
            if vid == self.raft.host.id:
                rep["current"], active = True, 0.0
            else:
                rep["current"] = pr.match >= last if pr is not None else heard is not None
                active = now - heard if heard is not None else -1.0
            if active < 0 or active > ALIVE_FOR:
                rep["offline"] = True
            rep["active"] = int(max(active, 0.0) * 1e9)
            rep["peer"] = peer_hash(name)
            replicas.append(rep)
        if replicas:
            out["replicas"] = replicas
        out["cluster_size"] = len(voters)
        out["quorum_needed"] = len(voters) // 2 + 1 if voters else 0
        out["pending"] = 0
        out["pending_requests"] = 0
        out["pending_infos"] = 0
        return out

    def propose(self, data: bytes) -> bool:
        """False when the meta group cannot take it now (no leader known)."""
        if self.group is None:
            return False
        try:
            self.raft.propose(META_GROUP, data)
        except RaftError:
            return False
        return True

    def alive(self) -> list[str]:
        """The servers a new stream may go to: ourselves and the peers our routes reach
        whose Raft traffic we heard within ``PLACE_ALIVE`` (a stopped process keeps its
        route open for a while, but stops answering heartbeats)."""
        now = asyncio.get_running_loop().time()
        heard = self.raft.last_heard
        fresh = [p for p in self._peers() if now - heard.get(raft_id(p), -1e9) <= PLACE_ALIVE]
        return sorted({self.server_name, *fresh})

    def place(self, replicas: int, tags: list[str], max_bytes: int, memory: bool) -> list[str]:
        def room(name: str) -> bool:
            row = self.meta.servers.get(name)
            if row is None or max_bytes <= 0:
                return True
            limit = row.max_memory if memory else row.max_store
            if limit < 0:
                return True
            used: int = sum(
                int(a.config.get("max_bytes", -1))
                for a in self.meta.placed_on(name)
                if (a.config.get("storage") == "memory") == memory
                and a.config.get("max_bytes", -1) > 0
            )
            return used + max_bytes <= limit

        return place(self.meta, self.alive(), replicas, tags, room)

    def _apply(self, index: int, data: bytes) -> None:
        replay = index <= self._replay_until
        try:
            op = self.meta.apply(index, data)
        except MetaError as e:
            log.error("JetStream cluster: meta entry %d skipped: %s", index, e)
            return
        try:
            if op.op == "stream":
                self._applied_stream(op, replay)
            elif op.op == "delete":
                self._applied_delete(op, replay)
        finally:
            if not self._reconciled and index >= self._replay_until:
                self._reconcile()

    def _applied_stream(self, op: MetaOp, replay: bool) -> None:
        a = op.assignment
        assert a is not None
        if self.server_name not in a.peers:
            return
        answer = not replay and bool(op.reply)
        ja = self.engine.accounts.get(a.account)
        if ja is None:
            log.error("JetStream cluster: stream %s/%s placed here but the account has no"
                      " JetStream", a.account, a.name)  # fmt: skip
            return
        if replay:
            return  # recovery opened it; _reconcile creates what is missing
        try:
            cfg = parse_stream_config(a.config, name_in_subject=None)
            local = ja.streams.get(a.name)
            if local is None:
                stream = add_stream(ja, cfg)
                rtype, extra = "stream_create_response", {"did_create": True}
            elif op.previous is None:
                stream, rtype, extra = local, "stream_create_response", {"did_create": True}
            else:
                stream = update_stream(ja, cfg)
                rtype, extra = "stream_update_response", {}
            if answer:
                out = stream.info_json()
                self.add_cluster(out)
                out.update(extra)
                self.respond(ja, op.reply, rtype, out)
        except (ApiError, StoreError, OSError) as e:
            log.error("JetStream cluster: stream %s/%s not applied: %s", a.account, a.name, e)
            if answer:
                rtype = "stream_update_response" if op.previous else "stream_create_response"
                err = e if isinstance(e, ApiError) else E.JSStreamCreateErrF(err=str(e))
                self.respond(ja, op.reply, rtype, {"error": err.to_json()})
            if op.previous is None and a.name not in ja.streams:
                # the assignment stands for nothing here: withdraw it
                self.propose(encode_op("delete", account=a.account, stream=a.name))

    def _applied_delete(self, op: MetaOp, replay: bool) -> None:
        a = op.previous
        assert a is not None
        ja = self.engine.accounts.get(a.account)
        if ja is None:
            return
        if self.server_name in a.peers and not replay:
            local = ja.streams.get(a.name)
            if local is not None:
                try:
                    delete_stream(ja, local)
                except (StoreError, OSError) as e:
                    log.error("JetStream cluster: stream %s/%s not deleted: %s",
                              a.account, a.name, e)  # fmt: skip
        if op.reply and op.origin == self.server_name and not replay:
            self.respond(ja, op.reply, "stream_delete_response", {"success": True})

    def _reconcile(self) -> None:
        """After the replay that follows a restart: streams assigned here that recovery did
        not find are created (empty); local streams the meta group does not assign here are
        left as they are and reported (nothing is deleted automatically)."""
        self._reconciled = True
        for ja in self.engine.accounts.values():
            assigned = {
                a.name: a
                for a in self.meta.account_streams(ja.account.name)
                if self.server_name in a.peers
            }
            for name, a in assigned.items():
                if name in ja.streams:
                    continue
                try:
                    add_stream(ja, parse_stream_config(a.config, name_in_subject=None))
                    log.warning("JetStream cluster: stream %s/%s was assigned here but not"
                                " found on disk; created empty", ja.account.name, name)  # fmt: skip
                except (ApiError, StoreError, OSError) as e:
                    log.error("JetStream cluster: stream %s/%s not created: %s",
                              ja.account.name, name, e)  # fmt: skip
            for name in ja.streams:
                if name not in assigned:
                    log.warning(
                        "JetStream cluster: stream %s/%s is on disk but not assigned to this"
                        " server; left untouched",
                        ja.account.name,
                        name,
                    )

    # ---------------------------------------------------------------- usage
    def _report_usage(self) -> None:
        accounts: dict[str, list[int]] = {}
        for name, ja in self.engine.accounts.items():
            mem, store = self.engine.usage(ja)
            consumers = sum(s.consumer_count for s in ja.streams.values())
            accounts[name] = [mem, store, consumers]
        body = orjson.dumps({"server": self.server_name, "accounts": accounts})
        publish(self.system.sublist, USAGE_SUBJECT, None, None, body)

    def _on_usage(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        try:
            doc = orjson.loads(data)
            server = doc["server"]
            accounts = {str(k): [int(x) for x in v][:3] for k, v in dict(doc["accounts"]).items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return  # a peer is as untrusted as a client
        if isinstance(server, str) and len(accounts) <= 100_000:
            self.usage[server] = (asyncio.get_running_loop().time(), accounts)

    def account_usage(self, account: str) -> tuple[int, int, int]:
        """(memory, storage, consumers) of ``account`` summed over the servers' reports."""
        mem = store = consumers = 0
        for _, accounts in self.usage.values():
            u = accounts.get(account)
            if u is not None and len(u) == 3:
                mem, store, consumers = mem + u[0], store + u[1], consumers + u[2]
        return mem, store, consumers

    # ---------------------------------------------------------------- answers
    def cluster_block(self) -> dict[str, Any]:
        """The ``cluster`` block of an R1 stream or consumer on this server."""
        return {"name": self.cluster_name(), "leader": self.server_name}

    def add_cluster(self, info: dict[str, Any]) -> None:
        add_cluster_block("stream_info_response", info, self.cluster_block())

    def respond(self, ja: JsAccount, reply: str, rtype: str, body: dict[str, Any]) -> None:
        out = {"type": "io.nats.jetstream.api.v1." + rtype}
        out.update(body)
        self.engine.send(ja, reply.encode(), orjson.dumps(out))

    # ---------------------------------------------------------------- routing
    def subscribe_api(self, ja: JsAccount) -> list[Subscription]:
        """The ``ApiSubscriber`` of a clustered engine: the standalone subscriptions, with
        every request first routed by ``route``."""
        local = make_api_callback(ja)

        def on_api(
            sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
        ) -> None:
            self.route(ja, local, sub, subject, reply, hdr, data)

        subs = [Subscription(b"$JS.API.>", None, b"js-api", callback=on_api)]
        if self.engine.domain:
            subs.extend(domain_subscriptions(self.engine.domain, ja.account.sublist, on_api))
        return subs

    def route(
        self,
        ja: JsAccount,
        local: OnApi,
        sub: Subscription,
        subject: bytes,
        reply: bytes | None,
        hdr: bytes | None,
        data: bytes,
    ) -> None:
        toks = subject.decode(errors="replace").split(".")
        # $JS.API.<verb...> or $JS.<domain>.API.<verb...>
        api = 2 if len(toks) > 1 and toks[1] == "API" else 3
        verb = toks[api:]
        if tuple(verb[:1]) in _META_VERBS or tuple(verb[:2]) in _META_VERBS:
            if self.is_leader():
                self.requests.handle(ja, verb, reply, hdr, data, subject)
            return
        stream = _stream_of(verb)
        if stream is None:
            if self.is_leader():
                local(sub, subject, reply, hdr, data)  # unknown or account-wide: one answer
            return
        if stream in ja.streams:
            local(sub, subject, reply, hdr, data)
        elif self.is_leader() and self.meta.stream(ja.account.name, stream) is None:
            if verb[:3] != ["CONSUMER", "MSG", "NEXT"] and verb[:1] != ["DIRECT"]:
                local(sub, subject, reply, hdr, data)  # nats-server's "stream not found"


def _stream_of(verb: list[str]) -> str | None:
    """The stream a stream-scoped request names, None for one that names none."""
    if not verb:
        return None
    head = verb[0]
    if head == "STREAM" and len(verb) >= 3:
        # STREAM.INFO.<s>, STREAM.PURGE.<s>, STREAM.MSG.GET.<s>, STREAM.LEADER.STEPDOWN.<s>...
        return verb[3] if verb[1] in ("MSG", "LEADER", "PEER") and len(verb) >= 4 else verb[2]
    if head == "CONSUMER" and len(verb) >= 3:
        if verb[1] in ("MSG", "LEADER", "DURABLE"):
            return verb[3] if len(verb) >= 4 else None
        return verb[2]
    if head == "DIRECT" and len(verb) >= 3:
        return verb[2]
    return None
