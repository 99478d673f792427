// Small SVG charts of our own: a timeline with drag selection, line charts,
// bar lists, the service map and a sequence diagram. No dependencies.

const NS = "http://www.w3.org/2000/svg";

export function el(tag, attrs = {}, ...children) {
  const svgTags = ["svg", "g", "rect", "line", "path", "text", "circle", "title", "polyline", "marker", "defs"];
  const e = svgTags.includes(tag) ? document.createElementNS(NS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c);
  return e;
}

export function fmtNum(n) {
  if (n === null || n === undefined) return "-";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  if (Number.isInteger(n)) return String(n);
  // Low rates keep two significant digits (0.0033/s, not 0.00).
  if (a < 1) return a === 0 ? "0" : String(Number(n.toPrecision(2)));
  return n.toFixed(2);
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "-";
  const u = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : String(Math.round(n * 100) / 100)) + " " + u[i];
}

export function fmtSecs(s) {
  if (s === null || s === undefined) return "-";
  const a = Math.abs(s);
  if (a === 0) return "0 s";
  if (a < 1e-3) return (s * 1e6).toFixed(a < 1e-5 ? 1 : 0) + " µs";
  if (a < 1) return (s * 1e3).toFixed(a < 1e-2 ? 2 : 1) + " ms";
  if (a < 600) return s.toFixed(2) + " s";
  if (a < 48 * 3600) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " d";
}

export function fmtPct(v) {
  if (v === null || v === undefined) return "-";
  return (v === 0 ? "0" : v < 1 ? String(Number(v.toPrecision(2))) : v.toFixed(1)) + " %";
}

// --- time in the chosen zone (UTC or the browser's), for axes and cells ---
let zone = "utc";
export function setZone(z) { zone = z === "local" ? "local" : "utc"; }
export function zoneName() {
  if (zone === "utc") return "UTC";
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || "local"; } catch { return "local"; }
}
function parts(ms) {
  const d = new Date(ms);
  return zone === "utc"
    ? { Y: d.getUTCFullYear(), M: d.getUTCMonth(), D: d.getUTCDate(), h: d.getUTCHours(), m: d.getUTCMinutes(), s: d.getUTCSeconds(), ms: d.getUTCMilliseconds() }
    : { Y: d.getFullYear(), M: d.getMonth(), D: d.getDate(), h: d.getHours(), m: d.getMinutes(), s: d.getSeconds(), ms: d.getMilliseconds() };
}
function fromParts(Y, M, D, h = 0, m = 0, s = 0) {
  return zone === "utc" ? Date.UTC(Y, M, D, h, m, s) : new Date(Y, M, D, h, m, s).getTime();
}
const p2 = (n) => String(n).padStart(2, "0");
export function fmtDate(ms) { const p = parts(ms); return `${p.Y}-${p2(p.M + 1)}-${p2(p.D)}`; }
// A full time in the zone: 2026-11-28 09:14:03.123 (µs kept from an RFC 3339 string when given).
export function fmtStamp(ms, frac = "") {
  const p = parts(ms);
  return `${fmtDate(ms)} ${p2(p.h)}:${p2(p.m)}:${p2(p.s)}${frac || (p.ms ? "." + String(p.ms).padStart(3, "0") : "")}`;
}
// Input value for <input type=datetime-local> in the zone, and back.
export function toInput(ms) { const p = parts(ms); return `${fmtDate(ms)}T${p2(p.h)}:${p2(p.m)}:${p2(p.s)}`; }
export function fromInput(v) {
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d)(?::(\d\d))?/.exec(v || "");
  return m ? fromParts(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0)) : NaN;
}

const SEC = 1e3, MIN = 60e3, HOUR = 3600e3, DAY = 86400e3;
const TICK_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, SEC, 2 * SEC, 5 * SEC, 10 * SEC, 15 * SEC, 30 * SEC, MIN, 2 * MIN, 5 * MIN,
  10 * MIN, 15 * MIN, 30 * MIN, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY];
const MONTHS = [1, 2, 3, 6, 12, 24, 60, 120, 240];

// Round instants between lo and hi (at most about n), in the zone, each with
// its label: the date where a tick is the first or passes midnight, else the time.
export function timeTicks(lo, hi, n = 6) {
  const span = Math.max(1, hi - lo);
  const out = [];
  const step = TICK_STEPS.find((s) => span / s <= n);
  if (step !== undefined) {
    // Align to the step in the zone's wall clock (days start at midnight there).
    const p = parts(lo);
    const dayStart = fromParts(p.Y, p.M, p.D);
    let t = step >= DAY ? dayStart : dayStart + Math.ceil((lo - dayStart) / step) * step;
    if (t < lo) t += step;
    let prevDay = null;
    for (; t <= hi && out.length < 50; t += step) {
      const day = fmtDate(t), q = parts(t);
      const time = step < SEC ? `${p2(q.h)}:${p2(q.m)}:${p2(q.s)}.${String(q.ms).padStart(3, "0")}` : step < MIN ? `${p2(q.h)}:${p2(q.m)}:${p2(q.s)}` : `${p2(q.h)}:${p2(q.m)}`;
      const midnight = q.h === 0 && q.m === 0 && q.s === 0 && q.ms === 0;
      // The date where the day changes (and on the first tick), else the time.
      const label = step >= DAY || (midnight && prevDay !== day) ? day : prevDay !== day ? `${day} ${time}` : time;
      out.push({ t, label });
      prevDay = day;
    }
    return out;
  }
  const months = MONTHS.find((m) => span / (m * 30.4 * DAY) <= n) || 480;
  const p = parts(lo);
  let Y = p.Y, M = Math.ceil(p.M / months) * months;
  for (let i = 0; i < 60; i++) {
    const t = fromParts(Y + Math.floor(M / 12), M % 12, 1);
    if (t > hi) break;
    if (t >= lo) out.push({ t, label: months >= 12 ? String(Y + Math.floor(M / 12)) : `${Y + Math.floor(M / 12)}-${p2((M % 12) + 1)}` });
    M += months;
  }
  return out;
}

// 0 to a round maximum in 1, 2, 2.5, 5 x 10^k steps, for value axes.
export function valueTicks(max, n = 3) {
  if (!(max > 0)) return [0, 1];
  const raw = max / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw);
  const out = [];
  for (let v = 0; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function timeAxis(svg, from, to, x, y0, W) {
  for (const { t, label } of timeTicks(from, to, Math.max(3, Math.floor(W / 130)))) {
    svg.append(el("line", { x1: x(t), x2: x(t), y1: y0, y2: y0 + 4, class: "tick" }));
    svg.append(el("text", { x: x(t), y: y0 + 15, class: "axis", "text-anchor": "middle", text: label }));
  }
}

// A bar timeline of `points` ([{t: ms, v}]) over [from, to] (ms); dragging
// across it calls onSelect(fromMs, toMs); a click without a drag clears.
// Arrow keys move a keyboard selection: shift+arrows widen it, Enter picks it.
export function timeline(host, points, { from, to, step, sel, onSelect, fmt = fmtNum, unit = "" }) {
  const W = 1000, H = 130, L = 60, B = 28;
  const span = Math.max(1, to - from);
  const yt = valueTicks(Math.max(0, ...points.map((p) => p.v)), 2);
  const max = yt[yt.length - 1] || 1;
  const x = (t) => L + ((t - from) / span) * (W - L - 5);
  const y = (v) => H - B - (v / max) * (H - B - 14);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "timeline", id: "timeline-svg", tabindex: 0, role: "slider", "aria-label": "timeline: drag, or arrow keys and Enter, to select a range" });
  for (const v of yt) {
    svg.append(el("line", { x1: L, x2: W - 5, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: L - 4, y: y(v) + 4, class: "axis", "text-anchor": "end", text: fmt(v) }));
  }
  if (unit) svg.append(el("text", { x: L + 4, y: 9, class: "axis", text: unit }));
  timeAxis(svg, from, to, x, H - B, W);
  svg.append(el("text", { x: W - 5, y: H - 1, class: "axis zone", "text-anchor": "end", text: zoneName() }));
  const bw = Math.max(1, ((step || span / 100) / span) * (W - L - 5) - 1);
  for (const p of points) {
    if (p.t + (step || 0) <= from || p.t >= to) continue;
    const x0 = Math.max(L, x(p.t));
    svg.append(el("rect", { x: x0, y: y(p.v), width: Math.max(1, Math.min(bw, W - 5 - x0)), height: H - B - y(p.v), class: "bar", "data-t": p.t, "data-v": p.v },
      el("title", { text: `${fmtStamp(p.t)} ${zoneName()}: ${fmt(p.v)}` })));
  }
  const selRect = el("rect", { y: 0, height: H - B, class: "selection", x: 0, width: 0 });
  const showSel = (a, b) => {
    const xa = Math.max(L, x(a)), xb = Math.min(W - 5, x(b));
    selRect.setAttribute("x", xa);
    selRect.setAttribute("width", Math.max(1, xb - xa));
  };
  if (sel) showSel(sel[0], sel[1]);
  svg.append(selRect);
  // Screen pixels to chart time through the SVG's own transform.
  const toT = (ev) => {
    const pt = svg.createSVGPoint();
    pt.x = ev.clientX; pt.y = ev.clientY;
    const p = pt.matrixTransform(svg.getScreenCTM().inverse());
    const c = Math.min(W - 5, Math.max(L, p.x));
    return { px: c, t: from + ((c - L) / (W - L - 5)) * span };
  };
  let start = null;
  svg.addEventListener("mousedown", (ev) => { start = toT(ev); ev.preventDefault(); });
  svg.addEventListener("mousemove", (ev) => {
    if (!start) return;
    const cur = toT(ev);
    selRect.setAttribute("x", Math.min(start.px, cur.px));
    selRect.setAttribute("width", Math.abs(cur.px - start.px));
  });
  const finish = (ev) => {
    if (!start) return;
    const end = toT(ev);
    const s = start;
    start = null;
    if (Math.abs(end.px - s.px) < 3) onSelect(null, null);
    else onSelect(Math.min(s.t, end.t), Math.max(s.t, end.t));
  };
  svg.addEventListener("mouseup", finish);
  svg.addEventListener("mouseleave", (ev) => { if (start) finish(ev); });
  let k = sel ? [...sel] : [from + span * 0.45, from + span * 0.55];
  svg.addEventListener("keydown", (ev) => {
    const d = span / 20;
    if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
      const dir = ev.key === "ArrowLeft" ? -1 : 1;
      if (ev.shiftKey) k[1] = Math.max(k[0] + d / 4, k[1] + dir * d);
      else k = [k[0] + dir * d, k[1] + dir * d];
      k = [Math.max(from, k[0]), Math.min(to, k[1])];
      showSel(k[0], k[1]);
      ev.preventDefault();
    } else if (ev.key === "Enter") { onSelect(k[0], k[1]); ev.preventDefault(); }
    else if (ev.key === "Escape") { onSelect(null, null); ev.preventDefault(); }
  });
  host.replaceChildren(svg);
}

// Lines over time: series = [{name, cls, points: [{t, v}]}], v null for no
// data (a gap in the line). `step` (ms): a missing interval is a gap too.
export function lineChart(host, series, { from, to, step, fmt = fmtNum, title, unit = "", W = 480 }) {
  const H = 170, L = 58, B = 30, T = 30;
  const span = Math.max(1, to - from);
  const all = series.flatMap((s) => s.points.map((p) => p.v)).filter((v) => v !== null && v !== undefined && isFinite(v));
  const yt = valueTicks(Math.max(0, ...all), 3);
  const max = yt[yt.length - 1] || 1;
  const x = (t) => L + ((t - from) / span) * (W - L - 5);
  const y = (v) => H - B - (v / max) * (H - B - T);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title || "chart" });
  if (title) svg.append(el("text", { x: 4, y: 11, class: "title", text: title + (unit ? ` (${unit})` : "") }));
  for (const v of yt) {
    svg.append(el("line", { x1: L, x2: W - 5, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: L - 4, y: y(v) + 4, class: "axis", "text-anchor": "end", text: fmt(v) }));
  }
  timeAxis(svg, from, to, x, H - B, W);
  svg.append(el("text", { x: W - 5, y: H - 1, class: "axis zone", "text-anchor": "end", text: zoneName() }));
  if (!all.length) svg.append(el("text", { x: (W + L) / 2, y: H / 2, class: "axis", "text-anchor": "middle", text: "no data in this range" }));
  let lx = W - 5;
  for (const s of series.slice().reverse()) {
    // Runs of consecutive points: a null or a missing interval ends a run.
    const runs = [];
    let run = [], prev = null;
    for (const p of [...s.points].sort((a, b) => a.t - b.t)) {
      const ok = p.v !== null && p.v !== undefined && isFinite(p.v);
      if (!ok || (prev !== null && step && p.t - prev > step * 1.5)) { if (run.length) runs.push(run); run = []; }
      if (ok) { run.push(p); prev = p.t; } else prev = null;
    }
    if (run.length) runs.push(run);
    for (const r of runs) {
      svg.append(el("polyline", { points: r.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" "), class: `line ${s.cls || ""}` }));
      if (r.length <= 60) for (const p of r) {
        svg.append(el("circle", { cx: x(p.t), cy: y(p.v), r: r.length === 1 ? 2.5 : 1.5, class: `dot ${s.cls || ""}` }, el("title", { text: `${s.name} ${fmtStamp(p.t)}: ${fmt(p.v)}` })));
      }
    }
    const t = el("text", { x: lx, y: 24, class: `legend ${s.cls || ""}`, "text-anchor": "end", text: "— " + s.name });
    svg.append(t);
    lx -= 7 * (s.name.length + 2) + 12;
  }
  host.replaceChildren(svg);
}

// A ranked list with proportional bars: rows = [{key, label, value, onClick}].
export function barList(host, rows, fmt = fmtNum) {
  if (!rows.length) { host.replaceChildren(el("p", { class: "empty", text: "nothing in this range" })); return; }
  const max = Math.max(1, ...rows.map((r) => r.value));
  const ul = el("ul", { class: "bars" });
  for (const r of rows) {
    const bar = el("span", { class: "bar" });
    bar.style.width = `${(100 * r.value) / max}%`;
    const li = el("li", { "data-key": r.key, "data-value": r.value, class: r.cls || "", title: r.label },
      el("span", { class: "label", text: r.label }), el("span", { class: "track" }, bar), el("span", { class: "value", text: fmt(r.value) }));
    if (r.onClick) { li.classList.add("link"); li.addEventListener("click", r.onClick); }
    ul.append(li);
  }
  host.replaceChildren(ul);
}

// The service map: client hosts on the left, services on the right, one
// curve per edge, its width by calls; colour by protocol.
// The service map: clients on the left, services on the right (busiest
// first; clients ordered by where their services are, to cross less), edge
// width by calls. The drawing is as tall as its nodes need; the element
// shows a window of it (viewBox) that the wheel, a drag, the keyboard
// (+ - arrows 0) and the buttons zoom and pan, so 400 nodes never make a
// page thousands of pixels tall.
export function serviceMap(host, nodes, edges, onEdge, viewKey) {
  const hosts = nodes.filter((n) => edges.some((e) => e.from === n.id));
  const services = nodes.filter((n) => edges.some((e) => e.to === n.id));
  services.sort((a, b) => (a.other ? 1 : 0) - (b.other ? 1 : 0) || b.calls_in - a.calls_in || (a.id < b.id ? -1 : 1));
  const rowH = 30, W = 1000, boxW = 230;
  const H = Math.max(hosts.length, services.length) * rowH + 40;
  const yOf = (list) => new Map(list.map((n, i) => [n.id, 30 + i * rowH + (H - 40 - list.length * rowH) / 2]));
  const sy = yOf(services);
  // A client sits at the mean height of its services, weighted by calls.
  const at = new Map(hosts.map((n) => {
    let w = 0, y = 0;
    for (const e of edges) if (e.from === n.id) { w += e.count + 1; y += (e.count + 1) * sy.get(e.to); }
    return [n.id, n.other ? Infinity : y / Math.max(w, 1)];
  }));
  hosts.sort((a, b) => at.get(a.id) - at.get(b.id) || (a.id < b.id ? -1 : 1));
  const hy = yOf(hosts);
  const maxCalls = Math.max(1, ...edges.filter((e) => !e.other).map((e) => e.count));
  // The window first shown: the full width, as tall as the element's shape allows.
  const viewH = Math.min(H, 620);
  const svg = el("svg", { viewBox: `0 0 ${W} ${viewH}`, class: "map", id: "map-svg", tabindex: 0, role: "img",
    "aria-label": `service map: ${hosts.length} clients, ${services.length} services, ${edges.length} edges; + and - zoom, arrows pan, 0 resets` });
  const scene = el("g", { class: "scene" });
  svg.append(scene);
  // Labels on the busiest edges only, none closer than a line to another.
  const labelled = new Set(), taken = [];
  for (const e of edges.slice(0, 60)) {
    const y = (hy.get(e.from) + sy.get(e.to)) / 2;
    if (taken.some((t) => Math.abs(t - y) < 13)) continue;
    taken.push(y);
    labelled.add(e);
  }
  for (const e of edges) {
    const y1 = hy.get(e.from), y2 = sy.get(e.to);
    const d = `M ${20 + boxW} ${y1} C 500 ${y1}, 500 ${y2}, ${W - 20 - boxW} ${y2}`;
    const width = e.other ? 2 : 1 + 7 * Math.sqrt(Math.min(1, e.count / maxCalls));
    const what = e.other ? `the other ${e.edges} edges (${e.pairs} pairs), summed` : `${e.from} → ${e.to} ${e.protocol}` + (e.pairs > 1 ? ` (${e.pairs} pairs)` : "");
    const p = el("path", { d, class: `edge p-${e.protocol}${e.other ? " other" : ""}`, "stroke-width": width, "data-from": e.from, "data-to": e.to, "data-protocol": e.protocol, "data-source": e.source, "data-count": e.count, "data-bytes": e.bytes, "data-errors": e.errors ?? "" },
      el("title", { text: `${what}: ${e.count} calls` + (e.errors !== null ? `, ${e.errors} errors` : "") + (e.p95_s !== null ? `, p50 ${fmtSecs(e.p50_s)}, p95 ${fmtSecs(e.p95_s)}, p99 ${fmtSecs(e.p99_s)}` : "") + `, ${fmtBytes(e.bytes)}` }));
    if (onEdge && !e.other) p.addEventListener("click", () => onEdge(e));
    scene.append(p);
    if (labelled.has(e)) {
      const label = e.other ? `other ${e.edges} edges: ${fmtNum(e.count)}` : `${e.protocol} ${fmtNum(e.count)}` + (e.errors ? ` (${fmtNum(e.errors)} err)` : "");
      scene.append(el("text", { x: 500, y: (y1 + y2) / 2 - 3, class: "edge-label", "text-anchor": "middle", text: label }));
    }
  }
  // A node is named by its process (and container) when known, else by its
  // address; groups say how many they hold; all of it in the tooltip.
  const procs = (n) => (n.procs || []).map((p) => p.proc);
  const label = (n) => {
    if (n.other) return `${n.id}: ${n.members}`;
    const held = n.members > 1 ? ` [${n.members}]` : "";
    return (n.name && n.name !== n.id.replace(/:\d+$/, "") ? `${n.name} · ${n.id}` : n.id) + held + (n.kind === "service" ? ` (${fmtNum(n.calls_in)})` : "");
  };
  const tip = (n) => el("title", { text: [n.id + (n.members > 1 ? ` (${n.members} ${n.other ? "nodes" : "members"})` : ""), ...(n.procs || []).map((p) => `${p.proc}${p.container ? ` (container ${p.container})` : ""}: ${p.conns} connections`)].join("\n") });
  const texts = [];
  const node = (n, x, y, cls) => {
    const t = el("text", { x: x + 8, y: y + 4, text: label(n), "data-full": label(n) });
    texts.push(t);
    return el("g", { class: `node ${cls}${n.other ? " other" : ""}`, "data-id": n.id, "data-procs": procs(n).join(","), "data-members": n.members ?? 1, "data-name": n.name ?? "" }, tip(n),
      el("rect", { x, y: y - 11, width: boxW, height: 22, rx: 4 }), t);
  };
  for (const n of hosts) scene.append(node(n, 20, hy.get(n.id), "host"));
  for (const n of services) scene.append(node(n, W - 20 - boxW, sy.get(n.id), "service"));
  host.replaceChildren(svg);
  // Labels fitted to their box: cut with an ellipsis (whole in the tooltip).
  for (const t of texts) {
    const full = t.textContent;
    if (t.getComputedTextLength() <= boxW - 14) continue;
    let lo = 0, hi = full.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      t.textContent = full.slice(0, mid) + "…";
      if (t.getComputedTextLength() <= boxW - 14) lo = mid; else hi = mid - 1;
    }
    t.textContent = full.slice(0, lo) + "…";
  }
  return panZoom(svg, { x: 0, y: 0, w: W, h: viewH }, { w: W, h: H }, viewKey);
}

// Pan and zoom of an SVG through its viewBox: wheel (about the pointer),
// drag, keys (+ = - arrows 0) and the returned controls. `home` is the
// window a reset returns to; `size` the drawing's, which a pan stays near.
const savedViews = new Map();
export function panZoom(svg, home, size, key) {
  let v = { ...(key && savedViews.get(key)) || home };
  const set = (n) => {
    const w = Math.min(Math.max(n.w, home.w / 20), size.w * 4), h = w * home.h / home.w;
    const x = Math.min(Math.max(n.x, -w * 0.9), size.w - w * 0.1), y = Math.min(Math.max(n.y, -h * 0.9), size.h - h * 0.1);
    v = { x, y, w, h };
    svg.setAttribute("viewBox", `${x.toFixed(1)} ${y.toFixed(1)} ${w.toFixed(1)} ${h.toFixed(1)}`);
    svg.dataset.zoom = (home.w / w).toFixed(3);
    svg.classList.toggle("zoomed-out", w > home.w * 1.5);
    if (key) savedViews.set(key, v);
  };
  const zoom = (f, cx = v.x + v.w / 2, cy = v.y + v.h / 2) => set({ x: cx - (cx - v.x) / f, y: cy - (cy - v.y) / f, w: v.w / f, h: v.h / f });
  const pan = (dx, dy) => set({ ...v, x: v.x + dx, y: v.y + dy });
  const toScene = (ev) => {
    const r = svg.getBoundingClientRect();
    return [v.x + (ev.clientX - r.left) / r.width * v.w, v.y + (ev.clientY - r.top) / r.height * v.h];
  };
  svg.addEventListener("wheel", (ev) => { ev.preventDefault(); zoom(ev.deltaY < 0 ? 1.25 : 0.8, ...toScene(ev)); }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => { if (ev.button === 0) drag = { x: ev.clientX, y: ev.clientY, v, moved: false }; });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) { drag.moved = true; svg.setPointerCapture(ev.pointerId); svg.classList.add("panning"); }
    set({ ...drag.v, x: drag.v.x - dx / r.width * drag.v.w, y: drag.v.y - dy / r.height * drag.v.h });
  });
  const end = (ev) => {
    if (drag?.moved) {
      svg.classList.remove("panning");
      // A drag is not a click on the edge it ends over.
      svg.addEventListener("click", (c) => c.stopPropagation(), { capture: true, once: true });
    }
    drag = null;
  };
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointercancel", end);
  svg.addEventListener("keydown", (ev) => {
    const step = v.w / 8;
    const act = { "+": () => zoom(1.25), "=": () => zoom(1.25), "-": () => zoom(0.8), "_": () => zoom(0.8), "0": () => set(home),
      ArrowLeft: () => pan(-step, 0), ArrowRight: () => pan(step, 0), ArrowUp: () => pan(0, -step), ArrowDown: () => pan(0, step) }[ev.key];
    if (act) { ev.preventDefault(); act(); }
  });
  set(v);
  return { zoomIn: () => zoom(1.25), zoomOut: () => zoom(0.8), reset: () => set(home) };
}

// Calls of one connection as a sequence diagram: client and server
// lifelines, each call an arrow down and its answer back, at its time.
export function sequence(host, conn, calls) {
  const W = 1000, top = 56, rowH = 58;
  const H = top + calls.length * rowH + 20;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "sequence", id: "sequence-svg" },
    el("defs", {}, el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" }, el("path", { d: "M 0 0 L 10 5 L 0 10 z" }))));
  const cx = 250, sx = 750;
  const client = conn ? `${conn.orig_h}:${conn.orig_p}` : "client";
  const server = conn ? `${conn.resp_h}:${conn.resp_p}` : "server";
  svg.append(el("text", { x: cx, y: 20, "text-anchor": "middle", class: "actor", text: client }));
  svg.append(el("text", { x: sx, y: 20, "text-anchor": "middle", class: "actor", text: server }));
  svg.append(el("line", { x1: cx, x2: cx, y1: 28, y2: H, class: "lifeline" }));
  svg.append(el("line", { x1: sx, x2: sx, y1: 28, y2: H, class: "lifeline" }));
  calls.forEach((c, i) => {
    const y = top + i * rowH;
    const what = c.method ? `${c.method} ${c.uri}` : c.query || c.command || c.kind;
    const answer = c.status_code ?? c.rcode_name ?? c.status;
    svg.append(el("line", { x1: cx, x2: sx, y1: y, y2: y, class: "call", "marker-end": "url(#arrow)" }));
    svg.append(el("text", { x: (cx + sx) / 2, y: y - 4, "text-anchor": "middle", class: "call-label", text: `${c.ts.slice(11, 26)}  ${what}`.slice(0, 90) }));
    svg.append(el("line", { x1: sx, x2: cx, y1: y + 18, y2: y + 18, class: `reply ${c.status === "error" ? "error" : ""}`, "marker-end": "url(#arrow)" }));
    svg.append(el("text", { x: (cx + sx) / 2, y: y + 31, "text-anchor": "middle", class: "reply-label", "data-latency": c.latency, text: `${answer} in ${fmtSecs(c.latency)}` }));
  });
  host.replaceChildren(svg);
}
