"""The advertised version / JetStream API level, and ``Nats-Required-Api-Level``.

natsd advertises nats-server 2.12 and API level 2 (see ``natsd/version.py`` for why) in INFO
(``api_lvl``), ``$JS.API.INFO`` (``api.level``), ``/varz`` and ``/jsz``. A request whose
``Nats-Required-Api-Level`` header asks for more than the responding server's level, or is
not an integer, is refused as nats-server refuses it: ``412 / 10185`` on the API (after the
10010 of the cluster-only requests), a ``412 Required Api Level`` status on direct gets and
pull requests. Level 100 is above both servers, levels <= 2 within both; natsd alone refuses
3..5 (nats-server 2.15.1 is level 5).
"""

from __future__ import annotations

import json
import socket
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import require_nats_server
from ports import free_port

from natsd.version import API_LEVEL, SERVER_VERSION

from .harness import (
    ServerPair,
    ServerProcess,
    run_client,
    start_server,
)
from .js_scenarios import JsRecorder, _decode, norm, parse_header_block, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(120)]

T = 10.0  # per request: generous, the machine may be loaded (a timeout is a failure)


def _need_reference() -> None:
    require_nats_server()


@pytest.fixture(scope="module")
def js_pair_http() -> Iterator[tuple[ServerPair, dict[str, int]]]:
    """Both servers with JetStream and monitoring; yields the pair and their HTTP ports."""
    _need_reference()
    tmp = Path(tempfile.mkdtemp(prefix="natsd-diff-lvl-"))
    started: list[ServerProcess] = []
    http: dict[str, int] = {}
    try:
        for kind in ("nats-server", "natsd"):
            port = free_port()
            sd = tmp / kind
            sd.mkdir()
            args = ["-js", "-sd", str(sd), "-m", str(port)]
            started.append(start_server(kind, args, log_dir=tmp))
            http[kind] = port
        yield ServerPair(started[0], started[1]), http
    finally:
        for s in started:
            s.stop()


def _info(server: ServerProcess) -> dict[str, Any]:
    with socket.create_connection(server.address, timeout=T) as s:
        buf = b""
        while b"\r\n" not in buf:
            buf += s.recv(4096)
    line = buf.split(b"\r\n", 1)[0]
    assert line.startswith(b"INFO ")
    info: dict[str, Any] = json.loads(line[5:])
    return info


def _http(port: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=T) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return doc


async def test_version_and_api_level_advertised(
    js_pair_http: tuple[ServerPair, dict[str, int]],
) -> None:
    pair, http = js_pair_http
    ref_info, info = _info(pair.ref), _info(pair.impl)
    # nats-server sends api_lvl in INFO; natsd sends its own level, with its version.
    assert isinstance(ref_info["api_lvl"], int) and ref_info["api_lvl"] >= 1
    assert (info["version"], info["api_lvl"]) == (SERVER_VERSION, API_LEVEL) == ("2.12.0", 2)

    async def fn(nc: Any) -> Any:
        js = JsRecorder(nc)
        msg = await js.raw_request("$JS.API.INFO", b"", timeout=T)
        await js.req("create", "STREAM.CREATE.V", {"name": "V"}, timeout=T)
        smsg = await js.raw_request("$JS.API.STREAM.INFO.V", b"", timeout=T)
        await js.req("delete", "STREAM.DELETE.V", timeout=T)
        return json.loads(msg.data)["api"]["level"], json.loads(smsg.data)["config"]["metadata"]

    ref_level, ref_md = await run_client(pair.ref, fn, capture_errors=False)
    level, md = await run_client(pair.impl, fn, capture_errors=False)
    assert ref_level == ref_info["api_lvl"] and ref_md["_nats.level"] == str(ref_level)
    assert level == API_LEVEL
    assert md == {"_nats.level": "2", "_nats.req.level": "0", "_nats.ver": SERVER_VERSION}

    # /varz jetstream.stats and /jsz report the level as nats-server does, same keys.
    ref_varz, varz = _http(http["nats-server"], "/varz"), _http(http["natsd"], "/varz")
    assert ref_varz["jetstream"]["stats"]["api"]["level"] == ref_level
    assert varz["jetstream"]["stats"]["api"]["level"] == API_LEVEL
    assert list(varz["jetstream"]["stats"]) == list(ref_varz["jetstream"]["stats"])
    assert list(varz["jetstream"]["stats"]["api"]) == list(ref_varz["jetstream"]["stats"]["api"])
    assert _http(http["natsd"], "/jsz")["api"]["level"] == API_LEVEL
    assert _http(http["nats-server"], "/jsz")["api"]["level"] == ref_level


# ------------------------------------------------------------------ Nats-Required-Api-Level
SETUP = [
    ("STREAM.CREATE.L", {"name": "L", "subjects": ["l.>"], "allow_direct": True}),
    (
        "CONSUMER.CREATE.L.C",
        {"stream_name": "L", "config": {"name": "C", "ack_policy": "explicit"}},
    ),
    ("CONSUMER.CREATE.L.P", {"stream_name": "L", "config": {"name": "P", "deliver_subject": "p"}}),
]
# (label, subject after $JS.API., body); answered with JSON unless marked as a status.
REQUESTS: list[tuple[str, str, Any]] = [
    ("info", "INFO", b""),
    ("stream create", "STREAM.CREATE.M", {"name": "M", "subjects": ["m"]}),
    ("stream create bad json", "STREAM.CREATE.M", b"{"),
    ("stream update", "STREAM.UPDATE.L", {"name": "L", "subjects": ["l.>"], "allow_direct": True}),
    ("stream info", "STREAM.INFO.L", b""),
    ("stream info missing", "STREAM.INFO.NOPE", b""),
    ("stream names", "STREAM.NAMES", b""),
    ("stream list", "STREAM.LIST", b""),
    ("stream purge", "STREAM.PURGE.L", b""),
    ("msg get", "STREAM.MSG.GET.L", {"seq": 1}),
    ("consumer create", "CONSUMER.CREATE.L.D", {"stream_name": "L", "config": {"name": "D"}}),
    ("consumer info", "CONSUMER.INFO.L.C", b""),
    ("consumer names", "CONSUMER.NAMES.L", b""),
    ("consumer list", "CONSUMER.LIST.L", b""),
    ("consumer pause", "CONSUMER.PAUSE.L.C", b""),
    ("consumer unpin", "CONSUMER.UNPIN.L.C", {"group": "g"}),
    ("consumer reset", "CONSUMER.RESET.L.C", b""),
    ("consumer delete", "CONSUMER.DELETE.L.NOPE", b""),
    ("snapshot", "STREAM.SNAPSHOT.L", b""),
    ("restore", "STREAM.RESTORE.L", b""),
    ("stream step-down (10010 first)", "STREAM.LEADER.STEPDOWN.L", b""),
    ("consumer step-down (10010 first)", "CONSUMER.LEADER.STEPDOWN.L.C", b""),
    ("stream delete", "STREAM.DELETE.NOPE", b""),
    ("direct get", "DIRECT.GET.L", {"seq": 1}),
    ("direct get last", "DIRECT.GET.L.l.a", b""),
    ("direct get no direct stream", "DIRECT.GET.NOPE", {"seq": 1}),
    ("pull request", "CONSUMER.MSG.NEXT.L.C", {"batch": 1, "no_wait": True}),
    ("pull request push consumer", "CONSUMER.MSG.NEXT.L.P", {"batch": 1, "no_wait": True}),
]
LEVELS = ["100", "0", "1", "2", "+1", "-3", "abc", "1.5", "99999999999999999999", ""]


def _record(js: JsRecorder, msg: Any) -> Any:
    if isinstance(msg, str):
        return msg  # timeout / no responders marker
    if not msg.data:
        status, hdrs = parse_header_block(js._raw_headers.get(msg.subject))
        return {"status": status, "headers": hdrs}
    return norm(_decode(msg.data))


async def _level_requests(js: JsRecorder, levels: list[str]) -> None:
    for subject, body in SETUP:
        await js.req(f"setup {subject}", subject, body, timeout=T)
    await js.pub("stored", "l.a", "x", timeout=T)
    for level in levels:
        headers = {"Nats-Required-Api-Level": level}
        for label, subject, body in REQUESTS:
            if isinstance(body, dict):
                body = json.dumps(body).encode()
            msg = await js.raw_request(f"$JS.API.{subject}", body, headers=headers, timeout=T)
            js.note(f"{label} @ {level!r}", _record(js, msg))
    await js.req("account info", "INFO", timeout=T)


async def test_required_api_level_matches_nats_server(
    js_pair_http: tuple[ServerPair, dict[str, int]],
) -> None:
    pair, _ = js_pair_http

    async def sc(js: JsRecorder) -> None:
        await _level_requests(js, LEVELS)

    ref, impl = await run_scenario(pair, sc, timeout=120, api_counters=True)
    answers = dict(ref)
    refusal = {
        "code": 412,
        "err_code": 10185,
        "description": "JetStream minimum api level required",
    }
    for label in ("info", "stream create", "stream info", "consumer reset", "snapshot"):
        for level in ("100", "abc", "1.5", "99999999999999999999"):
            assert answers[f"{label} @ {level!r}"]["error"] == refusal, (label, level)
        assert "error" not in answers[f"{label} @ '1'"] or label == "snapshot"
    assert answers["direct get @ '100'"]["status"] == "NATS/1.0 412 Required Api Level"
    assert answers["pull request @ '100'"]["status"] == "NATS/1.0 412 Required Api Level"
    assert answers["stream step-down (10010 first) @ '100'"]["error"]["err_code"] == 10010
    assert_same(ref, impl)


async def test_levels_between_natsd_and_nats_server(
    js_pair_http: tuple[ServerPair, dict[str, int]],
) -> None:
    """Level 3..5: nats-server 2.15.1 serves the request, natsd (level 2) refuses it."""
    pair, _ = js_pair_http

    async def sc(js: JsRecorder) -> None:
        await _level_requests(js, ["3"])

    ref, impl = await run_scenario(pair, sc, timeout=120)
    answers, natsd = dict(ref), dict(impl)
    assert "error" not in answers["stream info @ '3'"]
    assert natsd["stream info @ '3'"] == {
        "type": "io.nats.jetstream.api.v1.stream_info_response",
        "error": {
            "code": 412,
            "err_code": 10185,
            "description": "JetStream minimum api level required",
        },
        "total": 0,
        "offset": 0,
        "limit": 0,
    }
    assert natsd["direct get @ '3'"]["status"] == "NATS/1.0 412 Required Api Level"
    assert natsd["consumer reset @ '3'"]["error"]["err_code"] == 10185
