"""The fault suite's sourcing workload (issue 38): two origin streams ``FO1`` and ``FO2`` and a
workqueue origin ``FOW``, a stream ``FSRC`` sourcing the three and a mirror ``FM`` of ``FO1``,
every one as replicated as the run's stream. The workqueue origin keeps a durable
flow-control consumer for the copy (ADR-60): it drains as the copy acknowledges, and what it
took is copied once, faults or not. ``SourcePublisher`` publishes into the origins through
the faults, each message with a payload of its own and a ``Nats-Msg-Id``, retried until
acknowledged;
``check_sourcing`` then waits for the copies to catch up and reads them back through the
cluster: the sourcing stream holds each origin message exactly once (with the
``Nats-Stream-Source`` naming its origin and sequence), the mirror holds the first origin
message for message, at the same sequences."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Final

from nats.aio.client import Client as NATS

from faults.workload import _within, api, create_feature_stream, until_acked
from natsd.core.headers import parse_headers

ORIGINS: Final = ("FO1", "FO2")
WORKQUEUE: Final = "FOW"
SOURCING_STREAM: Final = "FSRC"
MIRROR_STREAM: Final = "FM"
# (copies first)
SOURCING_STREAMS: Final = (SOURCING_STREAM, MIRROR_STREAM, *ORIGINS, WORKQUEUE)
# A copy may be in its retry backoff when the faults end (a failed consumer request waits
# up to 30 s, then 10 s more per failure, up to two minutes): the check waits this long.
CATCH_UP: Final = 240.0


@dataclass
class SourcePublisher:
    nc: NATS
    sent: dict[str, str] = field(default_factory=dict)  # payload -> origin stream
    acked: set[str] = field(default_factory=set)
    stopping: bool = False
    give_up_at: float = 0.0

    async def run(self, rng: random.Random) -> None:
        n = 0
        while not self.stopping:
            origin = rng.choice((*ORIGINS, WORKQUEUE))
            payload = f"{origin}-{n}"
            self.sent[payload] = origin
            headers = {"Nats-Msg-Id": payload}
            if await until_acked(self.nc, f"{origin.lower()}.m", payload.encode(), headers,
                                 self.trying):  # fmt: skip
                self.acked.add(payload)
            n += 1
            await asyncio.sleep(0.01)

    def trying(self) -> bool:
        return not self.stopping or time.monotonic() < self.give_up_at

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopping = True
        self.give_up_at = time.monotonic() + 10
        await asyncio.wait_for(task, 30)


async def create_sourcing_streams(nc: NATS, replicas: int) -> None:
    """The origins (each with a publish answered: their groups have leaders before the
    copies ask them for consumers), then the sourcing stream and the mirror."""
    for name in (*ORIGINS, WORKQUEUE):
        extra: dict[str, Any] = {"retention": "workqueue"} if name == WORKQUEUE else {}
        if name == ORIGINS[0]:
            extra["allow_direct"] = True  # (its mirror gets mirror_direct: check_mirror_direct)
        await create_feature_stream(nc, name, [f"{name.lower()}.>"], replicas, **extra)
        ok = await until_acked(nc, f"{name.lower()}.w", b"", {}, _within(30.0))
        assert ok, f"{name} took no publish within 30 s"
    cfg = {"name": SOURCING_STREAM, "num_replicas": replicas, "storage": "file",
           "sources": [{"name": o} for o in (*ORIGINS, WORKQUEUE)]}  # fmt: skip
    await api(nc, f"$JS.API.STREAM.CREATE.{SOURCING_STREAM}", cfg, 30)
    cfg = {"name": MIRROR_STREAM, "num_replicas": replicas, "storage": "file",
           "mirror": {"name": ORIGINS[0]}}  # fmt: skip
    await api(nc, f"$JS.API.STREAM.CREATE.{MIRROR_STREAM}", cfg, 30)


async def _messages(nc: NATS, stream: str) -> list[dict[str, Any]]:
    info = await api(nc, f"$JS.API.STREAM.INFO.{stream}", None, 60)
    state = info["state"]
    out = []
    if not state["messages"]:
        return out
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        m = await api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq}, 60,
                      done=(10037,))  # fmt: skip
        if "message" in m:
            out.append(m["message"])
    return out


async def _last_seq(nc: NATS, stream: str) -> int:
    info = await api(nc, f"$JS.API.STREAM.INFO.{stream}", None, 60)
    return int(info["state"]["last_seq"])


async def check_sourcing(nc: NATS, pub: SourcePublisher) -> str:
    origin_msgs = {}
    for name in ORIGINS:
        origin_msgs[name] = [m for m in await _messages(nc, name) if m["subject"].endswith(".m")]
    held = sum(len(v) for v in origin_msgs.values())
    # the copies catch up (the sourcing stream also holds the origins' warm-up publishes,
    # and at least what the workqueue acknowledged), and the workqueue drains
    queued = {p for p in pub.acked if pub.sent[p] == WORKQUEUE}
    want = held + len(ORIGINS) + 1 + len(queued)
    mirror_last = await _last_seq(nc, ORIGINS[0])
    deadline = time.monotonic() + CATCH_UP
    while True:
        info = await api(nc, f"$JS.API.STREAM.INFO.{SOURCING_STREAM}", None, 60)
        copied = info["state"]["messages"]
        mirrored = await _last_seq(nc, MIRROR_STREAM)
        wq = await api(nc, f"$JS.API.STREAM.INFO.{WORKQUEUE}", None, 60)
        left = wq["state"]["messages"]
        if copied >= want and mirrored >= mirror_last and left == 0:
            break
        assert time.monotonic() < deadline, (
            f"{SOURCING_STREAM} holds {copied} of {want}, {MIRROR_STREAM} is at {mirrored} "
            f"of {mirror_last}, {WORKQUEUE} holds {left}: {info.get('sources')}"
        )
        await asyncio.sleep(1.0)
    await asyncio.sleep(2.0)  # (anything copied twice would show by now)
    sourced = [m for m in await _messages(nc, SOURCING_STREAM) if m["subject"].endswith(".m")]
    payloads = [base64.b64decode(m["data"]).decode() for m in sourced]
    assert len(payloads) == len(set(payloads)), "an origin message copied twice"
    for origin, msgs in origin_msgs.items():
        want_payloads = {base64.b64decode(m["data"]).decode() for m in msgs}
        got = {p for p in payloads if pub.sent.get(p) == origin}
        assert got == want_payloads, (
            f"{origin}: missing {sorted(want_payloads - got)[:5]}, "
            f"extra {sorted(got - want_payloads)[:5]}"
        )
    assert pub.acked <= set(payloads), f"acknowledged, not copied: {pub.acked - set(payloads)}"
    from_wq = {p for p in payloads if pub.sent.get(p) == WORKQUEUE}
    assert all(p in pub.sent for p in payloads), "a copied message nobody sent"
    by_payload = {base64.b64decode(m["data"]).decode(): m for o in origin_msgs.values() for m in o}
    for m in sourced:
        _, _, h = parse_headers(base64.b64decode(m["hdrs"]))
        name, seq = h["Nats-Stream-Source"][0].split(" ")[:2]
        payload = base64.b64decode(m["data"]).decode()
        if pub.sent[payload] == WORKQUEUE:
            assert name == WORKQUEUE  # (the workqueue gave its messages away: no seq to check)
            continue
        origin = by_payload[payload]
        assert (name, int(seq)) == (pub.sent[payload], origin["seq"])
    mirror = await _messages(nc, MIRROR_STREAM)
    first = await _messages(nc, ORIGINS[0])
    strip = [(m["seq"], m["subject"], m.get("data"), m["time"]) for m in first]
    assert [(m["seq"], m["subject"], m.get("data"), m["time"]) for m in mirror] == strip, (
        f"{MIRROR_STREAM} differs from {ORIGINS[0]}"
    )
    by = await check_mirror_direct(nc, first)
    return (f"sourcing {SOURCING_STREAM}: {len(payloads)} origin messages copied once each "
            f"({len(pub.acked)} acknowledged; {len(from_wq)} from workqueue {WORKQUEUE}, now "
            f"empty); mirror {MIRROR_STREAM}: {len(mirror)} messages, as {ORIGINS[0]}; "
            f"direct gets of {ORIGINS[0]} answered by {by}")  # fmt: skip


async def check_mirror_direct(nc: NATS, origin: list[dict[str, Any]]) -> list[str]:
    """Every message of the first origin read by direct get: the origin and its mirror
    (``mirror_direct``) answer in one queue group, each with the origin's message (a
    mirror's follower may be a moment behind: a miss is asked again for a while)."""
    answered: set[str] = set()
    for m in origin:
        deadline = time.monotonic() + 20.0
        while True:
            got = await nc.request(f"$JS.API.DIRECT.GET.{ORIGINS[0]}",
                                   json.dumps({"seq": m["seq"]}).encode(), timeout=10)  # fmt: skip
            h = got.headers or {}
            if h.get("Nats-Sequence") == str(m["seq"]):
                assert h.get("Nats-Subject") == m["subject"], (m, h)
                assert got.data == base64.b64decode(m.get("data", "")), (m, got.data)
                answered.add(h.get("Nats-Stream", ""))
                break
            assert time.monotonic() < deadline, f"direct get of {m['seq']}: {h} {got.data!r}"
            await asyncio.sleep(0.2)
    return sorted(answered)
