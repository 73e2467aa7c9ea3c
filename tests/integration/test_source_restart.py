"""Sources across a restart of their server (stopped cleanly or killed), against
nats-server: the sourcing stream finds each source's place again from its messages'
Nats-Stream-Source headers, copies what the origins took meanwhile, and holds each origin
message exactly once. Also nats.py's own source tests (``test_subject_transforms``,
``test_stream_source_opt_start_time``) through its client API."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import signal
from typing import Any

import pytest
from nats.js.api import ConsumerConfig, StreamSource, SubjectTransform
from nats.js.errors import BadRequestError

from .restarts import Restartable, both, connect, wait_reconnected

pytestmark = pytest.mark.timeout(120)


async def _ask(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=5)
    return dict(json.loads(msg.data))


async def _until(nc: Any, stream: str, msgs: int, wait: float = 20.0) -> dict[str, Any]:
    st: dict[str, Any] = {}
    for _ in range(int(wait / 0.1)):
        st = (await _ask(nc, f"$JS.API.STREAM.INFO.{stream}"))["state"]
        if st["messages"] >= msgs:
            return st
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} stopped at {st}")


async def _payloads(nc: Any, stream: str, last: int) -> list[str]:
    out = []
    for seq in range(1, last + 1):
        m = await _ask(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in m:
            out.append(base64.b64decode(m["message"]["data"]).decode())
    return out


async def _scenario(srv: Restartable, sig: int) -> dict[str, Any]:
    nc = await connect(srv)
    try:
        await _ask(nc, "$JS.API.STREAM.CREATE.A", {"name": "A", "subjects": ["a.>"]})
        await _ask(nc, "$JS.API.STREAM.CREATE.B", {"name": "B", "subjects": ["b.>"]})
        cfg = {"name": "S", "subjects": ["s.>"], "sources": [{"name": "A"}, {"name": "B"}]}
        await _ask(nc, "$JS.API.STREAM.CREATE.S", cfg)
        for i in range(10):
            await nc.request("a.x", b"a%d" % i, timeout=5)
            await nc.request("b.x", b"b%d" % i, timeout=5)
        await nc.request("s.own", b"own", timeout=5)
        await _until(nc, "S", 21)
        await srv.restart(sig)
        await wait_reconnected(nc)
        for i in range(10, 15):
            await nc.request("a.x", b"a%d" % i, timeout=5)
            await nc.request("b.x", b"b%d" % i, timeout=5)
        state = await _until(nc, "S", 31)
        await asyncio.sleep(0.5)  # (anything copied twice would show by now)
        state = (await _ask(nc, "$JS.API.STREAM.INFO.S"))["state"]
        payloads = await _payloads(nc, "S", state["last_seq"])
        return {
            "messages": state["messages"],
            "copied": sorted(payloads),
        }
    finally:
        await nc.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_sources_resume_after_a_restart(sig: int) -> None:
    got = await both(lambda srv: _scenario(srv, sig))
    want = {
        "messages": 31,
        "copied": sorted([f"a{i}" for i in range(15)] + [f"b{i}" for i in range(15)] + ["own"]),
    }
    assert got["nats-server"] == want
    assert got["natsd"] == want


async def _durable_scenario(srv: Restartable, sig: int) -> dict[str, Any]:
    """A workqueue origin copied through a durable flow-control consumer of the user's
    (ADR-60): what the copy held before the restart stays, what the origin took meanwhile
    comes after, nothing twice, and the origin drains."""
    nc = await connect(srv)
    try:
        await _ask(nc, "$JS.API.STREAM.CREATE.W",
                   {"name": "W", "subjects": ["w.>"], "retention": "workqueue"})  # fmt: skip
        await _ask(nc, "$JS.API.CONSUMER.CREATE.W.C", {"stream_name": "W", "config": {
            "durable_name": "C", "name": "C", "deliver_subject": "dlv.c",
            "ack_policy": "flow_control", "flow_control": True, "idle_heartbeat": 1_000_000_000,
        }})  # fmt: skip
        await _ask(nc, "$JS.API.STREAM.CREATE.S", {"name": "S", "sources": [
            {"name": "W", "consumer": {"name": "C", "deliver_subject": "dlv.c"}}]})  # fmt: skip
        for i in range(10):
            await nc.request("w.x", b"w%d" % i, timeout=5)
        await _until(nc, "S", 10)
        await srv.restart(sig)
        await wait_reconnected(nc)
        for i in range(10, 15):
            await nc.request("w.x", b"w%d" % i, timeout=5)
        await _until(nc, "S", 15)
        left = 0
        for _ in range(50):
            left = (await _ask(nc, "$JS.API.STREAM.INFO.W"))["state"]["messages"]
            if left == 0:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # (anything copied twice would show by now)
        state = (await _ask(nc, "$JS.API.STREAM.INFO.S"))["state"]
        return {
            "messages": state["messages"],
            "copied": sorted(await _payloads(nc, "S", state["last_seq"])),
            "origin left": left,
        }
    finally:
        await nc.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_a_durable_source_resumes_after_a_restart(sig: int) -> None:
    got = await both(lambda srv: _durable_scenario(srv, sig))
    want = {"messages": 15, "copied": sorted(f"w{i}" for i in range(15)), "origin left": 0}
    assert got["nats-server"] == want
    assert got["natsd"] == want


async def _nats_py_subject_transforms(srv: Restartable) -> dict[str, Any]:
    """nats.py's ``test_subject_transforms``: the origin's own transform, then the source's
    two; ten messages pending for a consumer after a second; the same stream asked for
    again with overlapping transforms is a config error (10147), not a name in use."""
    nc = await connect(srv)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(
            name="TRANSFORMS", subjects=["test", "foo"],
            subject_transform=SubjectTransform(src=">", dest="transformed.>"),
        )  # fmt: skip
        for i in range(10):
            await js.publish("test", f"{i}".encode())
        transforms = [
            SubjectTransform(src="transformed.>", dest="fromtest.transformed.>"),
            SubjectTransform(src="foo.>", dest="fromtest.foo.>"),
        ]
        await js.add_stream(
            name="SOURCING",
            sources=[StreamSource(name="TRANSFORMS", subject_transforms=transforms)],
        )
        await js.add_consumer("SOURCING", ConsumerConfig(durable_name="b"))
        await asyncio.sleep(1)
        pending = (await js.consumer_info("SOURCING", "b")).num_pending
        sub = await js.pull_subscribe("", "b", stream="SOURCING")
        msgs = await sub.fetch(10, timeout=5)
        got = [(m.subject, m.data) for m in msgs]
        overlap = [SubjectTransform(src=">", dest=">"), SubjectTransform(src=">", dest=">")]
        code = None
        try:
            await js.add_stream(
                name="SOURCING",
                sources=[StreamSource(name="TRANSFORMS", subject_transforms=overlap)],
            )
        except BadRequestError as e:
            code = e.err_code
        return {"pending": pending, "got": got, "code": code}
    finally:
        await nc.close()


async def test_nats_py_subject_transforms() -> None:
    got = await both(_nats_py_subject_transforms)
    want = {
        "pending": 10,
        "got": [("fromtest.transformed.test", f"{i}".encode()) for i in range(10)],
        "code": 10147,
    }
    assert got["nats-server"] == want
    assert got["natsd"] == want


async def _nats_py_opt_start_time(srv: Restartable) -> dict[str, Any]:
    """nats.py's ``test_stream_source_opt_start_time``: a source from a time between two
    pairs of messages copies the later pair."""
    nc = await connect(srv)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="SRC_TIME", subjects=["src.time.>"])
        for i in range(2):
            await js.publish(f"src.time.{i}", b"early")
        await asyncio.sleep(0.2)
        mid = datetime.datetime.now(datetime.UTC)
        await asyncio.sleep(0.2)
        for i in range(2):
            await js.publish(f"src.time.{i}", b"late")
        info = await js.add_stream(
            name="DEST_TIME", sources=[StreamSource(name="SRC_TIME", opt_start_time=mid)]
        )
        await asyncio.sleep(1)
        info = await js.stream_info("DEST_TIME")
        start = info.config.sources[0].opt_start_time if info.config.sources else None
        return {"messages": info.state.messages, "start": isinstance(start, datetime.datetime)}
    finally:
        await nc.close()


async def test_nats_py_opt_start_time() -> None:
    got = await both(_nats_py_opt_start_time)
    want = {"messages": 2, "start": True}
    assert got["nats-server"] == want
    assert got["natsd"] == want
