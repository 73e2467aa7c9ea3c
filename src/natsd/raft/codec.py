"""Wire forms of the raft types: natsd's own compact Message codec, and the few protobuf forms
of etcd-io/raft v3.7.0 (Apache-2.0) that the core depends on: ``proto.Size`` of an Entry
(util.go's entsSize/limitSize) and the ConfChange / ConfChangeV2 bytes carried in log entries
(raftpb/confchange.go's MarshalConfChange, and proto.Unmarshal of them).

The Message codec (``encode_message`` / ``decode_message``) is not protobuf: a version byte,
then the message's structure as unsigned LEB128 varints (protobuf's varint) in a fixed order
with a flag byte saying which optional parts follow, then the byte payloads (entry data,
context, snapshot data) one after the other, in the order their lengths appear::

    message   = VERSION body payload*
    body      = type flags to from term log_term index commit vote reject_hint
                [count entry{count}]  (flags & ENTRIES, count >= 1)
                [len]                 (flags & CONTEXT, the context's length, >= 1)
                [snapshot]            (flags & SNAPSHOT)
                [count body{count}]   (flags & RESPONSES, count >= 1; nesting is bounded)
    entry     = type term index len
    snapshot  = index term confstate len
    confstate = flags (bit 0: auto_leave) voters learners voters_outgoing learners_next
                (each: count, then count varints)

``type`` and ``flags`` are one byte each (their values are below 128). Keeping the payloads
after the structure lets the encoder build all the small fields as one list of ints and join
the payloads once, and the decoder slice each payload once (a per-field ``bytearray`` append
is the slow part of an interleaved layout under mypyc).

Decoding is strict so that every accepted input is the one encoding of its message
(``encode_message(decode_message(b)) == b``): varints must be minimal and fit in 64 bits,
enums and flag bits must be known, optional parts are present exactly when non-empty, and
the payloads must fill the rest of the input exactly. Any malformed input raises
:class:`CodecError` and nothing else; counts and lengths are checked against the bytes left
before anything is built, so a short input cannot make the decoder allocate much.
"""

from __future__ import annotations

from typing import Final

from natsd.raft.types import (
    ConfChange,
    ConfChangeI,
    ConfChangeSingle,
    ConfChangeTransition,
    ConfChangeType,
    ConfChangeV2,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)

__all__ = [
    "MAX_RESPONSE_DEPTH",
    "VERSION",
    "CodecError",
    "ProtoError",
    "decode_conf_state",
    "decode_message",
    "encode_conf_state",
    "encode_message",
    "entry_size",
    "ents_size",
    "limit_size",
    "marshal_conf_change",
    "marshal_conf_change_v1",
    "marshal_conf_change_v2",
    "unmarshal_conf_change",
    "unmarshal_conf_change_v2",
]

VERSION: Final = 1
# Responses nest only one level in practice (a MsgStorageAppend carries its responses);
# the bound keeps a hostile input from recursing deeply.
MAX_RESPONSE_DEPTH: Final = 4

_MAX_U64: Final = 2**64 - 1

_F_REJECT: Final = 0x01
_F_ENTRIES: Final = 0x02
_F_CONTEXT: Final = 0x04
_F_SNAPSHOT: Final = 0x08
_F_RESPONSES: Final = 0x10
_F_ALL: Final = 0x1F

# Enum members by value: indexing a tuple is far cheaper than calling the IntEnum.
_MSG_TYPES: Final = tuple(MessageType)
_ENTRY_TYPES: Final = tuple(EntryType)
_CC_TYPES: Final = tuple(ConfChangeType)
_CC_TRANSITIONS: Final = tuple(ConfChangeTransition)


class CodecError(ValueError):
    """The bytes are not a well-formed encoding (or a value cannot be encoded)."""


class ProtoError(CodecError):
    """protobuf bytes that do not parse; the text is protobuf-go's, which DescribeEntry
    prints for a conf change entry whose data is corrupt."""

    def __init__(self, msg: str = "proto: cannot parse invalid wire-format data") -> None:
        super().__init__(msg)


# ---------------------------------------------------------------------------------------------
# Varints (protobuf's base-128 encoding, shared by both forms).


def _uvarint_size(v: int) -> int:
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def _put_uvarint(out: list[int], v: int) -> None:
    if 0 <= v < 0x80:  # the common one-byte case, before any comparison with a big int
        out.append(v)
        return
    if v < 0 or v > _MAX_U64:
        raise CodecError(f"value {v} does not fit in an unsigned 64-bit field")
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


class _Reader:
    """A cursor over the input; every read checks the bounds."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = end

    def u8(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise CodecError("truncated input")
        self.pos = pos + 1
        return self.buf[pos]

    def uvarint(self) -> int:
        buf = self.buf
        pos = self.pos
        end = self.end
        if pos < end:
            b = buf[pos]
            if b < 0x80:  # the common one-byte case
                self.pos = pos + 1
                return b
        v = 0
        shift = 0
        while True:
            if pos >= end:
                raise CodecError("truncated varint")
            b = buf[pos]
            pos += 1
            if shift == 63 and b > 1:
                raise CodecError("varint overflows 64 bits")
            v |= (b & 0x7F) << shift
            if b < 0x80:
                if b == 0 and shift > 0:
                    raise CodecError("non-minimal varint")
                self.pos = pos
                return v
            shift += 7

    def count(self, min_item: int) -> int:
        """A repeat count, refused when the items could not fit in what is left."""
        n = self.uvarint()
        if n * min_item > self.end - self.pos:
            raise CodecError("count larger than the input")
        return n


# ---------------------------------------------------------------------------------------------
# natsd's Message codec.


def encode_message(m: Message) -> bytes:
    """The wire form of ``m`` (see the module docstring). Raises CodecError for values that
    cannot be encoded (negative or wider than 64 bits)."""
    out: list[int] = [VERSION]
    # parts[0] becomes the structure; the non-empty payloads follow in order.
    parts: list[bytes] = [b""]
    _encode_body(out, parts, m, 0)
    try:
        parts[0] = bytes(out)
    except ValueError as exc:  # a message or entry type that is not an enum member
        raise CodecError(f"a type does not fit in a byte: {exc}") from exc
    return b"".join(parts)


def _encode_body(out: list[int], parts: list[bytes], m: Message, depth: int) -> None:
    if depth > MAX_RESPONSE_DEPTH:
        raise CodecError("responses nested too deeply")
    flags = 0
    if m.reject:
        flags |= _F_REJECT
    ents = m.entries
    if ents:
        flags |= _F_ENTRIES
    if m.context:
        flags |= _F_CONTEXT
    snap = m.snapshot
    if snap is not None:
        flags |= _F_SNAPSHOT
    if m.responses:
        flags |= _F_RESPONSES
    out.append(m.type)  # an IntEnum: bytes() takes it as the int it is
    out.append(flags)
    _put_uvarint(out, m.to)
    _put_uvarint(out, m.from_)
    _put_uvarint(out, m.term)
    _put_uvarint(out, m.log_term)
    _put_uvarint(out, m.index)
    _put_uvarint(out, m.commit)
    _put_uvarint(out, m.vote)
    _put_uvarint(out, m.reject_hint)
    if flags & _F_ENTRIES:
        _put_uvarint(out, len(ents))
        for e in ents:
            out.append(e.type)
            _put_uvarint(out, e.term)
            _put_uvarint(out, e.index)
            data = e.data
            _put_uvarint(out, len(data))
            if data:
                parts.append(data)
    if flags & _F_CONTEXT:
        _put_uvarint(out, len(m.context))
        parts.append(m.context)
    if snap is not None:
        md = snap.metadata
        _put_uvarint(out, md.index)
        _put_uvarint(out, md.term)
        _encode_conf_state(out, md.conf_state)
        _put_uvarint(out, len(snap.data))
        if snap.data:
            parts.append(snap.data)
    if flags & _F_RESPONSES:
        _put_uvarint(out, len(m.responses))
        for r in m.responses:
            _encode_body(out, parts, r, depth + 1)


def _encode_conf_state(out: list[int], cs: ConfState) -> None:
    out.append(1 if cs.auto_leave else 0)
    for ids in (cs.voters, cs.learners, cs.voters_outgoing, cs.learners_next):
        _put_uvarint(out, len(ids))
        for i in ids:
            _put_uvarint(out, i)


class _Payloads:
    """The payloads the structure announced, to be cut from the input's tail once the
    structure is read: the objects that receive them and their lengths."""

    __slots__ = ("lengths", "targets", "total")

    def __init__(self) -> None:
        self.targets: list[Entry | Message | Snapshot] = []
        self.lengths: list[int] = []
        self.total = 0

    def want(self, r: _Reader, target: Entry | Message | Snapshot, n: int) -> None:
        total = self.total + n
        if total > r.end - r.pos:
            raise CodecError("length past the end of the input")
        self.total = total
        if n:
            self.targets.append(target)
            self.lengths.append(n)


def decode_message(b: bytes | bytearray | memoryview) -> Message:
    """The Message encoded in ``b``; raises CodecError (only) if ``b`` is not exactly one
    well-formed encoding."""
    if isinstance(b, bytes):
        data = b
    elif isinstance(b, (bytearray, memoryview)):
        data = bytes(b)
    else:
        raise CodecError(f"not a byte string: {type(b).__name__}")
    if not data:
        raise CodecError("empty input")
    if data[0] != VERSION:
        raise CodecError(f"unknown codec version {data[0]}")
    r = _Reader(data, 1, len(data))
    p = _Payloads()
    m = _decode_body(r, p, 0)
    pos = r.pos
    left = r.end - pos
    if left != p.total:
        raise CodecError(f"{left - p.total} bytes after the message")
    lengths = p.lengths
    for k, target in enumerate(p.targets):
        n = lengths[k]
        chunk = data[pos : pos + n]
        pos += n
        if isinstance(target, Entry):
            target.data = chunk
        elif isinstance(target, Message):
            target.context = chunk
        else:
            target.data = chunk
    return m


# The fewest bytes an encoded part takes, for bounding counts by the input left.
_MIN_ENTRY: Final = 4  # type, term, index, data length
_MIN_BODY: Final = 10  # type, flags, eight one-byte varints


def _decode_body(r: _Reader, p: _Payloads, depth: int) -> Message:
    t = r.u8()
    if t >= len(_MSG_TYPES):
        raise CodecError(f"unknown message type {t}")
    flags = r.u8()
    if flags & ~_F_ALL:
        raise CodecError(f"unknown message flags {flags:#x}")
    m = Message(_MSG_TYPES[t])
    m.to = r.uvarint()
    m.from_ = r.uvarint()
    m.term = r.uvarint()
    m.log_term = r.uvarint()
    m.index = r.uvarint()
    m.commit = r.uvarint()
    m.vote = r.uvarint()
    m.reject_hint = r.uvarint()
    m.reject = bool(flags & _F_REJECT)
    if flags & _F_ENTRIES:
        n = r.count(_MIN_ENTRY)
        if n == 0:
            raise CodecError("entries flag with no entries")
        ents = m.entries
        for _ in range(n):
            et = r.u8()
            if et >= len(_ENTRY_TYPES):
                raise CodecError(f"unknown entry type {et}")
            e = Entry(r.uvarint(), r.uvarint(), _ENTRY_TYPES[et])
            p.want(r, e, r.uvarint())
            ents.append(e)
    if flags & _F_CONTEXT:
        n = r.uvarint()
        if n == 0:
            raise CodecError("context flag with an empty context")
        p.want(r, m, n)
    if flags & _F_SNAPSHOT:
        index = r.uvarint()
        term = r.uvarint()
        cs = _decode_conf_state(r)
        snap = Snapshot(b"", SnapshotMetadata(cs, index, term))
        p.want(r, snap, r.uvarint())
        m.snapshot = snap
    if flags & _F_RESPONSES:
        if depth >= MAX_RESPONSE_DEPTH:
            raise CodecError("responses nested too deeply")
        n = r.count(_MIN_BODY)
        if n == 0:
            raise CodecError("responses flag with no responses")
        for _ in range(n):
            m.responses.append(_decode_body(r, p, depth + 1))
    return m


def _decode_ids(r: _Reader) -> list[int]:
    n = r.count(1)
    return [r.uvarint() for _ in range(n)]


def encode_conf_state(cs: ConfState) -> bytes:
    """A ConfState alone in this codec's layout (what a snapshot record stores)."""
    out: list[int] = []
    _encode_conf_state(out, cs)
    return bytes(out)


def decode_conf_state(b: bytes) -> ConfState:
    """The inverse of ``encode_conf_state``; CodecError on anything else."""
    r = _Reader(bytes(b), 0, len(b))
    cs = _decode_conf_state(r)
    if r.pos != r.end:
        raise CodecError("trailing bytes after a conf state")
    return cs


def _decode_conf_state(r: _Reader) -> ConfState:
    f = r.u8()
    if f > 1:
        raise CodecError(f"unknown conf state flags {f:#x}")
    voters = _decode_ids(r)
    learners = _decode_ids(r)
    voters_outgoing = _decode_ids(r)
    learners_next = _decode_ids(r)
    return ConfState(voters, learners, voters_outgoing, learners_next, f == 1)


# ---------------------------------------------------------------------------------------------
# protobuf sizes (util.go): MaxSizePerMsg, MaxCommittedSizePerReady and the applying-size
# accounting count entries by their protobuf size, as upstream does.
#
# types.py keeps no field presence (a zero value is "unset"), so a field is counted when it
# is non-zero. Upstream counts a field that was set even to zero; in the core that differs
# only for the entry that replaces a refused conf change ({Type: EntryNormal}, 2 bytes more
# upstream) and for a proposal of an explicitly empty, non-nil payload.


def entry_size(e: Entry) -> int:
    """proto.Size of an Entry (fields: 1 type, 2 term, 3 index, 4 data)."""
    n = 0
    t = e.type
    if t:
        n += 2  # tag and a one-byte enum value
    term = e.term
    if term:
        n += 1 + (1 if term < 0x80 else _uvarint_size(term))
    index = e.index
    if index:
        n += 1 + (1 if index < 0x80 else _uvarint_size(index))
    ln = len(e.data)
    if ln:
        n += 1 + (1 if ln < 0x80 else _uvarint_size(ln)) + ln
    return n


def ents_size(ents: list[Entry]) -> int:
    """entsSize: the total protobuf size of the entries."""
    size = 0
    for e in ents:
        size += entry_size(e)
    return size


def limit_size(ents: list[Entry], max_size: int) -> list[Entry]:
    """limitSize: the longest prefix of ``ents`` whose total size does not exceed max_size,
    and at least the first entry when ents is not empty. Returns ``ents`` itself when the
    whole list fits (callers copy when they must not share it), else a new list."""
    n = len(ents)
    if n == 0:
        return ents
    size = entry_size(ents[0])
    for limit in range(1, n):
        size += entry_size(ents[limit])
        if size > max_size:
            return ents[:limit]
    return ents


# ---------------------------------------------------------------------------------------------
# ConfChange / ConfChangeV2 protobuf bytes (raft.proto): what a conf change entry carries.
#
# Upstream's conf changes built by the core and by the test environment always set the enum
# fields (even to 0) and the node ids, so those are always written; context and the v1 id
# are written when non-empty / non-zero, as an unset field would be.


def _put_tag(out: list[int], field: int, wire_type: int) -> None:
    out.append((field << 3) | wire_type)


def marshal_conf_change_v1(cc: ConfChange) -> bytes:
    """proto.Marshal(ConfChange): id = 1, type = 2, node_id = 3, context = 4."""
    out: list[int] = []
    if cc.id:
        _put_tag(out, 1, 0)
        _put_uvarint(out, cc.id)
    _put_tag(out, 2, 0)
    _put_uvarint(out, int(cc.type))
    _put_tag(out, 3, 0)
    _put_uvarint(out, cc.node_id)
    if cc.context:
        _put_tag(out, 4, 2)
        _put_uvarint(out, len(cc.context))
        out.extend(cc.context)
    return bytes(out)


def marshal_conf_change_v2(cc: ConfChangeV2) -> bytes:
    """proto.Marshal(ConfChangeV2): transition = 1, changes = 2 (type = 1, node_id = 2),
    context = 3."""
    out: list[int] = []
    _put_tag(out, 1, 0)
    _put_uvarint(out, int(cc.transition))
    for c in cc.changes:
        inner: list[int] = []
        _put_tag(inner, 1, 0)
        _put_uvarint(inner, int(c.type))
        _put_tag(inner, 2, 0)
        _put_uvarint(inner, c.node_id)
        _put_tag(out, 2, 2)
        _put_uvarint(out, len(inner))
        out.extend(inner)
    if cc.context:
        _put_tag(out, 3, 2)
        _put_uvarint(out, len(cc.context))
        out.extend(cc.context)
    return bytes(out)


def marshal_conf_change(c: ConfChangeI | None) -> tuple[EntryType, bytes]:
    """MarshalConfChange: the entry type and data for a conf change. None marshals to an
    empty ConfChangeV2 (no data), which no size limit can refuse."""
    if c is None:
        return EntryType.EntryConfChangeV2, b""
    if isinstance(c, ConfChange):
        return EntryType.EntryConfChange, marshal_conf_change_v1(c)
    return EntryType.EntryConfChangeV2, marshal_conf_change_v2(c.as_v2())


class _Field:
    """One protobuf field as read by _proto_fields: its number, wire type and value (an int
    for varints and fixed-width values, the bytes for length-delimited ones)."""

    __slots__ = ("num", "value", "wire")

    def __init__(self, num: int, wire: int, value: int | bytes) -> None:
        self.num = num
        self.wire = wire
        self.value = value


def _proto_varint(r: _Reader) -> int:
    # protobuf accepts non-minimal varints (up to ten bytes), unlike the Message codec.
    v = 0
    shift = 0
    while True:
        if r.pos >= r.end:
            raise ProtoError()
        b = r.buf[r.pos]
        r.pos += 1
        if shift == 63 and b > 1:
            raise ProtoError()  # past 64 bits
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v
        shift += 7


def _proto_skip_group(r: _Reader, num: int, depth: int) -> None:
    if depth > 64:
        raise ProtoError()
    while True:
        tag = _proto_varint(r)
        fnum, wire = tag >> 3, tag & 7
        if fnum < 1 or fnum > 0x1FFFFFFF:
            raise ProtoError()
        if wire == 4:
            if fnum != num:
                raise ProtoError()
            return
        _proto_skip_value(r, fnum, wire, depth + 1)


def _proto_skip_value(r: _Reader, num: int, wire: int, depth: int) -> int | bytes:
    if wire == 0:
        return _proto_varint(r)
    if wire == 1:
        return int.from_bytes(_proto_take(r, 8), "little")
    if wire == 2:
        return _proto_take(r, _proto_varint(r))
    if wire == 5:
        return int.from_bytes(_proto_take(r, 4), "little")
    if wire == 3:
        _proto_skip_group(r, num, depth)
        return b""
    raise ProtoError()  # 4 (an unmatched end group), 6 and 7


def _proto_take(r: _Reader, n: int) -> bytes:
    if n > r.end - r.pos:
        raise ProtoError()
    r.pos += n
    return r.buf[r.pos - n : r.pos]


def _proto_fields(data: bytes) -> list[_Field]:
    r = _Reader(data, 0, len(data))
    out: list[_Field] = []
    while r.pos < r.end:
        tag = _proto_varint(r)
        num, wire = tag >> 3, tag & 7
        if num < 1 or num > 0x1FFFFFFF:
            raise ProtoError()
        out.append(_Field(num, wire, _proto_skip_value(r, num, wire, 0)))
    return out


def unmarshal_conf_change(data: bytes) -> ConfChange:
    """proto.Unmarshal into a ConfChange. As protobuf-go does, a known field with another
    wire type and an enum value it does not know are kept aside as unknown fields (here:
    dropped), and only malformed bytes are an error (ProtoError)."""
    cc = ConfChange()
    for f in _proto_fields(data):
        v = f.value
        if f.wire == 0 and isinstance(v, int):
            if f.num == 1:
                cc.id = v
            elif f.num == 2 and v < len(_CC_TYPES):
                cc.type = _CC_TYPES[v]
            elif f.num == 3:
                cc.node_id = v
        elif f.wire == 2 and f.num == 4 and isinstance(v, bytes):
            cc.context = v
    return cc


def unmarshal_conf_change_v2(data: bytes) -> ConfChangeV2:
    """proto.Unmarshal into a ConfChangeV2 (see unmarshal_conf_change)."""
    cc = ConfChangeV2()
    for f in _proto_fields(data):
        v = f.value
        if f.wire == 0 and isinstance(v, int):
            if f.num == 1 and v < len(_CC_TRANSITIONS):
                cc.transition = _CC_TRANSITIONS[v]
        elif f.wire == 2 and isinstance(v, bytes):
            if f.num == 2:
                single = ConfChangeSingle()
                for g in _proto_fields(v):
                    w = g.value
                    if g.wire == 0 and isinstance(w, int):
                        if g.num == 1 and w < len(_CC_TYPES):
                            single.type = _CC_TYPES[w]
                        elif g.num == 2:
                            single.node_id = w
                cc.changes.append(single)
            elif f.num == 3:
                cc.context = v
    return cc
