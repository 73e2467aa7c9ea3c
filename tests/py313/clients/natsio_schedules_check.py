"""natsio-schedules 0.1.1 check: used as its README shows (one-shot, interval with TTL, cron
in a zone, a predefined alias, subject sampling, get / list / cancel, the atomic stop, the
consuming side's delivery_info) plus what it refuses. Prints a JSON summary. Times are
short (the @at one-shots a second or two ahead) and each firing is waited for, so the steps
are the same on any server that fires on time.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python natsio_schedules_check.py
"""

import asyncio
from datetime import timedelta

import natsio
from common import URL, Report, collect, mapped, run
from natsio.jetstream import ConsumerConfig, StreamConfig
from natsio.schedules import (
    HOURLY,
    ScheduleStreamConfig,
    after,
    create_schedule_stream,
    cron,
    delivery_info,
    every,
    schedules,
    schedules_from_stream,
)

R = Report("natsio-schedules 0.1.1")


def _entry(e):
    return {
        "subject": e.subject,
        "schedule": str(e.schedule),
        "target": e.target,
        "one_shot": e.is_one_shot,
        "interval": str(e.interval),
        "sequence": e.sequence,
    }


def _delivery(msg):
    info = delivery_info(msg)
    if info is None:
        return {"subject": msg.subject, "data": msg.data, "delivery": None}
    return {
        "subject": msg.subject,
        "data": msg.data,
        "scheduler": info.scheduler,
        "final": info.final,
        "next_run": info.next_run is not None,
    }


async def _count(js, stream, subject):
    info = await js.stream_info(stream, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


async def _wait(js, stream, subject, n, within=8.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        got = await _count(js, stream, subject)
        if got >= n or loop.time() > deadline:
            return got
        await asyncio.sleep(0.05)


async def main():
    nc = await natsio.connect(URL)
    si = nc.server_info
    R.note("server", {"version": si.get("version"), "api_lvl": si.get("api_lvl")})
    js = nc.jetstream()
    await R.step("js.api_level()", js.api_level())

    sched = await R.step(
        "create_schedule_stream SCHED",
        create_schedule_stream(
            js,
            ScheduleStreamConfig(name="SCHED", subjects=["schedules.>", "orders.>", "sensors.>"]),
        ),
    )
    if sched is None:
        sched = await R.step("schedules SCHED", schedules(js, "SCHED"))
    if sched is not None:
        await R.step(
            "create one-shot",
            sched.create(
                "schedules.orders.r1",
                after(timedelta(seconds=1.5)),
                target="orders.reminder",
                payload=b"ping",
            ),
        )
        await R.step(
            "create interval with ttl",
            sched.create(
                "schedules.heartbeat",
                every(timedelta(seconds=1)),
                target="orders.tick",
                ttl="5m",
                payload=b"tick",
            ),
        )
        await R.step(
            "create cron in a zone",
            sched.create(
                "schedules.report",
                cron("0 0 5 * * *"),
                target="orders.report",
                time_zone="Europe/Amsterdam",
            ),
        )
        await R.step(
            "create hourly", sched.create("schedules.hourly", HOURLY, target="orders.hourly")
        )
        await R.step("sensor reading", js.publish("sensors.raw", b"21.5C"))
        await R.step(
            "create sampling",
            sched.create(
                "schedules.sample", every("1s"), target="orders.sampled", source="sensors.raw"
            ),
        )
        await R.step(
            "create to cancel early",
            sched.create(
                "schedules.orders.r2",
                after(timedelta(seconds=30)),
                target="orders.reminder2",
                payload=b"later",
            ),
        )
        await R.step("get heartbeat", mapped(sched.get("schedules.heartbeat"), _entry))
        await R.step("get report", mapped(sched.get("schedules.report"), _entry))
        await R.step(
            "list schedules.>",
            lambda: mapped(
                collect(sched.list("schedules.>")), lambda es: sorted(e.subject for e in es)
            ),
        )
        await R.step("one-shot fired", _wait(js, "SCHED", "orders.reminder", 1))
        await R.step(
            "interval fired twice", mapped(_wait(js, "SCHED", "orders.tick", 2), lambda n: n >= 2)
        )
        await R.step("sampled", mapped(_wait(js, "SCHED", "orders.sampled", 1), lambda n: n >= 1))
        await R.step("get fired one-shot", sched.get("schedules.orders.r1"))
        await R.step(
            "stop_and_publish r2",
            mapped(
                sched.stop_and_publish(
                    "schedules.orders.r2", publish_to="orders.reminder2", payload=b"sent early"
                ),
                lambda a: a.seq > 0,
            ),
        )
        await R.step("get stopped r2", sched.get("schedules.orders.r2"))
        await R.step(
            "stop_and_publish again",
            sched.stop_and_publish("schedules.orders.r2", publish_to="orders.reminder2"),
        )
        await R.step("cancel heartbeat", sched.cancel("schedules.heartbeat"))
        await R.step("cancel sampling", sched.cancel("schedules.sample"))
        await R.step("cancel again", sched.cancel("schedules.heartbeat"))
        await R.step("cancel a plain subject", sched.cancel("sensors.raw"))
        await R.step("create bad target", sched.create("schedules.x", HOURLY, target="elsewhere"))
        await R.step(
            "create target is itself", sched.create("schedules.x", HOURLY, target="schedules.x")
        )
        await R.step(
            "create bad zone",
            sched.create(
                "schedules.x", cron("0 0 5 * * *"), target="orders.x", time_zone="Mars/Base"
            ),
        )
        consumer = await R.step(
            "create consumer orders.>",
            sched.stream.create_consumer(ConsumerConfig(filter_subject="orders.>")),
        )
        if consumer is not None:
            got = []
            for i in range(3):
                m = await R.step(f"consumer next {i}", mapped(consumer.next(), _delivery))
                got.append(m)
        await R.step(
            "list after",
            lambda: mapped(
                collect(sched.list("schedules.>")), lambda es: sorted(e.subject for e in es)
            ),
        )
    plain = await R.step(
        "create PLAIN", js.create_stream(StreamConfig(name="PLAIN", subjects=["plain.>"]))
    )
    if plain is not None:
        await R.step(
            "schedules_from_stream(PLAIN)", _async(lambda: schedules_from_stream(js, plain))
        )
    for name in ("SCHED", "PLAIN"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


async def _async(fn):
    return repr(fn())


if __name__ == "__main__":
    run(main, R)
