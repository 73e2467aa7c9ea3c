"""nats-jetstream 0.3.0 (nats.py's newer JetStream package) check: mirrors and sources as
nats.py's own stream tests drive them (``test_create_mirror_stream``: a mirror made before
its origin has messages, caught up within half a second; a stream sourcing two streams,
one through transforms; ``test_stream_source_with_consumer``: a source fed by a durable
consumer of the user's), each step's answer recorded. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python nats_jetstream_copies_check.py
"""

import asyncio

from common import URL, Report, mapped, run
from nats.client import connect
from nats.jetstream import StreamConsumerSource, StreamSource
from nats.jetstream import new as jetstream

R = Report("nats-jetstream 0.3.0 (mirrors and sources)")


def _copy(info):
    """What a copy's STREAM.INFO says, without times."""
    blocks = []
    if info.mirror is not None:
        blocks.append(("mirror", info.mirror.name, info.mirror.lag))
    for s in info.sources or []:
        blocks.append(("source", s.name, s.lag))
    return {"messages": info.state.messages, "last_seq": info.state.last_sequence,
            "blocks": sorted(blocks)}


async def main():
    nc = await connect(URL, timeout=5.0, allow_reconnect=False)
    js = jetstream(nc)

    await R.step("source stream", js.create_stream(name="source", subjects=["SOURCE.*"]))
    mirror = await R.step(
        "mirror stream",
        mapped(js.create_stream(name="mirror", mirror={"name": "source"}),
               lambda s: s.info.config.mirror.name),
    )
    await R.step("publish", mapped(js.publish("SOURCE.A", b"hello"), lambda a: a.sequence))
    await asyncio.sleep(0.5)
    if mirror is not None:
        m = await js.get_stream("mirror")
        await R.step("mirror info", mapped(m.get_info(), _copy))
        await R.step("mirror message", mapped(m.get_message(1), lambda x: (x.subject, x.data)))

    await R.step("east", js.create_stream(name="EAST", subjects=["east.>"]))
    await R.step("west", js.create_stream(name="WEST", subjects=["west.>"]))
    for subject in ("east.a", "west.b", "east.c"):
        await R.step(f"publish {subject}", mapped(js.publish(subject, b"x"), lambda a: a.sequence))
    await R.step(
        "sourcing stream",
        mapped(
            js.create_stream(
                name="BOTH",
                sources=[
                    {"name": "EAST"},
                    {"name": "WEST",
                     "subject_transforms": [{"src": "west.>", "dest": "both.west.>"}]},
                ],
            ),
            lambda s: [x.name for x in s.info.config.sources],
        ),
    )
    await asyncio.sleep(1.0)
    both = await js.get_stream("BOTH")
    await R.step("sourcing info", mapped(both.get_info(), _copy))
    await R.step(
        "sourced subjects",
        mapped(both.get_info(subjects_filter=">"),
               lambda i: sorted((i.state.subjects or {}).items())),
    )
    # nats.py's test_stream_source_with_consumer (ADR-60): a source fed by a durable
    # consumer of the user's is accepted and echoed as it was given
    await R.step("up", js.create_stream(name="UP", subjects=["up"]))
    await R.step(
        "source with a consumer",
        mapped(
            js.create_stream(
                name="DOWN",
                sources=[StreamSource(
                    name="UP",
                    consumer=StreamConsumerSource(name="C", deliver_subject="deliver"),
                )],
            ),
            lambda s: [(x.name, x.consumer.name, x.consumer.deliver_subject)
                       for x in s.info.config.sources],
        ),
    )
    down = await js.get_stream("DOWN")
    await R.step(
        "source with a consumer, info",
        mapped(down.get_info(), lambda i: (i.config.sources[0].consumer.name,
                                           i.config.sources[0].consumer.deliver_subject)),
    )
    for name in ("mirror", "source", "BOTH", "EAST", "WEST", "DOWN", "UP"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


if __name__ == "__main__":
    run(main, R)
