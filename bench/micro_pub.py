"""In-process micro-benchmark of natsd's core publish path (PUB → one MSG), without sockets.

One subscriber and one publisher connect over transports that only count what is written
(``micro_js.CollectingTransport``); pipelined ``PUB bench.core`` frames are fed in 64 KiB
reads and server CPU per message is measured until every MSG has been written. With
``--cluster`` the server has a cluster configured (listener up, no peer): the traffic is
local, and the "has routes" check must cost nothing (compare the two, or two trees with
/tmp/cg.sh-style callgrind runs). With ``--headers`` the publishes are HPUBs with a small
header block (no ``Nats-Trace-Dest``): the path a traced message leaves must cost an
untraced one nothing measurable.

    .venv/bin/python bench/micro_pub.py -n 200000
    .venv/bin/python bench/micro_pub.py -n 200000 --cluster
    .venv/bin/python bench/micro_pub.py -n 200000 --headers
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from micro_js import (
    Measured,
    cpu_result,
    feed,
    frames,
    in_reads,
    micro_args,
    new_client,
    run_main,
)

from natsd.server import Server

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'


async def run(args: argparse.Namespace) -> dict[str, Any]:
    kw: dict[str, Any] = {"host": "127.0.0.1", "port": -1}
    if args.cluster:
        # Imported here so the script also runs against trees without clustering (the
        # baseline of a before/after comparison).
        from natsd.config.options import ClusterOptions

        kw["cluster"] = ClusterOptions(name="bench", host="127.0.0.1", port=-1)
    async with Server(**kw) as srv:
        sub, st = new_client(srv, args)
        sub.data_received(CONNECT + b"SUB bench.core 1\r\nPING\r\n")
        pub, _pt = new_client(srv, args)
        pub.data_received(CONNECT)
        await asyncio.sleep(0.01)
        payload = b"x" * args.size
        if args.headers:
            reads = hpub_frames(args.n, payload, 65536)
            total = len(HEADERS) + args.size
            msg_len = len(b"HMSG bench.core 1 _INBOX.r.0 %d %d\r\n\r\n" % (len(HEADERS), total))
            msg_len += total
        else:
            reads = [
                r.replace(b" _INBOX.none.", b" _INBOX.r.")
                for r in frames(args.n, b"bench.core", b"_INBOX.none", payload, 65536)
            ]
            msg_len = len(b"MSG bench.core 1 _INBOX.r.0 %d\r\n\r\n" % args.size) + args.size
        start = st.written
        clock = Measured(args)
        await feed(pub, _pt, reads)
        deadline = time.monotonic() + 60
        while st.written - start < args.n * msg_len and time.monotonic() < deadline:
            await asyncio.sleep(0.0005)
        wall, cpu = clock.stop()
        sub.close()
        pub.close()
    return cpu_result("core", args.n, wall, cpu, cluster=args.cluster, headers=args.headers)


HEADERS = b"NATS/1.0\r\nX-Trace-Id: 0123456789abcdef\r\nX-App: bench\r\n\r\n"


def hpub_frames(n: int, payload: bytes, chunk: int) -> list[bytes]:
    """Pipelined HPUB frames (``HEADERS`` and ``payload``) in reads of ``chunk`` bytes."""
    total = len(HEADERS) + len(payload)
    head = b"HPUB bench.core _INBOX.r.%d " + b"%d %d\r\n" % (len(HEADERS), total)
    return in_reads((head % i + HEADERS + payload + b"\r\n" for i in range(n)), chunk)


def main() -> None:
    ap = micro_args(__doc__, storage="memory", n=200_000)
    ap.add_argument("--cluster", action="store_true", help="a cluster configured, no peer")
    ap.add_argument("--headers", action="store_true", help="HPUB with a small header block")
    run_main(ap.parse_args(), run)


if __name__ == "__main__":
    main()
