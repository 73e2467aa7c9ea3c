"""The JetStream API error table against nats-server's errors.json and the real server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from components import require_nats_server
from differential import harness

import natsd.jetstream.wire.errors as E
import natsd.jetstream.wire.errors_generated as G
from natsd.jetstream.wire.errors import API_ERRORS, BY_ERR_CODE, ApiError, ErrorDef

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "tools" / "gen_jetstream_errors.py"
ERRORS_JSON = ROOT / "src" / "natsd" / "jetstream" / "wire" / "errors.json"

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
    # Each constant is declared Final[ErrorDef] (a typed name, so a typo is a mypy error).
    annotated = {k: v for k, v in G.__annotations__.items() if k.startswith("JS")}
    assert annotated == dict.fromkeys(API_ERRORS, "Final[ErrorDef]")


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


def test_by_name_only_through_the_table() -> None:
    # No lookup by string any more: the constants are the names, API_ERRORS the data table.
    assert not hasattr(E, "err") and not hasattr(E, "lookup")
    assert API_ERRORS["JSStreamNotFoundErr"]() == E.JSStreamNotFoundErr()
    # Only nats-server's spellings: the F suffix of templated errors is part of the name.
    assert "JSStreamWrongLastSequenceErr" not in API_ERRORS
    assert E.JSStreamWrongLastSequenceErrF(seq=3).description == "wrong last sequence: 3"
    assert E.JSStreamWrongLastMsgIDErrF(id="m1").description == "wrong last msg ID: m1"
    assert isinstance(E.JSBadRequestErr, ErrorDef)


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_jetstream_errors", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_module_is_current() -> None:
    """errors_generated.py is what the generator makes of errors.json today."""
    gen = _generator()
    rendered = gen.render(gen.load(ERRORS_JSON))
    on_disk = Path(G.__file__).read_text(encoding="utf-8")
    assert rendered == on_disk, "stale: run .venv/bin/python tools/gen_jetstream_errors.py"
    assert gen.main(["--check"]) == 0


def test_constants_are_errors_json() -> None:
    """One constant per errors.json entry, with its code, error_code, description, deprecates."""
    entries = json.loads(ERRORS_JSON.read_text(encoding="utf-8"))
    want = {
        e["constant"]: (e["code"], e["error_code"], e["description"], e["deprecates"])
        for e in entries
    }
    got = {n: (d.code, d.err_code, d.description, d.deprecates) for n, d in API_ERRORS.items()}
    assert got == want
    assert G.JSInsufficientResourcesErr.deprecates == "ErrJetStreamResourcesExceeded"
    # The escapes in errors.json (\u003e) come out as the characters nats-server sends.
    assert E.JSConsumerBadDurableNameErr.description == "durable name can not contain '.', '*', '>'"


def test_generator_refuses_bad_data() -> None:
    gen = _generator()
    row = {"constant": "JSA", "code": 400, "error_code": 1, "description": "a", "deprecates": ""}
    with pytest.raises(ValueError, match="duplicate"):
        gen.render([row, {**row, "constant": "JSB"}])
    with pytest.raises(ValueError, match="bad constant"):
        gen.render([{**row, "constant": "not-a-name"}])
    # A description with quotes and a backslash is still a valid, equal Python literal.
    text = gen.render([{**row, "description": 'say "hi" \\ {x}'}])
    namespace: dict[str, Any] = {}
    exec(compile(text, "<generated>", "exec"), namespace)
    assert namespace["JSA"].description == 'say "hi" \\ {x}'
    assert namespace["BY_ERR_CODE"] == {1: namespace["JSA"]}


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
