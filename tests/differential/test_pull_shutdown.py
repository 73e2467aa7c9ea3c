"""A server's shutdown tells the waiting pull requests of the consumers that end with it:
``409 Server Shutdown`` with what each still wanted (nats-server's ``signalPullConsumers``).
A client that waits on a pull request learns from it to ask again once reconnected (the
ordered consumer of nats.py's ``nats-jetstream`` package stalls without it). nats-server
and natsd, each stopped with SIGTERM, send the same status to the same requests."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import nats
import pytest
from components import require_nats_server

from .harness import ServerProcess, start_server

pytestmark = pytest.mark.differential


async def _waiting_then_shutdown(server: ServerProcess) -> list[tuple[str, str, dict[str, str]]]:
    nc = await nats.connect(server.url, allow_reconnect=False)
    got: list[tuple[str, str, dict[str, str]]] = []
    try:
        await nc.request(
            "$JS.API.STREAM.CREATE.S", json.dumps({"name": "S", "subjects": ["s.>"]}).encode()
        )
        for name, durable in (("D", True), ("E", False)):
            cfg: dict[str, Any] = {"name": name, "ack_policy": "explicit"}
            if durable:
                cfg["durable_name"] = name
            await nc.request(
                f"$JS.API.CONSUMER.CREATE.S.{name}",
                json.dumps({"stream_name": "S", "config": cfg}).encode(),
            )
        await nc.publish("s.a", b"one")
        for name, batch in (("D", 10), ("E", 3)):
            inbox = f"pulls.{name}"

            async def on(m: Any, name: str = name) -> None:
                status = (m.headers or {}).get("Status", "")
                desc = (m.headers or {}).get("Description", "")
                rest = {k: v for k, v in (m.headers or {}).items()
                        if k not in ("Status", "Description")}  # fmt: skip
                got.append((name, f"{status} {desc}".strip() or m.data.decode(), rest))

            await nc.subscribe(inbox, cb=on)
            req = {"batch": batch, "expires": 30_000_000_000}
            await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.S.{name}", json.dumps(req).encode(),
                             reply=inbox)  # fmt: skip
        await nc.flush()
        await asyncio.sleep(0.3)
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(asyncio.to_thread(server.proc.wait), 15)
        await asyncio.sleep(0.1)
    finally:
        await nc.close()
    return sorted(got)


async def test_waiting_pull_requests_hear_of_the_shutdown(tmp_path: Path) -> None:
    require_nats_server()
    out = []
    for kind in ("nats-server", "natsd"):
        store = tmp_path / kind
        server = start_server(kind, ["-js", "-sd", str(store)], log_dir=tmp_path)
        try:
            out.append(await _waiting_then_shutdown(server))
        finally:
            server.stop()
    ref, impl = out
    # the first message went to D's request (batch 10, 9 left) or E's (batch 3, 2 left)
    assert [g[1] for g in ref].count("409 Server Shutdown") == 2, ref
    assert impl == ref
