"""The meta group's members: ``$JS.API.SERVER.REMOVE`` (a server leaves the JetStream
cluster for good), and the member ``META.LEADER.STEPDOWN`` hands over to.

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
changes (``cluster_membership``). An R1 stream on the removed server cannot move without it
and stays assigned there, reported.

The removed server, when it applies its own ``forget``, says so in its log; the meta group no
longer counts it and its proposals go nowhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import orjson

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import MetaState, NoPeers, StreamAssignment, encode_op
from natsd.core.goquote import go_quote
from natsd.jetstream.api.cluster_membership import in_config
from natsd.jetstream.wire import errors as E
from natsd.jetstream.wire.errors import ApiError
from natsd.raft.state import RaftError
from natsd.raft.types import ConfChangeSingle, ConfChangeType, ConfChangeV2

__all__ = [
    "PLACE_ALIVE",
    "RTYPE",
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


def remove_server(meta: MetaState, g: RaftGroup, name_of: Callable[[int], str], data: bytes) -> str:
    """Check a SERVER.REMOVE request on the meta leader and propose the configuration
    change that takes the server out of the meta group; returns the server's name (the
    caller then proposes the ``forget`` entry). ApiError with nats-server's error."""
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
    raft = g.node.raft
    if raft.pending_conf_index > raft.raft_log.applied or g.conf.voters_outgoing:
        raise E.JSClusterServerMemberChangeInflightErr()
    cc = ConfChangeV2(
        changes=[ConfChangeSingle(ConfChangeType.ConfChangeRemoveNode, raft_id(found))]
    )
    try:
        g.node.propose_conf_change(cc)
    except RaftError as e:
        raise E.JSClusterNotAvailErr() from e
    return found


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
            op = encode_op(
                "stream",
                account=a.account,
                config=a.config,
                peers=peers,
                remap=True,
                reply="",
                origin=origin,
            )
            if propose(op):
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
    me = g.node.raft.id
    prefer = str(pl.get("preferred") or "")
    if prefer:
        # nats-server's getStepDownPreferredPlacement errors
        members = {name_of(v) for v in g.node.raft.trk.progress}
        if prefer == server_name:
            raise E.JSClusterNoPeersErrF(
                err=f"preferred server {go_quote(prefer)} is already leader"
            )
        if prefer not in members:
            raise E.JSClusterNoPeersErrF(err=f"preferred server {go_quote(prefer)} not known")
    tags = {str(t).lower() for t in pl.get("tags") or []}
    cluster = pl.get("cluster") or ""
    best, best_match = 0, -1
    for vid, pr in g.node.raft.trk.progress.items():
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
        if pr.match > best_match:
            best, best_match = vid, pr.match
    if not best:
        raise E.JSClusterNoPeersErrF(err="no suitable peers for placement")
    return best


def removed_from(meta: MetaState, g: RaftGroup | None, server_name: str) -> bool:
    """Was this server removed from the cluster (it applied its own ``forget``, or a
    configuration of the meta group without it)?"""
    if server_name in meta.removed:
        return True
    return g is not None and bool(g.conf.voters) and not in_config(g, g.node.raft.id)
