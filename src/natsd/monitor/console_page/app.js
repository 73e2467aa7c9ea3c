// natsd's console: reads /console/api/cluster every few seconds and /console/api/messages
// on demand; draws with htm + Preact, charts with uPlot. Read-only.
import { html, render, useState, useEffect, useRef } from "/console/vendor/htm-preact-standalone.module.js";
import uPlot from "/console/vendor/uPlot.esm.js";

const params = new URLSearchParams(location.search);
const INTERVAL = Math.max(250, Number(params.get("interval")) || 2000);
const HISTORY = 300; // samples kept for the charts
const COLORS = ["#2f6fde", "#d9822b", "#1f7a3f", "#9c3fbd", "#b3261e", "#0f8b8d"];

const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? ""));
const bytes = (n) => {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
};
const streamKey = (s) => `${s.account}/${s.name}`;

function useRoute() {
  const [hash, setHash] = useState(location.hash || "#/");
  useEffect(() => {
    const on = () => setHash(location.hash || "#/");
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  const [path, query] = hash.slice(1).split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query || "") };
}

// One sample of the cluster: the view, and the rates since the previous sample.
function useCluster() {
  const [state, setState] = useState({ view: null, error: "", samples: [] });
  useEffect(() => {
    let stop = false;
    let prev = null;
    let samples = [];
    async function poll() {
      try {
        const r = await fetch("/console/api/cluster", { cache: "no-store" });
        if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
        const view = await r.json();
        const totals = { in: 0, out: 0 };
        for (const s of view.servers) { totals.in += s.in_msgs; totals.out += s.out_msgs; }
        const seqs = {};
        for (const s of view.streams) seqs[streamKey(s)] = s.last_seq;
        const cur = { t: view.time, totals, seqs };
        if (prev && cur.t > prev.t) {
          const dt = cur.t - prev.t;
          const streams = {};
          for (const k in seqs) if (k in prev.seqs) streams[k] = Math.max(0, (seqs[k] - prev.seqs[k]) / dt);
          samples = samples.concat([{
            t: cur.t,
            in: Math.max(0, (totals.in - prev.totals.in) / dt),
            out: Math.max(0, (totals.out - prev.totals.out) / dt),
            streams,
          }]).slice(-HISTORY);
        }
        prev = cur;
        if (!stop) setState({ view, error: "", samples });
      } catch (e) {
        if (!stop) setState((s) => ({ ...s, error: String(e) }));
      }
      if (!stop) setTimeout(poll, INTERVAL);
    }
    poll();
    return () => { stop = true; };
  }, []);
  return state;
}

function Chart({ title, labels, data, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const opts = {
      title,
      width: Math.max(360, box.current.clientWidth || 480),
      height: 220,
      series: [{}, ...labels.map((label, i) => ({ label, stroke: COLORS[i % COLORS.length], width: 2 }))],
      axes: [{}, { label: "msgs/s" }],
    };
    plot.current = new uPlot(opts, data, box.current);
    return () => plot.current.destroy();
  }, [title, labels.join("\u0000")]);
  useEffect(() => { if (plot.current) plot.current.setData(data); }, [data]);
  return html`<div class="chart" data-testid=${testid} data-points=${data[0].length} ref=${box}></div>`;
}

function Servers({ view, samples }) {
  const data = [samples.map((s) => s.t), samples.map((s) => s.in), samples.map((s) => s.out)];
  return html`
    <section>
      <h2>Servers</h2>
      <table data-testid="servers">
        <thead><tr><th>Name</th><th>Cluster</th><th>Version</th><th>Uptime</th>
          <th class="num">Connections</th><th class="num">Subscriptions</th>
          <th class="num">Msgs in</th><th class="num">Msgs out</th><th class="num">Memory</th><th>Meta</th></tr></thead>
        <tbody>${view.servers.map((s) => html`
          <tr data-server=${s.name}>
            <td>${s.name}${s.name === view.server ? " (this)" : ""}</td><td>${s.cluster}</td><td>${s.version}</td>
            <td>${s.uptime}</td><td class="num">${fmt(s.connections)}</td><td class="num">${fmt(s.subscriptions)}</td>
            <td class="num">${fmt(s.in_msgs)}</td><td class="num">${fmt(s.out_msgs)}</td><td class="num">${bytes(s.mem)}</td>
            <td class=${s.meta_leader ? "lead" : ""}>${s.meta_leader ? "leader" : ""}</td>
          </tr>`)}
        </tbody>
      </table>
    </section>
    <section>
      <h2>Routes</h2>
      <table data-testid="routes">
        <thead><tr><th>Server</th><th>Peer</th><th>RTT</th><th class="num">Msgs in</th><th class="num">Msgs out</th><th class="num">Pending</th></tr></thead>
        <tbody>${view.servers.flatMap((s) => s.routes.map((r) => html`
          <tr data-route=${`${s.name}>${r.remote_name}`}>
            <td>${s.name}</td><td>${r.remote_name}</td><td>${r.rtt}</td>
            <td class="num">${fmt(r.in_msgs)}</td><td class="num">${fmt(r.out_msgs)}</td><td class="num">${bytes(r.pending_size)}</td>
          </tr>`))}
        </tbody>
      </table>
    </section>
    <section>
      <h2>Message rates</h2>
      <div class="charts">
        <${Chart} title="Messages per second (all servers)" labels=${["in", "out"]} data=${data} testid="chart-rates" />
      </div>
    </section>`;
}

function Replicas({ s }) {
  if (!s.replicas.length) return html`<span class="lead">${s.leader}</span>`;
  return html`<span class="lead">${s.leader}</span>${s.replicas.map((r) => html`,
    <span class=${r.current ? "" : "behind"} title=${`lag ${r.lag}`}>${r.name}${r.current ? "" : ` (behind ${r.lag})`}</span>`)}`;
}

function Streams({ view }) {
  return html`
    <section>
      <h2>Streams</h2>
      <table data-testid="streams">
        <thead><tr><th>Account</th><th>Stream</th><th>Subjects</th><th>Storage</th><th class="num">Replicas</th>
          <th>Leader, replicas</th><th class="num">Messages</th><th class="num">Bytes</th><th class="num">Consumers</th><th></th></tr></thead>
        <tbody>${view.streams.map((s) => html`
          <tr data-stream=${s.name}>
            <td>${s.account}</td>
            <td><a href=${`#/stream/${encodeURIComponent(s.account)}/${encodeURIComponent(s.name)}`}>${s.name}</a></td>
            <td>${s.subjects.join(" ")}</td><td>${s.storage}</td><td class="num">${s.num_replicas}</td>
            <td><${Replicas} s=${s} /></td>
            <td class="num">${fmt(s.messages)}</td><td class="num">${bytes(s.bytes)}</td><td class="num">${fmt(s.consumer_count)}</td>
            <td><a href=${`#/messages/${encodeURIComponent(s.account)}/${encodeURIComponent(s.name)}`}>messages</a></td>
          </tr>`)}
        </tbody>
      </table>
    </section>`;
}

function Stream({ view, samples, account, name }) {
  const s = view.streams.find((x) => x.account === account && x.name === name);
  if (!s) return html`<section><p class="error" data-testid="missing">No stream ${name} in account ${account}.</p></section>`;
  const key = streamKey(s);
  const data = [samples.map((x) => x.t), samples.map((x) => x.streams[key] ?? 0)];
  return html`
    <section>
      <h2 data-testid="stream-title">Stream ${s.name} <small>(${s.account})</small></h2>
      <table data-testid="stream-state"><tbody>
        <tr><th>Subjects</th><td>${s.subjects.join(" ")}</td><th>Storage</th><td>${s.storage}</td><th>Retention</th><td>${s.retention}</td></tr>
        <tr><th>Messages</th><td data-testid="stream-messages">${fmt(s.messages)}</td><th>Bytes</th><td>${bytes(s.bytes)}</td>
            <th>Sequences</th><td>${fmt(s.first_seq)} – ${fmt(s.last_seq)}</td></tr>
        <tr><th>Leader</th><td data-testid="stream-leader" class="lead">${s.leader}</td><th>Replicas</th>
            <td colspan="3" data-testid="stream-replicas">${s.replicas.map((r) => html`<span class=${r.current ? "" : "behind"}>${r.name} (${r.current ? "current" : `behind ${r.lag}`}) </span>`)}</td></tr>
      </tbody></table>
      <p><a href=${`#/messages/${encodeURIComponent(s.account)}/${encodeURIComponent(s.name)}`}>Browse messages</a></p>
    </section>
    <section>
      <h2>Consumers</h2>
      <table data-testid="consumers">
        <thead><tr><th>Consumer</th><th>Kind</th><th>Ack</th><th class="num">Pending</th><th class="num">Ack pending</th>
          <th class="num">Redelivered</th><th class="num">Waiting pulls</th><th class="num">Delivered</th><th class="num">Ack floor</th><th>Last active</th></tr></thead>
        <tbody>${s.consumers.map((c) => html`
          <tr data-consumer=${c.name}>
            <td>${c.name}</td><td>${c.pull ? "pull" : "push"}${c.durable ? ", durable" : ""}</td><td>${c.ack_policy}</td>
            <td class=${"num" + (c.num_pending ? " behind" : "")} data-testid="pending">${fmt(c.num_pending)}</td>
            <td class="num">${fmt(c.num_ack_pending)}</td><td class="num">${fmt(c.num_redelivered)}</td>
            <td class="num">${fmt(c.num_waiting)}</td><td class="num">${fmt(c.delivered)}</td><td class="num">${fmt(c.ack_floor)}</td>
            <td>${c.last_active}</td>
          </tr>`)}
        </tbody>
      </table>
    </section>
    <section>
      <div class="charts">
        <${Chart} title=${`${s.name}: messages stored per second`} labels=${["stored"]} data=${data} testid="chart-stream" />
      </div>
    </section>`;
}

function Messages({ account, name, query }) {
  const start = Math.max(1, Number(query.get("start")) || 1);
  const subject = query.get("subject") || "";
  const [page, setPage] = useState({ loading: true });
  // the form's fields, as typed (the page re-renders at every poll of the cluster)
  const [form, setForm] = useState({ start: String(start), subject });
  useEffect(() => setForm({ start: String(start), subject }), [start, subject]);
  useEffect(() => {
    let stop = false;
    const q = new URLSearchParams({ account, stream: name, start: String(start), count: "25" });
    if (subject) q.set("subject", subject);
    setPage({ loading: true });
    fetch(`/console/api/messages?${q}`, { cache: "no-store" })
      .then(async (r) => ({ ok: r.ok, doc: await r.json() }))
      .then(({ ok, doc }) => { if (!stop) setPage(ok ? doc : { error: doc.error || "failed", messages: doc.messages || [] }); })
      .catch((e) => { if (!stop) setPage({ error: String(e), messages: [] }); });
    return () => { stop = true; };
  }, [account, name, start, subject]);
  const go = (e) => {
    e.preventDefault();
    const q = new URLSearchParams({ start: form.start || "1" });
    if (form.subject) q.set("subject", form.subject);
    location.hash = `#/messages/${encodeURIComponent(account)}/${encodeURIComponent(name)}?${q}`;
  };
  const base = `#/messages/${encodeURIComponent(account)}/${encodeURIComponent(name)}`;
  const more = page.next ? `${base}?${new URLSearchParams(subject ? { start: String(page.next), subject } : { start: String(page.next) })}` : "";
  return html`
    <section>
      <h2 data-testid="messages-title">Messages of ${name} <small>(${account})</small></h2>
      <form class="browse" onSubmit=${go}>
        <label>From sequence <input name="start" type="number" min="1" value=${form.start}
          onInput=${(e) => setForm({ ...form, start: e.target.value })} /></label>
        <label>Subject <input name="subject" value=${form.subject} placeholder=">"
          onInput=${(e) => setForm({ ...form, subject: e.target.value })} /></label>
        <button type="submit">Show</button>
      </form>
      ${page.loading ? html`<p>Loading…</p>` : ""}
      ${page.error ? html`<p class="error" data-testid="messages-error">${page.error}</p>` : ""}
      <table data-testid="messages">
        <thead><tr><th class="num">Seq</th><th>Subject</th><th>Time</th><th class="num">Size</th><th>Headers</th><th>Data</th></tr></thead>
        <tbody>${(page.messages || []).map((m) => html`
          <tr data-seq=${m.seq}>
            <td class="num">${m.seq}</td><td>${m.subject}</td><td>${m.time}</td><td class="num">${fmt(m.size)}</td>
            <td><pre>${m.headers}</pre></td>
            <td><pre>${m.binary ? `(binary, base64) ${m.data}` : m.data}${m.truncated ? " …" : ""}</pre></td>
          </tr>`)}
        </tbody>
      </table>
      ${more && (page.messages || []).length ? html`<p><a data-testid="next-page" href=${more}>Next page</a></p>` : ""}
    </section>`;
}

function App() {
  const { parts, query } = useRoute();
  const { view, error, samples } = useCluster();
  const page = parts[0] || "servers";
  const nav = (href, label, key) => html`<a href=${href} class=${page === key ? "active" : ""}>${label}</a>`;
  let body;
  if (page === "messages") body = html`<${Messages} account=${parts[1]} name=${parts[2]} query=${query} />`;
  else if (!view) body = html`<section>${error ? html`<p class="error">${error}</p>` : "Loading…"}</section>`;
  else if (page === "streams") body = html`<${Streams} view=${view} />`;
  else if (page === "stream") body = html`<${Stream} view=${view} samples=${samples} account=${parts[1]} name=${parts[2]} />`;
  else body = html`<${Servers} view=${view} samples=${samples} />`;
  return html`
    <header>
      <h1>natsd</h1>
      <nav>${nav("#/", "Servers", "servers")}${nav("#/streams", "Streams", "streams")}</nav>
      <span class="where" data-testid="where">${view ? `${view.server}${error ? " — " + error : ""}` : ""}</span>
    </header>
    <main>${body}</main>`;
}

const root = document.getElementById("app");
root.textContent = ""; // (the page's "Loading…" until this module ran)
render(html`<${App} />`, root);
