"""Typed unmarshal of a StreamConfigRequest with Go's rules (DisallowUnknownFields,
case-insensitive keys, first error wins).

Split out of stream_config.py; see that module for the overall flow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from natsd.jetstream.gojson import (
    _ARR,
    _BOOL,
    _KIND_NAMES,
    _NULL,
    _NUM,
    _OBJ,
    _STR,
    _go_quote,
    _GoJSONError,
    _Node,
)
from natsd.jetstream.stream_types import (  # noqa: F401
    Compression,
    ConsumerLimits,
    ExternalStream,
    PersistMode,
    Placement,
    RePublish,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamConsumerSource,
    StreamSource,
    SubjectTransformConfig,
    _zero_config,
)
from natsd.storage.store import DiscardPolicy

# ---------------------------------------------------------------- typed unmarshal (Go rules)
_TOP = "StreamConfigRequest"
_TOP_GO = "server.StreamConfigRequest"


@dataclass(slots=True)
class _Path:
    parts: tuple[str, ...] = ()
    last_is_index: bool = False

    def key(self, name: str) -> _Path:
        return _Path((*self.parts, name), False)

    def index(self, i: int) -> _Path:
        return _Path((*self.parts, str(i)), True)


def _type_error(node: _Node, go: str, path: _Path, numeric: bool = False) -> _GoJSONError:
    what = _KIND_NAMES[node.kind]
    if node.kind == _NUM and numeric:
        what = "number " + node.raw
    if not path.parts:
        return _GoJSONError(f"json: cannot unmarshal {what} into Go value of type {_TOP_GO}")
    where = _TOP + "." + ".".join(path.parts)
    if path.last_is_index:
        return _GoJSONError(f"json: cannot unmarshal {what} into {where} of type {go}")
    return _GoJSONError(f"json: cannot unmarshal {what} into Go struct field {where} of type {go}")


class _Type:
    go = ""

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        raise NotImplementedError


class _StrT(_Type):
    go = "string"

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _STR:
            return node.value
        if node.kind == _NULL:
            return cur
        raise _type_error(node, self.go, path)


class _BoolT(_Type):
    go = "bool"

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _BOOL:
            return node.value
        if node.kind == _NULL:
            return cur
        raise _type_error(node, self.go, path)


_INT_RE = re.compile(r"-?(?:0|[1-9][0-9]*)")


class _IntT(_Type):
    def __init__(self, go: str, lo: int, hi: int) -> None:
        self.go = go
        self.lo = lo
        self.hi = hi

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _NUM:
            lit: str = node.value
            if _INT_RE.fullmatch(lit):
                v = int(lit)
                if self.lo <= v <= self.hi:
                    return v
            raise _type_error(node, self.go, path, numeric=True)
        if node.kind == _NULL:
            return cur
        raise _type_error(node, self.go, path)


_I64 = (-(1 << 63), (1 << 63) - 1)
_INT = _IntT("int", *_I64)
_INT32 = _IntT("int32", -(1 << 31), (1 << 31) - 1)
_INT64 = _IntT("int64", *_I64)
_UINT64 = _IntT("uint64", 0, (1 << 64) - 1)
_DURATION = _IntT("time.Duration", *_I64)
_STRING = _StrT()
_BOOL_T = _BoolT()


class _ListT(_Type):
    def __init__(self, elem: _Type, go: str, zero: Callable[[], Any]) -> None:
        self.elem = elem
        self.go = go
        self.zero = zero

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _ARR:
            return [
                self.elem.decode(x, self.zero(), path.index(i)) for i, x in enumerate(node.value)
            ]
        if node.kind == _NULL:
            return []
        raise _type_error(node, self.go, path)


class _MapT(_Type):
    go = "map[string]string"

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _OBJ:
            out: dict[str, str] = dict(cur) if cur else {}
            for k, v in node.value:
                out[k] = _STRING.decode(v, "", path.key(k))
            return out
        if node.kind == _NULL:
            return {}
        raise _type_error(node, self.go, path)


class _StructT(_Type):
    """A Go struct decoded into a dataclass instance (fields matched exactly, then ignoring
    case; unknown fields are an error, as with ``DisallowUnknownFields``)."""

    def __init__(
        self,
        go: str,
        factory: Callable[[], Any],
        fields_: dict[str, tuple[str, _Type]],
        nullable: bool = False,
    ) -> None:
        self.go = go
        self.factory = factory
        self.fields = fields_
        self.folded = {k.lower(): k for k in fields_}
        self.nullable = nullable  # a Go pointer: null sets it to nil

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _NULL:
            return None if self.nullable else cur
        if node.kind != _OBJ:
            raise _type_error(node, self.go, path)
        obj = cur if cur is not None else self.factory()
        for key, val in node.value:
            name = key if key in self.fields else self.folded.get(key.lower())
            if name is None:
                raise _GoJSONError(f"json: unknown field {_go_quote(key)}")
            attr, typ = self.fields[name]
            setattr(obj, attr, typ.decode(val, getattr(obj, attr), path.key(name)))
        return obj


class _EnumT(_Type):
    """A Go type with its own UnmarshalJSON comparing the raw JSON text."""

    def __init__(self, parse: Callable[[_Node], Any]) -> None:
        self.parse = parse

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        return self.parse(node)


def _raw_enum(table: dict[str, Any], lower: bool = False) -> Callable[[_Node], Any]:
    def parse(node: _Node) -> Any:
        raw = node.raw.lower() if lower else node.raw
        v = table.get(raw)
        if v is None:
            raise _GoJSONError(f"can not unmarshal {_go_quote(node.raw)}")
        return v

    return parse


def _parse_compression(node: _Node) -> Compression:
    # StoreCompression.UnmarshalJSON: json.Unmarshal into a string, then a switch.
    if node.kind == _STR:
        s = node.value
    elif node.kind == _NULL:
        s = ""
    else:
        raise _GoJSONError(
            f"json: cannot unmarshal {_KIND_NAMES[node.kind]} into Go value of type string"
        )
    if s == "none":
        return Compression.NONE
    if s == "s2":
        return Compression.S2
    raise _GoJSONError("unknown compression algorithm")


_RFC3339 = "2006-01-02T15:04:05Z07:00"
_TIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def _go_time_error(s: str) -> str:
    """Go's ``time.Parse(time.RFC3339, s)`` error (the common cases)."""
    head = f"parsing time {_go_quote(s)} as {_go_quote(_RFC3339)}"
    steps: list[tuple[str, str]] = [
        ("2006", r"\d{4}"),
        ("-", "-"),
        ("01", r"\d{2}"),
        ("-", "-"),
        ("02", r"\d{2}"),
        ("T", "T"),
        ("15", r"\d{2}"),
        (":", ":"),
        ("04", r"\d{2}"),
        (":", ":"),
        ("05", r"\d{2}(?:\.\d+)?"),
        ("Z07:00", r"Z|[+-]\d{2}:\d{2}"),
    ]
    rest = s
    for elem, pat in steps:
        m = re.match(pat, rest)
        if m is None:
            return f"{head}: cannot parse {_go_quote(rest)} as {_go_quote(elem)}"
        rest = rest[m.end() :]
    if rest:
        return f"{head}: extra text: {_go_quote(rest)}"
    return f"{head}: value out of range"


def _normalise_time(s: str) -> str | None:
    """RFC 3339 text as Go re-encodes a parsed ``time.Time`` (None if it does not parse)."""
    m = _TIME_RE.fullmatch(s)
    if m is None:
        return None
    _year, mon, day, hh, mm, ss = (int(m.group(i)) for i in range(1, 7))
    if not (1 <= mon <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60 and ss < 60):
        return None
    frac = (m.group(7) or "").rstrip("0")
    if frac == ".":
        frac = ""
    zone = m.group(8)
    if zone in ("+00:00", "-00:00"):
        zone = "Z"
    return (
        f"{m.group(1)}-{m.group(2)}-{m.group(3)}T{m.group(4)}:{m.group(5)}:{m.group(6)}{frac}{zone}"
    )


class _TimeT(_Type):
    go = "time.Time"

    def decode(self, node: _Node, cur: Any, path: _Path) -> Any:
        if node.kind == _NULL:
            return None
        if node.kind != _STR:
            raise _type_error(node, self.go, path)
        t = _normalise_time(node.value)
        if t is None:
            raise _GoJSONError(_go_time_error(node.value))
        return t


def _schema() -> _StructT:
    transform = _StructT(
        "server.SubjectTransformConfig",
        SubjectTransformConfig,
        {"src": ("src", _STRING), "dest": ("dest", _STRING)},
        nullable=True,
    )
    transform_elem = _StructT(
        "server.SubjectTransformConfig",
        SubjectTransformConfig,
        {"src": ("src", _STRING), "dest": ("dest", _STRING)},
    )
    external = _StructT(
        "server.ExternalStream",
        ExternalStream,
        {"api": ("api", _STRING), "deliver": ("deliver", _STRING)},
        nullable=True,
    )
    consumer = _StructT(
        "server.StreamConsumerSource",
        StreamConsumerSource,
        {"name": ("name", _STRING), "deliver_subject": ("deliver_subject", _STRING)},
        nullable=True,
    )
    source_fields: dict[str, tuple[str, _Type]] = {
        "name": ("name", _STRING),
        "opt_start_seq": ("opt_start_seq", _UINT64),
        "opt_start_time": ("opt_start_time", _TimeT()),
        "filter_subject": ("filter_subject", _STRING),
        "subject_transforms": (
            "subject_transforms",
            _ListT(transform_elem, "[]server.SubjectTransformConfig", SubjectTransformConfig),
        ),
        "external": ("external", external),
        "consumer": ("consumer", consumer),
    }
    source = _StructT("server.StreamSource", StreamSource, source_fields, nullable=True)
    # []*StreamSource: a null element is a nil pointer; it fails validation like a bad name.
    source_elem = _StructT("server.StreamSource", StreamSource, source_fields)
    placement = _StructT(
        "server.Placement",
        Placement,
        {
            "cluster": ("cluster", _STRING),
            "tags": ("tags", _ListT(_STRING, "[]string", str)),
            "preferred": ("preferred", _STRING),
        },
        nullable=True,
    )
    republish = _StructT(
        "server.RePublish",
        RePublish,
        {
            "src": ("src", _STRING),
            "dest": ("dest", _STRING),
            "headers_only": ("headers_only", _BOOL_T),
        },
        nullable=True,
    )
    limits = _StructT(
        "server.StreamConsumerLimits",
        ConsumerLimits,
        {
            "inactive_threshold": ("inactive_threshold", _DURATION),
            "max_ack_pending": ("max_ack_pending", _INT),
        },
    )
    f: dict[str, tuple[str, _Type]] = {
        "name": ("name", _STRING),
        "description": ("description", _STRING),
        "subjects": ("subjects", _ListT(_STRING, "[]string", str)),
        "retention": (
            "retention",
            _EnumT(
                _raw_enum(
                    {
                        '"limits"': RetentionPolicy.LIMITS,
                        '"interest"': RetentionPolicy.INTEREST,
                        '"workqueue"': RetentionPolicy.WORKQUEUE,
                    }
                )
            ),
        ),
        "max_consumers": ("max_consumers", _INT),
        "max_msgs": ("max_msgs", _INT64),
        "max_bytes": ("max_bytes", _INT64),
        "max_age": ("max_age", _DURATION),
        "max_msgs_per_subject": ("max_msgs_per_subject", _INT64),
        "max_msg_size": ("max_msg_size", _INT32),
        "discard": (
            "discard",
            _EnumT(_raw_enum({'"old"': DiscardPolicy.OLD, '"new"': DiscardPolicy.NEW}, lower=True)),
        ),
        "storage": (
            "storage",
            _EnumT(_raw_enum({'"file"': StorageType.FILE, '"memory"': StorageType.MEMORY})),
        ),
        "num_replicas": ("num_replicas", _INT),
        "no_ack": ("no_ack", _BOOL_T),
        "duplicate_window": ("duplicate_window", _DURATION),
        "placement": ("placement", placement),
        "mirror": ("mirror", source),
        "sources": ("sources", _ListT(source_elem, "[]*server.StreamSource", StreamSource)),
        "compression": ("compression", _EnumT(_parse_compression)),
        "first_seq": ("first_seq", _UINT64),
        "subject_transform": ("subject_transform", transform),
        "republish": ("republish", republish),
        "allow_direct": ("allow_direct", _BOOL_T),
        "mirror_direct": ("mirror_direct", _BOOL_T),
        "discard_new_per_subject": ("discard_new_per_subject", _BOOL_T),
        "sealed": ("sealed", _BOOL_T),
        "deny_delete": ("deny_delete", _BOOL_T),
        "deny_purge": ("deny_purge", _BOOL_T),
        "allow_rollup_hdrs": ("allow_rollup_hdrs", _BOOL_T),
        "consumer_limits": ("consumer_limits", limits),
        "allow_msg_ttl": ("allow_msg_ttl", _BOOL_T),
        "subject_delete_marker_ttl": ("subject_delete_marker_ttl", _DURATION),
        "allow_msg_counter": ("allow_msg_counter", _BOOL_T),
        "allow_atomic": ("allow_atomic", _BOOL_T),
        "allow_msg_schedules": ("allow_msg_schedules", _BOOL_T),
        "persist_mode": (
            "persist_mode",
            _EnumT(
                _raw_enum(
                    {
                        '"default"': PersistMode.DEFAULT,
                        '""': PersistMode.DEFAULT,
                        '"async"': PersistMode.ASYNC,
                    }
                )
            ),
        ),
        "allow_batched": ("allow_batched", _BOOL_T),
        "metadata": ("metadata", _MapT()),
        "pedantic": ("pedantic", _BOOL_T),
    }
    return _StructT(_TOP_GO, _RequestView, f)


class _RequestView:
    """Routes attribute access of the decoder to the StreamConfig (and ``pedantic``)."""

    __slots__ = ("cfg", "pedantic")

    def __init__(self) -> None:
        object.__setattr__(self, "cfg", _zero_config())
        object.__setattr__(self, "pedantic", False)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "cfg"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "pedantic":
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "cfg"), name, value)


_SCHEMA = _schema()


def _decode_request(nodes: Iterator[_Node]) -> _RequestView:
    req = _RequestView()
    for node in nodes:
        _SCHEMA.decode(node, req, _Path())
    return req


# ============================================================================= subjects
