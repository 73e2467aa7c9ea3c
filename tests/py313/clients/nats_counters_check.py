"""nats-counters 0.1.0 check: used as its README shows. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python nats-counters_check.py
"""

from common import URL, Report, collect, mapped, run
from nats import counters
from nats.client import connect
from nats.jetstream import new as jetstream

R = Report("nats-counters 0.1.0")


async def main():
    nc = await connect(URL, timeout=5.0, allow_reconnect=False)
    info = nc.server_info
    R.note("server", {"version": info.version, "jetstream": info.jetstream})
    js = jetstream(nc)
    await R.step("account_info.api.level", lambda: _api_level(js))

    # README: create the counter stream with allow_msg_counter + allow_direct.
    stream = await R.step(
        "create_stream",
        js.create_stream(
            name="COUNTERS", subjects=["events.>"], allow_msg_counter=True, allow_direct=True
        ),
    )
    if stream is not None:
        R.note(
            "created_config",
            {
                "allow_msg_counter": stream.info.config.allow_msg_counter,
                "allow_direct": stream.info.config.allow_direct,
                "metadata": stream.info.config.metadata,
            },
        )
    counter = None
    if stream is not None:
        counter = await R.step("from_stream", _async(lambda: counters.from_stream(js, stream)))
    if counter is None:
        counter = await R.step("get_counter", counters.get_counter(js, "COUNTERS"))
    if counter is not None:
        await R.step("add +1", counter.add("events.orders", 1))
        await R.step("add +10", counter.add("events.orders", 10))
        await R.step("add -1", counter.add("events.orders", -1))
        await R.step("add big 2**70", counter.add("events.big", 2**70))
        await R.step("add big again 2**70", counter.add("events.big", 2**70))
        await R.step("load events.orders", counter.load("events.orders"))
        await R.step("get events.orders", counter.get("events.orders"))
        await R.step("load events.big", counter.load("events.big"))
        await R.step("load uninitialised", counter.load("events.none"))
        await R.step("get_multiple events.>", lambda: collect(counter.get_multiple(["events.>"])))
        await R.step(
            "get_multiple events.orders+missing",
            lambda: collect(counter.get_multiple(["events.orders", "events.missing"])),
        )
        await R.step("get_counter(COUNTERS)", mapped(counters.get_counter(js, "COUNTERS"), repr))
        # a non-integer increment goes straight to the server
        await R.step(
            "js.publish Nats-Incr=abc",
            js.publish("events.orders", b"", headers={"Nats-Incr": "abc"}),
        )
        await R.step("js.publish without Nats-Incr", js.publish("events.orders", b"x"))

    # Error paths the package documents.
    await R.step("get_counter(missing)", counters.get_counter(js, "NOPE"))
    await R.step(
        "create plain stream",
        mapped(js.create_stream(name="PLAIN", subjects=["plain.>"]), lambda s: s.name),
    )
    await R.step("get_counter(PLAIN) not a counter", counters.get_counter(js, "PLAIN"))

    for name in ("COUNTERS", "PLAIN"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


async def _api_level(js):
    ai = await js.account_info()
    return getattr(ai, "api", None) and ai.api.level


async def _async(fn):
    return fn()


if __name__ == "__main__":
    run(main, R)
