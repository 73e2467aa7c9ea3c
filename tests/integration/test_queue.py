"""Queue groups: each message goes to exactly one member of a group."""

from __future__ import annotations

import asyncio
from collections import Counter

from .conftest import wait_for


async def test_queue_group_exactly_once_and_spread(server, connect) -> None:
    n = 300
    members = [await connect(server.client_url, name=f"member-{i}") for i in range(3)]
    plain_nc = await connect(server.client_url, name="plain")
    pub = await connect(server.client_url, name="pub")
    per_member: list[list[bytes]] = [[] for _ in members]
    plain: list[bytes] = []

    for i, nc in enumerate(members):

        async def cb(msg, i=i) -> None:
            per_member[i].append(msg.data)

        await nc.subscribe("work.items", queue="workers", cb=cb)
        await nc.flush()

    async def plain_cb(msg) -> None:
        plain.append(msg.data)

    await plain_nc.subscribe("work.items", cb=plain_cb)
    await plain_nc.flush()

    for i in range(n):
        await pub.publish("work.items", str(i).encode())
    await pub.flush()

    await wait_for(
        lambda: sum(map(len, per_member)) >= n and len(plain) >= n,
        timeout=10,
        what=lambda: f"{n} deliveries; have {[len(m) for m in per_member]} {len(plain)}",
    )
    await asyncio.sleep(0.1)
    everything = [d for m in per_member for d in m]
    counts = Counter(everything)
    assert len(everything) == n, "queue members together got each message exactly once"
    assert set(counts) == {str(i).encode() for i in range(n)}
    assert max(counts.values()) == 1
    assert sorted(plain, key=int) == [str(i).encode() for i in range(n)]
    assert plain == [str(i).encode() for i in range(n)], "plain sub keeps publish order"
    for i, got in enumerate(per_member):
        # Random choice among 3: each member's share is ~100; 30 is far outside any fluke.
        assert len(got) >= 30, f"member {i} got only {len(got)} of {n}"


async def test_two_queue_groups_each_get_every_message(server, connect) -> None:
    nc = await connect(server.client_url)
    pub = await connect(server.client_url)
    groups: dict[str, list[bytes]] = {"g1": [], "g2": []}
    for g in groups:
        for _ in range(2):

            async def cb(msg, g=g) -> None:
                groups[g].append(msg.data)

            await nc.subscribe("jobs", queue=g, cb=cb)
    await nc.flush()
    for i in range(50):
        await pub.publish("jobs", str(i).encode())
    await pub.flush()
    await wait_for(lambda: len(groups["g1"]) >= 50 and len(groups["g2"]) >= 50)
    await asyncio.sleep(0.05)
    for g, got in groups.items():
        assert sorted(got, key=int) == [str(i).encode() for i in range(50)], g


async def test_queue_member_leaving_shifts_work_to_the_rest(server, connect) -> None:
    a = await connect(server.client_url)
    b = await connect(server.client_url)
    pub = await connect(server.client_url)
    sa = await a.subscribe("q.leave", queue="g")
    sb = await b.subscribe("q.leave", queue="g")
    await a.flush()
    await b.flush()
    await sa.unsubscribe()
    await a.flush()
    for i in range(20):
        await pub.publish("q.leave", str(i).encode())
    await pub.flush()
    got = [await sb.next_msg(timeout=2) for _ in range(20)]
    assert sorted(int(m.data) for m in got) == list(range(20))


async def test_queue_wildcard_subscription(server, connect) -> None:
    nc = await connect(server.client_url)
    pub = await connect(server.client_url)
    s1 = await nc.subscribe("orders.*", queue="proc")
    s2 = await nc.subscribe("orders.*", queue="proc")
    await nc.flush()
    for i in range(40):
        await pub.publish(f"orders.{i}", b"o")
    await pub.publish("orders.x.y", b"not-matching")
    await pub.flush()
    await wait_for(lambda: s1.pending_msgs + s2.pending_msgs >= 40)
    await asyncio.sleep(0.05)
    assert s1.pending_msgs + s2.pending_msgs == 40
