#!/usr/bin/env python3
"""bench/procs.py - what `capture --processes` costs per new connection in the resolver thread, and
the share of connection ends it names, under two connection-heavy loads on a namespace's loopback
(both ends local, so every connection is two ends to resolve):

  curl: N runs of `curl http://127.0.0.1:8080/` against nginx, one after the other (a new process and
        a sub-millisecond connection each);
  held: N connections to nginx from one Python process, 50 at a time, each open 200 ms (sockets alive
        when the resolver asks).

Each load runs twice: with the eBPF connect hook (the default) and with `--no-ebpf` (sock_diag and
/proc only). The resolver's CPU time and counters come from wirelog's own exit line (`wirelog:
processes:`; the thread's CLOCK_THREAD_CPUTIME_ID), the shares from conn.log. The hook's own kernel
time (it runs in the connecting task and in softirq, on every TCP state change of the host) comes
from the kernel's BPF statistics (`kernel.bpf_stats_enabled`, turned on for the run and restored):
`run_time_ns`/`run_cnt` in /proc/PID/fdinfo of wirelog's program fd, read before it stops. Needs
root, ip, nginx, curl, python3.

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


def bpf_prog_stats(pid: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) summed over the tracepoint programs wirelog holds."""
    ns = cnt = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            info = dict(l.split(":", 1) for l in fd.read_text().splitlines() if ":" in l)
        except OSError:
            continue
        if info.get("prog_type", "").strip() == "5":
            ns += int(info.get("run_time_ns", "0"))
            cnt += int(info.get("run_cnt", "0"))
    return ns, cnt


def one(ns: str, load: str, n: int, ebpf: bool) -> dict:
    work = WORK / f"{load}-{'ebpf' if ebpf else 'no-ebpf'}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    err = open(work / "stderr", "w+")
    cap = subprocess.Popen(["ip", "netns", "exec", ns, str(WIRELOG), "capture", "-i", "lo", "--processes",
                            *([] if ebpf else ["--no-ebpf"]),
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
    # `ip netns exec` execs wirelog: the child's pid is wirelog's.
    bpf_ns, bpf_runs = bpf_prog_stats(cap.pid)
    cap.send_signal(signal.SIGINT)
    cap.wait(timeout=60)
    text = (work / "stderr").read_text()
    line = [x for x in text.splitlines() if x.startswith("wirelog: processes:")][-1]
    cpu = float(re.search(r"resolver CPU ([0-9.]+) s", line)[1])
    conns = [r for r in rows(work / "logs" / "conn.log") if r["id.resp_p"] == "8080"]
    resp = sum(r["resp_proc"] == "nginx" for r in conns)
    orig = sum(r["orig_proc"] in ("curl", "python3") for r in conns)
    return {"load": load, "ebpf": ebpf, "bpf_runs": bpf_runs, "bpf_ns": bpf_ns, "conns": len(conns), "wall_s": wall, "resolver_cpu_s": cpu,
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
        stats_was = Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip()
        Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1")
        print("| load | eBPF hook | connections | wall s | resolver CPU s | µs per connection (2 ends) | "
              "hook runs | hook ns per run | hook µs per connection | server end named | client end named |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        try:
            for load in ("curl", "held"):
                for ebpf in (True, False):
                    r = one(ns, load, a.n, ebpf)
                    per_run = r["bpf_ns"] / r["bpf_runs"] if r["bpf_runs"] else 0
                    per_conn = r["bpf_ns"] / max(r["conns"], 1) / 1e3
                    print(f"| {load} | {'on' if ebpf else 'off'} | {r['conns']} | {r['wall_s']:.1f} | "
                          f"{r['resolver_cpu_s']:.3f} | {r['us_per_conn']:.1f} | {r['bpf_runs']} | {per_run:.0f} | "
                          f"{per_conn:.2f} | {r['resp_pct']:.1f}% | {r['orig_pct']:.1f}% |")
                    print(f"<!-- {r['line']} -->", file=sys.stderr)
        finally:
            Path("/proc/sys/kernel/bpf_stats_enabled").write_text(stats_was)
    finally:
        if nginx:
            # SIGTERM: the master stops its workers (SIGKILL would orphan them).
            nginx.terminate()
            nginx.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns])
    return 0


if __name__ == "__main__":
    sys.exit(main())
