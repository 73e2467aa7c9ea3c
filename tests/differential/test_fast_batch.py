"""Fast-ingest batch publish (nats-server 2.14: ``allow_batched``, reply subjects
``<prefix>.<id>.<flow>.<gap>.<seq>.<op>.$FI``), nats-server 2.15.1 against natsd on one
server: every answer the publisher gets (flow acks, gaps, errors, the final PubAck) for
batches that run clean, skip, repeat, fail a check, carry duplicates or end with a marker,
and what the stream holds after them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from components import require_nats_server

from .harness import ServerPair
from .js_scenarios import JsRecorder, js_server_pair, run_scenario
from .test_jetstream_api import assert_same

pytestmark = [pytest.mark.differential, pytest.mark.timeout(180)]

T = 10.0
OPS = {"start": 0, "append": 1, "commit": 2, "eob": 3, "ping": 4}


@pytest.fixture(scope="module")
def js_pair() -> Iterator[ServerPair]:
    require_nats_server()
    with js_server_pair() as pair:
        yield pair


async def fast(
    js: JsRecorder,
    label: str,
    bid: str,
    msgs: list[tuple[int, str] | tuple[int, str, dict[str, str]]],
    flow: int = 10,
    gap: str = "fail",
    subject: str = "f.a",
) -> None:
    """Publish ``(batch seq, op[, headers])`` messages of batch ``bid``; record every answer
    the publisher's ``fb.<bid>.>`` subscription got, in order."""
    nc = js.nc
    got: list[Any] = []

    async def on(m: Any) -> None:
        got.append(json.loads(m.data) if m.data else "")

    sub = await nc.subscribe(f"fb.{bid}.>", cb=on)
    await nc.flush()
    for item in msgs:
        seq, op = item[0], item[1]
        headers = item[2] if len(item) > 2 else None  # type: ignore[misc]
        reply = f"fb.{bid}.{flow}.{gap}.{seq}.{OPS.get(op, op)}.$FI"
        await nc.publish(subject, b"m%d" % seq, reply=reply, headers=headers)
    await nc.flush()
    await asyncio.sleep(0.3)
    await sub.unsubscribe()
    js.log.append((label, got))


async def test_fast_batches(js_pair: ServerPair) -> None:
    async def sc(js: JsRecorder) -> None:
        await js.req("plain", "STREAM.CREATE.P", {"name": "P", "subjects": ["p.>"]}, timeout=T)
        await fast(js, "disabled", "d0", [(1, "commit")], subject="p.a")
        cfg = {"name": "F", "subjects": ["f.>"], "allow_batched": True, "allow_direct": True}
        await js.req("create", "STREAM.CREATE.F", cfg, timeout=T)
        await fast(js, "one", "one", [(1, "commit")])
        await fast(js, "clean 26", "n25", [(1, "start")] + [(i, "append") for i in range(2, 26)]
                   + [(26, "commit")])  # fmt: skip
        await fast(js, "eob", "eob", [(1, "start"), (2, "append"), (3, "append"), (4, "eob")],
                   flow=2)  # fmt: skip
        await fast(js, "gap fail", "gf", [(1, "start"), (2, "append"), (4, "append"),
                                          (5, "commit")])  # fmt: skip
        await fast(js, "gap ok", "go", [(1, "start"), (2, "append"), (4, "append"),
                                        (5, "commit")], gap="ok")  # fmt: skip
        await fast(js, "backward", "bw", [(1, "start"), (2, "append"), (2, "append")], gap="ok")
        await fast(js, "ping", "pg", [(1, "start"), (2, "append"), (3, "append"), (3, "ping"),
                                      (8, "ping")])  # fmt: skip
        await fast(js, "ping ok", "po", [(1, "start"), (2, "append"), (5, "ping"),
                                         (6, "commit")], gap="ok")  # fmt: skip
        await fast(js, "dups", "fd", [(1, "start", {"Nats-Msg-Id": "fd1"}),
                                      (2, "append", {"Nats-Msg-Id": "fd1"}),
                                      (3, "commit", {"Nats-Msg-Id": "fd2"})])  # fmt: skip
        await fast(js, "dup only", "dd", [(1, "commit", {"Nats-Msg-Id": "fd2"})])
        last = {"Nats-Expected-Last-Sequence": "1"}
        await fast(js, "first fails", "ff", [(1, "start", last), (2, "commit")])
        await fast(js, "second fails", "sf", [(1, "start"), (2, "append", last),
                                              (3, "commit")])  # fmt: skip
        await fast(js, "second fails ok", "so", [(1, "start"), (2, "append", last),
                                                 (3, "commit")], gap="ok")  # fmt: skip
        for label, reply_tail in (("op 9", "1.9"), ("gap maybe", None), ("seq 0", "0.0"),
                                  ("start at 2", "2.0"), ("append at 1", "1.1"),
                                  ("eob at 1", "1.3")):  # fmt: skip
            gap = "maybe" if reply_tail is None else "fail"
            tail = "1.0" if reply_tail is None else reply_tail
            got: list[Any] = []
            nc = js.nc
            inbox = nc.new_inbox()

            async def on(m: Any, got: list[Any] = got) -> None:
                got.append(json.loads(m.data))

            sub = await nc.subscribe(inbox + ".>", cb=on)
            await nc.publish("f.a", b"x", reply=f"{inbox}.bad.10.{gap}.{tail}.$FI")
            await nc.flush()
            await asyncio.sleep(0.2)
            await sub.unsubscribe()
            js.log.append((label, got))
        await fast(js, "unknown", "nobody", [(3, "append")])
        await fast(js, "id of 65", "x" * 65, [(1, "commit")])
        await js.req("state", "STREAM.INFO.F", timeout=T)

    ref, impl = await run_scenario(js_pair, sc, timeout=150)
    answers = dict(ref)
    assert answers["one"] == [{"stream": "F", "seq": 1, "batch": "one", "count": 1}]
    assert_same(ref, impl)
