"""Run by Python 3.13 (build/py313, ``make py313``): nats.py's newer ``nats-jetstream``
package's ordered consumer across a server restart, as its own test
``test_ordered_consumer_messages_server_restart`` does it: ``stream.ordered_consumer`` then
``consumer.messages()``, five messages, the server stopped with SIGTERM and started again on
the same port and store, five more published once the client is back; all ten must reach
the iterator.

    python ordered_restart.py '<server argv as JSON, without -p>' PORT

Prints one line of JSON: {"before": [...], "after": [...], "result": "OK" | "TIMEOUT"}.
"""

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time

from nats.client import ClientStatus, connect
from nats.jetstream import new as new_jetstream


def start(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([*argv, "-p", str(port)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("the server did not start")


def stop(p: subprocess.Popen[bytes]) -> None:
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


async def main(argv: list[str], port: int) -> dict[str, object]:
    srv = start(argv, port)
    try:
        client = await connect(f"nats://127.0.0.1:{port}", reconnect_max_attempts=0)
        js = new_jetstream(client)
        stream = await js.create_stream(name="OC", subjects=["OC.*"])
        for i in range(5):
            await js.publish(f"OC.{i}", f"msg {i}".encode())
        consumer = await stream.ordered_consumer(filter_subjects=["OC.*"])
        messages = await consumer.messages(max_wait=10.0)
        got: list[str] = []
        async for msg in messages:
            got.append(msg.data.decode())
            if len(got) == 5:
                break
        await asyncio.to_thread(stop, srv)
        srv = await asyncio.to_thread(start, argv, port)
        for _ in range(300):
            if client.status == ClientStatus.CONNECTED:
                break
            await asyncio.sleep(0.1)
        for i in range(5):
            await js.publish(f"OC.more{i}", f"more {i}".encode())

        async def rest() -> None:
            async for msg in messages:
                got.append(msg.data.decode())
                if len(got) == 10:
                    break

        try:
            await asyncio.wait_for(rest(), 30)
            result = "OK"
        except TimeoutError:
            result = "TIMEOUT"
        await messages.stop()
        await client.close()
        return {"before": got[:5], "after": got[5:], "result": result}
    finally:
        stop(srv)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2])))))
