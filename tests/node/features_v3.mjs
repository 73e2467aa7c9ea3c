// nats.js v3 (@nats-io/jetstream 3.4) and the nats-server 2.12+ stream features it has APIs
// for: message schedules (publish's `schedule` and `cancelSchedule` options), atomic batch
// publish (js.startBatch / add / commit), fast-ingest batches (startFastIngest: add, last,
// end, ping) and counters (Nats-Incr through publish headers, the value read back).
//
// Usage: node features_v3.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.

import { connect, headers } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startFastIngest } from "@nats-io/jetstream/internal";
import { assert, check, CheckError, eq, main, serverUrl, sleep, waitFor } from "./check.mjs";

const url = serverUrl("features_v3.mjs", "features");
const td = new TextDecoder();

// v3 rejects with a JetStreamApiError whose `code` is the err_code (v2: `api_error`)
async function expectApiError(fn, code, what) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  if (err === null) throw new CheckError(`${what}: expected API error ${code}, but it succeeded`);
  if (err.name !== "JetStreamApiError" || err.code !== code) {
    throw new CheckError(`${what}: expected API error ${code}, got ${err.name} ${err.code} ${err.message}`);
  }
}

async function count(jsm, stream, subject) {
  const si = await jsm.streams.info(stream, { subjects_filter: subject });
  return (si.state.subjects || {})[subject] || 0;
}

// ========================================================================== schedules

check("schedules: an @at schedule fires once into its target and is gone", async ({ js, jsm }) => {
  await jsm.streams.add({
    name: "SCHED",
    subjects: ["sched.>", "target.>"],
    allow_msg_schedules: true,
    allow_msg_ttl: true,
  });
  const si = await jsm.streams.info("SCHED");
  eq(si.config.allow_msg_schedules, true, "allow_msg_schedules");
  eq(si.config.allow_rollup_hdrs, true, "rollups turned on with schedules");
  const at = new Date(Date.now() + 1000);
  const pa = await js.publish("sched.once", "hello", {
    schedule: { specification: at, target: "target.once", ttl: "1m" },
  });
  eq(pa.seq, 1, "the schedule is stored");
  await waitFor(async () => (await count(jsm, "SCHED", "target.once")) === 1, "fired", 8000);
  const m = await jsm.streams.getMessage("SCHED", { last_by_subj: "target.once" });
  eq(td.decode(m.data), "hello", "payload");
  eq(m.header.get("Nats-Scheduler"), "sched.once", "Nats-Scheduler");
  eq(m.header.get("Nats-Schedule-Next"), "purge", "one-shot: purge");
  eq(m.header.get("Nats-TTL"), "1m", "the schedule's TTL");
  eq(await count(jsm, "SCHED", "sched.once"), 0, "the schedule purged itself");
});

check("schedules: @every and cron with a zone fire; cancelSchedule stops one", async ({ js, jsm }) => {
  await js.publish("sched.tick", "tick", {
    schedule: { specification: { every: "1s" }, target: "target.tick" },
  });
  await js.publish("sched.cron", "cron", {
    schedule: { specification: { cron: "*/2 * * * * *" }, target: "target.cron", timezone: "Asia/Tokyo" },
  });
  await js.publish("sched.later", "later", {
    schedule: { specification: new Date(Date.now() + 60_000), target: "target.later" },
  });
  await waitFor(async () => (await count(jsm, "SCHED", "target.tick")) >= 2, "@every fired twice", 8000);
  await waitFor(async () => (await count(jsm, "SCHED", "target.cron")) >= 1, "cron fired", 8000);
  const c = await jsm.streams.getMessage("SCHED", { last_by_subj: "target.cron" });
  assert(c.header.get("Nats-Schedule-Next").endsWith("+09:00"), "next firing in the schedule's zone");
  const later = await jsm.streams.getMessage("SCHED", { last_by_subj: "sched.later" });
  const pa = await js.publish("target.cancelled", "early", {
    cancelSchedule: { scheduleSubject: "sched.later" },
    expect: { lastSubjectSequence: later.seq, lastSubjectSequenceSubject: "sched.later" },
  });
  assert(pa.seq > 0, "the cancel is stored");
  eq(await count(jsm, "SCHED", "sched.later"), 0, "the cancelled schedule is gone");
  await jsm.streams.purge("SCHED", { filter: "sched.tick" });
  await jsm.streams.purge("SCHED", { filter: "sched.cron" });
});

check("schedules: refused without a target, and on a stream without schedules", async ({ js, jsm }) => {
  const h = headers();
  h.set("Nats-Schedule", "@every 5s");
  await expectApiError(() => js.publish("sched.bad", "", { headers: h }), 10190, "no target");
  await jsm.streams.add({ name: "PLAIN", subjects: ["plain.>"] });
  await expectApiError(
    () => js.publish("plain.x", "", { schedule: { specification: { every: "1s" }, target: "plain.y" } }),
    10188,
    "schedules disabled",
  );
  await jsm.streams.delete("PLAIN");
  await jsm.streams.delete("SCHED");
});

// ====================================================================== atomic batches

check("atomic batch: startBatch, add, commit: stored whole", async ({ js, jsm }) => {
  await jsm.streams.add({ name: "ATOMIC", subjects: ["atomic.>"], allow_atomic: true });
  const b = await js.startBatch("atomic.a", "1");
  b.add("atomic.b", "2");
  await b.add("atomic.c", "3", { ack: true });
  const ack = await b.commit("atomic.d", "4");
  eq([ack.stream, ack.seq, ack.count, ack.batch], ["ATOMIC", 4, 4, b.id], "batch ack");
  eq((await jsm.streams.info("ATOMIC")).state.messages, 4, "all four stored");
  await jsm.streams.add({ name: "NOATOMIC", subjects: ["noatomic.>"] });
  await expectApiError(() => js.startBatch("noatomic.a", "1"), 10174, "atomic publish disabled");
  await jsm.streams.delete("NOATOMIC");
  await jsm.streams.delete("ATOMIC");
});

// ================================================================== fast-ingest batches

check("fast ingest: add, ping, last: every message stored, one ack", async ({ nc, jsm }) => {
  await jsm.streams.add({ name: "FAST", subjects: ["fast.>"], allow_batched: true });
  const fi = await startFastIngest(nc, "fast.a", "0", { allowGaps: false, ackInterval: 10 });
  for (let i = 1; i < 50; i++) {
    await fi.add("fast.a", `${i}`);
  }
  const p = await fi.ping();
  assert(p.ackSeq <= 50, "ping answers");
  const ack = await fi.last("fast.a", "50");
  eq([ack.stream, ack.seq, ack.count, ack.batch], ["FAST", 51, 51, fi.batch], "final ack");
  eq((await jsm.streams.info("FAST")).state.messages, 51, "stored");
  const fi2 = await startFastIngest(nc, "fast.b", "x", { allowGaps: true });
  await fi2.add("fast.b", "y");
  const end = await fi2.end();
  eq([end.seq, end.count], [53, 2], "end without storing");
  await jsm.streams.delete("FAST");
});

// ============================================================================ counters

check("counters: Nats-Incr increments, the value stored", async ({ js, jsm }) => {
  await jsm.streams.add({ name: "COUNT", subjects: ["count.>"], allow_msg_counter: true, allow_direct: true });
  for (const by of ["5", "3", "-2"]) {
    const h = headers();
    h.set("Nats-Incr", by);
    await js.publish("count.x", "", { headers: h });
  }
  const m = await jsm.streams.getMessage("COUNT", { last_by_subj: "count.x" });
  eq(JSON.parse(td.decode(m.data)), { val: "6" }, "value");
  const h = headers();
  h.set("Nats-Incr", "abc");
  await expectApiError(() => js.publish("count.x", "", { headers: h }), 10171, "invalid increment");
  await jsm.streams.delete("COUNT");
  await sleep(10);
});

// ================================================================================ main

main(
  async () => {
    const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
    const ctx = { nc, js: jetstream(nc, { timeout: 5000 }), jsm: await jetstreamManager(nc, { timeout: 5000 }) };
    // A stream that lives through every check: nats-server removes an account's store
    // directory when its last stream is deleted, and a stream created at that moment fails
    // ("could not create storage directory": its race, seen in CI between two checks).
    await ctx.jsm.streams.add({ name: "KEEP", subjects: ["keep.>"] });
    return { nc, ctx };
  },
  { verbose: Boolean(process.env.FEATURES_VERBOSE), timeoutMs: 30_000 },
);
