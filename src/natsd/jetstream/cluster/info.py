"""The cluster as clients see it, from the Raft state: the meta group as /jsz shows it
(``meta_cluster``), and a replicated stream's ``cluster`` block.

Split from the driver and cluster/streams.py: views computed on request, with no state of
their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from natsd.cluster.group import RaftGroup, peer_hash, raft_id
from natsd.cluster.meta import StreamAssignment
from natsd.core.clock import format_duration, rfc3339
from natsd.jetstream.cluster.replica import group_name
from natsd.raft.state import StateType

__all__ = [
    "ALIVE_FOR",
    "CURRENT_FOR",
    "OFFLINE_AFTER",
    "meta_cluster_info",
    "raft_group_label",
    "raftz_group",
    "stream_cluster_block",
]

# A replica not heard from for this long is not "current" in a stream's cluster block, and
# after OFFLINE_AFTER it shows as offline.
CURRENT_FOR: Final = 2.0
OFFLINE_AFTER: Final = 10.0

# A replica not heard from for this long shows as offline in /jsz.
ALIVE_FOR: Final = 10.0


def meta_cluster_info(
    g: RaftGroup | None,
    lead: str,
    cluster: str,
    me: int,
    is_leader: bool,
    last_heard: dict[int, float],
    name_of: Callable[[int], str],
    now: float,
) -> dict[str, Any]:
    """/jsz ``meta_cluster`` as nats-server shows it: ``peer`` is the leader's; the
    replicas are the other members as this server sees them (the leader knows each
    follower's progress; a follower knows when it last heard the leader and nothing
    of the other followers); without a leader every member is listed, self included.
    ``lead`` is the leader's name ("" for none), ``me`` this server's Raft id."""
    out: dict[str, Any] = {"name": cluster}
    if lead:
        out["leader"] = lead
        out["peer"] = peer_hash(lead)
    voters = list(g.conf.voters) if g is not None else []
    matches = g.node.matches() if g is not None and is_leader else {}
    last = g.node.last_index() if g is not None else 0
    replicas = []
    for vid in voters:
        name = name_of(vid)
        if not name or name == lead or (lead and vid == me):
            continue
        rep: dict[str, Any] = {"name": name}
        heard = last_heard.get(vid)
        ago = now - heard if heard is not None else None
        if vid == me:
            rep["current"], rep["active"] = True, 0
        elif matches:
            match = matches.get(vid)
            rep["current"] = match is not None and match >= last
            rep["active"] = int((ago or 0.0) * 1e9)
        else:
            # a follower's view of another follower: they do not talk
            rep["current"], rep["active"] = False, 0
        if ago is not None and ago > ALIVE_FOR and vid != me:
            rep["offline"] = True
        rep["peer"] = peer_hash(name)
        replicas.append(rep)
    if lead and g is not None and g.node.leader() != me:
        # on a follower the leader is a replica too, current while it is heard
        heard = last_heard.get(g.node.leader())
        ago = now - heard if heard is not None else ALIVE_FOR + 1
        replicas.append(
            {
                "name": lead,
                "current": ago <= ALIVE_FOR,
                "active": int(ago * 1e9),
                "peer": peer_hash(lead),
            }
        )
        replicas.sort(key=lambda r: str(r["name"]))
    if replicas:
        out["replicas"] = replicas
    out["cluster_size"] = len(voters)
    out["quorum_needed"] = len(voters) // 2 + 1 if voters else 0
    out["pending"] = 0
    out["pending_requests"] = 0
    out["pending_infos"] = 0
    out["snapshot"] = _snapshot_stats(g)
    return out


def _snapshot_stats(g: RaftGroup | None) -> dict[str, Any]:
    """Entries (and their bytes) the meta log holds beyond its last snapshot."""
    n = size = 0
    if g is not None:
        st = g.storage
        first, last = st.first_index(), st.last_index()
        if last >= first:
            ents = st.entries(first, last + 1, 1 << 62)
            n, size = len(ents), sum(len(e.data) for e in ents)
    return {"pending_entries": n, "pending_size": size, "last_time": "0001-01-01T00:00:00Z"}


def raft_group_label(a: StreamAssignment) -> str:
    """A stream's Raft group as clients see it (``S-R3F-<hash>``, nats-server's form)."""
    kind = "M" if a.config.get("storage") == "memory" else "F"
    return f"S-R{len(a.peers)}{kind}-{peer_hash(group_name(a).decode())}"


def stream_cluster_block(
    g: RaftGroup,
    a: StreamAssignment,
    cluster: str,
    me: int,
    traffic_account: str,
    leader_since: int,
    last_heard: dict[int, float],
    name_of: Callable[[int], str],
    now: float,
) -> dict[str, Any]:
    """The ``cluster`` block of a replicated stream's info, as nats-server shows it: the
    leader, and the other replicas with whether they are current and when they were last
    heard from (the leader knows its followers' progress)."""
    out: dict[str, Any] = {"name": cluster}
    out["raft_group"] = raft_group_label(a)
    node = g.node
    lead = node.leader()
    if lead:
        out["leader"] = name_of(lead)
        out["leader_since"] = rfc3339(leader_since)
    out["system_account"] = True
    out["traffic_account"] = traffic_account
    last = node.last_index()
    matches = node.matches()  # (the leader's view; empty on a follower)
    replicas = []
    for peer in a.peers:
        vid = raft_id(peer)
        if vid == lead:
            continue
        heard = last_heard.get(vid)
        ago = 0.0 if vid == me else (now - heard if heard is not None else None)
        match = matches.get(vid)
        current = (vid == me) or (
            ago is not None and ago <= CURRENT_FOR and (match is None or match >= last)
        )
        row: dict[str, Any] = {"name": peer, "current": current}
        row["active"] = int((ago if ago is not None else 0.0) * 1e9)
        if match is not None and last > match:
            row["lag"] = last - match
        if ago is None or ago > OFFLINE_AFTER:
            row["offline"] = True
        row["peer"] = peer_hash(peer)
        replicas.append(row)
    if replicas:
        out["replicas"] = replicas
    return out


# /raftz ``state`` as nats-server names its RaftState (a pre-candidate is campaigning too)
_RAFT_STATES: Final = {
    StateType.StateFollower: "FOLLOWER",
    StateType.StateCandidate: "CANDIDATE",
    StateType.StatePreCandidate: "CANDIDATE",
    StateType.StateLeader: "LEADER",
}


def raftz_group(
    g: RaftGroup,
    me: int,
    traffic_account: str,
    catching_up: bool,
    leader_since: int,
    last_heard: dict[int, float],
    name_of: Callable[[int], str],
    now: float,
) -> dict[str, Any]:
    """One group as nats-server's /raftz shows it (``RaftzGroup``): this node's role, term,
    vote, commit and apply positions, its log (``wal``: the entries it holds beyond its
    last snapshot) and the other members. ``last_replicated_index`` is known on the leader
    only, as in nats-server; nats-server's internal queue lengths (``ipq_*``) and its log
    entries' times (``wal.first_ts``/``last_ts``) have no counterpart here and are left
    out. ``leader_since``: ns since the epoch, 0 unknown."""
    node = g.node
    bs = node.basic_status()
    hs = bs.hard_state
    st = g.storage
    first, last = st.first_index(), st.last_index()
    ents = st.entries(first, last + 1, 1 << 62) if last >= first else []
    conf = g.conf
    voters = set(conf.voters)
    lead = node.leader()
    out: dict[str, Any] = {
        "id": peer_hash(name_of(me)),
        "state": _RAFT_STATES.get(bs.soft_state.raft_state, "FOLLOWER"),
        "size": len(voters),
        "quorum_needed": len(voters) // 2 + 1 if voters else 0,
    }
    if me not in voters and me in conf.learners:
        out["observer"] = True
    out["committed"] = hs.commit
    out["applied"] = g.applied
    if catching_up:
        out["catching_up"] = True
    if lead:
        out["leader"] = peer_hash(name_of(lead))
        if leader_since and lead == me:  # (nats-server's followers do not say)
            out["leader_since"] = rfc3339(leader_since)
    out["ever_had_leader"] = bool(lead) or bool(leader_since)
    out["term"] = hs.term
    if hs.vote:
        out["voted_for"] = peer_hash(name_of(hs.vote))
    out["pterm"] = st.term(last) if last else 0
    out["pindex"] = last
    out["system_account"] = True
    out["traffic_account"] = traffic_account
    out["wal"] = {
        "messages": len(ents),
        "bytes": sum(len(e.data) for e in ents),
        "first_seq": first if ents else last + 1,
        "last_seq": last,
        "consumer_count": 0,
    }
    leading = node.is_leader()
    matches = node.matches() if leading else {}
    peers: dict[str, Any] = {}
    for vid in sorted(voters | set(conf.learners)):
        if vid == me:
            continue
        name = name_of(vid)
        row: dict[str, Any] = {"name": name, "known": bool(name)}
        match = matches.get(vid)
        if match:
            row["last_replicated_index"] = match
        # a follower hears from its leader only (nats-server shows no time for the others)
        heard = last_heard.get(vid) if leading or vid == lead else None
        if heard is not None:
            row["last_seen"] = format_duration(max(0.0, now - heard))
        peers[peer_hash(name) if name else f"{vid:016x}"] = row
    out["peers"] = peers
    return out
