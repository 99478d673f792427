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
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "-";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

export function fmtSecs(s) {
  if (s === null || s === undefined) return "-";
  if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(1) + " ms";
  return s.toFixed(2) + " s";
}

function fmtTime(ms, span) {
  const d = new Date(ms);
  const iso = d.toISOString();
  if (span < 60e3) return iso.slice(11, 23);
  if (span < 86400e3) return iso.slice(11, 19);
  return iso.slice(5, 16).replace("T", " ");
}

function ticks(lo, hi, n) {
  const out = [];
  for (let i = 0; i <= n; i++) out.push(lo + ((hi - lo) * i) / n);
  return out;
}

// A bar timeline of `points` ([{t: ms, v}]) over [from, to] (ms); dragging
// across it calls onSelect(fromMs, toMs); a click without a drag clears.
export function timeline(host, points, { from, to, step, sel, onSelect, fmt = fmtNum }) {
  const W = 1000, H = 120, L = 50, B = 20;
  const span = Math.max(1, to - from);
  const max = Math.max(1, ...points.map((p) => p.v));
  const x = (t) => L + ((t - from) / span) * (W - L - 5);
  const y = (v) => H - B - (v / max) * (H - B - 8);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "timeline", id: "timeline-svg" });
  for (const v of ticks(0, max, 2)) {
    svg.append(el("line", { x1: L, x2: W - 5, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: L - 4, y: y(v) + 4, class: "axis", "text-anchor": "end", text: fmt(v) }));
  }
  for (const t of ticks(from, to, 5)) {
    svg.append(el("text", { x: x(t), y: H - 5, class: "axis", "text-anchor": "middle", text: fmtTime(t, span) }));
  }
  const bw = Math.max(1, ((step || span / 100) / span) * (W - L - 5) - 1);
  for (const p of points) {
    svg.append(el("rect", { x: x(p.t), y: y(p.v), width: bw, height: H - B - y(p.v), class: "bar", "data-t": p.t, "data-v": p.v },
      el("title", { text: `${new Date(p.t).toISOString()}: ${fmt(p.v)}` })));
  }
  const selRect = el("rect", { y: 0, height: H - B, class: "selection", x: 0, width: 0 });
  if (sel) {
    selRect.setAttribute("x", x(sel[0]));
    selRect.setAttribute("width", Math.max(1, x(sel[1]) - x(sel[0])));
  }
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
  host.replaceChildren(svg);
}

// Lines over time: series = [{name, cls, points: [{t, v}]}].
export function lineChart(host, series, { from, to, fmt = fmtNum, title }) {
  const W = 480, H = 160, L = 55, B = 20;
  const span = Math.max(1, to - from);
  const all = series.flatMap((s) => s.points.map((p) => p.v)).filter((v) => v !== null);
  const max = Math.max(1e-9, ...all);
  const x = (t) => L + ((t - from) / span) * (W - L - 5);
  const y = (v) => H - B - (v / max) * (H - B - 16);
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart" });
  if (title) svg.append(el("text", { x: L, y: 11, class: "title", text: title }));
  for (const v of ticks(0, max, 2)) {
    svg.append(el("line", { x1: L, x2: W - 5, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(el("text", { x: L - 4, y: y(v) + 4, class: "axis", "text-anchor": "end", text: fmt(v) }));
  }
  let lx = W - 5;
  for (const s of series.slice().reverse()) {
    const pts = s.points.filter((p) => p.v !== null).map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    svg.append(el("polyline", { points: pts.join(" "), class: `line ${s.cls || ""}` }));
    for (const p of s.points.filter((p) => p.v !== null)) {
      svg.append(el("circle", { cx: x(p.t), cy: y(p.v), r: 2, class: `dot ${s.cls || ""}` }, el("title", { text: `${s.name} ${new Date(p.t).toISOString()}: ${fmt(p.v)}` })));
    }
    const t = el("text", { x: lx, y: 11, class: `legend ${s.cls || ""}`, "text-anchor": "end", text: s.name });
    svg.append(t);
    lx -= 8 * s.name.length + 14;
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
export function serviceMap(host, nodes, edges, onEdge) {
  const hosts = nodes.filter((n) => edges.some((e) => e.from === n.id));
  const services = nodes.filter((n) => edges.some((e) => e.to === n.id));
  const rowH = 34, W = 1000;
  const H = Math.max(hosts.length, services.length) * rowH + 40;
  const yOf = (list) => new Map(list.map((n, i) => [n.id, 30 + i * rowH + (H - 40 - list.length * rowH) / 2]));
  const hy = yOf(hosts), sy = yOf(services);
  const maxCalls = Math.max(1, ...edges.map((e) => e.count));
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "map", id: "map-svg" });
  for (const e of edges) {
    const y1 = hy.get(e.from), y2 = sy.get(e.to);
    const d = `M 230 ${y1} C 500 ${y1}, 500 ${y2}, 770 ${y2}`;
    const p = el("path", { d, class: `edge p-${e.protocol}`, "stroke-width": 1 + 7 * Math.sqrt(e.count / maxCalls), "data-from": e.from, "data-to": e.to, "data-protocol": e.protocol, "data-count": e.count },
      el("title", { text: `${e.from} → ${e.to} ${e.protocol}: ${e.count} calls` + (e.errors !== null ? `, ${e.errors} errors, p50 ${fmtSecs(e.p50_s)}, p99 ${fmtSecs(e.p99_s)}` : "") + `, ${fmtBytes(e.bytes)}` }));
    if (onEdge) p.addEventListener("click", () => onEdge(e));
    svg.append(p);
    const label = `${e.protocol} ${e.count}` + (e.errors ? ` (${e.errors} err)` : "");
    svg.append(el("text", { x: 500, y: (y1 + y2) / 2 - 3, class: "edge-label", "text-anchor": "middle", text: label }));
  }
  // The programs behind a node (capture --processes), busiest first: shown
  // after the address, all of them (with containers) in the tooltip.
  const procs = (n) => (n.procs || []).map((p) => p.proc);
  const named = (n, text) => procs(n).length ? `${text} ${[...new Set(procs(n))].join(", ")}` : text;
  const tip = (n) => el("title", { text: [n.id, ...(n.procs || []).map((p) => `${p.proc}${p.container ? ` (container ${p.container})` : ""}: ${p.conns} connections`)].join("\n") });
  for (const n of hosts) svg.append(el("g", { class: "node host", "data-id": n.id, "data-procs": procs(n).join(",") }, tip(n),
    el("rect", { x: 20, y: hy.get(n.id) - 12, width: 210, height: 24, rx: 4 }),
    el("text", { x: 30, y: hy.get(n.id) + 4, text: named(n, n.id).slice(0, 34) })));
  for (const n of services) svg.append(el("g", { class: "node service", "data-id": n.id, "data-procs": procs(n).join(",") }, tip(n),
    el("rect", { x: 770, y: sy.get(n.id) - 12, width: 210, height: 24, rx: 4 }),
    el("text", { x: 780, y: sy.get(n.id) + 4, text: named(n, `${n.id} (${fmtNum(n.calls_in)})`).slice(0, 34) })));
  host.replaceChildren(svg);
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
