"""The meta group's state machine: which servers exist and where every stream lives.

Design-clustering §4.4. Every JetStream server of the cluster is a voter of one Raft group
(``META_GROUP``); its committed entries are the operations below, applied in the same order
on every server, so every server holds the same ``MetaState``. The state is plain data: the
JetStream side (``jetstream/cluster/driver.py``) proposes the operations and acts on what an
applied one changed (creates the stream it was assigned, answers the request).

Operations (one JSON object per entry; the field ``op`` names it):

- ``server``: ``{"name", "tags", "max_memory", "max_store"}`` -- a server's row in the server
  table (its placement inputs), proposed by the server itself when its row is missing or
  stale.
- ``stream``: ``{"account", "config", "created", "peers", "reply", "origin"}`` -- assign a new
  stream to ``peers`` (server names; one for R1), or update an assigned one's config (same
  peers). ``config`` is the stream config as nats-server's JSON.
  With ``restore`` (a server name) it is a stream restored from a backup that server
  holds: the assignment is ``restoring`` until a ``restored`` entry says the server has
  built it (``jetstream/cluster/restore.py``); a ``restore`` entry for a name that is
  assigned already is skipped.
- ``restored``: ``{"account", "stream", "created"}`` -- the restoring server built the
  stream from its backup; the other replicas may now join it.
- ``delete``: ``{"account", "stream", "reply", "origin"}`` -- the stream is gone.
- ``forget``: ``{"name", "reply", "origin"}`` -- a server removed from the cluster.
- ``noop``: ``{"origin", "barrier"}`` -- changes nothing. A server whose meta records were
  damaged proposes one, and trusts its meta state again once it applies it: everything
  committed before (all it had ever applied among it) has been applied by then
  (``jetstream/cluster/driver.py``).

``reply`` is the API reply subject of the request that led to the entry and ``origin`` the
server that proposed it; they let the server that must answer do so once the entry applies.

Placement (``place``) is pure too: the meta leader calls it with the servers it sees alive.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

__all__ = [
    "META_GROUP",
    "MetaError",
    "MetaOp",
    "MetaState",
    "NoPeers",
    "ServerRow",
    "StreamAssignment",
    "decode_op",
    "encode_op",
    "place",
]

META_GROUP: Final = b"_meta_"


class MetaError(ValueError):
    """An entry that does not decode as a meta operation (a peer is untrusted: skipped)."""


class NoPeers(Exception):
    """Placement found fewer eligible servers than replicas (nats-server's 10005)."""


@dataclass(slots=True)
class ServerRow:
    name: str
    tags: list[str] = field(default_factory=list)
    max_memory: int = -1
    max_store: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tags": self.tags,
            "max_memory": self.max_memory,
            "max_store": self.max_store,
        }


@dataclass(slots=True)
class StreamAssignment:
    account: str
    name: str
    config: dict[str, Any]
    created: int
    peers: list[str]
    # a stream restored from a backup: the server that built it (the founder of its group;
    # the other replicas join it), and whether it is still building it
    restore: str = ""
    restoring: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "account": self.account,
            "config": self.config,
            "created": self.created,
            "peers": self.peers,
        }
        if self.restore:
            out["restore"] = self.restore
            out["restoring"] = self.restoring
        return out


@dataclass(slots=True)
class MetaOp:
    """One decoded entry, and what applying it did (``previous``: the assignment an update
    or delete replaced; None for a new stream)."""

    op: str
    doc: dict[str, Any]
    assignment: StreamAssignment | None = None
    previous: StreamAssignment | None = None

    @property
    def reply(self) -> str:
        r = self.doc.get("reply")
        return r if isinstance(r, str) else ""

    @property
    def origin(self) -> str:
        o = self.doc.get("origin")
        return o if isinstance(o, str) else ""


def encode_op(op: str, **fields: Any) -> bytes:
    doc = {"op": op}
    doc.update(fields)
    return orjson.dumps(doc)


def _str(doc: dict[str, Any], key: str) -> str:
    v = doc.get(key)
    if not isinstance(v, str) or not v:
        raise MetaError(f"meta entry without {key}")
    return v


def _int(doc: dict[str, Any], key: str, default: int) -> int:
    v = doc.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool):
        raise MetaError(f"meta entry with a bad {key}")
    return v


def _strs(doc: dict[str, Any], key: str) -> list[str]:
    v = doc.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise MetaError(f"meta entry with a bad {key}")
    return list(v)


def decode_op(data: bytes) -> MetaOp:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise MetaError(f"meta entry is not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise MetaError("meta entry is not an object")
    op = doc.get("op")
    if op not in ("server", "stream", "restored", "delete", "forget", "noop"):
        raise MetaError(f"unknown meta operation {op!r}")
    return MetaOp(op, doc)


class MetaState:
    """The servers and the stream assignments, as the applied entries left them."""

    def __init__(self) -> None:
        self.servers: dict[str, ServerRow] = {}
        # account -> stream name -> assignment
        self.streams: dict[str, dict[str, StreamAssignment]] = {}
        self.applied = 0  # the Raft index of the last entry applied
        # servers removed from the cluster ($JS.API.SERVER.REMOVE): never placed again
        self.removed: set[str] = set()

    # ---------------------------------------------------------------- queries
    def stream(self, account: str, name: str) -> StreamAssignment | None:
        return self.streams.get(account, {}).get(name)

    def account_streams(self, account: str) -> list[StreamAssignment]:
        return sorted(self.streams.get(account, {}).values(), key=lambda a: a.name)

    def placed_on(self, server: str) -> list[StreamAssignment]:
        return [a for acc in self.streams.values() for a in acc.values() if server in a.peers]

    # ---------------------------------------------------------------- apply
    def apply(self, index: int, data: bytes) -> MetaOp:
        """Apply one committed entry; MetaError for one that does not decode or does not
        fit the state (it changes nothing: every server skips it the same way)."""
        op = decode_op(data)
        doc = op.doc
        if op.op == "noop":
            pass
        elif op.op == "forget":
            name = _str(doc, "name")
            self.servers.pop(name, None)
            self.removed.add(name)
        elif op.op == "server":
            name = _str(doc, "name")
            if name in self.removed:
                raise MetaError(f"server {name} was removed from the cluster")
            self.servers[name] = ServerRow(
                name,
                _strs(doc, "tags"),
                _int(doc, "max_memory", -1),
                _int(doc, "max_store", -1),
            )
        elif op.op == "stream":
            account = _str(doc, "account")
            cfg = doc.get("config")
            if not isinstance(cfg, dict) or not isinstance(cfg.get("name"), str):
                raise MetaError("stream entry without a config name")
            peers = _strs(doc, "peers")
            if not peers:
                raise MetaError("stream entry without peers")
            name = cfg["name"]
            prev = self.stream(account, name)
            restore = doc.get("restore", "")
            if not isinstance(restore, str):
                raise MetaError("meta entry with a bad restore")
            if restore and prev is not None:
                raise MetaError(f"restore of {account}/{name}, which exists")
            if prev is not None and prev.restoring:
                raise MetaError(f"update of {account}/{name}, which is being restored")
            created = prev.created if prev is not None else _int(doc, "created", 0)
            # an update keeps the peers, unless it is a peer change (STREAM.PEER.REMOVE)
            remap = doc.get("remap") is True
            keep = prev is not None and not remap
            now = prev.peers if keep and prev is not None else peers
            if prev is not None:
                # (the founder matters to a replica that finds no group in its log: after a
                # move the peers are others)
                restore = "" if remap else prev.restore
            a = StreamAssignment(account, name, cfg, created, now, restore, bool(restore)
                                 and prev is None)  # fmt: skip
            self.streams.setdefault(account, {})[name] = a
            op.assignment, op.previous = a, prev
        elif op.op == "restored":
            account, name = _str(doc, "account"), _str(doc, "stream")
            prev = self.stream(account, name)
            if prev is None or not prev.restoring or prev.created != _int(doc, "created", 0):
                raise MetaError(f"restored {account}/{name}, which is not being restored")
            a = StreamAssignment(account, name, prev.config, prev.created, prev.peers,
                                 prev.restore, False)  # fmt: skip
            self.streams[account][name] = a
            op.assignment, op.previous = a, prev
        else:
            account, name = _str(doc, "account"), _str(doc, "stream")
            prev = self.streams.get(account, {}).pop(name, None)
            if prev is None:
                raise MetaError(f"delete of unknown stream {account}/{name}")
            if not self.streams[account]:
                del self.streams[account]
            op.previous = prev
        self.applied = index
        return op

    # ---------------------------------------------------------------- snapshot
    def snapshot(self) -> bytes:
        return orjson.dumps(
            {
                "servers": [s.to_json() for s in self.servers.values()],
                "streams": [a.to_json() for acc in self.streams.values() for a in acc.values()],
                "applied": self.applied,
                "removed": sorted(self.removed),
            }
        )

    @classmethod
    def from_snapshot(cls, data: bytes) -> MetaState:
        st = cls()
        doc = orjson.loads(data)
        for s in doc.get("servers", []):
            st.servers[s["name"]] = ServerRow(
                s["name"], list(s.get("tags", [])), s.get("max_memory", -1), s.get("max_store", -1)
            )
        for a in doc.get("streams", []):
            st.streams.setdefault(a["account"], {})[a["config"]["name"]] = StreamAssignment(
                a["account"], a["config"]["name"], a["config"], a["created"], list(a["peers"]),
                str(a.get("restore", "")), bool(a.get("restoring", False)),
            )  # fmt: skip
        st.applied = int(doc.get("applied", 0))
        st.removed = {str(n) for n in doc.get("removed", [])}
        return st


class PendingPlacements:
    """Streams the meta leader placed whose entries have not applied yet. ``place`` counts
    them as placed: four creates in flight at once otherwise all saw the same counts and
    went to one server. An entry that never applies (a lost proposal) expires."""

    TTL: Final = 10.0

    def __init__(self) -> None:
        self._by: dict[tuple[str, str], tuple[list[str], float]] = {}

    def add(self, account: str, name: str, peers: list[str], now: float) -> None:
        self._by[(account, name)] = (peers, now)

    def done(self, account: str, name: str) -> None:
        self._by.pop((account, name), None)

    def peers(self, now: float) -> list[str]:
        """Every server a pending stream goes to, once per stream."""
        for key in [k for k, (_, t) in self._by.items() if now - t > self.TTL]:
            del self._by[key]
        return [p for peers, _ in self._by.values() for p in peers]


def place(
    state: MetaState,
    alive: Iterable[str],
    replicas: int,
    tags: list[str],
    reserve: Callable[[str], bool],
    rng: random.Random | None = None,
    prefer: str = "",
    pending: Iterable[str] = (),
) -> list[str]:
    """The ``replicas`` servers a new stream goes to, as nats-server's ``selectPeerGroup``
    filters them: among the servers of the server table that are ``alive``, carry every
    tag of ``tags`` and none of its ``!tag`` exclusions (compared without case), and for
    which ``reserve`` says there is room, the ones holding the fewest streams (ties broken
    at random, so equal servers share the load, except that ``prefer`` -- the server the
    requesting client is on -- comes first among equals: its stream is then local to it).
    Too few raises NoPeers with nats-server's
    text ("no suitable peers for placement[, peer offline][, insufficient storage][, tags
    not matched ['t']][, tags excluded ['t']]")."""
    counts: dict[str, int] = {}
    for acc in state.streams.values():
        for a in acc.values():
            for p in a.peers:
                counts[p] = counts.get(p, 0) + 1
    for p in pending:
        counts[p] = counts.get(p, 0) + 1
    need = [t.lower() for t in tags if not t.startswith("!")]
    avoid = [t[1:].lower() for t in tags if t.startswith("!")]
    up = set(alive)
    offline = no_storage = False
    missing: dict[str, None] = {}
    excluded: dict[str, None] = {}
    eligible = []
    for name, row in state.servers.items():
        if name not in up:
            offline = True
            continue
        have = {t.lower() for t in row.tags}
        bad = next((t for t in avoid if t in have), None)
        if bad is not None:
            excluded[bad] = None
            continue
        lack = next((t for t in need if t not in have), None)
        if lack is not None:
            missing[lack] = None
            continue
        if not reserve(name):
            no_storage = True
            continue
        eligible.append(name)
    if len(eligible) < replicas:
        why = "no suitable peers for placement"
        if offline:
            why += ", peer offline"
        if no_storage:
            why += ", insufficient storage"
        if missing:
            why += ", tags not matched [" + ", ".join(f"'{t}'" for t in missing) + "]"
        if excluded:
            why += ", tags excluded [" + ", ".join(f"'{t}'" for t in excluded) + "]"
        raise NoPeers(why)
    r = rng or random
    r.shuffle(eligible)
    # stable: the shuffle breaks the remaining ties
    eligible.sort(key=lambda n: (counts.get(n, 0), n != prefer))
    return eligible[:replicas]
