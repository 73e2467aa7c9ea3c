"""Input is processed in time slices shared round robin between connections
(connection/fairness.py): a burst cut into slices arrives intact and in order, and two bulk
publishers progress together instead of one waiting for the other."""

from __future__ import annotations

import asyncio

from nats.aio.msg import Msg

from .conftest import REAL

SIZES = [0, 1, 100, 5_000, 70_000, 3]


def _burst(n: int) -> tuple[bytes, list[tuple[str, bytes, str | None]]]:
    """n PUB/HPUB frames with payloads of mixed sizes, as one write, and what they carry."""
    frames = []
    want: list[tuple[str, bytes, str | None]] = []
    for i in range(n):
        size = SIZES[i % len(SIZES)]
        payload = bytes([65 + i % 26]) * size
        subj = f"burst.{i % 7}"
        if i % 5 == 0:
            hdr = f"NATS/1.0\r\nI: {i}\r\n\r\n".encode()
            frames.append(
                f"HPUB {subj} {len(hdr)} {len(hdr) + size}\r\n".encode() + hdr + payload + b"\r\n"
            )
            want.append((subj, payload, str(i)))
        else:
            frames.append(f"PUB {subj} {size}\r\n".encode() + payload + b"\r\n")
            want.append((subj, payload, None))
    return b"".join(frames), want


async def test_burst_processed_in_slices_arrives_intact(server, connect, raw) -> None:
    nc = await connect(server.client_url)
    got: list[Msg] = []
    done = asyncio.Event()
    data, want = _burst(3_000)

    async def cb(msg: Msg) -> None:
        got.append(msg)
        if len(got) == len(want):
            done.set()

    await nc.subscribe("burst.>", cb=cb)
    await nc.flush()
    before = server.embedded.reads.deferrals if not REAL else 0
    pub = await raw(server.port)
    await pub.connect()
    # One write of ~20 MiB: far more than one slice, so it is processed across many turns.
    await pub.send(data + b"PING\r\n")
    await pub.expect(b"PONG\r\n", timeout=30)
    await asyncio.wait_for(done.wait(), 30)
    assert [(m.subject, m.data, (m.headers or {}).get("I")) for m in got] == want
    if not REAL:
        assert server.embedded.reads.deferrals > before


async def test_two_bulk_publishers_share_the_server(server, connect, raw) -> None:
    """Each publisher writes 40,000 frames at once; when the first has been fully delivered
    the second must be well under way (round robin), not waiting behind it."""
    n = 40_000
    nc = await connect(server.client_url)
    counts = {"fair.a": 0, "fair.b": 0}
    at_first_done: dict[str, int] = {}
    done = asyncio.Event()

    async def cb(msg: Msg) -> None:
        counts[msg.subject] += 1
        if counts[msg.subject] == n and not at_first_done:
            at_first_done.update(counts)
        if counts["fair.a"] == n and counts["fair.b"] == n:
            done.set()

    await nc.subscribe("fair.*", cb=cb, pending_msgs_limit=4 * n)
    await nc.flush()
    pubs = [await raw(server.port) for _ in range(2)]
    for p in pubs:
        await p.connect()
    # A few SUB/UNSUB per message make the input expensive to process, like a busy client.
    bodies = [
        b"".join(
            b"PUB fair.%s 64\r\n%s\r\nSUB x.%d.* 9\r\nUNSUB 9\r\n" % (s, b"x" * 64, i)
            for i in range(n)
        )
        + b"PING\r\n"
        for s in (b"a", b"b")
    ]
    for p, body in zip(pubs, bodies, strict=True):
        p.writer.write(body)
    await asyncio.gather(*(p.writer.drain() for p in pubs))
    await asyncio.gather(*(p.expect(b"PONG\r\n", timeout=60) for p in pubs))
    await asyncio.wait_for(done.wait(), 60)
    slower = min(at_first_done.values())
    assert slower >= n // 2, at_first_done
