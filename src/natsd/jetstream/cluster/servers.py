"""The meta group's members, and the system account's requests to the meta leader about them:
``$JS.API.SERVER.REMOVE`` (a server leaves the JetStream cluster for good),
``$JS.API.SERVER.EVACUATE`` (its stream replicas move elsewhere, it stays a member), and
``META.LEADER.STEPDOWN`` (the member the meta leader hands over to). ``SystemRequests`` owns
their subscriptions.

As nats-server's jsLeaderServerRemoveRequest (a system account request, answered by the meta
leader): ``{"server": "<name>"}`` or ``{"peer": "<peer id>"}`` names a member of the meta
group; one not in it gets 10044, and a request while another membership change of the meta
group is under way gets 10202. The removal is a Raft configuration change of the meta group
(design-clustering §4.8, rule 4), followed by a ``forget`` entry that drops the server from the
server table for good (it is never placed on again, and its own row updates are refused). The
server that proposed them answers once the ``forget`` entry applies.

Its stream replicas move, as nats-server's processRemovePeer moves them: the meta leader
replaces it in every replicated stream by a server holding no replica of that stream, or, with
none free, leaves the stream one replica short (``remap_removed``; checked every second, so a
meta leader elected meanwhile finishes the job). The groups then follow by configuration
changes (``cluster/membership.py``). An R1 stream on the removed server cannot move without it
and stays assigned there, reported.

The removed server, when it applies its own ``forget``, says so in its log; the meta group no
longer counts it and its proposals go nowhere.

``SERVER.EVACUATE`` (nats-server 2.15's jsLeaderServerEvacuateRequest, the same request and
errors, answered ``meta_server_remove_response``): every replicated stream with a replica on
the server gets a server holding none of its replicas in its place, in one meta entry each,
and its group walks there as for ``STREAM.PEER.REMOVE`` (the newcomer catches up before the
evacuated replica leaves). A stream with no free server keeps its replica there, as
nats-server leaves it (logged). nats-server also moves an R1 stream; natsd moves a stream only
through its Raft group, which an R1 stream has not, so a server holding an R1 stream is
refused as a whole (10075, peer remap failed) before anything moves, rather than answered
success with the R1 streams left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, Protocol

import orjson

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import MetaOp, MetaState, NoPeers, StreamAssignment, encode_op
from natsd.cluster.raft_service import RaftService
from natsd.core.goquote import go_quote
from natsd.core.scheduler import Clock
from natsd.jetstream.cluster.membership import in_config
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.state import RaftError
from natsd.raft.types import ConfChangeSingle, ConfChangeType, ConfChangeV2
from natsd.router.account import Account
from natsd.router.subscription import Subscription

__all__ = [
    "PLACE_ALIVE",
    "RTYPE",
    "MetaLeader",
    "SystemRequests",
    "evacuate_server",
    "find_member",
    "remap_op",
    "remap_removed",
    "remove_server",
    "removed_from",
    "stepdown_target",
]

log: Final = logging.getLogger("natsd")

RTYPE: Final = "meta_server_remove_response"
# A peer whose Raft traffic is older than this gets no new streams (heartbeats come every
# 200 ms, and a new leader is elected 1-2 s after the old one went quiet, so a stopped
# leader is never its successor's first choice).
PLACE_ALIVE: Final = 1.0

# place(stream assignment, servers to exclude) -> one server (NoPeers when none)
PlaceOne = Callable[[StreamAssignment, set[str]], str]


def find_member(meta: MetaState, g: RaftGroup, name_of: Callable[[int], str], data: bytes) -> str:
    """The meta group member a SERVER.REMOVE or SERVER.EVACUATE request names (``peer``, a
    peer id, takes precedence over ``server``, a name). ApiError with nats-server's error."""
    try:
        doc: Any = orjson.loads(data) if data.strip() else None
    except orjson.JSONDecodeError as e:
        raise E.JSInvalidJSONErr(err=str(e)) from None
    if not isinstance(doc, dict):
        raise E.JSBadRequestErr()
    peer, server = doc.get("peer"), doc.get("server")
    members = {name_of(v): v for v in g.conf.voters} | {name_of(v): v for v in g.conf.learners}
    found = ""
    for name in members:
        if (isinstance(peer, str) and peer and peer_hash(name) == peer) or (
            not peer and isinstance(server, str) and server == name
        ):
            found = name
            break
    if not found or found in meta.removed:
        raise E.JSClusterServerNotMemberErr()
    return found


def remove_server(meta: MetaState, g: RaftGroup, name_of: Callable[[int], str], data: bytes) -> str:
    """Check a SERVER.REMOVE request on the meta leader and propose the configuration
    change that takes the server out of the meta group; returns the server's name (the
    caller then proposes the ``forget`` entry). ApiError with nats-server's error."""
    found = find_member(meta, g, name_of, data)
    if g.node.conf_change_pending() or g.conf.voters_outgoing:
        raise E.JSClusterServerMemberChangeInflightErr()
    cc = ConfChangeV2(
        changes=[ConfChangeSingle(ConfChangeType.ConfChangeRemoveNode, raft_id(found))]
    )
    try:
        g.node.propose_conf_change(cc)
    except RaftError as e:
        raise E.JSClusterNotAvailErr() from e
    return found


def remap_op(a: StreamAssignment, peers: list[str], origin: str) -> bytes:
    """The meta entry that moves stream ``a`` to ``peers`` (its config unchanged; ``remap``
    tells a plain update, which keeps its peers, from a move): PEER.REMOVE, EVACUATE and a
    removed server's replicas."""
    return encode_op("stream", account=a.account, config=a.config, peers=peers, remap=True,
                     reply="", origin=origin)  # fmt: skip


# A stream remapped this recently (seconds) is not remapped again: its entry is in flight.
REMAP_AGAIN_AFTER: Final = 5.0


def remap_removed(
    meta: MetaState,
    place_one: PlaceOne,
    propose: Callable[[bytes], bool],
    origin: str,
    recent: dict[tuple[str, str], float],
    now: float,
) -> int:
    """As meta leader: every replicated stream still assigned to a removed server gets a
    replacement, or loses that peer when no server is free; returns the proposals made.
    ``recent``: when each stream was last remapped (or reported), kept by the caller."""
    if not meta.removed:
        return 0
    n = 0
    for acc in list(meta.streams.values()):
        for a in list(acc.values()):
            gone = [p for p in a.peers if p in meta.removed]
            key = (a.account, a.name)
            if not gone or now - recent.get(key, -1e9) < REMAP_AGAIN_AFTER:
                continue
            recent[key] = now
            if len(a.peers) < 2:
                log.warning(
                    "JetStream cluster: stream %s/%s stays on removed server %s (an R1"
                    " stream cannot move without it)",
                    a.account, a.name, a.peers[0],
                )  # fmt: skip
                recent[key] = now + 3600  # reported once an hour
                continue
            peers = list(a.peers)
            for p in gone:
                try:
                    new = place_one(a, set(peers))
                except (NoPeers, ApiError):
                    peers.remove(p)
                    continue
                peers[peers.index(p)] = new
            if not peers:
                continue
            if propose(remap_op(a, peers, origin)):
                n += 1
    return n


def stepdown_target(
    data: bytes,
    g: RaftGroup,
    server_name: str,
    cluster_name: str,
    meta: MetaState,
    name_of: Callable[[int], str],
    last_heard: dict[int, float],
    now: float,
) -> int:
    """META.LEADER.STEPDOWN: the member the meta leader hands over to, the most caught-up
    live one among those ``placement`` allows (``preferred``, ``tags``, ``cluster``), with
    nats-server's getStepDownPreferredPlacement errors."""
    pl: dict[str, Any] = {}
    if data.strip():
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise E.JSInvalidJSONErr(err=str(e)) from None
        raw = doc.get("placement") if isinstance(doc, dict) else None
        pl = raw if isinstance(raw, dict) else {}
    me = g.node.node_id()
    prefer = str(pl.get("preferred") or "")
    if prefer:
        # nats-server's getStepDownPreferredPlacement errors
        members = {name_of(v) for v in g.node.tracked()}
        if prefer == server_name:
            raise E.JSClusterNoPeersErrF(
                err=f"preferred server {go_quote(prefer)} is already leader"
            )
        if prefer not in members:
            raise E.JSClusterNoPeersErrF(err=f"preferred server {go_quote(prefer)} not known")
    tags = {str(t).lower() for t in pl.get("tags") or []}
    cluster = pl.get("cluster") or ""
    best, best_match = 0, -1
    for vid, match in g.node.matches().items():
        name = name_of(vid)
        row = meta.servers.get(name)
        if vid == me or not name or row is None:
            continue
        if now - last_heard.get(vid, -1e9) > PLACE_ALIVE:
            continue
        if (prefer and name != prefer) or not tags.issubset({t.lower() for t in row.tags}):
            continue
        if cluster and cluster != cluster_name:
            continue
        if match > best_match:
            best, best_match = vid, match
    if not best:
        raise E.JSClusterNoPeersErrF(err="no suitable peers for placement")
    return best


def removed_from(meta: MetaState, g: RaftGroup | None, server_name: str) -> bool:
    """Was this server removed from the cluster (it applied its own ``forget``, or a
    configuration of the meta group without it)?"""
    if server_name in meta.removed:
        return True
    return g is not None and bool(g.conf.voters) and not in_config(g, g.node.node_id())


def evacuate_server(meta: MetaState, name: str, place_one: PlaceOne) -> list[StreamAssignment]:
    """SERVER.EVACUATE: the new assignments of the replicated streams with a replica on
    ``name``, each with a free server in its place (a stream with none free is left as it
    is, logged). Refused (10075) when the server holds an R1 stream, before anything moves."""
    placed = meta.placed_on(name)
    single = [a for a in placed if len(a.peers) < 2]
    if single:
        log.warning(
            "JetStream cluster: server %s not evacuated: it holds R1 stream %s/%s, which"
            " natsd cannot move without a group",
            name, single[0].account, single[0].name,
        )  # fmt: skip
        raise E.JSPeerRemapErr()
    moved: list[StreamAssignment] = []
    for a in placed:
        try:
            new = place_one(a, {*a.peers})
        except (NoPeers, ApiError):
            log.warning(
                "JetStream cluster: stream %s/%s keeps its replica on %s: no free server",
                a.account, a.name, name,
            )  # fmt: skip
            continue
        moved.append(replace(a, peers=[new if p == name else p for p in a.peers]))
    return moved


class MetaLeader(Protocol):
    """What ``SystemRequests`` needs of this server's part of the meta group (``JsCluster``)."""

    meta: MetaState
    group: RaftGroup | None
    raft: RaftService
    system: Account
    server_name: str
    clock: Clock

    def is_leader(self) -> bool: ...
    def propose(self, data: bytes) -> bool: ...
    def name_of(self, node_id: int) -> str: ...
    def place_one(self, a: StreamAssignment, exclude: set[str]) -> str: ...
    def stepdown_target(self, data: bytes) -> int: ...
    def reply_system(self, reply: str, rtype: str, body: dict[str, Any]) -> None: ...


class SystemRequests:
    """The system account's requests that only the meta leader answers:
    ``META.LEADER.STEPDOWN``, ``SERVER.REMOVE`` and ``SERVER.EVACUATE``, and the moving of
    a removed server's replicas (``remap_removed``, every second on the leader)."""

    def __init__(self, host: MetaLeader) -> None:
        self.host = host
        self.subs = [
            Subscription(subject, None, b"js-meta", callback=cb)
            for subject, cb in (
                (b"$JS.API.META.LEADER.STEPDOWN", self._on_stepdown),
                (b"$JS.API.SERVER.REMOVE", self._on_remove),
                (b"$JS.API.SERVER.EVACUATE", self._on_evacuate),
            )
        ]
        self._remapped: dict[tuple[str, str], float] = {}

    def start(self) -> None:
        for sub in self.subs:
            self.host.system.sublist.insert(sub)

    def stop(self) -> None:
        for sub in self.subs:
            self.host.system.sublist.remove(sub)

    def tick(self, now: float) -> None:
        """Once a second on the meta leader: move what a removed server still holds."""
        h = self.host
        remap_removed(h.meta, h.place_one, h.propose, h.server_name, self._remapped, now)

    def applied_forget(self, op: MetaOp, replay: bool) -> None:
        """The ``forget`` entry that ends a SERVER.REMOVE applied here: the server that
        proposed it answers."""
        h = self.host
        name = str(op.doc.get("name"))
        reply = op.doc.get("reply")
        if name == h.server_name:
            log.error("JetStream cluster: this server was removed from the cluster")
        if not replay and op.doc.get("origin") == h.server_name and isinstance(reply, str):
            h.reply_system(reply, RTYPE, {"success": True})

    def _leader_group(self, reply: bytes | None) -> RaftGroup | None:
        h = self.host
        return h.group if reply and h.is_leader() else None

    def _on_stepdown(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        """The meta leader hands leadership to the most caught-up live member (or to the
        one ``placement.preferred`` names, among those carrying ``placement.tags``)."""
        g = self._leader_group(reply)
        if g is None or reply is None:
            return
        rtype = "meta_leader_stepdown_response"
        rep = reply.decode(errors="replace")
        try:
            target = self.host.stepdown_target(data)
        except ApiError as e:
            self.host.reply_system(rep, rtype, {"error": e.to_json()})
            return
        g.node.transfer_leader(target)
        self.host.raft.kick()
        self.host.reply_system(rep, rtype, {"success": True})

    def _on_remove(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        g = self._leader_group(reply)
        if g is None or reply is None:
            return
        h = self.host
        rep = reply.decode(errors="replace")
        try:
            name = remove_server(h.meta, g, h.name_of, data)
        except ApiError as e:
            h.reply_system(rep, RTYPE, {"error": e.to_json()})
            return
        h.propose(encode_op("forget", name=name, reply=rep, origin=h.server_name))
        h.raft.kick()

    def _on_evacuate(
        self, sub: Subscription, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        g = self._leader_group(reply)
        if g is None or reply is None:
            return
        h = self.host
        rep = reply.decode(errors="replace")
        try:
            name = find_member(h.meta, g, h.name_of, data)
            moved = evacuate_server(h.meta, name, h.place_one)
            for a in moved:
                if not h.propose(remap_op(a, a.peers, h.server_name)):
                    raise E.JSClusterNotAvailErr()
                # not remapped again by remap_removed while this entry is in flight
                self._remapped[(a.account, a.name)] = h.clock.monotonic()
        except ApiError as e:
            h.reply_system(rep, RTYPE, {"error": e.to_json()})
            return
        h.raft.kick()
        h.reply_system(rep, RTYPE, {"success": True})
