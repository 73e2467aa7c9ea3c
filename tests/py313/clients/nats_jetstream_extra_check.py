"""nats-jetstream-extra 0.1.0 check: atomic batch publish, batch direct get, fast publish,
used as its README shows. Prints a JSON summary.

Run: NATS_URL=nats://127.0.0.1:4222 venv/bin/python nats-jetstream-extra_check.py
"""

import nats.jetstream_extra as jx
from common import URL, Report, collect, mapped, run
from nats.client import connect
from nats.jetstream import new as jetstream

R = Report("nats-jetstream-extra 0.1.0")


def ack_dict(a):
    if a is None:
        return None
    return {
        k: getattr(a, k, None) for k in ("stream", "sequence", "batch_id", "batch_size", "value")
    }


def raw(m):
    return {
        "subject": m.subject,
        "seq": m.sequence,
        "data": m.data.decode(errors="replace"),
        "num_pending": m.num_pending,
    }


async def msgs(js, name):
    si = await js.get_stream_info(name)
    return si.state.messages


async def main():
    nc = await connect(URL, timeout=5.0, allow_reconnect=False)
    R.note("server", {"version": nc.server_info.version})
    js = jetstream(nc)

    # 1. The README's single stream with every flag (allow_batched is the 2.14 fast-ingest flag).
    await R.step(
        "README create EVENTS (allow_atomic+allow_batched+allow_direct)",
        _name(
            js.create_stream(
                name="EVENTS",
                subjects=["events.>"],
                allow_atomic=True,
                allow_batched=True,
                allow_direct=True,
            )
        ),
    )
    # Separate streams so each feature can be exercised where the combined one is refused.
    await R.step(
        "create ATOMIC (allow_atomic+allow_direct)",
        _name(
            js.create_stream(
                name="ATOMIC", subjects=["atomic.>"], allow_atomic=True, allow_direct=True
            )
        ),
    )
    await R.step(
        "create FAST (allow_batched)",
        _name(
            js.create_stream(
                name="FAST", subjects=["fast.>"], allow_batched=True, allow_direct=True
            )
        ),
    )
    await R.step(
        "create CNT (allow_msg_counter+allow_atomic+allow_direct)",
        _name(
            js.create_stream(
                name="CNT",
                subjects=["cnt.>"],
                allow_msg_counter=True,
                allow_atomic=True,
                allow_direct=True,
            )
        ),
    )
    await R.step("create PLAIN", _name(js.create_stream(name="PLAIN", subjects=["plain.>"])))

    # 2. Atomic batch, README form: BatchPublisher add/add/commit.
    async def readme_batch():
        b = jx.batch_publish(js, ack_every=100)
        await b.add("atomic.order", b"order-123")
        await b.add("atomic.payment", b"payment-456")
        ack = await b.commit("atomic.complete", b"done")
        ok = ack.batch_id == b.batch_id
        return {"ack": ack_dict(ack), "batch_id_matches": ok, "size": b.size}

    await R.step("batch_publish add/add/commit", readme_batch)
    await R.step("ATOMIC messages after 1st batch", lambda: msgs(js, "ATOMIC"))

    # publish_batch helper with headers; every message acked (ack_every=1).
    await R.step(
        "publish_batch 3 msgs ack_every=1",
        lambda: _ack(
            jx.publish_batch(
                js,
                [
                    jx.BatchMessage("atomic.a", b"one"),
                    jx.BatchMessage(
                        "atomic.b", b"two", {"X-Source": "import", "Nats-Msg-Id": "m-1"}
                    ),
                    jx.BatchMessage("atomic.c", b"three", {"Nats-Msg-Id": "m-2"}),
                ],
                ack_every=1,
            )
        ),
    )
    await R.step(
        "publish_batch single message",
        lambda: _ack(jx.publish_batch(js, [jx.BatchMessage("atomic.one", b"1")])),
    )

    async def _last():
        return (await js.get_stream_info("ATOMIC")).state.last_sequence

    last = await R.step("ATOMIC last_seq", _last) or 0
    await R.step(
        "publish_batch Nats-Expected-Last-Sequence=<last_seq> on first",
        lambda: _ack(
            jx.publish_batch(
                js,
                [
                    jx.BatchMessage("atomic.x", b"x", {"Nats-Expected-Last-Sequence": str(last)}),
                    jx.BatchMessage("atomic.y", b"y"),
                ],
            )
        ),
    )
    await R.step(
        "publish_batch wrong Nats-Expected-Last-Sequence=1",
        lambda: _ack(
            jx.publish_batch(
                js,
                [
                    jx.BatchMessage("atomic.x", b"x", {"Nats-Expected-Last-Sequence": "1"}),
                    jx.BatchMessage("atomic.y", b"y"),
                ],
            )
        ),
    )
    await R.step(
        "publish_batch duplicate Nats-Msg-Id in batch",
        lambda: _ack(
            jx.publish_batch(
                js,
                [
                    jx.BatchMessage("atomic.d", b"1", {"Nats-Msg-Id": "dup"}),
                    jx.BatchMessage("atomic.d", b"2", {"Nats-Msg-Id": "dup"}),
                ],
            )
        ),
    )
    await R.step("ATOMIC messages after batches", lambda: msgs(js, "ATOMIC"))

    # discard: nothing of the batch must be stored
    async def discarded():
        b = jx.batch_publish(js)
        await b.add("atomic.discard", b"1")
        await b.add("atomic.discard", b"2")
        b.discard()
        return {"closed": b.is_closed}

    await R.step("batch_publish discard", discarded)
    await R.step("ATOMIC messages after discard", lambda: msgs(js, "ATOMIC"))

    # batch into a stream without allow_atomic
    await R.step(
        "publish_batch into PLAIN (not atomic)",
        lambda: _ack(
            jx.publish_batch(
                js, [jx.BatchMessage("plain.a", b"1"), jx.BatchMessage("plain.b", b"2")]
            )
        ),
    )
    # batch of counter increments
    await R.step(
        "publish_batch into CNT (Nats-Incr)",
        lambda: _ack(
            jx.publish_batch(
                js,
                [
                    jx.BatchMessage("cnt.a", b"", {"Nats-Incr": "5"}),
                    jx.BatchMessage("cnt.a", b"", {"Nats-Incr": "7"}),
                ],
            )
        ),
    )

    # 3. Batch direct get.
    await R.step(
        "get_last_msgs_for ATOMIC [atomic.a, atomic.b]",
        lambda: mapped(
            collect(jx.get_last_msgs_for(js, "ATOMIC", ["atomic.a", "atomic.b"])),
            lambda ms: [raw(m) for m in ms],
        ),
    )
    await R.step(
        "get_last_msgs_for ATOMIC [atomic.>] batch=3",
        lambda: mapped(
            collect(jx.get_last_msgs_for(js, "ATOMIC", ["atomic.>"], batch=3)),
            lambda ms: [raw(m) for m in ms],
        ),
    )
    await R.step(
        "get_batch ATOMIC batch=4 seq=2",
        lambda: mapped(
            collect(jx.get_batch(js, "ATOMIC", batch=4, seq=2)), lambda ms: [raw(m) for m in ms]
        ),
    )
    await R.step(
        "get_batch ATOMIC next_by_subject=atomic.c",
        lambda: mapped(
            collect(jx.get_batch(js, "ATOMIC", batch=10, next_by_subject="atomic.c")),
            lambda ms: [raw(m) for m in ms],
        ),
    )
    await R.step(
        "get_batch ATOMIC seq=999 (nothing)",
        lambda: collect(jx.get_batch(js, "ATOMIC", batch=5, seq=999)),
    )

    # 4. Fast publish (2.14 fast ingest), README form, into FAST; then into ATOMIC (not batched).
    async def fast(stream_subj):
        b = jx.fast_publish(js, flow=100, max_outstanding_acks=2, ack_timeout=3.0)
        try:
            a1 = await b.add(f"{stream_subj}.a", b"one")
            a2 = await b.add(f"{stream_subj}.b", b"two")
            ack = await b.commit(f"{stream_subj}.c", b"three")
            return {
                "adds": [a1.__dict__ if hasattr(a1, "__dict__") else repr(a1), repr(a2)],
                "ack": ack_dict(ack),
            }
        finally:
            if not b.is_closed:
                await b.abort()

    await R.step("fast_publish into FAST add/add/commit", lambda: fast("fast"))
    await R.step("FAST messages", lambda: msgs(js, "FAST"))
    await R.step("fast_publish into ATOMIC (no allow_batched)", lambda: fast("atomic"))
    await R.step("ATOMIC messages at end", lambda: msgs(js, "ATOMIC"))

    for name in ("EVENTS", "ATOMIC", "FAST", "CNT", "PLAIN"):
        await R.step(f"delete {name}", js.delete_stream(name))
    await nc.close()


async def _name(coro):
    s = await coro
    return {"name": s.name, "metadata": s.info.config.metadata}


async def _ack(coro):
    return ack_dict(await coro)


if __name__ == "__main__":
    run(main, R)
