"""A replicated stream's log entries: every operation its group commits, typed, encoded
and decoded here and nowhere else (design-clustering §4.5).

The cluster layer (``jetstream/cluster/streams.py``) proposes these and applies each
committed one with plain calls on the stream and its consumers; no replica runs an API
request to apply an entry. Entries are what happened, with the request they answer kept
only so the replica that proposed one can answer and audit it.

Formats (little endian), version 1; every entry starts ``u8 version, u8 op``:

* ``MSG`` (op 1), a stored message, as the leader checked and sequenced it::

    u8 version, u8 op, u64 proposer, u64 seq, i64 ts, i64 ttl,
    u16 len + subject, u16 len + reply, u32 len + hdr (0xFFFFFFFF: none),
    u16 len + msg id, u8 rollup (0 none, 1 sub, 2 all), data (the rest)

* ``COMPACT`` (op 2): ``u64 index``, the log may be dropped up to there.
* ``CONSUMER`` (op 4): ``u64 proposer``, then fields (``u32 len + bytes``): name, meta
  document, state document, reply, response. A durable consumer the leader created or
  updated, with its config and state.
* ``CSTATE`` (op 5): ``u64 proposer``, fields: name, state document, then the ack-sync
  replies the state confirms.
* ``PURGE`` (op 6): ``u64 proposer, u64 as_of, u64 seq, u64 keep``, fields: request
  subject, reply, request body, filter subject.
* ``DELETE_MSG`` (op 7): ``u64 proposer, u64 as_of, u64 seq, u8 no_erase``, fields:
  request subject, reply, request body.
* ``DELETE_CONSUMER`` (op 8): ``u64 proposer, u64 as_of``, fields: request subject, reply,
  request body, consumer name.
* ``BATCH`` (op 9): ``u64 proposer``, fields: the batch id, then each message of an atomic
  batch as a ``MSG`` entry (consecutive sequences; the last carries the reply). One entry,
  so every replica stores the whole batch or none of it.

``as_of`` is the last sequence the leader had given out when it proposed the operation: a
store already past it applied the operation before a restart (a purge replayed on a store
that holds later messages would remove them too).

``API`` (op 3) is what the release before typed operations wrote for purges, message
deletes and consumer deletes: the raw API request (``u64 proposer, u64 as_of, u16 len +
subject, u16 len + reply, u32 len + hdr, body``). It is never written now; a log that still
holds one (an upgrade) decodes it into the typed operation it asked for
(:func:`decode_op`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import orjson

__all__ = [
    "ENTRY_VERSION",
    "OP_API",
    "OP_BATCH",
    "OP_COMPACT",
    "OP_CONSUMER",
    "OP_CSTATE",
    "OP_DELETE_CONSUMER",
    "OP_DELETE_MSG",
    "OP_MSG",
    "OP_PURGE",
    "DeleteConsumer",
    "DeleteMsg",
    "EntryError",
    "MsgEntry",
    "Purge",
    "Request",
    "StreamOp",
    "compact_index",
    "decode_batch",
    "decode_fields",
    "decode_msg",
    "decode_op",
    "encode_batch",
    "encode_compact",
    "encode_fields",
    "encode_msg",
    "encode_op",
    "entry_op",
]

ENTRY_VERSION: Final = 1
OP_MSG: Final = 1
OP_COMPACT: Final = 2
OP_API: Final = 3
OP_CONSUMER: Final = 4
OP_CSTATE: Final = 5
OP_PURGE: Final = 6
OP_DELETE_MSG: Final = 7
OP_DELETE_CONSUMER: Final = 8
OP_BATCH: Final = 9
_FIELDS_HEAD: Final = struct.Struct("<BBQ")
_OP_HEAD: Final = struct.Struct("<BBQQ")
_PURGE_NUMS: Final = struct.Struct("<QQ")
_DELETE_NUMS: Final = struct.Struct("<QB")
_COMPACT: Final = struct.Struct("<BBQ")
_HEAD: Final = struct.Struct("<BBQQqq")
_HEAD_SIZE: Final = 34  # _HEAD.size
_HEAD_SUBJECT: Final = struct.Struct("<BBQQqqH")  # the head and the subject's length
_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_NO_HDR: Final = 0xFFFFFFFF
ROLLUPS: Final = ("", "sub", "all")
_ROLLUP_CODES: Final = {r: i for i, r in enumerate(ROLLUPS)}
_ROLLUP_BYTES: Final = tuple(bytes([i]) for i in range(len(ROLLUPS)))
# no header (0xFFFFFFFF), an empty msg id, and the rollup code
_NO_HDR_NO_ID: Final = tuple(struct.pack("<IHB", 0xFFFFFFFF, 0, i) for i in range(len(ROLLUPS)))


class EntryError(ValueError):
    """An entry that does not decode (a bug or damage: the log is checksummed)."""


class MsgEntry:
    """A decoded MSG entry. A plain class, not a dataclass: compiled, a dataclass's
    generated ``__init__`` runs interpreted and sets each field through a descriptor, which
    cost a replica more than the rest of the decoding (once per replicated message)."""

    __slots__ = (
        "data",
        "hdr",
        "msg_id",
        "proposer",
        "reply",
        "rollup",
        "seq",
        "subject",
        "ts",
        "ttl",
    )

    def __init__(
        self,
        proposer: int,
        seq: int,
        ts: int,
        ttl: int,
        subject: str,
        reply: bytes,
        hdr: bytes | None,
        msg_id: str,
        rollup: str,
        data: bytes,
    ) -> None:
        self.proposer = proposer
        self.seq = seq
        self.ts = ts
        self.ttl = ttl
        self.subject = subject
        self.reply = reply
        self.hdr = hdr
        self.msg_id = msg_id
        self.rollup = rollup
        self.data = data


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
    code = _ROLLUP_CODES[rollup]
    head = _HEAD_SUBJECT.pack(ENTRY_VERSION, OP_MSG, proposer, seq, ts, ttl, len(sb))
    if hdr is None and not msg_id:
        # the common case: the packed parts after the reply are constants
        return b"".join((head, sb, _U16.pack(len(rb)), rb, _NO_HDR_NO_ID[code], data))
    ib = msg_id.encode()
    hdr_part = _U32.pack(_NO_HDR) if hdr is None else _U32.pack(len(hdr)) + hdr
    return b"".join(
        (
            head,
            sb,
            _U16.pack(len(rb)),
            rb,
            hdr_part,
            _U16.pack(len(ib)),
            ib,
            _ROLLUP_BYTES[code],
            data,
        )
    )


def entry_op(b: bytes) -> int:
    """The op of entry ``b`` (0 when it is not one this version writes)."""
    return b[1] if len(b) >= 2 and b[0] == ENTRY_VERSION else 0


def encode_fields(op: int, proposer: int, fields: list[bytes]) -> bytes:
    """An entry of ``op`` made of length-prefixed fields (the consumers' entries)."""
    return b"".join([_FIELDS_HEAD.pack(ENTRY_VERSION, op, proposer), *_pack_fields(fields)])


def decode_fields(b: bytes) -> tuple[int, int, list[bytes]]:
    """(op, proposer, fields) of an entry written by :func:`encode_fields`."""
    try:
        version, op, proposer = _FIELDS_HEAD.unpack_from(b, 0)
    except struct.error as e:
        raise EntryError(f"bad stream entry: {e}") from None
    if version != ENTRY_VERSION:
        raise EntryError(f"unknown stream entry (version {version}, op {op})")
    return op, proposer, _unpack_fields(b, _FIELDS_HEAD.size)


def encode_compact(index: int) -> bytes:
    return _COMPACT.pack(ENTRY_VERSION, OP_COMPACT, index)


def compact_index(b: bytes) -> int:
    """The index of a COMPACT entry; 0 when ``b`` is not one."""
    if len(b) != _COMPACT.size or b[0] != ENTRY_VERSION or b[1] != OP_COMPACT:
        return 0
    return int(_COMPACT.unpack(b)[2])


def _truncated() -> EntryError:
    return EntryError("truncated stream entry")


def decode_msg(b: bytes) -> MsgEntry:
    """The entry ``b``; EntryError when it is not one this version writes. Once per
    replicated message on every replica: the lengths are read byte by byte (native
    integers when compiled), with one bounds check per field."""
    try:
        version, op, proposer, seq, ts, ttl = _HEAD.unpack_from(b, 0)
    except struct.error as e:
        raise EntryError(f"bad stream entry: {e}") from None
    if version != ENTRY_VERSION or op != OP_MSG:
        raise EntryError(f"unknown stream entry (version {version}, op {op})")
    if seq <= 0:
        raise EntryError("stream entry without a sequence")
    end = len(b)
    pos = _HEAD_SIZE
    if pos + 2 > end:
        raise _truncated()
    nxt = pos + 2 + (b[pos] | b[pos + 1] << 8)
    if nxt + 2 > end:
        raise _truncated()
    subject_b = b[pos + 2 : nxt]
    pos = nxt + 2
    nxt = pos + (b[nxt] | b[nxt + 1] << 8)
    if nxt + 4 > end:
        raise _truncated()
    reply = b[pos:nxt]
    n = b[nxt] | b[nxt + 1] << 8 | b[nxt + 2] << 16 | b[nxt + 3] << 24
    pos = nxt + 4
    hdr: bytes | None = None
    if n != _NO_HDR:
        nxt = pos + n
        if nxt > end:
            raise _truncated()
        hdr = b[pos:nxt]
        pos = nxt
    if pos + 2 > end:
        raise _truncated()
    nxt = pos + 2 + (b[pos] | b[pos + 1] << 8)
    if nxt + 1 > end:
        raise _truncated()
    rollup = b[nxt]
    if rollup > 2:
        raise EntryError(f"bad stream entry: rollup {rollup}")
    try:
        subject = subject_b.decode()
        msg_id = b[pos + 2 : nxt].decode() if nxt > pos + 2 else ""
    except UnicodeDecodeError as e:
        raise EntryError(f"bad stream entry: {e}") from None
    return MsgEntry(
        proposer, seq, ts, ttl, subject, reply, hdr, msg_id, ROLLUPS[rollup], b[nxt + 1 :]
    )


# ---------------------------------------------------------------------- typed operations
@dataclass(slots=True, frozen=True)
class Request:
    """The API request an operation answers: only its proposer uses it (the answer and
    the audit advisory)."""

    subject: bytes
    reply: bytes
    body: bytes


@dataclass(slots=True, frozen=True)
class Purge:
    """Remove messages: all, or by ``filter`` subject, below ``seq``, or all but ``keep``
    (``Stream.purge``)."""

    proposer: int
    as_of: int
    request: Request
    filter: str
    seq: int
    keep: int


@dataclass(slots=True, frozen=True)
class DeleteMsg:
    """Remove message ``seq``, overwriting it unless ``no_erase``."""

    proposer: int
    as_of: int
    request: Request
    seq: int
    no_erase: bool


@dataclass(slots=True, frozen=True)
class DeleteConsumer:
    """Delete consumer ``name``."""

    proposer: int
    as_of: int
    request: Request
    name: str


StreamOp = Purge | DeleteMsg | DeleteConsumer


def _pack_fields(fields: list[bytes]) -> list[bytes]:
    parts: list[bytes] = []
    for f in fields:
        parts += [_U32.pack(len(f)), f]
    return parts


def _unpack_fields(b: bytes, pos: int) -> list[bytes]:
    end = len(b)
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
    return fields


def encode_op(op: StreamOp) -> bytes:
    r = op.request
    req = [r.subject, r.reply, r.body]
    if isinstance(op, Purge):
        head = _OP_HEAD.pack(ENTRY_VERSION, OP_PURGE, op.proposer, op.as_of)
        nums = _PURGE_NUMS.pack(op.seq, op.keep)
        return b"".join([head, nums, *_pack_fields([*req, op.filter.encode()])])
    if isinstance(op, DeleteMsg):
        head = _OP_HEAD.pack(ENTRY_VERSION, OP_DELETE_MSG, op.proposer, op.as_of)
        nums = _DELETE_NUMS.pack(op.seq, 1 if op.no_erase else 0)
        return b"".join([head, nums, *_pack_fields(req)])
    head = _OP_HEAD.pack(ENTRY_VERSION, OP_DELETE_CONSUMER, op.proposer, op.as_of)
    return b"".join([head, *_pack_fields([*req, op.name.encode()])])


def decode_op(b: bytes) -> StreamOp:
    """The typed operation of a ``PURGE``, ``DELETE_MSG`` or ``DELETE_CONSUMER`` entry, or
    of a legacy ``API`` entry; EntryError for anything else or damage."""
    try:
        version, op, proposer, as_of = _OP_HEAD.unpack_from(b, 0)
        if version != ENTRY_VERSION:
            raise EntryError(f"unknown stream entry (version {version}, op {op})")
        pos = _OP_HEAD.size
        if op == OP_PURGE:
            seq, keep = _PURGE_NUMS.unpack_from(b, pos)
            f = _unpack_fields(b, pos + _PURGE_NUMS.size)
            if len(f) != 4:
                raise EntryError(f"bad purge entry ({len(f)} fields)")
            return Purge(proposer, as_of, Request(f[0], f[1], f[2]), f[3].decode(), seq, keep)
        if op == OP_DELETE_MSG:
            seq, no_erase = _DELETE_NUMS.unpack_from(b, pos)
            f = _unpack_fields(b, pos + _DELETE_NUMS.size)
            if len(f) != 3:
                raise EntryError(f"bad message delete entry ({len(f)} fields)")
            return DeleteMsg(proposer, as_of, Request(f[0], f[1], f[2]), seq, bool(no_erase))
        if op == OP_DELETE_CONSUMER:
            f = _unpack_fields(b, pos)
            if len(f) != 4:
                raise EntryError(f"bad consumer delete entry ({len(f)} fields)")
            return DeleteConsumer(proposer, as_of, Request(f[0], f[1], f[2]), f[3].decode())
        if op == OP_API:
            return _legacy_api(b, proposer, as_of)
    except (struct.error, UnicodeDecodeError) as e:
        raise EntryError(f"bad stream entry: {e}") from None
    raise EntryError(f"unknown stream entry (version {version}, op {op})")


def _legacy_api(b: bytes, proposer: int, as_of: int) -> StreamOp:
    """A legacy ``API`` entry (module docstring) as the typed operation it asked for. The
    request was checked by the leader that proposed it, as the typed ones are; a body that
    does not decode asked for nothing the API would have done (EntryError)."""
    pos = _OP_HEAD.size
    (n,) = _U16.unpack_from(b, pos)
    subject, pos = b[pos + 2 : pos + 2 + n], pos + 2 + n
    (n,) = _U16.unpack_from(b, pos)
    reply, pos = b[pos + 2 : pos + 2 + n], pos + 2 + n
    (n,) = _U32.unpack_from(b, pos)
    pos += 4
    if n != _NO_HDR:
        pos += n
    if pos > len(b) or not subject:
        raise EntryError("truncated stream entry")
    body = b[pos:]
    request = Request(subject, reply, body)
    toks = subject.decode().split(".")
    verb = toks[2:] if len(toks) > 1 and toks[1] == "API" else toks[3:]
    try:
        doc = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError:
        raise EntryError("legacy API entry: request is not JSON") from None
    if not isinstance(doc, dict):
        doc = {}
    if verb[:2] == ["STREAM", "PURGE"]:
        filt, seq, keep = doc.get("filter", ""), doc.get("seq", 0), doc.get("keep", 0)
        ok = isinstance(filt, str) and isinstance(seq, int) and isinstance(keep, int)
        if ok and not (seq and keep):  # (both: a bad request, which changed nothing)
            return Purge(proposer, as_of, request, filt, max(seq, 0), max(keep, 0))
    elif verb[:3] == ["STREAM", "MSG", "DELETE"]:
        seq, no_erase = doc.get("seq", 0), doc.get("no_erase", False)
        if isinstance(seq, int) and seq > 0:
            return DeleteMsg(proposer, as_of, request, seq, bool(no_erase))
    elif verb[:2] == ["CONSUMER", "DELETE"] and len(verb) == 4:
        return DeleteConsumer(proposer, as_of, request, verb[3])
    raise EntryError(f"legacy API entry: {subject.decode()!r} is not an operation")


def encode_batch(proposer: int, batch_id: str, msgs: list[bytes]) -> bytes:
    """An atomic batch's one entry: its id and its ``MSG`` entries (``encode_msg``)."""
    return encode_fields(OP_BATCH, proposer, [batch_id.encode(), *msgs])


def decode_batch(b: bytes) -> tuple[str, list[MsgEntry]]:
    """The batch id and messages of a ``BATCH`` entry."""
    op, _proposer, fields = decode_fields(b)
    if op != OP_BATCH or not fields:
        raise EntryError("not a batch entry")
    return fields[0].decode(errors="replace"), [decode_msg(f) for f in fields[1:]]
