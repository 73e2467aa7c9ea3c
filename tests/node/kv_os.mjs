// nats.js v2 Key-Value (js.views.kv) and Object Store (js.views.os), used the way the
// library documents them, against a scratch server.
//
// Usage: node kv_os.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.
//
// nats.js v2 reads and watches through what the server offers: DIRECT.GET (by subject, by
// sequence, batches), STREAM.MSG.GET, ordered push consumers with flow control and
// last-per-subject / new / by-sequence deliver policies, filter_subjects and headers_only.

import {
  AckPolicy,
  connect,
  DeliverPolicy,
  headers,
  KvWatchInclude,
  StorageType,
  StringCodec,
} from "nats";
import { createHash, randomBytes } from "node:crypto";
import { assert, check, collect, eq, main, rejects, serverUrl, sleep, waitFor } from "./check.mjs";

const url = serverUrl("kv_os.mjs", "buckets");
const sc = StringCodec();

// The entries of a watcher up to its initializedFn (`initial`), then, after `during()` ran,
// up to `more` further entries (`later`).
async function watchEntries(kv, opts, more = 0, during = async () => {}) {
  let initialized = false;
  const initial = [];
  const later = [];
  const it = await kv.watch({ ...opts, initializedFn: () => (initialized = true) });
  const done = (async () => {
    for await (const e of it) {
      if (!initialized) initial.push(e);
      else later.push(e);
      if (initialized && later.length >= more) break;
    }
  })();
  await waitFor(() => initialized, "watch initialized");
  await during();
  if (more > 0) await Promise.race([done, sleep(3000)]);
  it.stop();
  return { initial, later };
}

function kvs(entries) {
  return entries.map((e) => [e.key, e.revision, sc.decode(e.value), e.operation]);
}

// ADR-20 digests: SHA-256 in padded base64url.
const sha = (data) =>
  "SHA-256=" + createHash("sha256").update(data).digest("base64").replaceAll("+", "-").replaceAll("/", "_");

async function readAll(rs) {
  const parts = [];
  const reader = rs.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  return Buffer.concat(parts);
}

// ================================================================================== KV

check("kv: create bucket, stream config and status", async ({ js, jsm }) => {
  const kv = await js.views.kv("CFG", { history: 5, description: "settings", max_bytes: 1 << 20 });
  const st = await kv.status();
  eq([st.bucket, st.values, st.history, st.ttl], ["CFG", 0, 5, 0], "status");
  const c = (await jsm.streams.info("KV_CFG")).config;
  eq(c.subjects, ["$KV.CFG.>"], "subjects");
  eq([c.max_msgs_per_subject, c.max_bytes, c.discard], [5, 1 << 20, "new"], "limits");
  eq([c.allow_rollup_hdrs, c.allow_direct, c.description], [true, true, "settings"], "flags");
  await kv.put("a", sc.encode("1"));
  await kv.put("a", sc.encode("2"));
  await kv.put("b", sc.encode("1"));
  eq((await kv.status()).values, 3, "values");
  // Binding again with other options keeps the bucket as it is.
  const again = await js.views.kv("CFG", { history: 9 });
  eq((await again.status()).history, 5, "history after re-bind");
  const bound = await js.views.kv("CFG", { bindOnly: true });
  eq(sc.decode((await bound.get("a")).value), "2", "bound get");
  eq(await kv.destroy(), true, "destroy");
  const e = await rejects(() => jsm.streams.info("KV_CFG"), "info after destroy");
  eq(e.message, "stream not found", "destroyed");
});

for (const direct of [true, false]) {
  check(`kv: put / get latest and by revision (allow_direct ${direct})`, async ({ nc, js }) => {
    const name = direct ? "PGD" : "PGS";
    const kv = await js.views.kv(name, { history: 3, allow_direct: direct });
    const seen = [];
    const spy = nc.subscribe("$JS.API.>", { callback: (_e, m) => seen.push(m.subject) });
    eq(await kv.put("color", sc.encode("blue")), 1, "put 1");
    eq(await kv.put("size", sc.encode("XL")), 2, "put 2");
    eq(await kv.put("color", sc.encode("green")), 3, "put 3");
    const e = await kv.get("color");
    eq([e.bucket, e.key, sc.decode(e.value), e.revision, e.operation, e.length], [name, "color", "green", 3, "PUT", 5], "latest");
    assert(e.created instanceof Date && e.created.getTime() > 0, "created is a date");
    eq(sc.decode((await kv.get("color", { revision: 1 })).value), "blue", "revision 1");
    eq(await kv.get("color", { revision: 2 }), null, "another key's revision");
    eq(await kv.get("color", { revision: 99 }), null, "missing revision");
    eq(await kv.get("missing"), null, "missing key");
    await kv.put("a.b.c", sc.encode("dots"));
    eq(sc.decode((await kv.get("a.b.c")).value), "dots", "dotted key");
    await kv.put("empty", new Uint8Array(0));
    eq((await kv.get("empty")).length, 0, "empty value");
    await nc.flush();
    spy.unsubscribe();
    const directs = seen.filter((s) => s.startsWith(`$JS.API.DIRECT.GET.KV_${name}`));
    const gets = seen.filter((s) => s === `$JS.API.STREAM.MSG.GET.KV_${name}`);
    if (direct) assert(directs.length >= 5 && gets.length === 0, `direct gets ${directs.length} / ${gets.length}`);
    else assert(gets.length >= 5 && directs.length === 0, `msg gets ${gets.length} / ${directs.length}`);
    await kv.destroy();
  });
}

check("kv: create, update with expected revision, delete and purge", async ({ js, jsm }) => {
  const kv = await js.views.kv("CAS", { history: 10 });
  eq(await kv.create("k", sc.encode("1")), 1, "create");
  let e = await rejects(() => kv.create("k", sc.encode("x")), "create existing");
  eq([e.api_error?.err_code, e.api_error?.code, e.message], [10071, 400, "wrong last sequence: 1"], "create error");
  eq(await kv.update("k", sc.encode("2"), 1), 2, "update");
  e = await rejects(() => kv.update("k", sc.encode("x"), 1), "stale update");
  eq([e.api_error?.err_code, e.message], [10071, "wrong last sequence: 2"], "update error");
  eq(await kv.put("k", sc.encode("3"), { previousSeq: 2 }), 3, "put with previousSeq");
  await kv.delete("k");
  let d = await kv.get("k");
  eq([d.operation, d.revision, d.length], ["DEL", 4, 0], "delete marker");
  eq(await kv.create("k", sc.encode("again")), 5, "create after delete");
  e = await rejects(() => kv.delete("k", { previousSeq: 4 }), "delete with stale revision");
  eq(e.api_error?.err_code, 10071, "delete CAS");
  await kv.delete("k", { previousSeq: 5 });
  await kv.put("other", sc.encode("o"));
  await kv.purge("k");
  d = await kv.get("k");
  eq([d.operation, d.revision], ["PURGE", 8], "purge marker");
  const raw = await jsm.streams.getMessage("KV_CAS", { seq: 8 });
  eq([raw.header.get("KV-Operation"), raw.header.get("Nats-Rollup")], ["PURGE", "sub"], "purge headers");
  const si = await jsm.streams.info("KV_CAS");
  eq([si.state.messages, si.state.first_seq, si.state.last_seq], [2, 7, 8], "purge rolled up the key");
  eq(await kv.create("k", sc.encode("after purge")), 9, "create after purge");
  await kv.delete("k");
  await kv.purgeDeletes(0);
  eq((await jsm.streams.info("KV_CAS")).state.messages, 1, "purgeDeletes removed the markers");
  await kv.destroy();
});

check("kv: history and keys", async ({ js }) => {
  const kv = await js.views.kv("HK", { history: 3 });
  for (let i = 1; i <= 5; i++) await kv.put("k", sc.encode(`${i}`));
  await kv.put("b.x", sc.encode("x"));
  await kv.put("b.y", sc.encode("y"));
  await kv.put("gone", sc.encode("g"));
  await kv.delete("gone");
  const h = await collect(await kv.history({ key: "k" }));
  eq(kvs(h), [["k", 3, "3", "PUT"], ["k", 4, "4", "PUT"], ["k", 5, "5", "PUT"]], "history");
  eq(h.map((e) => e.delta), [2, 1, 0], "history deltas");
  const all = await collect(await kv.history());
  eq(all.length, 7, "whole history (k keeps 3)");
  eq(await collect(await kv.history({ key: "none" })), [], "empty history");
  eq(await collect(await kv.keys()), ["k", "b.x", "b.y"], "keys");
  eq(await collect(await kv.keys("b.*")), ["b.x", "b.y"], "keys filtered");
  eq((await collect(await kv.keys(["k", "b.y"]))).sort(), ["b.y", "k"], "keys, several filters");
  await kv.destroy();
});

check("kv: watch last values, history, updates only, ignore deletes, several keys", async ({ js }) => {
  const kv = await js.views.kv("W", { history: 5 });
  await kv.put("a", sc.encode("1"));
  await kv.put("b", sc.encode("1"));
  await kv.put("a", sc.encode("2"));
  await kv.delete("b");
  await kv.put("c", sc.encode("1"));
  let w = await watchEntries(kv, {}, 2, async () => {
    await kv.put("d", sc.encode("new"));
    await kv.purge("a");
  });
  eq(kvs(w.initial), [["a", 3, "2", "PUT"], ["b", 4, "", "DEL"], ["c", 5, "1", "PUT"]], "last values");
  eq(kvs(w.later), [["d", 6, "new", "PUT"], ["a", 7, "", "PURGE"]], "live updates");
  w = await watchEntries(kv, { include: KvWatchInclude.AllHistory, key: "b" });
  eq(kvs(w.initial), [["b", 2, "1", "PUT"], ["b", 4, "", "DEL"]], "all history of b");
  w = await watchEntries(kv, { include: KvWatchInclude.UpdatesOnly }, 1, async () => {
    await kv.put("e", sc.encode("e"));
  });
  eq([kvs(w.initial), kvs(w.later)], [[], [["e", 8, "e", "PUT"]]], "updates only");
  w = await watchEntries(kv, { ignoreDeletes: true }, 1, async () => {
    await kv.delete("c");
    await kv.put("f", sc.encode("f"));
  });
  // Only DEL markers are left out: b's delete is, a's purge is not.
  eq(kvs(w.initial).map((x) => x[0]), ["c", "d", "a", "e"], "ignore deletes");
  eq(kvs(w.later), [["f", 10, "f", "PUT"]], "live delete skipped");
  w = await watchEntries(kv, { key: ["d", "f"] });
  eq(kvs(w.initial).map((x) => x[0]), ["d", "f"], "several keys");
  w = await watchEntries(kv, { key: "d", headers_only: true });
  eq([w.initial.length, w.initial[0].length, w.initial[0].value.length], [1, 3, 0], "headers only");
  w = await watchEntries(kv, { include: KvWatchInclude.AllHistory, resumeFromRevision: 9 });
  eq(kvs(w.initial).map((x) => x[1]), [9, 10], "resume from revision");
  await kv.destroy();
});

check("kv: bucket ttl expires values", async ({ js }) => {
  const kv = await js.views.kv("TTL", { ttl: 1000 });
  eq((await kv.status()).ttl, 1000, "status ttl");
  await kv.put("a", sc.encode("1"));
  await waitFor(async () => (await kv.get("a")) === null, "expiry", 4000);
  eq((await kv.status()).values, 0, "no values");
  await kv.destroy();
});

check("kv: republish", async ({ nc, js }) => {
  const got = [];
  nc.subscribe("repub.>", { callback: (_e, m) => got.push(m) });
  const kv = await js.views.kv("RP", { republish: { src: "$KV.RP.>", dest: "repub.>" }, history: 2 });
  await kv.put("a", sc.encode("one"));
  await kv.put("b", sc.encode("two"));
  await kv.put("a", sc.encode("three"));
  await kv.delete("b");
  await waitFor(() => got.length === 4, "republished messages");
  eq(got.map((m) => m.subject), ["repub.a", "repub.b", "repub.a", "repub.b"], "subjects");
  eq(got.map((m) => sc.decode(m.data)), ["one", "two", "three", ""], "payloads");
  eq(got.map((m) => m.headers.get("Nats-Last-Sequence")), ["0", "0", "1", "2"], "last sequences");
  eq([got[2].headers.get("Nats-Stream"), got[2].headers.get("Nats-Subject"), got[2].headers.get("Nats-Sequence")],
    ["KV_RP", "$KV.RP.a", "3"], "republish headers");
  eq(got[3].headers.get("KV-Operation"), "DEL", "republished delete");
  await kv.destroy();
});

check("kv: direct get API (single, batch, multi last)", async ({ js, jsm }) => {
  const kv = await js.views.kv("DG", { history: 5 });
  for (const [k, v] of [["a", "1"], ["b", "1"], ["a", "2"], ["c.x", "1"], ["c.y", "1"]]) {
    await kv.put(k, sc.encode(v));
  }
  await kv.delete("b");
  let m = await jsm.direct.getMessage("KV_DG", { last_by_subj: "$KV.DG.a" });
  eq([m.subject, m.seq, sc.decode(m.data)], ["$KV.DG.a", 3, "2"], "last_by_subj");
  m = await jsm.direct.getMessage("KV_DG", { next_by_subj: "$KV.DG.c.*", seq: 1 });
  eq([m.subject, m.seq], ["$KV.DG.c.x", 4], "next_by_subj");
  m = await jsm.direct.getMessage("KV_DG", { seq: 6 });
  eq([m.subject, m.header.get("KV-Operation")], ["$KV.DG.b", "DEL"], "by seq: a delete marker");
  const e = await rejects(() => jsm.direct.getMessage("KV_DG", { last_by_subj: "$KV.DG.zzz" }), "missing");
  eq(e.code, "404", "missing key is 404");
  // getBatch in nats.js 2.29 is the multi_last form (the last message of each subject).
  let batch = await collect(await jsm.direct.getBatch("KV_DG", { multi_last: ["$KV.DG.>"] }));
  // The client takes an empty payload for the end of a batch (its sentinel), so b's DEL
  // marker (seq 6, empty) ends this one.
  eq(batch.map((x) => [x.subject, x.seq]), [["$KV.DG.a", 3], ["$KV.DG.c.x", 4], ["$KV.DG.c.y", 5]], "multi_last");
  batch = await collect(await jsm.direct.getBatch("KV_DG", { multi_last: ["$KV.DG.a", "$KV.DG.b"], up_to_seq: 5 }));
  eq(batch.map((x) => [x.subject, x.seq]), [["$KV.DG.b", 2], ["$KV.DG.a", 3]], "multi_last up_to_seq");
  await kv.destroy();
});

check("kv: last-per-subject consumer", async ({ js, jsm }) => {
  const kv = await js.views.kv("LPS", { history: 5 });
  for (const [k, v] of [["a", "1"], ["b", "1"], ["a", "2"], ["c", "1"]]) await kv.put(k, sc.encode(v));
  await kv.delete("b");
  await jsm.consumers.add("KV_LPS", {
    durable_name: "LAST",
    deliver_policy: DeliverPolicy.LastPerSubject,
    ack_policy: AckPolicy.None,
    filter_subject: "$KV.LPS.>",
  });
  const ci = await jsm.consumers.info("KV_LPS", "LAST");
  eq(ci.num_pending, 3, "num_pending");
  const c = await js.consumers.get("KV_LPS", "LAST");
  const msgs = await collect(await c.fetch({ max_messages: 10, expires: 1000 }));
  eq(msgs.map((x) => [x.subject, x.seq, x.info.pending]), [["$KV.LPS.a", 3, 2], ["$KV.LPS.c", 4, 1], ["$KV.LPS.b", 5, 0]], "last per subject");
  await kv.destroy();
});

check("kv: memory storage bucket", async ({ js, jsm }) => {
  const kv = await js.views.kv("MEM", { storage: StorageType.Memory, history: 2 });
  eq((await jsm.streams.info("KV_MEM")).config.storage, "memory", "storage");
  await kv.put("x", sc.encode("1"));
  await kv.put("x", sc.encode("2"));
  await kv.put("x", sc.encode("3"));
  eq((await collect(await kv.history({ key: "x" }))).map((e) => e.revision), [2, 3], "history 2");
  await kv.destroy();
});

// ========================================================================= Object Store

check("os: create bucket, status, put/get sizes", async ({ js, jsm }) => {
  const os = await js.views.os("FILES", { description: "test files" });
  const st = await os.status();
  eq([st.bucket, st.description, st.sealed, st.size, st.storage], ["FILES", "test files", false, 0, "file"], "status");
  const c = (await jsm.streams.info("OBJ_FILES")).config;
  eq(c.subjects, ["$O.FILES.C.>", "$O.FILES.M.>"], "subjects");
  eq([c.allow_rollup_hdrs, c.allow_direct, c.discard], [true, true, "new"], "flags");
  for (const [name, size, chunks] of [["empty", 0, 0], ["small", 1000, 1], ["chunk", 128 * 1024, 1], ["many", 300_000, 3]]) {
    const data = randomBytes(size);
    const info = await os.putBlob({ name }, data);
    eq([info.name, info.bucket, info.size, info.chunks, info.digest, info.deleted], [name, "FILES", size, chunks, sha(data), false], `put ${name}`);
    const back = await os.getBlob(name);
    assert(Buffer.from(back).equals(data), `getBlob ${name}`);
    const r = await os.get(name);
    const streamed = await readAll(r.data);
    eq([streamed.length, await r.error], [size, null], `get ${name}`);
    assert(streamed.equals(data), `get ${name} bytes`);
  }
  // Small chunks through a ReadableStream.
  const data = randomBytes(10_000);
  const rs = new ReadableStream({ start(ctl) { ctl.enqueue(data.subarray(0, 4000)); ctl.enqueue(data.subarray(4000)); ctl.close(); } });
  const info = await os.put({ name: "stream.bin", description: "from a stream", options: { max_chunk_size: 1024 } }, rs);
  eq([info.size, info.chunks, info.description], [10_000, 10, "from a stream"], "put stream");
  assert(Buffer.from(await os.getBlob("stream.bin")).equals(data), "get stream.bin");
  const i2 = await os.info("stream.bin");
  eq([i2.size, i2.chunks, i2.digest, i2.options.max_chunk_size], [10_000, 10, sha(data), 1024], "info");
  eq(await os.info("missing"), null, "info of missing");
  eq(await os.getBlob("missing"), null, "getBlob of missing");
  eq((await os.list()).map((x) => x.name), ["empty", "small", "chunk", "many", "stream.bin"], "list");
  await os.destroy();
});

check("os: replace, delete, list", async ({ js, jsm }) => {
  const os = await js.views.os("DEL");
  await os.putBlob({ name: "f" }, randomBytes(300_000));
  await os.putBlob({ name: "f" }, sc.encode("short"));
  eq(sc.decode(await os.getBlob("f")), "short", "replaced");
  eq((await jsm.streams.info("OBJ_DEL")).state.messages, 2, "old chunks purged");
  await os.putBlob({ name: "g" }, randomBytes(200_000));
  const pr = await os.delete("g");
  eq([pr.success, pr.purged], [true, 2], "delete purged the chunks");
  const gi = await os.info("g");
  eq([gi.deleted, gi.size, gi.chunks], [true, 0, 0], "deleted info");
  eq(await os.getBlob("g"), null, "deleted object reads as missing");
  eq((await os.list()).map((x) => x.name), ["f"], "list skips deleted");
  await os.destroy();
});

check("os: links and meta updates", async ({ js }) => {
  const src = await js.views.os("SRC");
  const dst = await js.views.os("DST");
  const data = randomBytes(150_000);
  const target = await src.putBlob({ name: "target" }, data);
  const li = await dst.link("alias", target);
  eq([li.name, li.options.link.bucket, li.options.link.name], ["alias", "SRC", "target"], "link info");
  assert(Buffer.from(await dst.getBlob("alias")).equals(data), "read through the link");
  await dst.linkStore("store", src);
  const si = await dst.info("store");
  eq([si.options.link.bucket, si.options.link.name ?? ""], ["SRC", ""], "bucket link");
  await src.update("target", { name: "renamed", description: "new name" });
  eq(await src.info("target"), null, "old name gone");
  const ri = await src.info("renamed");
  eq([ri.description, ri.size, ri.digest], ["new name", 150_000, sha(data)], "renamed info");
  assert(Buffer.from(await src.getBlob("renamed")).equals(data), "renamed data");
  await src.destroy();
  await dst.destroy();
});

check("os: watch", async ({ js }) => {
  const os = await js.views.os("WATCH");
  await os.putBlob({ name: "a" }, sc.encode("1"));
  await os.putBlob({ name: "b" }, sc.encode("22"));
  await os.delete("a");
  const it = await os.watch({ includeHistory: true });
  const seen = [];
  const done = (async () => {
    for await (const x of it) {
      seen.push(x === null ? null : [x.name, x.size, !!x.deleted]);
      if (seen.length === 4) break;
    }
  })();
  await waitFor(() => seen.includes(null), "initial values");
  await os.putBlob({ name: "c" }, sc.encode("333"));
  await Promise.race([done, sleep(3000)]);
  it.stop();
  eq(seen, [["b", 2, false], ["a", 0, true], null, ["c", 3, false]], "watch");
  const ig = await os.watch({ includeHistory: true, ignoreDeletes: true });
  const seen2 = [];
  for await (const x of ig) {
    if (x === null) break;
    seen2.push(x.name);
  }
  eq(seen2, ["b", "c"], "ignore deletes");
  await os.destroy();
});

check("os: digest mismatch, seal", async ({ js, jsm }) => {
  const os = await js.views.os("DIG");
  const data = randomBytes(3000);
  const info = await os.putBlob({ name: "f", options: { max_chunk_size: 1000 } }, data);
  eq(info.chunks, 3, "chunks");
  await jsm.streams.deleteMessage("OBJ_DIG", 2);
  await js.publish(`$O.DIG.C.${info.nuid}`, randomBytes(1000));
  const r = await os.get("f");
  const e = await rejects(() => readAll(r.data), "read a corrupt object");
  assert(/digests do not match/.test(e.message), `digest error: ${e.message}`);
  const e2 = await rejects(() => os.getBlob("f"), "getBlob of a corrupt object");
  assert(/digests do not match/.test(e2.message), `getBlob digest error: ${e2.message}`);
  await os.seal();
  eq((await os.status()).sealed, true, "sealed");
  await rejects(() => os.putBlob({ name: "g" }, sc.encode("x")), "put into a sealed bucket");
  await os.destroy();
});

// ================================================================================ main

main(async () => {
  const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
  const ctx = { nc, js: nc.jetstream({ timeout: 5000 }), jsm: await nc.jetstreamManager({ timeout: 5000 }) };
  return { nc, ctx };
});
