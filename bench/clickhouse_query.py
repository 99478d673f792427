#!/usr/bin/env python3
"""bench/clickhouse_query.py - what `wirelog query --clickhouse` moves and how long it takes, for two
binaries side by side (issue 15: grouping in ClickHouse instead of in wirelog).

A fleet is simulated: mixed.pcap is read PROBES times into one database of tests/clickhouse/endpoint.py
(chdb, the real ClickHouse engine, on loopback), each time under another --probe-name. Then every
question runs REPS times with each binary, alternating; reported per question and binary: the rows
and bytes of ClickHouse's answer (the endpoint's stats: the last SELECT's bytes, its rows counted by
running it again inside `SELECT count()`), and the median wall time of the whole `wirelog query`.
Both binaries' CSV answers are compared (they must be equal).

usage: bench/clickhouse_query.py OLD_WIRELOG NEW_WIRELOG [--probes 8] [--reps 5]
       (mixed.pcap from $WIRELOG_PEERS_DIR/pcaps, default target/wirelog-peers/pcaps)
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = [
    ["conns", "--by", "service"],
    ["conns"],
    ["conns", "--by", "proto", "--every", "1m", "--sort", "p95", "--top", "0"],
    ["dns", "--by", "qtype_name", "--sort", "p95"],
    ["http", "--by", "status_code", "--every", "1m"],
    ["flows", "--by", "proto"],
]


def http(port, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body.encode() if body else None)
    with urllib.request.urlopen(req, timeout=600) as r:
        return r.read().decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    pcaps = os.path.join(os.environ.get("WIRELOG_PEERS_DIR", os.path.join(REPO, "target/wirelog-peers")), "pcaps")
    mixed = os.path.join(pcaps, "mixed.pcap")
    tmp = tempfile.mkdtemp(prefix="wirelog-chq-")
    ep = subprocess.Popen([sys.executable, os.path.join(REPO, "tests/clickhouse/endpoint.py")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        control = int(ep.stdout.readline().split()[1])
        port = int(http(control, "/port/new").strip())
        url = ["--clickhouse", "http://127.0.0.1:%d" % port, "--clickhouse-database", "bench"]
        subprocess.run([a.new, "clickhouse", "init"] + url, check=True)
        for i in range(a.probes):
            subprocess.run([a.new, "read", "-q", "--store", os.path.join(tmp, "s%d" % i), "--probe-name",
                            "probe%d" % i, "--spool-dir", os.path.join(tmp, "spool%d" % i), mixed] + url,
                           check=True, stdout=subprocess.DEVNULL)
        counts = http(control, "/sql?database=bench",
                      "SELECT (SELECT count() FROM conns), (SELECT count() FROM dns), (SELECT count() FROM http), "
                      "(SELECT count() FROM flows)").split()
        print("rows in ClickHouse: conns %s, dns %s, http %s, flows %s (%d probes x mixed.pcap)"
              % (*counts, a.probes))
        print("| question | binary | rows answered | bytes answered | wall median (range), s |")
        print("|---|---|---:|---:|---|")
        for q in QUESTIONS:
            res = {}
            for b in (a.old, a.new):
                res[b] = {"walls": [], "out": None}
            for _ in range(a.reps):
                for b in (a.old, a.new):
                    before = json.loads(http(control, "/port/%d/stats" % port))
                    t = time.monotonic()
                    o = subprocess.run([b, "query"] + q + ["--format", "csv"] + url, capture_output=True, text=True)
                    res[b]["walls"].append(time.monotonic() - t)
                    if o.returncode != 0:
                        sys.exit("%s %s: %s" % (b, q, o.stderr))
                    after = json.loads(http(control, "/port/%d/stats" % port))
                    res[b]["bytes"] = after["select_bytes"] - before["select_bytes"]
                    res[b]["sql"] = after["last_select"]
                    res[b]["out"] = o.stdout
            if res[a.old]["out"] != res[a.new]["out"]:
                sys.exit("answers differ for %s" % q)
            for label, b in (("before", a.old), ("after", a.new)):
                rows = http(control, "/sql?database=bench", "SELECT count() FROM (%s)" % res[b]["sql"]).strip()
                w = res[b]["walls"]
                print("| `query %s` | %s | %s | %d | %.3f (%.3f-%.3f) |" % (
                    " ".join(q), label, rows, res[b]["bytes"], statistics.median(w), min(w), max(w)))
    finally:
        ep.stdin.close()
        ep.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
