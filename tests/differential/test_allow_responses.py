"""``allow_responses`` permissions, compared between nats-server and natsd with nats-py.

A responder whose publish permissions deny everything may answer the requests it receives:
``allow_responses: true`` allows one response per request within two minutes, ``{max: N}``
N responses, ``{expires: D}`` only within D of the delivery. Anything else it publishes is a
permissions violation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from components import require_nats_server

from .harness import ServerPair, ServerProcess, server_pair

pytestmark = pytest.mark.differential

CONFIG = """
authorization {
  users = [
    {user: req, password: pw}
    {user: one, password: pw,
     permissions: {publish: {deny: ">"}, subscribe: ">", allow_responses: true}}
    {user: two, password: pw,
     permissions: {publish: {deny: ">"}, subscribe: ">", allow_responses: {max: 2}}}
    {user: brief, password: pw,
     permissions: {subscribe: ">", allow_responses: {expires: "1s"}}}
    {user: allowlist, password: pw,
     permissions: {publish: "ok.>", subscribe: ">", allow_responses: true}}
    {user: plain, password: pw, permissions: {publish: {deny: ">"}, subscribe: ">"}}
  ]
}
"""


@pytest.fixture(scope="module")
def responses_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with server_pair(config=CONFIG) as pair:
        yield pair


async def _connect(server: ServerProcess, user: str, errors: list[str] | None = None) -> Any:
    async def on_error(e: Exception) -> None:
        if errors is not None:
            errors.append(str(e))

    return await nats.connect(
        server.url,
        user=user,
        password="pw",
        allow_reconnect=False,
        connect_timeout=5,
        error_cb=on_error,
    )


async def sync(nc: Any) -> None:
    """Return once the server has processed everything ``nc`` published, and ``nc`` has
    read what the server answered before that. nats-py writes the PING of ``flush()``
    straight to the socket while publishes wait in its buffer, so one flush can overtake
    them; the second PING leaves after the buffer was written."""
    await nc.flush()
    await nc.flush()


async def _drain(sub: Any) -> list[str]:
    """Messages already queued on ``sub`` (the caller flushed after they were sent)."""
    out = []
    while True:
        try:
            msg = await sub.next_msg(timeout=0.05)
        except nats.errors.TimeoutError:
            return out
        out.append(msg.data.decode())


async def respond(
    server: ServerProcess,
    user: str,
    answers: int,
    *,
    wait: float = 0.0,
    requests: int = 1,
) -> dict[str, Any]:
    """``requests`` requests reach ``user``, which then (after ``wait`` seconds) publishes
    ``answers`` responses to each reply subject and one message elsewhere."""
    errors: list[str] = []
    req = await _connect(server, "req")
    resp = await _connect(server, user, errors)
    try:
        inbox = await req.subscribe("_INBOX.diff.>")
        svc = await resp.subscribe("svc")
        await sync(resp)
        await sync(req)
        for i in range(requests):
            await req.publish("svc", b"q", reply=f"_INBOX.diff.{i}")
        msgs = [await svc.next_msg(timeout=5) for _ in range(requests)]
        if wait:
            # The behaviour under test is time itself: responses after ``expires``.
            await asyncio.sleep(wait)
        for m in msgs:
            for k in range(answers):
                await resp.publish(m.reply, f"{m.reply}#{k}".encode())
        await resp.publish("ok.elsewhere", b"x")
        await resp.publish("elsewhere", b"x")
        # Errors for these publishes come before the PONG on the responder's connection,
        # and every delivery to the requester before the PONG on its own.
        await sync(resp)
        await sync(req)
        return {"received": sorted(await _drain(inbox)), "errors": errors}
    finally:
        for nc in (resp, req):
            with contextlib.suppress(Exception):
                await nc.close()


def _denied(subject: str) -> str:
    # nats-py lower-cases the -ERR text it hands to error_cb.
    return f'nats: permissions violation for publish to "{subject}"'.lower()


async def both(pair: ServerPair, *args: Any, **kw: Any) -> dict[str, Any]:
    ref = await respond(pair.ref, *args, **kw)
    impl = await respond(pair.impl, *args, **kw)
    assert impl == ref
    return impl


async def test_allow_responses_true_allows_one_response(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "one", 2)
    assert got["received"] == ["_INBOX.diff.0#0"]
    assert got["errors"] == [
        _denied("_INBOX.diff.0"),
        _denied("ok.elsewhere"),
        _denied("elsewhere"),
    ]


async def test_allow_responses_max_two(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "two", 3, requests=2)
    assert got["received"] == [
        "_INBOX.diff.0#0",
        "_INBOX.diff.0#1",
        "_INBOX.diff.1#0",
        "_INBOX.diff.1#1",
    ]
    assert got["errors"] == [
        _denied("_INBOX.diff.0"),
        _denied("_INBOX.diff.1"),
        _denied("ok.elsewhere"),
        _denied("elsewhere"),
    ]


async def test_allow_responses_within_expiry(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "brief", 1)
    assert got["received"] == ["_INBOX.diff.0#0"]


async def test_allow_responses_after_expiry(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "brief", 1, wait=1.5)
    assert got["received"] == []
    assert got["errors"][0] == _denied("_INBOX.diff.0")


async def test_allow_responses_keeps_the_allow_list(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "allowlist", 1)
    assert got["received"] == ["_INBOX.diff.0#0"]
    assert got["errors"] == [_denied("elsewhere")]


async def test_without_allow_responses_replies_are_denied(responses_pair: ServerPair) -> None:
    got = await both(responses_pair, "plain", 1)
    assert got["received"] == []
    assert got["errors"][0] == _denied("_INBOX.diff.0")
