"""natsio-jetstream-batch 0.1.1 check: fast-ingest publish (allow_batched, reply subjects
ending .$FI) and batch direct get, used as its README shows. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python natsio-jetstream-batch_check.py
"""

from datetime import UTC, datetime, timedelta

import natsio
from common import URL, Report, collect, mapped, run
from natsio.jetstream import StreamConfig
from natsio.jetstream_batch import ALLOW_BATCHED, FlowControl, fast_publisher, get_batch

R = Report("natsio-jetstream-batch 0.1.1")
FC = FlowControl(flow=100, max_outstanding_acks=2, ack_timeout=3.0)


def stored(s):
    return {"seq": s.seq, "subject": s.subject, "payload": s.payload.decode(errors="replace")}


def ack(a):
    if a is None:
        return None
    return {k: getattr(a, k, None) for k in ("stream", "seq", "batch_id", "size", "val")}


async def count(js, name):
    s = await js.stream(name)
    return s.cached_info.state.messages


async def main():
    nc = await natsio.connect(URL)
    si = nc.server_info
    R.note("server", {"version": si.get("version"), "api_lvl": si.get("api_lvl")})
    js = nc.jetstream()

    # README: fast ingest needs allow_batched, passed through StreamConfig.extra.
    await R.step(
        "create RAW (allow_direct, extra allow_batched)",
        mapped(
            js.create_stream(
                StreamConfig(
                    name="RAW", subjects=["raw.>"], allow_direct=True, extra={ALLOW_BATCHED: True}
                )
            ),
            repr,
        ),
    )
    # A plain direct-get stream, for batch reads and for fast ingest into a stream that lacks it.
    direct = await R.step(
        "create DIRECT (allow_direct)",
        js.create_stream(StreamConfig(name="DIRECT", subjects=["direct.>"], allow_direct=True)),
    )
    t0 = datetime.now(UTC) - timedelta(seconds=1)
    for i in range(5):
        await R.step(
            f"js.publish #{i} direct.{i % 2}",
            mapped(js.publish(f"direct.{i % 2}", f"m{i}".encode()), lambda a: a.seq),
        )

    # README publish form: 250 adds (exercises flow acks at 100) then commit.
    async def readme_publish():
        acks = []
        async with fast_publisher(js, flow_control=FC) as fp:
            for i in range(250):
                a = await fp.add("raw.events", f"event {i}".encode())
                if i in (0, 99, 249):
                    acks.append(
                        {"batch_sequence": a.batch_sequence, "ack_sequence": a.ack_sequence}
                    )
            final = await fp.commit("raw.events", b"done")
        return {
            "acks": acks,
            "final": ack(final),
            "batch_id_matches": final.batch_id == fp.batch_id,
        }

    await R.step("fast_publisher RAW 250 adds + commit", readme_publish, timeout=20)

    # README: leaving the block without commit sends an end-of-batch marker.
    async def close_form():
        async with fast_publisher(js, flow_control=FC) as fp:
            await fp.add("raw.events", b"only this one")
        return {"ack": ack(fp.ack), "closed": fp.is_closed}

    await R.step("fast_publisher RAW add + implicit close", close_form)
    await R.step("RAW messages", lambda: count(js, "RAW"))

    # Fast ingest into a stream without allow_batched: the server's refusal.
    async def into_direct():
        async with fast_publisher(js, flow_control=FC) as fp:
            await fp.add("direct.x", b"x")
            return ack(await fp.commit("direct.x", b"y"))

    await R.step("fast_publisher into DIRECT (no allow_batched)", into_direct)

    # commit as the very first call (one-message batch)
    async def commit_only():
        fp = fast_publisher(js, flow_control=FC)
        try:
            return ack(await fp.commit("direct.y", b"z"))
        finally:
            await fp.close()

    await R.step("fast_publisher DIRECT commit-only", commit_only)
    await R.step("DIRECT messages", lambda: count(js, "DIRECT"))

    # Batch direct get.
    if direct is not None:
        await R.step(
            "get_batch DIRECT 100 seq=1",
            lambda: mapped(
                collect(get_batch(js, direct, 100, seq=1)), lambda ms: [stored(s) for s in ms]
            ),
        )
        await R.step(
            "get_batch DIRECT 10 subject=direct.1",
            lambda: mapped(
                collect(get_batch(js, "DIRECT", 10, subject="direct.1")),
                lambda ms: [stored(s) for s in ms],
            ),
        )
        await R.step(
            "get_batch DIRECT 2 seq=2",
            lambda: mapped(
                collect(get_batch(js, "DIRECT", 2, seq=2)), lambda ms: [stored(s) for s in ms]
            ),
        )
        await R.step(
            "get_batch DIRECT start_time",
            lambda: mapped(
                collect(get_batch(js, "DIRECT", 10, start_time=t0)), lambda ms: [s.seq for s in ms]
            ),
        )
        await R.step(
            "get_batch DIRECT max_bytes=60",
            lambda: mapped(
                collect(get_batch(js, "DIRECT", 10, seq=1, max_bytes=60)),
                lambda ms: [s.seq for s in ms],
            ),
        )
        await R.step(
            "get_batch DIRECT seq=999 (nothing)",
            lambda: collect(get_batch(js, "DIRECT", 10, seq=999)),
        )
        await R.step(
            "core Stream.get_last_msgs_for [direct.>]",
            lambda: mapped(
                collect(direct.get_last_msgs_for(["direct.>"])), lambda ms: [stored(s) for s in ms]
            ),
        )
    await R.step(
        "get_batch RAW seq=1 subject=raw.events",
        lambda: mapped(
            collect(get_batch(js, "RAW", 3, seq=1, subject="raw.events")),
            lambda ms: [stored(s) for s in ms],
        ),
    )

    for name in ("RAW", "DIRECT"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


if __name__ == "__main__":
    run(main, R)
