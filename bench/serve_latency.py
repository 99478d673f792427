#!/usr/bin/env python3
"""API latency of the UI's main questions: starts `wirelog serve` on STORE
(port 0), asks each question REPS times in a row (one at a time, as one
open page does), and prints p50/p99 wall milliseconds per question; with
--duckdb, the same flows questions in DuckDB (one thread, a connection kept
open, as a server would) over the same Parquet files.

usage: bench/serve_latency.py WIRELOG_BIN STORE [--reps 20] [--duckdb]
"""
import json
import re
import subprocess
import sys
import time
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


def main():
    binary, store = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 20
    srv = subprocess.Popen([binary, "serve", "--store", store, "--listen", "127.0.0.1:0"],
                           stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stderr.readline()
        addr = re.search(r"http://([0-9.:]+)/", line).group(1)
        questions = [(n, "query?" + q) for n, q, _ in FLOWS] + OTHER
        print(f"store {store}, {reps} requests per question, one at a time")
        print("| question | p50 ms | p99 ms | rows scanned |")
        print("|---|---:|---:|---:|")
        for name, path in questions:
            times, scanned = [], ""
            for _ in range(reps):
                t = time.perf_counter()
                with urllib.request.urlopen(f"http://{addr}/api/{path}", timeout=120) as r:
                    body = r.read()
                times.append((time.perf_counter() - t) * 1e3)
            try:
                scanned = json.loads(body).get("rows_scanned", "")
            except (ValueError, AttributeError):
                pass
            print(f"| {name} (`/api/{path}`) | {pct(times, 50):.1f} | {pct(times, 99):.1f} | {scanned} |", flush=True)
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
