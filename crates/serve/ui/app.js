// wirelog's web UI: views over the JSON API. The state of a view lives in
// the URL's hash (#view=tx&kind=http&range=1h&from=...&to=...), so a link
// shares it.
//
// Time: the timeline spans the *window* — a quick range (`range=5m|15m|1h|
// 24h|7d|all`, counted back from the newest record, default 15m) or a custom
// one (`vfrom`/`vto`, from the date pickers or a zoom) — and a drag on it
// selects `from`/`to` inside it. Every view shows the selection, or the
// window when nothing is selected. `tz=local` shows local times (else UTC).

import {
  el, fmtNum, fmtBytes, fmtSecs, fmtPct, fmtStamp, setZone, zoneName, toInput, fromInput,
  timeline, lineChart, barList, serviceMap, sequence,
} from "./charts.js";

// The first page's first questions, asked at once before the schema is
// read (index.html preloads the same URLs while the modules load): `api()`
// takes each answer once, the first time it is asked for.
const EARLY = new Map(["/api/health", "/api/extent"].map((u) => [u, fetch(u, { credentials: "same-origin" })]));
// The kinds and protocols, from the server (`/api/schema`, read with a bare
// fetch: `api()` needs the declarations below it): each protocol a tab and
// a store kind, and the fields its slowest statements are grouped by.
const SCHEMA = await (await fetch("/api/schema", { credentials: "same-origin" })).json();
const TX = SCHEMA.kinds.filter((k) => k.protocol).map((k) => k.kind);
const VIEWS = { overview: "Overview", tx: "Transactions", conns: "Connections", map: "Service map", health: "Health" };
// The fields a transaction kind's slowest statements are grouped by: what
// tells one kind of request from another, declared with the protocol's
// columns (`/api/schema`'s `shape`).
const FINGERPRINT = Object.fromEntries(SCHEMA.kinds.filter((k) => k.protocol).map((k) => [k.kind, k.shape.join(",")]));
const STEPS = ["1ms", "2ms", "5ms", "10ms", "20ms", "50ms", "100ms", "200ms", "500ms", "1s", "2s", "5s", "10s", "15s", "30s",
  "1m", "2m", "5m", "10m", "15m", "30m", "1h", "2h", "3h", "6h", "12h", "1d", "2d", "7d", "14d", "30d", "90d", "365d"];
const MIN = 60e3, HOUR = 3600e3, DAY = 86400e3;
const RANGES = { "5m": 5 * MIN, "15m": 15 * MIN, "1h": HOUR, "24h": DAY, "7d": 7 * DAY, all: null };
const DEFAULT_RANGE = "15m";

function stepMs(s) {
  const m = s.match(/^(\d+)(ms|s|m|h|d)$/);
  return Number(m[1]) * { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[m[2]];
}

// The interval for `points` points or fewer over a span (~100-300 for the
// timeline, ~50-150 for charts): never more than the API's interval limit.
function chooseStep(spanMs, points) {
  return STEPS.find((s) => spanMs / stepMs(s) <= points) || STEPS[STEPS.length - 1];
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
  const qs = q.toString();
  const url = qs ? `/api/${path}?${qs}` : `/api/${path}`;
  const early = EARLY.get(url);
  EARLY.delete(url);
  const r = await (early || fetch(url, { credentials: "same-origin" }));
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  showWarnings(body);
  return body;
}

const iso = (ms) => new Date(ms).toISOString();

// An answer read around store files it could not read carries `warnings`
// (naming them): a small banner above the view lists them while the page is open.
const warned = new Set();
function showWarnings(resp) {
  let banner = document.getElementById("warnings");
  if (!banner) {
    banner = document.createElement("p");
    banner.id = "warnings";
    banner.setAttribute("role", "status");
    banner.style.cssText = "margin:0.3em 0;padding:0.3em 0.6em;background:#fff3cd;color:#664d03;border:1px solid #ffe69c;font-size:0.85em";
    banner.hidden = true;
    document.getElementById("main").before(banner);
  }
  for (const w of (resp && Array.isArray(resp.warnings)) ? resp.warnings : []) warned.add(w);
  banner.hidden = warned.size === 0;
  banner.textContent = warned.size ? `Partial answer: ${[...warned].join("; ")}` : "";
}


let extent = null;
let live = null; // a capture --listen server: its records come live
async function storeExtent() {
  if (extent) return extent;
  const kinds = await api("extent");
  // Flows are 5-minute buckets, loss rows minutes: records with their own times set the extent.
  const timed = kinds.filter((k) => k.kind !== "flows" && k.kind !== "loss" && k.rows > 0);
  const first = timed.map((k) => k.first_ns).filter((x) => x !== null);
  const last = timed.map((k) => k.last_ns).filter((x) => x !== null);
  const now = Date.now();
  extent = { kinds, first: first.length ? Math.min(...first) / 1e6 : now - HOUR, last: last.length ? Math.floor(Math.max(...last) / 1e6) + 1 : now };
  // A running capture: the window ends now (its newest records are not in the store yet).
  if (live) extent.last = Math.max(extent.last, now);
  return extent;
}

function hasRows(kind) {
  return extent && extent.kinds.some((k) => k.kind === kind && k.rows > 0);
}

// The timeline's window [from, to) in ms.
function windowOf(s) {
  const ext = extent;
  if (s.vfrom && s.vto) {
    const a = Date.parse(s.vfrom), b = Date.parse(s.vto);
    if (a < b) return [a, b];
  }
  const r = s.range in RANGES ? s.range : DEFAULT_RANGE;
  if (r === "all") return [ext.first, Math.max(ext.last, ext.first + 1)];
  return [ext.last - RANGES[r], ext.last];
}

// What the views show: the selection, else the window.
function shown(s) {
  const w = windowOf(s);
  if (s.from && s.to) {
    const a = Date.parse(s.from), b = Date.parse(s.to);
    if (a < b) return [a, b];
  }
  return w;
}

function range(s) {
  const [a, b] = shown(s);
  return { from: iso(a), to: iso(b) };
}

// Previous windows, for "back" after a zoom or a new quick range.
const ZOOMS = "wirelog.zooms";
function pushZoom(s) {
  const z = JSON.parse(sessionStorage.getItem(ZOOMS) || "[]");
  z.push({ range: s.range || null, vfrom: s.vfrom || null, vto: s.vto || null, from: s.from || null, to: s.to || null });
  sessionStorage.setItem(ZOOMS, JSON.stringify(z.slice(-50)));
}
function popZoom() {
  const z = JSON.parse(sessionStorage.getItem(ZOOMS) || "[]");
  const prev = z.pop();
  sessionStorage.setItem(ZOOMS, JSON.stringify(z));
  return prev;
}
const zoomDepth = () => JSON.parse(sessionStorage.getItem(ZOOMS) || "[]").length;

// --- the frame: navigation, range controls, timeline, selection ---
const TIMELINE_METRICS = { bytes: "Bytes", pkts: "Packets", conns: "Connections", transactions: "Transactions" };

async function drawTimeline(s) {
  const [from, to] = windowOf(s);
  const step = chooseStep(to - from, 300);
  const metric = s.metric || "bytes";
  const q = { every: step, from: iso(from), to: iso(to) };
  const sums = new Map();
  if (metric === "transactions") {
    for (const kind of TX) {
      if (!hasRows(kind)) continue;
      const t = await api("query", { kind, ...q });
      for (const r of t.rows) sums.set(r.time, (sums.get(r.time) || 0) + r.count);
    }
  } else {
    const t = await api("query", { kind: "conns", ...q });
    for (const r of t.rows) sums.set(r.time, r[metric]);
  }
  const points = [...sums.entries()].map(([t, v]) => ({ t: Date.parse(t), v })).sort((a, b) => a.t - b.t);
  const total = points.reduce((a, p) => a + p.v, 0);
  const tot = document.getElementById("timeline-total");
  tot.textContent = `${TIMELINE_METRICS[metric]}: ${metric === "bytes" ? fmtBytes(total) : fmtNum(total)} in ${fmtStamp(from)} – ${fmtStamp(to)} ${zoneName()}, intervals of ${step}`;
  tot.dataset.value = total;
  tot.dataset.step = step;
  tot.dataset.from = iso(from);
  tot.dataset.to = iso(to);
  const sel = s.from && s.to ? [Date.parse(s.from), Date.parse(s.to)] : null;
  timeline(document.getElementById("timeline"), points, {
    from, to, step: stepMs(step), sel, fmt: metric === "bytes" ? fmtBytes : fmtNum,
    unit: metric === "bytes" ? `bytes per ${step}` : `${metric} per ${step}`,
    onSelect: (a, b) => go({ from: a === null ? null : iso(Math.floor(a)), to: b === null ? null : iso(Math.ceil(b)), page: null }),
  });
}

function button(text, onclick, attrs = {}) {
  return el("button", { type: "button", onclick, text, ...attrs });
}

function frame(s) {
  const nav = document.getElementById("nav");
  nav.replaceChildren(...Object.entries(VIEWS).map(([v, name]) =>
    el("a", { href: "#" + new URLSearchParams({ ...s, view: v, page: "" }).toString().replace(/&?page=(&|$)/, "$1"), class: (s.view || "overview") === v ? "active" : "", "data-view": v, text: name })));
  const [wa, wb] = windowOf(s);
  const cur = s.vfrom ? "custom" : s.range in RANGES ? s.range : DEFAULT_RANGE;
  const quick = el("span", { class: "quick", role: "group", "aria-label": "time range" }, Object.keys(RANGES).map((r) =>
    button(r === "all" ? "all" : `last ${r}`, () => { pushZoom(s); go({ range: r === DEFAULT_RANGE ? null : r, vfrom: null, vto: null, from: null, to: null, page: null }); },
      { class: cur === r ? "active" : "", "data-range": r, "aria-pressed": cur === r ? "true" : "false", title: r === "all" ? "the whole store" : `the last ${r} of data` })));
  const fromIn = el("input", { type: "datetime-local", step: 1, id: "custom-from", value: toInput(wa), "aria-label": `window start (${zoneName()})` });
  const toIn = el("input", { type: "datetime-local", step: 1, id: "custom-to", value: toInput(wb), "aria-label": `window end (${zoneName()})` });
  const custom = el("form", { class: "custom", onsubmit: (ev) => {
    ev.preventDefault();
    const a = fromInput(fromIn.value), b = fromInput(toIn.value);
    if (!(a < b)) { document.getElementById("error").textContent = "custom range: the start must be before the end"; return; }
    pushZoom(s);
    go({ vfrom: iso(a), vto: iso(b), range: null, from: null, to: null, page: null });
  } }, fromIn, el("span", { text: "–" }), toIn, el("button", { type: "submit", text: "apply", class: cur === "custom" ? "active" : "" }));
  const hasSel = !!(s.from && s.to);
  const zoom = el("span", { class: "zoom" },
    button("zoom to selection", () => { pushZoom(s); go({ vfrom: s.from, vto: s.to, from: null, to: null, range: null, page: null }); }, { id: "zoom-in", disabled: hasSel ? null : "" }),
    button("← back", () => { const p = popZoom(); if (p) go({ ...p, page: null }); }, { id: "zoom-back", disabled: zoomDepth() ? null : "" }));
  const tz = button(zoneName() === "UTC" ? "UTC" : `local (${zoneName()})`, () => go({ tz: s.tz === "local" ? null : "local" }), { id: "tz", title: "show times in UTC or in this browser's time zone" });
  const liveCtl = live ? button(paused ? "▶ resume" : "❚❚ pause", () => { paused = !paused; frame(state()); }, { id: "pause", title: "live: the views refresh every 3 s" }) : null;
  document.getElementById("ranges").replaceChildren(quick, custom, zoom, tz, ...(liveCtl ? [liveCtl, el("span", { id: "live-dot", class: paused ? "paused" : "on", text: paused ? "paused" : "live" })] : []));
  const sel = document.getElementById("selection");
  const [a, b] = shown(s);
  sel.replaceChildren(...[
    el("span", { id: "range", "data-from": hasSel ? s.from : "", "data-to": hasSel ? s.to : "", "data-shown-from": iso(a), "data-shown-to": iso(b),
      text: hasSel ? `selected ${fmtStamp(a)} → ${fmtStamp(b)} ${zoneName()}` : `showing the window (drag on the timeline to select)` }),
    hasSel ? button("clear", () => go({ from: null, to: null, page: null })) : null,
  ].filter(Boolean));
  const m = document.getElementById("metric");
  m.replaceChildren(...Object.entries(TIMELINE_METRICS).map(([k, name]) => el("option", { value: k, text: name })));
  m.value = s.metric || "bytes";
  m.onchange = () => go({ metric: m.value });
}

// --- tables ---
// How a column's raw value reads: bytes as B/kB/MB, seconds as µs/ms/s,
// times in the chosen zone; the raw value stays in data-raw and the tooltip.
function cell(c, v) {
  if (v === null || v === undefined) return { text: "-" };
  if (c === "ts" || c === "bucket" || c === "time") {
    const frac = (/\.(\d+)Z$/.exec(String(v)) || [])[1];
    return { text: fmtStamp(Date.parse(v), frac ? "." + frac : ""), title: String(v) };
  }
  if (typeof v === "number") {
    if (/bytes$/.test(c)) return { text: fmtBytes(v), title: `${v} bytes`, num: true };
    if (/^(duration|latency|first_byte_latency)$|_s$/.test(c)) return { text: fmtSecs(v), title: `${v} s`, num: true };
    return { text: String(v), num: true };
  }
  return { text: String(v), title: String(v).length > 40 ? String(v) : null };
}

function table(cols, rows, { onCell, sort, onSort } = {}) {
  const [sc, sd] = (sort || "").split(":");
  const head = cols.map((c) => {
    const arrow = c === sc ? (sd === "asc" ? " ▲" : " ▼") : "";
    if (!onSort) return el("th", { text: c, scope: "col" });
    return el("th", { scope: "col", "aria-sort": c === sc ? (sd === "asc" ? "ascending" : "descending") : null },
      button(c + arrow, () => onSort(c, c === sc && sd !== "asc" ? "asc" : "desc"), { class: "sort", "data-col": c, title: `sort by ${c}` }));
  });
  return el("div", { class: "scroll" }, el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, head)),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map((c) => {
      const v = r[c];
      const f = cell(c, v);
      const td = el("td", { "data-col": c, "data-raw": v === null || v === undefined ? "" : String(v), title: f.title || null, text: f.text });
      if (f.num) td.classList.add("num");
      if (onCell) onCell(c, r, td);
      return td;
    }))))));
}

function drill(kind, where) {
  return () => go({ view: "records", kind, where, page: null, sort: null });
}

function quote(v) {
  return /^[\w.:\/-]+$/.test(String(v)) ? String(v) : `"${String(v).replace(/["\\]/g, "\\$&")}"`;
}

function link(td, fn) {
  td.classList.add("link");
  td.tabIndex = 0;
  td.setAttribute("role", "link");
  td.addEventListener("click", fn);
  td.addEventListener("keydown", (ev) => { if (ev.key === "Enter") fn(); });
}

// --- failures first ---
// Each class: the records that failed, counted in the range and in the
// previous range of equal length, broken down by service; one click shows them.
const FAILURES = [
  { id: "conn-fail", kind: "conns", what: "connections refused, reset or unanswered", by: "conn_state", where: "conn_state in (REJ, RSTO, RSTR, RSTOS0, RSTRH, S0, SH, SHR)", svc: "resp_h,resp_p" },
  { id: "http-4xx", kind: "http", what: "HTTP 4xx", by: "status_code", where: "status_code >= 400 and status_code < 500", svc: "server,server_port" },
  { id: "http-5xx", kind: "http", what: "HTTP 5xx", by: "status_code", where: "status_code >= 500", svc: "server,server_port" },
  { id: "mysql-err", kind: "mysql", what: "MySQL errors", by: "error_code", where: "status = error", svc: "server,server_port" },
  { id: "pgsql-err", kind: "pgsql", what: "PostgreSQL errors", by: "error_code", where: "status = error", svc: "server,server_port" },
  { id: "redis-err", kind: "redis", what: "Redis errors", by: "reply_type", where: "status = error", svc: "server,server_port" },
  { id: "dns-rcode", kind: "dns", what: "DNS NXDOMAIN, SERVFAIL, REFUSED...", by: "rcode_name", where: 'rcode_name not in (NOERROR, "")', svc: "server,server_port" },
  { id: "tls-fail", kind: "tls", what: "TLS alerts and failed handshakes", by: "last_alert", where: 'last_alert != "" or status = error', svc: "server,server_port" },
];

const countOf = (t) => (t.total.count ?? t.total.conns ?? 0);
// An answer extrapolated from sampled transactions (`capture --cpu-budget`
// parsed some connections 1 in N; the API's `estimated`) says so in its title.
const est = (t) => (t.estimated ? " (estimated)" : "");

// `totals(kind)`: a promise of the count of `kind`'s records in the range
// (the rate's denominator), from a question the page asks anyway.
async function failures(s, host, totals) {
  const [a, b] = shown(s);
  const cur = { from: iso(a), to: iso(b) }, prev = { from: iso(a - (b - a)), to: iso(a) };
  // Every class's questions are asked at once (the server runs as many as
  // it has query threads): the page waits for the slowest, not the sum.
  const total = (kind) => totals(kind).then(countOf);
  const rows = await Promise.all(FAILURES.filter((f) => hasRows(f.kind)).map(async (f) => {
    const [now, before, svc, all] = await Promise.all([
      api("query", { kind: f.kind, by: f.by, where: f.where, top: 5, sort: f.kind === "conns" ? "conns" : "count", ...cur }),
      api("query", { kind: f.kind, by: f.by, where: f.where, top: 1, ...prev }),
      api("query", { kind: f.kind, by: f.svc, where: f.where, top: 3, sort: f.kind === "conns" ? "conns" : "count", ...cur }),
      total(f.kind),
    ]);
    return { f, n: countOf(now), prev: countOf(before), all, now, svc };
  }));
  rows.sort((x, y) => (y.n > 0) - (x.n > 0));
  const tbl = el("table", { class: "grid failures" },
    el("thead", {}, el("tr", {}, ["what failed", "count", "rate", "previous period", "change", "by kind", "top services"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows.map(({ f, n, prev: p, all, now, svc }) => {
      const tr = el("tr", { "data-failure": f.id, "data-count": n, "data-prev": p, "data-total": all, class: n ? "bad" : "" });
      const c = el("td", { class: "num", text: fmtNum(n) });
      if (n) link(c, drill(f.kind, f.where));
      const change = n - p;
      const key = (r, by) => by.split(",").map((k) => r[k] === "" ? '""' : quote(r[k] ?? "")).join(":");
      const sub = (t, by, cls) => el("td", { class: cls }, t.rows.map((r) => {
        const a = el("span", { class: "chip", text: `${by.split(",").map((k) => r[k] === "" ? "(none)" : r[k]).join(":")} ${fmtNum(r.count ?? r.conns)}` });
        link(a, drill(f.kind, `(${f.where}) and ` + by.split(",").map((k) => `${k} = ${r[k] === "" ? '""' : quote(r[k])}`).join(" and ")));
        a.dataset.key = key(r, by);
        return a;
      }));
      tr.append(el("td", { text: `${f.kind}: ${f.what}` }), c, el("td", { class: "num", text: all ? fmtPct((100 * n) / all) : "-" }),
        el("td", { class: "num", text: fmtNum(p) }), el("td", { class: "num " + (change > 0 ? "up" : change < 0 ? "down" : ""), text: change > 0 ? `+${fmtNum(change)}` : change < 0 ? `−${fmtNum(-change)}` : "=" }),
        sub(now, f.by, "chips"), sub(svc, f.svc, "chips"));
      return tr;
    })));
  host.replaceChildren(rows.length ? el("div", { class: "scroll" }, tbl) : el("p", { class: "empty", text: "no connections or transactions in the store" }));
}

async function overview(s, main) {
  const panels = [
    ["top-talkers", "Top talkers (clients by bytes)", "orig_h"],
    ["top-services", "Top services", "service"],
    ["top-ports", "Top server ports", "resp_p"],
    ["top-servers", "Top servers", "resp_h"],
  ];
  main.replaceChildren(
    el("section", { class: "panel wide" }, el("h2", { text: "Failures (compared with the previous period of equal length)" }), el("div", { id: "failures" })),
    el("div", { class: "panels" }, panels.map(([id, title]) =>
      el("section", { class: "panel" }, el("h2", { text: title }), el("div", { id })))),
    el("section", { class: "panel wide" }, el("div", { id: "latency-protocols" })));
  // The panels are asked at once (see `failures`). A kind's count in the
  // range, which the failures' rates need, is the total of a question
  // asked here anyway: the top talkers' (connections), the latency
  // series' (transactions).
  const [from, to] = shown(s);
  const step = chooseStep(to - from, 120);
  const series = Object.fromEntries(TX.filter((kind) => hasRows(kind)).map((kind) => [kind, api("query", { kind, every: step, from: iso(from), to: iso(to) })]));
  const asked = Object.fromEntries(panels.map(([id, , by]) => [id, api("query", { kind: "conns", by, top: 10, ...range(s) })]));
  const fail = failures(s, document.getElementById("failures"), (kind) => (kind === "conns" ? asked["top-talkers"] : series[kind]));
  const tops = panels.map(async ([id, , by]) => {
    const t = await asked[id];
    const rows = t.rows.map((r) => ({ key: String(r[by] ?? ""), label: r[by] === "" ? "(none)" : String(r[by]), value: r.bytes,
      onClick: drill("conns", `${by} = ${r[by] === "" ? '""' : quote(r[by])}`) }));
    if (t.other) rows.push({ key: "(other)", label: `other (${t.groups - t.rows.length})`, value: t.other.bytes, cls: "other" });
    barList(document.getElementById(id), rows, fmtBytes);
  });
  const lat = latencyByProtocol(s, document.getElementById("latency-protocols"), series, step);
  // Every panel settles before the page says it is drawn; the first failure is the one shown.
  const done = await Promise.allSettled([...tops, lat, fail]);
  const bad = done.find((d) => d.status === "rejected");
  if (bad) throw bad.reason;
}

// p95 latency of every protocol with transactions, over the range: `asked`
// holds each kind's question (intervals of `step`).
async function latencyByProtocol(s, host, asked, step) {
  const [from, to] = shown(s);
  const cls = ["s1", "s2", "s3", "s4", "s5", "s6"];
  const kinds = Object.keys(asked);
  const tables = await Promise.all(kinds.map((kind) => asked[kind]));
  const series = tables.map((t, i) => ({ name: `${kinds[i]} p95`, cls: cls[i % cls.length], points: t.rows.map((r) => ({ t: Date.parse(r.time), v: r.latency_p95_s })) }));
  lineChart(host, series, { from, to, step: stepMs(step), fmt: fmtSecs, W: 1000, title: `latency p95 per protocol (per ${step})` });
}

async function txView(s, main) {
  const ext = await storeExtent();
  const kind = s.kind && TX.includes(s.kind) ? s.kind : (TX.find((k) => hasRows(k)) || "http");
  const [from, to] = shown(s);
  const step = chooseStep(to - from, 120);
  const tabs = el("div", { class: "tabs" }, TX.map((k) => el("a", { href: "#" + new URLSearchParams({ ...s, view: "tx", kind: k }), class: k === kind ? "active" : "", text: k })));
  main.replaceChildren(tabs,
    el("div", { class: "panels" },
      el("section", { class: "panel" }, el("div", { id: "tx-rate" })),
      el("section", { class: "panel" }, el("div", { id: "tx-errors" })),
      el("section", { class: "panel" }, el("div", { id: "tx-latency" }))),
    el("section", { class: "panel wide" }, el("h2", { text: `Slowest ${FINGERPRINT[kind]} (by p99 latency)` }), el("div", { id: "tx-slowest" })),
    el("p", { id: "tx-total" }));
  const series = await api("query", { kind, every: step, from: iso(from), to: iso(to) });
  const sec = stepMs(step) / 1e3;
  // An interval with no transactions is a rate of 0; its latency is a gap.
  const byT = new Map(series.rows.map((r) => [Date.parse(r.time), r]));
  const first = Math.floor(from / stepMs(step)) * stepMs(step);
  const grid = [];
  for (let t = first; t < to && grid.length < 2000; t += stepMs(step)) grid.push(t);
  const pts = (f, zero) => grid.map((t) => ({ t, v: byT.has(t) ? f(byT.get(t)) : zero }));
  const win = { from, to, step: stepMs(step) };
  lineChart(document.getElementById("tx-rate"), [{ name: "requests/s", cls: "s1", points: pts((r) => r.count / sec, 0) }], { ...win, title: `${kind} request rate${est(series)}`, unit: `per s, intervals of ${step}` });
  lineChart(document.getElementById("tx-errors"), [{ name: "errors %", cls: "s3", points: pts((r) => (100 * r.errors) / Math.max(1, r.count), null) }], { ...win, fmt: (v) => fmtPct(v), title: `error rate${est(series)}` });
  lineChart(document.getElementById("tx-latency"), [
    { name: "p50", cls: "s1", points: pts((r) => r.latency_p50_s, null) },
    { name: "p95", cls: "s2", points: pts((r) => r.latency_p95_s, null) },
    { name: "p99", cls: "s3", points: pts((r) => r.latency_p99_s, null) }], { ...win, fmt: fmtSecs, title: "latency" });
  const slow = await api("query", { kind, by: FINGERPRINT[kind], sort: "p99", top: 10, ...range(s) });
  const cols = [...FINGERPRINT[kind].split(","), "count", "errors", "latency_p50_s", "latency_p95_s", "latency_p99_s"];
  document.getElementById("tx-slowest").replaceChildren(table(cols, slow.rows, {
    onCell: (c, r, td) => {
      if (c === cols[0]) {
        const w = FINGERPRINT[kind].split(",").map((f) => `${f} = ${r[f] === "" ? '""' : quote(r[f])}`).join(" and ");
        link(td, drill(kind, w));
      }
    },
  }));
  const tot = document.getElementById("tx-total");
  tot.textContent = `${slow.estimated ? "about " : ""}${slow.total.count} ${kind} transactions, ${slow.total.errors} errors in the range${est(slow)}`;
  tot.dataset.estimated = slow.estimated ? "1" : "0";
  tot.dataset.count = slow.total.count;
  tot.dataset.errors = slow.total.errors;
  void ext;
}

// Columns a grid leaves out unless chosen: the per-group aggregates (a
// record is a group of one) and the percentiles.
const AGGREGATE = /_p\d\d_s$|latency_avg_s|^count$|^conns$|^(orig|resp)_pkts$/;
const OWNER = /^(orig|resp)_(proc|user|container)$/;
const PAGE_SIZES = [20, 50, 100, 500, 1000];

function chosen(kind) {
  try { return JSON.parse(localStorage.getItem(`wirelog.cols.${kind}`) || "null"); } catch { return null; }
}

async function recordsGrid(s, main, kind, title) {
  const where = s.where || "";
  const input = el("input", { id: "filter", value: where, placeholder: "filter: the query language, e.g. resp_p = 80 and conn_state = SF", "aria-label": "filter", spellcheck: "false" });
  const form = el("form", { class: "filter", onsubmit: (ev) => { ev.preventDefault(); go({ where: input.value, page: null }); } }, input, el("button", { text: "filter" }));
  main.replaceChildren(el("h2", { text: title }), form, el("div", { id: "grid" }));
  const size = PAGE_SIZES.includes(Number(s.size)) ? Number(s.size) : 100;
  const page = Math.max(0, Number(s.page) || 0);
  const sort = s.sort || (kind === "flows" ? "bucket:desc" : "ts:desc");
  const q = { kind, where, limit: size, offset: page * size, sort, ...range(s) };
  const t = await api("records", q);
  const owners = new Set(t.columns.filter((c) => OWNER.test(c) && t.rows.some((r) => r[c] !== "" && r[c] !== null)));
  const pick = chosen(kind);
  const avail = t.columns.filter((c) => !OWNER.test(c) || owners.has(c));
  // Where a transaction's bytes came from: shown by default only when a row
  // is from elsewhere than the packets (capture --tls-plaintext).
  const sources = t.rows.some((r) => r.source && r.source !== "packets");
  const cols = avail.filter((c) => (pick ? pick.includes(c) : !AGGREGATE.test(c) && (c !== "source" || sources)));
  const first = t.rows.length ? page * size + 1 : 0, last = page * size + t.rows.length;
  const pages = Math.max(1, Math.ceil(t.groups / size));
  const chooser = el("details", { class: "columns" }, el("summary", { text: `columns (${cols.length} of ${avail.length})` }),
    el("div", { class: "choices" }, avail.map((c) => {
      const box = el("input", { type: "checkbox", value: c });
      box.checked = cols.includes(c);
      box.addEventListener("change", () => {
        const now = [...document.querySelectorAll(".columns input:checked")].map((b) => b.value);
        localStorage.setItem(`wirelog.cols.${kind}`, JSON.stringify(now));
        render();
      });
      return el("label", {}, box, " " + c);
    })),
    button("default columns", () => { localStorage.removeItem(`wirelog.cols.${kind}`); render(); }));
  const pager = el("span", { class: "pager" },
    button("« first", () => go({ page: null }), { disabled: page > 0 ? null : "", id: "page-first" }),
    button("‹ newer", () => go({ page: page - 1 || null }), { disabled: page > 0 ? null : "", id: "page-prev" }),
    el("span", { text: ` page ${page + 1} of ${pages} ` }),
    button("older ›", () => go({ page: page + 1 }), { disabled: last < t.groups ? null : "", id: "page-next" }),
    button("last »", () => go({ page: pages - 1 }), { disabled: last < t.groups ? null : "", id: "page-last" }),
    el("select", { "aria-label": "rows per page", onchange: (ev) => go({ size: ev.target.value, page: null }) },
      PAGE_SIZES.map((n) => { const o = el("option", { value: n, text: `${n} per page` }); if (n === size) o.selected = true; return o; })));
  const csv = () => {
    const esc = (v) => (v === null || v === undefined ? "" : /[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
    const body = [cols.join(","), ...t.rows.map((r) => cols.map((c) => esc(r[c])).join(","))].join("\n") + "\n";
    const a = el("a", { href: URL.createObjectURL(new Blob([body], { type: "text/csv" })), download: `wirelog-${kind}-${first}-${last}.csv` });
    a.click();
  };
  const jsonHref = "/api/records?" + new URLSearchParams(Object.entries(q).filter(([, v]) => v !== "" && v !== undefined)).toString();
  document.getElementById("grid").replaceChildren(
    el("div", { class: "grid-head" },
      el("p", { id: "grid-count", "data-rows": t.rows.length, "data-groups": t.groups, "data-offset": page * size,
        text: `${fmtNum(first)}–${fmtNum(last)} of ${t.groups.toLocaleString("en")} records in the range, sorted by ${sort.replace(":", " ")}` +
          (t.groups > size ? ` (${size} a page: page through them, or narrow the filter or the range)` : "") }),
      pager, chooser, button("CSV", csv, { title: "this page, raw values" }), el("a", { href: jsonHref, target: "_blank", text: "JSON", title: "this page from the API, raw values" })),
    table(cols, t.rows, {
      sort,
      onSort: (c, dir) => go({ sort: `${c}:${dir}`, page: null }),
      onCell: (c, r, td) => {
        if (c === "uid" && r.uid) link(td, () => go({ view: "sequence", uid: r.uid, page: null }));
      },
    }));
}

// The map is grouped, ranked and cut on the server, over every pair of the
// range (/api/map): the browser draws what it is given.
const MAP_GROUPS = { host: "host", service: "service port", process: "process", container: "container", subnet: "/24 or /64 subnet" };
const MAP_RANKS = { calls: "calls", bytes: "bytes", errors: "errors", latency: "latency (p95)" };
const MAP_TOPS = [50, 200, 1000];

async function mapView(s, main) {
  const top = MAP_TOPS.includes(Number(s.top)) ? Number(s.top) : 200;
  const how = s.group in MAP_GROUPS ? s.group : "host";
  const rank = s.rank in MAP_RANKS ? s.rank : "calls";
  const search = el("input", { id: "map-search", type: "search", placeholder: "find a node (address, port, process)", value: s.find || "", "aria-label": "find a node" });
  const pick = (id, label, choices, now, param, dflt) => el("select", { id, "aria-label": label, onchange: (ev) => go({ [param]: ev.target.value === dflt ? null : ev.target.value }) },
    Object.entries(choices).map(([k, name]) => { const o = el("option", { value: k, text: name }); if (k === now) o.selected = true; return o; }));
  let controls = null;
  main.replaceChildren(el("h2", { text: `Service map: who calls whom (edge width: calls; top edges by ${MAP_RANKS[rank]})` }),
    el("form", { class: "filter", onsubmit: (ev) => { ev.preventDefault(); go({ find: search.value || null }); } }, search,
      pick("map-top", "edges shown", Object.fromEntries(MAP_TOPS.map((n) => [n, `top ${n} edges`])), String(top), "top", "200"),
      pick("map-rank", "rank edges by", Object.fromEntries(Object.entries(MAP_RANKS).map(([k, n]) => [k, `by ${n}`])), rank, "rank", "calls"),
      pick("map-group", "group nodes by", Object.fromEntries(Object.entries(MAP_GROUPS).map(([k, n]) => [k, `group by ${n}`])), how, "group", "host"),
      el("span", { class: "zoom", role: "group", "aria-label": "zoom" },
        button("+", () => controls?.zoomIn(), { id: "map-zoom-in", type: "button", title: "zoom in (+, or the wheel)" }),
        button("−", () => controls?.zoomOut(), { id: "map-zoom-out", type: "button", title: "zoom out (-)" }),
        button("reset", () => controls?.reset(), { id: "map-zoom-reset", type: "button", title: "back to the first view (0)" }))),
    el("div", { class: "legend-row", id: "map-legend" }, ["http", "dns", "mysql", "pgsql", "redis", "tls", "conn", "other"].map((p) => el("span", { class: `key p-${p}`, text: p }))),
    el("p", { id: "map-count" }), el("div", { id: "map" }), el("details", { id: "map-edges" }));
  const r = await api("map", { top, group: how === "host" ? null : how, rank: rank === "calls" ? null : rank, find: s.find || null, ...range(s) });
  controls = serviceMap(document.getElementById("map"), r.nodes, r.edges, (e) => {
    const [host, port] = [e.to.replace(/^\[?(.*?)\]?:(\d+)$/, "$1"), e.to.replace(/^.*:(\d+)$/, "$1")];
    const kind = TX.includes(e.protocol) ? e.protocol : "conns";
    const [cf, sf, pf] = kind === "conns" ? ["orig_h", "resp_h", "resp_p"] : ["client", "server", "server_port"];
    const isAddr = (x) => /^[0-9a-f.:\[\]]+(\/\d+)?$/i.test(x);
    // A group's records: its subnet, process, container or port (a host: the pair itself).
    const w = how === "host" ? `${cf} = ${e.from} and ${sf} = ${host} and ${pf} = ${port}`
      : how === "subnet" ? `${cf} in ${e.from} and ${sf} in ${host} and ${pf} = ${port}`
      : how === "service" ? `${isAddr(e.from) ? `${cf} = ${e.from} and ` : ""}${pf} = ${port}`
      : [isAddr(e.from) ? `${cf} = ${e.from}` : `orig_${how === "container" && e.from.includes(":") ? "container" : "proc"} = ${quote(e.from)}`,
        isAddr(host) ? `${sf} = ${host}` : `resp_${how === "container" && host.includes(":") ? "container" : "proc"} = ${quote(host)}`, `${pf} = ${port}`].join(" and ");
    go({ view: "records", kind, where: w, page: null, sort: null, group: null, rank: null, top: null, find: null });
  }, location.hash);
  const other = r.edges.find((e) => e.other);
  const shown = r.edges.length - (other ? 1 : 0);
  document.getElementById("map-count").replaceChildren(el("span", { "data-edges": shown, "data-found": r.edges_found, "data-total": r.total.count,
    text: `${shown} of ${r.edges_found} edges` + (s.find ? ` matching "${s.find}"` : "") + ` (grouped by ${MAP_GROUPS[how]}, ranked by ${MAP_RANKS[rank]})`
      + (other ? `; the other ${other.edges} edges, ${fmtNum(other.count)} calls, are summed into one` : "")
      + `; ${fmtNum(r.total.count)} calls in all.` + (r.partial ? " Partial: the range has more pairs than a map reads; narrow it." : "") }));
  document.getElementById("map-edges").replaceChildren(el("summary", { text: "the edges as a table" }),
    table(["from", "to", "protocol", "count", "errors", "bytes", "pairs", "p50_s", "p95_s", "p99_s"], r.edges));
}

const SEQ_PAGE = 200;
async function sequenceView(s, main) {
  const page = Math.max(0, Number(s.page) || 0);
  main.replaceChildren(el("h2", { text: `Connection ${s.uid}: calls in order` }), el("div", { id: "conn" }), el("div", { id: "seq-head" }), el("div", { id: "sequence" }));
  const q = await api("sequence", { uid: s.uid, offset: page * SEQ_PAGE, limit: SEQ_PAGE });
  const connCols = ["ts", "orig_h", "orig_p", "resp_h", "resp_p", "proto", "service", "duration", "conn_state", "history", "orig_proc", "resp_proc", "orig_container", "resp_container"];
  if (q.conn) document.getElementById("conn").replaceChildren(table(connCols.filter((c) => !OWNER.test(c) || q.conn[c]), [q.conn]));
  // Packets are kept (--pcap-dir): the connection's packets as a file.
  if (q.pcap) document.getElementById("conn").append(el("p", {}, el("a", { id: "pcap-link", href: q.pcap, download: `wirelog-${s.uid}.pcap`, text: "Download this connection's packets (pcap)" })));
  const first = q.calls.length ? q.offset + 1 : 0, last = q.offset + q.calls.length;
  document.getElementById("seq-head").replaceChildren(el("p", { id: "seq-count", "data-total": q.total, "data-offset": q.offset, "data-shown": q.calls.length,
    text: `calls ${first}–${last} of ${q.total}` + (q.total > SEQ_PAGE ? ` (${SEQ_PAGE} a page)` : "") }),
  el("span", { class: "pager" },
    button("‹ earlier", () => go({ page: page - 1 || null }), { disabled: page > 0 ? null : "" }),
    button("later ›", () => go({ page: page + 1 }), { disabled: last < q.total ? null : "", id: "seq-next" })));
  sequence(document.getElementById("sequence"), q.conn, q.calls);
  document.getElementById("sequence").dataset.calls = q.calls.length;
}

async function healthView(s, main) {
  const h = await api("health");
  const hist = h.history;
  const pts = (f) => hist.slice(1).map((x, i) => ({ t: x.t * 1e3, v: f(x, hist[i]) }));
  const win = { from: hist.length ? hist[0].t * 1e3 : Date.now(), to: Date.now(), step: (h.sample_every_s || 2) * 1e3 };
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
  // What the running capture has written: connections per state, transactions per status.
  const liveTables = h.live ? [
    el("h2", { text: "Connections ended (this capture)" }),
    table(["conn_state", "conns"], (h.live.conns_ended || []).map(([st, n]) => ({ conn_state: st, conns: n }))),
    el("h2", { text: "Transactions (this capture)" }),
    table(["protocol", "status", "count"], (h.live.transactions || []).map(([p, st, n]) => ({ protocol: p, status: st, count: n }))),
  ] : [];
  main.replaceChildren(
    el("dl", { class: "figures" }, figures.map(([name, v, id]) => el("div", { "data-figure": id }, el("dt", { text: name }), el("dd", { text: v })))),
    el("div", { class: "panels" },
      el("section", { class: "panel" }, el("div", { id: "h-cpu" })),
      el("section", { class: "panel" }, el("div", { id: "h-rss" })),
      live ? el("section", { class: "panel" }, el("div", { id: "h-pps" })) : null,
      live ? el("section", { class: "panel" }, el("div", { id: "h-drops" })) : null),
    ...liveTables,
    el("h2", { text: "Store" }),
    h.store ? table(["kind", "rows", "files", "bytes", "first", "last"], h.store.map((k) => ({ ...k,
      first: k.first_ns === null ? null : new Date(k.first_ns / 1e6).toISOString(), last: k.last_ns === null ? null : new Date(k.last_ns / 1e6).toISOString() }))) : el("p", { text: "no store" }));
  const dt = (a, b) => Math.max(1e-9, a.t - b.t);
  lineChart(document.getElementById("h-cpu"), [{ name: "CPU %", cls: "s1", points: pts((x, p) => (100 * (x.cpu_seconds - p.cpu_seconds)) / dt(x, p)) }], { ...win, fmt: fmtPct, title: "CPU of a core" });
  lineChart(document.getElementById("h-rss"), [{ name: "RSS", cls: "s2", points: pts((x) => x.rss_bytes) }], { ...win, fmt: fmtBytes, title: "resident memory" });
  if (live) {
    lineChart(document.getElementById("h-pps"), [{ name: "packets/s", cls: "s1", points: pts((x, p) => (x.live.packets - p.live.packets) / dt(x, p)) }], { ...win, title: "packets", unit: "per s" });
    lineChart(document.getElementById("h-drops"), [
      { name: "kernel drops/s", cls: "s3", points: pts((x, p) => (x.live.kernel_drops - p.live.kernel_drops) / dt(x, p)) },
      { name: "evictions/s", cls: "s2", points: pts((x, p) => (x.live.evicted - p.live.evicted) / dt(x, p)) }], { ...win, title: "drops and evictions", unit: "per s" });
  }
}

// --- completeness: one line above every view, for the range it shows ---
// Computed by the server from the loss table (`/api/completeness`): packets
// seen, what was sampled (numbers there are estimates), evicted, missed,
// dropped.
async function completeness(s) {
  const line = document.getElementById("completeness");
  const c = await api("completeness", range(s));
  line.textContent = (c.estimated ? "Estimated numbers: " : "") + c.text;
  line.dataset.estimated = c.estimated ? "1" : "0";
  line.classList.toggle("lossy", c.packets_seen !== null && c.packets_seen < 1 || c.estimated);
}

// --- theme: the browser's (prefers-color-scheme) unless chosen ---
function applyTheme() {
  const t = localStorage.getItem("wirelog.theme");
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
  const b = document.getElementById("theme");
  if (b) b.textContent = t ? `theme: ${t}` : "theme: browser";
}
document.getElementById("theme").addEventListener("click", () => {
  const order = [null, "dark", "light"];
  const cur = localStorage.getItem("wirelog.theme");
  const next = order[(order.indexOf(cur) + 1) % order.length];
  if (next) localStorage.setItem("wirelog.theme", next); else localStorage.removeItem("wirelog.theme");
  applyTheme();
});
applyTheme();

// A link with ?token= logged in (the server set the cookie): take the token
// out of the address bar so that a copied link does not share it.
if (new URLSearchParams(location.search).has("token")) {
  const q = new URLSearchParams(location.search);
  q.delete("token");
  history.replaceState(null, "", location.pathname + (q.toString() ? "?" + q : "") + location.hash);
}

// --- render loop ---
let generation = 0;
let lastRender = Date.now();
let paused = false;
async function render() {
  const g = ++generation;
  lastRender = Date.now();
  const s = state();
  const view = s.view || "overview";
  document.body.dataset.ready = "0";
  document.body.dataset.view = view;
  setZone(s.tz);
  const main = document.getElementById("main");
  const err = document.getElementById("error");
  err.textContent = "";
  try {
    // Whether the server is a running capture, and the store's extent, asked at once.
    const [h] = await Promise.all([live === null ? api("health") : null, storeExtent()]);
    if (h) {
      live = !!h.live;
      if (live) extent.last = Math.max(extent.last, Date.now());
    }
    frame(s);
  } catch (e) {
    err.textContent = e.message;
  }
  // The timeline, the completeness line and the view are drawn at once
  // (each its own questions); the timeline failing (a bad range) never
  // blanks the view below it.
  const view_ = async () => {
    if (view === "overview") await overview(s, main);
    else if (view === "tx") await txView(s, main);
    else if (view === "conns") await recordsGrid(s, main, "conns", "Connections");
    else if (view === "records") await recordsGrid(s, main, s.kind || "conns", `Records: ${s.kind || "conns"}` + (s.where ? ` where ${s.where}` : ""));
    else if (view === "map") await mapView(s, main);
    else if (view === "sequence") await sequenceView(s, main);
    else if (view === "health") await healthView(s, main);
  };
  const [tl, , v] = await Promise.allSettled([
    drawTimeline(s),
    completeness(s).catch((e) => { document.getElementById("completeness").textContent = `completeness: ${e.message}`; }),
    view_(),
  ]);
  if (tl.status === "rejected") err.textContent = `timeline: ${tl.reason.message}`;
  if (v.status === "rejected") err.textContent = (err.textContent ? err.textContent + "\n" : "") + v.reason.message;
  if (g === generation) document.body.dataset.ready = "1";
}

window.addEventListener("hashchange", render);
render();
// Live (capture --listen): redraw every 3 s unless paused; `refresh=N` in
// the hash redraws every N seconds on any server. The extent is read again.
setInterval(() => {
  const asked = Number(state().refresh || 0) * 1e3;
  const every = asked > 0 ? asked : live && !paused ? 3e3 : 0;
  if (every > 0 && Date.now() - lastRender >= every && document.body.dataset.ready === "1") {
    extent = null;
    render();
  }
}, 500);
