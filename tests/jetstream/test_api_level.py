"""``Nats-Required-Api-Level`` parsing (Go ``sliceHeader`` + ``strconv.Atoi``) and the
advertised API level against what natsd accepts."""

from __future__ import annotations

import pytest

from natsd.jetstream.config.consumer_config import ConsumerConfig, set_static_metadata
from natsd.jetstream.config.stream_config import parse_stream_config_json
from natsd.jetstream.wire.api_level import level_refused, slice_header
from natsd.jetstream.wire.errors import ApiError
from natsd.version import API_LEVEL

from .test_stream_config import CREATE_CASES, body_bytes


def block(*lines: str) -> bytes:
    return ("NATS/1.0\r\n" + "".join(f"{ln}\r\n" for ln in lines) + "\r\n").encode()


@pytest.mark.parametrize(
    ("hdr", "value"),
    [
        (block("Nats-Required-Api-Level: 2"), b"2"),
        (block("Nats-Required-Api-Level:2"), b"2"),
        (block("Nats-Required-Api-Level:    7"), b"7"),
        (block("Nats-Required-Api-Level: 1 "), b"1 "),  # trailing spaces are kept
        (block("Nats-Required-Api-Level:"), b""),
        (block("X: 1", "Nats-Required-Api-Level: 3", "Nats-Required-Api-Level: 9"), b"3"),
        (block("nats-required-api-level: 3"), None),  # names match exactly
        (block("X-Nats-Required-Api-Level: 3"), None),  # a whole line's name only
        (block("Nats-Required-Api-Levels: 3"), None),
        (block("X: Nats-Required-Api-Level: 3"), None),
        (b"NATS/1.0\r\nNats-Required-Api-Level: 4", b"4"),  # no final CRLF
    ],
)
def test_slice_header(hdr: bytes, value: bytes | None) -> None:
    assert slice_header(hdr, b"Nats-Required-Api-Level") == value


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        (str(API_LEVEL), False),
        ("0", False),
        ("-1", False),
        ("+1", False),
        ("01", False),
        (str(API_LEVEL + 1), True),
        ("100", True),
        ("abc", True),
        ("1.0", True),
        ("1_0", True),
        ("1 ", True),  # Atoi does not trim
        ("9223372036854775808", True),  # out of int64 range: Atoi fails
        ("-9223372036854775809", True),
        ("-9223372036854775808", False),
    ],
)
def test_level_refused(value: str, refused: bool) -> None:
    assert level_refused(block(f"Nats-Required-Api-Level: {value}")) is refused


def test_no_or_empty_header_is_not_refused() -> None:
    assert not level_refused(None)
    assert not level_refused(b"")
    assert not level_refused(block("Nats-Msg-Id: 1"))
    assert not level_refused(block("Nats-Required-Api-Level:"))


def test_natsd_accepts_nothing_above_its_api_level_but_fast_batches() -> None:
    """The advertised level promises every feature of that level (ADR-44), so it is the
    highest level whose features all work: 2. Of the stream configs of the recorded cases
    natsd creates, only fast batches (level 4, on R1 streams) need more."""
    levels = []
    for _, name, body in CREATE_CASES:
        try:
            cfg = parse_stream_config_json(body_bytes(body), name_in_subject=name)
        except ApiError:
            continue
        level = int(cfg.to_json()["metadata"]["_nats.req.level"])
        assert level <= API_LEVEL or cfg.allow_batched, name
        levels.append(level)
    assert API_LEVEL == 2 and max(levels) == 4
    # Consumers: pause and priority groups need level 1; flow-control acks (level 4) are
    # refused (test_consumer_config.py::test_flow_control_ack_policy_is_refused_clearly).
    pinned = ConsumerConfig(
        durable_name="C",
        ack_policy="explicit",
        priority_policy="pinned_client",
        priority_groups=["g"],
        pause_until="2999-01-01T00:00:00Z",
    )
    set_static_metadata(pinned)
    assert pinned.metadata["_nats.req.level"] == "1"
