"""Self-tests of the differential harness helpers (no servers needed)."""

from __future__ import annotations

import pytest

from .harness import normalise_json, parse_info, split_lines

pytestmark = pytest.mark.differential


def test_normalise_json_placeholders() -> None:
    doc = {
        "type": "io.nats.jetstream.api.v1.stream_create_response",
        "config": {"name": "S", "subjects": ["a.>"]},
        "created": "2024-05-01T10:11:12.123456789Z",
        "state": {"messages": 0, "first_ts": "0001-01-01T00:00:00Z"},
        "cluster": {"leader": "NXYZ"},
        "sources": [{"name": "x", "active": "2024-05-01T10:11:12+02:00"}],
    }
    assert normalise_json(doc, drop={"type"}) == {
        "config": {"name": "S", "subjects": ["a.>"]},
        "created": "<created>",
        "state": {"messages": 0, "first_ts": "<first_ts>"},
        "cluster": "<cluster>",
        "sources": [{"name": "x", "active": "<timestamp>"}],
    }


def test_normalise_json_custom_ignore_ids_and_text_input() -> None:
    raw = b'{"seq": 3, "nuid": "AbCdEfGhIjKlMnOpQrStUv", "name": "S"}'
    assert normalise_json(raw, ignore={"seq"}, ids=True) == {
        "seq": "<seq>",
        "nuid": "<id>",
        "name": "S",
    }
    assert normalise_json('{"name": "S"}', ignore=()) == {"name": "S"}


def test_parse_info_drops_volatile() -> None:
    info = parse_info(b'INFO {"server_id":"N","proto":1,"port":4222,"max_payload":10}')
    assert info == {"proto": 1, "max_payload": 10}


def test_split_lines_normalises_async_info() -> None:
    data = b'PONG\r\nINFO {"server_id":"X","b":1,"a":2}\r\nMSG a 1 2\r\nhi\r\npartial'
    assert split_lines(data) == ["PONG", 'INFO {"a":2,"b":1}', "MSG a 1 2", "hi", "partial"]
