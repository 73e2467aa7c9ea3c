"""In-process micro-benchmark of natsd's batched direct get, without sockets.

This is what the Spark reader (natsd/spark/directget.py) asks for: ``$JS.API.DIRECT.GET.<s>``
with ``{"seq": s, "batch": B, "max_bytes": M}``, answered with B HMSG frames and an EOB.
An embedded Server, one client over a transport that keeps what is written; the stream is
pre-filled, then the client reads it end to end in batches. Reports server CPU per message
read, so profiles of the direct-get path are stable on a busy machine.

    .venv/bin/python bench/micro_direct.py -n 200000
    .venv/bin/python bench/micro_direct.py --profile /tmp/d.prof
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from typing import Any

from micro_js import Measured, cpu_result, feed, frames, micro_args, new_client, run_main

from natsd.server import Server


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        async with Server(port=-1, jetstream=True, store_dir=d) as srv:
            client, t = new_client(srv, args)
            cfg = {"name": "D", "subjects": ["d.>"], "storage": args.storage, "allow_direct": True}
            raw = json.dumps(cfg).encode()
            client.data_received(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'
                b"SUB _INBOX.api 1\r\nSUB _INBOX.dg.* 2\r\nSUB _INBOX.ack.* 3\r\n"
                b"PUB $JS.API.STREAM.CREATE.D _INBOX.api %d\r\n%s\r\n" % (len(raw), raw)
            )
            t.keep = True
            await feed(client, t, frames(args.n, b"d.x", b"_INBOX.ack", b"x" * args.size, 65536))
            # Every PubAck out before measuring: acks that trail a busy machine's fsyncs
            # would otherwise be charged to the reads.
            acks = 0
            while acks < args.n:
                acks += sum(c.count(b"MSG _INBOX.ack.") for c in t.chunks)
                t.chunks.clear()
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            t.chunks.clear()
            got = 0
            seq = 1
            clock = Measured(args)
            while seq <= args.n:
                body = b'{"seq":%d,"batch":%d,"max_bytes":%d}' % (seq, args.batch, 64 << 20)
                client.data_received(
                    b"PUB $JS.API.DIRECT.GET.D _INBOX.dg.%d %d\r\n%s\r\n" % (seq, len(body), body)
                )
                # Wait for the EOB that ends this batch.
                while True:
                    await asyncio.sleep(0)
                    if t.chunks and b"204 EOB" in t.chunks[-1][-200:]:
                        break
                data = b"".join(t.chunks)
                t.chunks.clear()
                n = data.count(b"HMSG ") - 1  # minus the EOB
                got += n
                seq += n
            wall, cpu = clock.stop()
            client.close()
    assert got == args.n, got
    return cpu_result(args.storage, got, wall, cpu, batch=args.batch)


def main() -> None:
    ap = micro_args(__doc__, storage="file", n=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    run_main(ap.parse_args(), run)


if __name__ == "__main__":
    main()
