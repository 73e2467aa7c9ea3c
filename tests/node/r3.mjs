// nats.js on replicated (R3) streams, consumers, KV and Object Store buckets (v2; the
// Object Store through v3, since v2 cannot create an R3 bucket on any server), against a
// scratch natsd cluster of at least three JetStream servers (issue 19). The library is used
// as documented; nothing in it knows the streams are replicated except the num_replicas and
// replicas options and the cluster block it reads back.
//
// Usage: node r3.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.

import { Objm } from "@nats-io/obj";
import { connect as connect3 } from "@nats-io/transport-node";
import { AckPolicy, connect, StringCodec } from "nats";
import { randomBytes } from "node:crypto";
import { assert, check, eq, main, serverUrl, sleep, waitFor } from "./check.mjs";

const url = serverUrl("r3.mjs", "R3 streams and buckets");
const sc = StringCodec();

// STREAM.INFO once the stream's group has a leader and both other replicas are current.
async function settled(jsm, name) {
  let info;
  await waitFor(
    async () => {
      try {
        info = await jsm.streams.info(name);
      } catch {
        return false; // no leader answers yet
      }
      const c = info.cluster ?? {};
      return Boolean(c.leader) && (c.replicas ?? []).length === 2 && c.replicas.every((r) => r.current);
    },
    `${name}: a leader and two current replicas`,
    15000,
  );
  return info;
}

// A publish retried while no leader answers (a stepdown moves the group), as a client
// with a Nats-Msg-Id may retry it: the stream deduplicates.
async function publishRetried(js, subject, data, msgID) {
  for (let i = 0; ; i++) {
    try {
      return await js.publish(subject, data, { msgID, timeout: 1000 });
    } catch (e) {
      if (i > 100) throw e;
      await sleep(50);
    }
  }
}

check("r3 stream: create, publish with msg ids, dedup, cluster block", async ({ js, jsm }) => {
  const si = await jsm.streams.add({ name: "R3S", subjects: ["r3.>"], num_replicas: 3 });
  eq(si.config.num_replicas, 3, "config.num_replicas");
  await settled(jsm, "R3S");
  for (let i = 0; i < 100; i++) {
    const pa = await publishRetried(js, `r3.${i % 5}`, sc.encode(`m${i}`), `id-${i}`);
    eq(pa.seq, i + 1, `seq of message ${i}`);
  }
  const dup = await js.publish("r3.0", sc.encode("again"), { msgID: "id-7" });
  assert(dup.duplicate, "a repeated msg id is a duplicate");
  eq(dup.seq, 8, "the duplicate's seq is the first one's");
  const info = await settled(jsm, "R3S");
  eq(info.state.messages, 100, "messages");
  const names = [info.cluster.leader, ...info.cluster.replicas.map((r) => r.name)];
  eq(new Set(names).size, 3, "three distinct servers hold the stream");
});

check("r3 durable pull consumer: fetch, ack-sync, state", async ({ js, jsm }) => {
  await jsm.consumers.add("R3S", { durable_name: "D", ack_policy: AckPolicy.Explicit });
  const c = await js.consumers.get("R3S", "D");
  const seen = [];
  const iter = await c.fetch({ max_messages: 50, expires: 3000 });
  for await (const m of iter) {
    seen.push(m.seq);
    assert(await m.ackAck(), `ack-sync of ${m.seq} answered`);
  }
  eq(seen, Array.from({ length: 50 }, (_, i) => i + 1), "the first 50 in order");
  const ci = await jsm.consumers.info("R3S", "D");
  eq(ci.ack_floor.stream_seq, 50, "ack floor");
  eq(ci.num_pending, 50, "pending");
  eq(ci.config.num_replicas ?? 0, 0, "consumer replicas follow the stream's");
  assert(ci.cluster && ci.cluster.leader, "consumer info has a cluster block with a leader");
});

check("r3 stream leader stepdown: publishes and the consumer continue", async ({ nc, js, jsm }) => {
  const before = (await settled(jsm, "R3S")).cluster.leader;
  const r = await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.R3S", "", { timeout: 5000 });
  const answer = JSON.parse(sc.decode(r.data));
  eq(answer.success, true, `stepdown answered ${JSON.stringify(answer)}`);
  const after = (await settled(jsm, "R3S")).cluster.leader;
  assert(after !== before, `a new leader (${before} -> ${after})`);
  const pa = await publishRetried(js, "r3.x", sc.encode("after"), "id-after");
  eq(pa.seq, 101, "the next sequence on the new leader");
  const c = await js.consumers.get("R3S", "D");
  const seen = [];
  const iter = await c.fetch({ max_messages: 51, expires: 3000 });
  for await (const m of iter) {
    seen.push(m.seq);
    await m.ackAck();
  }
  eq(seen, Array.from({ length: 51 }, (_, i) => i + 51), "no acknowledged message comes back");
  await jsm.streams.delete("R3S");
});

check("r3 kv bucket: put, update, history, watch-free reads", async ({ js, jsm }) => {
  const kv = await js.views.kv("R3KV", { replicas: 3, history: 3 });
  const info = await settled(jsm, "KV_R3KV");
  eq(info.config.num_replicas, 3, "bucket stream replicas");
  const r1 = await kv.put("k", sc.encode("v1"));
  const r2 = await kv.update("k", sc.encode("v2"), r1);
  eq(r2, r1 + 1, "revision after update");
  await kv.put("other", sc.encode("o"));
  eq(sc.decode((await kv.get("k")).value), "v2", "get");
  const hist = [];
  for await (const e of await kv.history({ key: "k" })) hist.push(sc.decode(e.value));
  eq(hist, ["v1", "v2"], "history");
  const keys = [];
  for await (const k of await kv.keys()) keys.push(k);
  eq(keys.sort(), ["k", "other"], "keys");
  await kv.delete("other");
  eq(await kv.get("other").then((e) => e?.operation), "DEL", "deleted");
  eq((await kv.status()).replicas, 3, "status replicas");
  await kv.destroy();
});

check("r3 object store, v2: its replicas option is refused as nats-server refuses it", async ({ js }) => {
  // nats.js v2 copies the bucket options, replicas included, into the stream config; the
  // server's strict decoding refuses the unknown field (nats-server 2.15.1 answers the same)
  let err = null;
  try {
    await js.views.os("R3V2", { replicas: 3 });
  } catch (e) {
    err = e;
  }
  assert(err && err.api_error, "an API error");
  eq(err.api_error.err_code, 10025, "invalid JSON");
  assert(/unknown field "replicas"/.test(err.api_error.description), err.api_error.description);
});

check("r3 object store, v3: put and get a chunked object", async ({ jsm }) => {
  const nc3 = await connect3({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
  try {
    const os = await new Objm(nc3).create("R3OS", { replicas: 3 });
    const info = await settled(jsm, "OBJ_R3OS");
    eq(info.config.num_replicas, 3, "bucket stream replicas");
    const data = randomBytes(200_000);
    const oi = await os.putBlob({ name: "blob", options: { max_chunk_size: 32 * 1024 } }, data);
    eq(oi.size, data.length, "size");
    eq(oi.chunks, 7, "chunks");
    const back = await os.getBlob("blob");
    assert(back && Buffer.from(back).equals(data), "the object reads back identical");
    eq((await os.status()).replicas, 3, "status replicas");
    await os.destroy();
  } finally {
    await nc3.close();
  }
});

main(
  async () => {
    const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
    const ctx = { nc, js: nc.jetstream({ timeout: 5000 }), jsm: await nc.jetstreamManager({ timeout: 5000 }) };
    return { nc, ctx };
  },
  { timeoutMs: 60000 },
);
