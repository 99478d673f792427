#!/usr/bin/env python3
"""bench/procs.py - what `capture --processes` costs per new connection in the resolver thread, and
the share of connection ends it names, under two connection-heavy loads on a namespace's loopback
(both ends local, so every connection is two ends to resolve):

  curl: N runs of `curl http://127.0.0.1:8080/` against nginx, one after the other (a new process and
        a sub-millisecond connection each);
  held: N connections to nginx from one Python process, 50 at a time, each open 200 ms (sockets alive
        when the resolver asks).

The resolver's CPU time and counters come from wirelog's own exit line (`wirelog: processes:`; the
thread's CLOCK_THREAD_CPUTIME_ID), the shares from conn.log. Needs root, ip, nginx, curl, python3.

usage: bench/procs.py [-n 2000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WIRELOG = REPO / "target" / "release" / "wirelog"
WORK = REPO / "bench" / "out" / "procs"

HELD = r"""
import socket, sys, time
n = int(sys.argv[1])
for i in range(0, n, 50):
    socks = [socket.create_connection(("127.0.0.1", 8080)) for _ in range(min(50, n - i))]
    time.sleep(0.2)
    for s in socks:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    for s in socks:
        while s.recv(4096):
            pass
        s.close()
"""


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def rows(conn_log: Path) -> list[dict[str, str]]:
    fields: list[str] = []
    out = []
    for line in conn_log.read_text().splitlines():
        if line.startswith("#fields\t"):
            fields = line.split("\t")[1:]
        elif not line.startswith("#"):
            out.append(dict(zip(fields, line.split("\t"))))
    return out


def one(ns: str, load: str, n: int) -> dict:
    work = WORK / load
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    err = open(work / "stderr", "w+")
    cap = subprocess.Popen(["ip", "netns", "exec", ns, str(WIRELOG), "capture", "-i", "lo", "--processes",
                            "--no-store", "--logs", str(work / "logs"), "--stats-interval", "0"],
                           stdout=subprocess.DEVNULL, stderr=err)
    while "capturing on" not in (work / "stderr").read_text():
        time.sleep(0.05)
    t0 = time.time()
    if load == "curl":
        subprocess.run(["ip", "netns", "exec", ns, "sh", "-c",
                        f"i=0; while [ $i -lt {n} ]; do curl -s -o /dev/null http://127.0.0.1:8080/; i=$((i+1)); done"],
                       check=True)
    else:
        (work / "held.py").write_text(HELD)
        subprocess.run(["ip", "netns", "exec", ns, "python3", str(work / "held.py"), str(n)], check=True)
    wall = time.time() - t0
    time.sleep(0.5)
    cap.send_signal(signal.SIGINT)
    cap.wait(timeout=60)
    text = (work / "stderr").read_text()
    line = next(x for x in text.splitlines() if x.startswith("wirelog: processes:"))
    cpu = float(re.search(r"resolver CPU ([0-9.]+) s", line)[1])
    conns = [r for r in rows(work / "logs" / "conn.log") if r["id.resp_p"] == "8080"]
    resp = sum(r["resp_proc"] == "nginx" for r in conns)
    orig = sum(r["orig_proc"] in ("curl", "python3") for r in conns)
    return {"load": load, "conns": len(conns), "wall_s": wall, "resolver_cpu_s": cpu,
            "us_per_conn": cpu / max(len(conns), 1) * 1e6, "resp_pct": 100 * resp / max(len(conns), 1),
            "orig_pct": 100 * orig / max(len(conns), 1), "line": line}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000, help="connections per load (default 2000)")
    a = ap.parse_args()
    ns = f"wlprocs{os.getpid()}"
    sh("ip", "netns", "add", ns)
    nginx = None
    try:
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        WORK.mkdir(parents=True, exist_ok=True)
        conf = WORK / "nginx.conf"
        d = WORK
        conf.write_text(f"worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx.err;\n"
                        f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; client_body_temp_path {d}/b;\n"
                        f" server {{ listen 127.0.0.1:8080; location / {{ return 200 \"ok\\n\"; }} }} }}\n")
        nginx = subprocess.Popen(["ip", "netns", "exec", ns, "nginx", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        time.sleep(1)
        print("| load | connections | wall s | resolver CPU s | µs per connection (2 ends) | server end named | client end named |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for load in ("curl", "held"):
            r = one(ns, load, a.n)
            print(f"| {load} | {r['conns']} | {r['wall_s']:.1f} | {r['resolver_cpu_s']:.3f} | {r['us_per_conn']:.1f} | "
                  f"{r['resp_pct']:.1f}% | {r['orig_pct']:.1f}% |")
            print(f"<!-- {r['line']} -->", file=sys.stderr)
    finally:
        if nginx:
            # SIGTERM: the master stops its workers (SIGKILL would orphan them).
            nginx.terminate()
            nginx.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns])
    return 0


if __name__ == "__main__":
    sys.exit(main())
