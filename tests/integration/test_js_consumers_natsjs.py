"""nats.js v2 (npm ``nats``) consumers against natsd: the JetStream consumer API of the
library (``jsm.consumers.add``, ``js.consumers.get`` + ``fetch``/``next``/``consume``, ordered
consumers) over real sockets.

The script is run with ``node --input-type=module --eval`` from ``tests/node`` so it uses
the packages ``make node-modules`` installs there (``npm ci``); without node or those packages
the test fails under CI and skips elsewhere (``components.require_node_modules``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from components import require_node, require_node_modules

import natsd

from .conftest import only_natsd

pytestmark = [pytest.mark.timeout(90), only_natsd]

NODE_DIR = Path(__file__).resolve().parents[1] / "node"

SCRIPT = r"""
import { connect, AckPolicy, DeliverPolicy, StringCodec } from "nats";
const nc = await connect({ servers: process.argv[1] });
const jsm = await nc.jetstreamManager();
const js = nc.jetstream();
const sc = StringCodec();
const out = [];
await jsm.streams.add({ name: "N", subjects: ["n.>"] });
for (let i = 0; i < 10; i++) await js.publish("n.a", sc.encode(`m${i}`));
await jsm.consumers.add("N", { durable_name: "D", ack_policy: AckPolicy.Explicit });
const c = await js.consumers.get("N", "D");
const got = [];
for await (const m of await c.fetch({ max_messages: 4, expires: 1000 })) {
  got.push(sc.decode(m.data));
  m.ack();
}
out.push("fetch " + got.join(","));
const m = await c.next({ expires: 1000 });
out.push(`next ${sc.decode(m.data)} pending=${m.info.pending} delivered=${m.info.redeliveryCount}`);
out.push("ackAck " + (await m.ackAck()));
const seen = [];
for await (const x of await c.consume({ max_messages: 2 })) {
  seen.push(sc.decode(x.data));
  x.ack();
  if (seen.length === 5) break;
}
out.push("consume " + seen.join(","));
const seqs = [];
const ordered = await js.consumers.get("N");
for await (const x of await ordered.fetch({ max_messages: 10, expires: 1000 })) {
  seqs.push(x.seq);
}
out.push("ordered " + seqs.join(","));
await jsm.consumers.add("N", {
  durable_name: "LAST", deliver_policy: DeliverPolicy.Last, ack_policy: AckPolicy.None,
});
const last = await (await js.consumers.get("N", "LAST")).next({ expires: 1000 });
out.push("last " + sc.decode(last.data));
const info = await c.info();
out.push(`info pending=${info.num_pending} ack_pending=${info.num_ack_pending} ` +
         `delivered=${info.delivered.stream_seq} floor=${info.ack_floor.stream_seq}`);
const names = [];
for await (const n of jsm.consumers.list("N")) names.push(n.name);
// The ordered consumer is an ephemeral with a generated name: leave it out.
out.push("list " + names.filter((n) => n === "D" || n === "LAST").sort().join(","));
await jsm.consumers.delete("N", "LAST");
out.push("after delete " + (await jsm.streams.info("N")).state.consumer_count);
console.log(out.join("\n"));
await nc.close();
"""

EXPECTED = [
    "fetch m0,m1,m2,m3",
    "next m4 pending=5 delivered=1",
    "ackAck true",
    "consume m5,m6,m7,m8,m9",
    "ordered 1,2,3,4,5,6,7,8,9,10",
    "last m9",
    "info pending=0 ack_pending=0 delivered=10 floor=10",
    "list D,LAST",
]


async def test_natsjs_consumers(tmp_path: Path) -> None:
    require_node_modules()
    node = require_node()
    async with natsd.Server(
        port=0, host="127.0.0.1", jetstream=True, store_dir=str(tmp_path), http_port=-1
    ) as srv:
        proc = await asyncio.create_subprocess_exec(
            node,
            "--input-type=module",
            "--eval",
            SCRIPT,
            srv.client_url,
            cwd=NODE_DIR,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[: len(EXPECTED)] == EXPECTED
    # The ordered consumer (an ephemeral) may still be around: D and nothing named LAST.
    assert lines[-1] in ("after delete 1", "after delete 2")
