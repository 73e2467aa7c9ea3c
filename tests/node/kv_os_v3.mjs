// nats.js v3 Key-Value (@nats-io/kv Kvm) and Object Store (@nats-io/obj Objm) against a
// scratch server: what v3 adds over v2 (limit markers / markerTTL, per-key TTL on create,
// purge with a TTL, Kvm/Objm listing) and its own read paths (push consumers through
// js.consumers.getPushConsumer, direct gets).
//
// Usage: node kv_os_v3.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.

import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm, KvWatchInclude } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { createHash, randomBytes } from "node:crypto";
import { assert, check, collect, eq, main, rejects, serverUrl, sleep, waitFor } from "./check.mjs";

const url = serverUrl("kv_os_v3.mjs", "buckets");
const te = new TextEncoder();
const td = new TextDecoder();

const sha = (data) =>
  "SHA-256=" + createHash("sha256").update(data).digest("base64").replaceAll("+", "-").replaceAll("/", "_");

// ================================================================================== KV

check("kvm: create, open, list, status, destroy", async ({ nc, jsm }) => {
  const kvm = new Kvm(nc);
  const kv = await kvm.create("V3", { history: 4, description: "v3 bucket" });
  const st = await kv.status();
  eq([st.bucket, st.history, st.values, st.markerTTL], ["V3", 4, 0, 0], "status");
  await kvm.create("V3B", { ttl: 60_000 });
  const names = (await collect(kvm.list())).map((s) => s.bucket).sort();
  eq(names, ["V3", "V3B"], "list");
  const opened = await kvm.open("V3");
  await kv.put("k", te.encode("v"));
  eq(td.decode((await opened.get("k")).value), "v", "open and get");
  await rejects(() => kvm.open("MISSING").then((b) => b.status()), "open a missing bucket");
  eq(await kv.destroy(), true, "destroy");
  await (await kvm.open("V3B")).destroy();
  eq((await jsm.streams.names().next()).length, 0, "no streams left");
});

check("kv: put, get, create, update, delete, purge, history, keys", async ({ nc }) => {
  const kv = await new Kvm(nc).create("OPS", { history: 5 });
  eq(await kv.create("a", te.encode("1")), 1, "create");
  const e = await rejects(() => kv.create("a", te.encode("x")), "create existing");
  eq(e.message, "wrong last sequence: 1", "create error");
  eq(await kv.update("a", te.encode("2"), 1), 2, "update");
  await rejects(() => kv.update("a", te.encode("x"), 1), "stale update");
  await kv.put("b.x", te.encode("bx"));
  await kv.put("b.y", te.encode("by"));
  await kv.delete("b.x");
  await kv.purge("b.y");
  eq((await kv.get("b.x")).operation, "DEL", "deleted entry");
  eq((await kv.get("b.y")).operation, "PURGE", "purged entry");
  eq(await kv.get("nope"), null, "missing");
  eq(td.decode((await kv.get("a", { revision: 1 })).value), "1", "revision");
  eq(await kv.create("b.x", te.encode("again")), 7, "create after delete");
  const h = await collect(await kv.history({ key: "a" }));
  eq(h.map((x) => [x.revision, td.decode(x.value), x.operation]), [[1, "1", "PUT"], [2, "2", "PUT"]], "history");
  eq(await collect(await kv.keys()), ["a", "b.x"], "keys");
  eq(await collect(await kv.keys("b.>")), ["b.x"], "keys filtered");
  await kv.destroy();
});

check("kv: watch (last values, updates only, history)", async ({ nc }) => {
  const kv = await new Kvm(nc).create("W3", { history: 5 });
  await kv.put("a", te.encode("1"));
  await kv.put("a", te.encode("2"));
  await kv.put("b", te.encode("1"));
  const seen = [];
  const w = await kv.watch();
  const done = (async () => {
    for await (const x of w) {
      seen.push([x.key, x.revision, x.operation, x.isUpdate]);
      if (seen.length === 4) break;
    }
  })();
  await waitFor(() => seen.length === 2, "initial values");
  await kv.delete("a");
  await kv.put("c", te.encode("c"));
  await Promise.race([done, sleep(3000)]);
  w.stop();
  eq(seen, [["a", 2, "PUT", false], ["b", 3, "PUT", true], ["a", 4, "DEL", true], ["c", 5, "PUT", true]], "watch");
  const upd = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
  const got = [];
  const d2 = (async () => {
    for await (const x of upd) {
      got.push([x.key, x.revision]);
      break;
    }
  })();
  await sleep(100);
  await kv.put("d", te.encode("d"));
  await Promise.race([d2, sleep(3000)]);
  upd.stop();
  eq(got, [["d", 6]], "updates only");
  const hist = await kv.watch({ include: KvWatchInclude.AllHistory, key: "a" });
  const all = [];
  for await (const x of hist) {
    all.push(x.revision);
    if (all.length === 3) break;
  }
  eq(all, [1, 2, 4], "history watch");
  await kv.destroy();
});

check("kv: markerTTL, per-key TTL on create, purge with a TTL", async ({ nc, jsm }) => {
  const kv = await new Kvm(nc).create("MT", { markerTTL: 2000, history: 3 });
  const c = (await jsm.streams.info("KV_MT")).config;
  eq([c.allow_msg_ttl, c.subject_delete_marker_ttl], [true, 2_000_000_000], "stream config");
  eq((await kv.status()).markerTTL, 2000, "status markerTTL");
  const seen = [];
  const w = await kv.watch();
  (async () => {
    for await (const x of w) seen.push([x.key, x.revision, x.operation]);
  })().then();
  eq(await kv.create("short", te.encode("s"), "1s"), 1, "create with TTL");
  const m = await jsm.streams.getMessage("KV_MT", { seq: 1 });
  eq(m.header.get("Nats-TTL"), "2", "the TTL is raised to the marker TTL (in seconds)");
  await kv.put("p", te.encode("p"));
  await kv.purge("p", { ttl: "1s" });
  const pm = await jsm.streams.getMessage("KV_MT", { seq: 3 });
  eq([pm.header.get("KV-Operation"), pm.header.get("Nats-TTL")], ["PURGE", "2"], "purge marker with TTL");
  // The key expires (after 2 s): a MaxAge marker takes its place, seen as a PURGE.
  await waitFor(() => seen.some((x) => x[0] === "short" && x[2] === "PURGE"), "expiry marker", 6000);
  const e = await kv.get("short");
  eq([e.operation, e.revision], ["PURGE", 4], "marker entry");
  const mm = await jsm.streams.getMessage("KV_MT", { seq: 4 });
  eq([mm.header.get("Nats-Marker-Reason"), mm.header.get("Nats-TTL")], ["MaxAge", "2s"], "marker headers");
  w.stop();
  await kv.destroy();
});

check("kv: a bucket sourcing two buckets, and a mirror bucket", async ({ nc, jsm }) => {
  const kvm = new Kvm(nc);
  const east = await kvm.create("EAST");
  const west = await kvm.create("WEST");
  await east.put("t.1", te.encode("e1"));
  await west.put("t.2", te.encode("w2"));
  const all = await kvm.create("ALL", { sources: [{ name: "EAST" }, { name: "WEST" }] });
  const c = (await jsm.streams.info("KV_ALL")).config;
  eq([c.subjects, c.sources.map((s) => s.name)], [["$KV.ALL.>"], ["KV_EAST", "KV_WEST"]], "sourcing config");
  eq(c.sources[0].subject_transforms, [{ src: "$KV.EAST.>", dest: "$KV.ALL.>" }], "transform");
  // (each source copies on its own: wait for both keys)
  await waitFor(async () => (await all.get("t.1")) !== null && (await all.get("t.2")) !== null, "sourced keys");
  eq(td.decode((await all.get("t.1")).value), "e1", "value from EAST");
  await east.put("t.1", te.encode("e1b"));
  await waitFor(async () => td.decode((await all.get("t.1")).value) === "e1b", "update copied");
  await west.delete("t.2");
  await waitFor(async () => (await all.get("t.2")).operation === "DEL", "delete copied");
  await all.put("own", te.encode("o"));
  eq((await collect(await all.keys())).sort(), ["own", "t.1"], "keys of the sourcing bucket");
  const m = await kvm.create("MEAST", { mirror: { name: "EAST" } });
  const mc = (await jsm.streams.info("KV_MEAST")).config;
  eq([mc.mirror.name, mc.mirror_direct, mc.subjects ?? []], ["KV_EAST", true, []], "mirror config");
  // (EAST keeps one value per key: its sequence 2, which the mirror holds at 2)
  await waitFor(async () => (await jsm.streams.info("KV_MEAST")).state.last_seq === 2, "mirrored");
  const got = await jsm.streams.getMessage("KV_MEAST", { last_by_subj: "$KV.EAST.t.1" });
  eq([got.seq, td.decode(got.data)], [2, "e1b"], "the mirror's copy");
  for (const b of [all, m, east, west]) await b.destroy();
});

// ========================================================================= Object Store

check("objm: create, put/get, info, list, delete, watch, links", async ({ nc, jsm }) => {
  const objm = new Objm(nc);
  const os = await objm.create("O3", { description: "v3 objects" });
  const c = (await jsm.streams.info("OBJ_O3")).config;
  eq([c.subjects, c.allow_direct, c.allow_rollup_hdrs], [["$O.O3.C.>", "$O.O3.M.>"], true, true], "config");
  for (const [name, size] of [["empty", 0], ["small", 10], ["many", 400_000]]) {
    const data = randomBytes(size);
    const info = await os.putBlob({ name }, data);
    eq([info.size, info.digest], [size, sha(data)], `put ${name}`);
    assert(Buffer.from(await os.getBlob(name)).equals(data), `get ${name}`);
  }
  eq((await os.list()).map((x) => x.name), ["empty", "small", "many"], "list");
  const pr = await os.delete("many");
  eq([pr.success, pr.purged], [true, 4], "delete");
  eq((await os.info("many")).deleted, true, "deleted info");
  const target = await os.info("small");
  await os.link("alias", target);
  eq((await os.getBlob("alias")).length, 10, "link");
  const w = await os.watch({ includeHistory: true });
  const seen = [];
  // v3 watchers have no null marker: entries carry isUpdate instead.
  for await (const x of w) {
    seen.push(x.name);
    if (seen.length === 4) break;
  }
  eq(seen, ["empty", "small", "many", "alias"], "watch");
  eq((await collect(objm.list())).map((s) => s.bucket), ["O3"], "objm list");
  eq(await os.destroy(), true, "destroy");
});

check("kvm and objm: compressed buckets (compression: s2 streams)", async ({ nc, jsm }) => {
  const kv = await new Kvm(nc).create("ZKV", { compression: true, history: 2 });
  eq((await kv.status()).compression, true, "kv status");
  eq((await jsm.streams.info("KV_ZKV")).config.compression, "s2", "kv stream config");
  const rows = Array.from({ length: 300 }, (_, i) => ({ i, site: "north", celsius: 21.5 }));
  const doc = te.encode(JSON.stringify(rows));
  await kv.put("doc", doc);
  await kv.put("doc", te.encode("short"));
  eq(td.decode((await kv.get("doc")).value), "short", "kv last value");
  const hist = await collect(await kv.history({ key: "doc" }));
  eq(hist.map((e) => e.value.length), [doc.length, 5], "kv history, values as put");
  eq(td.decode(hist[0].value), td.decode(doc), "kv compressed value back");
  const os = await new Objm(nc).create("ZOS", { compression: true });
  eq((await os.status()).compression, true, "os status");
  const data = new Uint8Array(400_000).map((_, i) => (i * 7) % 251);
  const info = await os.putBlob({ name: "blob" }, data);
  eq([info.size, info.digest], [data.length, sha(data)], "os put");
  assert(Buffer.from(await os.getBlob("blob")).equals(Buffer.from(data)), "os get");
  eq(await kv.destroy(), true, "kv destroy");
  eq(await os.destroy(), true, "os destroy");
});

// ================================================================================ main

main(
  async () => {
    const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
    const ctx = { nc, js: jetstream(nc, { timeout: 5000 }), jsm: await jetstreamManager(nc, { timeout: 5000 }) };
    return { nc, ctx };
  },
  { verbose: Boolean(process.env.KVOS_VERBOSE) },
);
