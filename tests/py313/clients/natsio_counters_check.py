"""natsio-counters 0.1.2 check: used as its README shows. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python natsio-counters_check.py
"""

import natsio
from common import URL, Report, collect, mapped, run
from natsio.counters import CounterConfig, counter_from_stream, create_counter, get_counter
from natsio.jetstream import StreamConfig

R = Report("natsio-counters 0.1.2")


async def main():
    nc = await natsio.connect(URL)
    si = nc.server_info
    R.note("server", {"version": si.get("version"), "api_lvl": si.get("api_lvl")})
    js = nc.jetstream()
    await R.step("js.api_level()", js.api_level())

    # README: create_counter forces allow_msg_counter + allow_direct.
    counter = await R.step(
        "create_counter COUNTS",
        create_counter(js, CounterConfig(name="COUNTS", subjects=["events.>"])),
    )
    if counter is None:
        counter = await R.step("get_counter COUNTS", get_counter(js, "COUNTS"))
    if counter is not None:
        await R.step("add +1", counter.add("events.orders", 1))
        await R.step("add +10", counter.add("events.orders", 10))
        await R.step("add -4", counter.add("events.orders", -4))
        await R.step("add 0", counter.add("events.orders", 0))
        await R.step("add big 2**80", counter.add("events.big", 2**80))
        await R.step("add big -(2**81)", counter.add("events.big", -(2**81)))
        await R.step("load events.orders", counter.load("events.orders"))
        await R.step("get events.orders", counter.get("events.orders"))
        await R.step("load events.big", counter.load("events.big"))
        await R.step("load uninitialised", counter.load("events.none"))
        await R.step("get_multiple [events.>]", lambda: collect(counter.get_multiple(["events.>"])))
        await R.step(
            "get_multiple [events.orders, events.missing]",
            lambda: collect(counter.get_multiple(["events.orders", "events.missing"])),
        )
        await R.step(
            "get_multiple [nothing.here] (no match)",
            lambda: collect(counter.get_multiple(["events.zzz"])),
        )
        await R.step("get_counter COUNTS", mapped(get_counter(js, "COUNTS"), repr))
        await R.step("add on uncovered subject", counter.add("other.x", 1), timeout=10)
        await R.step(
            "create_counter COUNTS again (idempotent)",
            mapped(create_counter(js, CounterConfig(name="COUNTS", subjects=["events.>"])), repr),
        )

    await R.step("get_counter missing", get_counter(js, "NOPE"))
    plain = await R.step(
        "create PLAIN",
        mapped(js.create_stream(StreamConfig(name="PLAIN", subjects=["plain.>"])), lambda s: s),
    )
    if plain is not None:
        await R.step("counter_from_stream(PLAIN)", _async(lambda: counter_from_stream(js, plain)))
    for name in ("COUNTS", "PLAIN"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


async def _async(fn):
    return fn()


if __name__ == "__main__":
    run(main, R)
