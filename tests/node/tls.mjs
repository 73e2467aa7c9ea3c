// nats.js v2 over TLS and with an nkey: `node tls.mjs <json>` where the JSON names the
// server URL, the CA, the client certificate and key (optional), handshakeFirst, and an
// nkey seed (optional). Connects, subscribes, publishes 64 KiB and reads it back; exit 0
// when the message came back intact, 1 when it did not, 2 when the connection failed.
import { connect, nkeyAuthenticator } from "nats";

const cfg = JSON.parse(process.argv[2]);
const opts = { servers: cfg.url, timeout: 5000, reconnect: false };
opts.tls = { caFile: cfg.ca };
if (cfg.cert) {
  opts.tls.certFile = cfg.cert;
  opts.tls.keyFile = cfg.key;
}
if (cfg.handshakeFirst) opts.tls.handshakeFirst = true;
if (cfg.seed) opts.authenticator = nkeyAuthenticator(new TextEncoder().encode(cfg.seed));

let nc;
try {
  nc = await connect(opts);
} catch (e) {
  console.log(`CONNECT FAILED ${e.code ?? ""} ${e.message}`);
  process.exit(2);
}
const payload = new Uint8Array(65536).map((_, i) => i % 251);
const sub = nc.subscribe("tls.node", { max: 1 });
nc.publish("tls.node", payload);
let ok = false;
for await (const m of sub) {
  ok = m.data.length === payload.length && m.data.every((b, i) => b === payload[i]);
}
await nc.close();
console.log(ok ? "OK" : "FAIL payload differs");
process.exit(ok ? 0 : 1);
