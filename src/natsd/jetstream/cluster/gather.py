"""Ask other servers and wait for their answers: the one scatter-gather of clustered JetStream.

The meta leader answers two requests with data that lives on other servers: ``STREAM.LIST``
(each stream's state is on its server) and ``$JS.API.INFO`` (each server's usage). Both send
requests whose replies come to a private inbox (``<inbox>.<token>``) and wait until every
expected answer is in or ``timeout`` passes; what came back is used, what did not is the
caller's to report.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from natsd.core.ids import Nuid
from natsd.router.sublist import Sublist
from natsd.router.subscription import Subscription

__all__ = ["gather"]

_nuid = Nuid()

# (token after the inbox, reply payload) -> True once every expected answer is in
OnReply = Callable[[bytes, bytes], bool]


async def gather(
    sublist: Sublist[Subscription],
    send: Callable[[bytes], None],
    on_reply: OnReply,
    timeout: float,
) -> None:
    """``send(inbox)`` publishes the requests with replies to ``<inbox>.<token>``;
    ``on_reply`` takes each answer. Returns once ``on_reply`` says all are in, or after
    ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    inbox = b"_INBOX.natsd." + _nuid.next().encode()
    cut = len(inbox) + 1

    def reply(
        sub: Subscription, subject: bytes, rep: bytes | None, hdr: bytes | None, data: bytes
    ) -> None:
        if not done.done() and on_reply(subject[cut:], data):
            done.set_result(None)

    sub = Subscription(inbox + b".*", None, b"js-gather", callback=reply)
    sublist.insert(sub)
    try:
        send(inbox)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(done), timeout)
    finally:
        sublist.remove(sub)
