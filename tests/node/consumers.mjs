// nats.js v2 JetStream *consumer* usage, as documented in the project's JetStream seed
// (consumerOpts builders, durable push js.subscribe, pullSubscribe + pull, fetch, consume,
// bind, JsMsg ack/nak/working/term and m.info, subscription lifecycle, jsm.consumers.*,
// consumer advisories), written against the real library.
//
// Usage: node consumers.mjs nats://127.0.0.1:4222
// Exits 0 when every check passed; otherwise prints each failed check and exits 1.
//
// Where the seed and nats.js v2 disagree, this script follows the library:
//  - the builder has deliverTo() (not deliverSubject()), ackExplicit()/ackAll()/ackNone()
//    (not ackPolicy()), deliverNew()/deliverAll()/... (not deliverPolicy()), and
//    replayInstantly()/replayOriginal() (not replayPolicy());
//  - js.subscribe/pullSubscribe take a builder or a ConsumerOpts ({config: {...}}), not
//    the seed's {durable, deliverSubject} object;
//  - pull/fetch wait with `expires` (ms), not `max_wait`;
//  - there is no js.consume(): consume() lives on js.consumers.get(stream, name);
//  - JsMsg has ackAck() (not ackSync()); DeliveryInfo counts deliveries in deliveryCount
//    (deliverySequence is the consumer sequence);
//  - js.subscribe(subject) sets filter_subject to `subject` unless a filter is given, and a
//    bound durable must have a matching filter; durations in configs are nanoseconds.

import {
  AckPolicy,
  AdvisoryKind,
  connect,
  consumerOpts,
  createInbox,
  DeliverPolicy,
  nanos,
  ReplayPolicy,
  RetentionPolicy,
  StorageType,
  StringCodec,
} from "nats";
import { CheckError, assert, check, collect, eq, expectApiError, main, serverUrl, sleep } from "./check.mjs";

const url = serverUrl("consumers.mjs", "streams");
const sc = StringCodec();

// Drains an async iterable (a subscription) into a buffer in the background, so a check
// can wait for "n messages within ms" without losing messages to abandoned next() calls.
function pump(iterable) {
  const buf = [];
  const done = (async () => {
    for await (const m of iterable) buf.push(m);
  })();
  return {
    buf,
    done,
    async take(n, ms = 2000, what = "messages") {
      const deadline = Date.now() + ms;
      while (buf.length < n) {
        if (Date.now() > deadline) {
          throw new CheckError(`${what}: expected ${n} within ${ms}ms, got ${buf.length}`);
        }
        await sleep(5);
      }
      return buf.splice(0, n);
    },
    async none(ms, what = "no more messages") {
      await sleep(ms);
      eq(buf.map((m) => m.seq), [], what);
    },
  };
}

const data = (msgs) => msgs.map((m) => sc.decode(m.data));

// ----------------------------------------------------------------------------- checks

check("setup streams", async ({ jsm }) => {
  await jsm.streams.add({ name: "orders", subjects: ["orders.*"], storage: StorageType.Memory });
  await jsm.streams.add({ name: "events", subjects: ["events.>"] });
  await jsm.streams.add({ name: "work", subjects: ["work.jobs"], retention: RetentionPolicy.Workqueue });
  await jsm.streams.add({ name: "logs", subjects: ["logs.>"], storage: StorageType.Memory });
});

check("durable push consumer from the builder (seed's order-processor)", async ({ js, jsm }) => {
  await js.publish("orders.created", sc.encode("old")); // before the consumer: deliverNew skips it
  const opts = consumerOpts()
    .durable("order-processor")
    .deliverTo(createInbox())
    .ackExplicit()
    .deliverNew()
    .maxDeliver(3)
    .ackWait(30000)
    .manualAck();
  const sub = await js.subscribe("orders.*", opts);
  const p = pump(sub);
  await js.publish("orders.created", sc.encode("o1"));
  await js.publish("orders.shipped", sc.encode("o2"));
  const msgs = await p.take(2);
  eq(data(msgs), ["o1", "o2"], "only new messages");
  eq(msgs.map((m) => m.subject), ["orders.created", "orders.shipped"], "subjects");
  eq(msgs.map((m) => m.seq), [2, 3], "stream seqs");
  const i0 = msgs[0].info;
  eq(
    [i0.stream, i0.consumer, i0.streamSequence, i0.deliverySequence, i0.deliveryCount, i0.redeliveryCount, i0.redelivered],
    ["orders", "order-processor", 2, 1, 1, 1, false],
    "m.info of the first",
  );
  assert(typeof i0.timestampNanos === "number" && i0.timestampNanos > 0, `timestampNanos ${i0.timestampNanos}`);
  eq([msgs[1].info.deliverySequence, msgs[1].info.pending], [2, 0], "m.info of the second");
  eq(msgs[0].redelivered, false, "m.redelivered");
  let ci = await sub.consumerInfo();
  eq(ci.config.durable_name, "order-processor", "durable_name");
  eq(ci.config.ack_policy, AckPolicy.Explicit, "ack_policy");
  eq(ci.config.deliver_policy, DeliverPolicy.New, "deliver_policy");
  eq([ci.config.max_deliver, ci.config.ack_wait], [3, nanos(30000)], "max_deliver/ack_wait");
  eq(ci.config.filter_subject, "orders.*", "filter_subject is the subscribed subject");
  eq(ci.num_ack_pending, 2, "num_ack_pending before acks");
  eq(ci.push_bound, true, "push_bound");
  for (const m of msgs) m.ack();
  await sleep(50);
  ci = await jsm.consumers.info("orders", "order-processor");
  eq([ci.num_ack_pending, ci.num_pending, ci.delivered.consumer_seq, ci.delivered.stream_seq], [0, 0, 2, 3], "after acks");
  eq([ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq], [2, 3], "ack_floor");
  // a second subscriber to a bound durable push consumer is refused by the client
  let err = null;
  try {
    await js.subscribe("orders.*", consumerOpts().durable("order-processor").deliverTo(createInbox()).manualAck());
  } catch (e) {
    err = e;
  }
  assert(err !== null && /duplicate subscription/.test(err.message), `second subscriber: ${err && err.message}`);
  await sub.drain();
  await p.done;
  eq(sub.isClosed(), true, "isClosed after drain");
  // the durable outlives its subscription; messages published meanwhile wait for it
  await js.publish("orders.created", sc.encode("o3"));
  ci = await jsm.consumers.info("orders", "order-processor");
  eq([ci.num_pending, ci.push_bound ?? false], [1, false], "unbound durable keeps its state");
});

check("durable push on events.user.* (seed's user-processor, fixed deliver subject)", async ({ js, jsm }) => {
  await js.publish("events.user.created", sc.encode("user-123"), { msgID: "unique-msg-1" });
  await js.publish("events.order.created", sc.encode("order-1"));
  await js.publish("events.user.deleted", sc.encode("user-456"));
  const sub = await js.subscribe(
    "events.user.*",
    consumerOpts().durable("user-processor").deliverTo("process.users").ackExplicit().manualAck(),
  );
  const p = pump(sub);
  const msgs = await p.take(2);
  eq(data(msgs), ["user-123", "user-456"], "filtered by events.user.*");
  eq(msgs.map((m) => m.info.streamSequence), [1, 3], "stream sequences");
  for (const m of msgs) m.ack();
  const ci = await sub.consumerInfo();
  eq([ci.config.deliver_subject, ci.config.deliver_policy], ["process.users", "all"], "deliver subject/policy");
  await p.none(100);
  sub.unsubscribe();
  await p.done;
  const info = await jsm.consumers.info("events", "user-processor");
  eq(info.delivered.stream_seq, 3, "delivered.stream_seq");
});

check("pullSubscribe + pull({batch, expires}) (seed's order-worker)", async ({ js, jsm }) => {
  const psub = await js.pullSubscribe("events.order.*", consumerOpts().durable("order-worker").ackExplicit().manualAck());
  const p = pump(psub);
  await js.publish("events.order.paid", sc.encode("order-2"));
  await js.publish("events.order.paid", sc.encode("order-3"));
  // nothing arrives without a pull
  await p.none(100, "no messages before pull");
  psub.pull({ batch: 10, expires: 1000 });
  const msgs = await p.take(3);
  eq(data(msgs), ["order-1", "order-2", "order-3"], "first pull");
  eq(msgs.map((m) => m.info.pending), [2, 1, 0], "m.info.pending counts down");
  eq(msgs.map((m) => m.info.consumer), ["order-worker", "order-worker", "order-worker"], "consumer");
  msgs[0].working(); // seed: extend the ack wait for long processing
  for (const m of msgs) m.ack();
  // the open request (batch 10) still waits: a new message is delivered to it
  await js.publish("events.order.refunded", sc.encode("order-4"));
  const [m4] = await p.take(1, 1500, "message for the still-open pull");
  eq([sc.decode(m4.data), m4.info.deliverySequence], ["order-4", 4], "late message");
  eq(await m4.ackAck(), true, "ackAck");
  await sleep(1000); // let the request expire (408 is swallowed by the library)
  for (let i = 5; i <= 7; i++) await js.publish("events.order.new", sc.encode(`order-${i}`));
  psub.pull({ batch: 2, expires: 1000 });
  const more = await p.take(2);
  eq(data(more), ["order-5", "order-6"], "batch of 2");
  await p.none(100, "batch limit respected");
  for (const m of more) m.ack();
  psub.pull({ batch: 50, expires: 500 });
  const last = await p.take(1);
  eq(data(last), ["order-7"], "remaining");
  last[0].ack();
  const ci = await psub.consumerInfo();
  eq([ci.config.durable_name, ci.config.filter_subject, ci.config.ack_policy], ["order-worker", "events.order.*", "explicit"], "config");
  assert(ci.config.deliver_subject === undefined, `pull consumer has no deliver_subject: ${ci.config.deliver_subject}`);
  eq(ci.num_waiting, 1, "num_waiting: the open pull");
  await psub.drain();
  await p.done;
  const info = await jsm.consumers.info("events", "order-worker");
  eq([info.delivered.consumer_seq, info.num_pending], [7, 0], "delivered");
});

check("work-queue pull consumer with maxAckPending; js.fetch", async ({ js, jsm }) => {
  const pullOpts = consumerOpts().durable("work-queue").ackExplicit().maxAckPending(100);
  const psub = await js.pullSubscribe("work.jobs", pullOpts);
  const ci = await psub.consumerInfo();
  eq(ci.config.max_ack_pending, 100, "max_ack_pending");
  psub.unsubscribe();
  for (let i = 1; i <= 3; i++) await js.publish("work.jobs", sc.encode(`job-${i}`));
  const t0 = Date.now();
  const got = await collect(js.fetch("work", "work-queue", { batch: 5, expires: 500 }));
  eq(data(got), ["job-1", "job-2", "job-3"], "fetch returns what there is");
  assert(Date.now() - t0 >= 400, "fetch waited for expires when the batch was not filled");
  for (const m of got) await m.ackAck();
  let si = await jsm.streams.info("work");
  eq(si.state.messages, 0, "work-queue stream drops acked messages");
  for (let i = 4; i <= 6; i++) await js.publish("work.jobs", sc.encode(`job-${i}`));
  const t1 = Date.now();
  const two = await collect(js.fetch("work", "work-queue", { batch: 2, expires: 5000 }));
  eq(data(two), ["job-4", "job-5"], "full batch");
  assert(Date.now() - t1 < 1000, "a filled batch ends the fetch at once");
  for (const m of two) m.ack();
  const nw = await collect(js.fetch("work", "work-queue", { batch: 5, no_wait: true }));
  eq(data(nw), ["job-6"], "no_wait fetch");
  nw[0].nak(); // back to the queue
  const again = await collect(js.fetch("work", "work-queue", { batch: 1, expires: 1000 }));
  eq([data(again), again[0].redelivered, again[0].info.deliveryCount], [["job-6"], true, 2], "nak'd job redelivered");
  again[0].ack();
  const empty = await collect(js.fetch("work", "work-queue", { batch: 5, no_wait: true }));
  eq(empty.length, 0, "no_wait on an empty consumer");
  await sleep(50);
  si = await jsm.streams.info("work");
  eq(si.state.messages, 0, "all jobs consumed");
});

check("consume() via js.consumers.get (js.consume in the seed)", async ({ js }) => {
  const c = await js.consumers.get("work", "work-queue");
  eq((await c.info()).name, "work-queue", "consumer.info()");
  for (let i = 7; i <= 10; i++) await js.publish("work.jobs", sc.encode(`job-${i}`));
  const messages = await c.consume({ max_messages: 10, expires: 1000 });
  const got = [];
  for await (const m of messages) {
    got.push(sc.decode(m.data));
    m.ack();
    if (got.length === 4) messages.stop(); // ends the iteration
  }
  eq(got, ["job-7", "job-8", "job-9", "job-10"], "consumed in order");
  const closed = await messages.closed();
  assert(!(closed instanceof Error), `consume closed with ${closed}`);
  const m = await c.next({ expires: 1000 }); // the library refuses expires < 1 s
  eq(m, null, "next() on an empty consumer");
  await js.publish("work.jobs", sc.encode("job-11"));
  const n = await c.next({ expires: 1000 });
  eq(n && sc.decode(n.data), "job-11", "next()");
  n.ack();
  const f = await collect(await c.fetch({ max_messages: 3, expires: 1000 }));
  eq(f.length, 0, "consumer.fetch when empty");
});

check("ephemeral push by start time with filterSubject (seed's logs)", async ({ js }) => {
  await js.publish("logs.error.db", sc.encode("e1"));
  await js.publish("logs.info.api", sc.encode("i1"));
  await js.publish("logs.error.api", sc.encode("e2"));
  const ephemeralOpts = consumerOpts()
    .deliverTo(createInbox())
    .startTime(new Date("2023-01-01"))
    .filterSubject("logs.error.*")
    .ackNone();
  const logSub = await js.subscribe("logs.>", ephemeralOpts);
  const p = pump(logSub);
  const msgs = await p.take(2);
  eq(data(msgs), ["e1", "e2"], "only logs.error.*");
  const ci = await logSub.consumerInfo();
  eq(ci.config.deliver_policy, DeliverPolicy.StartTime, "deliver_policy");
  eq(new Date(ci.config.opt_start_time).toISOString(), "2023-01-01T00:00:00.000Z", "opt_start_time");
  eq(ci.config.filter_subject, "logs.error.*", "filter_subject");
  assert(ci.config.durable_name === undefined, `ephemeral has no durable_name: ${ci.config.durable_name}`);
  assert(typeof ci.name === "string" && ci.name.length > 0, "generated name");
  eq(ci.config.ack_policy, "none", "ack_policy none");
  await p.none(100);
  await logSub.destroy();
  await p.done;
  eq(logSub.isClosed(), true, "isClosed after destroy");
  let err = null;
  try {
    await logSub.consumerInfo();
  } catch (e) {
    err = e;
  }
  assert(err !== null, "consumer gone after destroy");
});

check("bind to an existing consumer (push and pull)", async ({ js, jsm }) => {
  const inbox = createInbox();
  const added = await jsm.consumers.add("events", {
    durable_name: "existing-consumer",
    deliver_subject: inbox,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.Last,
  });
  eq([added.name, added.config.deliver_subject, added.num_pending], ["existing-consumer", inbox, 1], "consumers.add");
  const boundSub = await js.subscribe("", consumerOpts().bind("events", "existing-consumer").manualAck());
  const p = pump(boundSub);
  const [m] = await p.take(1);
  eq([m.subject, sc.decode(m.data), m.info.consumer], ["events.order.new", "order-7", "existing-consumer"], "last message");
  m.ack();
  await js.publish("events.user.created", sc.encode("user-789"));
  const [n] = await p.take(1);
  eq(sc.decode(n.data), "user-789", "new message to the bound sub");
  n.ack();
  boundSub.unsubscribe();
  await p.done;
  // binding to a consumer that does not exist fails
  let err = null;
  try {
    await js.subscribe("", consumerOpts().bind("events", "no-such-consumer").manualAck());
  } catch (e) {
    err = e;
  }
  assert(err !== null, "bind to a missing consumer");
  // pull bind
  await jsm.consumers.add("events", { durable_name: "pull-bound", ack_policy: AckPolicy.Explicit, filter_subject: "events.user.>" });
  const psub = await js.pullSubscribe("events.user.>", consumerOpts().bind("events", "pull-bound").manualAck());
  const pp = pump(psub);
  psub.pull({ batch: 2, expires: 1000 });
  const got = await pp.take(2);
  eq(data(got), ["user-123", "user-456"], "pull via bind");
  for (const x of got) x.ack();
  psub.unsubscribe();
  await pp.done;
});

check("ack/nak(delay)/term by delivery count (seed's order-handler) and advisories", async ({ js, jsm }) => {
  const adv = [];
  const advIter = jsm.advisories();
  (async () => {
    for await (const a of advIter) adv.push(a);
  })();
  await sleep(50);
  const sub = await js.subscribe(
    "orders.*",
    consumerOpts().durable("order-handler").deliverTo(createInbox()).deliverNew().ackExplicit().ackWait(10000).manualAck(),
  );
  const p = pump(sub);
  await js.publish("orders.failed", sc.encode("bad"));
  await js.publish("orders.created", sc.encode("good"));
  let [a, b] = await p.take(2);
  eq([sc.decode(a.data), a.info.deliveryCount, a.redelivered], ["bad", 1, false], "first delivery");
  b.ack();
  const seen = [];
  for (;;) {
    seen.push([a.info.deliveryCount, a.redelivered, a.info.deliverySequence]);
    if (a.info.deliveryCount >= 3) {
      a.term();
      break;
    }
    const t0 = Date.now();
    a.nak(100); // retry after 100 ms (the seed waits 5 s)
    [a] = await p.take(1, 2000, "redelivery after nak");
    assert(Date.now() - t0 >= 80, `nak delay honoured (${Date.now() - t0} ms)`);
  }
  eq(seen, [[1, false, 1], [2, true, 3], [3, true, 4]], "[deliveryCount, redelivered, deliverySequence]");
  await p.none(200, "no redelivery after term");
  const ci = await jsm.consumers.info("orders", "order-handler");
  eq([ci.num_ack_pending, ci.num_redelivered, ci.delivered.consumer_seq], [0, 0, 4], "after term");
  eq(ci.ack_floor.stream_seq, ci.delivered.stream_seq, "ack floor reaches the termed message");
  await sleep(100);
  const term = adv.find((x) => x.kind === AdvisoryKind.Terminated);
  assert(term !== undefined, `MSG_TERMINATED advisory, got kinds ${JSON.stringify(adv.map((x) => x.kind))}`);
  eq([term.data.stream, term.data.consumer, term.data.deliveries], ["orders", "order-handler", 3], "terminated advisory");
  const created = adv.find((x) => x.kind === AdvisoryKind.ConsumerAction && x.data.consumer === "order-handler");
  assert(created !== undefined && created.data.action === "create", "consumer create advisory");
  sub.unsubscribe();
  await p.done;
});

check("maxDeliver stops redelivery; ack wait expiry redelivers", async ({ js, jsm }) => {
  const sub = await js.subscribe(
    "orders.*",
    consumerOpts().durable("limited").deliverTo(createInbox()).deliverNew().ackExplicit().ackWait(300).maxDeliver(2).manualAck(),
  );
  const p = pump(sub);
  await js.publish("orders.retry", sc.encode("r"));
  const [first] = await p.take(1);
  eq(first.info.deliveryCount, 1, "first");
  // no ack: redelivered after ack_wait
  const [second] = await p.take(1, 2000, "redelivery after ack wait");
  eq([second.info.deliveryCount, second.redelivered, second.seq], [2, true, first.seq], "second");
  await p.none(600, "max_deliver 2 reached");
  const ci = await jsm.consumers.info("orders", "limited");
  eq([ci.config.max_deliver, ci.config.ack_wait, ci.num_ack_pending], [2, nanos(300), 0], "limited consumer");
  sub.unsubscribe();
  await p.done;
});

check("queue group (deliverGroup) shares a durable push consumer", async ({ js, jsm }) => {
  const deliver = createInbox();
  const mk = () => consumerOpts().durable("q-workers").deliverTo(deliver).queue("workers").ackExplicit().manualAck();
  const s1 = await js.subscribe("logs.>", mk());
  const s2 = await js.subscribe("logs.>", mk());
  const p1 = pump(s1);
  const p2 = pump(s2);
  await sleep(50);
  const ci = await jsm.consumers.info("logs", "q-workers");
  eq([ci.config.deliver_group, ci.push_bound], ["workers", true], "deliver_group");
  for (let i = 0; i < 20; i++) await js.publish(`logs.q.${i}`, sc.encode(`${i}`));
  const deadline = Date.now() + 2000;
  while (p1.buf.length + p2.buf.length < 23 && Date.now() < deadline) await sleep(10);
  const all = [...p1.buf, ...p2.buf];
  for (const m of all) m.ack();
  eq(all.length, 23, "every message once across the group");
  eq(new Set(all.map((m) => m.seq)).size, 23, "no message twice");
  // a non-queue subscriber cannot take the queue durable
  let err = null;
  try {
    await js.subscribe("logs.>", consumerOpts().durable("q-workers").deliverTo(deliver).manualAck());
  } catch (e) {
    err = e;
  }
  assert(err !== null && /duplicate subscription|queue group/.test(err.message), `bind without queue: ${err && err.message}`);
  s1.unsubscribe();
  s2.unsubscribe();
  await Promise.all([p1.done, p2.done]);
});

check("other builder options reach the consumer config", async ({ js, jsm }) => {
  const opts = consumerOpts()
    .durable("tuned")
    .deliverTo(createInbox())
    .ackAll()
    .startSequence(2)
    .replayInstantly()
    .idleHeartbeat(1000)
    .flowControl()
    .maxAckPending(5)
    .description("tuned consumer")
    .manualAck();
  const sub = await js.subscribe("orders.*", opts);
  const ci = await sub.consumerInfo();
  eq(
    [ci.config.ack_policy, ci.config.deliver_policy, ci.config.opt_start_seq, ci.config.replay_policy],
    ["all", "by_start_sequence", 2, ReplayPolicy.Instant],
    "policies",
  );
  eq([ci.config.idle_heartbeat, ci.config.flow_control, ci.config.max_ack_pending, ci.config.description], [nanos(1000), true, 5, "tuned consumer"], "tuning");
  const p = pump(sub);
  const msgs = await p.take(5);
  eq(msgs.map((m) => m.seq), [2, 3, 4, 5, 6], "from start sequence 2");
  await p.none(200, "max_ack_pending 5 holds back seq 7");
  msgs[2].ack(); // ack all: acks 2..4
  const [m7] = await p.take(1, 2000, "seq 7 after acks free max_ack_pending");
  eq(m7.seq, 7, "seq 7");
  let after = await jsm.consumers.info("orders", "tuned");
  eq([after.ack_floor.stream_seq, after.num_ack_pending], [4, 3], "ack all up to seq 4");
  m7.ack();
  await sleep(50);
  after = await jsm.consumers.info("orders", "tuned");
  eq([after.ack_floor.stream_seq, after.num_ack_pending], [7, 0], "ack all up to seq 7");
  await sub.destroy();
  await p.done;
});

check("jsm.consumers info/list/update/delete", async ({ jsm }) => {
  const names = (await collect(jsm.consumers.list("orders"))).map((c) => c.name).sort();
  eq(names, ["limited", "order-handler", "order-processor"], "consumers.list");
  const ci = await jsm.consumers.info("orders", "order-processor");
  eq([ci.stream_name, ci.name], ["orders", "order-processor"], "consumers.info");
  const up = await jsm.consumers.update("orders", "order-processor", { description: "updated", max_deliver: 5 });
  eq([up.config.description, up.config.max_deliver], ["updated", 5], "consumers.update");
  await expectApiError(() => jsm.consumers.info("orders", "nope"), 10014, "info missing consumer");
  await expectApiError(() => jsm.consumers.info("nope", "x"), 10059, "info on missing stream");
  eq(await jsm.consumers.delete("orders", "limited"), true, "delete");
  await expectApiError(() => jsm.consumers.delete("orders", "limited"), 10014, "delete twice");
  const si = await jsm.streams.info("orders");
  eq(si.state.consumer_count, 2, "stream consumer_count");
  const ai = await jsm.getAccountInfo();
  eq(ai.consumers, 2 + 4 + 1 + 1, "account consumers");
});

check("delete streams", async ({ jsm }) => {
  for (const n of ["orders", "events", "work", "logs"]) eq(await jsm.streams.delete(n), true, `delete ${n}`);
  const ai = await jsm.getAccountInfo();
  eq([ai.streams, ai.consumers], [0, 0], "account empty again");
});

// ----------------------------------------------------------------------------- main

main(
  async () => {
    const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0 });
    const ctx = { nc, js: nc.jetstream({ timeout: 5000 }), jsm: await nc.jetstreamManager({ timeout: 5000 }) };
    return { nc, ctx };
  },
  // A check that hangs (a subscription that never ends, a pull never answered) fails.
  { timeoutMs: 8000 },
);
