"""In-process micro-benchmark of natsd's pull-consumer path (fetch + ack), without sockets.

Like ``micro_js.py``: an embedded Server, one client over a transport that keeps what is
written. The stream is pre-filled, then the client loops ``MSG.NEXT {"batch":B}`` ->
receive B messages -> ``+ACK`` each (one read carrying all acks and the next fetch, as
``nats bench js fetch`` does). Reports server CPU per consumed message, so profiles of the
delivery and ack paths are stable on a busy machine.

    .venv/bin/python bench/micro_consumer.py -n 100000
    .venv/bin/python bench/micro_consumer.py --ack none --profile /tmp/c.prof
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from typing import Any

from micro_js import Measured, cpu_result, feed, frames, micro_args, new_client, run_main

from natsd.server import Server

_REPLY = re.compile(rb"MSG \S+ 9 (\$JS\.ACK\.\S+) \d+\r\n")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        async with Server(port=-1, jetstream=True, store_dir=d) as srv:
            client, t = new_client(srv, args, keep=True)
            scfg = {"name": "C", "subjects": ["c.x"], "storage": args.storage}
            ccfg = {
                "stream_name": "C",
                "config": {"durable_name": "D", "ack_policy": args.ack, "max_ack_pending": -1},
            }
            if args.push:
                # As `nats bench oldjs push`: explicit acks, max_ack_pending 500.
                ccfg["config"]["deliver_subject"] = "_INBOX.pull"
                ccfg["config"]["max_ack_pending"] = 500

            def api(subj: str, body: dict[str, Any]) -> bytes:
                raw = json.dumps(body).encode()
                return b"PUB %s _INBOX.api %d\r\n%s\r\n" % (subj.encode(), len(raw), raw)

            client.data_received(
                b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'
                b"SUB _INBOX.api 1\r\nSUB _INBOX.ack.* 2\r\nSUB _INBOX.pull 9\r\n"
                + api("$JS.API.STREAM.CREATE.C", scfg)
            )
            await feed(client, t, frames(args.n, b"c.x", b"_INBOX.ack", b"x" * args.size, 65536))
            await asyncio.sleep(0.2)
            if not args.push:
                # A pull consumer exists before the first fetch; a push consumer is created
                # inside the measured part (creating it starts the delivery).
                client.data_received(api("$JS.API.CONSUMER.CREATE.C.D", ccfg))
                await asyncio.sleep(0.05)
            t.chunks.clear()
            req = b'{"batch":%d}' % args.batch
            fetch = b"PUB $JS.API.CONSUMER.MSG.NEXT.C.D _INBOX.pull %d\r\n%s\r\n" % (
                len(req),
                req,
            )
            got = 0
            clock = Measured(args)
            client.data_received(
                api("$JS.API.CONSUMER.CREATE.C.D", ccfg) if args.push else fetch
            )
            deadline = time.monotonic() + 120
            while got < args.n and time.monotonic() < deadline:
                await asyncio.sleep(0)
                if not t.chunks:
                    continue
                data = b"".join(t.chunks)
                t.chunks.clear()
                replies = _REPLY.findall(data)
                got += len(replies)
                if args.ack == "explicit":
                    out = b"".join(b"PUB %s 4\r\n+ACK\r\n" % r for r in replies)
                else:
                    out = b""
                if not args.push and got < args.n and got % args.batch == 0:
                    out += fetch
                if out:
                    client.data_received(out)
            wall, cpu = clock.stop()
            client.close()
    return cpu_result(args.storage, max(got, 1), wall, cpu, ack=args.ack)


def main() -> None:
    ap = micro_args(__doc__, storage="memory", n=100_000)
    ap.add_argument("--ack", choices=("explicit", "none"), default="explicit")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--push", action="store_true", help="a push consumer instead of pulls")
    run_main(ap.parse_args(), run)


if __name__ == "__main__":
    main()
