// wirelog's web UI: views over the JSON API. The state of a view lives in
// the URL's hash (#view=tx&kind=http&from=...&to=...), so a link shares it.

import { el, fmtNum, fmtBytes, fmtSecs, timeline, lineChart, barList, serviceMap, sequence } from "./charts.js";

// The protocols, from the server (`/api/schema`): each one a tab and a store kind.
const TX = (await api("schema")).kinds.filter((k) => k.protocol).map((k) => k.kind);
const VIEWS = { overview: "Overview", tx: "Transactions", conns: "Connections", map: "Service map", health: "Health" };
// The field a transaction kind's slowest statements are grouped by.
const FINGERPRINT = { http: "host,uri", mysql: "fingerprint", pgsql: "fingerprint", redis: "command", dns: "query,qtype_name", tls: "server_name,version" };
const STEPS = ["1ms", "5ms", "10ms", "50ms", "100ms", "500ms", "1s", "5s", "10s", "30s", "1m", "5m", "15m", "1h", "6h", "1d"];

function stepMs(s) {
  const m = s.match(/^(\d+)(ms|s|m|h|d)$/);
  return Number(m[1]) * { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[m[2]];
}

// --- state in the hash ---
function state() {
  const p = new URLSearchParams(location.hash.slice(1));
  return Object.fromEntries(p.entries());
}

function go(changes, replace = false) {
  const s = { ...state(), ...changes };
  for (const [k, v] of Object.entries(s)) if (v === null || v === undefined || v === "") delete s[k];
  const h = "#" + new URLSearchParams(s).toString();
  if (location.hash === h) return;
  // Setting the hash fires hashchange, which renders.
  if (replace) { history.replaceState(null, "", h); render(); } else location.hash = h;
}

// --- API ---
async function api(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const r = await fetch(`/api/${path}?${q}`, { credentials: "same-origin" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function range(s) {
  return { from: s.from, to: s.to };
}

let extent = null;
async function storeExtent() {
  if (extent) return extent;
  const kinds = await api("extent");
  // Flows are 5-minute buckets: records with their own times set the extent.
  const timed = kinds.filter((k) => k.kind !== "flows");
  const first = timed.map((k) => k.first_ns).filter((x) => x !== null);
  const last = timed.map((k) => k.last_ns).filter((x) => x !== null);
  extent = { kinds, first: first.length ? Math.min(...first) / 1e6 : Date.now() - 3600e3, last: last.length ? Math.max(...last) / 1e6 + 1 : Date.now() };
  return extent;
}

function chooseStep(spanMs, points = 100) {
  return STEPS.find((s) => spanMs / stepMs(s) <= points) || "1d";
}

// --- the frame: navigation, timeline, selection ---
const TIMELINE_METRICS = { bytes: "Bytes", pkts: "Packets", conns: "Connections", transactions: "Transactions" };

async function drawTimeline(s) {
  const ext = await storeExtent();
  const from = ext.first, to = Math.max(ext.last, ext.first + 1);
  const step = chooseStep(to - from);
  const metric = s.metric || "bytes";
  const q = { every: step, from: new Date(from).toISOString(), to: new Date(to + stepMs(step)).toISOString() };
  const sums = new Map();
  if (metric === "transactions") {
    for (const kind of TX) {
      if (!ext.kinds.find((k) => k.kind === kind && k.rows > 0)) continue;
      const t = await api("query", { kind, ...q });
      for (const r of t.rows) sums.set(r.time, (sums.get(r.time) || 0) + r.count);
    }
  } else {
    const t = await api("query", { kind: "conns", ...q });
    for (const r of t.rows) sums.set(r.time, r[metric]);
  }
  const points = [...sums.entries()].map(([t, v]) => ({ t: Date.parse(t), v })).sort((a, b) => a.t - b.t);
  const total = points.reduce((a, p) => a + p.v, 0);
  document.getElementById("timeline-total").textContent = `${TIMELINE_METRICS[metric]}: ${metric === "bytes" ? fmtBytes(total) : fmtNum(total)} in ${points.length} intervals of ${step}`;
  document.getElementById("timeline-total").dataset.value = total;
  const sel = s.from && s.to ? [Date.parse(s.from), Date.parse(s.to)] : null;
  timeline(document.getElementById("timeline"), points, {
    from, to, step: stepMs(step), sel, fmt: metric === "bytes" ? fmtBytes : fmtNum,
    onSelect: (a, b) => go({ from: a === null ? null : new Date(Math.floor(a)).toISOString(), to: b === null ? null : new Date(Math.ceil(b)).toISOString() }),
  });
}

function frame(s) {
  const nav = document.getElementById("nav");
  nav.replaceChildren(...Object.entries(VIEWS).map(([v, name]) =>
    el("a", { href: "#" + new URLSearchParams({ ...s, view: v }).toString(), class: (s.view || "overview") === v ? "active" : "", "data-view": v, text: name })));
  const sel = document.getElementById("selection");
  sel.replaceChildren(...[
    s.from || s.to ? el("span", { id: "range", "data-from": s.from || "", "data-to": s.to || "", text: `${s.from || "start"} → ${s.to || "end"}` }) : el("span", { id: "range", text: "whole store (drag on the timeline to select)" }),
    s.from || s.to ? el("button", { onclick: () => go({ from: null, to: null }), text: "clear" }) : null,
  ].filter(Boolean));
  const m = document.getElementById("metric");
  m.replaceChildren(...Object.entries(TIMELINE_METRICS).map(([k, name]) => el("option", { value: k, text: name })));
  m.value = s.metric || "bytes";
  m.onchange = () => go({ metric: m.value });
}

// --- views ---
function table(cols, rows, { onCell } = {}) {
  const t = el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, cols.map((c) => el("th", { text: c })))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map((c) => {
      const v = r[c];
      const td = el("td", { "data-col": c, text: v === null || v === undefined ? "-" : String(v) });
      if (typeof v === "number") td.classList.add("num");
      if (onCell) onCell(c, r, td);
      return td;
    })))));
  return t;
}

function drill(kind, where) {
  return () => go({ view: "records", kind, where });
}

function quote(v) {
  return /^[\w.:\/-]+$/.test(String(v)) ? String(v) : `"${String(v).replace(/["\\]/g, "\\$&")}"`;
}

async function overview(s, main) {
  const panels = [
    ["top-talkers", "Top talkers (clients by bytes)", "orig_h"],
    ["top-services", "Top services", "service"],
    ["top-ports", "Top server ports", "resp_p"],
    ["top-servers", "Top servers", "resp_h"],
  ];
  main.replaceChildren(el("div", { class: "panels" }, panels.map(([id, title]) =>
    el("section", { class: "panel" }, el("h2", { text: title }), el("div", { id })))));
  for (const [id, , by] of panels) {
    const t = await api("query", { kind: "conns", by, top: 10, ...range(s) });
    const rows = t.rows.map((r) => ({ key: String(r[by] ?? ""), label: r[by] === "" ? "(none)" : String(r[by]), value: r.bytes,
      onClick: drill("conns", `${by} = ${r[by] === "" ? '""' : quote(r[by])}`) }));
    if (t.other) rows.push({ key: "(other)", label: `other (${t.groups - t.rows.length})`, value: t.other.bytes, cls: "other" });
    barList(document.getElementById(id), rows, fmtBytes);
  }
}

async function txView(s, main) {
  const ext = await storeExtent();
  const kind = s.kind && TX.includes(s.kind) ? s.kind : (TX.find((k) => ext.kinds.find((e) => e.kind === k && e.rows > 0)) || "http");
  const from = s.from ? Date.parse(s.from) : ext.first, to = s.to ? Date.parse(s.to) : ext.last;
  const step = chooseStep(to - from, 60);
  const tabs = el("div", { class: "tabs" }, TX.map((k) => el("a", { href: "#" + new URLSearchParams({ ...s, view: "tx", kind: k }), class: k === kind ? "active" : "", text: k })));
  main.replaceChildren(tabs,
    el("div", { class: "panels" },
      el("section", { class: "panel" }, el("div", { id: "tx-rate" })),
      el("section", { class: "panel" }, el("div", { id: "tx-errors" })),
      el("section", { class: "panel" }, el("div", { id: "tx-latency" }))),
    el("section", { class: "panel wide" }, el("h2", { text: `Slowest ${FINGERPRINT[kind]} (by p99 latency)` }), el("div", { id: "tx-slowest" })),
    el("p", { id: "tx-total" }));
  const series = await api("query", { kind, every: step, from: new Date(from).toISOString(), to: new Date(to + stepMs(step)).toISOString() });
  const sec = stepMs(step) / 1e3;
  const pts = (f) => series.rows.map((r) => ({ t: Date.parse(r.time), v: f(r) }));
  const win = { from, to };
  lineChart(document.getElementById("tx-rate"), [{ name: "requests/s", cls: "s1", points: pts((r) => r.count / sec) }], { ...win, title: `${kind} request rate (per ${step})` });
  lineChart(document.getElementById("tx-errors"), [{ name: "errors %", cls: "s3", points: pts((r) => (100 * r.errors) / Math.max(1, r.count)) }], { ...win, title: "error rate %" });
  lineChart(document.getElementById("tx-latency"), [
    { name: "p50", cls: "s1", points: pts((r) => r.latency_p50_s) },
    { name: "p95", cls: "s2", points: pts((r) => r.latency_p95_s) },
    { name: "p99", cls: "s3", points: pts((r) => r.latency_p99_s) }], { ...win, fmt: fmtSecs, title: "latency" });
  const slow = await api("query", { kind, by: FINGERPRINT[kind], sort: "p99", top: 10, ...range(s) });
  const cols = [...FINGERPRINT[kind].split(","), "count", "errors", "latency_p50_s", "latency_p95_s", "latency_p99_s"];
  document.getElementById("tx-slowest").replaceChildren(table(cols, slow.rows, {
    onCell: (c, r, td) => {
      if (c === cols[0]) {
        td.classList.add("link");
        const w = FINGERPRINT[kind].split(",").map((f) => `${f} = ${r[f] === "" ? '""' : quote(r[f])}`).join(" and ");
        td.addEventListener("click", drill(kind, w));
      }
    },
  }));
  const tot = document.getElementById("tx-total");
  tot.textContent = `${slow.total.count} ${kind} transactions, ${slow.total.errors} errors in the range`;
  tot.dataset.count = slow.total.count;
  tot.dataset.errors = slow.total.errors;
}

async function recordsGrid(s, main, kind, title) {
  const where = s.where || "";
  const input = el("input", { id: "filter", value: where, placeholder: "filter: the query language, e.g. resp_p = 80 and conn_state = SF", size: 80 });
  const form = el("form", { class: "filter", onsubmit: (ev) => { ev.preventDefault(); go({ where: input.value }); } }, input, el("button", { text: "filter" }));
  main.replaceChildren(el("h2", { text: title }), form, el("div", { id: "grid" }));
  const t = await api("records", { kind, where, limit: 500, ...range(s) });
  const cols = t.columns.filter((c) => !/_p\d\d_s$|latency_avg_s|^count$|^conns$/.test(c));
  document.getElementById("grid").replaceChildren(
    el("p", { id: "grid-count", "data-rows": t.rows.length, "data-groups": t.groups, text: `${t.rows.length} of ${t.groups} records` + (t.truncated ? " (first 500 by time)" : "") }),
    table(cols, t.rows, {
      onCell: (c, r, td) => {
        if (c === "uid" && r.uid) { td.classList.add("link"); td.addEventListener("click", () => go({ view: "sequence", uid: r.uid })); }
      },
    }));
}

async function mapView(s, main) {
  main.replaceChildren(el("h2", { text: "Service map: who calls whom (edge width: calls)" }), el("div", { id: "map" }), el("div", { id: "map-edges" }));
  const m = await api("map", range(s));
  serviceMap(document.getElementById("map"), m.nodes, m.edges, (e) => {
    const [host, port] = [e.to.replace(/^\[?(.*?)\]?:(\d+)$/, "$1"), e.to.replace(/^.*:(\d+)$/, "$1")];
    const kind = TX.includes(e.protocol) ? e.protocol : "conns";
    const w = kind === "conns" ? `orig_h = ${e.from} and resp_h = ${host} and resp_p = ${port}` : `client = ${e.from} and server = ${host} and server_port = ${port}`;
    go({ view: "records", kind, where: w });
  });
  document.getElementById("map-edges").replaceChildren(table(["from", "to", "protocol", "count", "errors", "bytes", "p50_s", "p95_s", "p99_s"], m.edges));
}

async function sequenceView(s, main) {
  main.replaceChildren(el("h2", { text: `Connection ${s.uid}: calls in order` }), el("div", { id: "conn" }), el("div", { id: "sequence" }));
  const q = await api("sequence", { uid: s.uid });
  if (q.conn) document.getElementById("conn").replaceChildren(table(["ts", "orig_h", "orig_p", "resp_h", "resp_p", "proto", "service", "duration", "conn_state", "history", "orig_bytes", "resp_bytes"], [q.conn]));
  // Packets are kept (--pcap-dir): the connection's packets as a file.
  if (q.pcap) document.getElementById("conn").append(el("p", {}, el("a", { id: "pcap-link", href: q.pcap, download: `wirelog-${s.uid}.pcap`, text: "Download this connection's packets (pcap)" })));
  sequence(document.getElementById("sequence"), q.conn, q.calls);
  document.getElementById("sequence").dataset.calls = q.calls.length;
}

async function healthView(s, main) {
  const h = await api("health");
  const hist = h.history;
  const pts = (f) => hist.slice(1).map((x, i) => ({ t: x.t * 1e3, v: f(x, hist[i]) }));
  const win = { from: hist.length ? hist[0].t * 1e3 : Date.now(), to: Date.now() };
  const live = h.live ? h.live.workers.reduce((a, w) => { for (const k in w) a[k] = (a[k] || 0) + w[k]; return a; }, {}) : null;
  const figures = [
    ["CPU seconds", h.now.cpu_seconds.toFixed(2), "cpu"],
    ["RSS", fmtBytes(h.now.rss_bytes), "rss"],
    ["uptime", fmtSecs(h.uptime_s), "uptime"],
  ];
  if (live) {
    figures.push(["packets", fmtNum(live.packets), "packets"], ["kernel drops", fmtNum(live.kernel_drops), "kernel_drops"],
      ["evicted (probe drops)", fmtNum(live.evicted), "evicted"], ["not decoded", fmtNum(live.not_decoded), "not_decoded"],
      ["bad checksums", fmtNum(live.checksum_bad), "checksum_bad"], ["records dropped", fmtNum(h.live.records_dropped), "records_dropped"]);
  }
  main.replaceChildren(
    el("dl", { class: "figures" }, figures.map(([name, v, id]) => el("div", { "data-figure": id }, el("dt", { text: name }), el("dd", { text: v })))),
    el("div", { class: "panels" },
      el("section", { class: "panel" }, el("div", { id: "h-cpu" })),
      el("section", { class: "panel" }, el("div", { id: "h-rss" })),
      live ? el("section", { class: "panel" }, el("div", { id: "h-pps" })) : null,
      live ? el("section", { class: "panel" }, el("div", { id: "h-drops" })) : null),
    el("h2", { text: "Store" }),
    h.store ? table(["kind", "rows", "files", "bytes"], h.store) : el("p", { text: "no store" }));
  const dt = (a, b) => Math.max(1e-9, a.t - b.t);
  lineChart(document.getElementById("h-cpu"), [{ name: "CPU %", cls: "s1", points: pts((x, p) => (100 * (x.cpu_seconds - p.cpu_seconds)) / dt(x, p)) }], { ...win, title: "CPU % of a core" });
  lineChart(document.getElementById("h-rss"), [{ name: "RSS", cls: "s2", points: pts((x) => x.rss_bytes) }], { ...win, fmt: fmtBytes, title: "resident memory" });
  if (live) {
    lineChart(document.getElementById("h-pps"), [{ name: "packets/s", cls: "s1", points: pts((x, p) => (x.live.packets - p.live.packets) / dt(x, p)) }], { ...win, title: "packets/s" });
    lineChart(document.getElementById("h-drops"), [
      { name: "kernel drops/s", cls: "s3", points: pts((x, p) => (x.live.kernel_drops - p.live.kernel_drops) / dt(x, p)) },
      { name: "evictions/s", cls: "s2", points: pts((x, p) => (x.live.evicted - p.live.evicted) / dt(x, p)) }], { ...win, title: "drops and evictions" });
  }
}

// --- render loop ---
let generation = 0;
let lastRender = Date.now();
async function render() {
  const g = ++generation;
  lastRender = Date.now();
  const s = state();
  const view = s.view || "overview";
  document.body.dataset.ready = "0";
  document.body.dataset.view = view;
  frame(s);
  const main = document.getElementById("main");
  const err = document.getElementById("error");
  err.textContent = "";
  try {
    await drawTimeline(s);
    if (view === "overview") await overview(s, main);
    else if (view === "tx") await txView(s, main);
    else if (view === "conns") await recordsGrid(s, main, "conns", "Connections");
    else if (view === "records") await recordsGrid(s, main, s.kind || "conns", `Records: ${s.kind || "conns"}` + (s.where ? ` where ${s.where}` : ""));
    else if (view === "map") await mapView(s, main);
    else if (view === "sequence") await sequenceView(s, main);
    else if (view === "health") await healthView(s, main);
  } catch (e) {
    err.textContent = e.message;
  }
  if (g === generation) document.body.dataset.ready = "1";
}

window.addEventListener("hashchange", render);
render();
// `refresh=N` in the hash: redraw every N seconds, with the store's extent read again.
setInterval(() => {
  const every = Number(state().refresh || 0) * 1e3;
  if (every > 0 && Date.now() - lastRender >= every && document.body.dataset.ready === "1") {
    extent = null;
    render();
  }
}, 500);
