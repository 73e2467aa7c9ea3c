// nats.js v2 JetStream *stream* usage, as documented in the project's JetStream seed
// (connect, jetstream(), jetstreamManager(), jsm.streams.*, js.publish with msgID,
// headers and expectations, jsm.getAccountInfo), written against the real library.
//
// Usage: node streams.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.
//
// Where the seed and nats.js v2 disagree, this script follows the library:
//  - a failed expectation is a NatsError whose `api_error.err_code` is 10071 (the seed
//    tests `err.code === "10071"`, but `err.code` is the HTTP-like "400");
//  - JetStreamAccountStats has memory/storage/streams/consumers/api/limits; there are no
//    `messages`/`bytes` fields (the seed's getAccountInfo example prints them);
//  - StoredMsg carries `header` (not `headers`), `time` is a Date and `timestamp` the
//    server's string;
//  - `purge(stream, {keep})` etc. return {success, purged};
//  - durations (max_age, duplicate_window) are nanoseconds: nanos(ms) builds them.

import {
  connect,
  headers,
  JSONCodec,
  nanos,
  RetentionPolicy,
  StorageType,
  StringCodec,
  DiscardPolicy,
} from "nats";
import { assert, check, collect, eq, expectApiError, main, serverUrl, waitFor } from "./check.mjs";

const url = serverUrl("streams.mjs", "streams");
const sc = StringCodec();
const jc = JSONCodec();

// ----------------------------------------------------------------------------- checks

check("account info before any stream", async ({ jsm }) => {
  const ai = await jsm.getAccountInfo();
  eq(ai.streams, 0, "streams");
  eq(ai.consumers, 0, "consumers");
  assert(typeof ai.memory === "number" && typeof ai.storage === "number", "memory/storage numbers");
  assert(ai.limits && typeof ai.limits.max_streams === "number", "limits.max_streams");
  assert(ai.api && typeof ai.api.total === "number" && typeof ai.api.errors === "number", "api stats");
});

check("streams.add (seed's events stream)", async ({ jsm }) => {
  const si = await jsm.streams.add({
    name: "events",
    subjects: ["events.*"],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    max_msgs: 100000,
    max_bytes: 1024 * 1024 * 100,
    max_age: nanos(24 * 60 * 60 * 1000),
    duplicate_window: nanos(5 * 60 * 1000),
  });
  eq(si.config.name, "events", "config.name");
  eq(si.config.subjects, ["events.*"], "config.subjects");
  eq(si.config.storage, "file", "config.storage");
  eq(si.config.retention, "limits", "config.retention");
  eq(si.config.max_msgs, 100000, "config.max_msgs");
  eq(si.config.max_bytes, 104857600, "config.max_bytes");
  eq(si.config.max_age, 86400000000000, "config.max_age");
  eq(si.config.duplicate_window, 300000000000, "config.duplicate_window");
  eq(si.config.discard, "old", "config.discard default");
  eq(si.config.num_replicas, 1, "config.num_replicas default");
  eq(si.state.messages, 0, "state.messages");
  eq(si.state.last_seq, 0, "state.last_seq");
  assert(typeof si.created === "string" && si.created.length > 0, "created timestamp");
});

check("streams.add more streams; same config is idempotent, a different one fails", async ({ jsm }) => {
  await jsm.streams.add({ name: "orders", subjects: ["orders.*"], storage: StorageType.Memory });
  await jsm.streams.add({
    name: "inventory",
    subjects: ["inventory.>"],
    allow_direct: true,
    discard: DiscardPolicy.Old,
  });
  const again = await jsm.streams.add({ name: "orders", subjects: ["orders.*"], storage: StorageType.Memory });
  eq(again.config.name, "orders", "re-add returns the stream");
  // JSStreamNameExistErr
  await expectApiError(
    () => jsm.streams.add({ name: "orders", subjects: ["orders.*", "other.*"], storage: StorageType.Memory }),
    10058,
    "add with a different config",
  );
  // JSStreamSubjectOverlapErr
  await expectApiError(
    () => jsm.streams.add({ name: "overlap", subjects: ["events.user"] }),
    10065,
    "add with overlapping subjects",
  );
});

check("js.publish basic ack", async ({ js }) => {
  const ack = await js.publish("orders.created", jc.encode({ orderId: "ord-123", amount: 99.99 }));
  eq(ack.stream, "orders", "ack.stream");
  eq(ack.seq, 1, "ack.seq");
  eq(ack.duplicate, false, "ack.duplicate");
});

check("js.publish with msgID deduplicates", async ({ js }) => {
  const a1 = await js.publish("events.user", sc.encode("user-123"), { msgID: "unique-msg-1", timeout: 5000 });
  eq([a1.stream, a1.seq, a1.duplicate], ["events", 1, false], "first publish");
  const a2 = await js.publish("events.user", sc.encode("user-123"), { msgID: "unique-msg-1", timeout: 5000 });
  eq([a2.stream, a2.seq, a2.duplicate], ["events", 1, true], "duplicate publish");
  const a3 = await js.publish("events.user", sc.encode("user-456"), { msgID: "unique-msg-2" });
  eq([a3.seq, a3.duplicate], [2, false], "new msgID");
});

check("js.publish expectations", async ({ js }) => {
  // wrong last sequence: JSStreamWrongLastSequenceErrF
  const err = await expectApiError(
    () => js.publish("events.order", sc.encode("x"), { expect: { lastSequence: 42 } }),
    10071,
    "wrong expect.lastSequence",
  );
  assert(err.api_error.code === 400, `api_error.code 400, got ${err.api_error.code}`);
  assert(/wrong last sequence: 2/.test(err.api_error.description), `description: ${err.api_error.description}`);
  let ack = await js.publish("events.order", sc.encode("x"), { expect: { lastSequence: 2 } });
  eq(ack.seq, 3, "right expect.lastSequence");
  // last sequence for the subject
  await expectApiError(
    () => js.publish("events.order", sc.encode("y"), { expect: { lastSubjectSequence: 42 } }),
    10071,
    "wrong expect.lastSubjectSequence",
  );
  ack = await js.publish("events.order", sc.encode("y"), { expect: { lastSubjectSequence: 3 } });
  eq(ack.seq, 4, "right expect.lastSubjectSequence");
  // 0 is an expectation too ("no message yet"), not "no expectation"
  await expectApiError(
    () => js.publish("events.order", sc.encode("y"), { expect: { lastSequence: 0 } }),
    10071,
    "expect.lastSequence 0 on a non-empty stream",
  );
  await expectApiError(
    () => js.publish("events.order", sc.encode("y"), { expect: { lastSubjectSequence: 0 } }),
    10071,
    "expect.lastSubjectSequence 0 on a subject that has messages",
  );
  ack = await js.publish("events.fresh", sc.encode("z"), { expect: { lastSubjectSequence: 0 } });
  eq(ack.seq, 5, "expect.lastSubjectSequence 0 on a new subject");
  // stream name: JSStreamNotMatchErr
  await expectApiError(
    () => js.publish("events.order", sc.encode("z"), { expect: { streamName: "orders" } }),
    10060,
    "wrong expect.streamName",
  );
  ack = await js.publish("events.order", sc.encode("z"), { expect: { streamName: "events" } });
  eq(ack.seq, 6, "right expect.streamName");
  // last msg id: JSStreamWrongLastMsgIDErrF
  ack = await js.publish("events.order", sc.encode("w"), { msgID: "m-7" });
  eq(ack.seq, 7, "publish with msgID m-7");
  await expectApiError(
    () => js.publish("events.order", sc.encode("v"), { expect: { lastMsgID: "nope" } }),
    10070,
    "wrong expect.lastMsgID",
  );
  ack = await js.publish("events.order", sc.encode("v"), { msgID: "m-8", expect: { lastMsgID: "m-7" } });
  eq(ack.seq, 8, "right expect.lastMsgID");
});

check("js.publish with headers; getMessage returns them", async ({ js, jsm }) => {
  const hdrs = headers();
  hdrs.set("source", "order-service");
  hdrs.set("version", "1.0");
  const ack = await js.publish("orders.updated", jc.encode({ id: 7 }), { headers: hdrs, msgID: "update-7" });
  eq([ack.stream, ack.seq], ["orders", 2], "ack");
  const sm = await jsm.streams.getMessage("orders", { seq: 2 });
  eq(sm.subject, "orders.updated", "subject");
  eq(sm.seq, 2, "seq");
  eq(sm.json(), { id: 7 }, "data");
  assert(sm.header, "header present");
  eq(sm.header.get("source"), "order-service", "header source");
  eq(sm.header.get("version"), "1.0", "header version");
  eq(sm.header.get("Nats-Msg-Id"), "update-7", "Nats-Msg-Id header");
  assert(sm.time instanceof Date && !isNaN(sm.time.getTime()), "time is a Date");
  assert(Math.abs(Date.now() - sm.time.getTime()) < 60_000, `time close to now: ${sm.timestamp}`);
});

check("publish to a subject no stream listens on fails (no responders)", async ({ js }) => {
  let err = null;
  try {
    await js.publish("nostream.here", sc.encode("x"), { timeout: 2000 });
  } catch (e) {
    err = e;
  }
  assert(err !== null, "publish without a stream must fail");
  eq(err.code, "503", "error code");
});

check("streams.info", async ({ jsm }) => {
  const si = await jsm.streams.info("events");
  eq(si.config.name, "events", "config.name");
  eq(si.state.messages, 8, "state.messages");
  eq(si.state.first_seq, 1, "state.first_seq");
  eq(si.state.last_seq, 8, "state.last_seq");
  assert(si.state.bytes > 0, "state.bytes > 0");
  eq(si.state.num_subjects, 3, "state.num_subjects");
  assert(typeof si.state.first_ts === "string", "first_ts string");
  const withSubj = await jsm.streams.info("events", { subjects_filter: ">" });
  const subjects = Object.entries(withSubj.state.subjects || {}).sort();
  eq(subjects, [["events.fresh", 1], ["events.order", 5], ["events.user", 2]], "state.subjects");
  await expectApiError(() => jsm.streams.info("missing"), 10059, "info on a missing stream");
});

check("streams.list / names / find", async ({ jsm }) => {
  const infos = await collect(jsm.streams.list());
  eq(infos.map((s) => s.config.name).sort(), ["events", "inventory", "orders"], "list names");
  const ev = infos.find((s) => s.config.name === "events");
  eq(ev.state.messages, 8, "list: events messages");
  const names = await collect(jsm.streams.names());
  eq(names.sort(), ["events", "inventory", "orders"], "names");
  const filtered = await collect(jsm.streams.names("orders.created"));
  eq(filtered, ["orders"], "names filtered by subject");
  const listFiltered = await collect(jsm.streams.list("inventory.a.b"));
  eq(listFiltered.map((s) => s.config.name), ["inventory"], "list filtered by subject");
  const none = await collect(jsm.streams.names("zzz.none"));
  eq(none, [], "names with no match");
  eq(await jsm.streams.find("events.anything"), "events", "find");
});

check("streams.getMessage by seq and last_by_subj", async ({ jsm }) => {
  let sm = await jsm.streams.getMessage("events", { seq: 1 });
  eq([sm.subject, sm.seq, sc.decode(sm.data)], ["events.user", 1, "user-123"], "seq 1");
  sm = await jsm.streams.getMessage("events", { last_by_subj: "events.order" });
  eq([sm.subject, sm.seq, sc.decode(sm.data)], ["events.order", 8, "v"], "last_by_subj");
  await expectApiError(() => jsm.streams.getMessage("events", { seq: 999 }), 10037, "missing seq");
  await expectApiError(
    () => jsm.streams.getMessage("events", { last_by_subj: "events.none" }),
    10037,
    "missing subject",
  );
  await expectApiError(() => jsm.streams.getMessage("missing", { seq: 1 }), 10059, "missing stream");
});

check("streams.get returns a Stream object", async ({ jsm }) => {
  const s = await jsm.streams.get("events");
  eq(s.name, "events", "name");
  const si = await s.info();
  eq(si.state.last_seq, 8, "info via Stream");
  const sm = await s.getMessage({ seq: 2 });
  eq(sc.decode(sm.data), "user-456", "getMessage via Stream");
});

check("streams.deleteMessage (erase and no_erase)", async ({ jsm }) => {
  eq(await jsm.streams.deleteMessage("events", 3), true, "erase seq 3");
  eq(await jsm.streams.deleteMessage("events", 4, false), true, "no_erase seq 4");
  await expectApiError(() => jsm.streams.getMessage("events", { seq: 3 }), 10037, "get erased seq 3");
  await expectApiError(() => jsm.streams.getMessage("events", { seq: 4 }), 10037, "get deleted seq 4");
  // JSSequenceNotFoundErrF
  await expectApiError(() => jsm.streams.deleteMessage("events", 3), 10043, "delete seq 3 again");
  const si = await jsm.streams.info("events");
  eq(si.state.messages, 6, "messages after deletes");
  eq(si.state.num_deleted, 2, "num_deleted");
  const det = await jsm.streams.info("events", { deleted_details: true });
  eq(det.state.deleted, [3, 4], "deleted details");
});

check("streams.deleteMessage past the last sequence or of seq 0", async ({ jsm }) => {
  // nats-server answers JSStreamMsgDeleteFailedF (500, "stream store EOF" / "no message found")
  await expectApiError(() => jsm.streams.deleteMessage("events", 999), 10057, "delete seq past the end");
  await expectApiError(() => jsm.streams.deleteMessage("events", 0), 10057, "delete seq 0");
});

check("streams.update", async ({ jsm }) => {
  const si = await jsm.streams.update("orders", { subjects: ["orders.*", "returns.*"], max_msgs: 50 });
  eq(si.config.subjects, ["orders.*", "returns.*"], "updated subjects");
  eq(si.config.max_msgs, 50, "updated max_msgs");
  eq(si.state.messages, 2, "messages kept");
  const again = await jsm.streams.info("orders");
  eq(again.config.max_msgs, 50, "info shows update");
  // storage type cannot change: JSStreamInvalidConfigF
  await expectApiError(
    () => jsm.streams.update("orders", { storage: StorageType.File }),
    10052,
    "changing storage",
  );
});

check("streams.purge (filter, seq, keep, all)", async ({ js, jsm }) => {
  for (let i = 0; i < 10; i++) {
    await js.publish(`inventory.item.${i % 2 ? "odd" : "even"}`, sc.encode(`item ${i}`));
  }
  let r = await jsm.streams.purge("inventory", { filter: "inventory.item.odd", keep: 1 });
  eq([r.success, r.purged], [true, 4], "purge filter+keep");
  r = await jsm.streams.purge("inventory", { seq: 5 });
  eq([r.success, r.purged], [true, 2], "purge seq < 5");
  let si = await jsm.streams.info("inventory");
  eq([si.state.messages, si.state.first_seq, si.state.last_seq], [4, 5, 10], "state after partial purges");
  r = await jsm.streams.purge("inventory", { keep: 1 });
  eq([r.success, r.purged], [true, 3], "purge keep 1");
  r = await jsm.streams.purge("inventory");
  eq([r.success, r.purged], [true, 1], "purge all");
  si = await jsm.streams.info("inventory");
  eq([si.state.messages, si.state.first_seq, si.state.last_seq], [0, 11, 10], "state after purge");
  const ack = await js.publish("inventory.item.new", sc.encode("after purge"));
  eq(ack.seq, 11, "sequence continues after purge");
  let err = null;
  try {
    await jsm.streams.purge("inventory", { keep: 1, seq: 2 });
  } catch (e) {
    err = e;
  }
  assert(err !== null, "keep+seq is refused by the client");
});

check("direct get on an allow_direct stream", async ({ jsm }) => {
  const dm = await jsm.direct.getMessage("inventory", { last_by_subj: "inventory.item.new" });
  eq([dm.subject, dm.seq, sc.decode(dm.data), dm.stream], ["inventory.item.new", 11, "after purge", "inventory"], "direct last_by_subj");
  const dm2 = await jsm.direct.getMessage("inventory", { seq: 11 });
  eq(dm2.seq, 11, "direct seq");
});

check("list and names page past one response (300 streams)", async ({ jsm }) => {
  const N = 300;
  const made = [];
  try {
    for (let i = 0; i < N; i++) {
      const name = `page${String(i).padStart(3, "0")}`;
      await jsm.streams.add({ name, subjects: [`page.${i}`], storage: StorageType.Memory });
      made.push(name);
    }
    const infos = await collect(jsm.streams.list());
    eq(infos.length, N + 3, "list length");
    eq(new Set(infos.map((s) => s.config.name)).size, N + 3, "list has no repeats");
    const names = await collect(jsm.streams.names());
    eq(names.length, N + 3, "names length");
    const ai = await jsm.getAccountInfo();
    eq(ai.streams, N + 3, "account streams");
  } finally {
    for (const name of made) await jsm.streams.delete(name);
  }
});

check("config.metadata carries the server's _nats.* keys", async ({ jsm }) => {
  // nats-server 2.11+ stores _nats.req.level and adds _nats.ver/_nats.level to responses
  const si = await jsm.streams.info("events");
  const keys = Object.keys(si.config.metadata || {}).sort();
  eq(keys, ["_nats.level", "_nats.req.level", "_nats.ver"], "metadata keys");
});

check("limits: max_msgs with discard new, max_msg_size, max_msgs_per_subject", async ({ js, jsm }) => {
  await jsm.streams.add({
    name: "lim",
    subjects: ["lim.>"],
    max_msgs: 2,
    discard: DiscardPolicy.New,
    max_msg_size: 10,
  });
  eq((await js.publish("lim.a", sc.encode("1"))).seq, 1, "first");
  eq((await js.publish("lim.a", sc.encode("2"))).seq, 2, "second");
  const full = await expectApiError(() => js.publish("lim.a", sc.encode("3")), 10077, "stream full");
  eq(full.api_error.code, 503, "stream full: code");
  await expectApiError(() => js.publish("lim.b", sc.encode("0123456789ABC")), 10054, "too large");
  await jsm.streams.add({ name: "ps", subjects: ["ps.>"], max_msgs_per_subject: 2 });
  for (let i = 1; i <= 4; i++) eq((await js.publish("ps.a", sc.encode(`${i}`))).seq, i, `ps seq ${i}`);
  await js.publish("ps.b", sc.encode("b"));
  const si = await jsm.streams.info("ps");
  eq([si.state.messages, si.state.first_seq, si.state.last_seq, si.state.num_subjects], [3, 3, 5, 2], "ps state");
  const next = await jsm.streams.getMessage("ps", { next_by_subj: "ps.a", seq: 1 });
  eq([next.seq, sc.decode(next.data)], [3, "3"], "next_by_subj skips the discarded");
  eq(await jsm.streams.delete("lim"), true, "delete lim");
  eq(await jsm.streams.delete("ps"), true, "delete ps");
});

check("deny_delete, deny_purge, first_seq, rollup and sealed", async ({ js, jsm }) => {
  await jsm.streams.add({ name: "deny", subjects: ["deny.>"], deny_delete: true, deny_purge: true });
  await js.publish("deny.a", sc.encode("x"));
  await expectApiError(() => jsm.streams.deleteMessage("deny", 1), 10057, "delete on deny_delete");
  await expectApiError(() => jsm.streams.purge("deny"), 10110, "purge on deny_purge");
  const fs = await jsm.streams.add({ name: "fs", subjects: ["fs.>"], first_seq: 100 });
  eq([fs.state.first_seq, fs.state.last_seq], [100, 99], "first_seq state");
  eq((await js.publish("fs.a", sc.encode("x"))).seq, 100, "first message at first_seq");
  await jsm.streams.add({ name: "ru", subjects: ["ru.>"], allow_rollup_hdrs: true });
  for (let i = 0; i < 3; i++) await js.publish("ru.a", sc.encode(`${i}`));
  await js.publish("ru.b", sc.encode("other"));
  const h = headers();
  h.set("Nats-Rollup", "sub");
  eq((await js.publish("ru.a", sc.encode("R"), { headers: h })).seq, 5, "rollup seq");
  let si = await jsm.streams.info("ru");
  eq([si.state.messages, si.state.first_seq, si.state.last_seq], [2, 4, 5], "after subject rollup");
  si = await jsm.streams.update("ru", { ...si.config, sealed: true });
  eq(si.config.sealed, true, "sealed");
  await expectApiError(() => js.publish("ru.a", sc.encode("x")), 10109, "publish to a sealed stream");
  await expectApiError(() => jsm.streams.purge("ru"), 10109, "purge a sealed stream");
  for (const n of ["deny", "fs", "ru"]) eq(await jsm.streams.delete(n), true, `delete ${n}`);
});

check("dedup survives a purge; missing-stream errors", async ({ js, jsm }) => {
  await jsm.streams.add({ name: "dd", subjects: ["dd"], storage: StorageType.Memory, duplicate_window: nanos(60_000) });
  eq((await js.publish("dd", sc.encode("x"), { msgID: "once" })).seq, 1, "first");
  eq((await jsm.streams.purge("dd")).purged, 1, "purge");
  const again = await js.publish("dd", sc.encode("x"), { msgID: "once" });
  eq([again.seq, again.duplicate], [1, true], "still a duplicate after purge");
  eq(await jsm.streams.delete("dd"), true, "delete dd");
  await expectApiError(() => jsm.streams.purge("nope"), 10059, "purge missing");
  await expectApiError(() => jsm.streams.deleteMessage("nope", 1), 10059, "deleteMessage missing");
  await expectApiError(() => jsm.streams.update("nope", { subjects: ["nope"] }), 10059, "update missing");
});

check("account info after activity", async ({ jsm }) => {
  const ai = await jsm.getAccountInfo();
  eq(ai.streams, 3, "streams");
  assert(ai.storage > 0, `storage > 0 (file streams hold messages), got ${ai.storage}`);
  assert(ai.memory > 0, `memory > 0 (orders is a memory stream), got ${ai.memory}`);
  assert(ai.api.total > 10, `api.total counts requests, got ${ai.api.total}`);
  assert(ai.api.errors > 0, `api.errors counts failed requests, got ${ai.api.errors}`);
});

check("message tracing: Nats-Trace-Dest and Nats-Trace-Only (ADR-41)", async ({ nc, jsm }) => {
  // (on a cluster each server a message crosses sends its own trace: the publisher's
  // server's has the client ingress, kind 0)
  const traces = [];
  const tsub = nc.subscribe("trace.js");
  (async () => {
    for await (const m of tsub) traces.push(jc.decode(m.data));
  })();
  const got = [];
  const sub = nc.subscribe("plain.traced");
  (async () => {
    for await (const m of sub) got.push(sc.decode(m.data));
  })();
  await nc.flush();
  const h = headers();
  h.set("Nats-Trace-Dest", "trace.js");
  nc.publish("plain.traced", sc.encode("delivered"), { headers: h });
  const only = headers();
  only.set("Nats-Trace-Dest", "trace.js");
  only.set("Nats-Trace-Only", "true");
  nc.publish("plain.traced", sc.encode("trace only"), { headers: only });
  const origin = () => traces.filter((t) => t.events[0].type === "in" && t.events[0].kind === 0);
  await waitFor(async () => origin().length >= 2, "the publisher's server's two traces");
  await nc.flush();
  eq(got, ["delivered"], "the trace-only message is not delivered");
  for (const t of origin()) {
    eq(t.events[0].subj, "plain.traced", "ingress subject");
    assert(t.events.some((e) => e.type === "eg" && e.kind === 0), "an egress to the subscriber");
  }
  eq(origin().map((t) => t.request.header["Nats-Trace-Only"] || null), [null, ["true"]], "requests");
  // into a stream: checked, traced with the stream's js event, not stored
  const before = (await jsm.streams.info("events")).state.messages;
  traces.length = 0;
  nc.publish("events.traced", sc.encode("x"), { headers: only });
  const jsEvent = () => traces.flatMap((t) => t.events).find((e) => e.type === "js");
  await waitFor(async () => jsEvent() !== undefined, "the stream's js event");
  const js = jsEvent();
  assert(js.stream === "events" && js.subject === "events.traced", `js event ${JSON.stringify(js)}`);
  eq((await jsm.streams.info("events")).state.messages, before, "nothing stored");
  tsub.unsubscribe();
  sub.unsubscribe();
});

check("streams.delete", async ({ jsm, js }) => {
  eq(await jsm.streams.delete("orders"), true, "delete orders");
  await expectApiError(() => jsm.streams.info("orders"), 10059, "info after delete");
  await expectApiError(() => jsm.streams.delete("orders"), 10059, "delete twice");
  const names = await collect(jsm.streams.names());
  eq(names.sort(), ["events", "inventory"], "names after delete");
  let err = null;
  try {
    await js.publish("orders.created", sc.encode("x"), { timeout: 2000 });
  } catch (e) {
    err = e;
  }
  assert(err !== null && err.code === "503", `publish to a deleted stream: ${err && err.code}`);
  eq(await jsm.streams.delete("events"), true, "delete events");
  eq(await jsm.streams.delete("inventory"), true, "delete inventory");
  const ai = await jsm.getAccountInfo();
  eq([ai.streams, ai.storage, ai.memory], [0, 0, 0], "account empty again");
});

// ----------------------------------------------------------------------------- main

main(async () => {
  const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
  const ctx = { nc, js: nc.jetstream({ timeout: 5000 }), jsm: await nc.jetstreamManager({ timeout: 5000 }) };
  return { nc, ctx };
});
