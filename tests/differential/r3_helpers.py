"""Helpers of the three-server differential scenarios (three nats-server processes, then
three natsd, on loopback): requests retried while a group elects, and one scenario run on
a fresh cluster of each kind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from proc_cluster import ProcCluster, running

T = TypeVar("T")

# "no suitable peers" and "JetStream not ready" style answers while a group elects
_ELECTING = (10008, 10076)


async def ask(nc: Any, subject: str, body: Any = None) -> Any:
    """A JetStream API request (``body``: JSON, raw bytes or nothing), asked again while
    the answer is a timeout or a group still electing."""
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    for _ in range(100):
        try:
            out = json.loads((await nc.request(subject, data, timeout=2)).data)
            if "error" not in out or out["error"].get("err_code") not in _ELECTING:
                return out
        except Exception:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"{subject}: no answer")


async def publish(nc: Any, subject: str, data: bytes, headers: dict[str, str]) -> Any:
    """A JetStream publish retried (same headers, a Nats-Msg-Id among them) until a leader
    stores it."""
    for _ in range(100):
        try:
            ack = json.loads((await nc.request(subject, data, headers=headers, timeout=1)).data)
            if "seq" in ack:
                return ack
        except Exception:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"no leader took {subject}")


def on_three(
    kind: str, tmp_path: Path, scenario: Callable[[ProcCluster], Coroutine[Any, Any, T]]
) -> T:
    """``scenario`` on a fresh three-server JetStream cluster of ``kind``."""
    c = ProcCluster(
        tmp_path / kind, 3, kinds=[kind] * 3, names=[f"{kind}-{i}" for i in range(3)],
        jetstream=[True] * 3,
    )  # fmt: skip
    with running(c) as started:
        return asyncio.run(scenario(started))
