"""A replicated stream's half of Raft: what its entries hold, and the leader's shadow.

Design-clustering §4.5. A stream with ``num_replicas`` > 1 has a Raft group over its peers
(the group itself is the cluster layer's: ``jetstream/api/cluster_streams.py``). Only the
group's leader subscribes to the stream's subjects. A publish is checked there, against the
leader's store, exactly as on a standalone server (``Stream.process``), and instead of being
stored it is proposed as a ``MSG`` entry carrying the sequence and timestamp the leader gave
it. Every replica stores the committed entries in log order (``Stream.apply_entry``) with
``store_raw``, so all stores end identical; the replica that proposed an entry sends its
PubAck once the entry is committed, that is, durable in the node logs of a majority.

The leader's shadow (``Replica``) is what makes checking before storing exact:

* ``clseq`` is the last sequence given out: the store's last sequence plus the entries in
  flight (proposed, not yet applied). A new leader takes publishes only once it has applied
  everything in its log up to its own first entry, so ``clseq`` starts from a store that
  holds every committed message.
* A publish whose checks read what an in-flight entry is about to change (an expected last
  sequence, subject sequence or message id; a message id that is itself in flight; a stream
  that discards new messages at its limits) waits, with every publish behind it, until
  nothing is in flight, and is then checked against the store. Plain publishes never wait.

Replaying a group after a restart applies entries again: an entry whose sequence the store
already holds is skipped, so applying is idempotent.

The log is kept short by ``COMPACT`` entries: the leader proposes one with the lowest index
every replica's log has reached, and each replica, once its store is synced, drops its log
up to there (no replica then ever needs a snapshot from the leader; one that was away holds
back compaction until it is back).

API requests that change the store (purge, message delete) go through the log as ``API``
entries holding the request itself: every replica runs the standalone handler on it in log
order, which gives every store the same result, and the replica that proposed it answers.

Entry formats (little endian), version 1. ``COMPACT`` (op 2) is ``u8 version, u8 op, u64
index``. ``API`` (op 3) is ``u8 version, u8 op, u64 proposer, u64 as_of, u16 len + subject,
u16 len + reply, u32 len + hdr (0xFFFFFFFF: none), request body (the rest)``; ``as_of`` is
the last sequence the leader had given out when it proposed the request: a store already
past it applied the request before a restart (a purge replayed on a store that holds later
messages would remove them too). ``MSG`` (op 1)::

    u8 version, u8 op, u64 proposer, u64 seq, i64 ts, i64 ttl,
    u16 len + subject, u16 len + reply, u32 len + hdr (0xFFFFFFFF: none),
    u16 len + msg id, u8 rollup (0 none, 1 sub, 2 all), data (the rest)

The durable consumers' entries (``jetstream/api/cluster_consumers``) are ``u8 version, u8
op, u64 proposer`` and then fields, each ``u32 len + bytes``: ``CONSUMER`` (op 4: name,
meta document, state document, reply, response) records a consumer the leader created or
updated; ``CSTATE`` (op 5: name, state document, then the ack-sync replies it confirms)
its delivered and acknowledged state.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ENTRY_VERSION",
    "OP_API",
    "OP_COMPACT",
    "OP_CONSUMER",
    "OP_CSTATE",
    "ApiEntry",
    "EntryError",
    "MsgEntry",
    "Replica",
    "Waiting",
    "compact_index",
    "decode_api",
    "decode_entry",
    "decode_fields",
    "encode_api",
    "encode_compact",
    "encode_fields",
    "encode_msg",
    "entry_op",
]

ENTRY_VERSION: Final = 1
OP_MSG: Final = 1
OP_COMPACT: Final = 2
OP_API: Final = 3
OP_CONSUMER: Final = 4
OP_CSTATE: Final = 5
_FIELDS_HEAD: Final = struct.Struct("<BBQ")
_API_HEAD: Final = struct.Struct("<BBQQ")
_COMPACT: Final = struct.Struct("<BBQ")
_HEAD: Final = struct.Struct("<BBQQqq")
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_NO_HDR: Final = 0xFFFFFFFF
ROLLUPS: Final = ("", "sub", "all")


class EntryError(ValueError):
    """An entry that does not decode (a bug or damage: the log is checksummed)."""


@dataclass(slots=True)
class MsgEntry:
    proposer: int
    seq: int
    ts: int
    ttl: int
    subject: str
    reply: bytes
    hdr: bytes | None
    msg_id: str
    rollup: str
    data: bytes


def encode_msg(
    proposer: int,
    seq: int,
    ts: int,
    ttl: int,
    subject: str,
    reply: bytes | None,
    hdr: bytes | None,
    msg_id: str,
    rollup: str,
    data: bytes,
) -> bytes:
    sb = subject.encode()
    rb = reply or b""
    ib = msg_id.encode()
    parts = [
        _HEAD.pack(ENTRY_VERSION, OP_MSG, proposer, seq, ts, ttl),
        _U16.pack(len(sb)),
        sb,
        _U16.pack(len(rb)),
        rb,
    ]
    if hdr is None:
        parts.append(_U32.pack(_NO_HDR))
    else:
        parts += [_U32.pack(len(hdr)), hdr]
    parts += [_U16.pack(len(ib)), ib, bytes([ROLLUPS.index(rollup)]), data]
    return b"".join(parts)


@dataclass(slots=True)
class ApiEntry:
    proposer: int
    as_of: int
    subject: bytes
    reply: bytes
    hdr: bytes | None
    data: bytes


def encode_api(
    proposer: int, as_of: int, subject: bytes, reply: bytes | None, hdr: bytes | None, data: bytes
) -> bytes:
    rb = reply or b""
    parts = [
        _API_HEAD.pack(ENTRY_VERSION, OP_API, proposer, as_of),
        _U16.pack(len(subject)),
        subject,
        _U16.pack(len(rb)),
        rb,
    ]
    parts += [_U32.pack(_NO_HDR)] if hdr is None else [_U32.pack(len(hdr)), hdr]
    parts.append(data)
    return b"".join(parts)


def entry_op(b: bytes) -> int:
    """The op of entry ``b`` (0 when it is not one this version writes)."""
    return b[1] if len(b) >= 2 and b[0] == ENTRY_VERSION else 0


def decode_api(b: bytes) -> ApiEntry:
    end = len(b)
    try:
        version, op, proposer, as_of = _API_HEAD.unpack_from(b, 0)
        if version != ENTRY_VERSION or op != OP_API:
            raise EntryError(f"unknown stream entry (version {version}, op {op})")
        pos = _API_HEAD.size
        (n,) = _U16.unpack_from(b, pos)
        subject, pos = b[pos + 2 : pos + 2 + n], pos + 2 + n
        (n,) = _U16.unpack_from(b, pos)
        reply, pos = b[pos + 2 : pos + 2 + n], pos + 2 + n
        (n,) = _U32.unpack_from(b, pos)
        pos += 4
        hdr: bytes | None = None
        if n != _NO_HDR:
            hdr, pos = b[pos : pos + n], pos + n
    except struct.error as e:
        raise EntryError(f"bad stream entry: {e}") from None
    if pos > end or not subject:
        raise EntryError("truncated stream entry")
    return ApiEntry(proposer, as_of, subject, reply, hdr, b[pos:])


def encode_fields(op: int, proposer: int, fields: list[bytes]) -> bytes:
    """An entry of ``op`` made of length-prefixed fields (the consumers' entries)."""
    parts = [_FIELDS_HEAD.pack(ENTRY_VERSION, op, proposer)]
    for f in fields:
        parts += [_U32.pack(len(f)), f]
    return b"".join(parts)


def decode_fields(b: bytes) -> tuple[int, int, list[bytes]]:
    """(op, proposer, fields) of an entry written by :func:`encode_fields`."""
    try:
        version, op, proposer = _FIELDS_HEAD.unpack_from(b, 0)
    except struct.error as e:
        raise EntryError(f"bad stream entry: {e}") from None
    if version != ENTRY_VERSION:
        raise EntryError(f"unknown stream entry (version {version}, op {op})")
    pos, end = _FIELDS_HEAD.size, len(b)
    fields: list[bytes] = []
    while pos < end:
        if pos + 4 > end:
            raise EntryError("truncated stream entry")
        (n,) = _U32.unpack_from(b, pos)
        pos += 4
        if pos + n > end:
            raise EntryError("truncated stream entry")
        fields.append(b[pos : pos + n])
        pos += n
    return op, proposer, fields


def encode_compact(index: int) -> bytes:
    return _COMPACT.pack(ENTRY_VERSION, OP_COMPACT, index)


def compact_index(b: bytes) -> int:
    """The index of a COMPACT entry; 0 when ``b`` is not one."""
    if len(b) != _COMPACT.size or b[0] != ENTRY_VERSION or b[1] != OP_COMPACT:
        return 0
    return int(_COMPACT.unpack(b)[2])


def decode_entry(b: bytes) -> MsgEntry:
    """The entry ``b``; EntryError when it is not one this version writes."""
    end = len(b)

    def span(pos: int, n: int) -> int:
        if pos + n > end:
            raise EntryError("truncated stream entry")
        return pos + n

    try:
        version, op, proposer, seq, ts, ttl = _HEAD.unpack_from(b, 0)
        if version != ENTRY_VERSION or op != OP_MSG:
            raise EntryError(f"unknown stream entry (version {version}, op {op})")
        pos = _HEAD.size
        (n,) = _U16.unpack_from(b, pos)
        nxt = span(pos + 2, n)
        subject = b[pos + 2 : nxt].decode()
        (n,) = _U16.unpack_from(b, nxt)
        pos, nxt = nxt + 2, span(nxt + 2, n)
        reply = b[pos:nxt]
        (n,) = _U32.unpack_from(b, nxt)
        pos = nxt + 4
        hdr: bytes | None = None
        if n != _NO_HDR:
            nxt = span(pos, n)
            hdr, pos = b[pos:nxt], nxt
        (n,) = _U16.unpack_from(b, pos)
        nxt = span(pos + 2, n)
        msg_id = b[pos + 2 : nxt].decode()
        span(nxt, 1)
        rollup = ROLLUPS[b[nxt]]
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise EntryError(f"bad stream entry: {e}") from None
    if seq <= 0:
        raise EntryError("stream entry without a sequence")
    return MsgEntry(proposer, seq, ts, ttl, subject, reply, hdr, msg_id, rollup, b[nxt + 1 :])


def _unwired(_entry: bytes) -> bool:
    return False


def _never() -> bool:
    return False


# A publish waiting for the in-flight entries to apply: (subject, reply, hdr, data).
Waiting = tuple[bytes, bytes | None, bytes | None, bytes]


class Replica:
    """The stream side of one replica: whether it leads (takes publishes), and as leader
    the shadow of what is in flight. The cluster layer flips ``leading`` and supplies
    ``propose`` (False: the engine dropped the proposal, e.g. leadership just moved)."""

    __slots__ = (
        "acks_through",
        "clseq",
        "handed",
        "inflight",
        "inflight_ids",
        "is_raft_leader",
        "leading",
        "node_id",
        "proposable",
        "propose",
        "transferring",
        "waiting",
    )

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.leading = False
        self.clseq = 0
        self.inflight = 0
        # Nats-Msg-Id -> sequence of the in-flight entry carrying it
        self.inflight_ids: dict[str, int] = {}
        self.waiting: deque[Waiting] = deque()
        # set by the cluster layer: proposes an entry to the group (False: dropped), and
        # whether the group still has this replica as its leader
        self.propose: Callable[[bytes], bool] = _unwired
        self.is_raft_leader: Callable[[], bool] = _never
        # the group is handing its leadership over (Raft takes no proposals meanwhile):
        # publishes wait, and go to the new leader (``handed``) if it takes over
        self.transferring: Callable[[], bool] = _never
        # both at once, on the publish path (one call per publish): Raft leader, and no
        # transfer under way
        self.proposable: Callable[[], bool] = _never
        # as a former leader: the entries it proposed up to this sequence may still commit,
        # and it sends their PubAcks when they do (the client waits for them)
        self.acks_through = 0
        # publishes that waited when leadership went: the cluster layer passes them on
        self.handed: list[Waiting] = []

    def lead(self, last_seq: int) -> None:
        """This replica leads from now on; its store holds every committed entry."""
        self.leading = True
        self.clseq = last_seq
        self.inflight = 0
        self.inflight_ids.clear()
        self.waiting.clear()

    def follow(self) -> None:
        """Leadership is gone: what was in flight may still commit (this replica sends
        those PubAcks when it applies them, ``acks_through``); what waited is handed over
        (``handed``: the cluster layer passes it on to the new leader)."""
        if self.leading:
            self.acks_through = max(self.acks_through, self.clseq)
        self.leading = False
        self.inflight = 0
        self.inflight_ids.clear()
        self.handed.extend(self.waiting)
        self.waiting.clear()

    def mine(self, proposer: int, seq: int, leading: bool) -> bool:
        """Does this replica answer the entry at ``seq`` that ``proposer`` proposed?"""
        return proposer == self.node_id and (leading or seq <= self.acks_through)

    def applied(self, seq: int, msg_id: str) -> None:
        """An entry this replica proposed as leader was applied."""
        if self.inflight:
            self.inflight -= 1
        if msg_id and self.inflight_ids.get(msg_id) == seq:
            del self.inflight_ids[msg_id]
        if seq > self.clseq:
            self.clseq = seq
