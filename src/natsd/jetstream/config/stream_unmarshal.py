"""The ``StreamConfigRequest`` schema for :mod:`gotyped` (Go's typed unmarshal, strict:
unknown fields are an error) and the decoder stream_config.py calls.

Split out of stream_config.py; see that module for the overall flow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from natsd.jetstream.config.stream_types import (
    Compression,
    ConsumerLimits,
    ExternalStream,
    PersistMode,
    Placement,
    RePublish,
    RetentionPolicy,
    StorageType,
    StreamConsumerSource,
    StreamSource,
    SubjectTransformConfig,
    _zero_config,
)
from natsd.jetstream.wire.gojson import _KIND_NAMES, _NULL, _STR, _GoJSONError, _Node
from natsd.jetstream.wire.gotyped import (
    BOOL,
    DURATION,
    INT,
    INT32,
    INT64,
    MAP,
    STRING,
    STRINGS,
    TIME,
    UINT64,
    EnumT,
    GoType,
    ListT,
    StructT,
    decode_nodes,
    raw_enum,
)
from natsd.storage.store import DiscardPolicy


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


def _schema() -> StructT:
    transform_fields: dict[str, tuple[str, GoType]] = {
        "src": ("src", STRING),
        "dest": ("dest", STRING),
    }
    transform = StructT(
        "server.SubjectTransformConfig", transform_fields, SubjectTransformConfig, nullable=True
    )
    transform_elem = StructT(
        "server.SubjectTransformConfig", transform_fields, SubjectTransformConfig
    )
    external = StructT(
        "server.ExternalStream",
        {"api": ("api", STRING), "deliver": ("deliver", STRING)},
        ExternalStream,
        nullable=True,
    )
    consumer = StructT(
        "server.StreamConsumerSource",
        {"name": ("name", STRING), "deliver_subject": ("deliver_subject", STRING)},
        StreamConsumerSource,
        nullable=True,
    )
    source_fields: dict[str, tuple[str, GoType]] = {
        "name": ("name", STRING),
        "opt_start_seq": ("opt_start_seq", UINT64),
        "opt_start_time": ("opt_start_time", TIME),
        "filter_subject": ("filter_subject", STRING),
        "subject_transforms": (
            "subject_transforms",
            ListT(transform_elem, "[]server.SubjectTransformConfig", SubjectTransformConfig),
        ),
        "external": ("external", external),
        "consumer": ("consumer", consumer),
    }
    source = StructT("server.StreamSource", source_fields, StreamSource, nullable=True)
    # []*StreamSource: a null element is a nil pointer; it fails validation like a bad name.
    source_elem = StructT("server.StreamSource", source_fields, StreamSource)
    placement = StructT(
        "server.Placement",
        {
            "cluster": ("cluster", STRING),
            "tags": ("tags", STRINGS),
            "preferred": ("preferred", STRING),
        },
        Placement,
        nullable=True,
    )
    republish = StructT(
        "server.RePublish",
        {
            "src": ("src", STRING),
            "dest": ("dest", STRING),
            "headers_only": ("headers_only", BOOL),
        },
        RePublish,
        nullable=True,
    )
    limits = StructT(
        "server.StreamConsumerLimits",
        {
            "inactive_threshold": ("inactive_threshold", DURATION),
            "max_ack_pending": ("max_ack_pending", INT),
        },
        ConsumerLimits,
    )
    retention = raw_enum(
        {
            '"limits"': RetentionPolicy.LIMITS,
            '"interest"': RetentionPolicy.INTEREST,
            '"workqueue"': RetentionPolicy.WORKQUEUE,
        }
    )
    discard = raw_enum({'"old"': DiscardPolicy.OLD, '"new"': DiscardPolicy.NEW}, lower=True)
    storage = raw_enum({'"file"': StorageType.FILE, '"memory"': StorageType.MEMORY})
    persist_mode = raw_enum(
        {'"default"': PersistMode.DEFAULT, '""': PersistMode.DEFAULT, '"async"': PersistMode.ASYNC}
    )
    f: dict[str, tuple[str, GoType]] = {
        "name": ("name", STRING),
        "description": ("description", STRING),
        "subjects": ("subjects", STRINGS),
        "retention": ("retention", retention),
        "max_consumers": ("max_consumers", INT),
        "max_msgs": ("max_msgs", INT64),
        "max_bytes": ("max_bytes", INT64),
        "max_age": ("max_age", DURATION),
        "max_msgs_per_subject": ("max_msgs_per_subject", INT64),
        "max_msg_size": ("max_msg_size", INT32),
        "discard": ("discard", discard),
        "storage": ("storage", storage),
        "num_replicas": ("num_replicas", INT),
        "no_ack": ("no_ack", BOOL),
        "duplicate_window": ("duplicate_window", DURATION),
        "placement": ("placement", placement),
        "mirror": ("mirror", source),
        "sources": ("sources", ListT(source_elem, "[]*server.StreamSource", StreamSource)),
        "compression": ("compression", EnumT(_parse_compression)),
        "first_seq": ("first_seq", UINT64),
        "subject_transform": ("subject_transform", transform),
        "republish": ("republish", republish),
        "allow_direct": ("allow_direct", BOOL),
        "mirror_direct": ("mirror_direct", BOOL),
        "discard_new_per_subject": ("discard_new_per_subject", BOOL),
        "sealed": ("sealed", BOOL),
        "deny_delete": ("deny_delete", BOOL),
        "deny_purge": ("deny_purge", BOOL),
        "allow_rollup_hdrs": ("allow_rollup_hdrs", BOOL),
        "consumer_limits": ("consumer_limits", limits),
        "allow_msg_ttl": ("allow_msg_ttl", BOOL),
        "subject_delete_marker_ttl": ("subject_delete_marker_ttl", DURATION),
        "allow_msg_counter": ("allow_msg_counter", BOOL),
        "allow_atomic": ("allow_atomic", BOOL),
        "allow_msg_schedules": ("allow_msg_schedules", BOOL),
        "persist_mode": ("persist_mode", persist_mode),
        "allow_batched": ("allow_batched", BOOL),
        "metadata": ("metadata", MAP),
        "pedantic": ("pedantic", BOOL),
    }
    return StructT("server.StreamConfigRequest", f, _RequestView)


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
    req: _RequestView = decode_nodes(nodes, _SCHEMA)
    return req


def _restore_schema() -> StructT:
    """``JSApiStreamRestoreRequest``: a ``StreamConfig`` (no ``pedantic``) and the state.
    The state is not read (natsd does not restore yet), so its fields are not checked."""
    config_fields = {k: v for k, v in _SCHEMA.fields.items() if k != "pedantic"}
    config = StructT("server.StreamConfig", config_fields, _zero_config)
    state = StructT("server.StreamState", {}, dict, strict=False)
    return StructT(
        "server.JSApiStreamRestoreRequest",
        {"config": ("config", config), "state": ("state", state)},
        lambda: {"config": _zero_config(), "state": {}},
    )


RESTORE_SCHEMA = _restore_schema()
