#!/usr/bin/env python3
"""Issue 30's list, walked in headless Chromium (tests/serve_ui.py's
driver) on a running `wirelog serve`: for each bullet of "What to build"
that a page can show, what the page does, read from the DOM and the API,
printed as `present` / `partial` / `missing` with what was seen. Not a
test (tests/serve_ui.py checks the numbers): an audit, for the report.

usage: bench/ui_audit.py URL [--label NAME]
"""
import gzip
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import serve_ui  # noqa: E402

ROWS = []


def say(bullet, verdict, seen):
    ROWS.append((bullet, verdict, seen))
    print(f"| {bullet} | {verdict} | {seen} |", flush=True)


def get(base, path, headers=None):
    req = urllib.request.Request(base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def main():
    base = sys.argv[1].rstrip("/")
    b = serve_ui.Browser()
    print("| bullet | verdict | seen |\n|---|---|---|")
    try:
        t0 = time.perf_counter()
        b.open(base + "/#view=overview", "overview")
        ready = time.perf_counter() - t0
        ext = json.loads(get(base, "/api/extent")[2])
        timed = [k for k in ext if k["kind"] not in ("flows", "loss") and k["rows"] > 0]
        last = max(k["last_ns"] for k in timed)
        first = min(k["first_ns"] for k in timed)
        d = b.js("(() => { const d = document.getElementById('timeline-total').dataset; return [d.from, d.to, d.step]; })()")
        span = (serve_ui_ms(d[1]) - serve_ui_ms(d[0])) / 60e3
        say("default: the last 15 minutes of data", "present" if abs(span - 15) < 0.1 and abs(serve_ui_ms(d[1]) - last / 1e6) < 2 else "partial",
            f"window {d[0]} .. {d[1]} ({span:.1f} min), newest record {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(last / 1e9))}, store from {time.strftime('%Y-%m-%d', time.gmtime(first / 1e9))}; Overview ready {ready:.2f} s (first load)")
        bars = b.js("document.querySelectorAll('#timeline-svg rect.bar').length")
        say("interval follows the range (~100-300 points)", "present" if 50 <= 15 * 60 / max(1, serve_ui_secs(d[2])) <= 300 else "partial", f"step {d[2]}, {bars} bars drawn")
        quick = b.js("[...document.querySelectorAll('#ranges button[data-range]')].map(x => x.dataset.range)")
        picker = b.js("[!!document.getElementById('custom-from'), !!document.getElementById('custom-to')]")
        say("quick ranges and a calendar picker", "present" if len(quick) >= 5 and all(picker) else "partial", f"quick {quick}, datetime inputs {picker}")
        zoom = b.js("[!!document.getElementById('zoom-in'), !!document.getElementById('zoom-back'), !!document.getElementById('tz')]")
        say("zoom into a selection, back; UTC/local toggle in the URL", "present" if all(zoom) else "partial", f"zoom-in, back, tz buttons {zoom} (tests/serve_ui.py drags, zooms, goes back and toggles)")
        b.hash("range=all&view=overview", "whole store")
        ticks = b.js("[...document.querySelectorAll('#timeline-svg text')].map(t => t.textContent).slice(0, 8)")
        zone = b.js("document.getElementById('timeline-total').textContent")
        say("ticks with the date past midnight, time zone shown", "present" if any("-" in t or "/" in t or " " in t for t in ticks) and "UTC" in zone else "partial",
            f"whole-store ticks {ticks}; '{zone[:90]}'")
        b.hash("view=overview", "overview")
        fails = b.js("[...document.querySelectorAll('#failures tr[data-failure]')].map(tr => tr.dataset.failure)")
        links = b.js("document.querySelectorAll('#failures td.link, #failures .chip.link').length")
        prevcol = b.js("[...document.querySelectorAll('#failures th')].map(t => t.textContent)")
        say("failures first: classes per protocol, one click to the records, compare with the previous period",
            "present" if fails and links and "previous period" in prevcol else "partial", f"classes {fails}; {links} links; columns {prevcol}")
        b.hash("view=conns", "conns")
        grid = b.js("(() => ({count: document.getElementById('grid-count').textContent, pager: !!document.getElementById('page-next'), sort: document.querySelectorAll('button.sort').length, chooser: !!document.querySelector('details.columns'), cols: [...document.querySelectorAll('#grid th')].map(t => t.textContent.replace(/[▲▼ ]+$/, ''))}))()")
        say("tables: server-side paging and sorting, newest first, a count that says what is cut",
            "present" if grid["pager"] and grid["sort"] else "partial", f"'{grid['count'][:110]}'; {grid['sort']} sortable columns")
        unit = b.js("(() => { const td = [...document.querySelectorAll('#grid td[data-col=orig_bytes], #grid td[data-col=duration]')].find(t => t.textContent !== '-'); return td ? [td.dataset.col, td.textContent, td.title] : null; })()")
        say("formatted units, raw value on hover and in CSV/JSON", "present" if unit and unit[2] else "partial", f"cell {unit}; CSV and JSON buttons carry raw values")
        owners = [c for c in grid["cols"] if c.endswith(("_proc", "_user", "_container"))]
        say("column chooser; process/user/container columns when present", "present" if grid["chooser"] else "partial",
            f"chooser {grid['chooser']}; owner columns shown here: {owners or 'none (no owners in this store)'}")
        wide = {}
        for v in ("overview", "conns", "tx", "map", "health"):
            b.hash(f"view={v}", v)
            wide[v] = b.js("document.documentElement.scrollWidth")
        say("a 1280-px screen does not scroll sideways", "present" if max(wide.values()) <= 1280 else "partial", f"scrollWidth per view {wide}")
        b.hash("view=map", "map")
        m = b.js("(() => ({edges: document.querySelectorAll('#map-svg path.edge').length, nodes: document.querySelectorAll('#map-svg g.node').length, group: [...document.querySelectorAll('#map-group option')].map(o => o.value), rank: [...document.querySelectorAll('#map-rank option')].map(o => o.value), search: !!document.getElementById('map-search'), zoom: !!document.getElementById('map-zoom-in'), legend: document.querySelectorAll('#map-legend .key').length, named: [...document.querySelectorAll('#map-svg g.node')].filter(g => g.dataset.name).length, text: document.getElementById('map-count').textContent}))()")
        say("service map: groups, top-N with the rest summed, pan/zoom, search, legend, names by process",
            "present" if m["group"] and m["rank"] and m["search"] and m["zoom"] and m["legend"] else "partial",
            f"{m['nodes']} nodes, {m['edges']} edges; group {m['group']}; rank {m['rank']}; legend {m['legend']} keys; nodes named by a process: {m['named']}; '{m['text'][:120]}'")
        b.hash("view=tx", "tx")
        ch = b.js("(() => ({axes: document.querySelectorAll('#tx-rate svg text').length, legend: document.querySelectorAll('#tx-latency .legend, #tx-latency text.legend, #tx-latency [class*=legend]').length, lines: document.querySelectorAll('#tx-latency polyline').length, title: (document.querySelector('#tx-rate svg title, #tx-rate h3, #tx-rate .title') || {}).textContent}))()")
        say("charts: time axes with units, gaps as gaps, legends, latency percentiles over time",
            "present" if ch["axes"] and ch["lines"] >= 3 else "partial", f"{ch['axes']} axis texts on the rate chart, {ch['lines']} latency lines (p50/p95/p99), legend elements {ch['legend']}")
        b.hash("view=overview", "overview")
        lat = b.js("document.querySelectorAll('#latency-protocols polyline').length")
        say("latency percentiles per protocol over time (Overview)", "present" if lat else "partial", f"{lat} protocol lines (p95)")
        b.page("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        b.hash("view=conns", "dark")
        bg = b.js("getComputedStyle(document.body).backgroundColor")
        b.page("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
        say("dark theme following the browser, and a toggle", "present" if bg not in ("rgb(246, 247, 249)", "rgb(255, 255, 255)") and b.js("!!document.getElementById('theme')") else "partial", f"dark browser: body {bg}; #theme button")
        b.hash("view=overview", "overview")
        tabs = b.js("""(() => { const f = [...document.querySelectorAll('a[href], button, input, select, [tabindex]')].filter(e => e.tabIndex >= 0 && !e.disabled && e.offsetParent !== null);
            return [f.length, f.filter(e => e.closest('main')).length, f.filter(e => e.closest('#timeline')).length]; })()""")
        say("keyboard: every control reachable by Tab, visible focus", "present" if tabs[1] > 0 else "partial",
            f"{tabs[0]} focusable on the Overview ({tabs[1]} in the views, {tabs[2]} on the timeline); :focus-visible outline in style.css; the timeline selection is drawn with the mouse only" if not tabs[2] else f"{tabs}")
        b.hash("view=conns", "conns")
        ff = b.js("getComputedStyle(document.getElementById('filter')).fontFamily + ' / ' + getComputedStyle(document.getElementById('filter')).lineHeight")
        say("the filter box shows underscores", "present" if "mono" in ff.lower() else "partial", f"font {ff}")
        # Over the default window (a whole 10 M-row store unranged is past the time limit).
        rng = urllib.parse.urlencode({"from": d[0], "to": d[1]})
        st, h, body = get(base, f"/api/records?kind=conns&limit=1000&{rng}", {"Accept-Encoding": "gzip"})
        enc = h.get("Content-Encoding") or h.get("content-encoding")
        say("Accept-Encoding: gzip on the API", "present" if enc == "gzip" else "missing", f"/api/records limit 1000: HTTP {st}, Content-Encoding {enc}, {len(body)} bytes on the wire ({len(gzip.decompress(body)) if enc == 'gzip' else len(body)} decoded)")
        bad = {}
        for p in ("extent", "health", "schema", "query?kind=conns", "records?kind=conns", "map", "completeness", "loss", "sequence?uid=C0"):
            sep = "&" if "?" in p else "?"
            bad[p.split("?")[0]] = get(base, f"/api/{p}{sep}bogus=1")[0]
        say("unknown parameters give 400 on every endpoint", "present" if set(bad.values()) == {400} else "partial", f"{bad}")
        say("?token= moved to the cookie and out of the address bar", "present (checked by tests/serve_ui.rs's token run)", "app.js replaces the URL without the token")
    finally:
        b.close()


def serve_ui_ms(iso):
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1e3


def serve_ui_secs(step):
    import re
    m = re.match(r"^(\d+)(ms|s|m|h|d)$", step)
    return int(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


if __name__ == "__main__":
    main()
