"""The JetStream policies are StrEnums: decoded to members, encoded as the same JSON strings.

The values are nats-server's (``DeliverPolicy``, ``AckPolicy``, ``ReplayPolicy``,
``PriorityPolicy`` in consumer.go; ``RetentionPolicy``, ``StorageType``, ``StoreCompression``,
``PersistModeType`` in stream.go / store.go): the JSON a client sends and reads.
"""

from __future__ import annotations

import json
from enum import StrEnum

import orjson
import pytest

from natsd.jetstream.config.consumer_config import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    PriorityPolicy,
    ReplayPolicy,
    config_from_stored,
    parse_create_request,
)
from natsd.jetstream.config.stream_config import parse_stream_config_json
from natsd.jetstream.config.stream_types import (
    Compression,
    PersistMode,
    RetentionPolicy,
    StorageType,
)

VALUES: list[tuple[type[StrEnum], set[str]]] = [
    (
        DeliverPolicy,
        {"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"},
    ),
    (AckPolicy, {"none", "all", "explicit", "flow_control"}),
    (ReplayPolicy, {"instant", "original"}),
    (PriorityPolicy, {"none", "overflow", "pinned_client", "prioritized"}),
    (RetentionPolicy, {"limits", "interest", "workqueue"}),
    (StorageType, {"file", "memory"}),
    (Compression, {"none", "s2"}),
    (PersistMode, {"default", "async"}),
]


@pytest.mark.parametrize(("enum", "values"), VALUES, ids=[e.__name__ for e, _ in VALUES])
def test_values_are_nats_servers(enum: type[StrEnum], values: set[str]) -> None:
    assert {m.value for m in enum} == values
    for m in enum:
        # A member is its JSON string: equal to it, formatted as it, encoded as it.
        assert m == m.value and str(m) == f"{m}" == m.value
        assert json.dumps(m) == orjson.dumps(m).decode() == f'"{m.value}"'


def _create(**cfg: object) -> ConsumerConfig:
    return parse_create_request(json.dumps({"stream_name": "S", "config": cfg}).encode()).config


def test_consumer_request_decodes_to_members() -> None:
    cfg = _create(
        durable_name="D",
        deliver_policy="last_per_subject",
        ack_policy="explicit",
        replay_policy="original",
        priority_policy="pinned_client",
    )
    assert cfg.deliver_policy is DeliverPolicy.LAST_PER_SUBJECT
    assert cfg.ack_policy is AckPolicy.EXPLICIT
    assert cfg.replay_policy is ReplayPolicy.ORIGINAL
    assert cfg.priority_policy is PriorityPolicy.PINNED_CLIENT
    # Go's DeliverPolicy.UnmarshalJSON reads "undefined" as deliver all; absent keys keep the
    # Go zero values.
    cfg = _create(deliver_policy="undefined")
    assert cfg.deliver_policy is DeliverPolicy.ALL
    assert cfg.ack_policy is AckPolicy.NONE and cfg.replay_policy is ReplayPolicy.INSTANT
    assert cfg.priority_policy is PriorityPolicy.NONE


def test_consumer_config_encodes_plain_strings() -> None:
    cfg = _create(durable_name="D", ack_policy="all", priority_policy="overflow")
    out = cfg.to_json()
    for key, want in [
        ("deliver_policy", "all"),
        ("ack_policy", "all"),
        ("replay_policy", "instant"),
        ("priority_policy", "overflow"),
    ]:
        assert out[key] == want and type(out[key]) is str
    # The default priority policy stays out of the JSON (omitempty), as before.
    assert "priority_policy" not in ConsumerConfig().to_json()
    # Stored and reloaded (the restart path), the policies are members again.
    again = config_from_stored(json.loads(orjson.dumps(out)))
    assert again.ack_policy is AckPolicy.ALL and again.priority_policy is PriorityPolicy.OVERFLOW
    assert again == cfg


def test_stream_config_decodes_to_members_and_encodes_strings() -> None:
    body = {"name": "S", "subjects": ["s"], "retention": "workqueue", "storage": "memory"}
    cfg = parse_stream_config_json(json.dumps(body).encode(), name_in_subject="S")
    assert cfg.retention is RetentionPolicy.WORKQUEUE and cfg.storage is StorageType.MEMORY
    out = cfg.to_json()
    assert (out["retention"], out["storage"]) == ("workqueue", "memory")
    assert type(out["retention"]) is str and type(out["storage"]) is str
