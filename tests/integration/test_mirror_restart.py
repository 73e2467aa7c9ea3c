"""A mirror across a restart of its server (stopped cleanly or killed), against nats-server:
it resumes after the last sequence it holds, copies what the origin took meanwhile and
while it comes back, and holds each origin message once, at the origin's sequence, with
the origin's timestamp."""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import pytest
from nats.js.api import StreamSource

from .restarts import Restartable, both, connect, wait_reconnected

pytestmark = pytest.mark.timeout(120)


async def _ask(nc: Any, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    msg = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=5)
    return dict(json.loads(msg.data))


async def _until(nc: Any, stream: str, last_seq: int, wait: float = 20.0) -> dict[str, Any]:
    st: dict[str, Any] = {}
    for _ in range(int(wait / 0.1)):
        st = (await _ask(nc, f"$JS.API.STREAM.INFO.{stream}"))["state"]
        if st["last_seq"] >= last_seq:
            return st
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} stopped at {st}")


async def _messages(nc: Any, stream: str, last: int) -> list[tuple[int, str, str, str]]:
    out = []
    for seq in range(1, last + 1):
        m = await _ask(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" in m:
            msg = m["message"]
            out.append((msg["seq"], msg["subject"], msg["data"], msg["time"]))
    return out


async def _scenario(srv: Restartable, sig: int) -> dict[str, Any]:
    nc = await connect(srv)
    try:
        await _ask(nc, "$JS.API.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        await _ask(nc, "$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "O"}})
        for i in range(20):
            await nc.request("o.a", b"before %d" % i, timeout=5)
        await _until(nc, "M", 20)
        await srv.restart(sig)
        await wait_reconnected(nc)
        for i in range(10):
            await nc.request("o.b", b"after %d" % i, timeout=5)
        state = await _until(nc, "M", 30)
        origin = await _messages(nc, "O", 30)
        mirror = await _messages(nc, "M", 30)
        return {"state": {k: state[k] for k in ("messages", "first_seq", "last_seq")},
                "same": origin == mirror}  # fmt: skip
    finally:
        await nc.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
async def test_a_mirror_resumes_after_a_restart(sig: int) -> None:
    got = await both(lambda srv: _scenario(srv, sig))
    want = {"state": {"messages": 30, "first_seq": 1, "last_seq": 30}, "same": True}
    assert got["nats-server"] == want
    assert got["natsd"] == want


async def _nats_py_mirror_removal(srv: Restartable) -> dict[str, Any]:
    """nats.py's own ``test_stream_mirror_removal``: a mirror caught up within half a
    second, then promoted by an update without ``mirror``."""
    nc = await connect(srv)
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="SOURCE", subjects=["source.>"])
        for i in range(5):
            await js.publish(f"source.{i}", b"x")
        await js.add_stream(name="MIRROR", mirror=StreamSource(name="SOURCE"))
        await asyncio.sleep(0.5)
        info = await js.stream_info("MIRROR")
        before = (info.state.messages, info.config.mirror.name if info.config.mirror else None)
        info = await js.update_stream(info.config.evolve(mirror=None))
        after = (info.state.messages, info.config.mirror, info.config.subjects)
        return {"before": before, "after": after}
    finally:
        await nc.close()


async def test_nats_py_mirror_removal() -> None:
    got = await both(_nats_py_mirror_removal)
    want = {"before": (5, "SOURCE"), "after": (5, None, ["MIRROR"])}
    assert got["nats-server"] == want
    assert got["natsd"] == want
