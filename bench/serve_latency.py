#!/usr/bin/env python3
"""API latency of the UI's main questions: starts `wirelog serve` on STORE
(port 0), asks each question REPS times in a row (one at a time, as one
open page does), and prints p50/p99 wall milliseconds per question; with
--duckdb, the same flows questions in DuckDB (one thread, a connection kept
open, as a server would) over the same Parquet files.

With --ui: instead, what the UI's default page asks (the last 15 minutes of
data: timeline, failures panel, top-N panels, latency per protocol, a page of
records, the service map) and the same over the whole store, p50/p95 per
question, and the time until the page is drawn in headless Chromium
(tests/serve_ui.py's driver), per view; first, once, the Overview page before
any question (the server's column cache empty).

With --only TEXT (repeatable): only the questions whose name holds TEXT
(to time a few questions back to back); with --ui too, only the pages whose
name (Overview, Connections, Transactions, Service map, Health, Overview
over the whole store) is TEXT, else holds TEXT, and no cold first page.

With --waterfall (and --ui): after each timed page, the API requests it
made, in the order they started, with their start and end in ms from the
navigation (the browser's resource timing of the last load): what the page
waits on.

usage: bench/serve_latency.py WIRELOG_BIN STORE [--reps 20] [--duckdb] [--ui] [--only TEXT]... [--waterfall]
"""
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

FLOWS = [
    ("flows top talkers (default by, top 10)", "kind=flows", None),
    ("flows timeline (every 5m)", "kind=flows&every=5m",
     "SELECT time_bucket(INTERVAL 5 MINUTE, bucket) t, sum(bytes_out+bytes_in) FROM FLOWS GROUP BY 1 ORDER BY 1"),
    ("flows by sip,dip top 10", "kind=flows&by=sip,dip",
     "SELECT client, server, sum(bytes_out+bytes_in) b FROM FLOWS GROUP BY 1,2 ORDER BY b DESC LIMIT 10"),
    ("flows dport=53 by sip", "kind=flows&where=dport%20%3D%2053&by=sip",
     "SELECT client, sum(bytes_out+bytes_in) b FROM FLOWS WHERE server_port = 53 GROUP BY 1 ORDER BY b DESC LIMIT 10"),
]
OTHER = [
    ("conns timeline (every 1m)", "query?kind=conns&every=1m"),
    ("conns top talkers (by orig_h)", "query?kind=conns&by=orig_h"),
    ("mysql slowest (by fingerprint, sort p99)", "query?kind=mysql&by=fingerprint&sort=p99"),
    ("mysql series (every 1m)", "query?kind=mysql&every=1m"),
    ("conns records (limit 500)", "records?kind=conns&limit=500"),
    ("service map", "map"),
    ("extent", "extent"),
    ("health", "health"),
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


TX = ["http", "mysql", "pgsql", "redis", "dns", "tls"]
FAILS = [("conns", "conn_state in (REJ, RSTO, RSTR, RSTOS0, RSTRH, S0, SH, SHR)", "conn_state"),
         ("http", "status_code >= 500", "status_code"), ("mysql", "status = error", "error_code"),
         ("dns", 'rcode_name not in (NOERROR, "")', "rcode_name")]


def ui_questions(addr):
    """The API calls of the UI's pages, over its default window and over the whole store."""
    from urllib.parse import urlencode
    with urllib.request.urlopen(f"http://{addr}/api/extent", timeout=60) as r:
        ext = json.loads(r.read())
    timed = [k for k in ext if k["kind"] != "flows" and k["rows"] > 0]
    last = max(k["last_ns"] for k in timed) // 10**6 + 1
    first = min(k["first_ns"] for k in timed) // 10**6
    iso = lambda ms: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1e3)) + f".{int(ms % 1000):03d}Z"
    out = []
    for label, a, b, step, chart in (("15 min", last - 15 * 60_000, last, "5s", "10s"), ("whole store", first, last, "5m", "10m")):
        rng = {"from": iso(a), "to": iso(b)}
        q = lambda **p: urlencode({**p, **rng})
        out += [
            (f"{label}: timeline (conns every {step})", "query?" + q(kind="conns", every=step)),
            (f"{label}: top talkers", "query?" + q(kind="conns", by="orig_h", top=10)),
            (f"{label}: records page 1 (100, newest first)", "records?" + q(kind="conns", limit=100)),
            (f"{label}: records page 50 sorted by bytes", "records?" + q(kind="conns", limit=100, offset=4900, sort="bytes")),
            (f"{label}: http series (every {chart})", "query?" + q(kind="http", every=chart)),
            (f"{label}: mysql slowest by p99", "query?" + q(kind="mysql", by="fingerprint", sort="p99", top=10)),
            (f"{label}: service map", "map?" + q(top=200)),
        ]
        for kind, where, by in FAILS:
            out.append((f"{label}: failures {kind} by {by}", "query?" + q(kind=kind, where=where, by=by, top=5)))
    return out


PAGES = [("Overview", "view=overview"), ("Connections", "view=conns"), ("Transactions", "view=tx"),
         ("Service map", "view=map"), ("Health", "view=health"), ("Overview over the whole store", "range=all&view=overview")]

WATERFALL = """JSON.stringify(performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/'))
  .map((e) => [e.name.replace(/^.*\\/api\\//, ''), e.startTime, e.responseEnd]))"""


def page_ready(addr, views, loads=3, waterfall=False):
    """Seconds from navigation to a drawn page (body data-ready=1), per view, in Chromium
    (the median of `loads` loads)."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    import serve_ui
    b = serve_ui.Browser()
    out = []
    try:
        for v in views:
            times = []
            for _ in range(loads):
                b.page("Page.navigate", {"url": "about:blank"})
                t = time.perf_counter()
                b.page("Page.navigate", {"url": f"http://{addr}/#{v}"})
                while not b.js("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'"):
                    time.sleep(0.01)
                times.append(time.perf_counter() - t)
                if waterfall:
                    reqs = json.loads(b.js(WATERFALL))
                    print(f"`#{v}`, load {len(times)}: {time.perf_counter() - t:.3f} s, {len(reqs)} API requests")
                    for name, start, end in sorted(reqs, key=lambda r: r[1]):
                        print(f"    {start:7.1f} {end:7.1f} {end - start:6.1f} ms  {name[:110]}")
            err = b.js("document.getElementById('error').textContent")
            out.append((v, sorted(times)[len(times) // 2], err))
    finally:
        b.close()
    return out


def main():
    binary, store = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 20
    srv = subprocess.Popen([binary, "serve", "--store", store, "--listen", "127.0.0.1:0"],
                           stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stderr.readline()
        addr = re.search(r"http://([0-9.:]+)/", line).group(1)
        ui = "--ui" in sys.argv
        questions = ui_questions(addr) if ui else [(n, "query?" + q) for n, q, _ in FLOWS] + OTHER
        only = [sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--only"]
        pages = PAGES
        if only:
            questions = [(n, q) for n, q in questions if any(o in n for o in only)]
            # A name given whole is that page only ("Overview" is not the whole store's).
            pages = [p for p in PAGES if p[0] in only] or [p for p in PAGES if any(o in p[0] for o in only)]
        if ui and not only:
            # Before any question: the server's column cache is empty, as for
            # the first user after a start (the medians below are warm).
            (v, secs, err), = page_ready(addr, ["view=overview"], loads=1)
            print(f"first page after the server started (`#{v}`, cold): {secs:.2f} s {err or ''}", flush=True)
        print(f"store {store}, {reps} requests per question, one at a time")
        print(f"| question | p50 ms | {'p95' if ui or only else 'p99'} ms | rows scanned |")
        print("|---|---:|---:|---:|")
        for name, path in questions:
            times, scanned, failed = [], "", ""
            for _ in range(reps):
                t = time.perf_counter()
                try:
                    with urllib.request.urlopen(f"http://{addr}/api/{path}", timeout=120) as r:
                        body = r.read()
                except urllib.error.HTTPError as e:
                    # A refused question (503: past the time or memory limit) is a result too.
                    body, failed = b"{}", f"HTTP {e.code}: {json.loads(e.read()).get('error', '')[:60]}"
                times.append((time.perf_counter() - t) * 1e3)
                if failed:
                    break
            try:
                scanned = json.loads(body).get("rows_scanned", "")
            except (ValueError, AttributeError):
                pass
            print(f"| {name} (`/api/{path.split('?')[0]}`) | {pct(times, 50):.1f} | {pct(times, 95 if ui or only else 99):.1f} | {failed or scanned} |", flush=True)
        if ui and pages:
            print("| page (Chromium, median of 3) | seconds to drawn | error shown |")
            print("|---|---:|---|")
            for v, secs, err in page_ready(addr, [v for _, v in pages], waterfall="--waterfall" in sys.argv):
                print(f"| `#{v}` | {secs:.2f} | {err or ''} |", flush=True)
    finally:
        srv.kill()
        srv.wait()
    if "--duckdb" in sys.argv:
        import duckdb
        con = duckdb.connect()
        con.execute("SET threads=1")
        src = f"read_parquet('{store}/flows/*/*/*.parquet')"
        print("| DuckDB (1 thread) | p50 ms | p99 ms |")
        print("|---|---:|---:|")
        for name, _, sql in FLOWS:
            if not sql:
                continue
            times = []
            for _ in range(max(3, reps // 4)):
                t = time.perf_counter()
                con.execute(sql.replace("FLOWS", src)).fetchall()
                times.append((time.perf_counter() - t) * 1e3)
            print(f"| {name} | {pct(times, 50):.1f} | {pct(times, 99):.1f} |", flush=True)


if __name__ == "__main__":
    main()
