"""Server and account storage limits on the publish path, nats-server vs natsd.

nats-server refuses a publish once the server's ``max_file_store`` / ``max_memory_store``
is already passed (``insufficient resources``, 10023) or the account's ``max_file`` /
``max_mem`` is (``resource limits exceeded for account``, 10002), even for a stream with no
``max_bytes`` of its own. Both servers run the same config and the same publishes; the
number accepted and every PubAck must agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair, js_config_pair, run_client_both

pytestmark = [pytest.mark.differential, pytest.mark.timeout(60)]

SERVER_LIMITS = "jetstream { max_file_store: 1MB, max_memory_store: 1MB }\n"
ACCOUNT_LIMITS = """
jetstream {}
accounts {
  A: { jetstream: { max_file: 200KB, max_mem: 200KB }, users: [{user: a, password: a}] }
}
"""


def _pair(config: str) -> Iterator[ServerPair]:
    require_nats_server()
    with js_config_pair(config) as pair:
        yield pair


async def _fill(nc: Any) -> dict[str, Any]:
    """Publish 10 kB messages to a file and a memory stream until refused."""
    out: dict[str, Any] = {}
    for storage in ("file", "memory"):
        cfg = {"name": f"S{storage}", "subjects": [f"s{storage}.>"], "storage": storage}
        r = await nc.request(f"$JS.API.STREAM.CREATE.S{storage}", json.dumps(cfg).encode())
        created = json.loads(r.data)
        if "error" in created:
            out[storage] = {"create": created["error"]}
            continue
        acks: list[dict[str, Any]] = []
        for _ in range(300):
            r = await nc.request(f"s{storage}.x", b"x" * 10_000, timeout=5)
            ack = json.loads(r.data)
            acks.append(ack)
            if "error" in ack:
                break
        # The limit holds: a second try is refused the same way.
        r = await nc.request(f"s{storage}.x", b"y", timeout=5)
        info = json.loads((await nc.request(f"$JS.API.STREAM.INFO.S{storage}", b"")).data)
        out[storage] = {
            "accepted": len(acks) - 1,
            "refusal": acks[-1],
            "again": json.loads(r.data),
            "msgs": info["state"]["messages"],
        }
    return out


@pytest.fixture(scope="module")
def server_limits() -> Iterator[ServerPair]:
    yield from _pair(SERVER_LIMITS)


@pytest.fixture(scope="module")
def account_limits() -> Iterator[ServerPair]:
    yield from _pair(ACCOUNT_LIMITS)


async def test_server_max_store_refuses_publishes(server_limits: ServerPair) -> None:
    ref, impl = await run_client_both(server_limits, _fill, reference_must_succeed=True)
    assert ref == impl
    assert ref["file"]["refusal"]["error"]["err_code"] == 10023
    assert ref["memory"]["refusal"]["error"]["err_code"] == 10023
    assert ref["file"]["accepted"] > 50


async def test_account_limits_refuse_publishes(account_limits: ServerPair) -> None:
    ref, impl = await run_client_both(
        account_limits, _fill, reference_must_succeed=True, user="a", password="a"
    )
    assert ref == impl
    for storage in ("file", "memory"):
        assert "error" in ref[storage]["refusal"], ref
