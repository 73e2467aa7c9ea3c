"""Message tracing (ADR-41) on one server, nats-server against natsd: the trace events a
``Nats-Trace-Dest`` publish sends, what ``Nats-Trace-Only`` keeps from the subscribers,
and the headers that start no trace. Volatile fields (ids, timestamps, sequence) are
checked for their form and then dropped; connection ids become roles."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, js_config_pair, run_client_both

pytestmark = pytest.mark.differential

_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")
_DEST = "Nats-Trace-Dest"
_ONLY = "Nats-Trace-Only"


def _normalise(raw: bytes, cids: dict[int, str]) -> dict[str, Any]:
    doc = json.loads(raw)
    server = doc["server"]
    assert _TS.match(server["time"]) and server["time"].endswith("Z"), server
    assert isinstance(server["seq"], int) and server["seq"] > 0
    assert server["id"]
    # ids, clocks and versions are the server's own
    for k in ("id", "seq", "time", "ver", "name", "feature_flags"):
        server.pop(k, None)
    for ev in doc["events"]:
        assert _TS.match(ev.pop("ts")), ev
        if "cid" in ev:
            ev["cid"] = cids.get(ev["cid"], "other")
    return doc


async def _traces(nc: Any, cases: list[tuple[str, dict[str, str], str | None]]) -> Any:
    """Publish each case (subject, headers, reply) with subscribers on ``foo`` (plain and a
    two-member queue group) on this connection; return per case the normalised traces
    and what each subscription received."""
    cids = {nc._client_id: "self"}
    traces: list[bytes] = []

    async def trace(m: Any) -> None:
        traces.append(m.data)

    tsub = await nc.subscribe("trace.dest", cb=trace)
    got: dict[str, list[Any]] = {"plain": [], "q": []}

    async def plain(m: Any) -> None:
        got["plain"].append((m.subject, m.data, dict(m.headers or {})))

    async def q(m: Any) -> None:
        got["q"].append((m.subject, m.data))

    await nc.subscribe("foo", cb=plain)
    await nc.subscribe("foo", queue="grp", cb=q)
    await nc.subscribe("foo", queue="grp", cb=q)
    await nc.flush()
    out = []
    for subject, headers, reply in cases:
        traces.clear()
        got["plain"].clear()
        got["q"].clear()
        await nc.publish(subject, b"hello", reply=reply or "", headers=headers)
        await nc.flush()
        await asyncio.sleep(0.2)
        out.append(
            {
                "traces": [_normalise(t, cids) for t in traces],
                "plain": list(got["plain"]),
                "q": list(got["q"]),
            }
        )
    await tsub.unsubscribe()
    return out


CASES: list[tuple[str, dict[str, str], str | None]] = [
    # traced and delivered: one plain and one queue egress
    ("foo", {_DEST: "trace.dest"}, None),
    # trace-only, in each spelling nats-server takes, and one it does not
    ("foo", {_DEST: "trace.dest", _ONLY: "true"}, None),
    ("foo", {_DEST: "trace.dest", _ONLY: "1"}, None),
    ("foo", {_DEST: "trace.dest", _ONLY: "On"}, None),
    ("foo", {_DEST: "trace.dest", _ONLY: "false"}, None),
    # other headers are in the trace's header map, sorted
    ("foo", {"X-App": "a<b>&c", _DEST: "trace.dest", _ONLY: "true"}, None),
    # nobody subscribes: the ingress alone
    ("nosub", {_DEST: "trace.dest"}, None),
    ("nosub", {_DEST: "trace.dest", _ONLY: "true"}, None),
    # no trace: trace-only without a destination, a disabled destination, a wildcard one
    ("foo", {_ONLY: "true"}, None),
    ("foo", {_DEST: "trace disabled", _ONLY: "true"}, None),
    ("foo", {_DEST: "trace.*"}, None),
    ("foo", {_DEST: "trace.*", _ONLY: "true"}, None),
    # an old server's origin-account header: dropped when trace-only
    ("foo", {_DEST: "trace.dest", _ONLY: "true", "Nats-Trace-Origin-Account": "XYZ"}, None),
]


async def test_traces_and_trace_only_match_nats_server(pair: ServerPair) -> None:
    ref, impl = await run_client_both(
        pair, lambda nc: _traces(nc, CASES), reference_must_succeed=True, name="tracer"
    )
    # what the reference did, so the comparison is not between two empty answers
    assert len(ref[0]["traces"]) == 1 and len(ref[0]["plain"]) == 1 and len(ref[0]["q"]) == 1
    assert ref[1]["plain"] == [] and ref[1]["q"] == [] and len(ref[1]["traces"]) == 1
    assert ref[4]["plain"] and ref[4]["traces"]
    assert ref[8]["traces"] == [] and ref[8]["plain"]
    for i, (r, m) in enumerate(zip(ref, impl, strict=True)):
        assert m == r, (i, CASES[i])


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_config_pair("") as pair:
        yield pair


async def _js_traces(nc: Any) -> Any:
    """J1-J7 of the spec: traced publishes into a limits stream and an interest stream;
    per case the normalised traces, the answer to the publisher and the stream's count."""
    cids = {nc._client_id: "self"}
    js = nc.jetstream()
    await js.add_stream(name="TEST", subjects=["js.>"], storage="file")
    await js.add_stream(name="INT", subjects=["int.>"], retention="interest")
    traces: list[bytes] = []

    async def trace(m: Any) -> None:
        traces.append(m.data)

    await nc.subscribe("trace.dest", cb=trace)
    answers: list[bytes] = []

    async def answer(m: Any) -> None:
        answers.append(m.data)

    await nc.subscribe("answer", cb=answer)
    await nc.flush()
    d = {_DEST: "trace.dest"}
    t = {_DEST: "trace.dest", _ONLY: "true"}
    cases: list[tuple[str, dict[str, str]]] = [
        ("js.a", d),  # stored, the stored header's destination disabled
        ("js.a", t),  # checked, not stored, no PubAck
        ("js.a", {**d, "Nats-Msg-Id": "id1"}),
        ("js.a", {**t, "Nats-Msg-Id": "id1"}),  # a duplicate: its PubAck still goes
        ("js.a", {**t, "Nats-Msg-Id": "id2"}),  # not remembered...
        ("js.a", {**d, "Nats-Msg-Id": "id2"}),  # ...so this one is stored
        ("js.a", {**t, "Nats-Expected-Stream": "WRONG"}),  # an error PubAck, no subject
        ("int.a", t),  # no interest
        ("int.a", d),
    ]
    out = []
    for subject, headers in cases:
        traces.clear()
        answers.clear()
        await nc.publish(subject, b"x", reply="answer", headers=headers)
        await nc.flush()
        await asyncio.sleep(0.3)
        counts = [(await js.stream_info(s)).state.messages for s in ("TEST", "INT")]
        out.append(
            {
                "traces": [_normalise(x, cids) for x in traces],
                "answers": [json.loads(a) for a in answers],
                "counts": counts,
            }
        )
    stored = await js.get_msg("TEST", 1)
    out.append(dict(stored.headers or {}))
    return out


async def test_jetstream_trace_events_and_trace_only_match_nats_server(
    js_pair: ServerPair,
) -> None:
    ref, impl = await run_client_both(js_pair, _js_traces, reference_must_succeed=True)
    assert ref[0]["counts"] == [1, 0] and ref[1]["counts"] == [1, 0]
    assert ref[1]["answers"] == [] and ref[3]["answers"][0].get("duplicate") is True
    assert ref[-1] == {_DEST: "trace disabled"}
    for i, (r, m) in enumerate(zip(ref, impl, strict=True)):
        assert m == r, i


async def _api_traces(nc: Any) -> Any:
    """K: a traced JetStream API request: the service import is traced; trace-only stops
    there (503), any other request is served untraced."""
    cids = {nc._client_id: "self"}
    traces: list[bytes] = []

    async def trace(m: Any) -> None:
        traces.append(m.data)

    await nc.subscribe("trace.dest", cb=trace)
    await nc.flush()
    out = []
    for only in (True, False):
        traces.clear()
        headers = {_DEST: "trace.dest", **({_ONLY: "true"} if only else {})}
        try:
            msg = await nc.request("$JS.API.INFO", b"", timeout=2, headers=headers)
            answer: Any = sorted(json.loads(msg.data))
        except Exception as e:
            answer = type(e).__name__
        await asyncio.sleep(0.2)
        out.append({"traces": [_normalise(x, cids) for x in traces], "answer": answer})
    return out


async def test_jetstream_api_request_is_traced_as_nats_server_does(js_pair: ServerPair) -> None:
    ref, impl = await run_client_both(js_pair, _api_traces, reference_must_succeed=True)
    assert ref[0]["answer"] == "NoRespondersError"
    assert [e["type"] for e in ref[0]["traces"][0]["events"]] == ["in", "si"]
    assert isinstance(ref[1]["answer"], list)
    assert impl == ref


_ERRORS: list[str] = []


async def _record(e: Exception) -> None:
    _ERRORS.append(str(e))


async def _denied(nc: Any) -> Any:
    """A traced publish to a subject the user may not publish to (C2): refused with the
    permissions error, and traced with that error on its ingress. A destination the user
    may not publish to (C4) drops the message with that one error, even when the subject
    is refused too."""
    _ERRORS.clear()
    cids = {nc._client_id: "self"}
    traces: list[bytes] = []
    delivered: list[str] = []

    async def trace(m: Any) -> None:
        traces.append(m.data)

    async def sub(m: Any) -> None:
        delivered.append(m.subject)

    await nc.subscribe("trace.dest", cb=trace)
    await nc.subscribe("secret.x", cb=sub)
    await nc.subscribe("foo", cb=sub)
    await nc.flush()
    out = []
    for subject, dest, only in (
        ("secret.x", "trace.dest", False),
        ("secret.x", "trace.dest", True),
        ("secret.x", "forbidden", False),
        ("foo", "forbidden", True),
        ("foo", "forbidden", False),
    ):
        traces.clear()
        delivered.clear()
        _ERRORS.clear()
        headers = {_DEST: dest, **({_ONLY: "true"} if only else {})}
        await nc.publish(subject, b"x", headers=headers)
        await nc.flush()
        await asyncio.sleep(0.2)
        out.append(([_normalise(t, cids) for t in traces], list(delivered), list(_ERRORS)))
    return out


async def test_a_refused_traced_publish_is_traced_with_its_error(
    permissions_pair: ServerPair,
) -> None:
    ref, impl = await run_client_both(
        permissions_pair,
        _denied,
        reference_must_succeed=True,
        user="limited",
        password="pw",
        error_cb=_record,
    )
    traces, delivered, errors = ref[0]
    assert len(traces) == 1 and delivered == [] and len(errors) == 1
    assert traces[0]["events"][0]["error"] == 'Permissions Violation for Publish to "secret.x"'
    assert [len(r[2]) for r in ref] == [1, 1, 1, 1, 1] and ref[2][2] == ref[3][2]
    assert [r[0] for r in ref[2:]] == [[], [], []]
    assert impl == ref


async def _oversized(server: Any) -> Any:
    """An HPUB over max_payload whose headers came with its control line (C17): the
    publisher gets the error and is closed; the trace names it and the size announced."""
    import nats

    traces: list[bytes] = []

    async def trace(m: Any) -> None:
        traces.append(m.data)

    nc = await nats.connect(server.url)
    try:
        await nc.subscribe("trace.dest", cb=trace)
        await nc.flush()
        out = []
        for only in (True, False):
            hdr = f"NATS/1.0\r\n{_DEST}: trace.dest\r\n"
            hdr += f"{_ONLY}: true\r\n\r\n" if only else "\r\n"
            reader, writer = await asyncio.open_connection(server.host, server.port)
            await reader.readline()
            writer.write(b'CONNECT {"verbose":false,"headers":true,"name":"mp"}\r\n')
            writer.write(f"HPUB foo {len(hdr)} 2048\r\n{hdr}0123456789".encode())
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(4096), 5)
            closed = await asyncio.wait_for(reader.read(4096), 5) == b""
            writer.close()
            await asyncio.sleep(0.2)
            docs = [_normalise(t, {}) for t in traces]
            traces.clear()
            out.append((answer, closed, docs))
        return out
    finally:
        await nc.close()


async def test_an_oversized_traced_publish_is_traced_with_its_error(
    small_payload_pair: ServerPair,
) -> None:
    ref = await _oversized(small_payload_pair.ref)
    impl = await _oversized(small_payload_pair.impl)
    assert ref[0][0] == b"-ERR 'Maximum Payload Violation'\r\n" and ref[0][1]
    (event,) = ref[0][2][0]["events"]
    assert event["error"] == "maximum payload exceeded"
    assert ref[0][2][0]["request"]["msgsize"] == 2048
    assert impl == ref


async def _compressed(nc: Any) -> Any:
    """The trace event compressed as the traced message's Accept-Encoding asks (Z)."""
    import gzip

    import cramjam

    cids = {nc._client_id: "self"}
    got: list[Any] = []

    async def trace(m: Any) -> None:
        enc = (m.headers or {}).get("Content-Encoding")
        data = m.data
        if enc == "gzip":
            data = gzip.decompress(data)
        elif enc == "snappy":
            assert data.startswith(b"\xff\x06\x00\x00sNaPpY")
            data = bytes(cramjam.snappy.decompress(data))
        got.append((enc, _normalise(data, cids)))

    await nc.subscribe("trace.dest", cb=trace)
    await nc.flush()
    out = []
    for accept in ("gzip", "GZIP, deflate", "snappy", "s2", "br", None):
        got.clear()
        headers = {_DEST: "trace.dest", _ONLY: "true"}
        if accept is not None:
            headers["Accept-Encoding"] = accept
        await nc.publish("foo", b"x", headers=headers)
        await nc.flush()
        await asyncio.sleep(0.2)
        out.append(list(got))
    return out


async def test_trace_events_are_compressed_as_asked(pair: ServerPair) -> None:
    ref, impl = await run_client_both(pair, _compressed, reference_must_succeed=True)
    assert [r[0][0] for r in ref] == ["gzip", "gzip", "snappy", "snappy", "identity", None]
    assert impl == ref
