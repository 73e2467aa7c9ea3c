"""nats-jetstream 0.3.0 (nats.py's newer JetStream package) check: the level-2 features as
nats.py's own stream tests drive them (counters, async persistence, message schedules,
atomic batch publish): the same calls, each step's answer recorded. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python nats_jetstream_check.py
"""

import asyncio
from datetime import UTC, datetime, timedelta

from common import URL, Report, mapped, run
from nats.client import connect
from nats.jetstream import new as jetstream
from nats.jetstream.headers import (
    NATS_BATCH_COMMIT,
    NATS_BATCH_ID,
    NATS_BATCH_SEQUENCE,
    NATS_SCHEDULE,
    NATS_SCHEDULE_TARGET,
)

R = Report("nats-jetstream 0.3.0")


def _msg(m):
    return {
        "subject": m.subject,
        "data": m.data,
        "headers": dict(m.headers.items()) if m.headers else None,
    }


async def main():
    nc = await connect(URL, timeout=5.0, allow_reconnect=False)
    js = jetstream(nc)

    # counters (ADR-49)
    await R.step(
        "counter stream",
        mapped(
            js.create_stream(name="COUNTER", subjects=["counter.>"], allow_msg_counter=True),
            lambda s: s.info.config.allow_msg_counter,
        ),
    )
    for by in ("5", "3", "-2"):
        await R.step(
            f"incr {by}",
            mapped(js.publish("counter.x", b"", headers={"Nats-Incr": by}), lambda a: a.value),
        )

    # async persistence (ADR-56)
    await R.step(
        "persist_mode async",
        mapped(
            js.create_stream(
                name="ASYNC", subjects=["async.>"], num_replicas=1, persist_mode="async"
            ),
            lambda s: s.info.config.persist_mode,
        ),
    )
    await R.step(
        "publish async-persisted", mapped(js.publish("async.a", b"x"), lambda a: a.sequence)
    )

    # message schedules (ADR-51)
    sched = await R.step(
        "schedules stream",
        js.create_stream(name="SCHED", subjects=["sched.>", "target.>"], allow_msg_schedules=True),
    )
    if sched is not None:
        await R.step(
            "allow_msg_schedules", mapped(sched.get_info(), lambda i: i.config.allow_msg_schedules)
        )
        ack = await R.step(
            "publish @every",
            js.publish(
                "sched.every",
                b"",
                headers={NATS_SCHEDULE: "@every 5s", NATS_SCHEDULE_TARGET: "target.every"},
            ),
        )
        if ack is not None:
            await R.step("stored schedule", mapped(sched.get_message(ack.sequence), _msg))
        await R.step(
            "publish without target",
            js.publish("sched.notarget", b"", headers={NATS_SCHEDULE: "@every 5s"}),
        )
        when = datetime.now(UTC) + timedelta(seconds=1)
        await R.step(
            "publish @at",
            mapped(
                js.publish(
                    "sched.once",
                    b"hello",
                    headers={
                        NATS_SCHEDULE: "@at " + when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        NATS_SCHEDULE_TARGET: "target.once",
                    },
                ),
                lambda a: a.sequence,
            ),
        )
        await R.step("fired @at", _fired(sched, "target.once"), timeout=10)
        await R.step("schedule gone", sched.get_last_message_for_subject("sched.once"))

    # atomic batch publish (ADR-50)
    await R.step(
        "batch stream",
        mapped(
            js.create_stream(
                name="BATCH", subjects=["batch.>"], allow_atomic=True, allow_batched=True
            ),
            lambda s: (s.info.config.allow_atomic, s.info.config.allow_batched),
        ),
    )
    await R.step(
        "atomic stream", js.create_stream(name="BATCH_PUB", subjects=["bp.>"], allow_atomic=True)
    )
    await R.step(
        "batch first",
        mapped(
            js.client.request(
                "bp.a",
                b"one",
                headers={NATS_BATCH_ID: "batch-1", NATS_BATCH_SEQUENCE: "1"},
                timeout=2.0,
            ),
            lambda m: m.data,
        ),
    )
    await R.step(
        "batch second",
        js.client.publish(
            "bp.b", b"two", headers={NATS_BATCH_ID: "batch-1", NATS_BATCH_SEQUENCE: "2"}
        ),
    )
    await R.step(
        "batch commit",
        mapped(
            js.client.request(
                "bp.c",
                b"three",
                headers={
                    NATS_BATCH_ID: "batch-1",
                    NATS_BATCH_SEQUENCE: "3",
                    NATS_BATCH_COMMIT: "1",
                },
                timeout=2.0,
            ),
            lambda m: m.data,
        ),
    )
    for name in ("COUNTER", "ASYNC", "SCHED", "BATCH", "BATCH_PUB"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


async def _fired(stream, subject):
    while True:
        try:
            return _msg(await stream.get_last_message_for_subject(subject))
        except Exception:
            await asyncio.sleep(0.05)


if __name__ == "__main__":
    run(main, R)
