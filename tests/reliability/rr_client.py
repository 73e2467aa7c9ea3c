"""A well-behaved nats-py client run as its own process next to a load test.

``python rr_client.py URL SECONDS`` does request/reply on ``svc.echo`` (its own responder,
on a second connection) every 20 ms until its stdin closes (at most SECONDS), then prints one
JSON line:
``{"latencies": [...], "failures": N, "errors": ["<when>: <exception>", ...]}``.
Being a separate process, its latencies measure natsd, not the load generator's event loop.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import nats
import nats.errors
from nats.aio.msg import Msg


async def main(url: str, seconds: float) -> None:
    responder = await nats.connect(url, allow_reconnect=False)
    requester = await nats.connect(url, allow_reconnect=False)

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    await responder.subscribe("svc.echo", cb=echo)
    await responder.flush()
    print("ready", flush=True)
    latencies: list[float] = []
    failures = 0
    errors: list[str] = []
    start = time.monotonic()
    end = time.monotonic() + seconds
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.run_in_executor(None, lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)))
    n = 0
    while time.monotonic() < end and not stop.is_set():
        n += 1
        body = b"req-%d" % n
        t0 = time.monotonic()
        try:
            rep = await requester.request("svc.echo", body, timeout=5)
            if rep.data != body:
                failures += 1
            else:
                latencies.append(time.monotonic() - t0)
        except (nats.errors.Error, TimeoutError) as e:
            failures += 1
            errors.append(f"{time.monotonic() - start:.2f}s: {type(e).__name__} {e}")
        await asyncio.sleep(0.02)
    await requester.close()
    await responder.close()
    out = {"latencies": latencies, "failures": failures, "errors": errors}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
