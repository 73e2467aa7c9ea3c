"""Requests the monitor makes inside the server, as a client would: a reply subscription
in an account's sublist, the request published there, the answers gathered.

The console asks every server of a cluster through the system account's services
(``$SYS.REQ.SERVER.PING.<EP>``: each server answers for itself over the routes) and reads
a stream's messages through the account's JetStream API (``$JS.API.STREAM.MSG.GET``,
which a cluster forwards to the stream's leader), so what it shows is what those
services answer, on a single server and on a cluster alike.
"""

from __future__ import annotations

import asyncio
from typing import Final

from natsd.core.ids import Nuid
from natsd.router.account import Account
from natsd.router.publish import publish
from natsd.router.subscription import Subscription

__all__ = ["gather", "request"]

_nuid: Final = Nuid()


async def gather(
    account: Account, subject: bytes, data: bytes, *, timeout: float, want: int = 0
) -> list[bytes]:
    """Every answer to one request that arrives within ``timeout`` seconds, or sooner once
    ``want`` answers have (0: wait the whole time)."""
    inbox = b"_INBOX.natsd-monitor." + _nuid.next().encode()
    answers: list[bytes] = []
    done = asyncio.Event()

    def on_answer(
        sub: Subscription, subj: bytes, reply: bytes | None, hdr: bytes | None, body: bytes
    ) -> None:
        answers.append(bytes(body))
        if want and len(answers) >= want:
            done.set()

    sub = Subscription(inbox, None, b"monitor-" + inbox[-8:], callback=on_answer)
    account.sublist.insert(sub)
    try:
        publish(account.sublist, subject, inbox, None, data)
        if not (want and len(answers) >= want):
            try:
                await asyncio.wait_for(done.wait(), timeout)
            except TimeoutError:
                pass
    finally:
        account.sublist.remove(sub)
    return answers


async def request(account: Account, subject: bytes, data: bytes, *, timeout: float) -> bytes:
    """The first answer to a request; TimeoutError when none comes within ``timeout``."""
    answers = await gather(account, subject, data, timeout=timeout, want=1)
    if not answers:
        raise TimeoutError(subject.decode(errors="replace"))
    return answers[0]
