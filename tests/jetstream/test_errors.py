"""The JetStream API error table against nats-server's errors.json and the real server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server
from differential import harness

import natsd.jetstream.errors as E
from natsd.jetstream.errors import API_ERRORS, BY_ERR_CODE, ApiError, ErrorDef, err, lookup

# A sample of rows, as in nats-server's server/errors.json (and as 2.15.1 sends them).
ROWS = [
    ("JSStreamNotFoundErr", 404, 10059, "stream not found"),
    (
        "JSStreamNameExistErr",
        400,
        10058,
        "stream name already in use with a different configuration",
    ),
    ("JSStreamSubjectOverlapErr", 400, 10065, "subjects overlap with an existing stream"),
    ("JSStreamWrongLastSequenceErrF", 400, 10071, "wrong last sequence: {seq}"),
    ("JSStreamWrongLastMsgIDErrF", 400, 10070, "wrong last msg ID: {id}"),
    (
        "JSStreamReplicasNotSupportedErr",
        500,
        10074,
        "replicas > 1 not supported in non-clustered mode",
    ),
    ("JSBadRequestErr", 400, 10003, "bad request"),
    ("JSInvalidJSONErr", 400, 10025, "invalid JSON: {err}"),
    ("JSStreamInvalidConfigF", 500, 10052, "{err}"),
    ("JSStreamMirrorNotUpdatableErr", 400, 10055, "stream mirror configuration can not be updated"),
    ("JSStreamMismatchErr", 400, 10056, "stream name in subject does not match request"),
    (
        "JSStreamNameContainsPathSeparatorsErr",
        400,
        10128,
        "Stream name can not contain path separators",
    ),
    ("JSConsumerNotFoundErr", 404, 10014, "consumer not found"),
    ("JSNoMessageFoundErr", 404, 10037, "no message found"),
    ("JSStreamNotMatchErr", 400, 10060, "expected stream does not match"),
    ("JSStreamMsgDeleteFailedF", 500, 10057, "{err}"),
    ("JSNotEnabledForAccountErr", 503, 10039, "JetStream not enabled for account"),
    ("JSMaximumStreamsLimitErr", 400, 10027, "maximum number of streams reached"),
    ("JSStorageResourcesExceededErr", 500, 10047, "insufficient storage resources available"),
    ("JSStreamDuplicateMessageConflict", 409, 10158, "duplicate message id is in process"),
    ("JSStreamTooManyRequests", 429, 10167, "too many requests"),
    ("JSStreamMinLastSeqErr", 412, 10180, "min last sequence"),
    ("JSPedanticErrF", 400, 10157, "pedantic mode: {err}"),
    ("JSStreamSealedErr", 400, 10109, "invalid operation on sealed stream"),
    ("JSMessageTTLInvalidErr", 400, 10165, "invalid per-message TTL"),
    ("JSStreamReconfigureInProgressErr", 400, 10226, "stream reconfiguration already in progress"),
    ("JSMessageSourceHdrNotAllowedErr", 400, 10227, "message stream source header is not allowed"),
]


@pytest.mark.parametrize(
    ("name", "code", "err_code", "description"), ROWS, ids=[r[0] for r in ROWS]
)
def test_rows(name: str, code: int, err_code: int, description: str) -> None:
    d = API_ERRORS[name]
    assert (d.constant, d.code, d.err_code, d.description) == (name, code, err_code, description)
    assert getattr(E, name) is d
    assert BY_ERR_CODE[err_code] is d


def test_table_shape() -> None:
    # errors.json numbers 10002..10227 without gaps; one constant per number.
    assert sorted(BY_ERR_CODE) == list(range(10002, 10228))
    assert len(API_ERRORS) == len(BY_ERR_CODE) == 226
    assert {d.code for d in API_ERRORS.values()} == {400, 404, 409, 412, 429, 500, 503}
    for name, d in API_ERRORS.items():
        assert name.startswith("JS") and getattr(E, name) is d and name in E.__all__
    annotated = {k for k in E.__annotations__ if k.startswith("JS")}
    assert set(API_ERRORS) <= annotated


def test_templates() -> None:
    assert E.JSStreamWrongLastSequenceErrF(seq=41).to_json() == {
        "code": 400,
        "err_code": 10071,
        "description": "wrong last sequence: 41",
    }
    assert E.JSInvalidJSONErr(err="unexpected EOF").description == "invalid JSON: unexpected EOF"
    assert E.JSStreamInvalidConfigF(err="max age needs to be >= 100ms").to_json() == {
        "code": 500,
        "err_code": 10052,
        "description": "max age needs to be >= 100ms",
    }
    e = E.JSStreamExternalDelPrefixOverlapsErrF(prefix="d", subject="s.>")
    assert e.description == "stream external delivery prefix d overlaps with stream subject s.>"
    # A placeholder without a value stays as it is; unknown arguments are ignored.
    assert E.JSSequenceNotFoundErrF(other=1).description == "sequence {seq} not found"
    assert E.format_description("{a} and {a}", a=1) == "1 and 1"


def test_api_error() -> None:
    with pytest.raises(ApiError) as info:
        raise E.JSStreamNotFoundErr()
    e = info.value
    assert (e.code, e.err_code, e.description) == (404, 10059, "stream not found")
    assert str(e) == "stream not found"
    assert e == ApiError(404, 10059, "stream not found") and hash(e) == hash(
        E.JSStreamNotFoundErr()
    )
    assert e != E.JSConsumerNotFoundErr()
    assert e.is_(E.JSStreamNotFoundErr) and E.JSStreamNotFoundErr.matches(e)
    assert not E.JSStreamNotFoundErr.matches(ValueError())
    assert repr(e) == "ApiError(404, 10059, 'stream not found')"
    assert json.loads(json.dumps(e.to_json())) == e.to_json()


def test_lookup_by_name() -> None:
    assert err("JSStreamNotFoundErr") == E.JSStreamNotFoundErr()
    # nats-server's F suffix may be left out (or added).
    assert err("JSStreamWrongLastSequenceErr", seq=3).description == "wrong last sequence: 3"
    assert err("JSStreamWrongLastMsgIDErr", id="m1").description == "wrong last msg ID: m1"
    assert lookup("JSStreamNotFoundErrF") is E.JSStreamNotFoundErr
    assert E.JSStreamWrongLastSequenceErr is E.JSStreamWrongLastSequenceErrF
    with pytest.raises(KeyError):
        lookup("JSNoSuchErr")
    assert isinstance(lookup("JSBadRequestErr"), ErrorDef)


def test_descriptions_are_in_the_nats_server_binary() -> None:
    """Each description template is a string constant inside nats-server (catches typos)."""
    binary = require_nats_server()
    data = Path(binary).read_bytes()
    missing = [d.constant for d in API_ERRORS.values() if d.description.encode() not in data]
    assert missing == []


# ------------------------------------------------------------------------------ differential
# (subject, headers, body, expected error): requests run in order against a fresh server.
SCENARIO: list[tuple[str, dict[str, str] | None, Any, ApiError | None]] = [
    ("$JS.API.STREAM.INFO.nope", None, b"", E.JSStreamNotFoundErr()),
    ("$JS.API.STREAM.CREATE.S", None, {"name": "S", "subjects": ["s.>"]}, None),
    ("$JS.API.STREAM.CREATE.S", None, {"name": "S", "max_msgs": 3}, E.JSStreamNameExistErr()),
    (
        "$JS.API.STREAM.CREATE.T",
        None,
        {"name": "T", "subjects": ["s.x"]},
        E.JSStreamSubjectOverlapErr(),
    ),
    (
        "$JS.API.STREAM.CREATE.T",
        None,
        {"name": "T", "num_replicas": 3},
        E.JSStreamReplicasNotSupportedErr(),
    ),
    ("$JS.API.STREAM.CREATE.T", None, b"{", E.JSInvalidJSONErr(err="unexpected EOF")),
    ("$JS.API.STREAM.CREATE.T", None, {"name": "X"}, E.JSStreamMismatchErr()),
    ("$JS.API.STREAM.CREATE.a/b", None, {"name": "a/b"}, E.JSStreamNameContainsPathSeparatorsErr()),
    (
        "$JS.API.STREAM.CREATE.T",
        None,
        {"name": "T", "sealed": True},
        E.JSStreamInvalidConfigF(err="stream configuration for create can not be sealed"),
    ),
    (
        "$JS.API.STREAM.UPDATE.S",
        None,
        {"name": "S", "mirror": {"name": "O"}},
        E.JSStreamMirrorNotUpdatableErr(),
    ),
    ("s.a", None, b"x", None),
    ("s.a", {"Nats-Expected-Last-Sequence": "5"}, b"x", E.JSStreamWrongLastSequenceErrF(seq=1)),
    ("s.a", {"Nats-Expected-Last-Msg-Id": "zz"}, b"x", E.JSStreamWrongLastMsgIDErrF(id="")),
    ("s.a", {"Nats-Expected-Stream": "Q"}, b"x", E.JSStreamNotMatchErr()),
    ("$JS.API.STREAM.MSG.GET.S", None, {"seq": 99}, E.JSNoMessageFoundErr()),
    ("$JS.API.STREAM.MSG.GET.S", None, {}, E.JSBadRequestErr()),
    ("$JS.API.CONSUMER.INFO.S.nope", None, b"", E.JSConsumerNotFoundErr()),
    ("$JS.API.STREAM.DELETE.nope", None, b"", E.JSStreamNotFoundErr()),
]


async def _run(url: str) -> list[dict[str, Any]]:
    import nats

    nc = await nats.connect(url, allow_reconnect=False)
    out = []
    try:
        for subject, headers, body, _ in SCENARIO:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            msg = await nc.request(subject, data, headers=headers, timeout=5)
            out.append(json.loads(msg.data))
    finally:
        await nc.close()
    return out


@pytest.mark.differential
def test_errors_match_nats_server(tmp_path: Path) -> None:
    require_nats_server()
    server = harness.start_server("nats-server", ["-js", "-sd", str(tmp_path)])
    try:
        responses = asyncio.run(_run(server.url))
    finally:
        server.stop()
    for (subject, _, _, want), resp in zip(SCENARIO, responses, strict=True):
        got = resp.get("error")
        assert got == (want.to_json() if want is not None else None), (subject, resp)
